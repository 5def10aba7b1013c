//! Sandboxes the gateway runs: `POST /v1/sandboxes` with `run`,
//! `POST /v1/sandboxes/{id}/stop` and `/start`, and `DELETE` of one.
//!
//! Each request begins a transition (a compare-and-swap in the store) and
//! waits up to `wait` seconds (default 120) for the driver: `200` (`201`
//! for a create) in the phase it aimed at, `202` while the driver still
//! acts (the transition goes on without the request), `502`
//! `driver_failed` when the driver failed and the sandbox rolled back (the
//! message says where to). The transition does not depend on the request:
//! a client that goes away, or a gateway that dies, leaves it to finish.

use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use tokio::sync::oneshot;

use super::{load_sandbox, name};
use crate::app::{ApiError, App, MAX_WAIT_SECS, Reply, Req};
use crate::driver::RunSpec;
use crate::lifecycle::{LifecycleError, Outcome};
use crate::store::{Role, SandboxRow, StoreError};
use crate::wire;

/// How long a lifecycle request waits for its driver unless `wait` says.
const DEFAULT_WAIT: Duration = Duration::from_secs(120);

impl From<LifecycleError> for ApiError {
    fn from(e: LifecycleError) -> Self {
        match e {
            LifecycleError::Invalid(m) => ApiError::bad_request(m),
            LifecycleError::Phase(m) => ApiError::conflict(m),
            LifecycleError::Store(s) => s.into(),
        }
    }
}

fn wait(r: &Req) -> Result<Duration, ApiError> {
    match r.query("wait") {
        None => Ok(DEFAULT_WAIT),
        Some(_) => super::wait(r),
    }
    .map(|d| d.min(Duration::from_secs(MAX_WAIT_SECS)))
}

/// What the transition came to within the wait, as an answer: the sandbox
/// as it is then.
async fn settle(
    app: &Arc<App>,
    r: &Req,
    (id, policy): (&str, &str),
    done: StatusCode,
    outcome: oneshot::Receiver<Outcome>,
) -> Result<Reply, ApiError> {
    let waited = tokio::time::timeout(wait(r)?, outcome).await;
    let now = app.store.sandbox(id).await?;
    let phase = now
        .as_ref()
        .and_then(|s| s.phase)
        .map_or("deleted", |p| p.word());
    match waited {
        Ok(Ok(Outcome::Done)) => {}
        Err(_) => {
            if let Some(s) = &now {
                return Ok(Reply::json(StatusCode::ACCEPTED, &wire::Sandbox::from(s)));
            }
        }
        Ok(Ok(Outcome::RolledBack(why))) => {
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "driver_failed",
                format!("sandbox `{id}`: {why}; it is {phase} now"),
            ));
        }
        Ok(Ok(Outcome::Lost(why))) => {
            return Err(ApiError::conflict(format!(
                "sandbox `{id}`: another gateway finished the transition ({why}); it is {phase} now"
            )));
        }
        Ok(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
                format!(
                    "this gateway is stopping; another gateway on its database finishes the transition of sandbox `{id}`"
                ),
            ));
        }
    }
    match now {
        Some(s) => Ok(Reply::json(done, &wire::Sandbox::from(&s))),
        None => Ok(Reply::ok(&wire::DeletedSandbox {
            id: id.to_owned(),
            policy: policy.to_owned(),
            deleted: true,
        })),
    }
}

/// `POST /v1/sandboxes` with `run`.
pub(super) async fn create(
    app: &Arc<App>,
    r: &Req,
    actor: &str,
    id: &str,
    policy: &str,
    run: RunSpec,
) -> Result<Reply, ApiError> {
    let outcome = app.lifecycle.create(id, policy, run, actor).await?;
    settle(app, r, (id, policy), StatusCode::CREATED, outcome).await
}

/// `POST /v1/sandboxes/{id}/stop` and `/start`.
pub(super) async fn stop_or_start(
    app: &Arc<App>,
    r: &Req,
    id: &str,
    start: bool,
) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let id = name("sandbox", id)?;
    r.no_body()?;
    let s = load_sandbox(app, &id).await?;
    let outcome = if start {
        app.lifecycle.start(&s, &caller.name).await?
    } else {
        app.lifecycle.stop(&s, &caller.name).await?
    };
    settle(app, r, (&id, &s.policy), StatusCode::OK, outcome).await
}

/// `DELETE /v1/sandboxes/{id}` of a sandbox the gateway runs.
pub(super) async fn delete(
    app: &Arc<App>,
    r: &Req,
    actor: &str,
    s: &SandboxRow,
) -> Result<Reply, ApiError> {
    let outcome = app.lifecycle.delete(s, actor).await?;
    settle(app, r, (&s.id, &s.policy), StatusCode::OK, outcome).await
}

/// `POST /v1/sandboxes/{id}/session`: the sandbox's supervisor, with a
/// session token that still works, gets a new one of the same generation.
/// Any gateway on the database answers it: the sessions are rows, not
/// memory.
pub(super) async fn refresh(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    let caller = r.require(&[Role::Sandbox])?;
    r.no_body()?;
    let own = caller.sandbox.as_deref() == Some(id.as_str());
    let Some((generation, presented)) = caller.session.clone().filter(|_| own) else {
        return Err(ApiError::forbidden(format!(
            "only a session token of sandbox `{id}` refreshes its session; a registered sandbox's token is renewed by an admin (`POST /v1/sandboxes/{id}/token`)"
        )));
    };
    let (token, session) = crate::lifecycle::session_token(generation, app.lifecycle.session_ttl());
    let expires_at = session.expires_at;
    let detail = serde_json::json!({ "generation": generation, "expires_at": expires_at });
    let refreshed = app
        .store
        .refresh_session(
            &id,
            &presented,
            session,
            super::entry(
                &caller.name,
                "session-refresh",
                format!("sandbox:{id}"),
                detail,
            ),
        )
        .await;
    match refreshed {
        Ok(()) => Ok(Reply::json(
            StatusCode::CREATED,
            &wire::SessionToken {
                id,
                generation,
                token,
                expires_at,
            },
        )),
        Err(StoreError::NotFound(m)) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "session_revoked",
            m,
        )),
        Err(e) => Err(e.into()),
    }
}
