//! The supervisor as a gateway client (`run --gateway`).
//!
//! Before the launch, the bundle is fetched and verified (trusted key id,
//! signature, this sandbox, digest); if the gateway cannot be reached or
//! the envelope does not verify, the command never runs. The fetch runs on
//! a thread of its own with its own runtime, joined before the fork, so the
//! supervisor is still single-threaded when it forks.
//!
//! Then a task long-polls the gateway (`If-None-Match` with the digest in
//! force) and hands each verified revision to the same reload path as
//! `SIGHUP` ([`Reloader::apply`]). A bad signature, an unknown key id, a
//! digest mismatch or an older revision is refused and the rules in force
//! stay. Every outcome is reported (`applied`, `network_only` when the
//! Landlock rules, syscall filter or user differ and wait for the next
//! launch, `refused`). While the gateway is down, the rules in force stay
//! and the poll retries. The trust file is read again for every envelope,
//! so adding a key there trusts it without a restart; `SIGHUP` asks for the
//! current revision again (after a refusal, say, once the key is trusted).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bundle_trust::client::Client;
use bundle_trust::{TrustedKeys, Verified};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::RunArgs;
use crate::error::LaunchError;
use crate::notes::note;
use crate::reload::{Outcome, Reloader};

/// How long one long-poll waits at the gateway.
const POLL_SECS: u64 = 30;
/// The most a retry waits while the gateway is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Where the bundle comes from.
#[derive(Debug, Clone)]
pub struct Gateway {
    client: Client,
    sandbox: String,
    trust: PathBuf,
}

fn read(path: Option<&PathBuf>, what: &str) -> Result<(PathBuf, Vec<u8>), LaunchError> {
    let path = path
        .ok_or_else(|| LaunchError::Usage(format!("`--gateway` needs `{what}`")))?
        .clone();
    let bytes = std::fs::read(&path)
        .map_err(|e| LaunchError::Gateway(format!("cannot read `{}`: {e}", path.display())))?;
    Ok((path, bytes))
}

impl Gateway {
    /// From `run`'s arguments; `None` without `--gateway`.
    pub fn from_args(args: &RunArgs) -> Result<Option<Self>, LaunchError> {
        let Some(url) = &args.gateway else {
            return Ok(None);
        };
        let (_, token) = read(args.token_file.as_ref(), "--token-file")?;
        let (_, ca) = read(args.gateway_ca.as_ref(), "--gateway-ca")?;
        let trust = args
            .trust_key
            .clone()
            .ok_or_else(|| LaunchError::Usage("`--gateway` needs `--trust-key`".into()))?;
        let sandbox = args
            .sandbox
            .clone()
            .ok_or_else(|| LaunchError::Usage("`--gateway` needs `--sandbox`".into()))?;
        let client = Client::new(url, &ca, &String::from_utf8_lossy(&token))
            .map_err(|e| LaunchError::Gateway(e.to_string()))?;
        Ok(Some(Self {
            client,
            sandbox,
            trust,
        }))
    }

    fn trusted(&self) -> Result<TrustedKeys, String> {
        let text = std::fs::read_to_string(&self.trust)
            .map_err(|e| format!("cannot read `{}`: {e}", self.trust.display()))?;
        TrustedKeys::parse(&text).map_err(|e| e.to_string())
    }

    fn shown(&self) -> String {
        format!("{}/v1/sandboxes/{}/bundle", self.client.url(), self.sandbox)
    }

    /// Fetches and verifies the current revision, before the fork.
    pub fn fetch_initial(&self) -> Result<Verified, LaunchError> {
        let me = self.clone();
        let joined = std::thread::Builder::new()
            .name("gateway-fetch".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                let got = rt.block_on(me.fetch());
                drop(rt);
                got
            })
            .map_err(|e| LaunchError::Gateway(e.to_string()))?
            .join();
        match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(why)) => Err(LaunchError::Gateway(why)),
            Err(_) => Err(LaunchError::Gateway(
                "the fetch stopped unexpectedly".into(),
            )),
        }
    }

    async fn fetch(&self) -> Result<Verified, String> {
        let path = format!("/v1/sandboxes/{}/bundle", self.sandbox);
        let resp = self
            .client
            .send("GET", &path, None, &[], Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        if resp.status != 200 {
            let why = resp
                .json()
                .pointer("/error/message")
                .and_then(serde_json::Value::as_str)
                .map_or_else(|| format!("status {}", resp.status), str::to_owned);
            return Err(format!("the gateway refused: {why}"));
        }
        let envelope = bundle_trust::parse_envelope(&resp.body).map_err(|e| e.to_string())?;
        self.trusted()?
            .verify(&envelope, &self.sandbox, None)
            .map_err(|e| e.to_string())
    }

    /// Tells the gateway what happened to a revision.
    async fn report(&self, revision: i64, digest: &str, result: &str, error: Option<String>) {
        let body =
            json!({ "revision": revision, "digest": digest, "result": result, "error": error });
        let path = format!("/v1/sandboxes/{}/status", self.sandbox);
        match self
            .client
            .send("POST", &path, Some(&body), &[], Duration::from_secs(30))
            .await
        {
            Ok(r) if r.status == 200 => {}
            Ok(r) => note(&format!(
                "the gateway did not take the status report (status {})",
                r.status
            )),
            Err(e) => note(&format!("cannot report the status to the gateway: {e}")),
        }
    }

    /// Reports the launch's revision, then follows the gateway for as long
    /// as the runtime lives.
    /// `SIGHUP` is registered now, so that from here on it never takes
    /// its default action.
    pub fn follow(self, reloader: Arc<Reloader>, first: &Verified) -> std::io::Result<()> {
        let (revision, digest) = (first.claims.revision, first.bundle.digest.clone());
        let hup = signal(SignalKind::hangup())?;
        tokio::spawn(async move {
            self.report(revision, &digest, "applied", None).await;
            self.poll(reloader, revision, digest, hup).await;
        });
        Ok(())
    }

    async fn poll(
        self,
        reloader: Arc<Reloader>,
        mut revision: i64,
        mut digest: String,
        mut hup: tokio::signal::unix::Signal,
    ) {
        let shown = self.shown();
        let path = format!("/v1/sandboxes/{}/bundle?wait={POLL_SECS}", self.sandbox);
        // The last revision refused: while the gateway offers it again, the
        // poll only looks every MAX_BACKOFF (no storm, no repeated report).
        let mut refused: Option<(i64, String)> = None;
        let mut backoff = Duration::from_secs(1);
        let mut down = false;
        loop {
            let inm = format!("\"{digest}\"");
            let headers = [("if-none-match", inm.as_str())];
            let fetched = self.client.send(
                "GET",
                &path,
                None,
                &headers,
                Duration::from_secs(POLL_SECS + 15),
            );
            let resp = tokio::select! {
                r = fetched => r,
                Some(()) = hup.recv() => {
                    note("SIGHUP: asking the gateway for the current revision again");
                    refused = None;
                    continue;
                }
            };
            let resp = match resp {
                Ok(r) => r,
                Err(e) => {
                    if !down {
                        note(&format!(
                            "the gateway is unreachable ({e}); the rules in force stay, retrying"
                        ));
                        down = true;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if down {
                note("the gateway answers again");
                down = false;
            }
            backoff = Duration::from_secs(1);
            match resp.status {
                304 => continue,
                200 => {}
                other => {
                    let why = resp
                        .json()
                        .pointer("/error/message")
                        .and_then(serde_json::Value::as_str)
                        .map_or_else(String::new, str::to_owned);
                    note(&format!("the gateway answered {other}: {why}"));
                    tokio::time::sleep(MAX_BACKOFF).await;
                    continue;
                }
            }
            let envelope = match bundle_trust::parse_envelope(&resp.body) {
                Ok(e) => e,
                Err(e) => {
                    reloader.refused(
                        &shown,
                        format!("reload refused, the policy in force stays: {e}"),
                    );
                    tokio::time::sleep(MAX_BACKOFF).await;
                    continue;
                }
            };
            let offered = (envelope.claims.revision, envelope.claims.digest.clone());
            if refused.as_ref() == Some(&offered) {
                tokio::select! {
                    () = tokio::time::sleep(MAX_BACKOFF) => {}
                    Some(()) = hup.recv() => {
                        note("SIGHUP: asking the gateway for the current revision again");
                        refused = None;
                    }
                }
                continue;
            }
            let verified = self.trusted().and_then(|t| {
                t.verify(&envelope, &self.sandbox, Some(revision))
                    .map_err(|e| e.to_string())
            });
            let v = match verified {
                Ok(v) => v,
                Err(why) => {
                    reloader.refused(
                        &shown,
                        format!(
                            "revision {} refused, the policy in force stays: {why}",
                            offered.0
                        ),
                    );
                    self.report(offered.0, &offered.1, "refused", Some(why))
                        .await;
                    refused = Some(offered);
                    continue;
                }
            };
            let new_revision = v.claims.revision;
            match reloader.apply(v.bundle, &shown).await {
                Outcome::Applied {
                    digest: d, fixed, ..
                } => {
                    revision = new_revision;
                    digest = d;
                    refused = None;
                    let (result, error) = match fixed {
                        Some(parts) => (
                            "network_only",
                            Some(format!(
                                "relaunch required: the new {parts} apply from the next launch"
                            )),
                        ),
                        None => ("applied", None),
                    };
                    self.report(revision, &digest, result, error).await;
                }
                Outcome::Unchanged => {
                    revision = new_revision;
                    refused = None;
                    self.report(revision, &digest, "applied", None).await;
                }
                Outcome::Refused(why) => {
                    self.report(new_revision, &offered.1, "refused", Some(why))
                        .await;
                    refused = Some(offered);
                }
            }
        }
    }
}
