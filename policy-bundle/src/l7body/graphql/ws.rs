//! Client text messages of GraphQL over WebSocket: the `graphql-transport-ws`
//! protocol and the legacy `graphql-ws` (subscriptions-transport-ws) one.

use serde_json::Value;

use super::{
    DEFAULT_BODY_LIMIT, DocumentCache, GraphqlError, GraphqlOp, check_len, envelope, json,
};

/// What one client text message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsMessage {
    /// `subscribe` (`graphql-transport-ws`) or `start` (legacy): runs an
    /// operation, which GraphQL rules decide.
    Operation(GraphqlOp),
    /// Protocol control that runs nothing: `connection_init`, `ping`,
    /// `pong`, `complete` (transport-ws), `stop`, `connection_terminate`
    /// (legacy). OpenShell allows these without evaluating rules.
    Lifecycle {
        /// The message's `type`.
        message_type: &'static str,
    },
    /// A well-formed message of another type. OpenShell refuses these, and
    /// so must the proxy: a server may give an unknown type a meaning.
    Other {
        /// As sent.
        message_type: String,
    },
}

const LIFECYCLE: [&str; 6] = [
    "connection_init",
    "ping",
    "pong",
    "complete",
    "stop",
    "connection_terminate",
];

/// Classifies a client text message within [`DEFAULT_BODY_LIMIT`].
///
/// The whole message is read strictly (no duplicate member anywhere, so
/// not two `type`s either). An operation message may hold only `type`,
/// `id` and `payload`, and its payload is read like a POST body object:
/// one request, never a batch.
pub fn classify_ws_text(text: &str) -> Result<WsMessage, GraphqlError> {
    classify(text, DEFAULT_BODY_LIMIT, None)
}

pub(super) fn classify(
    text: &str,
    limit: usize,
    cache: Option<&DocumentCache>,
) -> Result<WsMessage, GraphqlError> {
    check_len(text.len(), limit)?;
    let value = json::parse_strict(text.as_bytes())?;
    let Value::Object(members) = &value else {
        return Err(GraphqlError::NotAnObject);
    };
    let Some(Value::String(message_type)) = members.get("type") else {
        return Err(GraphqlError::WsMissingType);
    };
    if let Some(known) = LIFECYCLE.iter().find(|t| **t == message_type) {
        return Ok(WsMessage::Lifecycle {
            message_type: known,
        });
    }
    if message_type != "subscribe" && message_type != "start" {
        return Ok(WsMessage::Other {
            message_type: message_type.clone(),
        });
    }
    if let Some(key) = members
        .keys()
        .find(|k| !matches!(k.as_str(), "type" | "id" | "payload"))
    {
        return Err(GraphqlError::UnknownMember { key: key.clone() });
    }
    if !matches!(members.get("id"), Some(Value::String(id)) if !id.is_empty()) {
        return Err(GraphqlError::WsMissingId {
            message_type: message_type.clone(),
        });
    }
    match members.get("payload") {
        Some(payload @ Value::Object(_)) => Ok(WsMessage::Operation(envelope::op_from_object(
            payload, cache,
        )?)),
        _ => Err(GraphqlError::WsMissingPayload {
            message_type: message_type.clone(),
        }),
    }
}
