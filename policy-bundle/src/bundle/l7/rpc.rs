//! JSON-RPC and MCP rules: methods, and tools of MCP `tools/call`.

use serde::{Deserialize, Serialize};

use super::{L7Protocol, Sourced};
use crate::l7body::jsonrpc::RpcDialect;
use crate::matcher::{RpcMethod, ToolSet};

/// The rules and body settings of a JSON-RPC or MCP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RpcRules {
    /// JSON-RPC 2.0 or MCP: how bodies are read.
    pub dialect: RpcDialect,
    /// Every call of a body must match one of these.
    pub allow: Vec<Sourced<RpcMatcher>>,
    /// A call matching one of these refuses the whole body.
    pub deny: Vec<Sourced<RpcMatcher>>,
    /// Bytes of body read for inspection; `None` is
    /// [`crate::l7body::jsonrpc::DEFAULT_BODY_LIMIT`].
    pub body_limit: Option<u64>,
    /// MCP: `tools/call` tool names must match `^[A-Za-z0-9_.-]{1,128}$`.
    pub strict_tool_names: bool,
    /// MCP: the allow-all method profile (`all_mcp_methods`). Every call is
    /// allowed at the method layer, except that `tools/call` is left to the
    /// tool rules when an allow rule names tools; deny rules apply.
    pub all_mcp_methods: bool,
}

impl RpcRules {
    pub(crate) fn protocol(&self) -> L7Protocol {
        match self.dialect {
            RpcDialect::JsonRpc => L7Protocol::JsonRpc,
            RpcDialect::Mcp => L7Protocol::Mcp,
        }
    }

    pub(crate) fn effective_body_limit(&self) -> usize {
        self.body_limit
            .map_or(crate::l7body::jsonrpc::DEFAULT_BODY_LIMIT, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
    }

    /// MCP with an allow rule that names tools: `tools/call` is then
    /// allowed by tool rules only, never by the method profile.
    pub(crate) fn tools_narrowed(&self) -> bool {
        self.allow.iter().any(|r| r.tools.is_some())
    }
}

/// One JSON-RPC rule: calls whose method matches and, when `tools` is set,
/// whose tool (`params.name` of an MCP `tools/call`) matches too. A call
/// without a tool never matches a rule with `tools`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcMatcher {
    /// The methods covered.
    pub methods: RpcMethod,
    /// `None` is any tool, or a call without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolSet>,
}

impl RpcMatcher {
    /// Whether a call matches.
    pub fn matches(&self, method: &str, tool: Option<&str>) -> bool {
        self.methods.matches(method)
            && match &self.tools {
                None => true,
                Some(set) => tool.is_some_and(|t| set.matches(t)),
            }
    }
}

impl RpcRules {
    /// Deny rule `i`, or allow rule `i`.
    pub(crate) fn rule(&self, deny: bool, i: usize) -> Option<&Sourced<RpcMatcher>> {
        if deny {
            self.deny.get(i)
        } else {
            self.allow.get(i)
        }
    }
}
