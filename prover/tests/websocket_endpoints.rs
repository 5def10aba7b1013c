//! WebSocket endpoints: the prover models the upgrade and the client
//! messages after it (text, binary, over the limit) as request kinds only
//! websocket endpoints judge, so a new text message, a newly allowed
//! upgrade or a binary message on a credentialed connection is a widening
//! whose witness replays through `eval --websocket` / `--websocket-text`
//! / `--websocket-binary`, and an unchanged or narrowed endpoint is
//! certified; messages between two message limits show a raised limit.
//! On an endpoint with GraphQL rules, a text message is judged by what it
//! says: a new operation is a widening whose witness is the `subscribe`
//! message that carries it.

mod support;

use policy_bundle::Bundle;
use policy_bundle::eval::{Evaluator, Verdict as Eval, WsClientMessage};
use prover::websocket::Probe;
use prover::{Finding, Report, Verdict};
use support::*;

const CREDENTIAL: &str = r#"
  credential rt_token {
    secret env RT_TOKEN
    placeholder env RT_TOKEN
    inject header Authorization "Bearer {secret}"
    hosts realtime.example.com
  }
"#;

/// A policy with one endpoint on `realtime.example.com` (a credential
/// bound to it) of this kind and these rule lines.
fn endpoint(kind: &str, rules: &str) -> Bundle {
    compile(&policy(&format!(
        "{CREDENTIAL}\n  allow /usr/bin/agent -> realtime.example.com:443 {kind} {{\n{rules}\n  }}"
    )))
}

fn ws(rules: &str) -> Bundle {
    endpoint("websocket", rules)
}

/// `text` on `/v1/chat` after an upgrade, as the evaluator decides it.
fn text_verdict(b: &Bundle, text: &str) -> Eval {
    let ev = Evaluator::new(b.clone());
    let conn = ev.decide_connection(
        "/usr/bin/agent",
        None,
        Some("realtime.example.com"),
        None,
        443,
    );
    ev.decide_ws_message(
        &conn,
        Some("realtime.example.com"),
        "/v1/chat",
        WsClientMessage::Text(text),
    )
    .decision
}

/// The findings whose witness is this WebSocket kind (`upgrade`, `text`,
/// `binary`).
fn of_kind<'a>(r: &'a Report, kind: &str) -> Vec<&'a Finding> {
    r.findings
        .iter()
        .filter(|f| f.witness.websocket.as_deref() == Some(kind))
        .collect()
}

/// Widened, every finding replays (NEW lets it through with the
/// credential, OLD does not), and some finding is of this kind.
fn assert_widened_by(old: &Bundle, new: &Bundle, kind: &str) -> Report {
    let r = diff_bundles(old, new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, old, new);
    }
    assert!(!of_kind(&r, kind).is_empty(), "no {kind} witness: {r:#?}");
    r
}

#[test]
fn new_text_messages_on_a_path_are_a_widening_that_replays() {
    let old = ws("    allow GET /v1/**");
    let new = ws("    allow GET /v1/**\n    allow WEBSOCKET_TEXT /v1/**");
    assert_eq!(text_verdict(&old, "hi"), Eval::Deny);
    assert_eq!(text_verdict(&new, "hi"), Eval::Allow);
    let r = assert_widened_by(&old, &new, "text");
    assert!(categories(&r).contains(&"capability_expansion"), "{r:#?}");
    let f = of_kind(&r, "text");
    let f = f.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.probe(), Some(Probe::Text("hello".to_owned())));
    let text = f.witness.request_text();
    assert!(
        text.starts_with("GET wss://realtime.example.com/v1"),
        "{text}"
    );
    assert!(text.ends_with("--websocket-text hello"), "{text}");
    // Every text message the finding stands for is on `/v1`: the upgrade
    // elsewhere is refused in both.
    assert!(
        f.witness
            .path
            .as_deref()
            .unwrap_or_default()
            .starts_with("/v1")
    );
}

#[test]
fn an_upgrade_newly_allowed_is_a_widening_that_replays() {
    let old = ws("    allow * /v1/**");
    let new = ws("    allow * /v1/**\n    allow GET /v2/**");
    let r = assert_widened_by(&old, &new, "upgrade");
    for f in of_kind(&r, "upgrade") {
        assert!(
            f.witness
                .path
                .as_deref()
                .unwrap_or_default()
                .starts_with("/v2"),
            "{f:#?}"
        );
        assert!(f.witness.request_text().ends_with(" --websocket"), "{f:#?}");
    }
}

#[test]
fn narrowed_or_identical_websocket_endpoints_are_certified() {
    let wide = ws("    allow * /v1/**");
    let narrow = ws("    allow GET /v1/**\n    allow WEBSOCKET_TEXT /v1/chat");
    let r = diff_bundles(&wide, &narrow);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.inconclusive.is_none(), "{r:#?}");
    let denied = ws("    allow * /v1/**\n    deny WEBSOCKET_TEXT /v1/admin/**");
    let r = diff_bundles(&wide, &denied);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    let r = diff_bundles(&narrow, &narrow.clone());
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.findings.is_empty(), "{r:#?}");
}

#[test]
fn rest_to_websocket_on_one_path_widens_by_upgrades() {
    let rest = endpoint("http", "    allow GET /v1/**");
    let websocket = ws("    allow GET /v1/**");
    // REST refuses every upgrade; the websocket endpoint allows them.
    assert_widened_by(&rest, &websocket, "upgrade");
}

#[test]
fn websocket_to_rest_on_one_path_widens_by_plain_requests() {
    let websocket = ws("    allow GET /v1/**");
    let rest = endpoint("http", "    allow GET /v1/**");
    // A plain GET on the websocket endpoint's path is refused.
    let r = diff_bundles(&websocket, &rest);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &websocket, &rest);
    }
    assert!(
        r.findings
            .iter()
            .any(|f| f.witness.websocket.is_none() && f.witness.method.as_deref() == Some("GET")),
        "{r:#?}"
    );
}

#[test]
fn binary_messages_on_a_credentialed_upgrade_follow_uninspected_credentials() {
    let old = ws("    allow GET /v1/**");
    let new = endpoint("websocket uninspected_credentials", "    allow GET /v1/**");
    let r = assert_widened_by(&old, &new, "binary");
    let f = of_kind(&r, "binary");
    let f = f.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.probe(), Some(Probe::Binary(5)));
    // And back: no new access.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}

/// The text message of the one text finding of `r`.
#[expect(clippy::panic, reason = "test helper")]
fn text_witness(r: &Report) -> String {
    let f = of_kind(r, "text");
    match f.first().and_then(|f| f.witness.probe()) {
        Some(Probe::Text(t)) => t,
        other => panic!("no text witness ({other:?}): {r:#?}"),
    }
}

#[expect(clippy::unwrap_used, reason = "test helper")]
fn subscribe(query: &str) -> String {
    format!(
        r#"{{"type":"subscribe","id":"1","payload":{{"query":{}}}}}"#,
        serde_json::to_string(query).unwrap()
    )
}

#[test]
fn graphql_mutations_newly_allowed_over_websocket_are_a_widening_that_replays() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription");
    let new = ws("    allow GET /v1/**\n    allow graphql subscription mutation");
    let m = subscribe("mutation { x }");
    assert_eq!(text_verdict(&old, &m), Eval::Deny);
    assert_eq!(text_verdict(&new, &m), Eval::Allow);
    let r = assert_widened_by(&old, &new, "text");
    assert!(r.inconclusive.is_none(), "{r:#?}");
    for f in of_kind(&r, "text") {
        let Some(Probe::Text(t)) = f.witness.probe() else {
            panic!("{f:#?}")
        };
        assert!(
            t.starts_with(r#"{"type":"subscribe","id":"1","payload":{"query":"mutation"#),
            "{t}"
        );
    }
    // And back: only subscriptions, which both allow.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.inconclusive.is_none(), "{r:#?}");
}

#[test]
fn a_root_field_newly_allowed_over_websocket_is_found_by_its_name() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription field issueCreated");
    let new = ws(
        "    allow GET /v1/**\n    allow graphql subscription field issueCreated repositoryDeleted",
    );
    let r = assert_widened_by(&old, &new, "text");
    assert_eq!(
        text_witness(&r),
        subscribe("subscription { repositoryDeleted }")
    );
}

#[test]
fn a_deny_websocket_text_rule_removed_beside_graphql_rules_is_a_widening() {
    let old = ws(
        "    allow GET /v1/**\n    allow graphql subscription\n    deny WEBSOCKET_TEXT /v1/admin/**",
    );
    let new = ws("    allow GET /v1/**\n    allow graphql subscription");
    let r = assert_widened_by(&old, &new, "text");
    for f in of_kind(&r, "text") {
        assert!(
            f.witness
                .path
                .as_deref()
                .unwrap_or_default()
                .starts_with("/v1/admin"),
            "{f:#?}"
        );
    }
    // Lifecycle messages pass the deny rule in both: no finding is one.
    assert!(!text_witness(&r).contains("ping"), "{}", text_witness(&r));
}

#[test]
fn plain_text_and_graphql_over_websocket_compare_by_what_each_lets_through() {
    let plain = ws("    allow * /v1/**");
    let graphql = ws("    allow GET /v1/**\n    allow graphql subscription");
    // GraphQL rules refuse every text that is not a GraphQL-over-WebSocket
    // message, and let through nothing the plain endpoint refused.
    let r = diff_bundles(&plain, &graphql);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.inconclusive.is_none(), "{r:#?}");
    // Back to plain text: any text is new.
    assert_eq!(text_verdict(&graphql, "hello"), Eval::Deny);
    let r = assert_widened_by(&graphql, &plain, "text");
    assert_eq!(text_witness(&r), "hello");
}

#[test]
fn a_persisted_query_registered_over_websocket_is_a_widening_by_its_id() {
    let old = ws("    allow GET /v1/**\n    allow graphql query");
    let new = ws(
        "    allow GET /v1/**\n    allow graphql query\n    persisted h1 query name Viewer field viewer",
    );
    let m = r#"{"type":"subscribe","id":"1","payload":{"id":"h1"}}"#;
    assert_eq!(text_verdict(&old, m), Eval::Deny);
    assert_eq!(text_verdict(&new, m), Eval::Allow);
    let r = assert_widened_by(&old, &new, "text");
    assert_eq!(text_witness(&r), m);
}

#[test]
fn lifecycle_messages_newly_let_through_are_a_widening() {
    // OLD allows the upgrade and no text; NEW's GraphQL rules deny every
    // operation but let lifecycle messages through, as OpenShell does.
    let old = ws("    allow GET /v1/**");
    let new = ws("    allow GET /v1/**\n    deny graphql *");
    assert_eq!(text_verdict(&new, r#"{"type":"ping"}"#), Eval::Allow);
    let r = assert_widened_by(&old, &new, "text");
    assert_eq!(text_witness(&r), r#"{"type":"ping"}"#);
}

#[test]
fn a_deny_websocket_text_rule_in_audit_mode_lets_unregistered_hashes_through() {
    // An operation matching a `deny WEBSOCKET_TEXT` rule is denied before
    // the registry is read; in audit mode that lets through a hash the
    // registry would have refused.
    let rules = "    allow GET /v1/**\n    allow graphql *\n    persisted h1 query field viewer";
    let old = endpoint("websocket audit", rules);
    let new = endpoint(
        "websocket audit",
        &format!("{rules}\n    deny WEBSOCKET_TEXT /v1/**"),
    );
    let m = r#"{"type":"subscribe","id":"1","payload":{"id":"h9"}}"#;
    assert_eq!(text_verdict(&old, m), Eval::Deny);
    assert_eq!(text_verdict(&new, m), Eval::Audit);
    let r = assert_widened_by(&old, &new, "text");
    assert_eq!(
        text_witness(&r),
        r#"{"type":"subscribe","id":"1","payload":{"id":"unregistered0"}}"#
    );
}

#[test]
fn graphql_over_websocket_turned_to_audit_lets_denied_operations_through() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription");
    let new = endpoint(
        "websocket audit",
        "    allow GET /v1/**\n    allow graphql subscription",
    );
    let m = subscribe("mutation { x }");
    assert_eq!(text_verdict(&new, &m), Eval::Audit);
    // A text that is no GraphQL-over-WebSocket message is refused in
    // audit mode too.
    assert_eq!(text_verdict(&new, "hello"), Eval::Deny);
    let r = assert_widened_by(&old, &new, "text");
    for f in of_kind(&r, "text") {
        let Some(Probe::Text(t)) = f.witness.probe() else {
            panic!("{f:#?}")
        };
        assert!(t.starts_with(r#"{"type":"subscribe""#), "{t}");
    }
}

#[test]
fn a_message_limit_no_operation_message_fits_is_not_certified() {
    // Under 30 bytes no `subscribe` message fits, so the change adds no
    // reach; the model cannot show that, and says so instead of
    // certifying it.
    let old = ws("    allow GET /v1/**\n    allow graphql subscription\n    body_limit 30");
    let new =
        ws("    allow GET /v1/**\n    allow graphql subscription mutation\n    body_limit 30");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:#?}");
    let why = r.inconclusive.as_deref().unwrap_or_default();
    assert!(why.contains("longer than 30 bytes"), "{why}");
}

#[test]
fn a_witness_moves_to_a_size_class_its_message_fits() {
    // The region holds messages of every size up to 4,096 bytes, the
    // first class (up to 64) among them, where no `subscribe` message
    // fits; the witness is taken from the next class.
    let old = ws("    allow GET /v1/**\n    allow graphql subscription\n    body_limit 64");
    let new =
        ws("    allow GET /v1/**\n    allow graphql subscription mutation\n    body_limit 4096");
    let r = assert_widened_by(&old, &new, "text");
    assert!(r.inconclusive.is_none(), "{r:#?}");
    assert!(
        text_witness(&r).contains("mutation"),
        "{}",
        text_witness(&r)
    );
}

#[test]
fn a_raised_limit_over_websocket_shows_a_padded_operation_message() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription\n    body_limit 1024");
    let new = ws("    allow GET /v1/**\n    allow graphql subscription");
    let r = assert_widened_by(&old, &new, "text");
    let f = of_kind(&r, "text");
    let f = f.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.text_size, Some(1025), "{f:#?}");
    let short = f.witness.websocket_text.as_deref().unwrap_or_default();
    assert!(short.starts_with(r#"{"type":"subscribe""#), "{short}");
}

#[test]
fn a_raised_message_limit_is_a_widening_by_a_message_between_the_limits() {
    let old = ws("    allow * /v1/**\n    body_limit 1024");
    let new = ws("    allow * /v1/**");
    let big = "x".repeat(1025);
    assert_eq!(text_verdict(&old, &big), Eval::Deny);
    assert_eq!(text_verdict(&new, &big), Eval::Allow);
    let r = assert_widened_by(&old, &new, "text");
    let f = of_kind(&r, "text");
    let f = f.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.text_size, Some(1025), "{f:#?}");
    assert!(
        f.witness.request_text().ends_with(
            "--websocket-text-file FILE (FILE: `hello` padded with spaces to 1025 bytes)"
        ),
        "{}",
        f.witness.request_text()
    );
    // Lowered back: nothing new.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}

#[test]
fn two_endpoints_on_a_path_refuse_what_exceeds_the_smaller_limit() {
    let two = |second: &str| {
        compile(&policy(&format!(
            "{CREDENTIAL}\n  allow /usr/bin/agent -> realtime.example.com:443 websocket {{\n    allow * /v1/**\n    body_limit 2048\n  }}\n  allow /usr/bin/agent -> realtime.example.com:443 websocket {{\n    allow * /v1/**\n{second}\n  }}"
        )))
    };
    let old = two("    body_limit 1024");
    let new = two("    body_limit 4096");
    // 1,025 to 2,048 bytes: refused by OLD's second endpoint only.
    assert_eq!(text_verdict(&old, &"x".repeat(1500)), Eval::Deny);
    assert_eq!(text_verdict(&new, &"x".repeat(1500)), Eval::Allow);
    assert_eq!(text_verdict(&new, &"x".repeat(2049)), Eval::Deny);
    let r = assert_widened_by(&old, &new, "text");
    for f in of_kind(&r, "text") {
        assert_eq!(f.witness.text_size, Some(1025), "{f:#?}");
    }
    assert_eq!(diff_bundles(&new, &old).verdict, Verdict::NoNewAccess);
}

#[test]
fn a_tiny_message_limit_gets_a_witness_text_that_fits() {
    let old = ws("    allow GET /v1/**\n    body_limit 3");
    let new = ws("    allow GET /v1/**\n    allow WEBSOCKET_TEXT /v1/**\n    body_limit 3");
    let r = assert_widened_by(&old, &new, "text");
    let f = of_kind(&r, "text");
    let f = f.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.probe(), Some(Probe::Text("hel".to_owned())));
}

#[test]
fn a_websocket_endpoint_beside_an_unchanged_policy_is_not_inconclusive() {
    let b = ws("    allow GET /v1/**\n    allow graphql subscription");
    let r = diff_bundles(&b, &b.clone());
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.findings.is_empty(), "{r:#?}");
}

/// A credential bound to the host guards its binary messages whatever the
/// binding's methods: a `GET` upgrade outside a `methods POST` binding
/// carries no credential, and a binary message is still refused until
/// the route accepts uninspected credentials, as `eval` decides it.
#[test]
fn binary_messages_to_a_credentialed_host_are_guarded_whatever_the_bindings_methods() {
    let post_only = |kind: &str| {
        let credential = CREDENTIAL.replace(
            "    hosts realtime.example.com",
            "    hosts realtime.example.com\n    methods POST",
        );
        compile(&policy(&format!(
            "{credential}\n  allow /usr/bin/agent -> realtime.example.com:443 {kind} {{\n    allow GET /v1/**\n  }}"
        )))
    };
    let binary = |b: &Bundle| {
        let ev = Evaluator::new(b.clone());
        let conn = ev.decide_connection(
            "/usr/bin/agent",
            None,
            Some("realtime.example.com"),
            None,
            443,
        );
        ev.decide_ws_message(
            &conn,
            Some("realtime.example.com"),
            "/v1/chat",
            WsClientMessage::Binary(&[0; 5]),
        )
        .decision
    };
    let old = post_only("websocket");
    let new = post_only("websocket uninspected_credentials");
    assert_eq!((binary(&old), binary(&new)), (Eval::Deny, Eval::Allow));
    // The upgrade carries no credential, so the witness is not replayed
    // with one; the widening is the binary message let through.
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let found = of_kind(&r, "binary");
    let f = found.first().unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.witness.probe(), Some(Probe::Binary(5)));
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}
