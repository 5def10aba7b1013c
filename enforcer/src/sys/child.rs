//! `fork`, and everything the child does before it execs or exits.
//!
//! After `fork` in a multi-threaded parent only async-signal-safe work is
//! sound: another thread may have held the allocator's lock, so one
//! allocation can deadlock or corrupt the heap. `fork` is therefore never
//! offered as a wrapper; each of its two callers is here in full, so the
//! `SAFETY` comment on the `fork` sits next to all of the code it vouches
//! for. That code only makes system calls (through the wrappers of this
//! module and the crate's child-side steps, each documented as
//! async-signal-safe) on memory prepared before the fork.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::child_spec::{ChildSpec, EXIT_SETUP_FAILED, InitSpec};
use crate::errno::Errno;
use crate::sys::fd::{chdir, mark_cloexec_from, read, write_all};
use crate::sys::process::{CStrArray, exit_now, waitpid};

/// The child steps, in order; a failure report names one by its index.
pub(crate) const STEPS: [&str; 21] = [
    "reset signal dispositions",
    "enter a new network namespace",
    "bring up loopback",
    "enter a new mount namespace",
    "bind-mount the private file",
    "mount the writable trees noexec",
    "mount a private /proc",
    "fork the workload under its init",
    "start the workload's init program",
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
    "let the supervisor take the listener",
    "wait for the supervisor",
];
/// Report tags: the listener's fd number, a failed step (index << 16 |
/// errno), a failed `execve` (errno).
pub(crate) const MSG_LISTENER: i32 = 1;
pub(crate) const MSG_STEP_FAILED: i32 = 2;
pub(crate) const MSG_EXEC_FAILED: i32 = 3;

/// Forks the child that runs `spec` (see `spawn`), reporting on `report`
/// and waiting for one byte on `go` before it execs. Returns the child's
/// pid in the parent.
pub(crate) fn fork_child(
    spec: &ChildSpec<'_>,
    report: &OwnedFd,
    go: &OwnedFd,
    go_writer: &OwnedFd,
) -> Result<libc::pid_t, Errno> {
    let argv = CStrArray::new(spec.argv);
    let envp = CStrArray::new(spec.envp);
    let parent = libc::pid_t::try_from(std::process::id()).map_err(|_| Errno(libc::ESRCH))?;
    let ends = Ends {
        report: report.as_fd(),
        go: go.as_fd(),
        go_writer: go_writer.as_fd(),
    };
    // SAFETY: the child only runs `child_main`, which makes
    // async-signal-safe calls on memory prepared above (`spec`, `argv`,
    // `envp`, the pipes) and never returns.
    let pid = unsafe { fork_into(false)? };
    if pid == 0 {
        child_main(spec, &argv, &envp, parent, ends);
    }
    Ok(pid)
}

/// `fork`, into a new PID namespace when `new_pidns`: `clone` without a
/// new stack (0) and with at most `CLONE_NEWPID` besides the exit signal.
/// glibc's atfork handlers, which `clone` skips, matter only to code that
/// allocates or takes locks. Returns 0 in the child.
///
/// # Safety
///
/// The parent may be threaded: the child must make only async-signal-safe
/// calls on memory prepared before the call, and never return.
unsafe fn fork_into(new_pidns: bool) -> Result<libc::pid_t, Errno> {
    let flags = if new_pidns {
        libc::CLONE_NEWPID | libc::SIGCHLD
    } else {
        libc::SIGCHLD
    };
    // SAFETY: `clone` without a new stack is `fork`; the caller keeps the
    // child to async-signal-safe calls, as this function's contract says.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::c_long::from(flags),
            0_i64,
            0_i64,
            0_i64,
            0_i64,
        )
    };
    if ret < 0 {
        return Err(Errno::last());
    }
    libc::pid_t::try_from(ret).map_err(|_| Errno(libc::EINVAL))
}

/// The child's ends of the pipes to the parent.
#[derive(Clone, Copy)]
struct Ends<'a> {
    report: BorrowedFd<'a>,
    go: BorrowedFd<'a>,
    /// The parent's end of `go`, closed at once: while the child holds it,
    /// a parent that dies would leave the child's read waiting for ever
    /// instead of seeing EOF.
    go_writer: BorrowedFd<'a>,
}

/// The forked child. Never returns: it execs or `_exit`s.
fn child_main(
    spec: &ChildSpec<'_>,
    argv: &CStrArray<'_>,
    envp: &CStrArray<'_>,
    parent: libc::pid_t,
    ends: Ends<'_>,
) -> ! {
    let report = ends.report;
    let fail = |step: usize, errno: Errno| -> ! { fail_step(report, step, errno) };
    let step = |i: usize, result: Result<(), Errno>| {
        if let Err(e) = result {
            fail(i, e);
        }
    };
    step(0, crate::sys::fd::close_in_child(ends.go_writer));
    step(0, reset_signals());
    let namespaces = Namespaces {
        new_netns: spec.new_netns,
        new_pidns: false,
        bind_file: spec.bind_file,
        noexec: spec.noexec,
        exec_again: spec.exec_again,
    };
    if let Err((i, e)) = namespaces.enter() {
        fail(i, e);
    }
    for (target, fd) in (0..).zip(spec.stdio.iter()) {
        if let Some(fd) = fd {
            step(9, dup_onto_stdio(*fd, target));
        }
    }
    if spec.drop_bounding {
        step(10, crate::process::drop_bounding_and_ambient(spec.last_cap));
    }
    if let Some(id) = spec.identity {
        step(11, crate::process::set_identity(id.uid, id.gid, id.groups));
    }
    step(12, chdir(spec.cwd));
    step(13, crate::process::clear_capability_sets());
    step(14, crate::process::set_no_new_privs());
    step(15, crate::process::set_pdeathsig(libc::SIGKILL, parent));
    step(16, mark_cloexec_from(3));
    step(17, spec.ruleset.restrict_self());
    let listener = match spec.filter.install_with_listener() {
        Ok(fd) => fd,
        Err(e) => fail(18, e),
    };
    // The child inherits the supervisor's non-dumpable state, which keeps
    // a supervisor without `CAP_SYS_PTRACE` from taking the listener
    // (`pidfd_getfd`). Only such a supervisor's child, which keeps its
    // user, is made dumpable; a child that changed user stays as the
    // kernel left it, so that no process of its new user can read the
    // supervisor's memory it still holds until `exec`.
    if spec.identity.is_none() {
        step(19, crate::sys::process::set_dumpable(true));
    }
    send(report, MSG_LISTENER, listener.as_raw_fd());
    let mut byte = [0_u8; 1];
    loop {
        match read(ends.go, &mut byte) {
            Ok(1) => break,
            Err(Errno(libc::EINTR)) => {}
            // The supervisor is gone or gave up: never run the workload.
            _ => exit_now(EXIT_SETUP_FAILED),
        }
    }
    // The parent holds its own copy (pidfd_getfd); ours is closed so that
    // not even the instant before exec leaves it to the workload.
    drop(listener);
    let errno = crate::sys::process::execve(spec.program, argv, envp);
    send(report, MSG_EXEC_FAILED, errno.raw());
    exit_now(if errno == Errno(libc::ENOENT) {
        127
    } else {
        126
    })
}

/// Reports step `step` as failed with `errno`, and exits.
fn fail_step(report: BorrowedFd<'_>, step: usize, errno: Errno) -> ! {
    let packed = (i32::try_from(step).unwrap_or(0xff) << 16) | (errno.raw() & 0xffff);
    send(report, MSG_STEP_FAILED, packed);
    exit_now(EXIT_SETUP_FAILED)
}

/// The namespaces both kinds of child enter, and what they mount in them.
struct Namespaces<'a> {
    new_netns: bool,
    new_pidns: bool,
    bind_file: Option<(&'a CStr, &'a CStr)>,
    noexec: &'a [CString],
    exec_again: &'a [CString],
}

impl Namespaces<'_> {
    /// Enters them (a PID namespace was entered by the `clone`), or says
    /// which step failed how. Async-signal-safe.
    fn enter(&self) -> Result<(), (usize, Errno)> {
        let at = |i: usize| move |e: Errno| (i, e);
        if self.new_netns {
            crate::netns::unshare_net().map_err(at(1))?;
            crate::netns::bring_up_loopback().map_err(at(2))?;
        }
        if self.new_pidns || self.bind_file.is_some() || !self.noexec.is_empty() {
            crate::mounts::unshare_mount_ns().map_err(at(3))?;
        }
        if let Some((source, target)) = self.bind_file {
            crate::mounts::bind_mount_readonly(source, target).map_err(at(4))?;
        }
        for path in self.noexec {
            crate::mounts::set_noexec(path, true).map_err(at(5))?;
        }
        for path in self.exec_again {
            crate::mounts::set_noexec(path, false).map_err(at(5))?;
        }
        Ok(())
    }
}

/// Forks the child that becomes the workload's init program (see
/// [`InitSpec`]): it enters the namespaces (as PID 1 of a new PID
/// namespace with `spec.new_pidns`), then execs the program with only the
/// standard streams, `spec.plan`, `control` and `spec.relay` open. A failure before the
/// exec (the exec's included) is reported on `report`, which reads EOF
/// once the exec succeeded. Returns the child's pid in the parent.
pub(crate) fn fork_init(
    spec: &InitSpec<'_>,
    report: &OwnedFd,
    control: &OwnedFd,
) -> Result<libc::pid_t, Errno> {
    let fd_arg = |fd: BorrowedFd<'_>| CString::new(fd.as_raw_fd().to_string());
    let mut args = vec![spec.program.to_owned()];
    args.extend(spec.args.iter().cloned());
    args.push(CString::from(c"--plan-fd"));
    args.push(fd_arg(spec.plan).map_err(|_| Errno(libc::EINVAL))?);
    args.push(CString::from(c"--control-fd"));
    args.push(fd_arg(control.as_fd()).map_err(|_| Errno(libc::EINVAL))?);
    if let Some(relay) = spec.relay {
        args.push(CString::from(c"--relay-fd"));
        args.push(fd_arg(relay).map_err(|_| Errno(libc::EINVAL))?);
    }
    let argv = CStrArray::new(&args);
    let envp = CStrArray::new(&[]);
    // Opened before the child mounts anything: a tree mounted `noexec` for
    // the workload may hold the init's program (a build directory the
    // workload may write), and the file opened here is still executable.
    let program = crate::sys::fd::open_path(spec.program)?;
    let parent = libc::pid_t::try_from(std::process::id()).map_err(|_| Errno(libc::ESRCH))?;
    // SAFETY: the child only runs `init_child_main`, which makes
    // async-signal-safe calls on memory prepared above and never returns.
    let pid = unsafe { fork_into(spec.new_pidns)? };
    if pid == 0 {
        let ends = InitEnds {
            program: program.as_fd(),
            report: report.as_fd(),
            control: control.as_fd(),
        };
        init_child_main(spec, &argv, &envp, parent, ends);
    }
    Ok(pid)
}

/// The descriptors the child of [`fork_init`] uses.
#[derive(Clone, Copy)]
struct InitEnds<'a> {
    /// The init's program, opened `O_PATH`.
    program: BorrowedFd<'a>,
    report: BorrowedFd<'a>,
    control: BorrowedFd<'a>,
}

/// The child of [`fork_init`]. Never returns: it execs or `_exit`s.
fn init_child_main(
    spec: &InitSpec<'_>,
    argv: &CStrArray<'_>,
    envp: &CStrArray<'_>,
    parent: libc::pid_t,
    ends: InitEnds<'_>,
) -> ! {
    let InitEnds {
        program,
        report,
        control,
    } = ends;
    let step = |i: usize, result: Result<(), Errno>| {
        if let Err(e) = result {
            fail_step(report, i, e);
        }
    };
    step(0, reset_signals());
    let namespaces = Namespaces {
        new_netns: spec.new_netns,
        new_pidns: spec.new_pidns,
        bind_file: spec.bind_file,
        noexec: spec.noexec,
        exec_again: spec.exec_again,
    };
    if let Err((i, e)) = namespaces.enter() {
        fail_step(report, i, e);
    }
    if spec.new_pidns {
        step(6, crate::mounts::mount_private_proc());
    }
    // In a new PID namespace the parent is outside it and `getppid` says 0
    // whether or not it is alive; the init then sees its parent's death as
    // the launch link's EOF.
    let parent_seen = if spec.new_pidns { 0 } else { parent };
    step(
        15,
        crate::process::set_pdeathsig(libc::SIGKILL, parent_seen),
    );
    for (target, fd) in (0..).zip(spec.stdio.iter()) {
        if let Some(fd) = fd {
            step(9, dup_onto_stdio(*fd, target));
        }
    }
    step(16, mark_cloexec_from(3));
    step(16, crate::sys::fd::clear_cloexec(spec.plan));
    step(16, crate::sys::fd::clear_cloexec(control));
    if let Some(relay) = spec.relay {
        step(16, crate::sys::fd::clear_cloexec(relay));
    }
    let errno = crate::sys::process::execve_fd(program, argv, envp);
    fail_step(report, 8, errno)
}

/// `dup2(fd, target)` for `target` in 0..=2, in the child only: it closes
/// whatever the child had there, which nothing of the child uses again.
fn dup_onto_stdio(fd: BorrowedFd<'_>, target: libc::c_int) -> Result<(), Errno> {
    if !(0..=2).contains(&target) {
        return Err(Errno(libc::EBADF));
    }
    // SAFETY: dup2 takes two integers; `fd` is live. The replaced standard
    // stream belongs to no owned handle in this single-threaded child.
    crate::errno::check_int(unsafe { libc::dup2(fd.as_raw_fd(), target) }).map(drop)
}

/// One 8-byte report message (tag, value).
fn send(report: BorrowedFd<'_>, tag: i32, value: i32) {
    let mut msg = [0_u8; 8];
    for (dst, src) in msg
        .iter_mut()
        .zip(tag.to_ne_bytes().into_iter().chain(value.to_ne_bytes()))
    {
        *dst = src;
    }
    let _ = write_all(report, &msg);
}

/// Restores what a Rust parent changed and an exec would keep: `SIGPIPE`
/// (ignored by the Rust runtime) back to its default, `SIGCHLD` too (an
/// ignored one would reap children before the init could see them), and
/// an empty signal mask.
fn reset_signals() -> Result<(), Errno> {
    crate::sys::process::default_signal_disposition(libc::SIGPIPE)?;
    crate::sys::process::default_signal_disposition(libc::SIGCHLD)?;
    crate::sys::process::unblock_all_signals()
}

/// Whether a forked child can `unshare(flags)` (for namespaces a threaded
/// process cannot enter, such as a new user namespace).
pub(crate) fn unshare_works_in_child(flags: libc::c_int) -> bool {
    // SAFETY: the child only calls unshare and _exit, both
    // async-signal-safe, so forking a multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: unshare takes a flag word and touches no memory of ours;
        // this child is single-threaded and exits right after.
        let ok = unsafe { libc::unshare(flags) } == 0;
        exit_now(i32::from(!ok));
    }
    if pid < 0 {
        return false;
    }
    loop {
        match waitpid(pid, 0) {
            Ok((ret, status)) if ret == pid => {
                return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            }
            Ok(_) | Err(Errno(libc::EINTR)) => {}
            Err(_) => return false,
        }
    }
}
