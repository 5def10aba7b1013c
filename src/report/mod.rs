//! Rendering diagnostics for people (miette) and machines (JSON, SARIF,
//! GitHub workflow annotations).

pub mod findings;
mod human;
pub mod sarif;

use policy_lang::diag::{Diagnostic, Severity};
use serde_json::json;

use crate::cli::DiagFormat;

pub struct FileReport {
    pub path: String,
    pub diagnostics: Vec<Diagnostic>,
}

pub fn print_diagnostics(reports: &[FileReport], format: DiagFormat) {
    match format {
        DiagFormat::Human => {
            for r in reports {
                for d in &r.diagnostics {
                    eprint!("{}", human::render(d));
                }
            }
        }
        DiagFormat::Json => {
            let files: Vec<_> = reports
                .iter()
                .map(|r| {
                    json!({
                        "path": r.path,
                        "diagnostics": r.diagnostics.iter().map(diagnostic_json).collect::<Vec<_>>(),
                    })
                })
                .collect();
            println!("{}", json!({ "files": files }));
        }
        DiagFormat::Github => {
            for d in reports.iter().flat_map(|r| &r.diagnostics) {
                println!("{}", github_line(d));
            }
        }
        DiagFormat::Sarif => {
            let results: Vec<_> = reports
                .iter()
                .flat_map(|r| &r.diagnostics)
                .map(sarif::diagnostic_result)
                .collect();
            println!("{}", sarif::document(sarif::diagnostic_rules(), results));
        }
    }
}

pub fn diagnostic_json(d: &Diagnostic) -> serde_json::Value {
    let (line, column) = d.line_col();
    let (end_line, end_column) = d.file.line_col(d.span.end);
    json!({
        "severity": d.severity,
        "code": d.code.id,
        "message": d.message,
        "help": d.help,
        "file": d.file.path(),
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
    })
}

/// Escape a value for a GitHub workflow command.
pub fn github_escape(s: &str, property: bool) -> String {
    let mut out = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

fn github_line(d: &Diagnostic) -> String {
    let (line, col) = d.line_col();
    let (end_line, end_col) = d.file.line_col(d.span.end);
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let msg = if d.help.is_empty() {
        d.message.clone()
    } else {
        format!("{} (help: {})", d.message, d.help)
    };
    format!(
        "::{level} file={},line={line},col={col},endLine={end_line},endColumn={end_col},title={}::{}",
        github_escape(d.file.path(), true),
        github_escape(d.code.id, true),
        github_escape(&msg, false)
    )
}
