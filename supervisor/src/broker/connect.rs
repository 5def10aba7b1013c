//! A trapped `connect`: copy, check, decide, then broker, perform or refuse.
//!
//! | destination | `--netns new` | `--netns none` |
//! |---|---|---|
//! | IP, TCP, a route allows it | connect from the supervisor, install | same |
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
//! "Performed" means the supervisor calls `connect` on the workload's own
//! socket (taken with `pidfd_getfd`) with the address it checked; see the
//! enforcer's `emulate` module.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use enforcer::{SockAddr, SocketInfo, UnixAddr};
use policy_bundle::matcher::canonical_ip;

use super::upstream::{self, Target};
use super::{Broker, Call, NetMode};
use crate::decide::Binary;
use crate::denylog::NetEvent;

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
    let binary = broker.decider.identify(call.tid());
    if !call.still_valid() {
        return;
    }
    match addr {
        SockAddr::Inet(a) => ip_connect(broker, call, fd, sock, info, a.into(), binary),
        SockAddr::Inet6(a) => ip_connect(broker, call, fd, sock, info, a.into(), binary),
        SockAddr::Unix(u) => unix_connect(broker, &call, sock, u),
        unspec @ SockAddr::Unspec { .. } => {
            if in_sandbox(broker, &sock) {
                perform(broker, call, sock, unspec);
            } else {
                broker.deny(
                    &call,
                    libc::EACCES,
                    NetEvent {
                        syscall: "connect",
                        protocol: "unspec",
                        reason: "a disconnect (AF_UNSPEC) is only performed on the sandbox's own sockets",
                        ..NetEvent::default()
                    },
                );
            }
        }
        SockAddr::Other { family, .. } => {
            let family = format!("family {family}");
            broker.deny(
                &call,
                libc::EACCES,
                NetEvent {
                    syscall: "connect",
                    protocol: &family,
                    reason: "only IP and unix sockets are brokered",
                    ..NetEvent::default()
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
    binary: std::io::Result<Binary>,
) {
    let ip = canonical_ip(dst.ip());
    let port = dst.port();
    let family_ok = match dst {
        SocketAddr::V4(_) => info.domain == libc::AF_INET,
        SocketAddr::V6(_) => info.domain == libc::AF_INET6,
    };
    let stream = info.sock_type == libc::SOCK_STREAM;
    if stream && !family_ok {
        return call.fail(libc::EAFNOSUPPORT);
    }
    let protocol = if stream { "tcp" } else { "udp" };
    let event = |reason: &'static str| NetEvent {
        syscall: "connect",
        protocol,
        ip: Some(ip),
        port: Some(port),
        reason,
        ..NetEvent::default()
    };
    if !stream {
        return udp_connect(broker, call, sock, info, dst, event);
    }
    if let NetMode::Shared {
        stub_tcp,
        nameservers,
        ..
    } = &broker.mode
        && port == 53
        && nameservers.contains(&ip)
    {
        let target = Target::Stub(*stub_tcp);
        return upstream::broker(broker, call, fd, &sock, info, dst, target);
    }
    let binary = match binary {
        Ok(b) => b,
        Err(_) => {
            return broker.deny(
                &call,
                libc::ECONNREFUSED,
                event("the calling binary cannot be identified"),
            );
        }
    };
    let decision = broker.decider.decide(&binary, ip, port);
    if decision.allowed()
        && let Some(why) = broker
            .decider
            .planted_program(&binary, ip, port)
            .or_else(|| broker.decider.foreign_code(call.tid(), &binary))
    {
        if !call.still_valid() {
            return;
        }
        return broker.deny(
            &call,
            libc::ECONNREFUSED,
            NetEvent {
                binary: Some(&binary.path),
                host: decision.host.as_deref(),
                reason: &why,
                ..event("")
            },
        );
    }
    if decision.allowed() {
        let target = Target::Route {
            binary: binary.clone(),
            decision: decision.clone(),
        };
        return upstream::broker(broker, call, fd, &sock, info, dst, target);
    }
    let local = ip.is_loopback() && (decision.host.is_none() || port == 53);
    if local && broker.isolated_netns().is_some() && in_sandbox(broker, &sock) {
        return perform_on_own_loopback(broker, call, sock, dst, binary.path);
    }
    broker.deny(
        &call,
        libc::ECONNREFUSED,
        NetEvent {
            binary: Some(&binary.path),
            host: decision.host.as_deref(),
            reason: &decision.conn.reason.to_string(),
            ..event("")
        },
    );
}

fn udp_connect<'a>(
    broker: &Arc<Broker>,
    call: Call,
    sock: OwnedFd,
    info: SocketInfo,
    dst: SocketAddr,
    event: impl Fn(&'static str) -> NetEvent<'a>,
) {
    let ip = canonical_ip(dst.ip());
    if info.sock_type != libc::SOCK_DGRAM {
        return broker.deny(
            &call,
            libc::EACCES,
            event("only TCP and UDP sockets are brokered"),
        );
    }
    match &broker.mode {
        NetMode::Isolated { .. } if ip.is_loopback() && in_sandbox(broker, &sock) => {
            perform(broker, call, sock, sockaddr(dst));
        }
        NetMode::Shared {
            stub_udp,
            nameservers,
            ..
        } if dst.port() == 53 && nameservers.contains(&ip) => {
            let stub = match (info.domain, stub_udp) {
                (libc::AF_INET6, SocketAddr::V4(v4)) => {
                    SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
                }
                (_, s) => *s,
            };
            perform(broker, call, sock, sockaddr(stub));
        }
        _ => broker.deny(
            &call,
            libc::EACCES,
            event("UDP goes only to the sandbox's DNS stub"),
        ),
    }
}

fn unix_connect(broker: &Arc<Broker>, call: &Call, sock: OwnedFd, addr: UnixAddr) {
    let refuse = |reason: &str, path: Option<&str>| {
        broker.deny(
            call,
            libc::ECONNREFUSED,
            NetEvent {
                syscall: "connect",
                protocol: "unix",
                address: path,
                reason,
                ..NetEvent::default()
            },
        );
    };
    let addr = match addr {
        UnixAddr::Unnamed => return call.fail(libc::EINVAL),
        UnixAddr::Abstract(name) => {
            if broker.isolated_netns().is_none() || !in_sandbox(broker, &sock) {
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

/// A connect no rule allows to the sandbox's own loopback, performed: a
/// server the workload runs there answers. When none listens
/// (`ECONNREFUSED`) the refusal is logged, since what the workload meant to
/// reach may well be the host's loopback, which is out of its reach.
fn perform_on_own_loopback(
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
                NetEvent {
                    syscall: "connect",
                    protocol: "tcp",
                    binary: Some(&binary),
                    ip: Some(dst.ip()),
                    port: Some(dst.port()),
                    reason: "no rule allows this address, and nothing listens at it on the sandbox's own loopback (the host's loopback is out of reach)",
                    ..NetEvent::default()
                },
            ),
            Err(e) => call.fail(e.raw()),
        }
    });
}

/// Whether `sock` was created in the sandbox's namespace (not one the
/// supervisor installed, nor one passed in from outside).
pub(super) fn in_sandbox(broker: &Broker, sock: &OwnedFd) -> bool {
    let Some(netns) = broker.isolated_netns() else {
        return false;
    };
    enforcer::socket_netns(sock.as_fd())
        .and_then(|ns| enforcer::same_namespace(ns.as_fd(), netns.as_fd()))
        .unwrap_or(false)
}

fn sockaddr(dst: SocketAddr) -> SockAddr {
    match dst {
        SocketAddr::V4(a) => SockAddr::Inet(a),
        SocketAddr::V6(a) => SockAddr::Inet6(a),
    }
}
