//! A private mount namespace for the workload, for three purposes: showing
//! it a `/etc/resolv.conf` that names the supervisor's DNS stub without
//! touching the host's file, a `/proc` of its own PID namespace, and
//! `noexec` on the trees it may write but not execute, so that no code
//! from a file it could have written is ever mapped executable.
//!
//! The source must be a file on a mounted filesystem: the kernel refuses to
//! bind-mount a memfd (`EINVAL`, its internal mount is not in the caller's
//! namespace), so the supervisor writes a small file in a private directory
//! and unlinks it once the child has mounted it; the mount keeps the inode.

#![forbid(unsafe_code)]

use std::ffi::CStr;

use crate::errno::Errno;
use crate::sys;

/// Moves the calling (child) process into a new mount namespace and makes
/// every mount in it a slave: host mounts still propagate in, ours never
/// propagate out. Async-signal-safe; needs `CAP_SYS_ADMIN`.
pub(crate) fn unshare_mount_ns() -> Result<(), Errno> {
    sys::ns::unshare_mount_ns()?;
    sys::ns::make_mounts_slave()
}

/// Binds `source` over `target` and makes that mount read-only, nosuid,
/// nodev and noexec. Async-signal-safe; needs `CAP_SYS_ADMIN`. The target
/// path follows symlinks, as `mount(2)` does.
pub(crate) fn bind_mount_readonly(source: &CStr, target: &CStr) -> Result<(), Errno> {
    sys::ns::bind_mount(source, target)?;
    let flags = libc::MS_BIND
        | libc::MS_REMOUNT
        | libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC;
    sys::ns::remount(target, flags)
}

/// Replaces `/proc` with a procfs of the caller's PID namespace (nosuid,
/// nodev, noexec), in the caller's mount namespace only. The host's is
/// detached first rather than covered, so the workload's mount table holds
/// one procfs and nothing of the host's stays below it. Async-signal-safe;
/// needs `CAP_SYS_ADMIN`.
pub(crate) fn mount_private_proc() -> Result<(), Errno> {
    match sys::ns::detach(c"/proc") {
        // Not a mount point (a bare `/proc` directory): nothing to detach.
        Ok(()) | Err(Errno(libc::EINVAL)) => {}
        Err(e) => return Err(e),
    }
    sys::ns::mount_proc()
}

/// Makes `path`, and everything mounted below it, a mount of its own with
/// `noexec` set (`noexec` true) or cleared, in the caller's mount
/// namespace only. Async-signal-safe; needs `CAP_SYS_ADMIN`.
pub(crate) fn set_noexec(path: &CStr, noexec: bool) -> Result<(), Errno> {
    sys::ns::bind_onto_itself(path)?;
    sys::ns::set_noexec_recursive(path, noexec)
}
