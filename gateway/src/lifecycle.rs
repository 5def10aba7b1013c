//! Sandboxes the gateway runs through a [`Driver`]: create, stop, start,
//! delete. Each is a phase change written to the database before the
//! driver acts (`ready` → `stopping`) and one written after
//! (`stopping` → `stopped`, or back to `ready` when the stop failed), both
//! compare-and-swap with an audit row. While the driver acts the row
//! carries a lease that this process renews; a transition whose lease ran
//! out (its gateway died) is taken over by any gateway on the database,
//! which acts again (driver calls are idempotent) and commits or rolls
//! back. Tokens change only in the commit: a stop that fails leaves the
//! running sandbox's session working.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::driver::{Driver, Drivers, Launch, RunSpec, SandboxSettings};
use crate::store::{
    AuditEntry, Lease, NewManaged, Phase, SandboxRow, SessionRow, Store, StoreError, Tokens,
    Transition,
};
use crate::wake::{self, Wakeups};

/// Who the gateway's own phase changes are recorded as.
const GATEWAY: &str = "gateway";

/// Why an operation was not begun, or how it ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LifecycleError {
    /// The request names something no driver could run.
    #[error("{0}")]
    Invalid(String),
    /// The sandbox is not in a phase the operation starts from.
    #[error("{0}")]
    Phase(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How an operation begun here ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The phase it aimed at (or the sandbox is gone, for a delete).
    Done,
    /// The driver failed; the sandbox is back where it was (or `failed`),
    /// `reason` says why.
    RolledBack(String),
    /// Another gateway took the transition over, or the database did not
    /// take the commit; the row says where it stands.
    Lost(String),
}

/// What a driver is to do for a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Start a generation (`provisioning`, `starting`).
    Up,
    Stop,
    Delete,
}

impl Act {
    fn of(phase: Phase) -> Option<Act> {
        match phase {
            Phase::Provisioning | Phase::Starting => Some(Act::Up),
            Phase::Stopping => Some(Act::Stop),
            Phase::Deleting => Some(Act::Delete),
            Phase::Ready | Phase::Stopped | Phase::Failed => None,
        }
    }
}

/// A transition this process holds: what it read when it took the lease.
#[derive(Debug, Clone)]
struct Held {
    id: String,
    policy: String,
    spec: RunSpec,
    phase: Phase,
    generation: i64,
    prior: Option<Phase>,
    /// The session token (and its expiry) of a generation being started
    /// here; `None` when the transition was taken over (the driver has it
    /// already).
    session: Option<(String, i64)>,
}

/// The lifecycle of one gateway process.
pub(crate) struct Lifecycle {
    store: Arc<dyn Store>,
    drivers: Drivers,
    wakeups: Arc<Wakeups>,
    /// This process, as lease holder.
    owner: String,
    lease: Duration,
    session_ttl: Duration,
    tasks: Mutex<JoinSet<()>>,
}

fn entry(actor: &str, action: &str, id: &str, detail: serde_json::Value) -> AuditEntry {
    AuditEntry {
        at: crate::clock::now(),
        actor: actor.to_owned(),
        action: action.to_owned(),
        subject: format!("sandbox:{id}"),
        detail,
    }
}

/// A new session token of `generation`, living `ttl`: the token, and
/// the row the store keeps (its hash).
pub(crate) fn session_token(generation: i64, ttl: Duration) -> (String, SessionRow) {
    let token = crate::dir::new_token();
    let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let row = SessionRow {
        hash: crate::clock::token_hash(&token),
        generation,
        expires_at: crate::clock::now().saturating_add(secs),
    };
    (token, row)
}

impl Lifecycle {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        settings: SandboxSettings,
        wakeups: Arc<Wakeups>,
    ) -> Arc<Self> {
        let token = crate::dir::new_token();
        Arc::new(Self {
            store,
            drivers: settings.drivers,
            wakeups,
            owner: format!(
                "gateway-{}-{}",
                std::process::id(),
                token.get(4..16).unwrap_or_default()
            ),
            lease: settings.lease.max(Duration::from_secs(1)),
            session_ttl: settings.session_ttl.max(Duration::from_secs(1)),
            tasks: Mutex::default(),
        })
    }

    /// How long a session token lives.
    pub(crate) fn session_ttl(&self) -> Duration {
        self.session_ttl
    }

    fn driver(&self, name: &str) -> Result<&Arc<dyn Driver>, LifecycleError> {
        self.drivers.get(name).ok_or_else(|| {
            LifecycleError::Invalid(format!(
                "this gateway has no driver `{name}`; it runs sandboxes with: {}",
                self.drivers.names()
            ))
        })
    }

    /// The sandbox's driver, if it is of the sandbox's place: only there
    /// can it act on the sandbox.
    fn here(&self, s: &SandboxRow, spec: &RunSpec) -> Result<&Arc<dyn Driver>, LifecycleError> {
        let driver = self.driver(&spec.driver)?;
        let place = driver.place();
        match &s.place {
            Some(p) if *p != place => Err(LifecycleError::Phase(format!(
                "sandbox `{}` runs at `{p}`; this gateway's `{}` driver runs sandboxes at `{place}`: ask the gateway there",
                s.id, spec.driver
            ))),
            _ => Ok(driver),
        }
    }

    fn lease_until(&self) -> i64 {
        let secs = i64::try_from(self.lease.as_secs()).unwrap_or(i64::MAX);
        crate::clock::now().saturating_add(secs)
    }

    fn new_lease(&self) -> Lease {
        Lease {
            owner: self.owner.clone(),
            until: self.lease_until(),
        }
    }

    /// Stores the sandbox in `provisioning` and starts its first generation.
    pub(crate) async fn create(
        self: &Arc<Self>,
        id: &str,
        policy: &str,
        spec: RunSpec,
        actor: &str,
    ) -> Result<oneshot::Receiver<Outcome>, LifecycleError> {
        spec.validate().map_err(LifecycleError::Invalid)?;
        let driver = self.driver(&spec.driver)?;
        driver.check(&spec).map_err(LifecycleError::Invalid)?;
        let place = driver.place();
        let (token, session) = session_token(1, self.session_ttl);
        let expires_at = session.expires_at;
        let detail = json!({ "policy": policy, "run": spec, "generation": 1 });
        self.store
            .create_managed(
                NewManaged {
                    id: id.to_owned(),
                    policy: policy.to_owned(),
                    spec: spec.clone(),
                    place,
                    session,
                    lease: self.new_lease(),
                    now: crate::clock::now(),
                },
                entry(actor, "sandbox-create", id, detail),
            )
            .await?;
        Ok(self.spawn(Held {
            id: id.to_owned(),
            policy: policy.to_owned(),
            spec,
            phase: Phase::Provisioning,
            generation: 1,
            prior: None,
            session: Some((token, expires_at)),
        }))
    }

    /// `ready` → `stopping`, then the driver stops it.
    pub(crate) async fn stop(
        self: &Arc<Self>,
        s: &SandboxRow,
        actor: &str,
    ) -> Result<oneshot::Receiver<Outcome>, LifecycleError> {
        self.begin(s, &[Phase::Ready], Phase::Stopping, false, actor, "stop")
            .await
    }

    /// `stopped` or `failed` → `starting` a new generation with a new
    /// session token.
    pub(crate) async fn start(
        self: &Arc<Self>,
        s: &SandboxRow,
        actor: &str,
    ) -> Result<oneshot::Receiver<Outcome>, LifecycleError> {
        self.begin(
            s,
            &[Phase::Stopped, Phase::Failed],
            Phase::Starting,
            true,
            actor,
            "start",
        )
        .await
    }

    /// `ready`, `stopped` or `failed` → `deleting`; the sandbox is gone
    /// once the driver removed it.
    pub(crate) async fn delete(
        self: &Arc<Self>,
        s: &SandboxRow,
        actor: &str,
    ) -> Result<oneshot::Receiver<Outcome>, LifecycleError> {
        self.begin(
            s,
            &[Phase::Ready, Phase::Stopped, Phase::Failed],
            Phase::Deleting,
            false,
            actor,
            "delete",
        )
        .await
    }

    async fn begin(
        self: &Arc<Self>,
        s: &SandboxRow,
        from: &[Phase],
        to: Phase,
        next_generation: bool,
        actor: &str,
        verb: &str,
    ) -> Result<oneshot::Receiver<Outcome>, LifecycleError> {
        let (Some(phase), Some(spec)) = (s.phase, s.spec.clone()) else {
            return Err(LifecycleError::Phase(format!(
                "sandbox `{}` was registered to run elsewhere; the gateway has no driver to {verb} it",
                s.id
            )));
        };
        if !from.contains(&phase) {
            let may = from.iter().map(|p| p.word()).collect::<Vec<_>>().join(", ");
            return Err(LifecycleError::Phase(format!(
                "sandbox `{}` is {}: `{verb}` needs it {may}",
                s.id,
                phase.word()
            )));
        }
        let driver = self.here(s, &spec)?;
        if next_generation {
            driver.check(&spec).map_err(LifecycleError::Invalid)?;
        }
        let generation = s.generation + i64::from(next_generation);
        let (session, tokens) = if next_generation {
            let (token, row) = session_token(generation, self.session_ttl);
            (Some((token, row.expires_at)), Tokens::Replace(row))
        } else {
            (None, Tokens::Keep)
        };
        let detail = json!({ "from": phase.word(), "to": to.word(), "generation": generation });
        self.store
            .transition(
                Transition {
                    id: s.id.clone(),
                    from: phase,
                    generation: s.generation,
                    holder: None,
                    to: Some(to),
                    reason: None,
                    lease: Some(self.new_lease()),
                    next_generation,
                    prior: Some(phase),
                    tokens,
                    now: crate::clock::now(),
                },
                entry(actor, &format!("sandbox-{verb}"), &s.id, detail),
            )
            .await?;
        self.wakeups.wake(&wake::sandbox(&s.id));
        Ok(self.spawn(Held {
            id: s.id.clone(),
            policy: s.policy.clone(),
            spec,
            phase: to,
            generation,
            prior: Some(phase),
            session,
        }))
    }

    fn spawn(self: &Arc<Self>, held: Held) -> oneshot::Receiver<Outcome> {
        let (tx, rx) = oneshot::channel();
        let me = Arc::clone(self);
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let outcome = me.act(held).await;
            let _ = tx.send(outcome);
        });
        rx
    }

    /// The driver's part of a transition this process holds, with the
    /// lease renewed while it runs, then the commit.
    async fn act(&self, held: Held) -> Outcome {
        let Some(act) = Act::of(held.phase) else {
            return Outcome::Lost(format!("{} is not a transition", held.phase.word()));
        };
        let Ok(driver) = self.driver(&held.spec.driver).cloned() else {
            return Outcome::Lost(format!("no driver `{}` in this gateway", held.spec.driver));
        };
        let work = self.drive(&*driver, act, &held);
        let result = tokio::select! {
            r = work => r,
            never = self.keep_lease(&held.id) => match never {},
        };
        let (to, tokens, reason, outcome) = match result {
            Ok(()) => match act {
                Act::Up => (Some(Phase::Ready), Tokens::Keep, None, Outcome::Done),
                Act::Stop => (Some(Phase::Stopped), Tokens::Revoke, None, Outcome::Done),
                Act::Delete => (None, Tokens::Revoke, None, Outcome::Done),
            },
            Err(why) => {
                let (to, tokens) = self.rollback(&*driver, act, &held).await;
                (
                    Some(to),
                    tokens,
                    Some(why.clone()),
                    Outcome::RolledBack(why),
                )
            }
        };
        let detail = json!({
            "from": held.phase.word(),
            "to": to.map_or("deleted", Phase::word),
            "generation": held.generation,
            "reason": reason,
        });
        let commit = self
            .store
            .transition(
                Transition {
                    id: held.id.clone(),
                    from: held.phase,
                    generation: held.generation,
                    holder: Some(self.owner.clone()),
                    to,
                    reason,
                    lease: None,
                    next_generation: false,
                    prior: None,
                    tokens,
                    now: crate::clock::now(),
                },
                entry(GATEWAY, "sandbox-phase", &held.id, detail),
            )
            .await;
        self.wakeups.wake(&wake::sandbox(&held.id));
        match commit {
            Ok(()) => outcome,
            Err(e) => Outcome::Lost(e.to_string()),
        }
    }

    /// What the driver does for `act`; the error is the sandbox's reason.
    async fn drive(&self, driver: &dyn Driver, act: Act, held: &Held) -> Result<(), String> {
        match act {
            Act::Up => match &held.session {
                Some((token, expires_at)) => driver
                    .start(Launch {
                        id: held.id.clone(),
                        generation: held.generation,
                        policy: held.policy.clone(),
                        spec: held.spec.clone(),
                        token: token.clone(),
                        token_expires_at: *expires_at,
                    })
                    .await
                    .map_err(|e| format!("generation {} did not start: {e}", held.generation)),
                // Taken over: the gateway that began it died; whatever it
                // started is kept only if it runs.
                None => match driver.running(&held.id).await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(format!(
                        "the gateway starting generation {} stopped before it was ready",
                        held.generation
                    )),
                    Err(e) => Err(format!(
                        "the gateway starting generation {} stopped, and the driver cannot tell whether it runs: {e}",
                        held.generation
                    )),
                },
            },
            Act::Stop => driver
                .stop(&held.id)
                .await
                .map_err(|e| format!("the stop failed: {e}")),
            Act::Delete => {
                driver
                    .stop(&held.id)
                    .await
                    .map_err(|e| format!("the delete failed to stop it: {e}"))?;
                driver
                    .remove(&held.id)
                    .await
                    .map_err(|e| format!("the delete failed: {e}"))
            }
        }
    }

    /// Where a failed transition goes, and what becomes of the tokens. A
    /// sandbox that may still run keeps its session; one that certainly
    /// does not loses it.
    async fn rollback(&self, driver: &dyn Driver, act: Act, held: &Held) -> (Phase, Tokens) {
        let prior = held.prior.unwrap_or(Phase::Failed);
        match act {
            Act::Up => {
                // Nothing of a failed start may be left running.
                if let Err(e) = driver.stop(&held.id).await {
                    eprintln!(
                        "openshell-gateway: sandbox `{}`: stopping a failed start: {e}",
                        held.id
                    );
                }
                (prior, Tokens::Revoke)
            }
            Act::Stop | Act::Delete => {
                let runs = !matches!(driver.running(&held.id).await, Ok(false));
                match (prior, runs) {
                    (Phase::Ready, true) => (Phase::Ready, Tokens::Keep),
                    (Phase::Ready, false) => (Phase::Failed, Tokens::Revoke),
                    (p, _) => (p, Tokens::Revoke),
                }
            }
        }
    }

    /// Renews the lease until dropped (the transition's work ended).
    async fn keep_lease(&self, id: &str) -> std::convert::Infallible {
        let every = (self.lease / 3).max(Duration::from_millis(300));
        loop {
            tokio::time::sleep(every).await;
            match self
                .store
                .renew_lease(id, &self.owner, self.lease_until())
                .await
            {
                Ok(true) => {}
                Ok(false) => eprintln!(
                    "openshell-gateway: sandbox `{id}`: another gateway took over its transition"
                ),
                Err(e) => eprintln!("openshell-gateway: sandbox `{id}`: renewing the lease: {e}"),
            }
        }
    }

    /// Takes over every transition whose lease ran out, now and then
    /// every half lease, for as long as the process runs, and notices
    /// workloads that ended. On SQLite the first pass takes every
    /// transition: no other process can hold one.
    pub(crate) fn resume(self: &Arc<Self>) {
        let me = Arc::clone(self);
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.spawn(async move {
            let mut first = me.store.one_process();
            loop {
                let now = if first { i64::MAX } else { crate::clock::now() };
                first = false;
                match me.store.stalled(now).await {
                    Ok(rows) => {
                        for row in rows {
                            me.take_over(row).await;
                        }
                    }
                    Err(e) => eprintln!("openshell-gateway: finding stalled sandboxes: {e}"),
                }
                me.notice_ended().await;
                tokio::time::sleep((me.lease / 2).max(Duration::from_millis(500))).await;
            }
        });
    }

    /// A `ready` sandbox whose workload ended on its own is `stopped`: its
    /// session goes, its workspace stays, a start runs it again.
    async fn notice_ended(&self) {
        let Ok(rows) = self.store.sandboxes().await else {
            return;
        };
        for s in rows {
            let Some(spec) = &s.spec else { continue };
            let Ok(driver) = self.here(&s, spec) else {
                continue;
            };
            if s.phase != Some(Phase::Ready) || s.lease_owner.is_some() {
                continue;
            }
            if !matches!(driver.running(&s.id).await, Ok(false)) {
                continue;
            }
            let reason = "the workload ended on its own".to_owned();
            let detail = json!({
                "from": "ready", "to": "stopped", "generation": s.generation, "reason": reason,
            });
            let ended = self
                .store
                .transition(
                    Transition {
                        id: s.id.clone(),
                        from: Phase::Ready,
                        generation: s.generation,
                        holder: None,
                        to: Some(Phase::Stopped),
                        reason: Some(reason),
                        lease: None,
                        next_generation: false,
                        prior: None,
                        tokens: Tokens::Revoke,
                        now: crate::clock::now(),
                    },
                    entry(GATEWAY, "sandbox-phase", &s.id, detail),
                )
                .await;
            match ended {
                Ok(()) => self.wakeups.wake(&wake::sandbox(&s.id)),
                // Stopped, or changed by someone else, meanwhile.
                Err(StoreError::Conflict(_) | StoreError::NotFound(_)) => {}
                Err(e) => eprintln!(
                    "openshell-gateway: sandbox `{}`: recording that its workload ended: {e}",
                    s.id
                ),
            }
        }
    }

    async fn take_over(self: &Arc<Self>, s: SandboxRow) {
        let (Some(phase), Some(spec)) = (s.phase, s.spec.clone()) else {
            return;
        };
        // A gateway without the sandbox's driver, or whose driver runs
        // sandboxes elsewhere, leaves it to one that can act on it.
        if self.here(&s, &spec).is_err() {
            return;
        }
        let detail = json!({
            "phase": phase.word(),
            "generation": s.generation,
            "from_owner": s.lease_owner,
            "lease_until": s.lease_until,
        });
        let claimed = self
            .store
            .transition(
                Transition {
                    id: s.id.clone(),
                    from: phase,
                    generation: s.generation,
                    holder: s.lease_owner.clone(),
                    to: Some(phase),
                    reason: s.reason.clone(),
                    lease: Some(self.new_lease()),
                    next_generation: false,
                    prior: s.prior_phase,
                    tokens: Tokens::Keep,
                    now: crate::clock::now(),
                },
                entry(GATEWAY, "sandbox-takeover", &s.id, detail),
            )
            .await;
        match claimed {
            Ok(()) => {
                // Waiting on the outcome is the resumer's business only.
                let _outcome = self.spawn(Held {
                    id: s.id.clone(),
                    policy: s.policy.clone(),
                    spec,
                    phase,
                    generation: s.generation,
                    prior: s.prior_phase,
                    session: None,
                });
            }
            // Another gateway took it first, or it moved on.
            Err(StoreError::Conflict(_) | StoreError::NotFound(_)) => {}
            Err(e) => eprintln!(
                "openshell-gateway: sandbox `{}`: taking over its transition: {e}",
                s.id
            ),
        }
    }

    /// Stops every transition and the resumer at once, as a process that
    /// dies would: the rows keep their leases.
    pub(crate) fn abort_all(&self) {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .abort_all();
    }
}
