//! An allowed connection's upstream: for an inspected route the L7
//! proxy, handed one end of an in-memory pipe; otherwise a TCP connection
//! from the supervisor's own namespace to the destination, established
//! within [`CONNECT_TIMEOUT`] before openshell-sandbox is told it is
//! connected, so that the workload's `connect` fails as the destination
//! refused it.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use super::Connector;
use crate::decide::{Binary, Decision};
use crate::denylog::NetEvent;
use crate::handoff::{CONNECT_TIMEOUT, ProxiedConnection, RELAYED_AS_L4};

/// How many bytes the pipe to the proxy holds each way before a writer
/// waits.
const PROXY_PIPE: usize = 64 << 10;

/// The process and thread a connection is made for, as the deny log and
/// the proxy name them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Who {
    pub pid: u32,
    pub tid: u32,
}

/// Where an allowed connection's bytes go.
#[derive(Debug)]
pub(crate) enum Upstream {
    /// Straight to the destination.
    Direct(tokio::net::TcpStream),
    /// Into the L7 proxy, which serves the other end.
    Proxied(tokio::io::DuplexStream),
}

/// The upstream of an allowed route, for a relay: the L7 proxy for an
/// inspected route, else a connection from this process's namespace to
/// the destination, established within [`CONNECT_TIMEOUT`].
pub(crate) async fn open_route(
    broker: &Connector,
    who: Who,
    binary: Binary,
    decision: Decision,
    dst: SocketAddr,
) -> io::Result<Upstream> {
    if decision.advisor || !decision.conn.l7.is_empty() {
        match &broker.proxy {
            Some(proxy) => {
                let (ours, proxys) = tokio::io::duplex(PROXY_PIPE);
                proxy.serve(
                    proxys,
                    ProxiedConnection {
                        original_dst: dst,
                        host: decision.host.clone(),
                        binary,
                        pid: who.pid,
                        tid: who.tid,
                        decision: decision.conn,
                        advisor: decision.advisor,
                    },
                );
                return Ok(Upstream::Proxied(ours));
            }
            // Only the proxy can answer it; its address leads nowhere.
            None if decision.advisor => {
                return Err(io::Error::from_raw_os_error(libc::ECONNREFUSED));
            }
            None => broker.log.network(&NetEvent {
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
            }),
        }
    }
    let domain = if dst.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    // The relay buffers on both sides already: nothing gains from Nagle.
    sock.set_tcp_nodelay(true)?;
    sock.set_nonblocking(true)?;
    match sock.connect(&dst.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let stream = tokio::net::TcpStream::from_std(sock.into())?;
    established(&stream).await?;
    Ok(Upstream::Direct(stream))
}

/// Waits, without blocking a runtime thread and at most
/// [`CONNECT_TIMEOUT`], until a connect in progress is established.
async fn established(stream: &tokio::net::TcpStream) -> io::Result<()> {
    tokio::time::timeout(CONNECT_TIMEOUT, stream.writable())
        .await
        .map_err(|_| io::Error::from_raw_os_error(libc::ETIMEDOUT))??;
    match stream.take_error()? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
