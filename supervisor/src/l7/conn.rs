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
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use policy_lang::eval::ConnectionDecision;
use policy_lang::matcher::normalize_host;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::LazyConfigAcceptor;

use super::ca::LeafName;
use super::{ProxiedConnection, Proxy, dst_ip};
use crate::decide::Decision;
use crate::policy::Active;

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// The connection-level decision requests are checked against.
#[derive(Debug, Clone)]
pub(super) struct Current {
    pub decision: ConnectionDecision,
    /// The name it was decided for (`None`: an address rule).
    pub host: Option<String>,
    pub rule: Option<String>,
    pub generation: u64,
    /// Set when the policy in force no longer allows the connection.
    pub revoked: Option<String>,
}

/// How the proxy reaches the destination for this connection. The proxy
/// re-originates TLS exactly when it terminated TLS from the workload:
/// the first byte the workload sent decides, not the port number. A
/// plain-HTTP request to port 443 goes upstream in plain HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UpstreamHop {
    /// TLS, the server verified.
    Tls,
    /// Plain TCP to this address.
    Plain(std::net::SocketAddr),
}

/// What every request on one connection shares.
pub(super) struct ConnState {
    pub proxy: Arc<Proxy>,
    pub meta: ProxiedConnection,
    /// The destination address, IPv4-mapped IPv6 as IPv4.
    pub ip: IpAddr,
    /// The TLS server name the client sent (normalized), if any.
    pub sni: Option<String>,
    pub tls: bool,
    pub current: Mutex<Current>,
    /// The upstream connection, made for the first forwarded request and
    /// kept alive for the next ones.
    pub upstream: Mutex<Option<SendRequest<Incoming>>>,
}

impl ConnState {
    /// The connection as the broker decided it; over TLS, decided again
    /// for the SNI when that is another name the sandbox was given for the
    /// address (one address serving several names), so that the
    /// connection's host is the one its requests name.
    fn new(proxy: Arc<Proxy>, meta: ProxiedConnection, sni: Option<String>, tls: bool) -> Self {
        let active = proxy.policy().current();
        let ip = dst_ip(&meta);
        let mut current = Current {
            decision: meta.decision.clone(),
            host: meta.host.clone(),
            rule: crate::decide::rule_of(&active.eval, &meta.decision),
            generation: active.generation,
            revoked: None,
        };
        if let Some(name) = sni.as_deref().filter(|n| meta.host.as_deref() != Some(*n)) {
            let d = proxy.decider.decide_as(
                &active,
                &meta.binary,
                ip,
                meta.original_dst.port(),
                Some(name),
            );
            if d.allowed() && !d.conn.l7.is_empty() {
                current.decision = d.conn;
                current.host = d.host;
                current.rule = d.rule;
            }
        }
        Self {
            ip,
            proxy,
            meta,
            sni,
            tls,
            current: Mutex::new(current),
            upstream: Mutex::new(None),
        }
    }

    /// Decides the connection again if `active` is newer than its
    /// decision. `Err(reason)` when it is no longer allowed (or no longer
    /// inspected): it must be closed.
    pub fn revalidate(&self, active: &Active) -> Result<Current, String> {
        let mut cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if cur.generation != active.generation && cur.revoked.is_none() {
            let d = self.proxy.decider.decide_as(
                active,
                &self.meta.binary,
                self.ip,
                self.meta.original_dst.port(),
                cur.host.as_deref(),
            );
            cur.generation = active.generation;
            if !d.allowed() {
                cur.revoked = Some(d.conn.reason);
            } else if d.conn.l7.is_empty() {
                cur.revoked = Some(
                    "the reloaded policy relays this destination without inspection; reconnect"
                        .into(),
                );
            } else {
                cur.decision = d.conn;
                cur.rule = d.rule;
            }
        }
        match &cur.revoked {
            Some(why) => Err(why.clone()),
            None => Ok(cur.clone()),
        }
    }

    /// The decision for a request naming `host` (another name the
    /// sandbox was given for this address), if the policy allows it.
    pub fn decide_for(&self, active: &Active, host: &str) -> Option<Decision> {
        let d = self.proxy.decider.decide_as(
            active,
            &self.meta.binary,
            self.ip,
            self.meta.original_dst.port(),
            Some(host),
        );
        (d.allowed() && !d.conn.l7.is_empty()).then_some(d)
    }

    /// The hop requests on this connection take upstream.
    pub fn upstream_hop(&self) -> UpstreamHop {
        if self.tls {
            UpstreamHop::Tls
        } else {
            UpstreamHop::Plain(std::net::SocketAddr::new(
                self.ip,
                self.meta.original_dst.port(),
            ))
        }
    }

    /// The upstream connection, if one is open and usable.
    pub fn take_upstream(&self) -> Option<SendRequest<Incoming>> {
        self.upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|s| !s.is_closed())
    }

    pub fn put_upstream(&self, sender: SendRequest<Incoming>) {
        *self.upstream.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
    }
}

/// Serves one accepted connection to its end.
pub(super) async fn serve(proxy: Arc<Proxy>, stream: TcpStream, meta: ProxiedConnection) {
    let _ = stream.set_nodelay(true);
    let mut first = [0_u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) => {}
        _ => return,
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
        async move { Ok::<_, Infallible>(super::request::handle(&st, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .writev(false)
        .serve_connection(TokioIo::new(io), service);
    wait(conn, close).await;
    proxy.unregister(id);
}

async fn wait<F: std::future::Future>(conn: F, close: oneshot::Receiver<()>) {
    tokio::select! {
        _ = conn => {}
        Ok(()) = close => {}
    }
}
