//! `spawn`: the child sequence with its handshake, against the real kernel.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::ffi::CString;
use std::io::Read;
use std::os::fd::AsFd;
use std::time::Duration;

use common::{TempDir, landlock_abi_at_least, pipe};
use enforcer::{
    ChildSpec, Compat, ExitStatus, FsAccess, FsRule, LandlockSpec, PreparedFilter, PreparedRuleset,
    Reaped, SpawnError,
};

fn ruleset() -> PreparedRuleset {
    let read = FsAccess::READ_FILE | FsAccess::READ_DIR;
    enforcer::prepare(&LandlockSpec {
        mode: Compat::BestEffort,
        min_abi: 1,
        fs: ["/usr", "/lib", "/lib64", "/etc", "/bin"]
            .iter()
            .map(|p| FsRule {
                path: p.into(),
                access: read | FsAccess::EXECUTE,
            })
            .collect(),
        tcp_connect_ports: None,
        tcp_bind_ports: None,
        scope_signals_and_abstract_unix: false,
    })
    .unwrap()
}

fn filter() -> PreparedFilter {
    enforcer::build(&common::product_filter()).unwrap()
}

fn cstrings(items: &[&str]) -> Vec<CString> {
    items.iter().map(|s| CString::new(*s).unwrap()).collect()
}

/// Waits for `pid` with `try_reap`, up to ten seconds.
fn reap(pid: u32) -> ExitStatus {
    common::eventually(Duration::from_secs(10), || {
        match enforcer::try_reap(Some(pid)).unwrap() {
            Reaped::Exited(_, status) => Some(status),
            _ => None,
        }
    })
    .expect("the child did not end")
}

#[test]
fn a_started_child_execs_and_its_status_comes_back() {
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["sh", "-c", "exit 7"]);
    let spec = ChildSpec {
        new_netns: false,
        bind_file: None,
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/",
        ruleset: &ruleset,
        filter: &filter,
        program: c"/bin/sh",
        argv: &argv,
        envp: &[],
    };
    let mut pending = enforcer::spawn(&spec).unwrap();
    let listener = pending.take_listener().expect("a listener");
    let pid = pending.start().unwrap();
    assert_eq!(reap(pid), ExitStatus::Code(7));
    drop(listener);
}

#[test]
fn a_failing_step_is_named_and_nothing_runs() {
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["true"]);
    let spec = ChildSpec {
        new_netns: false,
        bind_file: None,
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/nonexistent/spawn-test",
        ruleset: &ruleset,
        filter: &filter,
        program: c"/usr/bin/true",
        argv: &argv,
        envp: &[],
    };
    match enforcer::spawn(&spec) {
        Err(SpawnError::Step { step, errno }) => {
            assert_eq!(step, "change to the working directory");
            assert_eq!(errno.raw(), libc::ENOENT);
        }
        other => panic!("expected a failed step, got {other:?}"),
    }
}

#[test]
fn a_missing_program_is_reported_as_an_exec_failure() {
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["nope"]);
    let spec = ChildSpec {
        new_netns: false,
        bind_file: None,
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/",
        ruleset: &ruleset,
        filter: &filter,
        program: c"/nonexistent/spawn-test-program",
        argv: &argv,
        envp: &[],
    };
    let pending = enforcer::spawn(&spec).unwrap();
    match pending.start() {
        Err(SpawnError::Exec(errno)) => assert_eq!(errno.raw(), libc::ENOENT),
        other => panic!("expected an exec failure, got {other:?}"),
    }
}

#[test]
fn a_child_never_started_never_runs_the_command() {
    let dir = TempDir::new("spawn-never");
    let marker = dir.path().join("ran");
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["sh", "-c", &format!("echo > {}", marker.display())]);
    let spec = ChildSpec {
        new_netns: false,
        bind_file: None,
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/",
        ruleset: &ruleset,
        filter: &filter,
        program: c"/bin/sh",
        argv: &argv,
        envp: &[],
    };
    let pending = enforcer::spawn(&spec).unwrap();
    let pid = pending.pid();
    drop(pending);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(!marker.exists());
}

#[test]
fn the_child_sees_a_private_resolv_conf_and_the_host_keeps_its_own() {
    if !landlock_abi_at_least(1) {
        return;
    }
    let dir = TempDir::new("spawn-bind");
    let private = dir.path().join("resolv.conf");
    std::fs::write(&private, "nameserver 127.0.0.1\n").unwrap();
    let host_before = std::fs::read("/etc/resolv.conf").ok();
    let source = common::cstr(&private);
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["sh", "-c", "cat /etc/resolv.conf"]);
    let (out_r, out_w) = pipe();
    let spec = ChildSpec {
        new_netns: true,
        bind_file: Some((&source, c"/etc/resolv.conf")),
        stdio: [None, Some(out_w.as_fd()), None],
        drop_bounding: true,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/",
        ruleset: &ruleset,
        filter: &filter,
        program: c"/bin/sh",
        argv: &argv,
        envp: &[],
    };
    let mut pending = enforcer::spawn(&spec).unwrap();
    let _listener = pending.take_listener();
    let pid = pending.start().unwrap();
    drop(out_w);
    let mut out = String::new();
    std::fs::File::from(out_r).read_to_string(&mut out).unwrap();
    assert_eq!(reap(pid), ExitStatus::Code(0));
    assert!(out.starts_with("nameserver 127.0.0.1\n"), "{out}");
    assert_eq!(std::fs::read("/etc/resolv.conf").ok(), host_before);
}
