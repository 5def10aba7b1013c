//! Attack and conformance cases for the GraphQL request analysis: each
//! asserts the exact operation a server would run, or the exact refusal.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::*;

fn post(body: &str) -> Result<Vec<GraphqlOp>, GraphqlError> {
    ops_from_post(body.as_bytes())
}

/// The single operation of a one-object POST body.
fn one(body: &serde_json::Value) -> Result<GraphqlOp, GraphqlError> {
    let mut ops = post(&body.to_string())?;
    assert_eq!(ops.len(), 1, "{ops:?}");
    Ok(ops.remove(0))
}

fn query(document: &str) -> Result<GraphqlOp, GraphqlError> {
    one(&json!({ "query": document }))
}

fn named(document: &str, name: &str) -> Result<GraphqlOp, GraphqlError> {
    one(&json!({ "query": document, "operationName": name }))
}

fn parsed(kind: OperationType, name: Option<&str>, fields: &[&str]) -> GraphqlOp {
    GraphqlOp::Parsed {
        kind,
        name: name.map(str::to_owned),
        root_fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        persisted_hash: None,
    }
}

use OperationType::{Mutation, Query, Subscription};

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// --- operation selection -------------------------------------------------

#[test]
fn reads_a_named_query() {
    assert_eq!(
        query("query Viewer { viewer { login } }"),
        Ok(parsed(Query, Some("Viewer"), &["viewer"]))
    );
}

#[test]
fn shorthand_is_an_anonymous_query() {
    assert_eq!(query("{ viewer }"), Ok(parsed(Query, None, &["viewer"])));
}

#[test]
fn subscription_is_its_own_type() {
    assert_eq!(
        query("subscription OnMessage { messageAdded { id } }"),
        Ok(parsed(Subscription, Some("OnMessage"), &["messageAdded"]))
    );
}

#[test]
fn the_field_name_counts_not_the_alias() {
    assert_eq!(
        query("mutation { viewer: deleteRepository(input: {id: 1}) { clientMutationId } }"),
        Ok(parsed(Mutation, None, &["deleteRepository"]))
    );
    assert_eq!(
        query("{ a: viewer b: viewer viewer }"),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn root_fields_are_deduplicated_and_sorted() {
    assert_eq!(
        query("{ rateLimit { limit } viewer { login } rateLimit { cost } }"),
        Ok(parsed(Query, None, &["rateLimit", "viewer"]))
    );
}

#[test]
fn an_operation_name_cannot_lie_about_the_operation() {
    // `query Foo` beside a mutation `Foo`: servers differ on which runs.
    let doc =
        "query Foo { viewer } mutation Foo { deleteRepository(input: {}) { clientMutationId } }";
    assert_eq!(
        named(doc, "Foo"),
        Err(GraphqlError::DuplicateOperationName { name: "Foo".into() })
    );
    assert_eq!(
        query(doc),
        Err(GraphqlError::DuplicateOperationName { name: "Foo".into() })
    );
}

#[test]
fn operation_name_selects_among_several() {
    let doc = "query A { viewer } mutation B { deleteRepository { clientMutationId } }";
    assert_eq!(named(doc, "A"), Ok(parsed(Query, Some("A"), &["viewer"])));
    assert_eq!(
        named(doc, "B"),
        Ok(parsed(Mutation, Some("B"), &["deleteRepository"]))
    );
    assert_eq!(
        query(doc),
        Err(GraphqlError::AmbiguousOperation { count: 2 })
    );
    assert_eq!(
        named(doc, "C"),
        Err(GraphqlError::UnknownOperationName { name: "C".into() })
    );
}

#[test]
fn operation_name_must_name_the_only_operation_when_given() {
    assert_eq!(
        named("query A { viewer }", "B"),
        Err(GraphqlError::UnknownOperationName { name: "B".into() })
    );
    // An empty or null name is no name, as in OpenShell.
    assert_eq!(
        named("query A { viewer }", ""),
        Ok(parsed(Query, Some("A"), &["viewer"]))
    );
    assert_eq!(
        one(&json!({"query": "{ viewer }", "operationName": null})),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn an_anonymous_operation_must_be_alone() {
    let doc = "{ viewer } mutation M { deleteRepository { clientMutationId } }";
    assert_eq!(named(doc, "M"), Err(GraphqlError::AnonymousNotAlone));
    assert_eq!(query(doc), Err(GraphqlError::AnonymousNotAlone));
    assert_eq!(
        query("{ viewer } { deleteRepository }"),
        Err(GraphqlError::AnonymousNotAlone)
    );
}

#[test]
fn a_document_without_an_operation_is_refused() {
    assert_eq!(
        query("fragment F on Query { viewer }"),
        Err(GraphqlError::NoOperation)
    );
    assert_eq!(
        query("type Query { viewer: User } query { viewer }"),
        Err(GraphqlError::NotExecutable)
    );
}

// --- fragments -------------------------------------------------------------

#[test]
fn a_mutation_field_hidden_in_a_fragment_spread_counts() {
    assert_eq!(
        query(
            "mutation M { ...F } fragment F on Mutation { deleteRepository { clientMutationId } }"
        ),
        Ok(parsed(Mutation, Some("M"), &["deleteRepository"]))
    );
    // Whatever the type condition says, the field is selected at the root.
    assert_eq!(
        query("query { viewer ...F } fragment F on Mutation { deleteRepository }"),
        Ok(parsed(Query, None, &["deleteRepository", "viewer"]))
    );
}

#[test]
fn a_mutation_field_hidden_in_an_inline_fragment_counts() {
    assert_eq!(
        query(
            "mutation { ... on Mutation { x: deleteRepository } ... @include(if: true) { createIssue } }"
        ),
        Ok(parsed(Mutation, None, &["createIssue", "deleteRepository"]))
    );
}

#[test]
fn fragments_nest_through_spreads_and_inline_fragments() {
    let doc = "mutation { ... { ...A } } \
               fragment A on Mutation { ... on Mutation { ...B } addStar } \
               fragment B on Mutation { ... { deleteRepository } }";
    assert_eq!(
        query(doc),
        Ok(parsed(Mutation, None, &["addStar", "deleteRepository"]))
    );
}

#[test]
fn fragments_below_a_root_field_add_no_root_field() {
    assert_eq!(
        query("{ viewer { ...U } } fragment U on User { login deleteRepository }"),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn skipped_root_fields_still_count() {
    assert_eq!(
        query("mutation { deleteRepository @skip(if: true) addStar }"),
        Ok(parsed(Mutation, None, &["addStar", "deleteRepository"]))
    );
}

#[test]
fn a_fragment_cycle_is_refused() {
    assert_eq!(
        query("{ ...A } fragment A on Query { ...B } fragment B on Query { viewer ...A }"),
        Err(GraphqlError::FragmentCycle { name: "A".into() })
    );
    assert_eq!(
        query("{ ...A } fragment A on Query { ... { ...A } }"),
        Err(GraphqlError::FragmentCycle { name: "A".into() })
    );
}

#[test]
fn a_fragment_spread_twice_is_no_cycle() {
    // Either order of the two spreads: a fragment finished on one branch is
    // not on the path of the next.
    assert_eq!(
        query(
            "{ ...A ...B } fragment A on Query { ...B viewer } fragment B on Query { rateLimit }"
        ),
        Ok(parsed(Query, None, &["rateLimit", "viewer"]))
    );
    assert_eq!(
        query(
            "{ ...A ...B } fragment A on Query { viewer } fragment B on Query { ...A rateLimit }"
        ),
        Ok(parsed(Query, None, &["rateLimit", "viewer"]))
    );
    assert_eq!(
        query("{ ...A ... { ...A } } fragment A on Query { viewer }"),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn an_undefined_or_doubly_defined_fragment_is_refused() {
    assert_eq!(
        query("{ ...Missing }"),
        Err(GraphqlError::UnknownFragment {
            name: "Missing".into()
        })
    );
    assert_eq!(
        query("{ ...F } fragment F on Query { viewer } fragment F on Query { deleteRepository }"),
        Err(GraphqlError::DuplicateFragment { name: "F".into() })
    );
}

// --- introspection ---------------------------------------------------------

#[test]
fn typename_and_introspection_fields_are_root_fields() {
    assert_eq!(
        query("{ __typename }"),
        Ok(parsed(Query, None, &["__typename"]))
    );
    assert_eq!(
        query(
            "query IntrospectionQuery { __schema { types { name } } __type(name: \"Repo\") { name } }"
        ),
        Ok(parsed(
            Query,
            Some("IntrospectionQuery"),
            &["__schema", "__type"]
        ))
    );
    assert_eq!(
        query("mutation { __typename deleteRepository }"),
        Ok(parsed(Mutation, None, &["__typename", "deleteRepository"]))
    );
}

// --- batches ---------------------------------------------------------------

#[test]
fn a_batch_reports_every_operation_in_order() {
    let body = json!([
        {"query": "{ viewer }"},
        {"query": "mutation Del { deleteRepository { clientMutationId } }"},
    ]);
    assert_eq!(
        post(&body.to_string()),
        Ok(vec![
            parsed(Query, None, &["viewer"]),
            parsed(Mutation, Some("Del"), &["deleteRepository"]),
        ])
    );
}

#[test]
fn one_bad_batch_item_fails_the_batch() {
    let body = json!([{"query": "{ viewer }"}, {"query": "{ viewer } { x }"}]);
    assert_eq!(
        post(&body.to_string()),
        Err(GraphqlError::AnonymousNotAlone)
    );
    assert_eq!(post("[]"), Err(GraphqlError::EmptyBatch));
    assert_eq!(
        post(r#"[{"query": "{a}"}, 1]"#),
        Err(GraphqlError::NotAnObject)
    );
    assert_eq!(
        post(r#"[[{"query": "{a}"}]]"#),
        Err(GraphqlError::NotAnObject)
    );
    assert_eq!(post(r#""{ viewer }""#), Err(GraphqlError::NotAnObject));
}

// --- persisted queries -----------------------------------------------------

#[test]
fn a_hash_only_request_is_persisted() {
    let expected = Ok(GraphqlOp::Persisted {
        hash: "abc123".into(),
        name: Some("Viewer".into()),
    });
    let ext = json!({"persistedQuery": {"version": 1, "sha256Hash": "abc123"}});
    assert_eq!(
        one(&json!({"operationName": "Viewer", "extensions": ext})),
        expected
    );
    assert_eq!(
        one(&json!({"query": null, "operationName": "Viewer", "extensions": ext})),
        expected
    );
    assert_eq!(
        one(&json!({"query": "  ", "operationName": "Viewer", "extensions": ext})),
        expected
    );
    assert_eq!(
        one(&json!({"operationName": "", "extensions": ext})),
        Ok(GraphqlOp::Persisted {
            hash: "abc123".into(),
            name: None
        })
    );
}

#[test]
fn apq_with_a_document_must_carry_its_own_hash() {
    let doc = "query Viewer { viewer { login } }";
    let hash = sha256_hex(doc);
    let body = |h: &str| json!({"query": doc, "extensions": {"persistedQuery": {"version": 1, "sha256Hash": h}}});
    assert_eq!(
        one(&body(&hash)),
        Ok(GraphqlOp::Parsed {
            kind: Query,
            name: Some("Viewer".into()),
            root_fields: vec!["viewer".into()],
            persisted_hash: Some(hash.clone()),
        })
    );
    assert!(one(&body(&hash.to_ascii_uppercase())).is_ok());
    // The hash of a harmless document with a mutation sent: a server that
    // trusts the hash would run the registered document instead.
    let other = sha256_hex("mutation { deleteRepository }");
    assert_eq!(
        one(&body(&other)),
        Err(GraphqlError::HashMismatch { hash: other })
    );
}

#[test]
fn saved_query_ids_are_persisted_and_never_mixed() {
    assert_eq!(
        one(&json!({"documentId": "q1", "operationName": "Viewer"})),
        Ok(GraphqlOp::Persisted {
            hash: "q1".into(),
            name: Some("Viewer".into())
        })
    );
    assert_eq!(
        one(&json!({"id": "q1", "queryId": "q2"})),
        Err(GraphqlError::SeveralPersistedIds {
            first: "id",
            second: "queryId"
        })
    );
    assert_eq!(
        one(&json!({"query": "{ viewer }", "documentId": "q1"})),
        Err(GraphqlError::DocumentAndSavedId {
            member: "documentId"
        })
    );
    assert!(matches!(
        one(&json!({"id": "q1", "extensions": {"persistedQuery": {"sha256Hash": "abc"}}})),
        Err(GraphqlError::SeveralPersistedIds { .. })
    ));
    // Found by fuzzing: an empty id named a persisted query with no name.
    assert_eq!(
        one(&json!({"id": ""})),
        Err(GraphqlError::WrongType {
            member: "id",
            expected: "a non-empty string or null"
        })
    );
    assert_eq!(one(&json!({"queryId": null})), Err(GraphqlError::NoQuery));
}

#[test]
fn a_request_without_document_or_hash_is_refused() {
    assert_eq!(one(&json!({})), Err(GraphqlError::NoQuery));
    assert_eq!(one(&json!({"query": ""})), Err(GraphqlError::NoQuery));
    assert_eq!(
        one(&json!({"query": null, "variables": {"a": 1}})),
        Err(GraphqlError::NoQuery)
    );
}

#[test]
fn malformed_persisted_query_extensions_are_refused() {
    for (extensions, member) in [
        (json!("x"), "extensions"),
        (json!({"persistedQuery": true}), "extensions.persistedQuery"),
        (
            json!({"persistedQuery": {"version": 1}}),
            "extensions.persistedQuery.sha256Hash",
        ),
        (
            json!({"persistedQuery": {"sha256Hash": ""}}),
            "extensions.persistedQuery.sha256Hash",
        ),
        (
            json!({"persistedQuery": {"sha256Hash": 7}}),
            "extensions.persistedQuery.sha256Hash",
        ),
    ] {
        let got = one(&json!({"query": "{ viewer }", "extensions": extensions}));
        assert!(
            matches!(&got, Err(GraphqlError::WrongType { member: m, .. }) if *m == member),
            "{extensions}: {got:?}"
        );
    }
    // Other extensions are the server's business.
    assert!(
        one(&json!({"query": "{ a }", "extensions": {"clientLibrary": {"name": "x"}}})).is_ok()
    );
}

// --- GET -----------------------------------------------------------------

#[test]
fn get_reads_percent_encoded_parameters() {
    assert_eq!(
        ops_from_query_string("query=query+Viewer+%7B+viewer+%7B+login+%7D+%7D&variables=%7B%7D"),
        Ok(parsed(Query, Some("Viewer"), &["viewer"]))
    );
    assert_eq!(
        ops_from_query_string(
            "query=query%20A%7Bviewer%7D%20query%20B%7BrateLimit%7D&operationName=B"
        ),
        Ok(parsed(Query, Some("B"), &["rateLimit"]))
    );
}

#[test]
fn get_with_a_mutation_is_a_mutation() {
    assert_eq!(
        ops_from_query_string("query=mutation%7BdeleteRepository%7BclientMutationId%7D%7D"),
        Ok(parsed(Mutation, None, &["deleteRepository"]))
    );
}

#[test]
fn get_parameters_appear_once_and_are_known() {
    let err = ops_from_query_string("query=%7Bviewer%7D&query=mutation%7BdeleteRepository%7D");
    assert_eq!(
        err,
        Err(GraphqlError::DuplicateParam {
            key: "query".into()
        })
    );
    // The same key spelled with an escape is the same key.
    let err = ops_from_query_string("query=%7Bviewer%7D&%71uery=mutation%7BdeleteRepository%7D");
    assert_eq!(
        err,
        Err(GraphqlError::DuplicateParam {
            key: "query".into()
        })
    );
    assert_eq!(
        ops_from_query_string("query=%7Bviewer%7D&doc_id=1"),
        Err(GraphqlError::UnknownMember {
            key: "doc_id".into()
        })
    );
    assert!(matches!(
        ops_from_query_string("query=%7Bviewer%zz"),
        Err(GraphqlError::QueryString(_))
    ));
}

#[test]
fn get_parameters_are_split_on_semicolons_too() {
    // A server splitting on `;` reads a second `query` in `variables`.
    assert_eq!(
        ops_from_query_string(
            "query=%7Bviewer%7D&variables=x;query=mutation%7BdeleteRepository%7D"
        ),
        Err(GraphqlError::DuplicateParam {
            key: "query".into()
        })
    );
    assert_eq!(
        ops_from_query_string("query=%7Bviewer%7D;query=mutation%7BdeleteRepository%7D"),
        Err(GraphqlError::DuplicateParam {
            key: "query".into()
        })
    );
    assert_eq!(
        ops_from_query_string("query=%7Bviewer%7D;variables=%7B%7D"),
        Ok(parsed(Query, None, &["viewer"]))
    );
    // An escaped `;` is part of a value.
    assert_eq!(
        ops_from_query_string("query=%7Bviewer%7D&variables=%7B%22a%22%3A%22x%3By%22%7D"),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn get_hash_only_and_bad_extensions() {
    let ext = "%7B%22persistedQuery%22%3A%7B%22version%22%3A1%2C%22sha256Hash%22%3A%22abc%22%7D%7D";
    assert_eq!(
        ops_from_query_string(&format!("operationName=Viewer&extensions={ext}")),
        Ok(GraphqlOp::Persisted {
            hash: "abc".into(),
            name: Some("Viewer".into())
        })
    );
    // OpenShell ignores an `extensions` that is not JSON; a server does not.
    assert!(matches!(
        ops_from_query_string("query=%7Ba%7D&extensions=%7Bnot-json"),
        Err(GraphqlError::MalformedJson { .. })
    ));
    assert_eq!(
        ops_from_query_string("id=one&queryId=two"),
        Err(GraphqlError::SeveralPersistedIds {
            first: "id",
            second: "queryId"
        })
    );
    assert_eq!(ops_from_query_string(""), Err(GraphqlError::NoQuery));
}

// --- JSON ------------------------------------------------------------------

#[test]
fn duplicate_json_members_are_refused_at_every_depth() {
    let cases = [
        (
            r#"{"query":"{ viewer }","query":"mutation { deleteRepository }"}"#,
            "query",
        ),
        (
            r#"{"query":"{ viewer }","\u0071uery":"mutation { deleteRepository }"}"#,
            "query",
        ),
        (
            r#"{"query":"query A {a} mutation B {b}","operationName":"A","operationName":"B"}"#,
            "operationName",
        ),
        (
            r#"{"extensions":{"persistedQuery":{"sha256Hash":"a","sha256Hash":"b"}}}"#,
            "sha256Hash",
        ),
        (r#"{"query":"{a}","variables":{"x":{"y":1,"y":2}}}"#, "y"),
        (r#"[{"query":"{a}"},{"id":"1","id":"2"}]"#, "id"),
    ];
    for (body, key) in cases {
        let got = post(body);
        assert!(
            matches!(&got, Err(GraphqlError::DuplicateKey { key: k, line: 1, .. }) if k == key),
            "{body}: {got:?}"
        );
    }
}

#[test]
fn invalid_utf8_and_a_byte_order_mark_are_refused() {
    assert_eq!(
        ops_from_post(b"{\"query\":\"{ v\xff }\"}"),
        Err(GraphqlError::InvalidUtf8 { offset: 13 })
    );
    assert_eq!(
        ops_from_post("\u{feff}{\"query\":\"{ viewer }\"}".as_bytes()),
        Err(GraphqlError::ByteOrderMark)
    );
    // A lone surrogate escape cannot be a UTF-8 string either.
    assert!(matches!(
        post(r#"{"query":"{ viewer } \ud800"}"#),
        Err(GraphqlError::MalformedJson { .. })
    ));
}

#[test]
fn malformed_json_says_where() {
    assert_eq!(
        post("{\"query\":\n  \"{ viewer }\",}"),
        Err(GraphqlError::MalformedJson {
            message: "trailing comma".into(),
            line: 2,
            column: 16
        })
    );
    assert!(matches!(
        post(r#"{"query":"{ viewer }"} {"query":"mutation { x }"}"#),
        Err(GraphqlError::MalformedJson { .. })
    ));
    assert_eq!(post(""), Err(GraphqlError::EmptyBody));
}

#[test]
fn members_have_their_types_and_no_stranger_is_read_past() {
    assert_eq!(
        one(&json!({"query": 5})),
        Err(GraphqlError::WrongType {
            member: "query",
            expected: "a string or null"
        })
    );
    assert_eq!(
        one(&json!({"query": "{a}", "operationName": ["A"]})),
        Err(GraphqlError::WrongType {
            member: "operationName",
            expected: "a string or null"
        })
    );
    assert_eq!(
        one(&json!({"query": "{ viewer }", "doc_id": "123"})),
        Err(GraphqlError::UnknownMember {
            key: "doc_id".into()
        })
    );
}

#[test]
fn the_body_limit_is_checked_first() {
    let big = format!(
        "{{\"query\":\"{{ {} }}\"}}",
        "a ".repeat(DEFAULT_BODY_LIMIT)
    );
    assert_eq!(
        post(&big),
        Err(GraphqlError::TooLarge {
            len: big.len(),
            limit: DEFAULT_BODY_LIMIT
        })
    );
    assert!(
        GraphqlReader::new(10)
            .ops_from_post(br#"{"query":"{ viewer }"}"#)
            .is_err()
    );
    assert!(
        GraphqlReader::new(100)
            .ops_from_post(br#"{"query":"{ viewer }"}"#)
            .is_ok()
    );
}

// --- documents -------------------------------------------------------------

#[test]
fn malformed_documents_say_where_in_the_document() {
    let got = query("query Viewer {\n  viewer {\n    login\n  ");
    assert!(
        matches!(&got, Err(GraphqlError::MalformedDocument { line: 4, .. })),
        "{got:?}"
    );
    let got = op_from_document("query { viewer(x: ) }", None);
    assert!(
        matches!(
            &got,
            Err(GraphqlError::MalformedDocument {
                line: 1,
                column: 19,
                ..
            })
        ),
        "{got:?}"
    );
}

#[test]
fn op_from_document_selects_like_a_request() {
    let doc = "query A { viewer } mutation B { addStar }";
    assert_eq!(
        op_from_document(doc, Some("B")),
        Ok(parsed(Mutation, Some("B"), &["addStar"]))
    );
    assert_eq!(
        op_from_document(doc, Some("")),
        Err(GraphqlError::AmbiguousOperation { count: 2 })
    );
}

// --- hostile documents -----------------------------------------------------

fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{what} took {:?}",
        start.elapsed()
    );
    out
}

#[test]
fn deep_selection_nesting_is_refused_without_exhausting_the_stack() {
    for depth in [100, 5_000] {
        let doc = format!("{}{}", "{ a ".repeat(depth), "}".repeat(depth));
        let got = bounded("deep fields", || query(&doc));
        assert!(
            matches!(&got, Err(GraphqlError::MalformedDocument { message, .. }) if message.contains("recursion")),
            "{depth}: {got:?}"
        );
        let doc = format!("{{ {} a {} }}", "... { ".repeat(depth), "}".repeat(depth));
        let got = bounded("deep inline fragments", || query(&doc));
        assert!(
            matches!(&got, Err(GraphqlError::MalformedDocument { .. })),
            "{depth}: {got:?}"
        );
    }
    let doc = format!("{{ {} a {} }}", "... { ".repeat(30), "}".repeat(30));
    assert_eq!(query(&doc), Ok(parsed(Query, None, &["a"])));
}

#[test]
fn deep_json_is_refused_without_exhausting_the_stack() {
    for depth in [40, 20_000] {
        let body = format!(
            r#"{{"query":"{{a}}","variables":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let got = bounded("deep json", || post(&body));
        assert!(
            matches!(&got, Err(GraphqlError::TooDeep { limit: 32, .. })),
            "{depth}: {got:?}"
        );
    }
    let body = format!(
        r#"{{"query":"{{a}}","variables":{}{}}}"#,
        "[".repeat(20),
        "]".repeat(20)
    );
    assert!(post(&body).is_ok());
}

#[test]
fn many_fragments_expand_in_linear_time() {
    // Each fragment spreads the next one twice: without expanding each
    // fragment once, this is 2^n spreads.
    let n = 1_000;
    let mut doc = String::from("{ ...F0 }");
    for i in 0..n {
        let _ = write!(
            doc,
            " fragment F{i} on Query {{ f{i} ...F{j} ... {{ ...F{j} }} }}",
            j = i + 1
        );
    }
    let _ = write!(doc, " fragment F{n} on Query {{ last }}");
    assert!(doc.len() < DEFAULT_BODY_LIMIT);
    let got = bounded("fragment fan-out", || op_from_document(&doc, None)).unwrap();
    assert_eq!(got.root_fields().len(), n + 1);
    // The same chain closed into a cycle.
    let cyclic = doc.replace(
        &format!("fragment F{n} on Query {{ last }}"),
        &format!("fragment F{n} on Query {{ ...F0 }}"),
    );
    assert_eq!(
        bounded("fragment cycle", || op_from_document(&cyclic, None)),
        Err(GraphqlError::FragmentCycle { name: "F0".into() })
    );
}

#[test]
fn a_token_flood_is_refused() {
    let body = json!({"query": format!("{{ {} }}", "a ".repeat(40_000))}).to_string();
    let got = bounded("token flood", || {
        GraphqlReader::new(1 << 20).ops_from_post(body.as_bytes())
    });
    assert!(
        matches!(&got, Err(GraphqlError::MalformedDocument { message, .. }) if message.contains("token limit")),
        "{got:?}"
    );
    // Within the default limit every token fits; the worst case is still
    // one linear parse.
    let doc = format!("{{ {} }}", "a ".repeat(32_000));
    let got = bounded("densest default-size document", || {
        op_from_document(&doc, None)
    });
    assert_eq!(got, Ok(parsed(Query, None, &["a"])));
}

// --- Content-Type ----------------------------------------------------------

#[test]
fn only_json_bodies_are_read() {
    for ok in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=\"UTF-8\"",
    ] {
        assert_eq!(check_content_type(Some(ok)), Ok(()), "{ok}");
    }
    for bad in [
        "application/x-www-form-urlencoded",
        "application/graphql",
        "multipart/form-data; boundary=x",
        "text/plain",
        "application/json; charset=utf-16",
        "application/json; boundary=x",
        "application/jsonx",
        "",
    ] {
        assert!(check_content_type(Some(bad)).is_err(), "{bad}");
    }
    assert!(check_content_type(None).is_err());
}

// --- WebSocket -------------------------------------------------------------

#[test]
fn ws_subscribe_and_start_are_operations() {
    for message_type in ["subscribe", "start"] {
        let text = json!({
            "id": "1",
            "type": message_type,
            "payload": {"query": "subscription { messageAdded { id } }", "variables": {}},
        });
        assert_eq!(
            classify_ws_text(&text.to_string()),
            Ok(WsMessage::Operation(parsed(
                Subscription,
                None,
                &["messageAdded"]
            )))
        );
    }
    let text = json!({"id": "2", "type": "subscribe", "payload": {"query": "mutation { x: deleteRepository }"}});
    assert_eq!(
        classify_ws_text(&text.to_string()),
        Ok(WsMessage::Operation(parsed(
            Mutation,
            None,
            &["deleteRepository"]
        )))
    );
}

#[test]
fn ws_lifecycle_messages_run_nothing() {
    for message_type in [
        "connection_init",
        "ping",
        "pong",
        "complete",
        "stop",
        "connection_terminate",
    ] {
        let text = json!({"type": message_type, "id": "1", "payload": {"Authorization": "x"}});
        assert_eq!(
            classify_ws_text(&text.to_string()),
            Ok(WsMessage::Lifecycle { message_type })
        );
    }
    assert_eq!(
        classify_ws_text(r#"{"type":"next","id":"1","payload":{}}"#),
        Ok(WsMessage::Other {
            message_type: "next".into()
        })
    );
    assert_eq!(
        classify_ws_text(r#"{"type":"Subscribe","id":"1","payload":{}}"#),
        Ok(WsMessage::Other {
            message_type: "Subscribe".into()
        })
    );
}

#[test]
fn ws_operation_messages_are_read_strictly() {
    let cases: [(&str, GraphqlError); 6] = [
        (
            r#"{"id":"1","payload":{"query":"{a}"}}"#,
            GraphqlError::WsMissingType,
        ),
        (r#"{"type":7}"#, GraphqlError::WsMissingType),
        (
            r#"{"type":"subscribe","payload":{"query":"{a}"}}"#,
            GraphqlError::WsMissingId {
                message_type: "subscribe".into(),
            },
        ),
        (
            r#"{"type":"start","id":"","payload":{"query":"{a}"}}"#,
            GraphqlError::WsMissingId {
                message_type: "start".into(),
            },
        ),
        (
            r#"{"type":"subscribe","id":"1","payload":[{"query":"{a}"}]}"#,
            GraphqlError::WsMissingPayload {
                message_type: "subscribe".into(),
            },
        ),
        (
            r#"{"type":"subscribe","id":"1","payload":{"query":"{a}"},"query":"{b}"}"#,
            GraphqlError::UnknownMember {
                key: "query".into(),
            },
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(classify_ws_text(text), Err(expected), "{text}");
    }
    // Two `type`s: a server may read either.
    assert!(matches!(
        classify_ws_text(
            r#"{"type":"ping","id":"1","payload":{"query":"mutation{x}"},"type":"subscribe"}"#
        ),
        Err(GraphqlError::DuplicateKey { .. })
    ));
    assert!(matches!(
        classify_ws_text("ping"),
        Err(GraphqlError::MalformedJson { .. })
    ));
    assert_eq!(classify_ws_text("[]"), Err(GraphqlError::NotAnObject));
}

#[test]
fn ws_hash_only_is_persisted() {
    let text = json!({"id": "1", "type": "subscribe", "payload": {"extensions": {"persistedQuery": {"sha256Hash": "abc"}}}});
    assert_eq!(
        classify_ws_text(&text.to_string()),
        Ok(WsMessage::Operation(GraphqlOp::Persisted {
            hash: "abc".into(),
            name: None
        }))
    );
}

#[test]
fn ops_serialize_for_the_deny_log() {
    let op = parsed(Mutation, Some("M"), &["addStar"]);
    assert_eq!(
        serde_json::to_value(&op).unwrap(),
        json!({"form": "parsed", "kind": "mutation", "name": "M", "root_fields": ["addStar"], "persisted_hash": null})
    );
    assert_eq!(op.kind(), Some(Mutation));
    assert_eq!(op.name(), Some("M"));
    let persisted = GraphqlOp::Persisted {
        hash: "h".into(),
        name: None,
    };
    assert_eq!(persisted.kind(), None);
    assert!(persisted.root_fields().is_empty());
}

// --- the per-endpoint reader and its cache ---------------------------------

#[test]
fn a_cached_answer_is_the_answer_for_the_same_input() {
    let reader = GraphqlReader::default();
    let doc = "query A { viewer } mutation B { deleteRepository }";
    let bodies = [
        json!({"query": doc, "operationName": "A"}),
        json!({"query": doc, "operationName": "B"}),
        json!({"query": doc}),
        json!({"query": "{ ...F }"}),
        json!([{"query": doc, "operationName": "B"}, {"query": "{ viewer }"}]),
    ];
    for round in 0..3 {
        for body in &bodies {
            let bytes = body.to_string().into_bytes();
            assert_eq!(
                reader.ops_from_post(&bytes),
                ops_from_post(&bytes),
                "round {round}: {body}"
            );
        }
    }
    // One entry per (document, operation name) pair.
    assert_eq!(reader.cache().len(), 5);
    let ws =
        json!({"id": "1", "type": "subscribe", "payload": {"query": doc, "operationName": "B"}});
    assert_eq!(
        reader.classify_ws_text(&ws.to_string()),
        Ok(WsMessage::Operation(parsed(
            Mutation,
            Some("B"),
            &["deleteRepository"]
        )))
    );
    assert_eq!(
        reader.ops_from_query_string("query=%7B+viewer+%7D"),
        Ok(parsed(Query, None, &["viewer"]))
    );
}

#[test]
fn the_cache_stays_within_its_size() {
    let cache = DocumentCache::new(64);
    for i in 0..100 {
        let doc = format!("{{ field{i} }}");
        let selected = cache.analyze(&doc, None).unwrap();
        assert_eq!(selected.root_fields, vec![format!("field{i}")]);
        // Every document here is at least 10 bytes.
        assert!(cache.len() <= 64 / 10, "{}", cache.len());
    }
    // A document larger than the whole cache is analysed, not kept.
    let big = format!("{{ {} }}", "a".repeat(100));
    assert!(cache.analyze(&big, None).is_ok());
    assert!(cache.lookup(&big, None).is_none());
    assert!(!cache.is_empty());
}
