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
//! The messages and their encoding are in `launch_link`. An init program
//! that another process starts (a container runtime, handed the init's
//! end of the link and its plan as inherited descriptors) is driven from
//! the launcher's side with [`LaunchLink`].

#![forbid(unsafe_code)]

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::errno::Errno;
use crate::launch_link::{Message, receive, send};
use crate::spawn::{ExitStatus, SpawnError, step_error};
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

/// The launcher's end of a launch link to an init program that another
/// process starts; [`spawn_init`](crate::spawn_init) speaks the same link
/// to an init it forks itself. The launcher cannot reap or signal such an
/// init: whoever started it does.
#[derive(Debug)]
pub struct LaunchLink {
    sock: OwnedFd,
}

impl LaunchLink {
    /// A new link: the launcher's end, and the init's, which the caller
    /// passes on (both close-on-exec; see [`crate::pass_fds`]).
    pub fn pair() -> Result<(Self, OwnedFd), Errno> {
        let (sock, init) = sys::net::seqpacket_pair()?;
        Ok((Self { sock }, init))
    }

    /// Waits until the init has forked the workload, which waits for its
    /// go: the workload's seccomp listener when the init hands it over,
    /// `None` when the init keeps it (it brokers). An error means the
    /// workload never runs; it says why, as the init reported it.
    pub fn ready(&self) -> Result<Option<OwnedFd>, SpawnError> {
        match receive(self.sock.as_fd()).map_err(SpawnError::Link)? {
            Some((Message::Listener, Some(fd))) => Ok(Some(fd)),
            Some((Message::Ready, None)) => Ok(None),
            Some((Message::StepFailed { step, errno }, _)) => Err(step_error(step, errno)),
            Some((Message::Failed(why), _)) => Err(SpawnError::Init(why)),
            None => Err(SpawnError::Link(Errno(libc::EPIPE))),
            Some(_) => Err(SpawnError::Link(Errno(libc::EBADMSG))),
        }
    }

    /// Lets the workload exec; returns once it did, or why it did not.
    pub fn go(&self) -> Result<(), SpawnError> {
        send(self.sock.as_fd(), &Message::Go, None).map_err(SpawnError::Link)?;
        match receive(self.sock.as_fd()).map_err(SpawnError::Link)? {
            Some((Message::Started, _)) => Ok(()),
            Some((Message::ExecFailed(errno), _)) => Err(SpawnError::Exec(errno)),
            Some((Message::Failed(why), _)) => Err(SpawnError::Init(why)),
            None => Err(SpawnError::Link(Errno(libc::EPIPE))),
            Some(_) => Err(SpawnError::Link(Errno(libc::EBADMSG))),
        }
    }

    /// Waits for the init to report how the workload ended (blocking).
    /// `EPIPE`: the init ended without saying.
    pub fn status(&self) -> Result<ExitStatus, Errno> {
        match receive(self.sock.as_fd())? {
            Some((Message::Status(raw), _)) => Ok(ExitStatus::from_raw(raw)),
            None => Err(Errno(libc::EPIPE)),
            Some(_) => Err(Errno(libc::EBADMSG)),
        }
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
