//! The seccomp tables every bundle carries: the calls refused outright and
//! the calls trapped for the supervisor. They are the same for every
//! policy; they live here, beside the kernel numbers they compare against,
//! so the compiler, the enforcer's tests and the supervisor read one list.

use super::TrappedCall;
use super::numbers::{
    AF_NETLINK, AF_PACKET, CLONE_NEWTIME, EXT4_IOC_SETVERSION, EXT4_IOC32_SETVERSION,
    FS_IOC_ENABLE_VERITY, FS_IOC_FSSETXATTR, FS_IOC_SET_ENCRYPTION_POLICY, FS_IOC_SETFLAGS,
    FS_IOC_SETVERSION, FS_IOC32_SETFLAGS, FS_IOC32_SETVERSION, IOPRIO_WHO_PROCESS, NAMESPACE_FLAGS,
    NETLINK_ROUTE, O_CREAT, O_TMPFILE_BIT, PRIO_PROCESS, S_ISGID, S_ISUID,
    SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_SET_MODE_FILTER, SOCK_PACKET, SOCK_RAW,
    SOCK_TYPE_MASK, SOCKADDR_IN_LEN, TIOCLINUX, TIOCSTI,
};
use crate::bundle::{ArgCondition, ArgOp, DeniedSyscall, TrappedSyscall};

/// The low 32 bits: an `int` argument, whatever the caller left above it.
const INT: u64 = 0xffff_ffff;

fn cond(arg: u8, op: ArgOp, value: u64) -> ArgCondition {
    ArgCondition { arg, op, value }
}

/// The syscalls the workload never needs and an escape would: kernel attack
/// surface (io_uring, bpf), looking into other processes (ptrace,
/// process_vm_*, pidfd_getfd), changing the sandbox itself (mounts,
/// namespaces, new seccomp listeners), sockets that bypass the connect
/// broker (raw, packet, netlink other than routing), and typing into a
/// shared terminal.
pub fn deny_list() -> Vec<DeniedSyscall> {
    let rule = |syscall: &str, errno: &str, when: Vec<ArgCondition>| DeniedSyscall {
        syscall: syscall.to_string(),
        errno: errno.to_string(),
        when,
    };
    let mut list = Vec::new();
    // io_uring performs socket and file operations the filter cannot see;
    // clone3 passes its flags in memory the filter cannot read. ENOSYS
    // makes runtimes fall back to plain syscalls, which are checked.
    for s in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "clone3",
    ] {
        list.push(rule(s, "ENOSYS", Vec::new()));
    }
    for s in [
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
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "settimeofday",
        "clock_settime",
        "adjtimex",
        "clock_adjtime",
        "syslog",
        "quotactl",
    ] {
        list.push(rule(s, "EPERM", Vec::new()));
    }
    for flag in NAMESPACE_FLAGS.into_iter().chain([CLONE_NEWTIME]) {
        list.push(rule(
            "unshare",
            "EPERM",
            vec![cond(0, ArgOp::MaskedEq(flag), flag)],
        ));
    }
    for flag in NAMESPACE_FLAGS {
        list.push(rule(
            "clone",
            "EPERM",
            vec![cond(0, ArgOp::MaskedEq(flag), flag)],
        ));
    }
    list.push(rule(
        "socket",
        "EPERM",
        vec![cond(0, ArgOp::MaskedEq(INT), AF_PACKET)],
    ));
    // Only unix, IPv4, IPv6 and (routing) netlink sockets: every other
    // family either reaches past the network namespace (vsock to the
    // hypervisor) or is kernel attack surface no workload needs (AF_ALG,
    // AF_XDP, radio and legacy protocols). Families above AF_PACKET by
    // range, the legacy ones below AF_NETLINK one by one.
    list.push(rule(
        "socket",
        "EPERM",
        vec![cond(0, ArgOp::Ge, AF_PACKET + 1)],
    ));
    for family in (3..=9).chain(11..=15) {
        list.push(rule(
            "socket",
            "EPERM",
            vec![cond(0, ArgOp::MaskedEq(INT), family)],
        ));
    }
    for ty in [SOCK_RAW, SOCK_PACKET] {
        list.push(rule(
            "socket",
            "EPERM",
            vec![
                cond(0, ArgOp::Ne, AF_NETLINK),
                cond(1, ArgOp::MaskedEq(SOCK_TYPE_MASK), ty),
            ],
        ));
    }
    // glibc's getaddrinfo(AI_ADDRCONFIG) and getifaddrs need NETLINK_ROUTE.
    list.push(rule(
        "socket",
        "EPERM",
        vec![
            cond(0, ArgOp::MaskedEq(INT), AF_NETLINK),
            cond(2, ArgOp::Ne, NETLINK_ROUTE),
        ],
    ));
    // A workload-installed listener would let it answer its own trapped calls.
    list.push(rule(
        "seccomp",
        "EPERM",
        vec![
            cond(0, ArgOp::MaskedEq(INT), SECCOMP_SET_MODE_FILTER),
            cond(
                1,
                ArgOp::MaskedEq(SECCOMP_FILTER_FLAG_NEW_LISTENER),
                SECCOMP_FILTER_FLAG_NEW_LISTENER,
            ),
        ],
    ));
    metadata_rules(&mut list);
    other_process_rules(&mut list);
    for request in [
        TIOCSTI,
        TIOCLINUX,
        FS_IOC_SETFLAGS,
        FS_IOC32_SETFLAGS,
        FS_IOC_FSSETXATTR,
        FS_IOC_SETVERSION,
        FS_IOC32_SETVERSION,
        EXT4_IOC_SETVERSION,
        EXT4_IOC32_SETVERSION,
        FS_IOC_SET_ENCRYPTION_POLICY,
        FS_IOC_ENABLE_VERITY,
    ] {
        list.push(rule(
            "ioctl",
            "EPERM",
            vec![cond(1, ArgOp::MaskedEq(INT), request)],
        ));
    }
    list.sort();
    list
}

/// File metadata is outside Landlock (up to ABI 7) for every path, granted
/// or not; see `docs/threat-model.md` ("File metadata"). Refused
/// everywhere, because refusing only outside the writable paths would need
/// a path decision per call, and a path decided and then used is a race:
///
/// - owner and group (`*chown*`): without `CAP_CHOWN` only a group change
///   among the workload's own groups was ever possible;
/// - extended attributes (`*setxattr*`, `*removexattr*`, including the
///   `*at` forms of Linux 6.13 that libseccomp 2.5 does not name: the
///   enforcer knows their numbers), which hold ACLs and capabilities:
///   `EOPNOTSUPP`, what tools like `cp -a` take for "no xattrs here";
/// - setuid and setgid bits, set by `chmod` or given at creation
///   (`open`/`openat`/`creat` with `O_CREAT` or `O_TMPFILE`, `mknod`):
///   a setuid file the sandbox leaves behind is a privilege for whoever
///   runs it on the host. `openat2` carries its mode in memory the filter
///   cannot read: `ENOSYS`, and callers fall back to `openat`;
/// - inode flags, generation, encryption policy and fs-verity
///   (`file_setattr`, the `FS_IOC_*SETFLAGS`/`FSSETXATTR`/`*SETVERSION`,
///   `FS_IOC_SET_ENCRYPTION_POLICY` and `FS_IOC_ENABLE_VERITY` ioctls).
///
/// Plain mode bits and times stay allowed: the kernel lets only the
/// file's owner change them, and a workload runs as uid 0 only when its
/// policy says `run_as user root` (the supervisor then refuses these too).
fn metadata_rules(list: &mut Vec<DeniedSyscall>) {
    let rule = |syscall: &str, errno: &str, when: Vec<ArgCondition>| DeniedSyscall {
        syscall: syscall.to_string(),
        errno: errno.to_string(),
        when,
    };
    for s in ["chown", "fchown", "lchown", "fchownat", "file_setattr"] {
        list.push(rule(s, "EPERM", Vec::new()));
    }
    for s in [
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "setxattrat",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
        "removexattrat",
    ] {
        list.push(rule(s, "EOPNOTSUPP", Vec::new()));
    }
    list.push(rule("openat2", "ENOSYS", Vec::new()));
    let has = |arg: u8, bit: u64| cond(arg, ArgOp::MaskedEq(bit), bit);
    for bit in [S_ISUID, S_ISGID] {
        for (syscall, mode_arg) in [
            ("chmod", 1),
            ("fchmod", 1),
            ("fchmodat", 2),
            ("fchmodat2", 2),
            ("creat", 1),
            ("mknod", 1),
            ("mknodat", 2),
        ] {
            list.push(rule(syscall, "EPERM", vec![has(mode_arg, bit)]));
        }
        for (syscall, flags_arg, mode_arg) in [("open", 1, 2), ("openat", 2, 3)] {
            for create in [O_CREAT, O_TMPFILE_BIT] {
                list.push(rule(
                    syscall,
                    "EPERM",
                    vec![has(flags_arg, create), has(mode_arg, bit)],
                ));
            }
        }
    }
}

/// Limits, priority and memory placement of another process: the kernel
/// lets any process of the same user change them, and the supervisor (when
/// the workload shares its user and PID namespace) or another sandbox of
/// that user is such a process. Raising a limit of the supervisor's is
/// the first step to a core dump of its memory. Each is refused unless it
/// names the caller (pid 0, or `PRIO_PROCESS`/`IOPRIO_WHO_PROCESS` with
/// who 0), the spelling libc uses for `setrlimit`, `nice` and `ionice`.
/// Reading another process's limits (`prlimit64` without a new limit)
/// stays allowed. An argument with bits above its `int` set is refused
/// too: the comparison is on all 64 bits, which can only refuse more.
fn other_process_rules(list: &mut Vec<DeniedSyscall>) {
    let rule = |syscall: &str, when: Vec<ArgCondition>| DeniedSyscall {
        syscall: syscall.to_string(),
        errno: "EPERM".to_string(),
        when,
    };
    list.push(rule(
        "prlimit64",
        vec![cond(0, ArgOp::Ne, 0), cond(2, ArgOp::Ne, 0)],
    ));
    for (syscall, one_process) in [
        ("setpriority", PRIO_PROCESS),
        ("ioprio_set", IOPRIO_WHO_PROCESS),
    ] {
        list.push(rule(syscall, vec![cond(0, ArgOp::Ne, one_process)]));
        list.push(rule(syscall, vec![cond(1, ArgOp::Ne, 0)]));
    }
    for syscall in ["migrate_pages", "move_pages"] {
        list.push(rule(syscall, vec![cond(0, ArgOp::Ne, 0)]));
    }
}

/// The calls that can name a destination: `connect`; `sendto` with a
/// non-null address long enough to be an IP one (a null address is plain
/// `send`; glibc's 12-byte netlink address stays untrapped); `sendmsg` and
/// `sendmmsg`, whose addresses sit in memory the filter cannot read; and
/// `listen`, which binds an unbound IP socket to an ephemeral port on every
/// address without the bind check Landlock makes on `bind`. Built from
/// [`TrappedCall::ALL`], what the supervisor answers; the supervisor refuses a
/// bundle that traps anything else.
pub fn notify_list() -> Vec<TrappedSyscall> {
    let mut list: Vec<TrappedSyscall> = TrappedCall::ALL
        .into_iter()
        .map(|call| TrappedSyscall {
            syscall: call.name().to_string(),
            when: match call {
                TrappedCall::Sendto => {
                    vec![cond(4, ArgOp::Ne, 0), cond(5, ArgOp::Ge, SOCKADDR_IN_LEN)]
                }
                TrappedCall::Connect
                | TrappedCall::Sendmsg
                | TrappedCall::Sendmmsg
                | TrappedCall::Listen => Vec::new(),
            },
        })
        .collect();
    // The bundle's lists are sorted, so the digest never depends on the
    // order calls are declared in.
    list.sort_by(|a, b| a.syscall.cmp(&b.syscall));
    list
}
