//! `diff --prove` on a change that keeps every request as it was but
//! changes what a credential sends, or where it puts it: the secret
//! source, the injected header, the placeholder. Each is a
//! `credential_changed` finding (R0111) in every format, and the change
//! is `widened` (exit 1), never "adds nothing".

mod common;
mod sarif_schema;

use common::{code, json, run, text};

const BASE: &str = "tests/credential_change/base.policy";
const SECRET: &str = "tests/credential_change/secret.policy";
const HEADER: &str = "tests/credential_change/header.policy";
const PLACEHOLDER: &str = "tests/credential_change/placeholder.policy";

fn diff(new: &str, format: &str) -> std::process::Output {
    run(&["diff", "--prove", BASE, new, "--format", format])
}

/// The human report, checked to exit 1.
fn human(new: &str) -> String {
    let o = diff(new, "human");
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn a_changed_secret_source_is_a_finding() {
    insta::assert_snapshot!(human(SECRET));
}

#[test]
fn a_changed_injection_header_is_a_finding() {
    insta::assert_snapshot!(human(HEADER));
}

#[test]
fn a_changed_placeholder_is_a_finding() {
    insta::assert_snapshot!(human(PLACEHOLDER));
}

#[test]
fn the_json_report_names_what_changed() {
    for (new, part) in [
        (SECRET, "secret"),
        (HEADER, "inject"),
        (PLACEHOLDER, "placeholder"),
    ] {
        let o = diff(new, "json");
        assert_eq!(code(&o), 1, "{new}");
        let v = json(&o);
        assert_eq!(v["verdict"], "widened", "{new}");
        // Only the credential changed: no request is new.
        assert_eq!(v["findings"], serde_json::json!([]), "{new}");
        assert_eq!(v["reach"], serde_json::json!([]), "{new}");
        assert_eq!(v["credentials"][0]["changed"], serde_json::json!([part]));
    }
    insta::assert_json_snapshot!(json(&diff(SECRET, "json"))["credentials"]);
}

#[test]
fn the_markdown_report_of_a_changed_secret() {
    let o = diff(SECRET, "markdown");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn the_github_annotations_of_a_changed_header() {
    let o = diff(HEADER, "github");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn the_sarif_result_of_a_changed_placeholder() {
    let o = diff(PLACEHOLDER, "sarif");
    assert_eq!(code(&o), 1);
    let s = sarif_schema::validated(&o);
    let run0 = &s["runs"][0];
    assert_eq!(run0["properties"]["verdict"], "widened");
    assert_eq!(run0["invocations"][0]["exitCode"], 1);
    insta::assert_json_snapshot!(run0["results"]);
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["id"] == "R0111" && r["name"] == "credential_changed"),
        "{rules:?}"
    );
}

#[test]
fn a_renamed_credential_with_the_same_secret_adds_nothing() {
    let o = diff("tests/credential_change/renamed.policy", "json");
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert_eq!(json(&o)["credentials"], serde_json::json!([]));
}

#[test]
fn a_renamed_credential_with_another_secret_is_a_finding() {
    let o = diff("tests/credential_change/renamed-secret.policy", "json");
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["credentials"][0]["changed"], serde_json::json!(["new"]));
}
