//! Why the evaluator decided as it did, as data: callers match on the
//! variant (the prover tells a deny rule from a narrower pattern, the
//! supervisor wraps a reason in what it did on top), and the prose is
//! built only when a reason is shown or serialized. `Display` is the one
//! place that prose lives; logs, reports and JSON all read it.

use std::fmt;
use std::net::IpAddr;

use serde::{Serialize, Serializer};

use super::BodyReason;

/// One reason for a connection or request decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The destination was neither a valid host name nor an address.
    NoDestination,
    /// Rules name the binary, but pin a SHA-256 it does not have.
    PinMismatch {
        /// The executable path.
        binary: String,
    },
    /// No rule names the binary.
    UnknownBinary {
        /// The executable path.
        binary: String,
    },
    /// The destination resolves to an internal address no rule names.
    InternalAddress {
        /// The name or address asked for.
        dest: String,
    },
    /// The only rules that reach the destination relay it uninspected to
    /// a host `credential` is bound to, without `uninspected_credentials`
    /// (`Route::credential_guard`).
    CredentialGuard {
        /// The name or address asked for.
        dest: String,
        /// The port asked for.
        port: u16,
        /// The credential bound to the route's host.
        credential: String,
    },
    /// No rule lets the binary reach the destination.
    NoRoute {
        /// The executable path.
        binary: String,
        /// The name, or the address when there is none.
        dest: String,
        /// The destination port.
        port: u16,
    },
    /// Allowed and relayed at L4 (`inspected` false) or through the L7
    /// proxy (`inspected` true).
    Connect {
        /// The executable path.
        binary: String,
        /// The name, or the address when there is none.
        dest: String,
        /// The destination port.
        port: u16,
        /// Whether the L7 proxy reads the traffic.
        inspected: bool,
    },
    /// The request target could not be canonicalised.
    TargetRefused {
        /// As sent.
        target: String,
        /// Why canonicalisation refused it.
        error: String,
    },
    /// No inspected endpoint of the connection covers the path.
    NoEndpoint {
        /// The canonical path.
        path: String,
    },
    /// A REST deny (`deny` true) or allow rule matches.
    Rest {
        /// As sent.
        method: String,
        /// The canonical path.
        path: String,
        /// Whether the matching rule is a deny rule.
        deny: bool,
    },
    /// No allow rule matches the request.
    NoAllowRule {
        /// As sent.
        method: String,
        /// The canonical path.
        path: String,
    },
    /// The verdict of an endpoint that judges bodies or messages
    /// (JSON-RPC, MCP, GraphQL, WebSocket); whether a deny rule decided
    /// follows from its variant.
    Body(BodyReason),
    /// Let through because every endpoint involved is in audit mode.
    Audit(Box<Reason>),
    /// A client WebSocket text message let through, with the placeholders
    /// of these credentials (whose bindings cover the upgrade) replaced by
    /// their secrets before it goes on (`websocket_credential_rewrite`).
    Rewritten {
        /// The decision about the message as the workload sent it.
        inner: Box<Reason>,
        /// The credentials whose placeholders are replaced, in the order
        /// first seen.
        credentials: Vec<String>,
    },
    /// A request body let through, with the placeholders of these
    /// credentials (whose bindings cover the request) replaced by their
    /// secrets before it goes on (`request_body_credential_rewrite`).
    BodyRewritten {
        /// The decision about the request as the workload sent it.
        inner: Box<Reason>,
        /// The credentials whose placeholders are replaced, in the order
        /// first seen.
        credentials: Vec<String>,
    },
    /// A request body on a route that rewrites bodies, refused as
    /// OpenShell refuses it. Refused in audit mode too.
    BodyNotRewritten(crate::l7body::rewrite::RewriteRefusal),
    /// No websocket endpoint covers the target of an upgrade.
    NoWebsocketEndpoint {
        /// As sent.
        target: String,
    },
    /// A message was judged on a connection whose upgrade is refused.
    UpgradeRefused(Box<Reason>),
    /// The supervisor attributed the address to the host because the
    /// operator named it with `--resolve`.
    Resolved {
        /// The decision about the host.
        inner: Box<Reason>,
        /// The address connected to.
        ip: IpAddr,
        /// The host `--resolve` named for it.
        host: String,
    },
    /// The binary was judged as the targets of the links that name it in
    /// the policy.
    LinkTarget {
        /// The decision about the link targets.
        inner: Box<Reason>,
        /// The executable path, as the kernel reports it.
        binary: String,
        /// The policy's paths that link to it.
        links: Vec<String>,
    },
    /// The workload connected to a name the sandbox never gave it for the
    /// address.
    UnattributedName {
        /// The name the workload asked for.
        host: String,
        /// The address it connected to.
        ip: IpAddr,
    },
    /// The executable was deleted after it was executed.
    DeletedBinary {
        /// The executable path the kernel reports.
        binary: String,
    },
    /// The path is another spelling (ASCII case, trailing slash) of the
    /// `path` of a GraphQL, JSON-RPC or MCP endpoint without being under
    /// it: a server may route it to that endpoint's handler, while rules
    /// that never read the body would judge it. Refused in audit mode too.
    PathAlias {
        /// The endpoint's `path` pattern.
        pattern: String,
    },
    /// A query parameter names another method than the request's
    /// (`_method` in any spelling a server decodes). Refused in audit
    /// mode too.
    MethodOverride {
        /// The parameter's key, as sent.
        key: String,
        /// The request's method.
        method: String,
    },
    /// The body carries a credential placeholder, which is never replaced
    /// there, in a sandbox that has credentials. Refused in audit mode
    /// too.
    PlaceholderInBody,
    /// The `advisor` statement lets the binary reach `policy.local`, which
    /// the supervisor answers itself.
    Advisor {
        /// The executable path.
        binary: String,
    },
    /// The policy has no `advisor` statement: `policy.local` does not
    /// exist in the sandbox.
    AdvisorOff,
    /// The `advisor` statement does not name the binary.
    AdvisorNotNamed {
        /// The executable path.
        binary: String,
    },
    /// `policy.local` on another port than 80: it answers plain HTTP only.
    AdvisorPort {
        /// The port asked for.
        port: u16,
    },
}

impl Reason {
    /// Whether a deny rule decided: the reason the old policy refused a
    /// request differs from a pattern that was merely narrower.
    #[must_use]
    pub fn by_deny_rule(&self) -> bool {
        match self {
            Self::Rest { deny, .. } => *deny,
            Self::Body(body) => body.by_deny_rule(),
            Self::Audit(inner) | Self::UpgradeRefused(inner) => inner.by_deny_rule(),
            Self::Rewritten { inner, .. } | Self::BodyRewritten { inner, .. } => {
                inner.by_deny_rule()
            }
            Self::Resolved { inner, .. } | Self::LinkTarget { inner, .. } => inner.by_deny_rule(),
            _ => false,
        }
    }

    /// The code the L7 proxy refuses a request with when this is why it is
    /// denied, in its 403 answer, its `x-openshell-policy` header and the
    /// deny log: `path_alias`, `override_refused`, `credential_not_bound`,
    /// else `policy_denied`.
    #[must_use]
    pub fn refusal_code(&self) -> &'static str {
        match self {
            Self::PathAlias { .. } => "path_alias",
            Self::MethodOverride { .. } => "override_refused",
            Self::PlaceholderInBody => "credential_not_bound",
            Self::BodyNotRewritten(why) => why.refusal_code(),
            Self::UpgradeRefused(inner) => inner.refusal_code(),
            _ => "policy_denied",
        }
    }

    /// Whether the rendered prose contains `pat`. Tests assert on the
    /// words people read; code that acts on a reason matches the variant.
    #[must_use]
    pub fn contains(&self, pat: &str) -> bool {
        self.to_string().contains(pat)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDestination => {
                f.write_str("the destination has neither a valid host name nor an address")
            }
            Self::PinMismatch { binary } => {
                write!(f, "`{binary}` does not have the SHA-256 its rules pin")
            }
            Self::UnknownBinary { binary } => write!(f, "no rule names the binary `{binary}`"),
            Self::InternalAddress { dest } => write!(
                f,
                "`{dest}` resolves to an internal address that no rule names explicitly (add it to the rule's `addresses`)"
            ),
            Self::CredentialGuard {
                dest,
                port,
                credential,
            } => write!(
                f,
                "refused: the rule reaching `{dest}:{port}` relays it uninspected, and credential `{credential}` is bound to that host (make the rule `http` so requests are inspected, or add `uninspected_credentials` to accept the risk)"
            ),
            Self::NoRoute { binary, dest, port } => {
                write!(f, "no rule allows `{binary}` to reach `{dest}:{port}`")
            }
            Self::Connect {
                binary,
                dest,
                port,
                inspected: false,
            } => write!(
                f,
                "`{binary}` may connect to `{dest}:{port}` (relayed without inspection)"
            ),
            Self::Connect {
                binary,
                dest,
                port,
                inspected: true,
            } => write!(
                f,
                "`{binary}` may connect to `{dest}:{port}`; its requests are checked by L7 rules"
            ),
            Self::TargetRefused { target, error } => {
                write!(f, "request target `{target}` refused: {error}")
            }
            Self::NoEndpoint { path } => {
                write!(f, "no inspected endpoint covers the path `{path}`")
            }
            Self::Rest { method, path, deny } => {
                let rule = if *deny {
                    "a deny rule"
                } else {
                    "an allow rule"
                };
                write!(f, "{method} {path} matches {rule}")
            }
            Self::NoAllowRule { method, path } => {
                write!(f, "{method} {path} matches no allow rule")
            }
            Self::Body(body) => body.fmt(f),
            Self::Audit(inner) => write!(f, "{inner}; the endpoint is in audit mode"),
            Self::Rewritten { inner, credentials } => {
                let names = credentials
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(
                    f,
                    "{inner}; the placeholder of credential {names} is replaced by its secret before the message goes on"
                )
            }
            Self::BodyRewritten { inner, credentials } => {
                let names = credentials
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(
                    f,
                    "{inner}; the placeholder of credential {names} in the request body is replaced by its secret before the request goes on"
                )
            }
            Self::BodyNotRewritten(why) => why.fmt(f),
            Self::NoWebsocketEndpoint { target } => write!(
                f,
                "no websocket endpoint covers `{target}`: upgrades are refused there"
            ),
            Self::UpgradeRefused(inner) => write!(f, "the upgrade is refused: {inner}"),
            Self::Resolved { inner, ip, host } => {
                write!(f, "{inner} (`{ip}` named for `{host}` by --resolve)")
            }
            Self::LinkTarget {
                inner,
                binary,
                links,
            } => {
                write!(f, "{inner} (`{binary}` runs as the target of the link ")?;
                for (k, link) in links.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{link}`")?;
                }
                f.write_str(" named in the policy)")
            }
            Self::UnattributedName { host, ip } => {
                write!(
                    f,
                    "`{host}` was never given to the sandbox as a name of `{ip}`"
                )
            }
            Self::DeletedBinary { binary } => write!(
                f,
                "`{binary}` was deleted after it was executed; its path no longer identifies it"
            ),
            Self::PathAlias { pattern } => write!(
                f,
                "the path is another spelling (case, trailing slash) of `{pattern}`, whose endpoint judges request bodies; use its exact spelling"
            ),
            Self::MethodOverride { key, method } => write!(
                f,
                "the query parameter `{key}` asks the server for another method than {method}; send the real method"
            ),
            Self::PlaceholderInBody => f.write_str(
                "a credential placeholder in a request body is never replaced; send it in a header",
            ),
            Self::Advisor { binary } => write!(
                f,
                "`{binary}` may reach the advisor endpoint `policy.local`, which the supervisor answers itself (never forwarded)"
            ),
            Self::AdvisorOff => f.write_str(
                "the policy has no `advisor` statement: `policy.local` does not exist in this sandbox",
            ),
            Self::AdvisorNotNamed { binary } => write!(
                f,
                "the `advisor` statement does not name `{binary}`: it may not reach `policy.local`"
            ),
            Self::AdvisorPort { port } => write!(
                f,
                "`policy.local` answers plain HTTP on port 80 only, not port {port}"
            ),
        }
    }
}

/// JSON carries the prose, as it always has.
impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_render_around_the_inner_reason() {
        let inner = Reason::Rest {
            method: "GET".into(),
            path: "/a".into(),
            deny: true,
        };
        assert_eq!(inner.to_string(), "GET /a matches a deny rule");
        let up = Reason::UpgradeRefused(Box::new(inner.clone()));
        assert_eq!(
            up.to_string(),
            "the upgrade is refused: GET /a matches a deny rule"
        );
        assert!(up.by_deny_rule());
        let link = Reason::LinkTarget {
            inner: Box::new(Reason::UnknownBinary {
                binary: "/bin/x".into(),
            }),
            binary: "/bin/y".into(),
            links: vec!["/bin/x".into(), "/usr/bin/x".into()],
        };
        assert_eq!(
            link.to_string(),
            "no rule names the binary `/bin/x` (`/bin/y` runs as the target of the link `/bin/x`, `/usr/bin/x` named in the policy)"
        );
        assert!(!link.by_deny_rule());
    }

    #[test]
    fn serializes_as_its_prose() {
        let r = Reason::Rest {
            method: "POST".into(),
            path: "/b".into(),
            deny: false,
        };
        assert_eq!(
            serde_json::to_string(&r).ok().as_deref(),
            Some("\"POST /b matches an allow rule\"")
        );
    }
}
