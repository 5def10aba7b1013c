//! `openshell-gateway sandbox exec | execs | transcript`: run a command in
//! a ready sandbox the gateway runs and follow its output, list the
//! commands run, and print one's stored output.
//!
//! The output is followed with long-polls from per-stream offsets, so a
//! lost answer or a replica that goes away costs nothing but the next
//! request: the gateway keeps the transcript, not the connection.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

use base64::Engine as _;
use bundle_trust::client::Client;
use clap::Args;

use super::{Conn, EXIT_REFUSED, EXIT_USAGE, TIMEOUT, call, connect, fail, get, print_json};
use crate::wire::{self, ExecState, Stream};

/// What `sandbox exec` exits with when the command could not run.
const EXIT_NOT_RUN: u8 = 125;
/// Seconds one follow request waits for output on the gateway.
const FOLLOW_WAIT: u64 = 60;

/// `sandbox exec ID [--env NAME=VALUE]... [--workdir DIR] [--timeout S] -- COMMAND...`.
#[derive(Args, Debug)]
pub(crate) struct ExecArgs {
    /// The sandbox, `ready` and run by the gateway.
    id: String,
    /// A variable for the command, named in the sandbox's `run.env_allow`
    /// (repeatable); `NAME` alone passes this program's own value.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// The command's working directory, an absolute path in the sandbox.
    #[arg(long, value_name = "DIR")]
    workdir: Option<String>,
    /// Killed after S seconds (default: the sandbox's `run.timeout_seconds`).
    #[arg(long, value_name = "S")]
    timeout: Option<u64>,
    /// The command, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `--env` as the request's `env`.
fn env(given: &[String]) -> Result<BTreeMap<String, String>, u8> {
    let mut out = BTreeMap::new();
    for e in given {
        let (k, v) = match e.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => {
                let v = std::env::var(e).map_err(|_| {
                    fail(
                        EXIT_USAGE,
                        format!("`--env {e}` passes this program's `{e}`, which is not set: give `--env {e}=VALUE`"),
                    )
                })?;
                (e.clone(), v)
            }
        };
        if k.is_empty() {
            return Err(fail(EXIT_USAGE, format!("`--env {e}` names no variable")));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// Writes output chunks to this program's stdout and stderr as they are,
/// and moves the offsets past them.
fn write_chunks(chunks: &[wire::OutputChunk], offsets: &mut [i64; 2]) -> Result<(), u8> {
    let engine = base64::engine::general_purpose::STANDARD;
    for c in chunks {
        let bytes = engine.decode(c.data.as_bytes()).map_err(|e| {
            fail(
                EXIT_REFUSED,
                format!("the gateway sent output that is not base64: {e}"),
            )
        })?;
        let (slot, written) = match c.stream {
            Stream::Stdout => (0, std::io::stdout().lock().write_all(&bytes)),
            Stream::Stderr => (1, std::io::stderr().lock().write_all(&bytes)),
        };
        // A closed pipe downstream is not the command's failure; the
        // offsets still move, so the follow ends as the command does.
        let _ = written;
        if let Some(o) = offsets.get_mut(slot) {
            *o = c
                .offset
                .saturating_add(i64::try_from(bytes.len()).unwrap_or(i64::MAX));
        }
    }
    let _ = std::io::stdout().lock().flush();
    Ok(())
}

/// Writes an exec's output out, following it to its end when `wait` is
/// not 0 (else only what is stored now); the record as it was last read.
async fn follow(client: &Client, id: &str, exec: &str, wait: u64) -> Result<wire::Exec, u8> {
    let mut offsets = [0i64; 2];
    loop {
        let [stdout, stderr] = offsets;
        let path = format!(
            "/v1/sandboxes/{id}/execs/{exec}/output?stdout={stdout}&stderr={stderr}&wait={wait}"
        );
        let out: wire::ExecOutput =
            get(client, &path, Duration::from_secs(wait.saturating_add(30))).await?;
        write_chunks(&out.chunks, &mut offsets)?;
        // An ended exec's answer may still stop at the size limit: ask
        // until one brings nothing.
        if (wait == 0 || out.exec.state.ended()) && out.chunks.is_empty() {
            return Ok(out.exec);
        }
    }
}

/// The status line of an ended exec, and the exit code it stands for.
fn ending(e: &wire::Exec) -> (String, u8) {
    let cut = if e.truncated {
        "; the transcript was cut at 16 MiB"
    } else {
        ""
    };
    match (e.state, e.exit_status) {
        (ExecState::Exited, Some(status)) => {
            let code = u8::try_from(status).unwrap_or(EXIT_NOT_RUN);
            let line = if e.timed_out {
                format!(
                    "exec `{}` timed out after {}s and was killed; exit status {status}{cut}",
                    e.id,
                    e.timeout_seconds
                        .map_or_else(|| "?".to_owned(), |t| t.to_string())
                )
            } else {
                format!("exec `{}` exited with status {status}{cut}", e.id)
            };
            (line, code)
        }
        (ExecState::Queued | ExecState::Running, _) => (
            format!(
                "exec `{}` is {} ({} bytes of stdout and {} of stderr so far){cut}",
                e.id,
                if e.state == ExecState::Queued {
                    "queued"
                } else {
                    "running"
                },
                e.stdout_bytes,
                e.stderr_bytes
            ),
            0,
        ),
        _ => (
            format!(
                "exec `{}` failed: {}{cut}",
                e.id,
                e.error.as_deref().unwrap_or("no reason given")
            ),
            EXIT_NOT_RUN,
        ),
    }
}

/// `sandbox exec`: exits with the command's exit status, 125 when it
/// could not run.
pub(super) async fn run(conn: &Conn, args: ExecArgs) -> Result<u8, u8> {
    let client = connect(conn)?;
    let body = wire::ExecRequest {
        command: args.command,
        env: env(&args.env)?,
        workdir: args.workdir,
        timeout_seconds: args.timeout,
    };
    let path = format!("/v1/sandboxes/{}/execs", args.id);
    let made: wire::Exec = call(&client, "POST", &path, Some(&body), TIMEOUT).await?;
    let ended = follow(&client, &args.id, &made.id, FOLLOW_WAIT).await?;
    let (line, code) = ending(&ended);
    // An exit status is the command's own word; only the exceptions are
    // said out loud.
    if ended.state != ExecState::Exited || ended.timed_out || ended.truncated {
        eprintln!("openshell-gateway: {line}");
    }
    Ok(code)
}

/// `sandbox execs ID`.
pub(super) async fn list(conn: &Conn, id: &str, limit: Option<i64>) -> Result<u8, u8> {
    let client = connect(conn)?;
    let path = match limit {
        Some(n) => format!("/v1/sandboxes/{id}/execs?limit={n}"),
        None => format!("/v1/sandboxes/{id}/execs"),
    };
    print_json(&get::<wire::ExecList>(&client, &path, TIMEOUT).await?);
    Ok(0)
}

/// `sandbox transcript ID EXEC`: the output stored now, raw, then the
/// status line on stderr.
pub(super) async fn transcript(conn: &Conn, id: &str, exec: &str) -> Result<u8, u8> {
    let client = connect(conn)?;
    let ended = follow(&client, id, exec, 0).await?;
    eprintln!("openshell-gateway: {}", ending(&ended).0);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_takes_name_value_or_this_programs_own() {
        let got = env(&["A=1".into(), "B==2".into(), "PATH".into()]).unwrap();
        assert_eq!(got.get("A").map(String::as_str), Some("1"));
        assert_eq!(got.get("B").map(String::as_str), Some("=2"));
        assert_eq!(got.get("PATH"), std::env::var("PATH").ok().as_ref());
        assert!(env(&["=1".into()]).is_err());
        assert!(env(&["OPENSHELL_SURELY_UNSET_VARIABLE".into()]).is_err());
    }
}
