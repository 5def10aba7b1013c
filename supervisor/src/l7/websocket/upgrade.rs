//! A WebSocket upgrade request, from the checks to the running relay.
//!
//! The upgrade goes on only when a websocket endpoint takes part for the
//! target (`Evaluator::websocket`), the request is a well-formed opening
//! handshake, and the endpoint's `GET` rules allow it
//! (`Evaluator::decide_upgrade`); then it is checked, rewritten and
//! injected as a REST request is, and sent with no extension offered. On
//! a faithful `101` the two upgraded connections are handed to the relay,
//! which judges every client message with `Evaluator::decide_ws_message`
//! under the policy in force when the message is complete.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use policy_bundle::eval::{Verdict, WsClientMessage};

use super::handshake;
use super::relay::{self, End, Judged, Limits, Message};
use super::scrubbed::Scrubbing;
use crate::l7::body::UpstreamBody;
use crate::l7::forward;
use crate::l7::request::{NamedHost, Scope, check, decide_scope, prepare};
use crate::l7::respond::{ProxyBody, Refusal, RequestInfo};
use crate::l7::state::ConnState;
use crate::policy::Active;

/// Methods the deny log names a judged message by.
const TEXT: &str = "WEBSOCKET_TEXT";
const BINARY: &str = "WEBSOCKET_BINARY";

fn refused(why: impl Into<String>) -> Refusal {
    Refusal::new(StatusCode::FORBIDDEN, "upgrade_refused", why)
}

/// Answers a WebSocket upgrade request; on success the relay runs on a
/// task of its own once hyper hands over the client's connection.
pub(in crate::l7) async fn upgrade(
    st: &Arc<ConnState>,
    active: &Active,
    scope: Scope,
    mut req: Request<Incoming>,
    info: RequestInfo<'_>,
) -> Response<ProxyBody> {
    let target = info.path.to_owned();
    let Some(ws) = active.eval.websocket(&scope.decision, &target) else {
        return refused(
            "WebSocket upgrades are allowed only on a websocket endpoint; no rule could inspect what follows",
        )
        .respond(st, &info);
    };
    let offer = match handshake::check_request(req.method(), req.version(), req.headers()) {
        Ok(o) => o,
        Err(why) => {
            return refused(format!("not a well-formed WebSocket upgrade: {why}"))
                .respond(st, &info);
        }
    };
    let d = active
        .eval
        .decide_upgrade(&scope.decision, scope.cred_host.as_deref(), &target);
    let named = scope.named.clone();
    let checked = match check(st, active, req.headers(), scope, d, &info) {
        Ok(c) => c,
        Err(refusal) => return refusal.respond(st, &info),
    };
    let info = RequestInfo {
        path: &checked.path,
        host: checked.host.as_deref(),
        rule: checked.rule.as_deref(),
        ..info
    };
    let client_side = hyper::upgrade::on(&mut req);
    let (mut req, injected) =
        match prepare(st, active, req.map(UpstreamBody::Streamed), &checked, &info) {
            Ok(prepared) => prepared,
            Err(refusal) => return refusal.respond(st, &info),
        };
    handshake::prepare_request(req.headers_mut());
    let (resp, switched) = forward::send_upgrade(st, req, injected, &offer, &info).await;
    let Some(switched) = switched else {
        return resp;
    };
    let server_side = switched.upgrade;
    let scrub = switched.secret.map(|(forms, replacement)| Scrubbing {
        forms,
        replacement,
        limit: ws.message_limit,
    });
    let judge = MessageJudge {
        st: Arc::clone(st),
        named,
        target,
        path: checked.path.clone(),
    };
    let st = Arc::clone(st);
    tokio::spawn(async move {
        let (Ok(client), Ok(server)) = tokio::join!(client_side, server_side) else {
            return;
        };
        let (id, close) = st.proxy.register(Arc::clone(&st));
        let revoked = async {
            // The sender goes with the registration: only a reload sends.
            if close.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let path = judge.path.clone();
        let end = relay::relay(
            TokioIo::new(client),
            TokioIo::new(server),
            judge,
            Limits::new(ws.message_limit),
            scrub,
            revoked,
        )
        .await;
        st.proxy.unregister(id);
        log_end(&st, &path, &end);
    });
    resp
}

/// A relay the proxy ended for a frame it would not read: one deny-log
/// line (a denied message was logged when it was judged).
fn log_end(st: &ConnState, path: &str, end: &End) {
    let End::Violation(v) = end else {
        return;
    };
    st.log_http(
        &RequestInfo {
            method: "WEBSOCKET",
            path,
            host: None,
            rule: None,
            rpc: None,
            graphql: None,
        },
        true,
        false,
        &format!("{} (closed with {})", v.reason, v.code),
        Some("websocket_protocol_error"),
    );
}

/// Judges each complete client message under the policy in force.
struct MessageJudge {
    st: Arc<ConnState>,
    /// The host the upgrade named: the scope is decided again from it.
    named: NamedHost,
    /// The upgrade's target as sent (what the rules read).
    target: String,
    /// Its canonical path, for logs.
    path: String,
}

impl relay::Judge for MessageJudge {
    fn judge(&mut self, message: Message<'_>) -> Judged {
        let st = &self.st;
        let active = st.proxy.policy().current();
        let scope = match decide_scope(st, &active, self.named.clone()) {
            Ok(s) => s,
            Err(refusal) => return Judged::Revoked(refusal.reason),
        };
        if active
            .eval
            .websocket(&scope.decision, &self.target)
            .is_none()
        {
            return Judged::Revoked(format!(
                "the policy in force has no websocket endpoint for `{}`",
                self.path
            ));
        }
        let (method, ws) = match message {
            Message::Text(t) => (TEXT, WsClientMessage::Text(t)),
            Message::Binary(b) => (BINARY, WsClientMessage::Binary(b)),
        };
        let d = active.eval.decide_ws_message(
            &scope.decision,
            scope.cred_host.as_deref(),
            &self.target,
            ws,
        );
        let operation = d
            .graphql
            .as_ref()
            .and_then(|n| n.operation.and_then(|i| n.operations.get(i)));
        let rule = d
            .rule
            .as_ref()
            .map(policy_bundle::Origin::blame)
            .or(scope.rule);
        let info = RequestInfo {
            method,
            path: &self.path,
            host: scope.cred_host.as_deref().or(Some(&scope.named.name)),
            rule: rule.as_deref(),
            rpc: None,
            graphql: operation,
        };
        match d.decision {
            Verdict::Allow => Judged::Forward,
            Verdict::Audit => {
                st.log_audit(&info, &d.reason.to_string());
                Judged::Forward
            }
            Verdict::Deny => {
                let reason = d.reason.to_string();
                st.log_http(&info, true, false, &reason, Some("policy_denied"));
                Judged::Deny(reason)
            }
        }
    }
}
