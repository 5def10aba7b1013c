//! Upstream: one connection per client connection, made on the first
//! forwarded request and kept alive for the next ones.
//!
//! The proxy connects from the supervisor's namespace to the destination
//! the workload asked for (the broker already decided it may). TLS is
//! re-originated when the client spoke TLS, verifying the real server for
//! the name the client asked (SNI), or for the address when it sent none,
//! against the system roots and `--upstream-ca`. Responses lose their
//! hop-by-hop headers and the server's reason phrase. After an injection
//! (into the headers, or the body by `rewrite`), every form of each secret
//! is replaced by its placeholder in header names and values, body and
//! trailers (`scrub`), so a server that echoes what it received does not
//! hand a secret to the workload; a body in a content or transfer coding
//! cannot be scanned and is refused.

use std::io;

use hyper::client::conn::http1::SendRequest;
use hyper::header::{
    CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, HeaderMap, HeaderName, TRANSFER_ENCODING,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::body::UpstreamBody;
use super::forms::SecretForms;
use super::respond::{BoxError, ProxyBody, Refusal, RequestInfo};
use super::scrub::{self, Scrub};
use super::state::{ConnState, UpstreamHop};
use super::websocket::handshake::{self, Offer};
use crate::credentials::Secret;
use crate::handoff::CONNECT_TIMEOUT;
use http_body_util::BodyExt as _;
use hyper::upgrade::OnUpgrade;

/// A secret the request carries upstream; the response is scrubbed of it.
#[derive(Debug, Clone)]
pub(super) struct Injected {
    pub secret: Secret,
    pub replacement: String,
}

/// Headers that belong to one hop (RFC 9110 §7.6.1), plus the proxy ones
/// a client would only send to a proxy it knows of.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes hop-by-hop headers, and those `Connection` names.
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Sends `req` upstream and relays the response, scrubbed of each secret
/// the request carried.
pub(super) async fn send(
    st: &ConnState,
    req: Request<UpstreamBody>,
    injected: Vec<Injected>,
    info: &RequestInfo<'_>,
) -> Response<ProxyBody> {
    let head = req.method() == Method::HEAD;
    let upstream_error =
        |e: String| Refusal::new(StatusCode::BAD_GATEWAY, "upstream_error", e).respond(st, info);
    let mut sender = match st.take_upstream() {
        Some(s) => s,
        None => match connect(st).await {
            Ok(s) => s,
            Err(e) => return upstream_error(e),
        },
    };
    if sender.ready().await.is_err() {
        sender = match connect(st).await {
            Ok(s) => s,
            Err(e) => return upstream_error(e),
        };
    }
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => return upstream_error(format!("the destination failed: {e}")),
    };
    st.put_upstream(sender);
    relay_response(st, resp, injected, head, info)
}

/// The response as the workload gets it: hop-by-hop headers and the
/// reason phrase dropped, and after an injection scrubbed of each secret.
fn relay_response(
    st: &ConnState,
    resp: Response<hyper::body::Incoming>,
    injected: Vec<Injected>,
    head: bool,
    info: &RequestInfo<'_>,
) -> Response<ProxyBody> {
    let (mut parts, body) = resp.into_parts();
    // The reason phrase as the server wrote it is never relayed: the
    // workload gets the canonical one for the status, which holds no echo.
    parts.extensions.remove::<hyper::ext::ReasonPhrase>();
    let body: ProxyBody = body.map_err(BoxError::other).boxed_unsync();
    if injected.is_empty() {
        strip_hop_by_hop(&mut parts.headers);
        return Response::from_parts(parts, body);
    }
    if let Some(coding) = unreadable_coding(&parts.headers) {
        return Refusal::new(
            StatusCode::BAD_GATEWAY,
            "response_not_scrubbable",
            format!(
                "the response to a request that carried a credential is encoded (`{coding}`) although the proxy asked for none; it cannot be checked for the secret and was dropped"
            ),
        )
        .respond(st, info);
    }
    strip_hop_by_hop(&mut parts.headers);
    let may_have_body = !head
        && !parts.status.is_informational()
        && parts.status != StatusCode::NO_CONTENT
        && parts.status != StatusCode::NOT_MODIFIED;
    if may_have_body {
        // Any replacement changes the length: the body goes out chunked.
        parts.headers.remove(CONTENT_LENGTH);
    }
    let body = injected.iter().fold(body, |body, inj| {
        let forms = SecretForms::new(inj.secret.expose().as_bytes());
        scrub::scrub_headers(&mut parts.headers, &forms, inj.replacement.as_bytes());
        Scrub::new(body, forms, inj.replacement.as_bytes()).boxed_unsync()
    });
    Response::from_parts(parts, body)
}

/// A WebSocket upgrade sent upstream on a connection of its own. A `101`
/// that keeps the handshake's promises (`handshake::check_switch`) comes
/// back with the upgrade of the server's side; any other answer is
/// relayed as a response, and the connection stays HTTP.
pub(super) async fn send_upgrade(
    st: &ConnState,
    req: Request<UpstreamBody>,
    injected: Option<Injected>,
    offer: &Offer,
    info: &RequestInfo<'_>,
) -> (Response<ProxyBody>, Option<Switched>) {
    let upstream_error =
        |e: String| Refusal::new(StatusCode::BAD_GATEWAY, "upstream_error", e).respond(st, info);
    let mut sender = match connect(st).await {
        Ok(s) => s,
        Err(e) => return (upstream_error(e), None),
    };
    let mut resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => return (upstream_error(format!("the destination failed: {e}")), None),
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let injected = injected.into_iter().collect();
        return (relay_response(st, resp, injected, false, info), None);
    }
    if let Err(why) = handshake::check_switch(resp.headers(), offer) {
        let refusal = Refusal::new(StatusCode::BAD_GATEWAY, "upgrade_refused", why).closing();
        return (refusal.respond(st, info), None);
    }
    let upgrade = hyper::upgrade::on(&mut resp);
    let (mut parts, _) = resp.into_parts();
    parts.extensions.remove::<hyper::ext::ReasonPhrase>();
    strip_hop_by_hop(&mut parts.headers);
    handshake::prepare_switch(&mut parts.headers);
    let secret = injected.map(|inj| {
        let forms = SecretForms::new(inj.secret.expose().as_bytes());
        scrub::scrub_headers(&mut parts.headers, &forms, inj.replacement.as_bytes());
        (forms, inj.replacement.into_bytes())
    });
    let body: ProxyBody = super::respond::full(Vec::new());
    (
        Response::from_parts(parts, body),
        Some(Switched { upgrade, secret }),
    )
}

/// A `101` relayed: the server's side of the connection, and the forms of
/// the secret the upgrade carried (with their replacement), which its
/// messages must be scrubbed of.
pub(super) struct Switched {
    pub upgrade: OnUpgrade,
    pub secret: Option<(SecretForms, Vec<u8>)>,
}

/// A content or transfer coding other than `identity` (and `chunked`,
/// which hyper has already undone) on a response: the body's bytes are
/// not the text a scan could find the secret in.
fn unreadable_coding(headers: &HeaderMap) -> Option<String> {
    let codings = |name| {
        headers
            .get_all(name)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(|c| String::from_utf8_lossy(c).trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
    };
    let content = codings(CONTENT_ENCODING);
    let transfer = codings(TRANSFER_ENCODING);
    content.into_iter().find(|c| c != "identity").or_else(|| {
        transfer
            .into_iter()
            .find(|c| c != "chunked" && c != "identity")
    })
}

/// A new upstream connection for `st`.
async fn connect(st: &ConnState) -> Result<SendRequest<UpstreamBody>, String> {
    let dst = std::net::SocketAddr::new(st.ip, st.meta.original_dst.port());
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(dst))
        .await
        .map_err(|_| format!("connecting to `{dst}` timed out"))?
        .map_err(|e| format!("cannot connect to `{dst}`: {e}"))?;
    let _ = tcp.set_nodelay(true);
    if let UpstreamHop::Plain(_) = st.upstream_hop() {
        return handshake(tcp).await.map_err(|e| e.to_string());
    }
    let name = match &st.sni {
        Some(n) => ServerName::try_from(n.clone()).map_err(|e| e.to_string())?,
        None => ServerName::IpAddress(st.ip.into()),
    };
    let config = st
        .proxy
        .client
        .get()
        .ok_or_else(|| "no upstream TLS configuration (no root certificates)".to_owned())?;
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(config));
    let tls = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
        .await
        .map_err(|_| format!("the TLS handshake with `{dst}` timed out"))?
        .map_err(|e| format!("TLS with `{dst}` failed: {e}"))?;
    handshake(tls).await.map_err(|e| e.to_string())
}

async fn handshake<S>(io: S) -> io::Result<SendRequest<UpstreamBody>>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    // One flat write buffer: over TLS, each slice of a vectored write
    // would become a record of its own.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .writev(false)
        .handshake(TokioIo::new(io))
        .await
        .map_err(io::Error::other)?;
    // With upgrades: a `101` hands the connection to the WebSocket relay.
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok(sender)
}
