//! `openshell-sandbox` as PID 1: 10,000 double-forked children, each
//! orphaned at once and handed to it, in a PID namespace of its own
//! (`unshare --pid --fork --mount-proc`, as root). Prints, as a Markdown
//! row: the zombies left once the last orphan has ended, the workload's
//! exit status as the sandbox reports it (3 expected), and the seconds
//! from the first fork to no zombie left. Median of 5 runs.
//!
//! Run as root: `cargo bench -p sandbox --bench pid1`.
#![expect(
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a benchmark stops at the first failure"
)]

use std::process::Command;

const SANDBOX: &str = env!("CARGO_BIN_EXE_openshell-sandbox");
const ORPHANS: usize = 10_000;
const RUNS: usize = 5;

/// The workload (see the script): prints the seconds from the first fork
/// to no zombie left, the seconds after the last fork, the zombies left.
const ORPHANS_PY: &str = include_str!("../../bench/orphans.py");

fn main() {
    let mut seconds = Vec::new();
    let mut zombies = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..RUNS {
        let out = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", SANDBOX, "--"])
            .args(["/usr/bin/python3", "-c", ORPHANS_PY, &ORPHANS.to_string()])
            .output()
            .expect("run unshare");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split_whitespace();
        let (Some(s), Some(z)) = (fields.next(), fields.nth(1)) else {
            panic!("no figures: {text}{}", String::from_utf8_lossy(&out.stderr));
        };
        seconds.push(s.parse::<f64>().expect("seconds"));
        zombies.push(z.parse::<u32>().expect("zombies"));
        statuses.push(out.status.code());
    }
    seconds.sort_by(f64::total_cmp);
    let median = seconds[RUNS / 2];
    let worst_zombies = zombies.iter().max().copied().unwrap_or_default();
    println!(
        "| {ORPHANS} double-forked orphans under `openshell-sandbox` as PID 1: zombies left (worst of {RUNS}), exit statuses | 0, all 3 | **{worst_zombies}, {statuses:?}** (median {median:.2} s from the first fork to none left) |"
    );
}
