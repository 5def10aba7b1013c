//! `/v1/policies/{name}/boundary`: an admin sets, reads or removes the
//! boundary a policy's every proposal is proved within.
//!
//! Admin only, like tokens and sandboxes: the boundary is what the
//! platform team allows a team's policy at most, and an author who could
//! move it could approve anything by widening it first.
//!
//! A boundary that the policy's active revision exceeds is refused with
//! the findings (`422`, `boundary_exceeded`), so that a boundary never
//! stands over a running policy that it does not contain: narrow the
//! policy first (a proposal within the new boundary), then set it. When
//! the prover cannot settle it (`unsupported`, `inconclusive`) the
//! boundary is set and its answer says so: the admin set it knowingly,
//! and every proposal from then on is proved within it.

use std::sync::Arc;

use hyper::StatusCode;
use policy_bundle::Bundle;
use serde_json::{Value, json};

use super::{READERS, entry, name};
use crate::app::{ApiError, App, Caller, Reply, Req, now};
use crate::propose::{self, Candidate, Question};
use crate::store::{BoundaryRow, NewBoundary, ProposalRow, Role};
use crate::wire;

/// A `422` whose body carries what backs it.
fn refusal(
    code: &'static str,
    message: String,
    containment: Option<Value>,
    diagnostics: Option<Value>,
) -> Reply {
    Reply::json(
        StatusCode::UNPROCESSABLE_ENTITY,
        &wire::BoundaryRefusal {
            error: wire::ErrorDetail {
                status: StatusCode::UNPROCESSABLE_ENTITY.as_u16(),
                code: code.to_owned(),
                message,
            },
            containment,
            diagnostics,
        },
    )
}

/// `PUT /v1/policies/{name}/boundary`.
pub(super) async fn set(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let policy = name("policy", policy)?;
    let body: wire::BoundaryRequest = r.json()?;
    let candidate = Candidate {
        source: body.source,
        format: body.format,
        credentials: body.credentials,
        files: body.files,
    };
    let stem = format!("{policy}.boundary");
    let (path, (checked, bundle)) = propose::compile(app, &stem, &candidate).await?;
    let Some(bundle) = bundle else {
        return Ok(refusal(
            "boundary_invalid",
            format!("the boundary for `{policy}` does not compile: see `diagnostics`"),
            None,
            Some(propose::diagnostics(&path, &checked)),
        ));
    };
    let bytes = String::from_utf8_lossy(&bundle.to_bytes()).into_owned();
    let row = app.store.policy(&policy).await?;
    let version = row.as_ref().map(|p| p.version);
    let active = row.and_then(|p| p.active_revision);
    let revision = match active {
        Some(n) => app.store.revision(&policy, n).await?,
        None => None,
    };
    let containment = match &revision {
        Some(rev) => Some(match Bundle::from_slice(rev.bundle.as_bytes()) {
            Ok(running) => {
                let small = rev.bundle.len() + bytes.len() <= app.limits.small_proof_bytes;
                propose::prove(app, &bytes, running, small, Question::Within).await
            }
            Err(e) => crate::contain::inconclusive(&format!("the active revision's bundle: {e}")),
        }),
        None => None,
    };
    if let (Some(c), Some(rev)) = (&containment, &revision)
        && let Some(excesses) = crate::contain::excesses(c)
    {
        return Ok(refusal(
            "boundary_exceeded",
            format!(
                "revision {} of `{policy}`, which is active, exceeds this boundary ({excesses}): propose a revision inside it first, then set it",
                rev.revision
            ),
            containment.clone(),
            None,
        ));
    }
    let previous = app.store.boundary(&policy).await?.map(|b| b.digest);
    let verdict = containment.as_ref().and_then(|c| c.get("verdict")).cloned();
    let row = BoundaryRow {
        policy: policy.clone(),
        format: candidate.format,
        source: candidate.source,
        credentials: candidate.credentials,
        files: candidate.files,
        bundle: bytes,
        digest: bundle.digest,
        checked_revision: active,
        containment,
        set_by: caller.name.clone(),
        set_at: now(),
    };
    let detail = json!({
        "digest": row.digest,
        "previous": previous,
        "checked_revision": active,
        "containment": verdict,
    });
    let answer = wire::Boundary::from(&row);
    app.store
        .set_boundary(
            NewBoundary {
                row,
                policy_version: version,
            },
            entry(
                &caller.name,
                "boundary-set",
                format!("policy:{policy}"),
                detail,
            ),
        )
        .await?;
    Ok(Reply::ok(&answer))
}

/// `GET /v1/policies/{name}/boundary`.
pub(super) async fn get(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let policy = name("policy", policy)?;
    let row = app
        .store
        .boundary(&policy)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("policy `{policy}` has no boundary")))?;
    Ok(Reply::ok(&wire::Boundary::from(&row)))
}

/// `DELETE /v1/policies/{name}/boundary`: proposals are no longer proved
/// within one; those still pending were, and are re-proposed to be
/// approved (see [`may_approve`]).
pub(super) async fn remove(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let policy = name("policy", policy)?;
    let previous = app.store.boundary(&policy).await?.map(|b| b.digest);
    app.store
        .remove_boundary(
            &policy,
            entry(
                &caller.name,
                "boundary-remove",
                format!("policy:{policy}"),
                json!({ "previous": previous }),
            ),
        )
        .await?;
    Ok(Reply::ok(&wire::RemovedBoundary {
        policy,
        removed: true,
    }))
}

/// Whether `caller` may approve `p` as far as the boundary goes: `409`
/// when the boundary changed since `p` was proved (the store checks it
/// again as it approves); `403` unless an admin approves a proposal whose
/// containment the prover could not settle.
pub(super) async fn may_approve(
    app: &Arc<App>,
    p: &ProposalRow,
    caller: &Caller,
) -> Result<(), ApiError> {
    let now = app.store.boundary(&p.policy).await?.map(|b| b.digest);
    if now != p.boundary_digest {
        return Err(ApiError::conflict(format!(
            "the boundary of `{}` changed since proposal {} was proved: re-propose, so that it is proved within the boundary in force",
            p.policy, p.id
        )));
    }
    if let Some(why) = p.containment.as_ref().and_then(crate::contain::unproved)
        && caller.role != Role::Admin
    {
        return Err(ApiError::forbidden(why));
    }
    Ok(())
}
