//! The advisor endpoint, `http://policy.local/`: what a sandboxed agent
//! that was refused something may ask the supervisor, on a connection the
//! broker decided by the policy's `advisor` statement. The proxy answers
//! every request itself; nothing is forwarded to a destination.
//!
//! - `GET /denials`: the sandbox's recent denials, as the deny log wrote
//!   them, each under the id the log's memory gave it
//!   ([`crate::denylog::DenyLog::recent_denials`]).
//! - `POST /proposals` (`{"denials": [ids], "rationale": "..."}`): the
//!   lines of those ids, taken from that memory (the agent cites, it never
//!   writes a denial), sent to the gateway under the sandbox's own token
//!   (`propose`); the gateway's answer comes back without its review token.
//!
//! What the agent can never do here: approve anything (the gateway holds
//! every proposal for a person), see another sandbox (this supervisor
//! keeps this sandbox's denials only), or invent a denial. Every answer is
//! JSON in the shape of the proxy's own refusals (`respond`), and none is a
//! line of the deny log: the agent's questions are not denials, and its
//! mistakes would crowd out the denials it came to read.
//!
//! The connection is decided again before each request, so a reload that
//! drops the statement (or the binary from it) ends the endpoint for the
//! next request (`connection_revoked`).

mod bucket;
mod propose;

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hyper::body::Incoming;
use hyper::header::{ALLOW, HOST, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use policy_bundle::{ADVISOR_ADDR, ADVISOR_HOST, ADVISOR_PORT};
use serde_json::{Value, json};

use super::request::parse_authority;
use super::respond::{ProxyBody, Refusal, RequestInfo, full};
use super::state::ConnState;
use crate::session::Session;

pub(super) use bucket::Bucket;

/// The most a request body may hold.
const MAX_BODY: usize = 16 << 10;

/// What the endpoint keeps between requests: where proposals go, and how
/// many more may go now.
#[derive(Debug, Default)]
pub(super) struct Desk {
    /// Set once, when the supervisor follows a gateway; a local run has none.
    gateway: OnceLock<GatewayLink>,
    bucket: Mutex<Bucket>,
}

/// The gateway's client, with the token it keeps fresh, and the sandbox
/// proposals are made for.
#[derive(Debug)]
struct GatewayLink {
    session: Arc<Session>,
    sandbox: String,
}

impl Desk {
    /// Proposals go to this gateway from now on.
    pub(super) fn forward_to(&self, session: Arc<Session>, sandbox: &str) {
        let _ = self.gateway.set(GatewayLink {
            session,
            sandbox: sandbox.to_owned(),
        });
    }
}

/// One request on an advisor connection.
pub(super) async fn handle(st: &Arc<ConnState>, req: Request<Incoming>) -> Response<ProxyBody> {
    let active = st.proxy.policy().current();
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let info = RequestInfo {
        method: &method,
        path: &path,
        host: Some(ADVISOR_HOST),
        rule: None,
        rpc: None,
        graphql: None,
    };
    // A reload may have taken the endpoint away: refused, logged, closed.
    if let Err(why) = st.revalidate(&active) {
        return Refusal::new(StatusCode::FORBIDDEN, "connection_revoked", why)
            .closing()
            .respond(st, &info);
    }
    let rule = active
        .eval
        .bundle()
        .provenance
        .advisor
        .as_ref()
        .map(policy_bundle::Origin::blame);
    let answer = match addressed_here(&req) {
        Err(refusal) => Err(refusal),
        Ok(()) => match (path.as_str(), req.method()) {
            ("/denials", &Method::GET | &Method::HEAD) => Ok(denials(st)),
            ("/proposals", &Method::POST) => propose::handle(st, &st.proxy.advisor, req).await,
            ("/denials", _) => Err(not_allowed("GET").into()),
            ("/proposals", _) => Err(not_allowed("POST").into()),
            _ => Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "`{path}` is not a path of the advisor endpoint: it answers GET /denials and POST /proposals"
                ),
            )
            .into()),
        },
    };
    answer.unwrap_or_else(|refusal| {
        let allow = match path.as_str() {
            "/denials" => Some("GET, HEAD"),
            "/proposals" => Some("POST"),
            _ => None,
        };
        let retry = refusal.retry_after;
        let status = refusal.refusal.status;
        let mut resp = refusal.refusal.rule(rule).response(&info);
        if status == StatusCode::METHOD_NOT_ALLOWED
            && let Some(allow) = allow
        {
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allow));
        }
        if let Some(secs) = retry {
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    })
}

/// A refusal of the endpoint, and how long to wait before asking again.
#[derive(Debug)]
pub(super) struct Answer {
    refusal: Refusal,
    retry_after: Option<u64>,
}

impl From<Refusal> for Answer {
    fn from(refusal: Refusal) -> Self {
        Self {
            refusal,
            retry_after: None,
        }
    }
}

fn not_allowed(allowed: &str) -> Refusal {
    Refusal::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this path of the advisor endpoint answers {allowed} only"),
    )
}

/// The request must name the endpoint itself (by its name or its
/// address, on port 80) or nothing: any other name on this connection
/// would be a request meant for somewhere the endpoint is not.
fn addressed_here(req: &Request<Incoming>) -> Result<(), Answer> {
    let mismatch = |what: &str| {
        Refusal::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_mismatch",
            format!("the request names `{what}`, but this connection is to `{ADVISOR_HOST}`"),
        )
    };
    let hosts: Vec<&HeaderValue> = req.headers().get_all(HOST).iter().collect();
    let from_header = match hosts.as_slice() {
        [] => None,
        [one] => Some(one.to_str().unwrap_or_default()),
        _ => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "the request has several Host headers",
            )
            .into());
        }
    };
    let from_uri = req
        .uri()
        .authority()
        .map(hyper::http::uri::Authority::as_str);
    for named in [from_uri, from_header].into_iter().flatten() {
        let Some(host) = parse_authority(named) else {
            return Err(mismatch(named).into());
        };
        let ours = host.name == ADVISOR_HOST || host.ip == Some(std::net::IpAddr::V4(ADVISOR_ADDR));
        if !ours || host.port.is_some_and(|p| p != ADVISOR_PORT) {
            return Err(mismatch(named).into());
        }
    }
    Ok(())
}

/// `GET /denials`: the kept denials, oldest first.
fn denials(st: &ConnState) -> Response<ProxyBody> {
    let denials: Vec<Value> = st
        .proxy
        .log
        .recent_denials()
        .into_iter()
        .map(|(id, line)| {
            let event = serde_json::from_str::<Value>(&line).unwrap_or(Value::Null);
            json!({ "id": id, "event": event })
        })
        .collect();
    answer(StatusCode::OK, &json!({ "denials": denials }))
}

/// A JSON answer that is not a refusal.
pub(super) fn answer(status: StatusCode, body: &Value) -> Response<ProxyBody> {
    let mut bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes.push(b'\n');
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    resp
}

impl Desk {
    fn gateway(&self) -> Option<&GatewayLink> {
        self.gateway.get()
    }

    fn take_token(&self) -> Result<(), u64> {
        self.bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(std::time::Instant::now())
    }
}
