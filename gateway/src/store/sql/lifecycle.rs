//! The lifecycle of managed sandboxes in SQL. A phase change is one
//! `UPDATE` (or, for a deletion, one `DELETE`) that names the phase,
//! generation and lease holder it read, so of two gateways acting on one
//! sandbox only one changes it; the sandbox's tokens change in the same
//! transaction, so a session is never revoked by a change that did not
//! commit.
//!
//! Changes here do not compare `version`: a supervisor's status report
//! moves it while a driver acts, and must not make the change a conflict.

use sqlx::{Any, Transaction};

use super::{SANDBOX_SELECT, SqlStore, append, conflict, sandbox_row, token_row};
use crate::store::{
    AuditEntry, NewManaged, Phase, SandboxRow, SessionRow, StoreError, TokenRow, Tokens, Transition,
};

/// Finding the sandboxes in transition without reading every row.
pub(super) const INDEX: &str = "CREATE INDEX IF NOT EXISTS sandboxes_phase ON sandboxes (phase)";

/// The session tokens of sandboxes the gateway runs, by hash.
pub(super) const SESSIONS: &str = "CREATE TABLE IF NOT EXISTS sessions (hash TEXT PRIMARY KEY, sandbox TEXT NOT NULL, generation BIGINT NOT NULL, expires_at BIGINT NOT NULL, created_at BIGINT NOT NULL)";
pub(super) const SESSIONS_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS sessions_sandbox ON sessions (sandbox)";

/// A session as authentication reads it: only while its sandbox is at its
/// generation.
const SESSION_SELECT: &str = "SELECT s.hash, 'sandbox:' || s.sandbox AS name, 'sandbox' AS role, s.sandbox, s.expires_at, s.generation FROM sessions s JOIN sandboxes b ON b.id = s.sandbox AND b.generation = s.generation WHERE s.hash = $1";

/// Revokes every token and session of sandbox `id`.
async fn revoke(tx: &mut Transaction<'static, Any>, id: &str) -> Result<u64, StoreError> {
    let tokens = sqlx::query("DELETE FROM tokens WHERE sandbox = $1 OR name = $2")
        .bind(id)
        .bind(format!("sandbox:{id}"))
        .execute(&mut **tx)
        .await?
        .rows_affected();
    let sessions = sqlx::query("DELETE FROM sessions WHERE sandbox = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(tokens + sessions)
}

async fn insert_session(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    session: &SessionRow,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO sessions (hash, sandbox, generation, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&session.hash)
        .bind(id)
        .bind(session.generation)
        .bind(session.expires_at)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(|e| conflict(e, "a session with this token exists already"))?;
    Ok(())
}

impl SqlStore {
    pub(super) async fn insert_managed(
        &self,
        s: NewManaged,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let spec = serde_json::to_string(&s.spec)
            .map_err(|e| StoreError::Io(format!("the sandbox's spec does not serialize: {e}")))?;
        let (_guard, mut tx) = self.begin().await?;
        let made = sqlx::query("INSERT INTO sandboxes (id, policy, version, created_at, phase, spec, generation, lease_owner, lease_until, phase_at, place) SELECT $1, $2, 0, $3, 'provisioning', $4, 1, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM policies WHERE name = $9)")
            .bind(&s.id)
            .bind(&s.policy)
            .bind(s.now)
            .bind(spec)
            .bind(&s.lease.owner)
            .bind(s.lease.until)
            .bind(s.now)
            .bind(&s.place)
            .bind(&s.policy)
            .execute(&mut *tx)
            .await
            .map_err(|e| conflict(e, &format!("sandbox `{}` exists already", s.id)))?;
        if made.rows_affected() != 1 {
            return Err(StoreError::NotFound(format!(
                "no policy `{}`: propose it first (`openshell-gateway propose {} FILE`), then create the sandbox",
                s.policy, s.policy
            )));
        }
        insert_session(&mut tx, &s.id, &s.session, s.now).await?;
        append(&mut tx, &audit).await?;
        self.notify(&mut tx, &format!("sandbox:{}", s.id)).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn change_phase(
        &self,
        t: Transition,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        let changed = match t.to {
            Some(to) => {
                sqlx::query("UPDATE sandboxes SET phase = $1, reason = $2, lease_owner = $3, lease_until = $4, generation = generation + $5, prior_phase = $6, phase_at = $7, version = version + 1 WHERE id = $8 AND phase = $9 AND generation = $10 AND lease_owner IS NOT DISTINCT FROM $11")
                    .bind(to.word())
                    .bind(t.reason.clone())
                    .bind(t.lease.as_ref().map(|l| l.owner.clone()))
                    .bind(t.lease.as_ref().map(|l| l.until))
                    .bind(i64::from(t.next_generation))
                    .bind(t.prior.map(Phase::word))
                    .bind(t.now)
                    .bind(&t.id)
                    .bind(t.from.word())
                    .bind(t.generation)
                    .bind(t.holder.clone())
                    .execute(&mut *tx)
                    .await?
            }
            None => {
                sqlx::query("DELETE FROM sandboxes WHERE id = $1 AND phase = $2 AND generation = $3 AND lease_owner IS NOT DISTINCT FROM $4")
                    .bind(&t.id)
                    .bind(t.from.word())
                    .bind(t.generation)
                    .bind(t.holder.clone())
                    .execute(&mut *tx)
                    .await?
            }
        };
        if changed.rows_affected() != 1 {
            return Err(self.lost_sandbox(&mut tx, &t.id).await);
        }
        // No supervisor is left to run the sandbox's commands or to say
        // how they ended: they fail with the change, or go with the
        // sandbox. A stop that rolls back to `ready` leaves them running.
        let failed = match t.to {
            Some(Phase::Stopped | Phase::Failed) => {
                super::exec::fail_open(&mut tx, &t.id, t.now).await?
            }
            None => {
                super::exec::delete_all(&mut tx, &t.id).await?;
                0
            }
            Some(_) => 0,
        };
        let revoked = match &t.tokens {
            Tokens::Keep => 0,
            Tokens::Revoke => revoke(&mut tx, &t.id).await?,
            Tokens::Replace(session) => {
                let n = revoke(&mut tx, &t.id).await?;
                insert_session(&mut tx, &t.id, session, t.now).await?;
                n
            }
        };
        let mut audit = audit;
        if let Some(obj) = audit.detail.as_object_mut() {
            obj.insert("revoked".into(), revoked.into());
            if failed > 0 {
                obj.insert("execs_failed".into(), failed.into());
            }
        }
        append(&mut tx, &audit).await?;
        self.notify(&mut tx, &format!("sandbox:{}", t.id)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The session with this hash, as a token row, while it is bound to
    /// its sandbox's generation.
    pub(super) async fn session(&self, hash: String) -> Result<Option<TokenRow>, StoreError> {
        let row = sqlx::query(SESSION_SELECT)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(token_row).transpose()
    }

    pub(super) async fn add_session(
        &self,
        id: String,
        presented: String,
        session: SessionRow,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        let current = sqlx::query(&format!("{SESSION_SELECT} AND s.sandbox = $2"))
            .bind(&presented)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
        if current.is_none() {
            return Err(StoreError::NotFound(format!(
                "the session of sandbox `{id}` is revoked: the sandbox stopped, or started another generation"
            )));
        }
        // The token that asked stays until it expires, in case the answer
        // is lost on its way; every older one goes.
        sqlx::query("DELETE FROM sessions WHERE sandbox = $1 AND hash <> $2")
            .bind(&id)
            .bind(&presented)
            .execute(&mut *tx)
            .await?;
        insert_session(&mut tx, &id, &session, audit.at).await?;
        append(&mut tx, &audit).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn extend_lease(
        &self,
        id: String,
        owner: String,
        until: i64,
    ) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        let moved =
            sqlx::query("UPDATE sandboxes SET lease_until = $1 WHERE id = $2 AND lease_owner = $3")
                .bind(until)
                .bind(&id)
                .bind(&owner)
                .execute(&mut *tx)
                .await?;
        tx.commit().await?;
        Ok(moved.rows_affected() == 1)
    }

    pub(super) async fn read_stalled(&self, now: i64) -> Result<Vec<SandboxRow>, StoreError> {
        let moving = Phase::ALL
            .into_iter()
            .filter(|p| p.in_transition())
            .map(|p| format!("'{}'", p.word()))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = sqlx::query(&format!(
            "{SANDBOX_SELECT} WHERE s.phase IN ({moving}) AND (s.lease_until IS NULL OR s.lease_until < $1) ORDER BY s.id"
        ))
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(sandbox_row).collect()
    }
}
