//! The seccomp filter: a deny list answered by the kernel with an errno, and
//! the network syscalls handed to the supervisor with `SECCOMP_RET_USER_NOTIF`.
//!
//! Like Landlock it is two-phase: [`build`] compiles the filter with
//! libseccomp in the parent and keeps the BPF program as plain words;
//! [`PreparedFilter::install_with_listener`] is a single raw `seccomp()`
//! call in the forked child, just before `exec`.
//!
//! # Architectures
//!
//! The filter is built for the native architecture only (x86_64 here).
//! Everything else is killed with `SECCOMP_RET_KILL_PROCESS`: the i386 entry
//! (`int 0x80`) and the x32 ABI (native arch, syscall number with bit 30 set;
//! libseccomp adds that check when x32 is not in the filter). On i386 the
//! socket calls go through `socketcall(2)` with their arguments in memory,
//! where no filter can read them, so "deny" there could not mean anything
//! short of kill. A 32-bit workload is therefore unsupported, loudly.
//!
//! # 32-bit arguments
//!
//! The kernel truncates `int` arguments to 32 bits, but seccomp sees the
//! full 64-bit register. A rule `socket(family == AF_PACKET)` written as a
//! 64-bit equality is bypassed by `socket(AF_PACKET | 1 << 32, ..)`. Rules on
//! `int` arguments therefore compare under the mask `0xffff_ffff`
//! ([`ArgOp::MaskedEq`]); `Ne` and `Ge` conditions are only used where
//! garbage in the upper half makes the rule *more* likely to match (deny or
//! trap), never less.

#![forbid(unsafe_code)]

use std::io::{Read, Seek};
use std::os::fd::OwnedFd;

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

use crate::errno::Errno;

/// How an argument is compared; see the module docs on 32-bit arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgOp {
    /// Full 64-bit equality.
    Eq,
    /// Full 64-bit inequality.
    Ne,
    /// `arg & mask == value`.
    MaskedEq(u64),
    /// Unsigned 64-bit `arg >= value`.
    Ge,
}

/// A condition on one syscall argument (index 0..=5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCond {
    /// Which argument, 0..=5.
    pub index: u32,
    /// How the argument is compared with `value`.
    pub op: ArgOp,
    /// The full 64-bit operand (for `MaskedEq`, compared after masking).
    pub value: u64,
}

/// A syscall answered with `-errno` when all its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyRule {
    /// The syscall's name, as libseccomp knows it (a few newer ones are
    /// resolved here).
    pub syscall: String,
    /// Positive (`libc::EPERM`); the caller sees `-1` and this errno.
    pub errno: i32,
    /// All must hold; empty denies the call whatever its arguments.
    pub arg_conditions: Vec<ArgCond>,
}

/// A syscall sent to the supervisor when all its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyRule {
    /// The syscall's name, as for [`DenyRule::syscall`].
    pub syscall: String,
    /// All must hold; empty traps every call.
    pub arg_conditions: Vec<ArgCond>,
}

/// The whole filter. Unlisted syscalls are allowed: this is a deny list on
/// top of Landlock, the network namespace and the dropped capabilities.
///
/// The lists themselves are policy, not kernel mechanics: the compiled
/// bundle carries them (`policy_bundle::kernel::{deny_list, notify_list}`,
/// which explain each entry), and the supervisor converts them into these
/// types. The tests build theirs the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    /// Answered by the kernel, never seen by the supervisor.
    pub deny: Vec<DenyRule>,
    /// Each call that matches waits for the supervisor's answer on the
    /// listener.
    pub notify: Vec<NotifyRule>,
    /// Install with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19):
    /// once the supervisor has received a notification, only a fatal signal
    /// interrupts the trapped call. Without it, runtimes that signal their
    /// threads often (Go's preemption) restart `connect` over and over, and
    /// the supervisor may connect upstream for a call that is then abandoned.
    pub wait_killable_recv: bool,
}

/// Why [`build`] made no filter; a spec that cannot be compiled whole is
/// never installed in part.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// Neither libseccomp nor this crate's own table knows the name.
    #[error("unknown syscall `{0}`")]
    UnknownSyscall(String),
    /// libseccomp refused the rule, for instance one it could only have
    /// added rewritten.
    #[error("cannot add the seccomp rule for `{syscall}`")]
    AddRule {
        /// The rule's syscall name.
        syscall: String,
        /// From libseccomp.
        #[source]
        source: libseccomp::error::SeccompError,
    },
    /// libseccomp could not create the filter context.
    #[error("cannot set up the seccomp filter")]
    Setup(#[source] libseccomp::error::SeccompError),
    /// Writing the program out through a memfd failed.
    #[error("cannot export the seccomp program")]
    Export(#[source] std::io::Error),
    /// The program is empty, not whole instructions, or longer than the
    /// kernel takes; the size is in bytes.
    #[error("the exported seccomp program has an invalid size of {0} bytes")]
    BadProgram(usize),
}

/// A compiled BPF program, ready for [`PreparedFilter::install_with_listener`].
#[derive(Debug, Clone)]
pub struct PreparedFilter {
    program: Vec<libc::sock_filter>,
    /// Flags besides `SECCOMP_FILTER_FLAG_NEW_LISTENER`, always set.
    flags: libc::c_ulong,
}

/// The kernel's limit on one classic BPF program.
const BPF_MAXINSNS: usize = 4096;

/// Compiles `spec` with libseccomp (in the parent: libseccomp allocates).
pub fn build(spec: &FilterSpec) -> Result<PreparedFilter, SeccompError> {
    let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).map_err(SeccompError::Setup)?;
    ctx.set_act_badarch(ScmpAction::KillProcess)
        .map_err(SeccompError::Setup)?;
    for rule in &spec.deny {
        add(
            &mut ctx,
            &rule.syscall,
            ScmpAction::Errno(rule.errno),
            &rule.arg_conditions,
        )?;
    }
    for rule in &spec.notify {
        add(
            &mut ctx,
            &rule.syscall,
            ScmpAction::Notify,
            &rule.arg_conditions,
        )?;
    }
    let bytes = export(&ctx)?;
    let program = decode(&bytes)?;
    // `sock_fprog` counts instructions in a u16.
    u16::try_from(program.len()).map_err(|_| SeccompError::BadProgram(bytes.len()))?;
    let flags = if spec.wait_killable_recv {
        libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
    } else {
        0
    };
    Ok(PreparedFilter { program, flags })
}

fn add(
    ctx: &mut ScmpFilterContext,
    name: &str,
    action: ScmpAction,
    conds: &[ArgCond],
) -> Result<(), SeccompError> {
    let syscall = resolve(name)?;
    let conds: Vec<ScmpArgCompare> = conds
        .iter()
        .map(|c| {
            let op = match c.op {
                ArgOp::Eq => ScmpCompareOp::Equal,
                ArgOp::Ne => ScmpCompareOp::NotEqual,
                ArgOp::MaskedEq(mask) => ScmpCompareOp::MaskedEqual(mask),
                ArgOp::Ge => ScmpCompareOp::GreaterEqual,
            };
            ScmpArgCompare::new(c.index, op, c.value)
        })
        .collect();
    // `_exact`: fail rather than let libseccomp rewrite the rule into
    // something else (it does for multiplexed syscalls on some arches).
    let result = if conds.is_empty() {
        ctx.add_rule_exact(action, syscall)
    } else {
        ctx.add_rule_conditional_exact(action, syscall, &conds)
    };
    result.map(drop).map_err(|source| SeccompError::AddRule {
        syscall: name.to_owned(),
        source,
    })
}

/// x86_64 numbers of syscalls newer than the libseccomp on Debian 12
/// (2.5.4), which cannot resolve their names. A kernel that has them runs
/// them for any caller, so a deny rule must not depend on the library's
/// table: without these, "deny `setxattrat`" could not even be written.
const NEWER_THAN_LIBSECCOMP: &[(&str, i32)] = &[
    ("setxattrat", 463),
    ("removexattrat", 466),
    ("file_setattr", 469),
];

fn resolve(name: &str) -> Result<ScmpSyscall, SeccompError> {
    ScmpSyscall::from_name(name).or_else(|_| {
        NEWER_THAN_LIBSECCOMP
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, nr)| ScmpSyscall::from_raw_syscall(*nr))
            .ok_or_else(|| SeccompError::UnknownSyscall(name.to_owned()))
    })
}

/// libseccomp 2.5 (Debian 12) can only write the program to an fd; a memfd
/// keeps it off the filesystem.
fn export(ctx: &ScmpFilterContext) -> Result<Vec<u8>, SeccompError> {
    let fd = crate::sys::fd::memfd_create(c"seccomp-bpf", libc::MFD_CLOEXEC)
        .map_err(|e| SeccompError::Export(e.into()))?;
    let mut file = std::fs::File::from(fd);
    ctx.export_bpf(&file)
        .map_err(|e| SeccompError::Export(std::io::Error::other(e)))?;
    let mut bytes = Vec::new();
    file.rewind()
        .and_then(|()| file.read_to_end(&mut bytes))
        .map_err(SeccompError::Export)?;
    Ok(bytes)
}

fn decode(bytes: &[u8]) -> Result<Vec<libc::sock_filter>, SeccompError> {
    const INSN: usize = size_of::<libc::sock_filter>();
    let count = bytes.len() / INSN;
    if !bytes.len().is_multiple_of(INSN) || count == 0 || count > BPF_MAXINSNS {
        return Err(SeccompError::BadProgram(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(INSN)
        .map(|c| {
            let [c0, c1, jt, jf, k0, k1, k2, k3] = <[u8; INSN]>::try_from(c).unwrap_or_default();
            libc::sock_filter {
                code: u16::from_ne_bytes([c0, c1]),
                jt,
                jf,
                k: u32::from_ne_bytes([k0, k1, k2, k3]),
            }
        })
        .collect())
}

impl PreparedFilter {
    /// The BPF instructions, for inspection and tests.
    #[must_use]
    pub fn instructions(&self) -> &[libc::sock_filter] {
        &self.program
    }

    /// Installs the filter on the calling thread and returns the new
    /// notification listener fd (close-on-exec: hand it to the supervisor,
    /// e.g. by [`crate::take_fd_from`], before `exec`).
    ///
    /// Async-signal-safe: one syscall on memory prepared before `fork`.
    /// Requires `no_new_privs` (or `CAP_SYS_ADMIN`). No `TSYNC`: the forked
    /// child has a single thread, and `TSYNC` cannot be combined with
    /// `NEW_LISTENER` anyway.
    pub fn install_with_listener(&self) -> Result<OwnedFd, Errno> {
        crate::sys::seccomp::install_filter_with_listener(&self.program, self.flags)
    }
}
