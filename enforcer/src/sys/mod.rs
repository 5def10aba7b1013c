//! The crate's one door to the kernel: every libc call, raw system call and
//! other `unsafe` operation of `enforcer` lives in this module, each behind
//! a small wrapper whose signature states what the kernel reads and writes
//! (borrowed or owned fds, `&CStr`, slices, typed structs) and whose
//! `unsafe` block carries a `// SAFETY:` comment saying why the call is
//! sound. Every other module is `#![forbid(unsafe_code)]` and calls only
//! these wrappers.
//!
//! Wrappers return [`Errno`](crate::Errno) rather than `io::Error`: many of
//! them run between `fork` and `exec`, where nothing may allocate. Files by
//! topic:
//!
//! - [`fd`]: pipes, reads and writes, polling, descriptor flags, paths;
//! - [`process`]: waiting, signals, `prctl`, credentials, capabilities,
//!   user lookup, `exec`;
//! - [`child`]: `fork`, and the child's whole life until `exec`, since the
//!   soundness of `fork` in a threaded parent rests on that code;
//! - [`net`]: sockets and interface flags;
//! - [`ns`]: namespaces and mounts;
//! - [`seccomp`]: the filter and the user-notification ioctls, pidfds;
//! - [`landlock`]: the Landlock system calls and `openat2`;
//! - [`mem`]: reading another process's memory and mappings.

pub(crate) mod child;
pub(crate) mod fd;
pub(crate) mod landlock;
pub(crate) mod mem;
pub(crate) mod net;
pub(crate) mod ns;
pub(crate) mod process;
pub(crate) mod seccomp;

use std::os::fd::RawFd;

use crate::errno::{Errno, check};

/// A raw syscall's return as a new descriptor number (`-1` plus errno, or
/// the fd).
fn fd_number(ret: libc::c_long) -> Result<RawFd, Errno> {
    RawFd::try_from(check(ret)?).map_err(|_| Errno(libc::EBADF))
}
