//! A private mount namespace for the workload, for one purpose: showing it
//! a `/etc/resolv.conf` that names the supervisor's DNS stub without
//! touching the host's file.
//!
//! The source must be a file on a mounted filesystem: the kernel refuses to
//! bind-mount a memfd (`EINVAL`, its internal mount is not in the caller's
//! namespace), so the supervisor writes a small file in a private directory
//! and unlinks it once the child has mounted it; the mount keeps the inode.

use std::ffi::CStr;

use crate::errno::{Errno, check_int};

/// Moves the calling (child) process into a new mount namespace and makes
/// every mount in it a slave: host mounts still propagate in, ours never
/// propagate out. Async-signal-safe; needs `CAP_SYS_ADMIN`.
pub fn unshare_mount_ns() -> Result<(), Errno> {
    // SAFETY: unshare takes a flag word and touches no caller memory.
    check_int(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // SAFETY: the target is a NUL-terminated literal; the other pointers
    // are null, which MS_REC | MS_SLAVE accepts.
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

/// Binds `source` over `target` and makes that mount read-only, nosuid,
/// nodev and noexec. Async-signal-safe; needs `CAP_SYS_ADMIN`. The target
/// path follows symlinks, as `mount(2)` does.
pub fn bind_mount_readonly(source: &CStr, target: &CStr) -> Result<(), Errno> {
    // SAFETY: both paths are NUL-terminated strings that outlive the call;
    // a bind mount reads no filesystem type or data.
    check_int(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    })?;
    let flags = libc::MS_BIND
        | libc::MS_REMOUNT
        | libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC;
    // SAFETY: as above; a remount only reads the target path and flags.
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
