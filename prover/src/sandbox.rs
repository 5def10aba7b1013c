//! What the Landlock ruleset of a bundle lets the workload do with files:
//! read a secret file, plant a program where a network rule expects one.
//!
//! Landlock rights are inherited: a file has the rights of every granted
//! path above it. The prover assumes the ruleset is applied as written
//! (in `best_effort` mode the execute right is not relied on, because an
//! older kernel may apply less). The working directory's rights are
//! decided at launch and are not modelled.

use policy_bundle::{Bundle, LandlockPath};
use policy_bundle::{LandlockMode, SecretSource};

use crate::domain::tree_glob;
use policy_bundle::matcher::BinaryGlob;

fn has(p: &LandlockPath, right: &str) -> bool {
    p.access.iter().any(|a| a.rights.iter().any(|r| r == right))
}

pub(crate) fn covers(dir: &str, file: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    dir.is_empty() || file == dir || file.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    pub(crate) paths: Vec<(String, bool, bool, bool)>,
    pub(crate) best_effort: bool,
}

impl Sandbox {
    pub(crate) fn of(b: &Bundle) -> Sandbox {
        let ll = &b.enforcement.landlock;
        Sandbox {
            paths: ll
                .paths
                .iter()
                .map(|p| {
                    (
                        p.path.clone(),
                        has(p, "read_file"),
                        has(p, "write_file"),
                        has(p, "execute"),
                    )
                })
                .collect(),
            best_effort: ll.mode == LandlockMode::BestEffort,
        }
    }

    /// The granted path that lets the workload read `file`, if any.
    pub(crate) fn reader_of(&self, file: &str) -> Option<&str> {
        self.paths
            .iter()
            .find(|(p, r, _, _)| *r && covers(p, file))
            .map(|(p, ..)| p.as_str())
    }

    /// Whether the workload can read a secret: an environment variable it
    /// is given, or a file under a readable path.
    pub(crate) fn can_read(&self, source: &SecretSource) -> bool {
        match source {
            SecretSource::Env(_) => true,
            SecretSource::File(f) => self.reader_of(f).is_some(),
        }
    }

    /// Globs for the trees the workload may write to.
    pub(crate) fn write_trees(&self) -> Vec<(String, BinaryGlob)> {
        self.trees(|w, _| w)
    }

    /// Globs for the trees the workload may execute from.
    pub(crate) fn exec_trees(&self) -> Vec<(String, BinaryGlob)> {
        self.trees(|_, x| x)
    }

    fn trees(&self, pick: fn(bool, bool) -> bool) -> Vec<(String, BinaryGlob)> {
        self.paths
            .iter()
            .filter(|(_, _, w, x)| pick(*w, *x))
            .filter_map(|(p, ..)| Some((p.clone(), tree_glob(p)?)))
            .collect()
    }
}
