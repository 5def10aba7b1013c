//! A bare errno for code that runs between `fork` and `exec`.
//!
//! Child-side helpers return [`Errno`] rather than [`std::io::Error`] so that
//! their signatures say what they promise: no allocation, nothing but a
//! number to hand back through a pipe or an exit status.

#![forbid(unsafe_code)]

use std::fmt;

/// An errno value as returned by a failed system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's current errno; reading it does not allocate.
    #[must_use]
    pub(crate) fn last() -> Self {
        Self(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }

    /// The raw errno number.
    #[must_use]
    pub const fn raw(self) -> i32 {
        self.0
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        Self::from_raw_os_error(e.0)
    }
}

/// Errno names a policy may use for a denied syscall, with their numbers.
const NAMES: [(&str, i32); 16] = [
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EINVAL", libc::EINVAL),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTSUP", libc::ENOTSUP),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("ENETUNREACH", libc::ENETUNREACH),
];

impl Errno {
    /// The errno called `name` (such as `EPERM`), among those a seccomp
    /// deny rule may sensibly answer with.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, value)| Self(*value))
    }
}

/// Turns a raw syscall return (`-1` plus errno) into a `Result`.
pub(crate) fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

/// As [`check`], for libc functions returning `c_int`.
pub(crate) fn check_int(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}
