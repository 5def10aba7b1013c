//! The reference evaluator: "is this concrete request allowed, and by which
//! rule?", answered from a bundle with the same matchers the supervisor and
//! the proxy use. The prover is tested against it.

mod advisor;
mod body_reason;
mod body_rewrite;
mod graphql;
mod placeholders;
mod reason;
mod websocket;

pub use body_reason::{BodyReason, RuleMatch, WsSubject};
pub use graphql::GraphqlNote;
pub use reason::Reason;
pub use websocket::{DEFAULT_MESSAGE_LIMIT, WsClientMessage, WsRelay};
use websocket::{WsAsk, WsContext};

use std::collections::HashMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::bundle::{Bundle, L7Endpoint, L7Protocol, L7Rules, RestRules, Route, RpcRules, Via};
use crate::l7body::graphql::DocumentCache;
use crate::l7body::jsonrpc::{RpcBody, RpcCall, RpcDialect, parse_rpc_body};
use crate::matcher::net::is_metadata_host;
use crate::matcher::overrides::method_in_query;
use crate::matcher::{
    AddrClass, CanonicalTarget, RequestPath, WEBSOCKET_TEXT, canonical_ip, canonicalize_path,
    classify_addr, normalize_host, parse_query_string,
};
use crate::vocab::{Dest, Enforcement, Origin, holds_placeholder};

/// One connection attempt, optionally with the HTTP request sent on it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The executable path (`/proc/<pid>/exe`).
    pub binary: String,
    /// Lowercase hex SHA-256 of the executable, when known.
    pub sha256: Option<String>,
    /// The destination name, when the connection is attributed to one.
    pub host: Option<String>,
    /// The destination address, when known.
    pub addr: Option<IpAddr>,
    /// The destination port.
    pub port: u16,
    /// `None` for the connection-level check alone.
    pub http: Option<HttpRequest>,
}

/// One HTTP request on a connection, as the proxy reads it before forwarding.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// As sent; methods are case-sensitive.
    pub method: String,
    /// Origin-form target: path and optional query, as sent.
    pub target: String,
}

/// What happens to a request or connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Let through.
    Allow,
    /// Refused; the reason says by what.
    Deny,
    /// Allowed and logged: an audit-mode endpoint let through a request its
    /// rules do not allow.
    Audit,
}

/// How an allowed connection is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteKind {
    /// Relayed by the supervisor, uninspected.
    L4,
    /// Through the L7 proxy, request by request.
    L7,
}

/// The answer to one request, with what blame, logs and `eval` print.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The verdict.
    pub decision: Verdict,
    /// `None` when the connection itself is refused.
    pub route: Option<RouteKind>,
    /// The rule that decided, for blame; `None` when no rule did.
    pub rule: Option<Origin>,
    /// The credential the proxy would inject, by name.
    pub credential: Option<String>,
    /// Why, in the words the deny log uses.
    pub reason: Reason,
    /// The request target as the rules saw it: what the proxy forwards, so
    /// that what was checked is what the server gets. `None` when no
    /// inspected endpoint could read the target (or for a connection).
    #[serde(skip)]
    pub target: Option<CanonicalTarget>,
    /// The JSON-RPC calls a body carried, for the log; `None` when no body
    /// was judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc: Option<RpcNote>,
    /// The GraphQL operations a request carried, for the log; `None` when
    /// no GraphQL endpoint judged the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graphql: Option<GraphqlNote>,
}

impl Decision {
    /// The code the L7 proxy answers a denied request with (its 403's
    /// `error`, the `x-openshell-policy` header, the deny log):
    /// `path_alias`, `override_refused` or `policy_denied`. `None` when
    /// the request is let through (allowed or audited), and when the
    /// connection is refused before any request.
    #[must_use]
    pub fn refusal(&self) -> Option<&'static str> {
        (self.decision == Verdict::Deny && self.route == Some(RouteKind::L7))
            .then(|| self.reason.refusal_code())
    }
}

/// What a judged JSON-RPC body held, and which call the decision is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RpcNote {
    /// Every call in the body, in order.
    pub calls: Vec<RpcCall>,
    /// Index in `calls` of the call that was denied or matched no allow
    /// rule (for an allow: the call whose rule is blamed).
    pub call: Option<usize>,
    pub(crate) batch: bool,
    /// Response frames the client sent (MCP relays them).
    pub(crate) responses: usize,
}

/// The outcome of the connection-level check, which the supervisor acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionDecision {
    /// Matching routes (indices into the bundle's route table).
    pub routes: Vec<u32>,
    /// L7 endpoints the connection's requests are checked against; empty
    /// when the connection is relayed uninspected.
    pub l7: Vec<u32>,
    /// Why the connection is allowed or refused.
    pub reason: Reason,
    /// For each matching route, the rules that granted it to this binary
    /// (route index, rule), in route order: what blame may name.
    pub grants: Vec<(u32, Origin)>,
}

impl ConnectionDecision {
    /// A connection with no matching route is refused.
    pub fn allowed(&self) -> bool {
        !self.routes.is_empty()
    }
}

#[derive(Debug, Default)]
struct IdentityIndex {
    exact_hosts: HashMap<String, Vec<u32>>,
    wildcard_by_suffix: HashMap<String, Vec<u32>>,
    addr_routes: Vec<u32>,
}

/// A bundle with lookup indexes built, ready to answer many requests.
#[derive(Debug)]
pub struct Evaluator {
    bundle: Bundle,
    exact_binaries: HashMap<String, Vec<usize>>,
    glob_binaries: Vec<usize>,
    indexes: Vec<IdentityIndex>,
    /// GraphQL document analyses, shared by every GraphQL endpoint of the
    /// bundle. The evaluator owns it so that the proxy, which keeps one
    /// evaluator per loaded bundle, gets the cache without managing it and
    /// a new bundle starts with an empty one. Keyed by the exact document
    /// text, so a hit is the analysis of the very same input.
    graphql_cache: DocumentCache,
    /// Per route, the credential that closes it (`Route::credential_guard`).
    guarded: Vec<Option<String>>,
}

impl Evaluator {
    /// Indexes the bundle's identities once, so that each decision is a lookup.
    pub fn new(bundle: Bundle) -> Self {
        let seccomp = &bundle.enforcement.seccomp;
        let mut exact_binaries: HashMap<String, Vec<usize>> = HashMap::new();
        let mut glob_binaries = Vec::new();
        let mut indexes = Vec::with_capacity(seccomp.identities.len());
        for (i, id) in seccomp.identities.iter().enumerate() {
            match id.binary.glob.exact() {
                Some(p) => exact_binaries.entry(p.to_string()).or_default().push(i),
                None => glob_binaries.push(i),
            }
            let mut idx = IdentityIndex::default();
            for &r in &id.routes {
                let Some(route) = seccomp.routes.get(r as usize) else {
                    continue;
                };
                match &route.dest {
                    Dest::Host(h) => match h.exact() {
                        Some(e) => idx.exact_hosts.entry(e.to_string()).or_default().push(r),
                        None => idx
                            .wildcard_by_suffix
                            .entry(h.literal_suffix().to_string())
                            .or_default()
                            .push(r),
                    },
                    Dest::Addrs(_) => idx.addr_routes.push(r),
                }
            }
            indexes.push(idx);
        }
        let credentials = &bundle.enforcement.credentials;
        let guarded = seccomp
            .routes
            .iter()
            .map(|r| r.credential_guard(credentials).map(|c| c.name.clone()))
            .collect();
        Self {
            guarded,
            bundle,
            exact_binaries,
            glob_binaries,
            indexes,
            graphql_cache: DocumentCache::default(),
        }
    }

    /// The bundle being evaluated.
    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    fn identities_for(&self, binary: &str, sha256: Option<&str>) -> (Vec<usize>, bool) {
        let ids = &self.bundle.enforcement.seccomp.identities;
        let mut pin_mismatch = false;
        let mut out: Vec<usize> = self
            .exact_binaries
            .get(binary)
            .into_iter()
            .flatten()
            .copied()
            .chain(
                self.glob_binaries
                    .iter()
                    .copied()
                    .filter(|&i| ids.get(i).is_some_and(|id| id.binary.glob.matches(binary))),
            )
            .filter(
                |&i| match ids.get(i).and_then(|id| id.binary.sha256.as_deref()) {
                    None => true,
                    Some(pin) => {
                        let ok = sha256.is_some_and(|h| h.eq_ignore_ascii_case(pin));
                        pin_mismatch |= !ok;
                        ok
                    }
                },
            )
            .collect();
        out.sort_unstable();
        out.dedup();
        (out, pin_mismatch)
    }

    /// Which routes let `binary` connect to this destination.
    pub fn decide_connection(
        &self,
        binary: &str,
        sha256: Option<&str>,
        host: Option<&str>,
        addr: Option<IpAddr>,
        port: u16,
    ) -> ConnectionDecision {
        let deny = |reason: Reason| ConnectionDecision {
            routes: Vec::new(),
            l7: Vec::new(),
            reason,
            grants: Vec::new(),
        };
        let addr = addr.map(canonical_ip);
        // A host written as an IP literal is an address.
        let (host, addr) = match host.map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
        }) {
            Some(Ok(ip)) => (None, Some(addr.unwrap_or(canonical_ip(ip)))),
            _ => (host.and_then(|h| normalize_host(h).ok()), addr),
        };
        if host.is_none() && addr.is_none() {
            return deny(Reason::NoDestination);
        }
        let (identities, pin_mismatch) = self.identities_for(binary, sha256);
        if identities.is_empty() {
            let why = if pin_mismatch {
                Reason::PinMismatch {
                    binary: binary.to_string(),
                }
            } else {
                Reason::UnknownBinary {
                    binary: binary.to_string(),
                }
            };
            return deny(why);
        }
        let routes = &self.bundle.enforcement.seccomp.routes;
        let mut matched: Vec<u32> = Vec::new();
        let mut grants: Vec<(u32, Origin)> = Vec::new();
        let mut internal_refused = false;
        let mut guarded_by: Option<&str> = None;
        for &i in &identities {
            let Some(idx) = self.indexes.get(i) else {
                continue;
            };
            let mut candidates: Vec<u32> = Vec::new();
            if let Some(h) = host.as_deref() {
                candidates.extend(idx.exact_hosts.get(h).into_iter().flatten());
                let mut rest = h;
                while let Some((_, tail)) = rest.split_once('.') {
                    candidates.extend(idx.wildcard_by_suffix.get(tail).into_iter().flatten());
                    rest = tail;
                }
            }
            if addr.is_some() {
                candidates.extend(&idx.addr_routes);
            }
            for r in candidates {
                let Some(route) = routes.get(r as usize) else {
                    continue;
                };
                match route_applies(route, host.as_deref(), addr, port) {
                    Applies::Yes => {
                        if let Some(Some(c)) = self.guarded.get(r as usize) {
                            guarded_by = Some(c);
                            continue;
                        }
                        matched.push(r);
                        grants.extend(self.granted_by(i, r).map(|o| (r, o.clone())));
                    }
                    Applies::InternalAddress => internal_refused = true,
                    Applies::No => {}
                }
            }
        }
        matched.sort_unstable();
        matched.dedup();
        grants.sort();
        grants.dedup();
        let shown = host
            .clone()
            .or_else(|| addr.map(|a| a.to_string()))
            .unwrap_or_default();
        if matched.is_empty() {
            let reason = if let Some(credential) = guarded_by {
                Reason::CredentialGuard {
                    dest: shown,
                    port,
                    credential: credential.to_string(),
                }
            } else if internal_refused {
                Reason::InternalAddress { dest: shown }
            } else {
                Reason::NoRoute {
                    binary: binary.to_string(),
                    dest: shown,
                    port,
                }
            };
            return deny(reason);
        }
        let mut l7: Vec<u32> = matched
            .iter()
            .filter_map(|&r| match routes.get(r as usize).map(|x| x.via) {
                Some(Via::L7(e)) => Some(e),
                _ => None,
            })
            .collect();
        l7.sort_unstable();
        l7.dedup();
        let reason = Reason::Connect {
            binary: binary.to_string(),
            dest: shown,
            port,
            inspected: !l7.is_empty(),
        };
        ConnectionDecision {
            routes: matched,
            l7,
            reason,
            grants,
        }
    }

    /// The rules that gave identity `i` route `r`.
    fn granted_by(&self, i: usize, r: u32) -> impl Iterator<Item = &Origin> {
        let id = self.bundle.enforcement.seccomp.identities.get(i);
        let k = id.and_then(|id| id.routes.iter().position(|&x| x == r));
        let per_identity = self.bundle.provenance.identities.get(i);
        let origins = k
            .and_then(|k| per_identity.and_then(|p| p.get(k)))
            .filter(|o| !o.is_empty());
        // Bundles without per-identity provenance: any rule of the route.
        let fallback = match origins {
            Some(_) => None,
            None => self.bundle.provenance.routes.get(r as usize),
        };
        origins.or(fallback).into_iter().flatten()
    }

    /// The rules that allowed this connection, for blame: each one names
    /// the connecting binary and the destination.
    fn applicable<'a>(&self, conn: &'a ConnectionDecision) -> impl Iterator<Item = &'a Origin> {
        conn.grants
            .iter()
            .filter(|(r, _)| conn.routes.contains(r))
            .map(|(_, o)| o)
    }

    /// The rule blame names for an allowed connection: one that names the
    /// binary and the destination (`None` when the connection is refused).
    pub fn connection_rule(&self, conn: &ConnectionDecision) -> Option<Origin> {
        self.applicable(conn).next().cloned()
    }

    /// The rules of L7 endpoint `e` that this connection reached it by.
    fn l7_grants<'a>(&self, conn: &'a ConnectionDecision, e: u32) -> Vec<&'a Origin> {
        let routes = &self.bundle.enforcement.seccomp.routes;
        conn.grants
            .iter()
            .filter(|(r, _)| {
                conn.routes.contains(r)
                    && routes
                        .get(*r as usize)
                        .is_some_and(|route| route.via == Via::L7(e))
            })
            .map(|(_, o)| o)
            .collect()
    }

    /// The rule blame names for L7 endpoint `e` as a whole: one that
    /// grants it to this connection.
    fn endpoint_origin(&self, conn: &ConnectionDecision, e: u32) -> Option<Origin> {
        let granted = self.l7_grants(conn, e);
        let ep = self.bundle.enforcement.l7.get(e as usize)?;
        ep.origins
            .iter()
            .find(|o| granted.contains(o))
            .or_else(|| granted.is_empty().then(|| ep.origins.first()).flatten())
            .cloned()
    }

    /// The full decision for one request.
    pub fn eval(&self, req: &Request) -> Decision {
        self.eval_with_body(req, None)
    }

    /// The full decision for one request whose body was read: `body` goes
    /// to [`Self::decide_body`] when the request reaches an endpoint that
    /// judges bodies.
    pub fn eval_with_body(&self, req: &Request, body: Option<&[u8]>) -> Decision {
        self.eval_with_typed_body(req, body, None)
    }

    /// [`Self::eval_with_body`] for a body sent with this `Content-Type`,
    /// which a route with `request_body_credential_rewrite` reads
    /// ([`Self::decide_typed_body`]).
    pub fn eval_with_typed_body(
        &self,
        req: &Request,
        body: Option<&[u8]>,
        content_type: Option<&str>,
    ) -> Decision {
        if crate::bundle::is_advisor_dest(req.host.as_deref(), req.addr) {
            return self.decide_advisor(&req.binary, req.sha256.as_deref(), req.port);
        }
        let conn = self.decide_connection(
            &req.binary,
            req.sha256.as_deref(),
            req.host.as_deref(),
            req.addr,
            req.port,
        );
        if !conn.allowed() {
            return Decision {
                decision: Verdict::Deny,
                route: None,
                rule: None,
                credential: None,
                reason: conn.reason,
                target: None,
                rpc: None,
                graphql: None,
            };
        }
        let first_origin = self.connection_rule(&conn);
        if conn.l7.is_empty() {
            return Decision {
                decision: Verdict::Allow,
                route: Some(RouteKind::L4),
                rule: first_origin,
                credential: None,
                reason: conn.reason,
                target: None,
                rpc: None,
                graphql: None,
            };
        }
        let Some(http) = &req.http else {
            return Decision {
                decision: Verdict::Allow,
                route: Some(RouteKind::L7),
                rule: first_origin,
                credential: None,
                reason: conn.reason,
                target: None,
                rpc: None,
                graphql: None,
            };
        };
        match body {
            Some(body) => self.decide_typed_body(
                &conn,
                req.host.as_deref(),
                &http.method,
                &http.target,
                body,
                content_type,
            ),
            None => self.decide_request(&conn, req.host.as_deref(), &http.method, &http.target),
        }
    }

    /// The full decision for a WebSocket upgrade of `req.http`'s target
    /// (its method is taken to be `GET`), or for one client message after
    /// that upgrade: the message is judged only when the upgrade is
    /// allowed, since without it there is no connection to send it on.
    /// A connection relayed at L4 carries anything.
    pub fn eval_websocket(&self, req: &Request, message: Option<WsClientMessage<'_>>) -> Decision {
        let mut upgrade = req.clone();
        if let Some(http) = upgrade.http.as_mut() {
            http.method = "GET".to_string();
        }
        let first = self.eval(&Request {
            http: None,
            ..upgrade.clone()
        });
        let (Some(http), Some(RouteKind::L7)) = (&upgrade.http, first.route) else {
            return first;
        };
        let conn = self.decide_connection(
            &req.binary,
            req.sha256.as_deref(),
            req.host.as_deref(),
            req.addr,
            req.port,
        );
        let host = req.host.as_deref();
        if self.websocket(&conn, &http.target).is_none() {
            return Decision {
                decision: Verdict::Deny,
                route: Some(RouteKind::L7),
                rule: None,
                credential: None,
                reason: Reason::NoWebsocketEndpoint {
                    target: http.target.clone(),
                },
                target: None,
                rpc: None,
                graphql: None,
            };
        }
        let up = self.decide_upgrade(&conn, host, &http.target);
        let Some(message) = message else {
            return up;
        };
        if up.decision == Verdict::Deny {
            return Decision {
                reason: Reason::UpgradeRefused(Box::new(up.reason)),
                credential: None,
                ..up
            };
        }
        self.decide_ws_message(&conn, host, &http.target, message)
    }

    /// Some(limit) when a request to `target` on this connection must have
    /// its body read (up to `limit` bytes) and judged by `decide_body`;
    /// None for REST-only. With several body-judging endpoints on the
    /// path, the smallest limit: a longer body is refused by one of them.
    ///
    /// A GraphQL endpoint answers Some for every method: its POSTs carry
    /// the operation in the body, and a GET must have an empty body (the
    /// operation is in the query string), which `decide_body` checks.
    /// `decide_request` judges a GET the same way.
    pub fn body_limit(&self, conn: &ConnectionDecision, target: &str) -> Option<usize> {
        let tables = &self.bundle.enforcement;
        conn.l7
            .iter()
            .filter_map(|&e| tables.l7.get(e as usize))
            .filter(|ep| ep.reads_body())
            .filter(|ep| {
                canonicalize_path(target, ep.encoded_slash).is_ok_and(|c| ep.covers(&c.path))
            })
            .map(L7Endpoint::effective_body_limit)
            .min()
    }

    /// The refusal of a `target` that is another spelling (ASCII case, a
    /// trailing slash) of the `path` of a GraphQL, JSON-RPC or MCP
    /// endpoint on this connection without being under it: a deny whose
    /// reason is [`Reason::PathAlias`], in audit mode too; `None` for
    /// every other target. A server may route such a request to that
    /// endpoint's handler while the rules that judge it are another
    /// endpoint's, which never read the body (see
    /// `L7Endpoint::is_aliased_by`; never for an endpoint with
    /// `fold_paths`). Blame names that endpoint's rule.
    ///
    /// [`Self::decide_request`], [`Self::decide_body`] and
    /// [`Self::decide_upgrade`] refuse such a target the same way; the
    /// proxy asks this first, before it reads a body or an upgrade.
    pub fn path_alias(&self, conn: &ConnectionDecision, target: &str) -> Option<Decision> {
        let tables = &self.bundle.enforcement;
        conn.l7.iter().find_map(|&e| {
            let ep = tables.l7.get(e as usize)?;
            let canon = canonicalize_path(target, ep.encoded_slash).ok()?;
            if !ep.is_aliased_by(&canon.path) {
                return None;
            }
            let pattern = ep.path.as_ref()?.to_string();
            Some(Decision {
                decision: Verdict::Deny,
                route: Some(RouteKind::L7),
                rule: self.endpoint_origin(conn, e),
                credential: None,
                reason: Reason::PathAlias { pattern },
                target: Some(canon),
                rpc: None,
                graphql: None,
            })
        })
    }

    /// Check one HTTP request on a connection the proxy received. An
    /// endpoint that judges bodies reads this as a request with an empty
    /// body: only MCP's receive-stream GET and a GraphQL GET (whose
    /// operation is in the query string) can pass.
    ///
    /// Two refusals no rule makes hold in audit mode too: before the
    /// rules, a target that is another spelling of a body-judging
    /// endpoint's path ([`Self::path_alias`], [`Reason::PathAlias`]); and,
    /// when the rules would let the request through, a query parameter
    /// that names another method
    /// ([`crate::matcher::overrides::method_in_query`],
    /// [`Reason::MethodOverride`]). [`Reason::refusal_code`] gives the
    /// code the proxy answers with. The same holds for
    /// [`Self::decide_body`] and [`Self::decide_upgrade`].
    pub fn decide_request(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
    ) -> Decision {
        self.judge(conn, host, method, target, Ask::Http(None), None)
    }

    /// Judges a request whose body was read: HTTP method/target as in
    /// `decide_request`, then every JSON-RPC call of the body by the
    /// endpoint's RPC rules (deny wins; a batch with one denied call is
    /// denied whole). Same Decision type, same audit semantics, same blame
    /// (rule origin), credential chosen as today.
    ///
    /// A body over the endpoint's limit, one that does not parse, and (on a
    /// `json-rpc` endpoint) one with a response frame are denied even in
    /// audit mode, as OpenShell does. Calls travel in POST bodies; on an
    /// MCP endpoint a GET with an empty body is Streamable HTTP's receive
    /// stream and is allowed (the proxy should pass such a GET here only
    /// when its `Accept` names `text/event-stream`, see
    /// [`crate::l7body::jsonrpc::accepts_event_stream`]). Any other method
    /// matches no rule.
    ///
    /// On a GraphQL endpoint, a POST body (one request object or a batch)
    /// or a GET query string is read into operations, and every operation
    /// is judged by the GraphQL rules: deny wins, an operation no allow
    /// rule admits denies the request (the endpoint is authoritative for
    /// its path), and a batch is allowed only when every operation is. A
    /// hash-only request is judged as its registered operation and denied
    /// when its id is not registered. Unreadable requests are denied even
    /// in audit mode; see the `graphql` module for where this is stricter
    /// than OpenShell. The proxy checks the `Content-Type` of a POST with
    /// [`crate::l7body::graphql::check_content_type`] before calling this.
    ///
    /// Whatever the endpoint (REST too), a body the rules let through is
    /// refused when it holds the placeholder marker and the bundle has
    /// credentials ([`Reason::PlaceholderInBody`], in audit mode too): the
    /// proxy scans every body it forwards for it. A route with
    /// `request_body_credential_rewrite` replaces placeholders instead;
    /// see [`Self::decide_typed_body`] (this is that with no
    /// `Content-Type`).
    pub fn decide_body(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Decision {
        self.decide_typed_body(conn, host, method, target, body, None)
    }

    /// Some when a `websocket` endpoint takes part for `target` on this
    /// connection: only then may an RFC 6455 upgrade request be judged with
    /// [`Self::decide_upgrade`]; everywhere else upgrades stay refused.
    /// With several websocket endpoints on the path, the smallest message
    /// limit: a longer message is refused by one of them.
    pub fn websocket(&self, conn: &ConnectionDecision, target: &str) -> Option<WsRelay> {
        let tables = &self.bundle.enforcement;
        conn.l7
            .iter()
            .filter_map(|&e| tables.l7.get(e as usize))
            .filter(|ep| ep.protocol() == L7Protocol::Websocket)
            .filter(|ep| {
                canonicalize_path(target, ep.encoded_slash).is_ok_and(|c| ep.covers(&c.path))
            })
            .map(L7Endpoint::effective_body_limit)
            .min()
            .map(|message_limit| WsRelay { message_limit })
    }

    /// The credentials whose placeholders [`Self::decide_ws_message`] may
    /// have the proxy replace in client messages after an upgrade of
    /// `target` on this connection: those with a placeholder whose
    /// binding covers the upgrade (`host`, `GET`, the target's path), when
    /// a route with `websocket_credential_rewrite` reaches a websocket
    /// endpoint for the target; empty otherwise. The proxy scrubs their
    /// secrets from the server's messages from the upgrade on, since a
    /// server may echo what it was sent.
    pub fn ws_rewrites(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        target: &str,
    ) -> Vec<String> {
        let path = self.rewriting_path(
            conn,
            target,
            |r| r.websocket_credential_rewrite,
            L7Protocol::Websocket,
        );
        let Some(path) = path else {
            return Vec::new();
        };
        self.placeholders_for(host, "GET", Some(&path))
            .covered
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The upgrade GET, judged by the websocket endpoints' `GET` rules
    /// (deny wins, audit as for REST); `credential` chosen as for a REST
    /// GET. Other endpoints on the path take no part: the upgraded
    /// connection is theirs to judge only if they are websocket endpoints.
    pub fn decide_upgrade(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        target: &str,
    ) -> Decision {
        self.judge(conn, host, "GET", target, Ask::Upgrade, None)
    }

    /// One complete client message after an allowed upgrade of `target`:
    /// a text message by the `WEBSOCKET_TEXT` rules, or, on an endpoint
    /// with GraphQL rules, as a GraphQL-over-WebSocket message (operation
    /// to the GraphQL rules; lifecycle allowed; other type or unreadable
    /// refused); a binary message relayed unless a credential is bound to
    /// the host and the route does not accept uninspected credentials. See the
    /// `websocket` module. On an endpoint with
    /// `websocket_credential_rewrite`, a text message let through with
    /// placeholders of credentials whose binding covers the upgrade (`GET`
    /// on `target`) in it says so
    /// ([`Reason::Rewritten`]) and names the first of them in
    /// `credential`; otherwise `credential` is None, nothing being
    /// injected into messages.
    pub fn decide_ws_message(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        target: &str,
        message: WsClientMessage<'_>,
    ) -> Decision {
        self.judge(
            conn,
            host,
            WEBSOCKET_TEXT,
            target,
            Ask::Message(message),
            None,
        )
    }

    /// [`Self::judge_rules`], with the refusals that come before the rules
    /// (another spelling of a body-judging endpoint's path) and after them
    /// (a method override in the query of a request they let through). A
    /// message is judged on a target whose upgrade passed both.
    /// `content_type` is that of an HTTP request's body.
    fn judge(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
        ask: Ask<'_>,
        content_type: Option<&str>,
    ) -> Decision {
        let message = matches!(ask, Ask::Message(_));
        if !message && let Some(refused) = self.path_alias(conn, target) {
            return refused;
        }
        let d = self.judge_rules(conn, host, method, target, ask);
        if message || d.decision == Verdict::Deny {
            return d;
        }
        let key = d
            .target
            .as_ref()
            .and_then(|c| c.query.as_deref())
            .and_then(method_in_query)
            .map(str::to_owned);
        let refused = match (key, ask) {
            (Some(key), _) => Reason::MethodOverride {
                key,
                method: method.to_owned(),
            },
            (None, Ask::Http(Some(body))) => {
                match self.body_placeholders(conn, host, method, target, body, content_type) {
                    Ok(None) => return d,
                    Ok(Some(credentials)) => {
                        return Decision {
                            reason: Reason::BodyRewritten {
                                inner: Box::new(d.reason),
                                credentials,
                            },
                            ..d
                        };
                    }
                    Err(refused) => refused,
                }
            }
            (None, _) => return d,
        };
        Decision {
            decision: Verdict::Deny,
            credential: None,
            reason: refused,
            ..d
        }
    }

    /// Whether a request body is refused for the placeholder it carries,
    /// on a route without `request_body_credential_rewrite`. OpenShell,
    /// with rewrite off, refuses the reserved marker in any body of a
    /// sandbox that has credentials, whatever the host or the protocol:
    /// sent on, the server would get a placeholder where the workload
    /// meant a secret.
    fn placeholder_refused(&self, body: &[u8]) -> bool {
        !self.bundle.enforcement.credentials.is_empty() && holds_placeholder(body)
    }

    fn judge_rules(
        &self,
        conn: &ConnectionDecision,
        host: Option<&str>,
        method: &str,
        target: &str,
        ask: Ask<'_>,
    ) -> Decision {
        let method = method.to_ascii_uppercase();
        let body = match ask {
            Ask::Http(body) => body,
            Ask::Upgrade | Ask::Message(_) => None,
        };
        let upgraded = !matches!(ask, Ask::Http(_));
        let routes = &self.bundle.enforcement.seccomp.routes;
        let tables = &self.bundle.enforcement;
        let mut denied_by: Option<Denial> = None;
        let mut allowed_by: Option<Allowance> = None;
        let mut refused: Option<Refusal> = None;
        let mut unmatched: Option<(Reason, Note)> = None;
        let mut participating: Vec<(u32, Enforcement)> = Vec::new();
        let mut canon_error = None;
        let mut canonical_path = None;
        // Endpoints differ only in whether `%2F` is allowed, so every one
        // that reads the target reads it the same way.
        let mut canonical_target = None;
        for &e in &conn.l7 {
            let Some(ep) = tables.l7.get(e as usize) else {
                continue;
            };
            if upgraded && ep.protocol() != L7Protocol::Websocket {
                continue;
            }
            let canon = match canonicalize_path(target, ep.encoded_slash) {
                Ok(c) => c,
                Err(err) => {
                    canon_error = Some(err.to_string());
                    continue;
                }
            };
            canonical_target.get_or_insert_with(|| canon.clone());
            let rule_path = ep.request_path(&canon.path);
            if ep.path.as_ref().is_some_and(|p| !rule_path.matched_by(p)) {
                continue;
            }
            let params = match canon.query.as_deref().map(parse_query_string) {
                None => Vec::new(),
                Some(Ok(p)) => p,
                Some(Err(err)) => {
                    canon_error = Some(err.message);
                    continue;
                }
            };
            participating.push((e, ep.enforcement));
            let ws_outcome = ep.websocket().map(|ws| {
                let ws_ask = match ask {
                    Ask::Http(_) => WsAsk::Request,
                    Ask::Upgrade => WsAsk::Upgrade,
                    Ask::Message(m) => WsAsk::Message(m),
                };
                let what = match ws_ask {
                    WsAsk::Message(_) => format!("message on {}", canon.path),
                    _ => format!("{method} {}", canon.path),
                };
                let credential = self.credential_on_host(host);
                let via_e = |flag: fn(&Route) -> bool| {
                    conn.routes.iter().any(|&r| {
                        routes
                            .get(r as usize)
                            .is_some_and(|route| route.via == Via::L7(e) && flag(route))
                    })
                };
                // A message rides on its upgrade: the binding is judged
                // on a `GET` of the upgrade's path.
                let placeholders = self.placeholders_for(host, "GET", Some(&canon.path));
                websocket::judge_websocket(
                    ws,
                    ws_ask,
                    &WsContext {
                        method: &method,
                        path: &rule_path,
                        params: &params,
                        what: &what,
                        cache: &self.graphql_cache,
                        credential: credential.as_deref(),
                        uninspected_credentials: via_e(|r| r.uninspected_credentials),
                        rewrite: via_e(|r| r.websocket_credential_rewrite),
                        bound: &placeholders.covered,
                        outside: &placeholders.outside,
                    },
                )
            });
            let outcome = ws_outcome.or_else(|| {
                let what = format!("{method} {}", canon.path);
                let body = body.unwrap_or_default();
                match &ep.rules {
                    L7Rules::Graphql(g) => Some(graphql::judge_graphql(
                        g,
                        &method,
                        canon.query.as_deref(),
                        &what,
                        body,
                        &self.graphql_cache,
                    )),
                    L7Rules::Rpc(r) => Some(judge_rpc(r, &method, &what, body)),
                    L7Rules::Rest(_) | L7Rules::Websocket(_) => None,
                }
            });
            if let Some(outcome) = outcome {
                record(
                    e,
                    ep.enforcement,
                    outcome,
                    &mut refused,
                    &mut denied_by,
                    &mut allowed_by,
                    &mut unmatched,
                );
            } else {
                let rest = ep.rest();
                if denied_by.is_none()
                    && let Some(i) =
                        rest.and_then(|r| find_rule(r, &method, &rule_path, &params, true))
                {
                    let why = Reason::Rest {
                        method: method.clone(),
                        path: canon.path.clone(),
                        deny: true,
                    };
                    denied_by =
                        Some((e, Some(Rule::Rest(i)), ep.enforcement, why, Note::default()));
                }
                if allowed_by.is_none()
                    && let Some(i) =
                        rest.and_then(|r| find_rule(r, &method, &rule_path, &params, false))
                {
                    let why = Reason::Rest {
                        method: method.clone(),
                        path: canon.path.clone(),
                        deny: false,
                    };
                    allowed_by = Some((e, Some(Rule::Rest(i)), why, Note::default()));
                }
            }
            canonical_path.get_or_insert(canon.path);
        }
        // An endpoint's rules are shared by every policy rule with the same
        // content; blame names one written for this binary and destination.
        let rule_origin = |e: u32, rule: Rule, deny: bool| {
            let ep = tables.l7.get(e as usize)?;
            let (origins, within) = match rule {
                Rule::Rest(i) => ep.rest().and_then(|r| r.rule(deny, i))?.sources(),
                Rule::Rpc(i) => ep.rpc().and_then(|r| r.rule(deny, i))?.sources(),
                Rule::Graphql(i) => ep.graphql().and_then(|r| r.rule(deny, i))?.sources(),
            };
            let granted = self.l7_grants(conn, e);
            let applies = |k: usize| {
                let at = within.and_then(|w| w.get(k))?;
                let endpoint = ep.origins.get(*at as usize)?;
                granted.contains(&endpoint).then_some(())
            };
            origins
                .iter()
                .enumerate()
                .find(|(k, _)| applies(*k).is_some())
                .map(|(_, o)| o)
                .or_else(|| within.is_none().then(|| origins.first()).flatten())
                .cloned()
        };
        let endpoint_origin = |e: u32| self.endpoint_origin(conn, e);
        let path = canonical_path.clone().unwrap_or_else(|| target.to_string());
        let all_audit = !participating.is_empty()
            && participating.iter().all(|(_, m)| *m == Enforcement::Audit);
        // Nothing is injected into WebSocket messages; placeholders
        // replaced in one are named by `mk`.
        let credential = match ask {
            Ask::Message(_) => None,
            _ => self.credential_for(host, &method, canonical_path.as_deref()),
        };
        let mk = |decision, rule, reason: Reason, credential: Option<String>, note: Note| {
            let (reason, credential) = match note.rewritten {
                names if decision != Verdict::Deny && !names.is_empty() => (
                    Reason::Rewritten {
                        inner: Box::new(reason),
                        credentials: names.clone(),
                    },
                    names.into_iter().next(),
                ),
                _ => (reason, credential),
            };
            Decision {
                decision,
                route: Some(RouteKind::L7),
                rule,
                credential,
                reason,
                target: canonical_target.clone(),
                rpc: note.rpc,
                graphql: note.graphql,
            }
        };
        if participating.is_empty() {
            let reason = match canon_error {
                Some(error) => Reason::TargetRefused {
                    target: target.to_string(),
                    error,
                },
                None => Reason::NoEndpoint { path },
            };
            return mk(
                Verdict::Deny,
                conn.l7.first().and_then(|e| endpoint_origin(*e)),
                reason,
                None,
                Note::default(),
            );
        }
        // Refused bodies are denied whatever the enforcement mode: the
        // rules could not see what the server would.
        if let Some((e, why, note)) = refused {
            return mk(Verdict::Deny, endpoint_origin(e), why, None, note);
        }
        if let Some((e, rule, mode, why, note)) = denied_by {
            let verdict = if mode == Enforcement::Audit && all_audit {
                Verdict::Audit
            } else {
                Verdict::Deny
            };
            let cred = if verdict == Verdict::Audit {
                credential
            } else {
                None
            };
            let origin = match rule {
                Some(rule) => rule_origin(e, rule, true),
                None => endpoint_origin(e),
            };
            return mk(verdict, origin, why, cred, note);
        }
        if let Some((e, rule, why, note)) = allowed_by {
            let origin = match rule {
                Some(rule) => rule_origin(e, rule, false),
                None => endpoint_origin(e),
            };
            return mk(Verdict::Allow, origin, why, credential, note);
        }
        let first = participating.first().map(|(e, _)| *e);
        let (why, note) = unmatched.unwrap_or_else(|| {
            (
                Reason::NoAllowRule {
                    method: method.clone(),
                    path: path.clone(),
                },
                Note::default(),
            )
        });
        if all_audit {
            return mk(
                Verdict::Audit,
                first.and_then(endpoint_origin),
                Reason::Audit(Box::new(why)),
                credential,
                note,
            );
        }
        mk(
            Verdict::Deny,
            first.and_then(endpoint_origin),
            why,
            None,
            note,
        )
    }

    /// A credential bound to `host` whatever the methods and paths of its
    /// binding: the first by name. OpenShell guards such a host (a
    /// credentialed endpoint) as a whole, so an upgrade that carried no
    /// credential (a `GET` outside a `methods POST` binding) is guarded
    /// too.
    pub(crate) fn credential_on_host(&self, host: Option<&str>) -> Option<String> {
        let host = normalize_host(host?).ok()?;
        self.bundle
            .enforcement
            .credentials
            .iter()
            .find(|c| c.hosts.iter().any(|h| h.matches(&host)))
            .map(|c| c.name.clone())
    }

    /// The credential the proxy injects on this request: the first (by
    /// name) whose binding covers host, method and path.
    pub(crate) fn credential_for(
        &self,
        host: Option<&str>,
        method: &str,
        path: Option<&str>,
    ) -> Option<String> {
        let host = normalize_host(host?).ok()?;
        let path = path?;
        self.bundle
            .enforcement
            .credentials
            .iter()
            .find(|c| c.covers(&host, method, path))
            .map(|c| c.name.clone())
    }
}

/// What `judge` is asked about.
#[derive(Debug, Clone, Copy)]
enum Ask<'a> {
    /// An HTTP request, with its body when it was read.
    Http(Option<&'a [u8]>),
    /// A WebSocket upgrade request (a `GET`).
    Upgrade,
    /// A client message on an upgraded connection.
    Message(WsClientMessage<'a>),
}

type Refusal = (u32, Reason, Note);
type Denial = (u32, Option<Rule>, Enforcement, Reason, Note);
type Allowance = (u32, Option<Rule>, Reason, Note);

/// Keeps the first outcome of each kind, as endpoints are judged in turn.
fn record(
    e: u32,
    enforcement: Enforcement,
    outcome: BodyOutcome,
    refused: &mut Option<Refusal>,
    denied_by: &mut Option<Denial>,
    allowed_by: &mut Option<Allowance>,
    unmatched: &mut Option<(Reason, Note)>,
) {
    match outcome {
        BodyOutcome::Refused(why, note) => {
            refused.get_or_insert((e, Reason::Body(why), note));
        }
        BodyOutcome::Denied(rule, why, note) => {
            denied_by.get_or_insert((e, rule, enforcement, Reason::Body(why), note));
        }
        BodyOutcome::Allowed(rule, why, note) => {
            allowed_by.get_or_insert((e, rule, Reason::Body(why), note));
        }
        BodyOutcome::NoMatch(why, note) => {
            unmatched.get_or_insert((Reason::Body(why), note));
        }
    }
}

/// Which rule list of an endpoint a rule index points into.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Rest(usize),
    Rpc(usize),
    Graphql(usize),
}

/// What a judged body held, for the decision's log fields.
#[derive(Debug, Clone, Default)]
struct Note {
    rpc: Option<RpcNote>,
    graphql: Option<GraphqlNote>,
    /// Credentials whose placeholders the proxy replaces in the message
    /// it forwards.
    rewritten: Vec<String>,
}

impl Note {
    fn rpc(note: RpcNote) -> Self {
        Self {
            rpc: Some(note),
            ..Self::default()
        }
    }
}

/// One body-judging endpoint's verdict on a request. Each carries the
/// reason and what the body held.
enum BodyOutcome {
    /// Denied whatever the enforcement mode.
    Refused(BodyReason, Note),
    /// Denied by this rule, or (`None`) by a GraphQL endpoint no allow rule
    /// of which admits an operation; audit mode lets it through.
    Denied(Option<Rule>, BodyReason, Note),
    /// Every call is allowed; the rule that allowed the first call (`None`
    /// when no rule was needed: the method profile, the receive stream,
    /// response frames).
    Allowed(Option<Rule>, BodyReason, Note),
    NoMatch(BodyReason, Note),
}

impl BodyOutcome {
    /// The same outcome, noting the credentials whose placeholders the
    /// proxy replaces should the message go on.
    fn rewriting(self, names: Vec<String>) -> Self {
        let with = |mut note: Note| {
            note.rewritten = names;
            note
        };
        match self {
            Self::Refused(why, note) => Self::Refused(why, with(note)),
            Self::Denied(rule, why, note) => Self::Denied(rule, why, with(note)),
            Self::Allowed(rule, why, note) => Self::Allowed(rule, why, with(note)),
            Self::NoMatch(why, note) => Self::NoMatch(why, with(note)),
        }
    }
}

fn describe(call: &RpcCall, index: usize, body: &RpcBody) -> String {
    let kind = if call.notification {
        "notification"
    } else {
        "call"
    };
    let mut out = if body.batch {
        format!(
            "batch call {} of {}: {kind} `{}`",
            index + 1,
            body.calls.len(),
            call.method
        )
    } else {
        format!("{kind} `{}`", call.method)
    };
    if let Some(tool) = &call.tool {
        out.push_str(&format!(" (tool `{tool}`)"));
    }
    out
}

fn judge_rpc(ep: &RpcRules, method: &str, what: &str, body: &[u8]) -> BodyOutcome {
    let limit = ep.effective_body_limit();
    if body.len() > limit {
        return BodyOutcome::Refused(
            BodyReason::RpcBodyTooLarge {
                what: what.to_string(),
                len: body.len(),
                limit,
            },
            Note::default(),
        );
    }
    let dialect = ep.dialect;
    if dialect == RpcDialect::Mcp && method == "GET" && body.is_empty() {
        return BodyOutcome::Allowed(
            None,
            BodyReason::McpReceiveStream {
                what: what.to_string(),
            },
            Note::default(),
        );
    }
    let parsed = match parse_rpc_body(body, dialect, ep.strict_tool_names) {
        Ok(parsed) => parsed,
        Err(err) => {
            return BodyOutcome::Refused(
                BodyReason::RpcUnreadable {
                    what: what.to_string(),
                    error: err.to_string(),
                },
                Note::default(),
            );
        }
    };
    let note = |call: Option<usize>| {
        Note::rpc(RpcNote {
            calls: parsed.calls.clone(),
            call,
            batch: parsed.batch,
            responses: parsed.responses,
        })
    };
    if dialect == RpcDialect::JsonRpc && parsed.responses > 0 {
        return BodyOutcome::Refused(
            BodyReason::RpcResponseFrames {
                what: what.to_string(),
            },
            note(None),
        );
    }
    if method != "POST" {
        return BodyOutcome::NoMatch(
            BodyReason::RpcNotPost {
                what: what.to_string(),
            },
            note(None),
        );
    }
    for (k, call) in parsed.calls.iter().enumerate() {
        if let Some(i) = ep
            .deny
            .iter()
            .position(|r| r.matches(&call.method, call.tool.as_deref()))
        {
            return BodyOutcome::Denied(
                Some(Rule::Rpc(i)),
                BodyReason::RpcCallDenied {
                    what: what.to_string(),
                    call: describe(call, k, &parsed),
                },
                note(Some(k)),
            );
        }
    }
    let mut first_rule = None;
    for (k, call) in parsed.calls.iter().enumerate() {
        let rule = ep
            .allow
            .iter()
            .position(|r| r.matches(&call.method, call.tool.as_deref()));
        let by_profile = ep.all_mcp_methods
            && !call.method.is_empty()
            && (call.method != crate::matcher::TOOLS_CALL || !ep.tools_narrowed());
        if rule.is_none() && !by_profile {
            return BodyOutcome::NoMatch(
                BodyReason::RpcCallUnmatched {
                    what: what.to_string(),
                    call: describe(call, k, &parsed),
                },
                note(Some(k)),
            );
        }
        if k == 0 {
            first_rule = rule.map(Rule::Rpc);
        }
    }
    let what = what.to_string();
    let why = match parsed.calls.as_slice() {
        [] => BodyReason::RpcResponsesRelayed { what },
        [call] => BodyReason::RpcCallAllowed {
            what,
            call: describe(call, 0, &parsed),
        },
        calls => BodyReason::RpcBatchAllowed {
            what,
            calls: calls.len(),
        },
    };
    BodyOutcome::Allowed(first_rule, why, note(parsed.calls.first().map(|_| 0)))
}

fn find_rule(
    rules: &RestRules,
    method: &str,
    path: &RequestPath<'_>,
    params: &[(String, String)],
    deny: bool,
) -> Option<usize> {
    rules.find(method, path, params, deny)
}

enum Applies {
    Yes,
    No,
    InternalAddress,
}

fn route_applies(route: &Route, host: Option<&str>, addr: Option<IpAddr>, port: u16) -> Applies {
    if !route.ports.contains(port) {
        return Applies::No;
    }
    match &route.dest {
        Dest::Addrs(set) => match addr {
            Some(a) if set.contains(a) => Applies::Yes,
            _ => Applies::No,
        },
        Dest::Host(pattern) => {
            let Some(h) = host else { return Applies::No };
            if !pattern.matches(h) {
                return Applies::No;
            }
            // Metadata names must be named exactly, never through a wildcard.
            if !pattern.is_exact() && is_metadata_host(h) {
                return Applies::InternalAddress;
            }
            match (addr, &route.addresses) {
                (Some(a), Some(allowed)) => {
                    if allowed.contains(a) {
                        Applies::Yes
                    } else {
                        Applies::No
                    }
                }
                (Some(a), None) if classify_addr(a) != AddrClass::Public => {
                    Applies::InternalAddress
                }
                _ => Applies::Yes,
            }
        }
    }
}
