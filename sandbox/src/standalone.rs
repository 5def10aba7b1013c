//! `openshell-sandbox --bootstrap FILE`: started on its own (by a
//! container runtime, as PID 1 of the namespaces it was given) on another
//! host than its supervisor, joined to it by the channel of
//! `sandbox_protocol::channel`.
//!
//! In order:
//!
//! 1. The bootstrap file is read and deleted: it holds the sandbox's
//!    channel key, which the workload must never read. A file that cannot
//!    be deleted stops the start. The preflight ([`crate::preflight`])
//!    runs: a kernel that fails it stops the start too.
//! 2. The workload is forked with the plan's Landlock ruleset and seccomp
//!    filter; it waits for its go before its `exec`.
//! 3. The sandbox listens on the bootstrap's endpoint (a TCP address, or a
//!    Unix socket in a directory its supervisor sees too, for a container
//!    with no network) and takes the first
//!    supervisor of its generation that completes the TLS handshake and
//!    the greeting (the supervisor checks the bundle digest the sandbox
//!    enforces). Every other peer is refused and logged, and every peer
//!    while one is attached.
//! 4. The sandbox sends what the kernel says of the waiting workload
//!    (Landlock, seccomp mode and a live listener, empty capability sets,
//!    `no_new_privs`) and waits for the supervisor's Go.
//! 5. Only then does the workload run, brokered as in a local run.
//! 6. When the channel drops (closed, or silent past the keepalive), every
//!    workload process is frozen ([`crate::freeze`]). A supervisor of the
//!    generation that attaches again within the bootstrap's
//!    `reattach_within` and whose Go follows fresh Evidence resumes it;
//!    otherwise every workload process is killed and the sandbox exits
//!    with [`EXIT_SUPERVISOR_LOST`]: nothing runs unwatched.
//!
//! Every step is a line on standard error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sandbox_protocol::channel::{Credential, Endpoint, Listener, Role, SandboxEnd};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{Evidence, MAX_LINKS};
use serde::{Deserialize, Serialize};

use crate::brokering::{self, AttachError};
use crate::exec::Execs;
use crate::freeze::Freezer;
use crate::launch::{self, LaunchError, Noexec};
use crate::links::NamedBinary;
use crate::pid1;
use crate::plan::{LaunchPlan, PlanUser};
use crate::relay::{Attached, ExecHandler, Supervisor};
use crate::writable::Writable;

/// The bootstrap format written: version 2 lets [`Bootstrap::listen`]
/// name a Unix socket.
pub const BOOTSTRAP_VERSION: u32 = 2;

/// The oldest format still read: version 1 differs only in listening on
/// TCP alone, in the `IP:PORT` form version 2 reads unchanged.
pub const OLDEST_BOOTSTRAP_VERSION: u32 = 1;

/// Exit status when the channel to the supervisor dropped and the
/// workload was killed for it.
pub const EXIT_SUPERVISOR_LOST: u8 = 122;

/// Exit status when the workload ran past its timeout and was ended (as
/// `timeout` uses 124).
pub const EXIT_TIMED_OUT: u8 = 124;

/// What a standalone sandbox starts from.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// [`BOOTSTRAP_VERSION`].
    pub version: u32,
    /// Where to listen for the supervisor: `IP:PORT`, or
    /// `unix:/absolute/path` in a directory the supervisor sees too.
    pub listen: Endpoint,
    /// The sandbox's channel credential for this generation.
    pub credential: Credential,
    /// The launch plan; its relay names the same sandbox and generation as
    /// the credential. Its user and what depends on this host (PID
    /// namespace, capabilities) are settled here at start.
    pub plan: LaunchPlan,
    /// The bundle's `run_as`, resolved against this host's user database.
    #[serde(default)]
    pub run_as: Option<RunAs>,
    /// The proxy's CA, for the workload's trust file.
    #[serde(default)]
    pub trust: Option<Trust>,
    /// Seconds the workload stays frozen after the channel dropped,
    /// waiting for its supervisor to attach again, before it is killed.
    #[serde(default = "default_reattach_within")]
    pub reattach_within: u64,
    /// Seconds the workload may run before it is ended as a `SIGTERM`
    /// would end it; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// [`Bootstrap::reattach_within`] unless the bootstrap says otherwise.
pub const REATTACH_WITHIN: u64 = 30;

fn default_reattach_within() -> u64 {
    REATTACH_WITHIN
}

/// The user and group names the workload runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAs {
    /// The user; `None` keeps the sandbox's.
    pub user: Option<String>,
    /// The group; `None`: the user's primary group.
    pub group: Option<String>,
}

/// Where the workload's trust file goes, and the CA it adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trust {
    /// A directory the sandbox creates (absolute); the plan grants the
    /// workload read access to it and names its `ca-bundle.pem` in the
    /// environment.
    pub dir: PathBuf,
    /// The proxy's CA certificate, PEM.
    pub proxy_ca: String,
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
    /// A standard stream would let the workload send past the broker.
    #[error("{0}")]
    Stdio(String),
    /// The workload could not be prepared.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The listener, the relay or the broker could not start.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// This kernel, here, lacks what the sandbox enforces with.
    #[error("the preflight failed: {0}")]
    Preflight(String),
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
        if !(OLDEST_BOOTSTRAP_VERSION..=BOOTSTRAP_VERSION).contains(&version) {
            return Err(bad(format!(
                "version {version}; this openshell-sandbox reads versions {OLDEST_BOOTSTRAP_VERSION} to {BOOTSTRAP_VERSION}"
            )));
        }
        let b: Self =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a bootstrap: {e}")))?;
        if version < 2 && matches!(b.listen, Endpoint::Unix(_)) {
            return Err(bad(format!(
                "version {version} listens on TCP only, and it names `{}` (a Unix socket is version 2)",
                b.listen
            )));
        }
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
    crate::stdio::check_inherited().map_err(StandaloneError::Stdio)?;
    let bootstrap = Bootstrap::take(path)?;
    // Tried before anything else: a node that cannot enforce never starts
    // the workload.
    let preflight = crate::preflight::run();
    if !preflight.ok {
        return Err(StandaloneError::Preflight(preflight.failures.join("; ")));
    }
    say(&format!(
        "preflight: Landlock ABI {}, seccomp listener, socket installation and errno answers work",
        preflight.landlock_abi
    ));
    let plan = bootstrap.plan;
    let Some(relay) = plan.relay.clone() else {
        return Err(StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why: "its plan has no relay".into(),
        });
    };
    let is_init = pid1::become_init().map_err(LaunchError::from)?;
    let (plan, noexec) = settle(plan, bootstrap.run_as.as_ref(), is_init).map_err(|why| {
        StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why,
        }
    })?;
    if let Some(trust) = &bootstrap.trust {
        write_trust(trust).map_err(|why| StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why,
        })?;
    }
    let launch::Started {
        mut pending,
        writable,
        landlock_abi,
        landlock_on,
        noexec_missing,
    } = launch::start(&plan, noexec, launch::Own::default())?;
    if noexec_missing {
        say(
            "no privilege to make a mount namespace (CAP_SYS_ADMIN): the trees the workload may write are not mounted noexec, so code it writes there can be mapped executable (see docs/threat-model.md)",
        );
    }
    let workload = pending.pid();
    let _ = enforcer::signals::set_own_group(workload);
    let Some(listener) = pending.take_listener() else {
        return Err(LaunchError::Link(enforcer::Errno(libc::EPROTO)).into());
    };
    let (freezer, how) = Freezer::for_workload(workload);
    say(&how);
    let freezer = Arc::new(freezer);
    // Resolved once, before the workload runs: what it does to the
    // filesystem later cannot lend a name to another file.
    let links = reported_links(&relay.binaries, &writable);
    // Kept to read the listener's state for every Evidence; the broker
    // serves the other.
    let watched = listener.try_clone().map_err(|e| attach_error(&e))?;
    let facts = move || {
        evidence(workload, &watched, landlock_abi, landlock_on, links.clone())
            .map_err(|e| format!("cannot read the workload's state: {e}"))
    };
    let end = SandboxEnd::new(&bootstrap.credential).map_err(|e| attach_error(&e))?;
    let (handle, relaying) = brokering::relay_thread()?;
    loopback_up();
    let port = handle
        .block_on(Listener::bind(&bootstrap.listen))
        .map_err(|e| attach_error(&format!("cannot listen on {}: {e}", bootstrap.listen)))?;
    let at = port.local().map_err(|e| attach_error(&e))?;
    say(&format!(
        "listening on {at} for the supervisor of sandbox \"{}\" generation {}",
        relay.sandbox_id, relay.generation
    ));
    let gate = Gate::default();
    let execs: Arc<std::sync::OnceLock<Arc<Execs>>> = Arc::default();
    let mut attachments = {
        let _entered = handle.enter();
        accept(
            port,
            end,
            bootstrap.credential.binding(),
            relay.bundle_digest.clone(),
            gate.clone(),
            Execs::handler(Arc::clone(&execs)),
        )
    };
    let first = handle
        .block_on(attachments.recv())
        .ok_or_else(|| attach_error(&"the listener stopped before a supervisor attached"))?;
    let evidence = facts().map_err(|e| attach_error(&e))?;
    if let Err(e) = handle.block_on(first.evidence(evidence)) {
        // Dropping `pending` kills the workload before its exec.
        return Err(attach_error(&format!("the workload was not let run: {e}")));
    }
    say("the supervisor accepted the evidence");
    let attached = Attached::new(first);
    let broker = brokering::serve_calls(
        &relay,
        &attached,
        &handle,
        listener,
        writable,
        plan.user.as_ref(),
    )?;
    let watched = pid1::Watched::default();
    let _ = execs.set(Execs::new(plan.clone(), noexec, broker, watched.clone()));
    let state = WorkloadState {
        freezer: Arc::clone(&freezer),
        ending: Arc::default(),
        lost: Arc::default(),
    };
    handle.spawn(watch(
        attached.clone(),
        attachments,
        gate,
        Duration::from_secs(bootstrap.reattach_within),
        facts,
        state.clone(),
    ));
    if let Err(e) = pending.start() {
        return Err(LaunchError::from(e).into());
    }
    say(&format!("workload {workload} started"));
    let deadline = bootstrap
        .timeout_seconds
        .map(|s| std::time::Instant::now() + Duration::from_secs(s));
    let status =
        pid1::supervise(workload, is_init, grace, &watched, deadline).map_err(LaunchError::from)?;
    let timed_out = deadline.is_some_and(|d| std::time::Instant::now() >= d);
    state.ending.store(true, Ordering::SeqCst);
    if !is_init {
        enforcer::kill_descendants();
    }
    freezer.release();
    if let Some(trust) = &bootstrap.trust {
        let _ = std::fs::remove_dir_all(&trust.dir);
    }
    if state.lost.load(Ordering::SeqCst) {
        return Ok(EXIT_SUPERVISOR_LOST);
    }
    let code = if timed_out {
        say(&format!(
            "the workload ran past its timeout of {} s and was ended",
            bootstrap.timeout_seconds.unwrap_or_default()
        ));
        EXIT_TIMED_OUT
    } else {
        pid1::exit_code(status)
    };
    say(&format!("the workload ended with status {code}"));
    if let Err(e) = relaying.report_ended(&attached, code) {
        say(&format!("the supervisor was not told: {e}"));
    }
    Ok(code)
}

/// Watches the attachment in use: when its channel drops, every workload
/// process is frozen; a supervisor of the generation that attaches again
/// within `window` (and whose Go follows fresh Evidence) is put in use and
/// the workload resumed; otherwise every workload process is killed.
async fn watch(
    attached: Attached,
    mut attachments: tokio::sync::mpsc::Receiver<Supervisor>,
    gate: Gate,
    window: Duration,
    facts: impl Fn() -> Result<Evidence, String> + Send + 'static,
    state: WorkloadState,
) {
    let WorkloadState {
        freezer,
        ending,
        lost,
    } = state;
    loop {
        attached.current().closed().await;
        if ending.load(Ordering::SeqCst) {
            return;
        }
        let dropped = std::time::Instant::now();
        gate.open();
        let frozen = tokio::task::spawn_blocking({
            let freezer = Arc::clone(&freezer);
            move || freezer.freeze()
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match frozen {
            Ok(n) => say(&format!(
                "the channel to the supervisor dropped: {n} workload processes frozen in {:.1} ms; killed unless it reattaches within {window:?}",
                dropped.elapsed().as_secs_f64() * 1000.0
            )),
            Err(why) => {
                say(&format!(
                    "the channel to the supervisor dropped and the workload could not be frozen ({why}): every workload process is killed"
                ));
                return kill(&freezer, &lost);
            }
        }
        let resumed = tokio::time::timeout(window, async {
            while let Some(next) = attachments.recv().await {
                let evidence = match facts() {
                    Ok(e) => e,
                    Err(why) => {
                        say(&why);
                        return false;
                    }
                };
                match next.evidence(evidence).await {
                    Ok(()) => {
                        attached.replace(next);
                        return true;
                    }
                    Err(e) => {
                        say(&format!(
                            "the reattached supervisor refused the evidence: {e}"
                        ));
                        gate.open();
                    }
                }
            }
            false
        })
        .await;
        if resumed == Ok(true) {
            freezer.thaw();
            say("the supervisor reattached: the workload resumed");
            continue;
        }
        say(&format!(
            "no supervisor reattached within {window:?}: every workload process is killed"
        ));
        return kill(&freezer, &lost);
    }
}

/// How the workload is frozen, and what the init's end learns of the
/// watch: the workload is ending (a dropped channel then freezes
/// nothing), or was killed for want of a supervisor.
#[derive(Debug, Clone)]
struct WorkloadState {
    freezer: Arc<Freezer>,
    ending: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
}

/// Kills every workload process, saying so to the init's end.
fn kill(freezer: &Freezer, lost: &AtomicBool) {
    lost.store(true, Ordering::SeqCst);
    freezer.kill();
}

/// Whether a supervisor is attached: while one is, every peer is refused.
#[derive(Debug, Clone, Default)]
struct Gate(Arc<AtomicBool>);

impl Gate {
    /// Takes the one place, if it is free.
    fn take(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn taken(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Frees the place: the channel dropped, or the peer that took it
    /// failed.
    fn open(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The binaries `names` that are links on this host, as the Evidence
/// reports them (within [`MAX_LINKS`] bytes), each said.
fn reported_links(names: &[NamedBinary], writable: &Writable) -> Vec<(String, String)> {
    let resolved = crate::links::resolve(names, Path::new("/"), Some(writable));
    for line in &resolved.lines {
        say(line);
    }
    let mut bytes = 0;
    let mut links = Vec::new();
    for (name, target) in resolved.links {
        bytes += name.len() + target.len();
        if bytes > MAX_LINKS {
            say(&format!(
                "binary `{name}`: not expanded, the links reported hold at most {MAX_LINKS} bytes"
            ));
            continue;
        }
        links.push((name, target));
    }
    links
}

/// What the kernel says of `workload`, which has applied everything and
/// waits before its exec, and of the listener this process holds.
fn evidence(
    workload: u32,
    listener: &std::os::fd::OwnedFd,
    landlock_abi: u8,
    landlock_on: bool,
    links: Vec<(String, String)>,
) -> std::io::Result<Evidence> {
    let listener_live = matches!(
        enforcer::wait_listener(listener, Some(Duration::ZERO)),
        Ok(enforcer::ListenerEvent::TimedOut | enforcer::ListenerEvent::Ready)
    );
    let (uid, euid) = enforcer::real_and_effective_uid(workload)?;
    Ok(Evidence {
        landlock_abi: u32::from(landlock_abi),
        landlock_enforced: landlock_on,
        seccomp_mode: enforcer::seccomp_mode(workload)?,
        listener_live,
        cap_effective: enforcer::caps(workload, "CapEff")?,
        cap_permitted: enforcer::caps(workload, "CapPrm")?,
        cap_ambient: enforcer::caps(workload, "CapAmb")?,
        cap_bounding: enforcer::caps(workload, "CapBnd")?,
        no_new_privs: enforcer::no_new_privs(workload)?,
        uid,
        euid,
        links,
    })
}

const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;
const CAP_SETPCAP: u32 = 8;
const CAP_SYS_ADMIN: u32 = 21;

/// The plan as this host has it: the PID namespace the sandbox was given
/// (its own when it is PID 1), the capability sets it may empty, and the
/// workload's user resolved here; and whether the workload's child can
/// mount its `noexec` trees.
fn settle(
    mut plan: LaunchPlan,
    run_as: Option<&RunAs>,
    is_init: bool,
) -> Result<(LaunchPlan, Noexec), String> {
    plan.private_proc = is_init;
    plan.shared_pid_namespace = !is_init;
    let caps = enforcer::effective_caps(std::process::id()).unwrap_or(0);
    let has = |cap: u32| caps & (1 << cap) != 0;
    plan.drop_bounding = has(CAP_SETPCAP);
    let own = enforcer::own_ids();
    let (uid, gid) = match run_as {
        None
        | Some(RunAs {
            user: None,
            group: None,
        }) => own,
        Some(RunAs { user, group }) => {
            let (uid, mut gid) = match user {
                Some(u) => {
                    let ids = enforcer::resolve_user(u).map_err(|e| format!("run_as: {e}"))?;
                    (ids.uid, ids.gid)
                }
                None => own,
            };
            if let Some(g) = group {
                gid = enforcer::resolve_group(g).map_err(|e| format!("run_as: {e}"))?;
            }
            (uid, gid)
        }
    };
    if (uid, gid) != own && !(has(CAP_SETUID) && has(CAP_SETGID)) {
        return Err(format!(
            "the bundle runs the workload as uid {uid} gid {gid}, and this sandbox (uid {} gid {}) may not change user: start it as that user, or with CAP_SETUID and CAP_SETGID",
            own.0, own.1
        ));
    }
    plan.user = ((uid, gid) != own).then(|| PlanUser {
        uid,
        gid,
        groups: vec![gid],
    });
    plan.root_workload = uid == 0;
    let noexec = if has(CAP_SYS_ADMIN) {
        Noexec::Here
    } else {
        Noexec::Unable
    };
    Ok((plan, noexec))
}

/// Creates the trust directory (it must not exist yet) and its file.
fn write_trust(trust: &Trust) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt as _;
    if !trust.dir.is_absolute() {
        return Err(format!(
            "the trust directory `{}` is not absolute",
            trust.dir.display()
        ));
    }
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&trust.dir)
        .and_then(|()| {
            std::fs::set_permissions(
                &trust.dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
        })
        .map_err(|e| {
            format!(
                "cannot create the trust directory `{}`: {e}",
                trust.dir.display()
            )
        })?;
    crate::trust::write(&trust.dir, &trust.proxy_ca)
        .map(drop)
        .map_err(|e| {
            format!(
                "cannot write the trust file in `{}`: {e}",
                trust.dir.display()
            )
        })
}

/// Sets this namespace's loopback up if it is down (a namespace made with
/// no network at all): the workload's relayed sockets and the DNS stub
/// live on it. A container runtime's own (`--network=none`) is up.
fn loopback_up() {
    if enforcer::loopback_is_up().unwrap_or(true) {
        return;
    }
    match enforcer::bring_up_loopback() {
        Ok(()) => say("loopback was down: set it up for the workload's relayed connections"),
        Err(e) => say(&format!(
            "loopback is down and cannot be set up ({e}): every relayed connect of the workload fails"
        )),
    }
}

fn attach_error(e: &dyn std::fmt::Display) -> StandaloneError {
    StandaloneError::Attach(AttachError::new(e.to_string()))
}

/// Peers in the middle of a handshake at once; more wait to be accepted.
const HANDSHAKES: usize = 64;

/// Accepts peers on `port` for the whole run: each supervisor of this
/// generation that completes the TLS handshake and the greeting while
/// none is attached is handed over; every other peer is refused with a
/// line saying why. Handshakes run side by side, so a peer that stalls
/// its own delays no other.
fn accept(
    port: Listener,
    end: SandboxEnd,
    binding: sandbox_protocol::Binding,
    digest: String,
    gate: Gate,
    exec: ExecHandler,
) -> tokio::sync::mpsc::Receiver<Supervisor> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let (io, peer) = match port.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    say(&format!("cannot accept a connection: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if gate.taken() {
                drop(io);
                say(&format!("refused {peer}: a supervisor is attached"));
                continue;
            }
            let (end, binding, digest, gate, tx, exec) = (
                end.clone(),
                binding.clone(),
                digest.clone(),
                gate.clone(),
                tx.clone(),
                Arc::clone(&exec),
            );
            tokio::spawn(async move {
                let _slot = slot;
                let tls = match end.handshake(io).await {
                    Ok(tls) => tls,
                    Err(e) => return say(&format!("refused {peer}: {e}")),
                };
                let supervisor = match Supervisor::attach(tls, Link::Network, binding, digest).await
                {
                    Ok(supervisor) => supervisor,
                    Err(e) => return say(&format!("refused {peer}: the greeting failed: {e}")),
                };
                supervisor.on_exec(exec);
                if !gate.take() {
                    return say(&format!("refused {peer}: a supervisor is attached"));
                }
                say(&format!("the supervisor ({peer}) attached"));
                if tx.send(supervisor).await.is_err() {
                    gate.open();
                }
            });
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use sandbox_protocol::Binding;

    use super::*;
    use crate::plan::{PLAN_VERSION, RelayPlan};

    fn bootstrap(listen: &str) -> Bootstrap {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.policy");
        std::fs::write(&path, "policy \"t\" {\n  fs read /usr\n}\n").unwrap();
        let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
        let bundle = bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let binding = Binding {
            sandbox_id: "sb".into(),
            generation: 3,
        };
        let (credential, _) = sandbox_protocol::channel::issue(&binding).unwrap();
        Bootstrap {
            version: BOOTSTRAP_VERSION,
            listen: listen.parse().unwrap(),
            credential,
            plan: LaunchPlan {
                version: PLAN_VERSION,
                landlock: bundle.enforcement.landlock,
                deny: bundle.enforcement.seccomp.deny,
                notify: bundle.enforcement.seccomp.notify,
                workdir: b"/".to_vec(),
                read_only: Vec::new(),
                private_proc: false,
                root_workload: false,
                shared_pid_namespace: true,
                drop_bounding: false,
                user: None,
                program: b"/bin/true".to_vec(),
                argv: vec![b"true".to_vec()],
                envp: Vec::new(),
                relay: Some(RelayPlan {
                    sandbox_id: binding.sandbox_id,
                    generation: binding.generation,
                    bundle_digest: bundle.digest,
                    hash_binaries: false,
                    own_network: false,
                    binaries: Vec::new(),
                }),
            },
            run_as: None,
            trust: None,
            reattach_within: REATTACH_WITHIN,
            timeout_seconds: None,
        }
    }

    /// `b` written with `version`, then taken back.
    fn taken(b: &Bootstrap, version: u32) -> Result<Bootstrap, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bootstrap.json");
        let mut json: serde_json::Value = serde_json::from_slice(&b.to_bytes()).unwrap();
        json["version"] = version.into();
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        let got = Bootstrap::take(&path).map_err(|e| e.to_string());
        assert!(!path.exists(), "the bootstrap was left on disk");
        got
    }

    /// Version 1 (TCP only, as written before Unix sockets) still reads;
    /// a Unix socket needs version 2; any other version is refused by
    /// name.
    #[test]
    fn a_bootstrap_of_version_1_or_2_is_read_and_a_unix_socket_needs_2() {
        let tcp = bootstrap("10.0.0.7:7443");
        let unix = bootstrap("unix:/run/openshell/sandbox.sock");
        assert_eq!(taken(&tcp, 1).unwrap().listen, tcp.listen);
        assert_eq!(taken(&tcp, 2).unwrap().listen, tcp.listen);
        assert_eq!(taken(&unix, 2).unwrap().listen, unix.listen);
        let err = taken(&unix, 1).unwrap_err();
        assert!(
            err.contains(
                "version 1 listens on TCP only, and it names `unix:/run/openshell/sandbox.sock` (a Unix socket is version 2)"
            ),
            "{err}"
        );
        for version in [0, 3] {
            let err = taken(&tcp, version).unwrap_err();
            assert!(
                err.contains(&format!(
                    "version {version}; this openshell-sandbox reads versions 1 to 2"
                )),
                "{err}"
            );
        }
        let mut json: serde_json::Value = serde_json::from_slice(&tcp.to_bytes()).unwrap();
        json["listen"] = "unix:relative.sock".into();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bootstrap.json");
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        let err = Bootstrap::take(&path).unwrap_err().to_string();
        assert!(
            err.contains("`unix:` needs an absolute path, not `relative.sock`"),
            "{err}"
        );
    }
}
