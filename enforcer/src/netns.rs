//! The workload's network namespace: only loopback, so that every packet
//! it sends to anything but itself goes through a socket the supervisor
//! opened from its own namespace.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::errno::Errno;
use crate::sys;

/// The loopback interface's name.
const LOOPBACK: &[u8] = b"lo";

/// Moves the calling (child) process into a new network namespace.
/// Async-signal-safe. Needs `CAP_SYS_ADMIN` (or a new user namespace).
pub fn unshare_net() -> Result<(), Errno> {
    sys::ns::unshare_net()
}

/// Sets `lo` up in the caller's namespace; the kernel then gives it
/// 127.0.0.1/8 and ::1. Async-signal-safe: a datagram socket and two
/// ioctls on a stack buffer, no netlink message to build.
pub fn bring_up_loopback() -> Result<(), Errno> {
    let sock = control_socket()?;
    let flags = sys::net::interface_flags(sock.as_fd(), LOOPBACK)?;
    sys::net::set_interface_flags(
        sock.as_fd(),
        LOOPBACK,
        flags | libc::IFF_UP as libc::c_short,
    )
}

/// A datagram socket to ask interface ioctls through.
fn control_socket() -> Result<OwnedFd, Errno> {
    sys::net::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
}

/// Whether `lo` is up in the caller's namespace (for tests and health
/// checks).
pub fn loopback_is_up() -> io::Result<bool> {
    let sock = control_socket()?;
    let flags = sys::net::interface_flags(sock.as_fd(), LOOPBACK)?;
    Ok(flags & libc::IFF_UP as libc::c_short != 0)
}

/// A handle on the network namespace of `pid`, which keeps the namespace
/// alive as long as it is open.
pub fn open_netns(pid: u32) -> io::Result<OwnedFd> {
    Ok(File::open(format!("/proc/{pid}/ns/net"))?.into())
}

/// Runs `f` inside the network namespace `netns`, on a fresh OS thread that
/// ends with it, so no thread of the caller (a tokio worker, say) ever
/// changes namespace. Sockets keep the namespace they were created in: a
/// listener made here (the DNS stub on 127.0.0.1:53) serves the workload
/// from any thread afterwards. A panic in `f` resumes in the caller.
pub fn in_netns<F, T>(netns: BorrowedFd<'_>, f: F) -> io::Result<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            // Changes only the calling thread, which is ours alone.
            sys::ns::setns_net(netns)?;
            Ok(f())
        });
        match worker.join() {
            Ok(result) => result,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

/// How this process can give a workload its own network namespace, for the
/// supervisor's `--netns new|none` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsSupport {
    /// `unshare(CLONE_NEWNET)` works directly (root or `CAP_SYS_ADMIN`).
    Direct,
    /// Only inside a new user namespace (unprivileged user namespaces).
    ViaUserNamespace,
    /// Neither: the workload can only share the supervisor's namespace.
    Unavailable,
}

/// Probes for real rather than reading capability bits: a short-lived
/// thread tries `unshare(CLONE_NEWNET)` (legal in a multi-threaded process,
/// and undone when the thread exits); failing that, a forked child tries it
/// inside a new user namespace, which needs a single-threaded caller.
#[must_use]
pub fn netns_support() -> NetnsSupport {
    let direct = std::thread::scope(|scope| {
        scope
            .spawn(|| unshare_net().is_ok())
            .join()
            .unwrap_or(false)
    });
    if direct {
        return NetnsSupport::Direct;
    }
    if sys::child::unshare_works_in_child(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) {
        NetnsSupport::ViaUserNamespace
    } else {
        NetnsSupport::Unavailable
    }
}

/// True when a workload can get its own network namespace one way or other.
#[must_use]
pub fn can_create_netns() -> bool {
    netns_support() != NetnsSupport::Unavailable
}
