//! Forking the workload: the child sequence from the crate docs as one
//! audited function, with a handshake so the parent can serve the
//! listener (and set up the network namespace) before the workload runs.
//!
//! ```text
//! parent                                child
//! spawn() ── fork ───────────────────▶ reset signals · netns · mount ns ·
//!                                       stdio · cwd · capabilities · user ·
//!                                       no_new_privs · pdeathsig · cloexec ·
//!                                       Landlock · seccomp
//!   ◀── "listener is fd N" ──────────── (report pipe)
//! take_fd_from(N) → Pending
//!   (DNS stub, notification loop...)
//! Pending::start() ── "go" ──────────▶ execve
//!   ◀── EOF (close-on-exec) or errno ─
//! ```
//!
//! Everything the child touches is prepared before `fork` (C strings,
//! pointer arrays, the ruleset and the BPF program), and the child makes
//! only async-signal-safe calls, so the parent may have threads. If the
//! parent dies before the "go", the child's read sees EOF and it exits; if
//! it dies after, `PR_SET_PDEATHSIG` kills the workload. The parent-death
//! signal fires when the *thread* that forked exits, so call [`spawn`] from
//! a thread that lives as long as the workload (the main thread).

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::errno::{Errno, check_int};
use crate::landlock::PreparedRuleset;
use crate::seccomp::PreparedFilter;

/// A user to become: ids and the exact supplementary groups.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
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
    pub cwd: &'a CStr,
    pub ruleset: &'a PreparedRuleset,
    pub filter: &'a PreparedFilter,
    /// An absolute path (no `PATH` search happens in the child).
    pub program: &'a CStr,
    pub argv: &'a [CString],
    pub envp: &'a [CString],
}

/// The child steps, in order; a failure names one of them.
const STEPS: [&str; 16] = [
    "reset signal dispositions",
    "enter a new network namespace",
    "bring up loopback",
    "enter a new mount namespace",
    "bind-mount the private file",
    "set up standard streams",
    "drop the bounding and ambient capabilities",
    "change user and group",
    "change to the working directory",
    "clear the capability sets",
    "set no_new_privs",
    "set the parent-death signal",
    "mark inherited descriptors close-on-exec",
    "apply the Landlock ruleset",
    "install the seccomp filter",
    "wait for the supervisor",
];
const MSG_LISTENER: i32 = 1;
const MSG_STEP_FAILED: i32 = 2;
const MSG_EXEC_FAILED: i32 = 3;
/// The child's exit status when a step before `exec` fails.
pub const EXIT_SETUP_FAILED: i32 = 125;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    #[error("cannot prepare the launch")]
    Prepare(#[source] io::Error),
    #[error("the sandbox could not {step}: {errno}")]
    Step { step: &'static str, errno: Errno },
    #[error("cannot execute the command: {0}")]
    Exec(Errno),
    #[error("cannot take the seccomp listener from the child")]
    TakeListener(#[source] io::Error),
    #[error("the child ended before it was ready ({0})")]
    ChildDied(ExitStatus),
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The shell convention: the exit code, or 128 + the signal number.
    #[must_use]
    pub fn code(self) -> i32 {
        match self {
            Self::Code(c) => c,
            Self::Signal(s) => 128 + s,
        }
    }

    pub(crate) fn from_raw(status: libc::c_int) -> Self {
        if libc::WIFEXITED(status) {
            Self::Code(libc::WEXITSTATUS(status))
        } else {
            Self::Signal(libc::WTERMSIG(status))
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(c) => write!(f, "exit code {c}"),
            Self::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// A child that has installed its filter and waits for [`Pending::start`].
#[derive(Debug)]
pub struct Pending {
    pid: libc::pid_t,
    listener: Option<OwnedFd>,
    report: OwnedFd,
    go: Option<OwnedFd>,
}

impl Pending {
    #[must_use]
    pub fn pid(&self) -> u32 {
        u32::try_from(self.pid).unwrap_or_default()
    }

    /// The seccomp notification listener, once: the caller serves it.
    pub fn take_listener(&mut self) -> Option<OwnedFd> {
        self.listener.take()
    }

    /// Lets the child exec. Returns once the exec happened (the report
    /// pipe, close-on-exec, reads EOF) or failed.
    pub fn start(mut self) -> Result<u32, SpawnError> {
        let go = self.go.take();
        let wrote = go.as_ref().is_some_and(|fd| write_all(fd, &[1]).is_ok());
        drop(go);
        let pid = self.pid;
        let outcome = match read_message(&self.report) {
            Ok(None) if wrote => Ok(self.pid()),
            Ok(Some((MSG_EXEC_FAILED, errno))) => {
                reap(pid);
                Err(SpawnError::Exec(Errno(errno)))
            }
            _ => Err(SpawnError::ChildDied(reap(pid))),
        };
        // The child now runs (or is gone): nothing left for Drop to do.
        self.pid = 0;
        outcome
    }
}

impl Drop for Pending {
    /// A pending child that is never started is killed and reaped.
    fn drop(&mut self) {
        if self.pid > 0 {
            let _ = send_signal(self.pid(), libc::SIGKILL);
            reap(self.pid);
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two fds into the live two-element array.
    check_int(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let [r, w] = fds;
    // SAFETY: the kernel just returned these fds and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) })
}

fn write_all(fd: &OwnedFd, bytes: &[u8]) -> Result<(), Errno> {
    let mut done = 0;
    while let Some(rest) = bytes.get(done..).filter(|r| !r.is_empty()) {
        // SAFETY: `rest` is a live, initialised slice of the given length.
        let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(n) => done += n,
            Err(_) if Errno::last() == Errno(libc::EINTR) => {}
            Err(_) => return Err(Errno::last()),
        }
    }
    Ok(())
}

/// One 8-byte message (tag, value), or `None` at EOF.
fn read_message(fd: &OwnedFd) -> Result<Option<(i32, i32)>, Errno> {
    let mut buf = [0_u8; 8];
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        // SAFETY: `rest` is live and writable for its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(Errno(libc::EPIPE)),
            Ok(n) => got += n,
            Err(_) if Errno::last() == Errno(libc::EINTR) => {}
            Err(_) => return Err(Errno::last()),
        }
    }
    let [a0, a1, a2, a3, b0, b1, b2, b3] = buf;
    Ok(Some((
        i32::from_ne_bytes([a0, a1, a2, a3]),
        i32::from_ne_bytes([b0, b1, b2, b3]),
    )))
}

/// Waits for `pid` to end and reaps it (blocking).
fn reap(pid: libc::pid_t) -> ExitStatus {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live, writable int.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if ret == pid {
            return ExitStatus::from_raw(status);
        }
        if ret < 0 && Errno::last() != Errno(libc::EINTR) {
            return ExitStatus::Code(-1);
        }
    }
}

/// Forks the child described by `spec` and waits until it has installed
/// its seccomp filter; see the module docs.
pub fn spawn(spec: &ChildSpec<'_>) -> Result<Pending, SpawnError> {
    let argv: Vec<*const libc::c_char> = spec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let envp: Vec<*const libc::c_char> = spec
        .envp
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let (report_r, report_w) = pipe().map_err(SpawnError::Prepare)?;
    let (go_r, go_w) = pipe().map_err(SpawnError::Prepare)?;
    // SAFETY: getpid has no arguments and cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the child only runs `child_main`, which makes async-signal-safe
    // calls on memory prepared above, so forking a threaded parent is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child_main(spec, &argv, &envp, parent, &report_w, &go_r);
    }
    if pid < 0 {
        return Err(SpawnError::Prepare(io::Error::last_os_error()));
    }
    drop((report_w, go_r));
    let mut pending = Pending {
        pid,
        listener: None,
        report: report_r,
        go: Some(go_w),
    };
    match read_message(&pending.report) {
        Ok(Some((MSG_LISTENER, fd))) => {
            let listener =
                crate::notify::take_fd_from(pending.pid(), fd).map_err(SpawnError::TakeListener)?;
            pending.listener = Some(listener);
            Ok(pending)
        }
        Ok(Some((MSG_STEP_FAILED, packed))) => {
            let step = usize::try_from(packed >> 16).unwrap_or(usize::MAX);
            let errno = Errno(packed & 0xffff);
            drop(pending);
            Err(SpawnError::Step {
                step: STEPS.get(step).copied().unwrap_or("set up the sandbox"),
                errno,
            })
        }
        _ => {
            pending.go = None;
            let status = reap(pending.pid);
            pending.pid = 0;
            Err(SpawnError::ChildDied(status))
        }
    }
}

/// The forked child. Never returns: it execs or `_exit`s.
fn child_main(
    spec: &ChildSpec<'_>,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    parent: libc::pid_t,
    report: &OwnedFd,
    go: &OwnedFd,
) -> ! {
    let fail = |step: usize, errno: Errno| -> ! {
        let packed = (i32::try_from(step).unwrap_or(0xff) << 16) | (errno.raw() & 0xffff);
        send(report, MSG_STEP_FAILED, packed);
        exit_now(EXIT_SETUP_FAILED)
    };
    let step = |i: usize, result: Result<(), Errno>| {
        if let Err(e) = result {
            fail(i, e);
        }
    };
    step(0, reset_signals());
    if spec.new_netns {
        step(1, crate::netns::unshare_net());
        step(2, crate::netns::bring_up_loopback());
    }
    if let Some((source, target)) = spec.bind_file {
        step(3, crate::mounts::unshare_mount_ns());
        step(4, crate::mounts::bind_mount_readonly(source, target));
    }
    for (target, fd) in (0..).zip(spec.stdio.iter()) {
        if let Some(fd) = fd {
            // SAFETY: dup2 takes two integers.
            step(
                5,
                check_int(unsafe { libc::dup2(fd.as_raw_fd(), target) }).map(drop),
            );
        }
    }
    if spec.drop_bounding {
        step(6, crate::process::drop_bounding_and_ambient(spec.last_cap));
    }
    if let Some(id) = spec.identity {
        step(7, crate::process::set_identity(id.uid, id.gid, id.groups));
    }
    // SAFETY: chdir reads a NUL-terminated string that lives in `spec`.
    step(
        8,
        check_int(unsafe { libc::chdir(spec.cwd.as_ptr()) }).map(drop),
    );
    step(9, crate::process::clear_capability_sets());
    step(10, crate::process::set_no_new_privs());
    step(11, crate::process::set_pdeathsig(libc::SIGKILL, parent));
    step(12, crate::process::mark_fds_cloexec_from(3));
    step(13, spec.ruleset.restrict_self());
    let listener = match spec.filter.install_with_listener() {
        Ok(fd) => fd,
        Err(e) => fail(14, e),
    };
    send(report, MSG_LISTENER, listener);
    let mut byte = [0_u8; 1];
    loop {
        // SAFETY: `byte` is live and writable for one byte.
        let n = unsafe { libc::read(go.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 || Errno::last() != Errno(libc::EINTR) {
            // The supervisor is gone or gave up: never run the workload.
            exit_now(EXIT_SETUP_FAILED);
        }
    }
    // SAFETY: the parent holds its own copy (pidfd_getfd); ours is closed so
    // that not even the instant before exec leaves it to the workload.
    unsafe { libc::close(listener) };
    // SAFETY: program, argv and envp are NUL-terminated strings and
    // null-terminated pointer arrays that live in the caller's frame.
    unsafe { libc::execve(spec.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    let errno = Errno::last();
    send(report, MSG_EXEC_FAILED, errno.raw());
    exit_now(if errno == Errno(libc::ENOENT) {
        127
    } else {
        126
    })
}

fn send(report: &OwnedFd, tag: i32, value: i32) {
    let mut msg = [0_u8; 8];
    for (dst, src) in msg
        .iter_mut()
        .zip(tag.to_ne_bytes().into_iter().chain(value.to_ne_bytes()))
    {
        *dst = src;
    }
    let _ = write_all(report, &msg);
}

fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and runs no atexit handlers.
    unsafe { libc::_exit(code) }
}

/// Restores what a Rust parent changed and an exec would keep: `SIGPIPE`
/// (ignored by the Rust runtime) back to its default, and an empty signal
/// mask.
fn reset_signals() -> Result<(), Errno> {
    // SAFETY: an all-zero sigaction is valid plain data; SIG_DFL has no
    // handler to call.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `action` is live and initialised; the old action is not read.
    check_int(unsafe { libc::sigaction(libc::SIGPIPE, &raw const action, std::ptr::null_mut()) })?;
    // SAFETY: an all-zero sigset_t is the empty set on Linux.
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is live and initialised; the old mask is not read.
    check_int(unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const empty, std::ptr::null_mut())
    })
    .map(drop)
}

/// Sends `signal` to process `pid`.
pub fn send_signal(pid: u32, signal: libc::c_int) -> Result<(), Errno> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| Errno(libc::ESRCH))?;
    if pid <= 0 {
        return Err(Errno(libc::ESRCH));
    }
    // SAFETY: kill takes two integers; `pid` is positive, so it names one
    // process, never a group.
    check_int(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// Whether a child has ended, without blocking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    /// This child ended and is reaped.
    Exited(u32, ExitStatus),
    /// Children remain, none has ended yet.
    Running,
    /// The caller has no children left.
    NoChildren,
}

/// Reaps `pid` if it has ended (`None` for any child).
pub fn try_reap(pid: Option<u32>) -> Result<Reaped, Errno> {
    let target = match pid {
        Some(p) => libc::pid_t::try_from(p).map_err(|_| Errno(libc::ECHILD))?,
        None => -1,
    };
    let mut status = 0;
    // SAFETY: `status` is a live, writable int.
    let ret = unsafe { libc::waitpid(target, &raw mut status, libc::WNOHANG) };
    match ret {
        0 => Ok(Reaped::Running),
        r if r > 0 => Ok(Reaped::Exited(
            u32::try_from(r).unwrap_or_default(),
            ExitStatus::from_raw(status),
        )),
        _ if Errno::last() == Errno(libc::ECHILD) => Ok(Reaped::NoChildren),
        _ => Err(Errno::last()),
    }
}

/// Waits for child `pid` to end and reaps it (blocking; run it on a thread
/// that may block).
pub fn wait_for(pid: u32) -> Result<ExitStatus, Errno> {
    let target = libc::pid_t::try_from(pid).map_err(|_| Errno(libc::ECHILD))?;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live, writable int.
        let ret = unsafe { libc::waitpid(target, &raw mut status, 0) };
        if ret == target {
            return Ok(ExitStatus::from_raw(status));
        }
        if ret < 0 && Errno::last() != Errno(libc::EINTR) {
            return Err(Errno::last());
        }
    }
}

/// Makes the caller the reaper of its orphaned descendants, so a workload
/// that daemonizes still ends with the sandbox.
pub fn set_child_subreaper() -> Result<(), Errno> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1_u64, 0_u64, 0_u64, 0_u64) })
        .map(drop)
}
