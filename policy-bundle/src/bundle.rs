//! The compiled bundle: what the supervisor enforces.
//!
//! A bundle is JSON with three parts: a format version, the enforcement
//! content with its SHA-256 digest, and provenance (source files, lines and
//! rule names, for blame and logs). Provenance sits outside the digest, so a
//! YAML policy and its import into our language compile to the same digest.
//! Every list in the enforcement content is sorted and de-duplicated by the
//! compiler, so the same input always gives the same bytes and reordering
//! rules does not change the digest.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::matcher::{
    AddrSet, GraphqlNameGlob, HostPattern, HttpPathGlob, MethodSet, OperationType,
    OperationTypeSet, PortSet, QueryMatcher, RpcMethod, ToolSet,
};
use crate::vocab::{
    BinaryRef, Dest, Enforcement, Injection, LandlockMode, Origin, SecretSource, TlsMode,
};

/// The bundle format this build writes. Version 2 added JSON-RPC and MCP
/// endpoints; every new field has a default that means what version 1
/// meant, so version 1 bundles are still read. GraphQL and WebSocket
/// endpoints came later within version 2: their fields are optional too,
/// and a reader that does not know them refuses the bundle (an unknown
/// `protocol` variant or field fails to deserialize) rather than
/// misreading it.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest bundle format this build reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub format_version: u32,
    /// `sha256:<hex>` of the canonical JSON of `enforcement`.
    pub digest: String,
    pub enforcement: Tables,
    pub provenance: Provenance,
}

/// Everything the kernel and the supervisor enforce: the three artefacts
/// (Landlock, the seccomp decision table, L7 rules) and the credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tables {
    pub landlock: LandlockTable,
    pub process: ProcessTable,
    pub seccomp: SeccompTable,
    pub l7: Vec<L7Endpoint>,
    pub credentials: Vec<CredentialBinding>,
    pub secrets: Vec<SecretEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockTable {
    pub mode: LandlockMode,
    pub min_abi: u8,
    pub paths: Vec<LandlockPath>,
    /// Rights on the working directory, resolved by the supervisor at launch.
    pub workdir: Option<Vec<RightsAtAbi>>,
    /// TCP ports the workload may `connect` to, enforced by Landlock from
    /// ABI 4 as a second layer behind the seccomp broker. Binding is denied.
    pub tcp_connect_ports: PortSet,
    /// Landlock ABI 6 scoping: signals and abstract unix sockets stay inside
    /// the sandbox.
    pub scoped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockPath {
    pub path: String,
    /// Rights split by the ABI that introduced them, so the supervisor
    /// applies the best the running kernel offers and reports the rest.
    pub access: Vec<RightsAtAbi>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RightsAtAbi {
    pub abi: u8,
    pub rights: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessTable {
    pub user: Option<String>,
    pub group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompTable {
    pub deny: Vec<DeniedSyscall>,
    /// Syscalls answered by the supervisor (`SECCOMP_RET_USER_NOTIF`) when
    /// all their conditions hold.
    pub notify: Vec<TrappedSyscall>,
    /// Per binary identity: which routes it may use and which names the DNS
    /// stub answers for it.
    pub identities: Vec<Identity>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeniedSyscall {
    pub syscall: String,
    /// Errno name, such as `EPERM`.
    pub errno: String,
    /// All conditions must hold for the denial to apply; none means always.
    pub when: Vec<ArgCondition>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrappedSyscall {
    pub syscall: String,
    /// All conditions must hold for the call to be trapped; none means always.
    pub when: Vec<ArgCondition>,
}

/// A test on one syscall argument register.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgCondition {
    pub arg: u8,
    pub op: ArgOp,
    pub value: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgOp {
    /// `(arg & mask) == value`. An `int` argument is compared under
    /// `0xffff_ffff` so garbage in the upper half cannot dodge the rule.
    MaskedEq(u64),
    /// `arg != value` on the full register.
    Ne,
    /// `arg >= value` on the full register.
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub binary: BinaryRef,
    pub routes: Vec<u32>,
    pub dns: Vec<HostPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub dest: Dest,
    pub ports: PortSet,
    pub addresses: Option<AddrSet>,
    pub via: Via,
    /// The author accepted that credentials may pass here uninspected.
    pub uninspected_credentials: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The supervisor connects and hands the socket over.
    L4,
    /// Transparent TCP: like L4, reached by an address the workload resolved.
    Tcp,
    /// An HTTP endpoint relayed without inspection (`tls skip`).
    Uninspected,
    /// The L7 proxy endpoint with this index in `l7`.
    L7(u32),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L7Endpoint {
    pub enforcement: Enforcement,
    pub tls: TlsMode,
    pub path: Option<HttpPathGlob>,
    pub encoded_slash: bool,
    /// REST rules (`http` endpoints only).
    pub allow: Vec<L7Matcher>,
    pub deny: Vec<L7Matcher>,
    /// What the request bodies carry. Fields that only JSON-RPC and MCP
    /// use are left out of a REST endpoint's JSON, so REST bundles keep
    /// their digests.
    #[serde(default, skip_serializing_if = "L7Protocol::is_rest")]
    pub protocol: L7Protocol,
    /// Bytes of body read for inspection; `None` is
    /// [`crate::l7body::jsonrpc::DEFAULT_BODY_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_limit: Option<u64>,
    /// MCP: `tools/call` tool names must match `^[A-Za-z0-9_.-]{1,128}$`.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub strict_tool_names: bool,
    /// MCP: the allow-all method profile (`all_mcp_methods`). Every call is
    /// allowed at the method layer, except that `tools/call` is left to the
    /// tool rules when an `rpc_allow` rule names tools; `rpc_deny` applies.
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_mcp_methods: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_allow: Vec<RpcMatcher>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_deny: Vec<RpcMatcher>,
    /// GraphQL: every operation of a request must match one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_allow: Vec<GraphqlRule>,
    /// GraphQL: an operation matching one of these denies the request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphql_deny: Vec<GraphqlRule>,
    /// GraphQL: the trusted persisted-query registry. A request that sends
    /// only a hash or saved-query id runs whatever the server stored under
    /// it, so it is judged as the operation registered here; an id not
    /// registered is denied (empty = every hash-only request is denied).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persisted_queries: Vec<PersistedQuery>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_true(b: &bool) -> bool {
    *b
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_false(b: &bool) -> bool {
    !*b
}

impl L7Endpoint {
    /// Whether rules judge the request body, so the proxy must read it.
    pub fn reads_body(&self) -> bool {
        !matches!(self.protocol, L7Protocol::Rest | L7Protocol::Websocket)
    }

    /// A websocket endpoint with GraphQL rules or a registry: its client
    /// text messages are GraphQL-over-WebSocket messages, judged by the
    /// GraphQL rules and never by `WEBSOCKET_TEXT` allow rules.
    pub fn graphql_over_websocket(&self) -> bool {
        self.protocol == L7Protocol::Websocket
            && !(self.graphql_allow.is_empty()
                && self.graphql_deny.is_empty()
                && self.persisted_queries.is_empty())
    }

    /// The body limit in effect, in bytes.
    pub fn effective_body_limit(&self) -> usize {
        let default = match self.protocol {
            L7Protocol::Graphql => crate::l7body::graphql::DEFAULT_BODY_LIMIT,
            L7Protocol::Websocket => crate::eval::DEFAULT_MESSAGE_LIMIT,
            _ => crate::l7body::jsonrpc::DEFAULT_BODY_LIMIT,
        };
        self.body_limit
            .map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The registered persisted query with this hash or saved-query id.
    pub fn persisted_query(&self, id: &str) -> Option<&PersistedQuery> {
        self.persisted_queries.iter().find(|q| q.id == id)
    }

    /// MCP with an `rpc_allow` rule that names tools: `tools/call` is then
    /// allowed by tool rules only, never by the method profile.
    pub fn tools_narrowed(&self) -> bool {
        self.rpc_allow.iter().any(|r| r.tools.is_some())
    }
}

/// The protocol an L7 endpoint inspects.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum L7Protocol {
    /// HTTP method, path and query.
    #[default]
    Rest,
    /// Generic JSON-RPC 2.0 over HTTP POST: methods only.
    JsonRpc,
    /// MCP Streamable HTTP: methods, and tools of `tools/call`.
    Mcp,
    /// GraphQL over HTTP (GET and POST): operation types, operation names
    /// and root fields.
    Graphql,
    /// WebSocket: the RFC 6455 upgrade `GET` and each client text message
    /// (`WEBSOCKET_TEXT`) by the REST rules, or by the GraphQL rules when
    /// the endpoint has any (GraphQL over WebSocket).
    Websocket,
}

impl L7Protocol {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
    pub fn is_rest(&self) -> bool {
        *self == Self::Rest
    }

    /// The word policies use for it.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Rest => "http",
            Self::JsonRpc => "json-rpc",
            Self::Mcp => "mcp",
            Self::Graphql => "graphql",
            Self::Websocket => "websocket",
        }
    }
}

/// One JSON-RPC rule: calls whose method matches and, when `tools` is set,
/// whose tool (`params.name` of an MCP `tools/call`) matches too. A call
/// without a tool never matches a rule with `tools`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcMatcher {
    pub methods: RpcMethod,
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

/// One GraphQL rule. An allow rule matches an operation whose type is in
/// `types`, whose name matches `name` (an anonymous operation is named
/// `""`) and each of whose root fields matches one of `fields`; a deny rule
/// matches when type and name match and any root field matches one of
/// `fields`. `None` means any name, any fields.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphqlRule {
    pub types: OperationTypeSet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<GraphqlNameGlob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<GraphqlNameGlob>>,
}

impl GraphqlRule {
    /// Whether type and name match, fields aside.
    pub fn type_and_name(&self, kind: OperationType, name: Option<&str>) -> bool {
        self.types.contains(kind)
            && self
                .name
                .as_ref()
                .is_none_or(|g| g.matches_operation_name(name))
    }

    /// As an allow rule: `fields` is `None` when the root fields are not
    /// known (a registered persisted query that lists none), which only a
    /// rule without field patterns admits. An operation without root
    /// fields never meets a rule with field patterns, as in OpenShell.
    pub fn allows(
        &self,
        kind: OperationType,
        name: Option<&str>,
        fields: Option<&[String]>,
    ) -> bool {
        self.type_and_name(kind, name)
            && match (&self.fields, fields) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(globs), Some(fields)) => {
                    !fields.is_empty() && fields.iter().all(|f| globs.iter().any(|g| g.matches(f)))
                }
            }
    }

    /// As a deny rule: the first root field a field pattern matches, or
    /// `Some(None)` when the rule matches without naming a field. Unknown
    /// fields (`None`) may be any field, so every field pattern is taken
    /// to match them: OpenShell lets such an operation pass field deny
    /// rules, which a registry entry without `fields` must not buy.
    pub fn denies<'a>(
        &self,
        kind: OperationType,
        name: Option<&str>,
        fields: Option<&'a [String]>,
    ) -> Option<Option<&'a str>> {
        if !self.type_and_name(kind, name) {
            return None;
        }
        match (&self.fields, fields) {
            (None, _) | (Some(_), None) => Some(None),
            (Some(globs), Some(fields)) => fields
                .iter()
                .find(|f| globs.iter().any(|g| g.matches(f)))
                .map(|f| Some(f.as_str())),
        }
    }
}

/// A registry entry: what the server runs for a hash-only request with this
/// id. `name` and `fields` are GraphQL names, not patterns; `fields: None`
/// means the root fields are not known.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedQuery {
    /// The `sha256Hash` of an automatic persisted query, or a saved-query
    /// id (`id`, `documentId`, `queryId`), exactly as the client sends it.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: OperationType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L7Matcher {
    pub methods: MethodSet,
    pub path: HttpPathGlob,
    pub query: Vec<QueryMatcher>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialBinding {
    pub name: String,
    pub source: SecretSource,
    pub placeholder: Option<String>,
    pub inject: Injection,
    pub hosts: Vec<HostPattern>,
    pub methods: Option<MethodSet>,
    pub paths: Option<Vec<HttpPathGlob>>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretEntry {
    pub name: String,
    pub source: SecretSource,
    pub hosts: Vec<HostPattern>,
}

/// Where each piece of the enforcement content came from. Lists run
/// parallel to the enforcement lists; a route or rule written several times
/// keeps every origin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub policy: String,
    pub files: Vec<String>,
    pub routes: Vec<Vec<Origin>>,
    /// Parallel to each identity's `routes`: the rules that gave that binary
    /// that route. Routes are shared by content across rules written for
    /// different binaries, so blame has to start from the binary.
    #[serde(default)]
    pub identities: Vec<Vec<Vec<Origin>>>,
    pub l7: Vec<L7Provenance>,
    pub credentials: Vec<Origin>,
    pub secrets: Vec<Origin>,
    pub fs: Vec<Origin>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L7Provenance {
    pub endpoint: Vec<Origin>,
    pub allow: Vec<Vec<Origin>>,
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

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error("the bundle is not valid JSON: {0}")]
    Json(String),
    #[error(
        "the bundle has format version {found}; this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION}"
    )]
    UnknownVersion { found: u64 },
    #[error("the bundle has no `format_version`")]
    MissingVersion,
    #[error("the bundle does not match the expected structure: {0}")]
    Schema(String),
    #[error(
        "the bundle's digest does not match its content (recorded {recorded}, computed {computed}): it was modified or corrupted"
    )]
    DigestMismatch { recorded: String, computed: String },
}

/// `sha256:<hex>` of the canonical (compact) JSON encoding of the
/// enforcement content.
pub fn digest_of(content: &Tables) -> String {
    // Streamed into the hash: the encoding of a large policy need not be
    // held (and regrown) in memory just to be hashed once.
    let mut hashing = std::io::BufWriter::with_capacity(8192, HashWriter(Sha256::new()));
    let digest = match serde_json::to_writer(&mut hashing, content) {
        Ok(()) => hashing
            .into_inner()
            .map_or_else(|_| Sha256::digest([]), |w| w.0.finalize()),
        // As the encoding of nothing, like a failed `to_vec` before.
        Err(_) => Sha256::digest([]),
    };
    format!("sha256:{}", hex(&digest))
}

/// Feeds what is written to a SHA-256 state.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl Bundle {
    pub fn new(enforcement: Tables, provenance: Provenance) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            digest: digest_of(&enforcement),
            enforcement,
            provenance,
        }
    }

    /// The bytes written to disk: compact JSON and a newline. The
    /// `enforcement` value in these bytes is exactly what the digest covers,
    /// so loading hashes it as read instead of re-encoding it. Deterministic
    /// for a given bundle; `explain` is the human view.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Read a bundle, refusing unknown versions and digest mismatches.
    pub fn from_slice(bytes: &[u8]) -> Result<Bundle, BundleError> {
        // The version first, leniently, so a bundle from a newer format is
        // refused for its version rather than for its shape.
        #[derive(Deserialize)]
        struct Version {
            format_version: Option<serde_json::Value>,
        }
        let version: Version =
            serde_json::from_slice(bytes).map_err(|e| BundleError::Json(e.to_string()))?;
        match version
            .format_version
            .as_ref()
            .map(serde_json::Value::as_u64)
        {
            None => return Err(BundleError::MissingVersion),
            Some(Some(v))
                if (u64::from(MIN_FORMAT_VERSION)..=u64::from(FORMAT_VERSION)).contains(&v) => {}
            Some(Some(v)) => return Err(BundleError::UnknownVersion { found: v }),
            Some(None) => {
                return Err(BundleError::Schema(
                    "`format_version` is not a number".to_string(),
                ));
            }
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw<'a> {
            format_version: u32,
            digest: String,
            #[serde(borrow)]
            enforcement: &'a serde_json::value::RawValue,
            #[serde(borrow)]
            provenance: &'a serde_json::value::RawValue,
        }
        let raw: Raw<'_> =
            serde_json::from_slice(bytes).map_err(|e| BundleError::Schema(e.to_string()))?;
        let computed = format!(
            "sha256:{}",
            hex(&Sha256::digest(raw.enforcement.get().as_bytes()))
        );
        if computed != raw.digest {
            return Err(BundleError::DigestMismatch {
                recorded: raw.digest,
                computed,
            });
        }
        let enforcement: Tables = serde_json::from_str(raw.enforcement.get())
            .map_err(|e| BundleError::Schema(e.to_string()))?;
        let provenance: Provenance = serde_json::from_str(raw.provenance.get())
            .map_err(|e| BundleError::Schema(e.to_string()))?;
        Ok(Bundle {
            format_version: raw.format_version,
            digest: raw.digest,
            enforcement,
            provenance,
        })
    }
}
