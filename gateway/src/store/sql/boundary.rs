//! Boundaries in SQL: one row per policy that has one, and the check an
//! approval makes that the boundary its proposal was proved within is
//! still the one in force.
//!
//! Setting or removing a boundary also moves the policy's row (its
//! `version`), which an approval updates too: the two writes take the
//! same row lock in Postgres, so whichever commits second sees the first
//! and fails as a conflict rather than approving a proposal against a
//! boundary that is gone, or setting a boundary on a revision it never
//! proved.

use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::{SqlStore, append, files_text, json_text, parse_files, parse_json};
use crate::store::{AuditEntry, BoundaryRow, NewBoundary, ProposalRow, StoreError};

/// The table, made by `migrate` like the others (an older database gets
/// it at its first start with this version).
pub(super) const TABLE: &str = "CREATE TABLE IF NOT EXISTS boundaries (policy TEXT PRIMARY KEY, format TEXT NOT NULL, source TEXT NOT NULL, credentials TEXT, files TEXT, bundle TEXT NOT NULL, digest TEXT NOT NULL, checked_revision BIGINT, containment TEXT, set_by TEXT NOT NULL, set_at BIGINT NOT NULL)";

const COLUMNS: &str = "policy, format, source, credentials, files, bundle, digest, checked_revision, containment, set_by, set_at";

fn boundary_row(r: &AnyRow) -> Result<BoundaryRow, StoreError> {
    Ok(BoundaryRow {
        policy: r.try_get("policy")?,
        format: r.try_get("format")?,
        source: r.try_get("source")?,
        credentials: r.try_get("credentials")?,
        files: parse_files(r.try_get("files")?),
        bundle: r.try_get("bundle")?,
        digest: r.try_get("digest")?,
        checked_revision: r.try_get("checked_revision")?,
        containment: parse_json(r.try_get("containment")?),
        set_by: r.try_get("set_by")?,
        set_at: r.try_get("set_at")?,
    })
}

/// `Conflict` unless the policy's boundary is (still) the one `p` was
/// proved within: none then and none now, or the same digest.
pub(super) async fn still_proved_against(
    tx: &mut Transaction<'static, Any>,
    p: &ProposalRow,
) -> Result<(), StoreError> {
    let row = sqlx::query("SELECT digest FROM boundaries WHERE policy = $1")
        .bind(&p.policy)
        .fetch_optional(&mut **tx)
        .await?;
    let now: Option<String> = row.map(|r| r.try_get("digest")).transpose()?;
    if now == p.boundary_digest {
        return Ok(());
    }
    Err(StoreError::Conflict(format!(
        "the boundary of `{}` changed since proposal {} was proved: re-propose, so that it is proved within the boundary in force",
        p.policy, p.id
    )))
}

/// Moves the policy's row (made when missing) from `version`; `Conflict`
/// when it is elsewhere.
async fn move_policy(
    tx: &mut Transaction<'static, Any>,
    policy: &str,
    version: Option<i64>,
    at: i64,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO policies (name, active_revision, version, created_at) VALUES ($1, NULL, 0, $2) ON CONFLICT (name) DO NOTHING")
        .bind(policy)
        .bind(at)
        .execute(&mut **tx)
        .await?;
    let moved =
        sqlx::query("UPDATE policies SET version = version + 1 WHERE name = $1 AND version = $2")
            .bind(policy)
            .bind(version.unwrap_or(0))
            .execute(&mut **tx)
            .await?;
    if moved.rows_affected() != 1 {
        return Err(StoreError::Conflict(format!(
            "`{policy}` changed (an approval, or another boundary) while its active revision was proved within the boundary: set it again"
        )));
    }
    Ok(())
}

impl SqlStore {
    pub(super) async fn read_boundary(
        &self,
        policy: String,
    ) -> Result<Option<BoundaryRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM boundaries WHERE policy = $1"
        ))
        .bind(policy)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(boundary_row).transpose()
    }

    pub(super) async fn write_boundary(
        &self,
        b: NewBoundary,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        let r = &b.row;
        move_policy(&mut tx, &r.policy, b.policy_version, r.set_at).await?;
        sqlx::query(&format!(
            "INSERT INTO boundaries ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (policy) DO UPDATE SET format = excluded.format, source = excluded.source, credentials = excluded.credentials, files = excluded.files, bundle = excluded.bundle, digest = excluded.digest, checked_revision = excluded.checked_revision, containment = excluded.containment, set_by = excluded.set_by, set_at = excluded.set_at"
        ))
        .bind(&r.policy)
        .bind(&r.format)
        .bind(&r.source)
        .bind(r.credentials.clone())
        .bind(files_text(&r.files))
        .bind(&r.bundle)
        .bind(&r.digest)
        .bind(r.checked_revision)
        .bind(json_text(r.containment.as_ref()))
        .bind(&r.set_by)
        .bind(r.set_at)
        .execute(&mut *tx)
        .await?;
        append(&mut tx, &audit).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn delete_boundary(
        &self,
        policy: String,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        // The row lock an approval takes too (see the module's comment).
        sqlx::query("UPDATE policies SET version = version + 1 WHERE name = $1")
            .bind(&policy)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM boundaries WHERE policy = $1")
            .bind(&policy)
            .execute(&mut *tx)
            .await?;
        if gone.rows_affected() != 1 {
            return Err(StoreError::NotFound(format!(
                "policy `{policy}` has no boundary"
            )));
        }
        append(&mut tx, &audit).await?;
        tx.commit().await?;
        Ok(())
    }
}
