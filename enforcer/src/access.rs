//! Whether a user may write a path: the kernel's own permission check
//! (`faccessat2` with `AT_EACCESS`: mode bits, ACLs, read-only mounts),
//! so the supervisor does not re-implement it. Run it on a thread that has
//! become the workload's user without capabilities
//! ([`crate::with_credentials`]) to ask for the workload.

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
    // SAFETY: `c` is a NUL-terminated string that lives across the call;
    // faccessat only reads it.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // ETXTBSY: a running executable, writable once it stops running.
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => Ok(false),
        Some(libc::ETXTBSY) => Ok(true),
        _ => Err(e),
    }
}
