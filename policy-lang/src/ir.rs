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

/// A whole policy after resolution: the main file and its fragments
/// merged, every name replaced by what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The main document's name.
    pub name: String,
    /// How strictly the filesystem rights are enforced.
    pub landlock: Landlock,
    /// Who the workload runs as; `None` keeps the supervisor's user (W0131).
    pub run_as: Option<RunAs>,
    /// One entry per path, rights merged, sorted by path.
    pub fs: Vec<FsGrant>,
    /// Rights on the workload's working directory, decided at launch.
    pub workdir: Option<FsRights>,
    /// The `binaries` sets by name, kept for reports and the prover.
    pub binary_sets: BTreeMap<String, Vec<BinaryRef>>,
    /// One per `allow`, in source order.
    pub endpoints: Vec<Endpoint>,
    /// Secrets the proxy injects.
    pub credentials: Vec<Credential>,
    /// Secrets the workload itself can read.
    pub secrets: Vec<SandboxSecret>,
    /// The `advisor` statement: who may reach `policy.local`.
    pub advisor: Option<Advisor>,
}

/// The `advisor` statement, its binaries resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advisor {
    /// Sorted, de-duplicated; never empty.
    pub binaries: Vec<BinaryRef>,
    /// Where it was written; its rule name is the subjects as written.
    pub origin: Origin,
}

/// The `landlock` statement; [`Landlock::default`] when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landlock {
    /// Whether a right the kernel cannot enforce fails the launch.
    pub mode: LandlockMode,
    /// The oldest Landlock ABI accepted.
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

/// The `run_as` statement; names are looked up at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// A user name or numeric id.
    pub user: Option<String>,
    /// A group name or numeric id.
    pub group: Option<String>,
}

/// Filesystem rights as the language states them. `write` and `exec` both
/// include reading: a directory one may write to but not list, or a binary
/// one may execute but the loader may not read, is never what authors mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FsRights {
    /// Read files and list directories.
    pub read: bool,
    /// Write, create, remove, rename, truncate.
    pub write: bool,
    /// Execute.
    pub exec: bool,
}

impl FsRights {
    /// What `fs read` grants.
    pub(crate) const READ: FsRights = FsRights {
        read: true,
        write: false,
        exec: false,
    };

    /// Rights on one path add up across lines.
    pub(crate) fn union(self, o: FsRights) -> FsRights {
        FsRights {
            read: self.read || o.read,
            write: self.write || o.write,
            exec: self.exec || o.exec,
        }
    }

    /// Whether every right of `o` is also here.
    pub(crate) fn contains(self, o: FsRights) -> bool {
        (self.read || !o.read) && (self.write || !o.write) && (self.exec || !o.exec)
    }
}

/// The rights on one path, merged over every `fs` line naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    /// Absolute and normalized.
    pub path: String,
    /// The union of every line's rights.
    pub rights: FsRights,
    /// The first line that granted it, for blame.
    pub origin: Origin,
}

/// One `allow` rule: who may connect where, and how it is inspected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Sets expanded to their members.
    pub binaries: Vec<BinaryRef>,
    /// A host pattern or an address set.
    pub dest: Dest,
    /// The destination ports.
    pub ports: PortSet,
    /// Addresses a host destination may resolve to (OpenShell's
    /// `allowed_ips`); also what names internal addresses explicitly.
    pub addresses: Option<AddrSet>,
    /// How connections are handled.
    pub kind: EndpointKind,
    /// The author accepts that a credential reaches it uninspected (no
    ///     W0102).
    pub uninspected_credentials: bool,
    /// Credential placeholders in client text messages after an upgrade
    /// are replaced by the secrets of credentials bound to the host,
    /// rather than refused (a `websocket` endpoint only).
    pub websocket_credential_rewrite: bool,
    /// Credential placeholders in request bodies are replaced by the
    /// secrets of credentials bound to the host, rather than refused (an
    /// `http` endpoint only).
    pub request_body_credential_rewrite: bool,
    /// The `allow` line, for blame.
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "a policy has few endpoints; boxing would only add indirection"
)]
/// How connections to an endpoint are handled, with the L7 rules when
/// the proxy judges them.
pub enum EndpointKind {
    /// A plain connection relayed by the supervisor.
    L4,
    /// Transparent TCP: the workload resolves the name itself through the
    /// DNS stub and connects to the address.
    Tcp,
    /// Through the L7 proxy.
    Http(HttpEndpoint),
}

impl EndpointKind {
    /// True when requests on this endpoint pass the L7 proxy's rules.
    pub(crate) fn is_inspected(&self) -> bool {
        matches!(self, EndpointKind::Http(h) if h.tls == TlsMode::Auto)
    }
}

/// An endpoint behind the L7 proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpEndpoint {
    /// `skip` relays TLS without inspection.
    pub tls: TlsMode,
    /// `audit` forwards denied requests and logs them.
    pub enforcement: Enforcement,
    /// Only requests whose path matches take part in this endpoint.
    pub path: Option<HttpPathGlob>,
    /// REST rules; a request needs one.
    pub allow: Vec<L7Rule>,
    /// REST rules that win over `allow`.
    pub deny: Vec<L7Rule>,
    /// Accept `%2F` inside a path segment.
    pub encoded_slash: bool,
    /// The server ignores ASCII case and a trailing slash in paths: every
    /// path glob matches the folded path.
    pub fold_paths: bool,
    /// REST endpoints use `allow`/`deny`; JSON-RPC and MCP endpoints use
    /// the `rpc_*` rules and the settings below.
    pub protocol: L7Protocol,
    /// Bytes of body read for inspection; `None` for the default.
    pub body_limit: Option<u64>,
    /// MCP: tool names must follow the recommended pattern.
    pub strict_tool_names: bool,
    /// MCP: the allow-all method profile.
    pub all_mcp_methods: bool,
    /// JSON-RPC and MCP: a call needs one.
    pub rpc_allow: Vec<RpcRule>,
    /// JSON-RPC and MCP: calls these match are denied.
    pub rpc_deny: Vec<RpcRule>,
    /// GraphQL endpoints: operation rules and the persisted-query registry.
    pub graphql_allow: Vec<GraphqlRule>,
    /// Operations these match are denied.
    pub graphql_deny: Vec<GraphqlRule>,
    /// Persisted queries the endpoint resolves by id or hash.
    pub persisted: Vec<policy_bundle::PersistedQuery>,
}

/// One operation pattern of a GraphQL endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlRule {
    /// The pattern as the bundle stores it.
    pub rule: policy_bundle::GraphqlRule,
    /// The rule's line, for blame.
    pub origin: Origin,
}

/// One call pattern of a JSON-RPC or MCP endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcRule {
    /// The JSON-RPC method or glob.
    pub methods: RpcMethod,
    /// For `tools/call`: the tools; `None` for any.
    pub tools: Option<ToolSet>,
    /// The rule's line, for blame.
    pub origin: Origin,
}

/// One REST rule of an inspected endpoint: one per path glob of a written
/// rule, or an access preset on `/**`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L7Rule {
    /// `*` expanded to every method.
    pub methods: MethodSet,
    /// The path glob.
    pub path: HttpPathGlob,
    /// Every matcher must hold.
    pub query: Vec<QueryMatcher>,
    /// The rule's line, for blame.
    pub origin: Origin,
}

/// A secret the supervisor holds and the proxy injects; the workload sees at
/// most a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Unique in the policy.
    pub name: String,
    /// Where the supervisor reads the value.
    pub source: SecretSource,
    /// The variable the workload sees instead of the value.
    pub placeholder: Option<String>,
    /// How the value is put into requests.
    pub inject: Injection,
    /// Destinations it is injected for.
    pub hosts: Vec<HostPattern>,
    /// Only these methods; `None` for any.
    pub methods: Option<MethodSet>,
    /// Only these paths; `None` for any.
    pub paths: Option<Vec<HttpPathGlob>>,
    /// The `credential` block, for blame.
    pub origin: Origin,
}

/// A secret that lives inside the sandbox (a file or an environment
/// variable the workload can read) and the hosts it unlocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSecret {
    /// Unique in the policy.
    pub name: String,
    /// Where the workload finds it.
    pub source: SecretSource,
    /// The hosts it unlocks.
    pub hosts: Vec<HostPattern>,
    /// The `secret` line, for blame.
    pub origin: Origin,
}
