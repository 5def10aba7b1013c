//! What the workload can write, as far as the supervisor must know it: to
//! refuse reloading a bundle the workload could rewrite, and to tell code
//! the workload could have planted from code it could not.
//!
//! Two gates decide a write, and both must open: the Landlock ruleset the
//! workload applied (rights are inherited, so a rule on a directory covers
//! everything below it, under every path a mount shows it at; without
//! Landlock at all, everything is covered),
//! and the ordinary permissions for the workload's user, asked of the
//! kernel from a thread that has become that user without capabilities.
//!
//! Replacing a file does not need write access to the file: write access
//! to any directory on its path is enough (rename the entry away, put
//! another in its place), unless the directory is sticky and the workload
//! owns neither it nor the entry. So a path is checked component by
//! component, from `/` down.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use enforcer::{FsAccess, FsRule};

/// Rights that change a file's content or a directory's entries.
pub const WRITE_RIGHTS: FsAccess = FsAccess::WRITE_FILE
    .union(FsAccess::TRUNCATE)
    .union(FsAccess::REMOVE_FILE)
    .union(FsAccess::REMOVE_DIR)
    .union(FsAccess::MAKE_REG)
    .union(FsAccess::MAKE_DIR)
    .union(FsAccess::MAKE_SYM)
    .union(FsAccess::REFER);

const S_ISVTX: u32 = 0o1000;

/// The canonical paths of the rules that grant any of `rights`. Landlock
/// opens a rule's path following links; a path that does not exist
/// grants nothing.
pub fn granting(rules: &[FsRule], rights: FsAccess) -> Vec<PathBuf> {
    rules
        .iter()
        .filter(|r| !r.access.intersection(rights).is_empty())
        .filter_map(|r| r.path.canonicalize().ok())
        .collect()
}

/// The workload's user, as the permission checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The uid the workload runs as, after `run_as`.
    pub uid: libc::uid_t,
    /// Its primary group.
    pub gid: libc::gid_t,
    /// Its supplementary groups, exactly as the workload gets them: a
    /// directory writable by one of them is writable by the workload.
    pub groups: Vec<libc::gid_t>,
}

/// The trees the workload may write to, and as whom.
#[derive(Debug, Clone)]
pub struct Writable {
    /// Canonical paths of the Landlock rules that grant a write right,
    /// and every other path a mount shows them at.
    trees: Vec<PathBuf>,
    /// `None`: the workload keeps the supervisor's user (without
    /// capabilities).
    user: Option<User>,
    own_uid: libc::uid_t,
}

impl Writable {
    /// From the Landlock rules the workload applies. `landlock` is false
    /// when the kernel enforces none of them (best effort without
    /// Landlock): then every path is a tree.
    #[must_use]
    pub fn new(rules: &[FsRule], landlock: bool, user: Option<User>, own_uid: libc::uid_t) -> Self {
        let mounts = crate::mountinfo::read();
        let trees = match (landlock, mounts) {
            // Landlock grants the inode, under every name a mount gives it.
            (true, Ok(mounts)) => granting(rules, WRITE_RIGHTS)
                .into_iter()
                .flat_map(|tree| crate::mountinfo::aliases(&tree, &mounts))
                .collect(),
            // Without Landlock, or without the mount table to tell where a
            // tree shows, every path counts as writable.
            _ => vec![PathBuf::from("/")],
        };
        Self {
            trees,
            user,
            own_uid,
        }
    }

    /// The tree whose Landlock rule lets the workload write below `path`
    /// (a canonical path), if any.
    #[must_use]
    pub fn tree_of(&self, path: &Path) -> Option<&Path> {
        self.trees
            .iter()
            .find(|t| path.starts_with(t))
            .map(PathBuf::as_path)
    }

    /// Why the identity of the executable `exe`, run by thread `tid`, does
    /// not vouch for the code that thread's process runs, or `None` when
    /// it does.
    ///
    /// The identity is the executable; every other file mapped executable
    /// must be one the workload cannot write, and still linked. A library
    /// the workload wrote (then preloaded, audited, `dlopen`ed or mapped)
    /// is refused, and so is a deleted file or a memfd. Anonymous
    /// executable memory (a JIT's) is not a file and is not judged. The
    /// caller checks the notification is still valid afterwards.
    #[must_use]
    pub fn foreign_code(&self, tid: u32, exe: &str) -> Option<String> {
        let maps = match enforcer::code_mappings(tid) {
            Ok(m) => m,
            Err(e) => return Some(format!("the code of `{exe}` cannot be read: {e}")),
        };
        for m in maps {
            let shown = m.path.display();
            if m.deleted {
                return Some(format!(
                    "`{exe}` runs code from `{shown}`, which was deleted after it was mapped (or is a memfd): its identity does not vouch for that code"
                ));
            }
            if m.path == Path::new(exe) {
                continue;
            }
            if let Some(tree) = self.tree_of(&m.path) {
                return Some(format!(
                    "`{exe}` runs code from `{shown}`, which the workload can write (under `{}`): its identity does not vouch for that code",
                    tree.display()
                ));
            }
        }
        None
    }

    /// A tree whose Landlock rule grants a write right on `dir` (a
    /// canonical path), on something below it or on something above it.
    #[must_use]
    pub fn tree_touching(&self, dir: &Path) -> Option<&Path> {
        self.trees
            .iter()
            .find(|t| dir.starts_with(t) || t.starts_with(dir))
            .map(PathBuf::as_path)
    }

    /// Why the workload could change what `file` (a canonical path) holds,
    /// or `None` when it cannot.
    #[must_use]
    pub fn exposure(&self, file: &Path) -> Option<String> {
        let shown = file.display();
        if self.tree_of(file).is_some() {
            match self.may_write(file) {
                Ok(false) => {}
                Ok(true) => return Some(format!("the workload may write `{shown}`")),
                Err(e) => {
                    return Some(format!(
                        "cannot tell whether the workload may write `{shown}`: {e}"
                    ));
                }
            }
        }
        let meta = match std::fs::metadata(file) {
            Ok(m) => m,
            Err(e) => return Some(format!("cannot read `{shown}`: {e}")),
        };
        // Another name of the same file may lie under a writable tree (a
        // directory's link count counts its subdirectories instead).
        if !meta.is_dir()
            && meta.nlink() > 1
            && !self.trees.is_empty()
            && self.may_write(file).unwrap_or(true)
        {
            return Some(format!(
                "`{shown}` has {} hard links, one of which the workload may be able to write",
                meta.nlink()
            ));
        }
        let mut entry = file;
        while let Some(dir) = entry.parent() {
            if let Some(why) = self.replaceable(dir, entry) {
                return Some(why);
            }
            entry = dir;
        }
        None
    }

    /// Whether the workload can replace `entry` in directory `dir`.
    fn replaceable(&self, dir: &Path, entry: &Path) -> Option<String> {
        self.tree_of(dir)?;
        let (d, e) = (dir.display(), entry.display());
        match self.may_write(dir) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(err) => {
                return Some(format!(
                    "cannot tell whether the workload may write `{d}`: {err}"
                ));
            }
        }
        let uid = self.user.as_ref().map_or(self.own_uid, |u| u.uid);
        let (Ok(dm), Ok(em)) = (std::fs::metadata(dir), std::fs::symlink_metadata(entry)) else {
            return Some(format!("cannot read `{d}` or `{e}`"));
        };
        let sticky = dm.mode() & S_ISVTX != 0;
        if sticky && dm.uid() != uid && em.uid() != uid {
            return None;
        }
        Some(format!(
            "the workload may write the directory `{d}`, and so replace `{e}`"
        ))
    }

    /// The kernel's answer for the workload's user.
    fn may_write(&self, path: &Path) -> std::io::Result<bool> {
        let creds = self.user.as_ref().map(|u| enforcer::Credentials {
            uid: u.uid,
            gid: u.gid,
            groups: &u.groups,
        });
        enforcer::with_credentials(creds, || enforcer::may_write(path))
            .map_err(|e| std::io::Error::from_raw_os_error(e.raw()))?
    }
}

/// A rule granting `access` on `path`, for the tests of this crate.
#[cfg(test)]
pub(crate) fn rule(path: &Path, access: FsAccess) -> FsRule {
    FsRule {
        path: path.to_path_buf(),
        access,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_the_rules_with_a_write_right() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("w")).unwrap();
        std::fs::create_dir(base.join("r")).unwrap();
        let w = Writable::new(
            &[
                rule(&base.join("w"), FsAccess::MAKE_REG),
                rule(&base.join("r"), FsAccess::READ_FILE | FsAccess::EXECUTE),
                rule(&base.join("missing"), FsAccess::WRITE_FILE),
            ],
            true,
            None,
            0,
        );
        assert_eq!(
            w.tree_of(&base.join("w/x/lib.so")),
            Some(base.join("w").as_path())
        );
        assert_eq!(w.tree_of(&base.join("r/lib.so")), None);
        assert_eq!(w.tree_of(&base.join("wx")), None, "a sibling, not a child");
        let none = Writable::new(&[], false, None, 0);
        assert_eq!(
            none.tree_of(Path::new("/usr/lib/x.so")),
            Some(Path::new("/"))
        );
    }
}
