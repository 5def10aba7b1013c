//! Whether a user may write a path: the kernel's own permission check
//! (`faccessat2` with `AT_EACCESS`: mode bits, ACLs, read-only mounts),
//! so the supervisor does not re-implement it. Run it on a thread that has
//! become the workload's user without capabilities
//! ([`crate::with_credentials`]) to ask for the workload.

#![forbid(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether the calling thread's effective ids and capabilities may write
/// `path` (without following a final symbolic link's absence: a missing
/// path is an error).
pub fn may_write(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    match crate::sys::fd::access(&c, libc::W_OK, libc::AT_EACCESS) {
        Ok(()) => Ok(true),
        Err(crate::Errno(libc::EACCES | libc::EPERM | libc::EROFS)) => Ok(false),
        // ETXTBSY: a running executable, writable once it stops running.
        Err(crate::Errno(libc::ETXTBSY)) => Ok(true),
        Err(e) => Err(e.into()),
    }
}
