//! How a `websocket` endpoint judges the upgrade and the client messages
//! after it, following OpenShell's runtime (its `l7/websocket.rs`, the
//! upgrade path of `l7/relay.rs` and the WebSocket rules of its Rego
//! policy).
//!
//! - The RFC 6455 upgrade is a `GET` judged by the endpoint's REST rules.
//!   Any other request on a websocket endpoint's path is refused whatever
//!   the enforcement mode, as OpenShell answers "websocket endpoint
//!   requires a valid WebSocket upgrade request".
//! - A client text message is judged as the synthetic method
//!   `WEBSOCKET_TEXT` on the upgrade's path and query.
//! - On an endpoint with GraphQL rules or a registry, a text message is a
//!   GraphQL-over-WebSocket message instead: lifecycle messages are
//!   allowed, an operation (`subscribe`, legacy `start`) is judged by the
//!   GraphQL rules (and by `WEBSOCKET_TEXT` deny rules, which OpenShell
//!   applies to it too), and a message of another type or one that cannot
//!   be read is refused even in audit mode.
//! - A binary message is relayed unjudged, as OpenShell relays binary
//!   frames, except on a credentialed endpoint (a host a credential is
//!   bound to, whatever the methods and paths of the binding) whose route
//!   does not accept uninspected credentials: OpenShell then closes the
//!   connection, since nothing can check what a binary frame carries.
//!   Whether the upgrade itself carried the credential does not matter: a
//!   `GET` outside a `methods POST` binding is guarded the same way.
//! - A text message carrying a credential placeholder on such an endpoint
//!   is refused too, unless the route replaces placeholders
//!   (`websocket_credential_rewrite`): OpenShell, with rewrite off, ends
//!   the connection rather than send one on.
//! - With rewrite on, a text message is judged by the rules as usual, and
//!   the placeholders in it of credentials whose binding covers the
//!   upgrade (host, `GET`, the upgrade's path) are replaced by their
//!   secrets before it goes on; one of another credential (or of none) is
//!   refused, whatever the enforcement mode: replacing it would hand this
//!   host another host's secret, or send a secret on a path or for a
//!   method its binding keeps it from (OpenShell replaces any credential
//!   bound to the host; we do not). A placeholder is known here by its
//!   credential's name and shape; the proxy, which issued them, refuses
//!   one it never issued. Binary messages are unaffected.
//! - A message over the endpoint's message limit is refused; the proxy
//!   closes the connection with 1009 before it gets here.

use super::graphql::judge_operations;
use super::{BodyOutcome, BodyReason, Note, Rule, RuleMatch, WsSubject, find_rule};
use crate::bundle::WsRules;
use crate::l7body::graphql::{self, DocumentCache, WsMessage};
use crate::{holds_placeholder, placeholders_of};

pub use crate::bundle::DEFAULT_MESSAGE_LIMIT;

/// One complete client-to-server WebSocket message: fragments joined, unmasked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsClientMessage<'a> {
    /// Judged by the REST rules (or GraphQL over WebSocket).
    Text(&'a str),
    /// Relayed uninspected, unless a credential is bound to the host and the rule does not accept uninspected credentials.
    Binary(&'a [u8]),
}

impl WsClientMessage<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Text(t) => t.len(),
            Self::Binary(b) => b.len(),
        }
    }
}

/// How the proxy must relay the upgraded connection of a websocket endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsRelay {
    /// Largest complete client message the proxy assembles and judges;
    /// a larger one closes the connection with 1009.
    pub message_limit: usize,
}

/// What is asked of a websocket endpoint.
#[derive(Debug, Clone, Copy)]
pub(super) enum WsAsk<'a> {
    /// A request that is not an upgrade.
    Request,
    Upgrade,
    Message(WsClientMessage<'a>),
}

/// Where the request or message was seen, and what the endpoint must know
/// of the connection.
pub(super) struct WsContext<'a> {
    pub(super) method: &'a str,
    pub(super) path: &'a crate::matcher::RequestPath<'a>,
    pub(super) params: &'a [(String, String)],
    pub(super) what: &'a str,
    pub(super) cache: &'a DocumentCache,
    /// A credential bound to the host, whether or not the upgrade carried
    /// it: the host is then a credentialed endpoint.
    pub(super) credential: Option<&'a str>,
    /// The route accepts that credentials pass uninspected.
    pub(super) uninspected_credentials: bool,
    /// The route replaces placeholders in text messages.
    pub(super) rewrite: bool,
    /// The credentials with a placeholder whose binding covers the
    /// upgrade: theirs are replaced.
    pub(super) bound: &'a [&'a str],
    /// Those bound to the host whose binding does not cover the upgrade:
    /// theirs are refused, naming the credential.
    pub(super) outside: &'a [&'a str],
}

pub(super) fn judge_websocket(ep: &WsRules, ask: WsAsk<'_>, cx: &WsContext<'_>) -> BodyOutcome {
    let what = cx.what.to_string();
    let message = match ask {
        WsAsk::Request => return refused(BodyReason::NotUpgrade { what }),
        WsAsk::Upgrade => return by_rest_rules(ep, cx, WsSubject::Upgrade),
        WsAsk::Message(m) => m,
    };
    let limit = ep.effective_message_limit();
    if message.len() > limit {
        return refused(BodyReason::MessageTooLarge {
            what,
            len: message.len(),
            limit,
        });
    }
    match message {
        WsClientMessage::Binary(_) => match cx.credential {
            Some(name) if !cx.uninspected_credentials => {
                refused(BodyReason::BinaryWithCredential {
                    what,
                    credential: name.to_string(),
                })
            }
            _ => BodyOutcome::Allowed(None, BodyReason::BinaryRelayed { what }, Note::default()),
        },
        WsClientMessage::Text(text) => {
            let rewritten = match placeholders_in_text(cx, text, what) {
                Ok(names) => names,
                Err(why) => return refused(why),
            };
            let outcome = if ep.graphql_over_websocket() {
                graphql_message(ep, cx, text, limit)
            } else {
                by_rest_rules(ep, cx, WsSubject::TextMessage)
            };
            outcome.rewriting(rewritten)
        }
    }
}

/// The credentials whose placeholders the proxy replaces in `text`, or why
/// it refuses a text whose placeholders cannot go on: with rewrite, one
/// not of a credential whose binding covers the upgrade; without, any on
/// a credentialed host whose route does not accept uninspected
/// credentials.
fn placeholders_in_text(
    cx: &WsContext<'_>,
    text: &str,
    what: String,
) -> Result<Vec<String>, BodyReason> {
    if cx.rewrite {
        return match placeholders_of(text.as_bytes(), cx.bound) {
            Some(names) => Ok(names.into_iter().map(str::to_owned).collect()),
            None => Err(not_replaced(cx, text, what)),
        };
    }
    match cx.credential {
        Some(name) if !cx.uninspected_credentials && holds_placeholder(text.as_bytes()) => {
            Err(BodyReason::PlaceholderInText {
                what,
                credential: name.to_string(),
            })
        }
        _ => Ok(Vec::new()),
    }
}

/// Why a text not all of whose placeholders may be replaced is refused.
/// When each is one of a credential bound to the host, the first whose
/// binding leaves the upgrade out is named, so that the refusal says
/// which binding to widen; otherwise one is another host's, or unknown.
fn not_replaced(cx: &WsContext<'_>, text: &str, what: String) -> BodyReason {
    let known: Vec<&str> = cx.bound.iter().chain(cx.outside).copied().collect();
    let outside = placeholders_of(text.as_bytes(), &known)
        .and_then(|names| names.into_iter().find(|n| cx.outside.contains(n)));
    match outside {
        Some(credential) => BodyReason::PlaceholderOutsideBinding {
            what,
            credential: credential.to_owned(),
        },
        None => BodyReason::PlaceholderNotBound { what },
    }
}

/// The REST rules' verdict on `cx.method` at the upgrade's path and query.
fn by_rest_rules(ep: &WsRules, cx: &WsContext<'_>, subject: WsSubject) -> BodyOutcome {
    let why = |matched| BodyReason::WsRule {
        what: cx.what.to_string(),
        subject,
        matched,
    };
    if let Some(i) = find_rule(&ep.rest, cx.method, cx.path, cx.params, true) {
        return BodyOutcome::Denied(Some(Rule::Rest(i)), why(RuleMatch::Deny), Note::default());
    }
    match find_rule(&ep.rest, cx.method, cx.path, cx.params, false) {
        Some(i) => {
            BodyOutcome::Allowed(Some(Rule::Rest(i)), why(RuleMatch::Allow), Note::default())
        }
        None => BodyOutcome::NoMatch(why(RuleMatch::NoAllow), Note::default()),
    }
}

fn graphql_message(ep: &WsRules, cx: &WsContext<'_>, text: &str, limit: usize) -> BodyOutcome {
    let what = cx.what.to_string();
    let op = match graphql::ws_text(text, limit, Some(cx.cache)) {
        Ok(WsMessage::Operation(op)) => op,
        Ok(WsMessage::Lifecycle { message_type }) => {
            return BodyOutcome::Allowed(
                None,
                BodyReason::Lifecycle { what, message_type },
                Note::default(),
            );
        }
        Ok(WsMessage::Other { message_type }) => {
            return refused(BodyReason::UnsupportedMessageType { what, message_type });
        }
        Err(err) => {
            return refused(BodyReason::WsMessageUnreadable {
                what,
                error: err.to_string(),
            });
        }
    };
    if let Some(i) = find_rule(&ep.rest, cx.method, cx.path, cx.params, true) {
        return BodyOutcome::Denied(
            Some(Rule::Rest(i)),
            BodyReason::WsRule {
                what,
                subject: WsSubject::TextMessage,
                matched: RuleMatch::Deny,
            },
            Note::default(),
        );
    }
    judge_operations(&ep.graphql, &what, vec![op], false)
}

fn refused(why: BodyReason) -> BodyOutcome {
    BodyOutcome::Refused(why, Note::default())
}
