//! `spawn`: the child sequence with its handshake, against the real kernel.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::ffi::CString;
use std::io::Read;
use std::os::fd::AsFd;
use std::time::Duration;

use common::{
    Exit, TempDir, fork_child, kill, landlock_abi_at_least, pipe, read_u32, wait, write_u32,
};
use enforcer::{
    ChildSpec, Compat, ExitStatus, FsAccess, FsRule, LandlockSpec, PreparedFilter, PreparedRuleset,
    Reaped, SpawnError,
};

/// The system paths, and `extra`, readable.
fn ruleset_reading(extra: &[&std::path::Path]) -> PreparedRuleset {
    let read = FsAccess::READ_FILE | FsAccess::READ_DIR;
    let mut fs: Vec<FsRule> = ["/usr", "/lib", "/lib64", "/etc", "/bin"]
        .iter()
        .map(|p| FsRule {
            path: p.into(),
            access: read | FsAccess::EXECUTE,
        })
        .collect();
    fs.extend(extra.iter().map(|p| FsRule {
        path: p.to_path_buf(),
        access: read,
    }));
    enforcer::prepare(&LandlockSpec {
        mode: Compat::BestEffort,
        min_abi: 1,
        fs,
        tcp_connect_ports: None,
        tcp_bind_ports: None,
        scope_signals_and_abstract_unix: false,
        private_proc: false,
    })
    .unwrap()
}

/// The system paths, readable.
fn ruleset() -> PreparedRuleset {
    ruleset_reading(&[])
}

/// A child running `program` with `argv` in `/`, nothing else changed.
fn plain<'a>(
    ruleset: &'a PreparedRuleset,
    filter: &'a PreparedFilter,
    program: &'a std::ffi::CStr,
    argv: &'a [CString],
) -> ChildSpec<'a> {
    ChildSpec {
        new_netns: false,
        bind_file: None,
        noexec: &[],
        exec_again: &[],
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().unwrap(),
        identity: None,
        cwd: c"/",
        ruleset,
        filter,
        program,
        argv,
        envp: &[],
    }
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

/// Runs `spec` with its stdout piped back: what it printed and how it
/// ended.
fn output_of(spec: ChildSpec<'_>) -> (String, ExitStatus) {
    let (out_r, out_w) = pipe();
    let [stdin, _, stderr] = spec.stdio;
    let spec = ChildSpec {
        stdio: [stdin, Some(out_w.as_fd()), stderr],
        ..spec
    };
    let mut pending = enforcer::spawn(&spec).unwrap();
    let _listener = pending.take_listener();
    let running = pending.start().unwrap();
    drop(out_w);
    let mut out = String::new();
    std::fs::File::from(out_r).read_to_string(&mut out).unwrap();
    (out, running.wait().unwrap())
}

#[test]
fn a_started_child_execs_and_its_status_comes_back() {
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["sh", "-c", "exit 7"]);
    let spec = plain(&ruleset, &filter, c"/bin/sh", &argv);
    let mut pending = enforcer::spawn(&spec).unwrap();
    let listener = pending.take_listener().expect("a listener");
    let running = pending.start().unwrap();
    assert_eq!(running.wait().unwrap(), ExitStatus::Code(7));
    drop(listener);
    let mut pending = enforcer::spawn(&plain(&ruleset, &filter, c"/bin/sh", &argv)).unwrap();
    let _listener = pending.take_listener();
    let running = pending.start().unwrap();
    assert_eq!(running.pid(), running.workload_pid());
    assert_eq!(reap(running.pid()), ExitStatus::Code(7));
}

#[test]
fn a_failing_step_is_named_and_nothing_runs() {
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["true"]);
    let mut spec = plain(&ruleset, &filter, c"/usr/bin/true", &argv);
    spec.cwd = c"/nonexistent/spawn-test";
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
    let spec = plain(&ruleset, &filter, c"/nonexistent/spawn-test-program", &argv);
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
    let pending = enforcer::spawn(&plain(&ruleset, &filter, c"/bin/sh", &argv)).unwrap();
    let pid = pending.pid();
    drop(pending);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(!marker.exists());
}

/// A supervisor killed outright between the fork and the go never has
/// its command run: the pending child (waiting for the go with its
/// filter in place) ends by its parent-death signal, and the marker the
/// command would write never appears. The test adopts the orphan (`PR_SET_CHILD_SUBREAPER`) to
/// watch it end.
#[test]
fn a_child_whose_supervisor_is_killed_before_the_go_never_runs_the_command() {
    // SAFETY: prctl with integer arguments; nextest runs each test in a
    // process of its own, so no other test is affected.
    let adopted = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(adopted, 0);
    let dir = TempDir::new("spawn-killed");
    let marker = dir.path().join("ran");
    let (ruleset, filter) = (ruleset(), filter());
    let argv = cstrings(&["sh", "-c", &format!("echo > {}", marker.display())]);
    let (pid_r, pid_w) = pipe();
    let supervisor = fork_child(|| {
        let spec = plain(&ruleset, &filter, c"/bin/sh", &argv);
        let Ok(pending) = enforcer::spawn(&spec) else {
            return 1;
        };
        if !write_u32(&pid_w, pending.pid()) {
            return 2;
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    drop(pid_w);
    let child = read_u32(&pid_r).expect("no pending child") as libc::pid_t;
    assert!(std::path::Path::new(&format!("/proc/{child}")).exists());
    kill(supervisor);
    assert_eq!(wait(supervisor), Exit::Signal(libc::SIGKILL));
    let exit = wait(child);
    assert!(!marker.exists(), "the command ran ({exit:?})");
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
    let mut spec = plain(&ruleset, &filter, c"/bin/sh", &argv);
    spec.new_netns = true;
    spec.bind_file = Some((&source, c"/etc/resolv.conf"));
    spec.drop_bounding = true;
    let (out, status) = output_of(spec);
    assert_eq!(status, ExitStatus::Code(0));
    assert!(out.starts_with("nameserver 127.0.0.1\n"), "{out}");
    assert_eq!(std::fs::read("/etc/resolv.conf").ok(), host_before);
}

// ---- trees mounted noexec ----

#[test]
fn a_noexec_tree_maps_nothing_executable_and_exec_again_below_it_does() {
    let dir = TempDir::new("spawn-noexec");
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    for d in [dir.path(), sub.as_path()] {
        std::fs::copy("/usr/bin/true", d.join("true")).unwrap();
    }
    let (ruleset, filter) = (ruleset_reading(&[dir.path()]), filter());
    // The loader maps each copy executable, as it maps a library.
    let script = format!(
        "for p in {0}/true {0}/sub/true; do /lib64/ld-linux-x86-64.so.2 $p 2>&1; echo $?; done",
        dir.path().display()
    );
    let argv = cstrings(&["sh", "-c", &script]);
    let noexec = [common::cstr(dir.path())];
    let exec_again = [common::cstr(&sub)];
    let mut spec = plain(&ruleset, &filter, c"/bin/sh", &argv);
    spec.noexec = &noexec;
    spec.exec_again = &exec_again;
    let (out, status) = output_of(spec);
    assert_eq!(status, ExitStatus::Code(0));
    assert!(out.contains("failed to map segment"), "{out}");
    assert!(out.ends_with("\n127\n0\n"), "{out}");
    // The mount was the child's own: here the copy still runs.
    let here = std::process::Command::new(dir.path().join("true")).status();
    assert!(here.unwrap().success());
}
