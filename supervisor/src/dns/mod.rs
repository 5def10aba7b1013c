//! The DNS stub: what the workload's resolver talks to.
//!
//! With `--netns new` the stub on 127.0.0.1:53 (UDP and TCP) *inside*
//! the workload's namespace, which the workload's `/etc/resolv.conf`
//! names, is openshell-sandbox's, which asks [`Answerer`] over the
//! sandbox protocol; without openshell-sandbox, these sockets are
//! created there by a helper thread and served from the runtime. With `--netns none` it listens on an
//! ephemeral loopback port of the shared namespace, and the broker sends a
//! connect to one of the host's nameservers (port 53) to it instead.
//! Upstream resolution runs in the supervisor's namespace.

mod answer;
mod names;

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::{Resolver, TokioResolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub use answer::Answerer;
pub use names::DnsPolicy;

/// A TCP client idle this long is dropped.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// The stub's bound sockets, before they are served.
#[derive(Debug)]
pub struct StubSockets {
    udp: std::net::UdpSocket,
    tcp: std::net::TcpListener,
}

impl StubSockets {
    /// Binds 127.0.0.1:53 in the namespace `netns`.
    pub fn in_namespace(netns: BorrowedFd<'_>) -> std::io::Result<Self> {
        enforcer::in_netns(netns, || Self::bind(SocketAddr::from(([127, 0, 0, 1], 53))))?
    }

    /// Binds an ephemeral loopback port here (UDP and TCP share it when
    /// they can).
    pub fn ephemeral() -> std::io::Result<Self> {
        let udp = std::net::UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let tcp = std::net::TcpListener::bind(udp.local_addr()?)
            .or_else(|_| std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))?;
        Ok(Self { udp, tcp })
    }

    fn bind(at: SocketAddr) -> std::io::Result<Self> {
        Ok(Self {
            udp: std::net::UdpSocket::bind(at)?,
            tcp: std::net::TcpListener::bind(at)?,
        })
    }

    /// (UDP, TCP) addresses.
    pub fn addrs(&self) -> std::io::Result<(SocketAddr, SocketAddr)> {
        Ok((self.udp.local_addr()?, self.tcp.local_addr()?))
    }

    /// Serves both sockets on the current runtime until it shuts down.
    pub fn serve(self, answerer: Arc<Answerer>) -> std::io::Result<()> {
        self.udp.set_nonblocking(true)?;
        self.tcp.set_nonblocking(true)?;
        let udp = UdpSocket::from_std(self.udp)?;
        let tcp = TcpListener::from_std(self.tcp)?;
        tokio::spawn(serve_udp(Arc::new(udp), Arc::clone(&answerer)));
        tokio::spawn(serve_tcp(tcp, answerer));
        Ok(())
    }
}

async fn serve_udp(sock: Arc<UdpSocket>, answerer: Arc<Answerer>) {
    let mut buf = vec![0_u8; 4096];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let query = buf.get(..n).unwrap_or_default().to_vec();
        let sock = Arc::clone(&sock);
        let answerer = Arc::clone(&answerer);
        tokio::spawn(async move {
            if let Some(reply) = answerer.answer(&query, true).await {
                let _ = sock.send_to(&reply, peer).await;
            }
        });
    }
}

async fn serve_tcp(listener: TcpListener, answerer: Arc<Answerer>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(tcp_client(stream, Arc::clone(&answerer)));
    }
}

async fn tcp_client(mut stream: TcpStream, answerer: Arc<Answerer>) {
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(TCP_IDLE, stream.read_u16()).await else {
            return;
        };
        let mut query = vec![0_u8; usize::from(len)];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Some(reply) = answerer.answer(&query, false).await else {
            return;
        };
        let Ok(len) = u16::try_from(reply.len()) else {
            return;
        };
        if stream.write_u16(len).await.is_err() || stream.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// The upstream resolver: `--dns-upstream`, else the host's configuration.
/// `None` when there is neither (allowed names then get `SERVFAIL`, except
/// those given with `--resolve`). The hosts file is not consulted: the
/// stub answers from DNS or from the operator, nothing else.
#[must_use]
pub fn resolver(upstream: Option<SocketAddr>) -> Option<TokioResolver> {
    let mut builder = match upstream {
        Some(at) => {
            let mut ns = NameServerConfig::udp_and_tcp(at.ip());
            for c in &mut ns.connections {
                c.port = at.port();
            }
            Resolver::builder_with_config(
                ResolverConfig::from_name_servers(vec![ns]),
                TokioRuntimeProvider::default(),
            )
        }
        None => TokioResolver::builder_tokio().ok()?,
    };
    let opts = builder.options_mut();
    opts.use_hosts_file = ResolveHosts::Never;
    opts.cache_size = 4096;
    opts.timeout = Duration::from_secs(3);
    opts.attempts = 2;
    builder.build().ok()
}
