//! Binaries named through a symbolic link.
//!
//! A policy names `/usr/bin/python3`; on Debian that is a link to
//! `/usr/bin/python3.11`, and the kernel reports the file it executed, the
//! link's target, as `/proc/<pid>/exe`. So each exact binary path of the
//! bundle is resolved, link by link, in the workload's filesystem, and the
//! target carries the rules of the name as well as its own. A SHA-256 pin
//! still applies: it is checked on the file that runs. Globs are not
//! expanded: a glob names what it matches, and the targets of the links
//! among those are files of their own that the author can name.
//!
//! A target the workload can write is not expanded unless the name is
//! pinned: the workload could put any program there (the compiler's
//! E0410 sees only the name, not where the link leads).
//!
//! The supervisor resolves them under the workload's root at launch and at
//! every reload; a standalone sandbox resolves them on its own host before
//! the workload runs and reports them in its `Evidence`.

use std::path::Path;

use crate::writable::Writable;

/// A binary the bundle names by its exact path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedBinary {
    /// The path the bundle names.
    pub path: String,
    /// Its rules pin a SHA-256.
    pub pinned: bool,
}

/// What resolving the names found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Each name that is a link, with the file it leads to.
    pub links: Vec<(String, String)>,
    /// One line per name found to be a link, expanded or not, for the log.
    pub lines: Vec<String>,
}

/// Resolves `names` in the filesystem seen from `root`. A path that does
/// not resolve (missing, a loop) expands to nothing: its rules still apply
/// to that exact path.
#[must_use]
pub fn resolve<'a>(
    names: impl IntoIterator<Item = &'a NamedBinary>,
    root: &Path,
    writable: Option<&Writable>,
) -> Resolved {
    let mut out = Resolved::default();
    for named in names {
        let Ok(target) = enforcer::resolve_links(root, Path::new(&named.path)) else {
            continue;
        };
        let plantable = !named.pinned && writable.and_then(|w| w.tree_of(&target)).is_some();
        let target = target.to_string_lossy().into_owned();
        if target == named.path {
            continue;
        }
        let name = &named.path;
        if plantable {
            out.lines.push(format!(
                "binary `{name}` is a link to `{target}`, which the workload can write: not expanded (pin `{name}` to allow it)"
            ));
            continue;
        }
        if !out.links.iter().any(|(n, _)| n == name) {
            out.lines.push(format!(
                "binary `{name}` is a link to `{target}`, which is what runs: both carry its rules"
            ));
            out.links.push((name.clone(), target));
        }
    }
    out
}
