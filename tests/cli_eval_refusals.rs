//! The proxy's refusals that no rule makes, answered by `eval` and `test`
//! with the code the proxy's 403 carries: another spelling of a GraphQL,
//! JSON-RPC or MCP endpoint's path (`path_alias`) and a query parameter
//! that names another method (`override_refused`), in audit mode too.
#![expect(clippy::unwrap_used, reason = "test harness")]

mod common;

use common::{code, json, run, text};

const POLICY: &str = "policy \"refusals\" {
  allow /usr/bin/agent -> api.example.com:443 graphql {
    path /graphql
    allow graphql query
  }
  allow /usr/bin/agent -> api.example.com:443 http {
    allow GET /**
    allow POST /**
  }
  allow /usr/bin/agent -> audit.example.com:443 http audit {
    allow GET /public/**
  }
  allow /usr/bin/agent -> folded.example.com:443 mcp fold_paths {
    path /mcp
    allow rpc tools/list
  }
}
";

fn policy(name: &str) -> String {
    let path = std::env::temp_dir().join(format!(
        "osp-cli-refusals-{}-{name}.policy",
        std::process::id()
    ));
    std::fs::write(&path, POLICY).unwrap();
    path.display().to_string()
}

/// `eval --format json` on one request.
fn eval(url: &str, method: &str) -> serde_json::Value {
    let p = policy("eval");
    let o = run(&[
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/agent",
        "--url",
        url,
        "--method",
        method,
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    json(&o)
}

#[test]
fn other_spellings_of_a_body_endpoints_path_are_refused_as_the_proxy_refuses_them() {
    for url in [
        "https://api.example.com/graphql/",
        "https://api.example.com/GraphQL",
        "https://api.example.com/GRAPHQL/",
        "https://api.example.com/graphql/.",
        "https://api.example.com/x/../GraphQL?query=%7Bviewer%7D",
    ] {
        for method in ["GET", "POST"] {
            let v = eval(url, method);
            assert_eq!(v["decision"], "deny", "{url} {method}: {v}");
            assert_eq!(v["refusal"], "path_alias", "{url} {method}: {v}");
            assert!(v["reason"].as_str().unwrap().contains("`/graphql`"), "{v}");
            assert_eq!(v["rule"]["line"], 2, "the GraphQL endpoint is blamed: {v}");
        }
    }
    // The canonical path is the endpoint's own; its rules judge.
    let v = eval("https://api.example.com//graphql", "POST");
    assert_eq!(v["refusal"], "policy_denied", "{v}");
    // A path that is no spelling of it, and an endpoint that folds paths.
    let v = eval("https://api.example.com/graphqlx", "POST");
    assert_eq!(
        (&v["decision"], &v["refusal"]),
        (&"allow".into(), &serde_json::Value::Null)
    );
    let v = eval("https://folded.example.com/MCP/", "GET");
    assert_ne!(v["refusal"], "path_alias", "{v}");
}

#[test]
fn a_query_naming_another_method_is_refused_in_every_spelling_and_in_audit_mode() {
    for url in [
        "https://api.example.com/forms/x?a=1&_method=DELETE",
        "https://api.example.com/forms/x?a=1;_method=DELETE",
        "https://api.example.com/forms/x?%5Fmethod=DELETE",
        "https://api.example.com/forms/x?_%6Dethod=DELETE",
        "https://api.example.com/forms/x?%255Fmethod=DELETE",
        "https://api.example.com/forms/x?.method=DELETE",
        "https://api.example.com/forms/x?+method=DELETE",
        "https://api.example.com/forms/x?%5Bmethod=DELETE",
        "https://api.example.com/forms/x?_method%5B%5D=DELETE",
        "https://api.example.com/forms/x?x_http_method_override=DELETE",
        "https://audit.example.com/public/a?_method=DELETE",
    ] {
        let v = eval(url, "POST");
        assert_eq!(v["decision"], "deny", "{url}: {v}");
        assert_eq!(v["refusal"], "override_refused", "{url}: {v}");
        assert_eq!(v["credential"], serde_json::Value::Null, "{v}");
    }
    let v = eval("https://api.example.com/forms/y?a=1;b=2", "POST");
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["refusal"], serde_json::Value::Null, "{v}");
    // Audit mode without an override: audited, not refused.
    let v = eval("https://audit.example.com/admin", "GET");
    assert_eq!(
        (&v["decision"], &v["refusal"]),
        (&"audit".into(), &serde_json::Value::Null)
    );
}

#[test]
fn the_human_answer_names_the_refusal() {
    let p = policy("human");
    let o = run(&[
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/agent",
        "--url",
        "https://api.example.com/GraphQL",
        "--method",
        "POST",
    ]);
    assert_eq!(code(&o), 0);
    let out = text(&o.stdout);
    assert!(
        out.starts_with("deny via the L7 proxy\nrefusal:    403 path_alias\n"),
        "{out}"
    );
    // A connection refused before any request has no proxy refusal.
    let o = run(&[
        "eval",
        "--policy",
        &p,
        "--binary",
        "/usr/bin/other",
        "--url",
        "https://api.example.com/GraphQL",
    ]);
    assert!(!text(&o.stdout).contains("refusal:"), "{}", text(&o.stdout));
}

#[test]
fn a_policy_test_asserts_the_refusal() {
    let dir = std::env::temp_dir().join(format!("osp-cli-refusals-{}-test", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.policy"), POLICY).unwrap();
    let cases = "policy: t.policy
cases:
  - name: an alias
    binary: /usr/bin/agent
    url: https://api.example.com/graphql/
    method: POST
    expect: deny
    refusal: path_alias
  - name: an override
    binary: /usr/bin/agent
    url: https://api.example.com/repos/o/r?_method=DELETE
    expect: deny
    refusal: override_refused
  - name: a plain read
    binary: /usr/bin/agent
    url: https://api.example.com/repos/o/r
    expect: allow
    refusal: none
";
    let t = dir.join("t.test.yaml");
    std::fs::write(&t, cases).unwrap();
    let o = run(&["test", "--format", "json", t.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["passed"], 3, "{v}");
    assert_eq!(
        v["files"][0]["cases"][0]["actual"]["refusal"], "path_alias",
        "{v}"
    );
    // A wrong expectation is a failed case that names both codes.
    std::fs::write(
        &t,
        cases.replacen("refusal: path_alias", "refusal: policy_denied", 1),
    )
    .unwrap();
    let o = run(&["test", t.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains("refusal:    expected `policy_denied`, got `path_alias`"),
        "{}",
        text(&o.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
