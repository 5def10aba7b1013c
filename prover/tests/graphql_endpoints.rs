//! GraphQL endpoints: the prover models the operation a request carries
//! (type, name, one root field, or a registered persisted query), so a new
//! mutation or root field is a widening with a witness that replays
//! through the evaluator, and an unchanged or narrowed set of operations
//! is certified.

mod support;

use policy_bundle::Bundle;
use prover::{Finding, Report, Verdict};
use support::*;

const CREDENTIAL: &str = r#"
  credential gh_token {
    secret env GH_TOKEN
    placeholder env GH_TOKEN
    inject header Authorization "Bearer {secret}"
    hosts api.github.com
  }
"#;

/// A policy with one endpoint on `api.github.com` of this kind and these
/// rule lines.
fn endpoint(kind: &str, rules: &str) -> Bundle {
    compile(&policy(&format!(
        "{CREDENTIAL}\n  allow /usr/bin/gh -> api.github.com:443 {kind} {{\n{rules}\n  }}"
    )))
}

fn gql(rules: &str) -> Bundle {
    endpoint("graphql", &format!("    path /graphql\n{rules}"))
}

/// The findings whose witness sends this document.
fn with_document<'a>(r: &'a Report, doc: &str) -> Vec<&'a Finding> {
    r.findings
        .iter()
        .filter(|f| f.witness.graphql.as_deref() == Some(doc))
        .collect()
}

#[test]
fn a_new_mutation_is_a_widening_with_a_witness_that_replays() {
    let old = gql("    allow graphql query");
    let new = gql("    allow graphql query\n    allow graphql mutation field createIssue");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    assert!(!r.findings.is_empty());
    for f in &r.findings {
        assert_replays(f, &old, &new);
        let doc = f.witness.graphql.as_deref().unwrap_or_default();
        assert!(doc.starts_with("mutation"), "{f:#?}");
        assert!(doc.contains("createIssue"), "{f:#?}");
        assert_eq!(f.witness.method.as_deref(), Some("POST"), "{f:#?}");
    }
    let f = with_document(&r, "mutation { createIssue }");
    let f = f.first().unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(
        f.witness.request_text(),
        "POST https://api.github.com/graphql --graphql 'mutation { createIssue }'"
    );
}

#[test]
fn a_new_root_field_is_a_widening() {
    let old = gql("    allow graphql query field viewer");
    let new = gql("    allow graphql query field viewer repository");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
        let doc = f.witness.graphql.as_deref().unwrap_or_default();
        assert!(doc.contains("repository"), "{f:#?}");
        assert!(!doc.contains("viewer"), "{f:#?}");
    }
}

#[test]
fn a_wider_name_glob_is_a_widening_on_the_new_names_only() {
    let old = gql("    allow graphql query name GetViewer");
    let new = gql("    allow graphql query name Get*");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
        let doc = f.witness.graphql.as_deref().unwrap_or_default();
        assert!(doc.starts_with("query Get"), "{f:#?}");
        assert!(!doc.starts_with("query GetViewer "), "{f:#?}");
    }
}

#[test]
fn a_field_moved_to_deny_is_no_new_access() {
    let old = gql("    allow graphql query mutation");
    let new =
        gql("    allow graphql query mutation\n    deny graphql mutation field deleteRepository");
    assert_eq!(diff_bundles(&old, &new).verdict, Verdict::NoNewAccess);
    // The other way round it is a widening: the field is let through again.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &new, &old);
        assert_eq!(
            f.witness.graphql.as_deref(),
            Some("mutation { deleteRepository }"),
            "{f:#?}"
        );
    }
}

#[test]
fn identical_and_narrowed_policies_are_no_new_access() {
    let rules = "    allow graphql query\n    allow graphql mutation name Issue* field createIssue addComment\n    deny graphql mutation field deleteRepository";
    let old = gql(rules);
    assert_eq!(
        diff_bundles(&old, &gql(rules)).verdict,
        Verdict::NoNewAccess
    );
    let narrower =
        gql("    allow graphql query\n    allow graphql mutation name Issue* field createIssue");
    assert_eq!(diff_bundles(&old, &narrower).verdict, Verdict::NoNewAccess);
    let audit = endpoint(
        "graphql audit",
        "    path /graphql\n    allow graphql query",
    );
    let r = diff_bundles(&gql("    allow graphql query"), &audit);
    assert_ne!(
        r.verdict,
        Verdict::NoNewAccess,
        "audit forwards mutations: {r:#?}"
    );
}

#[test]
fn a_registered_persisted_query_is_judged_as_its_operation() {
    let base = "    allow graphql query\n    allow graphql mutation field createIssue";
    let old = gql(base);
    // A hash-only request OLD refused is now judged as a registered,
    // allowed mutation.
    let new = gql(&format!(
        "{base}\n    persisted abc123 mutation name M field createIssue"
    ));
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = r
        .findings
        .iter()
        .find(|f| f.witness.body.as_deref() == Some(r#"{"id":"abc123"}"#))
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_replays(f, &old, &new);
    // Registered as a denied operation: nothing new.
    let denied = gql(&format!(
        "{base}\n    persisted abc123 mutation field deleteRepository"
    ));
    assert_eq!(diff_bundles(&old, &denied).verdict, Verdict::NoNewAccess);
}

#[test]
fn rest_to_graphql_on_one_host_replays() {
    let old = endpoint("http", "    path /graphql\n    allow GET /graphql");
    let new = gql("    allow graphql query mutation");
    let r = diff_bundles(&old, &new);
    // POST /graphql was denied by the REST endpoint; a GraphQL POST is now
    // let through, so whatever the verdict says, its witnesses replay.
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
    }
    // GraphQL to REST: a GET /graphql without a GraphQL request, refused
    // before, passes.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &new, &old);
    }
}

#[test]
fn an_empty_root_selection_does_not_parse() {
    // Why one root field per operation suffices: no operation has none.
    for doc in [
        "{ }",
        "query { ... on Query { } }",
        "{ ...F } fragment F on Query { }",
    ] {
        assert!(
            policy_bundle::l7body::graphql::op_from_document(doc, None).is_err(),
            "{doc}"
        );
    }
}

#[test]
fn a_widening_only_a_get_shows_has_a_get_witness_that_replays() {
    // OLD refuses every GET on the path (deny wins across endpoints), so
    // a query could only be POSTed; NEW drops that rule, and a query sent
    // as a GET with the document in its query string passes.
    let graphql = "  allow /usr/bin/gh -> api.github.com:443 graphql {\n    path /graphql\n    allow graphql query field viewer\n  }";
    let get_deny = "  allow /usr/bin/gh -> api.github.com:443 http {\n    path /graphql\n    deny GET /graphql\n  }";
    let old = compile(&policy(&format!("{CREDENTIAL}\n{graphql}\n{get_deny}")));
    let new = compile(&policy(&format!("{CREDENTIAL}\n{graphql}")));
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    assert!(!r.findings.is_empty());
    for f in &r.findings {
        assert_replays(f, &old, &new);
        assert_eq!(f.witness.method.as_deref(), Some("GET"), "{f:#?}");
    }
    // The document travels in the query string, as a GET sends it.
    assert!(
        r.findings.iter().any(|f| f.witness.graphql.is_none()
            && f.witness.query.as_deref() == Some("query=query%20%7B%20viewer%20%7D")),
        "{:#?}",
        r.findings
    );
}
