//! The kernel-facing layer of the sandbox. It parses no policy: it takes
//! plain data (paths and rights, syscall rules, ids) and applies it with
//! the kernel's own mechanisms.
//!
//! # Shape of a launch
//!
//! Work that allocates or may fail in interesting ways happens in the
//! parent, before `fork`: [`prepare`] the Landlock ruleset, [`build`] the
//! seccomp program, [`resolve_user`], read [`cap_last_cap`]. The child then
//! only makes system calls on what it inherited, because after `fork` in a
//! multi-threaded parent only async-signal-safe work is sound:
//!
//! ```text
//! unshare_net · bring_up_loopback · drop_bounding_and_ambient · set_identity
//! · clear_capability_sets · set_no_new_privs · set_pdeathsig
//! · PreparedRuleset::restrict_self · PreparedFilter::install_with_listener
//! · (parent takes the listener with take_fd_from) · exec
//! ```
//!
//! [`spawn`] runs that sequence (plus a private mount namespace for
//! `/etc/resolv.conf`, standard streams and the working directory) with a
//! handshake: it returns once the child's filter is installed, with the
//! listener in hand, and [`Pending::start`] lets the child exec.
//! [`spawn_init`] execs an init program (`openshell-sandbox`) in new
//! namespaces (a PID namespace with its own `/proc` among them), which
//! forks the workload with [`spawn`] and is its PID 1; the launch link
//! ([`InitLink`]) carries its reports and the go.
//!
//! The parent then serves the listener with [`recv`], the readers in
//! [`sockaddr`](read_sockaddr) and [`identity`](exe_path), [`id_valid`], and
//! answers with [`respond_errno`], by installing its own socket
//! ([`addfd_setfd`]), or by performing the call itself on the workload's
//! socket ([`connect_on`], see the `emulate` module docs for why that beats
//! "continue"). The only "continue" answer, [`respond_continue_unchecked`],
//! is for calls that the network namespace makes harmless whatever their
//! arguments, never for a policy decision.
//!
//! # Where `unsafe` lives
//!
//! Every libc call, raw system call and other `unsafe` operation of the
//! crate is in one private module, `sys`, as small wrappers with typed
//! arguments (borrowed or owned fds, `&CStr`, slices, the kernel's structs)
//! and `Errno` results; each `unsafe` block holds one operation and a
//! `// SAFETY:` comment saying why it is sound. The compiler keeps it
//! there: the crate denies `unsafe_code` except in `sys`, every other
//! module is `#![forbid(unsafe_code)]`, and `unsafe_op_in_unsafe_fn`,
//! `clippy::undocumented_unsafe_blocks` and
//! `clippy::multiple_unsafe_ops_per_block` are denied. `fork` (and the
//! raw `clone` that forks into a new PID namespace) has no wrapper: its
//! callers (the launch child, its init and the namespace probe) sit whole
//! in `sys::child`, because its soundness rests on the child's code.
//!
//! # Testing
//!
//! The tests in `tests/` run against the real kernel as root (Landlock ABI
//! 7 on the development machines): each one is an attack that must fail or
//! a proof that an allowed path still works.

#![warn(missing_docs)]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod access;
mod child_spec;
mod emulate;
mod errno;
mod identity;
mod identity_maps;
mod init_link;
mod landlock;
mod launch_link;
mod mounts;
mod msg;
mod netns;
mod notify;
mod process;
mod procfs;
mod seccomp;
pub mod signals;
mod sockaddr;
mod spawn;
#[expect(
    unsafe_code,
    reason = "the one module that calls libc and the kernel; each block has a SAFETY comment"
)]
mod sys;

pub use access::may_write;
pub use child_spec::{ChildSpec, Credentials, InitSpec};
pub use emulate::{connect_on, listen_on, same_namespace, socket_netns, with_credentials};
pub use errno::Errno;
pub use identity::{
    ExePath, FileKey, Fingerprint, FingerprintCache, exe_path, resolve_links, sha256_file,
    sha256_hex, tgid_of,
};
pub use identity_maps::{CodeMapping, code_mappings};
pub use init_link::{InitLink, LaunchLink};
pub use landlock::{
    ApplyReport, Compat, Downgrade, FsAccess, FsRule, LandlockError, LandlockSpec, PreparedRuleset,
    kernel_abi, prepare,
};
pub use launch_link::memory_file;
pub use msg::{Message, read_message, read_messages, read_payload, write_msg_len};
pub use netns::{
    NetnsSupport, bring_up_loopback, can_create_netns, in_netns, loopback_is_up, netns_support,
    open_netns, unshare_net,
};
pub use notify::{
    ListenerEvent, Notif, SocketInfo, TrappedCall, addfd_setfd, addfd_setfd_send, fd_cloexec,
    fd_socket_info, id_valid, recv, respond_continue_unchecked, respond_errno, respond_value,
    socket_info, take_fd_from, wait_listener, wait_writable,
};
pub use process::{
    LookupError, UserIds, cap_last_cap, caps, clear_capability_sets, drop_bounding_and_ambient,
    effective_caps, forbid_core_dumps, mark_fds_cloexec_from, no_new_privs, own_ids, pass_fds,
    real_and_effective_uid, resolve_group, resolve_user, seccomp_mode, set_identity,
    set_no_new_privs, set_pdeathsig,
};
pub use seccomp::{
    ArgCond, ArgOp, DenyRule, FilterSpec, NotifyRule, PreparedFilter, SeccompError, build,
};
pub use sockaddr::{
    SockAddr, SockAddrError, UnixAddr, read_mmsghdr_names, read_msghdr_name, read_sockaddr,
};
pub use spawn::{
    ExitStatus, Pending, Reaped, Running, SpawnError, children, descendants, kill_descendants,
    send_signal, set_child_subreaper, spawn, spawn_init, try_reap, wait_for,
};
