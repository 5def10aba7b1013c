//! Landlock against the real kernel: every forbidden operation is tried by a
//! child that applied the ruleset, and every allowed one must still work.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::ffi::CString;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::{Exit, TempDir, cstr, failed_with, fork_child, landlock_abi_at_least, wait};
use enforcer::{Compat, Downgrade, FsAccess, FsRule, LandlockError, LandlockSpec, prepare};

const READ: FsAccess = FsAccess::READ_FILE.union(FsAccess::READ_DIR);
const WRITE_TREE: FsAccess = READ
    .union(FsAccess::WRITE_FILE)
    .union(FsAccess::TRUNCATE)
    .union(FsAccess::MAKE_REG)
    .union(FsAccess::MAKE_DIR)
    .union(FsAccess::REMOVE_FILE)
    .union(FsAccess::REMOVE_DIR);

fn rule(path: impl Into<PathBuf>, access: FsAccess) -> FsRule {
    FsRule {
        path: path.into(),
        access,
    }
}

fn spec(fs: Vec<FsRule>) -> LandlockSpec {
    LandlockSpec {
        mode: Compat::Hard,
        min_abi: 5,
        fs,
        tcp_connect_ports: None,
        tcp_bind_ports: None,
        scope_signals_and_abstract_unix: false,
        private_proc: false,
    }
}

fn open(path: &CString, flags: i32) -> i32 {
    // SAFETY: `path` is a NUL-terminated string alive for the whole call.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd >= 0 {
        // SAFETY: `fd` was opened just above and is closed once, here.
        unsafe { libc::close(fd) };
    }
    fd
}

#[test]
fn filesystem_attacks_fail_and_allowed_work_still_works() {
    if !landlock_abi_at_least(5) {
        return;
    }
    let base = TempDir::new("landlock");
    let b = base.path();
    for d in ["ro", "rw", "rw2", "notrunc"] {
        std::fs::create_dir(b.join(d)).unwrap();
    }
    std::fs::write(b.join("ro/file"), "read me").unwrap();
    std::fs::write(b.join("notrunc/file"), "keep my length").unwrap();
    std::fs::write(b.join("unlisted"), "secret").unwrap();
    std::fs::write(b.join("rw/victim"), "move me").unwrap();
    std::fs::copy("/usr/bin/true", b.join("rw/true")).unwrap();
    std::fs::set_permissions(b.join("rw/true"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let prepared = prepare(&spec(vec![
        rule("/usr", READ | FsAccess::EXECUTE),
        rule(b.join("ro"), READ),
        rule(b.join("rw"), WRITE_TREE),
        rule(b.join("rw2"), WRITE_TREE),
        rule(b.join("notrunc"), READ | FsAccess::WRITE_FILE),
    ]))
    .unwrap();
    assert!(prepared.report().is_complete(), "{:?}", prepared.report());
    assert_eq!(prepared.report().handled_fs, FsAccess::ALL);

    let p = |s: &str| cstr(&b.join(s));
    let (rw_new, outside, ro_file, unlisted) =
        (p("rw/new"), p("outside"), p("ro/file"), p("unlisted"));
    let (nt_file, victim, moved, renamed) = (
        p("notrunc/file"),
        p("rw/victim"),
        p("rw2/victim"),
        p("rw/renamed"),
    );
    let (link2, rw_true) = (p("rw2/link"), p("rw/true"));
    let passwd = CString::new("/etc/passwd").unwrap();
    let sh = CString::new("/usr/bin/sh").unwrap();
    let (dash_c, exit42) = (
        CString::new("-c").unwrap(),
        CString::new("exit 42").unwrap(),
    );

    // SAFETY: in the forked child: every path is a CString built before the
    // fork and alive until the child execs or exits, argv and envp are
    // null-terminated arrays on the child's stack, and the other arguments are
    // integers.
    let pid = fork_child(|| unsafe {
        if enforcer::set_no_new_privs().is_err() || prepared.restrict_self().is_err() {
            return 2;
        }
        let wr = libc::O_WRONLY | libc::O_CREAT;
        if open(&rw_new, wr) < 0 {
            return 3;
        }
        if !failed_with(open(&outside, wr), libc::EACCES) {
            return 4;
        }
        if open(&ro_file, libc::O_RDONLY) < 0 {
            return 5;
        }
        if !failed_with(open(&ro_file, libc::O_WRONLY), libc::EACCES) {
            return 6;
        }
        if !failed_with(open(&unlisted, libc::O_RDONLY), libc::EACCES)
            || !failed_with(open(&passwd, libc::O_RDONLY), libc::EACCES)
        {
            return 7;
        }
        if !failed_with(libc::truncate(ro_file.as_ptr(), 0), libc::EACCES) {
            return 8;
        }
        // Writing is granted there, truncating is not.
        if open(&nt_file, libc::O_WRONLY) < 0 {
            return 9;
        }
        if !failed_with(libc::truncate(nt_file.as_ptr(), 0), libc::EACCES)
            || !failed_with(open(&nt_file, libc::O_WRONLY | libc::O_TRUNC), libc::EACCES)
        {
            return 10;
        }
        // Moving or linking across two roots needs `refer`, granted to neither.
        if !failed_with(libc::rename(victim.as_ptr(), moved.as_ptr()), libc::EXDEV) {
            return 11;
        }
        if !failed_with(libc::link(victim.as_ptr(), link2.as_ptr()), libc::EXDEV) {
            return 12;
        }
        if libc::rename(victim.as_ptr(), renamed.as_ptr()) != 0 {
            return 13;
        }
        let argv = [rw_true.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        if !failed_with(
            libc::execve(rw_true.as_ptr(), argv.as_ptr(), envp.as_ptr()),
            libc::EACCES,
        ) {
            return 14;
        }
        let argv = [
            sh.as_ptr(),
            dash_c.as_ptr(),
            exit42.as_ptr(),
            std::ptr::null(),
        ];
        libc::execve(sh.as_ptr(), argv.as_ptr(), envp.as_ptr());
        15
    });
    assert_eq!(
        wait(pid),
        Exit::Code(42),
        "exit code names the failed check"
    );
    assert!(!b.join("outside").exists());
    assert_eq!(
        std::fs::read_to_string(b.join("notrunc/file")).unwrap(),
        "keep my length"
    );
    assert!(b.join("rw/renamed").exists() && !b.join("rw2/victim").exists());
}

#[test]
fn hard_mode_refuses_what_the_kernel_cannot_keep() {
    let mut s = spec(vec![rule("/usr", READ)]);
    s.min_abi = 99;
    match prepare(&s) {
        Err(LandlockError::AbiTooLow { required: 99, .. }) => {}
        other => panic!("expected AbiTooLow, got {other:?}"),
    }
}

#[test]
fn hard_mode_skips_and_reports_a_missing_path() {
    // A rule on a path that does not exist grants nothing: the sandbox is
    // stricter than written, never looser, so hard mode goes on and says so.
    let missing = PathBuf::from("/nonexistent/enforcer-test");
    let s = spec(vec![rule("/usr", READ), rule(&missing, READ)]);
    let prepared = prepare(&s).unwrap();
    let report = prepared.report();
    assert_eq!(
        report
            .downgrades
            .iter()
            .filter(|d| matches!(d, Downgrade::MissingPath { .. }))
            .collect::<Vec<_>>(),
        vec![&Downgrade::MissingPath { path: missing }]
    );
    assert!(report.is_complete());
}

#[test]
fn best_effort_reports_exactly_what_it_dropped() {
    let missing = PathBuf::from("/nonexistent/enforcer-test");
    let mut s = spec(vec![
        rule(&missing, READ),
        rule("/etc/passwd", READ | FsAccess::MAKE_DIR),
    ]);
    s.mode = Compat::BestEffort;
    s.min_abi = 99;
    let prepared = prepare(&s).unwrap();
    let report = prepared.report();
    let abi = report.kernel_abi;
    assert!(report.downgrades.contains(&Downgrade::AbiBelowMinimum {
        kernel: abi,
        required: 99
    }));
    assert!(
        report
            .downgrades
            .contains(&Downgrade::MissingPath { path: missing })
    );
    assert!(report.downgrades.contains(&Downgrade::NotApplicableToFile {
        path: "/etc/passwd".into(),
        rights: FsAccess::READ_DIR | FsAccess::MAKE_DIR,
    }));
    assert!(!report.is_complete());
    for d in &report.downgrades {
        assert!(!d.to_string().is_empty());
    }
}

#[test]
fn rights_know_their_abi() {
    assert_eq!(FsAccess::EXECUTE.min_abi(), 1);
    assert_eq!(FsAccess::REFER.min_abi(), 2);
    assert_eq!((FsAccess::READ_FILE | FsAccess::TRUNCATE).min_abi(), 3);
    assert_eq!(FsAccess::IOCTL_DEV.min_abi(), 5);
    assert_eq!(FsAccess::supported_by_abi(1).bits(), (1 << 13) - 1);
    assert_eq!(
        FsAccess::supported_by_abi(4),
        FsAccess::ALL.difference(FsAccess::IOCTL_DEV)
    );
    assert_eq!(FsAccess::supported_by_abi(7), FsAccess::ALL);
    assert_eq!(FsAccess::from_bits(1 << 16), None);
    assert_eq!(
        (FsAccess::READ_FILE | FsAccess::EXECUTE).to_string(),
        "execute|read_file"
    );
    assert_eq!(FsAccess::ALL.iter().count(), 16);
}

#[test]
fn tcp_connect_is_limited_to_the_listed_ports() {
    if !landlock_abi_at_least(4) {
        return;
    }
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut s = spec(vec![]);
    s.min_abi = 4;
    s.tcp_connect_ports = Some(vec![8080, allowed.local_addr().unwrap().port()]);
    let prepared = prepare(&s).unwrap();
    let (ok_port, bad_port) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );

    let pid = fork_child(|| {
        if enforcer::set_no_new_privs().is_err() || prepared.restrict_self().is_err() {
            return 2;
        }
        if !failed_with(connect_loopback(bad_port), libc::EACCES) {
            return 3;
        }
        if connect_loopback(ok_port) != 0 {
            return 4;
        }
        0
    });
    assert_eq!(wait(pid), Exit::Code(0));
}

fn connect_loopback(port: u16) -> i32 {
    // SAFETY: `addr` is a live `sockaddr_in` of the length passed, `fd` is
    // closed once, and `__errno_location` points at this thread's errno.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let ret = libc::connect(
            fd,
            (&raw const addr).cast(),
            size_of::<libc::sockaddr_in>() as u32,
        );
        let saved = common::errno();
        libc::close(fd);
        *libc::__errno_location() = saved;
        ret
    }
}

#[test]
fn scoped_child_cannot_signal_outside_its_domain() {
    if !landlock_abi_at_least(6) {
        return;
    }
    let mut s = spec(vec![]);
    s.min_abi = 6;
    s.scope_signals_and_abstract_unix = true;
    let prepared = prepare(&s).unwrap();
    // SAFETY: getpid takes no arguments and cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: kill and getpid take integers only.
    let pid = fork_child(|| unsafe {
        if libc::kill(parent, 0) != 0 {
            return 2;
        }
        if enforcer::set_no_new_privs().is_err() || prepared.restrict_self().is_err() {
            return 3;
        }
        if !failed_with(libc::kill(parent, 0), libc::EPERM) {
            return 4;
        }
        // Its own process is inside the domain.
        if libc::kill(libc::getpid(), 0) != 0 {
            return 5;
        }
        0
    });
    assert_eq!(wait(pid), Exit::Code(0));
}
