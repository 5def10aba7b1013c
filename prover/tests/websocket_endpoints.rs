//! WebSocket endpoints: the prover does not model how they judge the
//! upgrade and client messages, so it treats such an endpoint as allowing
//! every request it sees and never certifies a change to the network rules
//! of a policy that has one. These tests hold it to that: a real widening
//! (text messages, GraphQL mutations over WebSocket, a new upgrade path)
//! is never reported as "no new access".

mod support;

use policy_lang::bundle::Bundle;
use policy_lang::eval::{Evaluator, Verdict as Eval, WsClientMessage};
use prover::Verdict;
use support::*;

fn ws(rules: &str) -> Bundle {
    compile(&policy(&format!(
        "  allow /usr/bin/agent -> realtime.example.com:443 websocket {{\n{rules}\n  }}"
    )))
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

fn assert_not_certified(old: &Bundle, new: &Bundle) {
    let r = diff_bundles(old, new);
    assert_ne!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    if r.verdict == Verdict::Inconclusive {
        let why = r.inconclusive.as_deref().unwrap_or_default();
        assert!(
            why.contains("`websocket` endpoints judge WebSocket upgrades"),
            "{why}"
        );
    }
}

#[test]
fn text_messages_on_a_path_are_not_certified_away() {
    let old = ws("    allow GET /v1/**");
    let new = ws("    allow GET /v1/**\n    allow WEBSOCKET_TEXT /v1/**");
    // The evaluator sees the widening.
    assert_eq!(text_verdict(&old, "hi"), Eval::Deny);
    assert_eq!(text_verdict(&new, "hi"), Eval::Allow);
    assert_not_certified(&old, &new);
}

#[test]
fn graphql_mutations_over_websocket_are_not_certified_away() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription");
    let new = ws("    allow GET /v1/**\n    allow graphql subscription mutation");
    let m = r#"{"type":"subscribe","id":"1","payload":{"query":"mutation { x }"}}"#;
    assert_eq!(text_verdict(&old, m), Eval::Deny);
    assert_eq!(text_verdict(&new, m), Eval::Allow);
    assert_not_certified(&old, &new);
}

#[test]
fn a_websocket_endpoint_beside_an_unchanged_policy_is_not_inconclusive() {
    let b = ws("    allow GET /v1/**");
    let r = diff_bundles(&b, &b.clone());
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.findings.is_empty(), "{r:#?}");
}
