//! The typed intermediate representation: names resolved, presets expanded,
//! every pattern parsed by the matcher module. The compiler and the prover
//! read only this; nothing downstream looks at source text again.

use std::collections::BTreeMap;

use policy_bundle::matcher::{
    AddrSet, HostPattern, HttpPathGlob, MethodSet, PortSet, QueryMatcher, RpcMethod, ToolSet,
};
pub(crate) use policy_bundle::{
    BinaryRef, Dest, Enforcement, Injection, L7Protocol, LandlockMode, Origin, SecretSource,
    TlsMode,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub landlock: Landlock,
    pub run_as: Option<RunAs>,
    /// One entry per path, rights merged, sorted by path.
    pub fs: Vec<FsGrant>,
    /// Rights on the workload's working directory, decided at launch.
    pub workdir: Option<FsRights>,
    pub binary_sets: BTreeMap<String, Vec<BinaryRef>>,
    pub endpoints: Vec<Endpoint>,
    pub credentials: Vec<Credential>,
    pub secrets: Vec<SandboxSecret>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landlock {
    pub mode: LandlockMode,
    pub min_abi: u8,
}

impl Default for Landlock {
    /// Hard by default: a policy that lists filesystem rights expects them
    /// enforced, not silently degraded on an older kernel.
    fn default() -> Self {
        Self {
            mode: LandlockMode::Hard,
            min_abi: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub user: Option<String>,
    pub group: Option<String>,
}

/// Filesystem rights as the language states them. `write` and `exec` both
/// include reading: a directory one may write to but not list, or a binary
/// one may execute but the loader may not read, is never what authors mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FsRights {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
}

impl FsRights {
    pub const READ: FsRights = FsRights {
        read: true,
        write: false,
        exec: false,
    };

    pub fn union(self, o: FsRights) -> FsRights {
        FsRights {
            read: self.read || o.read,
            write: self.write || o.write,
            exec: self.exec || o.exec,
        }
    }

    pub fn contains(self, o: FsRights) -> bool {
        (self.read || !o.read) && (self.write || !o.write) && (self.exec || !o.exec)
    }

    pub fn is_empty(self) -> bool {
        !self.read && !self.write && !self.exec
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    pub path: String,
    pub rights: FsRights,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub binaries: Vec<BinaryRef>,
    pub dest: Dest,
    pub ports: PortSet,
    /// Addresses a host destination may resolve to (OpenShell's
    /// `allowed_ips`); also what names internal addresses explicitly.
    pub addresses: Option<AddrSet>,
    pub kind: EndpointKind,
    pub uninspected_credentials: bool,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "a policy has few endpoints; boxing would only add indirection"
)]
pub enum EndpointKind {
    /// A plain connection relayed by the supervisor.
    L4,
    /// Transparent TCP: the workload resolves the name itself through the
    /// DNS stub and connects to the address.
    Tcp,
    Http(HttpEndpoint),
}

impl EndpointKind {
    /// True when requests on this endpoint pass the L7 proxy's rules.
    pub(crate) fn is_inspected(&self) -> bool {
        matches!(self, EndpointKind::Http(h) if h.tls == TlsMode::Auto)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpEndpoint {
    pub tls: TlsMode,
    pub enforcement: Enforcement,
    /// Only requests whose path matches take part in this endpoint.
    pub path: Option<HttpPathGlob>,
    pub allow: Vec<L7Rule>,
    pub deny: Vec<L7Rule>,
    pub encoded_slash: bool,
    /// REST endpoints use `allow`/`deny`; JSON-RPC and MCP endpoints use
    /// the `rpc_*` rules and the settings below.
    pub protocol: L7Protocol,
    pub body_limit: Option<u64>,
    pub strict_tool_names: bool,
    pub all_mcp_methods: bool,
    pub rpc_allow: Vec<RpcRule>,
    pub rpc_deny: Vec<RpcRule>,
    /// GraphQL endpoints: operation rules and the persisted-query registry.
    pub graphql_allow: Vec<GraphqlRule>,
    pub graphql_deny: Vec<GraphqlRule>,
    pub persisted: Vec<policy_bundle::PersistedQuery>,
}

/// One operation pattern of a GraphQL endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlRule {
    pub rule: policy_bundle::GraphqlRule,
    pub origin: Origin,
}

/// One call pattern of a JSON-RPC or MCP endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcRule {
    pub methods: RpcMethod,
    pub tools: Option<ToolSet>,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L7Rule {
    pub methods: MethodSet,
    pub path: HttpPathGlob,
    pub query: Vec<QueryMatcher>,
    pub origin: Origin,
}

/// A secret the supervisor holds and the proxy injects; the workload sees at
/// most a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub name: String,
    pub source: SecretSource,
    pub placeholder: Option<String>,
    pub inject: Injection,
    pub hosts: Vec<HostPattern>,
    pub methods: Option<MethodSet>,
    pub paths: Option<Vec<HttpPathGlob>>,
    pub origin: Origin,
}

/// A secret that lives inside the sandbox (a file or an environment
/// variable the workload can read) and the hosts it unlocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSecret {
    pub name: String,
    pub source: SecretSource,
    pub hosts: Vec<HostPattern>,
    pub origin: Origin,
}
