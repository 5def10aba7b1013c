//! Which trees the workload's mount namespace shows `noexec`.
//!
//! An identity (a binary rule, pinned or not) vouches for the code of the
//! file that runs. Code the workload wrote itself, loaded into that
//! process (`LD_PRELOAD`, `dlopen`, `mmap(PROT_EXEC)`), would borrow the
//! identity; the broker's check of the process's mappings at connect time
//! sees it only while it is mapped, and planted code can copy itself into
//! anonymous memory and unmap its file first. So the trees the policy lets
//! the workload write but not execute are mounted `noexec`, under every
//! path a mount shows them at: the kernel then refuses every executable
//! mapping of a file there, and no such code ever runs.
//!
//! A tree the policy lets the workload both write and execute stays
//! executable (the author asked for it; the connect-time check is what
//! guards identities there), and so does a tree with an execute right
//! below a `noexec` one: its `noexec` is cleared again.

use std::path::{Path, PathBuf};

use enforcer::{FsAccess, FsRule};

use crate::mountinfo::{Mount, aliases};
use crate::writable::{WRITE_RIGHTS, granting};

/// What to mount `noexec`, and what to make executable again below it,
/// each in the order to apply it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every path the trees the workload may write but not execute
    /// appear at.
    pub noexec: Vec<PathBuf>,
    /// Every path the trees with an execute right below those appear at.
    pub exec_again: Vec<PathBuf>,
}

/// The plan for the Landlock rules the workload applies.
#[must_use]
pub fn plan(rules: &[FsRule], mounts: &[Mount]) -> Plan {
    let exec = granting(rules, FsAccess::EXECUTE);
    let write = granting(rules, WRITE_RIGHTS);
    // Landlock rights are inherited: an execute right on a directory
    // above a tree covers the tree.
    let executable = |p: &Path| exec.iter().any(|e| p.starts_with(e));
    // Only directories and files hold code; a device node (`/dev/null`,
    // `/dev/ptmx`) does not, and a mount on it can break it (devpts finds
    // its instance through the node's place).
    let holds_code = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_dir() || m.is_file());
    let roots: Vec<&PathBuf> = write
        .iter()
        .filter(|w| !executable(w) && holds_code(w))
        .collect();
    let noexec = everywhere(roots.iter().copied(), mounts);
    let below = exec
        .iter()
        .filter(|e| roots.iter().any(|w| e.starts_with(w) && e != w));
    let exec_again = everywhere(below, mounts);
    Plan { noexec, exec_again }
}

/// Every alias of every tree, without repeats, shallowest first (a mount
/// made on a deeper path must come after the one it lies in).
fn everywhere<'a>(trees: impl Iterator<Item = &'a PathBuf>, mounts: &[Mount]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for tree in trees {
        for alias in aliases(tree, mounts) {
            if !out.contains(&alias) {
                out.push(alias);
            }
        }
    }
    out.sort_by_key(|p| p.components().count());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writable::rule;

    #[test]
    fn written_trees_are_noexec_unless_an_execute_right_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in ["w", "w/bin", "wx", "x"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let write = FsAccess::WRITE_FILE | FsAccess::MAKE_REG;
        let p = plan(
            &[
                rule(&base.join("w"), write),
                rule(&base.join("w/bin"), FsAccess::EXECUTE),
                rule(&base.join("wx"), write | FsAccess::EXECUTE),
                rule(&base.join("x"), FsAccess::EXECUTE),
                rule(&base.join("x"), write),
                rule(&base.join("missing"), write),
                rule(Path::new("/dev/null"), write),
            ],
            &[],
        );
        assert_eq!(
            p,
            Plan {
                noexec: vec![base.join("w")],
                exec_again: vec![base.join("w/bin")],
            }
        );
    }

    #[test]
    fn a_bind_mount_of_a_written_tree_is_noexec_too() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("w")).unwrap();
        let mounts = [
            Mount {
                dev: "1:1".into(),
                root: "/".into(),
                mount_point: "/".into(),
                fstype: "ext4".into(),
            },
            Mount {
                dev: "1:1".into(),
                root: base.join("w"),
                mount_point: "/mnt/alias".into(),
                fstype: "ext4".into(),
            },
        ];
        let p = plan(&[rule(&base.join("w"), FsAccess::WRITE_FILE)], &mounts);
        let mut want = vec![PathBuf::from("/mnt/alias"), base.join("w")];
        want.sort_by_key(|p| p.components().count());
        assert_eq!(p.noexec, want);
    }
}
