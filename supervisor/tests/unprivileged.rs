//! The supervisor run by an unprivileged user (`nobody`, no capabilities):
//! it cannot create a network namespace, says so, runs with `--netns none`
//! and still decides every connect. It runs inside the test's own network
//! namespace, so "the host's namespace" here has only loopback.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Dir, SYSTEM, TestNet, bundle, clients, log_lines, output, stderr, stdout};

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
    // The binary where `nobody` can run it, whatever the checkout's modes.
    let bin = dir.join("openshell-supervisor");
    std::fs::copy(common::SUPERVISOR, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.join("deny.log");
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
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &net.name]).args([
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]);
    cmd.arg(&bin).args([
        "run",
        "--bundle",
        b.to_str().unwrap(),
        "--workdir",
        dir.path().to_str().unwrap(),
        "--resolve",
        "local.test=127.0.0.1",
        "--log",
        log.to_str().unwrap(),
        "--",
        "/usr/bin/python3",
        "-c",
        &code,
    ]);
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
    let bin = dir.join("openshell-supervisor");
    std::fs::copy(common::SUPERVISOR, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
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
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &net.name]).args([
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]);
    cmd.env("SUPERVISOR_ONLY_SECRET", "do-not-leak-4711");
    cmd.arg(&bin).args([
        "run",
        "--bundle",
        b.to_str().unwrap(),
        "--workdir",
        dir.path().to_str().unwrap(),
        "--",
        "/usr/bin/python3",
        "-c",
        &code,
    ]);
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
