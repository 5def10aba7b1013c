//! Shared pieces of the supervisor's kernel tests.
//!
//! Every test runs the real `openshell-supervisor` binary inside a network
//! namespace it creates (`ip netns add`), with only loopback: the test
//! servers (HTTP, DNS upstream) listen there, and whatever the sandbox does
//! (even if a test found a bug) can reach nothing off this machine.
//!
//! With `OPENSHELL_TEST_PLACEMENT=two-hosts` every `openshell-supervisor
//! run` a test starts is placed as on two hosts instead: `serve` in the
//! test's namespace, beside the test servers, and the standalone sandbox
//! in a second namespace joined to it by a veth pair, behind a fence
//! whose only open way in is the supervisor's address to the sandbox's
//! port. The same assertions then hold across the channel.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod standalone;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const SUPERVISOR: &str = env!("CARGO_BIN_EXE_openshell-supervisor");

/// A temp dir everyone may enter (the workload runs as `nobody`), and
/// beside it one for the deny log that only root may write: the
/// supervisor refuses a log the workload could change.
pub struct Dir(tempfile::TempDir, tempfile::TempDir);

impl Dir {
    pub fn new() -> Self {
        let make = |mode| {
            let dir = tempfile::Builder::new()
                .prefix("osp-sup-")
                .tempdir()
                .unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            dir
        };
        Self(make(0o777), make(0o755))
    }

    /// Where the tests keep the deny log.
    pub fn log(&self) -> PathBuf {
        self.1.path().join("deny.log")
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.path().join(p)
    }

    /// A subdirectory everyone may use.
    pub fn mkdir(&self, p: &str) -> PathBuf {
        let d = self.join(p);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    }
}

/// The resolved path of a program, as `/proc/<pid>/exe` shows it.
pub fn exe(path: &str) -> String {
    std::fs::canonicalize(path)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The clients the tests drive, as a binary list for a policy.
pub fn clients() -> String {
    [
        exe("/usr/bin/curl"),
        exe("/usr/bin/python3"),
        exe("/usr/bin/bash"),
    ]
    .join(" ")
}

/// The filesystem every workload needs, for a policy body.
pub const SYSTEM: &str =
    "  fs exec /usr /lib /lib64 /bin /etc\n  fs read /proc /dev/urandom\n  fs write /dev/null\n";

/// Writes `body` as a policy and compiles it into `dir/NAME.bundle`.
pub fn bundle(dir: &Dir, name: &str, body: &str) -> PathBuf {
    let src = dir.join(&format!("{name}.policy"));
    std::fs::write(&src, format!("policy \"{name}\" {{\n{body}}}\n")).unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&src, None).unwrap();
    let bundle =
        bundle.unwrap_or_else(|| panic!("policy does not compile: {:?}", checked.diagnostics));
    let out = dir.join(&format!("{name}.bundle"));
    std::fs::write(&out, bundle.to_bytes()).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    out
}

/// A network namespace of the test's own, with loopback up; removed on
/// drop.
pub struct TestNet {
    pub name: String,
    /// The sandbox's namespace in the two-host placement, made at its
    /// first run.
    sandbox_side: std::sync::OnceLock<Box<TestNet>>,
    /// Where each two-host run's bootstrap and trust file go.
    runs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

/// The two-host placement is asked for (see the module docs).
pub fn two_hosts() -> bool {
    std::env::var("OPENSHELL_TEST_PLACEMENT").as_deref() == Ok("two-hosts")
}

/// The sandbox id every deny-log line of a test's run carries.
pub fn sandbox_id() -> &'static str {
    if two_hosts() { "two-hosts" } else { "local" }
}

/// The supervisor's and the sandbox's addresses on the veth pair of the
/// two-host placement, and the port the sandbox listens on.
const TWO_HOSTS_SUPERVISOR: &str = "100.64.0.1";
const TWO_HOSTS_SANDBOX: &str = "100.64.0.2";
const TWO_HOSTS_PORT: u16 = 7000;

impl TestNet {
    pub fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "osp-sup-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
        ok(Command::new("ip").args(["netns", "add", &name]));
        ok(Command::new("ip").args(["-n", &name, "link", "set", "lo", "up"]));
        Self {
            name,
            sandbox_side: std::sync::OnceLock::new(),
            runs: std::sync::Mutex::default(),
        }
    }

    /// Give this namespace an address that stands for the outside world (a
    /// cloud metadata endpoint, a public resolver), on its loopback
    /// interface: a test aims its probe at an address it hosts itself, so
    /// nothing could leave the machine even if the sandbox let it through.
    pub fn host(&self, cidr: &str) {
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(["-n", &self.name])
                .args(args)
                .output()
                .unwrap()
        };
        let out = ip(&["addr", "add", cidr, "dev", "lo", "nodad"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown =
            String::from_utf8_lossy(&ip(&["-o", "addr", "show", "dev", "lo"]).stdout).to_string();
        assert!(shown.contains(cidr), "{cidr} not hosted: {shown}");
    }

    fn in_ns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let ns = std::fs::File::open(format!("/run/netns/{}", self.name)).unwrap();
        enforcer::in_netns(ns.as_fd(), f).unwrap()
    }

    pub fn tcp(&self, addr: &str) -> TcpListener {
        let addr: SocketAddr = addr.parse().unwrap();
        self.in_ns(|| TcpListener::bind(addr)).unwrap()
    }

    /// A listener on a hosted stand-in address, for asserting afterwards
    /// that nothing reached it.
    pub fn trap_tcp(&self, addr: &str) -> TcpListener {
        let l = self.tcp(addr);
        l.set_nonblocking(true).unwrap();
        l
    }

    /// A TCP connection made from this namespace, as any process of it
    /// (the supervisor's own neighbours) could make it.
    pub fn connect(&self, addr: SocketAddr) -> std::io::Result<std::net::TcpStream> {
        self.in_ns(|| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
    }

    /// The TCP ports the supervisor running in this namespace listens on,
    /// found from its open sockets (`/proc/PID/fd`) and the namespace's
    /// `/proc/PID/net/tcp` and `tcp6` (state `0A`, LISTEN).
    pub fn supervisor_listeners(&self) -> Vec<u16> {
        let pids = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
            .unwrap();
        let me = std::fs::canonicalize(SUPERVISOR).unwrap();
        let mut ports = Vec::new();
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            if std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() != Some(&me) {
                continue;
            }
            let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
                })
                .collect();
            for table in ["tcp", "tcp6"] {
                let table = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
                for line in table.lines().skip(1) {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    if f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                        let port = f[1].rsplit(':').next().unwrap();
                        ports.push(u16::from_str_radix(port, 16).unwrap());
                    }
                }
            }
        }
        ports
    }

    pub fn udp(&self, addr: &str) -> UdpSocket {
        let addr: SocketAddr = addr.parse().unwrap();
        self.in_ns(|| UdpSocket::bind(addr)).unwrap()
    }

    /// `openshell-supervisor ARGS` inside this namespace, optionally as
    /// another user (`setpriv`); a `run` in the two-host placement when
    /// that is asked for.
    pub fn supervisor(&self, args: &[&str], as_user: Option<&str>) -> Command {
        if two_hosts() && args.first() == Some(&"run") {
            return self.across_hosts(&args[1..], as_user);
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]);
        self.as_user(&mut cmd, as_user);
        cmd.arg(SUPERVISOR).args(args);
        cmd
    }

    /// The `openshell-sandbox` of the run whose command is process
    /// `run`: its child locally, the one in the sandbox's namespace across
    /// hosts.
    pub fn sandbox_pid(&self, run: u32) -> u32 {
        let candidates: Vec<u32> = match self.sandbox_side.get() {
            Some(sbx) => {
                let pids = Command::new("ip")
                    .args(["netns", "pids", &sbx.name])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&pids.stdout)
                    .split_whitespace()
                    .map(|p| p.parse().unwrap())
                    .collect()
            }
            None => std::fs::read_to_string(format!("/proc/{run}/task/{run}/children"))
                .unwrap()
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect(),
        };
        candidates
            .into_iter()
            .find(|p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e.ends_with("openshell-sandbox"))
            })
            .expect("the run has an openshell-sandbox")
    }

    fn as_user(&self, cmd: &mut Command, as_user: Option<&str>) {
        if let Some(user) = as_user {
            cmd.args([
                "setpriv",
                &format!("--reuid={user}"),
                &format!("--regid={user}"),
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ]);
        }
    }

    /// `run RUN_ARGS` as `serve` here and a standalone sandbox in the
    /// fenced namespace beside this one. `--netns` is the local run's
    /// choice: across hosts the sandbox's namespace is the fenced one.
    /// `run RUN_ARGS` as the two-host placement runs it: `serve` here, the
    /// standalone sandbox in a namespace of its own.
    pub fn across_hosts(&self, run_args: &[&str], as_user: Option<&str>) -> Command {
        if let Some(user) = as_user {
            panic!("`run` as {user} has no two-host counterpart in the harness");
        }
        let sbx = self.sandbox_side.get_or_init(|| {
            let sbx = TestNet::new();
            join(self, &sbx, TWO_HOSTS_SUPERVISOR, TWO_HOSTS_SANDBOX);
            standalone::fence(&sbx, TWO_HOSTS_SUPERVISOR, TWO_HOSTS_PORT);
            Box::new(sbx)
        });
        let run = tempfile::Builder::new()
            .prefix("osp-two-hosts-")
            .tempdir()
            .unwrap();
        let at = format!("{TWO_HOSTS_SANDBOX}:{TWO_HOSTS_PORT}");
        let mut serve: Vec<String> = vec![
            "--sandbox".into(),
            at.clone(),
            "--sandbox-listen".into(),
            at,
            "--sandbox-id".into(),
            sandbox_id().into(),
            "--generation".into(),
            "1".into(),
            "--trust-dir".into(),
            run.path().join("trust").to_string_lossy().into_owned(),
        ];
        let mut args = run_args.iter();
        let mut workdir = false;
        while let Some(&arg) = args.next() {
            match arg {
                "--netns" => {
                    args.next();
                }
                "--timeout" | "--transcript" | "-v" | "--verbose" => {
                    panic!("`run {arg}` has no two-host counterpart")
                }
                // The gateway's sandbox id is the channel's.
                "--sandbox" => {
                    let id = args.next().unwrap();
                    let at = serve.iter().position(|a| a == "--sandbox-id").unwrap();
                    (*id).clone_into(&mut serve[at + 1]);
                }
                _ => {
                    workdir |= arg == "--workdir";
                    serve.push(arg.to_owned());
                }
            }
        }
        if !workdir {
            let cwd = run.path().join("workdir");
            std::fs::create_dir(&cwd).unwrap();
            std::fs::set_permissions(&cwd, std::fs::Permissions::from_mode(0o777)).unwrap();
            let at = serve.iter().position(|a| a == "--").unwrap_or(serve.len());
            serve.insert(at, cwd.to_string_lossy().into_owned());
            serve.insert(at, "--workdir".into());
        }
        let mut cmd = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/common/two-hosts"
        ));
        cmd.args([&self.name, &sbx.name, SUPERVISOR]);
        cmd.arg(standalone::sandbox_exe())
            .arg(run.path().join("bootstrap"))
            .args(&serve);
        self.runs.lock().unwrap().push(run);
        cmd
    }
}

/// A veth pair between `a` (at `a_ip`/30) and `b` (at `b_ip`/30).
pub fn join(a: &TestNet, b: &TestNet, a_ip: &str, b_ip: &str) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let tag = format!(
        "{:x}x{}",
        std::process::id() & 0xffff,
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let (va, vb) = (format!("osa{tag}"), format!("osb{tag}"));
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&[
        "link", "add", &va, "netns", &a.name, "type", "veth", "peer", "name", &vb, "netns", &b.name,
    ]);
    for (net, dev, addr) in [(a, &va, a_ip), (b, &vb, b_ip)] {
        ip(&[
            "-n",
            &net.name,
            "addr",
            "add",
            &format!("{addr}/30"),
            "dev",
            dev,
        ]);
        ip(&["-n", &net.name, "link", "set", dev, "up"]);
    }
}

impl TestNet {
    /// `openshell-supervisor run --bundle B --workdir DIR EXTRA... -- CMD...`
    /// in this namespace, as root, waited for.
    pub fn run(&self, dir: &Dir, bundle: &Path, extra: &[&str], cmd: &[&str]) -> Output {
        let mut args = vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(cmd);
        output(self.supervisor(&args, None))
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs `cmd` to completion (one minute at most) and captures its output.
pub fn output(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the supervisor hung: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The deny log's lines, parsed.
pub fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Serves `HTTP/1.0 200` with body `ok` on every connection, forever.
pub fn http_server(listener: TcpListener) -> SocketAddr {
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = (&stream).write_all(
                    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    addr
}

/// Answers every `A` query with `answer` and everything else with an empty
/// `NOERROR`, forever; returns how to reach it.
pub fn dns_upstream(sock: UdpSocket, answer: std::net::Ipv4Addr) -> SocketAddr {
    use hickory_resolver::proto::op::{Message, OpCode};
    use hickory_resolver::proto::rr::rdata::A;
    use hickory_resolver::proto::rr::{RData, Record, RecordType};
    let addr = sock.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0_u8; 4096];
        loop {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                return;
            };
            let Ok(q) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut r = Message::response(q.metadata.id, OpCode::Query);
            r.metadata.recursion_desired = q.metadata.recursion_desired;
            r.metadata.recursion_available = true;
            for query in &q.queries {
                r.add_query(query.clone());
                if query.query_type() == RecordType::A {
                    r.add_answer(Record::from_rdata(
                        query.name().clone(),
                        300,
                        RData::A(A(answer)),
                    ));
                }
            }
            let _ = sock.send_to(&r.to_vec().unwrap(), peer);
        }
    });
    addr
}

/// Reads everything a child wrote to `r` (for the tests that need a pipe).
pub fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}
