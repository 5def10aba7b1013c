//! Landlock: filesystem and TCP-port rights, applied in two phases.
//!
//! Landlock is allow-list only: every right in the *handled* set is denied
//! except beneath the paths (or on the ports) a rule grants it for. We handle
//! every filesystem right the running kernel knows, so a path that no rule
//! names is closed for all of them.
//!
//! The work is split so that nothing allocates after `fork`:
//! [`prepare`] runs in the parent (creates the ruleset fd, opens each path
//! with `O_PATH`, adds every rule, and reports what the kernel cannot keep);
//! [`PreparedRuleset::restrict_self`] runs in the forked child and is one raw
//! system call on the fd that the child inherited. The ruleset fd is
//! close-on-exec, so the workload never holds it.
//!
//! The syscalls are called directly rather than through the `landlock`
//! crate: that crate's compatibility layer decides silently what to drop,
//! while the supervisor must print exactly what was dropped, and hard mode
//! must refuse instead.

#![forbid(unsafe_code)]

use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use policy_bundle::kernel::landlock::{Abi, FsRight};

use crate::errno::Errno;
use crate::sys;

pub(crate) const CREATE_RULESET_VERSION: libc::c_ulong = 1;
pub(crate) const RULE_PATH_BENEATH: libc::c_long = 1;
pub(crate) const RULE_NET_PORT: libc::c_long = 2;
const ACCESS_NET_BIND_TCP: u64 = 1;
const ACCESS_NET_CONNECT_TCP: u64 = 2;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1;
const SCOPE_SIGNAL: u64 = 2;
/// First ABI with TCP port rules.
const ABI_NET: u8 = Abi::NET.0;
/// First ABI with IPC scoping.
const ABI_SCOPE: u8 = Abi::SCOPE.0;

/// A set of Landlock filesystem rights (`LANDLOCK_ACCESS_FS_*`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FsAccess(u64);

/// Every known right with its name and the first ABI that has it.
fn rights() -> impl Iterator<Item = (FsAccess, &'static str, u8)> {
    FsRight::ALL
        .into_iter()
        .map(|r| (FsAccess(r.bit()), r.name(), r.since().0))
}

impl FsAccess {
    /// No right, the start of a set built with [`FsAccess::union`].
    pub const EMPTY: Self = Self(0);
    /// `LANDLOCK_ACCESS_FS_EXECUTE`, since ABI 1.
    pub const EXECUTE: Self = Self(FsRight::Execute.bit());
    /// `LANDLOCK_ACCESS_FS_WRITE_FILE`, since ABI 1.
    pub const WRITE_FILE: Self = Self(FsRight::WriteFile.bit());
    /// `LANDLOCK_ACCESS_FS_READ_FILE`, since ABI 1.
    pub const READ_FILE: Self = Self(FsRight::ReadFile.bit());
    /// `LANDLOCK_ACCESS_FS_READ_DIR`, since ABI 1.
    pub const READ_DIR: Self = Self(FsRight::ReadDir.bit());
    /// `LANDLOCK_ACCESS_FS_REMOVE_DIR`, since ABI 1.
    pub const REMOVE_DIR: Self = Self(FsRight::RemoveDir.bit());
    /// `LANDLOCK_ACCESS_FS_REMOVE_FILE`, since ABI 1.
    pub const REMOVE_FILE: Self = Self(FsRight::RemoveFile.bit());
    /// `LANDLOCK_ACCESS_FS_MAKE_DIR`, since ABI 1.
    pub const MAKE_DIR: Self = Self(FsRight::MakeDir.bit());
    /// `LANDLOCK_ACCESS_FS_MAKE_REG`, since ABI 1.
    pub const MAKE_REG: Self = Self(FsRight::MakeReg.bit());
    /// `LANDLOCK_ACCESS_FS_MAKE_SYM`, since ABI 1.
    pub const MAKE_SYM: Self = Self(FsRight::MakeSym.bit());
    /// `LANDLOCK_ACCESS_FS_REFER`, since ABI 2.
    pub const REFER: Self = Self(FsRight::Refer.bit());
    /// `LANDLOCK_ACCESS_FS_TRUNCATE`, since ABI 3.
    pub const TRUNCATE: Self = Self(FsRight::Truncate.bit());
    /// `LANDLOCK_ACCESS_FS_IOCTL_DEV`, since ABI 5.
    pub const IOCTL_DEV: Self = Self(FsRight::IoctlDev.bit());
    /// Every right this crate knows.
    pub const ALL: Self = Self((1 << FsRight::ALL.len()) - 1);
    /// The rights that mean something on a non-directory; the kernel refuses
    /// a rule on a file that grants any other.
    pub(crate) const FILE: Self = Self(
        Self::EXECUTE.0
            | Self::WRITE_FILE.0
            | Self::READ_FILE.0
            | Self::TRUNCATE.0
            | Self::IOCTL_DEV.0,
    );

    /// The raw `LANDLOCK_ACCESS_FS_*` bits.
    #[must_use]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Builds a set from raw bits, refusing bits this crate does not know
    /// (an unknown bit would make the kernel reject the whole ruleset).
    #[must_use]
    pub const fn from_bits(bits: u64) -> Option<Self> {
        if bits & !Self::ALL.0 == 0 {
            Some(Self(bits))
        } else {
            None
        }
    }

    /// `|` for `const` items, such as the supervisor's table of write
    /// rights.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// `&`, usable in `const` items.
    #[must_use]
    pub const fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// The rights of `self` that `other` lacks: what a kernel without
    /// `other` has to drop.
    #[must_use]
    pub const fn difference(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Whether `self` has every right of `other` (so always for an empty
    /// `other`).
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// No right at all; a rule with no right grants nothing.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The lowest Landlock ABI that knows every right in the set (1 for the
    /// empty set), so a policy can state which kernels it needs.
    #[must_use]
    pub fn min_abi(self) -> u8 {
        rights()
            .filter(|(right, _, _)| self.contains(*right))
            .map(|(_, _, abi)| abi)
            .max()
            .unwrap_or(1)
    }

    /// Every right a kernel with this ABI can restrict.
    #[must_use]
    pub fn supported_by_abi(abi: u8) -> Self {
        rights()
            .filter(|(_, _, min)| *min <= abi)
            .fold(Self::EMPTY, |acc, (right, _, _)| acc.union(right))
    }

    /// The right called `name` (`read_file`, `make_dir`, ... as in the
    /// kernel's `LANDLOCK_ACCESS_FS_*` names, lowercase).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        FsRight::from_name(name).map(|r| Self(r.bit()))
    }

    /// The single rights in the set, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Self> {
        rights()
            .map(|(right, _, _)| right)
            .filter(move |right| self.contains(*right))
    }
}

impl std::ops::BitOr for FsAccess {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl std::ops::BitOrAssign for FsAccess {
    fn bitor_assign(&mut self, rhs: Self) {
        *self = self.union(rhs);
    }
}

impl std::ops::BitAnd for FsAccess {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        self.intersection(rhs)
    }
}

impl fmt::Display for FsAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (right, name, _) in rights() {
            if self.contains(right) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

impl fmt::Debug for FsAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FsAccess({self})")
    }
}

/// What to do when the kernel cannot keep part of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compat {
    /// Refuse: nothing is applied unless everything can be.
    Hard,
    /// Apply the best the kernel offers and report every gap.
    BestEffort,
}

/// Rights granted beneath one path (or on one file). The path is opened
/// when the ruleset is prepared, following symlinks: the rule covers the
/// file or tree it resolves to then, whatever the name points to later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRule {
    /// A path that does not exist drops the rule
    /// ([`Downgrade::MissingPath`]); one through a `/proc` magic link is
    /// refused ([`LandlockError::MagicLink`]).
    pub path: PathBuf,
    /// Granted on the file, or on everything beneath the directory.
    pub access: FsAccess,
}

/// Everything Landlock is asked to enforce on the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockSpec {
    /// Whether a gap refuses the launch or is reported.
    pub mode: Compat,
    /// The oldest ABI the policy accepts; hard mode refuses older kernels.
    pub min_abi: u8,
    /// Every path the workload may touch; all others are closed for every
    /// handled right.
    pub fs: Vec<FsRule>,
    /// `None`: TCP connect is not handled by Landlock; `Some(ports)`: only
    /// these ports may be connected to.
    pub tcp_connect_ports: Option<Vec<u16>>,
    /// As `tcp_connect_ports`, for bind.
    pub tcp_bind_ports: Option<Vec<u16>>,
    /// Deny signals to, and abstract unix sockets of, processes outside the
    /// sandbox (ABI 6 scoping).
    pub scope_signals_and_abstract_unix: bool,
    /// The child sees a `/proc` of its own ([`InitSpec::new_pidns`](crate::InitSpec)):
    /// a rule naming the caller's procfs would name inodes the workload
    /// never sees, so every rule on procfs is opened by the child, in its
    /// `/proc`.
    pub private_proc: bool,
}

/// One thing the kernel could not enforce as written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Downgrade {
    /// Landlock is not built in or is disabled at boot: nothing is enforced.
    Unavailable,
    /// The kernel ABI is older than the spec's minimum.
    AbiBelowMinimum {
        /// The running kernel's ABI.
        kernel: u8,
        /// The spec's `min_abi`.
        required: u8,
    },
    /// A rule grants rights this kernel cannot handle; they were dropped from
    /// the rule (and are not restricted anywhere, except `refer`, which ABI 1
    /// always denies across directories).
    RightsUnsupported {
        /// The rule's path, as written.
        path: PathBuf,
        /// The rights dropped from it.
        rights: FsAccess,
    },
    /// The rule's path does not exist; the rule was dropped.
    MissingPath {
        /// The rule's path, as written.
        path: PathBuf,
    },
    /// The path is not a directory, so rights that only apply to directories
    /// were dropped; nothing is lost by it.
    NotApplicableToFile {
        /// The rule's path, as written.
        path: PathBuf,
        /// The directory-only rights dropped from it.
        rights: FsAccess,
    },
    /// Rights no rule names that this kernel cannot restrict: they stay
    /// allowed everywhere.
    UnrestrictedRights {
        /// Left allowed on every path.
        rights: FsAccess,
    },
    /// TCP connect port rules need ABI 4; ports are not restricted.
    TcpConnectUnsupported,
    /// TCP bind port rules need ABI 4; ports are not restricted.
    TcpBindUnsupported,
    /// IPC scoping needs ABI 6; signals and abstract sockets are not scoped.
    ScopingUnsupported,
}

impl Downgrade {
    /// Whether hard mode must refuse because of this gap. Rights that no
    /// rule names and that the kernel cannot restrict are accepted: the
    /// spec's `min_abi` is the contract for those. A missing path is
    /// accepted too: its rule grants nothing, so the sandbox is stricter
    /// than written, never looser (and a policy stays usable across
    /// distributions, say with and without `/lib64`); it is reported.
    #[must_use]
    pub(crate) fn refused_in_hard_mode(&self) -> bool {
        !matches!(
            self,
            Self::NotApplicableToFile { .. }
                | Self::UnrestrictedRights { .. }
                | Self::MissingPath { .. }
        )
    }
}

impl fmt::Display for Downgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unavailable => write!(f, "landlock is not available: nothing is enforced"),
            Self::AbiBelowMinimum { kernel, required } => {
                write!(
                    f,
                    "kernel landlock ABI {kernel} is below the required {required}"
                )
            }
            Self::RightsUnsupported { path, rights } => write!(
                f,
                "`{}`: rights `{rights}` are unknown to this kernel and were dropped",
                path.display()
            ),
            Self::MissingPath { path } => {
                write!(
                    f,
                    "`{}` does not exist; its rule was dropped",
                    path.display()
                )
            }
            Self::NotApplicableToFile { path, rights } => write!(
                f,
                "`{}` is not a directory; directory rights `{rights}` were dropped",
                path.display()
            ),
            Self::UnrestrictedRights { rights } => {
                write!(
                    f,
                    "this kernel cannot restrict `{rights}`: allowed everywhere"
                )
            }
            Self::TcpConnectUnsupported => {
                write!(
                    f,
                    "TCP connect ports are not restricted (needs ABI {ABI_NET})"
                )
            }
            Self::TcpBindUnsupported => {
                write!(f, "TCP bind ports are not restricted (needs ABI {ABI_NET})")
            }
            Self::ScopingUnsupported => write!(
                f,
                "signals and abstract unix sockets are not scoped (needs ABI {ABI_SCOPE})"
            ),
        }
    }
}

/// What [`prepare`] made of a spec on this kernel, for the supervisor to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyReport {
    /// What the kernel reported, 0 without Landlock.
    pub kernel_abi: u8,
    pub(crate) mode: Compat,
    /// Filesystem rights restricted everywhere no rule grants them.
    pub handled_fs: FsAccess,
    /// Every gap, in the order found; empty when the spec is enforced as
    /// written.
    pub downgrades: Vec<Downgrade>,
}

impl ApplyReport {
    /// True when nothing was loosened: every gap is one hard mode accepts
    /// (the sandbox is as written, or stricter).
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.downgrades.iter().all(|d| !d.refused_in_hard_mode())
    }
}

/// Why [`prepare`] built no ruleset; nothing has been applied to any
/// process yet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// Hard mode on a kernel older than the spec's `min_abi` (or without
    /// Landlock).
    #[error("kernel landlock ABI {kernel} is below the required {required}")]
    AbiTooLow {
        /// The running kernel's ABI.
        kernel: u8,
        /// The spec's `min_abi`.
        required: u8,
    },
    /// Hard mode, and these gaps would loosen the sandbox.
    #[error("hard mode cannot honour the landlock spec: {}", join(.0))]
    CannotHonour(Vec<Downgrade>),
    /// `landlock_create_ruleset` failed other than with "not supported".
    #[error("cannot query the landlock ABI")]
    QueryAbi(#[source] io::Error),
    /// A rule's path exists but cannot be opened, or, once open, its place
    /// in `/proc` cannot be told.
    #[error("cannot open `{}`", .path.display())]
    OpenPath {
        /// The rule's path, as written.
        path: PathBuf,
        /// From `open`, `fstatfs` or `readlink`.
        #[source]
        source: io::Error,
    },
    /// See the `procfs` module: the path resolved in the supervisor.
    #[error(
        "`{}` resolves to `{}`, one process's entries in /proc (through `self`, `thread-self`, `net` or `mounts`, the supervisor's: its network namespace, command line and mounts), never the workload's own: a path rule cannot name each process's own entries; remove the rule",
        .path.display(), .resolved.display()
    )]
    ProcessEntry {
        /// The rule's path, as written.
        path: PathBuf,
        /// Where it leads in the supervisor's own `/proc`.
        resolved: PathBuf,
    },
    #[error(
        "`{}` goes through a magic link of /proc (`root`, `cwd`, `exe`, `fd`, `ns`...), which leads out of /proc to whatever it points at; name that path instead",
        .path.display()
    )]
    /// A rule's path crosses a `/proc` magic link, which would grant the
    /// rights wherever the link points.
    MagicLink {
        /// The rule's path, as written.
        path: PathBuf,
    },
    /// `landlock_create_ruleset` failed on a kernel that has Landlock.
    #[error("cannot create the landlock ruleset")]
    CreateRuleset(#[source] io::Error),
    /// The kernel refused a path rule it should take.
    #[error("cannot add the landlock rule for `{}`", .path.display())]
    AddPathRule {
        /// The rule's path, as written.
        path: PathBuf,
        /// From `landlock_add_rule`.
        #[source]
        source: io::Error,
    },
    /// The kernel refused a TCP port rule.
    #[error("cannot add the landlock rule for TCP port {port}")]
    AddPortRule {
        /// The port of the refused rule.
        port: u16,
        /// From `landlock_add_rule`.
        #[source]
        source: io::Error,
    },
}

fn join(items: &[Downgrade]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The running kernel's Landlock ABI; 0 when Landlock is not built in or
/// disabled at boot.
pub fn kernel_abi() -> Result<u8, LandlockError> {
    match sys::landlock::abi_version() {
        Ok(abi) => Ok(u8::try_from(abi).unwrap_or(u8::MAX)),
        Err(Errno(libc::ENOSYS | libc::EOPNOTSUPP)) => Ok(0),
        Err(e) => Err(LandlockError::QueryAbi(e.into())),
    }
}

/// A ruleset built in the parent, ready to be enforced by a forked child.
#[derive(Debug)]
pub struct PreparedRuleset {
    /// `None` only in best-effort mode on a kernel without Landlock.
    fd: Option<OwnedFd>,
    /// Rules on the workload's own `/proc` entries (with `private_proc`,
    /// on its procfs), opened by the child.
    own: Vec<OwnRule>,
    report: ApplyReport,
}

/// A rule under `/proc/self` (or a link into it), or with `private_proc`
/// anywhere on procfs, that the child opens: in the parent it would name
/// the supervisor's entries or procfs (see `procfs`).
#[derive(Debug)]
struct OwnRule {
    path: CString,
    access: u64,
}

impl PreparedRuleset {
    /// What was dropped or downgraded on this kernel.
    #[must_use]
    pub fn report(&self) -> &ApplyReport {
        &self.report
    }

    /// Enforces the ruleset on the calling thread and everything it later
    /// forks or execs. Async-signal-safe: one syscall, no allocation, so it
    /// may run in a child forked from a multi-threaded parent. The kernel
    /// requires `no_new_privs` (or `CAP_SYS_ADMIN`) first. A no-op when the
    /// report says Landlock is unavailable.
    ///
    /// Before that it adds the rules on the workload's own `/proc` entries:
    /// opened here, `/proc/self` is the caller's (the workload's, after
    /// `exec`), and `/proc` the caller's procfs. Magic links (`/proc/self/root`, `fd/*`, `cwd`, `exe`, `ns/*`)
    /// are refused (`ELOOP`): they lead out of `/proc`. A path this process
    /// lacks grants nothing and is skipped, as in the parent.
    pub fn restrict_self(&self) -> Result<(), Errno> {
        let Some(fd) = &self.fd else {
            return Ok(());
        };
        for rule in &self.own {
            add_own_rule(fd, rule)?;
        }
        sys::landlock::restrict_self(fd.as_fd())
    }
}

/// Async-signal-safe: syscalls on memory prepared before `fork`.
fn add_own_rule(ruleset: &OwnedFd, rule: &OwnRule) -> Result<(), Errno> {
    let path_fd = match sys::landlock::open_path_no_magiclinks(&rule.path) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR)) => return Ok(()),
        Err(e) => return Err(e),
    };
    // `path_fd` is closed on return (close is async-signal-safe).
    sys::landlock::add_path_beneath_rule(ruleset.as_fd(), rule.access, path_fd.as_fd())
}

/// A rule whose path is open and whose rights fit this kernel.
struct OpenRule<'a> {
    path: &'a Path,
    fd: OwnedFd,
    access: FsAccess,
}

/// Builds the ruleset in the calling (parent) process; see the module docs.
pub fn prepare(spec: &LandlockSpec) -> Result<PreparedRuleset, LandlockError> {
    let abi = kernel_abi()?;
    let hard = spec.mode == Compat::Hard;
    let required = spec.min_abi.max(1);
    if hard && abi < required {
        return Err(LandlockError::AbiTooLow {
            kernel: abi,
            required,
        });
    }
    let supported = FsAccess::supported_by_abi(abi);
    let mut report = ApplyReport {
        kernel_abi: abi,
        mode: spec.mode,
        handled_fs: supported,
        downgrades: Vec::new(),
    };
    if abi < required {
        report.downgrades.push(Downgrade::AbiBelowMinimum {
            kernel: abi,
            required,
        });
    }
    if abi == 0 {
        report.downgrades.push(Downgrade::Unavailable);
        return Ok(PreparedRuleset {
            fd: None,
            own: Vec::new(),
            report,
        });
    }
    let unrestricted = FsAccess::ALL
        .difference(supported)
        .difference(FsAccess::REFER);
    if !unrestricted.is_empty() {
        report.downgrades.push(Downgrade::UnrestrictedRights {
            rights: unrestricted,
        });
    }

    let (rules, own) = open_rules(spec, supported, &mut report.downgrades)?;
    let (handled_net, scoped) = net_and_scope(spec, abi, &mut report.downgrades);
    if hard {
        let refused: Vec<Downgrade> = report
            .downgrades
            .iter()
            .filter(|d| d.refused_in_hard_mode())
            .cloned()
            .collect();
        if !refused.is_empty() {
            return Err(LandlockError::CannotHonour(refused));
        }
    }

    let ruleset = sys::landlock::create_ruleset(supported.bits(), handled_net, scoped)
        .map_err(|e| LandlockError::CreateRuleset(e.into()))?;
    for rule in &rules {
        sys::landlock::add_path_beneath_rule(ruleset.as_fd(), rule.access.bits(), rule.fd.as_fd())
            .map_err(|e| LandlockError::AddPathRule {
                path: rule.path.to_path_buf(),
                source: e.into(),
            })?;
    }
    for (ports, right) in [
        (&spec.tcp_connect_ports, ACCESS_NET_CONNECT_TCP),
        (&spec.tcp_bind_ports, ACCESS_NET_BIND_TCP),
    ] {
        let Some(ports) = ports else { continue };
        if handled_net & right == 0 {
            continue;
        }
        for &port in ports {
            sys::landlock::add_net_port_rule(ruleset.as_fd(), right, u64::from(port)).map_err(
                |e| LandlockError::AddPortRule {
                    port,
                    source: e.into(),
                },
            )?;
        }
    }
    Ok(PreparedRuleset {
        fd: Some(ruleset),
        own,
        report,
    })
}

/// Opens every rule's path and trims its rights to what the kernel and the
/// file type allow, recording each trim. Rules on the opener's own `/proc`
/// entries (on any of procfs, with `private_proc`) come back apart, for
/// the child to open (the file type is the same in both processes).
fn open_rules<'a>(
    spec: &'a LandlockSpec,
    supported: FsAccess,
    downgrades: &mut Vec<Downgrade>,
) -> Result<(Vec<OpenRule<'a>>, Vec<OwnRule>), LandlockError> {
    let mut rules = Vec::with_capacity(spec.fs.len());
    let mut own = Vec::new();
    for rule in &spec.fs {
        let unsupported = rule.access.difference(supported);
        if !unsupported.is_empty() {
            downgrades.push(Downgrade::RightsUnsupported {
                path: rule.path.clone(),
                rights: unsupported,
            });
        }
        let file = match open_path(&rule.path) {
            Ok(file) => file,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                downgrades.push(Downgrade::MissingPath {
                    path: rule.path.clone(),
                });
                continue;
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(LandlockError::MagicLink {
                    path: rule.path.clone(),
                });
            }
            Err(source) => {
                return Err(LandlockError::OpenPath {
                    path: rule.path.clone(),
                    source,
                });
            }
        };
        let own_link = crate::procfs::is_own_link(&rule.path);
        let child_opens = own_link
            || (spec.private_proc
                && crate::procfs::is_procfs(&file).map_err(|source| LandlockError::OpenPath {
                    path: rule.path.clone(),
                    source,
                })?);
        match crate::procfs::process_entry(&file) {
            Ok(_) if own_link => {}
            Ok(None) => {}
            Ok(Some(resolved)) => {
                return Err(LandlockError::ProcessEntry {
                    path: rule.path.clone(),
                    resolved,
                });
            }
            Err(source) => {
                return Err(LandlockError::OpenPath {
                    path: rule.path.clone(),
                    source,
                });
            }
        }
        let is_dir = file
            .metadata()
            .map_err(|source| LandlockError::OpenPath {
                path: rule.path.clone(),
                source,
            })?
            .is_dir();
        let mut access = rule.access.intersection(supported);
        if !is_dir {
            let dir_only = access.difference(FsAccess::FILE);
            if !dir_only.is_empty() {
                downgrades.push(Downgrade::NotApplicableToFile {
                    path: rule.path.clone(),
                    rights: dir_only,
                });
            }
            access = access.intersection(FsAccess::FILE);
        }
        if access.is_empty() {
            continue;
        }
        if child_opens {
            let path = CString::new(rule.path.as_os_str().as_encoded_bytes()).map_err(|_| {
                LandlockError::OpenPath {
                    path: rule.path.clone(),
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                }
            })?;
            own.push(OwnRule {
                path,
                access: access.bits(),
            });
        } else {
            rules.push(OpenRule {
                path: &rule.path,
                fd: file.into(),
                access,
            });
        }
    }
    Ok((rules, own))
}

/// The handled network rights and scopes this kernel can take.
fn net_and_scope(spec: &LandlockSpec, abi: u8, downgrades: &mut Vec<Downgrade>) -> (u64, u64) {
    let mut handled_net = 0;
    if spec.tcp_connect_ports.is_some() {
        if abi >= ABI_NET {
            handled_net |= ACCESS_NET_CONNECT_TCP;
        } else {
            downgrades.push(Downgrade::TcpConnectUnsupported);
        }
    }
    if spec.tcp_bind_ports.is_some() {
        if abi >= ABI_NET {
            handled_net |= ACCESS_NET_BIND_TCP;
        } else {
            downgrades.push(Downgrade::TcpBindUnsupported);
        }
    }
    let mut scoped = 0;
    if spec.scope_signals_and_abstract_unix {
        if abi >= ABI_SCOPE {
            scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
        } else {
            downgrades.push(Downgrade::ScopingUnsupported);
        }
    }
    (handled_net, scoped)
}

/// `O_PATH`, refusing magic links (`/proc/<pid>/root`, `cwd`, `exe`,
/// `fd/*`, `ns/*`): a rule through one would name whatever the link leads
/// to (`/`, for `root`), not what its path says.
fn open_path(path: &Path) -> io::Result<File> {
    let path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(File::from(sys::landlock::open_path_no_magiclinks(&path)?))
}
