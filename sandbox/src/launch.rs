//! `openshell-sandbox --plan-fd P --control-fd C [--relay-fd R]`:
//! started by the supervisor (`enforcer::spawn_init`) inside the
//! workload's namespaces, it reads the launch plan, applies the bundle's
//! kernel tables to the workload it forks (Landlock and the seccomp
//! filter, installed by the workload before its `exec`), keeps the
//! seccomp listener and brokers ([`crate::brokering`], with the channel
//! R, as a plan with a relay asks) or hands it up over the launch link
//! (`SCM_RIGHTS`), lets the workload run on the supervisor's go, and is
//! then its PID 1 ([`crate::pid1`]) until it ends, when the status goes
//! back over the link.
//!
//! Any failure before the workload runs is reported over the link, and
//! the workload never runs; a supervisor that is gone before the go (the
//! link reads EOF) means the same.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::time::Duration;

use enforcer::{ChildSpec, Credentials, ExitStatus, InitLink, SpawnError};

use crate::pid1::{self, Pid1Error};
use crate::plan::{LaunchPlan, PlanError};
use crate::writable::{User, Writable};

/// Why the workload was not run, or not waited for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The launch link is not usable.
    #[error("cannot use the launch link (--control-fd): {0}")]
    Link(enforcer::Errno),
    /// The plan could not be read.
    #[error("cannot read the launch plan (--plan-fd): {0}")]
    PlanUnreadable(std::io::Error),
    /// The plan is not one this sandbox applies.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Landlock cannot apply the plan's table on this kernel.
    #[error("landlock cannot enforce the bundle on this kernel: {0}")]
    Landlock(enforcer::LandlockError),
    /// The seccomp filter could not be built.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(enforcer::SeccompError),
    /// The plan holds a byte string with a NUL byte.
    #[error("the launch plan's {0} contains a NUL byte")]
    Nul(&'static str),
    /// Forking or setting up the workload failed.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The supervisor went away or said something other than go.
    #[error("the supervisor did not let the workload run: {0}")]
    NoGo(enforcer::Errno),
    /// Being PID 1 failed.
    #[error(transparent)]
    Pid1(#[from] Pid1Error),
    /// The plan asks for a relay without `--relay-fd`, or the reverse.
    #[error("the launch plan and `--relay-fd` disagree on whether this sandbox brokers")]
    RelayMismatch,
    /// The channel to the supervisor could not be set up.
    #[error("cannot attach to the supervisor (--relay-fd): {0}")]
    Attach(#[from] crate::brokering::AttachError),
    /// The mount table, which says where the trees to mount `noexec`
    /// appear, could not be read.
    #[error("cannot read the mount table: {0}")]
    Mounts(std::io::Error),
}

/// Who mounts the trees the workload may write but not execute `noexec`
/// ([`crate::noexec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Noexec {
    /// The supervisor that started this process, in its mount namespace.
    Done,
    /// The workload's child, in a mount namespace of its own.
    Here,
    /// Nobody: this process may not make a mount namespace.
    Unable,
}

/// The descriptors the supervisor passed.
#[derive(Debug, Clone, Copy)]
pub struct Inherited {
    /// `--plan-fd`: the launch plan.
    pub plan: i32,
    /// `--control-fd`: the launch link.
    pub control: i32,
    /// `--relay-fd`: the channel to the supervisor, when the plan says the
    /// sandbox brokers.
    pub relay: Option<i32>,
}

/// Runs the launch described in the module docs; returns how the
/// workload ended.
pub fn launch(fds: Inherited, grace: Duration) -> Result<ExitStatus, LaunchError> {
    let link = InitLink::from_inherited(fds.control).map_err(LaunchError::Link)?;
    let is_init = match pid1::become_init() {
        Ok(is_init) => is_init,
        Err(e) => {
            let _ = link.report_failure(&e.to_string());
            return Err(e.into());
        }
    };
    let started = read_plan(fds.plan).and_then(|plan| {
        let relay = match (plan.relay.clone(), fds.relay) {
            (Some(relay), Some(fd)) => Some((relay, fd, plan.user.clone())),
            (None, None) => None,
            _ => return Err(LaunchError::RelayMismatch),
        };
        let started = start(&plan, Noexec::Done, Own::default())?;
        Ok(((started.pending, started.writable), relay))
    });
    let ((mut pending, writable), relay) = match started {
        Ok(started) => started,
        Err(LaunchError::Spawn(e)) => {
            let _ = link.report_spawn_error(&e);
            return Err(e.into());
        }
        Err(e) => {
            let _ = link.report_failure(&e.to_string());
            return Err(e);
        }
    };
    let workload = pending.pid();
    // The workload does not start a group itself: as its parent, before
    // its exec, this process may make it one.
    let _ = enforcer::signals::set_own_group(workload);
    let Some(listener) = pending.take_listener() else {
        let why = "the workload did not hand over its listener";
        let _ = link.report_failure(why);
        return Err(LaunchError::Link(enforcer::Errno(libc::EPROTO)));
    };
    // Held until the workload ends: the broker's runtime.
    let brokering = match relay {
        None => {
            link.hand_over(listener.as_fd())
                .map_err(LaunchError::Link)?;
            // The supervisor serves it; this process keeps no copy.
            drop(listener);
            None
        }
        Some((relay, fd, user)) => {
            link.report_ready().map_err(LaunchError::Link)?;
            match crate::brokering::start(&relay, fd, listener, writable, user.as_ref()) {
                Ok(runtime) => Some(runtime),
                Err(e) => {
                    let e = LaunchError::from(e);
                    let _ = link.report_failure(&e.to_string());
                    return Err(e);
                }
            }
        }
    };
    // Dropping `pending` on the error kills the workload before its exec.
    link.wait_for_go().map_err(LaunchError::NoGo)?;
    if let Err(e) = pending.start() {
        let _ = link.report_spawn_error(&e);
        return Err(e.into());
    }
    link.report_started().map_err(LaunchError::Link)?;
    let status = pid1::supervise(workload, is_init, grace, &pid1::Watched::default(), None)?;
    if let Some((relaying, supervisor)) = &brokering {
        // A supervisor that does not answer still learns the status below.
        let _ = relaying.report_ended(supervisor, pid1::exit_code(status));
    }
    // The supervisor falls back on this process's exit if the send fails.
    let _ = link.report_status(status);
    if !is_init {
        enforcer::kill_descendants();
    }
    Ok(status)
}

/// A workload forked and waiting for its go.
pub(crate) struct Started {
    pub pending: enforcer::Pending,
    /// What it can write, as the broker judges planted code.
    pub writable: Writable,
    /// The kernel's Landlock ABI.
    pub landlock_abi: u8,
    /// Its Landlock ruleset is in force.
    pub landlock_on: bool,
    /// Trees it may write but not execute are left executable
    /// ([`Noexec::Unable`]).
    pub noexec_missing: bool,
}

/// What a further command run from the workload's plan has of its own.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Own<'a> {
    /// Where it starts, instead of the plan's working directory (whose
    /// rights stay where the plan puts them).
    pub cwd: Option<&'a [u8]>,
    /// Its standard streams, instead of this process's.
    pub stdio: [Option<BorrowedFd<'a>>; 3],
}

/// Prepares Landlock and the filter, and forks the workload, which
/// installs both (and, with [`Noexec::Here`], mounts the trees it may
/// write but not execute `noexec` first) and waits for the go.
pub(crate) fn start(
    plan: &LaunchPlan,
    noexec: Noexec,
    own: Own<'_>,
) -> Result<Started, LaunchError> {
    let abi = enforcer::kernel_abi().map_err(LaunchError::Landlock)?;
    // The supervisor reported the notes when it prepared the same spec.
    let (spec, _notes) = plan.landlock_spec(abi)?;
    let ruleset = enforcer::prepare(&spec).map_err(LaunchError::Landlock)?;
    let landlock_on = !ruleset
        .report()
        .downgrades
        .iter()
        .any(|d| matches!(d, enforcer::Downgrade::Unavailable));
    let writable = Writable::new(
        &spec.fs,
        landlock_on,
        plan.user.as_ref().map(|u| User {
            uid: u.uid,
            gid: u.gid,
            groups: u.groups.clone(),
        }),
        enforcer::own_ids().0,
    );
    let filter = enforcer::build(&plan.filter_spec()?).map_err(LaunchError::Seccomp)?;
    let c_string = |bytes: &[u8], what| CString::new(bytes).map_err(|_| LaunchError::Nul(what));
    let trees = match noexec {
        Noexec::Done => crate::noexec::Plan::default(),
        Noexec::Here | Noexec::Unable => {
            let mounts = crate::mountinfo::read().map_err(LaunchError::Mounts)?;
            crate::noexec::plan(&spec.fs, &mounts)
        }
    };
    let noexec_missing = noexec == Noexec::Unable && !trees.noexec.is_empty();
    let paths = |paths: &[std::path::PathBuf]| {
        paths
            .iter()
            .map(|p| c_string(p.as_os_str().as_bytes(), "noexec trees"))
            .collect::<Result<Vec<_>, _>>()
    };
    let (noexec_trees, exec_again) = if noexec == Noexec::Here {
        (paths(&trees.noexec)?, paths(&trees.exec_again)?)
    } else {
        (Vec::new(), Vec::new())
    };
    let program = c_string(&plan.program, "program")?;
    let cwd = c_string(own.cwd.unwrap_or(&plan.workdir), "working directory")?;
    let argv = plan
        .argv
        .iter()
        .map(|a| c_string(a, "arguments"))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = plan
        .envp
        .iter()
        .map(|e| c_string(e, "environment"))
        .collect::<Result<Vec<_>, _>>()?;
    let last_cap = enforcer::cap_last_cap().map_err(SpawnError::Prepare)?;
    let identity = plan.user.as_ref().map(|u| Credentials {
        uid: u.uid,
        gid: u.gid,
        groups: &u.groups,
    });
    let spec = ChildSpec {
        // The namespaces are this process's already.
        new_netns: false,
        bind_file: None,
        noexec: &noexec_trees,
        exec_again: &exec_again,
        stdio: own.stdio,
        drop_bounding: plan.drop_bounding,
        last_cap,
        identity,
        cwd: &cwd,
        ruleset: &ruleset,
        filter: &filter,
        program: &program,
        argv: &argv,
        envp: &envp,
    };
    Ok(Started {
        pending: enforcer::spawn(&spec)?,
        writable,
        landlock_abi: abi,
        landlock_on,
        noexec_missing,
    })
}

fn read_plan(fd: i32) -> Result<LaunchPlan, LaunchError> {
    let fd = enforcer::signals::take_inherited_fd(fd)
        .map_err(|e| LaunchError::PlanUnreadable(e.into()))?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(LaunchError::PlanUnreadable)?;
    Ok(LaunchPlan::from_bytes(&bytes)?)
}
