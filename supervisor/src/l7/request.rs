//! One request: every check before anything is forwarded.
//!
//! In order, each failure answered by the proxy itself (`respond`):
//!
//! 1. `CONNECT` and upgrades (`Upgrade`, `Connection: upgrade`, which
//!    includes WebSocket and `h2c`) are refused: no endpoint can allow
//!    them, and a tunnel would carry requests no rule sees.
//! 2. The host the request names (absolute-form authority, else `Host`)
//!    must agree with the other: with the TLS server name (SNI) the client
//!    sent; with the destination port; and with the name the connection
//!    was decided for (another name the sandbox was given for the same
//!    address is decided afresh), else `421 host_mismatch`.
//! 3. The connection is decided again if a reload happened since.
//! 4. `Evaluator::decide_request`: canonical path, method, query, deny
//!    wins, audit only when every applicable endpoint audits, and the
//!    credential whose binding covers host, method and path.
//! 5. Placeholders: a request carrying the placeholder of a credential that
//!    is not the one bound to it is refused (`credential_not_bound`), in
//!    audit mode too; a placeholder in the request target is never
//!    replaced, so it is refused as well.
//! 6. Deny → `403 policy_denied`; audit → logged, then forwarded.
//! 7. Override headers and `_method` parameters are removed (`overrides`),
//!    the credential is injected (only onto a TLS hop, else
//!    `credential_not_bound`), and the request goes upstream with the
//!    **canonical** target: what was checked is what the server gets.

use hyper::body::Incoming;
use hyper::header::{
    ACCEPT_ENCODING, CONNECTION, HOST, HeaderMap, HeaderValue, IF_RANGE, RANGE, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use policy_lang::eval::Verdict;
use policy_lang::ir::Injection;
use policy_lang::matcher::normalize_host;

use super::forward::{self, Injected};
use super::overrides;
use super::respond::{ProxyBody, Refusal, RequestInfo};
use super::state::{ConnState, UpstreamHop};
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

pub(super) async fn handle(st: &ConnState, req: Request<Incoming>) -> Response<ProxyBody> {
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
    };
    match check(st, &active, &req, &target) {
        Err(refusal) => refusal.respond(st, &info),
        Ok(checked) => {
            let path = checked.path.clone();
            info.path = &path;
            info.host = checked.host.as_deref();
            info.rule = checked.rule.as_deref();
            match prepare(st, &active, req, &checked, &info) {
                Ok((req, injected)) => forward::send(st, req, injected, &info).await,
                Err(refusal) => refusal.respond(st, &info),
            }
        }
    }
}

/// What the checks established about a request that may go on.
#[derive(Debug)]
struct Checked {
    /// The canonical origin-form target to forward.
    forward_target: String,
    /// The canonical path, for logs.
    path: String,
    /// The name credentials are bound against (`None`: an address rule or
    /// a request addressed by IP).
    host: Option<String>,
    rule: Option<String>,
    credential: Option<String>,
}

fn check(
    st: &ConnState,
    active: &Active,
    req: &Request<Incoming>,
    target: &str,
) -> Result<Checked, Refusal> {
    if req.method() == Method::CONNECT {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "connect_refused",
            "CONNECT tunnels are not allowed through the L7 proxy",
        ));
    }
    if is_upgrade(req.headers()) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "upgrade_refused",
            "protocol upgrades (WebSocket, h2c) are not allowed: no rule can inspect what follows",
        ));
    }
    let named = named_host(st, req)?;
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
    let d = active.eval.decide_request(
        &decision,
        cred_host.as_deref(),
        req.method().as_str(),
        target,
    );
    let path = d
        .target
        .as_ref()
        .map_or_else(|| target.to_owned(), |c| c.path.clone());
    let rule = d.rule.as_ref().map(policy_lang::ir::Origin::blame).or(rule);
    let refuse = |code: &'static str, reason: String| {
        Refusal::new(StatusCode::FORBIDDEN, code, reason)
            .rule(rule.clone())
            .path(path.clone())
    };
    if d.decision == Verdict::Deny {
        return Err(refuse("policy_denied", d.reason));
    }
    for name in found_placeholders(&active.credentials, req.headers(), target) {
        if d.credential.as_deref() != Some(name) {
            return Err(refuse(
                "credential_not_bound",
                format!(
                    "the request carries the placeholder of credential `{name}`, which is not bound to {} {} on `{}`",
                    req.method(),
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
                method: req.method().as_str(),
                path: &path,
                host: cred_host.as_deref().or(Some(&named.name)),
                rule: rule.as_deref(),
            },
            &d.reason,
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
    let query = match canon
        .query
        .as_deref()
        .map(|q| (q, overrides::strip_from_query(q)))
    {
        Some((q, None)) => Some(q.to_owned()),
        Some((_, Some(stripped))) if !stripped.is_empty() => Some(stripped),
        Some((_, Some(_))) | None => None,
    };
    let forward_target = match &query {
        Some(q) => format!("{}?{q}", canon.path),
        None => canon.path.clone(),
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
fn is_upgrade(headers: &HeaderMap) -> bool {
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
fn named_host(st: &ConnState, req: &Request<Incoming>) -> Result<NamedHost, Refusal> {
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
        let ip = policy_lang::matcher::canonical_ip(ip);
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
fn prepare(
    st: &ConnState,
    active: &Active,
    req: Request<Incoming>,
    checked: &Checked,
    info: &RequestInfo<'_>,
) -> Result<(Request<Incoming>, Option<Injected>), Refusal> {
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
