//! `openshell-sandbox preflight` on this host, as root and as a user with
//! no capability: every check the sandbox needs passes, and what depends
//! on privilege (`noexec` mounts) is told apart.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests stop at the first failure"
)]

use std::process::Command;

use serde_json::Value;

fn preflight(cmd: &mut Command) -> (i32, Value) {
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn every_check_passes_here_as_root_and_without_privilege() {
    let exe = env!("CARGO_BIN_EXE_openshell-sandbox");
    let (code, root) = preflight(Command::new(exe).arg("preflight"));
    assert_eq!(code, 0, "{root:#}");
    for check in [
        "landlock_enforced",
        "seccomp_listener",
        "socket_installed",
        "errno_answered",
        "noexec_mounts",
        "ok",
    ] {
        assert_eq!(root[check], true, "{check}: {root:#}");
    }
    assert!(root["landlock_abi"].as_u64().unwrap() >= 1, "{root:#}");
    assert_eq!(root["failures"], serde_json::json!([]));

    let (code, user) = preflight(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .args([exe, "preflight"]),
    );
    assert_eq!(code, 0, "{user:#}");
    assert_eq!(user["ok"], true, "{user:#}");
    assert_eq!(user["noexec_mounts"], false, "{user:#}");
}
