//! `request_body_credential_rewrite` in the evaluator: which routes
//! replace placeholders in REST request bodies, and what a body sent on
//! one comes to ([`crate::l7body::rewrite`], shared with the proxy).
//!
//! Only where REST alone reads the request: when a JSON-RPC, MCP or
//! GraphQL endpoint also covers the target, its rules judged the body the
//! workload wrote, and replacing placeholders after that would forward
//! bytes no rule saw; such a body keeps being refused for its placeholder,
//! as on a route without the option.

use super::{ConnectionDecision, Decision, Evaluator, Reason, Via};
use crate::bundle::L7Protocol;
use crate::l7body::rewrite::{Found, rewrite_body};
use crate::matcher::canonicalize_path;
use crate::vocab::placeholder_len;

/// What `eval` puts in place of a placeholder: it holds no secret, only
/// something that is not the marker.
const STAND_IN: &str = "secret";

impl Evaluator {
    /// Some when a request to `target` on this connection has its body
    /// rewritten (a route with `request_body_credential_rewrite` reaches a
    /// REST endpoint covering it, and no endpoint that judges bodies does):
    /// the credentials bound to `host` whose placeholders may be replaced
    /// in it, possibly none. The proxy then reads the body whole (at most
    /// [`crate::l7body::rewrite::REWRITE_BODY_LIMIT`] bytes, framing
    /// counted) and asks [`Self::decide_typed_body`].
    pub fn body_rewrites(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        target: &str,
    ) -> Option<Vec<String>> {
        if self.body_limit(conn, target).is_some() {
            return None;
        }
        let tables = &self.bundle.enforcement;
        let rewrites = conn.routes.iter().any(|&r| {
            let Some(route) = tables.seccomp.routes.get(r as usize) else {
                return false;
            };
            let Via::L7(e) = route.via else {
                return false;
            };
            route.request_body_credential_rewrite
                && tables.l7.get(e as usize).is_some_and(|ep| {
                    ep.protocol() == L7Protocol::Rest
                        && canonicalize_path(target, ep.encoded_slash)
                            .is_ok_and(|c| ep.covers(&c.path))
                })
        });
        rewrites.then(|| {
            self.placeholders_on_host(host)
                .into_iter()
                .map(str::to_owned)
                .collect()
        })
    }

    /// [`Self::decide_body`] for a body sent with this `Content-Type`. On
    /// a route that rewrites bodies ([`Self::body_rewrites`]), a body the
    /// rules let through goes on with the placeholders of credentials
    /// bound to the host replaced ([`Reason::BodyRewritten`]), or is
    /// refused as OpenShell refuses it ([`Reason::BodyNotRewritten`]: too
    /// long, not UTF-8, a placeholder in a body of another type, or one
    /// of another host's credential), in audit mode too.
    pub fn decide_typed_body(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Decision {
        self.judge(
            conn,
            host,
            method,
            target,
            super::Ask::Http(Some(body)),
            content_type,
        )
    }

    /// What the placeholders of a body the rules let through come to: none
    /// to replace, those of these credentials, or the reason it is refused.
    pub(super) fn body_placeholders(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        target: &str,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Result<Option<Vec<String>>, Reason> {
        let Some(bound) = self.body_rewrites(conn, host, target) else {
            return if self.placeholder_refused(body) {
                Err(Reason::PlaceholderInBody)
            } else {
                Ok(None)
            };
        };
        let mut by_length: Vec<&str> = bound.iter().map(String::as_str).collect();
        by_length.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let at = |text: &str| {
            by_length.iter().find_map(|&name| {
                placeholder_len(text.as_bytes(), name).map(|len| Found {
                    len,
                    credential: name,
                    secret: STAND_IN,
                })
            })
        };
        match rewrite_body(content_type, body, &at) {
            Ok(r) if r.credentials.is_empty() => Ok(None),
            Ok(r) => Ok(Some(r.credentials.into_iter().map(str::to_owned).collect())),
            Err(why) => Err(Reason::BodyNotRewritten(why)),
        }
    }
}
