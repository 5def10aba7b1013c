//! End-to-end tests of the `openshell-policy` command: exit codes, output
//! shapes, and the promises CI pipelines rely on.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod common;
mod sarif_schema;

use std::path::{Path, PathBuf};

use common::{code, json, run};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("osp-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

const FIXTURES: &str = "tests/shared/fixtures/openshell";

#[test]
fn check_exit_codes_and_json() {
    let ok = run(&[
        "check",
        "policies/github-readwrite.policy",
        "--format",
        "json",
    ]);
    assert_eq!(code(&ok), 0, "{}", String::from_utf8_lossy(&ok.stderr));
    let v = json(&ok);
    assert_eq!(v["files"][0]["path"], "policies/github-readwrite.policy");
    assert!(v["files"][0]["diagnostics"].as_array().unwrap().is_empty());

    let broken = tmp("broken.policy");
    std::fs::write(
        &broken,
        "policy \"b\" {\n  fs reed /usr\n  allow x -> y\n}\n",
    )
    .unwrap();
    let bad = run(&["check", broken.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code(&bad), 1);
    let diags = json(&bad)["files"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .clone();
    assert!(diags.len() >= 2, "{diags:?}");
    for d in &diags {
        assert!(d["line"].as_u64().unwrap() >= 2);
        assert!(d["column"].as_u64().unwrap() >= 1);
        assert!(d["code"].as_str().unwrap().starts_with('E'));
        assert_eq!(d["severity"], "error");
    }

    let missing = run(&["check", "does/not/exist.policy"]);
    assert_eq!(code(&missing), 2);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));

    let usage = run(&["check"]);
    assert_eq!(code(&usage), 2);
}

#[test]
fn check_formats_for_ci() {
    let file = "policy-lang/tests/diagnostics/warnings.policy";
    let sarif = run(&["check", file, "--format", "sarif"]);
    assert_eq!(code(&sarif), 0);
    let v = sarif_schema::validated(&sarif);
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(results.iter().all(|r| {
        r["level"] == "warning"
            && r["locations"][0]["physicalLocation"]["region"]["startLine"]
                .as_u64()
                .unwrap()
                > 0
    }));

    let gh = run(&["check", file, "--format", "github"]);
    let text = String::from_utf8(gh.stdout).unwrap();
    assert!(text.lines().count() >= 5);
    assert!(
        text.lines().all(|l| l.starts_with("::warning file=")
            && l.contains(",line=")
            && (l.contains("title=W") || l.contains("title=R"))),
        "{text}"
    );

    let strict = run(&["check", file, "--deny-warnings"]);
    assert_eq!(code(&strict), 1);
}

#[test]
fn check_prove_adds_the_risk_questions() {
    let file = "policy-lang/tests/diagnostics/warnings.policy";
    let codes = |args: &[&str]| -> Vec<String> {
        let o = run(args);
        assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
        json(&o)["files"][0]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_string())
            .collect()
    };
    let plain = codes(&["check", file, "--format", "json"]);
    assert!(plain.iter().all(|c| c.starts_with('W')), "{plain:?}");
    let proved = codes(&["check", file, "--prove", "--format", "json"]);
    assert!(
        proved.iter().any(|c| c == "R0104"),
        "audit where a credential flows: {proved:?}"
    );
    assert!(proved.len() > plain.len());
}

#[test]
fn explain_of_a_policy_source_says_to_compile_it_first() {
    // By its extension, and by its content whatever its name.
    let renamed = tmp("agent.txt");
    std::fs::copy("policies/github-readwrite.policy", &renamed).unwrap();
    for file in [
        "policies/github-readwrite.policy",
        renamed.to_str().unwrap(),
    ] {
        let e = run(&["explain", file]);
        assert_eq!(code(&e), 2);
        let err = String::from_utf8_lossy(&e.stderr);
        assert!(
            err.contains("is a policy source, not a compiled bundle")
                && err.contains(&format!("openshell-policy compile {file} -o bundle.json")),
            "{err}"
        );
        assert!(!err.contains("not valid JSON"), "{err}");
    }
    // Other text that is not JSON is still refused as a bundle.
    let junk = tmp("junk.bundle");
    std::fs::write(&junk, "not a bundle {").unwrap();
    let j = run(&["explain", junk.to_str().unwrap()]);
    assert_eq!(code(&j), 2);
    assert!(String::from_utf8_lossy(&j.stderr).contains("not valid JSON"));
}

#[test]
fn compile_explain_and_bundle_integrity() {
    let out = tmp("gh.bundle");
    let c = run(&[
        "compile",
        "policies/github-readwrite.policy",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&c), 0);
    let digest = String::from_utf8(c.stdout).unwrap();
    assert!(
        digest.trim().starts_with("sha256:") && digest.trim().len() == 71,
        "{digest}"
    );

    let e = run(&["explain", out.to_str().unwrap()]);
    assert_eq!(code(&e), 0);
    let text = String::from_utf8(e.stdout).unwrap();
    for part in [
        "1. Landlock",
        "2. Seccomp",
        "3. L7 rules",
        "deny  * /repos/*/*/rulesets/**",
        "github_pat",
    ] {
        assert!(text.contains(part), "missing {part}:\n{text}");
    }

    // Tampering with the enforcement content is caught by the digest.
    let bytes = std::fs::read_to_string(&out).unwrap();
    let tampered = tmp("tampered.bundle");
    std::fs::write(&tampered, bytes.replacen("\"DELETE\"", "\"PATCH\"", 1)).unwrap();
    let t = run(&["explain", tampered.to_str().unwrap()]);
    assert_eq!(code(&t), 2);
    assert!(String::from_utf8_lossy(&t.stderr).contains("digest does not match"));

    let future = tmp("future.bundle");
    std::fs::write(
        &future,
        bytes.replacen("\"format_version\":2", "\"format_version\":3", 1),
    )
    .unwrap();
    let f = run(&["explain", future.to_str().unwrap()]);
    assert_eq!(code(&f), 2);
    assert!(String::from_utf8_lossy(&f.stderr).contains("format version 3"));

    // A policy with errors writes nothing.
    let broken = tmp("broken2.policy");
    std::fs::write(
        &broken,
        "policy \"b\" {\n  allow nobody -> h.example.com:443\n}\n",
    )
    .unwrap();
    let none = tmp("none.bundle");
    let b = run(&[
        "compile",
        broken.to_str().unwrap(),
        "-o",
        none.to_str().unwrap(),
    ]);
    assert_eq!(code(&b), 1);
    assert!(!none.exists());
}

#[test]
fn eval_json_contract() {
    let d = run(&[
        "eval",
        "--policy",
        "policies/github-readwrite.policy",
        "--binary",
        "/usr/bin/gh",
        "--url",
        "https://api.github.com/repos/o/r/pulls",
        "--method",
        "POST",
        "--format",
        "json",
    ]);
    assert_eq!(code(&d), 0);
    let v = json(&d);
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["route"], "l7");
    assert_eq!(v["credential"], "github_pat");
    assert_eq!(v["rule"]["file"], "policies/github-readwrite.policy");
    assert!(v["rule"]["line"].as_u64().unwrap() > 0);

    let denied = json(&run(&[
        "eval",
        "--policy",
        "policies/github-readwrite.policy",
        "--binary",
        "/usr/bin/gh",
        "--url",
        "https://api.github.com/repos/o/r",
        "--method",
        "DELETE",
        "--format",
        "json",
    ]));
    assert_eq!(denied["decision"], "deny");
    assert!(denied["reason"].as_str().unwrap().contains("deny rule"));

    let l4 = json(&run(&[
        "eval",
        "--policy",
        "policies/default.policy",
        "--binary",
        "/usr/bin/curl",
        "--host",
        "example.com",
        "--port",
        "443",
        "--format",
        "json",
    ]));
    assert_eq!(l4["decision"], "deny");
    assert_eq!(l4["route"], serde_json::Value::Null);
    assert_eq!(l4["rule"], serde_json::Value::Null);

    let bad_url = run(&[
        "eval",
        "--policy",
        "policies/default.policy",
        "--binary",
        "/x",
        "--url",
        "ftp://x",
    ]);
    assert_eq!(code(&bad_url), 2);
}

#[test]
fn fmt_check_and_rewrite() {
    let f = tmp("messy.policy");
    std::fs::write(&f, "policy   \"m\"  {\n      fs read    /usr  # system\n\n\n  allow /usr/bin/curl -> a.example.com:443 read-only http\n}\n").unwrap();
    let check = run(&["fmt", "--check", f.to_str().unwrap()]);
    assert_eq!(code(&check), 1);
    assert_eq!(code(&run(&["fmt", f.to_str().unwrap()])), 0);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "policy \"m\" {\n  fs read /usr  # system\n\n  allow /usr/bin/curl -> a.example.com:443 http read-only\n}\n"
    );
    assert_eq!(code(&run(&["fmt", "--check", f.to_str().unwrap()])), 0);
    assert_eq!(
        code(&run(&[
            "fmt",
            "--check",
            "policies/github-readwrite.policy"
        ])),
        0
    );
}

/// Importing a YAML file and compiling the result gives the digest of
/// compiling the YAML, for every OpenShell sample that imports cleanly.
#[test]
fn import_keeps_the_digest() {
    let creds = format!("{FIXTURES}/prover-credentials.yaml");
    let mut checked = 0;
    for entry in std::fs::read_dir(FIXTURES).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with("-policy.yaml") {
            continue;
        }
        let p = path.to_str().unwrap();
        let a = tmp(&format!("{name}.bundle"));
        let ca = run(&[
            "compile",
            p,
            "-o",
            a.to_str().unwrap(),
            "--credentials",
            &creds,
        ]);
        assert_eq!(
            code(&ca),
            0,
            "{name}: {}",
            String::from_utf8_lossy(&ca.stderr)
        );
        let imported = tmp(&format!("{name}.policy"));
        let i = run(&["import", p, "-o", imported.to_str().unwrap()]);
        assert_eq!(code(&i), 0, "{name}");
        let b = tmp(&format!("{name}.imported.bundle"));
        let cb = run(&[
            "compile",
            imported.to_str().unwrap(),
            "-o",
            b.to_str().unwrap(),
            "--credentials",
            &creds,
        ]);
        assert_eq!(code(&cb), 0, "{name}");
        assert_eq!(ca.stdout, cb.stdout, "{name}: digests differ");
        checked += 1;
    }
    assert!(checked >= 7, "{checked}");
}

#[test]
fn every_policy_compiles_from_the_command_line() {
    for entry in std::fs::read_dir("policies").unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "policy") {
            let out = tmp(&format!(
                "{}.bundle",
                p.file_stem().unwrap().to_string_lossy()
            ));
            let c = run(&["compile", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
            assert_eq!(code(&c), 0, "{}", Path::new(&p).display());
        }
    }
}

#[test]
fn check_warns_of_an_unknown_http_method_with_its_place() {
    let p = tmp("gte.policy");
    std::fs::write(
        &p,
        "policy \"m\" {\n  binaries agent = /usr/bin/curl\n  allow agent -> api.example.com:443 http {\n    allow GTE /x\n  }\n}\n",
    )
    .unwrap();
    let o = run(&["check", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    let text = v.to_string();
    let d = v["files"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "W0111")
        .unwrap_or_else(|| panic!("no W0111: {text}"));
    assert_eq!(d["severity"], "warning");
    assert_eq!(d["message"], "`GTE` is not a known HTTP method");
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .starts_with("did you mean `GET`?")
    );
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(4), Some(11))
    );
    assert!(d["file"].as_str().unwrap().ends_with("gte.policy"));
}
