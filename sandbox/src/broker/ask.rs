//! What only a policy can decide: each TCP connect to an IP address is
//! asked of the supervisor over the sandbox protocol, and its answer
//! carried out here.
//!
//! A TCP connect to one of the host's nameservers on port 53, when the
//! workload shares the host's network, goes to the sandbox's DNS stub
//! without asking.
//!
//! | answer | what the workload gets |
//! |---|---|
//! | relayed | a connected loopback socket at its fd number, pumped to the relay stream |
//! | refused | the supervisor's errno (the supervisor logged it) |
//! | own loopback | its own socket connected on the sandbox's loopback, or `ECONNREFUSED` and a refusal report |
//! | no answer in time ([`crate::relay::ANSWER_TIMEOUT`]) | `ETIMEDOUT` |
//! | no answer (the supervisor is gone, broke the protocol) | `ECONNREFUSED` |
//!
//! Nothing is allowed by default: whatever goes wrong on the way, the
//! call fails.

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use sandbox_protocol::{MAX_REASON, RefusalReport};

use policy_bundle::matcher::canonical_ip;

use super::{
    Broker, Call, NetMode, Refusal, TcpConnect, in_family, perform_on_own_loopback, perform_to,
};
use crate::caller::{Identify, cut};
use crate::relay::{Attached, Connect, RelayError};

/// Asks the supervisor.
#[derive(Debug)]
pub struct AskSupervisor {
    /// The attachment in use, after its greeting.
    pub supervisor: Attached,
    /// Reads who made each call.
    pub identify: Identify,
}

/// Asks about `c`, a TCP connect to an IP address, and answers `call`
/// once the supervisor has; see the module docs.
pub(super) fn tcp_connect(broker: &Arc<Broker>, call: Call, c: TcpConnect) {
    // Sharing the host's network, the workload's resolver asks the
    // host's nameservers: the stub answers instead.
    if let NetMode::Shared {
        stub_tcp,
        nameservers,
        ..
    } = &broker.mode
        && c.dst.port() == 53
        && nameservers.contains(&canonical_ip(c.dst.ip()))
    {
        let stub = in_family(*stub_tcp, c.info.domain);
        return perform_to(broker, call, c.sock, stub);
    }
    let me = &broker.judge;
    let caller = me.identify.caller(call.tid());
    let cloexec = enforcer::fd_cloexec(call.tid(), c.fd);
    if !call.still_valid() {
        return;
    }
    let caller = match caller {
        Ok(caller) => caller,
        Err(e) => {
            let why = format!("the calling binary cannot be identified: {e}");
            return broker.deny(
                &call,
                libc::ECONNREFUSED,
                &Refusal {
                    syscall: "connect",
                    protocol: "tcp",
                    ip: Some(c.dst.ip()),
                    port: Some(c.dst.port()),
                    reason: &why,
                    ..Refusal::default()
                },
            );
        }
    };
    let Ok(cloexec) = cloexec else {
        return call.fail(libc::EBADF);
    };
    let broker = Arc::clone(broker);
    let runtime = broker.runtime.clone();
    runtime.spawn(async move {
            let exe = String::from_utf8_lossy(&caller.exe).into_owned();
            let answer = broker.judge.supervisor.current().connect(caller, c.dst).await;
            match answer {
                Ok(Connect::Relayed(stream)) => {
                    let installed = copy_options(&c, &stream)
                        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
                        .and_then(|()| match call.install(stream.as_fd(), c.fd, cloexec) {
                            0 => Ok(()),
                            errno => Err(errno),
                        });
                    match installed {
                        Ok(()) => call.succeed(),
                        Err(errno) => call.fail(errno),
                    }
                }
                Ok(Connect::Refused(errno)) => call.fail(errno),
                Ok(Connect::OwnLoopback) if broker.in_sandbox(&c.sock) => {
                    perform_on_own_loopback(&broker, call, c.sock, c.dst, exe);
                }
                Ok(Connect::OwnLoopback) => broker.deny(
                    &call,
                    libc::ECONNREFUSED,
                    &Refusal {
                        syscall: "connect",
                        protocol: "tcp",
                        binary: Some(&exe),
                        ip: Some(c.dst.ip()),
                        port: Some(c.dst.port()),
                        reason: "no rule allows this address, and the socket is not the sandbox's own (passed in from outside)",
                        ..Refusal::default()
                    },
                ),
                Err(RelayError::TimedOut(_)) => call.fail(libc::ETIMEDOUT),
                Err(_) => call.fail(libc::ECONNREFUSED),
            }
        });
}

impl AskSupervisor {
    /// Writes the deny-log line for `r`, made for `call`: reported to
    /// the supervisor, which keeps the log.
    pub(super) fn log_refusal(&self, call: &Call, r: &Refusal<'_>) {
        let exe = match r.binary {
            Some(b) => Some(b.as_bytes().to_vec()),
            None => enforcer::exe_path(call.tid())
                .ok()
                .map(|e| e.path.as_os_str().as_bytes().to_vec()),
        };
        // A supervisor that is gone logs nothing more; the call is refused
        // all the same.
        let _ = self.supervisor.current().report(RefusalReport {
            pid: enforcer::tgid_of(call.tid()),
            tid: call.tid(),
            exe,
            syscall: r.syscall.to_owned(),
            protocol: r.protocol.to_owned(),
            destination: r.ip.zip(r.port).map(|(ip, port)| (ip, port).into()),
            address: r.address.map(|a| a.as_bytes().to_vec()),
            reason: cut(r.reason.to_owned(), MAX_REASON),
            note: r.note.map(|n| cut(n.to_owned(), MAX_REASON)),
        });
    }
}

/// Gives the relayed socket the workload's blocking mode and the options a
/// client sets before connecting, so that it behaves as the socket the
/// workload made would have.
fn copy_options(c: &TcpConnect, stream: &std::net::TcpStream) -> std::io::Result<()> {
    let theirs = socket2::SockRef::from(&c.sock);
    let ours = socket2::SockRef::from(stream);
    if theirs.tcp_nodelay().unwrap_or(false) {
        ours.set_tcp_nodelay(true)?;
    }
    ours.set_read_timeout(theirs.read_timeout().unwrap_or(None))?;
    ours.set_write_timeout(theirs.write_timeout().unwrap_or(None))?;
    ours.set_nonblocking(c.info.nonblocking)
}
