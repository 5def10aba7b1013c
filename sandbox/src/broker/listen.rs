//! A trapped `listen`.
//!
//! `listen` on an IP socket that was never bound binds it to an ephemeral
//! port on every address, and Landlock's bind check (which refuses every
//! `bind` the bundle does not allow) never sees that implicit bind. With
//! `--netns none` that is a port on the host's network: a channel in, and
//! back out, that no `connect` of the workload ever names. So:
//!
//! | socket | answer |
//! |---|---|
//! | unix, or any family but IP | performed |
//! | IP, created in the sandbox's own namespace (`--netns new`) | performed: only the sandbox's loopback can reach it |
//! | IP, in the host's namespace (`--netns none`, or passed in) | `EACCES` + log |
//!
//! The bundle allows no `bind` (Landlock refuses them all), so an IP socket
//! of the host's namespace is either unbound (the implicit bind above) or
//! was bound by another process and passed in: neither may listen.
//! "Performed" is the broker calling `listen` on the socket it took
//! with `pidfd_getfd`, never "continue": the workload could otherwise swap
//! an unbound host socket onto the fd number after the check.

use std::os::fd::AsFd;
use std::sync::Arc;

use super::{Broker, Call, Refusal};

pub(super) fn handle(broker: &Arc<Broker>, call: &Call) {
    let sock = match enforcer::take_fd_from(call.tid(), call.int_arg(0)) {
        Ok(s) => s,
        Err(e) => return call.fail(e.raw_os_error().unwrap_or(libc::EBADF)),
    };
    let Ok(info) = enforcer::socket_info(sock.as_fd()) else {
        return call.fail(libc::ENOTSOCK);
    };
    let ip = matches!(info.domain, libc::AF_INET | libc::AF_INET6);
    if !call.still_valid() {
        return;
    }
    if !ip || broker.in_sandbox(&sock) {
        return match enforcer::listen_on(sock.as_fd(), call.int_arg(1)) {
            Ok(()) => call.succeed(),
            Err(e) => call.fail(e.raw()),
        };
    }
    let local = socket2::SockRef::from(&sock)
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket());
    let port = local.map_or(0, |a| a.port());
    let reason = if port == 0 {
        "listen on an unbound socket would bind an ephemeral port on every address of the host's network"
    } else {
        "the socket belongs to the host's network namespace and the policy lets the workload listen on no port there"
    };
    broker.deny(
        call,
        libc::EACCES,
        &Refusal {
            syscall: "listen",
            protocol: if info.sock_type == libc::SOCK_STREAM {
                "tcp"
            } else {
                "udp"
            },
            ip: local.map(|a| a.ip()).filter(|ip| !ip.is_unspecified()),
            port: (port != 0).then_some(port),
            reason,
            note: Some("inbound: the address is the socket's own"),
            ..Refusal::default()
        },
    );
}
