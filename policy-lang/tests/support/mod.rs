//! Helpers shared by the language's endpoint-syntax tests.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the shared helpers"
)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly on bad fixtures"
)]

use policy_bundle::Bundle;
use policy_lang::source::SourceFile;
use policy_lang::{fmt, load, parser};

/// Compiles `text` from a file named after the test and `name`; any error
/// fails the test.
pub fn compile(name: &str, text: &str) -> Bundle {
    let path =
        std::env::temp_dir().join(format!("osp-syntax-{}-{name}.policy", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let (checked, bundle) = load::compile_file(&path, None).unwrap();
    let errors: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.clone())
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    bundle.unwrap()
}

pub fn format(text: &str) -> String {
    let (doc, diags) = parser::parse(&SourceFile::new("t.policy", text));
    assert!(!diags.has_errors());
    fmt::format_document(&doc.unwrap())
}

/// `messy` formats to `canonical`, formatting is idempotent, and both
/// compile to the same digest.
pub fn assert_formats_to(messy: &str, canonical: &str, prefix: &str) {
    let formatted = format(messy);
    assert_eq!(formatted, canonical);
    assert_eq!(format(&formatted), formatted);
    let before = compile(&format!("{prefix}-messy"), messy);
    let after = compile(&format!("{prefix}-canonical"), &formatted);
    assert_eq!(before.digest, after.digest);
}
