//! `openshell-policy` never needs libz3, however it was built: a workspace
//! build unifies features, and a solver feature turned on for
//! `openshell-policy-solver` or the gateway once linked Z3 into this
//! binary too (loading it costs every run a third of a typical
//! `diff --prove`). `solver/tests/links.rs` checks the other half: the
//! solver program does need it.

use std::process::Command;

/// The shared libraries an ELF file names in its dynamic section.
#[expect(clippy::unwrap_used, reason = "test helper")]
fn needed(path: &str) -> Vec<String> {
    let o = Command::new("readelf")
        .args(["--dynamic", "--wide", path])
        .output()
        .unwrap();
    assert!(o.status.success(), "readelf {path}: {o:?}");
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_owned()))
        .collect()
}

#[test]
fn openshell_policy_does_not_need_libz3() {
    let bin = env!("CARGO_BIN_EXE_openshell-policy");
    let libs = needed(bin);
    assert!(
        !libs.iter().any(|l| l.starts_with("libz3")),
        "{bin} needs {libs:?}"
    );
}
