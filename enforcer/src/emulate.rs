//! Performing a trapped call on the workload's own socket instead of
//! letting the kernel re-run it.
//!
//! "Continue" makes the kernel read the fd number and the address again,
//! after the supervisor's checks: another thread of the workload may have
//! swapped either meanwhile. The supervisor instead takes the socket itself
//! ([`crate::take_fd_from`]: the same open socket, whatever the fd number
//! later names), checks it, and calls `connect` on it with the address it
//! copied and checked. The workload's thread stays blocked in its trapped
//! call until the supervisor answers with the result.
//!
//! Two things differ from the workload doing it: the credentials and the
//! filesystem view of the caller. Pathname unix sockets are checked against
//! the caller's uid, gid, groups and capabilities (and the server sees the
//! caller's credentials as `SO_PEERCRED`), so [`with_credentials`] runs the
//! call on a short-lived thread that has become the workload's user and has
//! no capabilities. Relative paths are the caller's business (see the
//! supervisor).

#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::child_spec::Credentials;
use crate::errno::Errno;
use crate::sockaddr::SockAddr;

/// `connect(sock, addr)`, on a socket the caller holds.
pub fn connect_on(sock: BorrowedFd<'_>, addr: &SockAddr) -> Result<(), Errno> {
    crate::sys::net::connect(sock, &addr.encode())
}

/// The network namespace a socket was created in (`SIOCGSKNS`), as an fd.
/// Needs `CAP_NET_ADMIN` over that namespace (the root supervisor has it).
pub fn socket_netns(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(crate::sys::net::socket_netns(sock)?)
}

/// Whether two namespace fds (from `/proc/<pid>/ns/*` or
/// [`socket_netns`]) name the same namespace.
pub fn same_namespace(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> io::Result<bool> {
    let a = std::fs::File::from(a.try_clone_to_owned()?).metadata()?;
    let b = std::fs::File::from(b.try_clone_to_owned()?).metadata()?;
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Runs `f` on a fresh thread that has first become `creds` (when given)
/// and dropped every capability. The credential change is made with raw
/// syscalls, which change only the calling thread, and the thread ends
/// with `f`: no other thread of the caller is affected.
pub fn with_credentials<F, T>(creds: Option<Credentials<'_>>, f: F) -> Result<T, Errno>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            if let Some(c) = creds {
                crate::process::set_identity(c.uid, c.gid, c.groups)?;
            }
            crate::process::clear_capability_sets()?;
            Ok(f())
        });
        match worker.join() {
            Ok(result) => result,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

/// `listen(sock, backlog)`, on a socket the caller holds: a trapped
/// `listen` performed on the workload's own socket once it is known to be
/// harmless (the fd number may name another socket by now; this one is
/// the socket that was checked).
pub fn listen_on(sock: BorrowedFd<'_>, backlog: i32) -> Result<(), Errno> {
    crate::sys::net::listen(sock, backlog)
}
