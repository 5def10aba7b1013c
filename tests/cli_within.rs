//! `diff --prove --within BOUNDARY CANDIDATE`: containment. Every shipped
//! policy is within itself and within a wider boundary (exit 0); a team
//! policy checked against boundaries narrower in one dimension each
//! (file right, `run_as`, Landlock mode and ABI, binary, host, port,
//! CIDR, method, path, credential injection) exceeds it (exit 1) with
//! the right category, and every request witness is confirmed by `eval`
//! against the candidate and refuted against the boundary.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::string_slice,
    reason = "test helpers fail loudly"
)]

mod common;
mod sarif_schema;

use std::path::{Path, PathBuf};

use common::{code, json, run, text};
use serde_json::Value;

const TEAM: &str = "tests/within/team.policy";

fn within(boundary: &str, candidate: &str, format: &str) -> std::process::Output {
    run(&[
        "diff", "--prove", "--within", boundary, candidate, "--format", format,
    ])
}

/// The JSON report, checked to exit with `status`.
fn report(boundary: &str, candidate: &str, status: i32) -> Value {
    let o = within(boundary, candidate, "json");
    assert_eq!(
        code(&o),
        status,
        "{boundary} ⊇ {candidate}: {}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v["question"], "within");
    v
}

/// `eval --format json` of a witness against a policy: the decision and
/// the credential injected.
fn eval(policy: &str, w: &Value) -> (String, Option<String>) {
    let s = |k: &str| w[k].as_str().unwrap_or_default().to_owned();
    let mut args: Vec<String> = ["eval", "--policy", policy, "--binary"]
        .map(str::to_owned)
        .to_vec();
    args.push(s("binary"));
    let port = w["port"].as_u64().unwrap_or_default();
    match w["method"].as_str() {
        Some(m) => {
            let query = w["query"]
                .as_str()
                .map(|q| format!("?{q}"))
                .unwrap_or_default();
            args.extend([
                "--url".to_owned(),
                format!("https://{}:{port}{}{query}", s("host"), s("path")),
                "--method".to_owned(),
                m.to_owned(),
            ]);
        }
        None => args.extend([
            "--host".to_owned(),
            s("host"),
            "--port".to_owned(),
            port.to_string(),
        ]),
    }
    if let Some(a) = w["address"].as_str() {
        args.extend(["--addr".to_owned(), a.to_owned()]);
    }
    args.extend(["--format".to_owned(), "json".to_owned()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = json(&run(&refs));
    (
        v["decision"].as_str().unwrap_or_default().to_owned(),
        v["credential"].as_str().map(str::to_owned),
    )
}

/// Every request excess: the candidate lets it through, and the boundary
/// refuses it or sends another credential with it.
fn assert_witnesses_replay(v: &Value, boundary: &str, candidate: &str) {
    for f in v["findings"].as_array().unwrap() {
        assert_eq!(f["verified"], true, "{f}");
        assert!(f["new_rule"]["line"].is_u64(), "blamed: {f}");
        let w = &f["witness"];
        let (cd, cc) = eval(candidate, w);
        let (bd, bc) = eval(boundary, w);
        assert!(cd == "allow" || cd == "audit", "candidate {cd}: {f}");
        let refused = bd == "deny";
        let other_secret = f["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no credential that sends the same secret");
        assert!(
            refused || cc != bc || other_secret,
            "boundary {bd} with {bc:?}: {f}"
        );
    }
}

/// The categories of the request excesses and, for sandbox excesses,
/// their settings (`file_rights_expansion` has a path instead).
fn kinds(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["category"].as_str().unwrap().to_owned())
        .chain(v["sandbox"].as_array().unwrap().iter().map(|s| {
            let c = s["category"].as_str().unwrap();
            match s["setting"].as_str() {
                Some(k) => format!("{c}:{k}"),
                None => c.to_owned(),
            }
        }))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn shipped() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("policies")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "policy"))
        .collect();
    v.sort();
    assert!(v.len() >= 10, "{v:?}");
    v
}

/// A copy of a shipped policy with one more binary, destination and
/// read-only tree: wider in every table, so the proof runs in full.
fn widened(dir: &Path, policy: &Path) -> String {
    let src = std::fs::read_to_string(policy).unwrap();
    let end = src.rfind('}').unwrap();
    let wide = format!(
        "{}  binaries boundary_extra = /usr/bin/boundary-extra\n  allow boundary_extra -> example.org:443 http read-only\n  fs read /opt/boundary\n{}",
        &src[..end],
        &src[end..]
    );
    let out = dir.join(policy.file_name().unwrap());
    std::fs::write(&out, wide).unwrap();
    out.display().to_string()
}

#[test]
fn every_shipped_policy_is_within_itself_and_a_wider_boundary() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("within-shipped");
    std::fs::create_dir_all(dir.join("fragments")).unwrap();
    for f in std::fs::read_dir("policies/fragments").unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join("fragments").join(f.file_name().unwrap())).unwrap();
    }
    for p in shipped() {
        let p_text = p.display().to_string();
        let v = report(&p_text, &p_text, 0);
        assert_eq!(v["verdict"], "within", "{p_text}");
        let wide = widened(&dir, &p);
        let v = report(&wide, &p_text, 0);
        assert_eq!(v["verdict"], "within", "{p_text}: {v}");
        assert_eq!(v["findings"], serde_json::json!([]));
        assert_eq!(v["sandbox"], serde_json::json!([]));
        // And the wider boundary is not within the policy.
        let v = report(&p_text, &wide, 1);
        assert_eq!(v["verdict"], "exceeds", "{p_text}");
        assert!(
            kinds(&v).contains(&"file_rights_expansion".to_owned()),
            "{v}"
        );
        assert_witnesses_replay(&v, &p_text, &wide);
    }
}

#[test]
fn a_wider_platform_boundary_admits_the_team_policy() {
    let v = report("tests/within/wide.policy", TEAM, 0);
    assert_eq!(v["verdict"], "within");
    assert_eq!(v["credentials_declared"], true);
}

#[test]
fn each_dimension_beyond_the_boundary_is_an_excess_confirmed_by_eval() {
    let cases: [(&str, &[&str]); 11] = [
        ("no-write", &["file_rights_expansion"]),
        ("other-user", &["enforcement_weakened:run_as.user"]),
        ("abi5", &["enforcement_weakened:landlock.min_abi"]),
        (
            "other-binary",
            &[
                "credential_reach_expansion",
                "l7_bypass_credentialed",
                "reach_expansion",
            ],
        ),
        ("other-host", &["credential_reach_expansion"]),
        (
            "other-port",
            &[
                "credential_reach_expansion",
                "enforcement_weakened:landlock.tcp_connect_ports",
                "l7_bypass_credentialed",
                "reach_expansion",
            ],
        ),
        (
            "narrower-cidr",
            &[
                "credential_reach_expansion",
                "l7_bypass_credentialed",
                "reach_expansion",
            ],
        ),
        ("no-post", &["capability_expansion"]),
        ("public-paths", &["capability_expansion"]),
        ("other-header", &["credential_reach_expansion"]),
        ("other-secret", &["credential_reach_expansion"]),
    ];
    for (name, want) in cases {
        let boundary = format!("tests/within/{name}.policy");
        let v = report(&boundary, TEAM, 1);
        assert_eq!(v["verdict"], "exceeds", "{name}");
        assert_eq!(kinds(&v), want, "{name}: {v}");
        assert_witnesses_replay(&v, &boundary, TEAM);
    }
}

#[test]
fn the_witnesses_name_the_dimension_that_differs() {
    let first =
        |b: &str| report(&format!("tests/within/{b}.policy"), TEAM, 1)["findings"][0].clone();
    assert_eq!(first("other-binary")["witness"]["binary"], "/usr/bin/curl");
    assert_eq!(first("other-host")["witness"]["host"], "api.example.com");
    assert_eq!(first("no-post")["witness"]["method"], "POST");
    assert_eq!(first("public-paths")["witness"]["path"], "/v1");
    assert_eq!(first("narrower-cidr")["witness"]["address"], "10.1.2.128");
    assert_eq!(first("other-port")["witness"]["port"], 5432);
    let h = first("other-header");
    assert_eq!(h["witness"]["host"], "api.example.com");
    assert!(
        h["old_reason"]
            .as_str()
            .unwrap()
            .contains("injects credential `svc_token` there instead"),
        "{h}"
    );
    let v = report("tests/within/no-write.policy", TEAM, 1);
    assert_eq!(v["sandbox"][0]["path"], "/sandbox");
    assert_eq!(v["sandbox"][0]["rule"]["line"], 6);
}

#[test]
fn landlock_best_effort_exceeds_a_hard_boundary() {
    let v = report(TEAM, "tests/within/team-best-effort.policy", 1);
    assert_eq!(kinds(&v), ["enforcement_weakened:landlock.mode"]);
    // The other way round: hard is inside best_effort.
    let v = report("tests/within/team-best-effort.policy", TEAM, 0);
    assert_eq!(v["verdict"], "within");
}

#[test]
fn openshell_yaml_is_accepted_on_either_side() {
    let yaml = "tests/shared/fixtures/community/base/v4.yaml";
    let older = "tests/shared/fixtures/community/base/v1.yaml";
    let v = report(yaml, yaml, 0);
    assert_eq!(v["verdict"], "within");
    // v4 adds hosts to v1: v1 is within v4, v4 exceeds v1.
    let v = report(yaml, older, 0);
    assert_eq!(v["verdict"], "within", "{v}");
    let v = report(older, yaml, 1);
    assert_eq!(v["verdict"], "exceeds");
    assert!(kinds(&v).contains(&"reach_expansion".to_owned()), "{v}");
    assert_witnesses_replay(&v, older, yaml);
}

#[test]
fn an_unreadable_side_is_an_input_error() {
    let o = within("tests/within/missing.policy", TEAM, "json");
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["verdict"], "error");
    assert_eq!(v["question"], "within");
    assert!(v["errors"][0]["message"].is_string(), "{v}");
    // A command line clap refuses still prints a document.
    let o = run(&["diff", "--prove", "--within", TEAM, "--format", "json"]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["verdict"], "error");
    assert_eq!(v["question"], "within");
}

#[test]
fn the_human_report_of_excesses() {
    let o = within("tests/within/no-post.policy", TEAM, "human");
    assert_eq!(code(&o), 1);
    insta::assert_snapshot!(text(&o.stdout));
    let o = within("tests/within/wide.policy", TEAM, "human");
    assert_eq!(code(&o), 0);
    assert_eq!(
        text(&o.stdout).trim(),
        "diff --prove --within tests/within/wide.policy tests/within/team.policy: within: the boundary allows everything the candidate allows"
    );
}

#[test]
fn the_markdown_report_of_a_file_right_and_a_credential() {
    for b in ["no-write", "other-header"] {
        let o = within(&format!("tests/within/{b}.policy"), TEAM, "markdown");
        assert_eq!(code(&o), 1, "{b}");
        insta::assert_snapshot!(b, text(&o.stdout));
    }
}

#[test]
fn the_github_annotations_point_at_the_candidate_rules() {
    let o = within("tests/within/other-user.policy", TEAM, "github");
    assert_eq!(code(&o), 1);
    let gh = text(&o.stdout);
    assert!(
        gh.contains("::error file=tests/within/team.policy,line=1,title=enforcement_weakened::"),
        "{gh}"
    );
    assert!(
        gh.contains("::error title=policy prover::exceeds: 1 excess beyond the boundary"),
        "{gh}"
    );
    let o = within("tests/within/public-paths.policy", TEAM, "github");
    let gh = text(&o.stdout);
    assert!(
        gh.contains(
            "::error file=tests/within/team.policy,line=18,col=5,title=capability_expansion::"
        ),
        "{gh}"
    );
}

#[test]
fn the_sarif_log_is_valid_and_carries_the_verdict() {
    let o = within("tests/within/other-secret.policy", TEAM, "sarif");
    assert_eq!(code(&o), 1);
    let s = sarif_schema::validated(&o);
    let run0 = &s["runs"][0];
    assert_eq!(run0["properties"]["verdict"], "exceeds");
    assert_eq!(run0["properties"]["question"], "within");
    let results = run0["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(
        results
            .iter()
            .all(|r| r["ruleId"] == "R0101" && r["level"] == "error"),
        "{results:?}"
    );
    let o = within("tests/within/wide.policy", TEAM, "sarif");
    assert_eq!(code(&o), 0);
    let s = sarif_schema::validated(&o);
    assert_eq!(s["runs"][0]["properties"]["verdict"], "within");
}
