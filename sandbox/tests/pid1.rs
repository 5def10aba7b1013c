//! `openshell-sandbox` as PID 1 of a real PID namespace (made with
//! `unshare --pid --fork --mount-proc`, as root), and as a child subreaper
//! where it has none.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SANDBOX: &str = env!("CARGO_BIN_EXE_openshell-sandbox");

/// `openshell-sandbox EXTRA -- CMD...` as PID 1 of a new PID namespace
/// with its own `/proc`, run as `(user, group)` when given.
fn in_pidns(extra: &[&str], cmd: &[&str], user: Option<(&str, &str)>) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc"]);
    if let Some((user, group)) = user {
        c.args([
            "setpriv",
            &format!("--reuid={user}"),
            &format!("--regid={group}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]);
    }
    c.arg(SANDBOX).args(extra).arg("--").args(cmd);
    c
}

fn sh(script: &str) -> [&str; 3] {
    ["/bin/sh", "-c", script]
}

fn run(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sandbox's pid as this process sees it: the one child of `unshare`.
fn sandbox_pid(unshare: &Child) -> u32 {
    let start = Instant::now();
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id()))
                .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            return pid.parse().unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no sandbox");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `c` with stdout piped and waits for its first line, `ready`.
fn started(mut c: Command) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, out)
}

#[test]
fn the_workloads_status_comes_back_as_a_shell_gives_it() {
    for (script, code) in [("exit 7", 7), ("kill -KILL $$", 128 + 9), ("true", 0)] {
        let out = run(in_pidns(&[], &sh(script), None));
        assert_eq!(out.status.code(), Some(code), "{script}");
    }
    let out = run(in_pidns(&[], &["/nonexistent/program"], None));
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run `/nonexistent/program`"));
}

#[test]
fn bad_arguments_are_refused_with_the_usage() {
    for args in [
        &[][..],
        &["--"],
        &["sh"],
        &["--grace-period", "x", "--", "true"],
    ] {
        let out = run({
            let mut c = Command::new(SANDBOX);
            c.args(args);
            c
        });
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: openshell-sandbox"));
    }
}

#[test]
fn every_orphan_is_reaped_and_the_workloads_status_is_kept() {
    // 1,000 double-forked children, each orphaned at once; once the last
    // has ended, no zombie is left in the namespace.
    let script = "i=0; while [ $i -lt 1000 ]; do (true &); i=$((i+1)); done; \
        n=1; t=0; while [ $t -lt 200 ]; do \
          n=$(cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z '); [ $n = 0 ] && break; \
          sleep 0.05; t=$((t+1)); done; echo zombies $n; exit 3";
    let out = run(in_pidns(&[], &sh(script), None));
    assert_eq!(stdout(&out), "zombies 0\n");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn signals_from_outside_reach_the_workloads_process_group() {
    // The shell and a child it started both trap TERM.
    // The shell waits for its child, which the namespace would otherwise
    // take down with it.
    let script = "trap 'wait $c; echo parent-term; exit 42' TERM; \
        (trap 'echo child-term; exit 0' TERM; while :; do sleep 0.05; done) & c=$!; \
        sleep 0.2; echo ready; while :; do sleep 0.05; done";
    let (unshare, mut out) = started(in_pidns(&[], &sh(script), None));
    let pid = sandbox_pid(&unshare);
    enforcer::send_signal(pid, libc::SIGTERM).unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = unshare.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(42));
    let mut lines: Vec<&str> = rest.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["child-term", "parent-term"]);
}

#[test]
fn a_workload_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let script = "trap '' TERM; echo ready; sleep 30";
    let (unshare, _out) = started(in_pidns(&["--grace-period", "1"], &sh(script), None));
    let pid = sandbox_pid(&unshare);
    let start = Instant::now();
    enforcer::send_signal(pid, libc::SIGTERM).unwrap();
    let status = unshare.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(128 + 9));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "killed before the grace period: {took:?}"
    );
}

#[test]
fn the_workload_cannot_stop_kill_or_fool_its_init() {
    // Had PID 1 died, the namespace would have ended with it.
    let script = "kill -TERM 1; kill -INT 1; kill -HUP 1; kill -KILL 1; kill -STOP 1; \
        sleep 0.2; echo alive; exit 5";
    let out = run(in_pidns(&[], &sh(script), None));
    assert_eq!(
        (stdout(&out).as_str(), out.status.code()),
        ("alive\n", Some(5))
    );
}

#[test]
fn a_workload_of_the_same_user_cannot_reach_into_its_init() {
    // Both run as `nobody`: only PID 1 being non-dumpable keeps the
    // workload from tracing it, taking its descriptors or reading it.
    let code = "import ctypes,os
libc=ctypes.CDLL(None,use_errno=True)
def r(name,f):
  try:
    f(); print(name,0)
  except OSError as e:
    print(name,e.errno)
def sc(*a):
  if libc.syscall(*a)<0: raise OSError(ctypes.get_errno(),'syscall')
print('pid',os.getpid(),'uid',os.getuid(),'init uid',os.stat('/proc/1/status').st_uid)
r('mem',lambda: open('/proc/1/mem','rb').read(1))
r('environ',lambda: open('/proc/1/environ','rb').read())
r('ptrace',lambda: sc(101,16,1,0,0))
fd=os.pidfd_open(1)
r('pidfd_getfd',lambda: sc(438,fd,0,0))
r('kill',lambda: os.kill(1,9))
print('alive')
";
    let out = run(in_pidns(
        &[],
        &["/usr/bin/python3", "-c", code],
        Some(("nobody", "nogroup")),
    ));
    assert_eq!(
        stdout(&out),
        "pid 2 uid 65534 init uid 0\nmem 13\nenviron 13\nptrace 1\npidfd_getfd 1\nkill 0\nalive\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn without_a_pid_namespace_it_is_a_subreaper_and_ends_what_is_left() {
    // A daemon in a session of its own, which only the subreaper's
    // cleanup ends; a unique duration finds it among the host's processes.
    let marker = format!("61.{}", std::process::id());
    let script = format!("(setsid sleep {marker} &); sleep 0.2; exit 4");
    let mut c = Command::new(SANDBOX);
    c.args(["--", "/bin/sh", "-c", &script]);
    let out = run(c);
    assert_eq!(out.status.code(), Some(4));
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
        })
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
