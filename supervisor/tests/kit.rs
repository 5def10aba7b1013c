//! A generation made from a kit (`sandbox_protocol::channel::kit`), as a
//! driver makes one where the sandbox's bootstrap must exist before either
//! end runs: `openshell-sandbox` starts from the kit's bootstrap, which has
//! no plan, and `openshell-supervisor serve --credential` sends the launch
//! in its greeting. Run as root.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    dead_code,
    reason = "tests stop at the first failure; they share the helpers"
)]

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use common::standalone::{self, lines, upstream, wait_for};
use common::{Dir, exe};
use sandbox::standalone::Launch;
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{Credential, Endpoint, Role, SupervisorEnd, issue, kit};
use sandbox_protocol::transport::Link;

/// The sandbox `serve_command` serves.
fn served(generation: u64) -> Binding {
    Binding {
        sandbox_id: "served".into(),
        generation,
    }
}

/// A loopback address whose port nothing listens on now.
fn free_loopback() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A kit for `binding` listening at `at`, its halves written in `dir`: the
/// bootstrap, and the supervisor's credential read-only.
fn kit_files(
    dir: &Dir,
    binding: &Binding,
    at: &Endpoint,
    reattach_within: u64,
) -> (PathBuf, PathBuf) {
    let made = kit(binding, at, reattach_within).unwrap();
    let boot = dir.join("boot.json");
    std::fs::write(&boot, &made.bootstrap).unwrap();
    let cred = dir.join("supervisor.json");
    std::fs::write(&cred, &made.supervisor).unwrap();
    std::fs::set_permissions(&cred, std::fs::Permissions::from_mode(0o400)).unwrap();
    (boot, cred)
}

/// The kit's sandbox as PID 1 of a PID namespace of its own, its streams
/// read line by line.
fn kit_sandbox(boot: &Path) -> (Child, Receiver<String>, Receiver<String>) {
    let mut child = standalone::bootstrapped(None, boot)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    (child, out, err)
}

/// A workload started from a kit runs confined as one started from a
/// bootstrap with its plan: it trusts the proxy's CA (the trust directory
/// came with the launch), its allowed connect is relayed, and its refused
/// one never reaches its listener and is in `serve`'s deny log. The
/// supervisor's credential is left where it was.
#[test]
fn a_workload_started_from_a_kit_runs_confined_and_its_denied_connect_is_logged() {
    let (up, upstream_read) = upstream();
    let refused = TcpListener::bind("127.0.0.1:0").unwrap();
    refused.set_nonblocking(true).unwrap();
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(&dir, "served", &format!("  allow {python} -> {up}\n"));
    let at = Endpoint::Tcp(free_loopback());
    let (boot, cred) = kit_files(&dir, &served(2), &at, 30);
    let (sandbox, out, err) = kit_sandbox(&boot);
    let mut seen = Vec::new();
    wait_for(&err, "which brings the launch", &mut seen);
    let log = dir.log();
    let (mut serve, serve_err, mut serve_seen) = standalone::spawn_serve_until(
        standalone::kit_serve_command(&dir, &bundle, &cred, &at.to_string())
            .arg("--log")
            .arg(&log)
            .args(["--", &python, "-c", standalone::SERVED_PY])
            .arg(up.port().to_string())
            .arg(refused.local_addr().unwrap().port().to_string()),
        "the launch goes to the sandbox in the greeting",
    );
    wait_for(
        &err,
        "the supervisor's Welcome carried the launch",
        &mut seen,
    );
    wait_for(&err, "workload", &mut seen);
    let output = sandbox.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(7), "{seen:#?}");
    let printed: Vec<String> = out.try_iter().collect();
    assert_eq!(
        printed,
        [
            "trusts the proxy CA True".to_owned(),
            "pong".to_owned(),
            format!("refused {}", libc::ECONNREFUSED)
        ],
        "{seen:#?}"
    );
    assert!(!boot.exists(), "the kit's bootstrap was left on disk");
    assert!(cred.exists(), "serve deleted the kit's credential");
    assert_eq!(serve.wait().unwrap().code(), Some(7));
    wait_for(&serve_err, "ended with status 7", &mut serve_seen);
    let line = standalone::served(&upstream_read, &refused, &log);
    assert_eq!(line["unmapped"]["sandbox"]["id"], "served", "{line}");
    assert_eq!(line["unmapped"]["sandbox"]["generation"], 2, "{line}");
}

const TICKING_PY: &str = r#"
import select, sys
while True:
    print("tick", flush=True)
    if select.select([sys.stdin], [], [], 0.01)[0]:
        sys.stdin.readline()
        sys.exit(0)
"#;

/// When the channel of a kit's generation drops, the workload is frozen
/// and `serve` attaches again as before: greeted now with the launched
/// bundle's digest, not a second launch, and the workload resumes.
#[test]
fn in_kit_mode_a_dropped_channel_is_reattached_and_the_workload_resumes() {
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(&dir, "ticking", "");
    let at = Endpoint::Tcp(free_loopback());
    let (boot, cred) = kit_files(&dir, &served(2), &at, 30);
    let (mut sandbox, out, err) = kit_sandbox(&boot);
    let mut stdin = sandbox.stdin.take().unwrap();
    let mut seen = Vec::new();
    let (mut serve, serve_err, _) = standalone::spawn_serve_until(
        standalone::kit_serve_command(&dir, &bundle, &cred, &at.to_string())
            .arg("--log")
            .arg(dir.log())
            .args(["--", &python, "-c", TICKING_PY]),
        "the launch goes to the sandbox in the greeting",
    );
    wait_for(&out, "tick", &mut seen);
    let signal = |sig: &str| {
        let sent = Command::new("kill")
            .args([sig, &serve.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    signal("-STOP");
    wait_for(&err, "frozen", &mut seen);
    while out.recv_timeout(Duration::from_millis(200)).is_ok() {}
    assert!(
        out.recv_timeout(Duration::from_millis(500)).is_err(),
        "a frozen workload still ticks"
    );
    signal("-CONT");
    wait_for(&err, "resumed", &mut seen);
    wait_for(&serve_err, "attached to the sandbox again", &mut seen);
    wait_for(&out, "tick", &mut seen);
    stdin.write_all(b"\n").unwrap();
    assert_eq!(sandbox.wait().unwrap().code(), Some(0), "{seen:#?}");
    assert_eq!(serve.wait().unwrap().code(), Some(0), "{seen:#?}");
}

/// The sandbox's port, from its "listening on" line.
fn port_of(err: &Receiver<String>, seen: &mut Vec<String>) -> SocketAddr {
    let listening = wait_for(err, "listening on", seen);
    listening
        .split_whitespace()
        .find_map(|w| w.parse::<SocketAddr>().ok())
        .unwrap()
}

/// A supervisor that holds a credential of another generation of the
/// same sandbox is refused in the TLS handshake by a sandbox waiting for
/// its launch, which goes on waiting: the workload never runs.
#[test]
fn a_supervisor_of_another_generation_is_refused_by_a_kit_sandbox() {
    let dir = Dir::new();
    let marker = dir.join("ran");
    let (boot, _) = kit_files(&dir, &served(2), &"127.0.0.1:0".parse().unwrap(), 30);
    let (mut sandbox, _out, err) = kit_sandbox(&boot);
    let mut seen = Vec::new();
    let addr = port_of(&err, &mut seen);
    let (_, other) = issue(&served(3)).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let attempt = runtime.block_on(SupervisorEnd::new(&other).unwrap().connect(addr));
    assert!(attempt.is_err(), "a supervisor of generation 3 attached");
    // Whichever end finds the other's certificate of another CA first
    // ends the handshake; the sandbox says which.
    let refusal = wait_for(&err, "refused", &mut seen);
    assert!(
        refusal.contains("not of this sandbox's generation") || refusal.contains("UnknownCA"),
        "{refusal}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(sandbox.try_wait().unwrap().is_none(), "the sandbox ended");
    sandbox.kill().unwrap();
    sandbox.wait().unwrap();
    seen.extend(err.try_iter());
    assert!(
        !seen.iter().any(|l| l.contains("started")),
        "the workload ran: {seen:#?}"
    );
    assert!(!marker.exists());
}

/// A supervisor of the generation whose launch names another sandbox or
/// generation is refused: the sandbox ends, saying why, and the workload
/// is never forked (its program would leave a file).
#[test]
fn a_launch_for_another_sandbox_or_generation_is_refused_and_nothing_runs() {
    for other in [
        served(5),
        Binding {
            sandbox_id: "another".into(),
            generation: 2,
        },
    ] {
        let dir = Dir::new();
        let marker = dir.join("ran");
        let made = kit(&served(2), &"127.0.0.1:0".parse().unwrap(), 30).unwrap();
        let boot = dir.join("boot.json");
        std::fs::write(&boot, &made.bootstrap).unwrap();
        let supervisor = Credential::from_json(&made.supervisor, Role::Supervisor).unwrap();
        let (mut sandbox, _out, err) = kit_sandbox(&boot);
        let mut seen = Vec::new();
        let addr = port_of(&err, &mut seen);

        standalone::nobody_bundle(&dir, "forged", "");
        let (_, bundle) =
            policy_lang::load::compile_file(&dir.join("forged.policy"), None).unwrap();
        let bundle = bundle.unwrap();
        let (forged_cred, _) = issue(&other).unwrap();
        let forged = standalone::bootstrap(
            &bundle,
            forged_cred,
            dir.path(),
            "/usr/bin/touch",
            vec![
                b"touch".to_vec(),
                marker.as_os_str().as_encoded_bytes().to_vec(),
            ],
            Vec::new(),
            30,
        );
        let launch = Launch {
            plan: forged.plan.unwrap(),
            run_as: forged.run_as,
            trust: None,
            timeout_seconds: None,
        };
        let (side, _) = supervisor::relay::bundle_side(bundle, &dir.log(), &[], served(2)).unwrap();
        let side = side.launching(Arc::from(launch.to_bytes()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let end = SupervisorEnd::new(&supervisor).unwrap();
        runtime.spawn(async move {
            let tls = end.connect(addr).await.unwrap();
            let _ = sandbox_protocol::transport::serve(side, tls, Link::Network).await;
        });
        let status = sandbox.wait().unwrap();
        seen.extend(err.try_iter());
        assert_ne!(status.code(), Some(0), "{seen:#?}");
        let said = seen.join("\n");
        assert!(
            said.contains(&format!(
                "the launch in the supervisor's Welcome: its plan is for sandbox \"{}\" generation {}, its credential for sandbox \"served\" generation 2",
                other.sandbox_id, other.generation
            )),
            "{said}"
        );
        assert!(!said.contains("started"), "{said}");
        assert!(!marker.exists(), "the forged launch ran");
    }
}

/// `serve --credential` with a credential of another generation than
/// `--generation` stops before anything, naming the file and both.
#[test]
fn serve_refuses_a_kit_credential_of_another_generation() {
    let dir = Dir::new();
    let bundle = standalone::nobody_bundle(&dir, "served", "");
    let (_, cred) = kit_files(&dir, &served(9), &"127.0.0.1:7443".parse().unwrap(), 30);
    let output = standalone::kit_serve_command(&dir, &bundle, &cred, "127.0.0.1:7443")
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    // As one line: the report wraps it.
    let err = String::from_utf8_lossy(&output.stderr)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(output.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&format!(
            "the credential `{}` is for sandbox \"served\" generation 9, and this supervisor serves sandbox \"served\" generation 2",
            cred.display()
        )),
        "{err}"
    );
    let both = Command::new(common::SUPERVISOR)
        .args(["serve", "--bundle"])
        .arg(&bundle)
        .args(["--sandbox", "127.0.0.1:7443", "--sandbox-id", "served"])
        .args(["--generation", "2", "--workdir", "/tmp", "--bootstrap"])
        .arg(dir.join("boot.json"))
        .arg("--credential")
        .arg(&cred)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_ne!(both.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );
}
