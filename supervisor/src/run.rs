//! One `run`: from the bundle to the workload's exit status.
//!
//! Everything that can refuse the launch happens before the fork (bundle,
//! Landlock, filter, user, environment, program), so a bad bundle or a
//! kernel that cannot keep it means the command never runs. The fork
//! happens while the supervisor is still single-threaded, from the main
//! thread, which lives as long as the workload (the parent-death signal is
//! tied to the forking thread).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use enforcer::{ExitStatus, FsRule, InitSpec, SpawnError};
use sandbox::plan::{LaunchPlan, PLAN_VERSION, PlanUser, RelayPlan};

use crate::attribution::Attribution;
use crate::broker::Connector;
use crate::broker::aliases::Aliases;
use crate::cli::{NetnsMode, RunArgs};
use crate::credentials::Placeholders;
use crate::decide::Decider;
use crate::denylog::DenyLog;
use crate::dns::{self, Answerer, DnsPolicy};
use crate::error::LaunchError;
use crate::handoff::ProxyHandoff;
use crate::l7::trust::{TrustFile, WORKLOAD_VARS};
use crate::l7::{self, Proxy};
use crate::lifecycle::{self, Outcome};
use crate::notes::note;
use crate::policy::{Active, Policy, Swap};
use crate::relay::{Deciding, SupervisorSide};
use crate::reload::Reloader;
use crate::stdio::{self, Transcript};
use crate::workload;
use sandbox::writable::{User, Writable};
use sandbox_protocol::transport::Link;

pub const EXIT_TIMEOUT: u8 = 124;
pub const EXIT_LAUNCH_FAILED: u8 = 125;
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
pub const EXIT_NOT_FOUND: u8 = 127;

/// The sandbox's id in the sandbox protocol when the supervisor runs it
/// locally: one sandbox per supervisor.
const RELAY_SANDBOX_ID: &str = "local";
/// Its generation: a local run is the only one.
const RELAY_GENERATION: u64 = 1;

/// What the sandbox's resolv.conf says.
const RESOLV_CONF: &str = "# openshell-supervisor: the sandbox's DNS stub\nnameserver 127.0.0.1\n";
const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;
const CAP_SETPCAP: u32 = 8;
const CAP_SYS_ADMIN: u32 = 21;

/// Runs the workload; the return value is the exit status to exit with.
#[must_use]
pub fn run(args: &RunArgs) -> u8 {
    let started = Instant::now();
    match launch(args, started) {
        Ok(code) => code,
        Err(LaunchError::Spawn(SpawnError::Exec(errno))) => {
            let cmd = args.command.first().map(|c| c.to_string_lossy());
            note(&format!(
                "cannot execute `{}`: {errno}",
                cmd.unwrap_or_default()
            ));
            if errno.raw() == libc::ENOENT {
                EXIT_NOT_FOUND
            } else {
                EXIT_CANNOT_EXECUTE
            }
        }
        Err(e @ LaunchError::NotFound(_)) => {
            eprintln!("{:?}", miette::Report::new(e));
            EXIT_NOT_FOUND
        }
        Err(e) => {
            eprintln!("{:?}", miette::Report::new(e));
            EXIT_LAUNCH_FAILED
        }
    }
}

fn has_cap(caps: u64, cap: u32) -> bool {
    caps & (1 << cap) != 0
}

fn launch(args: &RunArgs, started: Instant) -> Result<u8, LaunchError> {
    let prepared = prepare(args)?;
    let pending = spawn(&prepared)?;
    serve(args, prepared, pending, started)
}

/// What `prepare` made before the fork: a failure there stops the launch
/// before any process exists (docs/supervisor.md, step 2).
struct Prepared {
    gateway: Option<crate::gateway::Gateway>,
    from_gateway: Option<bundle_trust::Verified>,
    bundle: policy_bundle::Bundle,
    mode: NetnsMode,
    new_pidns: bool,
    plan: LaunchPlan,
    noexec: Vec<CString>,
    exec_again: Vec<CString>,
    init_program: CString,
    abi: u8,
    proxy_parts: l7::Prepared,
    trust: TrustFile,
    proxy_setup: Duration,
    identity: Option<workload::Identity>,
    own: (libc::uid_t, libc::gid_t),
    writable: Arc<Writable>,
    bundle_path: PathBuf,
    placeholders: Arc<Placeholders>,
    log: Arc<DenyLog>,
    attribution: Arc<Attribution>,
    dns_policy: Arc<Swap<DnsPolicy>>,
    resolv: Option<tempfile::TempDir>,
    resolv_source: Option<CString>,
    transcript: Option<Transcript>,
    /// The channel to openshell-sandbox.
    relay: Channel,
}

/// Both ends of the channel to openshell-sandbox, until it has inherited
/// its own.
struct Channel {
    ours: std::os::unix::net::UnixStream,
    theirs: std::os::unix::net::UnixStream,
}

/// Everything before the fork: the bundle, Landlock and the filter, the
/// proxy's CA and trust file, the workload's user, environment and program.
fn prepare(args: &RunArgs) -> Result<Prepared, LaunchError> {
    let gateway = crate::gateway::Gateway::from_args(&args.source, args.sandbox.as_deref())?;
    let (bundle, from_gateway) =
        crate::gateway::initial_bundle(gateway.as_ref(), args.source.bundle.as_deref())?;
    let caps = enforcer::effective_caps(std::process::id()).unwrap_or(0);
    let mode = match (args.netns, has_cap(caps, CAP_SYS_ADMIN)) {
        (Some(NetnsMode::New), false) => {
            return Err(LaunchError::Usage(
                "`--netns new` needs root or CAP_SYS_ADMIN".into(),
            ));
        }
        (Some(m), _) => m,
        (None, true) => NetnsMode::New,
        (None, false) => {
            note(
                "no privilege to create a network namespace: running with `--netns none`; the workload shares this network namespace and every connect is still decided by the supervisor",
            );
            NetnsMode::None
        }
    };
    stdio::check_inherited()?;
    let workdir = workdir(args.workdir.as_deref())?;
    let abi = enforcer::kernel_abi().map_err(LaunchError::Landlock)?;
    // The proxy's CA, listener and upstream trust, and the file through
    // which the workload trusts the CA (read access added to Landlock).
    let proxy_started = Instant::now();
    let proxy_parts =
        l7::Prepared::new(args.supervision.upstream_ca.as_deref()).map_err(LaunchError::Proxy)?;
    let trust = TrustFile::write(proxy_parts.ca.cert_pem())
        .map_err(LaunchError::io("write the sandbox's CA certificate"))?;
    let proxy_setup = proxy_started.elapsed();
    // The workload's own PID namespace and /proc, under an init: whenever
    // namespaces can be made (both network modes).
    let new_pidns = has_cap(caps, CAP_SYS_ADMIN);
    // What openshell-sandbox applies; the rest of the plan (user, command,
    // environment) is filled in below.
    let mut plan = LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock.clone(),
        deny: bundle.enforcement.seccomp.deny.clone(),
        notify: bundle.enforcement.seccomp.notify.clone(),
        workdir: workdir.as_os_str().as_bytes().to_vec(),
        read_only: vec![trust.dir().as_os_str().as_bytes().to_vec()],
        private_proc: new_pidns,
        root_workload: false,
        shared_pid_namespace: !new_pidns,
        drop_bounding: has_cap(caps, CAP_SETPCAP),
        user: None,
        program: Vec::new(),
        argv: Vec::new(),
        envp: Vec::new(),
        relay: None,
    };
    let (spec, notes) = plan.landlock_spec(abi)?;
    let ruleset = enforcer::prepare(&spec).map_err(LaunchError::Landlock)?;
    let (noexec, exec_again) = noexec_trees(&spec.fs, new_pidns)?;
    for line in notes {
        note(&line);
    }
    for d in &ruleset.report().downgrades {
        // A directory right on a file means nothing; say so only if asked.
        let harmless = matches!(d, enforcer::Downgrade::NotApplicableToFile { .. });
        if args.verbose || !harmless {
            note(&format!("landlock: {d}"));
        }
    }
    let can_switch = has_cap(caps, CAP_SETUID) && has_cap(caps, CAP_SETGID);
    let identity = workload::identity(&bundle, can_switch)?;
    let landlock_on = !ruleset
        .report()
        .downgrades
        .iter()
        .any(|d| matches!(d, enforcer::Downgrade::Unavailable));
    let writable = Arc::new(Writable::new(
        &spec.fs,
        landlock_on,
        identity.as_ref().map(|i| User {
            uid: i.uid,
            gid: i.gid,
            groups: vec![i.gid],
        }),
        workload::own_ids().0,
    ));
    if !landlock_on {
        note(
            "without Landlock every file counts as writable by the workload: connects of programs that map shared libraries are refused (see docs/threat-model.md)",
        );
    }
    if let Some(g) = &gateway {
        g.guard_state(&writable, landlock_on)?;
    }
    let bundle_path = match &args.source.bundle {
        Some(path) => guard_bundle(path, &writable, args.supervision.watch)?,
        None => crate::gateway::label(&args.source),
    };
    if identity.as_ref().is_some_and(|i| i.uid == 0) {
        let why = if bundle.enforcement.process.user.is_none() {
            "the policy names no `run_as` user and the supervisor runs as root"
        } else {
            "`run_as user root`"
        };
        note(&format!(
            "the workload runs as root ({why}): it may not change file modes or times (chmod, utime*), which uid 0 could do on any host file; it still reaches the pathname sockets root may use (see docs/threat-model.md), so name a dedicated user with `run_as`"
        ));
        plan.root_workload = true;
    }
    // Built here only to refuse, before any process exists, a filter this
    // kernel cannot load; openshell-sandbox builds its own from the plan.
    enforcer::build(&plan.filter_spec()?).map_err(LaunchError::Seccomp)?;
    let placeholders = Arc::new(Placeholders::default());
    let mut given: Vec<(String, std::ffi::OsString)> = WORKLOAD_VARS
        .iter()
        .map(|v| ((*v).to_owned(), trust.file().as_os_str().to_owned()))
        .collect();
    for cred in &bundle.enforcement.credentials {
        if let Some(var) = &cred.placeholder {
            given.push((var.clone(), placeholders.get_or_make(&cred.name).into()));
        }
    }
    let env = workload::environment(&args.supervision.env, &workdir, &bundle, &given)?;
    let program = workload::find_program(
        args.command.first().map(AsRef::as_ref).unwrap_or_default(),
        env.get("PATH").map(AsRef::as_ref),
        &workdir,
    )?;
    let program = path_cstring(&program)?;
    let argv = workload::argv(&args.command)?;
    let envp = workload::envp(&env)?;
    plan.user = identity
        .as_ref()
        .filter(|i| (i.uid, i.gid) != workload::own_ids() || can_switch)
        .map(|i| PlanUser {
            uid: i.uid,
            gid: i.gid,
            groups: vec![i.gid],
        });
    plan.program = program.as_bytes().to_vec();
    plan.argv = argv.iter().map(|a| a.as_bytes().to_vec()).collect();
    plan.envp = envp.iter().map(|e| e.as_bytes().to_vec()).collect();
    if let Some(path) = &args.supervision.log {
        guard_log(path, &writable)?;
    }
    let log = Arc::new(
        DenyLog::open(
            args.supervision.log.as_deref(),
            &bundle.provenance.policy,
            &bundle.digest,
        )
        .map_err(LaunchError::io("open the log"))?
        .for_sandbox(RELAY_SANDBOX_ID, RELAY_GENERATION),
    );
    let attribution = Arc::new(Attribution::new(&args.supervision.resolve));
    let dns_policy = Arc::new(Swap::new(DnsPolicy::from_tables(&bundle.enforcement)));
    let resolv = match mode {
        NetnsMode::New => private_resolv_conf()?,
        NetnsMode::None => None,
    };
    let resolv_source = resolv
        .as_ref()
        .map(|dir| path_cstring(&dir.path().join("resolv.conf")))
        .transpose()?;
    let transcript = args
        .transcript
        .as_deref()
        .map(Transcript::start)
        .transpose()?;
    let own = workload::own_ids();
    let init_program = sandbox_program()?;
    // openshell-sandbox brokers the workload's calls and asks over the
    // sandbox protocol.
    plan.relay = Some(RelayPlan {
        sandbox_id: RELAY_SANDBOX_ID.into(),
        generation: RELAY_GENERATION,
        bundle_digest: bundle.digest.clone(),
        hash_binaries: crate::policy::pins(&bundle),
        own_network: mode == NetnsMode::New,
        // Resolved here, under the workload's root.
        binaries: Vec::new(),
    });
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(LaunchError::io("make the channel to openshell-sandbox"))?;
    let relay = Channel { ours, theirs };
    Ok(Prepared {
        gateway,
        from_gateway,
        bundle,
        mode,
        new_pidns,
        plan,
        noexec,
        exec_again,
        init_program,
        relay,
        abi,
        proxy_parts,
        trust,
        proxy_setup,
        identity,
        own,
        writable,
        bundle_path,
        placeholders,
        log,
        attribution,
        dns_policy,
        resolv,
        resolv_source,
        transcript,
    })
}

/// The fork: the child enters the workload's namespaces and execs
/// `openshell-sandbox` with the launch plan, the launch link and its end
/// of the channel; it applies the plan to the workload it forks, which
/// waits for its go.
fn spawn(p: &Prepared) -> Result<enforcer::Pending, LaunchError> {
    let transcript = &p.transcript;
    let stdio = [
        None,
        transcript.as_ref().map(|t| t.child_out.as_fd()),
        transcript.as_ref().map(|t| t.child_err.as_fd()),
    ];
    let bind_file = p.resolv_source.as_deref().map(|s| (s, c"/etc/resolv.conf"));
    // Without a PID namespace of its own, orphans come to the supervisor.
    if !p.new_pidns {
        let _ = enforcer::set_child_subreaper();
    }
    let plan = enforcer::memory_file(c"launch-plan", &p.plan.to_bytes())
        .map_err(LaunchError::io("write the launch plan"))?;
    let spec = InitSpec {
        new_netns: p.mode == NetnsMode::New,
        bind_file,
        new_pidns: p.new_pidns,
        noexec: &p.noexec,
        exec_again: &p.exec_again,
        stdio,
        program: &p.init_program,
        args: &[],
        plan: plan.as_fd(),
        relay: Some(p.relay.theirs.as_fd()),
    };
    enforcer::spawn_init(&spec).map_err(LaunchError::Spawn)
}

/// After the fork: the runtime, the DNS stub, the go, the proxy, the broker
/// and reloads, then waiting for the workload.
fn serve(
    args: &RunArgs,
    p: Prepared,
    mut pending: enforcer::Pending,
    started: Instant,
) -> Result<u8, LaunchError> {
    let Prepared {
        gateway,
        from_gateway,
        bundle,
        mode,
        abi,
        proxy_parts,
        trust,
        proxy_setup,
        identity,
        own,
        writable,
        bundle_path,
        placeholders,
        log,
        attribution,
        dns_policy,
        resolv,
        transcript,
        relay,
        ..
    } = p;
    if pending.take_listener().is_some() {
        return Err(LaunchError::Usage(
            "openshell-sandbox handed its listener over instead of brokering: install the openshell-sandbox built with this supervisor".into(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(LaunchError::io("start the runtime"))?;
    let _entered = runtime.enter();
    let attribution_for_broker = Arc::clone(&attribution);
    let answerer = Arc::new(Answerer {
        policy: Arc::clone(&dns_policy),
        attribution,
        resolver: dns::resolver(args.supervision.dns_upstream),
        log: Arc::clone(&log),
    });
    // The sandbox attaches before it lets the workload exec: the protocol
    // is served now, its connects once the decider below is set.
    let deciding = Deciding::default();
    let Channel { ours, theirs } = relay;
    drop(theirs);
    ours.set_nonblocking(true)
        .map_err(LaunchError::io("use the channel to openshell-sandbox"))?;
    let binding = sandbox_protocol::Binding {
        sandbox_id: RELAY_SANDBOX_ID.into(),
        generation: RELAY_GENERATION,
    };
    let side = SupervisorSide::new(
        Arc::clone(&deciding),
        Arc::clone(&log),
        answerer,
        binding,
        bundle.digest.clone(),
    );
    let (relay_runtime, _relaying) = relay_thread()?;
    relay_runtime.spawn(async move {
        let io = tokio::net::UnixStream::from_std(ours)?;
        sandbox_protocol::transport::serve(side, io, Link::Local).await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    });
    // Opened while the child waits for its go: it cannot have exited.
    let root = Arc::new(workload_root(pending.workload_pid())?);
    let running = pending.start().map_err(LaunchError::Spawn)?;
    let exec_at = started.elapsed();
    drop(resolv);
    // The decision indexes are built once the workload runs: a trapped
    // call waits in the kernel until the broker receives it, so this only
    // delays the first connect, never lets one through.
    let (aliases, expanded) = Aliases::expand(
        &bundle.enforcement.seccomp.identities,
        &crate::reload::root_path(&root),
        Some(&writable),
    );
    for line in expanded {
        note(&line);
    }
    let active = Active::new(bundle, &placeholders, 0).with_aliases(aliases);
    note_unusable_credentials(&active);
    let policy = Arc::new(Policy::new(active));
    let decider = Arc::new(Decider::new(
        Arc::clone(&policy),
        Arc::clone(&attribution_for_broker),
    ));
    let proxy = Proxy::start(proxy_parts, Arc::clone(&decider), Arc::clone(&log))
        .map_err(LaunchError::Proxy)?;
    if let Some(g) = &gateway {
        g.propose_through(&proxy);
    }
    let reloader = Arc::new(
        Reloader::new(
            bundle_path,
            policy,
            dns_policy,
            placeholders,
            Arc::clone(&log),
            Some(Arc::clone(&proxy)),
        )
        .guarded(writable, root),
    );
    crate::gateway::follow_or_watch(
        gateway,
        from_gateway.as_ref(),
        &reloader,
        args.supervision.watch,
    )?;
    let connector = Connector {
        decider,
        log,
        proxy: Some(Arc::clone(&proxy) as Arc<dyn ProxyHandoff>),
    };
    // openshell-sandbox's connects are decided from here on.
    let _ = deciding.set(Arc::new(connector));
    if args.verbose {
        let who = identity.map_or_else(|| format!("uid {}", own.0), |i| i.name);
        note(&format!(
            "L7 proxy ready (CA, --upstream-ca and trust file before the fork: {:.2} ms; system roots load on its thread)",
            proxy_setup.as_secs_f64() * 1000.0
        ));
        note(&format!(
            "workload {} started as {who} in {:.2} ms (netns {}, {}, landlock ABI {abi})",
            running.workload_pid(),
            exec_at.as_secs_f64() * 1000.0,
            if mode == NetnsMode::New {
                "new"
            } else {
                "none"
            },
            if running.pid() == running.workload_pid() {
                "no PID namespace"
            } else {
                "own PID namespace and /proc"
            },
        ));
    }
    let timeout = args.timeout.map(Duration::from_secs);
    let outcome = runtime.block_on(lifecycle::supervise(running, timeout));
    enforcer::kill_descendants();
    if let Some(t) = transcript {
        t.finish();
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    drop(trust);
    match outcome.map_err(LaunchError::io("wait for the workload"))? {
        Outcome::Exited(status) => Ok(exit_code(status)),
        Outcome::TimedOut => {
            note(&format!(
                "the workload ran longer than {}s and was killed",
                args.timeout.unwrap_or_default()
            ));
            Ok(EXIT_TIMEOUT)
        }
    }
}

/// Says which of the bundle's credentials have no usable secret: the
/// requests that need them are refused.
pub(crate) fn note_unusable_credentials(active: &Active) {
    for cred in active.credentials.iter() {
        if let Err(why) = &cred.secret {
            note(&format!(
                "credential `{}`: {why}; requests that need it are refused",
                cred.name
            ));
        }
    }
}

/// A runtime on a thread of its own for the sandbox protocol: a relayed
/// connect's tasks (the channel, the decision, the upstream) then never
/// wait for a thread of the proxy's runtime to wake. It runs until the
/// sender returned is dropped.
pub(crate) fn relay_thread()
-> Result<(tokio::runtime::Handle, tokio::sync::oneshot::Sender<()>), LaunchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LaunchError::io("start the relay's runtime"))?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || runtime.block_on(async move { drop(stopped.await) }))
        .map_err(LaunchError::io("start the relay's thread"))?;
    Ok((handle, stop))
}

/// `openshell-sandbox` beside this executable, which the workload's init
/// (PID 1 of its PID namespace, or a child subreaper without one) execs
/// once it has entered the namespaces, so that it holds no copy of this
/// process's memory (its secrets among it). It brokers the workload's
/// calls: without it nothing runs.
fn sandbox_program() -> Result<CString, LaunchError> {
    let exe =
        std::env::current_exe().map_err(LaunchError::io("find the supervisor's executable"))?;
    let path = exe.with_file_name("openshell-sandbox");
    if !path.is_file() {
        return Err(LaunchError::Usage(format!(
            "`{}` is missing: openshell-sandbox starts the workload and brokers its calls; install it beside openshell-supervisor",
            path.display()
        )));
    }
    path_cstring(&path)
}

/// The trees to mount `noexec` in the workload's mount namespace, and
/// those below them to make executable again ([`crate::noexec`]). Without
/// the privilege to make a mount namespace there is none, and a note says
/// what that leaves open.
fn noexec_trees(
    rules: &[FsRule],
    can_mount: bool,
) -> Result<(Vec<CString>, Vec<CString>), LaunchError> {
    let mounts = sandbox::mountinfo::read().map_err(LaunchError::io("read the mount table"))?;
    let plan = sandbox::noexec::plan(rules, &mounts);
    if !can_mount {
        if !plan.noexec.is_empty() {
            note(
                "no privilege to make a mount namespace: the trees the workload may write are not mounted noexec, so code it writes there can be mapped executable (see docs/threat-model.md)",
            );
        }
        return Ok((Vec::new(), Vec::new()));
    }
    let cstrings = |paths: Vec<PathBuf>| -> Result<Vec<CString>, LaunchError> {
        paths.iter().map(|p| path_cstring(p)).collect()
    };
    Ok((cstrings(plan.noexec)?, cstrings(plan.exec_again)?))
}

/// The workload's root directory, where the bundle's binary paths are
/// resolved, held open so that it outlives the first process.
fn workload_root(pid: u32) -> Result<std::fs::File, LaunchError> {
    std::fs::File::open(format!("/proc/{pid}/root"))
        .map_err(LaunchError::io("open the workload's root directory"))
}

/// The bundle's canonical path, the one every reload reads (a link on the
/// way cannot be re-pointed later). With `--watch`, a bundle the workload
/// can change is refused: it would rewrite its own rules. Without, it is
/// only said, and `SIGHUP` reloads of it are refused (see `reload`).
fn guard_bundle(path: &Path, writable: &Writable, watch: bool) -> Result<PathBuf, LaunchError> {
    let canonical = path
        .canonicalize()
        .map_err(|source| LaunchError::BundleUnreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if let Some(why) = writable.exposure(&canonical) {
        if watch {
            return Err(LaunchError::WritableBundle {
                path: canonical,
                why,
            });
        }
        note(&format!(
            "the workload can change the bundle `{}` ({why}): reloads of it are refused",
            canonical.display()
        ));
    }
    Ok(canonical)
}

/// Refuses a `--log` the workload could change: it would erase its own
/// denials or write lines the supervisor never did. A log that does not
/// exist yet is judged by its directory, where the workload would create
/// it first.
fn guard_log(path: &Path, writable: &Writable) -> Result<(), LaunchError> {
    let judged = match path.canonicalize() {
        Ok(file) => file,
        Err(_) => path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .canonicalize()
            .map_err(LaunchError::io(format!(
                "open the log `{}`",
                path.display()
            )))?,
    };
    match writable.exposure(&judged) {
        Some(why) => Err(LaunchError::WritableLog {
            path: path.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

fn exit_code(status: ExitStatus) -> u8 {
    u8::try_from(status.code()).unwrap_or(EXIT_LAUNCH_FAILED)
}

fn workdir(given: Option<&Path>) -> Result<PathBuf, LaunchError> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(LaunchError::io("read the current directory"))?,
    };
    let dir = dir.canonicalize().map_err(LaunchError::io(format!(
        "use `{}` as working directory",
        dir.display()
    )))?;
    if !dir.is_dir() {
        return Err(LaunchError::Usage(format!(
            "`{}` is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

fn path_cstring(path: &Path) -> Result<CString, LaunchError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| LaunchError::Usage(format!("`{}` contains a NUL byte", path.display())))
}

/// The file bind-mounted over the workload's `/etc/resolv.conf`, in a
/// private directory removed once the child has mounted it (the mount keeps
/// the file). `None` when the host has no resolv.conf: glibc then asks
/// 127.0.0.1 anyway.
fn private_resolv_conf() -> Result<Option<tempfile::TempDir>, LaunchError> {
    if !Path::new("/etc/resolv.conf").exists() {
        return Ok(None);
    }
    let dir = tempfile::Builder::new()
        .prefix("openshell-supervisor-")
        .tempdir()
        .map_err(LaunchError::io("create a private directory"))?;
    std::fs::write(dir.path().join("resolv.conf"), RESOLV_CONF)
        .map_err(LaunchError::io("write the sandbox's resolv.conf"))?;
    Ok(Some(dir))
}
