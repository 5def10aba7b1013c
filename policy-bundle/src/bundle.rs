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

mod advisor;
mod l7;

pub use advisor::*;
pub use l7::*;

use crate::matcher::{AddrSet, HostPattern, HttpPathGlob, MethodSet, PortSet};
use crate::vocab::{BinaryRef, Dest, Injection, LandlockMode, Origin, SecretSource};

/// The bundle format this build writes. Version 2 added JSON-RPC and MCP
/// endpoints; every new field has a default that means what version 1
/// meant, so version 1 bundles are still read. GraphQL and WebSocket
/// endpoints came later within version 2: their fields are optional too,
/// and a reader that does not know them refuses the bundle (an unknown
/// `protocol` variant or field fails to deserialize) rather than
/// misreading it.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The oldest bundle format this build reads.
pub(crate) const MIN_FORMAT_VERSION: u32 = 1;

/// Written and read through `WireBundle`, which puts the L7 rules'
/// origins in the provenance section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "WireBundle")]
pub struct Bundle {
    /// `FORMAT_VERSION` when written by this build; anything from 1 up to it when read.
    pub format_version: u32,
    /// `sha256:<hex>` of the canonical JSON of `enforcement`.
    pub digest: String,
    /// What is enforced, and all the digest covers.
    pub enforcement: Tables,
    /// Where each rule came from; outside the digest, so layout and file names never change it.
    pub provenance: Provenance,
}

/// Everything the kernel and the supervisor enforce: the three artefacts
/// (Landlock, the seccomp decision table, L7 rules) and the credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tables {
    /// What the workload may do on the filesystem.
    pub landlock: LandlockTable,
    /// Who the workload runs as.
    pub process: ProcessTable,
    /// What the seccomp filter denies and what it asks the supervisor about.
    pub seccomp: SeccompTable,
    /// The inspected endpoints; a route's [`Via::L7`] indexes this list.
    pub l7: Vec<L7Endpoint>,
    /// Secrets the proxy injects into requests; the workload sees only placeholders.
    pub credentials: Vec<CredentialBinding>,
    /// Secrets that live inside the sandbox, with the hosts they unlock.
    pub secrets: Vec<SecretEntry>,
    /// Who may reach the advisor endpoint (`policy.local`); `None`: nobody,
    /// and the name does not resolve. Left out of the JSON when `None`, so
    /// policies without the statement keep their digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advisor: Option<AdvisorTable>,
}

/// The Landlock ruleset, with each right tagged by the ABI that introduced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockTable {
    /// Whether a kernel short of `min_abi` (or of a right) stops the launch.
    pub mode: LandlockMode,
    /// The lowest Landlock ABI `hard` mode accepts.
    pub min_abi: u8,
    /// Sorted by path; a path absent here gets no rights.
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

/// One path and the rights granted beneath it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockPath {
    /// Absolute, as written in the policy.
    pub path: String,
    /// Rights split by the ABI that introduced them, so the supervisor
    /// applies the best the running kernel offers and reports the rest.
    pub access: Vec<RightsAtAbi>,
}

/// The rights one Landlock ABI introduced, so a kernel at a lower ABI can drop exactly these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RightsAtAbi {
    /// 1 to 7.
    pub abi: u8,
    /// Right names as [`crate::kernel::landlock::FsRight::name`] spells them.
    pub rights: Vec<String>,
}

/// The user and group the supervisor switches to before `exec`; `None` keeps its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessTable {
    /// As the policy's `run_as` names it.
    pub user: Option<String>,
    /// As the policy's `run_as` names it.
    pub group: Option<String>,
}

/// The seccomp decision table: denials, traps, and what a trapped `connect` may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompTable {
    /// Answered in the kernel with an errno; the supervisor never sees them.
    pub deny: Vec<DeniedSyscall>,
    /// Syscalls answered by the supervisor (`SECCOMP_RET_USER_NOTIF`) when
    /// all their conditions hold.
    pub notify: Vec<TrappedSyscall>,
    /// Per binary identity: which routes it may use and which names the DNS
    /// stub answers for it.
    pub identities: Vec<Identity>,
    /// Every destination a binary may reach, shared by content; identities index it.
    pub routes: Vec<Route>,
}

/// A syscall the filter refuses with an errno.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeniedSyscall {
    /// The syscall's name, as in [`crate::kernel::deny_list`].
    pub syscall: String,
    /// Errno name, such as `EPERM`.
    pub errno: String,
    /// All conditions must hold for the denial to apply; none means always.
    pub when: Vec<ArgCondition>,
}

/// A syscall the filter hands to the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrappedSyscall {
    /// The syscall's name, as [`crate::kernel::TrappedCall`] spells it.
    pub syscall: String,
    /// All conditions must hold for the call to be trapped; none means always.
    pub when: Vec<ArgCondition>,
}

/// A test on one syscall argument register.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgCondition {
    /// Argument index, 0 to 5.
    pub arg: u8,
    /// How the register is compared with `value`.
    pub op: ArgOp,
    /// Compared with the whole 64-bit register unless `op` masks it.
    pub value: u64,
}

/// How an [`ArgCondition`] compares; the few the tables need, each one BPF comparison.
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

/// What one binary may reach, found by the path (and hash) of the executable that calls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The executable this identity is for.
    pub binary: BinaryRef,
    /// Indexes into [`SeccompTable::routes`], sorted.
    pub routes: Vec<u32>,
    /// Names the DNS stub answers for this binary.
    pub dns: Vec<HostPattern>,
}

/// A destination and how a connection to it is carried.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// A host name or a set of addresses.
    pub dest: Dest,
    /// Never empty.
    pub ports: PortSet,
    /// For a host destination: the addresses it may resolve to; `None` is any public address.
    pub addresses: Option<AddrSet>,
    /// Whether the supervisor inspects the connection, and how.
    pub via: Via,
    /// The author accepted that credentials may pass here uninspected.
    pub uninspected_credentials: bool,
    /// Placeholders of credentials whose binding covers the upgrade are
    /// replaced in client WebSocket text messages instead of refused. Left out of the JSON
    /// when off, so bundles that never use it read and hash as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub websocket_credential_rewrite: bool,
    /// Placeholders of credentials whose binding covers the request are
    /// replaced in REST request bodies instead of refused. Left out of the JSON when off,
    /// as `websocket_credential_rewrite` is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub request_body_credential_rewrite: bool,
}

impl Route {
    /// The credential that closes this route, if any. A route that relays
    /// uninspected (L4, or `http` with `tls skip`) to a host a credential
    /// is bound to carries that credential's placeholder out unchecked;
    /// unless the author accepted it (`uninspected_credentials`), every
    /// connection over it is refused, as OpenShell's supervisor refuses
    /// such a CONNECT (`EndpointCredentialGuard::blocks_connect`). A
    /// transparent `tcp` route is OpenShell's `protocol: tcp`, which that
    /// guard does not close.
    pub fn credential_guard<'c>(
        &self,
        credentials: &'c [CredentialBinding],
    ) -> Option<&'c CredentialBinding> {
        if self.uninspected_credentials || !matches!(self.via, Via::L4 | Via::Uninspected) {
            return None;
        }
        let Dest::Host(host) = &self.dest else {
            return None;
        };
        credentials
            .iter()
            .find(|c| c.hosts.iter().any(|h| h.may_overlap(host)))
    }
}

/// How a permitted connection is carried.
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

/// A secret the proxy injects into requests to some hosts; it never enters the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialBinding {
    /// The credential's name in the policy, for logs.
    pub name: String,
    /// Where the supervisor reads the secret.
    pub source: SecretSource,
    /// The stand-in the workload sends, when injection replaces it.
    pub placeholder: Option<String>,
    /// How the secret goes into the request.
    pub inject: Injection,
    /// Only requests to these hosts get the secret.
    pub hosts: Vec<HostPattern>,
    /// `None` is any method.
    pub methods: Option<MethodSet>,
    /// `None` is any path.
    pub paths: Option<Vec<HttpPathGlob>>,
}

impl CredentialBinding {
    /// Whether the binding covers a request: its host (normalized), method
    /// (uppercase) and canonical path. The one test of where the secret
    /// may go, whether it is injected into a header or put in place of a
    /// placeholder in a body or a WebSocket message: a `methods GET`
    /// binding keeps its secret out of a `POST` body as out of a `POST`
    /// header.
    #[must_use]
    pub fn covers(&self, host: &str, method: &str, path: &str) -> bool {
        self.hosts.iter().any(|h| h.matches(host))
            && self.methods.as_ref().is_none_or(|m| m.contains(method))
            && self
                .paths
                .as_ref()
                .is_none_or(|ps| ps.iter().any(|p| p.matches(path)))
    }
}

/// A secret that lives inside the sandbox: not injected, recorded so that
/// `check` and the prover can tell which binaries could send it where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretEntry {
    /// The secret's name in the policy, for logs.
    pub name: String,
    /// Where the workload finds it.
    pub source: SecretSource,
    /// The hosts it unlocks.
    pub hosts: Vec<HostPattern>,
}

/// Where each piece of the enforcement content came from. Lists run
/// parallel to the enforcement lists; a route or rule written several times
/// keeps every origin. The L7 rules carry their origins themselves
/// ([`Sourced`]); the bundle's JSON writes them here, as `l7`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The policy's name.
    pub policy: String,
    /// The source files, in the order they were read.
    pub files: Vec<String>,
    /// Parallel to [`SeccompTable::routes`].
    pub routes: Vec<Vec<Origin>>,
    /// Parallel to each identity's `routes`: the rules that gave that binary
    /// that route. Routes are shared by content across rules written for
    /// different binaries, so blame has to start from the binary.
    pub identities: Vec<Vec<Vec<Origin>>>,
    /// Parallel to [`Tables::credentials`].
    pub credentials: Vec<Origin>,
    /// Parallel to [`Tables::secrets`].
    pub secrets: Vec<Origin>,
    /// The rules that granted filesystem rights.
    pub fs: Vec<Origin>,
    /// The `advisor` statement, when there is one.
    pub advisor: Option<Origin>,
}

/// The bundle's JSON: the provenance section with the L7 origins taken
/// from the endpoints' rules.
#[derive(Serialize)]
struct WireBundleRef<'a> {
    format_version: u32,
    digest: &'a str,
    enforcement: &'a Tables,
    provenance: BorrowedProvenance<'a>,
}

type BorrowedProvenance<'a> =
    WireProvenance<&'a str, &'a [String], &'a [Vec<Origin>], &'a [Vec<Vec<Origin>>], &'a [Origin]>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireBundle {
    format_version: u32,
    digest: String,
    enforcement: Tables,
    provenance: OwnedProvenance,
}

type OwnedProvenance =
    WireProvenance<String, Vec<String>, Vec<Vec<Origin>>, Vec<Vec<Vec<Origin>>>, Vec<Origin>>;

/// The provenance section, owned for reading and borrowed for writing.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireProvenance<S, F, R, I, O> {
    policy: S,
    files: F,
    routes: R,
    #[serde(default)]
    identities: I,
    l7: Vec<L7Provenance>,
    credentials: O,
    secrets: O,
    fs: O,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    advisor: Option<Origin>,
}

impl From<WireBundle> for Bundle {
    fn from(w: WireBundle) -> Self {
        let (enforcement, provenance) = join_provenance(w.enforcement, w.provenance);
        Bundle {
            format_version: w.format_version,
            digest: w.digest,
            enforcement,
            provenance,
        }
    }
}

/// Hands each L7 endpoint its origins; endpoints beyond the provenance
/// list (older or hand-made bundles) keep none.
fn join_provenance(mut tables: Tables, p: OwnedProvenance) -> (Tables, Provenance) {
    for (ep, l7) in tables.l7.iter_mut().zip(p.l7) {
        ep.attach_provenance(l7);
    }
    let provenance = Provenance {
        policy: p.policy,
        files: p.files,
        routes: p.routes,
        identities: p.identities,
        credentials: p.credentials,
        secrets: p.secrets,
        fs: p.fs,
        advisor: p.advisor,
    };
    (tables, provenance)
}

impl Serialize for Bundle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = &self.provenance;
        WireBundleRef {
            format_version: self.format_version,
            digest: &self.digest,
            enforcement: &self.enforcement,
            provenance: WireProvenance {
                policy: &p.policy,
                files: &p.files,
                routes: &p.routes,
                identities: &p.identities,
                l7: self
                    .enforcement
                    .l7
                    .iter()
                    .map(L7Endpoint::provenance)
                    .collect(),
                credentials: &p.credentials,
                secrets: &p.secrets,
                fs: &p.fs,
                advisor: p.advisor.clone(),
            },
        }
        .serialize(s)
    }
}

/// Why a bundle was refused on load; a refused bundle is never half applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// Not JSON at all.
    #[error("the bundle is not valid JSON: {0}")]
    Json(String),
    #[error(
        "the bundle has format version {found}; this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION}"
    )]
    /// Written by a newer (or much older) build.
    UnknownVersion {
        /// As written in the bundle.
        found: u64,
    },
    /// Not a bundle, or written before versions were recorded.
    #[error("the bundle has no `format_version`")]
    MissingVersion,
    /// JSON, but a field is missing, unknown or of the wrong type.
    #[error("the bundle does not match the expected structure: {0}")]
    Schema(String),
    #[error(
        "the bundle's digest does not match its content (recorded {recorded}, computed {computed}): it was modified or corrupted"
    )]
    /// The enforcement content is not what was signed and hashed.
    DigestMismatch {
        /// The `digest` field, as written.
        recorded: String,
        /// Of the `enforcement` bytes as read.
        computed: String,
    },
}

/// `sha256:<hex>` of the canonical (compact) JSON encoding of the
/// enforcement content.
pub(crate) fn digest_of(content: &Tables) -> String {
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
    /// A bundle at `FORMAT_VERSION` with its digest computed; the compiler's only way to make one.
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
        let provenance: OwnedProvenance = serde_json::from_str(raw.provenance.get())
            .map_err(|e| BundleError::Schema(e.to_string()))?;
        let (enforcement, provenance) = join_provenance(enforcement, provenance);
        Ok(Bundle {
            format_version: raw.format_version,
            digest: raw.digest,
            enforcement,
            provenance,
        })
    }
}
