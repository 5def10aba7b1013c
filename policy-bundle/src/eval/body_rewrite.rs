//! `request_body_credential_rewrite` in the evaluator: which routes
//! replace placeholders in REST request bodies, and what a body sent on
//! one comes to ([`crate::l7body::rewrite`], shared with the proxy).
//!
//! Only where REST alone reads the request: when a JSON-RPC, MCP or
//! GraphQL endpoint also covers the target, its rules judged the body the
//! workload wrote, and replacing placeholders after that would forward
//! bytes no rule saw; such a body keeps being refused for its placeholder,
//! as on a route without the option.
//!
//! Only the placeholders of credentials whose binding covers the request
//! (host, method, path) are replaced (`super::placeholders`); one of a
//! credential bound to the host but not to this method or path refuses
//! the body, naming the credential.

use super::{ConnectionDecision, Decision, Evaluator, Reason};
use crate::bundle::L7Protocol;
use crate::l7body::rewrite::{Found, RewriteRefusal, rewrite_body};
use crate::vocab::placeholder_len;

/// What `eval` puts in place of a placeholder: it holds no secret, only
/// something that is not the marker.
const STAND_IN: &str = "secret";

impl Evaluator {
    /// Some when a `method` request to `target` on this connection has
    /// its body rewritten (a route with `request_body_credential_rewrite`
    /// reaches a REST endpoint covering it, and no endpoint that judges
    /// bodies does): the credentials whose placeholders may be replaced in
    /// it, those whose binding covers host, method and path, possibly
    /// none. The proxy then reads the body whole (at most
    /// [`crate::l7body::rewrite::REWRITE_BODY_LIMIT`] bytes, framing
    /// counted) and asks [`Self::decide_typed_body`], which refuses any
    /// other placeholder.
    pub fn body_rewrites(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
    ) -> Option<Vec<String>> {
        let path = self.rewritten_path(conn, target)?;
        let found = self.placeholders_for(host, method, Some(&path));
        Some(found.covered.into_iter().map(str::to_owned).collect())
    }

    /// The canonical path of `target` when its body is rewritten (see
    /// [`Self::body_rewrites`]): what a credential's `paths` are matched
    /// against.
    fn rewritten_path(&self, conn: &ConnectionDecision, target: &str) -> Option<String> {
        if self.body_limit(conn, target).is_some() {
            return None;
        }
        self.rewriting_path(
            conn,
            target,
            |r| r.request_body_credential_rewrite,
            L7Protocol::Rest,
        )
    }

    /// [`Self::decide_body`] for a body sent with this `Content-Type`. On
    /// a route that rewrites bodies ([`Self::body_rewrites`]), a body the
    /// rules let through goes on with the placeholders of credentials
    /// whose binding covers the request replaced
    /// ([`Reason::BodyRewritten`]), or is refused
    /// ([`Reason::BodyNotRewritten`]: too long, not UTF-8, a placeholder
    /// in a body of another type, one of another host's credential, as
    /// OpenShell refuses it, or one of a credential bound to the host but
    /// not to this method and path), in audit mode too.
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
        method: &str,
        target: &str,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Result<Option<Vec<String>>, Reason> {
        let Some(path) = self.rewritten_path(conn, target) else {
            return if self.placeholder_refused(body) {
                Err(Reason::PlaceholderInBody)
            } else {
                Ok(None)
            };
        };
        let method = method.to_ascii_uppercase();
        let found = self.placeholders_for(host, &method, Some(&path));
        let mut by_length: Vec<(&str, bool)> = found
            .covered
            .iter()
            .map(|&n| (n, true))
            .chain(found.outside.iter().map(|&n| (n, false)))
            .collect();
        // Longest first, so that `a-b`'s placeholder is not read as `a`'s.
        by_length.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
        let at = |text: &str| {
            let (name, covered, len) = by_length
                .iter()
                .find_map(|&(name, covered)| {
                    placeholder_len(text.as_bytes(), name).map(|len| (name, covered, len))
                })
                .ok_or(RewriteRefusal::NotBound)?;
            if !covered {
                return Err(RewriteRefusal::OutsideBinding {
                    credential: name.to_owned(),
                    method: method.clone(),
                    path: path.clone(),
                });
            }
            Ok(Found {
                len,
                credential: name,
                secret: STAND_IN,
            })
        };
        match rewrite_body(content_type, body, &at) {
            Ok(r) if r.credentials.is_empty() => Ok(None),
            Ok(r) => Ok(Some(r.credentials.into_iter().map(str::to_owned).collect())),
            Err(why) => Err(Reason::BodyNotRewritten(why)),
        }
    }
}
