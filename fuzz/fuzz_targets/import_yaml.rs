//! Any bytes through the OpenShell YAML importer (as a policy and as a
//! credentials file): nothing may panic, and a clean import must format to
//! text our parser accepts, with the same meaning.
#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_lang::source::SourceFile;
use policy_lang::{compile, fmt, import, parser, resolve};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = SourceFile::new("fuzz.yaml", text);
    let _ = import::credentials_to_document(&file);
    let (doc, diags) = import::yaml_to_document(&file);
    for d in diags.iter() {
        let _ = d.line_col();
    }
    let Some(doc) = doc else { return };
    let (resolved, rdiags) = resolve::resolve(std::slice::from_ref(&doc));
    if diags.has_errors() {
        return;
    }
    let formatted = fmt::format_document(&doc);
    let (doc2, diags2) = parser::parse(&SourceFile::new("fuzz.policy", formatted.clone()));
    assert!(!diags2.has_errors(), "imported policy must parse:\n{formatted}");
    let doc2 = doc2.expect("parsed");
    let (resolved2, rdiags2) = resolve::resolve(std::slice::from_ref(&doc2));
    assert_eq!(rdiags.has_errors(), rdiags2.has_errors(), "{formatted}");
    if !rdiags.has_errors() {
        assert_eq!(
            compile::compile(&resolved.policy).digest,
            compile::compile(&resolved2.policy).digest,
            "import changed the meaning:\n{formatted}"
        );
    }
});
