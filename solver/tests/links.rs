//! `openshell-policy-solver` links Z3: it is the program
//! `openshell-policy` hands the proofs that need it to
//! (`tests/cli_no_z3.rs` at the workspace root checks the other half).

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
fn the_solver_program_needs_libz3() {
    let bin = env!("CARGO_BIN_EXE_openshell-policy-solver");
    let libs = needed(bin);
    assert!(
        libs.iter().any(|l| l.starts_with("libz3")),
        "{bin} needs {libs:?}"
    );
}
