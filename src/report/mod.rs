//! Rendering diagnostics for people (miette) and machines (JSON, SARIF,
//! GitHub workflow annotations).

pub mod failure;
pub mod findings;
mod human;
pub mod sarif;

use crate::output::outln;
use policy_lang::diag::{Diagnostic, Severity};
use serde_json::json;

pub use failure::{Failure, InputError};

pub struct FileReport {
    pub path: String,
    pub diagnostics: Vec<Diagnostic>,
}

/// How diagnostics are printed: for people, or for a CI step to parse.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagFormat {
    Human,
    Json,
    Github,
    Sarif,
}

pub fn print_diagnostics(reports: &[FileReport], format: DiagFormat) {
    print_check(reports, &[], None, format);
}

/// The diagnostics of several files, the inputs that could not be read,
/// and (for `check --prove`) why a risk question went unanswered. Machine
/// formats always get a whole document, even when every file failed.
pub fn print_check(
    reports: &[FileReport],
    errors: &[InputError],
    inconclusive: Option<&str>,
    format: DiagFormat,
) {
    match format {
        DiagFormat::Human => {
            for r in reports {
                for d in &r.diagnostics {
                    eprint!("{}", human::render(d));
                }
            }
            for e in errors {
                eprintln!("error: {}", e.message);
            }
        }
        DiagFormat::Json => {
            outln!(
                "{}",
                json!({
                    "files": failure::files_json(reports),
                    "errors": failure::errors_json(errors),
                    "inconclusive": inconclusive,
                })
            );
        }
        DiagFormat::Github => {
            let lines = reports
                .iter()
                .flat_map(|r| &r.diagnostics)
                .map(github_line)
                .chain(errors.iter().map(failure::github_error));
            for line in lines {
                outln!("{line}");
            }
        }
        DiagFormat::Sarif => {
            let results: Vec<_> = reports
                .iter()
                .flat_map(|r| &r.diagnostics)
                .map(sarif::diagnostic_result)
                .collect();
            let failed = Failure {
                files: Vec::new(),
                errors: errors.to_vec(),
            };
            let mut doc = failed.sarif();
            if let Some(all) = doc
                .get_mut("runs")
                .and_then(serde_json::Value::as_array_mut)
                .and_then(|r| r.first_mut())
                .and_then(|r| r.get_mut("results"))
                .and_then(serde_json::Value::as_array_mut)
            {
                all.splice(0..0, results);
            }
            outln!("{doc}");
        }
    }
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

pub fn github_line(d: &Diagnostic) -> String {
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
