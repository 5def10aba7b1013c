//! The revision floor: what a supervisor remembers across restarts.
//!
//! A signature says who issued an envelope, never when, and the check
//! "not older than the revision in force" holds only while the supervisor
//! runs. Without memory, a restarted supervisor would take any old envelope
//! an impostor replays. So, per sandbox, the highest revision applied (its
//! policy and digest with it) is kept in a file of the state directory, and
//! a launch or a reload below it is refused.
//!
//! The file is the supervisor's alone: the directory and the file must be
//! owned by the supervisor's user and writable by nobody else, and the
//! launch refuses a policy whose Landlock rules would let the workload
//! write there (see [`crate::gateway::Gateway::guard_state`]). A file that
//! cannot be read as a floor is an error, never an empty floor: resetting
//! it silently would be exactly the downgrade it exists to stop.
//!
//! Writes are atomic (a new file, synced, renamed over the old one, the
//! directory synced), so a crash leaves the old floor or the new one.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the floor lives when `--state-dir` is not given.
pub const DEFAULT_DIR: &str = "/var/lib/openshell-supervisor";

/// The format of the file, so that a later one is refused rather than
/// misread.
const VERSION: u32 = 1;

/// The longest state file read: a few hundred bytes are expected.
const MAX_LEN: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error("the state directory `{}`: {why}", .path.display())]
    Dir { path: PathBuf, why: String },
    #[error("the state file `{}` is not valid ({why}); it is not reset: check it, or remove it to accept any revision again", .path.display())]
    Corrupt { path: PathBuf, why: String },
    #[error("the state file `{}`: {why}", .path.display())]
    Unsafe { path: PathBuf, why: String },
    #[error(
        "`{0}` cannot name a state file (letters, digits, `.`, `_`, `-`; not starting with `.`)"
    )]
    Sandbox(String),
    #[error("cannot {what} `{}`: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The highest revision applied in a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Applied {
    pub version: u32,
    pub sandbox: String,
    pub policy: String,
    pub revision: i64,
    pub digest: String,
    /// Seconds since the Unix epoch, for whoever reads the file.
    pub applied_at: i64,
}

impl Applied {
    #[must_use]
    pub fn new(sandbox: &str, policy: &str, revision: i64, digest: &str, applied_at: i64) -> Self {
        Self {
            version: VERSION,
            sandbox: sandbox.to_owned(),
            policy: policy.to_owned(),
            revision,
            digest: digest.to_owned(),
            applied_at,
        }
    }
}

/// A state directory that passed the checks.
#[derive(Debug, Clone)]
pub struct StateDir {
    /// Canonical.
    dir: PathBuf,
    uid: libc::uid_t,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError {
    let path = path.to_path_buf();
    move |source| StateError::Io { what, path, source }
}

/// Why a file or directory of `uid`'s with these metadata is not safe to
/// trust, if it is not.
fn unsafe_owner_or_mode(meta: &std::fs::Metadata, uid: libc::uid_t, others: u32) -> Option<String> {
    if meta.uid() != uid {
        return Some(format!(
            "it is owned by uid {}, not by the supervisor's uid {uid}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    (mode & others != 0).then(|| {
        format!("its mode {mode:04o} lets other users than its owner write it, or read it")
    })
}

impl StateDir {
    /// Opens `dir`, creating it (mode 0700) when it does not exist: it
    /// must be a directory, not a link, owned by the supervisor's user and
    /// not writable by group or others.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let uid = crate::workload::own_ids().0;
        let bad = |why: String| StateError::Dir {
            path: dir.to_path_buf(),
            why,
        };
        match std::fs::symlink_metadata(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| {
                        bad(format!(
                            "cannot create it ({e}); give another with `--state-dir`"
                        ))
                    })?;
            }
            Err(e) => return Err(bad(format!("cannot read it: {e}"))),
        }
        let meta =
            std::fs::symlink_metadata(dir).map_err(|e| bad(format!("cannot read it: {e}")))?;
        if meta.file_type().is_symlink() {
            return Err(bad(
                "it is a symbolic link; name the directory itself".into()
            ));
        }
        if !meta.is_dir() {
            return Err(bad("it is not a directory".into()));
        }
        if let Some(why) = unsafe_owner_or_mode(&meta, uid, 0o022) {
            return Err(bad(why));
        }
        let dir = dir
            .canonicalize()
            .map_err(|e| bad(format!("cannot resolve it: {e}")))?;
        Ok(Self { dir, uid })
    }

    /// The directory, canonical.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The file of `sandbox`'s floor.
    pub fn file(&self, sandbox: &str) -> Result<PathBuf, StateError> {
        let ok = !sandbox.is_empty()
            && sandbox.len() <= 200
            && !sandbox.starts_with('.')
            && sandbox
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(StateError::Sandbox(sandbox.to_owned()));
        }
        Ok(self.dir.join(format!("{sandbox}.json")))
    }

    /// `sandbox`'s floor; `None` when nothing was ever applied here.
    pub fn load(&self, sandbox: &str) -> Result<Option<Applied>, StateError> {
        let path = self.file(sandbox)?;
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("read", &path)(e)),
        };
        let unsafe_file = |why: String| StateError::Unsafe {
            path: path.clone(),
            why,
        };
        if !meta.file_type().is_file() {
            return Err(unsafe_file("it is not a regular file".into()));
        }
        if let Some(why) = unsafe_owner_or_mode(&meta, self.uid, 0o077) {
            return Err(unsafe_file(format!(
                "{why}; it must be the supervisor's, mode 0600"
            )));
        }
        if meta.nlink() > 1 {
            return Err(unsafe_file(format!("it has {} hard links", meta.nlink())));
        }
        if meta.len() > MAX_LEN {
            return Err(StateError::Corrupt {
                path,
                why: format!("it is larger than {MAX_LEN} bytes"),
            });
        }
        let bytes = std::fs::read(&path).map_err(io("read", &path))?;
        let corrupt = |why: String| StateError::Corrupt {
            path: path.clone(),
            why,
        };
        let applied: Applied =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if applied.version != VERSION {
            return Err(corrupt(format!(
                "format version {} is not {VERSION}",
                applied.version
            )));
        }
        if applied.sandbox != sandbox {
            return Err(corrupt(format!(
                "it is sandbox `{}`'s, not `{sandbox}`'s",
                applied.sandbox
            )));
        }
        if applied.revision < 1 {
            return Err(corrupt(format!(
                "revision {} is not a revision",
                applied.revision
            )));
        }
        Ok(Some(applied))
    }

    /// Raises the floor to `applied`. A floor already higher (another
    /// supervisor of the same sandbox got further) stays.
    pub fn store(&self, applied: &Applied) -> Result<(), StateError> {
        let path = self.file(&applied.sandbox)?;
        if let Some(now) = self.load(&applied.sandbox)?
            && now.policy == applied.policy
            && now.revision > applied.revision
        {
            return Ok(());
        }
        let mut text = serde_json::to_vec_pretty(applied).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            why: e.to_string(),
        })?;
        text.push(b'\n');
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", applied.sandbox, std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io("write", &path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn dir() -> (tempfile::TempDir, StateDir) {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("state");
        let s = StateDir::open(&d).unwrap();
        (t, s)
    }

    #[test]
    fn the_floor_round_trips_and_only_rises() {
        let (_t, s) = dir();
        assert_eq!(s.load("sb").unwrap(), None);
        let mode = std::fs::metadata(s.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let a3 = Applied::new("sb", "agent", 3, "sha256:3", 1);
        s.store(&a3).unwrap();
        assert_eq!(s.load("sb").unwrap(), Some(a3.clone()));
        let meta = std::fs::metadata(s.file("sb").unwrap()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        s.store(&Applied::new("sb", "agent", 2, "sha256:2", 2))
            .unwrap();
        assert_eq!(s.load("sb").unwrap(), Some(a3));
        let a4 = Applied::new("sb", "agent", 4, "sha256:4", 3);
        s.store(&a4).unwrap();
        assert_eq!(s.load("sb").unwrap(), Some(a4));
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(s.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_corrupt_or_exposed_file_is_an_error_never_an_empty_floor() {
        let (_t, s) = dir();
        let f = s.file("sb").unwrap();
        let write = |text: &str, mode: u32| {
            std::fs::write(&f, text).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("{not json", 0o600);
        assert!(matches!(s.load("sb"), Err(StateError::Corrupt { .. })));
        write("", 0o600);
        assert!(matches!(s.load("sb"), Err(StateError::Corrupt { .. })));
        let other = serde_json::to_string(&Applied::new("other", "p", 2, "d", 0)).unwrap();
        write(&other, 0o600);
        assert!(matches!(s.load("sb"), Err(StateError::Corrupt { .. })));
        let good = serde_json::to_string(&Applied::new("sb", "p", 2, "d", 0)).unwrap();
        write(&good.replace("\"version\":1", "\"version\":9"), 0o600);
        assert!(matches!(s.load("sb"), Err(StateError::Corrupt { .. })));
        write(&good, 0o666);
        assert!(matches!(s.load("sb"), Err(StateError::Unsafe { .. })));
        // A store does not overwrite what it cannot read.
        assert!(s.store(&Applied::new("sb", "p", 3, "d", 0)).is_err());
        write(&good, 0o600);
        assert_eq!(s.load("sb").unwrap().unwrap().revision, 2);
        // Handed to the workload's user (nobody).
        std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
        assert!(matches!(s.load("sb"), Err(StateError::Unsafe { .. })));
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &f).unwrap();
        assert!(matches!(s.load("sb"), Err(StateError::Unsafe { .. })));
    }

    #[test]
    fn an_exposed_directory_and_bad_sandbox_names_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("open");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(StateDir::open(&d), Err(StateError::Dir { .. })));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(t.path(), &link).unwrap();
        assert!(matches!(StateDir::open(&link), Err(StateError::Dir { .. })));
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(StateDir::open(&file), Err(StateError::Dir { .. })));
        let (_t, s) = dir();
        for bad in ["", "../x", ".hidden", "a/b", "a b"] {
            assert!(matches!(s.file(bad), Err(StateError::Sandbox(_))), "{bad}");
        }
    }
}
