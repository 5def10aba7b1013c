//! One request: every check before anything is forwarded.
//!
//! In order, each failure answered by the proxy itself (`respond`):
//!
//! 1. `CONNECT` and upgrades to anything but WebSocket (`h2c`) are
//!    refused: a tunnel would carry requests no rule sees. A WebSocket
//!    upgrade goes on to `websocket::upgrade` once the host is checked
//!    (step 2): only a websocket endpoint's rules can allow it, and its
//!    messages are judged one by one after the `101`.
//! 2. The host the request names (absolute-form authority, else `Host`)
//!    must agree with the other: with the TLS server name (SNI) the client
//!    sent; with the destination port; and with the name the connection
//!    was decided for (another name the sandbox was given for the same
//!    address is decided afresh), else `421 host_mismatch`.
//! 3. The connection is decided again if a reload happened since. A path
//!    that is another spelling (ASCII case, trailing slash) of the path of
//!    a GraphQL, JSON-RPC or MCP endpoint without being under it is
//!    refused (`path_alias`, `Evaluator::path_alias`), before a body or an
//!    upgrade is read: the server may route it to that endpoint's
//!    handler, while other rules, which never read the body, would judge
//!    it.
//! 4. `Evaluator::decide_request`: canonical path, method, query, deny
//!    wins, audit only when every applicable endpoint audits, and the
//!    credential whose binding covers host, method and path; a query
//!    parameter that names another method (`_method` in any spelling a
//!    server decodes) is a deny, in audit mode too (`override_refused`).
//!    When `Evaluator::body_limit` says the target is a JSON-RPC, MCP or
//!    GraphQL endpoint's, the body is read first (`body`: up to the limit,
//!    else `413`; a GraphQL POST only as `application/json`, else `415`)
//!    and `Evaluator::decide_body` judges it (a GraphQL GET by its query
//!    string, with an empty body); the request then carries exactly the
//!    bytes judged. REST bodies are never read.
//! 5. Placeholders: a request carrying the placeholder of a credential that
//!    is not the one bound to it is refused (`credential_not_bound`), in
//!    audit mode too; a placeholder in the request target is never
//!    replaced, so it is refused as well. Nor is one in a body: when the
//!    sandbox has credentials, a judged body holding the marker is refused
//!    by the evaluator (`Reason::PlaceholderInBody`), and a streamed one
//!    is scanned as it goes (`placeholder`): refused before the head is
//!    sent when the marker comes with the first piece, else the upstream
//!    request is aborted before the marker leaves.
//! 6. Deny → `403` with the code the evaluator's reason gives
//!    (`Reason::refusal_code`: `policy_denied`, `override_refused`,
//!    `path_alias`); audit → logged, then forwarded.
//! 7. Override headers are removed (`overrides`), the credential is
//!    injected (only onto a TLS hop, else `credential_not_bound`), and the request goes upstream with the
//!    **canonical** target: what was checked is what the server gets.

use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ACCEPT, ACCEPT_ENCODING, CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, EXPECT,
    HOST, HeaderMap, HeaderValue, IF_RANGE, RANGE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use policy_bundle::Injection;
use policy_bundle::L7Protocol;
use policy_bundle::eval::{ConnectionDecision, Decision, Reason, Verdict};
use policy_bundle::l7body::graphql::check_content_type;
use policy_bundle::l7body::jsonrpc::accepts_event_stream;
use policy_bundle::matcher::{canonicalize_path, normalize_host};

use super::body::{self, UpstreamBody};
use super::forward::{self, Injected};
use super::overrides;
use super::placeholder;
use super::respond::{ProxyBody, Refusal, RequestInfo};
use super::rewrite;
use super::state::{ConnState, UpstreamHop};
use super::websocket::{self, handshake::asks_for_websocket};
use crate::credentials::{Credential, CredentialSet};
use crate::policy::Active;

/// The host a request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedHost {
    /// A normalized host name, or an IP address in its canonical text.
    pub name: String,
    pub ip: Option<std::net::IpAddr>,
    pub port: Option<u16>,
}

pub(super) async fn handle(st: &Arc<ConnState>, req: Request<Incoming>) -> Response<ProxyBody> {
    let active = st.proxy.policy().current();
    let method = req.method().as_str().to_owned();
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().to_string(), |p| p.as_str().to_owned());
    let mut info = RequestInfo {
        method: &method,
        path: &target,
        host: st.meta.host.as_deref(),
        rule: None,
        rpc: None,
        graphql: None,
    };
    let scope = match scope(st, &active, &req) {
        Ok(s) => s,
        Err(refusal) => return refusal.respond(st, &info),
    };
    // Before a body or an upgrade is read: the evaluator refuses such a
    // target whatever the rules say, and would answer the same later.
    if let Some(d) = active.eval.path_alias(&scope.decision, &target) {
        return Refusal::new(
            StatusCode::FORBIDDEN,
            d.reason.refusal_code(),
            d.reason.to_string(),
        )
        .rule(d.rule.as_ref().map(policy_bundle::Origin::blame))
        .respond(st, &info);
    }
    if is_upgrade(req.headers()) {
        return websocket::upgrade(st, &active, scope, req, info).await;
    }
    // REST endpoints are decided on the head alone and their bodies stream
    // through, unless their placeholders are replaced (`rewrite`): then a
    // body the head lets through is read whole and judged; an RPC
    // endpoint's body is read and judged first.
    let mut read_body = None;
    let (req, d) = match active.eval.body_limit(&scope.decision, &target) {
        None => {
            let d = active.eval.decide_request(
                &scope.decision,
                scope.cred_host.as_deref(),
                &method,
                &target,
            );
            let rewrites = active
                .eval
                .body_rewrites(
                    &scope.decision,
                    scope.cred_host.as_deref(),
                    &method,
                    &target,
                )
                .filter(|_| d.decision != Verdict::Deny);
            if rewrites.is_none() {
                (req.map(UpstreamBody::Streamed), d)
            } else {
                let (req, read) = match rewrite::read(req).await {
                    Ok(r) => r,
                    Err(refusal) => return refusal.respond(st, &info),
                };
                let d = active.eval.decide_typed_body(
                    &scope.decision,
                    scope.cred_host.as_deref(),
                    &method,
                    &target,
                    &read.bytes,
                    read.content_type.as_deref(),
                );
                read_body = Some(read);
                (req, d)
            }
        }
        Some(limit) => match judge_body(&active, &scope, req, &target, limit).await {
            Ok(judged) => judged,
            Err(refusal) => return refusal.respond(st, &info),
        },
    };
    let call = d
        .rpc
        .as_ref()
        .and_then(|n| n.call.and_then(|i| n.calls.get(i)))
        .cloned();
    info.rpc = call.as_ref();
    let operation = d
        .graphql
        .as_ref()
        .and_then(|n| n.operation.and_then(|i| n.operations.get(i)))
        .cloned();
    info.graphql = operation.as_ref();
    let body_credentials = match &d.reason {
        Reason::BodyRewritten { credentials, .. } => credentials.clone(),
        _ => Vec::new(),
    };
    let checked = match check(st, &active, req.headers(), scope, d, &info) {
        Ok(c) => c,
        Err(refusal) => return refusal.respond(st, &info),
    };
    let path = checked.path.clone();
    info.path = &path;
    info.host = checked.host.as_deref();
    info.rule = checked.rule.as_deref();
    let (req, stopped) = match placeholder::guard(st, &active, req, &info).await {
        Ok(guarded) => guarded,
        Err(refusal) => return refusal.respond(st, &info),
    };
    let (req, mut injected) = match &read_body {
        Some(read) => {
            let hop = st.upstream_hop();
            match rewrite::apply(&active.credentials, hop, req, read, &body_credentials) {
                Ok(rewritten) => rewritten,
                Err(refusal) => return refusal.path(path.clone()).respond(st, &info),
            }
        }
        None => (req, Vec::new()),
    };
    let resp = match prepare(st, &active, req, &checked, &info) {
        Ok((mut req, header)) => {
            if !injected.is_empty() {
                ask_for_a_readable_response(req.headers_mut());
            }
            injected.extend(header);
            forward::send(st, req, injected, &info).await
        }
        Err(refusal) => return refusal.respond(st, &info),
    };
    // Stopped for the marker: logged then; the client learns why instead
    // of the failure of the aborted request.
    match stopped {
        Some(s) if s.get() => placeholder::refusal().response(&info),
        _ => resp,
    }
}

/// Where a request is decided: the connection's decision, or the one for
/// the other name it addresses, and the name credentials bind against.
#[derive(Debug)]
pub(super) struct Scope {
    pub decision: ConnectionDecision,
    /// `None`: an address rule, or a request addressed by IP.
    pub cred_host: Option<String>,
    pub rule: Option<String>,
    pub named: NamedHost,
}

/// Reads the body of a request to an RPC or GraphQL endpoint (up to
/// `limit` bytes) and judges it; the request then carries exactly the
/// bytes judged.
async fn judge_body(
    active: &Active,
    scope: &Scope,
    req: Request<Incoming>,
    target: &str,
    limit: usize,
) -> Result<(Request<UpstreamBody>, Decision), Refusal> {
    let (mut parts, incoming) = req.into_parts();
    let expect_continue = parts
        .headers
        .get(EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let kinds = body_kinds(active, &scope.decision, target);
    if let Err(refusal) = check_head(&parts, kinds) {
        // The client reads the refusal, not a reset for unread data; one
        // waiting for `100 Continue` is not invited to upload.
        if !expect_continue {
            body::drain(incoming).await;
        }
        return Err(refusal);
    }
    let framed =
        parts.headers.contains_key(CONTENT_LENGTH) || parts.headers.contains_key(TRANSFER_ENCODING);
    let bytes = body::read(incoming, limit, expect_continue)
        .await
        .map_err(|e| match e {
            body::ReadError::TooLarge { limit, declared } => Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                match declared {
                    Some(n) => format!(
                        "the request body ({n} bytes) is over this endpoint's limit of {limit} bytes; nothing was forwarded"
                    ),
                    None => format!(
                        "the request body is over this endpoint's limit of {limit} bytes; nothing was forwarded"
                    ),
                },
            )
            .closing(),
            body::ReadError::Broken(why) => Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the request body could not be read: {why}"),
            )
            .closing(),
        })?;
    let d = active.eval.decide_body(
        &scope.decision,
        scope.cred_host.as_deref(),
        parts.method.as_str(),
        target,
        &bytes,
    );
    // The body goes upstream as one block of known length: no transfer
    // coding, no trailers, no expectation (hyper answered it already).
    parts.headers.remove(EXPECT);
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.remove(TRAILER);
    if framed || !bytes.is_empty() {
        parts
            .headers
            .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    } else {
        parts.headers.remove(CONTENT_LENGTH);
    }
    let req = Request::from_parts(parts, UpstreamBody::Checked(Full::new(bytes)));
    Ok((req, d))
}

/// Which kinds of body-judging endpoint apply to `target` on this
/// connection. The evaluator says how much to read (`body_limit`) but not
/// for which protocol, and the checks on the head differ.
#[derive(Debug, Clone, Copy, Default)]
struct BodyKinds {
    /// JSON-RPC or MCP.
    rpc: bool,
    graphql: bool,
}

fn body_kinds(active: &Active, conn: &ConnectionDecision, target: &str) -> BodyKinds {
    let endpoints = &active.eval.bundle().enforcement.l7;
    let mut kinds = BodyKinds::default();
    for ep in conn.l7.iter().filter_map(|&e| endpoints.get(e as usize)) {
        if !ep.reads_body() {
            continue;
        }
        let applies = canonicalize_path(target, ep.encoded_slash).is_ok_and(|c| ep.covers(&c.path));
        if !applies {
            continue;
        }
        match ep.protocol() {
            L7Protocol::Graphql => kinds.graphql = true,
            _ => kinds.rpc = true,
        }
    }
    kinds
}

/// The checks on the head of a request whose body is to be judged: its
/// coding, and what the body is said to be.
fn check_head(parts: &hyper::http::request::Parts, kinds: BodyKinds) -> Result<(), Refusal> {
    if let Some(coding) = content_coding(&parts.headers) {
        return Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "body_not_inspectable",
            format!(
                "the body is `{coding}`-coded; the proxy judges JSON-RPC and GraphQL bodies only as plain text"
            ),
        ));
    }
    // With no body, a GET is MCP Streamable HTTP's receive stream only
    // when it asks for one; anything else it could be is not an RPC call.
    // (A GraphQL GET carries its operation in the query string.)
    if kinds.rpc
        && parts.method == Method::GET
        && !parts
            .headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(accepts_event_stream)
    {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "policy_denied",
            "a GET to a JSON-RPC or MCP endpoint is only the MCP event stream; its Accept must name text/event-stream",
        ));
    }
    // A GraphQL server picks its body reader by the Content-Type: only a
    // body it reads as JSON is the body judged here.
    if kinds.graphql && parts.method == Method::POST {
        let types: Vec<&HeaderValue> = parts.headers.get_all(CONTENT_TYPE).iter().collect();
        let why = match types.as_slice() {
            [] => check_content_type(None).err().map(|e| e.to_string()),
            [one] => match one.to_str() {
                Ok(text) => check_content_type(Some(text)).err().map(|e| e.to_string()),
                Err(_) => Some("the Content-Type is not text".to_owned()),
            },
            _ => Some("the request has several Content-Type headers".to_owned()),
        };
        if let Some(why) = why {
            return Err(Refusal::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "body_not_inspectable",
                format!(
                    "{why}; a GraphQL POST is judged only as `application/json` (UTF-8), which is how the server must read it"
                ),
            ));
        }
    }
    Ok(())
}

/// A content coding other than `identity` on a request body: its bytes
/// are not the text a JSON-RPC or GraphQL reading would judge, while the
/// server may decode them into something else.
fn content_coding(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|c| String::from_utf8_lossy(c).trim().to_ascii_lowercase())
        .find(|c| !c.is_empty() && c != "identity")
}

/// What the checks established about a request that may go on.
#[derive(Debug)]
pub(super) struct Checked {
    /// The canonical origin-form target to forward.
    pub forward_target: String,
    /// The canonical path, for logs.
    pub path: String,
    /// The name credentials are bound against (`None`: an address rule or
    /// a request addressed by IP).
    pub host: Option<String>,
    pub rule: Option<String>,
    pub credential: Option<String>,
}

/// Steps 1 to 3: what the request may be decided against.
fn scope<B>(st: &ConnState, active: &Active, req: &Request<B>) -> Result<Scope, Refusal> {
    if req.method() == Method::CONNECT {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "connect_refused",
            "CONNECT tunnels are not allowed through the L7 proxy",
        ));
    }
    if is_upgrade(req.headers()) && !asks_for_websocket(req.headers()) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "upgrade_refused",
            "protocol upgrades other than WebSocket (h2c) are not allowed: no rule can inspect what follows",
        ));
    }
    let named = named_host(st, req)?;
    decide_scope(st, active, named)
}

/// The decision a request naming `named` is checked against: the
/// connection's (decided again after a reload), or the one for the other
/// name it addresses.
pub(super) fn decide_scope(
    st: &ConnState,
    active: &Active,
    named: NamedHost,
) -> Result<Scope, Refusal> {
    let cur = st
        .revalidate(active)
        .map_err(|why| Refusal::new(StatusCode::FORBIDDEN, "connection_revoked", why).closing())?;
    let (decision, cred_host, rule) = match (&cur.host, &named.ip) {
        // Addressed by IP (checked to be the destination), or decided by an
        // address rule: the connection's decision, no credential host.
        (_, Some(_)) | (None, _) => (cur.decision, None, cur.rule),
        (Some(h), None) if *h == named.name => (cur.decision, Some(h.clone()), cur.rule),
        (Some(h), None) => match st.decide_for(active, &named.name) {
            Some(d) => (d.conn, d.host, d.rule),
            None => {
                return Err(Refusal::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "host_mismatch",
                    format!(
                        "the request names `{}` but the connection was made to `{h}`",
                        named.name
                    ),
                ));
            }
        },
    };
    Ok(Scope {
        decision,
        cred_host,
        rule,
        named,
    })
}

/// Steps 5 to 7 on the decision `d`: what is forwarded, if anything.
pub(super) fn check(
    st: &ConnState,
    active: &Active,
    headers: &HeaderMap,
    scope: Scope,
    d: Decision,
    info: &RequestInfo<'_>,
) -> Result<Checked, Refusal> {
    let Scope {
        cred_host,
        rule,
        named,
        ..
    } = scope;
    let target = info.path;
    let path = d
        .target
        .as_ref()
        .map_or_else(|| target.to_owned(), |c| c.path.clone());
    let rule = d.rule.as_ref().map(policy_bundle::Origin::blame).or(rule);
    let refuse = |code: &'static str, reason: String| {
        Refusal::new(StatusCode::FORBIDDEN, code, reason)
            .rule(rule.clone())
            .path(path.clone())
    };
    if d.decision == Verdict::Deny {
        return Err(refuse(d.reason.refusal_code(), d.reason.to_string()));
    }
    for name in found_placeholders(&active.credentials, headers, target) {
        if d.credential.as_deref() != Some(name) {
            return Err(refuse(
                "credential_not_bound",
                format!(
                    "the request carries the placeholder of credential `{name}`, which is not bound to {} {} on `{}`",
                    info.method,
                    path,
                    cred_host.as_deref().unwrap_or(&named.name)
                ),
            ));
        }
    }
    if !active
        .credentials
        .placeholders_in(target.as_bytes())
        .is_empty()
    {
        return Err(refuse(
            "credential_not_bound",
            "a credential placeholder in the request target is never replaced; send it in a header"
                .into(),
        ));
    }
    if d.decision == Verdict::Audit {
        st.log_audit(
            &RequestInfo {
                method: info.method,
                path: &path,
                host: cred_host.as_deref().or(Some(&named.name)),
                rule: rule.as_deref(),
                rpc: info.rpc,
                graphql: info.graphql,
            },
            &d.reason.to_string(),
        );
    }
    // A target no endpoint could read was refused above, by the decision.
    let Some(canon) = d.target else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("request target `{target}` refused"),
        ));
    };
    let forward_target = match canon.query.as_deref() {
        Some(q) if !q.is_empty() => format!("{}?{q}", canon.path),
        _ => canon.path.clone(),
    };
    Ok(Checked {
        forward_target,
        path,
        host: cred_host,
        rule,
        credential: d.credential,
    })
}

/// `Upgrade` present, or `upgrade` among the `Connection` options.
pub(super) fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(UPGRADE)
        || headers.get_all(CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|s| {
                s.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
        })
}

/// The host the request names, checked against the absolute-form target,
/// the SNI, the destination port and address.
fn named_host<B>(st: &ConnState, req: &Request<B>) -> Result<NamedHost, Refusal> {
    let mismatch =
        |reason: String| Refusal::new(StatusCode::MISDIRECTED_REQUEST, "host_mismatch", reason);
    let bad = |reason: String| Refusal::new(StatusCode::BAD_REQUEST, "bad_request", reason);
    let from_uri = req
        .uri()
        .authority()
        .map(|a| parse_authority(a.as_str()).ok_or_else(|| bad(format!("`{a}` is not a host"))))
        .transpose()?;
    let hosts: Vec<&HeaderValue> = req.headers().get_all(HOST).iter().collect();
    if hosts.len() > 1 {
        return Err(bad("the request has several Host headers".into()));
    }
    let from_header = hosts
        .first()
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(parse_authority)
                .ok_or_else(|| bad("the Host header is not a host".into()))
        })
        .transpose()?;
    let named = match (from_uri, from_header) {
        (Some(u), Some(h)) if u.name != h.name || u.port != h.port => {
            return Err(mismatch(format!(
                "the request target names `{}` but its Host header says `{}`",
                u.name, h.name
            )));
        }
        (Some(u), _) => u,
        (None, Some(h)) => h,
        (None, None) => NamedHost {
            name: st
                .sni
                .clone()
                .or_else(|| st.meta.host.clone())
                .unwrap_or_else(|| st.ip.to_string()),
            ip: None,
            port: None,
        },
    };
    if let Some(port) = named.port
        && port != st.meta.original_dst.port()
    {
        return Err(mismatch(format!(
            "the request names port {port} but the connection was made to port {}",
            st.meta.original_dst.port()
        )));
    }
    if let Some(sni) = &st.sni
        && *sni != named.name
    {
        return Err(mismatch(format!(
            "the request names `{}` but the TLS server name is `{sni}`",
            named.name
        )));
    }
    if let Some(ip) = named.ip
        && ip != st.ip
    {
        return Err(mismatch(format!(
            "the request names `{ip}` but the connection was made to `{}`",
            st.ip
        )));
    }
    Ok(named)
}

/// `host[:port]`, `[v6]:port`.
pub(super) fn parse_authority(text: &str) -> Option<NamedHost> {
    let auth: hyper::http::uri::Authority = text.parse().ok()?;
    if text.contains('@') {
        return None;
    }
    let host = auth.host();
    let port = auth.port_u16();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        let ip = policy_bundle::matcher::canonical_ip(ip);
        return Some(NamedHost {
            name: ip.to_string(),
            ip: Some(ip),
            port,
        });
    }
    Some(NamedHost {
        name: normalize_host(host).ok()?,
        ip: None,
        port,
    })
}

/// The credentials whose placeholders occur in header values or the target.
fn found_placeholders<'a>(
    creds: &'a CredentialSet,
    headers: &HeaderMap,
    target: &str,
) -> Vec<&'a str> {
    let mut found: Vec<&str> = Vec::new();
    let texts = headers
        .values()
        .map(HeaderValue::as_bytes)
        .chain(std::iter::once(target.as_bytes()));
    for text in texts {
        if !CredentialSet::may_hold_placeholder(text) {
            continue;
        }
        for name in creds.placeholders_in(text) {
            if !found.contains(&name) {
                found.push(name);
            }
        }
    }
    // A placeholder-shaped token nobody issued is left alone: it is not a
    // credential, and refusing it would let the workload probe nothing.
    found
}

/// Rewrites the request for upstream: canonical target, credential
/// injected, hop-by-hop headers dropped.
pub(super) fn prepare(
    st: &ConnState,
    active: &Active,
    req: Request<UpstreamBody>,
    checked: &Checked,
    info: &RequestInfo<'_>,
) -> Result<(Request<UpstreamBody>, Option<Injected>), Refusal> {
    let (mut parts, body) = req.into_parts();
    parts.uri = checked.forward_target.parse().map_err(|_| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("`{}` cannot be forwarded", checked.forward_target),
        )
    })?;
    parts.version = hyper::Version::HTTP_11;
    if !parts.headers.contains_key(HOST) {
        let host = info.host.map_or_else(|| st.ip.to_string(), str::to_owned);
        let value = HeaderValue::from_str(&host)
            .map_err(|_| Refusal::new(StatusCode::BAD_REQUEST, "bad_request", "no usable Host"))?;
        parts.headers.insert(HOST, value);
    }
    forward::strip_hop_by_hop(&mut parts.headers);
    overrides::strip(&mut parts.headers);
    let injected = match checked
        .credential
        .as_deref()
        .and_then(|n| active.credentials.get(n))
    {
        Some(cred) => inject(cred, &mut parts.headers, st.upstream_hop())?,
        None => None,
    };
    if injected.is_some() {
        ask_for_a_readable_response(&mut parts.headers);
    }
    Ok((Request::from_parts(parts, body), injected))
}

/// On a request that carries a secret: the response must come back in a
/// form the scrub can read whole. `identity` explicitly (a request with
/// no `Accept-Encoding` accepts any coding), and no byte range (slices
/// of an echo, one per request, would each be too short to recognise).
fn ask_for_a_readable_response(headers: &mut HeaderMap) {
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    headers.remove(RANGE);
    headers.remove(IF_RANGE);
}

/// Puts `cred`'s secret where its binding says. `None` when nothing was
/// injected (`inject replace` and no placeholder in the request).
///
/// Only onto a TLS hop: a request the workload sent in plain HTTP goes
/// upstream in plain HTTP whatever the port, so it is refused rather
/// than have the secret cross the network in clear.
fn inject(
    cred: &Credential,
    headers: &mut HeaderMap,
    hop: UpstreamHop,
) -> Result<Option<Injected>, Refusal> {
    let placeholder = cred.placeholder.as_deref();
    let carries = placeholder.is_some_and(|p| {
        headers
            .values()
            .any(|v| memchr::memmem::find(v.as_bytes(), p.as_bytes()).is_some())
    });
    let sets_header = matches!(cred.inject, Injection::Header { .. });
    if !carries && !sets_header {
        return Ok(None);
    }
    if let UpstreamHop::Plain(dst) = hop {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "credential_not_bound",
            format!(
                "credential `{}` is only sent over TLS, and this request would reach `{dst}` in plain HTTP; use https",
                cred.name
            ),
        ));
    }
    let secret = cred.secret.as_ref().map_err(|why| {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "credential_unavailable",
            format!("credential `{}` is not available: {why}", cred.name),
        )
    })?;
    let unusable = || {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "a header holding the placeholder cannot carry the credential",
        )
    };
    if let Some(p) = placeholder.filter(|_| carries) {
        for value in headers.values_mut() {
            let Ok(text) = value.to_str() else { continue };
            if text.contains(p) {
                let mut v = HeaderValue::from_str(&text.replace(p, secret.expose()))
                    .map_err(|_| unusable())?;
                v.set_sensitive(true);
                *value = v;
            }
        }
    }
    if let Injection::Header { name, template } = &cred.inject {
        let name: hyper::header::HeaderName = name.parse().map_err(|_| unusable())?;
        let mut v = HeaderValue::from_str(&template.replace("{secret}", secret.expose()))
            .map_err(|_| unusable())?;
        v.set_sensitive(true);
        headers.insert(name, v);
    }
    Ok(Some(Injected {
        secret: secret.clone(),
        replacement: placeholder.unwrap_or("openshell-redacted").to_owned(),
    }))
}
