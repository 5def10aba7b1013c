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
//!
//! On an endpoint with `websocket_credential_rewrite`, a text message the
//! policy lets through with placeholders of credentials whose binding
//! covers the upgrade (host, `GET`, its path) goes upstream with each
//! replaced by its secret ([`rewrite`]); the
//! server's messages are then scrubbed of those secrets from the upgrade
//! on, as after an upgrade that carried one, since a server may echo what
//! it was sent. A placeholder the proxy never issued, or one of another
//! credential (another host's, or one whose `methods` or `paths` leave
//! out the upgrade), is refused, never sent on: the relay closes with
//! 1008.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use policy_bundle::PLACEHOLDER_PREFIX;
use policy_bundle::eval::{Reason, Verdict, WsClientMessage};

use super::handshake;
use super::relay::{self, End, Judged, Limits, Message};
use super::scrubbed::Scrubbing;
use crate::l7::body::UpstreamBody;
use crate::l7::forms::SecretForms;
use crate::l7::forward;
use crate::l7::request::{NamedHost, Scope, check, decide_scope, prepare};
use crate::l7::respond::{ProxyBody, Refusal, RequestInfo};
use crate::l7::state::ConnState;
use crate::l7::state::UpstreamHop;
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
    let rewrites = active
        .eval
        .ws_rewrites(&scope.decision, scope.cred_host.as_deref(), &target);
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
    let mut secrets: Vec<(SecretForms, Vec<u8>)> = switched.secret.into_iter().collect();
    secrets.extend(rewrites.iter().filter_map(|name| scrubbed_of(active, name)));
    let scrub = (!secrets.is_empty()).then_some(Scrubbing {
        secrets,
        limit: ws.message_limit,
    });
    let judge = MessageJudge {
        st: Arc::clone(st),
        named,
        target,
        path: checked.path.clone(),
        scrubbed: rewrites,
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

/// The forms of credential `name`'s secret, with its placeholder to put in
/// their place; `None` when the secret is unavailable (nothing can then
/// be replaced with it).
fn scrubbed_of(active: &Active, name: &str) -> Option<(SecretForms, Vec<u8>)> {
    let cred = active.credentials.get(name)?;
    let secret = cred.secret.as_ref().ok()?;
    let replacement = cred.placeholder.as_deref().unwrap_or("openshell-redacted");
    Some((
        SecretForms::new(secret.expose().as_bytes()),
        replacement.as_bytes().to_vec(),
    ))
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
    /// The credentials whose secrets the server's messages are scrubbed
    /// of: only theirs may be put into a message.
    scrubbed: Vec<String>,
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
        let forward = match (&d.reason, message) {
            (Reason::Rewritten { credentials, .. }, Message::Text(text))
                if d.decision != Verdict::Deny =>
            {
                match self.rewritten(&active, text, credentials) {
                    Ok(replaced) => Judged::Replace(replaced),
                    Err(Refused::Revoked(why)) => return Judged::Revoked(why),
                    Err(Refused::Denied(why)) => {
                        st.log_http(&info, true, false, &why, Some("credential_not_bound"));
                        return Judged::Deny(why);
                    }
                }
            }
            _ => Judged::Forward,
        };
        match d.decision {
            Verdict::Allow => forward,
            Verdict::Audit => {
                st.log_audit(&info, &d.reason.to_string());
                forward
            }
            Verdict::Deny => {
                let reason = d.reason.to_string();
                st.log_http(&info, true, false, &reason, Some("policy_denied"));
                Judged::Deny(reason)
            }
        }
    }
}

/// Why a message whose placeholders the policy has replaced cannot go on.
enum Refused {
    /// Closed with 1008, and logged.
    Denied(String),
    /// Closed with 1012: the connection was set up under another policy.
    Revoked(String),
}

impl MessageJudge {
    /// `text` with the placeholders of `credentials` replaced by their
    /// secrets, on a connection set up to scrub them from the server's
    /// messages and reaching the server over TLS.
    fn rewritten(
        &self,
        active: &Active,
        text: &str,
        credentials: &[String],
    ) -> Result<String, Refused> {
        if let Some(name) = credentials.iter().find(|c| !self.scrubbed.contains(c)) {
            return Err(Refused::Revoked(format!(
                "the reloaded policy replaces the placeholder of credential `{name}` in messages on this connection, whose server messages are not scrubbed of its secret; reconnect"
            )));
        }
        if let UpstreamHop::Plain(dst) = self.st.upstream_hop() {
            return Err(Refused::Denied(format!(
                "a credential is only sent over TLS, and this message would reach `{dst}` in plain text; use wss"
            )));
        }
        let mut subs: Vec<(&str, &str)> = Vec::with_capacity(credentials.len());
        for name in credentials {
            let cred = active.credentials.get(name);
            let placeholder = cred.and_then(|c| c.placeholder.as_deref());
            let secret = cred.and_then(|c| c.secret.as_ref().ok());
            let (Some(p), Some(s)) = (placeholder, secret) else {
                return Err(Refused::Denied(format!(
                    "credential `{name}` is not available to replace its placeholder"
                )));
            };
            subs.push((p, s.expose()));
        }
        rewrite(text, &mut subs).ok_or_else(|| {
            Refused::Denied(
                "the message carries a credential placeholder the proxy never issued for this host; only those of credentials whose binding covers the upgrade are replaced".to_owned(),
            )
        })
    }
}

/// `text` with each placeholder of `subs` (placeholder, secret) replaced
/// by its secret, in one pass so that a secret is never read as a
/// placeholder; `None` when a placeholder marker begins none of them.
fn rewrite(text: &str, subs: &mut [(&str, &str)]) -> Option<String> {
    subs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PLACEHOLDER_PREFIX) {
        let (before, tail) = rest.split_at_checked(at)?;
        out.push_str(before);
        let (placeholder, secret) = subs.iter().find(|(p, _)| tail.starts_with(p))?;
        out.push_str(secret);
        rest = tail.get(placeholder.len()..)?;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    const A: &str = "openshell-placeholder-a-0123456789abcdef0123456789abcdef";
    const AB: &str = "openshell-placeholder-a-b-0123456789abcdef0123456789abcdef";

    #[test]
    fn every_known_placeholder_is_replaced_and_an_unknown_one_refuses_the_text() {
        let mut subs = [(A, "s1"), (AB, "s2")];
        assert_eq!(
            rewrite(&format!("{A} x {AB} {A}"), &mut subs).as_deref(),
            Some("s1 x s2 s1")
        );
        assert_eq!(
            rewrite("no marker", &mut subs).as_deref(),
            Some("no marker")
        );
        let unknown = "openshell-placeholder-a-ffffffffffffffffffffffffffffffff";
        assert_eq!(rewrite(&format!("{A} {unknown}"), &mut subs), None);
        // A secret that looks like a placeholder is not read as one.
        let mut tricky = [(A, "openshell-placeholder-zz")];
        assert_eq!(
            rewrite(A, &mut tricky).as_deref(),
            Some("openshell-placeholder-zz")
        );
    }
}
