//! Every policy in `policies/` checks clean, formats idempotently, keeps its
//! meaning when formatted, and compiles to the snapshotted bundle.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::path::{Path, PathBuf};

use policy_lang::load;
use policy_lang::source::SourceFile;
use policy_lang::{fmt, parser};

fn policy_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("../policies")
        .unwrap()
        .chain(std::fs::read_dir("../policies/fragments").unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "policy"))
        .collect();
    files.sort();
    files
}

#[test]
fn there_are_at_least_eight_policies() {
    let top: Vec<_> = policy_files()
        .into_iter()
        .filter(|p| p.parent() == Some(Path::new("../policies")))
        .collect();
    assert!(top.len() >= 8, "{top:?}");
}

#[test]
fn every_policy_checks_clean() {
    for path in policy_files() {
        let checked = load::check(&path, None).unwrap();
        let problems: Vec<String> = checked
            .diagnostics
            .iter()
            .map(|d| format!("{} {:?} {}", d.code.id, d.line_col(), d.message))
            .collect();
        assert!(problems.is_empty(), "{}: {problems:#?}", path.display());
    }
}

#[test]
fn formatting_is_idempotent_and_already_applied() {
    for path in policy_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let (doc, diags) =
            parser::parse(&SourceFile::new(path.display().to_string(), text.clone()));
        assert!(diags.is_empty(), "{}", path.display());
        let once = fmt::format_document(&doc.unwrap());
        let (doc2, _) = parser::parse(&SourceFile::new("again", once.clone()));
        let twice = fmt::format_document(&doc2.unwrap());
        assert_eq!(once, twice, "{} is not idempotent", path.display());
        assert_eq!(once, text, "{} is not formatted", path.display());
    }
}

/// Formatting a deliberately messy rendering of each policy gives back the
/// same bundle digest.
#[test]
fn formatting_never_changes_the_bundle() {
    let dir = tempdir();
    for path in policy_files() {
        let (_, Some(original)) = load::compile_file(&path, None).unwrap() else {
            continue; // fragments do not compile on their own
        };
        let text = std::fs::read_to_string(&path).unwrap();
        // Messy: extra indentation and spaces, a blank line between statements.
        let messy: String = text
            .lines()
            .map(|l| format!("    {}\n\n", widen_spaces(l)))
            .collect();
        let (doc, diags) = parser::parse(&SourceFile::new("messy", messy));
        assert!(
            !diags.has_errors(),
            "{}: {:?}",
            path.display(),
            diags.iter().map(|d| &d.message).collect::<Vec<_>>()
        );
        let formatted = fmt::format_document(&doc.unwrap());
        let out = dir.join(path.file_name().unwrap());
        std::fs::write(&out, formatted).unwrap();
        copy_fragments(&dir);
        let (_, Some(again)) = load::compile_file(&out, None).unwrap() else {
            panic!("{} did not compile after formatting", path.display());
        };
        assert_eq!(original.digest, again.digest, "{}", path.display());
    }
}

/// Triple every space outside double-quoted strings.
fn widen_spaces(line: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in line.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        if c == ' ' && !quoted {
            out.push_str("   ");
        } else {
            out.push(c);
        }
    }
    out
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("osp-fmt-{}", std::process::id()));
    std::fs::create_dir_all(d.join("fragments")).unwrap();
    d
}

fn copy_fragments(dir: &Path) {
    for e in std::fs::read_dir("../policies/fragments").unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join("fragments").join(p.file_name().unwrap())).unwrap();
    }
}

#[test]
fn compiled_bundles_match_snapshots() {
    for path in policy_files() {
        let (checked, bundle) = load::compile_file(&path, None).unwrap();
        if checked.is_fragment {
            continue;
        }
        let bundle = bundle.unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::assert_snapshot!(
            format!("bundle-{name}"),
            serde_json::to_string_pretty(&bundle).unwrap()
        );
    }
}

#[test]
fn compiled_bundles_load_back() {
    for path in policy_files() {
        if let (_, Some(bundle)) = load::compile_file(&path, None).unwrap() {
            let loaded = policy_bundle::Bundle::from_slice(&bundle.to_bytes()).unwrap();
            assert_eq!(loaded, bundle, "{}", path.display());
        }
    }
}

#[test]
fn same_input_same_bytes() {
    for path in policy_files() {
        let (_, a) = load::compile_file(&path, None).unwrap();
        let (_, b) = load::compile_file(&path, None).unwrap();
        assert_eq!(a.map(|x| x.to_bytes()), b.map(|x| x.to_bytes()));
    }
}
