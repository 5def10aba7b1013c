//! `allow|deny rpc METHOD... [tool GLOB...]` rules of JSON-RPC and MCP
//! endpoints, and the checks OpenShell makes on them, so a policy that
//! OpenShell would refuse is refused here too.

use crate::ast::{Protocol, RuleAction};
use crate::diag::{Diagnostic, codes};
use crate::ir::RpcRule;
use crate::source::{Node, SourceFile, Span};
use policy_bundle::matcher::{RpcMethod, TOOLS_CALL, ToolSet};

use super::super::{Resolver, origin, pattern_diag};

/// The largest `body_limit` accepted: bodies are buffered whole before
/// they are judged, so the limit bounds the proxy's memory per request.
pub(crate) const MAX_BODY_LIMIT: u64 = 16 * 1024 * 1024;

/// The rules of one endpoint, each with the span of the line it came from
/// (and of its first method and tool) for the checks that span rules.
#[derive(Default)]
pub(super) struct RpcRules {
    pub(super) allow: Vec<(Spans, RpcRule)>,
    pub(super) deny: Vec<(Spans, RpcRule)>,
    pub(super) body_limit: Option<u64>,
    /// A rule was refused; "no allow rule" would only repeat that error.
    pub(super) refused: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Spans {
    line: Span,
    method: Span,
    /// The first tool pattern with a wildcard, else the first tool.
    tool: Option<Span>,
}

impl RpcRules {
    /// One IR rule per method of the line.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call per rule form; a struct would only restate the parameters"
    )]
    pub(super) fn rule(
        &mut self,
        r: &mut Resolver,
        file: &SourceFile,
        span: Span,
        rule_name: &str,
        proto: Protocol,
        action: RuleAction,
        methods: &[Node<String>],
        tools: &[Node<String>],
    ) {
        let mut ok = true;
        let mut parsed = Vec::new();
        for m in methods {
            let result = if proto == Protocol::Mcp {
                RpcMethod::parse_mcp(&m.node)
            } else {
                RpcMethod::parse_json_rpc(&m.node)
            };
            match result {
                Ok(method) => parsed.push((m.span, method)),
                Err(e) => {
                    ok = false;
                    r.diags.push(pattern_diag(codes::E0310, file, m.span, &e));
                }
            }
        }
        let mut wild_span = None;
        let tool_set = if tools.is_empty() {
            None
        } else if proto != Protocol::Mcp {
            ok = false;
            if let Some(t) = tools.first() {
                r.diags.push(
                    Diagnostic::new(
                        codes::E0504,
                        file,
                        t.span,
                        "`tool` applies to MCP `tools/call` only; this is a `json-rpc` endpoint",
                    )
                    .label("not JSON-RPC")
                    .help("generic JSON-RPC rules match the method only; remove `tool ...`, or make the endpoint `mcp`"),
                );
            }
            None
        } else {
            let mut globs = Vec::new();
            for t in tools {
                match ToolSet::parse_one(&t.node) {
                    Ok(g) => {
                        if !g.is_literal() && wild_span.is_none() {
                            wild_span = Some(t.span);
                        }
                        globs.push(g);
                    }
                    Err(e) => {
                        ok = false;
                        r.diags.push(pattern_diag(codes::E0311, file, t.span, &e));
                    }
                }
            }
            match ToolSet::new(globs) {
                Ok(set) => Some(set),
                Err(_) => {
                    ok = false;
                    None
                }
            }
        };
        if !ok {
            self.refused = true;
            return;
        }
        let tool_span = wild_span.or_else(|| tools.first().map(|t| t.span));
        let into = match action {
            RuleAction::Allow => &mut self.allow,
            RuleAction::Deny => &mut self.deny,
        };
        for (method_span, methods) in parsed {
            into.push((
                Spans {
                    line: span,
                    method: method_span,
                    tool: tool_span,
                },
                RpcRule {
                    methods,
                    tools: tool_set.clone(),
                    origin: origin(file, span, rule_name),
                },
            ));
        }
    }

    /// What OpenShell checks across an endpoint's rules.
    pub(super) fn check(
        &self,
        r: &mut Resolver,
        file: &SourceFile,
        endpoint: Span,
        proto: Protocol,
        all_mcp_methods: bool,
        loose_tool_names: bool,
    ) {
        if proto == Protocol::JsonRpc && self.allow.is_empty() && !self.refused {
            r.diags.push(
                Diagnostic::new(
                    codes::E0503,
                    file,
                    endpoint,
                    "this `json-rpc` endpoint has no `allow rpc` rule",
                )
                .label("allows no call")
                .help("add `allow rpc METHOD...` lines in a block, such as `allow rpc reports.search`"),
            );
        }
        if proto != Protocol::Mcp {
            return;
        }
        if self.allow.is_empty() && !all_mcp_methods && !self.refused {
            r.diags.push(
                Diagnostic::new(
                    codes::E0503,
                    file,
                    endpoint,
                    "this `mcp` endpoint has no `allow rpc` rule",
                )
                .label("allows no call")
                .help("add `allow rpc METHOD... [tool GLOB...]` lines, or `all_mcp_methods` on the endpoint for the allow-all method profile"),
            );
        }
        for (spans, rule) in self.allow.iter().chain(&self.deny) {
            if rule.tools.is_none() {
                continue;
            }
            if !all_mcp_methods && rule.methods != RpcMethod::Exact(TOOLS_CALL.to_string()) {
                r.diags.push(
                    Diagnostic::new(
                        codes::E0504,
                        file,
                        spans.method,
                        format!("`tool` needs the method `tools/call`, not `{}`", rule.methods),
                    )
                    .label("not `tools/call`")
                    .help("write the tool part on a `tools/call` rule of its own, or set `all_mcp_methods` on the endpoint"),
                );
            }
            if loose_tool_names
                && let Some(set) = &rule.tools
                && set.has_wildcard()
            {
                r.diags.push(
                    Diagnostic::new(
                        codes::E0504,
                        file,
                        spans.tool.unwrap_or(spans.line),
                        "a tool glob cannot be used with `loose_tool_names`",
                    )
                    .label("glob")
                    .help("name the tools exactly, or remove `loose_tool_names` so tool names follow the recommended pattern"),
                );
            }
        }
        let Some((narrow, _)) = self.allow.iter().find(|(_, rule)| rule.tools.is_some()) else {
            return;
        };
        for (spans, rule) in self.allow.iter().chain(&self.deny) {
            if rule.tools.is_none() && rule.methods.covers_tools_call() {
                r.diags.push(
                    Diagnostic::new(
                        codes::E0504,
                        file,
                        spans.method,
                        format!(
                            "`{}` without `tool` covers every `tools/call`, beside rules that allow named tools",
                            rule.methods
                        ),
                    )
                    .label("every tool")
                    .secondary(narrow.line, "tools are allowed by name here")
                    .help("add `tool GLOB...` to this rule, or remove the tool-specific rules"),
                );
            }
        }
    }
}
