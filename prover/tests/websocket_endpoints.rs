//! WebSocket endpoints: the prover models the upgrade and the client
//! messages after it (text, binary, over the limit) as request kinds only
//! websocket endpoints judge, so a new text message, a newly allowed
//! upgrade or a binary message on a credentialed connection is a widening
//! whose witness replays through `eval --websocket` / `--websocket-text`
//! / `--websocket-binary`, and an unchanged or narrowed endpoint is
//! certified; messages between two message limits show a raised limit.
//! GraphQL-over-WebSocket messages are not modelled: a change to a policy
//! with one is never certified.

mod support;

use policy_lang::bundle::Bundle;
use policy_lang::eval::{Evaluator, Verdict as Eval, WsClientMessage};
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

#[test]
fn graphql_mutations_over_websocket_are_not_certified_away() {
    let old = ws("    allow GET /v1/**\n    allow graphql subscription");
    let new = ws("    allow GET /v1/**\n    allow graphql subscription mutation");
    let m = r#"{"type":"subscribe","id":"1","payload":{"query":"mutation { x }"}}"#;
    assert_eq!(text_verdict(&old, m), Eval::Deny);
    assert_eq!(text_verdict(&new, m), Eval::Allow);
    let r = diff_bundles(&old, &new);
    assert_ne!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    if r.verdict == Verdict::Inconclusive {
        let why = r.inconclusive.as_deref().unwrap_or_default();
        assert!(
            why.contains("`websocket` endpoints judge GraphQL-over-WebSocket messages"),
            "{why}"
        );
    }
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
