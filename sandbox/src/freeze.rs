//! Every workload process stopped at once when the channel to the
//! supervisor drops, and let go on, or killed, after.
//!
//! The sandbox is the parent, or the subreaper, of every workload process,
//! so `/proc` lists them all as its descendants. Each is sent `SIGSTOP`,
//! which no process can catch or ignore, and the tree is walked again
//! until every process in it is stopped: one forked while the tree was
//! walked is found on the next walk. Once all are stopped none runs, so
//! none can send the `SIGCONT` that would resume another; only this
//! process can.

use std::time::{Duration, Instant};

/// How long a freeze may take before it is given up as failed.
const FREEZE_WITHIN: Duration = Duration::from_secs(2);

/// A process's state letter (`/proc/<pid>/stat`, after the command's
/// closing parenthesis); `None` once it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Stopped, traced-stopped, or no longer running at all.
fn still(state: Option<char>) -> bool {
    matches!(state, None | Some('T' | 't' | 'Z' | 'X'))
}

/// Stops every descendant of this process; how many it stopped, or an
/// error when some still ran after [`FREEZE_WITHIN`].
pub fn freeze() -> Result<usize, String> {
    let deadline = Instant::now() + FREEZE_WITHIN;
    loop {
        let tree = enforcer::descendants();
        for &pid in &tree {
            let _ = enforcer::send_signal(pid, libc::SIGSTOP);
        }
        // A stop is delivered when the process next runs kernel code:
        // look again until every process of the tree, new ones included,
        // has stopped.
        let running: Vec<u32> = enforcer::descendants()
            .into_iter()
            .filter(|&p| !still(state(p)))
            .collect();
        if running.is_empty() {
            return Ok(tree.len());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} workload processes still run ({running:?})",
                running.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Lets every descendant go on.
pub fn thaw() {
    for pid in enforcer::descendants() {
        let _ = enforcer::send_signal(pid, libc::SIGCONT);
    }
}

/// Kills every descendant, stopped or not, without reaping: the init's
/// loop reaps them and learns the workload's end.
pub fn kill() {
    for _ in 0..3 {
        let tree = enforcer::descendants();
        if tree.is_empty() {
            return;
        }
        for pid in tree {
            let _ = enforcer::send_signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
