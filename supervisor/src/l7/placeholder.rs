//! Bodies that stream through (REST), scanned for the placeholder marker
//! in a sandbox that has credentials.
//!
//! Placeholders are never replaced inside bodies, and OpenShell, with
//! `request_body_credential_rewrite` off, refuses the reserved marker in
//! any body before it reaches upstream, whatever the host: a server handed
//! one would act on a worthless token where the workload meant a secret.
//! `Evaluator::decide_body` refuses such a body the same way
//! (`Reason::PlaceholderInBody`); bodies the rules judge are read whole and
//! refused by it.
//!
//! The body is not buffered ([`Guarded`]).
//!
//! The head waits for the first piece, up to [`FIRST_PIECE_WAIT`], so that
//! the common case (a body that arrives with its head) is refused with a
//! `403` before anything reaches the server. A marker found later ends the
//! body with an error: hyper aborts the upstream request (the server gets
//! a truncated body and a closed connection) and the deny log gets its
//! line; the client gets the same `403`, unless the server answered
//! before the marker arrived (its answer is then relayed).
use std::sync::Arc;

use hyper::body::Body as _;
use hyper::{Request, StatusCode};
use policy_bundle::eval::Reason;

use super::body::{self, UpstreamBody};
use super::guarded::{Guarded, Stop, Stopped};
use super::respond::{Refusal, RequestInfo};
use super::state::ConnState;
use crate::policy::Active;

/// The refusal of a body holding the marker, as `eval` words it.
pub(super) fn refusal() -> Refusal {
    let why = Reason::PlaceholderInBody;
    Refusal::new(StatusCode::FORBIDDEN, why.refusal_code(), why.to_string()).closing()
}

/// `req` with its streamed body scanned, once its first piece passed;
/// `None` beside it when nothing is scanned (no credentials, no body, or
/// a body already judged whole).
pub(super) async fn guard(
    st: &Arc<ConnState>,
    active: &Active,
    req: Request<UpstreamBody>,
    info: &RequestInfo<'_>,
) -> Result<(Request<UpstreamBody>, Option<Stopped>), Refusal> {
    if active.eval.bundle().enforcement.credentials.is_empty() {
        return Ok((req, None));
    }
    let (parts, body) = req.into_parts();
    let incoming = match body {
        UpstreamBody::Streamed(b) if !b.is_end_stream() => b,
        other => return Ok((Request::from_parts(parts, other), None)),
    };
    let stopped = Stopped::default();
    let logged = Logged::of(info);
    let st = Arc::clone(st);
    let on_stop = Box::new(move || refusal().log(&st, &logged.info()));
    let mut body = Guarded::new(incoming, stopped.clone(), on_stop);
    match body.first_piece().await {
        Ok(()) => Ok((
            Request::from_parts(parts, UpstreamBody::Guarded(Box::new(body))),
            Some(stopped),
        )),
        Err(Stop::Placeholder) => {
            // The client reads the refusal, not a reset for unread data.
            body::drain(body.inner).await;
            Err(refusal())
        }
        Err(Stop::Broken(why)) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("the request body could not be read: {why}"),
        )
        .closing()),
    }
}

/// What the deny log names a request by, kept for a line written after
/// the request's own borrow ended.
struct Logged {
    method: String,
    path: String,
    host: Option<String>,
    rule: Option<String>,
}

impl Logged {
    fn of(info: &RequestInfo<'_>) -> Self {
        Self {
            method: info.method.to_owned(),
            path: info.path.to_owned(),
            host: info.host.map(str::to_owned),
            rule: info.rule.map(str::to_owned),
        }
    }

    fn info(&self) -> RequestInfo<'_> {
        RequestInfo {
            method: &self.method,
            path: &self.path,
            host: self.host.as_deref(),
            rule: self.rule.as_deref(),
            rpc: None,
            graphql: None,
        }
    }
}
