//! L7 rules: `rules: [{allow: {method, path, query}}]` and
//! `deny_rules: [{method, path, query}]` → `allow|deny METHODS PATH ?k=v`.

use crate::ast::{EndpointStmt, Item, RuleAction, Trivia};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::patterns::{self, PathKind, Translated};
use super::yaml::YNode;
use super::{Cx, key};

/// Rule fields of OpenShell's other protocols (GraphQL, MCP, JSON-RPC, SQL).
const OTHER_PROTOCOL_FIELDS: &[&str] = &[
    "command",
    "operation_type",
    "operation_name",
    "fields",
    "tool",
    "params",
];

pub(super) fn rules(cx: &mut Cx<'_>, node: &YNode, action: RuleAction) -> Vec<Item<EndpointStmt>> {
    let mut out = Vec::new();
    for (body, span) in rule_bodies(cx, node, action, "{ method: GET, path: /x }") {
        out.extend(rule(cx, body, span, action, false));
    }
    out
}

/// The rules of a `rules` (each under `allow:`) or `deny_rules` list, with
/// the span of each entry; an allow entry without its `allow` mapping is
/// reported and skipped. `example` is a rule's mapping, for the help.
pub(super) fn rule_bodies<'n>(
    cx: &mut Cx<'_>,
    node: &'n YNode,
    action: RuleAction,
    example: &str,
) -> Vec<(&'n YNode, Span)> {
    let what = match action {
        RuleAction::Allow => "`rules`",
        RuleAction::Deny => "`deny_rules`",
    };
    let mut out = Vec::new();
    for r in cx.list(node, what) {
        let body = match action {
            RuleAction::Allow => {
                let mut inner = None;
                for (k, v) in cx.map(r, "a rule") {
                    match key(k) {
                        "allow" => inner = Some(v),
                        _ => cx.unsupported(
                            k,
                            "a rule",
                            &format!("an allow rule is `- allow: {example}`"),
                        ),
                    }
                }
                let Some(i) = inner else {
                    if r.entries().is_some() {
                        cx.invalid(
                            r.span,
                            "a rule needs an `allow` mapping",
                            format!("write `- allow: {example}`"),
                        );
                    }
                    continue;
                };
                i
            }
            RuleAction::Deny => r,
        };
        out.push((body, r.span));
    }
    out
}

/// One REST rule; `websocket` for a rule of a `protocol: websocket`
/// endpoint, whose methods are the upgrade and text messages.
pub(super) fn rule(
    cx: &mut Cx<'_>,
    node: &YNode,
    span: Span,
    action: RuleAction,
    websocket: bool,
) -> Vec<Item<EndpointStmt>> {
    let mut method = None;
    let mut path = None;
    let mut query: Vec<Node<String>> = Vec::new();
    let mut ok = true;
    for (k, v) in cx.map(node, "a rule") {
        match key(k) {
            "method" => method = cx.string(v, "`method`"),
            "path" => path = cx.string(v, "`path`"),
            "query" => match query_matchers(cx, v) {
                Some(q) => query = q,
                None => ok = false,
            },
            name if OTHER_PROTOCOL_FIELDS.contains(&name) => {
                if !(v.is_null()
                    || v.scalar() == Some("")
                    || v.items().is_some_and(<[_]>::is_empty)
                    || v.entries().is_some_and(<[_]>::is_empty))
                {
                    cx.unsupported(k, "a rule", "GraphQL, MCP, JSON-RPC and SQL rules cannot be imported; only method, path and query");
                    ok = false;
                }
            }
            _ => {
                cx.unsupported(k, "a rule", "a rule has `method`, `path` and `query`");
                ok = false;
            }
        }
    }
    let Some(method) = method else {
        cx.invalid(
            node.span,
            "rule has no `method`",
            "add `method: GET` (or `*` for every method)",
        );
        return Vec::new();
    };
    let Some(path) = path else {
        cx.invalid(
            node.span,
            "rule has no `path`",
            "add `path: \"/**\"` to cover every path",
        );
        return Vec::new();
    };
    if !ok {
        return Vec::new();
    }
    let Some(methods) = methods(cx, &method, websocket) else {
        return Vec::new();
    };
    let paths = match patterns::path(&path.node, PathKind::Http) {
        Translated::Patterns { patterns, notes } => {
            for note in notes {
                cx.push(
                    codes::W0702,
                    path.span,
                    format!("path `{}`: {note}", path.node),
                    "the translation matches the same paths",
                );
            }
            patterns
        }
        Translated::Never(why) => {
            cx.push(
                codes::W0702,
                path.span,
                format!(
                    "rule path `{}` never matches in OpenShell ({why}); rule dropped",
                    path.node
                ),
                "request paths are matched after canonicalization and always start with `/`",
            );
            return Vec::new();
        }
        Translated::Inexpressible(why) => {
            cx.push(
                codes::E0704,
                path.span,
                format!(
                    "path pattern `{}` cannot be translated exactly: {why}",
                    path.node
                ),
                "rewrite it with `*` (within a segment) and `**` (whole segments)",
            );
            return Vec::new();
        }
    };
    let paths = paths.into_iter().map(|p| Node::new(p, path.span)).collect();
    vec![Item {
        trivia: Trivia::default(),
        stmt: Node::new(
            EndpointStmt::Rule {
                action: Node::new(action, span),
                methods,
                paths,
                query,
            },
            span,
        ),
    }]
}

/// OpenShell compares methods case-insensitively, `*` is any method, and a
/// `GET` rule also admits `HEAD` (but not on a websocket endpoint, where
/// `GET` is the upgrade and every other request is refused).
fn methods(cx: &mut Cx<'_>, m: &Node<String>, websocket: bool) -> Option<Vec<Node<String>>> {
    if m.node == "*" {
        return Some(vec![m.clone()]);
    }
    let upper = m.node.to_ascii_uppercase();
    let token = upper.starts_with(|c: char| c.is_ascii_alphabetic())
        && upper
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !token {
        cx.push(
            codes::W0702,
            m.span,
            format!("method `{}` is not an HTTP method token, so it never matches a request; rule dropped", m.node),
            "write one method per rule, such as `GET`, or `*`",
        );
        return None;
    }
    if websocket {
        if !matches!(
            upper.as_str(),
            "GET" | policy_bundle::matcher::WEBSOCKET_TEXT
        ) {
            cx.push(
                codes::W0702,
                m.span,
                format!("method `{}` never matches on a websocket endpoint (only the `GET` upgrade and `WEBSOCKET_TEXT` messages are judged); rule dropped", m.node),
                "use `GET`, `WEBSOCKET_TEXT` or `*`",
            );
            return None;
        }
        return Some(vec![Node::new(upper, m.span)]);
    }
    let mut out = vec![Node::new(upper.clone(), m.span)];
    if upper == "GET" {
        out.push(Node::new("HEAD".to_string(), m.span));
    }
    Some(out)
}

/// `query: { key: glob | {any: [..]} | {glob: g} }` → `?key=alt|alt` tokens.
fn query_matchers(cx: &mut Cx<'_>, node: &YNode) -> Option<Vec<Node<String>>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (k, v) in cx.map(node, "`query`") {
        let name = key(k);
        if name.is_empty()
            || name
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, '=' | '#' | '{' | '}' | '"'))
        {
            cx.push(
                codes::E0704,
                k.span,
                format!("query key `{name}` cannot be written in a query matcher"),
                "query keys here cannot contain whitespace, `=`, `#`, `{`, `}` or `\"`",
            );
            ok = false;
            continue;
        }
        let Some(globs) = matcher_globs(cx, v) else {
            ok = false;
            continue;
        };
        let mut alts: Vec<String> = Vec::new();
        for g in &globs {
            match patterns::query_value(&g.node) {
                Ok(list) => alts.extend(
                    list.into_iter()
                        .filter(|a| !alts.contains(a))
                        .collect::<Vec<_>>(),
                ),
                Err(why) => {
                    cx.push(
                        codes::E0704,
                        g.span,
                        format!(
                            "query matcher `{}` cannot be translated exactly: {why}",
                            g.node
                        ),
                        "list the accepted values with `any: [...]`",
                    );
                    ok = false;
                }
            }
        }
        if alts.is_empty() {
            continue;
        }
        out.push(Node::new(format!("?{name}={}", alts.join("|")), k.span));
    }
    ok.then_some(out)
}

fn matcher_globs(cx: &mut Cx<'_>, v: &YNode) -> Option<Vec<Node<String>>> {
    if v.scalar().is_some() {
        return cx.string(v, "a query matcher").map(|s| vec![s]);
    }
    let mut globs = Vec::new();
    let mut seen = false;
    for (mk, mv) in cx.map(v, "a query matcher") {
        match key(mk) {
            "any" => {
                seen = true;
                globs.extend(cx.strings(mv, "`any`"));
            }
            "glob" => {
                seen = true;
                globs.extend(cx.string(mv, "`glob`"));
            }
            _ => {
                cx.unsupported(
                    mk,
                    "a query matcher",
                    "a query matcher is a glob, `{ any: [...] }` or `{ glob: ... }`",
                );
                return None;
            }
        }
    }
    if !seen || globs.is_empty() {
        cx.invalid(
            v.span,
            "query matcher lists no value",
            "write a glob, or `{ any: [a, b] }` with at least one value",
        );
        return None;
    }
    Some(globs)
}
