//! The evaluator's WebSocket API on policies written in the language: the
//! upgrade, client text messages, GraphQL over WebSocket and binary
//! messages, as the proxy asks about them.

mod support;

use policy_bundle::eval::{
    DEFAULT_MESSAGE_LIMIT, Decision, Evaluator, Reason, Verdict, WsClientMessage, WsRelay,
};
use support::compile;

const RT: &str = "realtime.example.com";
const API: &str = "api.example.com";
const AGENT: &str = "/usr/bin/agent";

const POLICY: &str = r#"policy "ws" {
  allow /usr/bin/agent -> realtime.example.com:443 websocket {
    allow GET /v1/realtime/**
    allow WEBSOCKET_TEXT /v1/realtime/**
    deny WEBSOCKET_TEXT /v1/realtime/admin/**
  }
  allow /usr/bin/agent -> api.example.com:443 websocket {
    allow GET /graphql
    allow graphql subscription field messageAdded
    allow graphql query field viewer
    deny graphql query field secret*
  }
  allow /usr/bin/agent -> audit.example.com:443 websocket audit {
    allow GET /ws
  }
  allow /usr/bin/agent -> rest.example.com:443 http read-only
}
"#;

/// The line of the rule blame names (0 when none).
fn line(d: &Decision) -> u32 {
    d.rule.as_ref().map_or(0, |o| o.line)
}

fn evaluator(text: &str) -> Evaluator {
    Evaluator::new(compile("ws-eval", text))
}

fn upgrade(ev: &Evaluator, host: &str, target: &str) -> (Option<WsRelay>, Decision) {
    let conn = ev.decide_connection(AGENT, None, Some(host), None, 443);
    assert!(conn.allowed(), "{}", conn.reason);
    (
        ev.websocket(&conn, target),
        ev.decide_upgrade(&conn, Some(host), target),
    )
}

fn message(ev: &Evaluator, host: &str, target: &str, m: WsClientMessage<'_>) -> Decision {
    let conn = ev.decide_connection(AGENT, None, Some(host), None, 443);
    assert!(conn.allowed(), "{}", conn.reason);
    ev.decide_ws_message(&conn, Some(host), target, m)
}

fn text(ev: &Evaluator, host: &str, target: &str, t: &str) -> Decision {
    message(ev, host, target, WsClientMessage::Text(t))
}

#[test]
fn websocket_is_some_only_where_a_websocket_endpoint_takes_part() {
    let ev = evaluator(POLICY);
    let (relay, _) = upgrade(&ev, RT, "/v1/realtime/chat");
    assert_eq!(
        relay,
        Some(WsRelay {
            message_limit: DEFAULT_MESSAGE_LIMIT
        })
    );
    assert_eq!(DEFAULT_MESSAGE_LIMIT, 4 * 1024 * 1024);
    let conn = ev.decide_connection(AGENT, None, Some("rest.example.com"), None, 443);
    assert_eq!(ev.websocket(&conn, "/v1/realtime/chat"), None);
}

#[test]
fn the_upgrade_is_judged_by_get_rules() {
    let ev = evaluator(POLICY);
    let (_, d) = upgrade(&ev, RT, "/v1/realtime/chat?model=x");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(line(&d), 3);
    let (_, d) = upgrade(&ev, RT, "/v2/other");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("matches no allow rule"), "{}", d.reason);
}

#[test]
fn a_plain_request_on_a_websocket_endpoint_is_refused() {
    let ev = evaluator(POLICY);
    let conn = ev.decide_connection(AGENT, None, Some(RT), None, 443);
    let d = ev.decide_request(&conn, Some(RT), "GET", "/v1/realtime/chat");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(
        d.reason.contains("only WebSocket upgrade requests"),
        "{}",
        d.reason
    );
    // Audit mode does not let it through either.
    let conn = ev.decide_connection(AGENT, None, Some("audit.example.com"), None, 443);
    let d = ev.decide_request(&conn, Some("audit.example.com"), "GET", "/ws");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
}

#[test]
fn text_messages_by_websocket_text_rules_deny_wins() {
    let ev = evaluator(POLICY);
    let d = text(&ev, RT, "/v1/realtime/chat", "hello");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(line(&d), 4);
    assert_eq!(d.credential, None);
    let d = text(&ev, RT, "/v1/realtime/admin/x", "hello");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert_eq!(line(&d), 5);
    assert!(d.reason.contains("deny rule"), "{}", d.reason);
}

#[test]
fn audit_mode_lets_unmatched_messages_through_logged() {
    let ev = evaluator(POLICY);
    let d = text(&ev, "audit.example.com", "/ws", "hello");
    assert_eq!(d.decision, Verdict::Audit, "{}", d.reason);
    let (_, d) = upgrade(&ev, "audit.example.com", "/elsewhere");
    assert_eq!(d.decision, Verdict::Audit, "{}", d.reason);
}

fn subscribe(query: &str) -> String {
    serde_json::json!({"type": "subscribe", "id": "1", "payload": {"query": query}}).to_string()
}

#[test]
fn graphql_over_websocket_operations_lifecycle_and_others() {
    let ev = evaluator(POLICY);
    let (relay, d) = upgrade(&ev, API, "/graphql");
    assert!(relay.is_some());
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);

    let d = text(
        &ev,
        API,
        "/graphql",
        &subscribe("subscription { messageAdded { id } }"),
    );
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(line(&d), 9);
    assert!(d.graphql.is_some());

    let d = text(
        &ev,
        API,
        "/graphql",
        &subscribe("mutation { deleteEverything }"),
    );
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("mutation"), "{}", d.reason);

    let d = text(&ev, API, "/graphql", &subscribe("query { secretKeys }"));
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert_eq!(line(&d), 11);

    for lifecycle in [
        r#"{"type":"connection_init"}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"complete","id":"1"}"#,
    ] {
        let d = text(&ev, API, "/graphql", lifecycle);
        assert_eq!(d.decision, Verdict::Allow, "{lifecycle}: {}", d.reason);
        assert!(d.reason.contains("lifecycle"), "{}", d.reason);
    }

    let d = text(&ev, API, "/graphql", r#"{"type":"next","id":"1"}"#);
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("not supported"), "{}", d.reason);
    let d = text(&ev, API, "/graphql", "not json");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("refused"), "{}", d.reason);
}

#[test]
fn unreadable_graphql_messages_are_denied_in_audit_mode_too() {
    let ev = evaluator(
        r#"policy "ws" {
  allow /usr/bin/agent -> api.example.com:443 websocket audit {
    allow GET /graphql
    allow graphql query
  }
}
"#,
    );
    let d = text(&ev, API, "/graphql", "{");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    let d = text(&ev, API, "/graphql", &subscribe("mutation { x }"));
    assert_eq!(d.decision, Verdict::Audit, "{}", d.reason);
}

#[test]
fn binary_messages_pass_unless_a_credential_is_bound_to_the_host() {
    let ev = evaluator(POLICY);
    let d = message(
        &ev,
        RT,
        "/v1/realtime/chat",
        WsClientMessage::Binary(&[0, 1, 2]),
    );
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert!(d.reason.contains("binary message relayed"), "{}", d.reason);

    let credentialed = |flag: &str| {
        format!(
            r#"policy "ws" {{
  credential token {{
    secret env TOKEN
    inject header Authorization "Bearer {{secret}}"
    hosts realtime.example.com
  }}
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write {flag}
}}
"#
        )
    };
    let ev = evaluator(&credentialed(""));
    let (_, up) = upgrade(&ev, RT, "/v1/realtime/chat");
    assert_eq!(up.decision, Verdict::Allow, "{}", up.reason);
    assert_eq!(up.credential.as_deref(), Some("token"));
    let d = message(&ev, RT, "/v1/realtime/chat", WsClientMessage::Binary(b"x"));
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("credential `token`"), "{}", d.reason);
    let d = text(&ev, RT, "/v1/realtime/chat", "hello");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(d.credential, None);

    let ev = evaluator(&credentialed("uninspected_credentials"));
    let d = message(&ev, RT, "/v1/realtime/chat", WsClientMessage::Binary(b"x"));
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
}

/// A client text message carrying a credential placeholder ends a
/// credentialed connection: placeholders are not replaced inside
/// messages on a rule without `websocket_credential_rewrite`, and OpenShell (with it off) fails
/// closed. Where no credential applies, or the rule accepts uninspected
/// credentials, the message is judged by the rules as any other.
#[test]
fn a_placeholder_in_a_text_message_is_refused_on_a_credentialed_connection() {
    let credentialed = |flag: &str| {
        format!(
            r#"policy "ws" {{
  credential token {{
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts realtime.example.com
  }}
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write {flag}
  allow /usr/bin/agent -> other.example.com:443 websocket read-write
}}
"#
        )
    };
    let frame =
        r#"{"op":2,"d":{"token":"openshell-placeholder-token-0123456789abcdef0123456789abcdef"}}"#;
    let ev = evaluator(&credentialed(""));
    let d = text(&ev, RT, "/v1/realtime/chat", frame);
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(
        d.reason.contains("credential placeholder") && d.reason.contains("`token`"),
        "{}",
        d.reason
    );
    let d = text(&ev, RT, "/v1/realtime/chat", r#"{"op":2}"#);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    let d = text(&ev, "other.example.com", "/v1/realtime/chat", frame);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);

    let ev = evaluator(&credentialed("uninspected_credentials"));
    let d = text(&ev, RT, "/v1/realtime/chat", frame);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
}

/// With `websocket_credential_rewrite`, a text message holding the
/// placeholder of a credential whose binding covers the upgrade is judged
/// by the rules as any other, and the decision says the proxy replaces it
/// (naming the credential); a placeholder of another host's credential,
/// or of none, is refused whatever the rules, since replacing it would
/// hand this host another host's secret. Binary messages stay refused.
#[test]
fn websocket_credential_rewrite_replaces_only_the_hosts_placeholders() {
    let ev = evaluator(
        r#"policy "ws" {
  credential token {
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts realtime.example.com
    methods GET
  }
  credential other {
    secret env OTHER
    placeholder env OTHER
    inject replace
    hosts other.example.com
  }
  allow /usr/bin/agent -> realtime.example.com:443 websocket websocket_credential_rewrite {
    allow GET /v1/**
    allow WEBSOCKET_TEXT /v1/realtime/**
  }
  allow /usr/bin/agent -> other.example.com:443 websocket read-write
}
"#,
    );
    let ours = r#"{"token":"openshell-placeholder-token-0123456789abcdef0123456789abcdef"}"#;
    let d = text(&ev, RT, "/v1/realtime/chat", ours);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(d.credential.as_deref(), Some("token"));
    assert!(
        matches!(&d.reason, Reason::Rewritten { credentials, .. } if credentials == &["token"]),
        "{:?}",
        d.reason
    );
    assert!(d.reason.contains("replaced by its secret"), "{}", d.reason);
    assert_eq!(line(&d), 17);

    // Still judged by the rules: no WEBSOCKET_TEXT rule covers /v1/other.
    let d = text(&ev, RT, "/v1/other", ours);
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert_eq!(d.credential, None);

    // Without a placeholder, nothing is replaced.
    let d = text(&ev, RT, "/v1/realtime/chat", "hello");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    assert_eq!(d.credential, None);
    assert!(
        !matches!(d.reason, Reason::Rewritten { .. }),
        "{}",
        d.reason
    );

    for foreign in [
        r#"{"token":"openshell-placeholder-other-0123456789abcdef0123456789abcdef"}"#,
        r#"{"token":"openshell-placeholder-nobody-0123456789abcdef0123456789abcdef"}"#,
        r#"{"a":"openshell-placeholder-token-0123456789abcdef0123456789abcdef","b":"openshell-placeholder-other-0123456789abcdef0123456789abcdef"}"#,
    ] {
        let d = text(&ev, RT, "/v1/realtime/chat", foreign);
        assert_eq!(d.decision, Verdict::Deny, "{foreign}: {}", d.reason);
        assert!(
            d.reason
                .contains("not one of a credential bound to this host"),
            "{}",
            d.reason
        );
        assert_eq!(d.credential, None);
    }

    let d = message(&ev, RT, "/v1/realtime/chat", WsClientMessage::Binary(b"x"));
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("binary message refused"), "{}", d.reason);

    // Off, even the host's own placeholder ends the connection.
    let own = r#"{"t":"openshell-placeholder-other-0123456789abcdef0123456789abcdef"}"#;
    let d = text(&ev, "other.example.com", "/x", own);
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("does not replace"), "{}", d.reason);
}

/// OpenShell guards a credentialed endpoint (a host a credential is bound
/// to) as a whole: a `GET` upgrade outside a `methods POST` binding
/// carries no credential, yet a text message with a placeholder and any
/// binary message still end the connection.
#[test]
fn a_credentialed_host_is_guarded_even_when_the_upgrade_carried_no_credential() {
    let policy = |flag: &str| {
        format!(
            r#"policy "ws" {{
  credential token {{
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts realtime.example.com
    methods POST
  }}
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write {flag}
}}
"#
        )
    };
    let frame = r#"{"token":"openshell-placeholder-token-0123456789abcdef0123456789abcdef"}"#;
    let ev = evaluator(&policy(""));
    let (_, up) = upgrade(&ev, RT, "/v1/realtime/chat");
    assert_eq!(up.decision, Verdict::Allow, "{}", up.reason);
    assert_eq!(up.credential, None, "a GET is outside the binding");
    let d = text(&ev, RT, "/v1/realtime/chat", frame);
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert_eq!(
        d.reason.to_string(),
        "message on /v1/realtime/chat: text message refused: it carries a credential placeholder, which this rule does not replace, and credential `token` is bound to this host (add `websocket_credential_rewrite` to the rule to have placeholders replaced by their secrets, or `uninspected_credentials` to send them on as they are)"
    );
    let d = message(&ev, RT, "/v1/realtime/chat", WsClientMessage::Binary(b"x"));
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(
        d.reason
            .contains("credential `token` is bound to this host"),
        "{}",
        d.reason
    );
    let d = text(&ev, RT, "/v1/realtime/chat", "hello");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);

    let ev = evaluator(&policy("uninspected_credentials"));
    let d = text(&ev, RT, "/v1/realtime/chat", frame);
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
    let d = message(&ev, RT, "/v1/realtime/chat", WsClientMessage::Binary(b"x"));
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
}

#[test]
fn presets_expand_as_openshell_expands_them() {
    let ev = evaluator(
        r#"policy "ws" {
  allow /usr/bin/agent -> ro.example.com:443 websocket read-only
  allow /usr/bin/agent -> rw.example.com:443 websocket read-write
  allow /usr/bin/agent -> full.example.com:443 websocket full
}
"#,
    );
    for (host, text_allowed) in [
        ("ro.example.com", false),
        ("rw.example.com", true),
        ("full.example.com", true),
    ] {
        let (_, up) = upgrade(&ev, host, "/any/path");
        assert_eq!(up.decision, Verdict::Allow, "{host}: {}", up.reason);
        let d = text(&ev, host, "/any/path", "hi");
        let want = if text_allowed {
            Verdict::Allow
        } else {
            Verdict::Deny
        };
        assert_eq!(d.decision, want, "{host}: {}", d.reason);
    }
}

#[test]
fn body_limit_sets_the_message_limit() {
    let ev = evaluator(
        r#"policy "ws" {
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write {
    body_limit 8
  }
}
"#,
    );
    let (relay, _) = upgrade(&ev, RT, "/x");
    assert_eq!(relay, Some(WsRelay { message_limit: 8 }));
    let d = text(&ev, RT, "/x", "123456789");
    assert_eq!(d.decision, Verdict::Deny, "{}", d.reason);
    assert!(d.reason.contains("message limit of 8"), "{}", d.reason);
    let d = text(&ev, RT, "/x", "12345678");
    assert_eq!(d.decision, Verdict::Allow, "{}", d.reason);
}
