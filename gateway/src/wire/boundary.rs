//! Boundaries: what an admin sends to set one, what the gateway keeps,
//! and the refusal of a boundary that the policy's active revision
//! exceeds (or that does not compile), which carries the findings.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ErrorDetail, shape};
use crate::store::BoundaryRow;

/// `PUT /v1/policies/{name}/boundary`: the boundary policy, sent like a
/// proposal.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoundaryRequest {
    /// The boundary policy's text.
    pub(crate) source: String,
    /// `policy` (this language, the default) or `yaml` (OpenShell).
    #[serde(default = "default_format")]
    pub(crate) format: String,
    /// An OpenShell credentials file, when the boundary needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The text of the files the source includes, by their path relative
    /// to the policy's directory.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
}

fn default_format() -> String {
    "policy".into()
}

/// A policy's boundary as stored.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Boundary {
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    pub(crate) format: String,
    pub(crate) source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
    /// The compiled boundary's digest; a proposal names it in
    /// `boundary_digest`.
    #[schemars(with = "shape::Digest")]
    pub(crate) digest: String,
    /// The policy's active revision when the boundary was set; `null`
    /// when it had none.
    pub(crate) checked_revision: Option<i64>,
    /// That revision's proof within the boundary
    /// (`diff --prove --within --format json`): `within`, or `unsupported`
    /// or `inconclusive` (set anyway, and said so); `null` without a
    /// revision.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) containment: Option<Value>,
    pub(crate) set_by: String,
    #[schemars(with = "shape::Time")]
    pub(crate) set_at: i64,
}

impl From<&BoundaryRow> for Boundary {
    fn from(b: &BoundaryRow) -> Self {
        Self {
            policy: b.policy.clone(),
            format: b.format.clone(),
            source: b.source.clone(),
            credentials: b.credentials.clone(),
            files: b.files.clone(),
            digest: b.digest.clone(),
            checked_revision: b.checked_revision,
            containment: b.containment.clone(),
            set_by: b.set_by.clone(),
            set_at: b.set_at,
        }
    }
}

/// `DELETE /v1/policies/{name}/boundary`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct RemovedBoundary {
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    pub(crate) removed: bool,
}

/// `422` to `PUT /v1/policies/{name}/boundary`: the error, and what
/// backs it: the active revision's containment findings
/// (`code: boundary_exceeded`), or the boundary's diagnostics when it
/// does not compile (`code: boundary_invalid`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct BoundaryRefusal {
    pub(crate) error: ErrorDetail,
    /// `diff --prove --within --format json` of the boundary and the
    /// active revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) containment: Option<Value>,
    /// `check --format json` of the boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) diagnostics: Option<Value>,
}
