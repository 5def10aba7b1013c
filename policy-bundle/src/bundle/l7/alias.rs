//! Other spellings of a body-judging endpoint's path.
//!
//! A GraphQL, JSON-RPC or MCP endpoint is authoritative for its path: its
//! rules read the body, where the operation is. The canonical path already
//! has one spelling for `//`, dot segments and percent-escapes, but many
//! servers also route `/GraphQL` (Express and ASP.NET match routes
//! ignoring case) and `/graphql/` (a router that strips or appends the
//! slash) to the handler of `/graphql`. Such a request falls outside the
//! endpoint's path, so the rules that judge it are some other endpoint's,
//! which never read the body. Rather than guess which spellings a server
//! routes where, the proxy refuses a request whose path is another
//! spelling of such an endpoint's path without being under it.

use super::L7Endpoint;

impl L7Endpoint {
    /// Whether the canonical `path` is not under this endpoint's path but
    /// differs from a path under it only by ASCII case or a trailing
    /// slash. Always false for an endpoint that does not read bodies, for
    /// one without a path (it judges every path), and for one that folds
    /// paths (those spellings are under it).
    pub fn is_aliased_by(&self, path: &str) -> bool {
        if self.fold_paths || !self.reads_body() {
            return false;
        }
        // The spellings a server that folds paths routes here are exactly
        // those `fold_paths` would cover: one definition, which the prover
        // models with the same folded automaton.
        self.path
            .as_ref()
            .is_some_and(|glob| glob.matches_folded(path) && !glob.matches(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{GraphqlRules, L7Rules, RestRules};
    use crate::matcher::HttpPathGlob;
    use crate::vocab::{Enforcement, TlsMode};

    fn endpoint(path: &str, rules: L7Rules) -> L7Endpoint {
        L7Endpoint {
            enforcement: Enforcement::Enforce,
            tls: TlsMode::Auto,
            path: Some(HttpPathGlob::parse(path).unwrap()),
            encoded_slash: false,
            fold_paths: false,
            rules,
            origins: Vec::new(),
        }
    }

    #[test]
    fn case_and_trailing_slash_spellings_of_a_graphql_path_are_aliases() {
        let ep = endpoint("/api/graphql", L7Rules::Graphql(GraphqlRules::default()));
        for path in ["/api/graphql", "/api/graphqlx", "/api", "/", "/api/graph"] {
            assert!(!ep.is_aliased_by(path), "{path}");
        }
        for path in [
            "/api/graphql/",
            "/API/GraphQL",
            "/Api/graphql/",
            "/api/GRAPHQL",
        ] {
            assert!(ep.is_aliased_by(path), "{path}");
        }
        let slash = endpoint("/graphql/", L7Rules::Graphql(GraphqlRules::default()));
        assert!(slash.is_aliased_by("/graphql"));
        assert!(slash.is_aliased_by("/GraphQL/"));
        let tree = endpoint("/v[0-9]/**", L7Rules::Graphql(GraphqlRules::default()));
        assert!(!tree.is_aliased_by("/v1/x"));
        assert!(tree.is_aliased_by("/V1/x"));
        let escaped = endpoint("/a%2Fb", L7Rules::Graphql(GraphqlRules::default()));
        assert!(escaped.is_aliased_by("/A%2Fb"));
        // A canonical path has one trailing slash at most.
        let canon = crate::matcher::canonicalize_path("/api/graphql//", false).unwrap();
        assert!(ep.is_aliased_by(&canon.path), "{canon:?}");
    }

    #[test]
    fn an_endpoint_that_folds_paths_covers_the_other_spellings_instead() {
        let mut ep = endpoint("/api/GraphQL", L7Rules::Graphql(GraphqlRules::default()));
        ep.fold_paths = true;
        for path in ["/api/graphql", "/API/GraphQL/", "/Api/GRAPHQL"] {
            assert!(!ep.is_aliased_by(path), "{path}");
            assert!(ep.covers(path), "{path}");
        }
        assert!(!ep.covers("/api/graphql/x"));
        ep.fold_paths = false;
        assert!(ep.is_aliased_by("/api/graphql"));
        assert!(!ep.covers("/api/graphql"));
    }

    #[test]
    fn rest_endpoints_and_endpoints_without_a_path_have_no_aliases() {
        let rest = endpoint("/graphql", L7Rules::Rest(RestRules::default()));
        assert!(!rest.is_aliased_by("/GraphQL"));
        let mut anywhere = endpoint("/graphql", L7Rules::Graphql(GraphqlRules::default()));
        anywhere.path = None;
        assert!(!anywhere.is_aliased_by("/GraphQL"));
    }
}
