//! A binary rule that a planted program can satisfy.
//!
//! The supervisor identifies a connecting program by the path of its
//! executable. If that path lies in a tree the workload may write (and, in
//! `landlock hard`, execute from), the workload can put any program there
//! and it inherits the rule's network access; only a SHA-256 pin tells the
//! real program from the planted one. This is `check --prove`'s
//! `writable_binary_identity` finding, made a diagnostic of every `check`
//! and `compile`: an error under `landlock hard`, a warning in
//! `best_effort` (where execute rights may not be enforced, so a writable
//! tree is enough). The working directory's rights are decided at launch
//! and cannot be matched against a path here.

use std::collections::{HashMap, HashSet};

use regex_automata::dfa::{Automaton as _, StartKind, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::ir::{FsGrant, LandlockMode};
use crate::resolve::Resolved;
use policy_bundle::matcher::BinaryGlob;

pub(super) fn planted(r: &Resolved, d: &mut Diagnostics) {
    let p = &r.policy;
    let hard = p.landlock.mode == LandlockMode::Hard;
    let writable: Vec<&FsGrant> = p.fs.iter().filter(|g| g.rights.write).collect();
    if writable.is_empty() {
        return;
    }
    let executable: Vec<&FsGrant> = p.fs.iter().filter(|g| g.rights.exec).collect();
    let mut automata = Automata::default();
    let mut reaches = |glob: &BinaryGlob, tree: &str| reaches_with(glob, tree, &mut automata);
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, ep) in p.endpoints.iter().enumerate() {
        let Some((file, span)) = r.spans.endpoints.get(i) else {
            continue;
        };
        for b in ep.binaries.iter().filter(|b| b.sha256.is_none()) {
            let glob = &b.glob;
            let Some(tree) = writable.iter().find(|g| reaches(glob, &g.path)) else {
                continue;
            };
            if hard && !executable.iter().any(|g| reaches(glob, &g.path)) {
                continue;
            }
            // One report per binary pattern: the first rule that grants it.
            if !seen.insert(glob.as_str()) {
                continue;
            }
            let code = if hard { codes::E0410 } else { codes::W0110 };
            let help = if glob.is_exact() {
                format!(
                    "pin it (`{glob} sha256:<hex>`) so only that file is recognised, or install it outside `{}`",
                    tree.path
                )
            } else {
                format!(
                    "name exact, pinned binaries instead of `{glob}`, or keep the pattern out of `{}`",
                    tree.path
                )
            };
            d.push(
                Diagnostic::new(
                    code,
                    file,
                    *span,
                    format!(
                        "`{glob}` {} `{}`, which the workload can write ({}:{}): a program it plants there gets this rule's network access",
                        if glob.is_exact() { "lies in" } else { "matches paths in" },
                        tree.path,
                        tree.origin.file,
                        tree.origin.line
                    ),
                )
                .label("unpinned binary in a writable tree")
                .help(help),
            );
        }
    }
}

/// The automaton of each glob, built once per policy: a policy names the
/// same glob in many rules, and each is checked against every writable and
/// executable tree (determinizing a glob costs far more than walking it).
#[derive(Default)]
struct Automata {
    dfas: HashMap<String, Option<dense::DFA<Vec<u32>>>>,
}

impl Automata {
    fn of(&mut self, glob: &BinaryGlob) -> Option<&dense::DFA<Vec<u32>>> {
        self.dfas
            .entry(glob.as_str().to_owned())
            .or_insert_with(|| automaton(glob))
            .as_ref()
    }
}

/// [`reaches_with`] with automata of its own.
#[cfg(test)]
fn reaches(glob: &BinaryGlob, tree: &str) -> bool {
    reaches_with(glob, tree, &mut Automata::default())
}

/// Whether `glob` matches `tree` or some path below it.
fn reaches_with(glob: &BinaryGlob, tree: &str, automata: &mut Automata) -> bool {
    let tree = tree.trim_end_matches('/');
    let below =
        |path: &str| path == tree || path.strip_prefix(tree).is_some_and(|r| r.starts_with('/'));
    if let Some(exact) = glob.exact() {
        return below(exact);
    }
    if glob.matches(tree) {
        return true;
    }
    // Every path the glob matches lies in its literal prefix, so the
    // automaton is needed only for a tree strictly inside that prefix.
    let prefix = glob.literal_prefix().trim_end_matches('/');
    if below(prefix) && glob.matches(&glob.example()) {
        return true;
    }
    let inside_prefix = tree
        .strip_prefix(prefix)
        .is_some_and(|r| r.starts_with('/'));
    if !inside_prefix && !below(prefix) {
        return false;
    }
    // No automaton (never expected for a binary glob): a tree inside the
    // prefix may hold a match, so report it.
    automata
        .of(glob)
        .and_then(|dfa| continues_to_match(dfa, &format!("{tree}/")))
        .unwrap_or(true)
}

/// The glob's DFA; `None` if it cannot be built.
fn automaton(glob: &BinaryGlob) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored),
        )
        .build(&format!("^(?:{})$", glob.to_regex()))
        .ok()
}

/// Whether some string that starts with `prefix` matches the glob of
/// `dfa`: run the DFA over the prefix, then search the states reachable
/// from there for one that accepts. `None` if the DFA has no start state.
fn continues_to_match(dfa: &dense::DFA<Vec<u32>>, prefix: &str) -> Option<bool> {
    let mut state = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .ok()?;
    for &b in prefix.as_bytes() {
        state = dfa.next_state(state, b);
        if dfa.is_dead_state(state) {
            return Some(false);
        }
    }
    let mut seen: HashSet<StateID> = HashSet::from([state]);
    let mut todo = vec![state];
    while let Some(s) = todo.pop() {
        if dfa.is_match_state(dfa.next_eoi_state(s)) {
            return Some(true);
        }
        for b in 0..=u8::MAX {
            let next = dfa.next_state(s, b);
            if !dfa.is_dead_state(next) && seen.insert(next) {
                todo.push(next);
            }
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_reaches_a_tree_when_it_matches_something_below_it() {
        let g = |s: &str| BinaryGlob::parse(s).unwrap();
        let table = [
            ("/sandbox/bin/tool", "/sandbox", true),
            ("/sandbox", "/sandbox", true),
            ("/sandboxes/tool", "/sandbox", false),
            // A writable file the glob names is a place to plant, too.
            ("/usr/bin/*", "/usr/bin/tmp", true),
            ("/usr/bin/*", "/usr/bin/d/e", false),
            ("/usr/bin/**", "/usr/bin/tmp", true),
            ("/opt/**/bin/x", "/opt/data", true),
            ("/opt/*/bin/x", "/opt/data", true),
            ("/opt/*/bin/x", "/opt/data/deep", false),
            ("/opt/a*/bin/x", "/opt/data", false),
            ("/**", "/tmp", true),
            ("/usr/bin/py*", "/tmp", false),
            ("/tmp/*", "/", true),
        ];
        for (glob, tree, expected) in table {
            assert_eq!(reaches(&g(glob), tree), expected, "{glob} in {tree}");
        }
    }

    /// The answer of the automaton alone, which the prefix shortcuts in
    /// [`reaches_with`] must never change.
    fn reaches_by_automaton(glob: &BinaryGlob, tree: &str) -> Option<bool> {
        let tree = tree.trim_end_matches('/');
        if glob.matches(tree) {
            return Some(true);
        }
        continues_to_match(&automaton(glob)?, &format!("{tree}/"))
    }

    proptest::proptest! {
        #[test]
        fn prefix_shortcuts_agree_with_the_automaton(
            pattern in r"(/(\*\*|([ab.\-*?]|\[a-b\]|\[!a\]){1,3})){1,4}",
            trees in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(&["a", "b", "ab", "x", "-", "*"][..]),
                    0..4,
                ),
                16,
            ),
        ) {
            let Ok(glob) = BinaryGlob::parse(&pattern) else {
                return Ok(());
            };
            for segs in trees {
                let tree = format!("/{}", segs.join("/"));
                if let Some(expected) = reaches_by_automaton(&glob, &tree) {
                    proptest::prop_assert_eq!(reaches(&glob, &tree), expected, "{} in {}", pattern, tree);
                }
            }
        }
    }
}
