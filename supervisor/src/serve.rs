//! `openshell-supervisor serve`: the supervisor of a sandbox on another
//! host, joined to it by the channel of `sandbox_protocol::channel`.
//!
//! 1. Everything a sandbox needs is made here, before it starts: the
//!    generation's channel keys, the proxy's CA, the credentials'
//!    placeholders and the launch plan. The sandbox's part is written to
//!    the bootstrap file (`--bootstrap`), which whoever starts the sandbox
//!    hands to `openshell-sandbox --bootstrap`; the supervisor's part (its
//!    channel key, the CA key, the placeholders' secrets) stays in this
//!    process's memory and is never written. Where the sandbox's bootstrap
//!    must exist before either end runs (a Kubernetes Secret), a driver
//!    makes the channel keys instead (`sandbox_protocol::channel::kit`):
//!    this process then reads its half (`--credential`), writes nothing,
//!    and sends the rest of the sandbox's part, the launch, in the
//!    greeting to the sandbox, which waits for it.
//! 2. The supervisor attaches to the sandbox (`--sandbox`: over TCP, or a
//!    Unix socket in a directory both see when the workload's container
//!    has no network), trying until it listens (`--attach-within`); a
//!    sandbox that is not of the generation is refused and ends the
//!    command.
//! 3. Before the workload runs, the sandbox reports what the kernel says
//!    of it (Landlock, seccomp, capabilities, `no_new_privs`); evidence
//!    short of what the bundle needs is refused, and the workload never
//!    runs.
//! 4. It then serves the protocol as `run` does (decisions, the L7 proxy,
//!    DNS answers, reloads on `SIGHUP` or `--watch`, or of each revision
//!    the gateway approves with `--gateway`) until the sandbox's
//!    last message, the workload's exit status, which becomes this
//!    command's. When the channel drops first, the sandbox freezes the
//!    workload and this process attaches again (`--reattach-within`), as
//!    the same generation's supervisor; the workload then resumes.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandbox::plan::{LaunchPlan, PLAN_VERSION, RelayPlan};
use sandbox::standalone::{Bootstrap, EXIT_SUPERVISOR_LOST, Launch, RunAs, Trust};
use sandbox_protocol::channel::{
    ChannelError, Credential, Endpoint, Role, SupervisorEnd, SupervisorStream, issue,
};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{Binding, MAX_LAUNCH};

use crate::attribution::Attribution;
use crate::broker::Connector;
use crate::broker::aliases::named_binaries;
use crate::cli::ServeArgs;
use crate::commands::Commands;
use crate::credentials::Placeholders;
use crate::decide::Decider;
use crate::denylog::DenyLog;
use crate::dns::{self, Answerer, DnsPolicy};
use crate::error::LaunchError;
use crate::gateway::Gateway;
use crate::handoff::ProxyHandoff;
use crate::l7::trust::WORKLOAD_VARS;
use crate::l7::{self, Proxy};
use crate::notes::note;
use crate::policy::{Active, Policy, Swap};
use crate::relay::{Deciding, EvidenceRule, SupervisorSide};
use crate::reload::Reloader;
use crate::run::EXIT_LAUNCH_FAILED;
use crate::workload;
use sandbox::writable::Writable;

/// How often an attachment is tried while the sandbox does not listen:
/// soon at first (it is usually being started as the bootstrap is
/// written), then less and less often, up to `RETRY_MAX` apart.
const RETRY_FIRST: Duration = Duration::from_millis(5);
const RETRY_MAX: Duration = Duration::from_millis(200);

/// Serves one sandbox; the exit status: the workload's as the sandbox
/// reported it, 122 when the channel dropped first, 125 when the sandbox
/// could not be served.
#[must_use]
pub fn serve(args: &ServeArgs) -> u8 {
    match serve_sandbox(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{:?}", miette::Report::new(e));
            EXIT_LAUNCH_FAILED
        }
    }
}

fn serve_sandbox(args: &ServeArgs) -> Result<u8, LaunchError> {
    let gateway = Gateway::from_args(&args.source, Some(&args.sandbox_id))?;
    let (bundle, first) =
        crate::gateway::initial_bundle(gateway.as_ref(), args.source.bundle.as_deref())?;
    let binding = Binding {
        sandbox_id: args.sandbox_id.clone(),
        generation: args.generation,
    };
    let proxy_parts =
        l7::Prepared::new(args.supervision.upstream_ca.as_deref()).map_err(LaunchError::Proxy)?;
    let placeholders = Arc::new(Placeholders::default());
    let plan = plan(args, &bundle, &placeholders)?;
    if let Some(g) = &gateway {
        // The sandbox's Landlock rules, as this host's kernel would take
        // them, must keep the workload off the revision floor.
        let abi = enforcer::kernel_abi().map_err(LaunchError::Landlock)?;
        let (spec, _) = plan.landlock_spec(abi)?;
        let writable = Writable::new(&spec.fs, true, None, workload::own_ids().0);
        g.guard_state(&writable, true)?;
    }
    let process = &bundle.enforcement.process;
    let launch = Launch {
        plan,
        run_as: Some(RunAs {
            user: process.user.clone(),
            group: process.group.clone(),
        }),
        trust: Some(Trust {
            dir: args.trust_dir.clone(),
            proxy_ca: proxy_parts.ca.cert_pem().to_owned(),
        }),
        timeout_seconds: args.timeout,
    };
    let ChannelEnd {
        end,
        launch: launch_in_welcome,
    } = channel_end(args, &binding, launch)?;
    let log = Arc::new(
        DenyLog::open(
            args.supervision.log.as_deref(),
            &bundle.provenance.policy,
            &bundle.digest,
        )
        .map_err(LaunchError::io("open the log"))?
        .for_sandbox(&args.sandbox_id, args.generation),
    );
    let attribution = Arc::new(Attribution::new(&args.supervision.resolve));
    let dns_policy = Arc::new(Swap::new(DnsPolicy::from_tables(&bundle.enforcement)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(LaunchError::io("start the runtime"))?;
    let _entered = runtime.enter();
    let answerer = Arc::new(Answerer {
        policy: Arc::clone(&dns_policy),
        attribution: Arc::clone(&attribution),
        resolver: dns::resolver(args.supervision.dns_upstream),
        log: Arc::clone(&log),
    });
    let digest = bundle.digest.clone();
    let landlock = &bundle.enforcement.landlock;
    let evidence_rule = EvidenceRule {
        landlock_hard: landlock.mode == policy_bundle::LandlockMode::Hard,
        min_abi: u32::from(landlock.min_abi),
    };
    let active = Active::new(bundle, &placeholders, 0);
    crate::run::note_unusable_credentials(&active);
    let policy = Arc::new(Policy::new(active));
    let decider = Arc::new(Decider::new(Arc::clone(&policy), attribution));
    let proxy = Proxy::start(proxy_parts, Arc::clone(&decider), Arc::clone(&log))
        .map_err(LaunchError::Proxy)?;
    if let Some(g) = &gateway {
        g.propose_through(&proxy);
    }
    let source = match &args.source.bundle {
        Some(path) => path.clone(),
        None => crate::gateway::label(&args.source),
    };
    let reloader = Arc::new(Reloader::new(
        source,
        policy,
        dns_policy,
        placeholders,
        Arc::clone(&log),
        Some(Arc::clone(&proxy)),
    ));
    let commands = gateway.as_ref().map(|g| {
        let commands = Arc::new(Commands::default());
        g.run_commands(binding.clone(), Arc::clone(&commands));
        commands
    });
    crate::gateway::follow_or_watch(gateway, first.as_ref(), &reloader, args.supervision.watch)?;
    let deciding = Deciding::default();
    let _ = deciding.set(Arc::new(Connector {
        decider,
        log: Arc::clone(&log),
        proxy: Some(proxy as Arc<dyn ProxyHandoff>),
    }));
    let side = || {
        let side = SupervisorSide::new(
            Arc::clone(&deciding),
            Arc::clone(&log),
            Arc::clone(&answerer),
            binding.clone(),
            digest.clone(),
        )
        .requiring_evidence(evidence_rule)
        .announcing_ready_at(args.ready_file.clone())
        .with_links_to(Arc::clone(&reloader));
        let side = match &launch_in_welcome {
            Some(launch) => side.launching(Arc::clone(launch)),
            None => side,
        };
        match &commands {
            Some(commands) => side.running_commands(Arc::clone(commands)),
            None => side,
        }
    };
    let (relay_runtime, _relaying) = crate::run::relay_thread()?;
    let within = Duration::from_secs(args.attach_within);
    let mut tls = relay_runtime
        .block_on(attach(&end, &args.sandbox, within, false))
        .map_err(LaunchError::Channel)?;
    note(&format!("attached to the sandbox at {}", args.sandbox));
    let again = Duration::from_secs(args.reattach_within);
    let code = loop {
        let side = side();
        let status = side.workload_status();
        let served =
            relay_runtime.block_on(sandbox_protocol::transport::serve(side, tls, Link::Network));
        if let Some(code) = status.lock().ok().and_then(|s| *s) {
            note(&format!(
                "the sandbox reports the workload ended with status {code}"
            ));
            break code;
        }
        let why = served.map_or_else(|e| e.to_string(), |()| "closed".to_owned());
        note(&format!(
            "the channel to the sandbox dropped ({why}): the sandbox freezes the workload; attaching again within {again:?}"
        ));
        match relay_runtime.block_on(attach(&end, &args.sandbox, again, true)) {
            Ok(t) => {
                note("attached to the sandbox again: the workload resumes");
                tls = t;
            }
            Err(e) => {
                note(&format!("{e}: the sandbox kills the workload"));
                break EXIT_SUPERVISOR_LOST;
            }
        }
    };
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(code)
}

/// This end of the channel, and the launch the Welcome carries: from the
/// kit's credential at `--credential`, the launch sent to the sandbox,
/// which waits for it; or from a new generation's keys, the launch
/// written with the sandbox's key to the bootstrap at `--bootstrap`.
fn channel_end(
    args: &ServeArgs,
    binding: &Binding,
    launch: Launch,
) -> Result<ChannelEnd, LaunchError> {
    if let Some(path) = &args.credential {
        let credential = kit_credential(path, binding)?;
        let end = SupervisorEnd::new(&credential).map_err(LaunchError::Channel)?;
        let bytes = launch.to_bytes();
        if bytes.len() > MAX_LAUNCH {
            return Err(LaunchError::Usage(format!(
                "the launch (plan, user, trust, timeout) has {} bytes, over the {MAX_LAUNCH} a greeting carries: give the sandbox a bootstrap with its plan (`--bootstrap`)",
                bytes.len()
            )));
        }
        note(&format!(
            "the channel key is the kit's `{}`: the launch goes to the sandbox in the greeting",
            path.display()
        ));
        return Ok(ChannelEnd {
            end,
            launch: Some(Arc::from(bytes)),
        });
    }
    let Some(path) = &args.bootstrap else {
        return Err(LaunchError::Usage(
            "give `--bootstrap FILE` or `--credential FILE`".into(),
        ));
    };
    let (sandbox_cred, supervisor_cred) = issue(binding).map_err(LaunchError::Channel)?;
    let end = SupervisorEnd::new(&supervisor_cred).map_err(LaunchError::Channel)?;
    let bootstrap =
        Bootstrap::with_launch(listen_at(args), sandbox_cred, launch, args.reattach_within);
    write_new(path, &bootstrap.to_bytes())?;
    note(&format!(
        "wrote `{}`: start `openshell-sandbox --bootstrap FILE` with it on the sandbox's host",
        path.display()
    ));
    Ok(ChannelEnd { end, launch: None })
}

/// This end of the channel, and the launch its Welcome carries to a
/// sandbox started from a kit.
struct ChannelEnd {
    end: SupervisorEnd,
    launch: Option<Arc<[u8]>>,
}

/// The supervisor's credential of a kit at `path`, for the sandbox and
/// generation of `binding` (`--sandbox-id`, `--generation`): a credential
/// of another would attach this process's decisions to a sandbox it was
/// not told of. Read and left in place: it may be on a read-only volume.
fn kit_credential(path: &Path, binding: &Binding) -> Result<Credential, LaunchError> {
    let bytes = std::fs::read(path).map_err(LaunchError::io(format!(
        "read the credential `{}`",
        path.display()
    )))?;
    let credential = Credential::from_json(&bytes, Role::Supervisor)
        .map_err(|e| LaunchError::Usage(format!("the credential `{}`: {e}", path.display())))?;
    if credential.binding() != *binding {
        return Err(LaunchError::Usage(format!(
            "the credential `{}` is for sandbox \"{}\" generation {}, and this supervisor serves sandbox \"{}\" generation {} (`--sandbox-id`, `--generation`)",
            path.display(),
            credential.sandbox_id,
            credential.generation,
            binding.sandbox_id,
            binding.generation
        )));
    }
    Ok(credential)
}

/// The launch plan for a sandbox on another host: the bundle's tables,
/// the workload's command and environment. What depends on that host
/// (its user database, PID namespace and capabilities) the sandbox
/// settles when it starts.
fn plan(
    args: &ServeArgs,
    bundle: &policy_bundle::Bundle,
    placeholders: &Placeholders,
) -> Result<LaunchPlan, LaunchError> {
    let absolute = |what: &str, p: &Path| {
        if p.is_absolute() {
            Ok(())
        } else {
            Err(LaunchError::Usage(format!(
                "{what} `{}` is on the sandbox's host: give it as an absolute path",
                p.display()
            )))
        }
    };
    absolute("the working directory", &args.workdir)?;
    absolute("the trust directory", &args.trust_dir)?;
    let program = Path::new(
        args.command
            .first()
            .map(OsString::as_os_str)
            .unwrap_or_default(),
    );
    absolute("the program", program)?;
    let trust_file = args.trust_dir.join(sandbox::trust::FILE_NAME);
    let mut given: Vec<(String, OsString)> = WORKLOAD_VARS
        .iter()
        .map(|v| ((*v).to_owned(), trust_file.as_os_str().to_owned()))
        .collect();
    for cred in &bundle.enforcement.credentials {
        if let Some(var) = &cred.placeholder {
            given.push((var.clone(), placeholders.get_or_make(&cred.name).into()));
        }
    }
    let env = workload::environment(&args.supervision.env, &args.workdir, bundle, &given)?;
    let plan = LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock.clone(),
        deny: bundle.enforcement.seccomp.deny.clone(),
        notify: bundle.enforcement.seccomp.notify.clone(),
        workdir: args.workdir.as_os_str().as_bytes().to_vec(),
        read_only: vec![args.trust_dir.as_os_str().as_bytes().to_vec()],
        private_proc: false,
        root_workload: false,
        shared_pid_namespace: true,
        drop_bounding: false,
        user: None,
        program: program.as_os_str().as_bytes().to_vec(),
        argv: workload::argv(&args.command)?
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect(),
        envp: workload::envp(&env)?
            .iter()
            .map(|e| e.as_bytes().to_vec())
            .collect(),
        relay: Some(RelayPlan {
            sandbox_id: args.sandbox_id.clone(),
            generation: args.generation,
            bundle_digest: bundle.digest.clone(),
            hash_binaries: crate::policy::pins(bundle),
            // A container's network has interfaces of its own: every IP
            // connect is performed by the broker or refused.
            own_network: false,
            binaries: named_binaries(&bundle.enforcement.seccomp.identities),
        }),
    };
    // No kernel could load a filter this one refuses: say so now.
    enforcer::build(&plan.filter_spec()?).map_err(LaunchError::Seccomp)?;
    Ok(plan)
}

/// Where the sandbox listens: `--sandbox-listen`, or on TCP every address
/// and the port this host reaches, or the socket's path (both hosts see
/// the directory, under one name unless `--sandbox-listen` says).
fn listen_at(args: &ServeArgs) -> Endpoint {
    match (&args.sandbox_listen, &args.sandbox) {
        (Some(listen), _) => listen.clone(),
        (None, Endpoint::Tcp(addr)) => Endpoint::Tcp(([0, 0, 0, 0], addr.port()).into()),
        (None, unix @ Endpoint::Unix(_)) => unix.clone(),
    }
}

/// Writes `bytes` to a new file at `path` that only this user may read.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), LaunchError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let what = format!("write the bootstrap `{}`", path.display());
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(LaunchError::io(what))
}

/// Attaches to the sandbox at `addr`, for at most `within`, trying again
/// while nothing listens there (no socket file yet, or one left by an
/// earlier sandbox), and while the sandbox refuses when `reattaching` (it
/// may not have seen the old channel drop yet).
async fn attach(
    end: &SupervisorEnd,
    addr: &Endpoint,
    within: Duration,
    reattaching: bool,
) -> Result<SupervisorStream, ChannelError> {
    let deadline = Instant::now() + within;
    let mut pause = RETRY_FIRST;
    loop {
        let attempt = end.connect(addr.clone()).await;
        let retry = match &attempt {
            Ok(_) => false,
            Err(ChannelError::Unreachable(_)) => true,
            Err(_) => reattaching,
        };
        match attempt {
            Err(_) if retry && Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
            Err(e) if retry => {
                return Err(ChannelError::Unreachable(format!(
                    "{e}; gave up after {within:?}"
                )));
            }
            other => return other,
        }
    }
}
