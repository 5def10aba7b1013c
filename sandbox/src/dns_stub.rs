//! The sandbox's DNS stub: 127.0.0.1:53, UDP and TCP, in the workload's
//! network namespace (its `/etc/resolv.conf` names it); without a
//! namespace of its own, an ephemeral loopback port, to which the broker
//! sends what the workload sends the host's nameservers. Each question is
//! asked of the supervisor over the sandbox protocol, which answers with
//! its DNS logic (only the names the policy allows, resolved from its own
//! namespace) and remembers which address a name was given for; the stub
//! sends back what it got, or nothing.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use sandbox_protocol::pb::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::relay::Attached;

/// A TCP client idle this long is dropped.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Binds the stub's two sockets, on 127.0.0.1:53 when the sandbox has a
/// network namespace of its own (`own_network`), else on an ephemeral
/// loopback port (one for both when it can); call it on the runtime that
/// will serve them ([`serve`]).
pub async fn bind(own_network: bool) -> std::io::Result<(UdpSocket, TcpListener)> {
    let port = if own_network { 53 } else { 0 };
    let udp = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let tcp = match TcpListener::bind(udp.local_addr()?).await {
        Ok(tcp) => tcp,
        Err(_) if !own_network => TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?,
        Err(e) => return Err(e),
    };
    Ok((udp, tcp))
}

/// The nameservers of this host's `/etc/resolv.conf` (loopback when it
/// names none, as glibc then asks there): where the workload's resolver
/// sends its questions when it shares the host's network.
#[must_use]
pub fn host_nameservers() -> Vec<IpAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let mut out: Vec<IpAddr> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|v| v.trim().split('%').next()?.parse().ok())
        .map(policy_bundle::matcher::canonical_ip)
        .collect();
    if out.is_empty() {
        out = vec![
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from([0_u16, 0, 0, 0, 0, 0, 0, 1]),
        ];
    }
    out
}

/// Serves both sockets until the runtime shuts down.
pub fn serve(udp: UdpSocket, tcp: TcpListener, supervisor: Attached) {
    tokio::spawn(serve_udp(Arc::new(udp), supervisor.clone()));
    tokio::spawn(serve_tcp(tcp, supervisor));
}

async fn serve_udp(sock: Arc<UdpSocket>, supervisor: Attached) {
    let mut buf = vec![0_u8; sandbox_protocol::MAX_DNS];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let query = buf.get(..n).unwrap_or_default().to_vec();
        if query.is_empty() {
            continue;
        }
        let (sock, supervisor) = (Arc::clone(&sock), supervisor.current());
        tokio::spawn(async move {
            if let Ok(reply) = supervisor.dns(None, Transport::Udp, query).await
                && !reply.is_empty()
            {
                let _ = sock.send_to(&reply, peer).await;
            }
        });
    }
}

async fn serve_tcp(listener: TcpListener, supervisor: Attached) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(tcp_client(stream, supervisor.clone()));
    }
}

async fn tcp_client(mut stream: TcpStream, supervisor: Attached) {
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(TCP_IDLE, stream.read_u16()).await else {
            return;
        };
        let mut query = vec![0_u8; usize::from(len)];
        if len == 0 || stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Ok(reply) = supervisor.current().dns(None, Transport::Tcp, query).await else {
            return;
        };
        let Ok(len) = u16::try_from(reply.len()) else {
            return;
        };
        if len == 0
            || stream.write_u16(len).await.is_err()
            || stream.write_all(&reply).await.is_err()
        {
            return;
        }
    }
}
