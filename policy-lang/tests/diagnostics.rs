//! Diagnostics as data: each file under `tests/diagnostics/` is a broken
//! or risky policy, and its diagnostics are snapshotted. Adding a case
//! needs no Rust.

use std::fmt::Write as _;

use policy_lang::load;

#[test]
fn diagnostics_match_snapshots() {
    insta::glob!("diagnostics/*.policy", |path| {
        let rel = format!(
            "tests/diagnostics/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let checked = load::check(std::path::Path::new(&rel), None).unwrap();
        let mut out = String::new();
        for d in &checked.diagnostics {
            let (line, col) = d.line_col();
            let severity = if d.is_error() { "error" } else { "warning" };
            let _ = writeln!(out, "{} {line}:{col} {severity}: {}", d.code.id, d.message);
            if !d.help.is_empty() {
                let _ = writeln!(out, "    help: {}", d.help);
            }
        }
        assert!(!out.is_empty(), "{rel} produced no diagnostics");
        insta::assert_snapshot!(out);
    });
}
