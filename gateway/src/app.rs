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
use sha2::{Digest as _, Sha256};
use tokio::sync::watch;

use crate::audit::hex;
use crate::dir;
use crate::metrics::Metrics;
use crate::store::{AuditEntry, RevisionRow, Role, Store, StoreError};
use crate::wake::Wakeups;

/// The largest request body accepted (a policy and its credentials file).
pub const BODY_LIMIT: usize = 1024 * 1024;
/// The longest a long-poll may wait.
pub const MAX_WAIT_SECS: u64 = 300;

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
    pub dir: PathBuf,
    pub listen: SocketAddr,
    pub db: String,
    pub approval: ApprovalMode,
    pub prove_timeout: Duration,
    pub limits: Limits,
}

/// How long a client may take and how many connections it may hold: a
/// client that sends one byte every few seconds must not hold a
/// connection, a file descriptor and a task for ever, and many of them
/// must not starve everyone else.
#[derive(Debug, Clone)]
pub struct Limits {
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

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_connections_per_peer: 256,
            audited_refusals_per_minute: 60,
            shutdown_grace: Duration::from_secs(30),
            access_log: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(transparent)]
    Dir(#[from] dir::DirError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on `{addr}`: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The shared state of one gateway process.
pub struct App {
    pub store: Arc<dyn Store>,
    pub key: SigningKey,
    pub approval: ApprovalMode,
    pub prove_timeout: Duration,
    /// Wakes the long-polls a change concerns.
    pub wakeups: Arc<Wakeups>,
    pub metrics: Metrics,
    pub limits: Limits,
    /// Set once `SIGTERM` came: long-polls answer at once, so that their
    /// clients come back to another replica.
    pub stopping: watch::Sender<bool>,
    /// Unauthenticated refusals audited in the current minute.
    pub refusals: std::sync::Mutex<RefusalWindow>,
    pub registry: prover::Registry,
    /// Proofs running at once: at most one per CPU; more proposals wait.
    pub proving: Arc<tokio::sync::Semaphore>,
    /// The permits `proving` started with.
    pub proof_slots: usize,
    pub connections: crate::server::Connections,
    /// Revisions served lately (they never change once written).
    pub revisions: std::sync::Mutex<std::collections::HashMap<(String, i64), Arc<RevisionRow>>>,
}

/// The minute of refusals being audited: when it began, how many were
/// written, how many only counted.
#[derive(Debug, Default)]
pub struct RefusalWindow {
    pub started: i64,
    pub audited: u32,
    pub skipped: u64,
}

impl App {
    /// Wakes the long-polls of one topic (`wake::policy`, `wake::sandbox`)
    /// in this process; other replicas hear of it by `NOTIFY`.
    pub fn changed(&self, topic: &str) {
        self.wakeups.wake(topic);
    }

    /// Whether `SIGTERM` came.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// A revision, from memory when it was served lately.
    pub async fn revision(
        &self,
        policy: &str,
        revision: i64,
    ) -> Result<Option<Arc<RevisionRow>>, StoreError> {
        let key = (policy.to_owned(), revision);
        if let Some(r) = self
            .revisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Some(Arc::clone(r)));
        }
        let Some(row) = self.store.revision(policy, revision).await? else {
            return Ok(None);
        };
        let row = Arc::new(row);
        let mut cache = self
            .revisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= 64 {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&row));
        Ok(Some(row))
    }

    /// Appends an audit row; a failure to write it is reported, not fatal
    /// to the request that caused it.
    pub async fn audit(&self, entry: AuditEntry) {
        if let Err(e) = self.store.audit(entry).await {
            eprintln!("openshell-gateway: cannot write an audit row: {e}");
        }
    }
}

/// Seconds since the Unix epoch.
#[must_use]
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// SHA-256 hex of a token: what the tokens table holds.
#[must_use]
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.trim().as_bytes()))
}

/// An error answer: status, a stable code and a sentence.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
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
pub struct Reply {
    pub status: StatusCode,
    pub body: Option<serde_json::Value>,
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn json(status: StatusCode, body: serde_json::Value) -> Self {
        Self {
            status,
            body: Some(body),
            headers: Vec::new(),
        }
    }
    pub fn ok(body: serde_json::Value) -> Self {
        Self::json(StatusCode::OK, body)
    }
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub name: String,
    pub role: Role,
    pub sandbox: Option<String>,
}

/// A request, read whole (within the limit) and authenticated.
pub struct Req {
    pub method: hyper::Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub if_none_match: Option<String>,
    pub body: Bytes,
    pub caller: Option<Caller>,
}

impl Req {
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON body as `T` (unknown fields refused).
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::bad_request("the request needs a JSON body"));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the JSON body is not valid: {e}")))
    }

    /// The caller, or `401`.
    pub fn caller(&self) -> Result<&Caller, ApiError> {
        self.caller.as_ref().ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is needed (`Authorization: Bearer <token>`)",
            )
        })
    }

    /// The caller, when its role is one of `roles`; else `403`.
    pub fn require(&self, roles: &[Role]) -> Result<&Caller, ApiError> {
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
