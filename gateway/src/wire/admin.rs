//! Sandboxes, tokens, the signed envelope and the audit log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Phase, Role, shape};
use crate::audit::{AuditRow, Problem};
use crate::driver::RunSpec;
use crate::store::SandboxRow;

/// `POST /v1/sandboxes`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateSandboxRequest {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "shape::Ttl")]
    pub(crate) ttl_seconds: Option<u64>,
    /// Run the sandbox with a driver; without it the sandbox is only
    /// registered, to run elsewhere with the token answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<RunSpec>,
}

/// The sandbox and its token (named `sandbox:ID`), shown once.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct SandboxCreated {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(with = "shape::Token")]
    pub(crate) token: String,
}

/// `POST /v1/sandboxes/{id}/token`; the body may be left out (no expiry).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RenewTokenRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "shape::Ttl")]
    pub(crate) ttl_seconds: Option<u64>,
}

/// The sandbox's new token, shown once.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct SandboxToken {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(with = "shape::Token")]
    pub(crate) token: String,
    pub(crate) expires_at: Option<i64>,
}

/// `POST /v1/sandboxes/{id}/session`: a new session token of the same
/// generation, shown once; the one that asked works until it expires.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct SessionToken {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    pub(crate) generation: i64,
    #[schemars(with = "shape::Token")]
    pub(crate) token: String,
    pub(crate) expires_at: i64,
}

/// `DELETE /v1/sandboxes/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct DeletedSandbox {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(extend("const" = true))]
    pub(crate) deleted: bool,
}

/// What a supervisor reported.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(dead_code, reason = "a schema only: the store keeps the word")]
enum SandboxResult {
    Applied,
    NetworkOnly,
    Refused,
}

/// A sandbox, what its policy wants it to run and what it says it runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Sandbox {
    #[schemars(with = "shape::Name")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    /// The policy's active revision.
    pub(crate) desired_revision: Option<i64>,
    #[schemars(with = "Option<shape::Digest>")]
    pub(crate) desired_digest: Option<String>,
    pub(crate) applied_revision: Option<i64>,
    #[schemars(with = "Option<shape::Digest>")]
    pub(crate) applied_digest: Option<String>,
    #[schemars(with = "Option<SandboxResult>")]
    pub(crate) result: Option<String>,
    #[schemars(length(max = 2048))]
    pub(crate) error: Option<String>,
    pub(crate) reported_at: Option<i64>,
    #[schemars(range(min = 0))]
    pub(crate) version: i64,
    /// The last report was `network_only`.
    pub(crate) relaunch_required: bool,
    /// The applied revision is the desired one.
    pub(crate) in_sync: bool,
    /// For a sandbox the gateway runs: where it is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) phase: Option<Phase>,
    /// Why it is in its phase, when something went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// Counts starts from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) generation: Option<i64>,
    /// When it entered its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) phase_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<RunSpec>,
    /// Where its driver runs it: only a gateway whose driver is of this
    /// place acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) place: Option<String>,
}

impl From<&SandboxRow> for Sandbox {
    fn from(s: &SandboxRow) -> Self {
        Self {
            id: s.id.clone(),
            policy: s.policy.clone(),
            desired_revision: s.desired_revision,
            desired_digest: s.desired_digest.clone(),
            applied_revision: s.applied_revision,
            applied_digest: s.applied_digest.clone(),
            result: s.result.clone(),
            error: s.error.clone(),
            reported_at: s.reported_at,
            version: s.version,
            relaunch_required: s.result.as_deref() == Some("network_only"),
            in_sync: s.desired_revision.is_some() && s.applied_revision == s.desired_revision,
            phase: s.phase,
            reason: s.reason.clone(),
            generation: s.phase.map(|_| s.generation),
            phase_at: s.phase_at,
            run: s.spec.clone(),
            place: s.place.clone(),
        }
    }
}

/// `GET /v1/sandboxes`: sandboxes, by id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct SandboxList {
    pub(crate) sandboxes: Vec<Sandbox>,
}

/// `POST /v1/sandboxes/{id}/status`: what a supervisor did with a
/// revision. `revision` must be a revision of the sandbox's policy and
/// `digest` its digest; `error` is kept up to 2 KiB.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusReportRequest {
    pub(crate) revision: i64,
    pub(crate) digest: String,
    #[schemars(with = "SandboxResult")]
    pub(crate) result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// What the signature covers (its canonical JSON, keys sorted, no
/// spaces).
// The server sends `bundle_trust::Envelope`; this is its serialized
// form, which a test below holds to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Claims {
    #[schemars(with = "shape::Digest")]
    pub(crate) digest: String,
    #[schemars(with = "shape::Time")]
    pub(crate) issued_at: i64,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(range(min = 1))]
    pub(crate) revision: i64,
    #[schemars(with = "shape::Name")]
    pub(crate) sandbox: String,
    /// The client's `nonce`, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[A-Za-z0-9_-]{16,128}$"))]
    pub(crate) nonce: Option<String>,
}

/// `GET /v1/sandboxes/{id}/bundle`: the signed envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Envelope {
    pub(crate) claims: Claims,
    #[schemars(length(min = 1))]
    pub(crate) key_id: String,
    /// The Ed25519 signature of the claims' canonical JSON, base64.
    #[schemars(extend("contentEncoding" = "base64"))]
    pub(crate) signature: String,
    /// The bundle's bytes, exactly as `openshell-policy compile` writes
    /// them.
    pub(crate) bundle: String,
}

/// `POST /v1/tokens`: a token for a person or a program.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateTokenRequest {
    #[schemars(with = "shape::Name")]
    pub(crate) name: String,
    #[schemars(with = "PersonRole")]
    pub(crate) role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "shape::Ttl")]
    pub(crate) ttl_seconds: Option<u64>,
}

/// The roles `POST /v1/tokens` gives; a sandbox's token comes with its
/// sandbox.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema only")]
enum PersonRole {
    Admin,
    Author,
    Reader,
}

/// The token, shown once.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct TokenCreated {
    #[schemars(with = "shape::Name")]
    pub(crate) name: String,
    pub(crate) role: Role,
    #[schemars(with = "shape::Token")]
    pub(crate) token: String,
}

/// A token as listed: what an admin needs to decide whether to revoke it,
/// and no way to use it (neither the token nor its hash).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct TokenInfo {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) sandbox: Option<String>,
    pub(crate) expires_at: Option<i64>,
    #[schemars(with = "shape::Time")]
    pub(crate) created_at: i64,
}

/// `GET /v1/tokens`: tokens, by name.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct TokenList {
    pub(crate) tokens: Vec<TokenInfo>,
}

/// `DELETE /v1/tokens/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct RevokedToken {
    pub(crate) name: String,
    #[schemars(extend("const" = true))]
    pub(crate) revoked: bool,
}

/// `GET /v1/audit`: a page; `next` is the `after` of the next page,
/// `null` on the last.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct AuditPage {
    #[schemars(length(max = 1000))]
    pub(crate) rows: Vec<AuditRow>,
    #[schemars(range(min = 1))]
    pub(crate) next: Option<i64>,
}

/// The chain's head as last written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct AuditHead {
    #[schemars(range(min = 0))]
    pub(crate) seq: i64,
    pub(crate) hash: String,
}

/// `GET /v1/audit/verify`: `ok` is false when any problem was found.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct AuditVerification {
    pub(crate) ok: bool,
    pub(crate) rows: u64,
    pub(crate) head: AuditHead,
    pub(crate) problems: Vec<Problem>,
}
