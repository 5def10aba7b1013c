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

    /// Results for the diagnostics and the errors, and whether the run
    /// could do its job, as SARIF.
    pub fn sarif(&self) -> Value {
        let mut results: Vec<Value> = self.diagnostics().map(sarif::diagnostic_result).collect();
        results.extend(self.errors.iter().map(sarif_error));
        with_invocation(
            sarif::document(sarif::diagnostic_rules(), results),
            self.errors.is_empty() && !self.diagnostics().any(Diagnostic::is_error),
        )
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

fn sarif_error(e: &InputError) -> Value {
    let mut r = json!({
        "ruleId": "input-error",
        "level": "error",
        "message": { "text": e.message },
    });
    if let (Some(p), Some(obj)) = (&e.path, r.as_object_mut()) {
        let uri = p.strip_prefix("./").unwrap_or(p);
        obj.insert(
            "locations".to_owned(),
            json!([{ "physicalLocation": { "artifactLocation": { "uri": uri } } }]),
        );
    }
    r
}

/// Records in the run whether the tool could do its job.
pub fn with_invocation(mut doc: Value, successful: bool) -> Value {
    if let Some(run) = doc
        .get_mut("runs")
        .and_then(Value::as_array_mut)
        .and_then(|r| r.first_mut())
        .and_then(Value::as_object_mut)
    {
        run.insert(
            "invocations".to_owned(),
            json!([{ "executionSuccessful": successful }]),
        );
    }
    doc
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
