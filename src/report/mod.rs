//! Rendering diagnostics for people (miette) and machines (JSON, SARIF,
//! GitHub workflow annotations).

pub mod failure;
pub mod findings;
mod human;
pub mod sarif;
pub mod within;

use crate::output::outln;
use policy_lang::diag::{Diagnostic, Severity};
use prover::{Report, Verdict};
use serde_json::json;

pub use failure::{Failure, InputError};

/// The file name diagnostics carry for standard input.
pub const STDIN_NAME: &str = "<stdin>";

/// The name of standard input read as OpenShell YAML: the format of a
/// source follows its name's extension everywhere (parsing, lints, help
/// texts), so the name says it.
pub const STDIN_YAML_NAME: &str = "<stdin>.yaml";

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

/// Diagnostics alone, for the commands that print them on the way to
/// another answer (`compile`, `fmt`, `import`).
pub fn print_diagnostics(reports: &[FileReport], format: DiagFormat) {
    let failed = reports
        .iter()
        .flat_map(|r| &r.diagnostics)
        .any(Diagnostic::is_error);
    print_check(reports, &[], None, format, u8::from(failed));
}

/// The diagnostics of several files, the inputs that could not be read,
/// and (for `check --prove`) why a risk question went unanswered. Machine
/// formats always get a whole document, even when every file failed;
/// SARIF records `exit_code` in its invocation.
pub fn print_check(
    reports: &[FileReport],
    errors: &[InputError],
    inconclusive: Option<&str>,
    format: DiagFormat,
    exit_code: u8,
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
            let mut log = sarif::Log::new();
            for d in reports.iter().flat_map(|r| &r.diagnostics) {
                sarif::push_diagnostic(&mut log, d);
            }
            for e in errors {
                failure::push_sarif_error(&mut log, e);
            }
            if let Some(why) = inconclusive {
                log.notify(
                    "warning",
                    &format!("a risk question was not answered: {why}"),
                );
            }
            outln!("{}", log.finish(exit_code));
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

/// A proof's report as text of the format: a containment proof's by
/// `within`, any other by `findings`.
pub fn render_proof(
    report: &Report,
    format: findings::FindingsFormat,
    names: &findings::Names,
    exit_code: u8,
) -> String {
    if report.containment {
        within::render(report, format, names, exit_code)
    } else {
        findings::render(report, format, names, exit_code)
    }
}

/// Prints a proof's report; SARIF records `exit_code` in its invocation.
pub fn print_proof(
    report: &Report,
    format: findings::FindingsFormat,
    names: &findings::Names,
    exit_code: u8,
) {
    outln!(
        "{}",
        render_proof(report, format, names, exit_code).trim_end()
    );
}

/// How many excesses the report shows, suppressed ones apart.
fn excesses(report: &Report) -> (usize, usize) {
    let accepted = report.findings.iter().filter(|f| f.suppressed).count();
    let open = report.findings.len() - accepted + report.sandbox.len();
    (open, accepted)
}

/// The verdict of a containment proof in one line.
pub fn containment_headline(report: &Report) -> String {
    let (open, accepted) = excesses(report);
    let acc = if accepted > 0 {
        format!(", {accepted} accepted")
    } else {
        String::new()
    };
    match report.verdict {
        Verdict::Exceeds => format!(
            "exceeds: {open} excess{} beyond the boundary{acc}",
            if open == 1 { "" } else { "es" }
        ),
        Verdict::Unsupported => format!(
            "unsupported: {}",
            report
                .unsupported
                .first()
                .map_or("the prover cannot compare the two", String::as_str)
        ),
        Verdict::Inconclusive => format!(
            "inconclusive: {}",
            report
                .inconclusive
                .as_deref()
                .unwrap_or("the solver gave up")
        ),
        Verdict::Within | Verdict::NoNewAccess | Verdict::NewReach | Verdict::Widened => {
            format!("within: the boundary allows everything the candidate allows{acc}")
        }
    }
}
