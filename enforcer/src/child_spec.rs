//! What the child of [`spawn`](crate::spawn) does between `fork` and
//! `exec`, as plain data: the parent fills it in, and the child side in
//! `sys::child` only reads it.

#![forbid(unsafe_code)]

use std::ffi::{CStr, CString};
use std::os::fd::BorrowedFd;

use crate::landlock::PreparedRuleset;
use crate::seccomp::PreparedFilter;

/// A user to become: ids and the exact supplementary groups.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    /// Set as real, effective and saved uid.
    pub uid: libc::uid_t,
    /// Set as real, effective and saved gid.
    pub gid: libc::gid_t,
    /// Replaces the supplementary groups outright; pass `&[gid]` to drop
    /// the supervisor's.
    pub groups: &'a [libc::gid_t],
}

/// Everything the child does between `fork` and `exec`.
#[derive(Debug)]
pub struct ChildSpec<'a> {
    /// Enter a new network namespace and bring its loopback up (needs
    /// `CAP_SYS_ADMIN`).
    pub new_netns: bool,
    /// In a new mount namespace whose mounts no longer propagate back, bind
    /// `source` read-only over `target` (`/etc/resolv.conf`). Needs
    /// `CAP_SYS_ADMIN`.
    pub bind_file: Option<(&'a CStr, &'a CStr)>,
    /// Run the workload under a small init, PID 1 of a new PID namespace
    /// with its own `/proc` (implies a new mount namespace; needs
    /// `CAP_SYS_ADMIN`). The init reaps every orphan, passes on signals
    /// sent from outside, and when the workload ends, ends too, and the
    /// kernel kills whatever is left in the namespace. The ruleset must be
    /// prepared with [`LandlockSpec::private_proc`](crate::LandlockSpec).
    pub new_pidns: bool,
    /// A program the init execs once it has forked the workload
    /// (`openshell-sandbox`), so that the init holds no copy of this
    /// process's memory; without [`Self::new_pidns`] the first child
    /// becomes such an init too (a child subreaper rather than PID 1). It
    /// is run as `PROGRAM --adopt --status-fd N`: the workload is its only
    /// child, and it writes the workload's raw wait status on fd N. Should
    /// the exec fail, the init goes on as a fork of this process. The
    /// workload starts a process group of its own, for the program to
    /// signal.
    pub init_program: Option<&'a CStr>,
    /// Trees to mount `noexec` (implies a new mount namespace; needs
    /// `CAP_SYS_ADMIN`): what the workload may write but not execute.
    /// Applied in order, before [`Self::exec_again`].
    pub noexec: &'a [CString],
    /// Trees below a `noexec` one where the ruleset grants execute: their
    /// `noexec` is cleared again.
    pub exec_again: &'a [CString],
    /// Duplicated onto fds 0, 1 and 2 where given.
    pub stdio: [Option<BorrowedFd<'a>>; 3],
    /// Empty the bounding and ambient capability sets (needs
    /// `CAP_SETPCAP`; without it no_new_privs already stops exec from
    /// granting capabilities).
    pub drop_bounding: bool,
    /// From [`crate::cap_last_cap`], read before the fork.
    pub last_cap: u32,
    /// Become this user (needs `CAP_SETUID` and `CAP_SETGID`).
    pub identity: Option<Credentials<'a>>,
    /// Entered after the identity change: the workload's user, not root,
    /// must be able to enter it, or the launch fails.
    pub cwd: &'a CStr,
    /// Applied in the child just before the filter; built in the parent by
    /// [`crate::prepare`].
    pub ruleset: &'a PreparedRuleset,
    /// Installed last before `exec`; its listener is what
    /// [`Pending`](crate::Pending) hands back.
    pub filter: &'a PreparedFilter,
    /// An absolute path (no `PATH` search happens in the child).
    pub program: &'a CStr,
    /// Passed to `execve` as is, `argv[0]` included.
    pub argv: &'a [CString],
    /// The workload's whole environment: nothing of the supervisor's is
    /// inherited.
    pub envp: &'a [CString],
}

/// The child's exit status when a step before `exec` fails.
pub(crate) const EXIT_SETUP_FAILED: i32 = 125;
