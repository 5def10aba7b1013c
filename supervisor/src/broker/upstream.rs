//! An allowed connection: the supervisor connects from its own namespace
//! and installs the established socket at the workload's fd number.
//!
//! The replacement has the workload socket's domain, type and protocol
//! (`IPPROTO_MPTCP` stays MPTCP), its blocking mode, its `FD_CLOEXEC`, and
//! the options a client sets before connecting (`TCP_NODELAY`,
//! keep-alive, send and receive timeouts). Only an *established* socket is
//! installed: a socket whose connect failed could be connected again, and
//! one that lives in the supervisor's namespace must never connect
//! anywhere the broker did not decide. The workload's thread therefore
//! waits for the handshake (at most [`CONNECT_TIMEOUT`]) and its `connect`
//! returns 0, also on a non-blocking socket, which every event loop
//! accepts.
//!
//! The socket goes in with `SECCOMP_IOCTL_NOTIF_ADDFD` (`SETFD`) and the
//! call is then answered with 0: `SETFD|SEND` would make `connect` return
//! the fd number, which callers testing `!= 0` take for failure.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};

use enforcer::SocketInfo;
use sandbox::broker::{Call, TcpConnect};

use super::Connector;
use crate::decide::{Binary, Decision};
use crate::denylog::NetEvent;
use crate::handoff::{CONNECT_TIMEOUT, ProxiedConnection, ProxyHandoff, RELAYED_AS_L4};
use enforcer::tgid_of;

/// Where the brokered connection goes.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per trapped call, built once and moved; boxing would only add an allocation"
)]
pub(super) enum Target {
    /// A route the bundle allows: the destination, or the L7 proxy.
    Route { binary: Binary, decision: Decision },
    /// The DNS stub's TCP listener (`--netns none`).
    Stub(SocketAddr),
}

pub(super) fn broker(me: &Connector, call: Call, c: &TcpConnect, target: Target) {
    let (fd, info, dst) = (c.fd, c.info, c.dst);
    let cloexec = match enforcer::fd_cloexec(call.tid(), fd) {
        Ok(c) => c,
        Err(_) => return call.fail(libc::EBADF),
    };
    let sock = match replacement(&c.sock, info) {
        Ok(s) => s,
        Err(e) => return call.fail(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    let who = Who {
        pid: tgid_of(call.tid()),
        tid: call.tid(),
    };
    let (connect_to, proxied) = match route(me, who, &sock, dst, &target) {
        Ok(r) => r,
        Err(e) => return call.fail(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    // The common case, a nearby destination: the handshake is over by the
    // time `connect` returns, and the socket is installed right here.
    sock.set_nonblocking(true).ok();
    match sock.connect(&connect_to.into()) {
        Ok(()) => return install(&call, &sock, fd, info, cloexec),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return give_up(me.proxy.as_ref(), &call, proxied, &e),
    }
    if enforcer::wait_writable(sock.as_fd(), Duration::ZERO).unwrap_or(false) {
        return match sock.take_error() {
            Ok(None) => install(&call, &sock, fd, info, cloexec),
            Ok(Some(e)) | Err(e) => give_up(me.proxy.as_ref(), &call, proxied, &e),
        };
    }
    let proxy = me.proxy.clone();
    me.runtime.spawn(async move {
        match established(sock).await {
            Ok(sock) => install(&call, &sock, fd, info, cloexec),
            Err(e) => give_up(proxy.as_ref(), &call, proxied, &e),
        }
    });
}

/// Installs the established `sock` at the workload's `fd` and lets its
/// `connect` return 0.
fn install(call: &Call, sock: &Socket, fd: i32, info: SocketInfo, cloexec: bool) {
    if let Err(e) = sock.set_nonblocking(info.nonblocking) {
        return call.fail(e.raw_os_error().unwrap_or(libc::ECONNREFUSED));
    }
    match call.install(sock.as_fd(), fd, cloexec) {
        0 => call.succeed(),
        errno => call.fail(errno),
    }
}

fn give_up(
    proxy: Option<&Arc<dyn ProxyHandoff>>,
    call: &Call,
    proxied: Option<SocketAddr>,
    e: &io::Error,
) {
    if let (Some(p), Some(from)) = (proxy, proxied) {
        p.cancel(from);
    }
    call.fail(e.raw_os_error().unwrap_or(libc::ECONNREFUSED));
}

/// A socket like the workload's, with the options it set.
fn replacement(workload: &OwnedFd, info: SocketInfo) -> io::Result<Socket> {
    let sock = Socket::new(
        Domain::from(info.domain),
        Type::STREAM,
        Some(Protocol::from(info.protocol)),
    )?;
    let theirs = SockRef::from(workload);
    if theirs.tcp_nodelay().unwrap_or(false) {
        sock.set_tcp_nodelay(true)?;
    }
    if theirs.keepalive().unwrap_or(false) {
        let mut ka = TcpKeepalive::new();
        if let Ok(t) = theirs.tcp_keepalive_time() {
            ka = ka.with_time(t);
        }
        if let Ok(t) = theirs.tcp_keepalive_interval() {
            ka = ka.with_interval(t);
        }
        if let Ok(n) = theirs.tcp_keepalive_retries() {
            ka = ka.with_retries(n);
        }
        sock.set_keepalive(true)?;
        sock.set_tcp_keepalive(&ka)?;
    }
    sock.set_read_timeout(theirs.read_timeout().unwrap_or(None))?;
    sock.set_write_timeout(theirs.write_timeout().unwrap_or(None))?;
    Ok(sock)
}

/// The process and thread a connection is made for, as the deny log and
/// the proxy name them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Who {
    pub pid: u32,
    pub tid: u32,
}

/// Where to connect, logging what is worth logging, and the local address
/// announced to the proxy.
fn route(
    broker: &Connector,
    who: Who,
    sock: &Socket,
    dst: SocketAddr,
    target: &Target,
) -> io::Result<(SocketAddr, Option<SocketAddr>)> {
    let Target::Route { binary, decision } = target else {
        let Target::Stub(stub) = target else {
            return Ok((dst, None));
        };
        return Ok((same_family(*stub, dst), None));
    };
    if decision.conn.l7.is_empty() {
        return Ok((dst, None));
    }
    let Some(proxy) = &broker.proxy else {
        broker.log.network(&NetEvent {
            denied: false,
            tid: who.tid,
            pid: who.pid,
            binary: Some(&binary.path),
            syscall: "connect",
            protocol: "tcp",
            host: decision.host.as_deref(),
            ip: Some(dst.ip()),
            port: Some(dst.port()),
            rule: decision.rule.as_deref(),
            reason: &decision.conn.reason.to_string(),
            note: Some(RELAYED_AS_L4),
            ..NetEvent::default()
        });
        return Ok((dst, None));
    };
    let listener = same_family(proxy.listener(), dst);
    let local = SocketAddr::new(listener.ip(), 0);
    sock.bind(&local.into())?;
    let from = sock
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))?;
    proxy.expect(
        from,
        ProxiedConnection {
            original_dst: dst,
            host: decision.host.clone(),
            binary: binary.clone(),
            pid: who.pid,
            tid: who.tid,
            decision: decision.conn.clone(),
        },
    );
    Ok((listener, Some(from)))
}

/// The upstream connection of an allowed route, for a relay: opened from
/// this process's namespace to the destination, or to the L7 proxy
/// (announced first) for an inspected route, established within
/// [`CONNECT_TIMEOUT`].
pub(crate) async fn open_route(
    broker: &Connector,
    who: Who,
    binary: Binary,
    decision: Decision,
    dst: SocketAddr,
) -> io::Result<tokio::net::TcpStream> {
    let domain = if dst.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    // The relay buffers on both sides already: nothing gains from Nagle.
    sock.set_tcp_nodelay(true)?;
    let target = Target::Route { binary, decision };
    let (connect_to, proxied) = route(broker, who, &sock, dst, &target)?;
    sock.set_nonblocking(true)?;
    let connected = match sock.connect(&connect_to.into()) {
        Ok(()) => Ok(sock),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => established(sock).await,
        Err(e) => Err(e),
    };
    let stream = connected.and_then(|s| tokio::net::TcpStream::from_std(s.into()));
    if stream.is_err()
        && let (Some(p), Some(from)) = (&broker.proxy, proxied)
    {
        p.cancel(from);
    }
    stream
}

/// `addr` in the address family of `like` (IPv4 as IPv4-mapped IPv6).
fn same_family(addr: SocketAddr, like: SocketAddr) -> SocketAddr {
    match (addr.ip(), like) {
        (IpAddr::V4(v4), SocketAddr::V6(_)) => {
            SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), addr.port())
        }
        (IpAddr::V6(v6), SocketAddr::V4(_)) => SocketAddr::new(
            IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::LOCALHOST)),
            addr.port(),
        ),
        _ => addr,
    }
}

/// Waits, without blocking a runtime thread and at most
/// [`CONNECT_TIMEOUT`], until a connect in progress is established.
async fn established(sock: Socket) -> io::Result<Socket> {
    let stream = tokio::net::TcpStream::from_std(sock.into())?;
    tokio::time::timeout(CONNECT_TIMEOUT, stream.writable())
        .await
        .map_err(|_| io::Error::from_raw_os_error(libc::ETIMEDOUT))??;
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    Ok(Socket::from(stream.into_std()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_the_family_of_the_socket() {
        let v4: SocketAddr = "127.0.0.1:53".parse().unwrap();
        let v6: SocketAddr = "[::1]:443".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:53".parse().unwrap();
        assert_eq!(same_family(v4, v6), mapped);
        assert_eq!(same_family(mapped, v4), v4);
        assert_eq!(same_family(v4, v4), v4);
    }
}
