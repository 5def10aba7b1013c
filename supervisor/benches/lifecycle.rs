//! Sandboxes the gateway runs with the local driver: `POST /v1/sandboxes`
//! to `ready` (the sandbox's evidence accepted, the workload let go) and
//! to the first line the command writes, one sandbox at a time
//! (`ROUNDS`, median and p90); the round trip of a command run in a ready
//! sandbox (`POST …/execs` until its output and exit status are read
//! back, `ROUNDS` in turn); then `PARALLEL` created at once on one
//! gateway: the time until every one is `ready`, and the resident memory
//! of the gateway (this process) and of every supervisor and sandbox
//! process.
//!
//! The gateway runs in this process, on loopback, with the release
//! `openshell-supervisor` and `openshell-sandbox` beside this benchmark
//! (`cargo build --release -p supervisor -p sandbox` first).
//!
//! Run as root: `cargo bench -p supervisor --bench lifecycle`.
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
#[path = "../tests/common/driven.rs"]
mod driven;
#[path = "../../sandbox/tests/podman/host.rs"]
mod host;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

const ROUNDS: usize = 20;
const PARALLEL: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Resident memory, in KiB, of process `pid`.
fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident memory, in KiB, of every process whose executable ends with
/// `name` and whose command line names `root`: their sum and their count.
fn rss_of(name: &str, root: &Path) -> (u64, usize) {
    let root = root.display().to_string();
    let mut sum = 0;
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if exe.to_string_lossy().ends_with(name)
            && String::from_utf8_lossy(&cmdline).contains(&root)
        {
            sum += rss_kib(&pid);
            n += 1;
        }
    }
    (sum, n)
}

fn run(space: &Path, id: &str) -> serde_json::Value {
    let dir = space.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    json!({
        "driver": "local",
        "command": ["/usr/bin/bash", "-c", format!("echo up > {}/first; exec sleep 600", dir.display())],
        "workspace": dir.display().to_string(),
    })
}

/// Create → ready and → first line, `ROUNDS` one at a time, then the exec
/// round trip, `ROUNDS` in turn, on a gateway with one driver (`name`,
/// its `run` completed by `more`).
fn medians(gw: &driven::Gw, space: &Path, name: &str, more: &serde_json::Value) {
    let run_with = |id: &str| {
        let mut run = run(space, id);
        run["driver"] = json!(name);
        for (k, v) in more.as_object().into_iter().flatten() {
            run[k] = v.clone();
        }
        run
    };
    let mut to_ready = Vec::new();
    let mut to_output = Vec::new();
    for i in 0..ROUNDS {
        let id = format!("{name}-{i}");
        let body = json!({"id": id, "policy": "agent", "run": run_with(&id)});
        let first = space.join(&id).join("first");
        let start = Instant::now();
        let r = gw.call("POST", "/v1/sandboxes", Some(body));
        assert_eq!(r.status, 201, "{:?}", r.json());
        to_ready.push(start.elapsed());
        while !first.exists() {
            std::thread::sleep(Duration::from_micros(200));
        }
        to_output.push(start.elapsed());
        let r = gw.call("DELETE", &format!("/v1/sandboxes/{id}"), None);
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
    to_ready.sort();
    to_output.sort();
    println!(
        "{name}: create → ready, {ROUNDS} one at a time: median {}, p90 {}",
        ms(percentile(&to_ready, 0.5)),
        ms(percentile(&to_ready, 0.9))
    );
    println!(
        "{name}: create → first line written, {ROUNDS} one at a time: median {}, p90 {}",
        ms(percentile(&to_output, 0.5)),
        ms(percentile(&to_output, 0.9))
    );
    let id = format!("{name}-exec");
    let body = json!({"id": id, "policy": "agent", "run": run_with(&id)});
    let r = gw.call("POST", "/v1/sandboxes", Some(body));
    assert_eq!(r.status, 201, "{:?}", r.json());
    let mut round_trips = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let ran = driven::exec(gw, &id, json!({"command": ["/usr/bin/echo", "hi"]}));
        round_trips.push(start.elapsed());
        assert_eq!(
            (ran.record["exit_status"].as_u64(), ran.stdout.as_str()),
            (Some(0), "hi\n")
        );
    }
    round_trips.sort();
    println!(
        "{name}: exec round trip (`echo hi`: queued, run, output and status read back), {ROUNDS} in turn: median {}, p90 {}",
        ms(percentile(&round_trips, 0.5)),
        ms(percentile(&round_trips, 0.9))
    );
    let r = gw.call("DELETE", &format!("/v1/sandboxes/{id}"), None);
    assert_eq!(r.status, 200, "{:?}", r.json());
}

fn main() {
    let root = tempfile::Builder::new()
        .prefix("osp-bench-local-")
        .tempdir()
        .unwrap();
    let space = driven::workspace();
    let make = driven::local_driver(root.path());
    let gw = driven::gateway(&make, &driven::policy(space.path(), 9), 30);
    medians(&gw, space.path(), "local", &json!({}));

    let gateway_before = rss_kib("self");
    let start = Instant::now();
    let creates: Vec<_> = (0..PARALLEL)
        .map(|i| {
            let id = format!("many-{i}");
            let body = json!({"id": id, "policy": "agent", "run": run(space.path(), &id)});
            let client = gw.admin.clone();
            gw.rt.spawn(async move {
                let begun = Instant::now();
                let r = client
                    .send(
                        "POST",
                        "/v1/sandboxes",
                        Some(&body),
                        &[],
                        Duration::from_secs(300),
                    )
                    .await
                    .unwrap();
                (r.status, begun.elapsed())
            })
        })
        .collect();
    let mut each = Vec::new();
    for c in creates {
        let (status, took) = gw.rt.block_on(c).unwrap();
        assert_eq!(status, 201, "a parallel create failed");
        each.push(took);
    }
    let all = start.elapsed();
    each.sort();
    let (sup_kib, sups) = rss_of("openshell-supervisor", root.path());
    let (sbx_kib, sbxs) = rss_of("openshell-sandbox", root.path());
    let gateway_after = rss_kib("self");
    println!(
        "{PARALLEL} created at once: all ready in {}; each: median {}, p90 {}",
        ms(all),
        ms(percentile(&each, 0.5)),
        ms(percentile(&each, 0.9))
    );
    println!(
        "memory with {PARALLEL} ready: gateway {:.1} MiB (was {:.1} MiB); {sups} supervisors {:.1} MiB ({:.1} MiB each); {sbxs} sandboxes {:.1} MiB",
        gateway_after as f64 / 1024.0,
        gateway_before as f64 / 1024.0,
        sup_kib as f64 / 1024.0,
        sup_kib as f64 / 1024.0 / sups.max(1) as f64,
        sbx_kib as f64 / 1024.0
    );
    let deletes: Vec<_> = (0..PARALLEL)
        .map(|i| {
            let client = gw.admin.clone();
            gw.rt.spawn(async move {
                client
                    .send(
                        "DELETE",
                        &format!("/v1/sandboxes/many-{i}"),
                        None,
                        &[],
                        Duration::from_secs(300),
                    )
                    .await
                    .unwrap()
                    .status
            })
        })
        .collect();
    for d in deletes {
        assert_eq!(gw.rt.block_on(d).unwrap(), 200, "a parallel delete failed");
    }

    drop(gw);

    // The Podman driver, with the static sandbox and a root filesystem
    // lent the host's /usr (as its tests run it).
    if std::env::var_os("OPENSHELL_STATIC_SANDBOX").is_none() {
        println!("podman: not measured (OPENSHELL_STATIC_SANDBOX is not set)");
        return;
    }
    host::require_podman();
    let sandbox = host::static_sandbox();
    let mut volumes = Vec::new();
    let image = host::rootfs(&sandbox, |r| {
        volumes = host::host_usr(r);
        for f in ["passwd", "group"] {
            std::fs::copy(Path::new("/etc").join(f), r.join("etc").join(f)).unwrap();
        }
    });
    let root = tempfile::Builder::new()
        .prefix("osp-bench-podman-")
        .tempdir()
        .unwrap();
    let make = driven::podman_driver(root.path(), &sandbox, &volumes);
    let gw = driven::gateway(&make, &driven::policy(space.path(), 9), 30);
    medians(
        &gw,
        space.path(),
        "podman",
        &json!({"rootfs": image.path().display().to_string()}),
    );
}
