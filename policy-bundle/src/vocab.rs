//! The words the bundle and the front end share: where a rule came from,
//! what a destination is, how a secret is found and injected, and the
//! enforcement modes. They are defined here, under the bundle, so that a
//! change to the syntax tree can never change what a bundle means.

use serde::{Deserialize, Serialize};

use crate::matcher::{AddrSet, BinaryGlob, HostPattern};

/// Where a rule came from, for blame, logs and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Origin {
    /// As the compiler was given it: relative to the policy's directory.
    pub file: String,
    /// 1-based.
    pub line: u32,
    /// 1-based.
    pub column: u32,
    /// The rule's name: the binary set (or binary list) an endpoint rule is
    /// for, or the credential / secret name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
}

impl Origin {
    /// The documented blame form, `file:line (binaries)`, that `eval`, the
    /// proxy's refusals and the deny log all carry.
    pub fn blame(&self) -> String {
        if self.rule.is_empty() {
            self.to_string()
        } else {
            format!("{self} ({})", self.rule)
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// An executable, by path and optionally by content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BinaryRef {
    /// Matched against the resolved path of the running executable.
    pub glob: BinaryGlob,
    /// Lowercase hex SHA-256 the executable must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Where a route goes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    /// A name the workload asks the DNS stub for.
    Host(HostPattern),
    /// Addresses the workload connects to without a name.
    Addrs(AddrSet),
}

/// Where the supervisor reads a secret, at launch and on reload.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// An environment variable of the supervisor.
    Env(String),
    /// A file, read in full, trailing newlines dropped.
    File(String),
}

/// How every credential placeholder the supervisor hands the workload
/// begins, so a message can be searched for one without knowing the
/// random part.
pub const PLACEHOLDER_PREFIX: &str = "openshell-placeholder-";

/// Whether `bytes` hold the placeholder marker ([`PLACEHOLDER_PREFIX`]) as
/// it is, the test the proxy applies to request bodies and WebSocket text
/// messages: any token of that shape, known or not, since a server would
/// read it as one.
#[must_use]
pub fn holds_placeholder(bytes: &[u8]) -> bool {
    let marker = PLACEHOLDER_PREFIX.as_bytes();
    bytes.windows(marker.len()).any(|w| w == marker)
}

/// Hex digits after a placeholder's credential name: the supervisor makes
/// each placeholder `PLACEHOLDER_PREFIX`, the name, `-`, then 16 random
/// bytes in hex.
pub const PLACEHOLDER_RANDOM_HEX: usize = 32;

/// The credentials among `names` whose placeholders `bytes` hold, each
/// once, in the order first seen; `None` when a marker in `bytes` begins
/// no placeholder of theirs. What a placeholder is known by without its
/// random part: its credential's name and the shape of the rest, the
/// longest name first so that `a-b`'s placeholder is not read as `a`'s.
#[must_use]
pub fn placeholders_of<'a>(bytes: &[u8], names: &[&'a str]) -> Option<Vec<&'a str>> {
    let marker = PLACEHOLDER_PREFIX.as_bytes();
    let mut by_length = names.to_vec();
    by_length.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut found: Vec<&str> = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest.windows(marker.len()).position(|w| w == marker) {
        rest = rest.get(at + marker.len()..).unwrap_or_default();
        let name = by_length.iter().find(|n| names_placeholder(rest, n))?;
        if !found.contains(name) {
            found.push(name);
        }
    }
    Some(found)
}

/// The length of the placeholder of credential `name` that `text` starts
/// with, known by its shape (marker, name, `-`, the random hex), as
/// [`placeholders_of`] knows one.
#[must_use]
pub fn placeholder_len(text: &[u8], name: &str) -> Option<usize> {
    let rest = text.strip_prefix(PLACEHOLDER_PREFIX.as_bytes())?;
    names_placeholder(rest, name)
        .then(|| PLACEHOLDER_PREFIX.len() + name.len() + 1 + PLACEHOLDER_RANDOM_HEX)
}

/// Whether `rest` (what follows a marker) is `name`, `-` and the random part.
fn names_placeholder(rest: &[u8], name: &str) -> bool {
    rest.strip_prefix(name.as_bytes())
        .and_then(|r| r.strip_prefix(b"-"))
        .and_then(|r| r.get(..PLACEHOLDER_RANDOM_HEX))
        .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
}

/// How the proxy puts a secret into a request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Injection {
    /// Set this header to the template with `{secret}` replaced.
    Header {
        /// The header set, replacing any the client sent.
        name: String,
        /// Contains `{secret}` once, e.g. `Bearer {secret}`.
        template: String,
    },
    /// Replace the placeholder wherever it appears in request headers.
    Replace,
}

/// What the supervisor does when the kernel cannot enforce all of the Landlock table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandlockMode {
    /// Apply what the kernel supports and report what was dropped.
    BestEffort,
    /// Refuse to start the workload.
    Hard,
}

/// Whether a rule's refusals are enforced or only logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Requests a rule refuses are refused.
    Enforce,
    /// Requests are let through and logged as they would have been refused.
    Audit,
}

/// Whether the proxy reads the traffic of an HTTP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// The proxy terminates TLS when the client speaks it, else reads plain HTTP.
    Auto,
    /// The connection is relayed without inspection.
    Skip,
}
