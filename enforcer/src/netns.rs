//! The workload's network namespace: only loopback, so that every packet
//! it sends to anything but itself goes through a socket the supervisor
//! opened from its own namespace.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::errno::{Errno, check_int};

/// Moves the calling (child) process into a new network namespace.
/// Async-signal-safe. Needs `CAP_SYS_ADMIN` (or a new user namespace).
pub fn unshare_net() -> Result<(), Errno> {
    // SAFETY: unshare takes a flag word and touches no caller memory.
    check_int(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// Sets `lo` up in the caller's namespace; the kernel then gives it
/// 127.0.0.1/8 and ::1. Async-signal-safe: a datagram socket and two
/// ioctls on a stack buffer, no netlink message to build.
pub fn bring_up_loopback() -> Result<(), Errno> {
    // SAFETY: socket takes three integers and returns a new fd.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = loopback_ifreq();
    // SAFETY: SIOCGIFFLAGS reads the name from, and writes the flags into,
    // `req`, a live, initialised ifreq.
    check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut req) })?;
    // SAFETY: after SIOCGIFFLAGS the union holds the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads name and flags from `req`, live and
    // initialised.
    check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &raw mut req) })?;
    Ok(())
}

fn loopback_ifreq() -> libc::ifreq {
    // SAFETY: an all-zero ifreq is valid plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo") {
        *dst = *src as libc::c_char;
    }
    req
}

/// Whether `lo` is up in the caller's namespace (for tests and health
/// checks).
pub fn loopback_is_up() -> io::Result<bool> {
    // SAFETY: socket takes three integers and returns a new fd.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = loopback_ifreq();
    // SAFETY: as in `bring_up_loopback`.
    check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut req) })?;
    // SAFETY: after SIOCGIFFLAGS the union holds the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
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
            // SAFETY: setns takes a live namespace fd and a flag word; it
            // changes only the calling thread, which is ours alone.
            check_int(unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) })?;
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
    if probe_in_child(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) {
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

fn probe_in_child(flags: libc::c_int) -> bool {
    // SAFETY: the child only calls unshare and _exit, both
    // async-signal-safe, so forking a multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; _exit never returns.
        unsafe {
            let ok = libc::unshare(flags) == 0;
            libc::_exit(i32::from(!ok));
        }
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live, writable int; `pid` is our child.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if ret == pid {
            break;
        }
        if ret < 0 && Errno::last() != Errno(libc::EINTR) {
            return false;
        }
    }
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}
