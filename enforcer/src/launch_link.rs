//! The launch link's wire format: one `SOCK_SEQPACKET` message per write,
//! a tag byte and a little payload, and nothing parsed beyond that; a
//! message of any other shape is refused. Who says what, and when, is in
//! [`crate::InitLink`]'s module.

#![forbid(unsafe_code)]

use std::os::fd::{BorrowedFd, OwnedFd};

use crate::errno::Errno;
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
    /// The workload waits for its go; the init keeps its listener.
    Ready,
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
            Self::Ready => (8, Vec::new()),
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
            (8, 0) => Ok(Self::Ready),
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

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
            Message::Ready,
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
