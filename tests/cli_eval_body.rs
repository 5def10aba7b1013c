//! `eval` with a request body: `--graphql`, `--body`, `--jsonrpc-method`
//! and `--tool`, judged through the endpoints that read bodies, with the
//! same JSON contract as every other `eval`.
#![expect(clippy::unwrap_used, reason = "test harness")]

mod common;

use std::io::Write as _;
use std::process::Stdio;

use common::{bin, code, json, run};

const POLICY: &str = "policy \"bodies\" {
  allow /usr/bin/agent -> api.example.com:443 graphql {
    path /graphql
    allow graphql query
    deny graphql mutation field deleteRepository
  }
  allow /usr/bin/agent -> mcp.example.com:443 mcp {
    allow rpc initialize tools/list
    allow rpc tools/call tool search_*
  }
}
";

fn policy() -> String {
    let path = std::env::temp_dir().join(format!("osp-cli-bodies-{}.policy", std::process::id()));
    std::fs::write(&path, POLICY).unwrap();
    path.display().to_string()
}

fn eval(extra: &[&str]) -> std::process::Output {
    eval_with(&policy(), extra)
}

/// `eval` of `/usr/bin/agent` under the policy at `policy`, as JSON.
fn eval_with(policy: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "eval",
        "--policy",
        policy,
        "--binary",
        "/usr/bin/agent",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn contract(v: &serde_json::Value) {
    for key in ["decision", "route", "rule", "credential", "reason"] {
        assert!(v.get(key).is_some(), "missing `{key}`: {v}");
    }
}

#[test]
fn graphql_documents_are_posted_and_judged() {
    let o = eval(&[
        "--url",
        "https://api.example.com/graphql",
        "--graphql",
        "query Q { viewer { login } }",
    ]);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    contract(&v);
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["route"], "l7");
    assert_eq!(v["rule"]["line"], 4);
    assert!(
        v["reason"].as_str().unwrap().starts_with("POST /graphql"),
        "{v}"
    );

    let o = eval(&[
        "--url",
        "https://api.example.com/graphql",
        "--graphql",
        "query A { viewer { login } } mutation B { deleteRepository(id: 1) { id } }",
        "--graphql-operation-name",
        "B",
    ]);
    let v = json(&o);
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["rule"]["line"], 5);
    assert!(
        v["reason"].as_str().unwrap().contains("deleteRepository"),
        "{v}"
    );

    // `--method` still decides: a GET with a body is refused.
    let v = json(&eval(&[
        "--url",
        "https://api.example.com/graphql",
        "--method",
        "GET",
        "--graphql",
        "{ viewer { login } }",
    ]));
    assert_eq!(v["decision"], "deny");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("must not carry a body"),
        "{v}"
    );
}

#[test]
fn raw_bodies_come_from_a_file_or_stdin() {
    let path = std::env::temp_dir().join(format!("osp-cli-body-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"{"query":"mutation { deleteRepository(id: 1) { id } }"}"#,
    )
    .unwrap();
    let v = json(&eval(&[
        "--url",
        "https://api.example.com/graphql",
        "--body",
        &path.display().to_string(),
    ]));
    assert_eq!(v["decision"], "deny");

    let p = policy();
    let mut child = bin()
        .args([
            "eval",
            "--policy",
            &p,
            "--binary",
            "/usr/bin/agent",
            "--format",
            "json",
            "--url",
            "https://mcp.example.com/mcp",
            "--body",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0);
    let v = json(&o);
    contract(&v);
    assert_eq!(v["decision"], "allow");
}

#[test]
fn jsonrpc_calls_and_batches() {
    let url = "https://mcp.example.com/mcp";
    let v = json(&eval(&["--url", url, "--jsonrpc-method", "initialize"]));
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["rule"]["line"], 8);
    let v = json(&eval(&[
        "--url",
        url,
        "--jsonrpc-method",
        "tools/call",
        "--tool",
        "search_web",
    ]));
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["rule"]["line"], 9);
    let v = json(&eval(&[
        "--url",
        url,
        "--jsonrpc-method",
        "tools/call",
        "--tool",
        "delete_all",
    ]));
    assert_eq!(v["decision"], "deny");
    // Repeated: one batch, denied whole when one call is.
    let v = json(&eval(&[
        "--url",
        url,
        "--jsonrpc-method",
        "tools/list",
        "--jsonrpc-method",
        "tools/call",
        "--tool",
        "delete_all",
    ]));
    assert_eq!(v["decision"], "deny");
    assert!(
        v["reason"].as_str().unwrap().contains("batch call 2 of 2"),
        "{v}"
    );
    // Without a body the MCP endpoint sees an empty GET: not a call.
    let v = json(&eval(&["--url", url, "--method", "POST"]));
    assert_eq!(v["decision"], "deny");
}

#[test]
fn body_flags_refuse_what_does_not_fit() {
    let url = "https://mcp.example.com/mcp";
    let o = eval(&[
        "--url",
        url,
        "--jsonrpc-method",
        "tools/list",
        "--tool",
        "search_web",
    ]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["decision"], "error");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("--jsonrpc-method tools/call"),
        "{v}"
    );

    let o = eval(&["--url", url, "--graphql", "{ viewer }", "--body", "x.json"]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["decision"], "error");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("`--graphql` and `--body` both give the request body"),
        "{v}"
    );

    let o = eval(&["--url", url, "--body", "/nonexistent/body.json"]);
    assert_eq!(code(&o), 2);
    assert!(
        json(&o)["reason"]
            .as_str()
            .unwrap()
            .contains("cannot read the body")
    );

    // A body needs a request: `--host`/`--port` is a connection only.
    let o = eval(&[
        "--host",
        "api.example.com",
        "--port",
        "443",
        "--graphql",
        "{ viewer }",
    ]);
    assert_eq!(code(&o), 2);
    // `--graphql-operation-name` needs `--graphql`.
    let o = eval(&["--url", url, "--graphql-operation-name", "Q"]);
    assert_eq!(code(&o), 2);
}

/// A placeholder in a REST body, in a sandbox with credentials: refused
/// with the reason and code the proxy gives, even to a host no credential
/// is bound to; without the marker the body passes.
#[test]
fn a_placeholder_in_a_rest_body_is_refused_when_the_sandbox_has_credentials() {
    let policy = std::env::temp_dir().join(format!(
        "osp-cli-bodies-placeholder-{}.policy",
        std::process::id()
    ));
    std::fs::write(
        &policy,
        "policy \"p\" {\n  credential token {\n    secret env TOKEN\n    placeholder env TOKEN\n    inject replace\n    hosts api.example.com\n  }\n  allow /usr/bin/agent -> api.example.com:443 http read-write\n  allow /usr/bin/agent -> other.example.com:443 http read-write\n}\n",
    )
    .unwrap();
    let body = std::env::temp_dir().join(format!(
        "osp-cli-bodies-placeholder-{}.json",
        std::process::id()
    ));
    let ask = |url: &str, text: &str| {
        std::fs::write(&body, text).unwrap();
        let o = run(&[
            "eval",
            "--policy",
            &policy.display().to_string(),
            "--binary",
            "/usr/bin/agent",
            "--format",
            "json",
            "--url",
            url,
            "--body",
            &body.display().to_string(),
        ]);
        let v = json(&o);
        contract(&v);
        v
    };
    let marked = r#"{"key":"openshell-placeholder-token-0123456789abcdef0123456789abcdef"}"#;
    for url in [
        "https://api.example.com/v1/items",
        "https://other.example.com/v1/items",
    ] {
        let v = ask(url, marked);
        assert_eq!(v["decision"], "deny", "{v}");
        assert_eq!(v["credential"], serde_json::Value::Null, "{v}");
        assert_eq!(
            v["reason"],
            "a credential placeholder in a request body is never replaced; send it in a header",
            "{v}"
        );
    }
    let v = ask("https://api.example.com/v1/items", r#"{"key":"value"}"#);
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["credential"], "token", "{v}");
}

/// With `request_body_credential_rewrite`, `eval` lets through a JSON or
/// form body holding the placeholder of the host's credential and says it
/// is replaced; another host's placeholder, a placeholder in a body of
/// another type (or none, without `--content-type`), a body that is not
/// UTF-8 and one over 256 KiB are refused, as OpenShell refuses them.
#[test]
fn request_body_credential_rewrite_replaces_only_the_hosts_placeholders() {
    let tmp = |ext: &str| {
        std::env::temp_dir().join(format!(
            "osp-cli-bodies-rewrite-{}.{ext}",
            std::process::id()
        ))
    };
    let policy = tmp("policy");
    std::fs::write(
        &policy,
        "policy \"p\" {\n  credential token {\n    secret env TOKEN\n    placeholder env TOKEN\n    inject replace\n    hosts api.example.com\n  }\n  credential far {\n    secret env FAR\n    placeholder env FAR\n    inject replace\n    hosts far.example.com\n  }\n  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite\n}\n",
    )
    .unwrap();
    let body = tmp("body");
    let ask = |bytes: &[u8], content_type: Option<&str>| {
        std::fs::write(&body, bytes).unwrap();
        let policy = policy.display().to_string();
        let body = body.display().to_string();
        let mut args = vec!["--url", "https://api.example.com/v1/items", "--body", &body];
        if let Some(ct) = content_type {
            args.extend(["--content-type", ct]);
        }
        let o = eval_with(&policy, &args);
        assert_eq!(code(&o), 0);
        let v = json(&o);
        contract(&v);
        v
    };
    let token = "openshell-placeholder-token-0123456789abcdef0123456789abcdef";
    let far = "openshell-placeholder-far-0123456789abcdef0123456789abcdef";
    for (text, ct) in [
        (
            format!(r#"{{"key":"{token}"}}"#),
            "application/json; charset=utf-8",
        ),
        (
            format!("a=1&key={token}"),
            "application/x-www-form-urlencoded",
        ),
        (format!("key {token}"), "text/plain"),
    ] {
        let v = ask(text.as_bytes(), Some(ct));
        assert_eq!(v["decision"], "allow", "{ct}: {v}");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("the placeholder of credential `token` in the request body is replaced by its secret"),
            "{v}"
        );
    }
    let refused = |bytes: &[u8], ct: Option<&str>, code: &str, words: &str| {
        let v = ask(bytes, ct);
        assert_eq!(v["decision"], "deny", "{v}");
        assert_eq!(v["refusal"], code, "{v}");
        assert!(v["reason"].as_str().unwrap().contains(words), "{v}");
    };
    let json_far = format!(r#"{{"key":"{far}"}}"#);
    refused(
        json_far.as_bytes(),
        Some("application/json"),
        "credential_not_bound",
        "not one of a credential bound to this host",
    );
    refused(
        token.as_bytes(),
        Some("application/octet-stream"),
        "credential_not_bound",
        "this one is `application/octet-stream`",
    );
    refused(token.as_bytes(), None, "credential_not_bound", "untyped");
    refused(
        b"\xff\xfe",
        Some("text/plain"),
        "credential_not_bound",
        "not UTF-8",
    );
    refused(
        &vec![b'x'; 256 * 1024 + 1],
        Some("text/plain"),
        "body_too_large",
        "262145 bytes",
    );
    let v = ask(br#"{"key":"value"}"#, Some("application/json"));
    assert_eq!(v["decision"], "allow", "{v}");
}

/// A body is rewritten only with the placeholders of credentials whose
/// binding covers the request (host, method and path), as a header is: a
/// `methods GET` credential's placeholder in a `POST` body, or a `paths
/// /v1/read/**` credential's in a body to `/v1/write`, is refused with
/// `credential_not_bound` and never replaced, so the secret never leaves
/// outside its binding; inside the binding, it is replaced.
#[test]
fn request_body_credential_rewrite_keeps_to_the_credentials_binding() {
    let tmp = |ext: &str| {
        std::env::temp_dir().join(format!(
            "osp-cli-bodies-binding-{}.{ext}",
            std::process::id()
        ))
    };
    let policy = tmp("policy");
    std::fs::write(
        &policy,
        "policy \"p\" {
  credential getter {
    secret env GETTER
    placeholder env GETTER
    inject replace
    hosts api.example.com
    methods GET
  }
  credential reader {
    secret env READER
    placeholder env READER
    inject replace
    hosts api.example.com
    paths /v1/read/**
  }
  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite
}
",
    )
    .unwrap();
    let body = tmp("json");
    let ask = |method: &str, path: &str, placeholder: &str| {
        std::fs::write(&body, format!(r#"{{"key":"{placeholder}"}}"#)).unwrap();
        let policy = policy.display().to_string();
        let body = body.display().to_string();
        let url = format!("https://api.example.com{path}");
        let o = eval_with(
            &policy,
            &[
                "--url",
                &url,
                "--method",
                method,
                "--body",
                &body,
                "--content-type",
                "application/json",
            ],
        );
        assert_eq!(code(&o), 0);
        let v = json(&o);
        contract(&v);
        v
    };
    let getter = "openshell-placeholder-getter-0123456789abcdef0123456789abcdef";
    let reader = "openshell-placeholder-reader-0123456789abcdef0123456789abcdef";
    let refused = |v: &serde_json::Value, credential: &str, request: &str| {
        assert_eq!(v["decision"], "deny", "{v}");
        assert_eq!(v["refusal"], "credential_not_bound", "{v}");
        assert_eq!(v["credential"], serde_json::Value::Null, "{v}");
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "the placeholder of credential `{credential}`, whose binding does not cover {request}"
            )),
            "{v}"
        );
        assert!(
            reason.contains("widen the credential's `methods` or `paths`"),
            "{v}"
        );
    };
    let replaced = |v: &serde_json::Value, credential: &str| {
        assert_eq!(v["decision"], "allow", "{v}");
        assert!(
            v["reason"].as_str().unwrap().contains(&format!(
                "the placeholder of credential `{credential}` in the request body is replaced by its secret"
            )),
            "{v}"
        );
    };
    // Methods: the GET-only credential's secret never goes into a POST body.
    refused(
        &ask("POST", "/v1/items", getter),
        "getter",
        "POST /v1/items",
    );
    refused(&ask("PUT", "/v1/items", getter), "getter", "PUT /v1/items");
    replaced(&ask("GET", "/v1/items", getter), "getter");
    // Paths: the `/v1/read/**` credential's only under `/v1/read/`, and the
    // path is the canonical one (`..` does not lead out of the binding).
    refused(
        &ask("POST", "/v1/write", reader),
        "reader",
        "POST /v1/write",
    );
    refused(
        &ask("POST", "/v1/read/../write", reader),
        "reader",
        "POST /v1/write",
    );
    replaced(&ask("POST", "/v1/read/x", reader), "reader");
    // One placeholder outside its binding refuses the whole body, even with
    // one inside beside it.
    std::fs::write(&body, format!(r#"{{"a":"{reader}","b":"{getter}"}}"#)).unwrap();
    let o = run(&[
        "eval",
        "--policy",
        &policy.display().to_string(),
        "--binary",
        "/usr/bin/agent",
        "--format",
        "json",
        "--url",
        "https://api.example.com/v1/read/x",
        "--body",
        &body.display().to_string(),
        "--content-type",
        "application/json",
    ]);
    refused(&json(&o), "getter", "POST /v1/read/x");
}
