//! Trapped sends: `sendto` with an address, `sendmsg`, `sendmmsg`.
//!
//! With `--netns new`, a send is let through ("continue") when its flags
//! (a register, fixed at the trap) have no `MSG_FASTOPEN` and every
//! destination read is none, a unix address or a loopback address. That is
//! safe whatever the workload rewrites meanwhile: a socket it created can
//! only reach the sandbox's loopback, and a socket the broker installed is
//! established TCP, where the kernel ignores a destination. Sends to any
//! other IP are refused with `EACCES` and logged: UDP leaves the sandbox
//! only as DNS through the stub.
//!
//! With `--netns none` nothing may be continued: the workload's sockets are
//! in the host's namespace, and a rewritten address would reach the
//! network. A `sendmsg`/`sendmmsg` on a connected socket is performed by
//! the broker (see [`shared`]); everything else is refused. See
//! `docs/threat-model.md`.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::Arc;

use enforcer::{SockAddr, TrappedCall};
use policy_bundle::matcher::canonical_ip;

use super::{Broker, Call, NetMode, Refusal};

pub(super) fn handle(broker: &Arc<Broker>, call: &Call, kind: TrappedCall) {
    let (name, flags_arg) = match kind {
        TrappedCall::Sendto => ("sendto", 3),
        TrappedCall::Sendmsg => ("sendmsg", 2),
        TrappedCall::Sendmmsg => ("sendmmsg", 3),
        TrappedCall::Connect | TrappedCall::Listen => return call.fail(libc::EINVAL),
    };
    if matches!(broker.mode, NetMode::Shared { .. }) {
        return shared(broker, call, kind, name);
    }
    let flags = call.int_arg(flags_arg);
    if flags & libc::MSG_FASTOPEN != 0 {
        return broker.deny(
            call,
            libc::EOPNOTSUPP,
            &Refusal {
                syscall: name,
                protocol: "tcp",
                reason: "TCP Fast Open is not brokered",
                ..Refusal::default()
            },
        );
    }
    let destinations = match read_destinations(call, kind) {
        Ok(d) => d,
        Err(errno) => return call.fail(errno),
    };
    let destinations = match sent_destinations(broker, call, destinations) {
        Ok(d) => d,
        Err(errno) => return call.fail(errno),
    };
    if !call.still_valid() {
        return;
    }
    for (dst, sandbox_socket) in &destinations {
        let (ip, port) = match dst {
            SockAddr::Inet(a) => (IpAddr::V4(*a.ip()), a.port()),
            SockAddr::Inet6(a) => (IpAddr::V6(*a.ip()), a.port()),
            SockAddr::Unix(_) | SockAddr::Unspec { .. } => continue,
            SockAddr::Other { family, .. } => {
                let family = format!("family {family}");
                return broker.deny(
                    call,
                    libc::EACCES,
                    &Refusal {
                        syscall: name,
                        protocol: &family,
                        reason: "only IP and unix sockets are brokered",
                        ..Refusal::default()
                    },
                );
            }
        };
        let ip = canonical_ip(ip);
        let reason = if !sandbox_socket {
            "the socket was not created in the sandbox's network namespace (passed in by another process): a datagram to an address on it would leave the sandbox"
        } else if !ip.is_loopback() {
            "datagrams leave the sandbox only as DNS through its stub"
        } else {
            continue;
        };
        return broker.deny(
            call,
            libc::EACCES,
            &Refusal {
                syscall: name,
                protocol: "udp",
                ip: Some(ip),
                port: Some(port),
                reason,
                ..Refusal::default()
            },
        );
    }
    call.continue_unchecked();
}

/// `--netns none`: nothing is continued. A `sendmsg`/`sendmmsg` on a
/// connected socket, without destination and without ancillary data, is
/// performed by the broker on the workload's own socket with the bytes
/// it copied (that is how glibc's resolver talks to the stub); every other
/// send is refused.
fn shared(broker: &Arc<Broker>, call: &Call, kind: TrappedCall, name: &str) {
    let refuse = |reason: &str, ip: Option<IpAddr>, port: Option<u16>| {
        broker.deny(
            call,
            libc::EACCES,
            &Refusal {
                syscall: name,
                protocol: if ip.is_some() { "udp" } else { "unix" },
                ip,
                port,
                reason,
                ..Refusal::default()
            },
        );
    };
    if kind == TrappedCall::Sendto {
        let (ip, port) = match enforcer::read_sockaddr(call.tid(), call.arg(4), call.arg(5)) {
            Ok(SockAddr::Inet(a)) => (Some(IpAddr::V4(*a.ip())), Some(a.port())),
            Ok(SockAddr::Inet6(a)) => (Some(canonical_ip(IpAddr::V6(*a.ip()))), Some(a.port())),
            Ok(SockAddr::Unspec { inet: Some(a) }) => (Some(IpAddr::V4(*a.ip())), Some(a.port())),
            Ok(_) => (None, None),
            Err(e) => return call.fail(e.errno()),
        };
        if call.still_valid() {
            refuse(SHARED_SENDTO, ip, port);
        }
        return;
    }
    let messages = match kind {
        TrappedCall::Sendmsg => enforcer::read_message(call.tid(), call.arg(1)).map(|m| vec![m]),
        _ => enforcer::read_messages(call.tid(), call.arg(1), call.arg(2)),
    };
    let messages = match messages {
        Ok(m) => m,
        Err(e) => return call.fail(e.errno()),
    };
    let mut payloads = Vec::with_capacity(messages.len());
    for m in &messages {
        if m.name.is_some() || m.control_len > 0 {
            if call.still_valid() {
                refuse(SHARED_SENDMSG, None, None);
            }
            return;
        }
        match enforcer::read_payload(call.tid(), &m.iov, PAYLOAD_LIMIT) {
            Ok(p) => payloads.push(p),
            Err(e) => return call.fail(e.errno()),
        }
    }
    let sock = match enforcer::take_fd_from(call.tid(), call.int_arg(0)) {
        Ok(s) => s,
        Err(e) => return call.fail(e.raw_os_error().unwrap_or(libc::EBADF)),
    };
    if !call.still_valid() {
        return;
    }
    let flags = call.int_arg(if kind == TrappedCall::Sendmsg { 2 } else { 3 });
    if flags & libc::MSG_FASTOPEN != 0 {
        return call.fail(libc::EOPNOTSUPP);
    }
    let sock = socket2::Socket::from(sock);
    if sock.peer_addr().is_err() {
        return call.fail(libc::EDESTADDRREQ);
    }
    let stream = sock.r#type().is_ok_and(|t| t == socket2::Type::STREAM);
    let call = call.clone();
    broker.runtime.spawn_blocking(move || {
        let mut sent_messages = 0_u64;
        let mut last = 0_usize;
        for (i, (bytes, complete)) in (0_u64..).zip(&payloads) {
            if !complete && !stream {
                break;
            }
            match sock.send_with_flags(bytes, flags | libc::MSG_NOSIGNAL) {
                Ok(n) => {
                    last = n;
                    if kind == TrappedCall::Sendmmsg {
                        let n = u32::try_from(n).unwrap_or(u32::MAX);
                        let _ = enforcer::write_msg_len(call.tid(), call.arg(1), i, n);
                    }
                    sent_messages += 1;
                    if !complete {
                        break;
                    }
                }
                Err(e) if sent_messages == 0 => {
                    return call.fail(e.raw_os_error().unwrap_or(libc::EIO));
                }
                Err(_) => break,
            }
        }
        if sent_messages == 0 {
            return call.fail(libc::EMSGSIZE);
        }
        let value = if kind == TrappedCall::Sendmsg {
            i64::try_from(last).unwrap_or(i64::MAX)
        } else {
            i64::try_from(sent_messages).unwrap_or(i64::MAX)
        };
        call.reply(value);
    });
}

/// What one emulated send copies at most (a stream send may be partial).
const PAYLOAD_LIMIT: usize = 256 * 1024;
const SHARED_SENDTO: &str = "in a network namespace the sandbox does not own (`--netns none`, or a container's) a send to an address cannot be let through; connect the socket instead";
const SHARED_SENDMSG: &str = "without a network namespace of its own (--netns none) sendmsg works only on connected sockets, without an address or ancillary data";

/// The destinations as the kernel will use them on the socket the call
/// names ([`SockAddr::sent_on`]): an `AF_UNSPEC` address on an IPv4
/// socket is an IPv4 destination, whatever its family field says. Each
/// comes with whether the socket is the sandbox's own. Sends that name
/// nothing or only unix addresses need no look at the socket.
fn sent_destinations(
    broker: &Broker,
    call: &Call,
    destinations: Vec<Option<SockAddr>>,
) -> Result<Vec<(SockAddr, bool)>, i32> {
    let named: Vec<SockAddr> = destinations.into_iter().flatten().collect();
    if named.iter().all(|d| matches!(d, SockAddr::Unix(_))) {
        return Ok(named.into_iter().map(|d| (d, true)).collect());
    }
    let sock = enforcer::take_fd_from(call.tid(), call.int_arg(0))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EBADF))?;
    let info = enforcer::socket_info(sock.as_fd()).map_err(|_| libc::ENOTSOCK)?;
    let own = broker.in_sandbox(&sock);
    let mut sent = Vec::with_capacity(named.len());
    for dst in &named {
        if let Some(d) = dst.sent_on(info.domain, info.sock_type)? {
            sent.push((d, own));
        }
    }
    Ok(sent)
}

fn read_destinations(call: &Call, kind: TrappedCall) -> Result<Vec<Option<SockAddr>>, i32> {
    let tid = call.tid();
    let result = match kind {
        TrappedCall::Sendto => {
            enforcer::read_sockaddr(tid, call.arg(4), call.arg(5)).map(|a| vec![Some(a)])
        }
        TrappedCall::Sendmsg => enforcer::read_msghdr_name(tid, call.arg(1)).map(|a| vec![a]),
        TrappedCall::Sendmmsg => enforcer::read_mmsghdr_names(tid, call.arg(1), call.arg(2)),
        TrappedCall::Connect | TrappedCall::Listen => Ok(Vec::new()),
    };
    result.map_err(|e| e.errno())
}
