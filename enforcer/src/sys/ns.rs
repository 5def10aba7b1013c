//! Namespaces and mounts. Async-signal-safe.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::errno::{Errno, check, check_int};

/// `unshare(CLONE_NEWNET)`.
pub(crate) fn unshare_net() -> Result<(), Errno> {
    // SAFETY: unshare takes a flag word and touches no memory of ours; a
    // new network namespace changes no descriptor or memory of the caller.
    check_int(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// `unshare(CLONE_NEWNS)`.
pub(crate) fn unshare_mount_ns() -> Result<(), Errno> {
    // SAFETY: as in `unshare_net`; open files keep their mounts.
    check_int(unsafe { libc::unshare(libc::CLONE_NEWNS) }).map(drop)
}

/// `setns(netns, CLONE_NEWNET)`: moves the calling thread only.
pub(crate) fn setns_net(netns: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: setns takes a live namespace fd and a flag word.
    check_int(unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Makes every mount of the caller's namespace a slave, recursively
/// (`mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)`).
pub(crate) fn make_mounts_slave() -> Result<(), Errno> {
    // SAFETY: the target is a NUL-terminated literal; the other pointers
    // are null, which a propagation change accepts.
    check_int(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Mounts a new procfs instance on `/proc`: it shows the processes of the
/// caller's PID namespace (a child's, after `clone(CLONE_NEWPID)`).
pub(crate) fn mount_proc() -> Result<(), Errno> {
    // SAFETY: source, target and type are NUL-terminated literals; procfs
    // takes no data (null).
    check_int(unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Detaches the mount at `target` and everything under it (`umount2` with
/// `MNT_DETACH`), in the caller's mount namespace.
pub(crate) fn detach(target: &CStr) -> Result<(), Errno> {
    // SAFETY: `target` is a NUL-terminated string that outlives the call.
    check_int(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// `struct mount_attr` of `mount_setattr(2)` (Linux 5.12).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_NOEXEC`.
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Bind-mounts `path` onto itself with everything mounted below it
/// (`MS_BIND | MS_REC`), so that it is a mount of its own whose flags can
/// change without touching the mount it lies in.
pub(crate) fn bind_onto_itself(path: &CStr) -> Result<(), Errno> {
    // SAFETY: `path` is NUL-terminated and outlives the call; a bind mount
    // reads no filesystem type or data (null).
    check_int(unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Sets (`noexec` true) or clears `MOUNT_ATTR_NOEXEC` on the mount at
/// `path` and every mount below it (`mount_setattr` with `AT_RECURSIVE`).
pub(crate) fn set_noexec_recursive(path: &CStr, noexec: bool) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: if noexec { MOUNT_ATTR_NOEXEC } else { 0 },
        attr_clr: if noexec { 0 } else { MOUNT_ATTR_NOEXEC },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is NUL-terminated and `attr` initialised, both live
    // across the call; the size passed is the struct's own.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Bind-mounts `source` over `target` (`MS_BIND`).
pub(crate) fn bind_mount(source: &CStr, target: &CStr) -> Result<(), Errno> {
    // SAFETY: both paths are NUL-terminated strings that outlive the call;
    // a bind mount reads no filesystem type or data (null).
    check_int(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Changes the flags of the mount at `target` (`flags` includes
/// `MS_REMOUNT`).
pub(crate) fn remount(target: &CStr, flags: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: `target` is NUL-terminated and outlives the call; a remount
    // reads no source, type or data (null).
    check_int(unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
    .map(drop)
}
