//! `openshell-policy-solver --version` names this program.

use std::process::Command;

#[test]
fn version_names_the_solver_program() {
    for flag in ["--version", "-V"] {
        let o = Command::new(env!("CARGO_BIN_EXE_openshell-policy-solver"))
            .arg(flag)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        assert_eq!(
            String::from_utf8(o.stdout).unwrap(),
            format!("openshell-policy-solver {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}
