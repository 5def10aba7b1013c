//! Rules on one process's `/proc/<pid>` entries.
//!
//! Rule paths are opened by the supervisor while it prepares Landlock, so
//! `/proc/self`, `/proc/thread-self` and the links into them (`/proc/net`,
//! `/proc/mounts`) would resolve to the *supervisor's* entries: its network
//! namespace (`net/tcp`, `net/unix`, `net/route`), its command line, its
//! mounts. So those rules are not opened there: [`is_own_link`] picks them
//! out, and the forked child opens them itself, just before it restricts
//! itself, where they name the child's entries, which `exec` keeps for the
//! workload's first process ([`crate::PreparedRuleset::restrict_self`]).
//! A Landlock rule names an inode, and each process has its own
//! `/proc/<pid>` directory, so processes the workload starts later do not
//! get theirs (they are refused, never given someone else's). Every other
//! rule that lands in a `/proc/<pid>` directory (a pid written literally)
//! is refused ([`process_entry`]).
//!
//! A workload in a PID namespace of its own sees another procfs instance
//! at `/proc`, whose inodes no rule opened here names; there every rule on
//! procfs ([`is_procfs`]) is opened by the child.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Component, Path, PathBuf};

/// `PROC_SUPER_MAGIC`, the `f_type` of procfs.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Whether `file` is on a procfs.
pub(crate) fn is_procfs(file: &File) -> io::Result<bool> {
    Ok(crate::sys::fd::filesystem_type(file.as_fd())? == PROC_SUPER_MAGIC)
}

/// Where `file` (opened from a rule's path) lives when it is inside one
/// process's `/proc/<pid>` directory (that directory included); `None`
/// for anything else, `/proc` itself and its global files among them.
pub(crate) fn process_entry(file: &File) -> io::Result<Option<PathBuf>> {
    if !is_procfs(file)? {
        return Ok(None);
    }
    let resolved = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    Ok(is_process_dir(&resolved).then_some(resolved))
}

/// `/proc/self`, `/proc/thread-self`, `/proc/net`, `/proc/mounts`, or a
/// path below one of them: resolved by whoever opens it.
pub(crate) fn is_own_link(path: &Path) -> bool {
    let mut parts = path.components();
    let root = (parts.next(), parts.next());
    let link = parts.next();
    matches!(root, (Some(Component::RootDir), Some(Component::Normal(p))) if p == "proc")
        && matches!(link, Some(Component::Normal(l))
            if ["self", "thread-self", "net", "mounts"].iter().any(|n| l == *n))
}

/// `/proc/<digits>` or below, as the kernel prints an opened path.
fn is_process_dir(path: &Path) -> bool {
    let mut parts = path.components();
    let root = (parts.next(), parts.next());
    let pid = parts.next();
    matches!(root, (Some(Component::RootDir), Some(Component::Normal(p))) if p == "proc")
        && matches!(pid, Some(Component::Normal(p))
            if p.to_str().is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_per_process_directories_count() {
        for (path, want) in [
            ("/proc/1234", true),
            ("/proc/1234/net", true),
            ("/proc/1234/task/1235", true),
            ("/proc", false),
            ("/proc/sys/net", false),
            ("/proc/irq/12", false),
            ("/usr/proc/12", false),
        ] {
            assert_eq!(is_process_dir(Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn links_to_the_opener() {
        for (path, want) in [
            ("/proc/self", true),
            ("/proc/self/net/tcp", true),
            ("/proc/thread-self", true),
            ("/proc/net", true),
            ("/proc/mounts", true),
            ("/proc/selfish", false),
            ("/proc/1/net", false),
            ("/proc", false),
        ] {
            assert_eq!(is_own_link(Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn self_links_resolve_to_this_process() {
        let me = std::process::id().to_string();
        for link in [
            "/proc/self",
            "/proc/thread-self",
            "/proc/net",
            "/proc/self/net",
        ] {
            let file = File::open(link).unwrap();
            let got = process_entry(&file).unwrap().unwrap();
            assert!(
                got.starts_with(Path::new("/proc").join(&me)),
                "{link}: {got:?}"
            );
        }
        assert_eq!(process_entry(&File::open("/proc").unwrap()).unwrap(), None);
        assert_eq!(process_entry(&File::open("/usr").unwrap()).unwrap(), None);
    }
}
