//! The seccomp filter and the notification primitives against the real
//! kernel: a child installs the product filter and hands its listener to
//! the test, which plays the supervisor.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use common::{
    Exit, errno, failed_with, fork_child, kill, pipe, read_u32, readable, try_wait, wait, write_u32,
};
use enforcer::{FilterSpec, Notif, SockAddr, TrappedCall};

/// Forks a child that sets `no_new_privs`, installs `spec`, hands the
/// listener over, closes its own copy and runs `body`.
fn spawn_filtered(spec: &FilterSpec, body: impl FnOnce() -> i32) -> (libc::pid_t, OwnedFd) {
    let filter = enforcer::build(spec).unwrap();
    let (fd_r, fd_w) = pipe();
    let (ack_r, ack_w) = pipe();
    let pid = fork_child(|| {
        if enforcer::set_no_new_privs().is_err() {
            return 90;
        }
        let Ok(listener) = filter.install_with_listener() else {
            return 91;
        };
        if !write_u32(&fd_w, listener.as_raw_fd() as u32) || read_u32(&ack_r).is_none() {
            return 92;
        }
        drop(listener);
        body()
    });
    drop((fd_w, ack_r));
    let child_fd = read_u32(&fd_r).expect("child did not send its listener fd");
    let listener = enforcer::take_fd_from(pid as u32, child_fd as i32).unwrap();
    assert!(write_u32(&ack_w, 1));
    (pid, listener)
}

fn recv_within(listener: &OwnedFd, timeout: Duration) -> Notif {
    assert!(
        readable(listener, timeout),
        "no notification within {timeout:?}"
    );
    enforcer::recv(listener).unwrap()
}

fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const SIN_LEN: u32 = size_of::<libc::sockaddr_in>() as u32;

fn connect_to(fd: i32, addr: &libc::sockaddr_in) -> i32 {
    // SAFETY: `addr` is a live `sockaddr_in` and `SIN_LEN` its size.
    unsafe { libc::connect(fd, (addr as *const libc::sockaddr_in).cast(), SIN_LEN) }
}

#[test]
fn denied_connect_fails_fast_with_the_supervisors_errno() {
    // SAFETY: in the filtered child: socket takes integers, and `connect_to` is
    // given a live address.
    let (pid, listener) = spawn_filtered(&common::product_filter(), || unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let start = Instant::now();
        if !failed_with(connect_to(fd, &loopback(9)), libc::ECONNREFUSED) {
            return 2;
        }
        if start.elapsed() > Duration::from_secs(1) {
            return 3;
        }
        0
    });
    let n = recv_within(&listener, Duration::from_secs(5));
    assert_eq!(n.call(), Some(TrappedCall::Connect));
    assert_eq!(n.pid, pid as u32);
    let addr = enforcer::read_sockaddr(n.pid, n.args[1], n.args[2]).unwrap();
    assert_eq!(addr, SockAddr::Inet("127.0.0.1:9".parse().unwrap()));
    assert!(enforcer::id_valid(&listener, n.id));
    enforcer::respond_errno(&listener, n.id, libc::ECONNREFUSED).unwrap();
    assert!(
        !enforcer::id_valid(&listener, n.id),
        "an answered id is no longer valid"
    );
    assert_eq!(wait(pid), Exit::Code(0));
}

/// The supervisor connects to its own listener and installs that socket at
/// the workload's fd number; the workload talks over its original fd.
fn redirect_connect(send_in_one_step: bool) {
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: in the filtered child: `buf`, `pfd` and the literal outlive the
    // calls that read or write them, with the lengths given; the rest are
    // integers.
    let (pid, listener) = spawn_filtered(&common::product_filter(), || unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        // Port 1 is closed: only the supervisor's socket can answer.
        let ret = connect_to(fd, &loopback(1));
        let expected = if send_in_one_step { fd } else { 0 };
        if ret != expected {
            return 2;
        }
        if libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK == 0 {
            return 3;
        }
        if libc::write(fd, b"ping".as_ptr().cast(), 4) != 4 {
            return 4;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut buf = [0_u8; 4];
        if libc::poll(&mut pfd, 1, 5000) != 1 || libc::read(fd, buf.as_mut_ptr().cast(), 4) != 4 {
            return 5;
        }
        if &buf != b"pong" { 6 } else { 0 }
    });
    let n = recv_within(&listener, Duration::from_secs(5));
    assert_eq!(n.call(), Some(TrappedCall::Connect));
    let target = n.args[0] as i32;
    let addr = enforcer::read_sockaddr(n.pid, n.args[1], n.args[2]).unwrap();
    assert_eq!(addr, SockAddr::Inet("127.0.0.1:1".parse().unwrap()));
    let info = enforcer::fd_socket_info(n.pid, target).unwrap();
    assert_eq!(
        (info.domain, info.sock_type),
        (libc::AF_INET, libc::SOCK_STREAM)
    );
    assert!(info.nonblocking && !info.cloexec);
    assert!(enforcer::id_valid(&listener, n.id));

    let up = TcpStream::connect(upstream.local_addr().unwrap()).unwrap();
    up.set_nonblocking(info.nonblocking).unwrap();
    if send_in_one_step {
        let installed =
            enforcer::addfd_setfd_send(&listener, n.id, up.as_fd(), target, info.cloexec).unwrap();
        assert_eq!(installed, target);
    } else {
        enforcer::addfd_setfd(&listener, n.id, up.as_fd(), target, info.cloexec).unwrap();
        enforcer::respond_value(&listener, n.id, 0).unwrap();
    }
    drop(up);

    let (mut peer, _) = upstream.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0_u8; 4];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    peer.write_all(b"pong").unwrap();
    assert_eq!(wait(pid), Exit::Code(0));
}

#[test]
fn allowed_connect_is_replaced_by_the_supervisors_socket() {
    redirect_connect(true);
}

#[test]
fn allowed_connect_can_return_zero_with_a_separate_answer() {
    redirect_connect(false);
}

#[test]
fn destination_bearing_sends_are_trapped_and_readable() {
    // SAFETY: in the filtered child: `msg`, `dst`, `iov`, `hdr` and `msgs` are
    // locals alive across every call that reads them, with the lengths given;
    // all-zero `msghdr`s and `mmsghdr`s are valid (null pointers, zero
    // lengths).
    let (pid, listener) = spawn_filtered(&common::product_filter(), || unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        let dst = loopback(5353);
        let msg = b"query";
        let n = libc::sendto(
            fd,
            msg.as_ptr().cast(),
            5,
            0,
            (&raw const dst).cast(),
            SIN_LEN,
        );
        if n != 5 {
            return 2;
        }
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr().cast_mut().cast(),
            iov_len: 5,
        };
        let mut hdr: libc::msghdr = std::mem::zeroed();
        hdr.msg_name = (&raw const dst).cast_mut().cast();
        hdr.msg_namelen = SIN_LEN;
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        if !failed_with(libc::sendmsg(fd, &hdr, 0), libc::EACCES) {
            return 3;
        }
        let mut msgs: [libc::mmsghdr; 2] = std::mem::zeroed();
        msgs[0].msg_hdr = hdr;
        msgs[1].msg_hdr = hdr;
        msgs[1].msg_hdr.msg_name = std::ptr::null_mut();
        msgs[1].msg_hdr.msg_namelen = 0;
        if !failed_with(libc::sendmmsg(fd, msgs.as_mut_ptr(), 2, 0), libc::EACCES) {
            return 4;
        }
        0
    });
    let dst = SockAddr::Inet("127.0.0.1:5353".parse().unwrap());

    let n = recv_within(&listener, Duration::from_secs(5));
    assert_eq!(n.call(), Some(TrappedCall::Sendto));
    assert_eq!(
        enforcer::read_sockaddr(n.pid, n.args[4], n.args[5]).unwrap(),
        dst
    );
    assert!(enforcer::id_valid(&listener, n.id));
    enforcer::respond_value(&listener, n.id, 5).unwrap();

    let n = recv_within(&listener, Duration::from_secs(5));
    assert_eq!(n.call(), Some(TrappedCall::Sendmsg));
    assert_eq!(
        enforcer::read_msghdr_name(n.pid, n.args[1]).unwrap(),
        Some(dst.clone())
    );
    enforcer::respond_errno(&listener, n.id, libc::EACCES).unwrap();

    let n = recv_within(&listener, Duration::from_secs(5));
    assert_eq!(n.call(), Some(TrappedCall::Sendmmsg));
    let names = enforcer::read_mmsghdr_names(n.pid, n.args[1], n.args[2]).unwrap();
    assert_eq!(names, vec![Some(dst), None]);
    enforcer::respond_errno(&listener, n.id, libc::EACCES).unwrap();
    assert_eq!(wait(pid), Exit::Code(0));
}

/// Runs `body` under the product filter while answering EPERM to any
/// notification; returns the exit and how many notifications arrived.
fn run_unsupervised(body: impl FnOnce() -> i32) -> (Exit, usize) {
    run_unsupervised_with(&common::product_filter(), body)
}

fn run_unsupervised_with(spec: &FilterSpec, body: impl FnOnce() -> i32) -> (Exit, usize) {
    let (pid, listener) = spawn_filtered(spec, body);
    let mut trapped = 0;
    let start = Instant::now();
    loop {
        if let Some(exit) = try_wait(pid) {
            return (exit, trapped);
        }
        if readable(&listener, Duration::from_millis(20))
            && let Ok(n) = enforcer::recv(&listener)
        {
            trapped += 1;
            let _ = enforcer::respond_errno(&listener, n.id, libc::EPERM);
        }
        if start.elapsed() > Duration::from_secs(20) {
            kill(pid);
            panic!("filtered child hung");
        }
    }
}

fn raw_socket(family: u64, ty: u64, proto: u64) -> i64 {
    // SAFETY: socket takes integers only.
    let fd = unsafe { libc::syscall(libc::SYS_socket, family, ty, proto) };
    if fd >= 0 {
        // SAFETY: `fd` was created just above and is closed once, here.
        unsafe { libc::close(fd as i32) };
    }
    fd
}

fn allow_all_program() -> libc::sock_fprog {
    static ALLOW: [libc::sock_filter; 1] = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    libc::sock_fprog {
        len: 1,
        filter: ALLOW.as_ptr().cast_mut(),
    }
}

/// Tries every escape the deny list exists for; returns 0 when all failed
/// with the documented errno, else a code naming the first that did not.
/// `not_a_tty`: the TIOCSTI attempt must not reach a real terminal should
/// the rule be missing.
fn attempt_escapes(sleeper: libc::pid_t, not_a_tty: i32) -> i32 {
    // SAFETY: every pointer passed is to a live local or literal of the size
    // given (`params`, `clone_args`, `prog`, `c`, `local` over `buf`, the C
    // strings); the raw clones share no memory with the caller (no `CLONE_VM`)
    // and a child one makes `_exit`s at once; the other arguments are integers.
    unsafe {
        let mut params = [0_u8; 120];
        if !failed_with(
            libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()),
            libc::ENOSYS,
        ) {
            return 20;
        }
        if !failed_with(
            libc::ptrace(libc::PTRACE_ATTACH, sleeper, 0, 0),
            libc::EPERM,
        ) {
            return 21;
        }
        let (packet, inet, inet6) = (
            libc::AF_PACKET as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
        );
        let raw = libc::SOCK_RAW as u64;
        if !failed_with(raw_socket(packet, raw, 0x0300), libc::EPERM)
            || !failed_with(raw_socket(packet, libc::SOCK_DGRAM as u64, 0), libc::EPERM)
        {
            return 22;
        }
        // Garbage in the upper half of an int argument must not slip past.
        if !failed_with(
            raw_socket(packet | 1 << 32, libc::SOCK_DGRAM as u64, 0),
            libc::EPERM,
        ) {
            return 23;
        }
        // Families that reach past the network namespace (vsock to the
        // hypervisor) or are kernel attack surface (AF_ALG, AF_KEY).
        for family in [
            libc::AF_VSOCK,
            libc::AF_ALG,
            libc::AF_KEY,
            libc::AF_APPLETALK,
        ] {
            if !failed_with(
                raw_socket(family as u64, libc::SOCK_STREAM as u64, 0),
                libc::EPERM,
            ) || !failed_with(
                raw_socket(family as u64, libc::SOCK_DGRAM as u64, 0),
                libc::EPERM,
            ) {
                return 36;
            }
        }
        if !failed_with(
            raw_socket(inet, raw | libc::SOCK_CLOEXEC as u64, 1),
            libc::EPERM,
        ) {
            return 24;
        }
        if !failed_with(
            raw_socket(inet6, raw | libc::SOCK_NONBLOCK as u64, 58),
            libc::EPERM,
        ) {
            return 25;
        }
        if !failed_with(raw_socket(inet, 10, 0), libc::EPERM) {
            return 26;
        }
        if !failed_with(libc::unshare(libc::CLONE_NEWUSER), libc::EPERM)
            || !failed_with(libc::unshare(libc::CLONE_NEWNET), libc::EPERM)
        {
            return 27;
        }
        let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64;
        let ret = libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0);
        if ret == 0 {
            libc::_exit(0);
        }
        if !failed_with(ret, libc::EPERM) {
            return 28;
        }
        let mut clone_args = [0_u64; 11];
        clone_args[1] = libc::CLONE_NEWUSER as u64;
        clone_args[4] = libc::SIGCHLD as u64;
        let ret = libc::syscall(libc::SYS_clone3, clone_args.as_ptr(), 88);
        if ret == 0 {
            libc::_exit(0);
        }
        if !failed_with(ret, libc::ENOSYS) {
            return 29;
        }
        let prog = allow_all_program();
        let new_listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
        if !failed_with(
            libc::syscall(libc::SYS_seccomp, 1, new_listener, &prog),
            libc::EPERM,
        ) {
            return 30;
        }
        if !failed_with(raw_socket(libc::AF_NETLINK as u64, raw, 4), libc::EPERM) {
            return 31;
        }
        let mut c = b'x';
        if !failed_with(libc::ioctl(not_a_tty, libc::TIOCSTI, &mut c), libc::EPERM) {
            return 32;
        }
        let mut buf = [0_u8; 8];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: 8,
        };
        if !failed_with(
            libc::process_vm_readv(sleeper, &local, 1, &local, 1, 0),
            libc::EPERM,
        ) {
            return 33;
        }
        if !failed_with(libc::syscall(libc::SYS_bpf, 0, 0, 0), libc::EPERM) {
            return 34;
        }
        let none = c"none";
        if !failed_with(
            libc::mount(
                none.as_ptr(),
                c"/mnt".as_ptr(),
                none.as_ptr(),
                0,
                std::ptr::null(),
            ),
            libc::EPERM,
        ) {
            return 35;
        }
        0
    }
}

fn deny_list_run(spec: &FilterSpec) -> (Exit, usize) {
    // SAFETY: pause takes no arguments; the child waits to be killed.
    let sleeper = fork_child(|| unsafe {
        libc::pause();
        0
    });
    let (r, _w) = pipe();
    let fd = r.as_raw_fd();
    let result = run_unsupervised_with(spec, || attempt_escapes(sleeper, fd));
    kill(sleeper);
    wait(sleeper);
    result
}

#[test]
fn deny_list_stops_the_escape_routes() {
    let (exit, trapped) = deny_list_run(&common::product_filter());
    assert_eq!(
        exit,
        Exit::Code(0),
        "exit code names the escape that was not stopped"
    );
    assert_eq!(trapped, 0);
}

#[test]
fn ordinary_work_is_not_disturbed() {
    // SAFETY: in the filtered child: `pair`, the literal, `prog` and `ifa`
    // are live locals of the sizes given, and `ifa` is freed once, by
    // freeifaddrs.
    let (exit, trapped) = run_unsupervised(|| unsafe {
        // Threads: glibc tries clone3, gets ENOSYS, falls back to clone.
        let Ok(handle) = std::thread::Builder::new().spawn(|| 7) else {
            return 40;
        };
        if handle.join().ok() != Some(7) {
            return 41;
        }
        for (family, ty, proto) in [
            (libc::AF_INET, libc::SOCK_STREAM, 0),
            (libc::AF_INET6, libc::SOCK_DGRAM, 0),
            (libc::AF_UNIX, libc::SOCK_STREAM, 0),
            (libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0),
        ] {
            if raw_socket(family as u64, ty as u64, proto) < 0 {
                return 42;
            }
        }
        // send() is sendto() with no address: it must not be trapped.
        let mut pair = [0; 2];
        if libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) != 0 {
            return 43;
        }
        if libc::send(pair[0], b"x".as_ptr().cast(), 1, 0) != 1 {
            return 44;
        }
        // A workload may still add a filter of its own, just no listener.
        let prog = allow_all_program();
        if libc::syscall(libc::SYS_seccomp, 1, 0, &prog) != 0 {
            return 45;
        }
        if libc::unshare(libc::CLONE_FILES) != 0 {
            return 46;
        }
        // glibc's netlink queries send to a 12-byte sockaddr_nl: untrapped.
        let mut ifa = std::ptr::null_mut();
        if libc::getifaddrs(&mut ifa) != 0 {
            return 47;
        }
        libc::freeifaddrs(ifa);
        0
    });
    assert_eq!(exit, Exit::Code(0));
    assert_eq!(trapped, 0);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn foreign_syscall_abis_are_killed() {
    // x32: native arch, syscall number with bit 30 set.
    // SAFETY: an integer syscall; the filter kills the child before it runs.
    let (exit, _) = run_unsupervised(|| unsafe {
        libc::syscall(0x4000_0000 | libc::SYS_getpid);
        50
    });
    assert_eq!(exit, Exit::Signal(libc::SIGSYS));
    // i386 entry from a 64-bit process (getpid is 20 there).
    // SAFETY: the filter kills the child on the `int 0x80` itself (a foreign
    // ABI), so the asm never returns and no register it does not declare is
    // read afterwards.
    let (exit, _) = run_unsupervised(|| unsafe {
        let mut nr: i32 = 20;
        std::arch::asm!("int 0x80", inout("eax") nr);
        let _ = nr;
        51
    });
    assert_eq!(exit, Exit::Signal(libc::SIGSYS));
}

#[test]
fn the_kernel_also_refuses_a_second_listener() {
    // Without our rule, the kernel answers EBUSY: one live listener per
    // chain. Only while ours is open: once the supervisor closes it, the
    // kernel would allow a new one, so our own rule must stay.
    let mut spec = common::product_filter();
    spec.deny.retain(|r| r.syscall != "seccomp");
    // SAFETY: in the filtered child: `prog` is a live `sock_fprog` over a
    // static program; the rest are integers.
    let (pid, listener) = spawn_filtered(&spec, || unsafe {
        let prog = allow_all_program();
        let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
        if failed_with(
            libc::syscall(libc::SYS_seccomp, 1, flags, &prog),
            libc::EBUSY,
        ) {
            0
        } else {
            60 + errno().min(100)
        }
    });
    assert_eq!(wait(pid), Exit::Code(0));
    drop(listener);
}

#[test]
fn build_rejects_unknown_syscalls_and_fits_the_kernel_limit() {
    let mut spec = common::product_filter();
    let filter = enforcer::build(&spec).unwrap();
    assert!(!filter.instructions().is_empty() && filter.instructions().len() < 4096);
    spec.notify.push(enforcer::NotifyRule {
        syscall: "no_such_syscall".into(),
        arg_conditions: vec![],
    });
    assert!(
        matches!(enforcer::build(&spec), Err(enforcer::SeccompError::UnknownSyscall(s)) if s == "no_such_syscall")
    );
}

#[test]
fn a_dead_notifier_invalidates_its_id() {
    // SAFETY: in the filtered child: socket takes integers, and `connect_to` is
    // given a live address.
    let (pid, listener) = spawn_filtered(&common::product_filter(), || unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        connect_to(fd, &loopback(9));
        70
    });
    let n = recv_within(&listener, Duration::from_secs(5));
    assert!(enforcer::id_valid(&listener, n.id));
    kill(pid);
    assert_eq!(wait(pid), Exit::Signal(libc::SIGKILL));
    assert!(!enforcer::id_valid(&listener, n.id));
    assert!(enforcer::respond_errno(&listener, n.id, libc::EPERM).is_err());
    let _: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let _ = listener.as_raw_fd();
}

/// Whether the calling thread holds `CAP_NET_RAW` (13) in its effective set.
fn holds_net_raw() -> bool {
    const CAP_NET_RAW: u32 = 13;
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:\t"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_RAW) != 0)
}

/// Opens a packet socket of each kind and a raw IPv4 and IPv6 socket
/// while holding `CAP_NET_RAW`. Returns a bit per socket that opened, 0
/// when each was refused with `EPERM`, `64 + i` when socket `i` failed
/// otherwise, 80 without the capability (the proof would be void).
fn open_raw_sockets() -> i32 {
    if !holds_net_raw() {
        return 80;
    }
    let (packet, inet, inet6) = (
        libc::AF_PACKET as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
    );
    let (raw, dgram) = (libc::SOCK_RAW as u64, libc::SOCK_DGRAM as u64);
    // Protocol 0 on the packet sockets: opened, they receive nothing.
    let tries = [
        (packet, raw, 0),
        (packet, dgram, 0),
        (inet, raw, 1),
        (inet6, raw, 58),
    ];
    let mut opened = 0;
    for (i, (family, ty, proto)) in tries.into_iter().enumerate() {
        let fd = raw_socket(family, ty, proto);
        if fd >= 0 {
            opened |= 1 << i;
        } else if errno() != libc::EPERM {
            return 64 + i as i32;
        }
    }
    if !holds_net_raw() {
        return 80;
    }
    opened
}

/// Raw and packet sockets are refused by the bundle's rule itself, not by
/// a missing capability: the child keeps `CAP_NET_RAW` (the test runs as
/// root and clears nothing), opens every such socket without a filter,
/// and is refused each one (`EPERM`) under the filter the supervisor
/// builds from the bundle, capability still in hand.
#[test]
fn raw_and_packet_sockets_are_refused_by_the_filter_even_with_cap_net_raw() {
    let unfiltered = fork_child(open_raw_sockets);
    assert_eq!(
        wait(unfiltered),
        Exit::Code(0b1111),
        "the kernel allows them"
    );
    let (exit, trapped) = run_unsupervised(open_raw_sockets);
    assert_eq!(exit, Exit::Code(0), "the filter refuses them");
    assert_eq!(trapped, 0);
}

/// Proves the attack test is not vacuous: without each rule, the matching
/// escape gets through (as root, against harmless targets).
#[test]
fn every_deny_rule_is_load_bearing() {
    let expected = [
        ("io_uring_setup", 20),
        ("ptrace", 21),
        ("socket", 22),
        ("unshare", 27),
        ("clone", 28),
        ("clone3", 29),
        ("seccomp", 30),
        ("ioctl", 32),
        ("process_vm_readv", 33),
        ("bpf", 34),
        ("mount", 35),
    ];
    for (name, code) in expected {
        let mut spec = common::product_filter();
        spec.deny.retain(|r| r.syscall != name);
        assert_eq!(deny_list_run(&spec).0, Exit::Code(code), "without `{name}`");
    }
    // A 64-bit equality on an int argument is bypassed by the upper half
    // (with the family range rule, which also catches it, removed).
    let mut spec = common::product_filter();
    spec.deny.retain(|r| {
        !(r.syscall == "socket" && r.arg_conditions.iter().any(|c| c.op == enforcer::ArgOp::Ge))
    });
    for rule in &mut spec.deny {
        for cond in &mut rule.arg_conditions {
            if cond.op == enforcer::ArgOp::MaskedEq(0xffff_ffff)
                && cond.value == libc::AF_PACKET as u64
            {
                cond.op = enforcer::ArgOp::Eq;
            }
        }
    }
    assert_eq!(deny_list_run(&spec).0, Exit::Code(23));
}

#[test]
fn a_call_from_a_second_thread_is_traced_to_that_thread() {
    let (pid, listener) = spawn_filtered(&common::product_filter(), || {
        // SAFETY: socket takes integers, and `connect_to` is given a live address.
        let worker = std::thread::Builder::new().spawn(|| unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            failed_with(connect_to(fd, &loopback(9)), libc::ECONNREFUSED)
        });
        match worker.map(|w| w.join()) {
            Ok(Ok(true)) => 0,
            _ => 2,
        }
    });
    let n = recv_within(&listener, Duration::from_secs(5));
    assert_ne!(n.pid, pid as u32, "a notification names the thread");
    let status = std::fs::read_to_string(format!("/proc/{}/status", n.pid)).unwrap();
    assert!(status.lines().any(|l| l == format!("Tgid:\t{pid}")));
    let addr = enforcer::read_sockaddr(n.pid, n.args[1], n.args[2]).unwrap();
    assert_eq!(addr, SockAddr::Inet("127.0.0.1:9".parse().unwrap()));
    let info = enforcer::fd_socket_info(n.pid, n.args[0] as i32).unwrap();
    assert_eq!(info.domain, libc::AF_INET);
    assert!(info.cloexec && !info.nonblocking);
    let exe = enforcer::exe_path(n.pid).unwrap();
    assert_eq!(exe.path, std::env::current_exe().unwrap());
    assert!(enforcer::id_valid(&listener, n.id));
    enforcer::respond_errno(&listener, n.id, libc::ECONNREFUSED).unwrap();
    assert_eq!(wait(pid), Exit::Code(0));
}
