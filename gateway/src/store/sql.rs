//! The SQL backends: SQLite and PostgreSQL through sqlx's runtime queries
//! (nothing is checked against a database at build time). The statements
//! are the same for both; the table definitions, the SQLite single-process
//! lock and Postgres notifications differ.
//!
//! Compare-and-swap: every `UPDATE` names the version or state it read and
//! the caller checks that it changed exactly one row. In Postgres a second
//! writer waits on the row lock of the first and then finds the version
//! moved; SQLite writes are serialized in this process (the only one, see
//! the lock file).

use std::fs::File;
use std::path::{Path, PathBuf};

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyPool, Executor as _, Row as _, Transaction};

use super::{
    Approval, AuditEntry, AuditRow, BoundaryRow, ClaimedExec, ExecEnd, ExecRow, Fut, NewBoundary,
    NewExec, NewManaged, NewProposal, OutputPiece, Phase, PolicyRow, ProposalRow, ProposalState,
    RevisionRow, Role, SandboxRow, SessionRow, StatusReport, Store, StoreError, TokenInfo,
    TokenRow, Transition,
};
use crate::audit::{GENESIS, row_hash};

mod boundary;
mod exec;
mod lifecycle;

/// The Postgres notification channel: a payload per change.
pub(crate) const CHANNEL: &str = "openshell_gateway";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Sqlite,
    Postgres,
}

/// A store in SQLite or PostgreSQL.
#[derive(Debug)]
pub(crate) struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    url: String,
    /// SQLite: serializes writes (one process holds the file).
    write: tokio::sync::Mutex<()>,
    /// SQLite: the lock file, held for the life of the store.
    _lock: Option<File>,
}

const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS policies (name TEXT PRIMARY KEY, active_revision BIGINT, version BIGINT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS revisions (policy TEXT NOT NULL, revision BIGINT NOT NULL, format TEXT NOT NULL, source TEXT NOT NULL, credentials TEXT, bundle TEXT NOT NULL, digest TEXT NOT NULL, signature TEXT NOT NULL, author TEXT NOT NULL, approved_by TEXT NOT NULL, proposal BIGINT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (policy, revision))",
    "CREATE TABLE IF NOT EXISTS proposals (id {ID}, policy TEXT NOT NULL, state TEXT NOT NULL, base_revision BIGINT, base_digest TEXT, format TEXT NOT NULL, source TEXT NOT NULL, credentials TEXT, bundle TEXT, digest TEXT, verdict TEXT, proof TEXT, diagnostics TEXT, review_token TEXT, proposer TEXT NOT NULL, decided_by TEXT, decision TEXT, reason TEXT, revision BIGINT, rollback_of BIGINT, created_at BIGINT NOT NULL, version BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sandboxes (id TEXT PRIMARY KEY, policy TEXT NOT NULL, applied_revision BIGINT, applied_digest TEXT, result TEXT, error TEXT, reported_at BIGINT, version BIGINT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, sandbox TEXT, expires_at BIGINT, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS audit (seq BIGINT PRIMARY KEY, at BIGINT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL, detail TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS audit_head (id BIGINT PRIMARY KEY, seq BIGINT NOT NULL, hash TEXT NOT NULL)",
    boundary::TABLE,
    lifecycle::SESSIONS,
    lifecycle::SESSIONS_INDEX,
    exec::TABLE,
    exec::INDEX,
    exec::OUTPUT,
    exec::OUTPUT_INDEX,
    "CREATE INDEX IF NOT EXISTS proposals_policy ON proposals (policy, id)",
    "CREATE INDEX IF NOT EXISTS sandboxes_policy ON sandboxes (policy)",
    "CREATE INDEX IF NOT EXISTS tokens_sandbox ON tokens (sandbox)",
];

/// One token per name, so that an audit row's actor names one token.
/// Created after [`drop_duplicate_names`] made an older database fit it.
const TOKEN_NAMES_UNIQUE: &str = "CREATE UNIQUE INDEX IF NOT EXISTS tokens_name ON tokens (name)";

/// Who the gateway's own writes (at start, in migrations) are recorded as.
const GATEWAY_ACTOR: &str = "gateway";

/// The Postgres advisory lock that serializes migrations and the admin
/// token's replacement across replicas starting together.
const START_LOCK: i64 = 7_531_903;

/// Revisions are immutable: the database itself refuses to change or
/// delete one.
const IMMUTABLE_SQLITE: &[&str] = &[
    "CREATE TRIGGER IF NOT EXISTS revisions_no_update BEFORE UPDATE ON revisions BEGIN SELECT RAISE(ABORT, 'revisions are immutable'); END",
    "CREATE TRIGGER IF NOT EXISTS revisions_no_delete BEFORE DELETE ON revisions BEGIN SELECT RAISE(ABORT, 'revisions are immutable'); END",
];
const IMMUTABLE_POSTGRES: &[&str] = &[
    "CREATE OR REPLACE FUNCTION openshell_revisions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'revisions are immutable'; END $$",
    "CREATE OR REPLACE TRIGGER revisions_immutable BEFORE UPDATE OR DELETE ON revisions FOR EACH ROW EXECUTE FUNCTION openshell_revisions_immutable()",
];

const SANDBOX_SELECT: &str = "SELECT s.id, s.policy, p.active_revision AS desired_revision, r.digest AS desired_digest, s.applied_revision, s.applied_digest, s.result, s.error, s.reported_at, s.version, s.phase, s.reason, s.spec, s.generation, s.prior_phase, s.lease_owner, s.lease_until, s.phase_at, s.place FROM sandboxes s LEFT JOIN policies p ON p.name = s.policy LEFT JOIN revisions r ON r.policy = s.policy AND r.revision = p.active_revision";

const PROPOSAL_COLUMNS: &str = "id, policy, state, base_revision, base_digest, format, source, credentials, bundle, digest, verdict, proof, diagnostics, review_token, proposer, decided_by, decision, reason, revision, rollback_of, created_at, version, files, containment, boundary_digest, origin, rationale";
const REVISION_COLUMNS: &str = "policy, revision, format, source, credentials, bundle, digest, signature, author, approved_by, proposal, created_at, files";

/// Migrations: columns added to tables an older gateway made, as
/// `(table, column, type)`, NULL in the rows already there.
/// `files`: the fragments a proposal's source includes (a JSON object,
/// path → text; NULL for none), in proposals and in revisions, so that a
/// rollback compiles exactly what was approved. `containment` and
/// `boundary_digest`: the proof of a proposal within its policy's
/// boundary and which boundary it was (NULL: the policy had none), so
/// that an approval can tell the boundary moved since. The sandbox's
/// lifecycle (see [`lifecycle`]): NULL `phase` for a sandbox registered to
/// run elsewhere.
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("proposals", "files", "TEXT"),
    ("revisions", "files", "TEXT"),
    ("proposals", "containment", "TEXT"),
    ("proposals", "boundary_digest", "TEXT"),
    ("sandboxes", "phase", "TEXT"),
    ("sandboxes", "reason", "TEXT"),
    ("sandboxes", "spec", "TEXT"),
    ("sandboxes", "place", "TEXT"),
    ("sandboxes", "generation", "BIGINT"),
    ("sandboxes", "prior_phase", "TEXT"),
    ("sandboxes", "lease_owner", "TEXT"),
    ("sandboxes", "lease_until", "BIGINT"),
    ("sandboxes", "phase_at", "BIGINT"),
    ("proposals", "origin", "TEXT"),
    ("proposals", "rationale", "TEXT"),
];

/// Adds the `column` (of type `ty`) to `table` unless it is there.
async fn add_column(
    tx: &mut Transaction<'static, Any>,
    dialect: Dialect,
    (table, column, ty): (&str, &str, &str),
) -> Result<(), StoreError> {
    match dialect {
        Dialect::Postgres => {
            sqlx::query(&format!(
                "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {ty}"
            ))
            .execute(&mut **tx)
            .await?;
        }
        Dialect::Sqlite => {
            let n = sqlx::query(&format!(
                "SELECT COUNT(*) AS n FROM pragma_table_info('{table}') WHERE name = '{column}'"
            ))
            .fetch_one(&mut **tx)
            .await?;
            if n.try_get::<i64, _>("n")? == 0 {
                sqlx::query(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}"))
                    .execute(&mut **tx)
                    .await?;
            }
        }
    }
    Ok(())
}

fn files_text(files: &std::collections::BTreeMap<String, String>) -> Option<String> {
    (!files.is_empty()).then(|| serde_json::to_string(files).unwrap_or_default())
}

fn parse_files(text: Option<String>) -> std::collections::BTreeMap<String, String> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn conflict(e: sqlx::Error, what: &str) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(what.into()),
        _ => StoreError::Db(e),
    }
}

fn json_text(v: Option<&serde_json::Value>) -> Option<String> {
    v.map(serde_json::Value::to_string)
}

fn parse_json(text: Option<String>) -> Option<serde_json::Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl SqlStore {
    /// As [`SqlStore::open`], with at most `pool_size` connections (default
    /// 4 for SQLite, 16 for PostgreSQL): replicas share the server's
    /// connection limit, so each must be told its part.
    pub(crate) async fn open_with(url: &str, pool_size: Option<u32>) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        if let Some(path) = url.strip_prefix("sqlite:") {
            Self::open_sqlite(
                Path::new(path.trim_start_matches("//")),
                pool_size.unwrap_or(4).max(1),
            )
            .await
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = AnyPoolOptions::new()
                .max_connections(pool_size.unwrap_or(16).max(1))
                .acquire_timeout(std::time::Duration::from_secs(10))
                .connect(url)
                .await?;
            Ok(Self {
                pool,
                dialect: Dialect::Postgres,
                url: url.to_owned(),
                write: tokio::sync::Mutex::new(()),
                _lock: None,
            })
        } else {
            Err(StoreError::Url(url.to_owned()))
        }
    }

    async fn open_sqlite(path: &Path, pool_size: u32) -> Result<Self, StoreError> {
        let lock_path = PathBuf::from(format!("{}.lock", path.display()));
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::Io(format!("cannot open `{}`: {e}", lock_path.display())))?;
        if lock.try_lock().is_err() {
            return Err(StoreError::Locked {
                path: path.display().to_string(),
                lock: lock_path.display().to_string(),
            });
        }
        let abs = std::path::absolute(path)
            .map_err(|e| StoreError::Io(format!("cannot use `{}`: {e}", path.display())))?;
        let url = format!("sqlite://{}?mode=rwc", abs.display());
        let pool = AnyPoolOptions::new()
            .max_connections(pool_size)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute("PRAGMA busy_timeout = 5000").await?;
                    conn.execute("PRAGMA synchronous = NORMAL").await?;
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        sqlx::query("PRAGMA journal_mode = WAL")
            .fetch_all(&pool)
            .await?;
        Ok(Self {
            pool,
            dialect: Dialect::Sqlite,
            url,
            write: tokio::sync::Mutex::new(()),
            _lock: Some(lock),
        })
    }

    /// A write transaction (SQLite: after taking the write lock).
    async fn begin(
        &self,
    ) -> Result<
        (
            Option<tokio::sync::MutexGuard<'_, ()>>,
            Transaction<'static, Any>,
        ),
        StoreError,
    > {
        let guard = match self.dialect {
            Dialect::Sqlite => Some(self.write.lock().await),
            Dialect::Postgres => None,
        };
        let tx = self.pool.begin().await?;
        Ok((guard, tx))
    }

    /// Why a compare-and-swap on sandbox `id` changed nothing: it is gone,
    /// or another write moved its version.
    async fn lost_sandbox(&self, tx: &mut Transaction<'static, Any>, id: &str) -> StoreError {
        let there = sqlx::query("SELECT id FROM sandboxes WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await;
        match there {
            Ok(None) => StoreError::NotFound(format!("no sandbox `{id}`")),
            Ok(Some(_)) => StoreError::Conflict(format!(
                "sandbox `{id}` changed since it was read: try again"
            )),
            Err(e) => StoreError::Db(e),
        }
    }

    /// Tells other gateway processes that something changed (Postgres;
    /// delivered when the transaction commits).
    async fn notify(
        &self,
        tx: &mut Transaction<'static, Any>,
        payload: &str,
    ) -> Result<(), StoreError> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }
}

/// Databases made before token names were unique may hold several tokens
/// of one name (the admin token of every `admin.token` the file ever held,
/// or a person's token created twice). The newest of each name is kept
/// (ties: the greater hash) and the others are revoked, each with an audit
/// row, before the unique index is created.
async fn drop_duplicate_names(tx: &mut Transaction<'static, Any>) -> Result<(), StoreError> {
    let stale = sqlx::query("SELECT t.hash, t.name, t.role, t.created_at FROM tokens t WHERE EXISTS (SELECT 1 FROM tokens n WHERE n.name = t.name AND (n.created_at > t.created_at OR (n.created_at = t.created_at AND n.hash > t.hash)))")
        .fetch_all(&mut **tx)
        .await?;
    for row in &stale {
        let hash: String = row.try_get("hash")?;
        let name: String = row.try_get("name")?;
        let role: String = row.try_get("role")?;
        let created_at: i64 = row.try_get("created_at")?;
        sqlx::query("DELETE FROM tokens WHERE hash = $1")
            .bind(&hash)
            .execute(&mut **tx)
            .await?;
        let audit = AuditEntry {
            at: crate::app::now(),
            actor: GATEWAY_ACTOR.into(),
            action: "token-revoke".into(),
            subject: format!("token:{name}"),
            detail: serde_json::json!({
                "name": name,
                "role": role,
                "created_at": created_at,
                "reason": "a newer token has the same name; token names are unique from now on",
            }),
        };
        append(tx, &audit).await?;
    }
    Ok(())
}

/// Appends an audit row inside `tx`: the head's update takes its row lock,
/// so concurrent appends queue up and the chain stays a line.
async fn append(tx: &mut Transaction<'static, Any>, e: &AuditEntry) -> Result<(), StoreError> {
    let row = sqlx::query("UPDATE audit_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash")
        .fetch_one(&mut **tx)
        .await?;
    let seq: i64 = row.try_get("seq")?;
    let prev: String = row.try_get("hash")?;
    let detail = e.detail.to_string();
    let hash = row_hash(&prev, seq, e.at, &e.actor, &e.action, &e.subject, &detail);
    sqlx::query("INSERT INTO audit (seq, at, actor, action, subject, detail, prev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
        .bind(seq)
        .bind(e.at)
        .bind(&e.actor)
        .bind(&e.action)
        .bind(&e.subject)
        .bind(&detail)
        .bind(&prev)
        .bind(&hash)
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE audit_head SET hash = $1 WHERE id = 1")
        .bind(&hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn role(r: &AnyRow) -> Result<Role, StoreError> {
    let role: String = r.try_get("role")?;
    Role::parse(&role)
        .ok_or_else(|| StoreError::Io(format!("unknown role `{role}` in the database")))
}

fn token_info(r: &AnyRow) -> Result<TokenInfo, StoreError> {
    Ok(TokenInfo {
        name: r.try_get("name")?,
        role: role(r)?,
        sandbox: r.try_get("sandbox")?,
        expires_at: r.try_get("expires_at")?,
        created_at: r.try_get("created_at")?,
    })
}

fn audit_row(r: &AnyRow) -> Result<AuditRow, StoreError> {
    Ok(AuditRow {
        seq: r.try_get("seq")?,
        at: r.try_get("at")?,
        actor: r.try_get("actor")?,
        action: r.try_get("action")?,
        subject: r.try_get("subject")?,
        detail: r.try_get("detail")?,
        prev: r.try_get("prev")?,
        hash: r.try_get("hash")?,
    })
}

fn token_row(r: &AnyRow) -> Result<TokenRow, StoreError> {
    Ok(TokenRow {
        hash: r.try_get("hash")?,
        name: r.try_get("name")?,
        role: role(r)?,
        sandbox: r.try_get("sandbox")?,
        expires_at: r.try_get("expires_at")?,
        generation: r.try_get("generation")?,
    })
}

fn revision_row(r: &AnyRow) -> Result<RevisionRow, StoreError> {
    Ok(RevisionRow {
        policy: r.try_get("policy")?,
        revision: r.try_get("revision")?,
        format: r.try_get("format")?,
        source: r.try_get("source")?,
        credentials: r.try_get("credentials")?,
        files: parse_files(r.try_get("files")?),
        bundle: r.try_get("bundle")?,
        digest: r.try_get("digest")?,
        signature: r.try_get("signature")?,
        author: r.try_get("author")?,
        approved_by: r.try_get("approved_by")?,
        proposal: r.try_get("proposal")?,
        created_at: r.try_get("created_at")?,
    })
}

fn proposal_row(r: &AnyRow) -> Result<ProposalRow, StoreError> {
    let state: String = r.try_get("state")?;
    Ok(ProposalRow {
        id: r.try_get("id")?,
        policy: r.try_get("policy")?,
        state: ProposalState::parse(&state)
            .ok_or_else(|| StoreError::Io(format!("unknown state `{state}` in the database")))?,
        base_revision: r.try_get("base_revision")?,
        base_digest: r.try_get("base_digest")?,
        format: r.try_get("format")?,
        source: r.try_get("source")?,
        credentials: r.try_get("credentials")?,
        files: parse_files(r.try_get("files")?),
        bundle: r.try_get("bundle")?,
        digest: r.try_get("digest")?,
        verdict: r.try_get("verdict")?,
        proof: parse_json(r.try_get("proof")?),
        diagnostics: parse_json(r.try_get("diagnostics")?),
        containment: parse_json(r.try_get("containment")?),
        boundary_digest: r.try_get("boundary_digest")?,
        review_token: r.try_get("review_token")?,
        proposer: r.try_get("proposer")?,
        decided_by: r.try_get("decided_by")?,
        decision: r.try_get("decision")?,
        reason: r.try_get("reason")?,
        revision: r.try_get("revision")?,
        rollback_of: r.try_get("rollback_of")?,
        origin: r.try_get("origin")?,
        rationale: r.try_get("rationale")?,
        created_at: r.try_get("created_at")?,
        version: r.try_get("version")?,
    })
}

fn sandbox_row(r: &AnyRow) -> Result<SandboxRow, StoreError> {
    Ok(SandboxRow {
        id: r.try_get("id")?,
        policy: r.try_get("policy")?,
        desired_revision: r.try_get("desired_revision")?,
        desired_digest: r.try_get("desired_digest")?,
        applied_revision: r.try_get("applied_revision")?,
        applied_digest: r.try_get("applied_digest")?,
        result: r.try_get("result")?,
        error: r.try_get("error")?,
        reported_at: r.try_get("reported_at")?,
        version: r.try_get("version")?,
        phase: phase(r, "phase")?,
        reason: r.try_get("reason")?,
        spec: r
            .try_get::<Option<String>, _>("spec")?
            .map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| StoreError::Io(format!("a sandbox's `spec` does not read back: {e}")))?,
        generation: r.try_get::<Option<i64>, _>("generation")?.unwrap_or(0),
        prior_phase: phase(r, "prior_phase")?,
        lease_owner: r.try_get("lease_owner")?,
        lease_until: r.try_get("lease_until")?,
        phase_at: r.try_get("phase_at")?,
        place: r.try_get("place")?,
    })
}

fn phase(r: &AnyRow, column: &str) -> Result<Option<Phase>, StoreError> {
    r.try_get::<Option<String>, _>(column)?
        .map(|w| {
            Phase::parse(&w)
                .ok_or_else(|| StoreError::Io(format!("a sandbox's {column} `{w}` is unknown")))
        })
        .transpose()
}

impl Store for SqlStore {
    fn migrate(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            let (id, blob) = match self.dialect {
                Dialect::Sqlite => ("INTEGER PRIMARY KEY", "BLOB"),
                Dialect::Postgres => (
                    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                    "BYTEA",
                ),
            };
            let (_guard, mut tx) = self.begin().await?;
            if self.dialect == Dialect::Postgres {
                // Two replicas starting together create the tables once.
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(START_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            for stmt in TABLES {
                sqlx::query(&stmt.replace("{ID}", id).replace("{BLOB}", blob))
                    .execute(&mut *tx)
                    .await?;
            }
            let immutable = match self.dialect {
                Dialect::Sqlite => IMMUTABLE_SQLITE,
                Dialect::Postgres => IMMUTABLE_POSTGRES,
            };
            for stmt in immutable {
                sqlx::query(stmt).execute(&mut *tx).await?;
            }
            for added in ADDED_COLUMNS {
                add_column(&mut tx, self.dialect, *added).await?;
            }
            sqlx::query(lifecycle::INDEX).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT (id) DO NOTHING")
                .bind(GENESIS)
                .execute(&mut *tx)
                .await?;
            drop_duplicate_names(&mut tx).await?;
            sqlx::query(TOKEN_NAMES_UNIQUE).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn create_token(&self, token: TokenRow, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            sqlx::query("INSERT INTO tokens (hash, name, role, sandbox, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                .bind(&token.hash)
                .bind(&token.name)
                .bind(token.role.word())
                .bind(token.sandbox.clone())
                .bind(token.expires_at)
                .bind(audit.at)
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    conflict(
                        e,
                        &format!(
                            "a token named `{}` exists already: revoke it first (`token revoke {}`) or choose another name",
                            token.name, token.name
                        ),
                    )
                })?;
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn ensure_admin_token(&self, token: TokenRow) -> Fut<'_, ()> {
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            if self.dialect == Dialect::Postgres {
                // Replicas starting together: one replaces, the others
                // then find the row as it should be.
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(START_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            let held = sqlx::query(
                "SELECT hash, name, role, sandbox, expires_at, CAST(NULL AS BIGINT) AS generation FROM tokens WHERE name = $1 OR hash = $2",
            )
            .bind(&token.name)
            .bind(&token.hash)
            .fetch_all(&mut *tx)
            .await?;
            let rows = held.iter().map(token_row).collect::<Result<Vec<_>, _>>()?;
            let current = matches!(rows.as_slice(), [only]
                if only.hash == token.hash
                    && only.name == token.name
                    && only.role == token.role
                    && only.sandbox == token.sandbox
                    && only.expires_at == token.expires_at);
            if current {
                return Ok(());
            }
            let removed = sqlx::query("DELETE FROM tokens WHERE name = $1 OR hash = $2")
                .bind(&token.name)
                .bind(&token.hash)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let at = crate::app::now();
            sqlx::query("INSERT INTO tokens (hash, name, role, sandbox, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                .bind(&token.hash)
                .bind(&token.name)
                .bind(token.role.word())
                .bind(token.sandbox.clone())
                .bind(token.expires_at)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            let audit = AuditEntry {
                at,
                actor: GATEWAY_ACTOR.into(),
                action: if removed > 0 {
                    "token-replace"
                } else {
                    "token-create"
                }
                .into(),
                subject: format!("token:{}", token.name),
                detail: serde_json::json!({
                    "name": token.name,
                    "role": token.role,
                    "revoked": removed,
                    "from": "admin.token",
                }),
            };
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn tokens(&self) -> Fut<'_, Vec<TokenInfo>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT name, role, sandbox, expires_at, created_at FROM tokens ORDER BY name",
            )
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(token_info).collect()
        })
    }

    fn revoke_token(&self, name: &str, audit: AuditEntry) -> Fut<'_, ()> {
        let name = name.to_owned();
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let gone = sqlx::query("DELETE FROM tokens WHERE name = $1")
                .bind(&name)
                .execute(&mut *tx)
                .await?;
            if gone.rows_affected() == 0 {
                return Err(StoreError::NotFound(format!("no token named `{name}`")));
            }
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn token(&self, hash: &str) -> Fut<'_, Option<TokenRow>> {
        let hash = hash.to_owned();
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT hash, name, role, sandbox, expires_at, CAST(NULL AS BIGINT) AS generation FROM tokens WHERE hash = $1",
            )
            .bind(&hash)
            .fetch_optional(&self.pool)
            .await?;
            match row {
                Some(row) => token_row(&row).map(Some),
                None => self.session(hash).await,
            }
        })
    }

    fn policy(&self, name: &str) -> Fut<'_, Option<PolicyRow>> {
        let name = name.to_owned();
        Box::pin(async move {
            let row =
                sqlx::query("SELECT name, active_revision, version FROM policies WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
            row.map(|r| {
                Ok(PolicyRow {
                    name: r.try_get("name")?,
                    active_revision: r.try_get("active_revision")?,
                    version: r.try_get("version")?,
                })
            })
            .transpose()
        })
    }

    fn revision(&self, policy: &str, revision: i64) -> Fut<'_, Option<RevisionRow>> {
        let policy = policy.to_owned();
        Box::pin(async move {
            let row = sqlx::query(&format!(
                "SELECT {REVISION_COLUMNS} FROM revisions WHERE policy = $1 AND revision = $2"
            ))
            .bind(policy)
            .bind(revision)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(revision_row).transpose()
        })
    }

    fn revisions(&self, policy: &str) -> Fut<'_, Vec<RevisionRow>> {
        let policy = policy.to_owned();
        Box::pin(async move {
            let rows = sqlx::query(&format!(
                "SELECT {REVISION_COLUMNS} FROM revisions WHERE policy = $1 ORDER BY revision"
            ))
            .bind(policy)
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(revision_row).collect()
        })
    }

    fn insert_proposal(&self, p: NewProposal, audit: AuditEntry) -> Fut<'_, i64> {
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            sqlx::query("INSERT INTO policies (name, active_revision, version, created_at) VALUES ($1, NULL, 0, $2) ON CONFLICT (name) DO NOTHING")
                .bind(&p.policy)
                .bind(audit.at)
                .execute(&mut *tx)
                .await?;
            // A proposal refused for leaving its boundary is decided as it
            // is stored: by the gateway, never by a person.
            let refused = p.refusal.as_ref().map(|_| GATEWAY_ACTOR);
            let decision = p.refusal.as_ref().map(|_| "boundary");
            let row = sqlx::query("INSERT INTO proposals (policy, state, base_revision, base_digest, format, source, credentials, bundle, digest, verdict, proof, diagnostics, review_token, proposer, rollback_of, created_at, version, files, containment, boundary_digest, decided_by, decision, reason, origin, rationale) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 0, $17, $18, $19, $20, $21, $22, $23, $24) RETURNING id")
                .bind(&p.policy)
                .bind(p.state.word())
                .bind(p.base_revision)
                .bind(p.base_digest.clone())
                .bind(&p.format)
                .bind(&p.source)
                .bind(p.credentials.clone())
                .bind(p.bundle.clone())
                .bind(p.digest.clone())
                .bind(p.verdict.clone())
                .bind(json_text(p.proof.as_ref()))
                .bind(json_text(p.diagnostics.as_ref()))
                .bind(p.review_token.clone())
                .bind(&p.proposer)
                .bind(p.rollback_of)
                .bind(audit.at)
                .bind(files_text(&p.files))
                .bind(json_text(p.containment.as_ref()))
                .bind(p.boundary_digest.clone())
                .bind(refused)
                .bind(decision)
                .bind(p.refusal.clone())
                .bind(p.origin.clone())
                .bind(p.rationale.clone())
                .fetch_one(&mut *tx)
                .await?;
            let id: i64 = row.try_get("id")?;
            let mut audit = audit;
            if let Some(obj) = audit.detail.as_object_mut() {
                obj.insert("proposal".into(), id.into());
            }
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(id)
        })
    }

    fn proposal(&self, id: i64) -> Fut<'_, Option<ProposalRow>> {
        Box::pin(async move {
            let row = sqlx::query(&format!(
                "SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE id = $1"
            ))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(proposal_row).transpose()
        })
    }

    fn proposals(&self, policy: Option<&str>) -> Fut<'_, Vec<ProposalRow>> {
        let policy = policy.map(str::to_owned);
        Box::pin(async move {
            let rows = match policy {
                Some(p) => {
                    sqlx::query(&format!(
                        "SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE policy = $1 ORDER BY id"
                    ))
                    .bind(p)
                    .fetch_all(&self.pool)
                    .await?
                }
                None => {
                    sqlx::query(&format!(
                        "SELECT {PROPOSAL_COLUMNS} FROM proposals ORDER BY id"
                    ))
                    .fetch_all(&self.pool)
                    .await?
                }
            };
            rows.iter().map(proposal_row).collect()
        })
    }

    fn approve(&self, a: Approval, audit: AuditEntry) -> Fut<'_, i64> {
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let row = sqlx::query(&format!(
                "SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE id = $1"
            ))
            .bind(a.proposal)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no proposal {}", a.proposal)))?;
            let p = proposal_row(&row)?;
            let (Some(bundle), Some(digest)) = (p.bundle.clone(), p.digest.clone()) else {
                return Err(StoreError::Conflict(format!(
                    "proposal {} has no bundle to approve",
                    p.id
                )));
            };
            // The proposal: still pending, still the version read.
            let closed = sqlx::query("UPDATE proposals SET state = 'approved', decided_by = $1, decision = $2, version = version + 1 WHERE id = $3 AND version = $4 AND state = 'pending'")
                .bind(&a.approved_by)
                .bind(&a.decision)
                .bind(a.proposal)
                .bind(a.version)
                .execute(&mut *tx)
                .await?;
            if closed.rows_affected() != 1 {
                return Err(StoreError::Conflict(format!(
                    "proposal {} was decided or changed by another request",
                    a.proposal
                )));
            }
            // The policy: still at the proposal's base.
            let pol = sqlx::query("SELECT version FROM policies WHERE name = $1")
                .bind(&p.policy)
                .fetch_one(&mut *tx)
                .await?;
            let version: i64 = pol.try_get("version")?;
            let max = sqlx::query(
                "SELECT COALESCE(MAX(revision), 0) AS n FROM revisions WHERE policy = $1",
            )
            .bind(&p.policy)
            .fetch_one(&mut *tx)
            .await?;
            let revision = max.try_get::<i64, _>("n")?.saturating_add(1);
            let moved = sqlx::query("UPDATE policies SET active_revision = $1, version = version + 1 WHERE name = $2 AND version = $3 AND active_revision IS NOT DISTINCT FROM $4")
                .bind(revision)
                .bind(&p.policy)
                .bind(version)
                .bind(p.base_revision)
                .execute(&mut *tx)
                .await?;
            if moved.rows_affected() != 1 {
                return Err(StoreError::Conflict(format!(
                    "the active revision of `{}` moved since proposal {} was proved: re-propose",
                    p.policy, p.id
                )));
            }
            // Read after the policy's row is locked by the update above:
            // setting a boundary updates that row too, so the boundary read
            // here is the one in force when this commits.
            boundary::still_proved_against(&mut tx, &p).await?;
            let signature = (a.sign)(&p.policy, revision, &digest, a.now);
            sqlx::query(&format!("INSERT INTO revisions ({REVISION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"))
                .bind(&p.policy)
                .bind(revision)
                .bind(&p.format)
                .bind(&p.source)
                .bind(p.credentials.clone())
                .bind(&bundle)
                .bind(&digest)
                .bind(&signature)
                .bind(&p.proposer)
                .bind(&a.approved_by)
                .bind(p.id)
                .bind(a.now)
                .bind(files_text(&p.files))
                .execute(&mut *tx)
                .await
                .map_err(|e| conflict(e, "another approval made this revision first"))?;
            sqlx::query("UPDATE proposals SET revision = $1 WHERE id = $2")
                .bind(revision)
                .bind(p.id)
                .execute(&mut *tx)
                .await?;
            let mut audit = audit;
            if let Some(obj) = audit.detail.as_object_mut() {
                obj.insert("revision".into(), revision.into());
                obj.insert("digest".into(), digest.clone().into());
            }
            append(&mut tx, &audit).await?;
            self.notify(&mut tx, &format!("policy:{}", p.policy))
                .await?;
            tx.commit().await?;
            Ok(revision)
        })
    }

    fn reject(
        &self,
        proposal: i64,
        version: i64,
        by: &str,
        reason: &str,
        audit: AuditEntry,
    ) -> Fut<'_, ()> {
        let (by, reason) = (by.to_owned(), reason.to_owned());
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let done = sqlx::query("UPDATE proposals SET state = 'rejected', decided_by = $1, decision = 'manual', reason = $2, version = version + 1 WHERE id = $3 AND version = $4 AND state = 'pending'")
                .bind(by)
                .bind(reason)
                .bind(proposal)
                .bind(version)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != 1 {
                return Err(StoreError::Conflict(format!(
                    "proposal {proposal} was decided or changed by another request"
                )));
            }
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn create_sandbox(
        &self,
        id: &str,
        policy: &str,
        token: TokenRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()> {
        let (id, policy) = (id.to_owned(), policy.to_owned());
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            // In the same statement as the check, so that the policy
            // cannot be missing by the time the row is there.
            let made = sqlx::query(
                "INSERT INTO sandboxes (id, policy, version, created_at) SELECT $1, $2, 0, $3 WHERE EXISTS (SELECT 1 FROM policies WHERE name = $4)",
            )
            .bind(&id)
            .bind(&policy)
            .bind(audit.at)
            .bind(&policy)
            .execute(&mut *tx)
            .await
            .map_err(|e| conflict(e, &format!("sandbox `{id}` exists already")))?;
            if made.rows_affected() != 1 {
                return Err(StoreError::NotFound(format!(
                    "no policy `{policy}`: propose it first (`openshell-gateway propose {policy} FILE`), then create the sandbox"
                )));
            }
            sqlx::query("INSERT INTO tokens (hash, name, role, sandbox, expires_at, created_at) VALUES ($1, $2, 'sandbox', $3, $4, $5)")
                .bind(&token.hash)
                .bind(&token.name)
                .bind(&id)
                .bind(token.expires_at)
                .bind(audit.at)
                .execute(&mut *tx)
                .await
                .map_err(|e| conflict(e, "that token exists already"))?;
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn sandbox(&self, id: &str) -> Fut<'_, Option<SandboxRow>> {
        let id = id.to_owned();
        Box::pin(async move {
            let row = sqlx::query(&format!("{SANDBOX_SELECT} WHERE s.id = $1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
            row.as_ref().map(sandbox_row).transpose()
        })
    }

    fn sandboxes(&self) -> Fut<'_, Vec<SandboxRow>> {
        Box::pin(async move {
            let rows = sqlx::query(&format!("{SANDBOX_SELECT} ORDER BY s.id"))
                .fetch_all(&self.pool)
                .await?;
            rows.iter().map(sandbox_row).collect()
        })
    }

    fn renew_sandbox_token(
        &self,
        id: &str,
        version: i64,
        token: TokenRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let moved = sqlx::query(
                "UPDATE sandboxes SET version = version + 1 WHERE id = $1 AND version = $2",
            )
            .bind(&id)
            .bind(version)
            .execute(&mut *tx)
            .await?;
            if moved.rows_affected() != 1 {
                return Err(self.lost_sandbox(&mut tx, &id).await);
            }
            let revoked = sqlx::query("DELETE FROM tokens WHERE sandbox = $1 OR name = $2")
                .bind(&id)
                .bind(&token.name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query("INSERT INTO tokens (hash, name, role, sandbox, expires_at, created_at) VALUES ($1, $2, 'sandbox', $3, $4, $5)")
                .bind(&token.hash)
                .bind(&token.name)
                .bind(&id)
                .bind(token.expires_at)
                .bind(audit.at)
                .execute(&mut *tx)
                .await
                .map_err(|e| conflict(e, "another request renewed this token first"))?;
            let mut audit = audit;
            if let Some(obj) = audit.detail.as_object_mut() {
                obj.insert("revoked".into(), revoked.into());
            }
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn delete_sandbox(&self, id: &str, version: i64, audit: AuditEntry) -> Fut<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let gone = sqlx::query("DELETE FROM sandboxes WHERE id = $1 AND version = $2")
                .bind(&id)
                .bind(version)
                .execute(&mut *tx)
                .await?;
            if gone.rows_affected() != 1 {
                return Err(self.lost_sandbox(&mut tx, &id).await);
            }
            let revoked = sqlx::query("DELETE FROM tokens WHERE sandbox = $1 OR name = $2")
                .bind(&id)
                .bind(format!("sandbox:{id}"))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            exec::delete_all(&mut tx, &id).await?;
            let mut audit = audit;
            if let Some(obj) = audit.detail.as_object_mut() {
                obj.insert("revoked".into(), revoked.into());
            }
            append(&mut tx, &audit).await?;
            self.notify(&mut tx, &format!("sandbox:{id}")).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn report_status(
        &self,
        id: &str,
        version: i64,
        report: StatusReport,
        audit: AuditEntry,
    ) -> Fut<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            let done = sqlx::query("UPDATE sandboxes SET applied_revision = $1, applied_digest = $2, result = $3, error = $4, reported_at = $5, version = version + 1 WHERE id = $6 AND version = $7")
                .bind(report.revision)
                .bind(report.digest.clone())
                .bind(&report.result)
                .bind(report.error.clone())
                .bind(report.now)
                .bind(&id)
                .bind(version)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != 1 {
                return Err(StoreError::Conflict(format!(
                    "sandbox `{id}` changed since it was read: report again"
                )));
            }
            append(&mut tx, &audit).await?;
            self.notify(&mut tx, &format!("sandbox:{id}")).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn create_managed(&self, sandbox: NewManaged, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(self.insert_managed(sandbox, audit))
    }

    fn transition(&self, change: Transition, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(self.change_phase(change, audit))
    }

    fn refresh_session(
        &self,
        id: &str,
        presented: &str,
        session: SessionRow,
        audit: AuditEntry,
    ) -> Fut<'_, ()> {
        Box::pin(self.add_session(id.to_owned(), presented.to_owned(), session, audit))
    }

    fn renew_lease(&self, id: &str, owner: &str, until: i64) -> Fut<'_, bool> {
        Box::pin(self.extend_lease(id.to_owned(), owner.to_owned(), until))
    }

    fn stalled(&self, now: i64) -> Fut<'_, Vec<SandboxRow>> {
        Box::pin(self.read_stalled(now))
    }

    fn create_exec(&self, exec: NewExec, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(self.insert_exec(exec, audit))
    }

    fn exec(&self, sandbox: &str, id: &str) -> Fut<'_, Option<ExecRow>> {
        Box::pin(self.read_exec(sandbox.to_owned(), id.to_owned()))
    }

    fn execs(&self, sandbox: &str, limit: i64) -> Fut<'_, Vec<ExecRow>> {
        Box::pin(self.read_execs(sandbox.to_owned(), limit))
    }

    fn claim_exec(&self, sandbox: &str, now: i64) -> Fut<'_, Option<ClaimedExec>> {
        Box::pin(self.claim(sandbox.to_owned(), now))
    }

    fn append_output(
        &self,
        sandbox: &str,
        id: &str,
        piece: OutputPiece,
        limit: i64,
    ) -> Fut<'_, ()> {
        Box::pin(self.write_output(sandbox.to_owned(), id.to_owned(), piece, limit))
    }

    fn end_exec(
        &self,
        sandbox: &str,
        id: &str,
        end: ExecEnd,
        now: i64,
        audit: AuditEntry,
    ) -> Fut<'_, bool> {
        Box::pin(self.finish_exec(sandbox.to_owned(), id.to_owned(), end, now, audit))
    }

    fn exec_output(
        &self,
        id: &str,
        stdout: i64,
        stderr: i64,
        max: usize,
    ) -> Fut<'_, Vec<OutputPiece>> {
        Box::pin(self.read_output(id.to_owned(), stdout, stderr, max))
    }

    fn one_process(&self) -> bool {
        self.dialect == Dialect::Sqlite
    }

    fn boundary(&self, policy: &str) -> Fut<'_, Option<BoundaryRow>> {
        Box::pin(self.read_boundary(policy.to_owned()))
    }

    fn set_boundary(&self, boundary: NewBoundary, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(self.write_boundary(boundary, audit))
    }

    fn remove_boundary(&self, policy: &str, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(self.delete_boundary(policy.to_owned(), audit))
    }

    fn audit(&self, audit: AuditEntry) -> Fut<'_, ()> {
        Box::pin(async move {
            let (_guard, mut tx) = self.begin().await?;
            append(&mut tx, &audit).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn audit_rows(&self, after: i64, upto: i64, limit: i64) -> Fut<'_, Vec<AuditRow>> {
        Box::pin(async move {
            let rows = sqlx::query("SELECT seq, at, actor, action, subject, detail, prev, hash FROM audit WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3")
                .bind(after)
                .bind(upto)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
            rows.iter().map(audit_row).collect()
        })
    }

    fn audit_head(&self) -> Fut<'_, (i64, String)> {
        Box::pin(async move {
            let r = sqlx::query("SELECT seq, hash FROM audit_head WHERE id = 1")
                .fetch_one(&self.pool)
                .await?;
            Ok((r.try_get("seq")?, r.try_get("hash")?))
        })
    }

    fn listen_url(&self) -> Option<String> {
        (self.dialect == Dialect::Postgres).then(|| self.url.clone())
    }
}
