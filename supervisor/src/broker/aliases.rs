//! Binaries named through a symbolic link.
//!
//! A policy names `/usr/bin/python3`; on Debian that is a link to
//! `/usr/bin/python3.11`, and the kernel reports the file it executed, the
//! link's target, as `/proc/<pid>/exe`. So at launch and at every reload
//! each exact binary path of the bundle is resolved, link by link, in the
//! workload's filesystem (`/proc/<pid>/root`), and the target carries the
//! rules of the name as well as its own. A SHA-256 pin still applies: it
//! is checked on the file that runs. Globs are not expanded: a glob names
//! what it matches, and the targets of the links among those are files of
//! their own that the author can name.
//!
//! A target the workload can write is not expanded unless the name is
//! pinned: the workload could put any program there (the compiler's
//! E0410 sees only the name, not where the link leads).

use std::collections::BTreeMap;
use std::path::Path;

use policy_bundle::Identity;

use sandbox::writable::Writable;

/// Link targets and the policy names that lead to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aliases {
    by_target: BTreeMap<String, Vec<String>>,
}

impl Aliases {
    /// Resolves the exact binary paths of `identities` in the filesystem
    /// seen from `root`. Returns one line per expansion, for the log. A
    /// path that does not resolve (missing, a loop) expands to nothing:
    /// its rules still apply to that exact path.
    #[must_use]
    pub fn expand(
        identities: &[Identity],
        root: &Path,
        writable: Option<&Writable>,
    ) -> (Self, Vec<String>) {
        let mut by_target: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut lines = Vec::new();
        for id in identities {
            let Some(named) = id.binary.glob.exact() else {
                continue;
            };
            let Ok(target) = enforcer::resolve_links(root, Path::new(named)) else {
                continue;
            };
            let plantable =
                id.binary.sha256.is_none() && writable.and_then(|w| w.tree_of(&target)).is_some();
            let target = target.to_string_lossy().into_owned();
            if target == named {
                continue;
            }
            if plantable {
                lines.push(format!(
                    "binary `{named}` is a link to `{target}`, which the workload can write: not expanded (pin `{named}` to allow it)"
                ));
                continue;
            }
            let names = by_target.entry(target.clone()).or_default();
            if !names.iter().any(|n| n == named) {
                names.push(named.to_owned());
                lines.push(format!(
                    "binary `{named}` is a link to `{target}`, which is what runs: both carry its rules"
                ));
            }
        }
        (Self { by_target }, lines)
    }

    /// The policy names that link to the executable `path`.
    #[must_use]
    pub fn names_for(&self, path: &str) -> &[String] {
        self.by_target.get(path).map_or(&[], Vec::as_slice)
    }
}
