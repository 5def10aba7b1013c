//! One client connection: TLS or not, then HTTP/1.1 with keep-alive until
//! the client (or a reload) closes it.
//!
//! The first byte decides: `0x16` starts a TLS handshake record (a
//! ClientHello), anything else is plain HTTP. For TLS the proxy reads the
//! ClientHello first (SNI, ALPN), then answers with a leaf for the SNI, or
//! for the destination address when the client sent no SNI (it connected
//! to an address). Only `http/1.1` is offered by ALPN.
//!
//! The connection keeps the decision the broker made for it, and decides
//! it again when the policy changed ([`ConnState::revalidate`]): eagerly
//! for every open connection at reload, and lazily before each request.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use policy_bundle::matcher::normalize_host;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::oneshot;
use tokio_rustls::LazyConfigAcceptor;

use super::ca::LeafName;
use super::state::ConnState;
use super::{ProxiedConnection, Proxy, dst_ip};

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Serves one relayed connection to its end.
pub(super) async fn serve(proxy: Arc<Proxy>, mut stream: DuplexStream, meta: ProxiedConnection) {
    let mut first = [0_u8; 1];
    match stream.read(&mut first).await {
        Ok(1) => {}
        _ => return,
    }
    let stream = Replayed::new(first[0], stream);
    if meta.advisor && first[0] == TLS_HANDSHAKE {
        // Plain HTTP only: the endpoint is answered here, so TLS would
        // protect nothing, and no leaf is minted for its name.
        proxy.log.network(&crate::denylog::NetEvent {
            denied: true,
            tid: meta.tid,
            pid: meta.pid,
            binary: Some(&meta.binary.path),
            syscall: "connect",
            protocol: "tcp",
            host: meta.host.as_deref(),
            ip: Some(dst_ip(&meta)),
            port: Some(meta.original_dst.port()),
            reason: "TLS to `policy.local` refused: the advisor endpoint answers plain HTTP only",
            ..crate::denylog::NetEvent::default()
        });
        return;
    }
    if first[0] != TLS_HANDSHAKE {
        let state = Arc::new(ConnState::new(Arc::clone(&proxy), meta, None, false));
        return serve_http(proxy, state, stream).await;
    }
    let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let Ok(start) = acceptor.await else {
        return;
    };
    let sni = start
        .client_hello()
        .server_name()
        .and_then(|n| normalize_host(n).ok());
    let leaf = match &sni {
        Some(name) => LeafName::Dns(name.clone()),
        None => LeafName::Ip(dst_ip(&meta)),
    };
    let Ok(config) = proxy.ca.server_config(&leaf) else {
        return;
    };
    let Ok(tls) = start.into_stream(config).await else {
        return;
    };
    let state = Arc::new(ConnState::new(Arc::clone(&proxy), meta, sni, true));
    serve_http(proxy, state, tls).await;
}

async fn serve_http<S>(proxy: Arc<Proxy>, state: Arc<ConnState>, io: S)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (id, close) = proxy.register(Arc::clone(&state));
    let svc_state = Arc::clone(&state);
    let service = service_fn(move |req| {
        let st = Arc::clone(&svc_state);
        async move {
            let resp = if st.meta.advisor {
                super::advisor::handle(&st, req).await
            } else {
                super::request::handle(&st, req).await
            };
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .writev(false)
        .serve_connection(TokioIo::new(io), service)
        // A WebSocket `101` hands the connection to its relay, which
        // registers itself for reloads (`websocket::upgrade`).
        .with_upgrades();
    wait(conn, close).await;
    proxy.unregister(id);
}

async fn wait<F: std::future::Future>(conn: F, close: oneshot::Receiver<()>) {
    tokio::select! {
        _ = conn => {}
        Ok(()) = close => {}
    }
}

/// A stream whose first byte, read to tell TLS from plain HTTP, is read
/// again.
struct Replayed<S> {
    first: Option<u8>,
    inner: S,
}

impl<S> Replayed<S> {
    fn new(first: u8, inner: S) -> Self {
        Self {
            first: Some(first),
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replayed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() > 0
            && let Some(b) = self.first.take()
        {
            buf.put_slice(&[b]);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replayed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
