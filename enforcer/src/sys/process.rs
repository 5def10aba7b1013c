//! Processes: waiting, signals, `prctl`, credentials, capabilities, user
//! lookup and `exec`. All but the user lookups are async-signal-safe.

use std::ffi::{CStr, CString};
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::errno::{Errno, check, check_int};

/// `waitpid(pid, &status, flags)`: the pid reaped (0 with `WNOHANG` when
/// none has ended) and its raw status.
pub(crate) fn waitpid(
    pid: libc::pid_t,
    flags: libc::c_int,
) -> Result<(libc::pid_t, libc::c_int), Errno> {
    let mut status = 0;
    // SAFETY: `status` is a live, writable int.
    let ret = check_int(unsafe { libc::waitpid(pid, &raw mut status, flags) })?;
    Ok((ret, status))
}

/// `kill(pid, signal)`.
pub(crate) fn kill(pid: libc::pid_t, signal: libc::c_int) -> Result<(), Errno> {
    // SAFETY: kill takes two integers and touches no memory of ours.
    check_int(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// `PR_SET_NO_NEW_PRIVS`.
pub(crate) fn set_no_new_privs() -> Result<(), Errno> {
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1_u64, 0_u64, 0_u64, 0_u64) })
        .map(drop)
}

/// `PR_SET_PDEATHSIG`.
pub(crate) fn set_pdeathsig(signal: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0_u64, 0_u64, 0_u64) }).map(drop)
}

/// `PR_CAPBSET_DROP` of capability number `cap`.
pub(crate) fn capbset_drop(cap: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0_u64, 0_u64, 0_u64) }).map(drop)
}

/// `PR_CAP_AMBIENT_CLEAR_ALL`.
pub(crate) fn clear_ambient_capabilities() -> Result<(), Errno> {
    let clear_all = libc::c_ulong::try_from(libc::PR_CAP_AMBIENT_CLEAR_ALL).unwrap_or(4);
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0_u64, 0_u64, 0_u64) })
        .map(drop)
}

/// `PR_SET_CHILD_SUBREAPER`.
pub(crate) fn set_child_subreaper() -> Result<(), Errno> {
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1_u64, 0_u64, 0_u64, 0_u64) })
        .map(drop)
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two of them.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the calling thread's effective, permitted and inheritable sets
/// (`capset`, version 3).
pub(crate) fn clear_capability_sets() -> Result<(), Errno> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a v3 header (and may write its version) and the
    // two data words v3 requires, all live and initialised.
    check(unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) }).map(drop)
}

/// The raw `setgroups` syscall: changes the calling thread only, unlike
/// glibc's wrapper, which signals every thread.
pub(crate) fn setgroups(groups: &[libc::gid_t]) -> Result<(), Errno> {
    // SAFETY: setgroups reads `groups.len()` gids from the live slice.
    check(unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }).map(drop)
}

/// The raw `setresgid(gid, gid, gid)` syscall (calling thread only).
pub(crate) fn setresgid(gid: libc::gid_t) -> Result<(), Errno> {
    // SAFETY: setresgid takes integers only.
    check(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) }).map(drop)
}

/// The raw `setresuid(uid, uid, uid)` syscall (calling thread only).
pub(crate) fn setresuid(uid: libc::uid_t) -> Result<(), Errno> {
    // SAFETY: setresuid takes integers only.
    check(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) }).map(drop)
}

/// The largest lookup buffer tried before giving up on `ERANGE`.
const LOOKUP_BUF_MAX: usize = 1 << 20;

/// `getpwnam_r`: the user's (uid, primary gid), `None` when there is no
/// such user. NSS may load modules and allocate: never after `fork`.
pub(crate) fn user_by_name(name: &CStr) -> io::Result<Option<(libc::uid_t, libc::gid_t)>> {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        // SAFETY: an all-zero passwd (null pointers, zero ids) is valid
        // plain data.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; `pwd`, `buf` (of `buf.len()`
        // bytes) and `result` are live and writable. The strings the
        // kernel of NSS leaves in `pwd` point into `buf`; only the ids are
        // read.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &raw mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &raw mut result,
            )
        };
        match rc {
            0 if result.is_null() => return Ok(None),
            0 => return Ok(Some((pwd.pw_uid, pwd.pw_gid))),
            libc::ERANGE if buf.len() < LOOKUP_BUF_MAX => buf.resize(buf.len() * 2, 0),
            rc => return Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

/// `getgrnam_r`: the group's gid, `None` when there is no such group.
/// Never after `fork`.
pub(crate) fn group_by_name(name: &CStr) -> io::Result<Option<libc::gid_t>> {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        // SAFETY: an all-zero group (null pointers, zero gid) is valid
        // plain data.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; `grp`, `buf` (of `buf.len()`
        // bytes) and `result` are live and writable. Only the gid is read.
        let rc = unsafe {
            libc::getgrnam_r(
                name.as_ptr(),
                &raw mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &raw mut result,
            )
        };
        match rc {
            0 if result.is_null() => return Ok(None),
            0 => return Ok(Some(grp.gr_gid)),
            libc::ERANGE if buf.len() < LOOKUP_BUF_MAX => buf.resize(buf.len() * 2, 0),
            rc => return Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

/// Sets `signal` back to its default disposition (`SIG_DFL`).
pub(crate) fn default_signal_disposition(signal: libc::c_int) -> Result<(), Errno> {
    // SAFETY: an all-zero sigaction (no handler, empty mask, no flags) is
    // valid plain data.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `action` is live and initialised and names no handler; the
    // old action is not asked for (null).
    check_int(unsafe { libc::sigaction(signal, &raw const action, std::ptr::null_mut()) }).map(drop)
}

/// Unblocks every signal of the calling thread.
pub(crate) fn unblock_all_signals() -> Result<(), Errno> {
    // SAFETY: an all-zero sigset_t is the empty set on Linux.
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is live and initialised; the old mask is not asked
    // for (null).
    check_int(unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const empty, std::ptr::null_mut())
    })
    .map(drop)
}

/// Blocks every signal of the calling thread (`SIGKILL` and `SIGSTOP`
/// excepted, as always), so that each one waits for [`wait_signal`].
pub(crate) fn block_all_signals() -> Result<(), Errno> {
    // SAFETY: an all-zero sigset_t is valid plain data for sigfillset.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is live and writable.
    check_int(unsafe { libc::sigfillset(&raw mut all) })?;
    // SAFETY: `all` is live and initialised; the old mask is not asked for.
    check_int(unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, std::ptr::null_mut())
    })
    .map(drop)
}

/// A signal taken by `wait_signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// The signal's number.
    pub signal: libc::c_int,
    /// The sender's pid as the caller's PID namespace sees it: 0 for a
    /// sender outside it, or for the kernel.
    pub sender: libc::pid_t,
    /// `si_code`: positive when the kernel generated the signal.
    pub code: libc::c_int,
}

/// `sigtimedwait` on every signal: the next pending one, or `None` once
/// `timeout` has passed (`None` waits for ever). Call
/// [`block_all_signals`] first.
pub(crate) fn wait_signal(
    timeout: Option<std::time::Duration>,
) -> Result<Option<Delivered>, Errno> {
    // SAFETY: as in `block_all_signals`.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is live and writable.
    check_int(unsafe { libc::sigfillset(&raw mut all) })?;
    // SAFETY: an all-zero siginfo_t is valid plain data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let limit = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(t.subsec_nanos()),
    });
    let limit_ptr = limit.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `all` is initialised, `info` live and writable, and
    // `limit_ptr` null or pointing at `limit`, which outlives the call.
    let signal =
        match check_int(unsafe { libc::sigtimedwait(&raw const all, &raw mut info, limit_ptr) }) {
            Ok(signal) => signal,
            Err(Errno(libc::EAGAIN)) => return Ok(None),
            Err(e) => return Err(e),
        };
    // SAFETY: the kernel filled `info` for a delivered signal; `si_pid`
    // reads the sender field every user-sent signal carries (0 otherwise).
    let sender = unsafe { info.si_pid() };
    Ok(Some(Delivered {
        signal,
        sender,
        code: info.si_code,
    }))
}

/// `setpgid(pid, pgid)`.
pub(crate) fn set_process_group(pid: libc::pid_t, pgid: libc::pid_t) -> Result<(), Errno> {
    // SAFETY: setpgid takes two integers and touches no memory of ours.
    check_int(unsafe { libc::setpgid(pid, pgid) }).map(drop)
}

/// `tcsetpgrp(fd, pgid)`.
pub(crate) fn set_foreground_group(fd: BorrowedFd<'_>, pgid: libc::pid_t) -> Result<(), Errno> {
    // SAFETY: tcsetpgrp takes a live fd and an integer.
    check_int(unsafe { libc::tcsetpgrp(fd.as_raw_fd(), pgid) }).map(drop)
}

/// `PR_SET_DUMPABLE`: a process that is not dumpable has no core dump and
/// `/proc/<pid>` entries owned by root, so only `CAP_SYS_PTRACE` reads its
/// memory.
pub(crate) fn set_dumpable(dumpable: bool) -> Result<(), Errno> {
    let flag = u64::from(dumpable);
    // SAFETY: this option takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, flag, 0_u64, 0_u64, 0_u64) }).map(drop)
}

/// `setrlimit(RLIMIT_CORE, 0, 0)`: no core file, and without
/// `CAP_SYS_RESOURCE` no process can raise the limit again.
pub(crate) fn forbid_core_files() -> Result<(), Errno> {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `zero` is initialised and lives across the call.
    check_int(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &raw const zero) }).map(drop)
}

/// Ends the process at once (`_exit`): no atexit handlers, no unwinding,
/// no buffered output flushed. Async-signal-safe.
pub(crate) fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: _exit takes an integer and never returns; skipping
    // destructors only leaks.
    unsafe { libc::_exit(code) }
}

/// A null-terminated array of pointers to C strings, as `execve` takes,
/// built before `fork` so the child allocates nothing. It borrows the
/// strings, so they outlive every pointer in it.
#[derive(Debug)]
pub(crate) struct CStrArray<'a> {
    ptrs: Vec<*const libc::c_char>,
    strings: PhantomData<&'a [CString]>,
}

impl<'a> CStrArray<'a> {
    pub(crate) fn new(strings: &'a [CString]) -> Self {
        Self {
            ptrs: strings
                .iter()
                .map(|s| s.as_ptr())
                .chain([std::ptr::null()])
                .collect(),
            strings: PhantomData,
        }
    }
}

/// `execve(program, argv, envp)`; returns only on failure, with its errno.
pub(crate) fn execve(program: &CStr, argv: &CStrArray<'_>, envp: &CStrArray<'_>) -> Errno {
    // SAFETY: `program` is NUL-terminated; `argv` and `envp` are
    // null-terminated arrays of pointers to NUL-terminated strings that
    // they borrow, so all of it is live for the call.
    unsafe { libc::execve(program.as_ptr(), argv.ptrs.as_ptr(), envp.ptrs.as_ptr()) };
    Errno::last()
}

/// `execveat(program, "", argv, envp, AT_EMPTY_PATH)`: executes the file
/// `program` was opened on, whatever has since been mounted over its path.
/// Returns only on failure. Async-signal-safe.
pub(crate) fn execve_fd(
    program: BorrowedFd<'_>,
    argv: &CStrArray<'_>,
    envp: &CStrArray<'_>,
) -> Errno {
    // SAFETY: the empty path is a NUL-terminated literal; `argv` and `envp`
    // are null-terminated arrays of pointers to NUL-terminated strings that
    // they borrow, so all of it is live for the call; `program` is live.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            program.as_raw_fd(),
            c"".as_ptr(),
            argv.ptrs.as_ptr(),
            envp.ptrs.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    Errno::last()
}
