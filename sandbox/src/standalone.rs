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
//!    filter; it waits for its go before its `exec`. A bootstrap made by
//!    a kit (`sandbox_protocol::channel::kit`) has no plan: the sandbox
//!    then listens first, its Hello says no digest, and the first
//!    supervisor's Welcome brings the launch, refused (and nothing
//!    forked) unless its plan is for this sandbox and generation; a
//!    supervisor that attaches later is greeted with the launched
//!    bundle's digest.
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

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sandbox_protocol::channel::{Credential, Listener, SandboxEnd};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{Evidence, MAX_LINKS};

use crate::brokering::{self, AttachError, Relaying};
use crate::exec::Execs;
use crate::freeze::Freezer;
use crate::launch::{self, LaunchError, Noexec};
use crate::links::NamedBinary;
use crate::pid1;
use crate::plan::{LaunchPlan, PlanUser, RelayPlan};
use crate::relay::{Attached, ExecHandler, RelayError, Supervisor};
use crate::writable::Writable;

mod bootstrap;

use bootstrap::Channel;
pub use bootstrap::{
    BOOTSTRAP_VERSION, Bootstrap, Launch, OLDEST_BOOTSTRAP_VERSION, REATTACH_WITHIN, RunAs, Trust,
};

/// Exit status when the channel to the supervisor dropped and the
/// workload was killed for it.
pub const EXIT_SUPERVISOR_LOST: u8 = 122;

/// Exit status when the workload ran past its timeout and was ended (as
/// `timeout` uses 124).
pub const EXIT_TIMED_OUT: u8 = 124;

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
    /// The launch the first supervisor's `Welcome` carried (to a sandbox
    /// started from a kit) is malformed, for another sandbox or
    /// generation, or cannot run here.
    #[error("the launch in the supervisor's Welcome: {0}")]
    Welcome(String),
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

fn say(line: &str) {
    eprintln!("openshell-sandbox: {line}");
}

/// Runs the start described in the module docs from the bootstrap at
/// `path`; returns the exit status for this process.
pub fn run(path: &Path, grace: Duration) -> Result<u8, StandaloneError> {
    crate::stdio::check_inherited().map_err(StandaloneError::Stdio)?;
    let (channel, launch) = Bootstrap::take(path)?.into_parts();
    preflight()?;
    let is_init = pid1::become_init().map_err(LaunchError::from)?;
    let (workload, mut listening, first) = match launch {
        Some(launch) => {
            let origin = Origin::File(path);
            let workload = Workload::start(launch, is_init, &origin)?;
            let mut listening =
                Listening::open(&channel, Some(workload.relay.bundle_digest.clone()))?;
            let first = listening.first()?;
            (workload, listening, first)
        }
        None => {
            let mut listening = Listening::open(&channel, None)?;
            let first = listening.first()?;
            let launch = launched(&first, &channel.credential)?;
            let _ = listening.digest.set(launch_digest(&launch)?);
            let workload = Workload::start(launch, is_init, &Origin::Welcome)?;
            (workload, listening, first)
        }
    };
    let reattach_within = Duration::from_secs(channel.reattach_within);
    supervised(workload, &mut listening, first, reattach_within, grace)
}

/// Tried before anything else: a node that cannot enforce never starts
/// the workload.
fn preflight() -> Result<(), StandaloneError> {
    let preflight = crate::preflight::run();
    if !preflight.ok {
        return Err(StandaloneError::Preflight(preflight.failures.join("; ")));
    }
    say(&format!(
        "preflight: Landlock ABI {}, seccomp listener, socket installation and errno answers work",
        preflight.landlock_abi
    ));
    Ok(())
}

/// The launch the first supervisor's Welcome carried, for this sandbox's
/// own sandbox id and generation.
fn launched(first: &Supervisor, credential: &Credential) -> Result<Launch, StandaloneError> {
    let bytes = first
        .launch()
        .ok_or_else(|| StandaloneError::Welcome("it carries no launch".into()))?;
    let launch = Launch::from_welcome(bytes, credential).map_err(StandaloneError::Welcome)?;
    say("the supervisor's Welcome carried the launch");
    Ok(launch)
}

/// The bundle digest a supervisor that attaches later is greeted with.
fn launch_digest(launch: &Launch) -> Result<String, StandaloneError> {
    launch
        .relay()
        .map(|r| r.bundle_digest.clone())
        .ok_or_else(|| StandaloneError::Welcome("its plan has no relay".into()))
}

/// Where the launch came from, for what is said when it cannot run.
enum Origin<'a> {
    File(&'a Path),
    Welcome,
}

impl Origin<'_> {
    fn refused(&self, why: String) -> StandaloneError {
        match self {
            Self::File(path) => StandaloneError::Bootstrap {
                path: path.display().to_string(),
                why,
            },
            Self::Welcome => StandaloneError::Welcome(why),
        }
    }
}

/// The workload forked from its launch, waiting for its go.
struct Workload {
    pending: enforcer::Pending,
    /// The workload's seccomp listener.
    listener: std::os::fd::OwnedFd,
    freezer: Arc<Freezer>,
    writable: Writable,
    landlock_abi: u8,
    landlock_on: bool,
    /// The plan as settled on this host.
    plan: LaunchPlan,
    noexec: Noexec,
    relay: RelayPlan,
    trust: Option<Trust>,
    timeout_seconds: Option<u64>,
    is_init: bool,
}

impl Workload {
    /// Settles `launch` on this host, writes its trust file and forks the
    /// workload with its Landlock ruleset and seccomp filter.
    fn start(launch: Launch, is_init: bool, origin: &Origin<'_>) -> Result<Self, StandaloneError> {
        let Some(relay) = launch.relay().cloned() else {
            return Err(origin.refused("its plan has no relay".into()));
        };
        let (plan, noexec) = settle(launch.plan, launch.run_as.as_ref(), is_init)
            .map_err(|why| origin.refused(why))?;
        if let Some(trust) = &launch.trust {
            write_trust(trust).map_err(|why| origin.refused(why))?;
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
        let _ = enforcer::signals::set_own_group(pending.pid());
        let Some(listener) = pending.take_listener() else {
            return Err(LaunchError::Link(enforcer::Errno(libc::EPROTO)).into());
        };
        let (freezer, how) = Freezer::for_workload(pending.pid());
        say(&how);
        Ok(Self {
            pending,
            listener,
            freezer: Arc::new(freezer),
            writable,
            landlock_abi,
            landlock_on,
            plan,
            noexec,
            relay,
            trust: launch.trust,
            timeout_seconds: launch.timeout_seconds,
            is_init,
        })
    }
}

/// The channel's listener and what it hands over: each supervisor of the
/// generation that completed the greeting.
struct Listening {
    handle: tokio::runtime::Handle,
    relaying: Relaying,
    attachments: tokio::sync::mpsc::Receiver<Attachment>,
    gate: Gate,
    /// Where further commands are run once the workload runs.
    execs: Arc<OnceLock<Arc<Execs>>>,
    /// The digest of the bundle enforced, which each Hello says; unset
    /// while the sandbox waits for its launch.
    digest: Arc<OnceLock<String>>,
}

impl Listening {
    /// Listens on the bootstrap's endpoint, with the digest of the bundle
    /// enforced (`None`: waiting for the launch).
    fn open(channel: &Channel, digest: Option<String>) -> Result<Self, StandaloneError> {
        let end = SandboxEnd::new(&channel.credential).map_err(|e| attach_error(&e))?;
        let (handle, relaying) = brokering::relay_thread()?;
        loopback_up();
        let port = handle
            .block_on(Listener::bind(&channel.listen))
            .map_err(|e| attach_error(&format!("cannot listen on {}: {e}", channel.listen)))?;
        let at = port.local().map_err(|e| attach_error(&e))?;
        let binding = channel.credential.binding();
        say(&format!(
            "listening on {at} for the supervisor of sandbox \"{}\" generation {}{}",
            binding.sandbox_id,
            binding.generation,
            if digest.is_some() {
                ""
            } else {
                ", which brings the launch"
            }
        ));
        let gate = Gate::default();
        let execs: Arc<OnceLock<Arc<Execs>>> = Arc::default();
        let digest = Arc::new(digest.map_or_else(OnceLock::new, OnceLock::from));
        let attachments = {
            let _entered = handle.enter();
            accept(
                port,
                end,
                binding,
                Arc::clone(&digest),
                gate.clone(),
                Execs::handler(Arc::clone(&execs)),
            )
        };
        Ok(Self {
            handle,
            relaying,
            attachments,
            gate,
            execs,
            digest,
        })
    }

    /// The first supervisor of the generation to complete the greeting.
    fn first(&mut self) -> Result<Supervisor, StandaloneError> {
        match self.handle.block_on(self.attachments.recv()) {
            Some(Ok(first)) => Ok(first),
            Some(Err(why)) => Err(attach_error(&why)),
            None => Err(attach_error(
                &"the listener stopped before a supervisor attached",
            )),
        }
    }
}

/// Sends the Evidence of the waiting workload to `first`, runs it on its
/// Go, and supervises it until it ends, as the module docs say.
fn supervised(
    workload: Workload,
    listening: &mut Listening,
    first: Supervisor,
    reattach_within: Duration,
    grace: Duration,
) -> Result<u8, StandaloneError> {
    let Workload {
        pending,
        listener,
        freezer,
        writable,
        landlock_abi,
        landlock_on,
        plan,
        noexec,
        relay,
        trust,
        timeout_seconds,
        is_init,
    } = workload;
    let pid = pending.pid();
    // Resolved once, before the workload runs: what it does to the
    // filesystem later cannot lend a name to another file.
    let links = reported_links(&relay.binaries, &writable);
    // Kept to read the listener's state for every Evidence; the broker
    // serves the other.
    let watched = listener.try_clone().map_err(|e| attach_error(&e))?;
    let facts = move || {
        evidence(pid, &watched, landlock_abi, landlock_on, links.clone())
            .map_err(|e| format!("cannot read the workload's state: {e}"))
    };
    let handle = listening.handle.clone();
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
    let _ = listening
        .execs
        .set(Execs::new(plan.clone(), noexec, broker, watched.clone()));
    let state = WorkloadState {
        freezer: Arc::clone(&freezer),
        ending: Arc::default(),
        lost: Arc::default(),
    };
    let (_closed, attachments) = tokio::sync::mpsc::channel(1);
    handle.spawn(watch(
        attached.clone(),
        std::mem::replace(&mut listening.attachments, attachments),
        listening.gate.clone(),
        reattach_within,
        facts,
        state.clone(),
    ));
    if let Err(e) = pending.start() {
        return Err(LaunchError::from(e).into());
    }
    say(&format!("workload {pid} started"));
    let deadline = timeout_seconds.map(|s| std::time::Instant::now() + Duration::from_secs(s));
    let status =
        pid1::supervise(pid, is_init, grace, &watched, deadline).map_err(LaunchError::from)?;
    let timed_out = deadline.is_some_and(|d| std::time::Instant::now() >= d);
    state.ending.store(true, Ordering::SeqCst);
    if !is_init {
        enforcer::kill_descendants();
    }
    freezer.release();
    if let Some(trust) = &trust {
        let _ = std::fs::remove_dir_all(&trust.dir);
    }
    if state.lost.load(Ordering::SeqCst) {
        return Ok(EXIT_SUPERVISOR_LOST);
    }
    let code = if timed_out {
        say(&format!(
            "the workload ran past its timeout of {} s and was ended",
            timeout_seconds.unwrap_or_default()
        ));
        EXIT_TIMED_OUT
    } else {
        pid1::exit_code(status)
    };
    say(&format!("the workload ended with status {code}"));
    if let Err(e) = listening.relaying.report_ended(&attached, code) {
        say(&format!("the supervisor was not told: {e}"));
    }
    Ok(code)
}

/// A supervisor that completed the greeting, or why the sandbox stops:
/// one of its generation broke the protocol while the sandbox waited for
/// its launch.
type Attachment = Result<Supervisor, String>;

/// Watches the attachment in use: when its channel drops, every workload
/// process is frozen; a supervisor of the generation that attaches again
/// within `window` (and whose Go follows fresh Evidence) is put in use and
/// the workload resumed; otherwise every workload process is killed.
async fn watch(
    attached: Attached,
    mut attachments: tokio::sync::mpsc::Receiver<Attachment>,
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
                let Ok(next) = next else { continue };
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
    digest: Arc<OnceLock<String>>,
    gate: Gate,
    exec: ExecHandler,
) -> tokio::sync::mpsc::Receiver<Attachment> {
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
                digest.get().cloned(),
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
                let waiting = digest.is_none();
                let supervisor = match Supervisor::attach(tls, Link::Network, binding, digest).await
                {
                    Ok(supervisor) => supervisor,
                    Err(e @ RelayError::Protocol(_)) if waiting => {
                        // A holder of the generation's key that sends no
                        // launch, or one this sandbox refuses: nothing
                        // will run, so nothing waits.
                        let _ = tx
                            .send(Err(format!("the supervisor ({peer}) greeted wrongly: {e}")))
                            .await;
                        return;
                    }
                    Err(e) => return say(&format!("refused {peer}: the greeting failed: {e}")),
                };
                supervisor.on_exec(exec);
                if !gate.take() {
                    return say(&format!("refused {peer}: a supervisor is attached"));
                }
                say(&format!("the supervisor ({peer}) attached"));
                if tx.send(Ok(supervisor)).await.is_err() {
                    gate.open();
                }
            });
        }
    });
    rx
}
