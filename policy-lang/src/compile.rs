//! Compile the IR into a bundle.
//!
//! Canonical form: every list is sorted and de-duplicated by content, and
//! the provenance lists are permuted along with it. Two policies that mean
//! the same thing rule for rule (reordered, renamed binary sets, one rule
//! split into two) therefore produce the same enforcement bytes and digest.

use crate::linux::{
    AF_NETLINK, AF_PACKET, CLONE_NEWTIME, FS_IOC_FSSETXATTR, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS,
    NAMESPACE_FLAGS, NETLINK_ROUTE, O_CREAT, O_TMPFILE_BIT, S_ISGID, S_ISUID,
    SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_SET_MODE_FILTER, SOCK_PACKET, SOCK_RAW,
    SOCK_TYPE_MASK, SOCKADDR_IN_LEN, TIOCLINUX, TIOCSTI,
};
use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::*;
use crate::ir::{self, BinaryRef, Dest, EndpointKind, FsRights, Origin, Policy, TlsMode};
use crate::matcher::{HostPattern, PortSet};

pub fn compile(policy: &Policy) -> Bundle {
    let mut prov = Provenance {
        policy: policy.name.clone(),
        ..Provenance::default()
    };
    let files: BTreeSet<String> = policy
        .endpoints
        .iter()
        .map(|e| e.origin.file.clone())
        .chain(policy.fs.iter().map(|f| f.origin.file.clone()))
        .chain(policy.credentials.iter().map(|c| c.origin.file.clone()))
        .filter(|f| !f.is_empty())
        .collect();
    prov.files = files.into_iter().collect();

    let (l7, l7_prov, l7_index) = l7_endpoints(policy);
    prov.l7 = l7_prov;
    let (routes, route_prov, identities, identity_prov) = routes(policy, &l7_index);
    prov.routes = route_prov;
    prov.identities = identity_prov;

    let mut creds: Vec<(CredentialBinding, Origin)> = policy
        .credentials
        .iter()
        .map(|c| {
            (
                CredentialBinding {
                    name: c.name.clone(),
                    source: c.source.clone(),
                    placeholder: c.placeholder.clone(),
                    inject: c.inject.clone(),
                    hosts: c.hosts.clone(),
                    methods: c.methods.clone(),
                    paths: c.paths.as_ref().map(|p| sorted(p.clone())),
                },
                c.origin.clone(),
            )
        })
        .collect();
    creds.sort();
    let (credentials, cred_prov): (Vec<_>, Vec<_>) = creds.into_iter().unzip();
    prov.credentials = cred_prov;

    let mut secrets: Vec<(SecretEntry, Origin)> = policy
        .secrets
        .iter()
        .map(|s| {
            (
                SecretEntry {
                    name: s.name.clone(),
                    source: s.source.clone(),
                    hosts: s.hosts.clone(),
                },
                s.origin.clone(),
            )
        })
        .collect();
    secrets.sort();
    let (secrets, secret_prov): (Vec<_>, Vec<_>) = secrets.into_iter().unzip();
    prov.secrets = secret_prov;
    prov.fs = policy.fs.iter().map(|f| f.origin.clone()).collect();

    let needs_dns = routes.iter().any(|r| matches!(r.dest, Dest::Host(_)));
    let mut connect_ports = routes
        .iter()
        .fold(PortSet::default(), |acc, r| acc.union(&r.ports));
    if needs_dns && let Ok(dns) = PortSet::parse("53") {
        connect_ports = connect_ports.union(&dns);
    }

    let tables = Tables {
        landlock: LandlockTable {
            mode: policy.landlock.mode,
            min_abi: policy.landlock.min_abi,
            paths: policy
                .fs
                .iter()
                .map(|g| LandlockPath {
                    path: g.path.clone(),
                    access: landlock_rights(g.rights),
                })
                .collect(),
            workdir: policy.workdir.map(landlock_rights),
            tcp_connect_ports: connect_ports,
            scoped: vec!["abstract_unix_socket".to_string(), "signal".to_string()],
        },
        process: ProcessTable {
            user: policy.run_as.as_ref().and_then(|r| r.user.clone()),
            group: policy.run_as.as_ref().and_then(|r| r.group.clone()),
        },
        seccomp: SeccompTable {
            deny: deny_list(),
            notify: notify_list(),
            identities,
            routes,
        },
        l7,
        credentials,
        secrets,
    };
    Bundle::new(tables, prov)
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// Build the L7 endpoint table, de-duplicated by content. Returns the table,
/// its provenance, and for each IR endpoint its L7 index (if inspected).
fn l7_endpoints(policy: &Policy) -> (Vec<L7Endpoint>, Vec<L7Provenance>, Vec<Option<u32>>) {
    // Merge rules by content within each endpoint, keeping every origin.
    let mut by_content: BTreeMap<L7Endpoint, L7Provenance> = BTreeMap::new();
    let mut keys: Vec<Option<L7Endpoint>> = Vec::new();
    for ep in &policy.endpoints {
        let EndpointKind::Http(h) = &ep.kind else {
            keys.push(None);
            continue;
        };
        if h.tls == TlsMode::Skip {
            keys.push(None);
            continue;
        }
        let (allow, allow_prov) = merge_rules(&h.allow);
        let (deny, deny_prov) = merge_rules(&h.deny);
        let (rpc_allow, rpc_allow_prov) = merge_rpc_rules(&h.rpc_allow);
        let (rpc_deny, rpc_deny_prov) = merge_rpc_rules(&h.rpc_deny);
        let (graphql_allow, graphql_allow_prov) = merge_graphql_rules(&h.graphql_allow);
        let (graphql_deny, graphql_deny_prov) = merge_graphql_rules(&h.graphql_deny);
        let key = L7Endpoint {
            enforcement: h.enforcement,
            tls: h.tls,
            path: h.path.clone(),
            encoded_slash: h.encoded_slash,
            allow,
            deny,
            protocol: h.protocol,
            body_limit: h.body_limit,
            strict_tool_names: h.strict_tool_names,
            all_mcp_methods: h.all_mcp_methods,
            rpc_allow,
            rpc_deny,
            graphql_allow,
            graphql_deny,
            persisted_queries: sorted(h.persisted.clone()),
        };
        let entry = by_content
            .entry(key.clone())
            .or_insert_with(|| L7Provenance {
                endpoint: Vec::new(),
                allow: vec![Vec::new(); allow_prov.len()],
                deny: vec![Vec::new(); deny_prov.len()],
                allow_within: vec![Vec::new(); allow_prov.len()],
                deny_within: vec![Vec::new(); deny_prov.len()],
                rpc_allow: vec![Vec::new(); rpc_allow_prov.len()],
                rpc_deny: vec![Vec::new(); rpc_deny_prov.len()],
                rpc_allow_within: vec![Vec::new(); rpc_allow_prov.len()],
                rpc_deny_within: vec![Vec::new(); rpc_deny_prov.len()],
                graphql_allow: vec![Vec::new(); graphql_allow_prov.len()],
                graphql_deny: vec![Vec::new(); graphql_deny_prov.len()],
                graphql_allow_within: vec![Vec::new(); graphql_allow_prov.len()],
                graphql_deny_within: vec![Vec::new(); graphql_deny_prov.len()],
            });
        let within = u32::try_from(entry.endpoint.len()).unwrap_or(u32::MAX);
        entry.endpoint.push(ep.origin.clone());
        append_origins(
            &mut entry.allow,
            &mut entry.allow_within,
            allow_prov,
            within,
        );
        append_origins(&mut entry.deny, &mut entry.deny_within, deny_prov, within);
        append_origins(
            &mut entry.rpc_allow,
            &mut entry.rpc_allow_within,
            rpc_allow_prov,
            within,
        );
        append_origins(
            &mut entry.rpc_deny,
            &mut entry.rpc_deny_within,
            rpc_deny_prov,
            within,
        );
        append_origins(
            &mut entry.graphql_allow,
            &mut entry.graphql_allow_within,
            graphql_allow_prov,
            within,
        );
        append_origins(
            &mut entry.graphql_deny,
            &mut entry.graphql_deny_within,
            graphql_deny_prov,
            within,
        );
        keys.push(Some(key));
    }
    let index: BTreeMap<&L7Endpoint, u32> = by_content
        .keys()
        .enumerate()
        .map(|(i, k)| (k, u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let ids = keys
        .iter()
        .map(|k| k.as_ref().and_then(|k| index.get(k).copied()))
        .collect();
    let (table, prov): (Vec<_>, Vec<_>) = by_content.into_iter().unzip();
    (table, prov, ids)
}

/// Add one IR endpoint's rule origins to the provenance lists of the
/// merged endpoint, noting which of its writings they came from.
fn append_origins(
    slots: &mut [Vec<Origin>],
    within: &mut [Vec<u32>],
    origins: Vec<Vec<Origin>>,
    at: u32,
) {
    for ((slot, w), origins) in slots.iter_mut().zip(within.iter_mut()).zip(origins) {
        w.extend(std::iter::repeat_n(at, origins.len()));
        slot.extend(origins);
    }
}

fn merge_rpc_rules(rules: &[ir::RpcRule]) -> (Vec<RpcMatcher>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<RpcMatcher, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        merged
            .entry(RpcMatcher {
                methods: r.methods.clone(),
                tools: r.tools.clone(),
            })
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

fn merge_graphql_rules(rules: &[ir::GraphqlRule]) -> (Vec<GraphqlRule>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<GraphqlRule, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        merged
            .entry(r.rule.clone())
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

fn merge_rules(rules: &[ir::L7Rule]) -> (Vec<L7Matcher>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<L7Matcher, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        let mut query = r.query.clone();
        query.sort();
        merged
            .entry(L7Matcher {
                methods: r.methods.clone(),
                path: r.path.clone(),
                query,
            })
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

/// The route table and the identity table, each with its provenance.
type RouteTables = (
    Vec<Route>,
    Vec<Vec<Origin>>,
    Vec<Identity>,
    Vec<Vec<Vec<Origin>>>,
);

/// Routes de-duplicated by content, and the identity table mapping each
/// binary to the routes it may use, with the rules that granted each one.
fn routes(policy: &Policy, l7_index: &[Option<u32>]) -> RouteTables {
    let mut route_origins: BTreeMap<Route, Vec<Origin>> = BTreeMap::new();
    let mut endpoint_routes: Vec<Route> = Vec::with_capacity(policy.endpoints.len());
    for (ep, l7) in policy.endpoints.iter().zip(l7_index) {
        let via = match (&ep.kind, l7) {
            (EndpointKind::L4, _) => Via::L4,
            (EndpointKind::Tcp, _) => Via::Tcp,
            (EndpointKind::Http(_), Some(id)) => Via::L7(*id),
            (EndpointKind::Http(_), None) => Via::Uninspected,
        };
        let route = Route {
            dest: ep.dest.clone(),
            ports: ep.ports.clone(),
            addresses: ep.addresses.clone(),
            via,
            uninspected_credentials: ep.uninspected_credentials,
        };
        route_origins
            .entry(route.clone())
            .or_default()
            .push(ep.origin.clone());
        endpoint_routes.push(route);
    }
    let index: BTreeMap<&Route, u32> = route_origins
        .keys()
        .enumerate()
        .map(|(i, r)| (r, u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let routes_by_index: Vec<&Route> = route_origins.keys().collect();
    let mut per_binary: BTreeMap<&BinaryRef, BTreeMap<u32, Vec<Origin>>> = BTreeMap::new();
    for (ep, route) in policy.endpoints.iter().zip(&endpoint_routes) {
        let Some(&id) = index.get(route) else {
            continue;
        };
        for b in &ep.binaries {
            per_binary
                .entry(b)
                .or_default()
                .entry(id)
                .or_default()
                .push(ep.origin.clone());
        }
    }
    let mut identity_prov = Vec::with_capacity(per_binary.len());
    let identities = per_binary
        .into_iter()
        .map(|(binary, grants)| {
            let (ids, origins): (Vec<u32>, Vec<Vec<Origin>>) = grants
                .into_iter()
                .map(|(id, mut o)| {
                    o.sort();
                    o.dedup();
                    (id, o)
                })
                .unzip();
            identity_prov.push(origins);
            let mut dns: Vec<HostPattern> = ids
                .iter()
                .filter_map(
                    |&i| match routes_by_index.get(i as usize).map(|r| &r.dest) {
                        Some(Dest::Host(h)) => Some(h.clone()),
                        _ => None,
                    },
                )
                .collect();
            dns.sort();
            dns.dedup();
            Identity {
                binary: binary.clone(),
                routes: ids.into_iter().collect(),
                dns,
            }
        })
        .collect();
    let (routes, origins): (Vec<_>, Vec<_>) = route_origins.into_iter().unzip();
    (routes, origins, identities, identity_prov)
}

/// Landlock rights for the language's read / write / exec, split by the
/// ABI that introduced each right.
fn landlock_rights(r: FsRights) -> Vec<RightsAtAbi> {
    let mut by_abi: BTreeMap<u8, Vec<&str>> = BTreeMap::new();
    let mut add = |abi: u8, rights: &[&'static str]| by_abi.entry(abi).or_default().extend(rights);
    if r.read || r.write || r.exec {
        add(1, &["read_dir", "read_file"]);
    }
    if r.exec {
        add(1, &["execute"]);
    }
    if r.write {
        add(
            1,
            &[
                "make_block",
                "make_char",
                "make_dir",
                "make_fifo",
                "make_reg",
                "make_sock",
                "make_sym",
                "remove_dir",
                "remove_file",
                "write_file",
            ],
        );
        add(2, &["refer"]);
        add(3, &["truncate"]);
        add(5, &["ioctl_dev"]);
    }
    by_abi
        .into_iter()
        .map(|(abi, mut rights)| {
            rights.sort_unstable();
            RightsAtAbi {
                abi,
                rights: rights.into_iter().map(str::to_string).collect(),
            }
        })
        .collect()
}

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
    for request in [
        TIOCSTI,
        TIOCLINUX,
        FS_IOC_SETFLAGS,
        FS_IOC32_SETFLAGS,
        FS_IOC_FSSETXATTR,
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
/// - inode flags (`file_setattr`, the `FS_IOC_*SETFLAGS`/`FSSETXATTR`
///   ioctls).
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

/// The calls that can name a destination: `connect`; `sendto` with a
/// non-null address long enough to be an IP one (a null address is plain
/// `send`; glibc's 12-byte netlink address stays untrapped); `sendmsg` and
/// `sendmmsg`, whose addresses sit in memory the filter cannot read; and
/// `listen`, which binds an unbound IP socket to an ephemeral port on every
/// address without the bind check Landlock makes on `bind`. The enforcer's
/// `TrappedCall::ALL` is what the supervisor answers; a supervisor test holds
/// the two equal, and the supervisor refuses a bundle that traps anything else.
pub fn notify_list() -> Vec<TrappedSyscall> {
    let trap = |syscall: &str, when: Vec<ArgCondition>| TrappedSyscall {
        syscall: syscall.to_string(),
        when,
    };
    vec![
        trap("connect", Vec::new()),
        trap("listen", Vec::new()),
        trap("sendmmsg", Vec::new()),
        trap("sendmsg", Vec::new()),
        trap(
            "sendto",
            vec![cond(4, ArgOp::Ne, 0), cond(5, ArgOp::Ge, SOCKADDR_IN_LEN)],
        ),
    ]
}
