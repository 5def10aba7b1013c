//! `openshell-sandbox --bootstrap FILE`, started on its own as a container
//! runtime would, with this test as its supervisor over TCP and TLS on
//! loopback (`supervisor::relay::bundle_side`): the workload runs only
//! once a supervisor of the sandbox's generation has attached, every other
//! peer is refused, and when the channel drops the workload is killed.
//! Then `openshell-supervisor serve` as its supervisor, over TCP and over
//! a Unix socket (a sandbox with no network). Run as root.
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
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::standalone::{self, lines, tree_states, upstream, upstream_on, wait_for};
use common::{Dir, SUPERVISOR, SYSTEM, exe};
use sandbox::standalone::EXIT_SUPERVISOR_LOST;
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{Credential, SupervisorEnd, issue};
use sandbox_protocol::transport::Link;

fn binding(generation: u64) -> Binding {
    Binding {
        sandbox_id: "standalone".into(),
        generation,
    }
}

/// A standalone sandbox running `script` with python3, allowed to reach
/// `upstream`, and the supervisor's credential for it.
struct Started {
    dir: Dir,
    child: Child,
    stdin: ChildStdin,
    out: Receiver<String>,
    err: Receiver<String>,
    seen: Vec<String>,
    port: u16,
    bundle: policy_bundle::Bundle,
    supervisor: Credential,
    bootstrap: PathBuf,
}

/// How the sandbox process is started.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum As {
    /// A plain process of the test's.
    Process,
    /// PID 1 of a PID namespace of its own.
    Init,
    /// A process that sees no cgroup hierarchy (a container that mounts
    /// none): it freezes with `SIGSTOP` alone.
    WithoutCgroups,
}

fn start(upstream: SocketAddr, script: &str, how: As) -> Started {
    start_with(upstream, script, how, 30)
}

fn start_with(upstream: SocketAddr, script: &str, how: As, reattach_within: u64) -> Started {
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let policy = dir.join("p.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"standalone\" {{\n  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  allow {python} -> {upstream}\n}}\n"
        ),
    )
    .unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&policy, None).unwrap();
    let bundle = bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    let (sandbox, supervisor) = issue(&binding(4)).unwrap();
    let file = standalone::bootstrap(
        &bundle,
        sandbox,
        dir.path(),
        &python,
        vec![
            b"python3".to_vec(),
            b"-c".to_vec(),
            script.as_bytes().to_vec(),
            upstream.port().to_string().into_bytes(),
        ],
        vec![b"PATH=/usr/bin:/bin".to_vec()],
        reattach_within,
    );
    let bootstrap = dir.join("bootstrap.json");
    std::fs::write(&bootstrap, file.to_bytes()).unwrap();
    let mut cmd = match how {
        As::Init => standalone::bootstrapped(None, &bootstrap),
        As::Process => {
            let mut c = Command::new(standalone::sandbox_exe());
            c.arg("--bootstrap").arg(&bootstrap);
            c
        }
        As::WithoutCgroups => {
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(standalone::WITHOUT_CGROUPS)
                .arg(standalone::sandbox_exe())
                .arg("--bootstrap")
                .arg(&bootstrap);
            c
        }
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let listening = wait_for(&err, "listening on", &mut seen);
    let port = listening
        .split_whitespace()
        .find_map(|w| w.parse::<SocketAddr>().ok())
        .unwrap()
        .port();
    Started {
        dir,
        child,
        stdin,
        out,
        err,
        seen,
        port,
        bundle,
        supervisor,
        bootstrap,
    }
}

impl Started {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Attaches as the supervisor on a thread of its own; the channel
    /// drops when the returned sender is dropped or sent to.
    fn attach(&self) -> std::sync::mpsc::Sender<()> {
        let (side, _) =
            supervisor::relay::bundle_side(self.bundle.clone(), &self.dir.log(), &[], binding(4))
                .unwrap();
        let end = SupervisorEnd::new(&self.supervisor).unwrap();
        let addr = self.addr();
        let (drop_it, dropped) = channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let tls = end.connect(addr).await.unwrap();
                let serving = sandbox_protocol::transport::serve(side, tls, Link::Network);
                let stop = tokio::task::spawn_blocking(move || {
                    let _ = dropped.recv();
                });
                tokio::select! {
                    _ = serving => {}
                    _ = stop => {}
                }
            });
        });
        drop_it
    }

    /// Nothing on the workload's standard output for a while: it has not
    /// run.
    fn assert_not_started(&self) {
        assert!(
            self.out.recv_timeout(Duration::from_millis(300)).is_err(),
            "the workload ran before a supervisor attached"
        );
    }
}

const RELAYED_PY: &str = r#"
import socket, sys
print("started", flush=True)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"ping\n")
print(s.makefile().readline().strip(), flush=True)
sys.stdin.readline()
"#;

#[test]
fn the_workload_runs_only_once_its_supervisor_attached_and_every_other_peer_is_refused() {
    let (up, upstream_read) = upstream();
    let mut s = start(up, RELAYED_PY, As::Init);
    assert!(
        !s.bootstrap.exists(),
        "the bootstrap, with the sandbox's key, is still on disk"
    );
    s.assert_not_started();

    // Not TLS.
    let mut garbage = TcpStream::connect(s.addr()).unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let line = wait_for(&s.err, "refused", &mut s.seen);
    assert!(line.contains("does not speak TLS 1.3"), "{line}");
    // A supervisor of another generation.
    let (_, stranger) = issue(&binding(3)).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let other = runtime.block_on(SupervisorEnd::new(&stranger).unwrap().connect(s.addr()));
    assert!(other.is_err(), "a supervisor of generation 3 attached");
    wait_for(&s.err, "refused", &mut s.seen);
    s.assert_not_started();

    let _attached = s.attach();
    wait_for(&s.err, "attached", &mut s.seen);
    assert_eq!(wait_for(&s.out, "started", &mut s.seen), "started");
    assert_eq!(wait_for(&s.out, "pong", &mut s.seen), "pong");
    assert_eq!(upstream_read.recv().unwrap(), "ping\n");

    // A second supervisor of the same generation, while one is attached.
    let second = runtime.block_on(SupervisorEnd::new(&s.supervisor).unwrap().connect(s.addr()));
    drop(second);
    let line = wait_for(&s.err, "refused", &mut s.seen);
    assert!(line.contains("a supervisor is attached"), "{line}");

    s.stdin.write_all(b"\n").unwrap();
    let status = s.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{:#?}", s.seen);
}

const LINGERING_PY: &str = r#"
import subprocess, sys
child = subprocess.Popen(["/usr/bin/sleep", "300"], start_new_session=True)
print("started", child.pid, flush=True)
sys.stdin.readline()
"#;

/// Without a PID namespace (so nothing is killed by the kernel when the
/// sandbox exits), a workload process in a session of its own is frozen
/// when the channel drops and killed when no supervisor comes back within
/// the window; the sandbox ends with its own status.
#[test]
fn when_the_channel_drops_and_no_supervisor_returns_every_workload_process_is_killed() {
    let (up, _) = upstream();
    let mut s = start_with(up, LINGERING_PY, As::Process, 1);
    s.assert_not_started();
    let channel = s.attach();
    let started = wait_for(&s.out, "started", &mut s.seen);
    let pid: u32 = started
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(channel);
    let frozen = wait_for(&s.err, "frozen", &mut s.seen);
    assert!(frozen.contains("2 workload processes frozen"), "{frozen}");
    wait_for(&s.err, "killed", &mut s.seen);
    let status = s.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(i32::from(EXIT_SUPERVISOR_LOST)),
        "{:#?}",
        s.seen
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workload's process {pid} outlived the channel"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two workload processes tick and keep sending each other `SIGCONT`;
/// the child is in a session of its own, and there is no PID namespace.
const TICKING_PY: &str = r#"
import os, select, signal, sys, time
child = os.fork()
if child == 0:
    os.setsid()
    while True:
        try:
            os.kill(os.getppid(), signal.SIGCONT)
        except OSError:
            pass
        print("tick child", flush=True)
        time.sleep(0.01)
while True:
    os.kill(child, signal.SIGCONT)
    print("tick parent", flush=True)
    if select.select([sys.stdin], [], [], 0.01)[0]:
        sys.stdin.readline()
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        sys.exit(0)
"#;

/// "The workload stops when the channel drops, cannot resume itself, and
/// goes on when its supervisor reattaches": two processes that tick and
/// send each other `SIGCONT` are both stopped, stay stopped, and tick
/// again once the same generation's supervisor has attached anew; frozen
/// in their cgroup, and with `SIGSTOP` alone where the sandbox sees no
/// cgroup hierarchy.
#[test]
fn a_dropped_channel_freezes_the_workload_until_its_supervisor_reattaches() {
    for how in [As::Process, As::WithoutCgroups] {
        freezes_until_reattached(how);
    }
}

fn freezes_until_reattached(how: As) {
    let (up, _) = upstream();
    let mut s = start(up, TICKING_PY, how);
    let by = if how == As::WithoutCgroups {
        "stops its processes with SIGSTOP"
    } else {
        "which a dropped channel freezes"
    };
    // Said before it listens: among the lines `start` passed over.
    assert!(
        s.seen.iter().any(|l| l.contains(by)),
        "{how:?}: {:#?}",
        s.seen
    );
    let channel = s.attach();
    wait_for(&s.out, "tick parent", &mut s.seen);
    wait_for(&s.out, "tick child", &mut s.seen);
    drop(channel);
    wait_for(&s.err, "frozen", &mut s.seen);
    // Lines written before the freeze may still be in the pipe.
    while s.out.recv_timeout(Duration::from_millis(200)).is_ok() {}
    assert!(
        s.out.recv_timeout(Duration::from_millis(700)).is_err(),
        "a frozen workload still ticks"
    );
    let states = tree_states(s.child.id());
    assert!(
        states.len() >= 2 && states.iter().all(|&(p, st)| standalone::held(p, st)),
        "{how:?}: not every workload process is stopped: {states:?}"
    );

    let _again = s.attach();
    wait_for(&s.err, "resumed", &mut s.seen);
    wait_for(&s.out, "tick parent", &mut s.seen);
    wait_for(&s.out, "tick child", &mut s.seen);
    s.stdin.write_all(b"\n").unwrap();
    let status = s.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{how:?}: {:#?}", s.seen);
}

/// `openshell-supervisor serve` and `openshell-sandbox --bootstrap`, two
/// processes joined only by TCP and TLS: the supervisor writes the
/// bootstrap, the sandbox starts from it, the supervisor attaches, and the
/// workload's connects are decided and relayed by the supervisor (the
/// refused one logged there, and never reaching the listener this test
/// hosts at its port); both end with the workload's exit status.
#[test]
fn serve_and_a_standalone_sandbox_run_a_workload_across_the_channel() {
    served_across(&free_loopback(), |boot| {
        standalone::bootstrapped(None, boot)
    });
}

/// The same over a Unix socket in a directory both processes see, the
/// sandbox in a network namespace of its own with nothing in it but
/// loopback, down (as a container with no network has none but its way
/// to the supervisor): the workload still runs, its connect to the
/// supervisor's loopback relayed and its other refused and logged there.
/// The sandbox sets its loopback up (the relayed sockets live there), and
/// the socket it listened on is its user's alone.
#[test]
fn over_a_unix_socket_a_sandbox_with_no_network_runs_a_workload_served_across_it() {
    let (sockets, at) = standalone::socket_dir();
    let err = served_across(&at, standalone::bootstrapped_offline);
    assert!(err.contains("loopback was down: set it up"), "{err}");
    assert!(err.contains(&format!("listening on {at} ")), "{err}");
    let socket = std::fs::symlink_metadata(sockets.path().join("sandbox.sock")).unwrap();
    assert!(socket.file_type().is_socket(), "{socket:?}");
    assert_eq!(socket.permissions().mode() & 0o7777, 0o600);
    assert_eq!(socket.uid(), 0);
}

/// `serve` at `at`, the sandbox started by `sandbox` from the bootstrap's
/// path, running `standalone::SERVED_PY`: checked as the test above says; the
/// sandbox's standard error.
fn served_across(at: &str, sandbox: impl FnOnce(&Path) -> Command) -> String {
    let (up, upstream_read) = upstream();
    let refused = TcpListener::bind("127.0.0.1:0").unwrap();
    refused.set_nonblocking(true).unwrap();
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(&dir, "served", &format!("  allow {python} -> {up}\n"));
    let boot = dir.join("boot.json");
    let log = dir.log();
    let (mut serve, serve_err, mut seen) = standalone::spawn_serve(
        standalone::serve_command(None, &dir, &bundle, &boot, at)
            .arg("--log")
            .arg(&log)
            .args(["--", &python, "-c", standalone::SERVED_PY])
            .arg(up.port().to_string())
            .arg(refused.local_addr().unwrap().port().to_string()),
    );
    let sandbox = sandbox(&boot).stdin(Stdio::null()).output().unwrap();
    assert_served(&sandbox);
    assert!(!boot.exists());
    let status = serve.wait().unwrap();
    wait_for(&serve_err, "ended with status 7", &mut seen);
    assert_eq!(
        status.code(),
        Some(7),
        "serve exits as the workload did: {seen:#?}"
    );
    let line = standalone::served(&upstream_read, &refused, &log);
    assert_eq!(line["unmapped"]["sandbox"]["id"], "served", "{line}");
    assert_eq!(line["unmapped"]["sandbox"]["generation"], 2, "{line}");
    String::from_utf8_lossy(&sandbox.stderr).into_owned()
}

/// The sandbox ran `standalone::SERVED_PY` to its end: it trusted the proxy's CA,
/// exchanged its line with the upstream, and its other connect was
/// refused.
fn assert_served(sandbox: &std::process::Output) {
    let out = String::from_utf8_lossy(&sandbox.stdout);
    let err = String::from_utf8_lossy(&sandbox.stderr);
    assert_eq!(sandbox.status.code(), Some(7), "{out}\n{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "trusts the proxy CA True",
            "pong",
            &format!("refused {}", libc::ECONNREFUSED)
        ],
        "{err}"
    );
}

/// A loopback address whose port nothing listens on now.
fn free_loopback() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// A supervisor that falls silent (stopped, as a network that drops
/// packets would leave it) is found out by the keepalive: the sandbox
/// freezes the workload. When the supervisor wakes, `serve` finds its
/// channel gone, attaches again as the same generation, and the workload
/// resumes and ends; both report its status. Over TCP, and over a Unix
/// socket, whose stopped peer the kernel does not report either.
#[test]
fn a_silent_supervisor_freezes_the_workload_and_serve_reattaches_when_it_wakes() {
    silent_supervisor(&free_loopback());
    let (_sockets, at) = standalone::socket_dir();
    silent_supervisor(&at);
}

fn silent_supervisor(at: &str) {
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(&dir, "silent", "");
    let boot = dir.join("boot.json");
    let (mut serve, serve_err, mut seen) = standalone::spawn_serve(
        standalone::serve_command(None, &dir, &bundle, &boot, at)
            .arg("--log")
            .arg(dir.log())
            .args(["--", &python, "-c", TICKING_PY]),
    );
    let mut sandbox = Command::new(standalone::sandbox_exe())
        .arg("--bootstrap")
        .arg(&boot)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = sandbox.stdin.take().unwrap();
    let out = lines(sandbox.stdout.take().unwrap());
    let err = lines(sandbox.stderr.take().unwrap());
    wait_for(&out, "tick child", &mut seen);

    let stopped = Command::new("kill")
        .args(["-STOP", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let frozen = wait_for(&err, "frozen", &mut seen);
    assert!(frozen.contains("2 workload processes frozen"), "{frozen}");
    while out.recv_timeout(Duration::from_millis(200)).is_ok() {}
    assert!(
        out.recv_timeout(Duration::from_millis(500)).is_err(),
        "a frozen workload still ticks"
    );
    let woken = Command::new("kill")
        .args(["-CONT", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(woken.success());
    wait_for(&err, "resumed", &mut seen);
    wait_for(&serve_err, "attached to the sandbox again", &mut seen);
    wait_for(&out, "tick parent", &mut seen);
    stdin.write_all(b"\n").unwrap();
    let status = sandbox.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{at}: {seen:#?}");
    let status = serve.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{at}: {seen:#?}");
}

/// "Both sides unprivileged": `serve` and `openshell-sandbox` each run as
/// `nobody` with no capability in any set and `no_new_privs`, as a
/// container runtime's restricted profile starts them, and the workload
/// still runs sandboxed, its connect relayed and decided.
#[test]
fn serve_and_the_sandbox_run_without_privilege() {
    let (up, upstream_read) = upstream();
    let refused = TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle =
        standalone::nobody_bundle(&dir, "unprivileged", &format!("  allow {python} -> {up}\n"));
    let boot = dir.join("boot.json");
    let log = dir.join("deny.log");
    let unprivileged = |program: &Path| {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--",
        ])
        .arg(program);
        c
    };
    let serve = standalone::serve_command(None, &dir, &bundle, &boot, &free_loopback());
    let mut cmd = unprivileged(Path::new(SUPERVISOR));
    cmd.args(serve.get_args().skip_while(|a| *a != "serve"))
        .arg("--log")
        .arg(&log);
    let (mut serve, serve_err, mut seen) = standalone::spawn_serve(
        cmd.args(["--", &python, "-c", standalone::SERVED_PY])
            .arg(up.port().to_string())
            .arg(refused.local_addr().unwrap().port().to_string()),
    );
    let sandbox = unprivileged(&standalone::sandbox_exe())
        .arg("--bootstrap")
        .arg(&boot)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&sandbox.stdout);
    let err = String::from_utf8_lossy(&sandbox.stderr);
    assert_eq!(sandbox.status.code(), Some(7), "{out}\n{err}");
    assert!(out.contains("pong"), "{out}\n{err}");
    assert!(
        out.contains(&format!("refused {}", libc::ECONNREFUSED)),
        "{out}\n{err}"
    );
    assert_eq!(upstream_read.recv().unwrap(), "ping\n");
    let status = serve.wait().unwrap();
    assert_eq!(status.code(), Some(7), "{seen:#?}");
    let evidence = wait_for(&serve_err, "evidence", &mut seen);
    assert!(evidence.contains("uid 65534"), "{evidence}");
}

/// A TCP connect from namespace `ns` by a plain process (no sandbox),
/// within a second: whether it was made.
fn plain_connect(ns: &str, to: SocketAddr) -> bool {
    let probe = format!(
        "import socket\ntry:\n    socket.create_connection(('{}', {}), timeout=1)\n    print('made')\nexcept OSError as e:\n    print('failed', e)\n",
        to.ip(),
        to.port()
    );
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &probe])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).starts_with("made")
}

/// Two hosts on one machine: the supervisor's network namespace and the
/// sandbox's, joined by a veth pair; the sandbox's has an nftables fence
/// whose only open way is the supervisor's address to the sandbox's port
/// (and the replies). `serve` runs in the first, hosting the upstream on
/// its loopback; `openshell-sandbox --bootstrap` in the second, as PID 1.
/// The workload reaches the upstream through the channel alone; its
/// connect across the link is refused by the supervisor; and a process of
/// the sandbox's namespace that is not sandboxed reaches nothing across
/// the link, by the fence alone (the same connect made before the fence
/// went up, as a control).
#[test]
fn in_two_namespaces_behind_a_fence_the_workload_reaches_out_only_through_its_supervisor() {
    let (sup, sbx) = standalone::joined("10.77.0");
    let (up, upstream_read) = upstream_on(sup.tcp("127.0.0.1:0"));
    let across = sup.trap_tcp("10.77.0.1:0");
    let across_addr = across.local_addr().unwrap();
    assert!(
        plain_connect(&sbx.name, across_addr),
        "without the fence the link carries a connect"
    );
    assert!(across.accept().is_ok(), "the control connect arrived");

    let port = 7443;
    standalone::fence(&sbx, "10.77.0.1", port);
    assert!(
        !plain_connect(&sbx.name, across_addr),
        "the fence let a plain connect across"
    );

    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(&dir, "fenced", &format!("  allow {python} -> {up}\n"));
    let boot = dir.join("boot.json");
    let at = format!("10.77.0.2:{port}");
    let (mut serve, _serve_err, seen) = standalone::spawn_serve(
        standalone::serve_command(Some(&sup.name), &dir, &bundle, &boot, &at)
            .arg("--log")
            .arg(dir.log())
            .args(["--", &python, "-c", standalone::SERVED_PY])
            .arg(up.port().to_string())
            .arg(across_addr.port().to_string())
            .arg("10.77.0.1"),
    );
    let sandbox = standalone::bootstrapped(Some(&sbx.name), &boot)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_served(&sandbox);
    assert_eq!(upstream_read.recv().unwrap(), "ping\n");
    assert!(
        matches!(across.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "something reached the supervisor's host across the link"
    );
    assert_eq!(serve.wait().unwrap().code(), Some(7), "{seen:#?}");
}
