//! WebSocket request kinds: an RFC 6455 upgrade and the client messages
//! after it, as values of the method dimension that no HTTP method set
//! holds (`Domain::methods_of` leaves them out), so only `websocket`
//! endpoints judge them and every other formula reads them as no request.
//!
//! What the model follows (`policy_lang::eval::Evaluator::eval_websocket`):
//!
//! - the upgrade is a `GET` judged by the websocket endpoints' REST rules
//!   (other endpoints on the path take no part); no websocket endpoint on
//!   the path refuses it;
//! - a message is judged only after an upgrade that is let through
//!   (allowed or audited), on the same path and query;
//! - a text message by the `WEBSOCKET_TEXT` rules;
//! - a binary message is relayed unless the upgrade carried a credential
//!   (`GET` on the path) and no matched route via the endpoint accepts
//!   uninspected credentials;
//! - a message over the message limit is refused;
//! - a connection relayed at L4 carries anything.
//!
//! Text messages on an endpoint with GraphQL rules or a registry
//! (GraphQL over WebSocket) are not modelled (the model takes them as
//! allowed), nor websocket endpoints of differing message limits (the
//! model takes the largest as the one limit, so a message under it is
//! judged by the rules everywhere): `unmodelled` says so and the engine
//! does not certify such a change.

use policy_lang::bundle::{Bundle, L7Endpoint, L7Protocol};

/// Names of the kinds in the method dimension: not HTTP method tokens, so
/// no request can carry them.
pub const UPGRADE: &str = "(websocket upgrade)";
pub const TEXT: &str = "(websocket text message)";
pub const BINARY: &str = "(websocket binary message)";
pub const OVERSIZED: &str = "(websocket message over the limit)";

/// The method atoms of the WebSocket kinds, and the one message limit of
/// every websocket endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kinds {
    pub upgrade: u32,
    pub text: u32,
    pub binary: u32,
    pub oversized: u32,
    /// The message limit of every websocket endpoint (the largest when
    /// they differ, which `unmodelled` reports: a message over it is
    /// refused by each of them).
    pub limit: usize,
}

/// What a point of the method dimension asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Upgrade,
    Text,
    Binary,
    /// A binary message one byte over the limit.
    Oversized,
}

impl Kinds {
    pub fn all(&self) -> Vec<u32> {
        vec![self.upgrade, self.text, self.binary, self.oversized]
    }

    pub fn kind(&self, method: u32) -> Option<Kind> {
        match method {
            m if m == self.upgrade => Some(Kind::Upgrade),
            m if m == self.text => Some(Kind::Text),
            m if m == self.binary => Some(Kind::Binary),
            m if m == self.oversized => Some(Kind::Oversized),
            _ => None,
        }
    }
}

fn websocket_endpoints<'a>(bundles: &'a [&'a Bundle]) -> impl Iterator<Item = &'a L7Endpoint> {
    bundles
        .iter()
        .flat_map(|b| b.enforcement.l7.iter())
        .filter(|e| e.protocol == L7Protocol::Websocket)
}

/// The largest message limit of the bundles' websocket endpoints; `None`
/// when they have none (the domain then has no WebSocket kinds).
pub fn limit(bundles: &[&Bundle]) -> Option<usize> {
    websocket_endpoints(bundles)
        .map(L7Endpoint::effective_body_limit)
        .max()
}

/// Why the model cannot decide the bundles' websocket endpoints, when it
/// cannot.
pub fn unmodelled(bundles: &[&Bundle]) -> Option<&'static str> {
    if websocket_endpoints(bundles).any(L7Endpoint::graphql_over_websocket) {
        return Some("GraphQL-over-WebSocket messages");
    }
    let mut limits: Vec<usize> = websocket_endpoints(bundles)
        .map(L7Endpoint::effective_body_limit)
        .collect();
    limits.sort_unstable();
    limits.dedup();
    (limits.len() > 1).then_some("client messages under differing message limits")
}

/// A concrete upgrade or client message a point stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Upgrade,
    Text(String),
    /// A binary message of this many zero bytes.
    Binary(usize),
}

/// The text of a witness's text message: what it says does not matter to
/// an endpoint without GraphQL rules.
pub const WITNESS_TEXT: &str = "hello";

impl Probe {
    pub fn of(k: Kinds, kind: Kind) -> Probe {
        match kind {
            Kind::Upgrade => Probe::Upgrade,
            Kind::Text => Probe::Text(WITNESS_TEXT.to_owned()),
            Kind::Binary => Probe::Binary(1),
            Kind::Oversized => Probe::Binary(k.limit.saturating_add(1)),
        }
    }

    pub fn is_message(&self) -> bool {
        !matches!(self, Probe::Upgrade)
    }

    /// The evaluator's decision on it, `req` being the upgrade.
    pub fn decide(
        &self,
        ev: &policy_lang::eval::Evaluator,
        req: &policy_lang::eval::Request,
    ) -> policy_lang::eval::Decision {
        use policy_lang::eval::WsClientMessage;
        match self {
            Probe::Upgrade => ev.eval_websocket(req, None),
            Probe::Text(t) => ev.eval_websocket(req, Some(WsClientMessage::Text(t))),
            Probe::Binary(n) => {
                let bytes = vec![0u8; *n];
                ev.eval_websocket(req, Some(WsClientMessage::Binary(&bytes)))
            }
        }
    }
}
