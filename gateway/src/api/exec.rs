//! Commands run in a `ready` sandbox the gateway runs. A person queues
//! one (`POST /v1/sandboxes/{id}/execs`) and follows its output; the
//! sandbox's supervisor claims it (`GET …/execs/next`), runs it, sends its
//! output in chunks and then its end. Every step is a row, so the person
//! and the supervisor may talk to different replicas, and a replica that
//! restarts loses nothing.
//!
//! A chunk names where it starts in its stream: a retry of one already
//! stored is acknowledged, a chunk that would leave a gap is refused with
//! the stored length, so a supervisor that lost an answer knows where to
//! go on from.

use std::sync::Arc;

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::json;

use super::{clip, entry, load_sandbox, may_see_sandbox, name, query_number, wait};
use crate::app::{ApiError, App, Reply, Req, now};
use crate::store::{ExecEnd, NewExec, OutputPiece, Phase, Role};
use crate::wake;
use crate::wire;

/// Bytes of a command's transcript kept, both streams together; past it
/// the output is counted but not kept, and the record says `truncated`.
pub(crate) const TRANSCRIPT_LIMIT: i64 = 16 * 1024 * 1024;
/// The most bytes one chunk may carry once decoded.
const MAX_CHUNK: usize = 1024 * 1024;
/// The most output bytes one answer carries; the client asks again from
/// where it got to.
const MAX_ANSWER: usize = 1024 * 1024;
/// The most entries of a command, and bytes of one of them (or of a
/// working directory).
const MAX_ARGS: usize = 256;
const MAX_VALUE: usize = 4096;
/// `GET /v1/sandboxes/{id}/execs` answers this many unless `limit` says.
const DEFAULT_PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;
/// The why of an `error` end is kept up to this many bytes.
const MAX_ERROR: usize = super::MAX_REPORT_ERROR;

fn base64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A new exec id: `x-` and 16 hex digits.
fn new_id() -> String {
    let bytes: [u8; 8] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("x-{hex}")
}

/// An exec id in a path: `x-` and 16 lowercase hex digits.
fn exec_id(text: &str) -> Result<String, ApiError> {
    let ok = text
        .strip_prefix("x-")
        .is_some_and(|h| h.len() == 16 && h.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
    if ok {
        Ok(text.to_owned())
    } else {
        Err(ApiError::bad_request(format!(
            "`{}` is not an exec id (`x-` and 16 hex digits)",
            clip(text, 80)
        )))
    }
}

/// Refuses a command no supervisor could run, naming the field.
fn check(body: &wire::ExecRequest) -> Result<(), ApiError> {
    if body.command.is_empty() || body.command.len() > MAX_ARGS {
        return Err(ApiError::bad_request(format!(
            "`command` has {} entries; it takes 1 to {MAX_ARGS}, the program first",
            body.command.len()
        )));
    }
    if body.command.first().is_some_and(String::is_empty) {
        return Err(ApiError::bad_request(
            "`command` starts with an empty program name",
        ));
    }
    for (i, arg) in body.command.iter().enumerate() {
        if arg.len() > MAX_VALUE || arg.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "`command[{i}]` is longer than {MAX_VALUE} bytes or holds a NUL byte"
            )));
        }
    }
    for (var, value) in &body.env {
        if value.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "`env.{}` holds a NUL byte",
                clip(var, 80)
            )));
        }
    }
    if let Some(dir) = &body.workdir
        && (!dir.starts_with('/') || dir.len() > MAX_VALUE || dir.contains('\0'))
    {
        return Err(ApiError::bad_request(format!(
            "`workdir` `{}` is not an absolute path (at most {MAX_VALUE} bytes, no NUL byte)",
            clip(dir, 80)
        )));
    }
    match body.timeout_seconds {
        Some(0) => Err(ApiError::bad_request(
            "`timeout_seconds` is 0: leave it out for the sandbox's `run.timeout_seconds`",
        )),
        Some(t) if i64::try_from(t).is_err() => Err(ApiError::bad_request(format!(
            "`timeout_seconds` {t} is too large"
        ))),
        _ => Ok(()),
    }
}

/// `POST /v1/sandboxes/{id}/execs`: queues a command for the sandbox's
/// running generation and wakes its supervisor.
pub(super) async fn create(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let caller = r.require(&[Role::Admin])?.clone();
    let id = name("sandbox", id)?;
    let body: wire::ExecRequest = r.json()?;
    check(&body)?;
    let s = load_sandbox(app, &id).await?;
    let (Some(phase), Some(spec)) = (s.phase, &s.spec) else {
        return Err(ApiError::bad_request(format!(
            "sandbox `{id}` was registered to run elsewhere: the gateway runs commands only in sandboxes it runs (created with `run`)"
        )));
    };
    if phase != Phase::Ready {
        return Err(ApiError::conflict(format!(
            "sandbox `{id}` is {}: a command runs only in a `ready` sandbox",
            phase.word()
        )));
    }
    if let Some(var) = body.env.keys().find(|v| !spec.env_allow.contains(v)) {
        return Err(ApiError::bad_request(format!(
            "`env` names `{}`, which is not in the `run.env_allow` of sandbox `{id}`: add it to `run.env_allow` when the sandbox is created",
            clip(var, 80)
        )));
    }
    let timeout = body
        .timeout_seconds
        .or(spec.timeout_seconds)
        .and_then(|t| i64::try_from(t).ok());
    let exec = new_id();
    let names: Vec<&String> = body.env.keys().collect();
    let detail = json!({
        "exec": exec,
        "generation": s.generation,
        "command": body.command,
        "env": names,
        "workdir": body.workdir,
        "timeout_seconds": timeout,
    });
    app.store
        .create_exec(
            NewExec {
                id: exec.clone(),
                sandbox: id.clone(),
                generation: s.generation,
                command: body.command,
                env: body.env,
                workdir: body.workdir,
                timeout_seconds: timeout,
                created_by: caller.name.clone(),
                now: now(),
            },
            entry(
                &caller.name,
                "sandbox-exec",
                format!("sandbox:{id}"),
                detail,
            ),
        )
        .await?;
    app.changed(&wake::execs(&id));
    let row = load(app, &id, &exec).await?;
    Ok(Reply::json(StatusCode::CREATED, &wire::Exec::from(&row)))
}

async fn load(app: &Arc<App>, sandbox: &str, id: &str) -> Result<crate::store::ExecRow, ApiError> {
    app.store
        .exec(sandbox, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no exec `{id}` of sandbox `{sandbox}`")))
}

/// `GET /v1/sandboxes/{id}/execs?limit=N`: newest first.
pub(super) async fn list(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    r.require(&[Role::Admin])?;
    let id = name("sandbox", id)?;
    let limit = query_number(r, "limit", 1, DEFAULT_PAGE)?.min(MAX_PAGE);
    load_sandbox(app, &id).await?;
    let rows = app.store.execs(&id, limit).await?;
    Ok(Reply::ok(&wire::ExecList {
        execs: rows.iter().map(wire::Exec::from).collect(),
    }))
}

/// `GET /v1/sandboxes/{id}/execs/{exec}`.
pub(super) async fn show(app: &Arc<App>, r: &Req, id: &str, exec: &str) -> Result<Reply, ApiError> {
    r.require(&[Role::Admin])?;
    let id = name("sandbox", id)?;
    let exec = exec_id(exec)?;
    Ok(Reply::ok(&wire::Exec::from(&load(app, &id, &exec).await?)))
}

/// `GET /v1/sandboxes/{id}/execs/{exec}/output?stdout=N&stderr=M&wait=S`:
/// the output past the offsets, in arrival order; with nothing new and
/// the command not ended, waits up to `wait` seconds for more.
pub(super) async fn output(
    app: &Arc<App>,
    r: &Req,
    id: &str,
    exec: &str,
) -> Result<Reply, ApiError> {
    r.require(&[Role::Admin])?;
    let id = name("sandbox", id)?;
    let exec = exec_id(exec)?;
    let stdout = query_number(r, "stdout", 0, 0)?;
    let stderr = query_number(r, "stderr", 0, 0)?;
    let deadline = tokio::time::Instant::now() + wait(r)?;
    // The sandbox's topic too: a stop ends its commands in the same
    // commit as the phase change, which wakes that topic.
    let mut waiter = app
        .wakeups
        .subscribe(&[wake::exec(&exec), wake::sandbox(&id)]);
    let mut stopping = app.stopping.subscribe();
    loop {
        waiter.mark_seen();
        // The record first: once it says ended, every chunk is stored
        // (none is taken after the end), so the read below has them all.
        let row = load(app, &id, &exec).await?;
        let pieces = app
            .store
            .exec_output(&exec, stdout, stderr, MAX_ANSWER)
            .await?;
        let done = !pieces.is_empty()
            || row.state.ended()
            || tokio::time::Instant::now() >= deadline
            || app.is_stopping();
        if done {
            return Ok(Reply::ok(&wire::ExecOutput {
                exec: wire::Exec::from(&row),
                chunks: pieces
                    .into_iter()
                    .map(|p| wire::OutputChunk {
                        stream: p.stream,
                        offset: p.offset,
                        data: base64().encode(&p.data),
                    })
                    .collect(),
            }));
        }
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            () = waiter.changed() => {}
            _ = stopping.changed() => {}
        }
    }
}

/// `GET /v1/sandboxes/{id}/execs/next?wait=S`, for the sandbox's
/// supervisor: claims the oldest queued command of its generation, or
/// `204` when none came within the wait.
pub(super) async fn next(app: &Arc<App>, r: &Req, id: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, false)?;
    let deadline = tokio::time::Instant::now() + wait(r)?;
    // The sandbox's topic too: a claim waits out a `provisioning` or
    // `stopping` sandbox, and its phase change is news.
    let mut waiter = app
        .wakeups
        .subscribe(&[wake::execs(&id), wake::sandbox(&id)]);
    let mut stopping = app.stopping.subscribe();
    load_sandbox(app, &id).await?;
    loop {
        waiter.mark_seen();
        if let Some(c) = app.store.claim_exec(&id, now()).await? {
            app.changed(&wake::exec(&c.id));
            return Ok(Reply::ok(&wire::ExecClaim {
                exec_id: c.id,
                command: c.command,
                env: c.env,
                workdir: c.workdir,
                timeout_seconds: c.timeout_seconds.and_then(|t| u64::try_from(t).ok()),
            }));
        }
        if tokio::time::Instant::now() >= deadline || app.is_stopping() {
            return Ok(no_content());
        }
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            () = waiter.changed() => {}
            _ = stopping.changed() => {}
        }
    }
}

fn no_content() -> Reply {
    Reply {
        status: StatusCode::NO_CONTENT,
        body: None,
        headers: Vec::new(),
    }
}

/// `POST /v1/sandboxes/{id}/execs/{exec}/output`, for the supervisor.
pub(super) async fn append(
    app: &Arc<App>,
    r: &Req,
    id: &str,
    exec: &str,
) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, false)?;
    let body: wire::OutputRequest = r.json()?;
    let exec = exec_id(exec)?;
    let data = base64()
        .decode(body.data.as_bytes())
        .map_err(|e| ApiError::bad_request(format!("`data` is not standard base64: {e}")))?;
    if data.len() > MAX_CHUNK {
        return Err(ApiError::bad_request(format!(
            "`data` holds {} bytes; a chunk holds at most {MAX_CHUNK}: send it in parts",
            data.len()
        )));
    }
    let offset = i64::try_from(body.offset)
        .map_err(|_| ApiError::bad_request(format!("`offset` {} is too large", body.offset)))?;
    app.store
        .append_output(
            &id,
            &exec,
            OutputPiece {
                stream: body.stream,
                offset,
                data,
            },
            TRANSCRIPT_LIMIT,
        )
        .await?;
    app.changed(&wake::exec(&exec));
    Ok(no_content())
}

/// The end a body describes, or why it describes none.
fn end_of(body: wire::EndRequest) -> Result<ExecEnd, ApiError> {
    match (body.exit_status, body.timed_out, body.error) {
        (Some(status), timed_out, None) if (0..=255).contains(&status) => Ok(ExecEnd::Exited {
            status,
            timed_out: timed_out.unwrap_or(false),
        }),
        (Some(status), _, None) => Err(ApiError::bad_request(format!(
            "`exit_status` is {status}: it is 0 to 255"
        ))),
        (None, None, Some(why)) if !why.trim().is_empty() => {
            Ok(ExecEnd::Failed(clip(&why, MAX_ERROR)))
        }
        (None, None, Some(_)) => Err(ApiError::bad_request(
            "`error` is empty: say why the command could not run",
        )),
        (None, Some(_), Some(_)) => Err(ApiError::bad_request(
            "`timed_out` goes with `exit_status`, not with `error`",
        )),
        (Some(_), _, Some(_)) => Err(ApiError::bad_request(
            "give `exit_status` (and `timed_out`) when the command ran, or `error` when it could not; not both",
        )),
        (None, _, None) => Err(ApiError::bad_request(
            "the body needs `exit_status` (and `timed_out`) when the command ran, or `error` when it could not",
        )),
    }
}

/// `POST /v1/sandboxes/{id}/execs/{exec}/end`, for the supervisor;
/// the same end again is acknowledged.
pub(super) async fn end(app: &Arc<App>, r: &Req, id: &str, exec: &str) -> Result<Reply, ApiError> {
    let id = name("sandbox", id)?;
    may_see_sandbox(r, &id, false)?;
    let caller = r.caller()?.name.clone();
    let body: wire::EndRequest = r.json()?;
    let exec = exec_id(exec)?;
    let end = end_of(body)?;
    let detail = match &end {
        ExecEnd::Exited { status, timed_out } => json!({
            "exec": exec, "exit_status": status, "timed_out": timed_out, "error": null,
        }),
        ExecEnd::Failed(why) => json!({
            "exec": exec, "exit_status": null, "timed_out": false, "error": why,
        }),
    };
    let changed = app
        .store
        .end_exec(
            &id,
            &exec,
            end,
            now(),
            entry(&caller, "sandbox-exec-end", format!("sandbox:{id}"), detail),
        )
        .await?;
    if changed {
        app.changed(&wake::exec(&exec));
    }
    Ok(no_content())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_ids_are_x_and_sixteen_hex_digits() {
        for _ in 0..100 {
            let id = new_id();
            assert_eq!(exec_id(&id).ok(), Some(id.clone()));
        }
        for bad in ["x-0123", "y-0123456789abcdef", "x-0123456789ABCDEF", "next"] {
            assert!(exec_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_end_is_a_status_or_an_error_never_both() {
        let end = |v: serde_json::Value| end_of(serde_json::from_value(v).unwrap());
        assert_eq!(
            end(json!({"exit_status": 3, "timed_out": true})).unwrap(),
            ExecEnd::Exited {
                status: 3,
                timed_out: true
            }
        );
        assert_eq!(
            end(json!({"exit_status": 0})).unwrap(),
            ExecEnd::Exited {
                status: 0,
                timed_out: false
            }
        );
        assert_eq!(
            end(json!({"error": "no such program"})).unwrap(),
            ExecEnd::Failed("no such program".into())
        );
        for bad in [
            json!({}),
            json!({"exit_status": 256}),
            json!({"exit_status": -1}),
            json!({"exit_status": 1, "error": "x"}),
            json!({"timed_out": true, "error": "x"}),
            json!({"error": " "}),
        ] {
            assert!(end(bad.clone()).is_err(), "{bad}");
        }
    }
}
