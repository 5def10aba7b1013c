//! `openshell-sandbox --bootstrap FILE`: started on its own (by a
//! container runtime, as PID 1 of the namespaces it was given) on another
//! host than its supervisor, joined to it by the channel of
//! `sandbox_protocol::channel`.
//!
//! In order:
//!
//! 1. The bootstrap file is read and deleted: it holds the sandbox's
//!    channel key, which the workload must never read. A file that cannot
//!    be deleted stops the start.
//! 2. The workload is forked with the plan's Landlock ruleset and seccomp
//!    filter; it waits for its go before its `exec`.
//! 3. The sandbox listens on the bootstrap's address and takes the first
//!    supervisor of its generation that completes the TLS handshake and
//!    the greeting (the supervisor checks the bundle digest the sandbox
//!    enforces). Every other peer is refused and logged, and every peer
//!    while one is attached.
//! 4. Only then does the workload run, brokered as in a local run.
//! 5. When the channel drops, every workload process is killed and the
//!    sandbox exits with [`EXIT_SUPERVISOR_LOST`]: nothing runs unwatched.
//!
//! Every step is a line on standard error.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use enforcer::ExitStatus;
use sandbox_protocol::channel::{Credential, Role, SandboxEnd};
use serde::{Deserialize, Serialize};

use crate::brokering::{self, AttachError};
use crate::launch::{self, LaunchError};
use crate::pid1;
use crate::plan::LaunchPlan;
use crate::relay::Supervisor;

/// The bootstrap format this sandbox reads.
pub const BOOTSTRAP_VERSION: u32 = 1;

/// Exit status when the channel to the supervisor dropped and the
/// workload was killed for it.
pub const EXIT_SUPERVISOR_LOST: u8 = 122;

/// What a standalone sandbox starts from.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// [`BOOTSTRAP_VERSION`].
    pub version: u32,
    /// Where to listen for the supervisor.
    pub listen: SocketAddr,
    /// The sandbox's channel credential for this generation.
    pub credential: Credential,
    /// The launch plan; its relay names the same sandbox and generation as
    /// the credential.
    pub plan: LaunchPlan,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("listen", &self.listen)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

/// Why a standalone sandbox did not run its workload, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StandaloneError {
    /// The bootstrap file is missing, malformed or inconsistent.
    #[error("the bootstrap file `{path}`: {why}")]
    Bootstrap {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The workload could not be prepared.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The listener, the relay or the broker could not start.
    #[error(transparent)]
    Attach(#[from] AttachError),
}

impl Bootstrap {
    /// The bootstrap as the bytes of its file.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain data with string keys: it always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads the bootstrap at `path` and deletes the file.
    pub fn take(path: &Path) -> Result<Self, StandaloneError> {
        let bad = |why: String| StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why,
        };
        let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        std::fs::remove_file(path).map_err(|e| {
            bad(format!(
                "cannot delete it ({e}): it holds the sandbox's channel key, which the workload must not read; give it on a writable path"
            ))
        })?;
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let Versioned { version } =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a bootstrap: {e}")))?;
        if version != BOOTSTRAP_VERSION {
            return Err(bad(format!(
                "version {version}; this openshell-sandbox reads version {BOOTSTRAP_VERSION}"
            )));
        }
        let b: Self =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a bootstrap: {e}")))?;
        // The credential's own checks: its role and readable PEM.
        Credential::from_json(
            &b.credential.to_json().map_err(|e| bad(e.to_string()))?,
            Role::Sandbox,
        )
        .map_err(|e| bad(e.to_string()))?;
        let Some(relay) = &b.plan.relay else {
            return Err(bad(
                "its plan has no relay: a standalone sandbox brokers".into()
            ));
        };
        if (relay.sandbox_id.as_str(), relay.generation)
            != (b.credential.sandbox_id.as_str(), b.credential.generation)
        {
            return Err(bad(format!(
                "its plan is for sandbox \"{}\" generation {}, its credential for sandbox \"{}\" generation {}",
                relay.sandbox_id,
                relay.generation,
                b.credential.sandbox_id,
                b.credential.generation
            )));
        }
        Ok(b)
    }
}

fn say(line: &str) {
    eprintln!("openshell-sandbox: {line}");
}

/// Runs the start described in the module docs from the bootstrap at
/// `path`; returns the exit status for this process.
pub fn run(path: &Path, grace: Duration) -> Result<u8, StandaloneError> {
    let bootstrap = Bootstrap::take(path)?;
    let plan = bootstrap.plan;
    let Some(relay) = plan.relay.clone() else {
        return Err(StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why: "its plan has no relay".into(),
        });
    };
    let is_init = pid1::become_init().map_err(LaunchError::from)?;
    let (mut pending, writable) = launch::start(&plan)?;
    let workload = pending.pid();
    let _ = enforcer::signals::set_own_group(workload);
    let Some(listener) = pending.take_listener() else {
        return Err(LaunchError::Link(enforcer::Errno(libc::EPROTO)).into());
    };
    let end = SandboxEnd::new(&bootstrap.credential).map_err(|e| attach_error(&e))?;
    let (handle, _relaying) = brokering::relay_thread()?;
    let port = handle
        .block_on(tokio::net::TcpListener::bind(bootstrap.listen))
        .map_err(|e| attach_error(&format!("cannot listen on {}: {e}", bootstrap.listen)))?;
    let at = port.local_addr().map_err(|e| attach_error(&e))?;
    say(&format!(
        "listening on {at} for the supervisor of sandbox \"{}\" generation {}",
        relay.sandbox_id, relay.generation
    ));
    let binding = bootstrap.credential.binding();
    let digest = relay.bundle_digest.clone();
    let supervisor = handle
        .block_on(handle.spawn(attach_first(port, end, binding, digest)))
        .map_err(|e| attach_error(&e))??;
    brokering::serve_calls(
        &relay,
        supervisor.clone(),
        &handle,
        listener,
        writable,
        plan.user.as_ref(),
    )?;
    let lost = Arc::new(AtomicBool::new(false));
    let on_loss = Arc::clone(&lost);
    handle.spawn(async move {
        supervisor.closed().await;
        on_loss.store(true, Ordering::SeqCst);
        say("the channel to the supervisor dropped: every workload process is killed");
        let _ = enforcer::signals::signal_group(workload, libc::SIGKILL);
        enforcer::kill_descendants();
    });
    if let Err(e) = pending.start() {
        return Err(LaunchError::from(e).into());
    }
    say(&format!("workload {workload} started"));
    let status = pid1::supervise(workload, is_init, grace).map_err(LaunchError::from)?;
    if !is_init {
        enforcer::kill_descendants();
    }
    if lost.load(Ordering::SeqCst) {
        return Ok(EXIT_SUPERVISOR_LOST);
    }
    say(&format!("the workload ended: {status:?}"));
    Ok(exit_code(status))
}

fn attach_error(e: &dyn std::fmt::Display) -> StandaloneError {
    StandaloneError::Attach(AttachError::new(e.to_string()))
}

/// The workload's status as this process's exit code.
fn exit_code(status: ExitStatus) -> u8 {
    u8::try_from(status.code()).unwrap_or(u8::MAX)
}

/// Peers in the middle of a handshake at once; more wait to be accepted.
const HANDSHAKES: usize = 64;

/// Accepts peers on `port` until one is a supervisor of this generation
/// that completes the greeting; refuses every other, and from then on
/// every peer, each with a line saying why. Handshakes run side by side,
/// so a peer that stalls its own delays no other.
async fn attach_first(
    port: tokio::net::TcpListener,
    end: SandboxEnd,
    binding: sandbox_protocol::Binding,
    digest: String,
) -> Result<Supervisor, AttachError> {
    let (won, first) = tokio::sync::oneshot::channel();
    let won = Arc::new(std::sync::Mutex::new(Some(won)));
    let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let (tcp, peer) = match port.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    say(&format!("cannot accept a connection: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let taken = won.lock().map_or(true, |w| w.is_none());
            if taken {
                drop(tcp);
                say(&format!("refused {peer}: a supervisor is attached"));
                continue;
            }
            let (end, binding, digest, won) = (
                end.clone(),
                binding.clone(),
                digest.clone(),
                Arc::clone(&won),
            );
            tokio::spawn(async move {
                let _slot = slot;
                let tls = match end.handshake(tcp).await {
                    Ok(tls) => tls,
                    Err(e) => return say(&format!("refused {peer}: {e}")),
                };
                match Supervisor::attach(tls, binding, digest).await {
                    Ok(supervisor) => {
                        let winner = won.lock().ok().and_then(|mut w| w.take());
                        match winner {
                            Some(w) => {
                                say(&format!("the supervisor at {peer} attached"));
                                let _ = w.send(supervisor);
                            }
                            None => say(&format!("refused {peer}: a supervisor is attached")),
                        }
                    }
                    Err(e) => say(&format!("refused {peer}: the greeting failed: {e}")),
                }
            });
        }
    });
    first
        .await
        .map_err(|_| AttachError::new("the listener stopped before a supervisor attached"))
}
