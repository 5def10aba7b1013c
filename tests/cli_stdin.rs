//! `check -` and `fmt -`: standard input has no file name to tell its
//! format, so an OpenShell YAML policy piped in is recognised by its first
//! line, checked as `check FILE.yaml` checks it, and refused by `fmt` as
//! `fmt FILE.yaml` refuses it.

mod common;
mod sarif_schema;

use std::process::Output;

use common::{bin, code, json, text, with_stdin};

fn run_stdin(args: &[&str], input: &str) -> Output {
    let mut cmd = bin();
    cmd.args(args);
    with_stdin(cmd, input)
}

const REFUSED: &str = "# piped from a generator\nversion: 1\nlandlock: { compatibility: best_effort }\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, rules: [] }\n    binaries: [{ path: /usr/bin/curl }]\n";

#[test]
fn openshell_yaml_on_standard_input_is_checked_as_yaml() {
    let o = run_stdin(&["check", "-"], REFUSED);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(!stderr.contains("E0100"), "{stderr}");
    insta::assert_snapshot!("refused_yaml_on_stdin", stderr);

    let o = run_stdin(&["check", "--format", "json", "-"], REFUSED);
    let v = json(&o);
    assert_eq!(v["files"][0]["path"], "<stdin>.yaml");
    let d = &v["files"][0]["diagnostics"][0];
    assert_eq!(
        (d["code"].as_str(), d["line"].as_u64()),
        (Some("E0703"), Some(7))
    );

    // Standard input has no URI: results without a location, still valid.
    let o = run_stdin(&["check", "--format", "sarif", "-"], REFUSED);
    let v = sarif_schema::validated(&o);
    let result = &v["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "E0703");
    assert_eq!(result["locations"], serde_json::json!([]));

    // A shipped OpenShell policy: what `check FILE.yaml` says, risks too.
    let path = "tests/shared/fixtures/openshell/quickstart-policy.yaml";
    let yaml = std::fs::read_to_string(path).unwrap();
    let piped = run_stdin(&["check", "--prove", "--format", "json", "-"], &yaml);
    let named = bin()
        .args(["check", "--prove", "--format", "json", path])
        .output()
        .unwrap();
    assert_eq!(code(&piped), code(&named), "{}", text(&piped.stdout));
    let codes = |o: &Output| {
        json(o)["files"][0]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["code"].clone(), d["line"].clone(), d["column"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(codes(&piped), codes(&named));
}

#[test]
fn this_language_on_standard_input_is_still_this_language() {
    // A comment that reads like a YAML key does not decide.
    let o = run_stdin(
        &["check", "--format", "json", "-"],
        "# version: 1\npolicy \"x\" {\n  run_as user sandbox group sandbox\n}\n",
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert_eq!(json(&o)["files"][0]["path"], "<stdin>");
}

/// `fmt -` formats this language only: OpenShell YAML piped in is told
/// apart as `check -` tells it, and refused as `fmt FILE.yaml` is, with
/// the way on, rather than as a parse error.
#[test]
fn fmt_refuses_openshell_yaml_on_standard_input_and_says_what_to_do() {
    let o = run_stdin(
        &["fmt", "--check", "-"],
        "version: 1\nnetwork_policies: {}\n",
    );
    assert_eq!(code(&o), 2, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr).trim(),
        "error: standard input is OpenShell YAML; translate it with `openshell-policy import` first"
    );
    let o = run_stdin(&["fmt", "--check", "-"], "policy \"p\" {\n}\n");
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
}
