//! Every JSON body the API answers or accepts, as one set of types that
//! the server serializes, the client commands deserialize and
//! `docs/openapi.yaml` is generated from (see [`crate::openapi`]): a field
//! renamed here is renamed in all three at once, so neither side can drift
//! from the other or from the document.
//!
//! Response structs are not `deny_unknown_fields`, so that a client keeps
//! reading a gateway that has grown a field; their schemas still say
//! `additionalProperties: false`, which is what the server sends today and
//! what the document check holds it to. Request structs refuse unknown
//! fields, as the server always has.
//!
//! Bodies leave the server through `serde_json::Value`, whose objects keep
//! their keys sorted: the bytes are the same whatever order fields are
//! declared in here.

mod admin;
mod boundary;
mod exec;
mod lifecycle;
mod proposals;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use admin::{
    AuditHead, AuditPage, AuditVerification, CreateSandboxRequest, CreateTokenRequest,
    DeletedSandbox, Envelope, RenewTokenRequest, RevokedToken, Sandbox, SandboxCreated,
    SandboxList, SandboxToken, SessionToken, StatusReportRequest, TokenCreated, TokenInfo,
    TokenList,
};
pub(crate) use boundary::{Boundary, BoundaryRefusal, BoundaryRequest, RemovedBoundary};
pub(crate) use exec::{
    EndRequest, Exec, ExecClaim, ExecList, ExecOutput, ExecRequest, ExecState, OutputChunk,
    OutputRequest, Stream,
};
pub(crate) use lifecycle::Phase;
pub(crate) use proposals::{
    Advice, ApproveRequest, CheckReport, ContainmentView, DenialsRequest, FindingView,
    Generalization, LineProblem, Proposal, ProposalList, ProposalRequest, ProposalState,
    ProposalSummary, RejectRequest, Revision, RevisionList, RevisionWithBundle, RollbackRequest,
    RuleView, SandboxProposalRequest,
};

/// Roles a bearer token can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    Admin,
    Author,
    Reader,
    /// Reaches only its own sandbox's bundle and status.
    Sandbox,
}

impl Role {
    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Author => "author",
            Role::Reader => "reader",
            Role::Sandbox => "sandbox",
        }
    }

    #[must_use]
    pub(crate) fn parse(word: &str) -> Option<Role> {
        match word {
            "admin" => Some(Role::Admin),
            "author" => Some(Role::Author),
            "reader" => Some(Role::Reader),
            "sandbox" => Some(Role::Sandbox),
            _ => None,
        }
    }
}

/// Every refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Error", extend("additionalProperties" = false))]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorDetail,
}

/// What was refused and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct ErrorDetail {
    #[schemars(range(min = 400, max = 599))]
    pub(crate) status: u16,
    /// A stable word, e.g. `bad_request`, `unauthorized`, `token_expired`,
    /// `forbidden`, `not_found`, `conflict`, `unprocessable`,
    /// `body_too_large`.
    #[schemars(pattern(r"^[a-z_]+$"))]
    pub(crate) code: String,
    pub(crate) message: String,
}

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Health {
    pub(crate) status: HealthStatus,
}

/// The only answer liveness has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HealthStatus {
    Ok,
}

/// `GET /readyz`, whether ready or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Readiness", extend("additionalProperties" = false))]
pub(crate) struct Readiness {
    pub(crate) status: ReadyStatus,
    /// `ok`, or why the database does not answer.
    pub(crate) database: String,
    pub(crate) signing_key: String,
    pub(crate) stopping: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReadyStatus {
    Ready,
    NotReady,
}

/// The shared schemas that are not a type of their own in Rust: fields
/// typed `String` or `i64` name them with `#[schemars(with = ...)]`.
pub(crate) mod shape {
    use schemars::JsonSchema;

    /// Letters, digits, `.`, `_`, `-`; at most 64; not starting with `.`.
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "a schema only")]
    pub(crate) struct Name(#[schemars(pattern(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$"))] String);

    /// `sha256:` and 64 hex digits.
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "a schema only")]
    pub(crate) struct Digest(#[schemars(pattern(r"^sha256:[0-9a-f]{64}$"))] String);

    /// Seconds since the Unix epoch.
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "a schema only")]
    pub(crate) struct Time(i64);

    /// A bearer token, shown once.
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "a schema only")]
    pub(crate) struct Token(#[schemars(length(min = 1))] String);

    /// Seconds until the token expires; `null` or absent for never.
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "a schema only")]
    pub(crate) struct Ttl(Option<u64>);

    /// What the prover found against the active revision; `null` for an
    /// invalid proposal or a first revision.
    #[derive(JsonSchema)]
    #[serde(rename_all = "kebab-case")]
    #[expect(
        dead_code,
        reason = "a schema only: the verdict is the prover's word, kept as text"
    )]
    pub(crate) enum Verdict {
        NoNewAccess,
        Widened,
        NewReach,
        Inconclusive,
    }
}
