//! Every path at which a directory can be reached, from the mount table.
//!
//! Landlock grants by inode: a rule on `/sandbox` covers the same files
//! when a bind mount shows them at `/mnt/alias`, or when their filesystem
//! is mounted a second time. A check that compares path prefixes against
//! `/sandbox` alone misses those names, so the trees the workload may
//! write are widened to every place the mount table shows them
//! ([`aliases`]). The workload's mount namespace is a copy of the
//! supervisor's made at launch (plus its own `/proc` and
//! `/etc/resolv.conf`), so the supervisor's table is the one to read.

use std::path::{Component, Path, PathBuf};

/// One line of `/proc/self/mountinfo`: which directory of which
/// filesystem is mounted where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `major:minor` of the filesystem.
    pub dev: String,
    /// The directory of the filesystem the mount shows (`/` for all of it).
    pub root: PathBuf,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The filesystem's type (`cgroup2`, `ext4`...).
    pub fstype: String,
}

/// The mount table of this process.
pub fn read() -> std::io::Result<Vec<Mount>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    parse(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "/proc/self/mountinfo has a line this reader does not understand",
        )
    })
}

/// `None` when a line lacks the fields the kernel always writes.
fn parse(text: &str) -> Option<Vec<Mount>> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut fields = line.split(' ');
            let dev = fields.nth(2)?;
            let root = fields.next()?;
            let mount_point = fields.next()?;
            // Optional fields end at a lone `-`, the type follows.
            let fstype = fields.skip_while(|f| *f != "-").nth(1)?;
            Some(Mount {
                dev: dev.to_owned(),
                root: PathBuf::from(unescape(root)),
                mount_point: PathBuf::from(unescape(mount_point)),
                fstype: fstype.to_owned(),
            })
        })
        .collect()
}

/// The kernel writes space, tab, newline and backslash in a path as three
/// octal digits after a backslash.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0_u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every path under which the files below `tree` (a canonical path) can be
/// reached, `tree` itself first: for each mount of the same filesystem
/// that shows `tree` or a part of it, where it shows it. Mounts stacked on
/// top of one of these paths hide it, which only makes the list longer
/// than needed, never shorter.
#[must_use]
pub fn aliases(tree: &Path, mounts: &[Mount]) -> Vec<PathBuf> {
    let mut out = vec![tree.to_path_buf()];
    // The mount `tree` lies in: the deepest mount point above it, the
    // last one mounted where several share it.
    let Some(home) = mounts
        .iter()
        .filter(|m| tree.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
    else {
        return out;
    };
    let Ok(inside) = tree.strip_prefix(&home.mount_point) else {
        return out;
    };
    let in_fs = home.root.join(inside);
    for m in mounts.iter().filter(|m| m.dev == home.dev) {
        let alias = if let Ok(rest) = in_fs.strip_prefix(&m.root) {
            join_plain(&m.mount_point, rest)
        } else if m.root.starts_with(&in_fs) {
            m.mount_point.clone()
        } else {
            continue;
        };
        if !out.contains(&alias) {
            out.push(alias);
        }
    }
    out
}

/// `base` joined with `rest` without letting an empty `rest` add a slash.
fn join_plain(base: &Path, rest: &Path) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in rest.components() {
        if let Component::Normal(part) = c {
            out.push(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:5 / /proc rw - proc proc rw
40 22 254:0 /srv/sandbox /mnt/alias rw shared:1 - ext4 /dev/vda rw
41 22 254:0 /srv/sandbox/sub /opt/sub\\040dir rw - ext4 /dev/vda rw
42 22 254:0 /srv /data rw - ext4 /dev/vda rw
43 22 0:40 / /srv/sandbox/tmp rw - tmpfs tmpfs rw
";

    fn table() -> Vec<Mount> {
        parse(TABLE).unwrap()
    }

    #[test]
    fn fields_are_read_and_unescaped() {
        let t = table();
        assert_eq!(t.len(), 6);
        assert_eq!(t[3].mount_point, Path::new("/opt/sub dir"));
        assert_eq!(t[3].root, Path::new("/srv/sandbox/sub"));
        assert_eq!(t[3].dev, "254:0");
        assert_eq!(t[1].fstype, "proc");
        assert_eq!(t[5].fstype, "tmpfs");
        assert_eq!(unescape("a\\134b\\011c"), "a\\b\tc");
        assert_eq!(unescape("trailing\\"), "trailing\\");
        assert_eq!(parse("1 2"), None);
    }

    #[test]
    fn a_tree_is_found_under_every_mount_that_shows_it() {
        let a = aliases(Path::new("/srv/sandbox"), &table());
        assert_eq!(
            a,
            [
                PathBuf::from("/srv/sandbox"),
                PathBuf::from("/mnt/alias"),
                PathBuf::from("/opt/sub dir"),
                PathBuf::from("/data/sandbox"),
            ]
        );
    }

    #[test]
    fn a_tree_inside_a_bind_mount_maps_back_to_the_filesystem() {
        let a = aliases(Path::new("/mnt/alias/w"), &table());
        assert_eq!(
            a,
            [
                PathBuf::from("/mnt/alias/w"),
                PathBuf::from("/srv/sandbox/w"),
                PathBuf::from("/data/sandbox/w"),
            ]
        );
    }

    #[test]
    fn another_filesystem_has_no_aliases_but_its_own() {
        let a = aliases(Path::new("/srv/sandbox/tmp/x"), &table());
        assert_eq!(a, [PathBuf::from("/srv/sandbox/tmp/x")]);
        assert_eq!(aliases(Path::new("/x"), &[]), [PathBuf::from("/x")]);
    }
}
