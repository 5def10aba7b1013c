//! A trapped `connect`: copy, check, then ask the supervisor, perform or
//! refuse. The first three rows are the supervisor's answers (`ask.rs`).
//!
//! | destination | `--netns new` | `--netns none` |
//! |---|---|---|
//! | IP, TCP, a route allows it | connected upstream by the supervisor, installed | same |
//! | IP, TCP, refused, loopback, not a named host | performed on the workload's own socket (its loopback); logged if nothing listens | refused |
//! | IP, TCP, refused | `ECONNREFUSED` + log | same |
//! | TCP to a host nameserver, port 53 | (not special) | connected to the stub |
//! | IP, UDP, loopback | performed (the stub lives there) | refused |
//! | IP, UDP, a host nameserver, port 53 | refused | performed, to the stub |
//! | IP, UDP, anything else | `EACCES` + log | same |
//! | unix pathname | performed as the workload's user | same |
//! | unix abstract | performed (the namespace's own) | refused (the host's) |
//! | `AF_UNSPEC` (disconnect) | performed on sandbox sockets | refused |
//! | any other family | `EACCES` + log | same |
//!
//! "Performed" means the broker calls `connect` on the workload's own
//! socket (taken with `pidfd_getfd`) with the address it checked; see the
//! enforcer's `emulate` module.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use enforcer::{SockAddr, SocketInfo, UnixAddr};
use policy_bundle::matcher::canonical_ip;

use super::{Broker, Call, NetMode, Refusal, TcpConnect, ask};

/// Unix `sun_path` capacity, NUL included.
const SUN_PATH_MAX: usize = 108;

pub(super) fn handle(broker: &Arc<Broker>, call: Call) {
    let addr = match enforcer::read_sockaddr(call.tid(), call.arg(1), call.arg(2)) {
        Ok(a) => a,
        Err(e) => return call.fail(e.errno()),
    };
    let fd = call.int_arg(0);
    let sock = match enforcer::take_fd_from(call.tid(), fd) {
        Ok(s) => s,
        Err(e) => return call.fail(e.raw_os_error().unwrap_or(libc::EBADF)),
    };
    let info = match enforcer::socket_info(sock.as_fd()) {
        Ok(i) => i,
        Err(_) => return call.fail(libc::ENOTSOCK),
    };
    if !call.still_valid() {
        return;
    }
    match addr {
        SockAddr::Inet(a) => ip_connect(broker, call, fd, sock, info, a.into()),
        SockAddr::Inet6(a) => ip_connect(broker, call, fd, sock, info, a.into()),
        SockAddr::Unix(u) => unix_connect(broker, &call, sock, u),
        unspec @ SockAddr::Unspec { .. } => {
            if broker.in_sandbox(&sock) {
                perform(broker, call, sock, unspec);
            } else {
                broker.deny(
                    &call,
                    libc::EACCES,
                    &Refusal {
                        syscall: "connect",
                        protocol: "unspec",
                        reason: "a disconnect (AF_UNSPEC) is only performed on the sandbox's own sockets",
                        ..Refusal::default()
                    },
                );
            }
        }
        SockAddr::Other { family, .. } => {
            let family = format!("family {family}");
            broker.deny(
                &call,
                libc::EACCES,
                &Refusal {
                    syscall: "connect",
                    protocol: &family,
                    reason: "only IP and unix sockets are brokered",
                    ..Refusal::default()
                },
            );
        }
    }
}

fn ip_connect(
    broker: &Arc<Broker>,
    call: Call,
    fd: i32,
    sock: OwnedFd,
    info: SocketInfo,
    dst: SocketAddr,
) {
    let family_ok = match dst {
        SocketAddr::V4(_) => info.domain == libc::AF_INET,
        SocketAddr::V6(_) => info.domain == libc::AF_INET6,
    };
    if info.sock_type != libc::SOCK_STREAM {
        return udp_connect(broker, &call, sock, info, dst);
    }
    if !family_ok {
        return call.fail(libc::EAFNOSUPPORT);
    }
    ask::tcp_connect(
        broker,
        call,
        TcpConnect {
            fd,
            sock,
            info,
            dst,
        },
    );
}

fn udp_connect(
    broker: &Arc<Broker>,
    call: &Call,
    sock: OwnedFd,
    info: SocketInfo,
    dst: SocketAddr,
) {
    let ip = canonical_ip(dst.ip());
    let refuse = |reason| {
        broker.deny(
            call,
            libc::EACCES,
            &Refusal {
                syscall: "connect",
                protocol: "udp",
                ip: Some(ip),
                port: Some(dst.port()),
                reason,
                ..Refusal::default()
            },
        );
    };
    if info.sock_type != libc::SOCK_DGRAM {
        return refuse("only TCP and UDP sockets are brokered");
    }
    match &broker.mode {
        NetMode::Isolated { .. } if ip.is_loopback() && broker.in_sandbox(&sock) => {
            perform(broker, call.clone(), sock, sockaddr(dst));
        }
        NetMode::Shared {
            stub_udp,
            nameservers,
            ..
        } if dst.port() == 53 && nameservers.contains(&ip) => {
            let stub = in_family(*stub_udp, info.domain);
            perform(broker, call.clone(), sock, sockaddr(stub));
        }
        _ => refuse("UDP goes only to the sandbox's DNS stub"),
    }
}

fn unix_connect(broker: &Arc<Broker>, call: &Call, sock: OwnedFd, addr: UnixAddr) {
    let refuse = |reason: &str, path: Option<&str>| {
        broker.deny(
            call,
            libc::ECONNREFUSED,
            &Refusal {
                syscall: "connect",
                protocol: "unix",
                address: path,
                reason,
                ..Refusal::default()
            },
        );
    };
    let addr = match addr {
        UnixAddr::Unnamed => return call.fail(libc::EINVAL),
        UnixAddr::Abstract(name) => {
            if !broker.in_sandbox(&sock) {
                let shown = format!("@{}", String::from_utf8_lossy(&name));
                return refuse(
                    "abstract unix sockets outside the sandbox's network namespace are not reachable",
                    Some(&shown),
                );
            }
            UnixAddr::Abstract(name)
        }
        UnixAddr::Pathname(path) if path.first() == Some(&b'/') => UnixAddr::Pathname(path),
        UnixAddr::Pathname(rel) => {
            let Ok(cwd) = std::fs::read_link(format!("/proc/{}/cwd", call.tid())) else {
                return call.fail(libc::ENOENT);
            };
            let mut abs = cwd.into_os_string().into_encoded_bytes();
            abs.push(b'/');
            abs.extend_from_slice(&rel);
            if abs.len() >= SUN_PATH_MAX {
                return call.fail(libc::ENAMETOOLONG);
            }
            UnixAddr::Pathname(abs)
        }
    };
    perform(broker, call.clone(), sock, SockAddr::Unix(addr));
}

/// Connects the workload's own socket to `addr` (checked), off the
/// notification thread (a blocking socket may block), and answers with the
/// result. A unix pathname is checked against the caller's credentials, so
/// that connect runs as the workload's user, without capabilities.
fn perform(broker: &Arc<Broker>, call: Call, sock: OwnedFd, addr: SockAddr) {
    let creds = broker.creds.clone();
    let as_workload = matches!(addr, SockAddr::Unix(UnixAddr::Pathname(_)));
    broker.runtime.spawn_blocking(move || {
        let connect = || enforcer::connect_on(sock.as_fd(), &addr);
        let result = if as_workload {
            let c = creds.as_ref().map(|c| enforcer::Credentials {
                uid: c.uid,
                gid: c.gid,
                groups: &c.groups,
            });
            enforcer::with_credentials(c, connect)
        } else {
            Ok(connect())
        };
        match result {
            Ok(Ok(())) => call.succeed(),
            Ok(Err(e)) | Err(e) => call.fail(e.raw()),
        }
    });
}

/// A connect no rule allows to the sandbox's own loopback, performed on
/// the workload's socket `sock`: a server the workload runs there
/// answers. When none listens (`ECONNREFUSED`) the refusal is logged as
/// made for `binary`, since what the workload meant to reach may well be
/// the host's loopback, which is out of its reach.
pub fn perform_on_own_loopback(
    broker: &Arc<Broker>,
    call: Call,
    sock: OwnedFd,
    dst: SocketAddr,
    binary: String,
) {
    let me = Arc::clone(broker);
    broker.runtime.spawn_blocking(move || {
        match enforcer::connect_on(sock.as_fd(), &sockaddr(dst)) {
            Ok(()) => call.succeed(),
            Err(e) if e.raw() == libc::ECONNREFUSED => me.deny(
                &call,
                libc::ECONNREFUSED,
                &Refusal {
                    syscall: "connect",
                    protocol: "tcp",
                    binary: Some(&binary),
                    ip: Some(dst.ip()),
                    port: Some(dst.port()),
                    reason: "no rule allows this address, and nothing listens at it on the sandbox's own loopback (the host's loopback is out of reach)",
                    ..Refusal::default()
                },
            ),
            Err(e) => call.fail(e.raw()),
        }
    });
}

/// `addr` as a socket of `domain` names it (IPv4 as IPv4-mapped IPv6 on an
/// IPv6 socket).
#[must_use]
pub fn in_family(addr: SocketAddr, domain: i32) -> SocketAddr {
    match (domain, addr) {
        (libc::AF_INET6, SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => addr,
    }
}

/// Connects the workload's own socket to `dst`, the DNS stub a connect to
/// a host nameserver goes to; a blocking socket may block, so off the
/// notification thread.
pub fn perform_to(broker: &Arc<Broker>, call: Call, sock: OwnedFd, dst: SocketAddr) {
    perform(broker, call, sock, sockaddr(dst));
}

fn sockaddr(dst: SocketAddr) -> SockAddr {
    match dst {
        SocketAddr::V4(a) => SockAddr::Inet(a),
        SocketAddr::V6(a) => SockAddr::Inet6(a),
    }
}
