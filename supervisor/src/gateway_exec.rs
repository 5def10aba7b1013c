//! The further commands the gateway queues for this sandbox
//! (`openshell-gateway sandbox exec`): a task long-polls the gateway for
//! the next one, runs each in the sandbox ([`Commands`]) and sends its
//! output back as it comes, then how it ended. Every part is sent with its
//! offset in its stream, so a part sent again after a failure is stored
//! once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use sandbox_protocol::Binding;
use serde::Deserialize;
use serde_json::json;

use crate::commands::{Command, Commands, Event};
use crate::notes::note;
use crate::session::Session;

/// How long one long-poll waits at the gateway.
const POLL_SECS: u64 = 30;
/// The most bytes of one part of output sent at once.
const MAX_PART: usize = 256 * 1024;
/// The most a retry waits while the gateway is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How many times one part is sent before the command is given up.
const ATTEMPTS: u32 = 8;

/// A command as the gateway hands it over.
#[derive(Debug, Deserialize)]
struct Queued {
    exec_id: String,
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// Takes the sandbox's queued commands from the gateway for as long as
/// the runtime lives.
pub(crate) async fn follow(
    session: Arc<Session>,
    sandbox: String,
    binding: Binding,
    commands: Arc<Commands>,
) {
    let path = format!("/v1/sandboxes/{sandbox}/execs/next?wait={POLL_SECS}");
    let mut backoff = Duration::from_secs(1);
    loop {
        let asked = session
            .client()
            .send("GET", &path, None, &[], Duration::from_secs(POLL_SECS + 15))
            .await;
        let queued = match asked {
            Ok(r) if r.status == 204 => continue,
            Ok(r) if r.status == 200 => serde_json::from_slice::<Queued>(&r.body)
                .map_err(|e| format!("the gateway's command is not one: {e}")),
            Ok(r) => Err(format!(
                "the gateway answered {}: {}",
                r.status,
                message(&r)
            )),
            Err(e) => Err(e.to_string()),
        };
        let queued = match queued {
            Ok(q) => q,
            Err(why) => {
                note(&format!("cannot take the next command: {why}; retrying"));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_secs(1);
        let run = Run {
            session: Arc::clone(&session),
            base: format!("/v1/sandboxes/{sandbox}/execs/{}", queued.exec_id),
        };
        let (binding, commands) = (binding.clone(), Arc::clone(&commands));
        tokio::spawn(async move { run.run(&queued, &binding, &commands).await });
    }
}

fn message(r: &bundle_trust::client::Response) -> String {
    r.json()
        .pointer("/error/message")
        .and_then(serde_json::Value::as_str)
        .map_or_else(String::new, str::to_owned)
}

/// One command's way back to the gateway.
struct Run {
    session: Arc<Session>,
    base: String,
}

impl Run {
    async fn run(&self, queued: &Queued, binding: &Binding, commands: &Commands) {
        let command = Command {
            argv: queued.command.clone(),
            env: queued.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            workdir: queued.workdir.clone(),
            timeout: queued.timeout_seconds.map(Duration::from_secs),
        };
        let mut events = match commands.run(binding, &command).await {
            Ok(events) => events,
            Err(why) => return self.end(&json!({ "error": why })).await,
        };
        let (mut stdout_at, mut stderr_at) = (0_u64, 0_u64);
        let mut held: Option<Event> = None;
        loop {
            let event = match held.take() {
                Some(e) => e,
                None => match events.recv().await {
                    Some(e) => e,
                    None => {
                        let why = "the channel to the sandbox dropped before the command ended";
                        return self.end(&json!({ "error": why })).await;
                    }
                },
            };
            let (stream, offset, data) = match event {
                Event::Started => continue,
                Event::Failed(why) => return self.end(&json!({ "error": why })).await,
                Event::Exited { status, timed_out } => {
                    return self
                        .end(&json!({ "exit_status": status, "timed_out": timed_out }))
                        .await;
                }
                Event::Stdout(data) => ("stdout", &mut stdout_at, data),
                Event::Stderr(data) => ("stderr", &mut stderr_at, data),
            };
            let (part, next) = gather(data, &mut events, stream == "stdout");
            held = next;
            if !self.output(stream, offset, &part).await {
                return;
            }
        }
    }

    /// Sends `data` at `offset` of `stream`, again after a failure; false
    /// when the gateway would not take it (the command is then given up:
    /// dropping its events cancels it).
    async fn output(&self, stream: &str, offset: &mut u64, data: &[u8]) -> bool {
        let body = json!({
            "stream": stream,
            "offset": *offset,
            "data": base64::engine::general_purpose::STANDARD.encode(data),
        });
        let path = format!("{}/output", self.base);
        if self.send(&path, &body).await {
            *offset += data.len() as u64;
            true
        } else {
            false
        }
    }

    async fn end(&self, body: &serde_json::Value) {
        let path = format!("{}/end", self.base);
        self.send(&path, body).await;
    }

    async fn send(&self, path: &str, body: &serde_json::Value) -> bool {
        let mut backoff = Duration::from_millis(200);
        for _ in 0..ATTEMPTS {
            let sent = self
                .session
                .client()
                .send("POST", path, Some(body), &[], Duration::from_secs(30))
                .await;
            match sent {
                Ok(r) if r.status < 300 => return true,
                Ok(r) if r.status < 500 => {
                    note(&format!(
                        "the gateway refused a command's output or end ({}): {}",
                        r.status,
                        message(&r)
                    ));
                    return false;
                }
                _ => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        note(&format!("gave up sending `{path}` to the gateway"));
        false
    }
}

/// `first` and what follows it at once on the same stream, up to
/// [`MAX_PART`] bytes; the first event of another kind is handed back.
fn gather(
    first: Vec<u8>,
    events: &mut tokio::sync::mpsc::Receiver<Event>,
    stdout: bool,
) -> (Vec<u8>, Option<Event>) {
    let mut part = first;
    while part.len() < MAX_PART {
        match events.try_recv() {
            Ok(Event::Stdout(more)) if stdout => part.extend_from_slice(&more),
            Ok(Event::Stderr(more)) if !stdout => part.extend_from_slice(&more),
            Ok(other) => return (part, Some(other)),
            Err(_) => break,
        }
    }
    (part, None)
}
