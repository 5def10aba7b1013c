//! The Landlock system calls, with their attribute layouts, and `openat2`.
//! The rule types and flags they take are Landlock's facts and stay in
//! `crate::landlock`.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::errno::{Errno, check};
use crate::landlock::{CREATE_RULESET_VERSION, RULE_NET_PORT, RULE_PATH_BENEATH};
use crate::sys::fd_number;

/// `struct landlock_ruleset_attr`.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

// The sizes of `<linux/landlock.h>` and `<linux/openat2.h>`.
const _: () = assert!(size_of::<RulesetAttr>() == 24);
const _: () = assert!(size_of::<PathBeneathAttr>() == 12);
const _: () = assert!(size_of::<NetPortAttr>() == 16);

/// The running kernel's Landlock ABI version (`ENOSYS` or `EOPNOTSUPP`
/// when Landlock is not built in or disabled).
pub(crate) fn abi_version() -> Result<libc::c_long, Errno> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the
    // kernel reads no memory and only returns the ABI number.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0_usize,
            CREATE_RULESET_VERSION,
        )
    })
}

/// A new ruleset handling these rights and scopes (close-on-exec).
pub(crate) fn create_ruleset(
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
) -> Result<OwnedFd, Errno> {
    let attr = RulesetAttr {
        handled_access_fs,
        handled_access_net,
        scoped,
    };
    // SAFETY: `attr` is live and fully initialised and its size is passed
    // alongside; fields an older kernel does not know are zero, which
    // `copy_struct_from_user` accepts.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            size_of::<RulesetAttr>(),
            0_u32,
        )
    };
    let fd = fd_number(ret)?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Grants `allowed_access` beneath the file or directory `parent`.
/// Async-signal-safe.
pub(crate) fn add_path_beneath_rule(
    ruleset: BorrowedFd<'_>,
    allowed_access: u64,
    parent: BorrowedFd<'_>,
) -> Result<(), Errno> {
    let attr = PathBeneathAttr {
        allowed_access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a live path-beneath attribute, the layout the kernel
    // reads for RULE_PATH_BENEATH; both fds are borrowed for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &raw const attr,
            0_u32,
        )
    })
    .map(drop)
}

/// Grants `allowed_access` on TCP port `port`.
pub(crate) fn add_net_port_rule(
    ruleset: BorrowedFd<'_>,
    allowed_access: u64,
    port: u64,
) -> Result<(), Errno> {
    let attr = NetPortAttr {
        allowed_access,
        port,
    };
    // SAFETY: `attr` is a live net-port attribute, the layout the kernel
    // reads for RULE_NET_PORT; the ruleset fd is borrowed for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_NET_PORT,
            &raw const attr,
            0_u32,
        )
    })
    .map(drop)
}

/// Enforces `ruleset` on the calling thread. Async-signal-safe.
pub(crate) fn restrict_self(ruleset: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: the fd is a live ruleset fd; flags 0 is valid on every ABI.
    // No memory is passed.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0_u32) })
        .map(drop)
}

/// `struct open_how` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const _: () = assert!(size_of::<OpenHow>() == 24);

/// `openat2(AT_FDCWD, path, O_PATH | O_CLOEXEC, RESOLVE_NO_MAGICLINKS)`.
/// Async-signal-safe: one syscall, no allocation.
pub(crate) fn open_path_no_magiclinks(path: &CStr) -> Result<OwnedFd, Errno> {
    let how = OpenHow {
        flags: u64::from((libc::O_PATH | libc::O_CLOEXEC).unsigned_abs()),
        mode: 0,
        resolve: libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: the path is NUL-terminated and `how` is a live open_how whose
    // size is passed alongside; the kernel only reads them.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &raw const how,
            size_of::<OpenHow>(),
        )
    };
    let fd = fd_number(ret)?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
