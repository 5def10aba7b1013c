//! The launch link between the process that starts the workload's init
//! program ([`spawn_init`](crate::spawn_init)) and that program
//! (`openshell-sandbox`): one `SOCK_SEQPACKET` socket pair, one message
//! per write.
//!
//! ```text
//! launcher                              init program
//! spawn_init ── fork · namespaces · exec ─▶ reads its plan, forks the
//!                                           workload (Landlock, seccomp)
//!   ◀── Listener + the listener's fd (SCM_RIGHTS), or Ready when the
//!       init keeps the listener and brokers itself
//!       (or StepFailed / Failed: nothing runs)
//! Pending::start ── Go ─────────────────▶ lets the workload exec
//!   ◀── Started, or ExecFailed
//!   ...                                     reaps, passes on signals
//!   ◀── Status (the raw wait status)        exits
//! ```
//!
//! The messages and their encoding are in `launch_link`.

#![forbid(unsafe_code)]

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::errno::Errno;
use crate::launch_link::{Message, receive, send};
use crate::spawn::{ExitStatus, SpawnError};
use crate::sys;
use crate::sys::child::STEPS;

/// The init program's end of the launch link (see the module docs).
#[derive(Debug)]
pub struct InitLink {
    sock: OwnedFd,
}

impl InitLink {
    /// Takes the link's end inherited as descriptor `fd` (`--control-fd`).
    pub fn from_inherited(fd: i32) -> Result<Self, Errno> {
        let sock = sys::fd::take_inherited(fd)?;
        sys::fd::set_cloexec(sock.as_fd())?;
        Ok(Self { sock })
    }

    /// Hands the workload's seccomp listener to the launcher.
    pub fn hand_over(&self, listener: BorrowedFd<'_>) -> Result<(), Errno> {
        send(self.sock.as_fd(), &Message::Listener, Some(listener))
    }

    /// Tells the launcher the workload waits for its go, its listener
    /// kept by the init program.
    pub fn report_ready(&self) -> Result<(), Errno> {
        send(self.sock.as_fd(), &Message::Ready, None)
    }

    /// Tells the launcher why the workload could not be started, in the
    /// terms [`SpawnError`] uses, so that it reports exactly what a
    /// workload it forked itself would have.
    pub fn report_spawn_error(&self, error: &SpawnError) -> Result<(), Errno> {
        let message = match error {
            SpawnError::Step { step, errno } => match STEPS.iter().position(|s| s == step) {
                Some(step) => Message::StepFailed {
                    step,
                    errno: *errno,
                },
                None => Message::Failed(error.to_string()),
            },
            SpawnError::Exec(errno) => Message::ExecFailed(*errno),
            other => Message::Failed(with_sources(other)),
        };
        send(self.sock.as_fd(), &message, None)
    }

    /// Tells the launcher the workload could not be set up, and why.
    pub fn report_failure(&self, why: &str) -> Result<(), Errno> {
        send(self.sock.as_fd(), &Message::Failed(why.to_owned()), None)
    }

    /// Waits for the launcher's go. An error (the launcher is gone, or
    /// sent something else) means the workload must never run.
    pub fn wait_for_go(&self) -> Result<(), Errno> {
        match receive(self.sock.as_fd())? {
            Some((Message::Go, None)) => Ok(()),
            None => Err(Errno(libc::EPIPE)),
            Some(_) => Err(Errno(libc::EBADMSG)),
        }
    }

    /// Tells the launcher the workload exec'd.
    pub fn report_started(&self) -> Result<(), Errno> {
        send(self.sock.as_fd(), &Message::Started, None)
    }

    /// Tells the launcher how the workload ended.
    pub fn report_status(&self, status: ExitStatus) -> Result<(), Errno> {
        send(self.sock.as_fd(), &Message::Status(status.raw()), None)
    }
}

/// `error` and each of its sources, joined with ": ".
fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
