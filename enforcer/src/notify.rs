//! The supervisor's side of `SECCOMP_RET_USER_NOTIF`: small wrappers over
//! the listener ioctls, and the pidfd calls that reach into the workload's
//! fd table.
//!
//! # Order of a decision, and why
//!
//! 1. [`recv`] a notification.
//! 2. Copy what the decision needs out of the workload (the address with
//!    [`crate::read_sockaddr`], the socket type with [`fd_socket_info`], the
//!    binary with [`crate::exe_path`]).
//! 3. [`id_valid`] *after* the copies. The pid in a notification is only a
//!    number: if the trapped thread died and its pid was reused between
//!    `recv` and the copy, the copy came from a stranger. A notification
//!    stays valid only while its thread is blocked in the trapped call, so a
//!    valid id after the copy proves that the memory and fds read belonged
//!    to that thread, in that call.
//! 4. Decide on the *copy*, and answer with an errno or by installing a
//!    socket the supervisor connected itself. Never "continue": another
//!    thread of the workload can rewrite the address between our read and
//!    the kernel's, so the kernel would act on bytes nobody checked. The
//!    one "continue" here, [`respond_continue_unchecked`], is named for what
//!    it does and is not for policy decisions.

#![forbid(unsafe_code)]

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::errno::Errno;
use crate::sys;

/// `AUDIT_ARCH_X86_64`: the only architecture the filter lets through.
pub(crate) const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `O_CLOEXEC` as the fdinfo `flags:` field shows it (octal 02000000).
const FDINFO_CLOEXEC: u32 = 0o2_000_000;

/// One trapped system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notif {
    /// Cookie for every answer; valid while the thread waits in the call.
    pub id: u64,
    /// The trapped thread's id (not necessarily the process id), in the
    /// supervisor's pid namespace.
    pub pid: u32,
    pub(crate) syscall_nr: i32,
    /// The raw registers; pointers among them point into the workload and
    /// may be rewritten by another of its threads at any time.
    pub args: [u64; 6],
    pub(crate) arch: u32,
    pub(crate) instruction_pointer: u64,
}

/// The syscalls the product's filter sends to the supervisor; the list
/// lives with the other kernel facts the bundle is built from.
pub use policy_bundle::kernel::TrappedCall;

impl Notif {
    /// Which trapped call this is, if it is one the product traps.
    #[must_use]
    pub fn call(&self) -> Option<TrappedCall> {
        if self.arch != AUDIT_ARCH_X86_64 {
            return None;
        }
        TrappedCall::from_number(i64::from(self.syscall_nr))
    }
}

/// What [`wait_listener`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerEvent {
    /// A notification is ready for [`recv`].
    Ready,
    /// No process uses the filter any more: nothing will ever arrive.
    Closed,
    /// The timeout passed first; ask again.
    TimedOut,
}

/// Waits until the listener has a notification, has no users left, or
/// `timeout` passes (`None`: no limit).
pub fn wait_listener(
    listener: impl AsFd,
    timeout: Option<std::time::Duration>,
) -> Result<ListenerEvent, Errno> {
    let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    Ok(
        match sys::fd::poll_one(listener.as_fd(), libc::POLLIN, ms)? {
            None => ListenerEvent::TimedOut,
            Some(revents) if revents & libc::POLLIN != 0 => ListenerEvent::Ready,
            Some(_) => ListenerEvent::Closed,
        },
    )
}

/// Whether `fd` becomes writable within `timeout` (zero: right now), as a
/// non-blocking `connect` in progress does once it is established or has
/// failed.
pub fn wait_writable(fd: BorrowedFd<'_>, timeout: std::time::Duration) -> Result<bool, Errno> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let revents = sys::fd::poll_one(fd, libc::POLLOUT, ms)?;
    Ok(revents.is_some_and(|r| r & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0))
}

/// Receives the next notification. The ioctl blocks even on a
/// non-blocking fd, so poll the listener for readability first and keep a
/// single consumer (two would race for one readable event). `ENOENT` means
/// the trapped thread went away meanwhile: poll again.
pub fn recv(listener: impl AsFd) -> Result<Notif, Errno> {
    let raw = sys::seccomp::notif_recv(listener.as_fd())?;
    Ok(Notif {
        id: raw.id,
        pid: raw.pid,
        syscall_nr: raw.data.nr,
        args: raw.data.args,
        arch: raw.data.arch,
        instruction_pointer: raw.data.instruction_pointer,
    })
}

/// Whether the notification is still pending (its thread still waits in
/// the call). Any failure counts as "no": the safe answer.
#[must_use]
pub fn id_valid(listener: impl AsFd, id: u64) -> bool {
    sys::seccomp::notif_id_valid(listener.as_fd(), id)
}

fn send(listener: BorrowedFd<'_>, resp: &libc::seccomp_notif_resp) -> Result<(), Errno> {
    sys::seccomp::notif_send(listener, resp)
}

/// Fails the trapped call with `errno` (a positive errno number).
pub fn respond_errno(listener: impl AsFd, id: u64, errno: i32) -> Result<(), Errno> {
    if errno <= 0 {
        return Err(Errno(libc::EINVAL));
    }
    send(
        listener.as_fd(),
        &libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno,
            flags: 0,
        },
    )
}

/// Completes the trapped call with return value `val`, as if the kernel
/// had run it.
pub fn respond_value(listener: impl AsFd, id: u64, val: i64) -> Result<(), Errno> {
    send(
        listener.as_fd(),
        &libc::seccomp_notif_resp {
            id,
            val,
            error: 0,
            flags: 0,
        },
    )
}

/// Lets the kernel run the trapped call as the workload issued it, reading
/// its arguments again, after our checks: whatever the workload rewrote
/// meanwhile is what runs, and that includes the *fd number*: another
/// thread can `dup2` a different socket onto it. Only for calls whose
/// outcome is harmless whatever the memory and the fd table become.
///
/// That rules out `connect` entirely once the supervisor installs sockets
/// of its own namespace: a swapped-in installed socket that could be
/// (dis)connected would connect from the host. Perform such calls on the
/// socket instead ([`crate::connect_on`]). What remains is a send, without
/// `MSG_FASTOPEN`, by a workload in a loopback-only namespace whose
/// installed sockets are all established (see `docs/threat-model.md`).
/// Never use it to let an IP destination through.
pub fn respond_continue_unchecked(listener: impl AsFd, id: u64) -> Result<(), Errno> {
    send(
        listener.as_fd(),
        &libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: u32::try_from(libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE).unwrap_or(1),
        },
    )
}

fn addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    src: BorrowedFd<'_>,
    target_fd: i32,
    cloexec: bool,
    flags: u64,
) -> Result<i32, Errno> {
    let newfd = u32::try_from(target_fd).map_err(|_| Errno(libc::EBADF))?;
    let flags = u32::try_from(flags).map_err(|_| Errno(libc::EINVAL))?;
    let newfd_flags = if cloexec { libc::O_CLOEXEC as u32 } else { 0 };
    sys::seccomp::notif_addfd(listener, id, src, newfd, newfd_flags, flags)
}

/// Puts `src` into the workload at fd number `target_fd` (closing what was
/// there, as `dup2` would) and answers the notification in the same step,
/// so no signal can land between the two.
///
/// The trapped call returns `target_fd`, not 0: for `connect` that is a
/// success to callers that test `< 0` or `== -1` (glibc, Go, Rust, Python,
/// curl), but not to one that tests `!= 0`. [`addfd_setfd`] followed by
/// [`respond_value`]`(0)` returns 0 instead.
pub fn addfd_setfd_send(
    listener: impl AsFd,
    id: u64,
    src: impl AsFd,
    target_fd: i32,
    cloexec: bool,
) -> Result<i32, Errno> {
    let flags = libc::SECCOMP_ADDFD_FLAG_SETFD | libc::SECCOMP_ADDFD_FLAG_SEND;
    addfd(listener.as_fd(), id, src.as_fd(), target_fd, cloexec, flags)
}

/// As [`addfd_setfd_send`] but leaves the notification pending, to be
/// answered with [`respond_value`]. If the trapped thread is interrupted in
/// between, the fd stays replaced and the restarted call is trapped again on
/// the new socket; with `wait_killable_recv` only a fatal signal can
/// interrupt it.
pub fn addfd_setfd(
    listener: impl AsFd,
    id: u64,
    src: impl AsFd,
    target_fd: i32,
    cloexec: bool,
) -> Result<i32, Errno> {
    addfd(
        listener.as_fd(),
        id,
        src.as_fd(),
        target_fd,
        cloexec,
        libc::SECCOMP_ADDFD_FLAG_SETFD,
    )
}

/// Duplicates fd `fd` of thread `pid` into the caller (close-on-exec).
///
/// Also how the supervisor gets the listener from the child: the child
/// cannot pass it with `SCM_RIGHTS` once its own filter traps `sendmsg`.
/// The pidfd is opened for the *thread* (`PIDFD_THREAD`, Linux 6.9) because
/// a notification names a thread, and threads need not share an fd table;
/// older kernels fall back to a process pidfd. Needs ptrace-level access to
/// the target (the root supervisor has it).
pub fn take_fd_from(pid: u32, fd: i32) -> io::Result<OwnedFd> {
    let pidfd = match sys::seccomp::pidfd_open(pid, libc::PIDFD_THREAD) {
        Err(Errno(libc::EINVAL)) => sys::seccomp::pidfd_open(pid, 0),
        other => other,
    }?;
    Ok(sys::seccomp::pidfd_getfd(pidfd.as_fd(), fd)?)
}

/// What the supervisor must know to build a replacement socket the workload
/// cannot tell from its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketInfo {
    /// `AF_*`.
    pub domain: i32,
    /// `SOCK_*`, without flags.
    pub sock_type: i32,
    /// As `SO_PROTOCOL` reports it (`IPPROTO_*`, 0 for a unix socket).
    pub protocol: i32,
    /// `O_NONBLOCK` on the open file; the replacement must match, or an
    /// event loop blocks on what it believes is a non-blocking socket.
    pub nonblocking: bool,
    /// `FD_CLOEXEC` on the workload's fd number (a per-fd flag, so it is
    /// read from `/proc/<pid>/fdinfo`; pass it to the `addfd_*` calls).
    pub cloexec: bool,
}

/// Describes the socket at fd `fd` of thread `pid`. Check [`id_valid`]
/// afterwards (see the module docs).
pub fn fd_socket_info(pid: u32, fd: i32) -> io::Result<SocketInfo> {
    let dup = take_fd_from(pid, fd)?;
    let mut info = socket_info(dup.as_fd())?;
    info.cloexec = fd_cloexec(pid, fd)?;
    Ok(info)
}

/// Domain, type, protocol and blocking mode of a socket the caller holds;
/// `cloexec` describes the caller's own fd.
pub fn socket_info(sock: BorrowedFd<'_>) -> io::Result<SocketInfo> {
    let domain = getsockopt_int(sock, libc::SO_DOMAIN)?;
    let sock_type = getsockopt_int(sock, libc::SO_TYPE)?;
    let protocol = getsockopt_int(sock, libc::SO_PROTOCOL)?;
    let fl = sys::fd::status_flags(sock)?;
    let fd_flags = sys::fd::descriptor_flags(sock)?;
    Ok(SocketInfo {
        domain,
        sock_type,
        protocol,
        nonblocking: fl & libc::O_NONBLOCK != 0,
        cloexec: fd_flags & libc::FD_CLOEXEC != 0,
    })
}

fn getsockopt_int(sock: BorrowedFd<'_>, opt: libc::c_int) -> io::Result<i32> {
    Ok(sys::net::getsockopt_int(sock, libc::SOL_SOCKET, opt)?)
}

/// Reads `FD_CLOEXEC` of the workload's fd from `/proc/<pid>/fdinfo/<fd>`.
pub fn fd_cloexec(pid: u32, fd: i32) -> io::Result<bool> {
    let text = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"))?;
    let flags = text
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "fdinfo has no flags"))?;
    Ok(flags & FDINFO_CLOEXEC != 0)
}
