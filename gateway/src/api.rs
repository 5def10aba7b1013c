//! The `/v1` JSON API: routes and handlers. `docs/gateway.md` is the
//! reference, with examples.

use std::sync::Arc;
use std::time::Duration;

use bundle_trust::Claims;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::advise::Asker;
use crate::app::{ApiError, App, MAX_WAIT_SECS, Reply, Req, now, token_hash};
use crate::propose::{self, Candidate};
use crate::store::{
    Approval, AuditEntry, ProposalRow, ProposalState, Role, SandboxRow, StatusReport, TokenRow,
};
use crate::wire;

mod boundary;
mod exec;
mod lifecycle;

const PEOPLE: &[Role] = &[Role::Admin, Role::Author];
/// Who automatic approvals are recorded as; no token may carry the name.
const AUTO_APPROVER: &str = "gateway";
const READERS: &[Role] = &[Role::Admin, Role::Author, Role::Reader];
/// The token `serve` reads from `admin.token`.
const ADMIN_TOKEN: &str = "admin";
/// Names an audit row may carry that are not a token made with
/// `POST /v1/tokens`: the file's admin token, the gateway's own writes, and
/// requests without a valid token.
const RESERVED_NAMES: &[&str] = &[ADMIN_TOKEN, AUTO_APPROVER, "anonymous"];
/// Sandbox tokens are named after their sandbox.
const SANDBOX_PREFIX: &str = "sandbox:";
/// A status report's `error` is kept (and audited) up to this many bytes,
/// so that a sandbox token cannot fill the log.
pub(crate) const MAX_REPORT_ERROR: usize = 2048;
/// `GET /v1/audit` answers this many rows unless `limit` says otherwise,
/// and never more than [`MAX_AUDIT_PAGE`].
pub(crate) const DEFAULT_AUDIT_PAGE: i64 = 100;
pub(crate) const MAX_AUDIT_PAGE: i64 = 1000;

/// Every `(method, template)` `route` answers, in its order: what
/// `docs/openapi.yaml` documents and the tests dispatch, so that a route
/// added to one list and not the others fails a test.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/policies/{name}/proposals"),
    ("POST", "/v1/policies/{name}/proposals/from-denials"),
    ("POST", "/v1/sandboxes/{id}/proposals"),
    ("GET", "/v1/policies/{name}/revisions"),
    ("GET", "/v1/policies/{name}/revisions/{rev}"),
    ("POST", "/v1/policies/{name}/rollback"),
    ("PUT", "/v1/policies/{name}/boundary"),
    ("GET", "/v1/policies/{name}/boundary"),
    ("DELETE", "/v1/policies/{name}/boundary"),
    ("GET", "/v1/proposals"),
    ("GET", "/v1/proposals/{id}"),
    ("POST", "/v1/proposals/{id}/approve"),
    ("POST", "/v1/proposals/{id}/reject"),
    ("POST", "/v1/sandboxes"),
    ("GET", "/v1/sandboxes"),
    ("GET", "/v1/sandboxes/{id}"),
    ("DELETE", "/v1/sandboxes/{id}"),
    ("POST", "/v1/sandboxes/{id}/stop"),
    ("POST", "/v1/sandboxes/{id}/start"),
    ("POST", "/v1/sandboxes/{id}/session"),
    ("POST", "/v1/sandboxes/{id}/token"),
    ("GET", "/v1/sandboxes/{id}/bundle"),
    ("POST", "/v1/sandboxes/{id}/status"),
    ("POST", "/v1/sandboxes/{id}/execs"),
    ("GET", "/v1/sandboxes/{id}/execs"),
    ("GET", "/v1/sandboxes/{id}/execs/next"),
    ("GET", "/v1/sandboxes/{id}/execs/{exec}"),
    ("GET", "/v1/sandboxes/{id}/execs/{exec}/output"),
    ("POST", "/v1/sandboxes/{id}/execs/{exec}/output"),
    ("POST", "/v1/sandboxes/{id}/execs/{exec}/end"),
    ("POST", "/v1/tokens"),
    ("GET", "/v1/tokens"),
    ("DELETE", "/v1/tokens/{name}"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/audit/verify"),
];

/// Dispatches on method and path.
pub(crate) async fn route(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    let parts: Vec<&str> = r.path.trim_end_matches('/').split('/').skip(1).collect();
    match (&r.method, parts.as_slice()) {
        (&Method::POST, ["v1", "policies", name, "proposals"]) => propose(app, r, name).await,
        (&Method::POST, ["v1", "policies", name, "proposals", "from-denials"]) => {
            propose_from_denials(app, r, name).await
        }
        (&Method::GET, ["v1", "policies", name, "revisions"]) => revisions(app, r, name).await,
        (&Method::GET, ["v1", "policies", name, "revisions", rev]) => {
            revision(app, r, name, rev).await
        }
        (&Method::POST, ["v1", "policies", name, "rollback"]) => rollback(app, r, name).await,
        (&Method::PUT, ["v1", "policies", name, "boundary"]) => boundary::set(app, r, name).await,
        (&Method::GET, ["v1", "policies", name, "boundary"]) => boundary::get(app, r, name).await,
        (&Method::DELETE, ["v1", "policies", name, "boundary"]) => {
            boundary::remove(app, r, name).await
        }
        (&Method::GET, ["v1", "proposals"]) => proposals(app, r).await,
        (&Method::GET, ["v1", "proposals", id]) => proposal(app, r, id).await,
        (&Method::POST, ["v1", "proposals", id, "approve"]) => approve(app, r, id).await,
        (&Method::POST, ["v1", "proposals", id, "reject"]) => reject(app, r, id).await,
        (&Method::POST, ["v1", "sandboxes"]) => create_sandbox(app, r).await,
        (&Method::GET, ["v1", "sandboxes"]) => list_sandboxes(app, r).await,
        (&Method::GET, ["v1", "sandboxes", id]) => sandbox_status(app, r, id).await,
        (&Method::DELETE, ["v1", "sandboxes", id]) => delete_sandbox(app, r, id).await,
        (&Method::POST, ["v1", "sandboxes", id, "stop"]) => {
            lifecycle::stop_or_start(app, r, id, false).await
        }
        (&Method::POST, ["v1", "sandboxes", id, "start"]) => {
            lifecycle::stop_or_start(app, r, id, true).await
        }
        (&Method::POST, ["v1", "sandboxes", id, "session"]) => lifecycle::refresh(app, r, id).await,
        (&Method::POST, ["v1", "sandboxes", id, "token"]) => renew_sandbox_token(app, r, id).await,
        (&Method::GET, ["v1", "sandboxes", id, "bundle"]) => bundle(app, r, id).await,
        (&Method::POST, ["v1", "sandboxes", id, "status"]) => report(app, r, id).await,
        (&Method::POST, ["v1", "sandboxes", id, "proposals"]) => {
            propose_from_sandbox(app, r, id).await
        }
        (&Method::POST, ["v1", "sandboxes", id, "execs"]) => exec::create(app, r, id).await,
        (&Method::GET, ["v1", "sandboxes", id, "execs"]) => exec::list(app, r, id).await,
        // Before `execs/{exec}`: an exec id starts with `x-`, never `next`.
        (&Method::GET, ["v1", "sandboxes", id, "execs", "next"]) => exec::next(app, r, id).await,
        (&Method::GET, ["v1", "sandboxes", id, "execs", x]) => exec::show(app, r, id, x).await,
        (&Method::GET, ["v1", "sandboxes", id, "execs", x, "output"]) => {
            exec::output(app, r, id, x).await
        }
        (&Method::POST, ["v1", "sandboxes", id, "execs", x, "output"]) => {
            exec::append(app, r, id, x).await
        }
        (&Method::POST, ["v1", "sandboxes", id, "execs", x, "end"]) => {
            exec::end(app, r, id, x).await
        }
        (&Method::POST, ["v1", "tokens"]) => create_token(app, r).await,
        (&Method::GET, ["v1", "tokens"]) => list_tokens(app, r).await,
        (&Method::DELETE, ["v1", "tokens", who]) => revoke_token(app, r, who).await,
        (&Method::GET, ["v1", "audit"]) => audit(app, r).await,
        (&Method::GET, ["v1", "audit", "verify"]) => audit_verify(app, r).await,
        _ => Err(ApiError::not_found(format!(
            "no endpoint `{} {}`",
            r.method, r.path
        ))),
    }
}

/// Policy and sandbox names: letters, digits, `.`, `_`, `-`, at most 64.
fn name(kind: &str, text: &str) -> Result<String, ApiError> {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !text.starts_with('.');
    if ok {
        Ok(text.to_owned())
    } else {
        Err(ApiError::bad_request(format!(
            "`{text}` is not a {kind} name (letters, digits, `.`, `_`, `-`; at most 64)"
        )))
    }
}

/// A path segment with its `%XX` escapes decoded (a client may write the
/// `:` of `sandbox:ID` as `%3A`); `None` when they do not decode to UTF-8.
fn unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A token's name as `DELETE /v1/tokens/{name}` names it: a person's or a
/// program's, or `sandbox:ID`.
fn token_name(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request(format!("`{text}` is not a token name"));
    let text = unescape(text).ok_or_else(bad)?;
    match text.strip_prefix(SANDBOX_PREFIX) {
        Some(id) => Ok(format!("{SANDBOX_PREFIX}{}", name("sandbox", id)?)),
        None => name("token", &text),
    }
}

fn number(kind: &str, text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::bad_request(format!("`{text}` is not a {kind} number")))
}

fn wait(r: &Req) -> Result<Duration, ApiError> {
    match r.query("wait") {
        None => Ok(Duration::ZERO),
        Some(s) => s
            .parse::<u64>()
            .map(|n| Duration::from_secs(n.min(MAX_WAIT_SECS)))
            .map_err(|_| ApiError::bad_request(format!("`wait={s}` is not a number of seconds"))),
    }
}

fn entry(actor: &str, action: &str, subject: String, detail: Value) -> AuditEntry {
    AuditEntry {
        at: now(),
        actor: actor.to_owned(),
        action: action.to_owned(),
        subject,
        detail,
    }
}

async fn propose(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    let caller = r.require(PEOPLE)?.clone();
    let policy = name("policy", policy)?;
    let candidate: Candidate = r.json()?;
    let new = propose::evaluate(app, &policy, candidate, &caller.name, None).await?;
    store_proposal(app, new, &caller.name, None).await
}

async fn propose_from_denials(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    let caller = r.require(PEOPLE)?.clone();
    let policy = name("policy", policy)?;
    let body: wire::DenialsRequest = r.json()?;
    let generalize: Vec<advisor::Generalize> = body.generalize.iter().map(|g| g.kind()).collect();
    let log = body.log_name.as_deref().unwrap_or("the submitted log");
    let (candidate, advice) =
        crate::advise::candidate(app, &policy, Asker::Person, &body.denials, log, &generalize)
            .await?;
    let mut new = propose::evaluate(app, &policy, candidate, &caller.name, None).await?;
    new.origin = Some(crate::advise::ADVISOR.to_owned());
    store_proposal(app, new, &caller.name, Some(advice)).await
}

/// A sandbox's agent asking, through its supervisor, for what it was
/// refused: the advisor's narrowest change to the sandbox's policy, with
/// the agent's rationale, attributed to the sandbox and left to a person.
async fn propose_from_sandbox(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    let caller = r.caller()?.clone();
    if caller.role != Role::Sandbox || caller.sandbox.as_deref() != Some(id.as_str()) {
        return Err(ApiError::forbidden(format!(
            "only sandbox `{id}`'s own token proposes for it: people propose with `POST /v1/policies/{{name}}/proposals/from-denials`"
        )));
    }
    let body: wire::SandboxProposalRequest = r.json()?;
    if body.rationale.trim().is_empty() || body.rationale.chars().count() > MAX_RATIONALE {
        return Err(ApiError::bad_request(format!(
            "`rationale` says why the change is needed, in 1 to {MAX_RATIONALE} characters"
        )));
    }
    let s = load_sandbox(app, &id).await?;
    let pending = app
        .store
        .proposals(Some(&s.policy))
        .await?
        .iter()
        .filter(|p| p.state == ProposalState::Pending && p.proposer == caller.name)
        .count();
    if pending >= MAX_SANDBOX_PENDING {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_pending",
            format!(
                "sandbox `{id}` has {pending} proposals waiting for a person; it may have {MAX_SANDBOX_PENDING} at once"
            ),
        ));
    }
    let log = format!("sandbox {id}'s deny log");
    let (candidate, advice) = crate::advise::candidate(
        app,
        &s.policy,
        Asker::Sandbox(&id),
        &body.denials,
        &log,
        &[],
    )
    .await?;
    let mut new = propose::evaluate(app, &s.policy, candidate, &caller.name, None).await?;
    new.origin = Some(crate::advise::ADVISOR.to_owned());
    new.rationale = Some(body.rationale);
    store_proposal(app, new, &caller.name, Some(advice)).await
}

/// The longest rationale a sandbox may give, in characters.
const MAX_RATIONALE: usize = 2000;

/// How many of a sandbox's proposals may wait for a person at once: an
/// agent asking again and again fills no one's queue.
const MAX_SANDBOX_PENDING: usize = 3;

async fn store_proposal(
    app: &Arc<App>,
    new: crate::store::NewProposal,
    actor: &str,
    advice: Option<wire::Advice>,
) -> Result<Reply, ApiError> {
    let auto_mode = app.approval == crate::app::ApprovalMode::Auto;
    let held = crate::auto::held(&new).filter(|_| auto_mode);
    let mut detail = json!({
        "policy": new.policy,
        "state": new.state.word(),
        "verdict": new.verdict,
        "digest": new.digest,
        "base_revision": new.base_revision,
        "rollback_of": new.rollback_of,
    });
    if let Some(obj) = detail.as_object_mut() {
        if let Some(why) = &held {
            obj.insert("held".to_owned(), json!(why));
        }
        // Only with a boundary, so that other rows read as they did.
        if let Some(digest) = &new.boundary_digest {
            obj.insert("boundary".to_owned(), json!(digest));
            let verdict = new.containment.as_ref().and_then(|c| c.get("verdict"));
            obj.insert("containment".to_owned(), json!(verdict));
        }
        if let Some(why) = &new.refusal {
            obj.insert("refused".to_owned(), json!(why));
        }
        if let Some(origin) = &new.origin {
            obj.insert("origin".to_owned(), json!(origin));
        }
    }
    let subject = format!("policy:{}", new.policy);
    let pending = new.state == ProposalState::Pending;
    let id = app
        .store
        .insert_proposal(new, entry(actor, "propose", subject, detail))
        .await?;
    let mut p = app
        .store
        .proposal(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))?;
    if auto_mode && pending && held.is_none() {
        // Another change approved first: this one stays pending (its base
        // moved) and a person re-proposes.
        match decide_approval(app, &p, AUTO_APPROVER, "auto").await {
            Ok(_)
            | Err(ApiError {
                code: "conflict", ..
            }) => {}
            Err(e) => return Err(e),
        }
        p = app
            .store
            .proposal(id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))?;
    }
    let mut answer = wire::Proposal::from(&p);
    answer.held = held;
    answer.advice = advice;
    Ok(Reply::json(StatusCode::CREATED, &answer))
}

async fn decide_approval(
    app: &Arc<App>,
    p: &ProposalRow,
    by: &str,
    decision: &str,
) -> Result<i64, ApiError> {
    let key = Arc::clone(app);
    let sign: crate::store::RevisionSigner =
        Arc::new(move |policy: &str, revision: i64, digest: &str, at: i64| {
            let claims = Claims {
                digest: digest.to_owned(),
                issued_at: at,
                policy: policy.to_owned(),
                revision,
                sandbox: String::new(),
            };
            let sealed = key.key.seal(claims, String::new());
            format!("{}:{}", sealed.key_id, sealed.signature)
        });
    let detail = json!({
        "proposal": p.id,
        "policy": p.policy,
        "decision": decision,
        "verdict": p.verdict,
        "proposer": p.proposer,
    });
    let revision = app
        .store
        .approve(
            Approval {
                proposal: p.id,
                version: p.version,
                approved_by: by.to_owned(),
                decision: decision.to_owned(),
                sign,
                now: now(),
            },
            entry(by, "approve", format!("policy:{}", p.policy), detail),
        )
        .await?;
    app.changed(&crate::wake::policy(&p.policy));
    Ok(revision)
}

async fn load_proposal(app: &Arc<App>, id: &str) -> Result<ProposalRow, ApiError> {
    let id = number("proposal", id)?;
    app.store
        .proposal(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))
}

async fn proposals(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let policy = r.query("policy").map(|p| name("policy", p)).transpose()?;
    let all = app.store.proposals(policy.as_deref()).await?;
    Ok(Reply::ok(&wire::ProposalList {
        proposals: all.iter().map(wire::ProposalSummary::from).collect(),
    }))
}

async fn proposal(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    Ok(Reply::ok(&wire::Proposal::from(
        &load_proposal(app, id).await?,
    )))
}

/// A proposal a person may still approve or reject; `409` otherwise.
async fn pending_proposal(app: &Arc<App>, id: &str) -> Result<ProposalRow, ApiError> {
    let p = load_proposal(app, id).await?;
    if p.state != ProposalState::Pending {
        return Err(ApiError::conflict(format!(
            "proposal {} is {}, not pending",
            p.id,
            p.state.word()
        )));
    }
    Ok(p)
}

async fn approve(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let caller = r.require(PEOPLE)?.clone();
    let body: wire::ApproveRequest = r.json()?;
    let p = pending_proposal(app, id).await?;
    if p.proposer == caller.name {
        return Err(ApiError::forbidden(format!(
            "`{}` proposed this change and may not approve it: another person must",
            caller.name
        )));
    }
    if p.review_token.as_deref() != Some(body.review_token.as_str()) {
        return Err(ApiError::conflict(format!(
            "the review token is not proposal {}'s: review the proposal as it is now (`show {}`)",
            p.id, p.id
        )));
    }
    boundary::may_approve(app, &p, &caller).await?;
    let active = app
        .store
        .policy(&p.policy)
        .await?
        .and_then(|x| x.active_revision);
    if active != p.base_revision {
        return Err(ApiError::conflict(format!(
            "the active revision of `{}` moved since proposal {} was proved: re-propose",
            p.policy, p.id
        )));
    }
    let revision = decide_approval(app, &p, &caller.name, "manual").await?;
    let p = load_proposal(app, &p.id.to_string()).await?;
    let mut body = wire::Proposal::from(&p);
    body.revision = Some(revision);
    Ok(Reply::ok(&body))
}

async fn reject(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let caller = r.require(PEOPLE)?.clone();
    let body: wire::RejectRequest = r.json()?;
    let p = pending_proposal(app, id).await?;
    let detail = json!({ "proposal": p.id, "reason": body.reason });
    app.store
        .reject(
            p.id,
            p.version,
            &caller.name,
            &body.reason,
            entry(
                &caller.name,
                "reject",
                format!("policy:{}", p.policy),
                detail,
            ),
        )
        .await?;
    Ok(Reply::ok(&wire::Proposal::from(
        &load_proposal(app, id).await?,
    )))
}

async fn revisions(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let policy = name("policy", policy)?;
    let active = app.store.policy(&policy).await?;
    let Some(active) = active else {
        return Err(ApiError::not_found(format!("no policy `{policy}`")));
    };
    let list = app.store.revisions(&policy).await?;
    Ok(Reply::ok(&wire::RevisionList {
        policy,
        active_revision: active.active_revision,
        revisions: list.iter().map(wire::Revision::from).collect(),
    }))
}

async fn revision(app: &Arc<App>, r: &Req, policy: &str, rev: &str) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let policy = name("policy", policy)?;
    let rev = number("revision", rev)?;
    let row = app
        .store
        .revision(&policy, rev)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("`{policy}` has no revision {rev}")))?;
    Ok(Reply::ok(&wire::RevisionWithBundle {
        revision: wire::Revision::from(&row),
        bundle: serde_json::from_str(&row.bundle).unwrap_or(Value::Null),
    }))
}

async fn rollback(app: &Arc<App>, r: &Req, policy: &str) -> Result<Reply, ApiError> {
    let caller = r.require(PEOPLE)?.clone();
    let policy = name("policy", policy)?;
    let body: wire::RollbackRequest = r.json()?;
    let old = app
        .store
        .revision(&policy, body.revision)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("`{policy}` has no revision {}", body.revision))
        })?;
    let candidate = Candidate {
        source: old.source,
        format: old.format,
        credentials: old.credentials,
        files: old.files,
    };
    let new = propose::evaluate(app, &policy, candidate, &caller.name, Some(body.revision)).await?;
    store_proposal(app, new, &caller.name, None).await
}

fn expiry(ttl: Option<u64>) -> Option<i64> {
    ttl.map(|s| now().saturating_add(i64::try_from(s).unwrap_or(i64::MAX)))
}

async fn create_sandbox(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let body: wire::CreateSandboxRequest = r.json()?;
    let id = name("sandbox", &body.id)?;
    let policy = name("policy", &body.policy)?;
    if let Some(run) = body.run {
        if body.ttl_seconds.is_some() {
            return Err(ApiError::bad_request(
                "`ttl_seconds` is for a registered sandbox's token; a sandbox with `run` gets its session from the gateway",
            ));
        }
        return lifecycle::create(app, r, &caller.name, &id, &policy, run).await;
    }
    let token = crate::dir::new_token();
    let row = TokenRow {
        hash: token_hash(&token),
        name: format!("sandbox:{id}"),
        role: Role::Sandbox,
        sandbox: Some(id.clone()),
        expires_at: expiry(body.ttl_seconds),
        generation: None,
    };
    let detail = json!({ "policy": policy, "expires_at": row.expires_at });
    app.store
        .create_sandbox(
            &id,
            &policy,
            row,
            entry(
                &caller.name,
                "sandbox-create",
                format!("sandbox:{id}"),
                detail,
            ),
        )
        .await?;
    Ok(Reply::json(
        StatusCode::CREATED,
        &wire::SandboxCreated { id, policy, token },
    ))
}

async fn list_sandboxes(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let all = app.store.sandboxes().await?;
    Ok(Reply::ok(&wire::SandboxList {
        sandboxes: all.iter().map(wire::Sandbox::from).collect(),
    }))
}

/// `DELETE /v1/sandboxes/{id}`: the sandbox and its tokens go together, so
/// nothing is left that could still fetch its bundle.
async fn delete_sandbox(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let id = name("sandbox", id)?;
    let s = load_sandbox(app, &id).await?;
    if s.phase.is_some() {
        return lifecycle::delete(app, r, &caller.name, &s).await;
    }
    let detail = json!({ "policy": s.policy });
    app.store
        .delete_sandbox(
            &id,
            s.version,
            entry(
                &caller.name,
                "sandbox-delete",
                format!("sandbox:{id}"),
                detail,
            ),
        )
        .await?;
    // Its waiting long-polls answer `404` now rather than at their end.
    app.changed(&crate::wake::sandbox(&id));
    Ok(Reply::ok(&wire::DeletedSandbox {
        id,
        policy: s.policy,
        deleted: true,
    }))
}

/// `POST /v1/sandboxes/{id}/token`: a new token for the sandbox (an
/// expired one cannot be used to ask), the old ones revoked at once.
async fn renew_sandbox_token(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let id = name("sandbox", id)?;
    let body: wire::RenewTokenRequest = if r.body.is_empty() {
        wire::RenewTokenRequest::default()
    } else {
        r.json()?
    };
    let s = load_sandbox(app, &id).await?;
    if s.phase.is_some() {
        return Err(ApiError::conflict(format!(
            "sandbox `{id}` is run by the gateway, whose sessions are its own: stop and start it for a new generation's token"
        )));
    }
    let token = crate::dir::new_token();
    let row = TokenRow {
        hash: token_hash(&token),
        name: format!("{SANDBOX_PREFIX}{id}"),
        role: Role::Sandbox,
        sandbox: Some(id.clone()),
        expires_at: expiry(body.ttl_seconds),
        generation: None,
    };
    let expires_at = row.expires_at;
    let detail = json!({ "policy": s.policy, "expires_at": expires_at });
    app.store
        .renew_sandbox_token(
            &id,
            s.version,
            row,
            entry(
                &caller.name,
                "sandbox-token",
                format!("sandbox:{id}"),
                detail,
            ),
        )
        .await?;
    Ok(Reply::json(
        StatusCode::CREATED,
        &wire::SandboxToken {
            id,
            policy: s.policy,
            token,
            expires_at,
        },
    ))
}

/// The sandbox's own token, or (for reading) a person's.
fn may_see_sandbox(r: &Req, id: &str, read: bool) -> Result<(), ApiError> {
    let c = r.caller()?;
    let own = c.role == Role::Sandbox && c.sandbox.as_deref() == Some(id);
    let person = read && READERS.contains(&c.role);
    if own || person || c.role == Role::Admin {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "this token does not reach sandbox `{id}`"
        )))
    }
}

async fn load_sandbox(app: &Arc<App>, id: &str) -> Result<SandboxRow, ApiError> {
    app.store
        .sandbox(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no sandbox `{id}`")))
}

/// `GET /v1/sandboxes/{id}?revision=R&wait=S`: with `revision`, waits until
/// the sandbox reports that revision applied (or the wait ends).
async fn sandbox_status(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, true)?;
    let want = r
        .query("revision")
        .map(|s| number("revision", s))
        .transpose()?;
    let deadline = tokio::time::Instant::now() + wait(r)?;
    let mut waiter = app.wakeups.subscribe(&[crate::wake::sandbox(&id)]);
    let mut stopping = app.stopping.subscribe();
    loop {
        waiter.mark_seen();
        let s = load_sandbox(app, &id).await?;
        let done = want.is_none_or(|w| {
            s.applied_revision == Some(w)
                && matches!(s.result.as_deref(), Some("applied" | "network_only"))
        });
        if done || tokio::time::Instant::now() >= deadline || app.is_stopping() {
            return Ok(Reply::ok(&wire::Sandbox::from(&s)));
        }
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            () = waiter.changed() => {}
            _ = stopping.changed() => {}
        }
    }
}

/// `GET /v1/sandboxes/{id}/bundle`: the signed envelope of the active
/// revision, unless `If-None-Match` names its digest; then waits up to
/// `wait` seconds for a newer one, and answers `304` if none came.
async fn bundle(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, false)?;
    // The supervisor's nonce, signed back: the envelope then answers that
    // request and no other, so a replay of it is recognised whatever its
    // age.
    let nonce = match r.query("nonce") {
        None => None,
        Some(n) if bundle_trust::valid_nonce(n) => Some(n.to_owned()),
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`nonce` must be {} to {} characters of A-Z a-z 0-9 - _",
                bundle_trust::MIN_NONCE_LEN,
                bundle_trust::MAX_NONCE_LEN
            )));
        }
    };
    let deadline = tokio::time::Instant::now() + wait(r)?;
    // The sandbox's row names its policy: the first wait subscribes to the
    // policy's and the sandbox's topics, then reads the row again, so that
    // a change committed after the first read is not missed.
    let mut waiter: Option<crate::wake::Waiter> = None;
    let mut stopping = app.stopping.subscribe();
    loop {
        if let Some(w) = &mut waiter {
            w.mark_seen();
        }
        let s = load_sandbox(app, &id).await?;
        if let (Some(rev), Some(digest)) = (s.desired_revision, s.desired_digest.as_deref())
            && r.if_none_match.as_deref() != Some(digest)
        {
            let row = app.revision(&s.policy, rev).await?.ok_or_else(|| {
                ApiError::not_found(format!("`{}` has no revision {rev}", s.policy))
            })?;
            let claims = Claims {
                digest: row.digest.clone(),
                issued_at: now(),
                policy: s.policy.clone(),
                revision: rev,
                sandbox: id.clone(),
            };
            let envelope = app
                .key
                .seal_with_nonce(claims, nonce.clone(), row.bundle.clone());
            let caller = r.caller()?.name.clone();
            // Written after the answer leaves: an approval answers every
            // waiting supervisor at once, and their audit rows queue up on
            // the chain's head.
            let audit = entry(
                &caller,
                "deliver",
                format!("sandbox:{id}"),
                json!({ "policy": s.policy, "revision": rev, "digest": row.digest, "key_id": envelope.key_id }),
            );
            let later = Arc::clone(app);
            tokio::spawn(async move { later.audit(audit).await });
            let mut reply = Reply::ok(&envelope);
            reply.headers.push(("etag", format!("\"{}\"", row.digest)));
            return Ok(reply);
        }
        if tokio::time::Instant::now() >= deadline || app.is_stopping() {
            if s.desired_revision.is_none() {
                return Err(ApiError::not_found(format!(
                    "policy `{}` of sandbox `{id}` has no approved revision yet",
                    s.policy
                )));
            }
            return Ok(Reply {
                status: StatusCode::NOT_MODIFIED,
                body: None,
                headers: vec![(
                    "etag",
                    format!("\"{}\"", s.desired_digest.unwrap_or_default()),
                )],
            });
        }
        let Some(w) = &mut waiter else {
            waiter = Some(
                app.wakeups
                    .subscribe(&[crate::wake::policy(&s.policy), crate::wake::sandbox(&id)]),
            );
            continue;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            () = w.changed() => {}
            _ = stopping.changed() => {}
        }
    }
}

fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
}

/// `text` cut to at most `max` bytes (on a character boundary), saying so
/// when it was cut.
#[must_use]
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let marker = format!(" … [cut: {} bytes in all]", text.len());
    let room = max.saturating_sub(marker.len());
    let end = text
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= room)
        .last()
        .unwrap_or(0);
    let mut out = text.get(..end).unwrap_or_default().to_owned();
    out.push_str(&marker);
    out
}

async fn report(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, false)?;
    let caller = r.caller()?.name.clone();
    let body: wire::StatusReportRequest = r.json()?;
    if !matches!(body.result.as_str(), "applied" | "network_only" | "refused") {
        return Err(ApiError::bad_request(format!(
            "`{}` is not a result (`applied`, `network_only`, `refused`)",
            body.result
        )));
    }
    let s = load_sandbox(app, &id).await?;
    // Only what the gateway offered can be reported, applied or refused:
    // a report names a revision of the sandbox's own policy and its digest.
    let offered = app.revision(&s.policy, body.revision).await?;
    let Some(offered) = offered else {
        return Err(unprocessable(format!(
            "revision {} is not a revision of policy `{}` (of sandbox `{id}`): report only a revision the gateway delivered",
            body.revision, s.policy
        )));
    };
    if offered.digest != body.digest {
        return Err(unprocessable(format!(
            "`{}` is not the digest of revision {} of `{}` (that is `{}`)",
            clip(&body.digest, 80),
            body.revision,
            s.policy,
            offered.digest
        )));
    }
    let error = body.error.as_deref().map(|e| clip(e, MAX_REPORT_ERROR));
    let detail = json!({
        "revision": body.revision, "digest": body.digest,
        "result": body.result, "error": error,
    });
    // A refusal says what the supervisor was offered; what it runs stays.
    let (revision, digest) = if body.result == "refused" {
        (s.applied_revision, s.applied_digest.clone())
    } else {
        (Some(body.revision), Some(body.digest.clone()))
    };
    app.store
        .report_status(
            &id,
            s.version,
            StatusReport {
                revision,
                digest,
                result: body.result.clone(),
                error,
                now: now(),
            },
            entry(&caller, "status", format!("sandbox:{id}"), detail),
        )
        .await?;
    app.changed(&crate::wake::sandbox(&id));
    Ok(Reply::ok(&wire::Sandbox::from(
        &load_sandbox(app, &id).await?,
    )))
}

async fn create_token(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let body: wire::CreateTokenRequest = r.json()?;
    if body.name.starts_with(SANDBOX_PREFIX) {
        return Err(ApiError::bad_request(format!(
            "names starting with `{SANDBOX_PREFIX}` are the sandboxes' tokens (`POST /v1/sandboxes/ID/token`); choose another"
        )));
    }
    let who = name("token", &body.name)?;
    if RESERVED_NAMES.contains(&who.as_str()) {
        let why = match who.as_str() {
            AUTO_APPROVER => {
                "the name automatic approvals and the gateway's own writes are recorded under"
            }
            ADMIN_TOKEN => {
                "the token in `admin.token` (write a new one there and restart `serve` to replace it)"
            }
            _ => "the name requests without a valid token are recorded under",
        };
        return Err(ApiError::bad_request(format!(
            "`{who}` is {why}; choose another name"
        )));
    }
    if body.role == Role::Sandbox {
        return Err(ApiError::bad_request(
            "sandbox tokens come with their sandbox (`POST /v1/sandboxes`)",
        ));
    }
    let token = crate::dir::new_token();
    let row = TokenRow {
        hash: token_hash(&token),
        name: who.clone(),
        role: body.role,
        sandbox: None,
        expires_at: expiry(body.ttl_seconds),
        generation: None,
    };
    let detail = json!({ "name": who, "role": body.role, "expires_at": row.expires_at });
    app.store
        .create_token(
            row,
            entry(&caller.name, "token-create", format!("token:{who}"), detail),
        )
        .await?;
    Ok(Reply::json(
        StatusCode::CREATED,
        &wire::TokenCreated {
            name: who,
            role: body.role,
            token,
        },
    ))
}

async fn list_tokens(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    r.require(&[Role::Admin])?;
    let tokens = app.store.tokens().await?;
    Ok(Reply::ok(&wire::TokenList { tokens }))
}

/// `DELETE /v1/tokens/{name}`: the token is gone from the database, which
/// every replica reads on every request.
async fn revoke_token(app: &Arc<App>, r: &Req, who: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let who = token_name(who)?;
    if who == ADMIN_TOKEN {
        // `serve` would register it again at its next start: the file is
        // where it is replaced.
        return Err(ApiError::forbidden(
            "the token `admin` is the one in `admin.token`: write a new token there and restart `serve` (every replica) to replace it",
        ));
    }
    app.store
        .revoke_token(
            &who,
            entry(
                &caller.name,
                "token-revoke",
                format!("token:{who}"),
                json!({ "name": who }),
            ),
        )
        .await?;
    Ok(Reply::ok(&wire::RevokedToken {
        name: who,
        revoked: true,
    }))
}

/// A query parameter that is a whole number in `min..`, or `default`.
fn query_number(r: &Req, key: &str, min: i64, default: i64) -> Result<i64, ApiError> {
    match r.query(key) {
        None => Ok(default),
        Some(s) => s.parse::<i64>().ok().filter(|n| *n >= min).ok_or_else(|| {
            ApiError::bad_request(format!(
                "`{key}={s}` is not a whole number of at least {min}"
            ))
        }),
    }
}

/// `GET /v1/audit?after=SEQ&limit=N`: the rows after `SEQ`, oldest first,
/// one page at a time; `next` is the `after` of the following page, `null`
/// at the end.
async fn audit(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    let after = query_number(r, "after", 0, 0)?;
    let limit = query_number(r, "limit", 1, DEFAULT_AUDIT_PAGE)?.min(MAX_AUDIT_PAGE);
    // One row more than asked tells whether there is a next page.
    let mut rows = app
        .store
        .audit_rows(after, i64::MAX, limit.saturating_add(1))
        .await?;
    let more = rows.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next = if more {
        rows.last().map(|r| r.seq)
    } else {
        None
    };
    Ok(Reply::ok(&wire::AuditPage { rows, next }))
}

/// Rows read at once by `GET /v1/audit/verify`.
const VERIFY_PAGE: i64 = 1000;

async fn audit_verify(app: &Arc<App>, r: &Req) -> Result<Reply, ApiError> {
    r.require(READERS)?;
    // The head first: a row and the head move in one transaction, so every
    // row up to the head read is there; rows appended after it are newer
    // than this check.
    let (seq, hash) = app.store.audit_head().await?;
    let mut check = crate::audit::Verifier::new();
    let mut after = 0;
    loop {
        let page = app.store.audit_rows(after, seq, VERIFY_PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for row in &page {
            check.feed(row);
        }
        if page.len() < usize::try_from(VERIFY_PAGE).unwrap_or(usize::MAX) {
            break;
        }
    }
    let rows = check.rows();
    let problems = check.finish((seq, &hash));
    Ok(Reply::ok(&wire::AuditVerification {
        ok: problems.is_empty(),
        rows,
        head: wire::AuditHead { seq, hash },
        problems,
    }))
}

#[cfg(test)]
mod tests {
    use super::ROUTES;

    /// A path of `template` with each `{param}` filled in.
    fn sample(template: &str) -> String {
        template
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x1" } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn every_route_is_labelled_by_its_own_template_and_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (method, template) in ROUTES {
            assert!(seen.insert((method, template)), "{method} {template} twice");
            assert_eq!(
                crate::metrics::route_template(&sample(template)),
                *template,
                "the metrics label of {method} {template}"
            );
        }
        assert_eq!(crate::metrics::route_template("/v1/nowhere"), "other");
    }
}
