//! The evaluator's GraphQL API on hand-built `graphql` endpoints: the
//! bundle shape the proxy enforces, independent of the policy language.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly on bad fixtures"
)]

use policy_bundle::eval::{Decision, Evaluator, Verdict};
use policy_bundle::matcher::{GraphqlNameGlob, OperationType, OperationTypeSet};
use policy_bundle::{Bundle, GraphqlRule, L7Endpoint, L7Protocol, PersistedQuery, WireEndpoint};
use policy_lang::load;

const HOST: &str = "api.example.com";

fn bundle() -> Bundle {
    let tmp = std::env::temp_dir().join(format!("osp-graphql-api-{}.policy", std::process::id()));
    std::fs::write(
        &tmp,
        "policy \"gql\" {\n  allow /usr/bin/agent -> api.example.com:443 http {\n    path /graphql\n    allow POST /graphql\n  }\n  allow /usr/bin/agent -> api.example.com:443 http {\n    allow GET /**\n  }\n}\n",
    )
    .unwrap();
    let (checked, bundle) = load::compile_file(&tmp, None).unwrap();
    assert!(bundle.is_some(), "{:?}", checked.diagnostics);
    bundle.unwrap()
}

fn rule(types: &str, name: Option<&str>, fields: Option<&[&str]>) -> GraphqlRule {
    GraphqlRule {
        types: OperationTypeSet::parse(types).unwrap(),
        name: name.map(|n| GraphqlNameGlob::parse(n).unwrap()),
        fields: fields.map(|fs| {
            fs.iter()
                .map(|f| GraphqlNameGlob::parse(f).unwrap())
                .collect()
        }),
    }
}

/// The `/graphql` endpoint turned into a GraphQL endpoint by `edit`; the
/// second endpoint (REST, `GET /**`) stays beside it.
fn evaluator(edit: impl FnOnce(&mut WireEndpoint)) -> Evaluator {
    evaluator_in(bundle(), edit)
}

fn evaluator_in(mut b: Bundle, edit: impl FnOnce(&mut WireEndpoint)) -> Evaluator {
    let at = b
        .enforcement
        .l7
        .iter()
        .position(|ep| ep.path.is_some())
        .unwrap();
    let ep = b.enforcement.l7.get_mut(at).unwrap();
    // Edited in the flat form a bundle is written in, and read back as a
    // loaded bundle is; the endpoint keeps its origins, the new rules have
    // none.
    let mut wire = WireEndpoint::from(&*ep);
    wire.allow.clear();
    wire.protocol = L7Protocol::Graphql;
    edit(&mut wire);
    let origins = std::mem::take(&mut ep.origins);
    *ep = L7Endpoint::try_from(wire).unwrap();
    ep.origins = origins;
    let b = Bundle::new(b.enforcement, b.provenance);
    Evaluator::new(Bundle::from_slice(&b.to_bytes()).unwrap())
}

fn standard() -> Evaluator {
    evaluator(|ep| {
        ep.graphql_allow = vec![
            rule("query", None, None),
            rule(
                "mutation",
                Some("Issue*"),
                Some(&["createIssue", "addComment"]),
            ),
        ];
        ep.graphql_deny = vec![rule("mutation", None, Some(&["deleteRepository"]))];
    })
}

fn decide(ev: &Evaluator, method: &str, target: &str, body: &str) -> Decision {
    let conn = ev.decide_connection("/usr/bin/agent", None, Some(HOST), None, 443);
    assert!(conn.allowed(), "{}", conn.reason);
    ev.decide_body(&conn, Some(HOST), method, target, body.as_bytes())
}

fn post(ev: &Evaluator, body: &str) -> Decision {
    decide(ev, "POST", "/graphql", body)
}

fn doc(query: &str) -> String {
    serde_json::json!({ "query": query }).to_string()
}

#[test]
fn body_limit_covers_the_graphql_path_only() {
    let ev = evaluator(|ep| ep.body_limit = Some(1000));
    let conn = ev.decide_connection("/usr/bin/agent", None, Some(HOST), None, 443);
    assert_eq!(ev.body_limit(&conn, "/graphql"), Some(1000));
    assert_eq!(
        ev.body_limit(&conn, "/graphql?query=%7Bviewer%7D"),
        Some(1000)
    );
    assert_eq!(ev.body_limit(&conn, "/repos/x"), None);
    let ev = standard();
    assert_eq!(ev.body_limit(&conn, "/graphql"), Some(65536));
}

#[test]
fn queries_mutations_and_deny_rules() {
    let ev = standard();
    let d = post(&ev, &doc("query GetViewer { viewer { login } }"));
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert!(
        d.reason.contains("query `GetViewer` is allowed"),
        "{}",
        d.reason
    );
    let note = d.graphql.unwrap();
    assert_eq!(note.operation, Some(0));
    assert!(!note.batch);

    let d = post(
        &ev,
        &doc("mutation IssueNew { createIssue(title: \"x\") { id } }"),
    );
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);

    // The name glob does not cover it.
    let d = post(&ev, &doc("mutation Other { createIssue { id } }"));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("mutation `Other`"), "{}", d.reason);

    // A field outside the rule's list: every root field must match.
    let d = post(
        &ev,
        &doc("mutation IssueX { createIssue { id } closeIssue { id } }"),
    );
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("root field `closeIssue`"), "{}", d.reason);

    // Deny wins over the allow rule's name, and names the field.
    let d = post(
        &ev,
        &doc("mutation IssueDrop { createIssue { id } deleteRepository(id: 1) { id } }"),
    );
    assert_eq!(d.decision, Verdict::Deny);
    assert!(
        d.reason
            .contains("root field `deleteRepository` matches a deny rule"),
        "{}",
        d.reason
    );

    // Aliases do not hide the field's name.
    let d = post(
        &ev,
        &doc("mutation IssueA { safe: deleteRepository(id: 1) { id } }"),
    );
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("deleteRepository"), "{}", d.reason);

    // Nor do fragments.
    let d = post(
        &ev,
        &doc("mutation IssueF { ...F } fragment F on Mutation { deleteRepository(id: 1) { id } }"),
    );
    assert_eq!(d.decision, Verdict::Deny);

    // Subscriptions are not allowed at all.
    let d = post(&ev, &doc("subscription { issueAdded { id } }"));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(
        d.reason
            .contains("anonymous subscription matches no allow rule"),
        "{}",
        d.reason
    );
}

#[test]
fn operation_selection_and_names() {
    let ev = standard();
    // The operation the server runs is the one operationName picks.
    let body = serde_json::json!({
        "query": "query Safe { viewer { login } } mutation Bad { deleteRepository(id: 1) { id } }",
        "operationName": "Bad",
    })
    .to_string();
    assert_eq!(post(&ev, &body).decision, Verdict::Deny);
    // Two operations and no operationName: refused, not guessed.
    let body = doc("query A { viewer { login } } mutation B { createIssue { id } }");
    let d = post(&ev, &body);
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("operationName"), "{}", d.reason);
    // An operationName that names no operation is refused.
    let body = serde_json::json!({
        "query": "mutation Bad { deleteRepository(id: 1) { id } }",
        "operationName": "IssueGood",
    })
    .to_string();
    assert_eq!(post(&ev, &body).decision, Verdict::Deny);
}

#[test]
fn batches_are_judged_whole() {
    let ev = standard();
    let ok = format!(
        "[{},{}]",
        doc("{ viewer { login } }"),
        doc("query { rateLimit { cost } }")
    );
    let d = post(&ev, &ok);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert!(d.graphql.as_ref().unwrap().batch);
    let mixed = format!(
        "[{},{}]",
        doc("{ viewer { login } }"),
        doc("mutation M { deleteRepository(id: 1) { id } }")
    );
    let d = post(&ev, &mixed);
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("batch operation 2 of 2"), "{}", d.reason);
    assert_eq!(d.graphql.unwrap().operation, Some(1));
}

#[test]
fn get_requests_carry_the_operation_in_the_query_string() {
    let ev = standard();
    let d = decide(&ev, "GET", "/graphql?query=%7Bviewer%7Blogin%7D%7D", "");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    // decide_request reads the same GET the same way.
    let conn = ev.decide_connection("/usr/bin/agent", None, Some(HOST), None, 443);
    let d = ev.decide_request(
        &conn,
        Some(HOST),
        "GET",
        "/graphql?query=%7Bviewer%7Blogin%7D%7D",
    );
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    let d = decide(
        &ev,
        "GET",
        "/graphql?query=mutation%20M%7BdeleteRepository%7Bid%7D%7D",
        "",
    );
    assert_eq!(d.decision, Verdict::Deny);
    // No query: the REST endpoint's `GET /**` must not let it through.
    let d = decide(&ev, "GET", "/graphql", "");
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("neither a document"), "{}", d.reason);
    // A GET with a body, and methods GraphQL does not use.
    let d = decide(
        &ev,
        "GET",
        "/graphql?query=%7Bviewer%7D",
        &doc("{ viewer }"),
    );
    assert_eq!(d.decision, Verdict::Deny);
    let d = decide(&ev, "PUT", "/graphql", &doc("{ viewer }"));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("GET or POST"), "{}", d.reason);
    // Other paths are the REST endpoint's.
    assert_eq!(decide(&ev, "GET", "/repos/x", "").decision, Verdict::Allow);
}

#[test]
fn persisted_queries_go_through_the_registry() {
    let hash = "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38";
    let hash_only = |name: Option<&str>| {
        let mut v = serde_json::json!({
            "extensions": { "persistedQuery": { "version": 1, "sha256Hash": hash } }
        });
        if let Some(n) = name {
            v["operationName"] = n.into();
        }
        v.to_string()
    };
    // No registry: hash-only requests are denied.
    let ev = standard();
    let d = post(&ev, &hash_only(None));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("is not registered"), "{}", d.reason);

    let registered = |kind, name: Option<&str>, fields: Option<&[&str]>| PersistedQuery {
        id: hash.to_string(),
        kind,
        name: name.map(str::to_string),
        fields: fields.map(|fs| fs.iter().map(|f| (*f).to_string()).collect()),
    };
    let ev = evaluator(|ep| {
        ep.graphql_allow = vec![rule("query", None, Some(&["viewer"]))];
        ep.persisted_queries = vec![
            registered(OperationType::Query, Some("GetViewer"), Some(&["viewer"])),
            PersistedQuery {
                id: "saved-7".into(),
                ..registered(OperationType::Mutation, None, Some(&["createIssue"]))
            },
        ];
    });
    let d = post(&ev, &hash_only(None));
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(
        post(&ev, &hash_only(Some("GetViewer"))).decision,
        Verdict::Allow
    );
    let d = post(&ev, &hash_only(Some("Other")));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("not the name registered"), "{}", d.reason);
    // A registered mutation still needs an allow rule.
    let d = post(&ev, r#"{"id":"saved-7"}"#);
    assert_eq!(d.decision, Verdict::Deny);
    assert!(
        d.reason.contains("persisted query `saved-7`"),
        "{}",
        d.reason
    );

    // A registered query without fields: field deny rules match it.
    let ev = evaluator(|ep| {
        ep.graphql_allow = vec![rule("*", None, None)];
        ep.graphql_deny = vec![rule("query", None, Some(&["secrets"]))];
        ep.persisted_queries = vec![registered(OperationType::Query, None, None)];
    });
    assert_eq!(post(&ev, &hash_only(None)).decision, Verdict::Deny);
}

#[test]
fn refusals_and_audit_mode() {
    let edit = |ep: &mut WireEndpoint| {
        ep.enforcement = policy_bundle::Enforcement::Audit;
        ep.body_limit = Some(64);
        ep.graphql_allow = vec![rule("query", None, None)];
    };
    // The REST endpoint on the same path enforces: not allowed is denied.
    let mixed = evaluator(edit);
    assert_eq!(post(&mixed, &doc("mutation { x }")).decision, Verdict::Deny);
    let mut b = bundle();
    for ep in &mut b.enforcement.l7 {
        ep.enforcement = policy_bundle::Enforcement::Audit;
    }
    let audit = evaluator_in(b, edit);
    // Not allowed: audited.
    let d = post(&audit, &doc("mutation { x }"));
    assert_eq!(d.decision, Verdict::Audit, "{}", d.reason);
    // Unreadable: denied even in audit mode.
    let d = post(&audit, "{\"query\": ");
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("malformed JSON"), "{}", d.reason);
    let d = post(&audit, &doc(&format!("{{ {} }}", "a ".repeat(60))));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("inspection limit"), "{}", d.reason);
    let d = post(&audit, &doc("{ viewer "));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(
        d.reason.contains("malformed GraphQL document"),
        "{}",
        d.reason
    );
    assert_eq!(post(&audit, "").decision, Verdict::Deny);
}

#[test]
fn typename_is_a_root_field() {
    let ev = evaluator(|ep| ep.graphql_allow = vec![rule("query", None, Some(&["viewer"]))]);
    assert_eq!(
        post(&ev, &doc("{ viewer { login } }")).decision,
        Verdict::Allow
    );
    let d = post(&ev, &doc("{ __typename viewer { login } }"));
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("`__typename`"), "{}", d.reason);
}
