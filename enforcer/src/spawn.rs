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
//! A workload with an init of its own, PID 1 of a new PID namespace, is
//! started with [`spawn_init`]: the init is a program (`openshell-sandbox`)
//! that forks the workload with [`spawn`].
//!
//! Everything the child touches is prepared before `fork` (C strings,
//! pointer arrays, the ruleset and the BPF program), and the child makes
//! only async-signal-safe calls, so the parent may have threads. If the
//! parent dies before the "go", the child's read sees EOF and it exits; if
//! it dies after, `PR_SET_PDEATHSIG` kills the workload. The parent-death
//! signal fires when the *thread* that forked exits, so call [`spawn`] from
//! a thread that lives as long as the workload (the main thread).
//!
//! The child's side (the `fork` itself and every step up to `exec`) lives
//! in `sys::child`, next to the `fork` whose soundness rests on it.

#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use crate::child_spec::{ChildSpec, InitSpec};
use crate::errno::Errno;
use crate::launch_link::{self, Message};
use crate::sys;
use crate::sys::child::{MSG_EXEC_FAILED, MSG_LISTENER, MSG_STEP_FAILED, STEPS};

/// Why [`spawn`] or [`Pending::start`] did not leave a workload running;
/// a child that got as far as forking has been reaped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The pipes or the `fork` itself failed; no child exists.
    #[error("cannot prepare the launch")]
    Prepare(#[source] io::Error),
    /// A step of the child's setup failed, so the workload never ran.
    #[error("the sandbox could not {step}: {errno}")]
    Step {
        /// What the child was doing, worded to follow "could not".
        step: &'static str,
        /// What the failing call returned.
        errno: Errno,
    },
    /// The sandbox was complete but `execve` failed (`ENOENT`: no such
    /// program).
    #[error("cannot execute the command: {0}")]
    Exec(Errno),
    /// `pidfd_getfd` on the child's listener failed.
    #[error("cannot take the seccomp listener from the child")]
    TakeListener(#[source] io::Error),
    /// The init program could not set the workload up.
    #[error("the sandbox's init could not start the workload: {0}")]
    Init(String),
    /// The child exited or was killed without reporting why.
    #[error("the child ended before it was ready ({0})")]
    ChildDied(ExitStatus),
    /// The launch link to an init program another process started
    /// ([`crate::LaunchLink`]) failed, or closed (`EPIPE`) before the init
    /// said why.
    #[error("the launch link to the sandbox's init failed: {0}")]
    Link(Errno),
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal of this number killed it.
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

    /// The wait status word `waitpid` gives for this ending.
    #[must_use]
    pub fn raw(self) -> libc::c_int {
        match self {
            Self::Code(c) => (c & 0xff) << 8,
            Self::Signal(s) => s & 0x7f,
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
    /// The child forked: the workload, or the init program.
    pid: libc::pid_t,
    /// The workload's own pid (as this process sees it).
    workload: libc::pid_t,
    listener: Option<OwnedFd>,
    report: OwnedFd,
    go: Option<OwnedFd>,
    /// The launch link to an init program ([`spawn_init`]), which then
    /// carries the go, the start and the status.
    link: Option<OwnedFd>,
}

impl Pending {
    /// The child's pid (the workload's init, where it has one), already
    /// valid before [`Pending::start`].
    #[must_use]
    pub fn pid(&self) -> u32 {
        u32::try_from(self.pid).unwrap_or_default()
    }

    /// The workload's own pid, before it execs: open its namespaces and
    /// its root through it. Its init, if it has one, is not dumpable, so a
    /// caller without `CAP_SYS_PTRACE` may not open the init's.
    #[must_use]
    pub fn workload_pid(&self) -> u32 {
        u32::try_from(self.workload).unwrap_or_default()
    }

    /// The seccomp notification listener, once: the caller serves it.
    pub fn take_listener(&mut self) -> Option<OwnedFd> {
        self.listener.take()
    }

    /// Lets the child exec. Returns once the exec happened (the report
    /// pipe, close-on-exec, reads EOF) or failed.
    pub fn start(mut self) -> Result<Running, SpawnError> {
        if let Some(link) = self.link.take() {
            return self.start_linked(link);
        }
        let go = self.go.take();
        let wrote = go.as_ref().is_some_and(|fd| write_all(fd, &[1]).is_ok());
        drop(go);
        let pid = self.pid;
        let outcome = match read_message(&self.report) {
            Ok(None) if wrote => Ok(Running {
                pid: self.pid(),
                workload: u32::try_from(self.workload).unwrap_or_default(),
                link: None,
            }),
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

impl Pending {
    fn start_linked(mut self, link: OwnedFd) -> Result<Running, SpawnError> {
        let pid = self.pid;
        let sent = launch_link::send(link.as_fd(), &Message::Go, None).is_ok();
        let outcome = match launch_link::receive(link.as_fd()) {
            Ok(Some((Message::Started, _))) if sent => Ok(Running {
                pid: self.pid(),
                workload: u32::try_from(self.workload).unwrap_or_default(),
                link: Some(link),
            }),
            Ok(Some((Message::ExecFailed(errno), _))) => {
                reap(pid);
                Err(SpawnError::Exec(errno))
            }
            Ok(Some((Message::Failed(why), _))) => {
                reap(pid);
                Err(SpawnError::Init(why))
            }
            _ => {
                let _ = send_signal(self.pid(), libc::SIGKILL);
                Err(SpawnError::ChildDied(reap(pid)))
            }
        };
        self.pid = 0;
        outcome
    }
}

/// A workload that has exec'd.
#[derive(Debug)]
pub struct Running {
    pid: u32,
    workload: u32,
    /// The launch link, on which the init program sends the workload's
    /// status.
    link: Option<OwnedFd>,
}

impl Running {
    /// The child to wait for and to signal: the workload, or its init,
    /// which passes signals on (and whose `SIGKILL` ends the whole PID
    /// namespace).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The workload's first process, as this process sees it.
    #[must_use]
    pub fn workload_pid(&self) -> u32 {
        self.workload
    }

    /// Waits for the child to end and reaps it (blocking: run it on a
    /// thread that may), then returns how the workload ended: under an
    /// init, the status the init saw, or the init's own when it was killed
    /// before it could tell (`SIGKILL` from the caller, say).
    pub fn wait(self) -> Result<ExitStatus, Errno> {
        let own = wait_for(self.pid)?;
        let Some(link) = self.link else {
            return Ok(own);
        };
        Ok(match launch_link::receive(link.as_fd()) {
            Ok(Some((Message::Status(raw), _))) => ExitStatus::from_raw(raw),
            _ => own,
        })
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
    Ok(sys::fd::pipe()?)
}

fn write_all(fd: &OwnedFd, bytes: &[u8]) -> Result<(), Errno> {
    sys::fd::write_all(fd.as_fd(), bytes)
}

/// One 8-byte message (tag, value), or `None` at EOF.
fn read_message(fd: &OwnedFd) -> Result<Option<(i32, i32)>, Errno> {
    let mut buf = [0_u8; 8];
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match sys::fd::read(fd.as_fd(), rest) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(Errno(libc::EPIPE)),
            Ok(n) => got += n,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
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
        match sys::process::waitpid(pid, 0) {
            Ok((ret, status)) if ret == pid => return ExitStatus::from_raw(status),
            Ok(_) | Err(Errno(libc::EINTR)) => {}
            Err(_) => return ExitStatus::Code(-1),
        }
    }
}

/// Forks the child described by `spec` and waits until it has installed
/// its seccomp filter; see the module docs.
pub fn spawn(spec: &ChildSpec<'_>) -> Result<Pending, SpawnError> {
    let (report_r, report_w) = pipe().map_err(SpawnError::Prepare)?;
    let (go_r, go_w) = pipe().map_err(SpawnError::Prepare)?;
    let pid = sys::child::fork_child(spec, &report_w, &go_r, &go_w)
        .map_err(|e| SpawnError::Prepare(e.into()))?;
    drop((report_w, go_r));
    let mut pending = Pending {
        pid,
        workload: pid,
        listener: None,
        report: report_r,
        go: Some(go_w),
        link: None,
    };
    match read_message(&pending.report) {
        Ok(Some((MSG_LISTENER, fd))) => {
            let workload = u32::try_from(pending.workload).unwrap_or_default();
            let listener =
                crate::notify::take_fd_from(workload, fd).map_err(SpawnError::TakeListener)?;
            pending.listener = Some(listener);
            Ok(pending)
        }
        Ok(Some((MSG_STEP_FAILED, packed))) => {
            drop(pending);
            Err(step_failed(packed))
        }
        _ => {
            pending.go = None;
            let status = reap(pending.pid);
            pending.pid = 0;
            Err(SpawnError::ChildDied(status))
        }
    }
}

/// Starts the workload's init program (see [`InitSpec`]), and waits until
/// it has forked the workload and handed over the workload's listener (or
/// said it keeps it: then [`Pending::take_listener`] gives `None`).
/// The init must speak the launch link ([`crate::InitLink`]).
pub fn spawn_init(spec: &InitSpec<'_>) -> Result<Pending, SpawnError> {
    let (report_r, report_w) = pipe().map_err(SpawnError::Prepare)?;
    let (link, theirs) = sys::net::seqpacket_pair().map_err(|e| SpawnError::Prepare(e.into()))?;
    let pid = sys::child::fork_init(spec, &report_w, &theirs)
        .map_err(|e| SpawnError::Prepare(e.into()))?;
    drop((report_w, theirs));
    let mut pending = Pending {
        pid,
        workload: pid,
        listener: None,
        report: report_r,
        go: None,
        link: None,
    };
    match read_message(&pending.report) {
        Ok(None) => {}
        Ok(Some((MSG_STEP_FAILED, packed))) => return Err(step_failed(packed)),
        _ => {
            pending.pid = 0;
            return Err(SpawnError::ChildDied(reap(pid)));
        }
    }
    let listener = match launch_link::receive(link.as_fd()) {
        Ok(Some((Message::Listener, Some(fd)))) => Some(fd),
        Ok(Some((Message::Ready, None))) => None,
        Ok(Some((Message::StepFailed { step, errno }, _))) => {
            return Err(step_error(step, errno));
        }
        Ok(Some((Message::Failed(why), _))) => return Err(SpawnError::Init(why)),
        _ => {
            let _ = send_signal(pending.pid(), libc::SIGKILL);
            pending.pid = 0;
            return Err(SpawnError::ChildDied(reap(pid)));
        }
    };
    // The init's only child: nothing else runs under it before the go.
    pending.workload = only_child(pid).map_err(SpawnError::TakeListener)?;
    pending.listener = listener;
    pending.link = Some(link);
    Ok(pending)
}

/// The error of a step reported as `index << 16 | errno`.
fn step_failed(packed: i32) -> SpawnError {
    let step = usize::try_from(packed >> 16).unwrap_or(usize::MAX);
    step_error(step, Errno(packed & 0xffff))
}

/// Step number `step` of the child failed with `errno`.
pub(crate) fn step_error(step: usize, errno: Errno) -> SpawnError {
    SpawnError::Step {
        step: STEPS.get(step).copied().unwrap_or("set up the sandbox"),
        errno,
    }
}

/// The one child of `pid`, from `/proc/<pid>/task/<pid>/children`.
fn only_child(pid: libc::pid_t) -> io::Result<libc::pid_t> {
    let listed = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))?;
    let mut children = listed.split_whitespace().map(str::parse::<libc::pid_t>);
    match (children.next(), children.next()) {
        (Some(Ok(child)), None) => Ok(child),
        _ => Err(io::Error::other(format!(
            "the sandbox's init should have one child, it has `{}`",
            listed.trim()
        ))),
    }
}

/// Sends `signal` to process `pid`.
pub fn send_signal(pid: u32, signal: libc::c_int) -> Result<(), Errno> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| Errno(libc::ESRCH))?;
    if pid <= 0 {
        return Err(Errno(libc::ESRCH));
    }
    // `pid` is positive, so it names one process, never a group.
    sys::process::kill(pid, signal)
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
    match sys::process::waitpid(target, libc::WNOHANG) {
        Ok((0, _)) => Ok(Reaped::Running),
        Ok((r, status)) => Ok(Reaped::Exited(
            u32::try_from(r).unwrap_or_default(),
            ExitStatus::from_raw(status),
        )),
        Err(Errno(libc::ECHILD)) => Ok(Reaped::NoChildren),
        Err(e) => Err(e),
    }
}

/// Waits for child `pid` to end and reaps it (blocking; run it on a thread
/// that may block).
pub fn wait_for(pid: u32) -> Result<ExitStatus, Errno> {
    let target = libc::pid_t::try_from(pid).map_err(|_| Errno(libc::ECHILD))?;
    loop {
        match sys::process::waitpid(target, 0) {
            Ok((ret, status)) if ret == target => return Ok(ExitStatus::from_raw(status)),
            Ok(_) | Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
}

/// This process's children, over all its threads, from
/// `/proc/self/task/*/children`.
#[must_use]
pub fn children() -> Vec<u32> {
    children_at("/proc/self/task")
}

/// The children of every thread under `tasks` (a `/proc/<pid>/task`).
fn children_at(tasks: &str) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(tasks) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Every descendant of this process, parents before their children, as
/// `/proc` shows them now.
pub fn descendants() -> Vec<u32> {
    let mut out = children();
    let mut next = 0;
    while let Some(&pid) = out.get(next) {
        for child in children_at(&format!("/proc/{pid}/task")) {
            if !out.contains(&child) {
                out.push(child);
            }
        }
        next += 1;
    }
    out
}

/// Kills and reaps every remaining child, re-parented descendants
/// included (the caller is a child subreaper or PID 1), repeating while
/// killing one re-parents others.
pub fn kill_descendants() {
    for _ in 0..100 {
        let children = children();
        if children.is_empty() {
            break;
        }
        for pid in children {
            let _ = send_signal(pid, libc::SIGKILL);
        }
        reap_all(std::time::Duration::from_millis(200));
    }
    reap_all(std::time::Duration::ZERO);
}

/// Reaps every child that has ended, waiting up to `patience` for those
/// still running.
fn reap_all(patience: std::time::Duration) {
    let start = std::time::Instant::now();
    loop {
        match try_reap(None) {
            Ok(Reaped::Exited(..)) => {}
            Ok(Reaped::Running) if start.elapsed() < patience => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            _ => return,
        }
    }
}

/// Makes the caller the reaper of its orphaned descendants, so a workload
/// that daemonizes still ends with the sandbox.
pub fn set_child_subreaper() -> Result<(), Errno> {
    sys::process::set_child_subreaper()
}
