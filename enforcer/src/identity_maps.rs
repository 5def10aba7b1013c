//! The code a process runs besides its executable: the files it has
//! mapped executable, as `/proc/<pid>/maps` lists them.
//!
//! `/proc/<pid>/exe` names one file, but `LD_PRELOAD`, `LD_AUDIT`,
//! `LD_LIBRARY_PATH`, `dlopen` and a plain `mmap(PROT_EXEC)` all put other
//! code in the same process, behind the same identity. The supervisor
//! reads the executable mappings at connect time to see where that code
//! came from; this module only reports them.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

const DELETED_SUFFIX: &[u8] = b" (deleted)";

/// One file mapped executable into a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMapping {
    pub path: PathBuf,
    /// The kernel marks the file unlinked (or the mapping is a memfd):
    /// `path` no longer leads to what was mapped.
    pub deleted: bool,
}

/// The distinct files mapped executable into process (or thread) `pid`.
/// Anonymous executable memory (a JIT's) and the kernel's own pages
/// (`[vdso]`) are not files and are not listed.
pub fn code_mappings(pid: u32) -> io::Result<Vec<CodeMapping>> {
    let text = std::fs::read(format!("/proc/{pid}/maps"))?;
    let mut out: Vec<CodeMapping> = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(m) = parse_line(line) else {
            continue;
        };
        if out.last() != Some(&m) && !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// `start-end perms offset dev inode   path`: the path is everything after
/// the fifth field, and may contain spaces.
fn parse_line(line: &[u8]) -> Option<CodeMapping> {
    let mut rest = line;
    let mut perms: &[u8] = &[];
    for field in 0..5 {
        rest = trim_start(rest);
        let end = rest.iter().position(|&b| b == b' ')?;
        let (value, tail) = rest.split_at(end);
        if field == 1 {
            perms = value;
        }
        rest = tail;
    }
    if perms.get(2) != Some(&b'x') {
        return None;
    }
    let path = trim_start(rest);
    if path.first() != Some(&b'/') {
        return None;
    }
    let (path, deleted) = match path.strip_suffix(DELETED_SUFFIX) {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(CodeMapping {
        path: PathBuf::from(OsString::from_vec(path.to_vec())),
        deleted,
    })
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ').count();
    s.get(n..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_file_mappings_are_parsed_and_the_rest_skipped() {
        let line = |s: &str| parse_line(s.as_bytes());
        assert_eq!(
            line("7f1c2000-7f1c4000 r-xp 00002000 fe:01 1234     /usr/lib/libz.so.1.2.13"),
            Some(CodeMapping {
                path: "/usr/lib/libz.so.1.2.13".into(),
                deleted: false
            })
        );
        assert_eq!(
            line("7f1c2000-7f1c4000 r-xp 00000000 00:01 99   /memfd:x (deleted)"),
            Some(CodeMapping {
                path: "/memfd:x".into(),
                deleted: true
            })
        );
        assert_eq!(
            line("7f1c2000-7f1c4000 r-xp 00000000 fe:01 7   /tmp/a b/lib.so").map(|m| m.path),
            Some("/tmp/a b/lib.so".into())
        );
        assert_eq!(
            line("7f1c2000-7f1c4000 r--p 00000000 fe:01 7   /usr/lib/x.so"),
            None
        );
        assert_eq!(
            line("7ffd1000-7ffd3000 r-xp 00000000 00:00 0   [vdso]"),
            None
        );
        assert_eq!(line("7f000000-7f100000 rwxp 00000000 00:00 0 "), None);
        assert_eq!(line(""), None);
    }

    #[test]
    fn our_own_code_is_listed() {
        let maps = code_mappings(std::process::id()).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(maps.iter().any(|m| m.path == exe), "{maps:?}");
        assert!(maps.iter().all(|m| !m.deleted));
    }
}
