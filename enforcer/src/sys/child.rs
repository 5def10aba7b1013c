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

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::child_spec::{ChildSpec, EXIT_SETUP_FAILED};
use crate::errno::Errno;
use crate::sys::fd::{chdir, mark_cloexec_from, read, write_all};
use crate::sys::process::{CStrArray, exit_now, waitpid};

/// The child steps, in order; a failure report names one by its index.
pub(crate) const STEPS: [&str; 16] = [
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
) -> Result<libc::pid_t, Errno> {
    let argv = CStrArray::new(spec.argv);
    let envp = CStrArray::new(spec.envp);
    let parent = libc::pid_t::try_from(std::process::id()).map_err(|_| Errno(libc::ESRCH))?;
    // SAFETY: the child only runs `child_main`, which makes async-signal-safe
    // calls on memory prepared above (`spec`, `argv`, `envp`, the pipes)
    // and never returns, so forking a threaded parent is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child_main(spec, &argv, &envp, parent, report.as_fd(), go.as_fd());
    }
    if pid < 0 {
        return Err(Errno::last());
    }
    Ok(pid)
}

/// The forked child. Never returns: it execs or `_exit`s.
fn child_main(
    spec: &ChildSpec<'_>,
    argv: &CStrArray<'_>,
    envp: &CStrArray<'_>,
    parent: libc::pid_t,
    report: BorrowedFd<'_>,
    go: BorrowedFd<'_>,
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
            step(5, dup_onto_stdio(*fd, target));
        }
    }
    if spec.drop_bounding {
        step(6, crate::process::drop_bounding_and_ambient(spec.last_cap));
    }
    if let Some(id) = spec.identity {
        step(7, crate::process::set_identity(id.uid, id.gid, id.groups));
    }
    step(8, chdir(spec.cwd));
    step(9, crate::process::clear_capability_sets());
    step(10, crate::process::set_no_new_privs());
    step(11, crate::process::set_pdeathsig(libc::SIGKILL, parent));
    step(12, mark_cloexec_from(3));
    step(13, spec.ruleset.restrict_self());
    let listener = match spec.filter.install_with_listener() {
        Ok(fd) => fd,
        Err(e) => fail(14, e),
    };
    send(report, MSG_LISTENER, listener.as_raw_fd());
    let mut byte = [0_u8; 1];
    loop {
        match read(go, &mut byte) {
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
/// (ignored by the Rust runtime) back to its default, and an empty signal
/// mask.
fn reset_signals() -> Result<(), Errno> {
    crate::sys::process::default_signal_disposition(libc::SIGPIPE)?;
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
