//! The launch link between the process that starts the workload's init
//! program ([`spawn_init`](crate::spawn_init)) and that program
//! (`openshell-sandbox`): one `SOCK_SEQPACKET` socket pair, one message
//! per write.
//!
//! ```text
//! launcher                              init program
//! spawn_init ── fork · namespaces · exec ─▶ reads its plan, forks the
//!                                           workload (Landlock, seccomp)
//!   ◀── Listener + the listener's fd (SCM_RIGHTS)
//!       (or StepFailed / Failed: nothing runs)
//! Pending::start ── Go ─────────────────▶ lets the workload exec
//!   ◀── Started, or ExecFailed
//!   ...                                     reaps, passes on signals
//!   ◀── Status (the raw wait status)        exits
//! ```
//!
//! Each message is a tag byte and a little payload; nothing here parses
//! more than that, and a message of any other shape is refused.

#![forbid(unsafe_code)]

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::errno::Errno;
use crate::spawn::{ExitStatus, SpawnError};
use crate::sys;
use crate::sys::child::STEPS;

/// The longest message: a failure's text is cut to fit.
const MAX_MESSAGE: usize = 4096;

/// An anonymous memory file holding `bytes`, read from its start: how a
/// launch plan reaches the init program without touching a filesystem.
pub fn memory_file(name: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = sys::fd::memfd_create(name, libc::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// One message of the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// The workload's seccomp listener travels with it.
    Listener,
    /// A step of the workload's setup failed (index into `STEPS`).
    StepFailed { step: usize, errno: Errno },
    /// The init could not set the workload up, for this reason.
    Failed(String),
    /// The launcher lets the workload exec.
    Go,
    /// The workload exec'd.
    Started,
    /// The workload's `execve` failed.
    ExecFailed(Errno),
    /// The workload ended with this raw wait status.
    Status(libc::c_int),
}

impl Message {
    fn encode(&self) -> Vec<u8> {
        let (tag, payload): (u8, Vec<u8>) = match self {
            Self::Listener => (1, Vec::new()),
            Self::StepFailed { step, errno } => {
                let step = u32::try_from(*step).unwrap_or(u32::MAX);
                let mut p = step.to_le_bytes().to_vec();
                p.extend(errno.raw().to_le_bytes());
                (2, p)
            }
            Self::Failed(text) => {
                let mut end = text.len().min(MAX_MESSAGE - 1);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                (3, text.as_bytes().get(..end).unwrap_or_default().to_vec())
            }
            Self::Go => (4, Vec::new()),
            Self::Started => (5, Vec::new()),
            Self::ExecFailed(errno) => (6, errno.raw().to_le_bytes().to_vec()),
            Self::Status(raw) => (7, raw.to_le_bytes().to_vec()),
        };
        let mut bytes = vec![tag];
        bytes.extend(payload);
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<Self, Errno> {
        let int = |b: &[u8]| -> Result<i32, Errno> {
            let b: [u8; 4] = b.try_into().map_err(|_| Errno(libc::EBADMSG))?;
            Ok(i32::from_le_bytes(b))
        };
        let (tag, payload) = bytes.split_first().ok_or(Errno(libc::EBADMSG))?;
        match (tag, payload.len()) {
            (1, 0) => Ok(Self::Listener),
            (2, 8) => {
                let (step, errno) = payload.split_at(4);
                let step = usize::try_from(int(step)?).map_err(|_| Errno(libc::EBADMSG))?;
                if step >= STEPS.len() {
                    return Err(Errno(libc::EBADMSG));
                }
                Ok(Self::StepFailed {
                    step,
                    errno: Errno(int(errno)?),
                })
            }
            (3, _) => Ok(Self::Failed(String::from_utf8_lossy(payload).into_owned())),
            (4, 0) => Ok(Self::Go),
            (5, 0) => Ok(Self::Started),
            (6, 4) => Ok(Self::ExecFailed(Errno(int(payload)?))),
            (7, 4) => Ok(Self::Status(int(payload)?)),
            _ => Err(Errno(libc::EBADMSG)),
        }
    }
}

/// Sends `message` on `sock`, with `fd` attached when given.
pub(crate) fn send(
    sock: BorrowedFd<'_>,
    message: &Message,
    fd: Option<BorrowedFd<'_>>,
) -> Result<(), Errno> {
    sys::net::send_with_fd(sock, &message.encode(), fd)
}

/// The next message on `sock` and the descriptor that came with it;
/// `None` once the peer has closed its end.
pub(crate) fn receive(sock: BorrowedFd<'_>) -> Result<Option<(Message, Option<OwnedFd>)>, Errno> {
    let mut buf = vec![0_u8; MAX_MESSAGE];
    let (n, fd) = sys::net::recv_with_fd(sock, &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    let message = Message::decode(buf.get(..n).unwrap_or_default())?;
    Ok(Some((message, fd)))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_comes_back_as_sent() {
        let all = [
            Message::Listener,
            Message::StepFailed {
                step: 17,
                errno: Errno(libc::EPERM),
            },
            Message::Failed("the plan is unreadable".into()),
            Message::Go,
            Message::Started,
            Message::ExecFailed(Errno(libc::ENOENT)),
            Message::Status(9 << 8),
        ];
        for m in all {
            assert_eq!(Message::decode(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        for bad in [
            &[][..],
            &[0],
            &[1, 0],
            &[2, 0, 0, 0],
            &[2, 200, 0, 0, 0, 1, 0, 0, 0],
            &[7, 1, 2, 3],
            &[9],
        ] {
            assert_eq!(Message::decode(bad), Err(Errno(libc::EBADMSG)), "{bad:?}");
        }
    }

    #[test]
    fn a_long_failure_is_cut_at_a_character() {
        let text = "é".repeat(MAX_MESSAGE);
        let encoded = Message::Failed(text).encode();
        assert!(encoded.len() <= MAX_MESSAGE);
        assert!(
            matches!(Message::decode(&encoded), Ok(Message::Failed(t)) if t.chars().all(|c| c == 'é'))
        );
    }

    #[test]
    fn a_listener_travels_with_its_message() {
        let (a, b) = sys::net::seqpacket_pair().unwrap();
        let (r, _w) = sys::fd::pipe().unwrap();
        send(a.as_fd(), &Message::Listener, Some(r.as_fd())).unwrap();
        let (m, fd) = receive(b.as_fd()).unwrap().unwrap();
        assert_eq!(m, Message::Listener);
        let fd = fd.unwrap();
        assert_ne!(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            std::os::fd::AsRawFd::as_raw_fd(&r)
        );
        drop(a);
        assert!(receive(b.as_fd()).unwrap().is_none());
    }
}
