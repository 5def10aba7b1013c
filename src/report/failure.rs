//! The answer when the input itself is bad (a file that cannot be read or
//! does not compile, a malformed flag value): a document of the requested
//! format on every exit, so a CI step that parses stdout never meets an
//! empty string.

use policy_lang::diag::Diagnostic;
use serde_json::{Value, json};

use super::{FileReport, github_escape, github_line, sarif};
use crate::output::outln;

/// Input that could not be used, with no source location of its own.
#[derive(Debug, Clone)]
pub struct InputError {
    /// The file it concerns, when there is one.
    pub path: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn new(path: Option<String>, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
        }
    }
}

/// Why a command could not answer: located diagnostics and bare errors.
#[derive(Default)]
pub struct Failure {
    pub files: Vec<FileReport>,
    pub errors: Vec<InputError>,
}

impl Failure {
    pub fn error(path: Option<String>, message: impl Into<String>) -> Self {
        Self {
            files: Vec::new(),
            errors: vec![InputError::new(path, message)],
        }
    }

    /// The first thing to say in a one-line reason.
    pub fn headline(&self) -> String {
        self.errors
            .first()
            .map(|e| e.message.clone())
            .or_else(|| {
                self.diagnostics()
                    .find(|d| d.is_error())
                    .map(|d| d.message.clone())
            })
            .unwrap_or_else(|| "the input cannot be used".to_owned())
    }

    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files.iter().flat_map(|f| &f.diagnostics)
    }

    /// `files` and `errors` as JSON members, to merge into a document.
    pub fn json_members(&self) -> (Value, Value) {
        (files_json(&self.files), errors_json(&self.errors))
    }

    /// Diagnostics (miette) and errors on stderr, for people.
    pub fn print_human(&self) {
        for d in self.diagnostics() {
            eprint!("{}", super::human::render(d));
        }
        for e in &self.errors {
            eprintln!("error: {}", e.message);
        }
    }

    /// The diagnostics and the errors as SARIF results.
    pub fn push_sarif(&self, log: &mut sarif::Log) {
        for d in self.diagnostics() {
            sarif::push_diagnostic(log, d);
        }
        for e in &self.errors {
            push_sarif_error(log, e);
        }
    }

    /// The whole SARIF log of a command that could not answer.
    pub fn sarif(&self, exit_code: u8) -> Value {
        let mut log = sarif::Log::new();
        self.push_sarif(&mut log);
        log.finish(exit_code)
    }

    /// One workflow command per diagnostic and error.
    pub fn github(&self) -> String {
        let mut lines: Vec<String> = self.diagnostics().map(github_line).collect();
        lines.extend(self.errors.iter().map(github_error));
        lines.join("\n")
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from("### openshell-policy: the input cannot be used\n\n");
        for d in self.diagnostics() {
            let (line, col) = d.line_col();
            out.push_str(&format!(
                "- `{}:{line}:{col}` {} {}\n",
                d.file.path(),
                d.code.id,
                d.message
            ));
        }
        for e in &self.errors {
            match &e.path {
                Some(p) => out.push_str(&format!("- `{p}`: {}\n", e.message)),
                None => out.push_str(&format!("- {}\n", e.message)),
            }
        }
        out
    }
}

pub fn files_json(files: &[FileReport]) -> Value {
    Value::Array(
        files
            .iter()
            .map(|r| {
                json!({
                    "path": r.path,
                    "diagnostics": r.diagnostics.iter().map(Diagnostic::to_json).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

pub fn errors_json(errors: &[InputError]) -> Value {
    Value::Array(
        errors
            .iter()
            .map(|e| json!({ "path": e.path, "message": e.message }))
            .collect(),
    )
}

/// An input error at its file; one without a file (a refused command
/// line, a bad flag value) concerns the run, not a location, so it is a
/// tool execution notification: code scanning refuses results without one.
pub fn push_sarif_error(log: &mut sarif::Log, e: &InputError) {
    let Some(path) = e.path.as_deref() else {
        log.notify("error", &e.message);
        return;
    };
    let locations = log.locations(path, None);
    log.push(
        &sarif::Rule::input_error(),
        json!({
            "level": "error",
            "message": { "text": e.message },
            "locations": locations,
        }),
    );
}

pub fn github_error(e: &InputError) -> String {
    match &e.path {
        Some(p) => format!(
            "::error file={},title=input-error::{}",
            github_escape(p, true),
            github_escape(&e.message, false)
        ),
        None => format!(
            "::error title=input-error::{}",
            github_escape(&e.message, false)
        ),
    }
}

/// Prints `doc` when it is not empty (GitHub annotations may be none).
pub fn emit(doc: &str) {
    if !doc.is_empty() {
        outln!("{doc}");
    }
}
