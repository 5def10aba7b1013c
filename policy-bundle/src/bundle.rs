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

mod l7;

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

/// Written and read through [`WireBundle`], which puts the L7 rules'
/// origins in the provenance section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "WireBundle")]
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
/// keeps every origin. The L7 rules carry their origins themselves
/// ([`Sourced`]); the bundle's JSON writes them here, as `l7`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    pub policy: String,
    pub files: Vec<String>,
    pub routes: Vec<Vec<Origin>>,
    /// Parallel to each identity's `routes`: the rules that gave that binary
    /// that route. Routes are shared by content across rules written for
    /// different binaries, so blame has to start from the binary.
    pub identities: Vec<Vec<Vec<Origin>>>,
    pub credentials: Vec<Origin>,
    pub secrets: Vec<Origin>,
    pub fs: Vec<Origin>,
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
            },
        }
        .serialize(s)
    }
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
