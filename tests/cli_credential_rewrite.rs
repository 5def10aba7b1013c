//! `diff --prove` on a change that turns on `request_body_credential_rewrite`
//! or `websocket_credential_rewrite` for a host a credential with a
//! placeholder is bound to: the secret now goes to the host in request
//! bodies or text messages that were refused, a `credential_reach_expansion`
//! (R0101) in every format, `widened` (exit 1). Each witness is replayed
//! through `eval`: NEW allows it with the placeholder replaced, OLD refuses
//! it. The flag on a host no credential is bound to, turned off, or left
//! on adds nothing.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers fail loudly"
)]

mod common;
mod sarif_schema;

use common::{code, json, run, text};

const BASE: &str = "tests/credential_rewrite/base.policy";
const BODY: &str = "tests/credential_rewrite/body.policy";
const WEBSOCKET: &str = "tests/credential_rewrite/websocket.policy";
const BOTH: &str = "tests/credential_rewrite/both.policy";
const UNCREDENTIALED: &str = "tests/credential_rewrite/uncredentialed.policy";

fn diff(old: &str, new: &str, format: &str) -> std::process::Output {
    run(&["diff", "--prove", old, new, "--format", format])
}

/// `eval --format json` of a finding's witness against `policy`.
fn eval(policy: &str, w: &serde_json::Value) -> serde_json::Value {
    let s = |k: &str| w[k].as_str().unwrap().to_owned();
    let scheme = if w["websocket"].is_string() {
        "wss"
    } else {
        "https"
    };
    let url = format!("{scheme}://{}{}", s("host"), s("path"));
    let mut args: Vec<String> = [
        "eval",
        "--policy",
        policy,
        "--binary",
        &s("binary"),
        "--format",
        "json",
        "--url",
        &url,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let file = std::env::temp_dir().join(format!(
        "osp-cli-credential-rewrite-{}-{}.json",
        std::process::id(),
        policy.len()
    ));
    if let Some(t) = w["websocket_text"].as_str() {
        args.extend(["--websocket-text".to_owned(), t.to_owned()]);
    } else {
        std::fs::write(&file, w["body"].as_str().unwrap()).unwrap();
        args.extend([
            "--method".to_owned(),
            s("method"),
            "--body".to_owned(),
            file.display().to_string(),
            "--content-type".to_owned(),
            s("content_type"),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    json(&o)
}

/// The one finding of `new` against the base, its witness replayed.
fn replayed(new: &str, websocket: bool) -> serde_json::Value {
    let o = diff(BASE, new, "json");
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["verdict"], "widened");
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{v:#}");
    let f = &findings[0];
    assert_eq!(f["category"], "credential_reach_expansion");
    assert_eq!(f["code"], "R0101");
    assert_eq!(f["verified"], true);
    let w = &f["witness"];
    assert_eq!(w["websocket"].is_string(), websocket, "{w:#}");
    let n = eval(new, w);
    assert_eq!(n["decision"], "allow", "{n:#}");
    assert!(
        n["reason"]
            .as_str()
            .unwrap()
            .contains("replaced by its secret"),
        "{n:#}"
    );
    let o = eval(BASE, w);
    assert_eq!(o["decision"], "deny", "{o:#}");
    f.clone()
}

#[test]
fn request_body_rewrite_turned_on_is_widened_and_replays() {
    let f = replayed(BODY, false);
    assert_eq!(f["witness"]["content_type"], "application/json");
    insta::assert_json_snapshot!(f);
}

#[test]
fn websocket_rewrite_turned_on_is_widened_and_replays() {
    let f = replayed(WEBSOCKET, true);
    insta::assert_json_snapshot!(f);
}

#[test]
fn the_human_report_of_both_flags() {
    let o = diff(BASE, BOTH, "human");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn the_markdown_report_of_both_flags() {
    let o = diff(BASE, BOTH, "markdown");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn the_github_annotations_of_both_flags() {
    let o = diff(BASE, BOTH, "github");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn the_sarif_results_of_both_flags() {
    let o = diff(BASE, BOTH, "sarif");
    assert_eq!(code(&o), 1);
    let s = sarif_schema::validated(&o);
    let run0 = &s["runs"][0];
    assert_eq!(run0["properties"]["verdict"], "widened");
    insta::assert_json_snapshot!(run0["results"]);
}

#[test]
fn the_flag_where_no_credential_applies_adds_nothing() {
    let o = diff(BASE, UNCREDENTIALED, "json");
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["verdict"], "no-new-access", "{v:#}");
    assert_eq!(v["findings"], serde_json::json!([]));
}

#[test]
fn turning_the_flags_off_adds_nothing() {
    let o = diff(BOTH, BASE, "json");
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert_eq!(json(&o)["verdict"], "no-new-access");
}

#[test]
fn flags_already_on_add_nothing() {
    // Only the uncredentialed route gains the flag.
    let both_and_other = std::env::temp_dir().join(format!(
        "osp-cli-credential-rewrite-{}.policy",
        std::process::id()
    ));
    let text_of = std::fs::read_to_string(BOTH).unwrap().replace(
        "other.example.com:443 http read-write",
        "other.example.com:443 http read-write request_body_credential_rewrite",
    );
    std::fs::write(&both_and_other, text_of).unwrap();
    let o = diff(BOTH, &both_and_other.display().to_string(), "json");
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
}
