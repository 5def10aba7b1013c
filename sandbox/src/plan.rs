//! The launch plan: what the supervisor hands `openshell-sandbox` on an
//! inherited descriptor, and what the sandbox applies to the workload. It
//! carries the bundle's kernel tables as the compiler wrote them (the
//! Landlock table, the seccomp deny and trap lists) and what the launch
//! decided (working directory, user, command, environment); never policy
//! source, a route, a credential or a key.
//!
//! Both sides turn the tables into the enforcer's specs with the same
//! functions here: the supervisor to report what this kernel will enforce
//! and to judge what the workload may write, the sandbox to enforce it.

use std::path::{Path, PathBuf};

use enforcer::{
    ArgCond, ArgOp, Compat, DenyRule, Errno, FilterSpec, FsAccess, FsRule, NotifyRule, TrappedCall,
};
use policy_bundle::kernel::landlock::Abi;
use policy_bundle::{DeniedSyscall, LandlockMode, LandlockTable, RightsAtAbi, TrappedSyscall};
use serde::{Deserialize, Serialize};

/// The plan format this sandbox reads; a plan of another version is
/// refused, never half understood.
pub const PLAN_VERSION: u32 = 1;

/// First Landlock ABI with TCP port rules and with IPC scoping.
const ABI_NET: u8 = Abi::NET.0;
const ABI_SCOPE: u8 = Abi::SCOPE.0;
/// Beyond this many ports a Landlock port list costs more at launch than
/// it adds behind the broker (which decides every connect anyway).
const MAX_PORT_RULES: u32 = 1024;

/// Why a plan cannot be applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The bundle grants rights on the working directory, and that is `/`.
    #[error(
        "the bundle grants rights on the working directory, and that is `/`: pass `--workdir DIR`"
    )]
    WorkdirIsRoot,
    /// A table names something this build cannot apply.
    #[error("{0}")]
    Unenforceable(String),
    /// The plan is not one this sandbox reads.
    #[error("the launch plan is malformed: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The plan was written for another version of the sandbox.
    #[error(
        "the launch plan has version {0}; this openshell-sandbox reads version {PLAN_VERSION}: install the openshell-sandbox built with the supervisor"
    )]
    Version(u32),
}

/// The user the workload becomes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanUser {
    /// Real, effective and saved uid.
    pub uid: u32,
    /// Real, effective and saved gid.
    pub gid: u32,
    /// The exact supplementary groups.
    pub groups: Vec<u32>,
}

/// The sandbox brokers the workload's trapped calls itself and asks the
/// supervisor over the sandbox protocol, on the descriptor `--relay-fd`
/// names, as this sandbox, enforcing this bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayPlan {
    /// The sandbox's id in the protocol's binding.
    pub sandbox_id: String,
    /// Its generation.
    pub generation: u64,
    /// The digest of the bundle whose tables the plan carries, for the
    /// greeting.
    pub bundle_digest: String,
    /// The bundle pins binaries by SHA-256: each caller's executable is
    /// hashed.
    pub hash_binaries: bool,
    /// The workload has a network namespace of its own (only loopback);
    /// otherwise it shares the host's.
    pub own_network: bool,
    /// The binaries the bundle names by an exact path, which a standalone
    /// sandbox resolves on its host ([`crate::links`]); a supervisor that
    /// sees the workload's filesystem resolves them itself.
    #[serde(default)]
    pub binaries: Vec<crate::links::NamedBinary>,
}

/// Everything the sandbox needs to start the workload. Byte strings are
/// kept as bytes: paths, arguments and the environment need not be UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPlan {
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// The bundle's Landlock table.
    pub landlock: LandlockTable,
    /// The bundle's seccomp deny list.
    pub deny: Vec<DeniedSyscall>,
    /// The bundle's seccomp trap list.
    pub notify: Vec<TrappedSyscall>,
    /// The working directory: where the table's `workdir` rights apply,
    /// and where the workload starts.
    pub workdir: Vec<u8>,
    /// Trees the workload may read besides the table's (the proxy's CA
    /// certificate).
    pub read_only: Vec<Vec<u8>>,
    /// The workload has a PID namespace and a `/proc` of its own.
    pub private_proc: bool,
    /// The workload runs as uid 0: it may not change file modes or times
    /// ([`root_metadata_rules`]).
    pub root_workload: bool,
    /// The workload shares the supervisor's PID namespace
    /// ([`shared_pid_namespace_rules`]).
    pub shared_pid_namespace: bool,
    /// Empty the bounding and ambient capability sets.
    pub drop_bounding: bool,
    /// The user to become; `None` keeps the sandbox's.
    pub user: Option<PlanUser>,
    /// The program's absolute path.
    pub program: Vec<u8>,
    /// The arguments, `argv[0]` included.
    pub argv: Vec<Vec<u8>>,
    /// The whole environment, as `NAME=VALUE`.
    pub envp: Vec<Vec<u8>>,
    /// `Some`: the sandbox keeps the seccomp listener and relays; `None`:
    /// it hands the listener up over the launch link.
    #[serde(default)]
    pub relay: Option<RelayPlan>,
}

impl LaunchPlan {
    /// The plan as the bytes the sandbox reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A plan is plain data with string keys: it always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a plan, refusing one of another version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PlanError> {
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let Versioned { version } = serde_json::from_slice(bytes)?;
        if version != PLAN_VERSION {
            return Err(PlanError::Version(version));
        }
        Ok(serde_json::from_slice(bytes)?)
    }

    /// The Landlock spec for a kernel with ABI `abi`, and notes on what of
    /// the table this kernel cannot add (defense in depth behind the
    /// broker, reported but never a reason to refuse).
    pub fn landlock_spec(
        &self,
        abi: u8,
    ) -> Result<(enforcer::LandlockSpec, Vec<String>), PlanError> {
        let (mut spec, notes) = landlock_spec(&self.landlock, &path(&self.workdir), abi)?;
        spec.private_proc = self.private_proc;
        spec.fs.extend(self.read_only.iter().map(|p| FsRule {
            path: path(p),
            access: FsAccess::READ_FILE | FsAccess::READ_DIR,
        }));
        Ok((spec, notes))
    }

    /// The seccomp filter: the bundle's lists and the rules the launch
    /// adds for a root workload or a shared PID namespace.
    pub fn filter_spec(&self) -> Result<FilterSpec, PlanError> {
        let mut spec = filter_spec(&self.deny, &self.notify)?;
        if self.root_workload {
            spec.deny.extend(root_metadata_rules());
        }
        if self.shared_pid_namespace {
            spec.deny.extend(shared_pid_namespace_rules());
        }
        Ok(spec)
    }
}

fn path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

/// The Landlock spec of `table` for a kernel with ABI `abi`, the table's
/// `workdir` rights applied to `workdir`.
pub fn landlock_spec(
    table: &LandlockTable,
    workdir: &Path,
    abi: u8,
) -> Result<(enforcer::LandlockSpec, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let mut fs = Vec::with_capacity(table.paths.len() + 1);
    for p in &table.paths {
        fs.push(FsRule {
            path: PathBuf::from(&p.path),
            access: rights(&p.access, abi)?,
        });
    }
    if let Some(access) = &table.workdir {
        if workdir == Path::new("/") {
            return Err(PlanError::WorkdirIsRoot);
        }
        fs.push(FsRule {
            path: workdir.to_path_buf(),
            access: rights(access, abi)?,
        });
    }
    let ports = table.tcp_connect_ports.len();
    let tcp_connect_ports = if abi < ABI_NET {
        notes.push(format!(
            "landlock ABI {abi} cannot restrict TCP ports; the connect broker still decides every connect"
        ));
        None
    } else if ports > MAX_PORT_RULES {
        notes.push(format!(
            "{ports} TCP ports are not restricted by landlock (more than {MAX_PORT_RULES}); the connect broker still decides every connect"
        ));
        None
    } else {
        Some(
            table
                .tcp_connect_ports
                .ranges()
                .iter()
                .flat_map(|&(lo, hi)| lo..=hi)
                .collect(),
        )
    };
    let scope = !table.scoped.is_empty();
    if scope && abi < ABI_SCOPE {
        notes.push(format!(
            "landlock ABI {abi} cannot scope signals and abstract unix sockets to the sandbox"
        ));
    }
    let spec = enforcer::LandlockSpec {
        mode: match table.mode {
            LandlockMode::Hard => Compat::Hard,
            LandlockMode::BestEffort => Compat::BestEffort,
        },
        min_abi: table.min_abi,
        fs,
        // Binding is denied (the bundle's statement): an empty list.
        tcp_bind_ports: tcp_connect_ports.as_ref().map(|_| Vec::new()),
        tcp_connect_ports,
        scope_signals_and_abstract_unix: scope && abi >= ABI_SCOPE,
        private_proc: false,
    };
    Ok((spec, notes))
}

/// The rights that exist at `abi`: the bundle splits them by the ABI that
/// introduced each, and a right the kernel does not know is not restricted
/// anywhere either, so granting it adds nothing.
fn rights(split: &[RightsAtAbi], abi: u8) -> Result<FsAccess, PlanError> {
    let mut access = FsAccess::EMPTY;
    for group in split.iter().filter(|g| g.abi <= abi) {
        for name in &group.rights {
            access |= FsAccess::from_name(name).ok_or_else(|| {
                PlanError::Unenforceable(format!("unknown filesystem right `{name}`"))
            })?;
        }
    }
    Ok(access)
}

/// The seccomp filter of the bundle's deny and trap lists.
pub fn filter_spec(
    deny: &[DeniedSyscall],
    notify: &[TrappedSyscall],
) -> Result<FilterSpec, PlanError> {
    let deny = deny
        .iter()
        .map(|d| {
            let errno = Errno::from_name(&d.errno).ok_or_else(|| {
                PlanError::Unenforceable(format!("unknown errno `{}` for `{}`", d.errno, d.syscall))
            })?;
            Ok(DenyRule {
                syscall: d.syscall.clone(),
                errno: errno.raw(),
                arg_conditions: conditions(&d.when)?,
            })
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    let notify = notify
        .iter()
        .map(|n| {
            if TrappedCall::from_name(&n.syscall).is_none() {
                return Err(PlanError::Unenforceable(format!(
                    "the bundle traps `{}`, which this supervisor does not answer: compile the policy with the matching openshell-policy",
                    n.syscall
                )));
            }
            Ok(NotifyRule {
                syscall: n.syscall.clone(),
                arg_conditions: conditions(&n.when)?,
            })
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    if !notify.iter().any(|n| n.syscall == "connect") {
        return Err(PlanError::Unenforceable(
            "the bundle does not trap `connect`".into(),
        ));
    }
    Ok(FilterSpec {
        deny,
        notify,
        wait_killable_recv: true,
    })
}

/// Extra rules for a workload that runs as uid 0, which the policy asked
/// for by name (`run_as user root`). The bundle's deny list refuses setuid
/// bits, owners, extended attributes and inode flags for every workload;
/// plain modes and times stay with the file's owner, and uid 0 owns most of
/// the host. Refusing them everywhere for root is the price of not making
/// a path decision per call (see `docs/threat-model.md`, "File metadata").
#[must_use]
pub fn root_metadata_rules() -> Vec<DenyRule> {
    [
        "chmod",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "utime",
        "utimes",
        "futimesat",
        "utimensat",
    ]
    .into_iter()
    .map(|s| DenyRule {
        syscall: s.to_owned(),
        errno: libc::EPERM,
        arg_conditions: Vec::new(),
    })
    .collect()
}

/// Extra rules for a workload without a PID namespace of its own (a
/// supervisor without `CAP_SYS_ADMIN`): the supervisor and every other
/// process of the workload's user are then nameable, and the kernel lets
/// that user pin them to one CPU or starve them (`SCHED_IDLE`). Refused
/// unless they name the caller (pid 0). In its own PID namespace the
/// workload can name only its own processes and its init, and these stay
/// allowed: runtimes set a thread's affinity by its tid
/// (`pthread_setaffinity_np`), which pid 0 cannot say. The bundle's deny
/// list refuses the other calls that reach another process's limits and
/// priority whatever the namespace.
#[must_use]
pub fn shared_pid_namespace_rules() -> Vec<DenyRule> {
    [
        "sched_setaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
    ]
    .into_iter()
    .map(|s| DenyRule {
        syscall: s.to_owned(),
        errno: libc::EPERM,
        arg_conditions: vec![ArgCond {
            index: 0,
            op: ArgOp::Ne,
            value: 0,
        }],
    })
    .collect()
}

fn conditions(when: &[policy_bundle::ArgCondition]) -> Result<Vec<ArgCond>, PlanError> {
    when.iter()
        .map(|c| {
            if c.arg > 5 {
                return Err(PlanError::Unenforceable(format!(
                    "argument index {} is out of range",
                    c.arg
                )));
            }
            Ok(ArgCond {
                index: u32::from(c.arg),
                op: match c.op {
                    policy_bundle::ArgOp::MaskedEq(mask) => ArgOp::MaskedEq(mask),
                    policy_bundle::ArgOp::Ne => ArgOp::Ne,
                    policy_bundle::ArgOp::Ge => ArgOp::Ge,
                },
                value: c.value,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> policy_bundle::Bundle {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.policy");
        std::fs::write(
            &path,
            "policy \"t\" {\n  landlock hard min_abi 1\n  fs read /usr\n  fs write workdir\n  allow /usr/bin/curl -> example.com:443\n}\n",
        )
        .unwrap();
        let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
        bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics))
    }

    fn plan() -> LaunchPlan {
        let b = bundle();
        LaunchPlan {
            version: PLAN_VERSION,
            landlock: b.enforcement.landlock,
            deny: b.enforcement.seccomp.deny,
            notify: b.enforcement.seccomp.notify,
            workdir: b"/srv/work".to_vec(),
            read_only: vec![b"/run/ca".to_vec()],
            private_proc: true,
            root_workload: false,
            shared_pid_namespace: false,
            drop_bounding: true,
            user: None,
            program: b"/bin/true".to_vec(),
            argv: vec![b"true".to_vec()],
            envp: vec![b"A=\xff".to_vec()],
            relay: None,
        }
    }

    #[test]
    fn rights_follow_the_kernel_abi() {
        let plan = plan();
        let (spec, notes) = plan.landlock_spec(2).unwrap();
        let work = spec
            .fs
            .iter()
            .find(|r| r.path == Path::new("/srv/work"))
            .unwrap();
        assert!(work.access.contains(FsAccess::REFER | FsAccess::WRITE_FILE));
        assert!(
            !work.access.contains(FsAccess::TRUNCATE),
            "ABI 3 right at ABI 2"
        );
        assert_eq!(spec.tcp_connect_ports, None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(spec.private_proc);
        assert!(spec.fs.iter().any(|r| r.path == Path::new("/run/ca")
            && r.access == FsAccess::READ_FILE | FsAccess::READ_DIR));
        let (spec, notes) = plan.landlock_spec(7).unwrap();
        assert_eq!(spec.tcp_connect_ports, Some(vec![53, 443]));
        assert_eq!(spec.tcp_bind_ports, Some(vec![]));
        assert!(spec.scope_signals_and_abstract_unix && notes.is_empty());
        let at_root = LaunchPlan {
            workdir: b"/".to_vec(),
            ..plan
        };
        assert!(matches!(
            at_root.landlock_spec(7),
            Err(PlanError::WorkdirIsRoot)
        ));
    }

    #[test]
    fn the_filter_comes_from_the_bundle_tables() {
        let plan = plan();
        let spec = plan.filter_spec().unwrap();
        assert_eq!(spec.deny.len(), plan.deny.len());
        assert!(spec.notify.iter().any(|n| n.syscall == "sendmmsg"));
        assert!(enforcer::build(&spec).is_ok());
        let root = LaunchPlan {
            root_workload: true,
            shared_pid_namespace: true,
            ..plan.clone()
        };
        let more = root.filter_spec().unwrap();
        assert_eq!(
            more.deny.len(),
            plan.deny.len() + root_metadata_rules().len() + shared_pid_namespace_rules().len()
        );
        let mut bad = plan.clone();
        bad.deny[0].errno = "EWHATEVER".into();
        assert!(bad.filter_spec().is_err());
        let mut bad = plan.clone();
        bad.notify[0].syscall = "accept4".into();
        assert!(bad.filter_spec().is_err());
        let mut bad = plan;
        bad.notify.retain(|n| n.syscall != "connect");
        assert!(bad.filter_spec().is_err());
    }

    #[test]
    fn a_plan_reads_back_exactly_and_another_version_is_refused() {
        let plan = plan();
        assert_eq!(LaunchPlan::from_bytes(&plan.to_bytes()).unwrap(), plan);
        let newer = LaunchPlan {
            version: PLAN_VERSION + 1,
            ..plan
        };
        assert!(matches!(
            LaunchPlan::from_bytes(&newer.to_bytes()),
            Err(PlanError::Version(v)) if v == PLAN_VERSION + 1
        ));
        assert!(matches!(
            LaunchPlan::from_bytes(b"{\"version\": 1}"),
            Err(PlanError::Malformed(_))
        ));
        assert!(matches!(
            LaunchPlan::from_bytes(b"\x00"),
            Err(PlanError::Malformed(_))
        ));
    }
}
