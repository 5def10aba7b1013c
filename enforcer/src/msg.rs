//! Reading a whole `struct msghdr` (destination, data, control) out of a
//! trapped workload, and writing results back, so the supervisor can
//! perform a send itself: on the socket it took from the workload, with the
//! bytes it copied, to no destination but the socket's connected peer.
//!
//! As everywhere, check [`crate::id_valid`] after the reads.

#![forbid(unsafe_code)]

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;

use crate::sockaddr::{
    MMSGHDR_LEN, MSGHDR_LEN, SOCKADDR_MAX, SockAddr, SockAddrError, UIO_MAXIOV, kernel_int,
    read_memory, read_sockaddr_exact, u64_at,
};

const IOVEC_LEN: usize = 16;
/// Where `msg_len` sits in a `struct mmsghdr`.
const MSG_LEN_OFFSET: u64 = MSGHDR_LEN as u64;

/// One message of a `sendmsg`/`sendmmsg`, as far as a send needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `msg_name`: the destination, `None` when the call names none (a
    /// connected socket sends to its peer).
    pub name: Option<SockAddr>,
    /// (address, length) of each data buffer, in the workload.
    pub iov: Vec<(u64, u64)>,
    /// Length of the ancillary data (`SCM_RIGHTS`, credentials...).
    pub control_len: u64,
}

fn fault(e: io::Error) -> SockAddrError {
    SockAddrError::Memory(e)
}

/// Reads the `struct msghdr` at `addr` in `pid`.
pub fn read_message(pid: u32, addr: u64) -> Result<Message, SockAddrError> {
    let mut hdr = [0_u8; MSGHDR_LEN];
    read_memory(pid, addr, &mut hdr).map_err(fault)?;
    let name_ptr = u64_at(&hdr, 0);
    let namelen = kernel_int(u64_at(&hdr, 8) & 0xffff_ffff);
    let name = match usize::try_from(namelen) {
        Ok(0) => None,
        _ if name_ptr == 0 => None,
        Ok(n) => Some(read_sockaddr_exact(pid, name_ptr, n.min(SOCKADDR_MAX))?),
        Err(_) => return Err(SockAddrError::BadLength(u64::from(namelen.unsigned_abs()))),
    };
    let iov_ptr = u64_at(&hdr, 16);
    let iovlen = u64_at(&hdr, 24);
    if iovlen > UIO_MAXIOV {
        return Err(SockAddrError::BadLength(iovlen));
    }
    let count = usize::try_from(iovlen).map_err(|_| SockAddrError::BadLength(iovlen))?;
    let mut raw = vec![0_u8; count * IOVEC_LEN];
    read_memory(pid, iov_ptr, &mut raw).map_err(fault)?;
    let iov = raw
        .chunks_exact(IOVEC_LEN)
        .map(|c| (u64_at(c, 0), u64_at(c, 8)))
        .collect();
    Ok(Message {
        name,
        iov,
        control_len: u64_at(&hdr, 40),
    })
}

/// Reads the `vlen` messages of a `sendmmsg` (at most `UIO_MAXIOV`).
pub fn read_messages(pid: u32, msgvec: u64, vlen: u64) -> Result<Vec<Message>, SockAddrError> {
    (0..vlen.min(UIO_MAXIOV))
        .map(|i| {
            let at = msgvec
                .checked_add(i * MMSGHDR_LEN as u64)
                .ok_or_else(|| fault(io::Error::from_raw_os_error(libc::EFAULT)))?;
            read_message(pid, at)
        })
        .collect()
}

/// The data of a message, at most `limit` bytes, and whether that was all.
pub fn read_payload(
    pid: u32,
    iov: &[(u64, u64)],
    limit: usize,
) -> Result<(Vec<u8>, bool), SockAddrError> {
    let mut out = Vec::new();
    for &(base, len) in iov {
        let room = limit.saturating_sub(out.len());
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > room {
            let start = out.len();
            out.resize(start + room, 0);
            read_memory(pid, base, out.get_mut(start..).unwrap_or_default()).map_err(fault)?;
            return Ok((out, false));
        }
        let start = out.len();
        out.resize(start + len, 0);
        read_memory(pid, base, out.get_mut(start..).unwrap_or_default()).map_err(fault)?;
    }
    Ok((out, true))
}

/// Writes `msg_len` of message `index` of a `sendmmsg` vector, as the
/// kernel would.
pub fn write_msg_len(pid: u32, msgvec: u64, index: u64, sent: u32) -> io::Result<()> {
    let at = msgvec
        .checked_add(index * MMSGHDR_LEN as u64 + MSG_LEN_OFFSET)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
    write_memory(pid, at, &sent.to_ne_bytes())
}

/// Copies `bytes` to `addr` in process (or thread) `pid`, through
/// `/proc/<pid>/mem` (which needs the same ptrace access as reading).
pub(crate) fn write_memory(pid: u32, addr: u64, bytes: &[u8]) -> io::Result<()> {
    let mem = OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    mem.write_all_at(bytes, addr)
}
