//! Any text through parse → resolve → lint → compile → format: nothing may
//! panic; a compiled bundle loads back; formatting is idempotent and keeps
//! the meaning (same diagnostics, same bundle digest).
#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_lang::ast::Document;
use policy_lang::source::SourceFile;
use policy_lang::{compile, fmt, lint, parser, resolve};

/// Diagnostic codes and, when the policy compiles, its digest.
fn meaning(doc: &Document) -> (Vec<&'static str>, Option<String>) {
    let (resolved, diags) = resolve::resolve(std::slice::from_ref(doc));
    let _ = lint::lint(&resolved);
    let mut codes: Vec<&'static str> = diags.iter().map(|d| d.code.id).collect();
    codes.sort_unstable();
    let digest = (!diags.has_errors()).then(|| {
        let bundle = compile::compile(&resolved.policy);
        let loaded = policy_bundle::Bundle::from_slice(&bundle.to_bytes());
        assert!(loaded.is_ok(), "a compiled bundle must load back: {loaded:?}");
        bundle.digest
    });
    (codes, digest)
}

/// Comments in a policy that parsed: each starts with a `#` outside a
/// quoted string (a `#` cannot appear in any other token).
fn comment_count(text: &str) -> usize {
    let mut quoted = false;
    let mut escaped = false;
    let mut comment = false;
    let mut count = 0;
    for c in text.chars() {
        if comment {
            comment = c != '\n';
        } else if quoted {
            quoted = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            quoted = true;
        } else if c == '#' {
            comment = true;
            count += 1;
        }
    }
    count
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = SourceFile::new("fuzz.policy", text);
    let (doc, diags) = parser::parse(&file);
    for d in diags.iter() {
        let _ = d.line_col();
    }
    let Some(doc) = doc else { return };
    let before = meaning(&doc);
    if diags.has_errors() {
        return;
    }
    let formatted = fmt::format_document(&doc);
    let (doc2, diags2) = parser::parse(&SourceFile::new("fuzz2.policy", formatted.clone()));
    assert!(!diags2.has_errors(), "formatted output must parse:\n{formatted}");
    let doc2 = doc2.expect("formatted output parsed");
    assert_eq!(fmt::format_document(&doc2), formatted, "formatting is not idempotent");
    assert_eq!(comment_count(&formatted), comment_count(text), "formatting lost a comment:\n{formatted}");
    assert_eq!(meaning(&doc2), before, "formatting changed the meaning:\n{formatted}");
});
