//! From the compiled bundle to what the enforcer applies: the Landlock spec
//! for this kernel and the seccomp filter. The bundle is the single source
//! of the syscall lists; nothing here adds or drops a rule silently.

use std::path::{Path, PathBuf};

use enforcer::{
    ArgCond, ArgOp, Compat, DenyRule, Errno, FilterSpec, FsAccess, FsRule, NotifyRule, TrappedCall,
};
use policy_bundle::LandlockMode;
use policy_bundle::kernel::landlock::Abi;
use policy_bundle::{Bundle, LandlockTable, RightsAtAbi, SeccompTable};

use crate::error::LaunchError;

/// First Landlock ABI with TCP port rules and with IPC scoping.
const ABI_NET: u8 = Abi::NET.0;
const ABI_SCOPE: u8 = Abi::SCOPE.0;
/// Beyond this many ports a Landlock port list costs more at launch than
/// it adds behind the broker (which decides every connect anyway).
const MAX_PORT_RULES: u32 = 1024;

/// Reads and verifies a bundle: format version and digest.
pub fn load_bundle(path: &Path) -> Result<Bundle, LaunchError> {
    let bytes = std::fs::read(path).map_err(|source| LaunchError::BundleUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    Bundle::from_slice(&bytes).map_err(|source| LaunchError::BundleRefused {
        path: path.to_path_buf(),
        source,
    })
}

/// The Landlock spec for a kernel with ABI `abi`, and notes on the parts
/// of the bundle that this kernel cannot add (defense in depth behind the
/// broker, reported but never a reason to refuse).
pub fn landlock_spec(
    table: &LandlockTable,
    workdir: &Path,
    abi: u8,
) -> Result<(enforcer::LandlockSpec, Vec<String>), LaunchError> {
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
            return Err(LaunchError::Usage(
                "the bundle grants rights on the working directory, and that is `/`: pass `--workdir DIR`"
                    .into(),
            ));
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
fn rights(split: &[RightsAtAbi], abi: u8) -> Result<FsAccess, LaunchError> {
    let mut access = FsAccess::EMPTY;
    for group in split.iter().filter(|g| g.abi <= abi) {
        for name in &group.rights {
            access |= FsAccess::from_name(name).ok_or_else(|| {
                LaunchError::Unenforceable(format!("unknown filesystem right `{name}`"))
            })?;
        }
    }
    Ok(access)
}

/// The seccomp filter the bundle asks for.
pub fn filter_spec(table: &SeccompTable) -> Result<FilterSpec, LaunchError> {
    let deny = table
        .deny
        .iter()
        .map(|d| {
            let errno = Errno::from_name(&d.errno).ok_or_else(|| {
                LaunchError::Unenforceable(format!(
                    "unknown errno `{}` for `{}`",
                    d.errno, d.syscall
                ))
            })?;
            Ok(DenyRule {
                syscall: d.syscall.clone(),
                errno: errno.raw(),
                arg_conditions: conditions(&d.when)?,
            })
        })
        .collect::<Result<Vec<_>, LaunchError>>()?;
    let notify = table
        .notify
        .iter()
        .map(|n| {
            if TrappedCall::from_name(&n.syscall).is_none() {
                return Err(LaunchError::Unenforceable(format!(
                    "the bundle traps `{}`, which this supervisor does not answer: compile the policy with the matching openshell-policy",
                    n.syscall
                )));
            }
            Ok(NotifyRule {
                syscall: n.syscall.clone(),
                arg_conditions: conditions(&n.when)?,
            })
        })
        .collect::<Result<Vec<_>, LaunchError>>()?;
    if !notify.iter().any(|n| n.syscall == "connect") {
        return Err(LaunchError::Unenforceable(
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

fn conditions(when: &[policy_bundle::ArgCondition]) -> Result<Vec<ArgCond>, LaunchError> {
    when.iter()
        .map(|c| {
            if c.arg > 5 {
                return Err(LaunchError::Unenforceable(format!(
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

    fn bundle() -> Bundle {
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

    #[test]
    fn rights_follow_the_kernel_abi() {
        let b = bundle();
        let (spec, notes) =
            landlock_spec(&b.enforcement.landlock, Path::new("/srv/work"), 2).unwrap();
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
        let (spec, notes) =
            landlock_spec(&b.enforcement.landlock, Path::new("/srv/work"), 7).unwrap();
        assert_eq!(spec.tcp_connect_ports, Some(vec![53, 443]));
        assert_eq!(spec.tcp_bind_ports, Some(vec![]));
        assert!(spec.scope_signals_and_abstract_unix && notes.is_empty());
        assert!(landlock_spec(&b.enforcement.landlock, Path::new("/"), 7).is_err());
    }

    #[test]
    fn the_broker_answers_exactly_the_calls_the_compiler_traps() {
        let trapped: std::collections::BTreeSet<String> = policy_bundle::kernel::notify_list()
            .into_iter()
            .map(|t| t.syscall)
            .collect();
        let answered = TrappedCall::ALL.map(|c| c.name().to_owned());
        assert_eq!(trapped, answered.into_iter().collect());
    }

    #[test]
    fn the_filter_comes_from_the_bundle_tables() {
        let b = bundle();
        let spec = filter_spec(&b.enforcement.seccomp).unwrap();
        assert_eq!(spec.deny.len(), b.enforcement.seccomp.deny.len());
        assert!(spec.notify.iter().any(|n| n.syscall == "sendmmsg"));
        assert!(enforcer::build(&spec).is_ok());
        let mut table = b.enforcement.seccomp.clone();
        table.deny[0].errno = "EWHATEVER".into();
        assert!(filter_spec(&table).is_err());
        let mut table = b.enforcement.seccomp.clone();
        table.notify[0].syscall = "accept4".into();
        assert!(filter_spec(&table).is_err());
    }
}
