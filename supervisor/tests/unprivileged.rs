//! The supervisor run by an unprivileged user (`nobody`, no capabilities):
//! it cannot create a network namespace, says so, runs with `--netns none`
//! and still decides every connect. It runs inside the test's own network
//! namespace, so "the host's namespace" here has only loopback.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Dir, SYSTEM, TestNet, bundle, clients, log_lines, output, stderr, stdout};

/// Copies of the workspace's supervisor and openshell-sandbox in `dir`,
/// where `nobody` may run them whatever the checkout's modes; the
/// supervisor's path.
fn supervisor_for_nobody(dir: &Dir) -> std::path::PathBuf {
    copy_for_nobody(dir, "openshell-sandbox");
    copy_for_nobody(dir, "openshell-supervisor")
}

/// A copy of the workspace's binary `name` in `dir`, where `nobody` may
/// run it.
fn copy_for_nobody(dir: &Dir, name: &str) -> std::path::PathBuf {
    let from = std::path::Path::new(common::SUPERVISOR).with_file_name(name);
    let to = dir.join(name);
    std::fs::copy(&from, &to)
        .unwrap_or_else(|e| panic!("{from:?} (build the workspace's binaries): {e}"));
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    to
}

/// `BIN` (a copy `nobody` may run) inside the test's namespace, as
/// `nobody` without capabilities; its arguments follow.
fn as_nobody(net: &TestNet, bin: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &net.name]).args([
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]);
    cmd.arg(bin);
    cmd
}

/// `BIN run --bundle BUNDLE --workdir DIR EXTRA... -- CMD...` as `nobody`
/// ([`as_nobody`]).
fn run_as_nobody(
    net: &TestNet,
    bin: &std::path::Path,
    bundle: &std::path::Path,
    dir: &Dir,
    extra: &[&str],
    cmd: &[&str],
) -> std::process::Command {
    let mut c = as_nobody(net, bin);
    c.args(["run", "--bundle", bundle.to_str().unwrap()]);
    c.args(["--workdir", dir.path().to_str().unwrap()]);
    c.args(extra).arg("--").args(cmd);
    c
}

#[test]
fn an_unprivileged_supervisor_falls_back_to_none_and_still_brokers() {
    let net = TestNet::new();
    // The metadata address the workload tries is hosted by this namespace.
    net.host("169.254.169.254/32");
    let metadata = net.trap_tcp("169.254.169.254:80");
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    let closed = net.tcp("127.0.0.1:0");
    let closed_port = closed.local_addr().unwrap().port();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  binaries clients = {}\n  allow clients -> local.test:{port}\n",
        clients()
    );
    let b = bundle(&dir, "unpriv", &body);
    let bin = supervisor_for_nobody(&dir);
    let log = dir.log();
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
    let code = [
        "import socket,urllib.request",
        &format!("print(urllib.request.urlopen('http://local.test:{port}/',timeout=10).read().decode())"),
        &format!("for host,port in (('local.test',{closed_port}),('127.0.0.1',{closed_port}),('169.254.169.254',80)):"),
        "  try:",
        "    socket.create_connection((host,port),timeout=10); print('connected')",
        "  except OSError as e:",
        "    print(e.errno)",
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)",
        "try:",
        &format!("  s.sendto(b'q',('127.0.0.1',{closed_port})); print('sent')"),
        "except OSError as e:",
        "  print(e.errno)",
    ]
    .join("\n");
    let cmd = run_as_nobody(
        &net,
        &bin,
        &b,
        &dir,
        &[
            "--resolve",
            "local.test=127.0.0.1",
            "--log",
            log.to_str().unwrap(),
        ],
        &["/usr/bin/python3", "-c", &code],
    );
    let out = output(cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--netns none"), "{}", stderr(&out));
    // Allowed by name; a closed port by name and the bare loopback address
    // (no local shortcut without a namespace of its own) and metadata are
    // refused by the broker; a datagram is refused.
    assert_eq!(stdout(&out), "ok\n111\n111\n111\n13\n", "{}", stderr(&out));
    let log = log_lines(&log);
    let denied: Vec<(&str, u64)> = log
        .iter()
        .map(|l| {
            (
                l["dst_endpoint"]["ip"].as_str().unwrap_or(""),
                l["dst_endpoint"]["port"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let closed_port = u64::from(closed_port);
    assert_eq!(
        denied,
        [
            ("127.0.0.1", closed_port),
            ("127.0.0.1", closed_port),
            ("169.254.169.254", 80),
            ("127.0.0.1", closed_port),
        ],
        "{log:?}"
    );
    assert!(
        matches!(metadata.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the metadata stand-in was reached"
    );
    drop(closed);
}

/// An unprivileged supervisor and its workload share a user. The
/// supervisor's environment and memory hold what the workload must never
/// see (real secrets come from its environment), and a policy may grant
/// `/proc` as a whole: the workload still cannot open the supervisor's
/// `environ`, `mem` or `maps`: Landlock refuses a sandboxed process the
/// ptrace access these need to any process outside its domain.
#[test]
fn a_workload_of_the_same_user_cannot_read_the_supervisors_memory_or_environment() {
    let net = TestNet::new();
    let dir = Dir::new();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs read /proc\n  binaries clients = {}\n",
        clients()
    );
    let b = bundle(&dir, "sameuser", &body);
    let bin = supervisor_for_nobody(&dir);
    let code = [
        "import os",
        "ppid=os.getppid()",
        "for f in ('environ','mem','maps','auxv','stack'):",
        "  try:",
        "    print(f, open('/proc/%d/%s'%(ppid,f),'rb').read(65536))",
        "  except OSError as e:",
        "    print(f, e.errno)",
        "print('status', 'Name:' in open('/proc/%d/status'%ppid).read())",
    ]
    .join("\n");
    let mut cmd = run_as_nobody(
        &net,
        &bin,
        &b,
        &dir,
        &[],
        &["/usr/bin/python3", "-c", &code],
    );
    cmd.env("SUPERVISOR_ONLY_SECRET", "do-not-leak-4711");
    let out = output(cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("do-not-leak-4711"), "{text}");
    // The grant of `/proc` is real (the supervisor's status is readable);
    // the entries that expose memory are refused.
    assert_eq!(
        text,
        "environ 13\nmem 13\nmaps 13\nauxv 13\nstack 13\nstatus True\n",
        "{}",
        stderr(&out)
    );
}

/// Without a PID namespace the workload can name the supervisor, which
/// shares its user: the kernel would let it raise the supervisor's core
/// limit, cut its CPU limit to a second and read the core file it dumps,
/// or starve it. The supervisor is not dumpable with a 0/0 core limit from
/// its start, and the workload may change the limits, priority, affinity
/// and I/O priority of no process but its own.
#[test]
fn a_workload_of_the_same_user_cannot_change_the_supervisors_limits_or_priority() {
    let net = TestNet::new();
    let dir = Dir::new();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs read /proc\n  binaries clients = {}\n",
        clients()
    );
    let b = bundle(&dir, "limits", &body);
    let bin = supervisor_for_nobody(&dir);
    let code = [
        "import ctypes,os,resource",
        "libc=ctypes.CDLL(None,use_errno=True)",
        "def r(name,f):",
        "  try:",
        "    f(); print(name,0)",
        "  except OSError as e:",
        "    print(name,e.errno)",
        "def ioprio(which,who,prio):",
        "  if libc.syscall(251,which,who,prio)<0: raise OSError(ctypes.get_errno(),'ioprio_set')",
        "ppid=os.getppid()",
        "print('owner',os.stat('/proc/%d/status'%ppid).st_uid)",
        "print('core',[l.split()[4:6] for l in open('/proc/%d/limits'%ppid) if l.startswith('Max core')])",
        "r('prlimit-core',lambda: resource.prlimit(ppid,resource.RLIMIT_CORE,(0,0)))",
        "r('prlimit-cpu',lambda: resource.prlimit(ppid,resource.RLIMIT_CPU,(1,1)))",
        "r('prlimit-read',lambda: resource.prlimit(ppid,resource.RLIMIT_CPU))",
        "r('setpriority',lambda: os.setpriority(os.PRIO_PROCESS,ppid,19))",
        "r('setpriority-user',lambda: os.setpriority(os.PRIO_USER,0,19))",
        "r('setpriority-pgrp',lambda: os.setpriority(os.PRIO_PGRP,0,19))",
        "r('affinity',lambda: os.sched_setaffinity(ppid,{0}))",
        "r('scheduler',lambda: os.sched_setscheduler(ppid,os.SCHED_IDLE,os.sched_param(0)))",
        "r('ioprio',lambda: ioprio(1,ppid,3<<13))",
        "r('ioprio-user',lambda: ioprio(3,os.getuid(),3<<13))",
        "r('own-limit',lambda: resource.setrlimit(resource.RLIMIT_NOFILE,(512,512)))",
        "r('own-nice',lambda: os.nice(1))",
        "r('own-affinity',lambda: os.sched_setaffinity(0,{0}))",
        "r('own-ioprio',lambda: ioprio(1,0,(2<<13)|4))",
    ]
    .join("\n");
    let cmd = run_as_nobody(
        &net,
        &bin,
        &b,
        &dir,
        &[],
        &["/usr/bin/python3", "-c", &code],
    );
    let out = output(cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    // Root owns the entries of a process that is not dumpable.
    assert_eq!(
        stdout(&out),
        "owner 0\ncore [['0', '0']]\nprlimit-core 1\nprlimit-cpu 1\nprlimit-read 0\nsetpriority 1\nsetpriority-user 1\nsetpriority-pgrp 1\naffinity 1\nscheduler 1\nioprio 1\nioprio-user 1\nown-limit 0\nown-nice 0\nown-affinity 0\nown-ioprio 0\n",
        "{}",
        stderr(&out)
    );
}

/// Without a PID namespace, the workload's parent is still
/// `openshell-sandbox` (installed beside the supervisor), a child
/// subreaper: not dumpable, the workload in a process group of its own,
/// and a daemon the workload leaves behind ended with the run.
#[test]
fn an_unprivileged_supervisor_runs_the_workload_under_openshell_sandbox() {
    let net = TestNet::new();
    let dir = Dir::new();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  binaries clients = {}\n",
        clients()
    );
    let b = bundle(&dir, "subreaper", &body);
    let bin = supervisor_for_nobody(&dir);
    let marker = format!("62.{}", std::process::id());
    let code = [
        "import os,subprocess",
        "ppid=os.getppid()",
        "print(open('/proc/%d/cmdline'%ppid,'rb').read().split(b'\\0')[1:2])",
        "print('own group', os.getpgrp()==os.getpid(), 'parent owner', os.stat('/proc/%d/status'%ppid).st_uid)",
        &format!("subprocess.Popen(['/usr/bin/setsid','/usr/bin/sleep','{marker}'])"),
    ]
    .join("\n");
    let cmd = run_as_nobody(
        &net,
        &bin,
        &b,
        &dir,
        &[],
        &["/usr/bin/python3", "-c", &code],
    );
    let out = output(cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "[b'--plan-fd']\nown group True parent owner 0\n",
        "{}",
        stderr(&out)
    );
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

/// openshell-sandbox starts the workload and brokers its calls: a
/// supervisor without it beside runs nothing, and says what to install.
#[test]
fn without_openshell_sandbox_nothing_runs() {
    let net = TestNet::new();
    let dir = Dir::new();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  binaries clients = {}\n",
        clients()
    );
    let b = bundle(&dir, "alone", &body);
    let bin = copy_for_nobody(&dir, "openshell-supervisor");
    let marker = dir.join("ran");
    let cmd = run_as_nobody(
        &net,
        &bin,
        &b,
        &dir,
        &[],
        &["/usr/bin/touch", marker.to_str().unwrap()],
    );
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is missing") && stderr(&out).contains("install it beside"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists(), "the workload ran");
}
