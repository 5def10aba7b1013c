//! GraphQL endpoints: `rules: [{allow: {operation_type, operation_name,
//! fields}}]` and `deny_rules: [{operation_type, operation_name, fields}]`
//! → `allow|deny graphql TYPE [name GLOB] [field GLOB...]`, the registry
//! `graphql_persisted_queries` (with `persisted_queries:
//! allow_registered`) → `persisted ID TYPE [name NAME] [field NAME...]`,
//! and `graphql_max_body_bytes` → `body_limit`.
//!
//! Names and fields keep OpenShell's `glob.match(g, [], v)` meaning, which
//! our GraphQL name globs have. Transport fields (`method`, `path`,
//! `query`) in a GraphQL rule are refused: OpenShell would read such a rule
//! as a REST rule too.

use crate::ast::{EndpointStmt, Item, RuleAction, Trivia};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::yaml::YNode;
use super::{Cx, key};

pub(super) fn rules(cx: &mut Cx<'_>, node: &YNode, action: RuleAction) -> Vec<Item<EndpointStmt>> {
    let mut out = Vec::new();
    for (body, span) in super::l7::rule_bodies(
        cx,
        node,
        action,
        "{ operation_type: query, fields: [viewer] }",
    ) {
        if let Some(stmt) = rule(cx, body, action) {
            out.push(item(stmt, span));
        }
    }
    out
}

pub(super) fn item(stmt: EndpointStmt, span: Span) -> Item<EndpointStmt> {
    Item {
        trivia: Trivia::default(),
        stmt: Node::new(stmt, span),
    }
}

/// The three fields of a GraphQL rule or registry entry.
struct Operation {
    kind: Option<Node<String>>,
    name: Option<Node<String>>,
    fields: Vec<Node<String>>,
}

fn operation(cx: &mut Cx<'_>, node: &YNode, what: &str) -> Option<Operation> {
    let mut op = Operation {
        kind: None,
        name: None,
        fields: Vec::new(),
    };
    let mut ok = true;
    for (k, v) in cx.map(node, what) {
        match key(k) {
            "operation_type" => op.kind = cx.string(v, "`operation_type`"),
            // An empty name is OpenShell's "any name".
            "operation_name" => {
                op.name = cx
                    .string(v, "`operation_name`")
                    .filter(|n| !n.node.is_empty())
            }
            "fields" => {
                if v.items().is_some_and(<[_]>::is_empty) {
                    cx.invalid(
                        v.span,
                        "`fields` is an empty list",
                        "OpenShell rejects it: omit `fields` to match every root field",
                    );
                    ok = false;
                }
                op.fields = cx.strings(v, "`fields`");
            }
            _ => {
                cx.unsupported(
                    k,
                    what,
                    "a GraphQL rule has `operation_type`, `operation_name` and `fields`; HTTP `method`, `path` and `query` rules belong on a `protocol: rest` endpoint",
                );
                ok = false;
            }
        }
    }
    if op.kind.is_none() {
        cx.invalid(
            node.span,
            format!("{what} has no `operation_type`"),
            "OpenShell requires it: `query`, `mutation`, `subscription`, or `*`",
        );
        ok = false;
    }
    ok.then_some(op)
}

pub(super) fn rule(cx: &mut Cx<'_>, node: &YNode, action: RuleAction) -> Option<EndpointStmt> {
    let op = operation(cx, node, "a GraphQL rule")?;
    Some(EndpointStmt::Graphql {
        action: Node::new(action, node.span),
        types: op.kind.into_iter().collect(),
        name: op.name,
        fields: op.fields,
    })
}

/// `persisted_queries`, `graphql_persisted_queries` and
/// `graphql_max_body_bytes` of a GraphQL endpoint, as statements. False on
/// an error that drops the endpoint.
pub(super) fn options(
    cx: &mut Cx<'_>,
    mode: Option<&Node<String>>,
    registry: Option<&YNode>,
    max_body: Option<&YNode>,
    body: &mut Vec<Item<EndpointStmt>>,
) -> bool {
    let mut ok = true;
    if let Some(v) = max_body.filter(|v| !v.is_null()) {
        match v.as_u64() {
            Some(n) if n > 0 => {
                body.push(item(EndpointStmt::BodyLimit(Node::new(n, v.span)), v.span))
            }
            _ => {
                cx.invalid(
                    v.span,
                    "`graphql_max_body_bytes` must be a positive whole number of bytes",
                    "write a number such as `65536`, or leave the field out for that default",
                );
                ok = false;
            }
        }
    }
    let registered = match mode.map(|m| m.node.as_str()) {
        None | Some("" | "deny") => false,
        Some("allow_registered") => true,
        Some(other) => {
            cx.invalid(
                mode.map_or(Span::new(0, 0), |m| m.span),
                format!("unknown `persisted_queries` mode `{other}`"),
                "OpenShell accepts `deny` and `allow_registered`",
            );
            return false;
        }
    };
    let Some(registry) = registry.filter(|r| !r.is_null()) else {
        return ok;
    };
    let entries = cx.map(registry, "`graphql_persisted_queries`");
    if !registered {
        if !entries.is_empty() {
            cx.push(
                codes::W0702,
                registry.span,
                "`graphql_persisted_queries` has no effect without `persisted_queries: allow_registered`: OpenShell denies every hash-only request; not imported",
                "add `persisted_queries: allow_registered` to let registered queries through",
            );
        }
        return ok;
    }
    for (k, v) in entries {
        let Some(id) = cx.string(k, "a persisted-query id") else {
            ok = false;
            continue;
        };
        let Some(op) = operation(cx, v, "a registered persisted query") else {
            ok = false;
            continue;
        };
        let Some(kind) = op.kind else {
            ok = false;
            continue;
        };
        body.push(item(
            EndpointStmt::Persisted {
                id,
                kind,
                name: op.name,
                fields: op.fields,
            },
            k.span,
        ));
    }
    ok
}
