//! Who made a trapped call, as the sandbox protocol reports it: read
//! through `/proc` of the workload's PID namespace, where the sandbox is
//! PID 1 and the notification's tid means what it says.
//!
//! The supervisor decides on these facts; it never sees the process. So
//! every fact a decision can need is read here: the executable and
//! whether it was unlinked, its SHA-256 when the bundle pins a binary
//! (cached by the file's identity), the code mapped into the process that
//! the identity does not vouch for, and the writable tree holding the
//! executable.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use enforcer::FingerprintCache;
use sandbox_protocol::{Caller, MAX_REASON};

use crate::writable::Writable;

/// How many binaries' hashes are kept.
const FINGERPRINTS: usize = 256;

/// Reads callers; one per sandbox.
#[derive(Debug)]
pub struct Identify {
    /// `None` when no binary is pinned: nothing is hashed.
    hashes: Option<Mutex<FingerprintCache>>,
    /// What the workload can write; `None` skips the code checks (no
    /// Landlock table to judge by).
    writable: Option<Writable>,
}

impl Identify {
    /// Identifies callers of a workload that can write `writable`,
    /// hashing their executables when `hash` says so.
    #[must_use]
    pub fn new(writable: Option<Writable>, hash: bool) -> Self {
        Self {
            hashes: hash.then(|| Mutex::new(FingerprintCache::new(FINGERPRINTS))),
            writable,
        }
    }

    /// The caller behind thread `tid`. The caller of this checks the
    /// notification is still valid afterwards: until then the thread may
    /// have gone and its number been reused.
    pub fn caller(&self, tid: u32) -> io::Result<Caller> {
        let exe = enforcer::exe_path(tid)?;
        let sha256 = match &self.hashes {
            Some(hashes) => Some(
                hashes
                    .lock()
                    .map_err(|_| io::Error::other("fingerprint cache poisoned"))?
                    .fingerprint(tid)?
                    .sha256,
            ),
            None => None,
        };
        let shown = exe.path.to_string_lossy();
        let (foreign_code, writable_tree) = match &self.writable {
            Some(w) => (
                w.foreign_code(tid, &shown).map(|why| cut(why, MAX_REASON)),
                w.tree_of(&exe.path)
                    .map(|t| t.as_os_str().as_bytes().to_vec()),
            ),
            None => (None, None),
        };
        Ok(Caller {
            pid: enforcer::tgid_of(tid),
            tid,
            exe: exe.path.as_os_str().as_bytes().to_vec(),
            exe_deleted: exe.deleted,
            exe_sha256: sha256,
            foreign_code,
            writable_tree,
        })
    }
}

/// `text` cut to at most `max` bytes on a character boundary: a reason
/// over the protocol's limit would get the whole message refused.
#[must_use]
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
