//! WebSocket endpoints: `rules` and `deny_rules` whose entries are either
//! transport rules (`method`, `path`, `query`: `GET` is the upgrade,
//! `WEBSOCKET_TEXT` client text messages, `*` both) or GraphQL rules
//! (`operation_type`, `operation_name`, `fields`) for GraphQL over
//! WebSocket, as OpenShell reads them. An entry with both kinds of field
//! is refused, as OpenShell refuses it.

use crate::ast::{EndpointStmt, Item, RuleAction};

use super::yaml::YNode;
use super::{Cx, key};

const GRAPHQL_FIELDS: &[&str] = &["operation_type", "operation_name", "fields"];
const TRANSPORT_FIELDS: &[&str] = &["method", "path", "query"];

pub(super) fn rules(cx: &mut Cx<'_>, node: &YNode, action: RuleAction) -> Vec<Item<EndpointStmt>> {
    let mut out = Vec::new();
    for (body, span) in super::l7::rule_bodies(
        cx,
        node,
        action,
        "{ method: GET, path: /ws } (or { operation_type: subscription })",
    ) {
        let has = |names: &[&str]| {
            body.entries()
                .is_some_and(|es| es.iter().any(|(k, v)| names.contains(&key(k)) && !blank(v)))
        };
        match (has(GRAPHQL_FIELDS), has(TRANSPORT_FIELDS)) {
            (true, true) => cx.invalid(
                body.span,
                "a WebSocket rule with both `method`/`path`/`query` and GraphQL fields",
                "OpenShell rejects this: write the upgrade as `{ method: GET, path: ... }` and each GraphQL operation rule on its own",
            ),
            (true, false) => {
                if let Some(stmt) = super::graphql::rule(cx, body, action) {
                    out.push(super::graphql::item(stmt, span));
                }
            }
            (false, _) => out.extend(super::l7::rule(cx, body, span, action, true)),
        }
    }
    out
}

/// Null, empty text, an empty list or mapping: an absent field.
fn blank(v: &YNode) -> bool {
    v.is_null()
        || v.scalar() == Some("")
        || v.items().is_some_and(<[_]>::is_empty)
        || v.entries().is_some_and(<[_]>::is_empty)
}
