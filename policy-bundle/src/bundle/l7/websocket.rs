//! WebSocket rules: REST rules for the upgrade `GET` and client text
//! messages (`WEBSOCKET_TEXT`), or GraphQL rules for GraphQL over
//! WebSocket.

use super::{GraphqlOps, RestRules};

/// Largest client message assembled and judged unless the endpoint's
/// `body_limit` says otherwise: OpenShell's `MAX_TEXT_MESSAGE_BYTES`.
pub const DEFAULT_MESSAGE_LIMIT: usize = 4 * 1024 * 1024;

/// A WebSocket endpoint's rules: the upgrade and each client message.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct WsRules {
    /// Judge the upgrade `GET` and, as method `WEBSOCKET_TEXT`, each text message.
    pub rest: RestRules,
    /// Empty unless the endpoint speaks GraphQL over WebSocket.
    pub graphql: GraphqlOps,
    /// The largest client message assembled and judged; `None` is
    /// [`DEFAULT_MESSAGE_LIMIT`].
    pub message_limit: Option<u64>,
}

impl WsRules {
    /// Client text messages are GraphQL-over-WebSocket messages, judged by
    /// the GraphQL rules and never by `WEBSOCKET_TEXT` allow rules.
    pub(crate) fn graphql_over_websocket(&self) -> bool {
        !self.graphql.is_empty()
    }

    pub(crate) fn effective_message_limit(&self) -> usize {
        self.message_limit.map_or(DEFAULT_MESSAGE_LIMIT, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        })
    }
}
