//! The supervisor's figures, measured in one run, all inside a network
//! namespace this program creates (only loopback):
//!
//! 1. latency a relayed `connect` adds (openshell-sandbox asks the
//!    supervisor over the sandbox protocol, which connects upstream):
//!    median of 1,000 connects to a local server from python3, inside the
//!    sandbox and without it, over alternating rounds;
//! 2. supervisor start to workload `exec` with a 2,000-endpoint bundle
//!    (median of 20 launches, as the supervisor measures it, and the whole
//!    `run -- /usr/bin/true` as a caller sees it);
//! 3. the DNS stub's answer for an allowed, cached name (median of 1,000
//!    queries from inside the sandbox);
//! 4. the part of (1) that checks the caller's code: reading a python3
//!    process's `/proc/<pid>/maps` and judging its executable mappings
//!    against the writable trees (median of 1,000), as the broker does for
//!    every allowed connect;
//! 5. orphan reaping: 10,000 double-forked children handed to the
//!    workload's init, the zombies left once the last has ended, and the
//!    workload's exit status as the supervisor reports it.
//!
//! Run as root: `cargo bench -p supervisor --bench supervisor`
//! (or `bench/supervisor.sh`). Results go to stdout, as Markdown rows.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    dead_code,
    reason = "a benchmark stops at the first failure; it shares the tests' helpers"
)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::Instant;

use common::{Dir, SYSTEM, TestNet, bundle, exe, output, stderr, stdout};

const CONNECTS: usize = 1_000;
const LAUNCHES: usize = 20;
const ENDPOINTS: usize = 2_000;
const QUERIES: usize = 1_000;

const CONNECT_PY: &str = "import socket,time,statistics,sys
addr=(sys.argv[1],int(sys.argv[2])); n=int(sys.argv[3]); ts=[]
for i in range(n+50):
    s=socket.socket(); t=time.perf_counter_ns(); s.connect(addr); ts.append(time.perf_counter_ns()-t); s.close()
print(statistics.median(ts[50:])/1000)
";

const DNS_PY: &str = "import socket,time,struct,statistics,sys
name=sys.argv[1]; n=int(sys.argv[2])
def q(i):
    body=b''.join(bytes([len(p)])+p.encode() for p in name.split('.'))+b'\\0'+struct.pack('>HH',1,1)
    return struct.pack('>HHHHHH',i&0xffff,0x0100,1,0,0,0)+body
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.connect(('127.0.0.1',53)); s.settimeout(5)
s.send(q(0)); s.recv(512)
ts=[]
for i in range(1,n+1):
    p=q(i); t=time.perf_counter_ns(); s.send(p); r=s.recv(512); ts.append(time.perf_counter_ns()-t)
    assert r[3]&15==0 and r[7]==1, r
print(statistics.median(ts)/1000)
";

/// The workload of the orphans figure (see the script).
const ORPHANS_PY: &str = include_str!("../../bench/orphans.py");

const ORPHANS: usize = 10_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A supervised run that must succeed.
fn run_sup(
    net: &TestNet,
    dir: &Dir,
    bundle: &std::path::Path,
    extra: &[&str],
    cmd: &[&str],
) -> std::process::Output {
    let out = net.run(dir, bundle, extra, cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Rounds of the connect figure, with and without the sandbox in turn.
const CONNECT_ROUNDS: usize = 5;

/// Median connect latency without a sandbox and relayed (the medians of
/// [`CONNECT_ROUNDS`] rounds).
fn connect_latency(net: &TestNet, dir: &Dir) -> (f64, f64) {
    let listener = net.tcp("127.0.0.1:0");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
        }
    });
    let python = exe("/usr/bin/python3");
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  allow {python} -> 127.0.0.1:{port}\n"
    );
    let b = bundle(dir, "connect", &body);
    let port_s = port.to_string();
    let n = CONNECTS.to_string();
    let args = [
        "/usr/bin/python3",
        "-c",
        CONNECT_PY,
        "127.0.0.1",
        &port_s,
        &n,
    ];
    let (mut bare, mut relayed) = (Vec::new(), Vec::new());
    for _ in 0..CONNECT_ROUNDS {
        let mut cmd = std::process::Command::new("ip");
        cmd.args(["netns", "exec", &net.name]).args(args);
        bare.push(stdout(&output(cmd)).trim().parse().unwrap());
        let out = run_sup(net, dir, &b, &[], &args);
        relayed.push(stdout(&out).trim().parse().unwrap());
    }
    (median(bare), median(relayed))
}

/// A policy with 2,000 endpoint rules over 200 binaries (the shape of
/// policy-lang's benchmark policy).
fn large_policy_body() -> String {
    let mut p = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  run_as user nobody group nogroup\n"
    );
    for s in 0..40 {
        let members: Vec<String> = (0..5).map(|b| format!("/opt/tool{s}/bin/cmd{b}")).collect();
        let _ = writeln!(p, "  binaries set{s} = {}", members.join(" "));
    }
    for e in 0..ENDPOINTS {
        let set = e % 40;
        let _ = match e % 10 {
            0 => writeln!(p, "  allow set{set} -> *.cdn{e}.example.net:443"),
            1 => writeln!(
                p,
                "  allow set{set} -> 10.{}.{}.0/24:8000-8100",
                e / 250,
                e % 250
            ),
            2..=4 => writeln!(
                p,
                "  allow set{set} -> api{e}.example.com:443 http {{\n    allow GET HEAD /v1/items/**\n    deny * /v1/items/*/admin/**\n  }}"
            ),
            _ => writeln!(p, "  allow set{set} -> host{e}.example.org:443,8443"),
        };
    }
    p
}

fn start_to_exec(net: &TestNet, dir: &Dir) -> (f64, f64, f64, usize) {
    let b = bundle(dir, "large", &large_policy_body());
    let size = std::fs::metadata(&b).unwrap().len();
    let bytes = std::fs::read(&b).unwrap();
    let load: Vec<f64> = (0..LAUNCHES)
        .map(|_| {
            let start = Instant::now();
            let parsed = policy_bundle::Bundle::from_slice(&bytes).unwrap();
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            drop(parsed);
            ms
        })
        .collect();
    let mut inside = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..LAUNCHES {
        let start = Instant::now();
        let out = run_sup(net, dir, &b, &["--verbose"], &["/usr/bin/true"]);
        whole.push(start.elapsed().as_secs_f64() * 1000.0);
        let err = stderr(&out);
        let ms = err
            .split(" in ")
            .nth(1)
            .and_then(|r| r.split(" ms").next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no timing in {err}"));
        inside.push(ms);
    }
    (
        median(inside),
        median(whole),
        median(load),
        usize::try_from(size).unwrap(),
    )
}

fn dns_answer(net: &TestNet, dir: &Dir) -> f64 {
    let upstream = common::dns_upstream(net.udp("127.0.0.1:0"), Ipv4Addr::new(192, 0, 2, 1));
    let python = exe("/usr/bin/python3");
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  allow {python} -> cached.example.com:443\n"
    );
    let b = bundle(dir, "dns", &body);
    let up = upstream.to_string();
    let n = QUERIES.to_string();
    let out = run_sup(
        net,
        dir,
        &b,
        &["--dns-upstream", &up],
        &["/usr/bin/python3", "-c", DNS_PY, "cached.example.com", &n],
    );
    stdout(&out).trim().parse().unwrap()
}

/// The code check of an allowed connect, alone: python3 with `ssl` and
/// `socket` loaded (the mappings a real client has), judged 1,000 times.
fn code_check(dir: &Dir) -> (f64, usize) {
    let mut child = std::process::Command::new(exe("/usr/bin/python3"))
        .args(["-c", "import ssl,socket,sys; sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = [0_u8; 3];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut up).unwrap();
    let rules = [
        enforcer::FsRule {
            path: dir.path().to_path_buf(),
            access: enforcer::FsAccess::ALL,
        },
        enforcer::FsRule {
            path: "/dev/null".into(),
            access: enforcer::FsAccess::WRITE_FILE,
        },
    ];
    let writable = sandbox::writable::Writable::new(&rules, true, None, 0);
    let pid = child.id();
    let mut mappings = 0;
    let times: Vec<f64> = (0..CONNECTS)
        .map(|_| {
            let start = Instant::now();
            let maps = enforcer::code_mappings(pid).unwrap();
            let foreign = maps
                .iter()
                .any(|m| m.deleted || writable.tree_of(&m.path).is_some());
            let us = start.elapsed().as_secs_f64() * 1e6;
            assert!(!foreign);
            mappings = maps.len();
            us
        })
        .collect();
    drop(child.stdin.take());
    let _ = child.wait();
    (median(times), mappings)
}

/// (seconds from the first fork to no zombie, seconds after the last
/// fork, zombies left, exit status).
fn orphans(net: &TestNet, dir: &Dir) -> (f64, f64, u32, Option<i32>) {
    let body = format!("  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n");
    let b = bundle(dir, "orphans", &body);
    let n = ORPHANS.to_string();
    let out = net.run(dir, &b, &[], &["/usr/bin/python3", "-c", ORPHANS_PY, &n]);
    let text = stdout(&out);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{text}{}", stderr(&out));
    (
        fields[0].parse().unwrap(),
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
        out.status.code(),
    )
}

fn main() {
    let net = TestNet::new();
    let dir = Dir::new();
    let (direct, relayed) = connect_latency(&net, &dir);
    let (code_us, mappings) = code_check(&dir);
    let (inside, whole, load, size) = start_to_exec(&net, &dir);
    let dns = dns_answer(&net, &dir);
    let (reap_all, reap_tail, zombies, status) = orphans(&net, &dir);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    println!(
        "machine: {cpu}, {} cores, kernel {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    println!("| figure | target | measured |");
    println!("|---|---|---|");
    println!(
        "| connect, median of {CONNECTS} (median of {CONNECT_ROUNDS} rounds): unsupervised {direct:.1} µs, relayed {relayed:.1} µs | added < 60 µs | **{:.1} µs** |",
        relayed - direct
    );
    println!(
        "| start → exec, {ENDPOINTS}-endpoint bundle ({} KiB), median of {LAUNCHES} | < 50 ms | **{inside:.2} ms** (of which `Bundle::from_slice` {load:.1} ms; whole `run -- true`: {whole:.1} ms) |",
        size / 1024
    );
    println!(
        "| DNS stub answer, cached allowed name, median of {QUERIES} | < 200 µs | **{dns:.1} µs** |"
    );
    println!(
        "| code check of an allowed connect (python3, {mappings} files mapped executable), median of {CONNECTS} | part of the connect figure | **{code_us:.1} µs** |"
    );
    println!(
        "| {ORPHANS} double-forked orphans under the init: zombies left, exit status (3 expected) | 0, intact | **{zombies}, {}** ({reap_all:.2} s from the first fork to none left, {:.1} ms after the last) |",
        status.map_or_else(|| "none".to_owned(), |c| c.to_string()),
        reap_tail * 1000.0
    );
}
