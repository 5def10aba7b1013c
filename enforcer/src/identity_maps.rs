//! The code a process runs besides its executable: the files it has
//! mapped executable, as `/proc/<pid>/maps` lists them.
//!
//! `/proc/<pid>/exe` names one file, but `LD_PRELOAD`, `LD_AUDIT`,
//! `LD_LIBRARY_PATH`, `dlopen` and a plain `mmap(PROT_EXEC)` all put other
//! code in the same process, behind the same identity. The supervisor
//! reads the executable mappings at connect time to see where that code
//! came from; this module only reports them.
//!
//! The kernel's `PROCMAP_QUERY` ioctl (Linux 6.11) is asked first: it
//! hands over only the executable, file-backed mappings, one call each,
//! where reading `maps` makes the kernel print every mapping of the
//! process as text (a python3 has hundreds). The text is the fallback on
//! older kernels.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

const DELETED_SUFFIX: &[u8] = b" (deleted)";

/// One file mapped executable into a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMapping {
    /// As the kernel names the mapped file (links resolved), `" (deleted)"`
    /// stripped.
    pub path: PathBuf,
    /// The kernel marks the file unlinked (or the mapping is a memfd):
    /// `path` no longer leads to what was mapped.
    pub deleted: bool,
}

/// The distinct files mapped executable into process (or thread) `pid`.
/// Anonymous executable memory (a JIT's) and the kernel's own pages
/// (`[vdso]`) are not files and are not listed.
pub fn code_mappings(pid: u32) -> io::Result<Vec<CodeMapping>> {
    let mut maps = File::open(format!("/proc/{pid}/maps"))?;
    if let Some(found) = query_mappings(&maps)? {
        return Ok(found);
    }
    let mut text = Vec::new();
    maps.read_to_end(&mut text)?;
    Ok(text_mappings(&text))
}

fn push(out: &mut Vec<CodeMapping>, m: CodeMapping) {
    if out.last() != Some(&m) && !out.contains(&m) {
        out.push(m);
    }
}

fn text_mappings(text: &[u8]) -> Vec<CodeMapping> {
    let mut out: Vec<CodeMapping> = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        if let Some(m) = parse_line(line) {
            push(&mut out, m);
        }
    }
    out
}

const QUERY_VMA_EXECUTABLE: u64 = 0x04;
const QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;
const QUERY_FILE_BACKED_VMA: u64 = 0x20;
/// `PATH_MAX`, plus room for `" (deleted)"`.
const NAME_MAX: usize = 4096 + 16;

/// The executable file mappings through `PROCMAP_QUERY`; `None` when the
/// kernel does not have it.
fn query_mappings(maps: &File) -> io::Result<Option<Vec<CodeMapping>>> {
    let mut out = Vec::new();
    let mut name = vec![0_u8; NAME_MAX];
    let mut addr = 0_u64;
    loop {
        let flags = QUERY_COVERING_OR_NEXT_VMA | QUERY_VMA_EXECUTABLE | QUERY_FILE_BACKED_VMA;
        let found = match crate::sys::mem::procmap_query(maps.as_fd(), flags, addr, &mut name) {
            Ok(found) => found,
            // No mapping at or after `addr`: done.
            Err(crate::Errno(libc::ENOENT)) => return Ok(Some(out)),
            Err(crate::Errno(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP)) if out.is_empty() => {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        // The name is NUL-terminated; `name_len` counts the NUL.
        let len = found.name_len.saturating_sub(1);
        let text = name.get(..len).unwrap_or_default();
        let (path, deleted) = match text.strip_suffix(DELETED_SUFFIX) {
            Some(p) => (p, true),
            None => (text, false),
        };
        if path.first() == Some(&b'/') {
            push(
                &mut out,
                CodeMapping {
                    path: PathBuf::from(OsString::from_vec(path.to_vec())),
                    deleted,
                },
            );
        }
        if found.end <= addr {
            return Err(io::Error::other("PROCMAP_QUERY did not advance"));
        }
        addr = found.end;
    }
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
    fn the_query_and_the_text_agree() {
        let maps = File::open("/proc/self/maps").unwrap();
        // The development and CI kernels are 6.18: the query exists.
        let mut queried = query_mappings(&maps)
            .unwrap()
            .expect("PROCMAP_QUERY (Linux 6.11+)");
        assert!(!queried.is_empty());
        let mut text = text_mappings(&std::fs::read("/proc/self/maps").unwrap());
        queried.sort_by(|a, b| a.path.cmp(&b.path));
        text.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(queried, text);
    }

    #[test]
    fn our_own_code_is_listed() {
        let maps = code_mappings(std::process::id()).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(maps.iter().any(|m| m.path == exe), "{maps:?}");
        assert!(maps.iter().all(|m| !m.deleted));
    }
}
