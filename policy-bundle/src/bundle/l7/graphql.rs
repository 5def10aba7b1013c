//! GraphQL rules: operation types, operation names and root fields, and
//! the trusted persisted-query registry.

use serde::{Deserialize, Serialize};

use super::Sourced;
use crate::matcher::{GraphqlNameGlob, OperationType, OperationTypeSet};

/// The operation rules and registry of a GraphQL endpoint, or of a
/// websocket endpoint speaking GraphQL over WebSocket.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct GraphqlOps {
    /// Every operation of a request must match one of these.
    pub allow: Vec<Sourced<GraphqlRule>>,
    /// An operation matching one of these denies the request.
    pub deny: Vec<Sourced<GraphqlRule>>,
    /// The trusted persisted-query registry. A request that sends only a
    /// hash or saved-query id runs whatever the server stored under it, so
    /// it is judged as the operation registered here; an id not registered
    /// is denied (empty = every hash-only request is denied).
    pub persisted_queries: Vec<PersistedQuery>,
}

impl GraphqlOps {
    /// No rule and no registry entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.persisted_queries.is_empty()
    }

    /// The registered persisted query with this hash or saved-query id.
    pub(crate) fn persisted_query(&self, id: &str) -> Option<&PersistedQuery> {
        self.persisted_queries.iter().find(|q| q.id == id)
    }
}

/// A GraphQL-over-HTTP endpoint: its operation rules and body limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct GraphqlRules {
    /// The operation rules and persisted-query registry.
    pub ops: GraphqlOps,
    /// Bytes of body (or query string) read; `None` is
    /// [`crate::l7body::graphql::DEFAULT_BODY_LIMIT`].
    pub body_limit: Option<u64>,
}

impl GraphqlRules {
    pub(crate) fn effective_body_limit(&self) -> usize {
        self.body_limit
            .map_or(crate::l7body::graphql::DEFAULT_BODY_LIMIT, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
    }
}

/// One GraphQL rule. An allow rule matches an operation whose type is in
/// `types`, whose name matches `name` (an anonymous operation is named
/// `""`) and each of whose root fields matches one of `fields`; a deny rule
/// matches when type and name match and any root field matches one of
/// `fields`. `None` means any name, any fields.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphqlRule {
    /// The operation types covered.
    pub types: OperationTypeSet,
    /// A glob over the operation's name; `None` is any name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<GraphqlNameGlob>,
    /// Globs over root fields; `None` is any fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<GraphqlNameGlob>>,
}

impl GraphqlRule {
    /// Whether type and name match, fields aside.
    pub(crate) fn type_and_name(&self, kind: OperationType, name: Option<&str>) -> bool {
        self.types.contains(kind)
            && self
                .name
                .as_ref()
                .is_none_or(|g| g.matches_operation_name(name))
    }

    /// As an allow rule: `fields` is `None` when the root fields are not
    /// known (a registered persisted query that lists none), which only a
    /// rule without field patterns admits. An operation without root
    /// fields never meets a rule with field patterns, as in OpenShell.
    pub fn allows(
        &self,
        kind: OperationType,
        name: Option<&str>,
        fields: Option<&[String]>,
    ) -> bool {
        self.type_and_name(kind, name)
            && match (&self.fields, fields) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(globs), Some(fields)) => {
                    !fields.is_empty() && fields.iter().all(|f| globs.iter().any(|g| g.matches(f)))
                }
            }
    }

    /// As a deny rule: the first root field a field pattern matches, or
    /// `Some(None)` when the rule matches without naming a field. Unknown
    /// fields (`None`) may be any field, so every field pattern is taken
    /// to match them: OpenShell lets such an operation pass field deny
    /// rules, which a registry entry without `fields` must not buy.
    pub fn denies<'a>(
        &self,
        kind: OperationType,
        name: Option<&str>,
        fields: Option<&'a [String]>,
    ) -> Option<Option<&'a str>> {
        if !self.type_and_name(kind, name) {
            return None;
        }
        match (&self.fields, fields) {
            (None, _) | (Some(_), None) => Some(None),
            (Some(globs), Some(fields)) => fields
                .iter()
                .find(|f| globs.iter().any(|g| g.matches(f)))
                .map(|f| Some(f.as_str())),
        }
    }
}

/// A registry entry: what the server runs for a hash-only request with this
/// id. `name` and `fields` are GraphQL names, not patterns; `fields: None`
/// means the root fields are not known.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedQuery {
    /// The `sha256Hash` of an automatic persisted query, or a saved-query
    /// id (`id`, `documentId`, `queryId`), exactly as the client sends it.
    pub id: String,
    /// The type of the stored operation.
    #[serde(rename = "type")]
    pub kind: OperationType,
    /// The stored operation's name; `None` for an anonymous one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The stored operation's root fields; `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
}

impl GraphqlOps {
    /// No rules: what a protocol without GraphQL rules reads as.
    pub(crate) const EMPTY: GraphqlOps = GraphqlOps {
        allow: Vec::new(),
        deny: Vec::new(),
        persisted_queries: Vec::new(),
    };
}

impl GraphqlOps {
    /// Deny rule `i`, or allow rule `i`.
    pub(crate) fn rule(&self, deny: bool, i: usize) -> Option<&Sourced<GraphqlRule>> {
        if deny {
            self.deny.get(i)
        } else {
            self.allow.get(i)
        }
    }
}
