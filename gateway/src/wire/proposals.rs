//! Proposals and revisions: what a proposer sends, what the gateway
//! stored and proved, and the approved revisions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::shape;
use crate::store::{ProposalRow, RevisionRow};

/// What a proposal is waiting for, or what became of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProposalState {
    /// Does not compile; nothing to approve.
    Invalid,
    Pending,
    Approved,
    Rejected,
}

impl ProposalState {
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            ProposalState::Invalid => "invalid",
            ProposalState::Pending => "pending",
            ProposalState::Approved => "approved",
            ProposalState::Rejected => "rejected",
        }
    }

    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "invalid" => Some(Self::Invalid),
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }
}

/// `POST /v1/policies/{name}/proposals`: what a proposer sends.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalRequest {
    /// The policy text.
    pub source: String,
    /// `policy` (this language, the default) or `yaml` (OpenShell).
    #[serde(default = "default_format")]
    pub format: String,
    /// An OpenShell credentials file, when the policy needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The text of the files the source includes, by their path relative
    /// to the policy's directory (`fragments/system.policy`): the only
    /// place an `include` is looked up, never the gateway's disk.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

fn default_format() -> String {
    "policy".into()
}

/// `POST /v1/proposals/{id}/approve`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// The proposal's review token, as reviewed.
    pub review_token: String,
}

/// `POST /v1/proposals/{id}/reject`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectRequest {
    pub reason: String,
}

/// `POST /v1/policies/{name}/rollback`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The revision whose source is proposed again.
    pub revision: i64,
}

/// `manual` or `auto`.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema only: the store keeps the word")]
enum Decision {
    Manual,
    Auto,
}

/// A proposal as stored, with its proof or diagnostics.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Proposal {
    #[schemars(range(min = 1))]
    pub id: i64,
    #[schemars(with = "shape::Name")]
    pub policy: String,
    pub state: ProposalState,
    /// The active revision when proposed; `null` for a first revision.
    pub base_revision: Option<i64>,
    #[schemars(with = "Option<shape::Digest>")]
    pub base_digest: Option<String>,
    pub format: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// The candidate's digest; `null` when it does not compile.
    #[schemars(with = "Option<shape::Digest>")]
    pub digest: Option<String>,
    #[schemars(with = "Option<shape::Verdict>")]
    pub verdict: Option<String>,
    /// The document of `diff --prove --format json` (base → candidate),
    /// stored as the prover wrote it; open, as that document grows.
    // Read with `Proposal::proof_view`.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub proof: Option<Value>,
    /// The document of `check --format json` when the candidate does not
    /// compile.
    // Read with `Proposal::check_view`.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub diagnostics: Option<Value>,
    /// What an approval must present; `null` for an invalid proposal.
    pub review_token: Option<String>,
    pub proposer: String,
    pub decided_by: Option<String>,
    #[schemars(with = "Option<Decision>")]
    pub decision: Option<String>,
    pub reason: Option<String>,
    /// The revision an approval made.
    pub revision: Option<i64>,
    /// The revision whose source a rollback proposes again.
    pub rollback_of: Option<i64>,
    #[schemars(with = "shape::Time")]
    pub created_at: i64,
    #[schemars(range(min = 0))]
    pub version: i64,
    /// True while the proposal is pending.
    pub awaiting_approval: bool,
}

impl From<&ProposalRow> for Proposal {
    fn from(p: &ProposalRow) -> Self {
        Self {
            id: p.id,
            policy: p.policy.clone(),
            state: p.state,
            base_revision: p.base_revision,
            base_digest: p.base_digest.clone(),
            format: p.format.clone(),
            source: p.source.clone(),
            credentials: p.credentials.clone(),
            files: p.files.clone(),
            digest: p.digest.clone(),
            verdict: p.verdict.clone(),
            proof: p.proof.clone(),
            diagnostics: p.diagnostics.clone(),
            review_token: p.review_token.clone(),
            proposer: p.proposer.clone(),
            decided_by: p.decided_by.clone(),
            decision: p.decision.clone(),
            reason: p.reason.clone(),
            revision: p.revision,
            rollback_of: p.rollback_of,
            created_at: p.created_at,
            version: p.version,
            awaiting_approval: p.state == ProposalState::Pending,
        }
    }
}

impl Proposal {
    /// What a person reads of the proof; `None` without one. The proof
    /// is the prover's document and stays open on the wire: this view
    /// reads the fields the client shows and tolerates the rest.
    #[must_use]
    pub fn proof_view(&self) -> Option<ProofView> {
        self.proof
            .as_ref()
            .and_then(|p| serde_json::from_value(p.clone()).ok())
    }

    /// What a person reads of the diagnostics of a candidate that does
    /// not compile; `None` without them.
    #[must_use]
    pub fn check_view(&self) -> Option<CheckReport> {
        self.diagnostics
            .as_ref()
            .and_then(|d| serde_json::from_value(d.clone()).ok())
    }
}

/// The proof's verdict and findings, as `show` prints them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProofView {
    pub verdict: Option<String>,
    pub findings: Vec<FindingView>,
    /// Why there is no proof, when there is none.
    pub inconclusive: Option<String>,
}

/// One finding of the prover.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FindingView {
    pub category: String,
    pub code: String,
    pub message: String,
    /// Accepted by an acceptance in the policy.
    pub suppressed: bool,
    pub witness: WitnessView,
}

/// The concrete request a finding is witnessed by.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WitnessView {
    pub binary: String,
    pub host: String,
    pub port: Option<u16>,
    pub path: Option<String>,
}

/// `check --format json` of a candidate that does not compile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckReport {
    pub files: Vec<CheckFile>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckFile {
    pub path: String,
    pub diagnostics: Vec<DiagnosticView>,
}

/// One diagnostic, where it is and what it says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DiagnosticView {
    pub severity: String,
    pub code: String,
    pub file: String,
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

/// One line of `GET /v1/proposals`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct ProposalSummary {
    #[schemars(range(min = 1))]
    pub id: i64,
    #[schemars(with = "shape::Name")]
    pub policy: String,
    pub state: ProposalState,
    #[schemars(with = "Option<shape::Verdict>")]
    pub verdict: Option<String>,
    pub proposer: String,
    pub base_revision: Option<i64>,
    pub revision: Option<i64>,
    #[schemars(with = "shape::Time")]
    pub created_at: i64,
}

impl From<&ProposalRow> for ProposalSummary {
    fn from(p: &ProposalRow) -> Self {
        Self {
            id: p.id,
            policy: p.policy.clone(),
            state: p.state,
            verdict: p.verdict.clone(),
            proposer: p.proposer.clone(),
            base_revision: p.base_revision,
            revision: p.revision,
            created_at: p.created_at,
        }
    }
}

/// `GET /v1/proposals`: proposals, by id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct ProposalList {
    pub proposals: Vec<ProposalSummary>,
}

/// An approved, immutable revision.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Revision {
    #[schemars(with = "shape::Name")]
    pub policy: String,
    #[schemars(range(min = 1))]
    pub revision: i64,
    pub format: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    #[schemars(with = "shape::Digest")]
    pub digest: String,
    /// The gateway's signature of the revision, `KEY_ID:BASE64`.
    #[schemars(pattern(r"^[^:]+:.+$"))]
    pub signature: String,
    pub author: String,
    pub approved_by: String,
    #[schemars(range(min = 1))]
    pub proposal: i64,
    #[schemars(with = "shape::Time")]
    pub created_at: i64,
}

impl From<&RevisionRow> for Revision {
    fn from(r: &RevisionRow) -> Self {
        Self {
            policy: r.policy.clone(),
            revision: r.revision,
            format: r.format.clone(),
            source: r.source.clone(),
            credentials: r.credentials.clone(),
            files: r.files.clone(),
            digest: r.digest.clone(),
            signature: r.signature.clone(),
            author: r.author.clone(),
            approved_by: r.approved_by.clone(),
            proposal: r.proposal,
            created_at: r.created_at,
        }
    }
}

/// `GET /v1/policies/{name}/revisions/{rev}`: the revision and its
/// compiled bundle.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct RevisionWithBundle {
    #[serde(flatten)]
    pub revision: Revision,
    /// The compiled bundle document (its inner shape is policy-lang's).
    #[schemars(with = "Map<String, Value>")]
    pub bundle: Value,
}

/// `GET /v1/policies/{name}/revisions`: every revision, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct RevisionList {
    #[schemars(with = "shape::Name")]
    pub policy: String,
    #[schemars(range(min = 1))]
    pub active_revision: Option<i64>,
    pub revisions: Vec<Revision>,
}
