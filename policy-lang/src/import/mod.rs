//! OpenShell YAML import: an OpenShell v1 sandbox policy (or credentials
//! file) becomes a syntax tree of our language, with every node's span
//! pointing at the YAML scalar or key it came from.
//!
//! The translation is faithful to what OpenShell's runtime enforces, not to
//! what its YAML seems to say: defaults OpenShell applies silently are
//! written out (with a W0701 warning), patterns are rewritten so they match
//! exactly the same paths, hosts and binaries, and anything our language
//! cannot say exactly is an error (E0702–E0704) rather than an
//! approximation. `docs/openshell-import.md` records every choice.
//!
//! Modules: [`yaml`] reads YAML with positions, [`rego_glob`] reads
//! OpenShell's globs as its runtime does, [`patterns`] translates them,
//! `policy`, `endpoint` and `l7` translate the policy, `credentials` the
//! credentials file, and `binding` ties an endpoint's `credential_binding`
//! to an entry of that file.

mod binding;
mod credentials;
mod endpoint;
mod graphql;
mod l7;
pub mod patterns;
mod policy;
mod query_glob;
mod rego_glob;
mod rpc;
mod websocket;
pub mod yaml;

use std::path::Path;

use crate::ast::{DocKind, Document, Item, Stmt, Trivia, TriviaLine};
use crate::diag::{Code, Diagnostic, Diagnostics, codes};
use crate::source::{Node, SourceFile, Span};

use yaml::YNode;

/// Import an OpenShell v1 sandbox policy as `policy "<file stem>"`. A
/// `credential_binding` in it is refused here: the provider it names lives
/// in a credentials file, which [`yaml_with_credentials`] reads with it.
pub fn yaml_to_document(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    let imported = yaml_with_credentials(file, None);
    (imported.policy, imported.policy_diagnostics)
}

/// Import an OpenShell credentials file on its own as `fragment "<file
/// stem>"` holding one `credential` per entry. No endpoint binds an entry
/// here, so one without `target_hosts` is left out (W0702).
pub fn credentials_to_document(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    credentials_file(file, &[])
}

/// A policy imported together with its credentials file.
#[derive(Debug, Clone)]
pub struct Imported {
    /// `policy "<file stem>"`; `None` when the YAML could not be read.
    pub policy: Option<Document>,
    /// `fragment "<file stem>"` of the credentials file, when one was given
    /// and could be read.
    pub credentials: Option<Document>,
    /// Diagnostics located in the policy file, including every refused
    /// `credential_binding`.
    pub policy_diagnostics: Diagnostics,
    /// Diagnostics located in the credentials file.
    pub credential_diagnostics: Diagnostics,
}

/// Import an OpenShell policy and the credentials file that goes with it.
/// They are read together because an endpoint's `credential_binding` sends
/// an entry's credential to that endpoint: the entry gets its hosts from
/// the policy, and the policy is refused where OpenShell refuses the
/// binding.
pub fn yaml_with_credentials(policy: &SourceFile, credentials: Option<&SourceFile>) -> Imported {
    let mut cx = Cx::new(policy);
    let doc = cx.read().map(|root| {
        let items = policy::policy(&mut cx, &root);
        cx.document(DocKind::Policy, items)
    });
    let seen = std::mem::take(&mut cx.seen);
    let mut policy_diagnostics = cx.diags;
    let mut imported = Imported {
        policy: doc,
        credentials: None,
        policy_diagnostics: Diagnostics::default(),
        credential_diagnostics: Diagnostics::default(),
    };
    let entries = match credentials {
        Some(file) => {
            let mut ccx = Cx::new(file);
            let (doc, entries) = match ccx.read() {
                Some(root) => {
                    let (items, entries) = credentials::credentials(&mut ccx, &root, &seen);
                    (Some(ccx.document(DocKind::Fragment, items)), Some(entries))
                }
                None => (None, None),
            };
            imported.credentials = doc;
            imported.credential_diagnostics = ccx.diags;
            entries
        }
        None => None,
    };
    // An unreadable credentials file is its own error; saying every
    // binding names nothing in it would only repeat it.
    if credentials.is_none() || entries.is_some() {
        policy_diagnostics.extend(binding::check(policy, &seen, entries.as_deref()));
    }
    imported.policy_diagnostics = policy_diagnostics;
    imported
}

fn credentials_file(file: &SourceFile, seen: &[binding::Seen]) -> (Option<Document>, Diagnostics) {
    let mut cx = Cx::new(file);
    let Some(root) = cx.read() else {
        return (None, cx.diags);
    };
    let (items, _) = credentials::credentials(&mut cx, &root, seen);
    let doc = cx.document(DocKind::Fragment, items);
    (Some(doc), cx.diags)
}

/// The translation context: the file and the diagnostics found so far.
pub(crate) struct Cx<'a> {
    pub(crate) file: &'a SourceFile,
    pub(crate) diags: Diagnostics,
    /// Whether the once-per-file note about deprecated `tls` values was given.
    pub(crate) tls_noted: bool,
    /// Every endpoint translated so far, for the `credential_binding`
    /// checks that compare endpoints with each other and with the
    /// credentials file.
    pub(crate) seen: Vec<binding::Seen>,
}

impl<'a> Cx<'a> {
    fn new(file: &'a SourceFile) -> Self {
        Self {
            file,
            diags: Diagnostics::default(),
            tls_noted: false,
            seen: Vec::new(),
        }
    }

    /// Parse the YAML; report E0701 (located) when it is not readable.
    fn read(&mut self) -> Option<YNode> {
        match yaml::parse(self.file.text()) {
            Ok(Some(root)) => Some(root),
            Ok(None) => {
                self.push(
                    codes::E0703,
                    Span::new(0, 0),
                    "the file holds no YAML document",
                    "an OpenShell policy starts with `version: 1`",
                );
                None
            }
            Err(e) => {
                let text = self.file.text();
                let at = e.span.start.min(text.len());
                let end = text
                    .get(at..)
                    .and_then(|t| t.chars().next())
                    .map_or(at, |c| at + c.len_utf8());
                // Name the line the parser stopped on (or the one before,
                // when it stopped at the start of an empty one).
                let line_start = text
                    .get(..at)
                    .and_then(|t| t.rfind('\n'))
                    .map_or(0, |i| i + 1);
                let mut line = text
                    .get(line_start..)
                    .and_then(|t| t.lines().next())
                    .unwrap_or("")
                    .trim();
                if line.is_empty() {
                    let before = text.get(..line_start.saturating_sub(1)).unwrap_or("");
                    line = before.rsplit('\n').next().unwrap_or("").trim();
                }
                let shown: String = line.chars().take(40).collect();
                let help = if text.contains("${") {
                    "this looks like a template with `${...}` placeholders: render it before importing"
                } else {
                    "fix the YAML syntax at this position"
                };
                let message = if shown.is_empty() {
                    format!("unreadable YAML: {}", e.message)
                } else {
                    format!("unreadable YAML at `{shown}`: {}", e.message)
                };
                self.push(codes::E0701, Span::new(at, end), message, help);
                None
            }
        }
    }

    fn document(&self, kind: DocKind, items: Vec<Item<Stmt>>) -> Document {
        let stem = Path::new(self.file.path())
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("imported")
            .to_string();
        let source = Path::new(self.file.path())
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        Document {
            file: self.file.clone(),
            header: vec![TriviaLine::Comment(format!(
                "imported from OpenShell YAML `{source}`"
            ))],
            kind,
            name: Node::new(stem, Span::new(0, 0)),
            header_trailing: None,
            items,
            end: Vec::new(),
            footer: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        code: Code,
        span: Span,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags
            .push(Diagnostic::new(code, self.file, span, message).help(help));
    }

    /// E0702 for a key our import does not support (or OpenShell does not know).
    pub(crate) fn unsupported(&mut self, key: &YNode, context: &str, help: &str) {
        let name = key.scalar().unwrap_or("");
        self.diags.push(
            Diagnostic::new(
                codes::E0702,
                self.file,
                key.span,
                format!("unsupported field `{name}` in {context}"),
            )
            .label("not supported")
            .help(help.to_string()),
        );
    }

    /// E0703 for an ill-formed value.
    pub(crate) fn invalid(
        &mut self,
        span: Span,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.push(codes::E0703, span, message, help);
    }

    /// A non-empty scalar string. Null is `None` silently; other shapes and
    /// unexpanded `${...}` template placeholders are E0703.
    pub(crate) fn string(&mut self, node: &YNode, what: &str) -> Option<Node<String>> {
        if node.is_null() {
            return None;
        }
        let Some(text) = node.scalar() else {
            self.invalid(
                node.span,
                format!("{what} must be a single value, found {}", node.kind()),
                "write a plain or quoted string",
            );
            return None;
        };
        if let Some(at) = text.find("${") {
            let end = text
                .get(at..)
                .and_then(|t| t.find('}'))
                .map_or(text.len(), |e| at + e + 1);
            let placeholder = text.get(at..end).unwrap_or(text);
            self.invalid(
                node.span,
                format!("{what} holds the unexpanded template placeholder `{placeholder}`"),
                "this looks like a template: render it (fill in the placeholders) before importing",
            );
            return None;
        }
        Some(Node::new(text.to_string(), node.span))
    }

    /// A boolean; null counts as `false`.
    pub(crate) fn bool(&mut self, node: &YNode, what: &str) -> bool {
        if node.is_null() {
            return false;
        }
        match node.as_bool() {
            Some(b) => b,
            None => {
                self.invalid(
                    node.span,
                    format!("{what} must be `true` or `false`"),
                    "write an unquoted `true` or `false`",
                );
                false
            }
        }
    }

    /// The entries of a mapping; null is empty, anything else is E0703.
    pub(crate) fn map<'n>(&mut self, node: &'n YNode, what: &str) -> &'n [(YNode, YNode)] {
        if node.is_null() {
            return &[];
        }
        match node.entries() {
            Some(e) => e,
            None => {
                self.invalid(
                    node.span,
                    format!("{what} must be a mapping, found {}", node.kind()),
                    "write `key: value` entries",
                );
                &[]
            }
        }
    }

    /// The items of a list; null is empty, anything else is E0703.
    pub(crate) fn list<'n>(&mut self, node: &'n YNode, what: &str) -> &'n [YNode] {
        if node.is_null() {
            return &[];
        }
        match node.items() {
            Some(e) => e,
            None => {
                self.invalid(
                    node.span,
                    format!("{what} must be a list, found {}", node.kind()),
                    "write a YAML list, such as `[a, b]`",
                );
                &[]
            }
        }
    }

    /// A list of strings.
    pub(crate) fn strings(&mut self, node: &YNode, what: &str) -> Vec<Node<String>> {
        let items = self.list(node, what);
        items.iter().filter_map(|i| self.string(i, what)).collect()
    }
}

/// The key text of a mapping entry.
pub(crate) fn key(k: &YNode) -> &str {
    k.scalar().unwrap_or("")
}

/// A statement item with comment lines above it.
pub(crate) fn item(stmt: Stmt, span: Span, comments: Vec<TriviaLine>) -> Item<Stmt> {
    Item {
        trivia: Trivia {
            before: comments,
            trailing: None,
        },
        stmt: Node::new(stmt, span),
    }
}

/// Turn a YAML key into a name our grammar accepts
/// (`[A-Za-z_][A-Za-z0-9_-]*`).
pub(crate) fn sanitize_ident(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_sanitized() {
        assert_eq!(sanitize_ident("github_ssh"), "github_ssh");
        assert_eq!(sanitize_ident("my.api"), "my_api");
        assert_eq!(sanitize_ident("1password"), "_1password");
        assert_eq!(sanitize_ident(""), "_");
    }
}
