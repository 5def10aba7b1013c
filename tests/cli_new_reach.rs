//! `diff --prove` on a change that adds reach without a credential: the
//! real community `base` sandbox, v1 → v4, adds two agent groups with new
//! hosts and declares no credential. The verdict is `new-reach` (exit 0),
//! never `no-new-access`, and every format shows the reach section and
//! says that the credentialed question was vacuous.

mod common;
mod sarif_schema;

use common::{code, json, run, text};

const V1: &str = "tests/shared/fixtures/community/base/v1.yaml";
const V4: &str = "tests/shared/fixtures/community/base/v4.yaml";

fn diff(old: &str, new: &str, format: &str) -> std::process::Output {
    run(&["diff", "--prove", old, new, "--format", format])
}

#[test]
fn new_hosts_without_a_credential_are_new_reach_in_json() {
    let o = diff(V1, V4, "json");
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["verdict"], "new-reach");
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["credentials_declared"], false);
    let reach = v["reach"].as_array().unwrap();
    assert!(!reach.is_empty());
    for r in reach {
        assert_eq!(r["category"], "reach_expansion");
        assert_eq!(r["code"], "R0108");
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["witness"]["binary"].is_string() && r["witness"]["host"].is_string());
    }
    let hosts: Vec<&str> = reach
        .iter()
        .filter_map(|r| r["witness"]["host"].as_str())
        .collect();
    assert!(
        hosts
            .iter()
            .any(|h| h.contains("github") || h.contains("openai") || h.contains("chatgpt")),
        "{hosts:?}"
    );
}

#[test]
fn identical_policies_still_add_nothing() {
    let o = diff(V4, V4, "json");
    assert_eq!(code(&o), 0);
    let v = json(&o);
    assert_eq!(v["verdict"], "no-new-access");
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["reach"], serde_json::json!([]));
    assert_eq!(v["sandbox"], serde_json::json!([]));
}

#[test]
fn every_format_shows_the_reach_and_the_vacuous_credential_question() {
    let human = text(&diff(V1, V4, "human").stdout);
    assert!(
        human.contains(": new reach: no new credentialed access, but "),
        "{human}"
    );
    assert!(human.contains("binaries ×"), "{human}");
    assert!(human.contains("+ reach_expansion (R0108)"), "{human}");
    assert!(
        human.contains("neither policy declares a credential"),
        "{human}"
    );

    let md = text(&diff(V1, V4, "markdown").stdout);
    assert!(md.starts_with("### 🔵 Policy prover: new reach"), "{md}");
    assert!(md.contains("#### New reach (does not block)"), "{md}");
    assert!(md.contains("neither policy declares a credential"), "{md}");

    let gh = text(&diff(V1, V4, "github").stdout);
    assert!(gh.contains("::notice file="), "{gh}");
    assert!(gh.contains("title=reach_expansion::"), "{gh}");
    assert!(gh.contains("neither policy declares a credential"), "{gh}");
    assert!(!gh.contains("::error"), "{gh}");

    let o = diff(V1, V4, "sarif");
    assert_eq!(code(&o), 0);
    let s = sarif_schema::validated(&o);
    let run0 = &s["runs"][0];
    assert_eq!(run0["properties"]["verdict"], "new-reach");
    assert_eq!(run0["properties"]["credentials_declared"], false);
    let results = run0["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(
        results.iter().all(|r| r["ruleId"] == "R0108"
            && r["properties"]["category"] == "reach_expansion"
            && r["level"] == "note"),
        "{results:?}"
    );
}

#[test]
fn a_credentialed_widening_still_exits_one() {
    let o = run(&[
        "diff",
        "--prove",
        "policies/github-readonly.policy",
        "policies/github-readwrite.policy",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let v = json(&o);
    assert_eq!(v["verdict"], "widened");
    assert_eq!(v["credentials_declared"], true);
    for f in v["findings"].as_array().unwrap() {
        for k in ["binary", "host", "port", "method", "path"] {
            assert!(f["witness"].get(k).is_some(), "{k}: {f}");
        }
        assert!(f.get("category").is_some() && f.get("suppressed").is_some());
    }
}

#[test]
fn the_markdown_report_of_new_reach() {
    let md = text(&diff(V1, V4, "markdown").stdout);
    insta::assert_snapshot!(md);
}
