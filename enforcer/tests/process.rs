//! Child-side hardening, proved from outside through `/proc/<pid>/status`.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::os::fd::AsRawFd;
use std::time::Duration;

use common::{Exit, fork_child, kill, pipe, read_u32, wait, write_u32};

fn status_line(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn child_sequence_leaves_no_privilege() {
    let last_cap = enforcer::cap_last_cap().unwrap();
    let nobody = enforcer::resolve_user("nobody").unwrap();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let (ready_r, ready_w) = pipe();
    let (hold_r, hold_w) = pipe();
    let pid = fork_child(|| {
        if enforcer::drop_bounding_and_ambient(last_cap).is_err() {
            return 2;
        }
        if enforcer::set_identity(nobody.uid, nobody.gid, &[nobody.gid]).is_err() {
            return 3;
        }
        if enforcer::clear_capability_sets().is_err() {
            return 4;
        }
        if enforcer::set_no_new_privs().is_err() {
            return 5;
        }
        if enforcer::set_pdeathsig(libc::SIGKILL, parent).is_err() {
            return 6;
        }
        let mut sig = 0;
        // SAFETY: PR_GET_PDEATHSIG writes one int into `sig`, a live local.
        unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut sig) };
        if sig != libc::SIGKILL {
            return 7;
        }
        // Privilege is gone for good: going back to root must fail.
        // SAFETY: setresuid takes plain integers; the test only reads whether it fails.
        if unsafe { libc::syscall(libc::SYS_setresuid, 0, 0, 0) } != -1 {
            return 8;
        }
        write_u32(&ready_w, 1);
        // Our copy of the write end would keep the read below from ever
        // seeing EOF.
        // SAFETY: the child closes its inherited copy of the fd, which nothing else in it uses.
        unsafe { libc::close(hold_w.as_raw_fd()) };
        read_u32(&hold_r);
        0
    });
    drop((ready_w, hold_r));
    assert_eq!(
        read_u32(&ready_r),
        Some(1),
        "child failed: {:?}",
        common::try_wait(pid)
    );

    let upid = pid as u32;
    assert!(enforcer::no_new_privs(upid).unwrap());
    assert_eq!(enforcer::effective_caps(upid).unwrap(), 0);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(enforcer::caps(upid, set).unwrap(), 0, "{set}");
    }
    let uid = nobody.uid.to_string();
    assert_eq!(status_line(pid, "Uid"), [uid.as_str(); 4].join("\t"));
    assert_eq!(status_line(pid, "Groups"), nobody.gid.to_string());
    drop(hold_w);
    assert_eq!(wait(pid), Exit::Code(0));
}

#[test]
fn root_reads_as_privileged_for_contrast() {
    let me = std::process::id();
    assert_ne!(
        enforcer::effective_caps(me).unwrap(),
        0,
        "tests run as root"
    );
    assert_eq!(
        enforcer::resolve_user("root").unwrap(),
        enforcer::UserIds { uid: 0, gid: 0 }
    );
    assert_eq!(enforcer::resolve_group("root").unwrap(), 0);
    assert!(matches!(
        enforcer::resolve_user("no-such-user-enforcer"),
        Err(enforcer::LookupError::NoUser(_))
    ));
    assert!(enforcer::cap_last_cap().unwrap() >= 40);
}

#[test]
fn pdeathsig_kills_the_child_when_the_parent_dies() {
    // Orphans are re-parented to us instead of init, so we can reap them.
    assert_eq!(
        // SAFETY: PR_SET_CHILD_SUBREAPER takes plain integers.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let (pid_r, pid_w) = pipe();
    let middle = fork_child(|| {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let (ready_r, ready_w) = pipe();
        let grandchild = fork_child(|| {
            if enforcer::set_pdeathsig(libc::SIGKILL, me).is_err() {
                return 2;
            }
            write_u32(&ready_w, 1);
            loop {
                // SAFETY: pause has no preconditions; the child waits to be killed.
                unsafe { libc::pause() };
            }
        });
        drop(ready_w);
        if read_u32(&ready_r) != Some(1) {
            return 3;
        }
        write_u32(&pid_w, grandchild as u32);
        0
    });
    drop(pid_w);
    let grandchild = read_u32(&pid_r).expect("middle process failed") as i32;
    assert_eq!(wait(middle), Exit::Code(0));
    let exit = common::eventually(Duration::from_secs(5), || common::try_wait(grandchild));
    if exit.is_none() {
        kill(grandchild);
    }
    assert_eq!(exit, Some(Exit::Signal(libc::SIGKILL)));
}

#[test]
fn pdeathsig_reports_a_parent_that_is_already_gone() {
    let pid = fork_child(|| {
        // Pretend the parent we forked from was someone else.
        match enforcer::set_pdeathsig(libc::SIGKILL, 1) {
            Err(enforcer::Errno(libc::ESRCH)) => 0,
            _ => 2,
        }
    });
    assert_eq!(wait(pid), Exit::Code(0));
}

#[test]
fn inherited_fds_are_marked_close_on_exec() {
    // SAFETY: dup, fcntl and close act on fd numbers only; the child owns what it opens.
    let pid = fork_child(|| unsafe {
        let fd = libc::dup(0);
        if fd < 0 || libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0 {
            return 2;
        }
        if enforcer::mark_fds_cloexec_from(3).is_err() {
            return 3;
        }
        if libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC == 0 {
            return 4;
        }
        if libc::fcntl(0, libc::F_GETFD) & libc::FD_CLOEXEC != 0 {
            return 5;
        }
        0
    });
    assert_eq!(wait(pid), Exit::Code(0));
}

/// Why `set_pdeathsig` comes after `set_identity`: the kernel clears the
/// parent-death signal on every credential change.
#[test]
fn a_credential_change_clears_pdeathsig() {
    let nobody = enforcer::resolve_user("nobody").unwrap();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let pid = fork_child(|| {
        if enforcer::set_pdeathsig(libc::SIGKILL, parent).is_err() {
            return 2;
        }
        if enforcer::set_identity(nobody.uid, nobody.gid, &[nobody.gid]).is_err() {
            return 3;
        }
        let mut sig = -1;
        // SAFETY: PR_GET_PDEATHSIG writes one int into `sig`, a live local.
        unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut sig) };
        if sig == 0 { 0 } else { 4 }
    });
    assert_eq!(wait(pid), Exit::Code(0));
}
