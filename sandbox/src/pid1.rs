//! The duties of the workload's PID 1.
//!
//! The workload runs in a process group of its own (the terminal's
//! foreground group when there is one), started with every signal
//! unblocked. Here every signal stays blocked and is taken in turn:
//!
//! - `SIGCHLD`: every child that has ended is reaped, the orphans the
//!   kernel hands to a PID 1 (or to a child subreaper) among them. Only
//!   this process's own children are reaped, so a status some process of
//!   the workload waits for is never taken from it. When the workload
//!   itself ends, its status is the result.
//! - `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2` and
//!   `SIGWINCH` from outside are passed on to the workload's process
//!   group. After a `SIGTERM`, a workload still running when the grace
//!   period ends is killed with its group.
//! - As PID 1 of a namespace, a signal sent from inside it (a sender the
//!   namespace can name) is dropped: the workload can neither stop nor
//!   fool its init. The kernel already ignores `SIGKILL` and `SIGSTOP`
//!   sent to an init from its own namespace.
//!
//! When the workload ends, nothing it started outlives it: as PID 1 the
//! kernel kills the rest of the namespace when this process exits; as a
//! subreaper (where no PID namespace could be made) every remaining
//! descendant is killed and reaped first.
//!
//! This process holds nothing the workload should read, but it is made
//! non-dumpable with a 0/0 core limit from its start regardless: a
//! workload of the same user can then neither `ptrace` it, nor take its
//! descriptors (`pidfd_getfd`), nor read its memory.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use enforcer::signals::{self, Delivered};
use enforcer::{Errno, ExitStatus, Reaped};

/// Signals passed on to the workload's process group.
pub const FORWARDED: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// How long a workload has between the `SIGTERM` passed on to it and
/// `SIGKILL`, unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Why the workload could not be run or waited for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Pid1Error {
    /// A step of setting up this process failed.
    #[error("cannot {step}: {errno}")]
    Setup {
        /// What was being done.
        step: &'static str,
        /// The kernel's answer.
        errno: Errno,
    },
    /// The command could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program named.
        program: String,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// Waiting for signals or children failed.
    #[error("cannot wait for the workload: {0}")]
    Wait(Errno),
}

/// Runs `command` as the workload and returns how it ended.
pub fn run(command: &[OsString], grace: Duration) -> Result<ExitStatus, Pid1Error> {
    let is_init = become_init()?;
    let (program, args) = command.split_first().ok_or_else(|| Pid1Error::Spawn {
        program: String::new(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"),
    })?;
    let child = Command::new(program)
        .args(args)
        .process_group(0)
        .spawn()
        .map_err(|source| Pid1Error::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
    let status = supervise(child.id(), is_init, grace, &Watched::default(), None)?;
    if !is_init {
        enforcer::kill_descendants();
    }
    Ok(status)
}

/// What both ways in begin with: non-dumpable, every signal blocked, and a
/// child subreaper unless PID 1. Whether this process is PID 1.
pub(crate) fn become_init() -> Result<bool, Pid1Error> {
    let setup = |step| move |errno| Pid1Error::Setup { step, errno };
    enforcer::forbid_core_dumps().map_err(setup("forbid core dumps"))?;
    signals::block_all().map_err(setup("block signals"))?;
    let is_init = std::process::id() == 1;
    if !is_init {
        enforcer::set_child_subreaper().map_err(setup("become a child subreaper"))?;
    }
    Ok(is_init)
}

/// Children besides the workload whose status someone waits for (the
/// further commands the supervisor runs): the reaper, which takes every
/// child's status, hands each its own.
#[derive(Debug, Clone, Default)]
pub struct Watched(Arc<Mutex<HashMap<u32, oneshot::Sender<ExitStatus>>>>);

impl Watched {
    /// Forks with `spawn`, which returns the child and its pid, while the
    /// reaper waits: the pid is registered before any status of it can be
    /// taken. The receiver gets the status once the child has ended.
    pub fn spawn<T, E>(
        &self,
        spawn: impl FnOnce() -> Result<(T, u32), E>,
    ) -> Result<(T, u32, oneshot::Receiver<ExitStatus>), E> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (child, pid) = spawn()?;
        let (tx, rx) = oneshot::channel();
        map.insert(pid, tx);
        Ok((child, pid, rx))
    }

    /// Stops waiting for `pid`: it was reaped elsewhere or never ran.
    pub fn forget(&self, pid: u32) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pid);
    }

    fn ended(&self, pid: u32, status: ExitStatus) {
        let waiter = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pid);
        if let Some(tx) = waiter {
            let _ = tx.send(status);
        }
    }
}

/// Hands the terminal to the workload's group, then takes signals until
/// the workload has ended. At `deadline`, if any, the workload is ended as
/// a `SIGTERM` from outside would end it.
pub(crate) fn supervise(
    workload: u32,
    is_init: bool,
    grace: Duration,
    watched: &Watched,
    deadline: Option<Instant>,
) -> Result<ExitStatus, Pid1Error> {
    // Not a terminal (or not ours): nothing to hand over.
    let _ = signals::set_foreground(std::io::stdin().as_fd(), workload);
    let mut kill_at: Option<Instant> = None;
    let mut deadline = deadline;
    loop {
        let wake = match (kill_at, deadline) {
            (Some(k), _) => Some(k),
            (None, d) => d,
        };
        let timeout = wake.map(|at| at.saturating_duration_since(Instant::now()));
        match signals::wait(timeout).map_err(Pid1Error::Wait)? {
            None if kill_at.is_none() && deadline.is_some() => {
                // The workload's time is up.
                deadline = None;
                let _ = signals::signal_group(workload, libc::SIGTERM);
                kill_at = Some(Instant::now() + grace);
            }
            None => {
                // The grace period is over.
                let _ = signals::signal_group(workload, libc::SIGKILL);
                let _ = enforcer::send_signal(workload, libc::SIGKILL);
                kill_at = None;
            }
            Some(Delivered {
                signal: libc::SIGCHLD,
                ..
            }) => {
                if let Some(status) = reap(workload, watched)? {
                    return Ok(status);
                }
            }
            Some(got) if FORWARDED.contains(&got.signal) => {
                if is_init && got.sender != 0 {
                    continue;
                }
                let _ = signals::signal_group(workload, got.signal);
                if got.signal == libc::SIGTERM && kill_at.is_none() {
                    kill_at = Some(Instant::now() + grace);
                }
            }
            Some(_) => {}
        }
    }
}

/// Reaps every child that has ended; the workload's status once it is one
/// of them.
fn reap(workload: u32, watched: &Watched) -> Result<Option<ExitStatus>, Pid1Error> {
    loop {
        match enforcer::try_reap(None) {
            Ok(Reaped::Exited(pid, status)) if pid == workload => return Ok(Some(status)),
            Ok(Reaped::Exited(pid, status)) => watched.ended(pid, status),
            Err(Errno(libc::EINTR)) => {}
            Ok(Reaped::Running | Reaped::NoChildren) => return Ok(None),
            Err(e) => return Err(Pid1Error::Wait(e)),
        }
    }
}

/// The workload's status as this process's exit code.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    u8::try_from(status.code()).unwrap_or(u8::MAX)
}
