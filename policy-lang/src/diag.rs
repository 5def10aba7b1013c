//! Diagnostics: every error and warning carries its file, a span, a stable
//! code, a message and a help text. Rendering (human, JSON, SARIF, GitHub)
//! lives at the edges; here they are plain data.

use crate::source::{SourceFile, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A stable diagnostic code. The list in [`codes`] is the registry; codes
/// never change meaning once published, so CI filters can rely on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    pub id: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
}

#[derive(Debug, Clone)]
pub struct Label {
    pub span: Span,
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub help: String,
    pub file: SourceFile,
    pub span: Span,
    pub label: String,
    /// Other places in the same file that explain the problem (the rule that
    /// shadows this one, the first definition of a duplicate name).
    pub secondary: Vec<Label>,
}

impl Diagnostic {
    pub fn new(code: Code, file: &SourceFile, span: Span, message: impl Into<String>) -> Self {
        Self {
            code,
            severity: code.severity,
            message: message.into(),
            help: String::new(),
            file: file.clone(),
            span,
            label: String::new(),
            secondary: Vec::new(),
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = help.into();
        self
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    pub fn secondary(mut self, span: Span, text: impl Into<String>) -> Self {
        self.secondary.push(Label {
            span,
            text: text.into(),
        });
        self
    }

    pub fn line_col(&self) -> (u32, u32) {
        self.file.line_col(self.span.start)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The diagnostic as `check --format json` prints it (one element of a
    /// file's `diagnostics`).
    pub fn to_json(&self) -> serde_json::Value {
        let (line, column) = self.line_col();
        let (end_line, end_column) = self.file.line_col(self.span.end);
        serde_json::json!({
            "severity": self.severity,
            "code": self.code.id,
            "message": self.message,
            "help": self.help,
            "file": self.file.path(),
            "line": line,
            "column": column,
            "end_line": end_line,
            "end_column": end_column,
        })
    }
}

/// An ordered collection of diagnostics for one run.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter()
    }

    /// Sorted by file, position and code so output is stable across runs.
    pub fn sorted(mut self) -> Vec<Diagnostic> {
        self.items.sort_by(|a, b| {
            (a.file.path(), a.span.start, a.code.id, &a.message).cmp(&(
                b.file.path(),
                b.span.start,
                b.code.id,
                &b.message,
            ))
        });
        self.items
            .dedup_by(|a, b| a.code == b.code && a.span == b.span && a.message == b.message);
        self.items
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.items
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

macro_rules! codes {
    ($( $name:ident = ($sev:ident, $summary:expr); )*) => {
        /// The registry of diagnostic codes.
        pub mod codes {
            use super::{Code, Severity};
            $( pub const $name: Code = Code { id: stringify!($name), severity: Severity::$sev, summary: $summary }; )*
        }
    };
}

codes! {
    E0100 = (Error, "syntax error");
    E0101 = (Error, "unknown statement");
    E0102 = (Error, "setting given twice");
    E0103 = (Error, "include failed");
    E0104 = (Error, "invalid number");
    E0105 = (Error, "a fragment cannot be compiled on its own");
    E0106 = (Error, "file holds no policy");
    E0201 = (Error, "unknown binary set");
    E0202 = (Error, "name defined twice");
    E0203 = (Error, "unknown credential");
    E0301 = (Error, "invalid host pattern");
    E0302 = (Error, "invalid HTTP path pattern");
    E0303 = (Error, "invalid binary pattern");
    E0304 = (Error, "invalid port");
    E0305 = (Error, "invalid address or CIDR");
    E0306 = (Error, "invalid HTTP method");
    E0307 = (Error, "invalid query matcher");
    E0308 = (Error, "invalid SHA-256 pin");
    E0309 = (Error, "invalid endpoint");
    E0310 = (Error, "invalid JSON-RPC method");
    E0311 = (Error, "invalid MCP tool pattern");
    E0312 = (Error, "invalid GraphQL operation type");
    E0313 = (Error, "invalid GraphQL name or pattern");
    E0401 = (Error, "filesystem rule Landlock cannot enforce");
    E0402 = (Error, "filesystem path must be absolute");
    E0403 = (Error, "unsupported Landlock ABI");
    E0410 = (Error, "unpinned binary in a writable tree");
    E0501 = (Error, "option not valid for this protocol");
    E0502 = (Error, "conflicting endpoint options");
    E0503 = (Error, "endpoint allows nothing");
    E0504 = (Error, "JSON-RPC or MCP rules that do not fit together");
    E0505 = (Error, "body limit out of range");
    E0506 = (Error, "persisted query registered twice");
    E0507 = (Error, "WebSocket rules that do not fit together");
    E0601 = (Error, "incomplete credential");
    E0602 = (Error, "invalid credential setting");
    E0701 = (Error, "unreadable YAML");
    E0702 = (Error, "unsupported OpenShell field");
    E0703 = (Error, "invalid OpenShell value");
    E0704 = (Error, "OpenShell pattern not expressible exactly");
    E0705 = (Error, "unsupported OpenShell version");
    W0101 = (Warning, "wildcard host on a transparent TCP endpoint");
    W0102 = (Warning, "credential reachable without inspection");
    W0103 = (Warning, "audit mode on a credentialed endpoint");
    W0104 = (Warning, "endpoint rule shadowed by another");
    W0105 = (Warning, "inspected endpoint allows no request");
    W0106 = (Warning, "credential never injected");
    W0107 = (Warning, "redundant filesystem rule");
    W0108 = (Warning, "broad binary pattern");
    W0109 = (Warning, "L7 rules not enforced");
    W0110 = (Warning, "unpinned binary in a writable tree");
    W0111 = (Warning, "unknown HTTP method");
    W0130 = (Warning, "workload runs as root");
    W0131 = (Warning, "no run_as user");
    W0701 = (Warning, "OpenShell default made explicit");
    W0702 = (Warning, "OpenShell construct translated");
    W0703 = (Warning, "OpenShell policy group without effect");
    // The prover's findings, as `check --prove` reports them; each is one
    // of `prover::Category`.
    R0101 = (Warning, "new reach to a credentialed destination");
    R0102 = (Warning, "new method or path on a credentialed destination");
    R0103 = (Warning, "credentialed destination reachable without inspection");
    R0104 = (Warning, "audit mode lets denied credentialed requests through");
    R0105 = (Warning, "reach to link-local or cloud metadata destinations");
    R0106 = (Warning, "sandbox-held secret readable by a binary that can send it");
    R0107 = (Warning, "network rule names a binary the workload can plant");
    // What `diff --prove` reports as new reach: it does not block a change
    // as the credentialed categories do, but it means the candidate adds
    // something (`new-reach`, not `no-new-access`).
    R0108 = (Warning, "new uncredentialed reach");
    R0109 = (Warning, "new filesystem right");
    R0110 = (Warning, "sandbox enforcement weakened");
}
