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
//! ([`ArgCond::eq32`]); `Ne` and `Ge` conditions are only used where
//! garbage in the upper half makes the rule *more* likely to match (deny or
//! trap), never less.

use std::io::{Read, Seek};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

use crate::errno::{Errno, check};

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
    pub index: u32,
    pub op: ArgOp,
    pub value: u64,
}

impl ArgCond {
    /// Equality on an `int` argument, immune to garbage in the upper half.
    #[must_use]
    pub const fn eq32(index: u32, value: u32) -> Self {
        Self {
            index,
            op: ArgOp::MaskedEq(0xffff_ffff),
            value: value as u64,
        }
    }

    /// True when any bit of `bits` is set in the argument.
    #[must_use]
    pub const fn has_bits(index: u32, bits: u64) -> Self {
        Self {
            index,
            op: ArgOp::MaskedEq(bits),
            value: bits,
        }
    }
}

/// A syscall answered with `-errno` when all its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyRule {
    pub syscall: String,
    pub errno: i32,
    pub arg_conditions: Vec<ArgCond>,
}

/// A syscall sent to the supervisor when all its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyRule {
    pub syscall: String,
    pub arg_conditions: Vec<ArgCond>,
}

/// The whole filter. Unlisted syscalls are allowed: this is a deny list on
/// top of Landlock, the network namespace and the dropped capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    pub deny: Vec<DenyRule>,
    pub notify: Vec<NotifyRule>,
    /// Install with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19):
    /// once the supervisor has received a notification, only a fatal signal
    /// interrupts the trapped call. Without it, runtimes that signal their
    /// threads often (Go's preemption) restart `connect` over and over, and
    /// the supervisor may connect upstream for a call that is then abandoned.
    pub wait_killable_recv: bool,
}

impl FilterSpec {
    /// The filter the product installs.
    #[must_use]
    pub fn product_default() -> Self {
        Self {
            deny: default_deny_list(),
            notify: default_notify_list(),
            wait_killable_recv: true,
        }
    }
}

fn deny(syscall: &str, errno: i32, arg_conditions: Vec<ArgCond>) -> DenyRule {
    DenyRule {
        syscall: syscall.to_owned(),
        errno,
        arg_conditions,
    }
}

const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];
/// `CLONE_NEWTIME` shares its bit with the exit signal in `clone(2)`, so it
/// only means "new time namespace" to `unshare` (and `clone3`).
const CLONE_NEWTIME: u64 = 0x80;
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCK_RAW: u32 = 3;
/// Obsolete; `socket(AF_INET, SOCK_PACKET)` is silently turned into a packet
/// socket by the kernel.
const SOCK_PACKET: u32 = 10;
const NETLINK_ROUTE: u64 = 0;
/// `sizeof(struct sockaddr_in)`, the shortest IP socket address.
const SOCKADDR_IN_LEN: u64 = 16;
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541c;

/// The syscalls the product denies, each with the errno a program is most
/// likely to handle gracefully:
///
/// - `EPERM` where an unprivileged process would get it anyway (ptrace,
///   module loading, mounts, namespaces, raw and packet sockets): programs
///   already cope with "not allowed".
/// - `ENOSYS` for `io_uring_*`, which libraries probe and then fall back to
///   plain syscalls (whose network calls we can trap; io_uring's we cannot),
///   and for `clone3`, whose flags live in memory where a filter cannot read
///   them: glibc (2.34+), Go and Rust's std retry with `clone(2)` on ENOSYS,
///   whose flags are in a register that the `clone` rules below check.
/// - `socket(AF_NETLINK)` stays open for `NETLINK_ROUTE` only: glibc's
///   `getaddrinfo(AI_ADDRCONFIG)`, `getifaddrs` and `if_nameindex` use it,
///   it shows nothing but the sandbox's loopback, and changing anything
///   through it needs `CAP_NET_ADMIN`, which the workload lacks. Every other
///   netlink family (netfilter, audit, uevent, sock_diag, generic, xfrm...)
///   is denied as attack surface nothing in the sandbox needs.
/// - `seccomp(SET_MODE_FILTER)` with `NEW_LISTENER` is denied: with its own
///   listener, a workload filter newer than ours would take `connect` first
///   and could answer "continue". The kernel already refuses a second
///   listener in one filter chain (`EBUSY`); this rule makes the refusal ours
///   and visible as `EPERM`. Without a listener fd the
///   `SECCOMP_IOCTL_NOTIF_*` ioctls have nothing to act on (our listener is
///   close-on-exec in the child and only the supervisor keeps a copy), so
///   they need no rule.
/// - `ioctl(TIOCSTI / TIOCLINUX)`: pushing keystrokes into a terminal shared
///   with the caller is a classic escape that neither Landlock (the tty fd is
///   inherited, not opened) nor dropped capabilities stop on every kernel.
#[must_use]
pub fn default_deny_list() -> Vec<DenyRule> {
    let mut rules = Vec::new();
    for name in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "clone3",
    ] {
        rules.push(deny(name, libc::ENOSYS, vec![]));
    }
    for name in [
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "keyctl",
        "add_key",
        "request_key",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "mount",
        "umount2",
        "pivot_root",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "open_tree",
        "mount_setattr",
        "open_by_handle_at",
        "setns",
    ] {
        rules.push(deny(name, libc::EPERM, vec![]));
    }
    for flag in NAMESPACE_FLAGS.into_iter().chain([CLONE_NEWTIME]) {
        rules.push(deny(
            "unshare",
            libc::EPERM,
            vec![ArgCond::has_bits(0, flag)],
        ));
    }
    for flag in NAMESPACE_FLAGS {
        rules.push(deny("clone", libc::EPERM, vec![ArgCond::has_bits(0, flag)]));
    }
    let af_netlink = libc::AF_NETLINK as u32;
    rules.push(deny(
        "socket",
        libc::EPERM,
        vec![ArgCond::eq32(0, libc::AF_PACKET as u32)],
    ));
    for ty in [SOCK_RAW, SOCK_PACKET] {
        rules.push(deny(
            "socket",
            libc::EPERM,
            vec![
                ArgCond {
                    index: 0,
                    op: ArgOp::Ne,
                    value: u64::from(af_netlink),
                },
                ArgCond {
                    index: 1,
                    op: ArgOp::MaskedEq(SOCK_TYPE_MASK),
                    value: u64::from(ty),
                },
            ],
        ));
    }
    rules.push(deny(
        "socket",
        libc::EPERM,
        vec![
            ArgCond::eq32(0, af_netlink),
            ArgCond {
                index: 2,
                op: ArgOp::Ne,
                value: NETLINK_ROUTE,
            },
        ],
    ));
    rules.push(deny(
        "seccomp",
        libc::EPERM,
        vec![
            ArgCond::eq32(0, libc::SECCOMP_SET_MODE_FILTER),
            ArgCond::has_bits(1, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER),
        ],
    ));
    for request in [TIOCSTI, TIOCLINUX] {
        rules.push(deny("ioctl", libc::EPERM, vec![ArgCond::eq32(1, request)]));
    }
    rules
}

/// The calls that can name a destination: `connect`; `sendto` with a
/// non-null address at least as long as a `sockaddr_in`; and
/// `sendmsg`/`sendmmsg`, whose address is in memory where the filter cannot
/// look, so they are always trapped.
///
/// `sendto` with a null address is `send(2)` (glibc has no `send` syscall on
/// x86_64); trapping it would trap every write to every socket. An address
/// shorter than 16 bytes cannot name an IP destination (the kernel answers
/// `EINVAL` for `AF_INET` below 16 and `AF_INET6` below 24), but it is what
/// glibc sends to the kernel's netlink socket (`sockaddr_nl`, 12 bytes) in
/// `getaddrinfo(AI_ADDRCONFIG)` and `getifaddrs`; leaving those untrapped
/// spares the supervisor from emulating netlink. The comparison is on the
/// full 64-bit register, so garbage in the upper half only makes the call
/// *more* likely to be trapped.
#[must_use]
pub fn default_notify_list() -> Vec<NotifyRule> {
    let notify = |syscall: &str, arg_conditions| NotifyRule {
        syscall: syscall.to_owned(),
        arg_conditions,
    };
    vec![
        notify("connect", vec![]),
        notify(
            "sendto",
            vec![
                ArgCond {
                    index: 4,
                    op: ArgOp::Ne,
                    value: 0,
                },
                ArgCond {
                    index: 5,
                    op: ArgOp::Ge,
                    value: SOCKADDR_IN_LEN,
                },
            ],
        ),
        notify("sendmsg", vec![]),
        notify("sendmmsg", vec![]),
    ]
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    #[error("unknown syscall `{0}`")]
    UnknownSyscall(String),
    #[error("cannot add the seccomp rule for `{syscall}`")]
    AddRule {
        syscall: String,
        #[source]
        source: libseccomp::error::SeccompError,
    },
    #[error("cannot set up the seccomp filter")]
    Setup(#[source] libseccomp::error::SeccompError),
    #[error("cannot export the seccomp program")]
    Export(#[source] std::io::Error),
    #[error("the exported seccomp program has an invalid size of {0} bytes")]
    BadProgram(usize),
}

/// A compiled BPF program, ready for [`PreparedFilter::install_with_listener`].
#[derive(Debug, Clone)]
pub struct PreparedFilter {
    program: Vec<libc::sock_filter>,
    len: u16,
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
    let len = u16::try_from(program.len()).map_err(|_| SeccompError::BadProgram(bytes.len()))?;
    let mut flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    if spec.wait_killable_recv {
        flags |= libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    }
    Ok(PreparedFilter {
        program,
        len,
        flags,
    })
}

fn add(
    ctx: &mut ScmpFilterContext,
    name: &str,
    action: ScmpAction,
    conds: &[ArgCond],
) -> Result<(), SeccompError> {
    let syscall =
        ScmpSyscall::from_name(name).map_err(|_| SeccompError::UnknownSyscall(name.to_owned()))?;
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

/// libseccomp 2.5 (Debian 12) can only write the program to an fd; a memfd
/// keeps it off the filesystem.
fn export(ctx: &ScmpFilterContext) -> Result<Vec<u8>, SeccompError> {
    // SAFETY: the name is a NUL-terminated literal; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"seccomp-bpf".as_ptr(), libc::MFD_CLOEXEC) };
    let fd = crate::errno::check_int(fd).map_err(|e| SeccompError::Export(e.into()))?;
    // SAFETY: memfd_create just returned this fd and nothing else owns it.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
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
    pub fn install_with_listener(&self) -> Result<RawFd, Errno> {
        let prog = libc::sock_fprog {
            len: self.len,
            filter: self.program.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points to `len` initialised instructions owned by
        // `self`, alive for the duration of the call; the kernel copies them.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                self.flags,
                &raw const prog,
            )
        };
        let fd = check(ret)?;
        RawFd::try_from(fd).map_err(|_| Errno(libc::EBADF))
    }
}
