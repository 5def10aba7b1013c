//! Whose placeholders the proxy may put secrets in place of, in what the
//! workload writes: request bodies (`request_body_credential_rewrite`)
//! and WebSocket text messages (`websocket_credential_rewrite`).
//!
//! Only credentials whose binding covers the request, exactly as for a
//! secret injected into a header ([`CredentialBinding::covers`]): host,
//! method and canonical path. A message after an upgrade rides on the
//! upgrade, so it is judged as a `GET` on the upgrade's path. OpenShell
//! replaces the placeholder of any credential bound to the host; we do
//! not, since a `methods GET` or `paths /v1/read/**` binding would
//! otherwise let its secret leave in a `POST` body or on another path.
//! The placeholder of a credential bound to the host but not to this
//! request is refused like one of another host's credential, and named,
//! so the refusal can say which binding to widen.
//!
//! [`CredentialBinding::covers`]: crate::bundle::CredentialBinding::covers

use super::{ConnectionDecision, Evaluator, Via};
use crate::bundle::{L7Protocol, Route};
use crate::matcher::{canonicalize_path, normalize_host};

/// The credentials with a placeholder that are bound to a host, by
/// whether their binding covers the request.
#[derive(Debug, Default)]
pub(super) struct Placeholders<'a> {
    /// Replaced by their secrets.
    pub(super) covered: Vec<&'a str>,
    /// Refused: bound to the host, not to this method or path.
    pub(super) outside: Vec<&'a str>,
}

impl Evaluator {
    /// The canonical path of `target` when a route of `conn` that
    /// rewrites (`rewrites`) reaches a `protocol` endpoint covering it:
    /// what a credential's `paths` are matched against.
    pub(super) fn rewriting_path(
        &self,
        conn: &ConnectionDecision,
        target: &str,
        rewrites: fn(&Route) -> bool,
        protocol: L7Protocol,
    ) -> Option<String> {
        let tables = &self.bundle.enforcement;
        conn.routes.iter().find_map(|&r| {
            let route = tables.seccomp.routes.get(r as usize)?;
            let Via::L7(e) = route.via else {
                return None;
            };
            let ep = tables.l7.get(e as usize)?;
            if !rewrites(route) || ep.protocol() != protocol {
                return None;
            }
            canonicalize_path(target, ep.encoded_slash)
                .ok()
                .filter(|c| ep.covers(&c.path))
                .map(|c| c.path)
        })
    }

    /// The credentials with a placeholder bound to `host`, split by
    /// whether their binding covers `method` on the canonical `path`;
    /// with no path (a target that does not read), none is covered.
    pub(super) fn placeholders_for(
        &self,
        host: Option<&str>,
        method: &str,
        path: Option<&str>,
    ) -> Placeholders<'_> {
        let mut out = Placeholders::default();
        let Some(host) = host.and_then(|h| normalize_host(h).ok()) else {
            return out;
        };
        let method = method.to_ascii_uppercase();
        for c in &self.bundle.enforcement.credentials {
            if c.placeholder.is_none() || !c.hosts.iter().any(|h| h.matches(&host)) {
                continue;
            }
            if path.is_some_and(|p| c.covers(&host, &method, p)) {
                out.covered.push(&c.name);
            } else {
                out.outside.push(&c.name);
            }
        }
        out
    }
}
