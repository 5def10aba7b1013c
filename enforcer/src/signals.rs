//! Signals for a process that waits for them rather than handling them:
//! the sandbox's PID 1. With every signal blocked, each one is taken in
//! turn by [`wait`], with who sent it, so that a loop decides what each
//! means (reap, pass on, drop) without a handler running at an arbitrary
//! point of it.

#![forbid(unsafe_code)]

use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::errno::Errno;
use crate::sys;

pub use crate::sys::process::Delivered;

/// Blocks every signal of the calling thread (`SIGKILL` and `SIGSTOP`
/// excepted, as always). Threads started afterwards inherit the mask, and
/// a child started by `std::process::Command` begins with an empty one.
pub fn block_all() -> Result<(), Errno> {
    sys::process::block_all_signals()
}

/// The next pending signal, or `None` once `timeout` has passed (`None`
/// waits for ever). Call [`block_all`] first.
pub fn wait(timeout: Option<Duration>) -> Result<Option<Delivered>, Errno> {
    sys::process::wait_signal(timeout)
}

/// Sends `signal` to every process of process group `pgid`.
pub fn signal_group(pgid: u32, signal: libc::c_int) -> Result<(), Errno> {
    let pgid = libc::pid_t::try_from(pgid).map_err(|_| Errno(libc::ESRCH))?;
    if pgid <= 1 {
        // kill(0) and kill(-1) mean the caller's group and every process.
        return Err(Errno(libc::ESRCH));
    }
    sys::process::kill(-pgid, signal)
}

/// Makes `pgid` the foreground process group of the terminal `tty`, so a
/// workload in a group of its own may still read it.
pub fn set_foreground(tty: BorrowedFd<'_>, pgid: u32) -> Result<(), Errno> {
    let pgid = libc::pid_t::try_from(pgid).map_err(|_| Errno(libc::ESRCH))?;
    sys::process::set_foreground_group(tty, pgid)
}

/// Makes `pid` (a child of the caller that has not exec'd yet, or the
/// caller itself) the leader of a process group of its own.
pub fn set_own_group(pid: u32) -> Result<(), Errno> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| Errno(libc::ESRCH))?;
    sys::process::set_process_group(pid, pid)
}

/// Takes ownership of descriptor `fd`, inherited across `exec` and named on
/// the command line. Call it once per descriptor.
pub fn take_inherited_fd(fd: i32) -> Result<std::os::fd::OwnedFd, Errno> {
    sys::fd::take_inherited(fd)
}
