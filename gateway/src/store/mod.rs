//! Where the gateway keeps its state: one [`Store`] interface, two
//! backends behind it (SQLite, one file in WAL mode, one process; and
//! PostgreSQL, for several replicas). State lives in the database only, so a
//! gateway process can die at any moment and another takes over.
//!
//! Every write is compare-and-swap: it names the version (or state) it read
//! and changes nothing when another write came first; the caller then gets
//! [`StoreError::Conflict`], which the API answers with `409`.

pub(crate) mod sql;

pub(crate) use crate::audit::AuditRow;
use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

pub(crate) use sql::SqlStore;

use crate::driver::RunSpec;
pub(crate) use crate::wire::{ExecState, Phase, ProposalState, Role, Stream, TokenInfo};

/// A store operation in flight.
pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store operation failed; the API maps each to its status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another write changed what this one was based on.
    #[error("{0}")]
    Conflict(String),
    /// What the operation names is not there; the message says which.
    #[error("{0}")]
    NotFound(String),
    /// SQLite serves one process; a second gateway on the same file is refused.
    #[error(
        "the database `{path}` is in use by another gateway process (lock `{lock}` is held): SQLite serves one process; use PostgreSQL for several replicas"
    )]
    Locked {
        /// The SQLite database.
        path: String,
        /// The lock file beside it.
        lock: String,
    },
    /// Neither `sqlite:` nor `postgres://`.
    #[error("`{0}` is not a database URL this gateway reads (`sqlite:PATH` or `postgres://...`)")]
    Url(String),
    /// The database did not answer, or refused the statement.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// Around the database: its lock file, or a row that does not read back.
    #[error("{0}")]
    Io(String),
}

/// A token as stored: its SHA-256, never the token.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRow {
    #[serde(skip)]
    pub(crate) hash: String,
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) sandbox: Option<String>,
    pub(crate) expires_at: Option<i64>,
    /// A session token's generation: it works only while the sandbox is
    /// at that generation.
    #[serde(skip)]
    pub(crate) generation: Option<i64>,
}

/// A session token of a sandbox the gateway runs: bound to one
/// generation, short-lived, refreshed by its supervisor. Kept apart from
/// the tokens people manage, so that a sandbox can hold several while a
/// refreshed one reaches its supervisor.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub(crate) hash: String,
    pub(crate) generation: i64,
    pub(crate) expires_at: i64,
}

/// A policy: its name and which revision is live.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    pub(crate) name: String,
    pub(crate) active_revision: Option<i64>,
    pub(crate) version: i64,
}

/// An approved, immutable revision of a policy.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionRow {
    pub(crate) policy: String,
    pub(crate) revision: i64,
    pub(crate) format: String,
    /// The policy text as proposed, in `format`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) files: std::collections::BTreeMap<String, String>,
    /// The bundle's bytes as `compile` writes them.
    #[serde(skip)]
    pub bundle: String,
    pub(crate) digest: String,
    /// The gateway's signature of the revision (sandbox `""`), key id first.
    pub(crate) signature: String,
    pub(crate) author: String,
    pub(crate) approved_by: String,
    pub(crate) proposal: i64,
    pub(crate) created_at: i64,
}

/// A proposal in any state, with what its proof found.
#[derive(Debug, Clone, Serialize)]
pub struct ProposalRow {
    pub(crate) id: i64,
    pub(crate) policy: String,
    pub(crate) state: ProposalState,
    /// The active revision when proposed (none for a first revision).
    pub(crate) base_revision: Option<i64>,
    pub(crate) base_digest: Option<String>,
    pub(crate) format: String,
    pub(crate) source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<String>,
    /// The fragments the source includes, by the path it names them with.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) files: std::collections::BTreeMap<String, String>,
    #[serde(skip)]
    pub(crate) bundle: Option<String>,
    pub(crate) digest: Option<String>,
    /// `no-new-access`, `widened`, `inconclusive`, or none (invalid, or a
    /// first revision).
    pub(crate) verdict: Option<String>,
    /// `diff --prove --format json` of base → candidate.
    pub(crate) proof: Option<serde_json::Value>,
    /// `check --format json` when the candidate does not compile.
    pub(crate) diagnostics: Option<serde_json::Value>,
    /// `diff --prove --within --format json` of the policy's boundary and
    /// the candidate; none when the policy has no boundary.
    pub(crate) containment: Option<serde_json::Value>,
    /// The boundary the candidate was proved within.
    pub(crate) boundary_digest: Option<String>,
    pub(crate) review_token: Option<String>,
    pub(crate) proposer: String,
    pub(crate) decided_by: Option<String>,
    /// `manual` or `auto`.
    pub(crate) decision: Option<String>,
    pub(crate) reason: Option<String>,
    /// The revision an approval made.
    pub(crate) revision: Option<i64>,
    /// The revision whose source a rollback proposes again.
    pub(crate) rollback_of: Option<i64>,
    /// Who wrote the candidate, when not its proposer: `advisor` when the
    /// gateway wrote it from denials.
    pub(crate) origin: Option<String>,
    /// Why the sandbox that asked for it wants it, in its agent's words.
    pub(crate) rationale: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) version: i64,
}

/// A proposal to store.
#[derive(Debug, Clone)]
pub struct NewProposal {
    pub(crate) policy: String,
    pub(crate) state: ProposalState,
    pub(crate) base_revision: Option<i64>,
    pub(crate) base_digest: Option<String>,
    pub(crate) format: String,
    pub(crate) source: String,
    pub(crate) credentials: Option<String>,
    /// The fragments the source includes.
    pub(crate) files: std::collections::BTreeMap<String, String>,
    pub(crate) bundle: Option<String>,
    pub(crate) digest: Option<String>,
    pub(crate) verdict: Option<String>,
    pub(crate) proof: Option<serde_json::Value>,
    pub(crate) diagnostics: Option<serde_json::Value>,
    pub(crate) containment: Option<serde_json::Value>,
    pub(crate) boundary_digest: Option<String>,
    /// Why the gateway refused the proposal as it came (it exceeds its
    /// policy's boundary); stored as the decision's reason.
    pub(crate) refusal: Option<String>,
    pub(crate) review_token: Option<String>,
    pub(crate) proposer: String,
    pub(crate) rollback_of: Option<i64>,
    pub(crate) origin: Option<String>,
    pub(crate) rationale: Option<String>,
}

/// A policy's boundary as stored: the source it was set from, its
/// compiled bundle, and the proof that the policy's active revision (when
/// it had one) stays inside it.
#[derive(Debug, Clone, Serialize)]
pub struct BoundaryRow {
    pub(crate) policy: String,
    pub(crate) format: String,
    pub(crate) source: String,
    pub(crate) credentials: Option<String>,
    pub(crate) files: std::collections::BTreeMap<String, String>,
    /// The bundle's bytes as `compile` writes them.
    #[serde(skip)]
    pub(crate) bundle: String,
    pub(crate) digest: String,
    /// The active revision when the boundary was set, and its proof
    /// within it (`diff --prove --within --format json`).
    pub(crate) checked_revision: Option<i64>,
    pub(crate) containment: Option<serde_json::Value>,
    pub(crate) set_by: String,
    pub(crate) set_at: i64,
}

/// Setting a boundary: the row, and the version of the policy's row read
/// before the active revision was proved within it (`None`: no row yet).
/// Any approval since moves that version, and the write is a conflict.
#[derive(Debug, Clone)]
pub struct NewBoundary {
    pub(crate) row: BoundaryRow,
    pub(crate) policy_version: Option<i64>,
}

/// Signs a new revision: `(policy, revision, digest, now)` to the stored
/// signature text.
pub(crate) type RevisionSigner =
    std::sync::Arc<dyn Fn(&str, i64, &str, i64) -> String + Send + Sync>;

/// Approving a proposal: the version it was read at, and who.
pub struct Approval {
    pub(crate) proposal: i64,
    pub(crate) version: i64,
    pub(crate) approved_by: String,
    /// `manual` or `auto`.
    pub(crate) decision: String,
    /// Signs the new revision (sandbox `""`).
    pub(crate) sign: RevisionSigner,
    pub(crate) now: i64,
}

/// A sandbox, what its policy wants it to run and what it says it runs.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxRow {
    pub(crate) id: String,
    pub(crate) policy: String,
    /// The policy's active revision.
    pub(crate) desired_revision: Option<i64>,
    pub(crate) desired_digest: Option<String>,
    pub(crate) applied_revision: Option<i64>,
    pub(crate) applied_digest: Option<String>,
    /// `applied`, `network_only` or `refused`.
    pub(crate) result: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) reported_at: Option<i64>,
    pub(crate) version: i64,
    /// `None` for a sandbox registered to run elsewhere: the gateway runs
    /// only those created with a [`RunSpec`].
    pub(crate) phase: Option<Phase>,
    /// Why it is in its phase, when something went wrong.
    pub(crate) reason: Option<String>,
    pub(crate) spec: Option<RunSpec>,
    /// The generation running or last started (0: registered).
    pub(crate) generation: i64,
    /// During a transition: the phase it rolls back to.
    pub(crate) prior_phase: Option<Phase>,
    /// During a transition: the gateway process acting, and until when.
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) phase_at: Option<i64>,
    /// Where its driver runs it ([`crate::driver::Driver::place`]).
    pub(crate) place: Option<String>,
}

/// A gateway process's claim on a sandbox in transition: no other process
/// acts on it until `until` (seconds since the epoch) has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) owner: String,
    pub(crate) until: i64,
}

/// What a transition does to the sandbox's tokens when it commits.
#[derive(Debug, Clone)]
pub enum Tokens {
    /// The session goes on.
    Keep,
    /// Nothing runs any more: no token of it may work.
    Revoke,
    /// A new generation's session: every older token is revoked.
    Replace(SessionRow),
}

/// A sandbox the gateway runs, stored in `provisioning` with its first
/// generation's token and a lease for the gateway starting it.
#[derive(Debug, Clone)]
pub struct NewManaged {
    pub(crate) id: String,
    pub(crate) policy: String,
    pub(crate) spec: RunSpec,
    pub(crate) place: String,
    pub(crate) session: SessionRow,
    pub(crate) lease: Lease,
    pub(crate) now: i64,
}

/// One phase change, as a compare-and-swap: it is a conflict unless the
/// sandbox is still in `from`, at `generation`, held by `holder`.
#[derive(Debug, Clone)]
pub struct Transition {
    pub(crate) id: String,
    pub(crate) from: Phase,
    pub(crate) generation: i64,
    pub(crate) holder: Option<String>,
    /// `None`: the sandbox is removed.
    pub(crate) to: Option<Phase>,
    pub(crate) reason: Option<String>,
    /// Held after the change (a transition begun or taken over).
    pub(crate) lease: Option<Lease>,
    pub(crate) next_generation: bool,
    /// The phase a transition begun here rolls back to.
    pub(crate) prior: Option<Phase>,
    pub(crate) tokens: Tokens,
    pub(crate) now: i64,
}

/// What a supervisor reports.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// What the sandbox runs now (unchanged by a refusal).
    pub(crate) revision: Option<i64>,
    pub(crate) digest: Option<String>,
    pub(crate) result: String,
    pub(crate) error: Option<String>,
    pub(crate) now: i64,
}

/// A command run in a sandbox the gateway runs, as stored; its `env`
/// values are not part of it (they go to the supervisor once).
#[derive(Debug, Clone)]
pub struct ExecRow {
    pub(crate) id: String,
    pub(crate) sandbox: String,
    pub(crate) generation: i64,
    pub(crate) command: Vec<String>,
    pub(crate) env_names: Vec<String>,
    pub(crate) workdir: Option<String>,
    pub(crate) timeout_seconds: Option<i64>,
    pub(crate) state: ExecState,
    pub(crate) exit_status: Option<i64>,
    pub(crate) timed_out: bool,
    pub(crate) error: Option<String>,
    /// Each stream's length as its supervisor sent it: where the next
    /// chunk of it starts.
    pub(crate) stdout_len: i64,
    pub(crate) stderr_len: i64,
    /// Output past the transcript limit was not kept.
    pub(crate) truncated: bool,
    pub(crate) created_by: String,
    pub(crate) created_at: i64,
    pub(crate) started_at: Option<i64>,
    pub(crate) ended_at: Option<i64>,
}

/// A command to queue for a sandbox's generation.
#[derive(Debug, Clone)]
pub struct NewExec {
    pub(crate) id: String,
    pub(crate) sandbox: String,
    pub(crate) generation: i64,
    pub(crate) command: Vec<String>,
    pub(crate) env: std::collections::BTreeMap<String, String>,
    pub(crate) workdir: Option<String>,
    pub(crate) timeout_seconds: Option<i64>,
    pub(crate) created_by: String,
    pub(crate) now: i64,
}

/// A command a supervisor claimed, with its `env` (read as the claim
/// cleared it from the row).
#[derive(Debug, Clone)]
pub struct ClaimedExec {
    pub(crate) id: String,
    pub(crate) command: Vec<String>,
    pub(crate) env: std::collections::BTreeMap<String, String>,
    pub(crate) workdir: Option<String>,
    pub(crate) timeout_seconds: Option<i64>,
}

/// Bytes of one stream of a command's output, from `offset` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    pub(crate) stream: Stream,
    pub(crate) offset: i64,
    pub(crate) data: Vec<u8>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEnd {
    /// It ran.
    Exited {
        /// 0 to 255, as the sandbox reported it.
        status: i64,
        /// It was killed at its timeout.
        timed_out: bool,
    },
    /// It could not run; why.
    Failed(String),
}

/// One audit row to append.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    /// Seconds since the Unix epoch.
    pub at: i64,
    /// The token name that acted, or `gateway`.
    pub actor: String,
    /// What was done, e.g. `propose`, `approve`.
    pub action: String,
    /// What it was done to, kind first, e.g. `policy:NAME`.
    pub subject: String,
    /// Anything else the row must say; part of the hashed row.
    pub detail: serde_json::Value,
}

/// The gateway's state. One implementation per database family; the API
/// sees only this.
pub trait Store: Send + Sync {
    /// Creates the tables if they are missing.
    fn migrate(&self) -> Fut<'_, ()>;
    /// Adds a token; a token with the same name (or hash) already there is
    /// a conflict, so that an audit actor names one token.
    fn create_token(&self, token: TokenRow, audit: AuditEntry) -> Fut<'_, ()>;
    /// Makes `token` the only token named `token.name` (the admin token at
    /// start, read from `admin.token`): a token of that name with another
    /// hash is removed, so rewriting the file revokes the old token. Writes
    /// an audit row (actor `gateway`) when anything changed.
    fn ensure_admin_token(&self, token: TokenRow) -> Fut<'_, ()>;
    /// The token with this SHA-256 (see [`crate::server::token_hash`]).
    fn token(&self, hash: &str) -> Fut<'_, Option<TokenRow>>;
    /// Every token, by name.
    fn tokens(&self) -> Fut<'_, Vec<TokenInfo>>;
    /// Removes the token named `name`; authentication reads the database on
    /// every request, so it is refused at once on every replica.
    fn revoke_token(&self, name: &str, audit: AuditEntry) -> Fut<'_, ()>;
    /// `None` for a name no proposal has used.
    fn policy(&self, name: &str) -> Fut<'_, Option<PolicyRow>>;
    /// One revision of a policy, numbered from 1.
    fn revision(&self, policy: &str, revision: i64) -> Fut<'_, Option<RevisionRow>>;
    /// Every revision of a policy, oldest first.
    fn revisions(&self, policy: &str) -> Fut<'_, Vec<RevisionRow>>;
    /// Stores a proposal (and its policy, when new); returns its id.
    fn insert_proposal(&self, proposal: NewProposal, audit: AuditEntry) -> Fut<'_, i64>;
    /// One proposal, in any state.
    fn proposal(&self, id: i64) -> Fut<'_, Option<ProposalRow>>;
    /// Every proposal, or a policy's.
    fn proposals(&self, policy: Option<&str>) -> Fut<'_, Vec<ProposalRow>>;
    /// Approves a pending proposal whose base is still the active revision:
    /// a new revision, the policy's active revision moved to it, the
    /// proposal closed, all at once. Returns the new revision's number.
    fn approve(&self, approval: Approval, audit: AuditEntry) -> Fut<'_, i64>;
    /// Closes a pending proposal still at `version` without a revision; a
    /// proposal decided or changed meanwhile is a conflict.
    fn reject(
        &self,
        proposal: i64,
        version: i64,
        by: &str,
        reason: &str,
        audit: AuditEntry,
    ) -> Fut<'_, ()>;
    /// Registers a sandbox of an existing policy (else
    /// [`StoreError::NotFound`]) with its first token.
    fn create_sandbox(
        &self,
        id: &str,
        policy: &str,
        token: TokenRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()>;
    /// One registered sandbox.
    fn sandbox(&self, id: &str) -> Fut<'_, Option<SandboxRow>>;
    /// Every sandbox, by id.
    fn sandboxes(&self) -> Fut<'_, Vec<SandboxRow>>;
    /// Gives the sandbox (still at `version`) a new token and revokes every
    /// token it had, at once.
    fn renew_sandbox_token(
        &self,
        id: &str,
        version: i64,
        token: TokenRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()>;
    /// Removes the sandbox (still at `version`) and revokes its tokens, at
    /// once.
    fn delete_sandbox(&self, id: &str, version: i64, audit: AuditEntry) -> Fut<'_, ()>;
    /// Records what a supervisor applied, if the sandbox is still at
    /// `version`.
    fn report_status(
        &self,
        id: &str,
        version: i64,
        report: StatusReport,
        audit: AuditEntry,
    ) -> Fut<'_, ()>;
    /// Stores a sandbox the gateway runs (its policy must exist, else
    /// [`StoreError::NotFound`]).
    fn create_managed(&self, sandbox: NewManaged, audit: AuditEntry) -> Fut<'_, ()>;
    /// Changes a managed sandbox's phase (see [`Transition`]), its tokens
    /// with it, at once.
    fn transition(&self, change: Transition, audit: AuditEntry) -> Fut<'_, ()>;
    /// Adds a session token to the sandbox's, if the session `presented`
    /// (a hash) is still one of them ([`StoreError::NotFound`] once it was
    /// revoked); every other session of the sandbox goes.
    fn refresh_session(
        &self,
        id: &str,
        presented: &str,
        session: SessionRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()>;
    /// Moves the end of a lease `owner` still holds; `false` when it no
    /// longer does.
    fn renew_lease(&self, id: &str, owner: &str, until: i64) -> Fut<'_, bool>;
    /// Sandboxes in a transition whose lease ended before `now`.
    fn stalled(&self, now: i64) -> Fut<'_, Vec<SandboxRow>>;
    /// Whether this process is the only one on the database (SQLite): then
    /// a lease found at start was held by a process that is gone.
    fn one_process(&self) -> bool;
    /// Queues a command for the sandbox's generation `exec.generation`;
    /// a conflict unless the sandbox is `ready` at that generation when
    /// it commits. Wakes the sandbox's supervisor on every replica.
    fn create_exec(&self, exec: NewExec, audit: AuditEntry) -> Fut<'_, ()>;
    /// One command of a sandbox.
    fn exec(&self, sandbox: &str, id: &str) -> Fut<'_, Option<ExecRow>>;
    /// A sandbox's commands, newest first, at most `limit`.
    fn execs(&self, sandbox: &str, limit: i64) -> Fut<'_, Vec<ExecRow>>;
    /// Claims the oldest queued command of the sandbox's current
    /// generation while it is `ready`: it becomes `running` and its `env`
    /// leaves the row in the same write. Of two claims, one gets it.
    fn claim_exec(&self, sandbox: &str, now: i64) -> Fut<'_, Option<ClaimedExec>>;
    /// Stores what of `piece` is new past the stream's stored length,
    /// while the command runs; [`StoreError::Conflict`] when it starts
    /// past that length (the message names it) or the command is not
    /// running. Bytes past `limit` (both streams) are not kept and mark
    /// the transcript truncated.
    fn append_output(&self, sandbox: &str, id: &str, piece: OutputPiece, limit: i64)
    -> Fut<'_, ()>;
    /// Ends a running command; `false` when it had ended already in the
    /// same way (nothing written), a conflict when it ended otherwise or
    /// was never claimed.
    fn end_exec(
        &self,
        sandbox: &str,
        id: &str,
        end: ExecEnd,
        now: i64,
        audit: AuditEntry,
    ) -> Fut<'_, bool>;
    /// The stored output past `stdout` and `stderr` (offsets in each
    /// stream), in arrival order, at most `max` bytes in all.
    fn exec_output(
        &self,
        id: &str,
        stdout: i64,
        stderr: i64,
        max: usize,
    ) -> Fut<'_, Vec<OutputPiece>>;
    /// The policy's boundary, if it has one.
    fn boundary(&self, policy: &str) -> Fut<'_, Option<BoundaryRow>>;
    /// Sets (or replaces) a policy's boundary, making the policy's row if
    /// there is none; a conflict when the policy's row moved since
    /// `policy_version`. Pending proposals proved against another
    /// boundary can no longer be approved.
    fn set_boundary(&self, boundary: NewBoundary, audit: AuditEntry) -> Fut<'_, ()>;
    /// Removes a policy's boundary ([`StoreError::NotFound`] without one).
    fn remove_boundary(&self, policy: &str, audit: AuditEntry) -> Fut<'_, ()>;
    /// Appends an audit row on its own (refused requests, deliveries).
    fn audit(&self, audit: AuditEntry) -> Fut<'_, ()>;
    /// At most `limit` rows with `after < seq <= upto`, oldest first.
    fn audit_rows(&self, after: i64, upto: i64, limit: i64) -> Fut<'_, Vec<AuditRow>>;
    /// The chain's head as last written: `(seq, hash)`.
    fn audit_head(&self) -> Fut<'_, (i64, String)>;
    /// Whether the backend tells other processes about changes (Postgres).
    fn listen_url(&self) -> Option<String>;
}
