//! Binaries named through a symbolic link ([`sandbox::links`]): the file
//! that runs carries the rules of every name that leads to it.

use std::collections::BTreeMap;
use std::path::Path;

use policy_bundle::Identity;

use sandbox::links::{self, NamedBinary};
use sandbox::writable::Writable;

/// Link targets and the policy names that lead to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aliases {
    by_target: BTreeMap<String, Vec<String>>,
}

impl Aliases {
    /// Resolves the exact binary paths of `identities` in the filesystem
    /// seen from `root`. Returns one line per link found, for the log.
    #[must_use]
    pub fn expand(
        identities: &[Identity],
        root: &Path,
        writable: Option<&Writable>,
    ) -> (Self, Vec<String>) {
        let resolved = links::resolve(&named_binaries(identities), root, writable);
        (Self::from_links(resolved.links), resolved.lines)
    }

    /// The aliases of `(name, target)` links resolved elsewhere (a
    /// standalone sandbox's `Evidence`).
    #[must_use]
    pub fn from_links(links: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut by_target: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, target) in links {
            let names = by_target.entry(target).or_default();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Self { by_target }
    }

    /// The policy names that link to the executable `path`.
    #[must_use]
    pub fn names_for(&self, path: &str) -> &[String] {
        self.by_target.get(path).map_or(&[], Vec::as_slice)
    }
}

/// The binaries `identities` name by an exact path.
#[must_use]
pub fn named_binaries(identities: &[Identity]) -> Vec<NamedBinary> {
    identities
        .iter()
        .filter_map(|id| {
            Some(NamedBinary {
                path: id.binary.glob.exact()?.to_owned(),
                pinned: id.binary.sha256.is_some(),
            })
        })
        .collect()
}
