//! WebSocket request kinds: an RFC 6455 upgrade and the client messages
//! after it, as values of the method dimension that no HTTP method set
//! holds (`Domain::methods_of` leaves them out), so only `websocket`
//! endpoints judge them and every other formula reads them as no request.
//!
//! What the model follows (`policy_bundle::eval::Evaluator::eval_websocket`):
//!
//! - the upgrade is a `GET` judged by the websocket endpoints' REST rules
//!   (other endpoints on the path take no part); no websocket endpoint on
//!   the path refuses it;
//! - a message is judged only after an upgrade that is let through
//!   (allowed or audited), on the same path and query;
//! - a text message by the `WEBSOCKET_TEXT` rules;
//! - a binary message is relayed unless a credential is bound to the host
//!   (whatever its methods and paths) and no matched route via the
//!   endpoint accepts uninspected credentials;
//! - a message over the message limit of an endpoint that takes part is
//!   refused (the proxy relays under the smallest);
//! - a connection relayed at L4 carries anything.
//!
//! Messages come in size classes, one per message limit of the bundles'
//! websocket endpoints: a message one byte over each limit, and a small
//! one. Two messages of the same class are refused by the same endpoints,
//! and what else decides a message (its kind, the upgrade's path and
//! query) does not depend on its size, so the classes stand for every
//! size: a limit raised from 1 KiB to 4 KiB shows as a message of 1,025
//! bytes let through.
//!
//! On an endpoint with GraphQL rules or a registry (GraphQL over
//! WebSocket), what a text message says decides it: its content is the
//! point's body value (`crate::calls`): a lifecycle message, a `subscribe`
//! message with one operation of one root field, or (any other value) a
//! text the endpoint cannot read. One root field suffices for the reason
//! `crate::graphql` gives for a POST: an operation message passes an
//! endpoint only if each of its root fields would pass alone, padded to
//! the same size, and `deny WEBSOCKET_TEXT` rules do not read the
//! content. A witness is that message padded with spaces to its size
//! class; when the message is longer than its class allows (a message
//! limit smaller than the witness), the point cannot be shown and the
//! engine answers inconclusive rather than certify it.

use policy_bundle::{Bundle, L7Endpoint, L7Protocol};

use crate::calls::Calls;

/// Name of the upgrade in the method dimension: not an HTTP method token,
/// so no request can carry it (nor the message kinds' names).
pub(crate) const UPGRADE: &str = "(websocket upgrade)";

/// The method atoms of the WebSocket kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kinds {
    pub(crate) upgrade: u32,
    /// Ascending by size; the last is over every limit.
    pub(crate) classes: Vec<SizeClass>,
}

/// A text and a binary message of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SizeClass {
    pub(crate) text: u32,
    pub(crate) binary: u32,
    pub(crate) size: usize,
}

/// What a point of the method dimension asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Upgrade,
    /// A text message of this many bytes.
    Text(usize),
    /// A binary message of this many bytes.
    Binary(usize),
}

impl Kinds {
    /// The method dimension's names of the kinds, in the order their atoms
    /// are given out: the upgrade, then each class's text and binary.
    /// A class is named by the sizes it holds: up to the smallest limit,
    /// between two limits, or over the largest.
    pub(crate) fn names(sizes: &[usize]) -> Vec<String> {
        let span = |i: usize, size: usize| match (i, sizes.get(i + 1).map(|n| n - 1)) {
            (0, Some(u)) => format!("up to {u} bytes"),
            (_, Some(u)) => format!("of {size} to {u} bytes"),
            (_, None) => format!("over {} bytes", size.saturating_sub(1)),
        };
        std::iter::once(UPGRADE.to_owned())
            .chain(sizes.iter().enumerate().flat_map(|(i, &size)| {
                let span = span(i, size);
                [
                    format!("(websocket text message {span})"),
                    format!("(websocket binary message {span})"),
                ]
            }))
            .collect()
    }

    /// The kinds whose names [`Self::names`] gave atoms from `first` on.
    pub(crate) fn numbered(first: u32, sizes: &[usize]) -> Kinds {
        let at = |i: usize| first.saturating_add(u32::try_from(i).unwrap_or(u32::MAX));
        Kinds {
            upgrade: first,
            classes: sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| SizeClass {
                    text: at(1 + 2 * i),
                    binary: at(2 + 2 * i),
                    size,
                })
                .collect(),
        }
    }

    pub(crate) fn all(&self) -> Vec<u32> {
        std::iter::once(self.upgrade)
            .chain(self.classes.iter().flat_map(|c| [c.text, c.binary]))
            .collect()
    }

    /// The largest message of the class whose representative has `size`
    /// bytes (`None`: the last class, over every limit).
    pub(crate) fn upper(&self, size: usize) -> Option<usize> {
        let at = self.classes.iter().position(|c| c.size == size)?;
        Some(self.classes.get(at + 1)?.size - 1)
    }

    pub(crate) fn kind(&self, method: u32) -> Option<Kind> {
        if method == self.upgrade {
            return Some(Kind::Upgrade);
        }
        self.classes.iter().find_map(|c| {
            if method == c.text {
                Some(Kind::Text(c.size))
            } else if method == c.binary {
                Some(Kind::Binary(c.size))
            } else {
                None
            }
        })
    }
}

fn websocket_endpoints<'a>(bundles: &'a [&'a Bundle]) -> impl Iterator<Item = &'a L7Endpoint> {
    bundles
        .iter()
        .flat_map(|b| b.enforcement.l7.iter())
        .filter(|e| e.protocol() == L7Protocol::Websocket)
}

/// The message sizes of the classes, ascending: the witness text's length
/// (or the smallest limit, if below it), then one byte over each message
/// limit of the bundles' websocket endpoints. Empty when they have none
/// (the domain then has no WebSocket kinds).
pub(crate) fn sizes(bundles: &[&Bundle]) -> Vec<usize> {
    let mut limits: Vec<usize> = websocket_endpoints(bundles)
        .map(L7Endpoint::effective_body_limit)
        .collect();
    limits.sort_unstable();
    limits.dedup();
    let Some(&smallest) = limits.first() else {
        return Vec::new();
    };
    std::iter::once(WITNESS_TEXT.len().min(smallest).max(1))
        .chain(limits.iter().map(|l| l.saturating_add(1)))
        .collect()
}

/// A concrete upgrade or client message a point stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The upgrade `GET` itself.
    Upgrade,
    /// A text message with this content.
    Text(String),
    /// A binary message of this many zero bytes.
    Binary(usize),
}

/// The text of a witness's text message: what it says does not matter to
/// an endpoint without GraphQL rules. Larger messages are this text
/// padded with spaces.
pub(crate) const WITNESS_TEXT: &str = "hello";

/// The text message of the class of `size` bytes whose content is body
/// value `v`: a GraphQL-over-WebSocket message padded with spaces into
/// the class, or for any other value [`text_of_size`]. `Err` when the
/// message is longer than the class allows.
pub(crate) fn text(calls: &Calls, kinds: &Kinds, size: usize, v: u32) -> Result<String, String> {
    if !calls.is_ws(v) {
        return Ok(text_of_size(size));
    }
    let mut msg = calls.message(v)?.unwrap_or_default();
    if let Some(upper) = kinds.upper(size).filter(|&u| msg.len() > u) {
        return Err(format!(
            "the GraphQL-over-WebSocket message `{msg}` is longer than {upper} bytes, the message limit it must stay within"
        ));
    }
    // The first class holds every message up to the smallest limit.
    let first = kinds.classes.first().is_some_and(|c| c.size == size);
    if !first {
        while msg.len() < size {
            msg.push(' ');
        }
    }
    Ok(msg)
}

/// A text message of `size` bytes: [`WITNESS_TEXT`], cut or padded with
/// spaces.
pub(crate) fn text_of_size(size: usize) -> String {
    let mut t: String = WITNESS_TEXT.chars().take(size).collect();
    while t.len() < size {
        t.push(' ');
    }
    t
}

impl Probe {
    /// A client message rather than the upgrade.
    pub fn is_message(&self) -> bool {
        !matches!(self, Probe::Upgrade)
    }

    /// The evaluator's decision on it, `req` being the upgrade.
    pub fn decide(
        &self,
        ev: &policy_bundle::eval::Evaluator,
        req: &policy_bundle::eval::Request,
    ) -> policy_bundle::eval::Decision {
        use policy_bundle::eval::WsClientMessage;
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
