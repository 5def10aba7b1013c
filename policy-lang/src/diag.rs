//! Diagnostics: every error and warning carries its file, a span, a stable
//! code, a message and a help text. Rendering (human, JSON, SARIF, GitHub)
//! lives at the edges; here they are plain data.

use crate::source::{SourceFile, Span};

/// An error fails `check` and blocks `compile`; a warning does neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The policy cannot be compiled as written.
    Error,
    /// It compiles, but probably does not mean what it says.
    Warning,
}

/// A stable diagnostic code. The list in [`codes`] is the registry; codes
/// never change meaning once published, so CI filters can rely on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    /// `E0301`, `W0104`, `R0101`, …: what CI filters and SARIF rule ids use.
    pub id: &'static str,
    /// Fixed per code.
    pub severity: Severity,
    /// A short title for rule tables.
    pub summary: &'static str,
}

/// A secondary place a diagnostic points at, with its own text.
#[derive(Debug, Clone)]
pub struct Label {
    /// In the diagnostic's file.
    pub span: Span,
    /// What this place has to do with the problem.
    pub text: String,
}

/// One error or warning, located in its file.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// The code's severity, copied for renderers.
    pub severity: Severity,
    /// What is wrong, in one lowercase sentence.
    pub message: String,
    /// How to fix it; empty when there is nothing to add.
    pub help: String,
    /// The file the span points into.
    pub file: SourceFile,
    /// The primary location.
    pub span: Span,
    /// Text at the primary span; empty for none.
    pub label: String,
    /// Other places in the same file that explain the problem (the rule that
    /// shadows this one, the first definition of a duplicate name).
    pub secondary: Vec<Label>,
}

impl Diagnostic {
    /// A diagnostic with the code's severity and no help, label or
    /// secondary spans; the builder methods add them.
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

    /// Sets the help text.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = help.into();
        self
    }

    /// Sets the text shown at the primary span.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Adds another place in the same file.
    pub fn secondary(mut self, span: Span, text: impl Into<String>) -> Self {
        self.secondary.push(Label {
            span,
            text: text.into(),
        });
        self
    }

    /// 1-based line and column (in characters) of the span's start.
    pub fn line_col(&self) -> (u32, u32) {
        self.file.line_col(self.span.start)
    }

    /// Whether it fails the check.
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
    /// Appends one.
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    /// Appends all of `other`, in its order.
    pub fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
    }

    /// Whether any fails the check.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    /// Nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many were reported.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// In the order they were reported; [`Diagnostics::sorted`] for output.
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

    /// In the order they were reported.
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
            $( #[doc = $summary] pub const $name: Code = Code { id: stringify!($name), severity: Severity::$sev, summary: $summary }; )*
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
    E0107 = (Error, "advisor statement without a binary");
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
    E0402 = (Error, "filesystem path must be absolute and normalized");
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
    E0706 = (Error, "OpenShell credential binding without its credential");
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
    W0112 = (Warning, "deny rule a server that folds paths would not honour");
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
    // A table comparison like R0109/R0110, but it blocks: the same
    // requests carry another secret, or carry it elsewhere.
    R0111 = (Warning, "credential's secret, injection or placeholder changed");
}
