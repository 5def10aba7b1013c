//! Every YAML file under `tests/shared/fixtures/` goes through the importer.
//!
//! For each file: no panic; either it imports with no error (import and
//! resolution), or every error is an E07xx naming what is unsupported or
//! ill-formed. Files listed in `tests/import_passlist.txt` must import
//! cleanly, and files not listed must not (so both regressions and progress
//! show up as a diff of that list). For a clean import, the formatted
//! policy must parse back without errors and compile to the same bundle
//! digest as the YAML it came from.
//!
//! Credentials files (`*credentials*.yaml`) are read as credentials.

#![expect(
    clippy::unwrap_used,
    reason = "test harness: a broken fixture must fail loudly"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use policy_lang::ast::{DocKind, Document};
use policy_lang::diag::{Diagnostic, Diagnostics};
use policy_lang::fmt::format_document;
use policy_lang::source::SourceFile;
use policy_lang::{compile, import, parser, resolve};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shared/fixtures")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

fn import_file(path: &Path) -> (SourceFile, Option<Document>, Diagnostics) {
    let rel = path.strip_prefix(fixtures()).unwrap().display().to_string();
    let file = SourceFile::new(rel.clone(), std::fs::read_to_string(path).unwrap());
    let (doc, diags) = if rel.contains("credentials") {
        import::credentials_to_document(&file)
    } else {
        import::yaml_to_document(&file)
    };
    (file, doc, diags)
}

fn errors(d: &Diagnostics) -> Vec<&Diagnostic> {
    d.iter().filter(|d| d.is_error()).collect()
}

fn render(d: &Diagnostic) -> String {
    let (l, c) = d.line_col();
    format!("{} {}:{}:{} {}", d.code.id, d.file.path(), l, c, d.message)
}

/// Resolve (and, for a policy, compile) a document; the errors, and the
/// bundle digest when there are none.
fn build(doc: &Document) -> (Vec<String>, Option<String>) {
    let (resolved, diags) = resolve::resolve(std::slice::from_ref(doc));
    let errs: Vec<String> = errors(&diags).into_iter().map(render).collect();
    if !errs.is_empty() || doc.kind == DocKind::Fragment {
        return (errs, None);
    }
    (errs, Some(compile::compile(&resolved.policy).digest))
}

#[test]
fn every_fixture_imports_or_is_rejected_with_import_errors() {
    let root = fixtures();
    assert!(
        root.is_dir(),
        "the shared fixtures are missing at {} (tests/shared/fixtures)",
        root.display()
    );
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() > 40,
        "expected the shared fixtures, found {}",
        files.len()
    );
    let passlist: BTreeSet<String> = include_str!("import_passlist.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let mut clean = BTreeSet::new();
    let mut problems = Vec::new();
    let mut rejected = Vec::new();
    for path in &files {
        let (file, doc, diags) = import_file(path);
        let rel = file.path().to_string();
        let import_errors = errors(&diags);
        for e in &import_errors {
            if !e.code.id.starts_with("E07") {
                problems.push(format!("{rel}: import error outside E07xx: {}", render(e)));
            }
            if !e.message.contains('`') {
                problems.push(format!("{rel}: error names nothing: {}", render(e)));
            }
        }
        let Some(doc) = doc else {
            rejected.push(format!(
                "{rel}: {}",
                import_errors.first().map(|e| render(e)).unwrap_or_default()
            ));
            continue;
        };
        let (resolve_errors, digest) = build(&doc);
        if !import_errors.is_empty() {
            rejected.push(format!(
                "{rel}: {}",
                import_errors
                    .iter()
                    .map(|e| render(e))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
            continue;
        }
        if !resolve_errors.is_empty() {
            problems.push(format!(
                "{rel}: imported without import errors but does not resolve: {resolve_errors:?}"
            ));
            continue;
        }
        clean.insert(rel.clone());
        // Round trip through our syntax: same meaning, same digest.
        let text = format_document(&doc);
        let reparsed_file = SourceFile::new(format!("{rel}.policy"), text.clone());
        let (reparsed, parse_diags) = parser::parse(&reparsed_file);
        let parse_errors: Vec<String> = errors(&parse_diags).into_iter().map(render).collect();
        if !parse_errors.is_empty() {
            problems.push(format!(
                "{rel}: formatted import does not parse: {parse_errors:?}\n{text}"
            ));
            continue;
        }
        let reparsed = reparsed.unwrap();
        let (re_errors, re_digest) = build(&reparsed);
        if !re_errors.is_empty() || re_digest != digest {
            problems.push(format!("{rel}: round trip changed the meaning: {re_errors:?} {digest:?} vs {re_digest:?}\n{text}"));
        }
        if format_document(&reparsed) != text {
            problems.push(format!(
                "{rel}: formatting the re-parsed import is not stable"
            ));
        }
    }
    for p in &passlist {
        if !clean.contains(p) {
            problems.push(format!("{p}: on the pass-list but does not import cleanly"));
        }
    }
    for c in &clean {
        if !passlist.contains(c) {
            problems.push(format!(
                "{c}: imports cleanly but is not on tests/import_passlist.txt (add it)"
            ));
        }
    }
    eprintln!(
        "{} clean, {} rejected:\n{}",
        clean.len(),
        rejected.len(),
        rejected.join("\n")
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
