//! Child-side process hardening, and the `/proc` readers that prove it.
//!
//! Everything named `set_*`, `drop_*` or `clear_*` is async-signal-safe (raw
//! syscalls on stack data) for use between `fork` and `exec`; whatever needs
//! allocation ([`resolve_user`], [`cap_last_cap`]) runs in the parent first.
//!
//! The order matters, and each step says why it sits where it does:
//!
//! 1. [`drop_bounding_and_ambient`]: needs `CAP_SETPCAP`, so before the uid
//!    changes.
//! 2. [`set_identity`]: needs `CAP_SETUID`/`CAP_SETGID`, still held.
//! 3. [`clear_capability_sets`]: after the uid change, which alone would
//!    leave a uid-0 workload with full sets.
//! 4. [`set_no_new_privs`]: required by Landlock and seccomp.
//! 5. [`set_pdeathsig`]: after the identity change, because the kernel
//!    clears the parent-death signal whenever credentials change.
//! 6. Landlock, then seccomp (last, so the filter cannot get in the way of
//!    the steps above), then `exec`.

#![forbid(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;

use crate::errno::Errno;
use crate::sys;

/// Sets `no_new_privs`: exec can no longer grant privileges (setuid bits,
/// file capabilities), and Landlock and seccomp may be applied unprivileged.
pub fn set_no_new_privs() -> Result<(), Errno> {
    sys::process::set_no_new_privs()
}

/// Asks for `signal` when the parent dies, then closes the race where the
/// parent died before the request: if the parent is no longer
/// `expected_parent` (read with `getpid()` before `fork`), returns `ESRCH`
/// and the caller should `_exit`. The signal fires when the *thread* that
/// forked exits, so fork from a thread that lives as long as the workload.
pub fn set_pdeathsig(signal: libc::c_int, expected_parent: libc::pid_t) -> Result<(), Errno> {
    let signal = libc::c_ulong::try_from(signal).map_err(|_| Errno(libc::EINVAL))?;
    sys::process::set_pdeathsig(signal)?;
    let parent = libc::pid_t::try_from(std::os::unix::process::parent_id()).unwrap_or(0);
    if parent == expected_parent {
        Ok(())
    } else {
        Err(Errno(libc::ESRCH))
    }
}

/// Makes this process non-dumpable with a core limit of 0/0, for a
/// process whose memory holds secrets: no core file is written whatever a
/// process of the same user later does to its limits (raising a hard
/// limit needs `CAP_SYS_RESOURCE`), its `/proc/<pid>` entries belong to
/// root, and only `CAP_SYS_PTRACE` reads its memory. Children inherit
/// both until `exec`; call it first, before any secret is read.
pub fn forbid_core_dumps() -> Result<(), Errno> {
    sys::process::forbid_core_files()?;
    sys::process::set_dumpable(false)
}

/// The highest capability number this kernel knows, from
/// `/proc/sys/kernel/cap_last_cap`; read it before `fork`.
pub fn cap_last_cap() -> io::Result<u32> {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")?
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad cap_last_cap"))
}

/// Empties the bounding set (so no later exec can gain a capability, even
/// as uid 0) and the ambient set. Needs `CAP_SETPCAP`: call before
/// [`set_identity`].
pub fn drop_bounding_and_ambient(last_cap: u32) -> Result<(), Errno> {
    for cap in 0..=last_cap {
        match sys::process::capbset_drop(libc::c_ulong::from(cap)) {
            // A capability this kernel does not know is not held either.
            Ok(_) | Err(Errno(libc::EINVAL)) => {}
            Err(e) => return Err(e),
        }
    }
    sys::process::clear_ambient_capabilities()
}

/// Empties the effective, permitted and inheritable sets of the calling
/// thread. Dropping is always allowed, so this works after [`set_identity`].
pub fn clear_capability_sets() -> Result<(), Errno> {
    sys::process::clear_capability_sets()
}

/// Becomes `uid`/`gid` with exactly `groups` as supplementary groups (pass
/// `&[gid]` to drop the supervisor's). Raw syscalls rather than libc's
/// wrappers: glibc's broadcast every credential change to all threads with
/// signals, which has no business in a forked child.
pub fn set_identity(
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: &[libc::gid_t],
) -> Result<(), Errno> {
    sys::process::setgroups(groups)?;
    sys::process::setresgid(gid)?;
    sys::process::setresuid(uid)
}

/// Marks every fd from `first` up close-on-exec, so nothing the supervisor
/// left open leaks into the workload. Async-signal-safe.
pub fn mark_fds_cloexec_from(first: u32) -> Result<(), Errno> {
    sys::fd::mark_cloexec_from(first)
}

/// Makes `command`'s child (a container runtime, say) hold `fds` as
/// descriptors 3, 4, ... across its `exec`, in order (besides them it
/// inherits only what is not close-on-exec, as Rust opens nothing). The
/// descriptors are closed in this process when `command` is dropped.
/// `EMFILE`: too many.
pub fn pass_fds(command: &mut std::process::Command, fds: Vec<OwnedFd>) -> Result<(), Errno> {
    sys::fd::pass_fds(command, fds)
}

/// A user's ids from the password database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserIds {
    /// The user's uid.
    pub uid: libc::uid_t,
    /// The primary group from the password entry, not from `/etc/group`.
    pub gid: libc::gid_t,
}

/// Why [`resolve_user`] or [`resolve_group`] found no id; the launch must
/// stop rather than run the workload as someone else.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The database has no such user (or the name holds a NUL).
    #[error("no user `{0}`")]
    NoUser(String),
    /// The database has no such group (or the name holds a NUL).
    #[error("no group `{0}`")]
    NoGroup(String),
    /// The lookup itself failed (an NSS module, a file that cannot be
    /// read), so whether the name exists is unknown.
    #[error("cannot look up `{name}`")]
    Lookup {
        /// The user or group name asked for.
        name: String,
        /// From `getpwnam_r` or `getgrnam_r`.
        #[source]
        source: io::Error,
    },
}

/// Looks `name` up with `getpwnam_r` (NSS may load modules and allocate:
/// call before `fork`).
pub fn resolve_user(name: &str) -> Result<UserIds, LookupError> {
    let cname = CString::new(name).map_err(|_| LookupError::NoUser(name.to_owned()))?;
    match sys::process::user_by_name(&cname) {
        Ok(Some((uid, gid))) => Ok(UserIds { uid, gid }),
        Ok(None) => Err(LookupError::NoUser(name.to_owned())),
        Err(source) => Err(LookupError::Lookup {
            name: name.to_owned(),
            source,
        }),
    }
}

/// Looks a group up with `getgrnam_r` (call before `fork`).
pub fn resolve_group(name: &str) -> Result<libc::gid_t, LookupError> {
    let cname = CString::new(name).map_err(|_| LookupError::NoGroup(name.to_owned()))?;
    match sys::process::group_by_name(&cname) {
        Ok(Some(gid)) => Ok(gid),
        Ok(None) => Err(LookupError::NoGroup(name.to_owned())),
        Err(source) => Err(LookupError::Lookup {
            name: name.to_owned(),
            source,
        }),
    }
}

fn status_field(pid: u32, field: &str) -> io::Result<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no `{field}` in status"),
            )
        })
}

/// This process's effective uid and gid, from `/proc/self/status`
/// (`u32::MAX` for one that cannot be read).
#[must_use]
pub fn own_ids() -> (libc::uid_t, libc::gid_t) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(u32::MAX)
    };
    (effective("Uid:"), effective("Gid:"))
}

/// `CapEff` of `pid`.
pub fn effective_caps(pid: u32) -> io::Result<u64> {
    caps(pid, "CapEff")
}

/// A capability set of `pid` by its `/proc/<pid>/status` name (`CapInh`,
/// `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`).
pub fn caps(pid: u32, set: &str) -> io::Result<u64> {
    let hex = status_field(pid, set)?;
    u64::from_str_radix(&hex, 16)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad capability mask"))
}

/// `Seccomp` of `pid`: 0 none, 1 strict, 2 filter.
pub fn seccomp_mode(pid: u32) -> io::Result<u32> {
    status_field(pid, "Seccomp")?
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad Seccomp field"))
}

/// The real and effective uid of `pid` (`Uid` of its status).
pub fn real_and_effective_uid(pid: u32) -> io::Result<(u32, u32)> {
    let field = status_field(pid, "Uid")?;
    let mut ids = field.split_whitespace().map(str::parse::<u32>);
    match (ids.next(), ids.next()) {
        (Some(Ok(real)), Some(Ok(effective))) => Ok((real, effective)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "bad Uid field")),
    }
}

/// `NoNewPrivs` of `pid`.
pub fn no_new_privs(pid: u32) -> io::Result<bool> {
    Ok(status_field(pid, "NoNewPrivs")? == "1")
}
