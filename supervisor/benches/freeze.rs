//! Channel drop to every workload process stopped: a standalone
//! `openshell-sandbox --bootstrap` whose workload is nine busy processes
//! (python3 and eight children, each in a session of its own), attached
//! to by this program over TCP and TLS on loopback
//! (`supervisor::relay::bundle_side`). Each round closes the channel,
//! polls `/proc` until every process of the workload is stopped, and
//! attaches again so that the workload resumes: the time from the close
//! to the last process stopped, over `ROUNDS` rounds, median and p99.
//!
//! The sandbox freezes the workload's cgroup where it can make one; with
//! `FREEZE_BY=sigstop` it is started seeing no cgroup hierarchy, and
//! stops every process with `SIGSTOP`.
//!
//! Run as root: `cargo bench -p supervisor --bench freeze`.
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

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::standalone::{self, lines, tree_states, wait_for};
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{SupervisorEnd, issue};
use sandbox_protocol::transport::Link;

const ROUNDS: usize = 100;
const WORKERS: usize = 8;

const BUSY_PY: &str = r"
import os, time
for _ in range(int(os.environ.get('WORKERS', '8'))):
    if os.fork() == 0:
        os.setsid()
        break
n = 0
while True:
    n += 1
    if n % 20000 == 0:
        time.sleep(0.001)
";

fn main() {
    let dir = common::Dir::new();
    let python = common::exe("/usr/bin/python3");
    let policy = dir.join("p.policy");
    std::fs::write(
        &policy,
        "policy \"freeze\" {\n  fs exec /usr /lib /lib64 /bin /etc\n  fs read /proc /dev/urandom\n  run_as user nobody group nogroup\n}\n",
    )
    .expect("policy");
    let (_, bundle) = policy_lang::load::compile_file(&policy, None).expect("compile");
    let bundle = bundle.expect("bundle");
    let binding = Binding {
        sandbox_id: "freeze".into(),
        generation: 1,
    };
    let (sandbox_cred, supervisor_cred) = issue(&binding).expect("keys");
    let boot = dir.join("boot.json");
    let bootstrap = standalone::bootstrap(
        &bundle,
        sandbox_cred,
        dir.path(),
        &python,
        vec![
            b"python3".to_vec(),
            b"-c".to_vec(),
            BUSY_PY.as_bytes().to_vec(),
        ],
        vec![format!("WORKERS={WORKERS}").into_bytes()],
        // Past the last round, the sandbox is left without a supervisor
        // for a second: it kills the workload and exits.
        1,
    );
    std::fs::write(&boot, bootstrap.to_bytes()).expect("bootstrap");
    let sigstop = std::env::var("FREEZE_BY").as_deref() == Ok("sigstop");
    let mut sandbox = if sigstop {
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(standalone::WITHOUT_CGROUPS)
            .arg(standalone::sandbox_exe());
        c
    } else {
        Command::new(standalone::sandbox_exe())
    };
    let mut child = sandbox
        .arg("--bootstrap")
        .arg(&boot)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openshell-sandbox");
    let err = lines(child.stderr.take().expect("stderr"));
    let seen = &mut Vec::new();
    let listening = wait_for(&err, "listening on", seen);
    let addr: SocketAddr = listening
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .expect("address");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let end = SupervisorEnd::new(&supervisor_cred).expect("end");
    let log = dir.log();
    let attach = || {
        let (side, _) = supervisor::relay::bundle_side(bundle.clone(), &log, &[], binding.clone())
            .expect("side");
        let tls = runtime.block_on(end.connect(addr)).expect("attach");
        runtime.spawn(sandbox_protocol::transport::serve(side, tls, Link::Network))
    };
    let pid = child.id();
    let mut serving = attach();
    wait_for(&err, "workload", seen);
    while tree_states(pid).len() < WORKERS + 1 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ms = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(50));
        let dropped = Instant::now();
        serving.abort();
        loop {
            let s = tree_states(pid);
            if s.len() > WORKERS && s.iter().all(|&(p, c)| standalone::held(p, c)) {
                break;
            }
            assert!(
                dropped.elapsed() < Duration::from_secs(10),
                "never frozen: {s:?}"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
        ms.push(dropped.elapsed().as_secs_f64() * 1000.0);
        wait_for(&err, "frozen", seen);
        serving = attach();
        wait_for(&err, "resumed", seen);
    }
    serving.abort();
    let _ = child.wait();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "| channel drop to every workload process stopped ({} processes, busy), {ROUNDS} rounds | p99 ≤ 50 ms | median {:.2} ms, p99 **{:.2} ms**, max {:.2} ms |",
        WORKERS + 1,
        at(0.5),
        at(0.99),
        at(1.0)
    );
}
