//! `openshell-supervisor serve` on this host and the statically linked
//! `openshell-sandbox` as PID 1 of a Podman container (crun) with no
//! network at all (`--network=none`), uid 999, no capabilities and
//! `no_new_privs`: the only way between them is a Unix socket in a
//! directory both see, bind-mounted into the container, through which the
//! bootstrap is handed in too. Run as root.
//!
//! The binary is the one `scripts/build-static-sandbox` prints, named by
//! `OPENSHELL_STATIC_SANDBOX` (its linkage is checked by the sandbox's
//! own Podman tests); the host is prepared by `scripts/podman-host-prep`.
//! Without either the test fails, saying so.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    dead_code,
    reason = "tests stop at the first failure; they share the helpers"
)]

mod common;
#[path = "../../sandbox/tests/podman/host.rs"]
mod host;

use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::standalone::{self, wait_for};
use common::{Dir, SUPERVISOR, SYSTEM, exe};
use host::{USER, confined_run, host_usr, require_podman, rootfs, static_sandbox};

/// Where the socket directory is mounted in the container: another name
/// than the host's, as a driver would give it.
const MOUNTED: &str = "/run/openshell";

/// The longest a container may take, start to end.
const LIMIT: Duration = Duration::from_secs(60);

/// `cmd`'s output, or a failure if it runs past [`LIMIT`].
fn output_within(mut cmd: Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podman did not start: run scripts/podman-host-prep");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the container did not end within {LIMIT:?}");
        }
    }
}

/// What the workload says of itself before it runs
/// [`standalone::SERVED_PY`]: one connect to this host's loopback
/// (argv[1]) that a rule allows, one (argv[2]) that none does.
const WHOAMI_PY: &str = r#"
import os
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")]
print("uid", os.getuid(), "gid", os.getgid(), "caps", " ".join(caps), flush=True)
"#;

/// `serve` attaches over the socket to a sandbox that has no network; the
/// workload runs as the container's user with no capability, its connect
/// to this host's loopback is decided and relayed by `serve`, the one no
/// rule allows is refused and in `serve`'s deny log (never reaching its
/// listener), and its exit status is both `serve`'s and `podman`'s. The
/// bootstrap, handed in through the mount, is gone once read; the socket
/// is the container user's alone.
#[test]
fn serve_supervises_a_sandbox_in_a_container_with_no_network_over_a_unix_socket() {
    require_podman();
    let sandbox = static_sandbox();
    let (up, upstream_read) = standalone::upstream();
    let refused = TcpListener::bind("127.0.0.1:0").unwrap();
    refused.set_nonblocking(true).unwrap();

    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    // No `run_as`: the container's user is the workload's (a root with no
    // C library resolves no user name).
    let bundle = common::bundle(
        &dir,
        "podman",
        &format!("  landlock hard min_abi 4\n{SYSTEM}  allow {python} -> {up}\n"),
    );
    let shared = tempfile::Builder::new()
        .prefix("osp-pod-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::chown(shared.path(), Some(USER), Some(USER)).unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let boot = shared.path().join("bootstrap.json");
    let log = dir.log();
    let mut serve = Command::new(SUPERVISOR);
    serve
        .args(["serve", "--bundle"])
        .arg(&bundle)
        .arg("--sandbox")
        .arg(format!(
            "unix:{}",
            shared.path().join("sandbox.sock").display()
        ))
        .arg("--sandbox-listen")
        .arg(format!("unix:{MOUNTED}/sandbox.sock"))
        .args(["--sandbox-id", "pod", "--generation", "1", "--bootstrap"])
        .arg(&boot)
        .args(["--workdir", "/tmp", "--log"])
        .arg(&log)
        .args([
            "--",
            &python,
            "-c",
            &format!("{WHOAMI_PY}{}", standalone::SERVED_PY),
        ])
        .arg(up.port().to_string())
        .arg(refused.local_addr().unwrap().port().to_string());
    let (mut serve, serve_err, mut seen) = standalone::spawn_serve(&mut serve);
    // serve writes it for its own user; the container's must read it.
    std::os::unix::fs::chown(&boot, Some(USER), Some(USER)).unwrap();

    let mut volumes = Vec::new();
    let root = rootfs(&sandbox, |root| volumes = host_usr(root));
    let mut podman = confined_run();
    podman
        .arg("-v")
        .arg(format!("{}:{MOUNTED}", shared.path().display()));
    for volume in &volumes {
        podman.args(["-v", volume]);
    }
    podman
        .arg("--rootfs")
        .arg(root.path())
        .args(["/openshell-sandbox", "--bootstrap"])
        .arg(format!("{MOUNTED}/bootstrap.json"));
    let ran = output_within(podman);
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(
        ran.status.code(),
        Some(7),
        "podman exits as the workload did\n{out}\n{err}"
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            &format!(
                "uid {USER} gid {USER} caps {}",
                ["0000000000000000"; 5].join(" ")
            ),
            "trusts the proxy CA True",
            "pong",
            &format!("refused {}", libc::ECONNREFUSED),
        ],
        "{err}"
    );
    assert!(
        err.contains(&format!("listening on unix:{MOUNTED}/sandbox.sock ")),
        "{err}"
    );
    // serve, outside the container's PID namespace: its uid alone.
    assert!(err.contains("the supervisor (uid 0) attached"), "{err}");
    assert!(!boot.exists(), "the bootstrap is still in the mount");
    let socket = std::fs::symlink_metadata(shared.path().join("sandbox.sock")).unwrap();
    assert!(socket.file_type().is_socket());
    assert_eq!(
        (socket.uid(), socket.permissions().mode() & 0o7777),
        (USER, 0o600)
    );

    let status = serve.wait().unwrap();
    let evidence = wait_for(&serve_err, "evidence", &mut seen);
    assert!(evidence.contains(&format!("uid {USER}")), "{evidence}");
    wait_for(&serve_err, "ended with status 7", &mut seen);
    assert_eq!(status.code(), Some(7), "{seen:#?}");
    let line = standalone::served(&upstream_read, &refused, &log);
    assert_eq!(line["unmapped"]["sandbox"]["id"], "pod", "{line}");
}
