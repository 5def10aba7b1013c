//! Which binary made a trapped call.
//!
//! Everything goes through `/proc/<pid>/exe`, the kernel's own reference to
//! the file being executed, never through the path name: the file at that
//! path may have been replaced or deleted since the exec. The caller checks
//! [`crate::id_valid`] afterwards, so a pid reused meanwhile is noticed.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const DELETED_SUFFIX: &[u8] = b" (deleted)";

/// The path a process was executed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExePath {
    /// Absolute and with links resolved: the kernel's name for the open
    /// file, not the name the program was executed by.
    pub path: PathBuf,
    /// The file has since been unlinked; `path` names what it was. A policy
    /// should not trust a path match alone for such a binary.
    pub deleted: bool,
}

/// Reads `/proc/<pid>/exe`. The kernel appends `" (deleted)"` to the link of
/// an unlinked file; a file may also really be named so, which the link
/// count of the open file tells apart.
pub fn exe_path(pid: u32) -> io::Result<ExePath> {
    let link = format!("/proc/{pid}/exe");
    let target = std::fs::read_link(&link)?.into_os_string().into_vec();
    if let Some(stripped) = target.strip_suffix(DELETED_SUFFIX)
        && std::fs::metadata(&link)?.nlink() == 0
    {
        return Ok(ExePath {
            path: PathBuf::from(OsString::from_vec(stripped.to_vec())),
            deleted: true,
        });
    }
    Ok(ExePath {
        path: PathBuf::from(OsString::from_vec(target)),
        deleted: false,
    })
}

/// The process (thread group) a thread belongs to, from `/proc`; the
/// thread itself when that cannot be read.
#[must_use]
pub fn tgid_of(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

/// SHA-256 of a file's content.
pub fn sha256_file(path: &Path) -> io::Result<[u8; 32]> {
    sha256_reader(File::open(path)?)
}

fn sha256_reader(mut r: impl Read) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher.finalize().into())
}

/// What identifies a file's content without reading it. `ctime` is in the
/// key because no unprivileged call can set it back: a file rewritten and
/// given its old `mtime` still gets a new `ctime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i128,
    pub(crate) ctime_ns: i128,
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A running binary's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Of the file the process runs, read through `/proc/<pid>/exe`.
    pub key: FileKey,
    /// Of the content behind `key`, so a binary swapped at the same path
    /// gets another hash.
    pub sha256: [u8; 32],
    /// The hash came from the cache rather than from reading the file.
    pub cached: bool,
}

impl Fingerprint {
    /// Lowercase, as policies pin binaries by hash.
    #[must_use]
    pub fn sha256_hex(&self) -> String {
        sha256_hex(&self.sha256)
    }
}

/// A SHA-256 digest in lowercase hex, as policies pin binaries by hash.
#[must_use]
pub fn sha256_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hashes of executables seen before, so that the hundredth `connect` of
/// the same binary costs one `fstat`, not a read of the whole file.
#[derive(Debug)]
pub struct FingerprintCache {
    hashes: HashMap<FileKey, [u8; 32]>,
    capacity: usize,
}

impl FingerprintCache {
    /// A cache of at most `capacity` binaries; when full it starts over,
    /// which costs re-hashing and never a wrong answer.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            hashes: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Binaries hashed since the cache last started over; tests watch it to
    /// see a hit.
    #[must_use]
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// True until the first binary is hashed, and again right after a
    /// start-over.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Identifies the binary `pid` is running. The stat and the hash come
    /// from one open of `/proc/<pid>/exe`, so they describe the same file
    /// even if the path is replaced meanwhile.
    pub fn fingerprint(&mut self, pid: u32) -> io::Result<Fingerprint> {
        let file = File::open(format!("/proc/{pid}/exe"))?;
        let key = FileKey::of(&file.metadata()?);
        if let Some(sha256) = self.hashes.get(&key) {
            return Ok(Fingerprint {
                key,
                sha256: *sha256,
                cached: true,
            });
        }
        let sha256 = sha256_reader(&file)?;
        if self.hashes.len() >= self.capacity {
            self.hashes.clear();
        }
        self.hashes.insert(key, sha256);
        Ok(Fingerprint {
            key,
            sha256,
            cached: false,
        })
    }
}

/// Most symbolic links followed for one path, as the kernel's own limit.
const MAX_LINKS: u32 = 40;

/// The path the kernel reports as `/proc/<pid>/exe` for a program executed
/// as `path`, in the filesystem seen from `root` (`/proc/<pid>/root` for
/// a sandboxed process, `/` for our own view). Each component is followed
/// one link at a time under `root`, so an absolute link target stays in
/// that filesystem instead of escaping to ours. `..` is taken after the
/// links before it, as the kernel does.
pub fn resolve_links(root: &Path, path: &Path) -> io::Result<PathBuf> {
    use std::collections::VecDeque;
    use std::path::Component;
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a binary path must be absolute",
        ));
    }
    let mut rest: VecDeque<OsString> = names(path).collect();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = rest.pop_front() {
        match Path::new(&name).components().next() {
            Some(Component::ParentDir) => {
                resolved.pop();
                continue;
            }
            Some(Component::Normal(_)) => {}
            _ => continue,
        }
        let candidate = resolved.join(&name);
        let seen = root.join(candidate.strip_prefix("/").unwrap_or(&candidate));
        if !std::fs::symlink_metadata(&seen)?.file_type().is_symlink() {
            resolved = candidate;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&seen)?;
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        for (i, n) in names(&target).enumerate() {
            rest.insert(i, n);
        }
    }
    Ok(resolved)
}

/// The components of a path that name something (`..` included).
fn names(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    use std::path::Component;
    path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_owned()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}
