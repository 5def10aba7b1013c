//! OpenShell YAML import: not available in this build yet.

use crate::ast::Document;
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::source::{SourceFile, Span};

fn unsupported(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    let mut d = Diagnostics::default();
    d.push(
        Diagnostic::new(codes::E0702, file, Span::new(0, 0), "OpenShell YAML import is not available in this build")
            .help("write the policy in the `.policy` language"),
    );
    (None, d)
}

pub fn yaml_to_document(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    unsupported(file)
}

pub fn credentials_to_document(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    unsupported(file)
}
