//! The flat JSON shape of an L7 endpoint and of its provenance, as every
//! bundle since format version 1 has written them. The in-memory types
//! keep one payload per protocol and each rule's origins beside it; these
//! types convert at the edge, so the enforcement JSON (and with it the
//! digest) and the provenance JSON stay byte for byte what they were.

use serde::{Deserialize, Serialize};

use super::{
    GraphqlOps, GraphqlRule, GraphqlRules, L7Endpoint, L7Matcher, L7Protocol, L7Rules,
    PersistedQuery, RestRules, RpcMatcher, RpcRules, Sourced, WsRules,
};
use crate::l7body::jsonrpc::RpcDialect;
use crate::matcher::HttpPathGlob;
use crate::vocab::{Enforcement, Origin, TlsMode};

/// An L7 endpoint as read from a bundle: every protocol's fields side by
/// side, each optional. Converting it to an [`L7Endpoint`] refuses fields
/// the endpoint's `protocol` does not use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireEndpoint {
    /// As in [`L7Endpoint`].
    pub enforcement: Enforcement,
    pub(crate) tls: TlsMode,
    /// As in [`L7Endpoint`].
    pub path: Option<HttpPathGlob>,
    pub(crate) encoded_slash: bool,
    /// As in [`L7Endpoint`]; absent in bundles that do not fold paths.
    #[serde(default)]
    pub(crate) fold_paths: bool,
    /// REST and WebSocket allow rules, without origins.
    pub allow: Vec<L7Matcher>,
    pub(crate) deny: Vec<L7Matcher>,
    /// Which of the fields below apply; REST when absent.
    #[serde(default)]
    pub protocol: L7Protocol,
    /// Bytes of body read for inspection (JSON-RPC, MCP, GraphQL; a message limit for WebSocket).
    #[serde(default)]
    pub body_limit: Option<u64>,
    /// JSON-RPC and MCP: tool names must match `^[A-Za-z0-9_.-]{1,128}$`.
    #[serde(default = "yes")]
    pub strict_tool_names: bool,
    /// MCP: the allow-all method profile.
    #[serde(default)]
    pub all_mcp_methods: bool,
    /// JSON-RPC and MCP allow rules.
    #[serde(default)]
    pub rpc_allow: Vec<RpcMatcher>,
    /// JSON-RPC and MCP deny rules.
    #[serde(default)]
    pub rpc_deny: Vec<RpcMatcher>,
    /// GraphQL allow rules.
    #[serde(default)]
    pub graphql_allow: Vec<GraphqlRule>,
    /// GraphQL deny rules.
    #[serde(default)]
    pub graphql_deny: Vec<GraphqlRule>,
    /// GraphQL: the trusted persisted-query registry.
    #[serde(default)]
    pub persisted_queries: Vec<PersistedQuery>,
}

/// The same shape, borrowed, for writing. Fields that only JSON-RPC, MCP,
/// GraphQL and WebSocket use are left out when unused, so REST bundles
/// keep the digests they had before those protocols existed.
#[derive(Serialize)]
pub(super) struct WireEndpointRef<'a> {
    enforcement: Enforcement,
    tls: TlsMode,
    path: Option<&'a HttpPathGlob>,
    encoded_slash: bool,
    #[serde(skip_serializing_if = "is_false")]
    fold_paths: bool,
    allow: &'a [Sourced<L7Matcher>],
    deny: &'a [Sourced<L7Matcher>],
    #[serde(skip_serializing_if = "L7Protocol::is_rest")]
    protocol: L7Protocol,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_limit: Option<u64>,
    #[serde(skip_serializing_if = "is_true")]
    strict_tool_names: bool,
    #[serde(skip_serializing_if = "is_false")]
    all_mcp_methods: bool,
    #[serde(skip_serializing_if = "is_empty")]
    rpc_allow: &'a [Sourced<RpcMatcher>],
    #[serde(skip_serializing_if = "is_empty")]
    rpc_deny: &'a [Sourced<RpcMatcher>],
    #[serde(skip_serializing_if = "is_empty")]
    graphql_allow: &'a [Sourced<GraphqlRule>],
    #[serde(skip_serializing_if = "is_empty")]
    graphql_deny: &'a [Sourced<GraphqlRule>],
    #[serde(skip_serializing_if = "is_empty")]
    persisted_queries: &'a [PersistedQuery],
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn is_true(b: &bool) -> bool {
    *b
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn is_false(b: &bool) -> bool {
    !*b
}

static NO_GRAPHQL: GraphqlOps = GraphqlOps::EMPTY;

fn is_empty<T>(s: &&[T]) -> bool {
    s.is_empty()
}

impl<'a> From<&'a L7Endpoint> for WireEndpointRef<'a> {
    fn from(ep: &'a L7Endpoint) -> Self {
        let rest = ep.rest();
        let rpc = ep.rpc();
        let graphql = ep.graphql().unwrap_or(&NO_GRAPHQL);
        let body_limit = match &ep.rules {
            L7Rules::Rest(_) => None,
            L7Rules::Rpc(r) => r.body_limit,
            L7Rules::Graphql(g) => g.body_limit,
            L7Rules::Websocket(w) => w.message_limit,
        };
        Self {
            enforcement: ep.enforcement,
            tls: ep.tls,
            path: ep.path.as_ref(),
            encoded_slash: ep.encoded_slash,
            fold_paths: ep.fold_paths,
            allow: rest.map_or(&[], |r| &r.allow),
            deny: rest.map_or(&[], |r| &r.deny),
            protocol: ep.protocol(),
            body_limit,
            strict_tool_names: rpc.is_none_or(|r| r.strict_tool_names),
            all_mcp_methods: rpc.is_some_and(|r| r.all_mcp_methods),
            rpc_allow: rpc.map_or(&[], |r| &r.allow),
            rpc_deny: rpc.map_or(&[], |r| &r.deny),
            graphql_allow: &graphql.allow,
            graphql_deny: &graphql.deny,
            persisted_queries: &graphql.persisted_queries,
        }
    }
}

/// A bundle's L7 endpoint whose `protocol` and fields disagree.
#[derive(Debug, thiserror::Error)]
#[error(
    "an L7 endpoint with protocol `{protocol}` has `{field}`, which only {owners} endpoints use"
)]
pub struct ProtocolMismatch {
    protocol: &'static str,
    field: &'static str,
    owners: &'static str,
}

/// The `protocol` value as the bundle spells it.
fn wire_name(p: L7Protocol) -> &'static str {
    match p {
        L7Protocol::Rest => "rest",
        L7Protocol::JsonRpc => "json_rpc",
        L7Protocol::Mcp => "mcp",
        L7Protocol::Graphql => "graphql",
        L7Protocol::Websocket => "websocket",
    }
}

fn sourced<T>(rules: Vec<T>) -> Vec<Sourced<T>> {
    rules.into_iter().map(Sourced::new).collect()
}

impl TryFrom<WireEndpoint> for L7Endpoint {
    type Error = ProtocolMismatch;

    fn try_from(w: WireEndpoint) -> Result<Self, ProtocolMismatch> {
        let protocol = w.protocol;
        // Each field, whether it is set, and which protocols may set it.
        let rest = "`rest` and `websocket`";
        let rpc = "`json_rpc` and `mcp`";
        let mcp = "`mcp`";
        let gql = "`graphql` and `websocket`";
        let body = "`json_rpc`, `mcp`, `graphql` and `websocket`";
        let present = [
            ("allow", !w.allow.is_empty(), rest),
            ("deny", !w.deny.is_empty(), rest),
            ("body_limit", w.body_limit.is_some(), body),
            ("strict_tool_names", !w.strict_tool_names, mcp),
            ("all_mcp_methods", w.all_mcp_methods, mcp),
            ("rpc_allow", !w.rpc_allow.is_empty(), rpc),
            ("rpc_deny", !w.rpc_deny.is_empty(), rpc),
            ("graphql_allow", !w.graphql_allow.is_empty(), gql),
            ("graphql_deny", !w.graphql_deny.is_empty(), gql),
            ("persisted_queries", !w.persisted_queries.is_empty(), gql),
        ];
        let name = wire_name(protocol);
        let quoted = format!("`{name}`");
        if let Some((field, _, owners)) = present
            .iter()
            .find(|(_, set, owners)| *set && !owners.contains(quoted.as_str()))
        {
            return Err(ProtocolMismatch {
                protocol: name,
                field,
                owners,
            });
        }
        let ops = GraphqlOps {
            allow: sourced(w.graphql_allow),
            deny: sourced(w.graphql_deny),
            persisted_queries: w.persisted_queries,
        };
        let rest = RestRules {
            allow: sourced(w.allow),
            deny: sourced(w.deny),
        };
        let rpc = |dialect| RpcRules {
            dialect,
            allow: sourced(w.rpc_allow.clone()),
            deny: sourced(w.rpc_deny.clone()),
            body_limit: w.body_limit,
            strict_tool_names: w.strict_tool_names,
            all_mcp_methods: w.all_mcp_methods,
        };
        let rules = match protocol {
            L7Protocol::Rest => L7Rules::Rest(rest),
            L7Protocol::JsonRpc => L7Rules::Rpc(rpc(RpcDialect::JsonRpc)),
            L7Protocol::Mcp => L7Rules::Rpc(rpc(RpcDialect::Mcp)),
            L7Protocol::Graphql => L7Rules::Graphql(GraphqlRules {
                ops,
                body_limit: w.body_limit,
            }),
            L7Protocol::Websocket => L7Rules::Websocket(WsRules {
                rest,
                graphql: ops,
                message_limit: w.body_limit,
            }),
        };
        Ok(L7Endpoint {
            enforcement: w.enforcement,
            tls: w.tls,
            path: w.path,
            encoded_slash: w.encoded_slash,
            fold_paths: w.fold_paths,
            rules,
            origins: Vec::new(),
        })
    }
}

/// Where an endpoint and its rules came from, as the bundle's provenance
/// section writes it: lists parallel to the endpoint's rule lists. In
/// memory the origins travel with the rules ([`Sourced`]); this is only
/// the wire form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L7Provenance {
    /// The policy rules the endpoint was written in.
    pub endpoint: Vec<Origin>,
    /// Parallel to the REST allow rules.
    pub allow: Vec<Vec<Origin>>,
    /// Parallel to the REST deny rules.
    pub deny: Vec<Vec<Origin>>,
    /// Parallel to `allow`: for each origin, the index in `endpoint` of the
    /// rule it was written in. An endpoint's content is shared by rules for
    /// other binaries and hosts; blame keeps only the ones that applied.
    #[serde(default)]
    pub allow_within: Vec<Vec<u32>>,
    /// Parallel to `deny`, as `allow_within`.
    #[serde(default)]
    pub deny_within: Vec<Vec<u32>>,
    /// Parallel to the endpoint's `rpc_allow`, as `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_allow: Vec<Vec<Origin>>,
    /// Parallel to the endpoint's `rpc_deny`, as `deny`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_deny: Vec<Vec<Origin>>,
    /// Parallel to `rpc_allow`, as `allow_within`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_allow_within: Vec<Vec<u32>>,
    /// Parallel to `rpc_deny`, as `allow_within`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_deny_within: Vec<Vec<u32>>,
    /// Parallel to the endpoint's `graphql_allow`, as `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_allow: Vec<Vec<Origin>>,
    /// Parallel to the endpoint's `graphql_deny`, as `deny`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_deny: Vec<Vec<Origin>>,
    /// Parallel to `graphql_allow`, as `allow_within`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_allow_within: Vec<Vec<u32>>,
    /// Parallel to `graphql_deny`, as `allow_within`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_deny_within: Vec<Vec<u32>>,
}

impl L7Endpoint {
    /// The endpoint's provenance in the wire form.
    pub fn provenance(&self) -> L7Provenance {
        let (allow, allow_within) = split(self.rest().map_or(&[], |r| &r.allow));
        let (deny, deny_within) = split(self.rest().map_or(&[], |r| &r.deny));
        let (rpc_allow, rpc_allow_within) = split(self.rpc().map_or(&[], |r| &r.allow));
        let (rpc_deny, rpc_deny_within) = split(self.rpc().map_or(&[], |r| &r.deny));
        let graphql = self.graphql().unwrap_or(&NO_GRAPHQL);
        let (graphql_allow, graphql_allow_within) = split(&graphql.allow);
        let (graphql_deny, graphql_deny_within) = split(&graphql.deny);
        L7Provenance {
            endpoint: self.origins.clone(),
            allow,
            deny,
            allow_within,
            deny_within,
            rpc_allow,
            rpc_deny,
            rpc_allow_within,
            rpc_deny_within,
            graphql_allow,
            graphql_deny,
            graphql_allow_within,
            graphql_deny_within,
        }
    }

    /// Gives each rule its origins from the wire form. Lists shorter than
    /// the rules (older bundles) leave the remaining rules without.
    pub fn attach_provenance(&mut self, p: L7Provenance) {
        self.origins = p.endpoint;
        let rest = match &mut self.rules {
            L7Rules::Rest(r) => Some(r),
            L7Rules::Websocket(w) => Some(&mut w.rest),
            L7Rules::Rpc(_) | L7Rules::Graphql(_) => None,
        };
        if let Some(r) = rest {
            join(&mut r.allow, p.allow, p.allow_within);
            join(&mut r.deny, p.deny, p.deny_within);
        }
        if let L7Rules::Rpc(r) = &mut self.rules {
            join(&mut r.allow, p.rpc_allow, p.rpc_allow_within);
            join(&mut r.deny, p.rpc_deny, p.rpc_deny_within);
        }
        let graphql = match &mut self.rules {
            L7Rules::Graphql(g) => Some(&mut g.ops),
            L7Rules::Websocket(w) => Some(&mut w.graphql),
            L7Rules::Rest(_) | L7Rules::Rpc(_) => None,
        };
        if let Some(g) = graphql {
            join(&mut g.allow, p.graphql_allow, p.graphql_allow_within);
            join(&mut g.deny, p.graphql_deny, p.graphql_deny_within);
        }
    }
}

fn split<T>(rules: &[Sourced<T>]) -> (Vec<Vec<Origin>>, Vec<Vec<u32>>) {
    (
        rules.iter().map(|r| r.origins.clone()).collect(),
        rules.iter().map_while(|r| r.within.clone()).collect(),
    )
}

fn join<T>(rules: &mut [Sourced<T>], origins: Vec<Vec<Origin>>, within: Vec<Vec<u32>>) {
    let mut origins = origins.into_iter();
    let mut within = within.into_iter();
    for r in rules {
        r.origins = origins.next().unwrap_or_default();
        r.within = within.next();
    }
}

/// The flat form of an endpoint, origins left out: what the bundle's
/// enforcement JSON says of it.
impl From<&L7Endpoint> for WireEndpoint {
    fn from(ep: &L7Endpoint) -> Self {
        let w = WireEndpointRef::from(ep);
        WireEndpoint {
            enforcement: w.enforcement,
            tls: w.tls,
            path: w.path.cloned(),
            encoded_slash: w.encoded_slash,
            fold_paths: w.fold_paths,
            allow: w.allow.iter().map(|r| r.rule.clone()).collect(),
            deny: w.deny.iter().map(|r| r.rule.clone()).collect(),
            protocol: w.protocol,
            body_limit: w.body_limit,
            strict_tool_names: w.strict_tool_names,
            all_mcp_methods: w.all_mcp_methods,
            rpc_allow: w.rpc_allow.iter().map(|r| r.rule.clone()).collect(),
            rpc_deny: w.rpc_deny.iter().map(|r| r.rule.clone()).collect(),
            graphql_allow: w.graphql_allow.iter().map(|r| r.rule.clone()).collect(),
            graphql_deny: w.graphql_deny.iter().map(|r| r.rule.clone()).collect(),
            persisted_queries: w.persisted_queries.to_vec(),
        }
    }
}

/// The flat view, field by field, for readers that look across protocols
/// (the prover's models, the proxy's logs): a protocol without such rules
/// reads as having none.
impl L7Endpoint {
    /// REST (or WebSocket) allow rules.
    pub fn allow(&self) -> &[Sourced<L7Matcher>] {
        self.rest().map_or(&[], |r| &r.allow)
    }

    /// REST (or WebSocket) deny rules.
    pub fn deny(&self) -> &[Sourced<L7Matcher>] {
        self.rest().map_or(&[], |r| &r.deny)
    }

    /// JSON-RPC and MCP allow rules.
    pub fn rpc_allow(&self) -> &[Sourced<RpcMatcher>] {
        self.rpc().map_or(&[], |r| &r.allow)
    }

    /// JSON-RPC and MCP deny rules.
    pub fn rpc_deny(&self) -> &[Sourced<RpcMatcher>] {
        self.rpc().map_or(&[], |r| &r.deny)
    }

    /// GraphQL (and GraphQL over WebSocket) allow rules.
    pub fn graphql_allow(&self) -> &[Sourced<GraphqlRule>] {
        self.graphql().map_or(&[], |g| &g.allow)
    }

    /// GraphQL (and GraphQL over WebSocket) deny rules.
    pub fn graphql_deny(&self) -> &[Sourced<GraphqlRule>] {
        self.graphql().map_or(&[], |g| &g.deny)
    }

    /// The GraphQL persisted-query registry.
    pub fn persisted_queries(&self) -> &[PersistedQuery] {
        self.graphql().map_or(&[], |g| &g.persisted_queries)
    }

    /// True for a protocol without tools, which has nothing to check.
    pub fn strict_tool_names(&self) -> bool {
        self.rpc().is_none_or(|r| r.strict_tool_names)
    }

    /// False for anything but MCP.
    pub fn all_mcp_methods(&self) -> bool {
        self.rpc().is_some_and(|r| r.all_mcp_methods)
    }

    /// Whether an allow rule names tools, so `tools/call` is left to the tool rules.
    pub fn tools_narrowed(&self) -> bool {
        self.rpc().is_some_and(RpcRules::tools_narrowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED: &str =
        r#""enforcement":"enforce","tls":"auto","path":null,"encoded_slash":false"#;

    fn read(fields: &str) -> Result<L7Endpoint, String> {
        serde_json::from_str(&format!("{{{SHARED},{fields}}}")).map_err(|e| e.to_string())
    }

    #[test]
    fn fields_of_another_protocol_are_refused() {
        let err =
            read(r#""allow":[],"deny":[],"rpc_allow":[{"methods":"initialize"}]"#).unwrap_err();
        assert!(
            err.contains("protocol `rest` has `rpc_allow`, which only `json_rpc` and `mcp`"),
            "{err}"
        );
        let err = read(
            r#""allow":[{"methods":["GET"],"path":"/**","query":[]}],"deny":[],"protocol":"graphql""#,
        )
        .unwrap_err();
        assert!(err.contains("protocol `graphql` has `allow`"), "{err}");
        let err = read(r#""allow":[],"deny":[],"protocol":"json_rpc","all_mcp_methods":true"#)
            .unwrap_err();
        assert!(
            err.contains("protocol `json_rpc` has `all_mcp_methods`"),
            "{err}"
        );
        let err = read(r#""allow":[],"deny":[],"body_limit":10"#).unwrap_err();
        assert!(err.contains("protocol `rest` has `body_limit`"), "{err}");
    }

    #[test]
    fn each_protocol_reads_into_its_payload_and_writes_back_the_same_json() {
        for fields in [
            r#""allow":[{"methods":["GET"],"path":"/**","query":[]}],"deny":[]"#,
            r#""fold_paths":true,"allow":[{"methods":["GET"],"path":"/Repos/*","query":[]}],"deny":[]"#,
            r#""allow":[],"deny":[],"protocol":"mcp","body_limit":10,"strict_tool_names":false,"all_mcp_methods":true,"rpc_deny":[{"methods":"tools/call"}]"#,
            r#""allow":[],"deny":[],"protocol":"json_rpc","rpc_allow":[{"methods":"a.b"}]"#,
            r#""allow":[],"deny":[],"protocol":"graphql","body_limit":99,"graphql_allow":[{"types":"query"}]"#,
            r#""allow":[{"methods":["GET"],"path":"/ws","query":[]}],"deny":[],"protocol":"websocket","body_limit":5,"persisted_queries":[{"id":"x","type":"query"}]"#,
        ] {
            let ep = read(fields).unwrap();
            let protocol = ep.protocol();
            assert_eq!(
                serde_json::to_string(&ep).unwrap(),
                format!("{{{SHARED},{fields}}}"),
                "{protocol:?}"
            );
        }
        let ws = read(
            r#""allow":[],"deny":[],"protocol":"websocket","graphql_deny":[{"types":"mutation"}]"#,
        )
        .unwrap();
        assert!(ws.graphql_over_websocket());
        assert!(matches!(ws.rules, L7Rules::Websocket(_)));
    }

    #[test]
    fn origins_travel_with_the_rules_and_stay_out_of_equality() {
        let mut ep = read(
            r#""allow":[{"methods":["GET"],"path":"/a","query":[]},{"methods":["GET"],"path":"/b","query":[]}],"deny":[]"#,
        )
        .unwrap();
        let plain = ep.clone();
        let at = |line| Origin {
            file: "p.policy".to_string(),
            line,
            column: 1,
            rule: String::new(),
        };
        let prov = L7Provenance {
            endpoint: vec![at(1), at(5)],
            allow: vec![vec![at(2)], vec![at(6)]],
            allow_within: vec![vec![0], vec![1]],
            ..L7Provenance::default()
        };
        ep.attach_provenance(prov.clone());
        assert_eq!(ep.allow().get(1).unwrap().origins, vec![at(6)]);
        assert_eq!(ep.allow().get(1).unwrap().within, Some(vec![1]));
        assert_eq!(ep.provenance(), prov);
        assert_eq!(ep, plain);
        assert_eq!(
            serde_json::to_string(&ep).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
    }
}
