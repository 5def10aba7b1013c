//! SARIF 2.1.0, as GitHub code scanning accepts it.

use policy_lang::diag::{Diagnostic, Severity, codes};
use serde_json::{Value, json};

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// A whole SARIF log with one run of this tool.
pub fn document(rules: Vec<Value>, results: Vec<Value>) -> Value {
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "openshell-policy",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": "https://github.com/openshell-policy/openshell-policy",
                    "rules": rules,
                }
            },
            "results": results,
        }]
    })
}

pub fn diagnostic_rules() -> Vec<Value> {
    codes::ALL
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "name": c.summary,
                "shortDescription": { "text": c.summary },
                "defaultConfiguration": { "level": level(c.severity) },
            })
        })
        .collect()
}

pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A physical location; SARIF wants relative URIs for code scanning.
pub fn location(path: &str, line: u32, column: u32, end_line: u32, end_column: u32) -> Value {
    let uri = path.strip_prefix("./").unwrap_or(path);
    json!({
        "physicalLocation": {
            "artifactLocation": { "uri": uri },
            "region": {
                "startLine": line.max(1),
                "startColumn": column.max(1),
                "endLine": end_line.max(line.max(1)),
                "endColumn": end_column.max(1),
            }
        }
    })
}

pub fn diagnostic_result(d: &Diagnostic) -> Value {
    let (line, column) = d.line_col();
    let (end_line, end_column) = d.file.line_col(d.span.end);
    let text = if d.help.is_empty() {
        d.message.clone()
    } else {
        format!("{} (help: {})", d.message, d.help)
    };
    json!({
        "ruleId": d.code.id,
        "level": level(d.severity),
        "message": { "text": text },
        "locations": [location(d.file.path(), line, column, end_line, end_column)],
    })
}
