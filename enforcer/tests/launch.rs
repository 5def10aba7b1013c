//! The whole child sequence, in the documented order, ending in `exec` of a
//! real program (bash, whose `/dev/tcp` calls `connect`). The test plays the
//! supervisor: it identifies the caller, checks what the kernel says about
//! it, and brokers or refuses the connection.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Exit, fork_child, landlock_abi_at_least, pipe, read_u32, readable, wait, write_u32};
use enforcer::{Compat, FsAccess, FsRule, LandlockSpec, SockAddr, TrappedCall};

const BASH: &str = "/usr/bin/bash";

/// Launches `bash -c script` as `nobody` in a new network namespace under
/// Landlock and the product filter; returns its pid and our listener.
fn launch(script: &str) -> (libc::pid_t, OwnedFd) {
    let ruleset = enforcer::prepare(&LandlockSpec {
        mode: Compat::Hard,
        min_abi: 6,
        fs: vec![
            FsRule {
                path: "/usr".into(),
                access: FsAccess::READ_FILE | FsAccess::READ_DIR | FsAccess::EXECUTE,
            },
            FsRule {
                path: "/etc".into(),
                access: FsAccess::READ_FILE | FsAccess::READ_DIR,
            },
        ],
        // Landlock alone would refuse every TCP connect: what gets through
        // is what the supervisor brokers.
        tcp_connect_ports: Some(vec![]),
        tcp_bind_ports: Some(vec![]),
        scope_signals_and_abstract_unix: true,
        private_proc: false,
    })
    .unwrap();
    let filter = enforcer::build(&common::product_filter()).unwrap();
    let nobody = enforcer::resolve_user("nobody").unwrap();
    let last_cap = enforcer::cap_last_cap().unwrap();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let argv_owned = [
        CString::new(BASH).unwrap(),
        CString::new("-c").unwrap(),
        CString::new(script).unwrap(),
    ];
    let argv = [
        argv_owned[0].as_ptr(),
        argv_owned[1].as_ptr(),
        argv_owned[2].as_ptr(),
        std::ptr::null(),
    ];
    let envp = [std::ptr::null()];
    let (fd_r, fd_w) = pipe();
    let (ack_r, ack_w) = pipe();

    let pid = fork_child(|| {
        let steps = [
            enforcer::unshare_net(),
            enforcer::bring_up_loopback(),
            enforcer::drop_bounding_and_ambient(last_cap),
            enforcer::set_identity(nobody.uid, nobody.gid, &[nobody.gid]),
            enforcer::clear_capability_sets(),
            enforcer::set_no_new_privs(),
            enforcer::set_pdeathsig(libc::SIGKILL, parent),
            ruleset.restrict_self(),
        ];
        // (An array evaluates in order and stops nothing, so check each.)
        for (i, step) in steps.iter().enumerate() {
            if step.is_err() {
                return 10 + i as i32;
            }
        }
        let Ok(listener) = filter.install_with_listener() else {
            return 20;
        };
        if !write_u32(&fd_w, listener.as_raw_fd() as u32) || read_u32(&ack_r).is_none() {
            return 21;
        }
        // SAFETY: `argv` and `envp` are null-terminated arrays of C strings that outlive the call.
        unsafe { libc::execve(argv[0], argv.as_ptr(), envp.as_ptr()) };
        22
    });
    drop((fd_w, ack_r));
    let child_fd = read_u32(&fd_r).unwrap_or_else(|| panic!("child failed: {:?}", wait(pid)));
    let listener = enforcer::take_fd_from(pid as u32, child_fd as i32).unwrap();
    assert!(write_u32(&ack_w, 1));
    (pid, listener)
}

/// The first `connect` to an IP address. glibc first probes nscd's unix
/// socket (bash looks up its user): the supervisor performs that connect on
/// the workload's own socket (never "continue": see `connect_on`).
fn next_ip_connect(pid: libc::pid_t, listener: &OwnedFd) -> (enforcer::Notif, SockAddr) {
    loop {
        assert!(
            readable(listener, Duration::from_secs(10)),
            "bash never connected: {:?}",
            common::try_wait(pid)
        );
        let n = enforcer::recv(listener).unwrap();
        assert_eq!(n.call(), Some(TrappedCall::Connect));
        let addr = enforcer::read_sockaddr(n.pid, n.args[1], n.args[2]).unwrap();
        let info = enforcer::fd_socket_info(n.pid, n.args[0] as i32).unwrap();
        if info.domain == libc::AF_UNIX {
            assert!(matches!(addr, SockAddr::Unix(_)));
            let sock = enforcer::take_fd_from(n.pid, n.args[0] as i32).unwrap();
            match enforcer::connect_on(sock.as_fd(), &addr) {
                Ok(()) => enforcer::respond_value(listener, n.id, 0).unwrap(),
                Err(e) => enforcer::respond_errno(listener, n.id, e.raw()).unwrap(),
            }
            continue;
        }
        return (n, addr);
    }
}

/// Everything the supervisor checks before deciding, from outside.
fn assert_confined(tid: u32) {
    assert_eq!(enforcer::exe_path(tid).unwrap().path, Path::new(BASH));
    assert!(enforcer::no_new_privs(tid).unwrap());
    assert_eq!(enforcer::effective_caps(tid).unwrap(), 0);
    assert_eq!(enforcer::caps(tid, "CapBnd").unwrap(), 0);
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(
        std::fs::read_link(format!("/proc/{tid}/ns/net")).unwrap(),
        ours
    );
}

/// Waits for the launched program, killing it if it hangs.
fn finish(pid: libc::pid_t) -> Exit {
    let exit = common::eventually(Duration::from_secs(10), || common::try_wait(pid));
    exit.unwrap_or_else(|| {
        common::kill(pid);
        wait(pid);
        panic!("the launched program hung");
    })
}

#[test]
fn a_confined_program_gets_a_brokered_connection() {
    if !landlock_abi_at_least(6) {
        return;
    }
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let (pid, listener) = launch(
        "exec 3<>/dev/tcp/127.0.0.1/1 && echo ping >&3 && read -r line <&3 && [ \"$line\" = pong ]",
    );
    let (n, addr) = next_ip_connect(pid, &listener);
    let target = n.args[0] as i32;
    let info = enforcer::fd_socket_info(n.pid, target).unwrap();
    assert_confined(n.pid);
    assert!(enforcer::id_valid(&listener, n.id));
    assert_eq!(addr, SockAddr::Inet("127.0.0.1:1".parse().unwrap()));

    let up = std::net::TcpStream::connect(upstream.local_addr().unwrap()).unwrap();
    up.set_nonblocking(info.nonblocking).unwrap();
    enforcer::addfd_setfd_send(&listener, n.id, up.as_fd(), target, info.cloexec).unwrap();
    drop(up);

    let (peer, _) = upstream.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&peer).read_line(&mut line).unwrap();
    assert_eq!(line, "ping\n");
    (&peer).write_all(b"pong\n").unwrap();
    assert_eq!(finish(pid), Exit::Code(0));
}

#[test]
fn a_confined_program_is_refused_fast() {
    if !landlock_abi_at_least(6) {
        return;
    }
    let (pid, listener) = launch("exec 3<>/dev/tcp/127.0.0.1/9");
    let (n, addr) = next_ip_connect(pid, &listener);
    assert_eq!(addr, SockAddr::Inet("127.0.0.1:9".parse().unwrap()));
    assert_confined(n.pid);
    assert!(enforcer::id_valid(&listener, n.id));
    let start = Instant::now();
    enforcer::respond_errno(&listener, n.id, libc::ECONNREFUSED).unwrap();
    assert_eq!(
        finish(pid),
        Exit::Code(1),
        "bash reports the refused connect"
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}
