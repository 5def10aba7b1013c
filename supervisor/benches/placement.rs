//! The relay across two hosts against the local one: the latency a
//! relayed connect and a proxied request add, with the workload
//!
//! - in a local `openshell-supervisor run` (the relay over a Unix socket
//!   pair), and
//! - in a standalone `openshell-sandbox` in a network namespace of its own,
//!   joined to the supervisor's by a veth pair and fenced with nftables,
//!   served by `openshell-supervisor serve` (the relay over TCP and TLS),
//!
//! against the same client without a sandbox. The upstream is an HTTP/1.1
//! keep-alive server on the supervisor's loopback, named `api.test`
//! (`--resolve`), its route inspected by the L7 proxy (`http read-only`).
//! python3 is the client: median of 1,000 connects, and of 1,000 GETs on
//! one keep-alive connection, over `ROUNDS` rounds taken in turn.
//!
//! Run as root: `cargo bench -p supervisor --bench placement`.
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

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use common::standalone;
use common::{Dir, TestNet, exe};

const ROUNDS: usize = 5;
const PORT: u16 = 7443;

/// Prints two medians in µs: connect, then a GET on a keep-alive
/// connection. argv: the port.
const CLIENT_PY: &str = r#"
import http.client, socket, statistics, sys, time
port = int(sys.argv[1]); n = 1000
cs = []
for i in range(n + 50):
    s = socket.socket(); t = time.perf_counter_ns(); s.connect(("127.0.0.1", port)); cs.append(time.perf_counter_ns() - t); s.close()
c = http.client.HTTPConnection("api.test", port, timeout=10)
gs = []
for i in range(n + 50):
    t = time.perf_counter_ns(); c.request("GET", "/r"); r = c.getresponse(); r.read(); gs.append(time.perf_counter_ns() - t)
print(statistics.median(cs[50:]) / 1000, statistics.median(gs[50:]) / 1000)
"#;

/// An HTTP/1.1 server answering `ok` to every request, keep-alive.
fn serve_http(listener: TcpListener) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                let mut reader = BufReader::new(conn);
                loop {
                    let mut line = String::new();
                    // The request line and headers, to the blank line.
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    if out
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
}

fn medians(out: &std::process::Output) -> (f64, f64) {
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>());
    match (it.next(), it.next()) {
        (Some(Ok(c)), Some(Ok(g))) => (c, g),
        _ => panic!(
            "no figures: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One round across the two hosts: `serve` in `sup`, the sandbox in `sbx`.
fn across(sup: &TestNet, sbx: &TestNet, dir: &Dir, bundle: &Path, port: u16) -> (f64, f64) {
    let boot = dir.join("boot.json");
    let _ = std::fs::remove_file(&boot);
    let at = format!("10.78.0.2:{PORT}");
    let python = exe("/usr/bin/python3");
    let (mut serve, err, _) = standalone::spawn_serve(
        standalone::serve_command(Some(&sup.name), dir, bundle, &boot, &at)
            .args(["--resolve", "api.test=127.0.0.1", "--log"])
            .arg(dir.log())
            .args(["--", &python, "-c", CLIENT_PY, &port.to_string()]),
    );
    let out = standalone::bootstrapped(Some(&sbx.name), &boot)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let status = serve.wait().unwrap();
    let rest: Vec<String> = err.try_iter().collect();
    assert!(status.success(), "serve: {rest:#?}");
    medians(&out)
}

fn main() {
    let (sup, sbx) = standalone::joined("10.78.0");
    standalone::fence(&sbx, "10.78.0.1", PORT);
    let upstream = sup.tcp("127.0.0.1:0");
    let port = upstream.local_addr().unwrap().port();
    serve_http(upstream);
    let dir = Dir::new();
    let python = exe("/usr/bin/python3");
    let bundle = standalone::nobody_bundle(
        &dir,
        "placement",
        &format!(
            "  allow {python} -> 127.0.0.1:{port}\n  allow {python} -> api.test:{port} http read-only\n"
        ),
    );
    let port_s = port.to_string();
    let client = ["/usr/bin/python3", "-c", CLIENT_PY, &port_s];
    let (mut direct, mut local, mut remote) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        direct.push(medians(&common::output(plain_with_hosts(
            &sup, &dir, &port_s,
        ))));
        let out = sup.run(&dir, &bundle, &["--resolve", "api.test=127.0.0.1"], &client);
        assert!(out.status.success(), "{}", common::stderr(&out));
        local.push(medians(&out));
        remote.push(across(&sup, &sbx, &dir, &bundle, port));
    }
    let pick = |v: &[(f64, f64)], second: bool| {
        median(v.iter().map(|p| if second { p.1 } else { p.0 }).collect())
    };
    println!(
        "| figure | direct | local run (Unix socket pair) | two namespaces (TCP + TLS, fenced) | added: two namespaces / local | target |"
    );
    println!("|---|---|---|---|---|---|");
    for (what, second) in [
        ("connect, median of 1,000", false),
        ("proxied GET, keep-alive, median of 1,000", true),
    ] {
        let (d, l, r) = (
            pick(&direct, second),
            pick(&local, second),
            pick(&remote, second),
        );
        println!(
            "| {what}, median of {ROUNDS} rounds | {d:.1} µs | +{:.1} µs | +{:.1} µs | **{:.2} ×** | ≤ 1.5 × |",
            l - d,
            r - d,
            (r - d) / (l - d)
        );
    }
}

/// The client without a sandbox, in the supervisor's namespace, with
/// `api.test` in a hosts file of its own mount namespace.
fn plain_with_hosts(sup: &TestNet, dir: &Dir, port: &str) -> Command {
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 api.test\n").unwrap();
    let script = format!(
        "mount --bind {} /etc/hosts && exec python3 -c '{}' {port}",
        hosts.display(),
        CLIENT_PY.replace('\'', "\"")
    );
    let mut c = Command::new("ip");
    c.args([
        "netns", "exec", &sup.name, "unshare", "--mount", "sh", "-c", &script,
    ]);
    c
}
