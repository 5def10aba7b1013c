//! An allowed connection's upstream: opened from the supervisor's own
//! namespace, to the destination, or to the L7 proxy (announced first)
//! for an inspected route, and established within [`CONNECT_TIMEOUT`]
//! before openshell-sandbox is told it is connected, so that the
//! workload's `connect` fails as the destination refused it.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

use super::Connector;
use crate::decide::{Binary, Decision};
use crate::denylog::NetEvent;
use crate::handoff::{CONNECT_TIMEOUT, ProxiedConnection, RELAYED_AS_L4};

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
    binary: &Binary,
    decision: &Decision,
) -> io::Result<(SocketAddr, Option<SocketAddr>)> {
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
    let (connect_to, proxied) = route(broker, who, &sock, dst, &binary, &decision)?;
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
