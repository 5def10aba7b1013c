//! The gateway's state and the shapes every handler shares: the request
//! as a handler sees it, its reply, its errors, the approval mode. The
//! serving loop (`server`) and the handlers (`api`, `propose`) both use
//! this module; it uses neither.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bundle_trust::SigningKey;
use bytes::Bytes;
use hyper::StatusCode;
use tokio::sync::watch;

pub(crate) use crate::clock::now;
pub use crate::clock::token_hash;
use crate::dir;
pub use crate::driver::SandboxSettings;
use crate::metrics::Metrics;
use crate::store::{AuditEntry, RevisionRow, Role, Store, StoreError};
use crate::wake::Wakeups;

/// The largest request body accepted (a policy and its credentials file).
pub(crate) const BODY_LIMIT: usize = 1024 * 1024;
/// The longest a long-poll may wait.
pub(crate) const MAX_WAIT_SECS: u64 = 300;

/// Who approves.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// A person approves every change.
    Manual,
    /// Approved at once when the prover shows no new access; anything else
    /// waits for a person.
    Auto,
}

/// What `serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The gateway directory `init` wrote: certificate, signing key, admin
    /// token.
    pub dir: PathBuf,
    /// Port 0 picks a free port; [`crate::server::Running::addr`] says which.
    pub listen: SocketAddr,
    /// `sqlite:PATH` or `postgres://...`.
    pub db: String,
    /// Whether a proposal the prover finds adds no access is approved at once.
    pub approval: ApprovalMode,
    /// How long one proposal's proof may run; past it the proof is
    /// inconclusive and a person decides.
    pub prove_timeout: Duration,
    /// What one proposal may cost.
    pub limits: Limits,
    /// What one client connection may cost.
    pub clients: ClientLimits,
    /// How the gateway runs sandboxes.
    pub sandboxes: crate::driver::SandboxSettings,
}

/// How long a client may take and how many connections it may hold: a
/// client that sends one byte every few seconds must not hold a
/// connection, a file descriptor and a task for ever, and many of them
/// must not starve everyone else.
#[derive(Debug, Clone)]
pub struct ClientLimits {
    /// From a connection's first byte (or the end of its last answer) to
    /// the end of the next request's head; also the TLS handshake's bound.
    pub header_timeout: Duration,
    /// From the end of the head to the end of the body.
    pub body_timeout: Duration,
    /// Connections open at once; lowered to fit the process's limit of
    /// open files.
    pub max_connections: usize,
    /// Connections open at once from one address.
    pub max_connections_per_peer: usize,
    /// Refusals of requests without a valid token written to the audit
    /// log per minute; the rest are counted (`/metrics`) and summed up in
    /// one row when the minute ends.
    pub audited_refusals_per_minute: u32,
    /// How long `SIGTERM` waits for requests in flight.
    pub shutdown_grace: Duration,
    /// One JSON line per request on standard error.
    pub access_log: bool,
}

/// How big a proposal may be, what secrets it may name, and how proofs
/// share the machine. Each is a
/// `serve` flag; the error that a limit causes names the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of source, included fragments and credentials together
    /// (`--max-source-bytes`). A request body is refused past
    /// `BODY_LIMIT` anyway.
    pub max_source_bytes: usize,
    /// Rules of the compiled bundle: network routes, L7 allow and deny
    /// rules, filesystem paths (`--max-rules`).
    pub max_rules: usize,
    /// Network routes of the compiled bundle (`--max-endpoints`).
    pub max_endpoints: usize,
    /// Bytes of the compiled bundle (`--max-bundle-bytes`).
    pub max_bundle_bytes: usize,
    /// Proofs at once for any candidate (`--proof-slots`, default one per
    /// CPU).
    pub proof_slots: usize,
    /// A proof whose two bundles together are at most this many bytes may
    /// also take the slot kept for small proofs, so that it never waits
    /// behind big ones (`--small-proof-bytes`).
    pub small_proof_bytes: usize,
    /// Bytes of revisions kept in memory for delivery
    /// (`--revision-cache-bytes`).
    pub revision_cache_bytes: usize,
    /// Database connections (`--db-pool-size`; default 4 for SQLite, 16
    /// for PostgreSQL).
    pub db_pool_size: Option<u32>,
    /// The secret sources a proposal's credentials may read
    /// (`--allow-secret-source`); `None` allows any.
    pub secret_sources: Option<crate::secret_sources::SecretSources>,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 8192,
            max_connections_per_peer: 1024,
            audited_refusals_per_minute: 60,
            shutdown_grace: Duration::from_secs(30),
            access_log: true,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_source_bytes: 512 * 1024,
            max_rules: 10_000,
            max_endpoints: 2_000,
            max_bundle_bytes: 4 * 1024 * 1024,
            proof_slots: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            small_proof_bytes: 256 * 1024,
            revision_cache_bytes: 64 * 1024 * 1024,
            db_pool_size: None,
            secret_sources: None,
        }
    }
}

/// Why the gateway did not start; once it serves, errors are answers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The gateway directory is missing a file or holds a bad one.
    #[error(transparent)]
    Dir(#[from] dir::DirError),
    /// The database cannot be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The address is taken or not ours.
    #[error("cannot listen on `{addr}`: {source}")]
    Listen {
        /// As configured, before a port 0 is resolved.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
}

/// The shared state of one gateway process.
pub struct App {
    /// Shared by every request; each replica has its own handle on one
    /// database.
    pub store: Arc<dyn Store>,
    pub(crate) lifecycle: Arc<crate::lifecycle::Lifecycle>,
    /// Signs every revision approved here; the supervisors hold its public
    /// half.
    pub key: SigningKey,
    pub(crate) approval: ApprovalMode,
    pub(crate) prove_timeout: Duration,
    /// Wakes the long-polls a change concerns.
    pub wakeups: Arc<Wakeups>,
    /// This process's counters, rendered at `/metrics`.
    pub metrics: Metrics,
    pub(crate) clients: ClientLimits,
    /// Set once `SIGTERM` came: long-polls answer at once, so that their
    /// clients come back to another replica.
    pub(crate) stopping: watch::Sender<bool>,
    /// Unauthenticated refusals audited in the current minute.
    pub(crate) refusals: std::sync::Mutex<RefusalWindow>,
    pub(crate) registry: prover::Registry,
    /// Proofs running at once: at most one per CPU; more proposals wait.
    pub proving: Arc<tokio::sync::Semaphore>,
    pub(crate) connections: Arc<crate::connections::Connections>,
    /// One more proof slot that only small candidates may take: a small
    /// change is answered while big ones hold every other slot.
    pub proving_small: Arc<tokio::sync::Semaphore>,
    /// Revisions served lately (they never change once written).
    pub revisions: std::sync::Mutex<RevisionCache>,
    pub(crate) limits: Limits,
}

/// Revisions kept for delivery, bounded by their bytes rather than their
/// number: one big bundle weighs as much as hundreds of small ones.
#[derive(Default)]
pub struct RevisionCache {
    rows: std::collections::HashMap<(String, i64), Arc<RevisionRow>>,
    /// Insertion order, oldest first: what is evicted first.
    order: std::collections::VecDeque<(String, i64)>,
    bytes: usize,
}

fn weight(row: &RevisionRow) -> usize {
    row.bundle.len()
        + row.source.len()
        + row.credentials.as_ref().map_or(0, String::len)
        + row.files.values().map(String::len).sum::<usize>()
}

impl RevisionCache {
    fn get(&self, key: &(String, i64)) -> Option<Arc<RevisionRow>> {
        self.rows.get(key).cloned()
    }

    /// Keeps `row` unless it alone is over `cap`, evicting the oldest
    /// rows until everything fits.
    fn insert(&mut self, key: (String, i64), row: Arc<RevisionRow>, cap: usize) {
        let w = weight(&row);
        if w > cap || self.rows.contains_key(&key) {
            return;
        }
        while self.bytes + w > cap {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(r) = self.rows.remove(&old) {
                self.bytes = self.bytes.saturating_sub(weight(&r));
            }
        }
        self.bytes += w;
        self.order.push_back(key.clone());
        self.rows.insert(key, row);
    }

    /// Bytes held now.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The minute of refusals being audited: when it began, how many were
/// written, how many only counted.
#[derive(Debug, Default)]
pub(crate) struct RefusalWindow {
    pub(crate) started: i64,
    pub(crate) audited: u32,
    pub(crate) skipped: u64,
}

impl App {
    /// Wakes the long-polls of one topic (`wake::policy`, `wake::sandbox`)
    /// in this process; other replicas hear of it by `NOTIFY`.
    pub(crate) fn changed(&self, topic: &str) {
        self.wakeups.wake(topic);
    }

    /// Whether `SIGTERM` came.
    #[must_use]
    pub(crate) fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// A revision, from memory when it was served lately.
    pub async fn revision(
        &self,
        policy: &str,
        revision: i64,
    ) -> Result<Option<Arc<RevisionRow>>, StoreError> {
        let key = (policy.to_owned(), revision);
        let cached = self
            .revisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key);
        if let Some(r) = cached {
            return Ok(Some(r));
        }
        let Some(row) = self.store.revision(policy, revision).await? else {
            return Ok(None);
        };
        let row = Arc::new(row);
        self.revisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, Arc::clone(&row), self.limits.revision_cache_bytes);
        Ok(Some(row))
    }

    /// Appends an audit row; a failure to write it is reported, not fatal
    /// to the request that caused it.
    pub(crate) async fn audit(&self, entry: AuditEntry) {
        if let Err(e) = self.store.audit(entry).await {
            eprintln!("openshell-gateway: cannot write an audit row: {e}");
        }
    }
}

/// An error answer: status, a stable code and a sentence.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => ApiError::conflict(m),
            StoreError::NotFound(m) => ApiError::not_found(m),
            other => {
                eprintln!("openshell-gateway: store: {other}");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the gateway's database did not answer; try again",
                )
            }
        }
    }
}

/// A response body and its status, plus extra headers.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Option<serde_json::Value>,
    pub(crate) headers: Vec<(&'static str, String)>,
}

impl Reply {
    /// `body`, one of the [`crate::wire`] types. It goes out through a
    /// `serde_json::Value`, whose objects keep their keys sorted, so the
    /// bytes do not depend on the order fields are declared in.
    pub(crate) fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Self {
        Self {
            status,
            // The wire types have string keys only: they always convert.
            body: Some(serde_json::to_value(body).unwrap_or(serde_json::Value::Null)),
            headers: Vec::new(),
        }
    }
    pub(crate) fn ok<T: serde::Serialize>(body: &T) -> Self {
        Self::json(StatusCode::OK, body)
    }
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) sandbox: Option<String>,
    /// For a session token: its generation and hash, what a refresh
    /// names.
    pub(crate) session: Option<(i64, String)>,
}

/// A request, read whole (within the limit) and authenticated.
pub(crate) struct Req {
    pub(crate) method: hyper::Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) if_none_match: Option<String>,
    pub(crate) body: Bytes,
    pub(crate) caller: Option<Caller>,
}

impl Req {
    pub(crate) fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON body as `T` (unknown fields refused).
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::bad_request("the request needs a JSON body"));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the JSON body is not valid: {e}")))
    }

    /// `400` for a request with a body where the operation takes none.
    pub(crate) fn no_body(&self) -> Result<(), ApiError> {
        if self.body.is_empty() {
            Ok(())
        } else {
            Err(ApiError::bad_request(format!(
                "`{} {}` takes no body",
                self.method, self.path
            )))
        }
    }

    /// The caller, or `401`.
    pub(crate) fn caller(&self) -> Result<&Caller, ApiError> {
        self.caller.as_ref().ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is needed (`Authorization: Bearer <token>`)",
            )
        })
    }

    /// The caller, when its role is one of `roles`; else `403`.
    pub(crate) fn require(&self, roles: &[Role]) -> Result<&Caller, ApiError> {
        let c = self.caller()?;
        if roles.contains(&c.role) {
            Ok(c)
        } else {
            Err(ApiError::forbidden(format!(
                "a token with role `{}` may not do this",
                c.role.word()
            )))
        }
    }
}

pub(crate) fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect()
}
