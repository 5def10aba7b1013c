//! JSON-RPC and MCP rules: `rules: [{allow: {method, tool, params}}]` and
//! `deny_rules: [{method, tool, params}]` → `allow|deny rpc METHOD...
//! [tool GLOB...]`, with OpenShell's meaning: method and tool globs are
//! `glob.match(g, [], v)` globs, whose wildcards stop at a `.` (our
//! `dotted:` globs).

use crate::ast::{EndpointStmt, Item, Protocol, RuleAction, Trivia};
use crate::diag::codes;
use crate::source::{Node, Span};
use policy_bundle::matcher::{RpcMethod, TOOLS_CALL};

use super::patterns::query_value;
use super::yaml::YNode;
use super::{Cx, key};

pub(super) fn rules(
    cx: &mut Cx<'_>,
    node: &YNode,
    action: RuleAction,
    proto: Protocol,
    all_mcp_methods: bool,
) -> Vec<Item<EndpointStmt>> {
    let mut out = Vec::new();
    for (body, span) in
        super::l7::rule_bodies(cx, node, action, "{ method: tools/call, tool: search }")
    {
        if let Some(stmt) = rule(cx, body, proto, all_mcp_methods, action) {
            out.push(Item {
                trivia: Trivia::default(),
                stmt: Node::new(stmt, span),
            });
        }
    }
    out
}

fn rule(
    cx: &mut Cx<'_>,
    node: &YNode,
    proto: Protocol,
    all_mcp_methods: bool,
    action: RuleAction,
) -> Option<EndpointStmt> {
    let mut method: Option<Node<String>> = None;
    let mut tools: Option<Vec<Node<String>>> = None;
    let mut ok = true;
    for (k, v) in cx.map(node, "a rule") {
        match key(k) {
            "method" => method = cx.string(v, "`method`"),
            "tool" if proto == Protocol::Mcp => {
                ok &= set_tools(cx, &mut tools, v);
            }
            "params" if proto == Protocol::Mcp => {
                for (pk, pv) in cx.map(v, "`params`") {
                    if key(pk) == "name" {
                        ok &= set_tools(cx, &mut tools, pv);
                    } else {
                        cx.unsupported(
                            pk,
                            "MCP `params`",
                            "OpenShell matches only `params.name` (the tool)",
                        );
                        ok = false;
                    }
                }
            }
            _ => {
                let help = if proto == Protocol::Mcp {
                    "an MCP rule has `method`, `tool` and `params.name`"
                } else {
                    "a JSON-RPC rule has `method` only"
                };
                cx.unsupported(k, "a rule", help);
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    let methods = match (method, proto) {
        (Some(m), Protocol::Mcp) => mcp_methods(cx, &m)?,
        (Some(m), _) => match RpcMethod::parse_json_rpc(&m.node) {
            Ok(_) => vec![m],
            Err(e) => {
                cx.invalid(m.span, e.message, e.help);
                return None;
            }
        },
        // The allow-all profile reads a method-less tool rule as `tools/call`.
        (None, Protocol::Mcp) if all_mcp_methods && tools.is_some() => {
            vec![Node::new(TOOLS_CALL.to_string(), node.span)]
        }
        (None, Protocol::Mcp) if all_mcp_methods => {
            let verb = match action {
                RuleAction::Allow => "allows",
                RuleAction::Deny => "denies",
            };
            cx.push(
                codes::E0704,
                node.span,
                format!("a rule without `method` or `tool` {verb} every MCP method of the profile, which has no rule form here"),
                "name the methods, or leave the rule out: `all_mcp_methods` already allows every method",
            );
            return None;
        }
        (None, _) => {
            cx.invalid(
                node.span,
                "rule has no `method`",
                "add `method: tools/call` (MCP) or the JSON-RPC method name",
            );
            return None;
        }
    };
    let action = Node::new(action, node.span);
    Some(EndpointStmt::Rpc {
        action,
        methods,
        tools: tools.unwrap_or_default(),
    })
}

/// An MCP method: exact, or a `tools/` glob with OpenShell's meaning.
fn mcp_methods(cx: &mut Cx<'_>, m: &Node<String>) -> Option<Vec<Node<String>>> {
    if !m.node.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        return Some(vec![m.clone()]);
    }
    let alternatives = match query_value(&m.node) {
        Ok(a) => a,
        Err(why) => {
            cx.push(
                codes::E0704,
                m.span,
                format!(
                    "method glob `{}` cannot be translated exactly: {why}",
                    m.node
                ),
                "name the methods exactly",
            );
            return None;
        }
    };
    let mut out = Vec::new();
    for alt in alternatives {
        if let Err(e) = RpcMethod::parse_mcp(&alt) {
            cx.invalid(m.span, e.message, e.help);
            return None;
        }
        out.push(Node::new(alt, m.span));
    }
    Some(out)
}

/// `tool: GLOB`, `tool: { any: [GLOB...] }`, or the same under
/// `params.name`. Both on one rule would have to match together, which an
/// any-of list cannot say.
fn set_tools(cx: &mut Cx<'_>, tools: &mut Option<Vec<Node<String>>>, v: &YNode) -> bool {
    if tools.is_some() {
        cx.push(
            codes::E0704,
            v.span,
            "a rule with both `tool` and `params.name`",
            "keep one tool matcher per rule",
        );
        return false;
    }
    let mut globs: Vec<(String, Span)> = Vec::new();
    if v.entries().is_some() {
        for (k, inner) in cx.map(v, "a tool matcher") {
            if key(k) == "any" {
                for g in cx.strings(inner, "`any`") {
                    globs.push((g.node, g.span));
                }
            } else {
                cx.unsupported(
                    k,
                    "a tool matcher",
                    "a tool matcher is a glob or `{ any: [GLOB...] }`",
                );
                return false;
            }
        }
    } else {
        match cx.string(v, "a tool") {
            Some(g) => globs.push((g.node, g.span)),
            None => return false,
        }
    }
    if globs.is_empty() {
        cx.invalid(
            v.span,
            "empty tool matcher",
            "name at least one tool or glob",
        );
        return false;
    }
    let mut out = Vec::new();
    for (glob, span) in globs {
        match query_value(&glob) {
            Ok(alts) => out.extend(alts.into_iter().map(|a| Node::new(a, span))),
            Err(why) => {
                cx.push(
                    codes::E0704,
                    span,
                    format!("tool glob `{glob}` cannot be translated exactly: {why}"),
                    "name the tools exactly",
                );
                return false;
            }
        }
    }
    *tools = Some(out);
    true
}
