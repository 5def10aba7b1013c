//! Both ends of one connection: the supervisor serves the `Broker`
//! service on it (HTTP/2, one connection, no listener), the sandbox is
//! the client. Either side may have opened the connection: one of a Unix
//! socket pair in a local run, a TLS connection across hosts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::transport::{Channel, Endpoint, Uri};

use crate::pb::broker_client::BrokerClient;
use crate::pb::broker_server::{Broker, BrokerServer};
use crate::{MAX_MESSAGE, MAX_STREAMS};

/// What carries the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A Unix socket pair between `run` and the sandbox it started: the
    /// kernel reports a peer that is gone, and the two live and die
    /// together, so nothing is pinged (a busy peer is never taken for a
    /// dropped one).
    Local,
    /// The channel between two ends started on their own, over TCP or a
    /// Unix socket in a shared directory alike: either can fall silent
    /// without closing (a cut network, or a peer stopped or frozen with
    /// its socket open), so each side pings the other
    /// ([`KEEPALIVE_INTERVAL`]).
    Network,
}

/// On a [`Link::Network`], how often each side pings the other on an idle
/// connection (HTTP/2 `PING`), and how long it waits for the answer before
/// it takes the connection for dropped: a silent peer or a cut network
/// ends the channel within their sum, as a closed one does at once.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a connection could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// HTTP/2 failed on the connection.
    #[error("the sandbox connection failed: {0}")]
    Http(#[from] hyper::Error),
    /// The client could not start on the connection.
    #[error("the sandbox connection failed: {0}")]
    Client(#[from] tonic::transport::Error),
}

/// Serves `broker` on `io` until the sandbox closes the connection (the
/// supervisor's side). Every message over [`MAX_MESSAGE`] is refused by
/// the codec before it is decoded.
pub async fn serve<B, IO>(broker: B, io: IO, link: Link) -> Result<(), TransportError>
where
    B: Broker,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = BrokerServer::new(broker)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2.max_concurrent_streams(MAX_STREAMS);
    if link == Link::Network {
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT);
    }
    http2
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
        .await?;
    Ok(())
}

/// The `Broker` client on `io` (the sandbox's side), with the same
/// message limit.
pub async fn client<IO>(io: IO, link: Link) -> Result<BrokerClient<Channel>, TransportError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // The connector hands out the one connection, once: a channel that
    // asks again (the connection dropped) gets an error, never a second.
    let once = Arc::new(Mutex::new(Some(io)));
    let connector = tower::service_fn(move |_: Uri| {
        let io = once.lock().ok().and_then(|mut slot| slot.take());
        async move {
            io.map(TokioIo::new)
                .ok_or_else(|| std::io::Error::other("the sandbox connection is used once"))
        }
    });
    // The URI names no host: the connector ignores it.
    let endpoint = Endpoint::from_static("http://sandbox.invalid");
    let endpoint = match link {
        Link::Local => endpoint,
        Link::Network => endpoint
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true),
    };
    let channel = endpoint.connect_with_connector(connector).await?;
    Ok(BrokerClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE))
}
