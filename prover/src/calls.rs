//! The JSON-RPC call a request body carries, as one finite dimension.
//!
//! JSON-RPC and MCP endpoints judge the calls in a request's body
//! (`Evaluator::decide_body`). The model gives every request one body
//! *value*: no body, a body no endpoint can read, a lone response frame,
//! or one call (its method atom and, for MCP `tools/call`, its tool atom),
//! each in one body-size class. Requests to REST endpoints keep "no body",
//! the value their formulas never mention.
//!
//! # Why single calls suffice
//!
//! For one endpoint, `decide_body` refuses a body it cannot read (over the
//! endpoint's limit, not JSON-RPC, a JSON-RPC response frame, and on MCP a
//! bad id, a `tools/call` without a name, or a name failing the strict
//! pattern), then denies it when *any* call matches a deny rule, reports
//! "no allow rule" when any call matches no allow rule (nor the
//! all-MCP-methods profile), and allows it only when *every* call is
//! allowed. Notifications are judged like requests (the `id` is only
//! checked), and response frames in an MCP batch are relayed without a
//! rule. So a batch passes an endpoint iff each of its calls would pass
//! alone in a body of the same size, and a batch one endpoint refuses to
//! read holds a message that endpoint refuses alone too. Across the
//! participating endpoints the verdict is: refused by one → denied;
//! denied by one → denied (audited when all are in audit mode); allowed
//! by one → allowed; else audited or denied by mode. Each of these reads
//! one call at a time, so every message of a batch NEW lets through
//! passes NEW alone (padded to the batch's size): the calls that can reach
//! the upstream are exactly the single calls that pass, and a model of
//! single calls loses no call NEW newly lets through. With one
//! call-reading endpoint deciding, a batch OLD refuses holds a message OLD
//! refuses alone, so the batch's flip shows on a single call too. With
//! several, OLD may refuse a batch mixing calls that different endpoints
//! allow while letting each through alone; such a batch brings no new call
//! to the server, and is not reported.
//!
//! What a body is read as depends only on the endpoint's dialect and
//! strictness, so the body values are the classes of single-message bodies
//! that every body-reading endpoint of both bundles treats alike:
//!
//! - [`Shape::NoBody`]: refused, except a `GET` on MCP (the receive stream);
//! - [`Shape::Unreadable`]: refused everywhere (also every body over the
//!   largest limit);
//! - [`Shape::Response`]: a response frame, relayed by MCP (in a `POST`),
//!   refused by JSON-RPC;
//! - [`Shape::Call`]: a call read as (method, no tool): a request with
//!   an id; for `tools/call`, one without `params.name`, which JSON-RPC
//!   reads so and MCP refuses (MCP reads the tool of every `tools/call`,
//!   a notification's too);
//! - [`Shape::McpRefused`]: refused by MCP (`"id": null`), read as
//!   (method, no tool) by JSON-RPC;
//! - [`Shape::Tool`]: `tools/call` naming a tool: MCP reads the tool (and
//!   refuses a name failing the strict pattern where that applies), JSON-RPC
//!   reads no tool.
//!
//! and the body size matters only through the distinct limits: class *k*
//! holds the sizes above limit *k−1* up to limit *k*.
//!
//! GraphQL endpoints read the same dimension: [`Shape::Graphql`] and
//! [`Shape::Persisted`] are the operations of `crate::graphql` (which
//! says why one operation with one root field suffices). Every other value
//! is refused by a GraphQL endpoint, and a call-reading endpoint reads an
//! operation as a body it cannot parse in a POST, and as no body in a GET
//! (whose operation is in the query string).
//!
//! The text messages of GraphQL over WebSocket read it too
//! (`crate::websocket`): [`Shape::WsLifecycle`], [`Shape::WsGraphql`] and
//! [`Shape::WsPersisted`] are a lifecycle message and a `subscribe`
//! message carrying an operation; every other value is a text message a
//! GraphQL-over-WebSocket endpoint cannot read. The method dimension
//! gives a message its size, so these values have no size class; as an
//! HTTP body, every endpoint refuses them (no JSON-RPC or GraphQL request
//! has a `type` member).

use policy_bundle::l7body::jsonrpc::{RpcDialect, TOOL_NAME_MAX, parse_rpc_body};
use policy_bundle::matcher::{RpcMethod, TOOLS_CALL, ValueGlob};
use policy_bundle::{Bundle, L7Endpoint, L7Protocol, RpcMatcher, Sourced};

use crate::error::ProverError;
use crate::graphql::{Judged, Op, Ops};
use crate::strings::validity::Rule;
use crate::strings::{DimSpec, Partition, PatternKind, PatternSet, universe::Universe};

/// Key of the tool-name pattern a strict MCP endpoint requires.
pub(crate) const STRICT_TOOL_KEY: &str = "<strict tool name>";

/// Whether the model knows how an endpoint of this protocol decides. An
/// endpoint of any other protocol is taken to allow every request that
/// reaches it, and a diff involving one is not certified
/// (`engine::unmodelled_protocols`): this is the one place that says which
/// protocols are modelled.
pub(crate) fn modelled(p: L7Protocol) -> bool {
    matches!(
        p,
        L7Protocol::Rest
            | L7Protocol::JsonRpc
            | L7Protocol::Mcp
            | L7Protocol::Graphql
            | L7Protocol::Websocket
    )
}

/// Whether an endpoint judges JSON-RPC calls in the body.
pub(crate) fn reads_calls(ep: &L7Endpoint) -> bool {
    matches!(ep.protocol(), L7Protocol::JsonRpc | L7Protocol::Mcp)
}

/// What a single-message body is, up to what endpoints can tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    NoBody,
    Unreadable,
    Response,
    /// A method atom.
    Call(u32),
    /// A method atom.
    McpRefused(u32),
    /// A tool atom.
    Tool(u32),
    /// A GraphQL document's operation.
    Graphql(Op),
    /// A hash-only GraphQL request for a registered persisted query.
    Persisted(u32),
    /// A GraphQL-over-WebSocket lifecycle message (`ping`).
    WsLifecycle,
    /// A GraphQL-over-WebSocket `subscribe` message with this operation.
    WsGraphql(Op),
    /// A `subscribe` message with a hash-only payload for a registered
    /// persisted query.
    WsPersisted(u32),
    /// A `subscribe` message with a hash-only payload for an id no
    /// endpoint registers: refused, unless a `deny WEBSOCKET_TEXT` rule
    /// denies it first (then audit mode lets it through).
    WsUnregistered,
}

impl Shape {
    /// Whether the value is a GraphQL request.
    pub(crate) fn is_graphql(self) -> bool {
        matches!(self, Shape::Graphql(_) | Shape::Persisted(_))
    }

    /// Whether the value is a GraphQL-over-WebSocket message.
    pub(crate) fn is_ws(self) -> bool {
        matches!(
            self,
            Shape::WsLifecycle
                | Shape::WsGraphql(_)
                | Shape::WsPersisted(_)
                | Shape::WsUnregistered
        )
    }
}

/// How a GraphQL-over-WebSocket endpoint reads a text message value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WsRead {
    /// Not a lifecycle or operation message: refused whatever the mode.
    Unreadable,
    /// Allowed without a rule.
    Lifecycle,
    /// An operation, judged by the GraphQL rules and registry.
    Operation(Judged),
}

/// One value of the body dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallValue {
    pub(crate) shape: Shape,
    /// Size class: the body is longer than `limits[size - 1]` (or not
    /// empty) and at most `limits[size]`.
    pub(crate) size: usize,
}

/// How one endpoint reads a body value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Refused, whatever the HTTP method.
    Refused,
    /// No body: MCP allows it in a `GET`; refused otherwise.
    Empty,
    /// Only a response frame: MCP relays it in a `POST`.
    ResponseOnly,
    /// One call: method atom and tool atom.
    Call(u32, Option<u32>),
}

/// The body dimension.
#[derive(Debug)]
pub(crate) struct Calls {
    /// Method atoms (`None` when no endpoint reads calls).
    pub(crate) methods: Option<Partition>,
    /// Tool-name atoms (`None` when no MCP endpoint names a tool or checks
    /// names strictly).
    pub(crate) tools: Option<Partition>,
    /// Index 0 is always "no body".
    pub(crate) values: Vec<CallValue>,
    /// Distinct body limits of the call-reading endpoints, ascending.
    pub(crate) limits: Vec<usize>,
    /// The method atom of `tools/call`.
    tools_call: Option<u32>,
    /// The method atom of the empty method.
    empty_method: Option<u32>,
    /// GraphQL operations (`None` when no endpoint is a GraphQL one).
    pub(crate) graphql: Option<Ops>,
}

fn method_key(m: &RpcMethod) -> String {
    m.to_string()
}

fn glob_key(g: &ValueGlob) -> String {
    g.as_str().to_owned()
}

/// Strings of any kind: what a JSON string can hold.
fn any_string() -> Universe {
    Universe {
        accept: "(?s:.*)".to_owned(),
        reject: Vec::new(),
        unicode: true,
    }
}

fn spec(budget: usize) -> DimSpec {
    DimSpec {
        universe: any_string(),
        valid: |_| true,
        rule: Rule::Any,
        budget,
    }
}

fn needs_chars(text: &str) -> bool {
    text.contains(['?', '[']) || !text.is_ascii()
}

fn rules(ep: &L7Endpoint) -> impl Iterator<Item = &RpcMatcher> {
    ep.rpc_allow().iter().chain(ep.rpc_deny()).map(|r| &r.rule)
}

impl Calls {
    /// No endpoint reads calls: the one value "no body".
    pub(crate) fn none() -> Calls {
        Calls {
            methods: None,
            tools: None,
            values: vec![CallValue {
                shape: Shape::NoBody,
                size: 0,
            }],
            limits: Vec::new(),
            tools_call: None,
            empty_method: None,
            graphql: None,
        }
    }

    pub(crate) fn build(bundles: &[&Bundle], budget: usize) -> Result<Calls, ProverError> {
        let all: Vec<&L7Endpoint> = bundles
            .iter()
            .flat_map(|b| b.enforcement.l7.iter())
            .collect();
        let eps: Vec<&L7Endpoint> = all.iter().copied().filter(|e| reads_calls(e)).collect();
        let gql: Vec<&L7Endpoint> = all
            .iter()
            .copied()
            .filter(|e| e.protocol() == L7Protocol::Graphql)
            .collect();
        let ws_gql: Vec<&L7Endpoint> = all
            .iter()
            .copied()
            .filter(|e| e.graphql_over_websocket())
            .collect();
        if eps.is_empty() && gql.is_empty() && ws_gql.is_empty() {
            return Ok(Calls::none());
        }
        let graphql = if gql.is_empty() && ws_gql.is_empty() {
            None
        } else {
            let both: Vec<&L7Endpoint> = gql.iter().chain(&ws_gql).copied().collect();
            Some(Ops::build(&both, budget)?)
        };
        let mcp = eps.iter().any(|e| e.protocol() == L7Protocol::Mcp);
        let json = eps.iter().any(|e| e.protocol() == L7Protocol::JsonRpc);
        let mut methods = PatternSet::default();
        methods.add(TOOLS_CALL, PatternKind::Exact(TOOLS_CALL.to_owned()));
        methods.add("", PatternKind::Exact(String::new()));
        let mut tools = PatternSet::default();
        for ep in &eps {
            for r in rules(ep) {
                let m = &r.methods;
                let kind = match m {
                    RpcMethod::Exact(name) => PatternKind::Exact(name.clone()),
                    _ => PatternKind::Glob {
                        regex: m.to_regex(),
                        example: m.example(),
                    },
                };
                if needs_chars(&m.to_string()) {
                    methods.needs_chars();
                }
                methods.add(&method_key(m), kind);
                if ep.protocol() != L7Protocol::Mcp {
                    continue;
                }
                for g in r.tools.iter().flat_map(|t| t.globs()) {
                    let kind = if g.is_literal() {
                        PatternKind::Exact(g.example())
                    } else {
                        PatternKind::Glob {
                            regex: g.to_regex(),
                            example: g.example(),
                        }
                    };
                    if needs_chars(g.as_str()) {
                        tools.needs_chars();
                    }
                    tools.add(&glob_key(g), kind);
                }
            }
        }
        let strict = eps
            .iter()
            .any(|e| e.protocol() == L7Protocol::Mcp && e.strict_tool_names());
        if strict {
            tools.add(
                STRICT_TOOL_KEY,
                PatternKind::Glob {
                    regex: format!("[A-Za-z0-9_.\\-]{{1,{TOOL_NAME_MAX}}}"),
                    example: "x".to_owned(),
                },
            );
        }
        let methods = if eps.is_empty() {
            None
        } else {
            Some(Partition::build(methods, &spec(budget))?)
        };
        // Without a tool pattern every name reads alike: one atom, from a
        // partition of no patterns.
        let tools = if mcp {
            Some(Partition::build(tools, &spec(budget))?)
        } else {
            None
        };
        let mut limits: Vec<usize> = eps
            .iter()
            .chain(&gql)
            .map(|e| e.effective_body_limit())
            .collect();
        limits.sort_unstable();
        limits.dedup();
        let mut values = vec![
            CallValue {
                shape: Shape::NoBody,
                size: 0,
            },
            CallValue {
                shape: Shape::Unreadable,
                size: 0,
            },
        ];
        for size in 0..limits.len() {
            let mut add = |shape| values.push(CallValue { shape, size });
            if mcp {
                add(Shape::Response);
            }
            for m in 0..methods.as_ref().map_or(0, Partition::len) {
                let m = u32::try_from(m).unwrap_or(u32::MAX);
                add(Shape::Call(m));
                // Only MCP refuses it: with no JSON-RPC endpoint it reads
                // as unreadable, with no MCP endpoint as a call.
                if mcp && json {
                    add(Shape::McpRefused(m));
                }
            }
            for t in 0..tools.as_ref().map_or(0, Partition::len) {
                add(Shape::Tool(u32::try_from(t).unwrap_or(u32::MAX)));
            }
            if let Some(ops) = &graphql {
                for op in ops.ops() {
                    add(Shape::Graphql(op));
                }
                for i in 0..ops.persisted.len() {
                    add(Shape::Persisted(u32::try_from(i).unwrap_or(u32::MAX)));
                }
            }
        }
        if let Some(ops) = graphql.as_ref().filter(|_| !ws_gql.is_empty()) {
            let mut add = |shape| values.push(CallValue { shape, size: 0 });
            add(Shape::WsLifecycle);
            for op in ops.ops() {
                add(Shape::WsGraphql(op));
            }
            for i in 0..ops.persisted.len() {
                add(Shape::WsPersisted(u32::try_from(i).unwrap_or(u32::MAX)));
            }
            add(Shape::WsUnregistered);
        }
        let tools_call = methods.as_ref().and_then(|m| m.classify(TOOLS_CALL));
        let empty_method = methods.as_ref().and_then(|m| m.classify(""));
        Ok(Calls {
            methods,
            tools,
            values,
            limits,
            tools_call,
            empty_method,
            graphql,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn value(&self, v: u32) -> Option<CallValue> {
        self.values.get(v as usize).copied()
    }

    fn method_atoms(&self, m: &RpcMethod) -> &[u32] {
        self.methods
            .as_ref()
            .map_or(&[], |p| p.atoms_of(&method_key(m)))
    }

    fn tool_atoms(&self, g: &ValueGlob) -> &[u32] {
        self.tools
            .as_ref()
            .map_or(&[], |p| p.atoms_of(&glob_key(g)))
    }

    fn strict_ok(&self, tool: u32) -> bool {
        self.tools
            .as_ref()
            .is_some_and(|p| p.atoms_of(STRICT_TOOL_KEY).contains(&tool))
    }

    fn read(&self, ep: &L7Endpoint, v: CallValue) -> Read {
        let mcp = ep.protocol() == L7Protocol::Mcp;
        if v.shape == Shape::NoBody {
            return Read::Empty;
        }
        if self
            .limits
            .get(v.size)
            .is_none_or(|&l| l > ep.effective_body_limit())
        {
            return Read::Refused;
        }
        match v.shape {
            Shape::NoBody => Read::Empty,
            Shape::Unreadable => Read::Refused,
            Shape::Response if mcp => Read::ResponseOnly,
            Shape::Response => Read::Refused,
            Shape::Call(m) if mcp && Some(m) == self.tools_call => Read::Refused,
            Shape::Call(m) => Read::Call(m, None),
            Shape::McpRefused(_) if mcp => Read::Refused,
            Shape::McpRefused(m) => Read::Call(m, None),
            Shape::Graphql(_)
            | Shape::Persisted(_)
            | Shape::WsLifecycle
            | Shape::WsGraphql(_)
            | Shape::WsPersisted(_)
            | Shape::WsUnregistered => Read::Refused,
            Shape::Tool(t) => {
                let Some(tc) = self.tools_call else {
                    return Read::Refused;
                };
                if !mcp {
                    Read::Call(tc, None)
                } else if ep.strict_tool_names() && !self.strict_ok(t) {
                    Read::Refused
                } else {
                    Read::Call(tc, Some(t))
                }
            }
        }
    }

    fn matches(&self, r: &RpcMatcher, method: u32, tool: Option<u32>) -> bool {
        self.method_atoms(&r.methods).contains(&method)
            && match &r.tools {
                None => true,
                Some(set) => tool
                    .is_some_and(|t| set.globs().iter().any(|g| self.tool_atoms(g).contains(&t))),
            }
    }

    fn ids(&self, keep: impl Fn(CallValue) -> bool) -> Vec<u32> {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, v)| keep(**v))
            .filter_map(|(i, _)| u32::try_from(i).ok())
            .collect()
    }

    /// Values the endpoint refuses whatever the HTTP method ("no body" is
    /// not among them: it depends on the method).
    pub(crate) fn refused(&self, ep: &L7Endpoint) -> Vec<u32> {
        self.ids(|v| self.read(ep, v) == Read::Refused)
    }

    /// Values with a call matching one of `rules` as the endpoint reads it.
    pub(crate) fn matching(&self, ep: &L7Endpoint, rules: &[Sourced<RpcMatcher>]) -> Vec<u32> {
        self.ids(|v| match self.read(ep, v) {
            Read::Call(m, t) => rules.iter().any(|r| self.matches(r, m, t)),
            _ => false,
        })
    }

    /// Values a `POST` lets through on the endpoint when no deny rule
    /// matches: a call an allow rule or the all-MCP-methods profile
    /// allows, or (MCP) a lone response frame.
    pub(crate) fn allowed(&self, ep: &L7Endpoint) -> Vec<u32> {
        self.ids(|v| match self.read(ep, v) {
            Read::ResponseOnly => true,
            Read::Call(m, t) => {
                let profile = ep.all_mcp_methods()
                    && Some(m) != self.empty_method
                    && (Some(m) != self.tools_call || !ep.tools_narrowed());
                profile || ep.rpc_allow().iter().any(|r| self.matches(r, m, t))
            }
            _ => false,
        })
    }

    fn method_text(&self, m: u32) -> Option<String> {
        self.methods.as_ref()?.atom(m)?.witness.clone()
    }

    fn tool_text(&self, t: u32) -> Option<String> {
        self.tools.as_ref()?.atom(t)?.witness.clone()
    }

    /// The body message of a value, unpadded; `Ok(None)` for no body;
    /// `Err` with the reason when an atom has no concrete string.
    pub(crate) fn message(&self, v: u32) -> Result<Option<String>, String> {
        let Some(value) = self.value(v) else {
            return Ok(None);
        };
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let method = |m: u32| {
            self.method_text(m)
                .ok_or_else(|| "no concrete JSON-RPC method was found for an atom".to_owned())
        };
        Ok(Some(match value.shape {
            Shape::NoBody => return Ok(None),
            Shape::Unreadable => "x".to_owned(),
            Shape::Response => r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_owned(),
            Shape::Call(m) if Some(m) == self.tools_call => {
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":{}}}"#,
                    quote(TOOLS_CALL)
                )
            }
            Shape::Call(m) => {
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":{}}}"#,
                    quote(&method(m)?)
                )
            }
            Shape::McpRefused(m) => format!(
                r#"{{"jsonrpc":"2.0","id":null,"method":{}}}"#,
                quote(&method(m)?)
            ),
            Shape::Graphql(op) => {
                let doc = self.graphql_document(op)?;
                format!(r#"{{"query":{}}}"#, quote(&doc))
            }
            Shape::Persisted(i) => {
                let id = self.persisted_id(i)?;
                format!(r#"{{"id":{}}}"#, quote(&id))
            }
            Shape::WsLifecycle => WS_LIFECYCLE.to_owned(),
            Shape::WsGraphql(op) => {
                let doc = self.graphql_document(op)?;
                format!(r#"{WS_SUBSCRIBE}{{"query":{}}}}}"#, quote(&doc))
            }
            Shape::WsPersisted(i) => {
                let id = self.persisted_id(i)?;
                format!(r#"{WS_SUBSCRIBE}{{"id":{}}}}}"#, quote(&id))
            }
            Shape::WsUnregistered => {
                format!(
                    r#"{WS_SUBSCRIBE}{{"id":{}}}}}"#,
                    quote(&self.unregistered_id())
                )
            }
            Shape::Tool(t) => {
                let tool = self
                    .tool_text(t)
                    .ok_or_else(|| "no concrete MCP tool name was found for an atom".to_owned())?;
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":{},"params":{{"name":{}}}}}"#,
                    quote(TOOLS_CALL),
                    quote(&tool)
                )
            }
        }))
    }

    /// The body size a value's witness must have, when its message alone
    /// is too short for its size class; `Err` when the message is too
    /// long for it.
    pub(crate) fn padded_len(&self, v: u32, message: &str) -> Result<Option<usize>, String> {
        let Some(value) = self.value(v) else {
            return Ok(None);
        };
        if matches!(value.shape, Shape::NoBody | Shape::Unreadable) || value.shape.is_ws() {
            return Ok(None);
        }
        let lo = match value.size {
            0 => 0,
            k => self.limits.get(k - 1).copied().unwrap_or(0),
        };
        let hi = self.limits.get(value.size).copied().unwrap_or(usize::MAX);
        if message.len() > hi {
            return Err(format!(
                "the JSON-RPC message `{message}` is longer than the body limit of {hi} bytes"
            ));
        }
        Ok((message.len() <= lo).then_some(lo + 1))
    }

    /// The whole body of a value's witness (the message, padded with
    /// spaces to its size class); `None` for no body.
    pub(crate) fn body(&self, v: u32) -> Option<Vec<u8>> {
        let msg = self.message(v).ok()??;
        let mut out = msg.clone().into_bytes();
        if let Ok(Some(n)) = self.padded_len(v, &msg) {
            out.resize(n, b' ');
        }
        Some(out)
    }

    /// Why a value cannot be shown as a concrete body; `None` when it can.
    pub(crate) fn unshowable(&self, v: u32) -> Option<String> {
        match self.message(v) {
            Err(why) => Some(why),
            Ok(None) => None,
            Ok(Some(msg)) => self.padded_len(v, &msg).err(),
        }
    }

    /// The value of a concrete body (`None`: no body): what every
    /// endpoint reads it as. `None` for a batch, which the model
    /// represents by its single messages.
    pub(crate) fn classify(&self, body: Option<&[u8]>) -> Option<u32> {
        let body = body.unwrap_or_default();
        if body.is_empty() {
            return Some(0);
        }
        if self.values.len() == 1 {
            return Some(0);
        }
        if let Some(v) = self.classify_graphql(body) {
            return v;
        }
        if self.methods.is_none() {
            return self.find(Shape::Unreadable, 0);
        }
        let Some(size) = self.limits.iter().position(|&l| body.len() <= l) else {
            return self.find(Shape::Unreadable, 0);
        };
        let Ok(generic) = parse_rpc_body(body, RpcDialect::JsonRpc, false) else {
            return self.find(Shape::Unreadable, 0);
        };
        if generic.batch {
            return None;
        }
        let Some(call) = generic.calls.first() else {
            return self
                .find(Shape::Response, size)
                .or_else(|| self.find(Shape::Unreadable, 0));
        };
        let method = self.methods.as_ref()?.classify(&call.method)?;
        match parse_rpc_body(body, RpcDialect::Mcp, false) {
            Err(_) => self.find(Shape::McpRefused(method), size).or_else(|| {
                if self.tools.is_some() {
                    self.find(Shape::Unreadable, 0)
                } else {
                    self.find(Shape::Call(method), size)
                }
            }),
            Ok(mcp) => match mcp.calls.first().and_then(|c| c.tool.as_deref()) {
                Some(tool) => match &self.tools {
                    Some(p) => self.find(Shape::Tool(p.classify(tool)?), size),
                    None => self.find(Shape::Call(method), size),
                },
                None => self.find(Shape::Call(method), size),
            },
        }
    }

    fn find(&self, shape: Shape, size: usize) -> Option<u32> {
        self.values
            .iter()
            .position(|v| *v == CallValue { shape, size })
            .and_then(|i| u32::try_from(i).ok())
    }

    /// How a value reads in a region summary.
    pub(crate) fn describe(&self, v: u32) -> String {
        let Some(value) = self.value(v) else {
            return String::new();
        };
        let size = if self.limits.len() > 1 {
            let hi = self.limits.get(value.size).copied().unwrap_or(0);
            format!(" (body up to {hi} bytes)")
        } else {
            String::new()
        };
        let name = |part: &Option<Partition>, a: u32| {
            part.as_ref()
                .and_then(|p| p.atom(a))
                .map(|atom| match (&atom.witness, atom.exact) {
                    (Some(w), true) => format!("`{w}`"),
                    _ => {
                        let pats: Vec<String> = atom
                            .sig
                            .iter()
                            .filter_map(|&k| part.as_ref().map(|p| p.name(k)))
                            .filter(|n| !n.starts_with('<'))
                            .map(|n| format!("`{n}`"))
                            .collect();
                        if pats.is_empty() {
                            "any other".to_owned()
                        } else {
                            format!("matching {}", pats.join(" "))
                        }
                    }
                })
                .unwrap_or_default()
        };
        let text = match value.shape {
            Shape::NoBody => "no body".to_owned(),
            Shape::Unreadable => "an unreadable body".to_owned(),
            Shape::Response => "a response frame".to_owned(),
            Shape::Call(m) if Some(m) == self.tools_call => {
                "a `tools/call` naming no tool".to_owned()
            }
            Shape::Call(m) => format!("call {}", name(&self.methods, m)),
            Shape::McpRefused(m) => format!("call {} with a null id", name(&self.methods, m)),
            Shape::Tool(t) => format!("tool {}", name(&self.tools, t)),
            Shape::Graphql(op) => self
                .graphql
                .as_ref()
                .map_or_else(String::new, |g| g.describe(op)),
            Shape::Persisted(i) => format!(
                "persisted query `{}`",
                self.persisted_id(i).unwrap_or_default()
            ),
            Shape::WsLifecycle => "a GraphQL-over-WebSocket lifecycle message".to_owned(),
            Shape::WsGraphql(op) => format!(
                "a GraphQL-over-WebSocket {}",
                self.graphql
                    .as_ref()
                    .map_or_else(String::new, |g| g.describe(op))
            ),
            Shape::WsPersisted(i) => format!(
                "a GraphQL-over-WebSocket persisted query `{}`",
                self.persisted_id(i).unwrap_or_default()
            ),
            Shape::WsUnregistered => {
                "a GraphQL-over-WebSocket persisted query no endpoint registers".to_owned()
            }
        };
        if value.shape.is_ws() {
            return text;
        }
        format!("{text}{size}")
    }
}

impl Calls {
    /// Values a GraphQL endpoint refuses whatever the HTTP method: every
    /// value that is not a GraphQL request, one over the endpoint's limit,
    /// and a hash-only request for an id it does not register.
    pub(crate) fn graphql_refused(&self, ep: &L7Endpoint) -> Vec<u32> {
        self.ids(|v| self.judge_graphql(ep, v) == Judged::Refused)
    }

    /// Values a GraphQL endpoint denies (in a `GET` or `POST`).
    pub(crate) fn graphql_denied(&self, ep: &L7Endpoint) -> Vec<u32> {
        self.ids(|v| self.judge_graphql(ep, v) == Judged::Denied)
    }

    /// Values a GraphQL endpoint allows (in a `GET` or `POST`).
    pub(crate) fn graphql_allowed(&self, ep: &L7Endpoint) -> Vec<u32> {
        self.ids(|v| self.judge_graphql(ep, v) == Judged::Allowed)
    }

    /// The GraphQL values: a call-reading endpoint reads them as no body
    /// in a `GET`.
    pub(crate) fn graphql_values(&self) -> Vec<u32> {
        self.ids(|v| v.shape.is_graphql())
    }

    /// Whether value `v` is a GraphQL request.
    pub(crate) fn is_graphql(&self, v: u32) -> bool {
        self.value(v).is_some_and(|x| x.shape.is_graphql())
    }

    fn judge_graphql(&self, ep: &L7Endpoint, v: CallValue) -> Judged {
        let Some(ops) = &self.graphql else {
            return Judged::Refused;
        };
        if self
            .limits
            .get(v.size)
            .is_none_or(|&l| l > ep.effective_body_limit())
        {
            return Judged::Refused;
        }
        match v.shape {
            Shape::Graphql(op) => ops.judge_op(ep, op),
            Shape::Persisted(i) => ops.judge_persisted(ep, i),
            _ => Judged::Refused,
        }
    }

    fn graphql_document(&self, op: Op) -> Result<String, String> {
        self.graphql
            .as_ref()
            .ok_or_else(|| "no GraphQL endpoint".to_owned())?
            .document(op)
    }

    fn persisted_id(&self, i: u32) -> Result<String, String> {
        self.graphql
            .as_ref()
            .and_then(|g| g.persisted_id(i))
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| "a persisted query has an empty id".to_owned())
    }

    /// How a GraphQL-over-WebSocket endpoint reads value `v` as a text
    /// message: every value that is not a GraphQL-over-WebSocket message
    /// stands for a text it cannot read (`crate::websocket::text`).
    pub(crate) fn ws_read(&self, ep: &L7Endpoint, v: u32) -> WsRead {
        let (Some(ops), Some(value)) = (&self.graphql, self.value(v)) else {
            return WsRead::Unreadable;
        };
        match value.shape {
            Shape::WsLifecycle => WsRead::Lifecycle,
            Shape::WsGraphql(op) => WsRead::Operation(ops.judge_op(ep, op)),
            Shape::WsPersisted(i) => WsRead::Operation(ops.judge_persisted(ep, i)),
            Shape::WsUnregistered => WsRead::Operation(Judged::Refused),
            _ => WsRead::Unreadable,
        }
    }

    /// A persisted-query id no endpoint of either bundle registers.
    fn unregistered_id(&self) -> String {
        let taken = |id: &str| {
            self.graphql
                .as_ref()
                .is_some_and(|g| g.persisted.iter().any(|p| p == id))
        };
        (0..)
            .map(|n| format!("unregistered{n}"))
            .find(|id| !taken(id))
            .unwrap_or_default()
    }

    /// Values a GraphQL-over-WebSocket endpoint reads as `keep` says.
    pub(crate) fn ws_values(&self, ep: &L7Endpoint, keep: impl Fn(WsRead) -> bool) -> Vec<u32> {
        (0..self.values.len())
            .filter_map(|i| u32::try_from(i).ok())
            .filter(|&v| keep(self.ws_read(ep, v)))
            .collect()
    }

    /// Whether value `v` is a GraphQL-over-WebSocket message.
    pub(crate) fn is_ws(&self, v: u32) -> bool {
        self.value(v).is_some_and(|x| x.shape.is_ws())
    }

    /// The GET query string (without `?`) carrying a GraphQL value,
    /// padded with an ignored `variables` parameter to its size class.
    pub(crate) fn graphql_query_string(&self, v: u32) -> Option<String> {
        let value = self.value(v)?;
        let mut out = match value.shape {
            Shape::Graphql(op) => format!("query={}", percent(&self.graphql_document(op).ok()?)),
            Shape::Persisted(i) => format!("id={}", percent(&self.persisted_id(i).ok()?)),
            _ => return None,
        };
        let lo = match value.size {
            0 => 0,
            k => self.limits.get(k - 1).copied().unwrap_or(0),
        };
        if out.len() <= lo {
            out.push_str("&variables=");
            let n = lo + 1 - out.len();
            out.push_str(&"x".repeat(n));
        }
        Some(out)
    }

    /// `Some(value)` for a GraphQL request body: one operation with one
    /// root field, or a hash-only request for a registered id; `Some(None)`
    /// for one the model represents by its single operations (a batch,
    /// several root fields); `None` when the body is no GraphQL request.
    fn classify_graphql(&self, body: &[u8]) -> Option<Option<u32>> {
        use policy_bundle::l7body::graphql::{GraphqlOp, ops_from_post};
        let ops = self.graphql.as_ref()?;
        let size = self.limits.iter().position(|&l| body.len() <= l)?;
        let read = ops_from_post(body).ok()?;
        let [op] = read.as_slice() else {
            return Some(None);
        };
        let shape = match op {
            GraphqlOp::Parsed {
                kind,
                name,
                root_fields,
                ..
            } => match root_fields.as_slice() {
                [field] => ops
                    .classify(*kind, name.as_deref(), field)
                    .map(Shape::Graphql),
                _ => None,
            },
            GraphqlOp::Persisted { hash, name: None } => ops
                .persisted
                .iter()
                .position(|id| id == hash)
                .and_then(|i| u32::try_from(i).ok())
                .map(Shape::Persisted),
            GraphqlOp::Persisted { .. } => None,
        };
        Some(shape.and_then(|shape| self.find(shape, size)))
    }
}

/// A GraphQL-over-WebSocket lifecycle message.
const WS_LIFECYCLE: &str = r#"{"type":"ping"}"#;

/// The start of a `subscribe` message, up to its payload object.
const WS_SUBSCRIBE: &str = r#"{"type":"subscribe","id":"1","payload":"#;

/// Percent-encodes every byte but unreserved ones, for a query string.
fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
