//! GraphQL endpoints in the language: the formatter's canonical form,
//! that formatting never changes the bundle, and what reaches the bundle.

mod support;

use policy_bundle::matcher::OperationType;
use policy_bundle::{L7Endpoint, L7Protocol, WireEndpoint};
use support::{assert_formats_to, compile};

const MESSY: &str = "policy \"gql\" {
  allow   /usr/bin/agent ->  api.github.com:443   graphql {
     path   /graphql
        body_limit   131072
    allow   graphql Query
    allow graphql  mutation   name Issue*   field createIssue   addComment # issues
    deny graphql mutation field deleteRepository
    persisted   \"abc 123\"   Query   name GetViewer field viewer name
  }
  allow /usr/bin/agent -> open.example.com:443 read-write   graphql
}
";

const CANONICAL: &str = "policy \"gql\" {
  allow /usr/bin/agent -> api.github.com:443 graphql {
    path /graphql
    body_limit 131072
    allow graphql query
    allow graphql mutation name Issue* field createIssue addComment  # issues
    deny graphql mutation field deleteRepository
    persisted \"abc 123\" query name GetViewer field viewer name
  }
  allow /usr/bin/agent -> open.example.com:443 graphql read-write
}
";

#[test]
fn formatting_is_canonical_and_keeps_the_digest() {
    assert_formats_to(MESSY, CANONICAL, "gql");
}

#[test]
fn rules_presets_and_registry_reach_the_bundle() {
    let b = compile("bundle", CANONICAL);
    // The flat view: each protocol's settings as the bundle writes them.
    let l7: Vec<WireEndpoint> = b.enforcement.l7.iter().map(WireEndpoint::from).collect();
    assert!(l7.iter().all(|e| e.protocol == L7Protocol::Graphql));
    let gh = l7.iter().find(|e| e.path.is_some()).unwrap();
    assert_eq!(gh.body_limit, Some(131_072));
    let allow: Vec<String> = gh
        .graphql_allow
        .iter()
        .map(|r| {
            format!(
                "{} {:?} {:?}",
                r.types,
                r.name.as_ref().map(ToString::to_string),
                r.fields
                    .as_ref()
                    .map(|fs| fs.iter().map(ToString::to_string).collect::<Vec<_>>())
            )
        })
        .collect();
    assert_eq!(
        allow,
        [
            "query None None",
            "mutation Some(\"Issue*\") Some([\"createIssue\", \"addComment\"])"
        ]
    );
    assert_eq!(gh.graphql_deny.len(), 1);
    let registered = gh
        .persisted_queries
        .iter()
        .find(|q| q.id == "abc 123")
        .unwrap();
    assert_eq!(registered.kind, OperationType::Query);
    assert_eq!(registered.name.as_deref(), Some("GetViewer"));
    assert_eq!(
        registered.fields.as_deref(),
        Some(&["name".to_string(), "viewer".to_string()][..])
    );
    // Blame: each GraphQL rule keeps the line it was written on.
    let prov = b
        .enforcement
        .l7
        .iter()
        .map(L7Endpoint::provenance)
        .find(|p| p.graphql_deny.len() == 1)
        .unwrap();
    assert_eq!(prov.graphql_deny[0][0].line, 7);
    assert_eq!(prov.graphql_allow.len(), 2);
    // The preset is the GraphQL expansion: queries and mutations.
    let open = l7.iter().find(|e| e.path.is_none()).unwrap();
    assert_eq!(open.graphql_allow.len(), 1);
    assert_eq!(open.graphql_allow[0].types.to_string(), "query mutation");
    assert!(open.allow.is_empty());
}
