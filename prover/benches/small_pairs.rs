//! In-process time of `diff --prove` on the typical small pairs of
//! `bench/prover.sh`: both policies compiled from their files, then proved,
//! in a loop in one process (the way an in-process harness calls a library),
//! so process start and the first call's one-time costs are not counted.
//! The first call is reported on its own line; the runs are reported warm
//! (the patterns' automata kept from the runs before, as in a process that
//! proves change after change) and cold (every automaton built anew).
//!
//! `cargo bench -p prover --bench small_pairs` (files from `bench/prover.sh`,
//! which writes them to `target/bench/prover/`).

#![expect(
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a pair that does not compile or prove must stop it loudly"
)]

/// The allocator of the `openshell-policy` binary, so the figures are
/// the CLI's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use policy_lang::load;
use prover::{Options, Verdict};

/// Runs per figure; `SMALL_PAIRS_RUNS` sets fewer (e.g. under callgrind,
/// whose instruction counts do not vary with the machine's load).
fn runs() -> usize {
    std::env::var("SMALL_PAIRS_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(501)
}

fn compile(path: &Path) -> Bundle {
    match load::compile_file(path, None) {
        Ok((_, Some(b))) => b,
        Ok((checked, None)) => panic!(
            "{} does not compile: {:?}",
            path.display(),
            checked.diagnostics
        ),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Compile both, prove; the verdict is checked so a broken pair cannot
/// pass for a fast one.
fn once(old: &Path, new: &Path, expected: Verdict) -> Duration {
    let start = Instant::now();
    let a = compile(old);
    let b = compile(new);
    let opts = Options {
        solver: Some(&prover_z3::Z3),
        ..Options::default()
    };
    let report = prover::diff(&a, &b, &opts).expect("the pair proves");
    let took = start.elapsed();
    assert_eq!(
        report.verdict,
        expected,
        "{} → {}",
        old.display(),
        new.display()
    );
    took
}

/// CPU time of the whole process so far (user + system, every thread),
/// from `/proc/self/stat` in clock ticks of 10 ms: over hundreds of runs
/// it shows the work done even when other processes share the CPUs.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench/prover");
    let old = dir.join("old.policy");
    assert!(
        old.is_file(),
        "run bench/prover.sh first: it writes {}",
        dir.display()
    );
    let pairs = [
        (
            "typical widened",
            old.clone(),
            dir.join("new.policy"),
            Verdict::Widened,
        ),
        (
            "typical narrowed",
            old.clone(),
            dir.join("narrowed.policy"),
            Verdict::NoNewAccess,
        ),
    ];
    let first = once(&pairs[0].1, &pairs[0].2, pairs[0].3);
    println!(
        "first call in the process (widened): {:.2} ms",
        first.as_secs_f64() * 1e3
    );
    // Warm: the process has proved the pair before, and keeps the
    // patterns' automata. Cold: every automaton is built anew each run.
    let runs = runs();
    for cold in [false, true] {
        for (name, a, b, verdict) in &pairs {
            let cpu = cpu_time();
            let times: Vec<Duration> = (0..runs)
                .map(|_| {
                    if cold {
                        prover::strings::forget_cached();
                    }
                    once(a, b, *verdict)
                })
                .collect();
            let cpu = (cpu_time() - cpu) / u32::try_from(runs).unwrap_or(1);
            let min = times.iter().min().copied().unwrap_or_default();
            println!(
                "{name}, {}: median {:.2} ms, min {:.2} ms, CPU {:.2} ms per run ({runs} runs, compile both + prove)",
                if cold { "cold automata" } else { "warm" },
                median(times).as_secs_f64() * 1e3,
                min.as_secs_f64() * 1e3,
                cpu.as_secs_f64() * 1e3
            );
        }
    }
}
