//! The seccomp filter, the user-notification ioctls, and the pidfd calls
//! that reach into another process's fd table.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::errno::{Errno, check_int};
use crate::sys::fd_number;

/// Installs `program` on the calling thread with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` (plus `extra_flags`) and returns the
/// listener. Async-signal-safe: one syscall on memory the caller prepared.
pub(crate) fn install_filter_with_listener(
    program: &[libc::sock_filter],
    extra_flags: libc::c_ulong,
) -> Result<OwnedFd, Errno> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(|_| Errno(libc::EINVAL))?,
        filter: program.as_ptr().cast_mut(),
    };
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | extra_flags;
    // SAFETY: `prog` points to `len` initialised instructions borrowed for
    // the call; the kernel copies and validates them and never writes.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const prog,
        )
    };
    let fd = fd_number(ret)?;
    // SAFETY: with NEW_LISTENER the kernel returns a new listener fd that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `SECCOMP_IOCTL_NOTIF_RECV`: the next notification (blocking).
pub(crate) fn notif_recv(listener: BorrowedFd<'_>) -> Result<libc::seccomp_notif, Errno> {
    // SAFETY: an all-zero seccomp_notif is valid plain data, and the kernel
    // insists on a zeroed buffer (EINVAL otherwise).
    let mut raw: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV writes exactly one seccomp_notif into `raw`, which is
    // live, writable and of the size the ioctl number encodes.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &raw mut raw,
        )
    };
    check_int(ret)?;
    Ok(raw)
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether notification `id` is pending.
pub(crate) fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: ID_VALID reads one u64 from the pointer, which is live.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw const id,
        )
    };
    ret == 0
}

/// `SECCOMP_IOCTL_NOTIF_SEND`: answers a notification.
pub(crate) fn notif_send(
    listener: BorrowedFd<'_>,
    resp: &libc::seccomp_notif_resp,
) -> Result<(), Errno> {
    // SAFETY: SEND reads one seccomp_notif_resp from the pointer, which is
    // live and fully initialised.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            std::ptr::from_ref(resp),
        )
    };
    check_int(ret).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_ADDFD`: puts a copy of `src` into the trapped
/// process (at `newfd` with `SECCOMP_ADDFD_FLAG_SETFD`); returns the fd
/// number it got there.
pub(crate) fn notif_addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    src: BorrowedFd<'_>,
    newfd: u32,
    newfd_flags: u32,
    flags: u32,
) -> Result<i32, Errno> {
    let srcfd = u32::try_from(src.as_raw_fd()).map_err(|_| Errno(libc::EBADF))?;
    let req = libc::seccomp_notif_addfd {
        id,
        flags,
        srcfd,
        newfd,
        newfd_flags,
    };
    // SAFETY: ADDFD reads one seccomp_notif_addfd from the pointer, which is
    // live and fully initialised; `src` is borrowed, so live, for the call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &raw const req,
        )
    };
    check_int(ret)
}

/// `pidfd_open(pid, flags)`.
pub(crate) fn pidfd_open(pid: u32, flags: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes two integers and returns a new fd.
    let fd = fd_number(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_getfd(pidfd, fd, 0)`: a close-on-exec copy of fd number `fd` of
/// the process behind `pidfd`.
pub(crate) fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_getfd takes a live pidfd, a fd number in the *target's*
    // table and zero flags, and returns a new fd of ours.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0_u32) };
    let new = fd_number(ret)?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}
