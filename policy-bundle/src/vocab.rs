//! The words the bundle and the front end share: where a rule came from,
//! what a destination is, how a secret is found and injected, and the
//! enforcement modes. They are defined here, under the bundle, so that a
//! change to the syntax tree can never change what a bundle means.

use serde::{Deserialize, Serialize};

use crate::matcher::{AddrSet, BinaryGlob, HostPattern};

/// Where a rule came from, for blame, logs and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Origin {
    pub file: String,
    pub line: u32,
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

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BinaryRef {
    pub glob: BinaryGlob,
    /// Lowercase hex SHA-256 the executable must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    Host(HostPattern),
    Addrs(AddrSet),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    Env(String),
    File(String),
}

/// How every credential placeholder the supervisor hands the workload
/// begins, so a message can be searched for one without knowing the
/// random part.
pub const PLACEHOLDER_PREFIX: &str = "openshell-placeholder-";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Injection {
    /// Set this header to the template with `{secret}` replaced.
    Header { name: String, template: String },
    /// Replace the placeholder wherever it appears in request headers.
    Replace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandlockMode {
    BestEffort,
    Hard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Enforce,
    Audit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// The proxy terminates TLS when the client speaks it, else reads plain HTTP.
    Auto,
    /// The connection is relayed without inspection.
    Skip,
}
