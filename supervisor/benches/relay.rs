//! The relay of the sandbox protocol, both sides in this process, over a
//! Unix socket pair (`supervisor::relay::local_pair`) and over TCP with
//! TLS 1.3 on loopback as two hosts are joined
//! (`supervisor::relay::tls_pair`), against a plain loopback connection to
//! the same upstream:
//!
//! - connect: from the question to a connected workload socket (the relay
//!   stream opened with the question, the decision, the upstream connect,
//!   the workload's loopback pair), median of 1,000, against a loopback
//!   `connect`, median of 5 rounds taken in turn;
//! - throughput: 256 MiB written by one client, and 64 MiB by each of 8
//!   at once, until the upstream has read the last byte.
//!
//! Run: `cargo bench -p supervisor --bench relay`.
#![expect(
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a benchmark stops at the first failure"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use sandbox_protocol::{Binding, Caller};

const CONNECTS: usize = 1000;
const ROUNDS: usize = 5;
const ONE: usize = 256 << 20;
const EACH: usize = 64 << 20;
const CLIENTS: usize = 8;
const CHUNK: usize = 64 << 10;

/// Reads every connection to its end and answers with one byte.
fn sink() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0_u8; CHUNK];
                while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
                let _ = conn.write_all(b"k");
            });
        }
    });
    addr
}

/// Writes `bytes` and waits for the upstream's answer, which comes once
/// it has read them all.
fn push(mut conn: TcpStream, bytes: usize) {
    let chunk = vec![1_u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK);
        conn.write_all(&chunk[..n]).expect("write");
        left -= n;
    }
    conn.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut answer = [0_u8; 1];
    conn.read_exact(&mut answer).expect("answer");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn caller() -> Caller {
    Caller {
        pid: 2,
        tid: 2,
        exe: b"/usr/bin/curl".to_vec(),
        exe_deleted: false,
        exe_sha256: None,
        foreign_code: None,
        writable_tree: None,
    }
}

/// MiB/s for `total` bytes written by `clients` connections made by
/// `connect`, all at once.
fn throughput(clients: usize, each: usize, connect: impl Fn() -> TcpStream) -> f64 {
    let conns: Vec<TcpStream> = (0..clients).map(|_| connect()).collect();
    let start = Instant::now();
    let pushers: Vec<_> = conns
        .into_iter()
        .map(|c| std::thread::spawn(move || push(c, each)))
        .collect();
    for p in pushers {
        p.join().expect("pusher");
    }
    (clients * each) as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let upstream = sink();
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("bench.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"bench\" {{\n  allow /usr/bin/curl -> 127.0.0.1:{}\n}}\n",
            upstream.port()
        ),
    )
    .expect("policy");
    let (_, bundle) = policy_lang::load::compile_file(&policy, None).expect("compile");
    let bundle = bundle.expect("bundle");
    let binding = Binding {
        sandbox_id: "bench".into(),
        generation: 1,
    };
    let log = dir.path().join("deny.log");
    let unix = runtime
        .block_on(supervisor::relay::local_pair(
            bundle.clone(),
            &log,
            &[],
            binding.clone(),
            None,
        ))
        .expect("attach over a socket pair");
    let tls = runtime
        .block_on(supervisor::relay::tls_pair(bundle, &log, &[], binding))
        .expect("attach over TLS");
    let relayed = |sandbox: &sandbox::relay::Supervisor| {
        let answer = runtime
            .block_on(sandbox.connect(caller(), upstream))
            .expect("ask");
        let sandbox::relay::Connect::Relayed(stream) = answer else {
            panic!(
                "not relayed ({answer:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        };
        stream
    };
    let timed = |connect: &dyn Fn() -> TcpStream| -> f64 {
        let us: Vec<f64> = (0..CONNECTS)
            .map(|_| {
                let start = Instant::now();
                let c = connect();
                let us = start.elapsed().as_secs_f64() * 1e6;
                drop(c);
                us
            })
            .collect();
        median(us)
    };
    let direct = || TcpStream::connect(upstream).expect("connect");
    let (mut d, mut u, mut t) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        d.push(timed(&direct));
        u.push(timed(&|| relayed(&unix)));
        t.push(timed(&|| relayed(&tls)));
    }
    // Let the closed connections drain before measuring throughput.
    std::thread::sleep(Duration::from_millis(200));
    let one = [
        throughput(1, ONE, direct),
        throughput(1, ONE, || relayed(&unix)),
        throughput(1, ONE, || relayed(&tls)),
    ];
    let many = [
        throughput(CLIENTS, EACH, direct),
        throughput(CLIENTS, EACH, || relayed(&unix)),
        throughput(CLIENTS, EACH, || relayed(&tls)),
    ];

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    println!(
        "machine: {cpu}, {} cores",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!("| figure | loopback | relay, Unix socket pair | relay, TCP + TLS 1.3 | TLS / Unix |");
    println!("|---|---|---|---|---|");
    let (d, u, t) = (median(d), median(u), median(t));
    println!(
        "| connect, median of {ROUNDS} rounds of {CONNECTS} | {d:.1} µs | {u:.1} µs | {t:.1} µs | {:.2} × (added: {:.2} ×) |",
        t / u,
        (t - d) / (u - d)
    );
    for (what, [d, u, t]) in [
        (format!("throughput, 1 client, {} MiB", ONE >> 20), one),
        (
            format!("throughput, {CLIENTS} clients, {} MiB each", EACH >> 20),
            many,
        ),
    ] {
        println!(
            "| {what} | {d:.0} MiB/s | {u:.0} MiB/s ({:.0} %) | {t:.0} MiB/s ({:.0} %) | {:.2} × |",
            100.0 * u / d,
            100.0 * t / d,
            t / u
        );
    }
}
