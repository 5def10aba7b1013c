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
pub(crate) enum ProposalState {
    /// Does not compile; nothing to approve.
    Invalid,
    Pending,
    Approved,
    Rejected,
    /// Exceeds its policy's boundary: refused by the gateway as it came,
    /// with the containment findings; nothing can approve it.
    Refused,
}

impl ProposalState {
    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            ProposalState::Invalid => "invalid",
            ProposalState::Pending => "pending",
            ProposalState::Approved => "approved",
            ProposalState::Rejected => "rejected",
            ProposalState::Refused => "refused",
        }
    }

    #[must_use]
    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "invalid" => Some(Self::Invalid),
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            "refused" => Some(Self::Refused),
            _ => None,
        }
    }
}

/// `POST /v1/policies/{name}/proposals`: what a proposer sends.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProposalRequest {
    /// The policy text.
    pub(crate) source: String,
    /// `policy` (this language, the default) or `yaml` (OpenShell).
    #[serde(default = "default_format")]
    pub(crate) format: String,
    /// An OpenShell credentials file, when the policy needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The text of the files the source includes, by their path relative
    /// to the policy's directory (`fragments/system.policy`): the only
    /// place an `include` is looked up, never the gateway's disk.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
}

fn default_format() -> String {
    "policy".into()
}

/// `POST /v1/proposals/{id}/approve`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveRequest {
    /// The proposal's review token, as reviewed.
    pub(crate) review_token: String,
}

/// `POST /v1/proposals/{id}/reject`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectRequest {
    pub(crate) reason: String,
}

/// `POST /v1/policies/{name}/rollback`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RollbackRequest {
    /// The revision whose source is proposed again.
    pub(crate) revision: i64,
}

/// `POST /v1/policies/{name}/proposals/from-denials`: a deny log, from
/// which the gateway writes the narrowest change to the policy's active
/// revision that admits its denials (as `openshell-policy suggest`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DenialsRequest {
    /// The supervisor's deny log, OCSF JSON lines as it writes them.
    pub(crate) denials: String,
    /// The log's name, which the added rules' comments cite (`deny.log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) log_name: Option<String>,
    /// What to widen deliberately, as `suggest --generalize`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) generalize: Vec<Generalization>,
}

/// `POST /v1/sandboxes/{id}/proposals`: what a sandbox's supervisor sends
/// when its agent asks for a change from inside (`policy.local`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxProposalRequest {
    /// The deny-log lines the agent cited, as the supervisor wrote them.
    pub(crate) denials: String,
    /// Why the agent wants them admitted.
    #[schemars(length(max = 2000))]
    pub(crate) rationale: String,
}

/// A deliberate widening (`suggest --generalize`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Generalization {
    /// One `PREFIX/**` per method, PREFIX the denied paths' common prefix.
    Paths,
    /// `*.parent` for a host of three labels or more.
    Hosts,
}

impl Generalization {
    #[must_use]
    pub(crate) fn kind(self) -> advisor::Generalize {
        match self {
            Generalization::Paths => advisor::Generalize::Paths,
            Generalization::Hosts => advisor::Generalize::Hosts,
        }
    }
}

/// What the advisor read in the log and added to the source.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Advice {
    /// The active revision the denials were read against and the change
    /// is written onto.
    pub(crate) revision: i64,
    /// Lines in the log.
    pub(crate) lines: usize,
    /// Denials the change admits.
    pub(crate) denials: usize,
    /// Events that are not denials (allowed, audited, DNS, reloads).
    pub(crate) other: usize,
    /// Lines that could not be used, and why; the others are used.
    pub(crate) problems: Vec<LineProblem>,
    /// The rules added (OpenShell `network_policies` entries for YAML).
    pub(crate) rules: String,
    /// What a reviewer should know of them: credentialed hosts, what a
    /// widening added.
    pub(crate) notes: Vec<String>,
}

/// A log line that could not be used.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct LineProblem {
    #[schemars(range(min = 1))]
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// `manual`, `auto`, or `boundary` (refused by the gateway: the
/// candidate exceeds its policy's boundary).
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema only: the store keeps the word")]
enum Decision {
    Manual,
    Auto,
    Boundary,
}

/// A proposal as stored, with its proof or diagnostics.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Proposal {
    #[schemars(range(min = 1))]
    pub(crate) id: i64,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    pub(crate) state: ProposalState,
    /// The active revision when proposed; `null` for a first revision.
    pub(crate) base_revision: Option<i64>,
    #[schemars(with = "Option<shape::Digest>")]
    pub(crate) base_digest: Option<String>,
    pub(crate) format: String,
    pub(crate) source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
    /// The candidate's digest; `null` when it does not compile.
    #[schemars(with = "Option<shape::Digest>")]
    pub(crate) digest: Option<String>,
    #[schemars(with = "Option<shape::Verdict>")]
    pub(crate) verdict: Option<String>,
    /// The document of `diff --prove --format json` (base → candidate),
    /// stored as the prover wrote it; open, as that document grows.
    // Read with `Proposal::proof_view`.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) proof: Option<Value>,
    /// The document of `check --format json` when the candidate does not
    /// compile.
    // Read with `Proposal::check_view`.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) diagnostics: Option<Value>,
    /// The document of `diff --prove --within --format json` (the
    /// policy's boundary, the candidate); absent when the policy has no
    /// boundary. Its verdict `exceeds` makes the proposal `refused`.
    // Read with `Proposal::containment_view`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub(crate) containment: Option<Value>,
    /// The boundary the candidate was proved within; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<shape::Digest>")]
    pub(crate) boundary_digest: Option<String>,
    /// What an approval must present; `null` for an invalid or refused
    /// proposal.
    pub(crate) review_token: Option<String>,
    pub(crate) proposer: String,
    pub(crate) decided_by: Option<String>,
    #[schemars(with = "Option<Decision>")]
    pub(crate) decision: Option<String>,
    pub(crate) reason: Option<String>,
    /// The revision an approval made.
    pub(crate) revision: Option<i64>,
    /// The revision whose source a rollback proposes again.
    pub(crate) rollback_of: Option<i64>,
    /// `advisor` when the gateway wrote the candidate from denials
    /// (`from-denials`): it widens by construction, and only a person
    /// approves it. Absent when the proposer wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) origin: Option<String>,
    /// Why the sandbox that proposed it wants it, in its agent's words
    /// (`POST /v1/sandboxes/{id}/proposals`); a claim, not a finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rationale: Option<String>,
    #[schemars(with = "shape::Time")]
    pub(crate) created_at: i64,
    #[schemars(range(min = 0))]
    pub(crate) version: i64,
    /// True while the proposal is pending.
    pub(crate) awaiting_approval: bool,
    /// With `--approval auto`, why the gateway left the proposal to a
    /// person (a changed credential, a verdict other than
    /// `no-new-access`, a first revision). Only in the answer to the
    /// proposal itself; the audit log's `propose` row keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<String>,
    /// What the advisor read and added; only in the answer to a
    /// `from-denials` proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) advice: Option<Advice>,
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
            containment: p.containment.clone(),
            boundary_digest: p.boundary_digest.clone(),
            review_token: p.review_token.clone(),
            proposer: p.proposer.clone(),
            decided_by: p.decided_by.clone(),
            decision: p.decision.clone(),
            reason: p.reason.clone(),
            revision: p.revision,
            rollback_of: p.rollback_of,
            origin: p.origin.clone(),
            rationale: p.rationale.clone(),
            created_at: p.created_at,
            version: p.version,
            awaiting_approval: p.state == ProposalState::Pending,
            held: None,
            advice: None,
        }
    }
}

impl Proposal {
    /// What a person reads of the proof; `None` without one. The proof
    /// is the prover's document and stays open on the wire: this view
    /// reads the fields the client shows and tolerates the rest.
    #[must_use]
    pub(crate) fn proof_view(&self) -> Option<ProofView> {
        self.proof
            .as_ref()
            .and_then(|p| serde_json::from_value(p.clone()).ok())
    }

    /// What a person reads of the proof within the policy's boundary;
    /// `None` without a boundary.
    #[must_use]
    pub(crate) fn containment_view(&self) -> Option<ContainmentView> {
        self.containment
            .as_ref()
            .and_then(|p| serde_json::from_value(p.clone()).ok())
    }

    /// What a person reads of the diagnostics of a candidate that does
    /// not compile; `None` without them.
    #[must_use]
    pub(crate) fn check_view(&self) -> Option<CheckReport> {
        self.diagnostics
            .as_ref()
            .and_then(|d| serde_json::from_value(d.clone()).ok())
    }
}

/// The proof's verdict and findings, as `show` prints them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ProofView {
    pub(crate) verdict: Option<String>,
    pub(crate) findings: Vec<FindingView>,
    /// Credentials whose secret, injection or placeholder changed.
    pub(crate) credentials: Vec<CredentialChangeView>,
    /// Why there is no proof, when there is none.
    pub(crate) inconclusive: Option<String>,
}

/// One finding of the prover.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct FindingView {
    pub(crate) category: String,
    pub(crate) code: String,
    pub(crate) message: String,
    /// Accepted by an acceptance in the policy.
    pub(crate) suppressed: bool,
    pub(crate) witness: WitnessView,
    /// The candidate's rule that allows the witness.
    pub(crate) new_rule: Option<RuleView>,
}

/// Where a rule is: file and line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RuleView {
    pub(crate) file: String,
    pub(crate) line: u32,
}

/// The containment proof's verdict and excesses, as `show` prints them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ContainmentView {
    /// `within`, `exceeds`, `unsupported` or `inconclusive`.
    pub(crate) verdict: Option<String>,
    /// Requests the candidate allows and the boundary does not.
    pub(crate) findings: Vec<FindingView>,
    /// Filesystem rights and enforcement beyond the boundary's.
    pub(crate) sandbox: Vec<SandboxView>,
    /// What the prover cannot compare.
    pub(crate) unsupported: Vec<String>,
    pub(crate) inconclusive: Option<String>,
}

/// A filesystem right or an enforcement setting beyond the boundary's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct SandboxView {
    pub(crate) category: String,
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) rule: Option<RuleView>,
}

/// A credential that sends another secret, or puts it elsewhere.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CredentialChangeView {
    pub(crate) category: String,
    pub(crate) code: String,
    pub(crate) message: String,
}

/// The concrete request a finding is witnessed by.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct WitnessView {
    pub(crate) binary: String,
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    pub(crate) method: Option<String>,
    pub(crate) path: Option<String>,
}

/// `check --format json` of a candidate that does not compile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CheckReport {
    pub(crate) files: Vec<CheckFile>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CheckFile {
    pub(crate) path: String,
    pub(crate) diagnostics: Vec<DiagnosticView>,
}

/// One diagnostic, where it is and what it says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct DiagnosticView {
    pub(crate) severity: String,
    pub(crate) code: String,
    pub(crate) file: String,
    pub(crate) line: Option<u64>,
    pub(crate) column: Option<u64>,
    pub(crate) message: String,
}

/// One line of `GET /v1/proposals`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct ProposalSummary {
    #[schemars(range(min = 1))]
    pub(crate) id: i64,
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    pub(crate) state: ProposalState,
    #[schemars(with = "Option<shape::Verdict>")]
    pub(crate) verdict: Option<String>,
    pub(crate) proposer: String,
    pub(crate) base_revision: Option<i64>,
    pub(crate) revision: Option<i64>,
    #[schemars(with = "shape::Time")]
    pub(crate) created_at: i64,
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
pub(crate) struct ProposalList {
    pub(crate) proposals: Vec<ProposalSummary>,
}

/// An approved, immutable revision.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Revision {
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(range(min = 1))]
    pub(crate) revision: i64,
    pub(crate) format: String,
    pub(crate) source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
    #[schemars(with = "shape::Digest")]
    pub(crate) digest: String,
    /// The gateway's signature of the revision, `KEY_ID:BASE64`.
    #[schemars(pattern(r"^[^:]+:.+$"))]
    pub(crate) signature: String,
    pub(crate) author: String,
    pub(crate) approved_by: String,
    #[schemars(range(min = 1))]
    pub(crate) proposal: i64,
    #[schemars(with = "shape::Time")]
    pub(crate) created_at: i64,
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
pub(crate) struct RevisionWithBundle {
    #[serde(flatten)]
    pub(crate) revision: Revision,
    /// The compiled bundle document (its inner shape is policy-lang's).
    #[schemars(with = "Map<String, Value>")]
    pub(crate) bundle: Value,
}

/// `GET /v1/policies/{name}/revisions`: every revision, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct RevisionList {
    #[schemars(with = "shape::Name")]
    pub(crate) policy: String,
    #[schemars(range(min = 1))]
    pub(crate) active_revision: Option<i64>,
    pub(crate) revisions: Vec<Revision>,
}
