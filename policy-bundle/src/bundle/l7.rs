//! L7 endpoints: the settings every inspected endpoint shares, and one rule
//! payload per protocol, so an endpoint holds only the rules its protocol
//! judges. Each protocol's types live in a file of their own; `wire` keeps
//! the flat JSON shape bundles have always had, so digests do not move.

mod alias;
mod graphql;
mod rest;
mod rpc;
mod websocket;
mod wire;

pub use graphql::{GraphqlOps, GraphqlRule, GraphqlRules, PersistedQuery};
pub use rest::{L7Matcher, RestRules};
pub use rpc::{RpcMatcher, RpcRules};
pub use websocket::{DEFAULT_MESSAGE_LIMIT, WsRules};
pub use wire::{L7Provenance, WireEndpoint};

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::matcher::{HttpPathGlob, RequestPath};
use crate::vocab::{Enforcement, Origin, TlsMode};

/// One inspected endpoint. Equality and order look at what is enforced
/// only, never at origins: two rules written in different places with the
/// same content are one endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "WireEndpoint")]
pub struct L7Endpoint {
    /// `audit` lets refused requests through, logged.
    pub enforcement: Enforcement,
    /// Whether the proxy terminates TLS or relays the connection unread.
    pub tls: TlsMode,
    /// The paths this endpoint judges; `None` is every path. Matched against the canonical path.
    pub path: Option<HttpPathGlob>,
    /// Whether `%2F` in a path is accepted (kept encoded) rather than refused.
    pub encoded_slash: bool,
    /// Whether the server reads paths ignoring ASCII case and a trailing
    /// slash, so every path glob of the endpoint (its `path` and its rules')
    /// matches the folded request path ([`crate::matcher::fold_path`]).
    pub fold_paths: bool,
    /// What is judged, by protocol.
    pub rules: L7Rules,
    /// Every policy rule this endpoint was written in; a rule's `within`
    /// indexes point here. Not part of the digest.
    pub origins: Vec<Origin>,
}

/// What an endpoint judges, by protocol.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum L7Rules {
    /// HTTP method, path and query.
    Rest(RestRules),
    /// JSON-RPC 2.0 or MCP over HTTP POST: methods and tools.
    Rpc(RpcRules),
    /// GraphQL over HTTP: operation types, names and root fields.
    Graphql(GraphqlRules),
    /// WebSocket: the upgrade and client messages.
    Websocket(WsRules),
}

/// A rule and where it was written: its origins, and for each origin the
/// index in the endpoint's `origins` of the policy rule it came from
/// (`None` for bundles written before that was recorded). Compared and
/// ordered by the rule alone.
#[derive(Debug, Clone)]
pub struct Sourced<T> {
    /// What is enforced.
    pub rule: T,
    /// Where it was written, for blame; not part of the digest.
    pub origins: Vec<Origin>,
    pub(crate) within: Option<Vec<u32>>,
}

impl<T> Sourced<T> {
    /// A rule with no recorded origin.
    pub fn new(rule: T) -> Self {
        Self {
            rule,
            origins: Vec::new(),
            within: None,
        }
    }
}

impl<T> Sourced<T> {
    /// The rule's origins, and for each the index of the endpoint writing
    /// it was in.
    pub(crate) fn sources(&self) -> (&[Origin], Option<&[u32]>) {
        (&self.origins, self.within.as_deref())
    }
}

impl<T> From<T> for Sourced<T> {
    fn from(rule: T) -> Self {
        Self::new(rule)
    }
}

impl<T> std::ops::Deref for Sourced<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.rule
    }
}

impl<T: PartialEq> PartialEq for Sourced<T> {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule
    }
}

impl<T: Eq> Eq for Sourced<T> {}

impl<T: Ord> PartialOrd for Sourced<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Ord> Ord for Sourced<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rule.cmp(&other.rule)
    }
}

/// Written as the bare rule: origins go to the provenance section.
impl<T: Serialize> Serialize for Sourced<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.rule.serialize(s)
    }
}

impl L7Endpoint {
    fn key(
        &self,
    ) -> (
        Enforcement,
        TlsMode,
        Option<&HttpPathGlob>,
        bool,
        bool,
        &L7Rules,
    ) {
        (
            self.enforcement,
            self.tls,
            self.path.as_ref(),
            self.encoded_slash,
            self.fold_paths,
            &self.rules,
        )
    }

    /// A canonical request path as this endpoint's path globs read it:
    /// folded when the endpoint folds paths.
    pub fn request_path<'a>(&self, canonical: &'a str) -> RequestPath<'a> {
        RequestPath::new(canonical, self.fold_paths)
    }

    /// Whether a canonical request path is under this endpoint's `path`
    /// (every path is when it has none).
    pub fn covers(&self, canonical: &str) -> bool {
        self.path
            .as_ref()
            .is_none_or(|p| self.request_path(canonical).matched_by(p))
    }

    /// The protocol word of the endpoint's rules.
    pub fn protocol(&self) -> L7Protocol {
        match &self.rules {
            L7Rules::Rest(_) => L7Protocol::Rest,
            L7Rules::Rpc(r) => r.protocol(),
            L7Rules::Graphql(_) => L7Protocol::Graphql,
            L7Rules::Websocket(_) => L7Protocol::Websocket,
        }
    }

    /// Whether rules judge the request body, so the proxy must read it.
    pub fn reads_body(&self) -> bool {
        matches!(self.rules, L7Rules::Rpc(_) | L7Rules::Graphql(_))
    }

    /// The REST rules: those of a REST endpoint, or a websocket endpoint's
    /// rules for the upgrade and text messages.
    pub fn rest(&self) -> Option<&RestRules> {
        match &self.rules {
            L7Rules::Rest(r) => Some(r),
            L7Rules::Websocket(w) => Some(&w.rest),
            L7Rules::Rpc(_) | L7Rules::Graphql(_) => None,
        }
    }

    pub(crate) fn rpc(&self) -> Option<&RpcRules> {
        match &self.rules {
            L7Rules::Rpc(r) => Some(r),
            _ => None,
        }
    }

    /// The GraphQL operation rules: a GraphQL endpoint's, or a websocket
    /// endpoint's for GraphQL over WebSocket.
    pub fn graphql(&self) -> Option<&GraphqlOps> {
        match &self.rules {
            L7Rules::Graphql(g) => Some(&g.ops),
            L7Rules::Websocket(w) => Some(&w.graphql),
            _ => None,
        }
    }

    pub(crate) fn websocket(&self) -> Option<&WsRules> {
        match &self.rules {
            L7Rules::Websocket(w) => Some(w),
            _ => None,
        }
    }

    /// A websocket endpoint with GraphQL rules or a registry: its client
    /// text messages are GraphQL-over-WebSocket messages, judged by the
    /// GraphQL rules and never by `WEBSOCKET_TEXT` allow rules.
    pub fn graphql_over_websocket(&self) -> bool {
        self.websocket()
            .is_some_and(WsRules::graphql_over_websocket)
    }

    /// The body (or, on a websocket endpoint, message) limit in effect, in
    /// bytes; REST endpoints read no body.
    pub fn effective_body_limit(&self) -> usize {
        match &self.rules {
            L7Rules::Rest(_) => crate::l7body::jsonrpc::DEFAULT_BODY_LIMIT,
            L7Rules::Rpc(r) => r.effective_body_limit(),
            L7Rules::Graphql(g) => g.effective_body_limit(),
            L7Rules::Websocket(w) => w.effective_message_limit(),
        }
    }

    /// The body (websocket: message) limit the bundle sets, if any.
    pub fn body_limit(&self) -> Option<u64> {
        match &self.rules {
            L7Rules::Rest(_) => None,
            L7Rules::Rpc(r) => r.body_limit,
            L7Rules::Graphql(g) => g.body_limit,
            L7Rules::Websocket(w) => w.message_limit,
        }
    }

    /// The registered persisted query with this hash or saved-query id.
    pub fn persisted_query(&self, id: &str) -> Option<&PersistedQuery> {
        self.graphql().and_then(|g| g.persisted_query(id))
    }
}

impl PartialEq for L7Endpoint {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for L7Endpoint {}

impl PartialOrd for L7Endpoint {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for L7Endpoint {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Serialize for L7Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        wire::WireEndpointRef::from(self).serialize(s)
    }
}

/// The protocol an L7 endpoint inspects: the `protocol` word of the wire
/// format and of diagnostics.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum L7Protocol {
    /// HTTP method, path and query.
    #[default]
    Rest,
    /// Generic JSON-RPC 2.0 over HTTP POST: methods only.
    JsonRpc,
    /// MCP Streamable HTTP: methods, and tools of `tools/call`.
    Mcp,
    /// GraphQL over HTTP (GET and POST): operation types, operation names
    /// and root fields.
    Graphql,
    /// WebSocket: the RFC 6455 upgrade `GET` and each client text message
    /// (`WEBSOCKET_TEXT`) by the REST rules, or by the GraphQL rules when
    /// the endpoint has any (GraphQL over WebSocket).
    Websocket,
}

impl L7Protocol {
    /// REST is the default `protocol`, left out of the JSON.
    #[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
    pub fn is_rest(&self) -> bool {
        *self == Self::Rest
    }

    /// The word policies use for it.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Rest => "http",
            Self::JsonRpc => "json-rpc",
            Self::Mcp => "mcp",
            Self::Graphql => "graphql",
            Self::Websocket => "websocket",
        }
    }
}
