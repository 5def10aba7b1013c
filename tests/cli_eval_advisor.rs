//! The advisor endpoint (`policy.local`) as `eval` answers it: allowed by
//! the `advisor` statement for the binaries it names, on plain HTTP port
//! 80 only, and refused for everyone in a policy without the statement;
//! the bundle of a policy without it hashes as it always did.
#![expect(clippy::unwrap_used, reason = "test harness")]

mod common;

use common::{bin, code, json, run, text, with_stdin};

const WITH: &str = "policy \"advised\" {
  binaries agent = /usr/bin/python3 /usr/bin/curl
  allow agent -> api.example.com:443
  advisor agent
}
";

const WITHOUT: &str = "policy \"advised\" {
  binaries agent = /usr/bin/python3 /usr/bin/curl
  allow agent -> api.example.com:443
}
";

fn policy(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!(
        "osp-cli-advisor-{}-{name}.policy",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn eval(policy: &str, binary: &str, url: &str, method: &str) -> serde_json::Value {
    let o = run(&[
        "eval", "--policy", policy, "--binary", binary, "--url", url, "--method", method,
        "--format", "json",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    json(&o)
}

#[test]
fn a_named_binary_reaches_policy_local_by_the_advisor_statement() {
    let p = policy("with", WITH);
    for (method, url) in [
        ("GET", "http://policy.local/denials"),
        ("POST", "http://policy.local/proposals"),
        ("GET", "http://192.0.0.100/denials"),
    ] {
        let d = eval(&p, "/usr/bin/curl", url, method);
        assert_eq!(d["decision"], "allow", "{url}: {d}");
        assert_eq!(d["route"], "l7", "{d}");
        assert_eq!(d["rule"]["line"], 4, "the advisor statement is blamed: {d}");
        assert_eq!(d["rule"]["rule"], "agent", "{d}");
        assert!(
            d["reason"].as_str().unwrap().contains("advisor endpoint"),
            "{d}"
        );
    }
}

#[test]
fn other_binaries_tls_and_policies_without_the_statement_are_refused() {
    let with = policy("refused-with", WITH);
    let without = policy("refused-without", WITHOUT);
    let cases = [
        (
            &with,
            "/usr/bin/wget",
            "http://policy.local/denials",
            "does not name `/usr/bin/wget`",
        ),
        (
            &with,
            "/usr/bin/curl",
            "https://policy.local/denials",
            "port 80 only",
        ),
        (
            &with,
            "/usr/bin/curl",
            "http://policy.local:8080/denials",
            "port 80 only",
        ),
        (
            &without,
            "/usr/bin/curl",
            "http://policy.local/denials",
            "no `advisor` statement",
        ),
    ];
    for (p, binary, url, why) in cases {
        let d = eval(p, binary, url, "GET");
        assert_eq!(d["decision"], "deny", "{binary} {url}: {d}");
        assert!(d["rule"].is_null(), "{d}");
        assert!(d["reason"].as_str().unwrap().contains(why), "{url}: {d}");
    }
}

#[test]
fn the_statement_is_a_bundle_field_only_when_written() {
    let compile = |name: &str, source: &str| {
        let p = policy(name, source);
        let out = std::env::temp_dir().join(format!(
            "osp-cli-advisor-{}-{name}.bundle",
            std::process::id()
        ));
        let o = run(&["compile", &p, "-o", out.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(out).unwrap()).unwrap()
    };
    let with = compile("field-with", WITH);
    let without = compile("field-without", WITHOUT);
    assert!(without["enforcement"].get("advisor").is_none(), "{without}");
    assert!(without["provenance"].get("advisor").is_none(), "{without}");
    assert_eq!(
        with["enforcement"]["advisor"]["binaries"],
        serde_json::json!([{"glob": "/usr/bin/curl"}, {"glob": "/usr/bin/python3"}]),
        "{with}"
    );
    assert_ne!(with["digest"], without["digest"]);
}

#[test]
fn the_statement_formats_to_one_spacing_and_keeps_its_comment() {
    let messy = "policy \"advised\" {\n  binaries agent = /usr/bin/curl\n  advisor   agent   /usr/bin/python3   # who may ask\n}\n";
    let mut cmd = bin();
    cmd.args(["fmt", "-"]);
    let o = with_stdin(cmd, messy);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "policy \"advised\" {\n  binaries agent = /usr/bin/curl\n  advisor agent /usr/bin/python3  # who may ask\n}\n"
    );
}

/// Turning the endpoint on is new reach a person reads: `diff --prove`
/// says which binaries may now reach it (the gateway's auto approval
/// approves only `no-new-access`); turning it off is not.
#[test]
fn turning_the_advisor_on_is_new_reach_for_the_binaries_it_names() {
    let (without, with) = (policy("diff-without", WITHOUT), policy("diff-with", WITH));
    let diff = |old: &str, new: &str| {
        let o = run(&["diff", "--prove", old, new, "--format", "json"]);
        (code(&o), json(&o))
    };
    let (exit, v) = diff(&without, &with);
    assert_eq!(exit, 0, "new reach keeps exit 0: {v}");
    assert_eq!(v["verdict"], "new-reach", "{v}");
    let change = v["sandbox"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["setting"] == "advisor")
        .unwrap_or_else(|| panic!("no advisor entry: {v}"));
    let message = change["message"].as_str().unwrap();
    assert!(
        message.contains("`/usr/bin/curl`") && message.contains("`/usr/bin/python3`"),
        "{message}"
    );
    let (_, back) = diff(&with, &without);
    assert_eq!(back["verdict"], "no-new-access", "{back}");
}
