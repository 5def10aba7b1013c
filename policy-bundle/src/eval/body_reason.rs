//! The verdicts of endpoints that read bodies or messages (JSON-RPC, MCP,
//! GraphQL, WebSocket), as data. The judging code records which verdict it
//! reached and the facts behind it; the prose is built here, when the
//! reason is shown.
//!
//! `what` in every variant names the request or message judged, as
//! `"{method} {path}"` or `"message on {path}"`. Call and operation
//! descriptions (`call`, `operation`) are composed where the body is read,
//! since they depend on its batch position and size.

use std::fmt;

/// Why a body-judging endpoint decided as it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyReason {
    /// A JSON-RPC body larger than the endpoint reads is refused: its
    /// calls cannot all be seen.
    RpcBodyTooLarge {
        /// The request judged.
        what: String,
        /// Body size, in bytes.
        len: usize,
        /// The endpoint's body limit, in bytes.
        limit: usize,
    },
    /// An MCP `GET` without a body opens the server's receive stream; no
    /// rule is needed for it.
    McpReceiveStream {
        /// The request judged.
        what: String,
    },
    /// The body is not JSON-RPC the endpoint can read exactly.
    RpcUnreadable {
        /// The request judged.
        what: String,
        /// The reader's account of what is wrong.
        error: String,
    },
    /// Plain JSON-RPC clients never send responses, so a body holding one
    /// is refused.
    RpcResponseFrames {
        /// The request judged.
        what: String,
    },
    /// Calls in a request other than `POST` are not judged, so no allow
    /// rule admits them.
    RpcNotPost {
        /// The request judged.
        what: String,
    },
    /// A call matches a deny rule.
    RpcCallDenied {
        /// The request judged.
        what: String,
        /// The call, with its batch position and tool.
        call: String,
    },
    /// A call matches no allow rule and the method profile does not cover it.
    RpcCallUnmatched {
        /// The request judged.
        what: String,
        /// The call, with its batch position and tool.
        call: String,
    },
    /// The body held only responses to the server's requests (MCP), which
    /// need no rule.
    RpcResponsesRelayed {
        /// The request judged.
        what: String,
    },
    /// The one call of the body is allowed.
    RpcCallAllowed {
        /// The request judged.
        what: String,
        /// The call, with its tool.
        call: String,
    },
    /// Every call of a batch is allowed.
    RpcBatchAllowed {
        /// The request judged.
        what: String,
        /// Number of calls in the batch.
        calls: usize,
    },
    /// A GraphQL `GET` with a body is refused: a server could run either
    /// the query string or the body.
    GraphqlGetWithBody {
        /// The request judged.
        what: String,
    },
    /// GraphQL is carried only by `GET` and `POST`.
    GraphqlMethod {
        /// The request judged.
        what: String,
        /// As sent.
        method: String,
    },
    /// The GraphQL request cannot be read exactly.
    GraphqlUnreadable {
        /// The request judged.
        what: String,
        /// The reader's account of what is wrong.
        error: String,
    },
    /// A hash-only request names a persisted query the registry lacks.
    PersistedUnregistered {
        /// The request or message judged.
        what: String,
        /// The persisted query's hash, as sent.
        hash: String,
    },
    /// A hash-only request's `operationName` differs from the registered
    /// name, so the stored document may hold other operations.
    PersistedNameMismatch {
        /// The request or message judged.
        what: String,
        /// The `operationName` sent.
        asked: String,
        /// The persisted query's hash, as sent.
        hash: String,
    },
    /// A GraphQL operation matches a deny rule.
    GraphqlDenied {
        /// The request or message judged.
        what: String,
        /// The operation, with its batch position and persisted id.
        operation: String,
        /// The root field the rule matched; `None` when the rule names none.
        field: Option<String>,
    },
    /// Allow rules admit the operation's type and name but not this root
    /// field; the endpoint is authoritative, so the request is denied.
    GraphqlFieldUnallowed {
        /// The request or message judged.
        what: String,
        /// The operation, with its batch position and persisted id.
        operation: String,
        /// The first root field no rule allows.
        field: String,
    },
    /// No allow rule admits the operation; the endpoint is authoritative,
    /// so the request is denied.
    GraphqlUnmatched {
        /// The request or message judged.
        what: String,
        /// The operation, with its batch position and persisted id.
        operation: String,
        /// False for a registered query that lists no root fields, which
        /// field allow rules never admit.
        fields_known: bool,
    },
    /// The one GraphQL operation is allowed.
    GraphqlAllowed {
        /// The request or message judged.
        what: String,
        /// The operation, with its persisted id.
        operation: String,
    },
    /// Every operation of a GraphQL batch is allowed.
    GraphqlBatchAllowed {
        /// The request judged.
        what: String,
        /// Number of operations in the batch.
        operations: usize,
    },
    /// A websocket endpoint's path takes nothing but the upgrade.
    NotUpgrade {
        /// The request judged.
        what: String,
    },
    /// A message over the endpoint's message limit is refused (the proxy
    /// closes the connection with 1009 before asking).
    MessageTooLarge {
        /// The message judged.
        what: String,
        /// Message size, in bytes.
        len: usize,
        /// The endpoint's message limit, in bytes.
        limit: usize,
    },
    /// Binary messages cannot be inspected, and a credential is bound to
    /// the host while the route does not accept uninspected credentials.
    BinaryWithCredential {
        /// The message judged.
        what: String,
        /// The credential bound to the host.
        credential: String,
    },
    /// Binary messages are relayed unjudged.
    BinaryRelayed {
        /// The message judged.
        what: String,
    },
    /// A text message carries a credential placeholder to a host a
    /// credential is bound to, on a route that neither replaces
    /// placeholders nor accepts uninspected credentials.
    PlaceholderInText {
        /// The message judged.
        what: String,
        /// The credential bound to the host.
        credential: String,
    },
    /// A text message on an endpoint that replaces placeholders carries
    /// one of a credential not bound to the host (or of none): replacing
    /// it would hand that host another host's secret, and sending it on
    /// would hand it a placeholder.
    PlaceholderNotBound {
        /// The message judged.
        what: String,
    },
    /// A text message on an endpoint that replaces placeholders carries
    /// one of a credential bound to the host whose `methods` or `paths` do
    /// not cover the upgrade (a `GET` of its path): replacing it would
    /// send the secret outside its binding.
    PlaceholderOutsideBinding {
        /// The message judged.
        what: String,
        /// The credential.
        credential: String,
    },
    /// The endpoint's REST rules judged the upgrade or a text message.
    WsRule {
        /// The request or message judged.
        what: String,
        /// Which of the two was judged.
        subject: WsSubject,
        /// The kind of rule that matched.
        matched: RuleMatch,
    },
    /// GraphQL-over-WebSocket lifecycle messages need no rule.
    Lifecycle {
        /// The message judged.
        what: String,
        /// The message's `type`, one of the few the protocols define.
        message_type: &'static str,
    },
    /// A GraphQL-over-WebSocket client message of a type the endpoint does
    /// not know is refused.
    UnsupportedMessageType {
        /// The message judged.
        what: String,
        /// The message's `type`.
        message_type: String,
    },
    /// The GraphQL-over-WebSocket message cannot be read exactly.
    WsMessageUnreadable {
        /// The message judged.
        what: String,
        /// The reader's account of what is wrong.
        error: String,
    },
}

/// What a websocket endpoint's REST rules were asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsSubject {
    /// The `GET` upgrade request.
    Upgrade,
    /// A client text message, judged as `WEBSOCKET_TEXT`.
    TextMessage,
}

/// Which of an endpoint's rule lists matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleMatch {
    /// A deny rule matched (deny wins over allow).
    Deny,
    /// An allow rule matched and no deny rule did.
    Allow,
    /// No rule matched.
    NoAllow,
}

impl BodyReason {
    /// Whether a deny rule decided, rather than the absence of an allow
    /// rule or a refusal.
    #[must_use]
    pub fn by_deny_rule(&self) -> bool {
        matches!(
            self,
            Self::RpcCallDenied { .. }
                | Self::GraphqlDenied { .. }
                | Self::WsRule {
                    matched: RuleMatch::Deny,
                    ..
                }
        )
    }
}

impl fmt::Display for WsSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Upgrade => "the upgrade",
            Self::TextMessage => "text message",
        })
    }
}

impl fmt::Display for BodyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RpcBodyTooLarge { what, len, limit } => write!(
                f,
                "{what}: the body has {len} bytes, over the endpoint's limit of {limit}"
            ),
            Self::McpReceiveStream { what } => write!(f, "{what} opens the MCP receive stream"),
            Self::RpcUnreadable { what, error } => {
                write!(f, "{what}: JSON-RPC body refused: {error}")
            }
            Self::RpcResponseFrames { what } => write!(
                f,
                "{what}: JSON-RPC response frames are not permitted from client to server"
            ),
            Self::RpcNotPost { what } => {
                write!(f, "{what}: JSON-RPC calls are only judged in POST requests")
            }
            Self::RpcCallDenied { what, call } => write!(f, "{what}: {call} matches a deny rule"),
            Self::RpcCallUnmatched { what, call } => {
                write!(f, "{what}: {call} matches no allow rule")
            }
            Self::RpcResponsesRelayed { what } => write!(
                f,
                "{what}: response frames to the server's requests are relayed"
            ),
            Self::RpcCallAllowed { what, call } => write!(f, "{what}: {call} is allowed"),
            Self::RpcBatchAllowed { what, calls } => {
                write!(f, "{what}: all {calls} calls of the batch are allowed")
            }
            Self::GraphqlGetWithBody { what } => write!(
                f,
                "{what}: a GraphQL GET must not carry a body (a server could run either the query string or the body)"
            ),
            Self::GraphqlMethod { what, method } => write!(
                f,
                "{what}: GraphQL requests are GET or POST; {method} is refused"
            ),
            Self::GraphqlUnreadable { what, error } => {
                write!(f, "{what}: GraphQL request refused: {error}")
            }
            Self::PersistedUnregistered { what, hash } => {
                write!(f, "{what}: persisted query `{hash}` is not registered")
            }
            Self::PersistedNameMismatch { what, asked, hash } => write!(
                f,
                "{what}: `operationName` `{asked}` is not the name registered for persisted query `{hash}`"
            ),
            Self::GraphqlDenied {
                what,
                operation,
                field,
            } => {
                write!(f, "{what}: {operation}")?;
                if let Some(field) = field {
                    write!(f, " on root field `{field}`")?;
                }
                f.write_str(" matches a deny rule")
            }
            Self::GraphqlFieldUnallowed {
                what,
                operation,
                field,
            } => write!(
                f,
                "{what}: {operation}: root field `{field}` is allowed by no rule"
            ),
            Self::GraphqlUnmatched {
                what,
                operation,
                fields_known,
            } => {
                write!(f, "{what}: {operation} matches no allow rule")?;
                if !fields_known {
                    f.write_str(" (its root fields are not registered)")?;
                }
                Ok(())
            }
            Self::GraphqlAllowed { what, operation } => {
                write!(f, "{what}: {operation} is allowed")
            }
            Self::GraphqlBatchAllowed { what, operations } => write!(
                f,
                "{what}: all {operations} operations of the batch are allowed"
            ),
            Self::NotUpgrade { what } => write!(
                f,
                "{what}: a websocket endpoint takes only WebSocket upgrade requests"
            ),
            Self::MessageTooLarge { what, len, limit } => write!(
                f,
                "{what}: the message has {len} bytes, over the endpoint's message limit of {limit}"
            ),
            Self::BinaryWithCredential { what, credential } => write!(
                f,
                "{what}: binary message refused: credential `{credential}` is bound to this host and binary messages cannot be inspected (add `uninspected_credentials` to the rule to accept that)"
            ),
            Self::BinaryRelayed { what } => write!(
                f,
                "{what}: binary message relayed uninspected (binary messages are not judged)"
            ),
            Self::PlaceholderInText { what, credential } => write!(
                f,
                "{what}: text message refused: it carries a credential placeholder, which this rule does not replace, and credential `{credential}` is bound to this host (add `websocket_credential_rewrite` to the rule to have placeholders replaced by their secrets, or `uninspected_credentials` to send them on as they are)"
            ),
            Self::PlaceholderNotBound { what } => write!(
                f,
                "{what}: text message refused: it carries a credential placeholder that is not one of a credential bound to this host, and only those are replaced"
            ),
            Self::PlaceholderOutsideBinding { what, credential } => write!(
                f,
                "{what}: text message refused: it carries the placeholder of credential `{credential}`, whose binding does not cover the upgrade (GET on this path); only placeholders of credentials whose binding covers it are replaced (widen the credential's `methods` or `paths` to cover it, or send the placeholder only on connections its binding covers)"
            ),
            Self::WsRule {
                what,
                subject,
                matched,
            } => {
                let rule = match matched {
                    RuleMatch::Deny => "matches a deny rule",
                    RuleMatch::Allow => "matches an allow rule",
                    RuleMatch::NoAllow => "matches no allow rule",
                };
                write!(f, "{what}: {subject} {rule}")
            }
            Self::Lifecycle { what, message_type } => write!(
                f,
                "{what}: GraphQL-over-WebSocket lifecycle message `{message_type}` is allowed"
            ),
            Self::UnsupportedMessageType { what, message_type } => write!(
                f,
                "{what}: GraphQL-over-WebSocket client message type `{message_type}` is not supported"
            ),
            Self::WsMessageUnreadable { what, error } => {
                write!(f, "{what}: GraphQL-over-WebSocket message refused: {error}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_pieces_render_only_when_present() {
        let denied = |field: Option<&str>| BodyReason::GraphqlDenied {
            what: "POST /graphql".into(),
            operation: "mutation `Drop`".into(),
            field: field.map(Into::into),
        };
        assert_eq!(
            denied(None).to_string(),
            "POST /graphql: mutation `Drop` matches a deny rule"
        );
        assert_eq!(
            denied(Some("users")).to_string(),
            "POST /graphql: mutation `Drop` on root field `users` matches a deny rule"
        );
        let unmatched = BodyReason::GraphqlUnmatched {
            what: "POST /graphql".into(),
            operation: "query `Q` (persisted query `abc`)".into(),
            fields_known: false,
        };
        assert_eq!(
            unmatched.to_string(),
            "POST /graphql: query `Q` (persisted query `abc`) matches no allow rule (its root fields are not registered)"
        );
    }

    #[test]
    fn only_deny_rule_verdicts_count_as_deny_rules() {
        let ws = |matched| BodyReason::WsRule {
            what: "GET /ws".into(),
            subject: WsSubject::Upgrade,
            matched,
        };
        assert!(ws(RuleMatch::Deny).by_deny_rule());
        assert!(!ws(RuleMatch::Allow).by_deny_rule());
        assert_eq!(
            ws(RuleMatch::NoAllow).to_string(),
            "GET /ws: the upgrade matches no allow rule"
        );
        let unmatched = BodyReason::GraphqlUnmatched {
            what: "POST /graphql".into(),
            operation: "anonymous query".into(),
            fields_known: true,
        };
        assert!(!unmatched.by_deny_rule());
    }
}
