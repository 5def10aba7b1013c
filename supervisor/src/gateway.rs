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
//!
//! A signed envelope stays valid forever, so whoever captured one could
//! replay it to a supervisor that has just started, to bring back an old
//! policy. Two checks stop that at launch. The revision floor
//! ([`crate::state`]): the highest revision ever applied in this sandbox,
//! kept across restarts, raised only once a revision is in force; anything
//! lower is refused. Freshness: the launch's request carries a random nonce
//! that the gateway signs back; an envelope without it must have been
//! issued within `--max-bundle-age`, and one with another request's nonce
//! is refused whatever its age.
//!
//! With several gateway URLs the client tries them in order
//! ([`bundle_trust::client`]), for the launch, the poll and the reports.
//! A session token (a sandbox the gateway runs) is refreshed before it
//! expires ([`crate::session`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bundle_trust::client::Client;
use bundle_trust::{TrustError, TrustedKeys, Verified};
use ring::rand::SecureRandom as _;
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::BundleSource;
use crate::error::LaunchError;
use crate::notes::note;
use crate::reload::{Outcome, Reloader};
use crate::session::Session;
use crate::state::{self, Applied, StateDir};
use sandbox::writable::Writable;

/// How long one long-poll waits at the gateway.
const POLL_SECS: u64 = 30;
/// The most a retry waits while the gateway is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// `--max-bundle-age` when not given, in seconds.
pub const DEFAULT_MAX_AGE: u64 = 300;
/// How far in the future an envelope's `issued_at` may be: the clocks of
/// the gateway and the supervisor differ a little.
pub const CLOCK_SKEW: i64 = 30;

/// Where the bundle comes from.
#[derive(Debug, Clone)]
pub struct Gateway {
    session: Arc<Session>,
    sandbox: String,
    trust: PathBuf,
    state: StateDir,
    /// The floor read at launch.
    floor: Option<Applied>,
    max_age: i64,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A nonce no one can have guessed: 24 random bytes, in hex.
fn nonce() -> Result<String, String> {
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random generator failed".to_owned())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn state_error(e: state::StateError) -> LaunchError {
    LaunchError::State(e.to_string())
}

fn read(path: Option<&PathBuf>, what: &str) -> Result<(PathBuf, Vec<u8>), LaunchError> {
    let path = path
        .ok_or_else(|| LaunchError::Usage(format!("`--gateway` needs `{what}`")))?
        .clone();
    let bytes = std::fs::read(&path)
        .map_err(|e| LaunchError::Gateway(format!("cannot read `{}`: {e}", path.display())))?;
    Ok((path, bytes))
}

/// What the reloader shows as the bundle's source when a gateway delivers
/// it.
#[must_use]
pub fn label(args: &BundleSource) -> PathBuf {
    PathBuf::from(args.gateway.first().map_or("gateway", String::as_str))
}

/// The bundle to launch with: the gateway's, verified (and kept, for
/// [`follow_or_watch`]), or the file's.
pub fn initial_bundle(
    gateway: Option<&Gateway>,
    file: Option<&Path>,
) -> Result<(policy_bundle::Bundle, Option<Verified>), LaunchError> {
    match (gateway, file) {
        (Some(g), _) => {
            let verified = g.fetch_initial()?;
            note(&format!(
                "revision {} of `{}` from the gateway ({}), signed by key `{}`",
                verified.claims.revision,
                verified.claims.policy,
                verified.bundle.digest,
                verified.key_id
            ));
            Ok((verified.bundle.clone(), Some(verified)))
        }
        (None, Some(path)) => Ok((crate::tables::load_bundle(path)?, None)),
        (None, None) => Err(LaunchError::Usage(
            "`--bundle` or `--gateway` is needed".into(),
        )),
    }
}

/// Reloads from here on: each revision the gateway approves, or the file
/// again on `SIGHUP` (and on change, with `watch`).
pub fn follow_or_watch(
    gateway: Option<Gateway>,
    first: Option<&Verified>,
    reloader: &Arc<Reloader>,
    watch: bool,
) -> Result<(), LaunchError> {
    match (gateway, first) {
        (Some(g), Some(first)) => g.follow(Arc::clone(reloader), first),
        _ => reloader.spawn(watch),
    }
    .map_err(LaunchError::io("watch for SIGHUP"))
}

impl Gateway {
    /// From the gateway flags, for sandbox `sandbox` (`None`: the flag
    /// naming it was not given); `None` without `--gateway`.
    pub fn from_args(
        args: &BundleSource,
        sandbox: Option<&str>,
    ) -> Result<Option<Self>, LaunchError> {
        if args.gateway.is_empty() {
            return Ok(None);
        }
        let (token_file, token) = read(args.token_file.as_ref(), "--token-file")?;
        let token = String::from_utf8_lossy(&token).into_owned();
        let (_, ca) = read(args.gateway_ca.as_ref(), "--gateway-ca")?;
        let trust = args
            .trust_key
            .clone()
            .ok_or_else(|| LaunchError::Usage("`--gateway` needs `--trust-key`".into()))?;
        let sandbox = sandbox
            .ok_or_else(|| LaunchError::Usage("`--gateway` needs `--sandbox`".into()))?
            .to_owned();
        let client = Client::with_urls(&args.gateway, &ca, &token)
            .map_err(|e| LaunchError::Gateway(e.to_string()))?;
        let session = Session::new(client, &sandbox, &token_file, &token);
        let dir = args
            .state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(state::DEFAULT_DIR));
        let state = StateDir::open(&dir).map_err(state_error)?;
        let floor = state.load(&sandbox).map_err(state_error)?;
        let max_age =
            i64::try_from(args.max_bundle_age.unwrap_or(DEFAULT_MAX_AGE)).unwrap_or(i64::MAX);
        Ok(Some(Self {
            session,
            sandbox,
            trust,
            state,
            floor,
            max_age,
        }))
    }

    /// Takes the further commands the gateway queues for this sandbox and
    /// runs them through `commands`, for as long as the runtime lives.
    pub fn run_commands(
        &self,
        binding: sandbox_protocol::Binding,
        commands: Arc<crate::commands::Commands>,
    ) {
        tokio::spawn(crate::gateway_exec::follow(
            Arc::clone(&self.session),
            self.sandbox.clone(),
            binding,
            commands,
        ));
    }

    /// The advisor endpoint's proposals go to this gateway, for this
    /// sandbox, under the token this supervisor keeps fresh: the agent
    /// never holds a credential of the gateway.
    pub fn propose_through(&self, proxy: &crate::l7::Proxy) {
        proxy.forward_proposals(Arc::clone(&self.session), &self.sandbox);
    }

    fn state_file(&self) -> String {
        self.state.file(&self.sandbox).map_or_else(
            |_| self.state.path().display().to_string(),
            |p| p.display().to_string(),
        )
    }

    /// Refuses a launch whose workload could write the state. With
    /// Landlock, no rule may grant a write right on the state directory,
    /// anything in it or anything above it: then the workload can neither
    /// write nor replace anything there, whatever its user. Without
    /// Landlock, only permissions stand in the way, and the kernel is asked
    /// whether the workload's user could write or replace the directory or
    /// the file.
    pub fn guard_state(&self, writable: &Writable, landlock: bool) -> Result<(), LaunchError> {
        let dir = self.state.path();
        if landlock {
            return match writable.tree_touching(dir) {
                None => Ok(()),
                Some(tree) => Err(LaunchError::State(format!(
                    "the policy lets the workload write `{}`, which holds the state directory `{}`: keep the state directory out of its `fs write` trees and working directory",
                    tree.display(),
                    dir.display()
                ))),
            };
        }
        let file = self.state.file(&self.sandbox).map_err(state_error)?;
        let exposed = if file.exists() {
            writable.exposure(&file)
        } else {
            // A directory's own link count says nothing (`.` and `..`);
            // what matters is whether the workload may write it.
            writable.exposure(dir)
        };
        match exposed {
            None => Ok(()),
            Some(why) => Err(LaunchError::State(format!(
                "the workload could change the revision floor: {why}"
            ))),
        }
    }

    /// Raises the floor to a revision now in force. A failure leaves the
    /// old floor, which is still safe, and is said.
    fn record(&self, policy: &str, revision: i64, digest: &str) {
        let applied = Applied::new(&self.sandbox, policy, revision, digest, now());
        if let Err(e) = self.state.store(&applied) {
            note(&format!(
                "cannot raise the revision floor to {revision}: {e}; a restart would accept revisions down to the old one"
            ));
        }
    }

    /// Refuses `v` when it is below the floor kept for this sandbox, or
    /// another policy's, or the floor's revision with another digest.
    fn above_floor(&self, v: &Verified, floor: Option<&Applied>) -> Result<(), String> {
        let Some(floor) = floor else {
            return Ok(());
        };
        let file = self.state_file();
        let c = &v.claims;
        if c.policy != floor.policy {
            return Err(format!(
                "the gateway offers policy `{}`, but policy `{}` (revision {}) was applied in sandbox `{}` (`{file}`); remove that file only if the sandbox really changed policy",
                c.policy, floor.policy, floor.revision, self.sandbox
            ));
        }
        if c.revision < floor.revision {
            let older = TrustError::OlderRevision {
                policy: c.policy.clone(),
                offered: c.revision,
                applied: floor.revision,
            };
            return Err(format!(
                "{older} (the revision floor kept in `{file}`): a replay of an old envelope, or a gateway whose database went back"
            ));
        }
        if c.revision == floor.revision && c.digest != floor.digest {
            return Err(format!(
                "revision {} of `{}` was applied with digest {}, but the gateway offers {} for the same revision",
                c.revision, c.policy, floor.digest, c.digest
            ));
        }
        Ok(())
    }

    fn trusted(&self) -> Result<TrustedKeys, String> {
        let text = std::fs::read_to_string(&self.trust)
            .map_err(|e| format!("cannot read `{}`: {e}", self.trust.display()))?;
        TrustedKeys::parse(&text).map_err(|e| e.to_string())
    }

    fn shown(&self) -> String {
        format!(
            "{}/v1/sandboxes/{}/bundle",
            self.session.client().url(),
            self.sandbox
        )
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
        let sent = nonce()?;
        let path = format!("/v1/sandboxes/{}/bundle?nonce={sent}", self.sandbox);
        let resp = self
            .session
            .client()
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
        let v = self
            .trusted()?
            .verify(&envelope, &self.sandbox, None)
            .map_err(|e| e.to_string())?;
        self.above_floor(&v, self.floor.as_ref())?;
        v.check_fresh(Some(&sent), now(), self.max_age, CLOCK_SKEW)
            .map_err(|e| e.to_string())?;
        Ok(v)
    }

    /// [`Gateway::record`] off the runtime's threads (it syncs to disk).
    async fn record_async(&self, policy: &str, revision: i64, digest: &str) {
        let me = self.clone();
        let (policy, digest) = (policy.to_owned(), digest.to_owned());
        let done = tokio::task::spawn_blocking(move || me.record(&policy, revision, &digest)).await;
        if done.is_err() {
            note("the revision floor could not be raised: its task stopped");
        }
    }

    /// Tells the gateway what happened to a revision.
    async fn report(&self, revision: i64, digest: &str, result: &str, error: Option<String>) {
        let body =
            json!({ "revision": revision, "digest": digest, "result": result, "error": error });
        let path = format!("/v1/sandboxes/{}/status", self.sandbox);
        match self
            .session
            .client()
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
        // The workload runs under this revision now: it is the floor.
        self.record(&first.claims.policy, revision, &digest);
        tokio::spawn(Arc::clone(&self.session).keep_fresh());
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
            let client = self.session.client();
            let fetched = client.send(
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
            // The revision in force is at least the floor (the launch
            // checked it, every reload raised both), so checking against it
            // also keeps the floor.
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
            let policy = v.claims.policy.clone();
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
                    self.record_async(&policy, revision, &digest).await;
                    self.report(revision, &digest, result, error).await;
                }
                Outcome::Unchanged | Outcome::SecretsReread => {
                    revision = new_revision;
                    refused = None;
                    self.record_async(&policy, revision, &digest).await;
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
