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

/// Starting the workload's init program (`openshell-sandbox`), which then
/// forks the workload and applies the sandbox to it itself: everything up
/// to the init's `exec` is here, the rest is in the launch plan it reads.
#[derive(Debug)]
pub struct InitSpec<'a> {
    /// As [`ChildSpec::new_netns`].
    pub new_netns: bool,
    /// As [`ChildSpec::bind_file`].
    pub bind_file: Option<(&'a CStr, &'a CStr)>,
    /// Start the init as PID 1 of a new PID namespace with its own `/proc`
    /// (needs `CAP_SYS_ADMIN`); without it, the init should make itself a
    /// child subreaper.
    pub new_pidns: bool,
    /// As [`ChildSpec::noexec`].
    pub noexec: &'a [CString],
    /// As [`ChildSpec::exec_again`].
    pub exec_again: &'a [CString],
    /// As [`ChildSpec::stdio`]: the init's streams, which the workload
    /// inherits.
    pub stdio: [Option<BorrowedFd<'a>>; 3],
    /// The init's program, an absolute path. It is run as `PROGRAM ARGS...
    /// --plan-fd P --control-fd C`, with its launch plan readable on fd P
    /// and its end of the launch link ([`crate::InitLink`]) on fd C, and
    /// nothing else open but the standard streams.
    pub program: &'a CStr,
    /// Arguments before the descriptors'.
    pub args: &'a [CString],
    /// The launch plan, read by the init from its start.
    pub plan: BorrowedFd<'a>,
    /// Passed on as `--relay-fd R`: the init's end of the channel to the
    /// supervisor, when the init brokers the workload's calls itself.
    pub relay: Option<BorrowedFd<'a>>,
}

/// The child's exit status when a step before `exec` fails.
pub(crate) const EXIT_SETUP_FAILED: i32 = 125;
