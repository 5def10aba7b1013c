//! Shared pieces of the two-host tests and benchmarks: a standalone
//! `openshell-sandbox --bootstrap`, `openshell-supervisor serve`, and two
//! network namespaces joined by a veth pair behind a fence.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use sandbox::plan::{LaunchPlan, PLAN_VERSION, RelayPlan};
use sandbox::standalone::{Bootstrap, Launch, RunAs};
use sandbox_protocol::Binding;
use sandbox_protocol::channel::Credential;

use super::{Dir, SUPERVISOR, TestNet};

/// `openshell-sandbox`, beside the supervisor.
pub fn sandbox_exe() -> PathBuf {
    Path::new(SUPERVISOR).with_file_name("openshell-sandbox")
}

/// Lines of a child's stream, as they come.
pub fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next line containing `what`, within 20 s; the lines passed over
/// go to `seen`.
pub fn wait_for(rx: &Receiver<String>, what: &str, seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(what) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {what:?}; seen: {seen:#?}"),
        }
    }
}

/// A local server: answers `pong` to each line; what it read.
pub fn upstream() -> (SocketAddr, Receiver<String>) {
    upstream_on(TcpListener::bind("127.0.0.1:0").unwrap())
}

/// The same server on `listener`.
pub fn upstream_on(listener: TcpListener) -> (SocketAddr, Receiver<String>) {
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            let _ = BufReader::new(conn.try_clone().unwrap()).read_line(&mut line);
            let _ = conn.write_all(b"pong\n");
            let _ = tx.send(line);
        }
    });
    (addr, rx)
}

/// The state letters of every descendant of `pid`.
pub fn tree_states(pid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                let stat = std::fs::read_to_string(format!("/proc/{c}/stat")).unwrap_or_default();
                if let Some((_, rest)) = stat.rsplit_once(')') {
                    out.push((c, rest.trim_start().chars().next().unwrap_or('?')));
                }
                todo.push(c);
            }
        }
    }
    out
}

/// A bundle `name` in `dir` whose workload runs as `nobody` under
/// `landlock hard`, with the system's files and then `rules`.
pub fn nobody_bundle(dir: &Dir, name: &str, rules: &str) -> PathBuf {
    super::bundle(
        dir,
        name,
        &format!(
            "  landlock hard min_abi 4\n{}  run_as user nobody group nogroup\n{rules}",
            super::SYSTEM
        ),
    )
}

/// Starts `serve` (`cmd`), its standard error read line by line, and
/// waits until it has written the bootstrap: the child, its lines, and
/// those passed over.
pub fn spawn_serve(cmd: &mut Command) -> (std::process::Child, Receiver<String>, Vec<String>) {
    spawn_serve_until(cmd, "wrote")
}

/// The same, waiting for a line with `what` instead.
pub fn spawn_serve_until(
    cmd: &mut Command,
    what: &str,
) -> (std::process::Child, Receiver<String>, Vec<String>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    wait_for(&err, what, &mut seen);
    (child, err, seen)
}

/// `sh -c` this, then the sandbox's program and its arguments, in a mount
/// namespace of its own: the sandbox sees no cgroup hierarchy (a container
/// that mounts none) and freezes with `SIGSTOP` alone.
pub const WITHOUT_CGROUPS: &str = "for m in $(awk '$3 ~ /^cgroup/ {print $2}' /proc/self/mounts | sort -r); do umount -l \"$m\"; done; exec \"$0\" \"$@\"";

/// Process `pid` with state letter `state` runs no more: stopped by
/// `SIGSTOP`, or in a cgroup the kernel has frozen.
pub fn held(pid: u32, state: char) -> bool {
    if state == 'T' {
        return true;
    }
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let Some(path) = cgroup.lines().find_map(|l| l.strip_prefix("0::")) else {
        return false;
    };
    let mounts = sandbox::mountinfo::read().unwrap();
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .filter_map(|m| {
            let below = Path::new(path).strip_prefix(&m.root).ok()?;
            std::fs::read_to_string(m.mount_point.join(below).join("cgroup.events")).ok()
        })
        .any(|events| events.lines().any(|l| l == "frozen 1"))
}

/// A standalone sandbox's bootstrap: `bundle`'s tables for sandbox
/// `binding`, `program` with `argv` and `envp` in `workdir`, as `nobody`,
/// listening on an ephemeral loopback port.
pub fn bootstrap(
    bundle: &Bundle,
    credential: Credential,
    workdir: &Path,
    program: &str,
    argv: Vec<Vec<u8>>,
    envp: Vec<Vec<u8>>,
    reattach_within: u64,
) -> Bootstrap {
    let binding: Binding = credential.binding();
    let plan = LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock.clone(),
        deny: bundle.enforcement.seccomp.deny.clone(),
        notify: bundle.enforcement.seccomp.notify.clone(),
        workdir: workdir.as_os_str().as_bytes().to_vec(),
        read_only: Vec::new(),
        // The sandbox settles these and the user from its own host.
        private_proc: false,
        root_workload: false,
        shared_pid_namespace: true,
        drop_bounding: false,
        user: None,
        program: program.as_bytes().to_vec(),
        argv,
        envp,
        relay: Some(RelayPlan {
            sandbox_id: binding.sandbox_id,
            generation: binding.generation,
            bundle_digest: bundle.digest.clone(),
            hash_binaries: false,
            own_network: false,
            binaries: Vec::new(),
        }),
    };
    let launch = Launch {
        plan,
        run_as: Some(RunAs {
            user: Some("nobody".into()),
            group: Some("nogroup".into()),
        }),
        trust: None,
        timeout_seconds: None,
    };
    Bootstrap::with_launch(
        "127.0.0.1:0".parse().unwrap(),
        credential,
        launch,
        reattach_within,
    )
}

/// `openshell-sandbox --bootstrap BOOT` as PID 1 of a PID namespace of its
/// own, in network namespace `netns` when given.
pub fn bootstrapped(netns: Option<&str>, boot: &Path) -> Command {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "unshare"]);
            c
        }
        None => Command::new("unshare"),
    };
    cmd.args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(sandbox_exe())
        .arg("--bootstrap")
        .arg(boot);
    cmd
}

/// The same, in a network namespace of its own with no interface but
/// loopback, and that down: no network at all, only a Unix socket to
/// reach its supervisor by.
pub fn bootstrapped_offline(boot: &Path) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--pid", "--fork", "--mount-proc", "--"])
        .arg(sandbox_exe())
        .arg("--bootstrap")
        .arg(boot);
    cmd
}

/// A directory only root may enter, for a channel's socket; and the
/// socket's endpoint in it, as `serve` takes it.
pub fn socket_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("osp-sock-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let at = format!("unix:{}", dir.path().join("sandbox.sock").display());
    (dir, at)
}

/// `openshell-supervisor serve` for `bundle` (in network namespace
/// `netns` when given), as the supervisor of sandbox `served` generation
/// 2 at `at`, writing its bootstrap to `boot`, the trust directory in
/// `dir`; the log and the command go after.
pub fn serve_command(
    netns: Option<&str>,
    dir: &Dir,
    bundle: &Path,
    boot: &Path,
    at: &str,
) -> Command {
    let mut serve = serve_base(netns, dir, bundle, at);
    serve.arg("--bootstrap").arg(boot);
    serve
}

/// The same, attaching with the supervisor's half of a kit at
/// `credential` instead of writing a bootstrap.
pub fn kit_serve_command(dir: &Dir, bundle: &Path, credential: &Path, at: &str) -> Command {
    let mut serve = serve_base(None, dir, bundle, at);
    serve.arg("--credential").arg(credential);
    serve
}

fn serve_base(netns: Option<&str>, dir: &Dir, bundle: &Path, at: &str) -> Command {
    let mut serve = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, SUPERVISOR]);
            c
        }
        None => Command::new(SUPERVISOR),
    };
    serve
        .args(["serve", "--bundle"])
        .arg(bundle)
        .args(["--sandbox", at, "--sandbox-listen", at])
        .args(["--sandbox-id", "served", "--generation", "2"])
        .arg("--workdir")
        .arg(dir.path())
        .arg("--trust-dir")
        .arg(dir.join("trust"));
    serve
}

/// Two network namespaces joined by a veth pair: the supervisor's at
/// `{prefix}.1/30`, the sandbox's at `{prefix}.2/30`.
pub fn joined(prefix: &str) -> (TestNet, TestNet) {
    let sup = TestNet::new();
    let sbx = TestNet::new();
    super::join(&sup, &sbx, &format!("{prefix}.1"), &format!("{prefix}.2"));
    (sup, sbx)
}

/// An nftables fence on `sbx` whose only open way in is `from` to TCP
/// `port`, and out only the replies (and loopback, both ways).
pub fn fence(sbx: &TestNet, from: &str, port: u16) {
    fence_with(&["ip", "netns", "exec", &sbx.name], from, port);
}

/// [`fence`] set by `nft` run with `enter` (a program and its arguments
/// that run the rest in the fenced network namespace).
pub fn fence_with(enter: &[&str], from: &str, port: u16) {
    let rules = format!(
        "table inet fence {{\n  chain input {{ type filter hook input priority 0; policy drop; iif \"lo\" accept; ct state established,related accept; ip saddr {from} tcp dport {port} accept; }}\n  chain output {{ type filter hook output priority 0; policy drop; oif \"lo\" accept; ct state established,related accept; }}\n}}\n"
    );
    let (program, args) = enter.split_first().unwrap();
    let mut nft = Command::new(program)
        .args(args)
        .args(["nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    nft.stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(nft.wait().unwrap().success(), "the fence could not be set");
}

/// The workload `serve` runs: it checks its trust file, exchanges a line
/// with the upstream on loopback port argv[1], then connects to argv[3]
/// (loopback unless given) port argv[2], which no rule allows.
pub const SERVED_PY: &str = r#"
import os, socket, sys
trust = open(os.environ["SSL_CERT_FILE"]).read()
print("trusts the proxy CA", "this sandbox's proxy CA" in trust, flush=True)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"ping\n")
print(s.makefile().readline().strip(), flush=True)
try:
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    socket.create_connection((host, int(sys.argv[2])), timeout=5)
    print("reached the refused port", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
sys.exit(7)
"#;

/// What a run of [`SERVED_PY`] leaves, checked: the upstream got its
/// line, the refused connect never reached `refused`, and `log` holds its
/// deny line, which is returned.
pub fn served(
    upstream_read: &Receiver<String>,
    refused: &TcpListener,
    log: &Path,
) -> serde_json::Value {
    assert_eq!(upstream_read.recv().unwrap(), "ping\n");
    assert!(
        matches!(refused.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the refused connect reached its listener"
    );
    let port = refused.local_addr().unwrap().port();
    let denied = super::log_lines(log);
    denied
        .iter()
        .find(|l| l["dst_endpoint"]["port"] == port && l["dst_endpoint"]["ip"] == "127.0.0.1")
        .cloned()
        .unwrap_or_else(|| panic!("no line for the refused connect: {denied:#?}"))
}
