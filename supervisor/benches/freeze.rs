//! Channel drop to every workload process stopped: a standalone
//! `openshell-sandbox --bootstrap` whose workload is nine busy processes
//! (python3 and eight children, each in a session of its own), attached
//! to by this program over TCP and TLS on loopback
//! (`supervisor::relay::bundle_side`). Each round closes the channel,
//! polls `/proc` until every process of the workload is stopped, and
//! attaches again so that the workload resumes: the time from the close
//! to the last process stopped, over `ROUNDS` rounds, median and p99.
//!
//! Run as root: `cargo bench -p supervisor --bench freeze`.
#![expect(
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a benchmark stops at the first failure"
)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use sandbox::plan::{LaunchPlan, PLAN_VERSION, RelayPlan};
use sandbox::standalone::{BOOTSTRAP_VERSION, Bootstrap, RunAs};
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{SupervisorEnd, issue};

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

fn lines(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
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

fn wait_for(rx: &Receiver<String>, what: &str) -> String {
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains(what) => return line,
            Ok(_) => {}
            Err(_) => panic!("no line with {what:?}"),
        }
    }
}

/// The states of every descendant of `pid`.
fn states(pid: u32) -> Vec<char> {
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
                    out.push(rest.trim_start().chars().next().unwrap_or('?'));
                }
                todo.push(c);
            }
        }
    }
    out
}

fn main() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("mode");
    let python = std::fs::canonicalize("/usr/bin/python3").expect("python3");
    let policy = dir.path().join("p.policy");
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
    let plan = LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock.clone(),
        deny: bundle.enforcement.seccomp.deny.clone(),
        notify: bundle.enforcement.seccomp.notify.clone(),
        workdir: dir.path().as_os_str().as_bytes().to_vec(),
        read_only: Vec::new(),
        private_proc: false,
        root_workload: false,
        shared_pid_namespace: true,
        drop_bounding: true,
        user: None,
        program: python.as_os_str().as_bytes().to_vec(),
        argv: vec![
            b"python3".to_vec(),
            b"-c".to_vec(),
            BUSY_PY.as_bytes().to_vec(),
        ],
        envp: vec![format!("WORKERS={WORKERS}").into_bytes()],
        relay: Some(RelayPlan {
            sandbox_id: binding.sandbox_id.clone(),
            generation: binding.generation,
            bundle_digest: bundle.digest.clone(),
            hash_binaries: false,
            own_network: false,
        }),
    };
    let boot = dir.path().join("boot.json");
    let bootstrap = Bootstrap {
        version: BOOTSTRAP_VERSION,
        listen: "127.0.0.1:0".parse().expect("addr"),
        credential: sandbox_cred,
        plan,
        run_as: Some(RunAs {
            user: Some("nobody".into()),
            group: Some("nogroup".into()),
        }),
        trust: None,
        reattach_within: 1,
    };
    std::fs::write(&boot, bootstrap.to_bytes()).expect("bootstrap");
    let sandbox_exe =
        Path::new(env!("CARGO_BIN_EXE_openshell-supervisor")).with_file_name("openshell-sandbox");
    let mut child = Command::new(sandbox_exe)
        .arg("--bootstrap")
        .arg(&boot)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openshell-sandbox");
    let err = lines(child.stderr.take().expect("stderr"));
    let listening = wait_for(&err, "listening on");
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
    let log = dir.path().join("deny.log");
    let attach = || {
        let (side, _) = supervisor::relay::bundle_side(bundle.clone(), &log, &[], binding.clone())
            .expect("side");
        let tls = runtime.block_on(end.connect(addr)).expect("attach");
        runtime.spawn(sandbox_protocol::transport::serve(side, tls))
    };
    let pid = child.id();
    let mut serving = attach();
    wait_for(&err, "workload");
    while states(pid).len() < WORKERS + 1 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ms = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(50));
        let dropped = Instant::now();
        serving.abort();
        loop {
            let s = states(pid);
            if s.len() > WORKERS && s.iter().all(|&c| c == 'T') {
                break;
            }
            assert!(
                dropped.elapsed() < Duration::from_secs(10),
                "never frozen: {s:?}"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
        ms.push(dropped.elapsed().as_secs_f64() * 1000.0);
        wait_for(&err, "frozen");
        serving = attach();
        wait_for(&err, "resumed");
    }
    // Without a supervisor past the window, the sandbox kills the
    // workload and exits.
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
