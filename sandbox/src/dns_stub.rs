//! The sandbox's DNS stub: 127.0.0.1:53, UDP and TCP, in the workload's
//! network namespace (its `/etc/resolv.conf` names it). Each question is
//! asked of the supervisor over the sandbox protocol, which answers with
//! its DNS logic (only the names the policy allows, resolved from its own
//! namespace) and remembers which address a name was given for; the stub
//! sends back what it got, or nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sandbox_protocol::pb::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::relay::Supervisor;

/// A TCP client idle this long is dropped.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Binds the stub's two sockets; call it on the runtime that will serve
/// them ([`serve`]).
pub async fn bind() -> std::io::Result<(UdpSocket, TcpListener)> {
    let at = SocketAddr::from(([127, 0, 0, 1], 53));
    Ok((UdpSocket::bind(at).await?, TcpListener::bind(at).await?))
}

/// Serves both sockets until the runtime shuts down.
pub fn serve(udp: UdpSocket, tcp: TcpListener, supervisor: Supervisor) {
    let supervisor = Arc::new(supervisor);
    tokio::spawn(serve_udp(Arc::new(udp), Arc::clone(&supervisor)));
    tokio::spawn(serve_tcp(tcp, supervisor));
}

async fn serve_udp(sock: Arc<UdpSocket>, supervisor: Arc<Supervisor>) {
    let mut buf = vec![0_u8; sandbox_protocol::MAX_DNS];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let query = buf.get(..n).unwrap_or_default().to_vec();
        if query.is_empty() {
            continue;
        }
        let (sock, supervisor) = (Arc::clone(&sock), Arc::clone(&supervisor));
        tokio::spawn(async move {
            if let Ok(reply) = supervisor.dns(None, Transport::Udp, query).await
                && !reply.is_empty()
            {
                let _ = sock.send_to(&reply, peer).await;
            }
        });
    }
}

async fn serve_tcp(listener: TcpListener, supervisor: Arc<Supervisor>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(tcp_client(stream, Arc::clone(&supervisor)));
    }
}

async fn tcp_client(mut stream: TcpStream, supervisor: Arc<Supervisor>) {
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(TCP_IDLE, stream.read_u16()).await else {
            return;
        };
        let mut query = vec![0_u8; usize::from(len)];
        if len == 0 || stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Ok(reply) = supervisor.dns(None, Transport::Tcp, query).await else {
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
