//! `eval` of a WebSocket upgrade and of client messages after it:
//! `--websocket`, `ws://`/`wss://` URLs, `--websocket-text`,
//! `--websocket-text-file` and `--websocket-binary`, with the same JSON
//! contract as every other `eval`.
#![expect(clippy::unwrap_used, reason = "test harness")]

mod common;

use common::{code, json, run};

const POLICY: &str = "policy \"ws\" {
  allow /usr/bin/agent -> realtime.example.com:443 websocket {
    allow GET /v1/realtime/**
    allow WEBSOCKET_TEXT /v1/realtime/**
    deny WEBSOCKET_TEXT /v1/realtime/admin/**
  }
  allow /usr/bin/agent -> api.example.com:443 websocket {
    allow GET /graphql
    allow graphql subscription field messageAdded
  }
  allow /usr/bin/agent -> rest.example.com:443 http read-only
}
";

fn policy() -> String {
    let path = std::env::temp_dir().join(format!("osp-cli-ws-{}.policy", std::process::id()));
    std::fs::write(&path, POLICY).unwrap();
    path.display().to_string()
}

fn eval(extra: &[&str]) -> serde_json::Value {
    let p = policy();
    let mut args = vec![
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/agent",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    for key in ["decision", "route", "rule", "credential", "reason"] {
        assert!(v.get(key).is_some(), "missing `{key}`: {v}");
    }
    v
}

#[test]
fn upgrades_by_flag_or_by_scheme() {
    for args in [
        &[
            "--url",
            "https://realtime.example.com/v1/realtime/chat",
            "--websocket",
        ][..],
        &["--url", "wss://realtime.example.com/v1/realtime/chat"][..],
    ] {
        let v = eval(args);
        assert_eq!(v["decision"], "allow", "{v}");
        assert_eq!(v["route"], "l7");
        assert_eq!(v["rule"]["line"], 3);
    }
    // Without an upgrade, a websocket endpoint refuses the request.
    let v = eval(&["--url", "https://realtime.example.com/v1/realtime/chat"]);
    assert_eq!(v["decision"], "deny", "{v}");
    // Where no websocket endpoint is, upgrades are refused.
    let v = eval(&["--url", "wss://rest.example.com/anything"]);
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("no websocket endpoint"),
        "{v}"
    );
}

#[test]
fn text_and_binary_messages() {
    let v = eval(&[
        "--url",
        "wss://realtime.example.com/v1/realtime/chat",
        "--websocket-text",
        "hello",
    ]);
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["rule"]["line"], 4);
    let v = eval(&[
        "--url",
        "wss://realtime.example.com/v1/realtime/admin/x",
        "--websocket-text",
        "hello",
    ]);
    assert_eq!(v["decision"], "deny", "{v}");
    assert_eq!(v["rule"]["line"], 5);
    // A message on a refused upgrade is refused with it.
    let v = eval(&[
        "--url",
        "wss://realtime.example.com/v2/chat",
        "--websocket-text",
        "hello",
    ]);
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .starts_with("the upgrade is refused"),
        "{v}"
    );

    let msg = std::env::temp_dir().join(format!("osp-cli-ws-{}.bin", std::process::id()));
    std::fs::write(&msg, [0u8, 1, 2]).unwrap();
    let v = eval(&[
        "--url",
        "wss://realtime.example.com/v1/realtime/chat",
        "--websocket-binary",
        &msg.display().to_string(),
    ]);
    assert_eq!(v["decision"], "allow", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("binary"), "{v}");

    // A text message from a file: over the 4 MiB default limit, one too
    // long for an argument (Linux caps one at 128 KiB).
    let text = std::env::temp_dir().join(format!("osp-cli-ws-{}.txt", std::process::id()));
    let url = "wss://realtime.example.com/v1/realtime/chat";
    for (size, decision) in [(4 << 20, "allow"), ((4 << 20) + 1, "deny")] {
        let mut t = b"hello".to_vec();
        t.resize(size, b' ');
        std::fs::write(&text, t).unwrap();
        let v = eval(&[
            "--url",
            url,
            "--websocket-text-file",
            &text.display().to_string(),
        ]);
        assert_eq!(v["decision"], decision, "{size}: {v}");
    }
    std::fs::write(&text, [0xff_u8, 0xfe]).unwrap();
    let p = policy();
    let path = text.display().to_string();
    let o = run(&[
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/agent",
        "--url",
        url,
        "--websocket-text-file",
        &path,
    ]);
    assert_eq!(code(&o), 2);
}

#[test]
fn graphql_over_websocket_messages() {
    let sub = |q: &str| {
        serde_json::json!({"type": "subscribe", "id": "1", "payload": {"query": q}}).to_string()
    };
    let v = eval(&[
        "--url",
        "wss://api.example.com/graphql",
        "--websocket-text",
        &sub("subscription { messageAdded { id } }"),
    ]);
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["graphql"]["operations"][0]["kind"], "subscription");
    let v = eval(&[
        "--url",
        "wss://api.example.com/graphql",
        "--websocket-text",
        &sub("mutation { deleteAll }"),
    ]);
    assert_eq!(v["decision"], "deny", "{v}");
}

#[test]
fn an_upgrade_has_no_method_or_body() {
    let p = policy();
    let o = run(&[
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/agent",
        "--url",
        "wss://realtime.example.com/v1/realtime/chat",
        "--method",
        "POST",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["decision"], "error", "{v}");
}

/// With `websocket_credential_rewrite`, `eval` lets through a text message
/// holding the placeholder of the host's credential and says it is
/// replaced, naming the credential; another host's placeholder is refused.
#[test]
fn a_rewritten_placeholder_is_named_in_the_decision() {
    let path = std::env::temp_dir().join(format!("osp-cli-ws-rw-{}.policy", std::process::id()));
    std::fs::write(
        &path,
        "policy \"ws\" {
  credential token {
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts realtime.example.com
  }
  credential far {
    secret env FAR
    placeholder env FAR
    inject replace
    hosts far.example.com
  }
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite
}
",
    )
    .unwrap();
    let p = path.display().to_string();
    let ask = |text: &str| {
        let o = run(&[
            "eval",
            "--policy",
            &p,
            "--binary",
            "/usr/bin/agent",
            "--format",
            "json",
            "--url",
            "wss://realtime.example.com/v1/chat",
            "--websocket-text",
            text,
        ]);
        assert_eq!(code(&o), 0);
        json(&o)
    };
    let v = ask(r#"{"t":"openshell-placeholder-token-0123456789abcdef0123456789abcdef"}"#);
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["credential"], "token", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("replaced by its secret"),
        "{v}"
    );
    let v = ask(r#"{"t":"openshell-placeholder-far-0123456789abcdef0123456789abcdef"}"#);
    assert_eq!(v["decision"], "deny", "{v}");
    assert_eq!(v["credential"], serde_json::Value::Null, "{v}");
}

/// A message rides on its upgrade: with `websocket_credential_rewrite`, a
/// placeholder is replaced only when its credential's binding covers the
/// upgrade (`GET` on its path). Upgraded on a path outside the binding's
/// `paths`, or for a credential whose `methods` leave out `GET`, a message
/// carrying it is refused, never replaced (the proxy closes with 1008).
#[test]
fn a_placeholder_is_replaced_only_inside_its_binding() {
    let path =
        std::env::temp_dir().join(format!("osp-cli-ws-binding-{}.policy", std::process::id()));
    std::fs::write(
        &path,
        "policy \"ws\" {
  credential chat {
    secret env CHAT
    placeholder env CHAT
    inject replace
    hosts realtime.example.com
    paths /v1/chat/**
  }
  credential poster {
    secret env POSTER
    placeholder env POSTER
    inject replace
    hosts realtime.example.com
    methods POST
  }
  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite
}
",
    )
    .unwrap();
    let p = path.display().to_string();
    let ask = |upgrade: &str, credential: &str| {
        let url = format!("wss://realtime.example.com{upgrade}");
        let text = format!(
            r#"{{"t":"openshell-placeholder-{credential}-0123456789abcdef0123456789abcdef"}}"#
        );
        let o = run(&[
            "eval",
            "--policy",
            &p,
            "--binary",
            "/usr/bin/agent",
            "--format",
            "json",
            "--url",
            &url,
            "--websocket-text",
            &text,
        ]);
        assert_eq!(code(&o), 0);
        json(&o)
    };
    let v = ask("/v1/chat/room", "chat");
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["credential"], "chat", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("replaced by its secret"),
        "{v}"
    );
    for (upgrade, credential) in [("/v1/admin", "chat"), ("/v1/chat/room", "poster")] {
        let v = ask(upgrade, credential);
        assert_eq!(v["decision"], "deny", "{upgrade} {credential}: {v}");
        assert_eq!(v["credential"], serde_json::Value::Null, "{v}");
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "the placeholder of credential `{credential}`, whose binding does not cover the upgrade"
            )),
            "{v}"
        );
    }
}
