//! String dimensions (executable paths, host names, HTTP paths) split into
//! disjoint atomic classes, so the solver never sees a string.
//!
//! An *atom* is a maximal set of strings that every pattern of both
//! policies treats alike: its *signature* is the set of patterns its
//! strings match. Exact strings (`api.github.com`) are atoms of their own
//! and never enter an automaton, so a thousand exact hosts cost a thousand
//! lookups; the wildcard patterns of a dimension go into one multi-pattern
//! DFA ([`dfa`]) whose reachable states list the remaining signatures.
//! Every atom carries a witness string, checked to have exactly the atom's
//! signature, and its size.

pub mod dfa;
mod pattern;

pub use pattern::forget_cached;
pub mod search;
pub mod universe;
pub mod validity;

use std::collections::{BTreeMap, HashMap};

pub use dfa::Size;
use dfa::{MultiDfa, Signature};
use universe::Universe;
use validity::{Rule, Validity};

use crate::error::ProverError;

/// A pattern of one dimension as the partition sees it.
#[derive(Debug, Clone)]
pub enum PatternKind {
    /// Matches exactly this string.
    Exact(String),
    /// A full-match regex (the matcher's `to_regex`) and an example string.
    Glob {
        /// The matcher's `to_regex`, matched against the whole string.
        regex: String,
        /// One string it matches, tried first as a witness.
        example: String,
    },
}

/// One atomic class of strings.
#[derive(Debug, Clone)]
pub struct Atom {
    /// A string of the atom enforcement can meet. `None` when the witness
    /// search could neither find one nor prove there is none: the atom is
    /// kept, and a finding that can only be shown with it is reported as
    /// inconclusive rather than dropped.
    pub witness: Option<String>,
    /// Why no witness was found, when none was.
    pub unwitnessed: Option<String>,
    /// How many strings the atom holds.
    pub size: Size,
    /// A single string named exactly by some pattern.
    pub exact: bool,
    /// The patterns (indices into the partition's pattern list) whose
    /// strings include this atom.
    pub sig: Vec<u32>,
}

impl Atom {
    /// Whether the atom has a concrete string to show.
    pub fn is_witnessed(&self) -> bool {
        self.witness.is_some()
    }

    /// Length of the witness, for preferring short ones; unwitnessed atoms
    /// sort last.
    pub fn witness_len(&self) -> usize {
        self.witness.as_ref().map_or(usize::MAX, String::len)
    }
}

/// The atoms of one dimension.
#[derive(Debug)]
pub struct Partition {
    /// Indexed by atom id.
    pub atoms: Vec<Atom>,
    /// For each pattern, the atoms it covers (sorted).
    pub(crate) members: Vec<Vec<u32>>,
    keys: HashMap<String, u32>,
    names: Vec<String>,
    dfa: MultiDfa,
    exact_atoms: HashMap<String, u32>,
    sig_atoms: HashMap<Signature, u32>,
    /// Where building it took its time (a line of `Stats::phases`).
    pub phases: String,
}

/// Collects the patterns of a dimension before the partition is built.
#[derive(Debug, Default)]
pub struct PatternSet {
    keys: Vec<String>,
    kinds: Vec<PatternKind>,
    index: HashMap<String, u32>,
    /// Some pattern matches single characters (`?`, a class), so a
    /// dimension of Unicode strings needs its automaton to read UTF-8.
    chars: bool,
}

impl PatternSet {
    /// Adds a pattern under a key (its canonical text); returns its index.
    pub fn add(&mut self, key: &str, kind: PatternKind) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let i = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(key.to_owned());
        self.kinds.push(kind);
        self.index.insert(key.to_owned(), i);
        i
    }

    /// Patterns added so far.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No pattern added yet.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Notes that a pattern matches single characters or names non-ASCII
    /// ones. Without such a pattern, every regex of a Unicode dimension is
    /// ASCII literals, `[^/]*` and `.*`, which match the same valid UTF-8
    /// strings read as bytes as read as characters; the byte automaton is
    /// much smaller, and the witness search keeps witnesses valid UTF-8.
    pub fn needs_chars(&mut self) {
        self.chars = true;
    }
}

/// What the partition needs from a dimension's own spelling rules.
pub struct DimSpec {
    /// Every string of the dimension, as regexes.
    pub universe: Universe,
    /// Whether a witness candidate is a string enforcement can meet.
    pub valid: fn(&str) -> bool,
    /// The same rule as an automaton, for the witness search.
    pub rule: Rule,
    /// Product states the witness search may enter per signature
    /// ([`search::BUDGET`]; smaller only to test what happens when it
    /// gives up).
    pub budget: usize,
}

impl Partition {
    /// Splits the dimension into atoms and finds a witness for each; fails
    /// when an automaton cannot be built.
    pub fn build(set: PatternSet, spec: &DimSpec) -> Result<Self, ProverError> {
        let PatternSet {
            keys,
            kinds,
            index,
            chars,
        } = set;
        let uni = &spec.universe;
        let unicode = uni.unicode && chars;
        // DFA patterns: the universe, its rejections, then unique wildcard
        // regexes.
        let mut regexes: Vec<String> = vec![uni.accept.clone()];
        regexes.extend(uni.reject.iter().cloned());
        let n_reject = uni.reject.len();
        let mut wild: Vec<Vec<u32>> = Vec::new();
        let mut regex_id: HashMap<&str, usize> = HashMap::new();
        let mut exact_strings: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        let mut examples: HashMap<usize, Vec<&str>> = HashMap::new();
        for (i, kind) in kinds.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            match kind {
                PatternKind::Exact(s) => exact_strings.entry(s.as_str()).or_default().push(i),
                PatternKind::Glob { regex, example } => {
                    let id = *regex_id.entry(regex.as_str()).or_insert_with(|| {
                        regexes.push(fit_regex(regex, unicode));
                        wild.push(Vec::new());
                        wild.len() - 1
                    });
                    if let Some(w) = wild.get_mut(id) {
                        w.push(i);
                    }
                    examples.entry(id).or_default().push(example.as_str());
                }
            }
        }
        let t0 = std::time::Instant::now();
        let dfa = MultiDfa::build(&regexes, unicode)?;
        let t_build = t0.elapsed();
        let in_universe = |sig: &[u32]| {
            sig.first() == Some(&0)
                && !sig
                    .iter()
                    .any(|&p| p >= 1 && usize::try_from(p).is_ok_and(|p| p <= n_reject))
        };
        let explored = dfa.explore(&in_universe);
        let t_explore = t0.elapsed();
        let mut enumerated = 0usize;

        let mut atoms: Vec<Atom> = Vec::new();
        let mut exact_atoms: HashMap<String, u32> = HashMap::new();
        let mut exact_per_sig: HashMap<Signature, u128> = HashMap::new();
        let to_patterns = |sig: &[u32]| -> Vec<u32> {
            let mut out: Vec<u32> = sig
                .iter()
                .filter_map(|&p| usize::try_from(p).ok()?.checked_sub(n_reject + 1))
                .filter_map(|id| wild.get(id))
                .flatten()
                .copied()
                .collect();
            out.sort_unstable();
            out
        };
        for (s, own) in &exact_strings {
            let dsig = dfa.signature(s);
            if !in_universe(&dsig) || !(spec.valid)(s) {
                continue;
            }
            *exact_per_sig.entry(dsig.clone()).or_default() += 1;
            let mut sig = to_patterns(&dsig);
            sig.extend(own.iter().copied());
            sig.sort_unstable();
            sig.dedup();
            exact_atoms.insert(
                (*s).to_owned(),
                u32::try_from(atoms.len()).unwrap_or(u32::MAX),
            );
            atoms.push(Atom {
                witness: Some((*s).to_owned()),
                unwitnessed: None,
                size: Size::Finite(1),
                exact: true,
                sig,
            });
        }
        let is_exact = |s: &str| exact_atoms.contains_key(s);
        let mut sig_atoms: HashMap<Signature, u32> = HashMap::new();
        // Signatures with their size, the witness found among the examples
        // and samples, and the visits per state a search would allow.
        let mut found: Vec<(Signature, Size, Option<String>, usize)> = Vec::new();
        for (dsig, info) in explored {
            let named = exact_per_sig.get(&dsig).copied().unwrap_or(0);
            let size = match info.size {
                Size::Finite(n) => Size::Finite(n.saturating_sub(named)),
                Size::Infinite => Size::Infinite,
            };
            if size == Size::Finite(0) {
                continue;
            }
            let candidates = dsig
                .iter()
                .filter_map(|&p| usize::try_from(p).ok()?.checked_sub(n_reject + 1))
                .filter_map(|id| examples.get(&id))
                .flatten()
                .copied()
                .chain(info.samples.iter().map(String::as_str));
            let fits = |c: &str| !is_exact(c) && (spec.valid)(c) && dfa.signature(c) == dsig;
            let witness = candidates
                .clone()
                .find(|c| fits(c))
                .map(str::to_owned)
                .or_else(|| candidates.filter_map(fill_empty_segments).find(|c| fits(c)));
            let k = usize::try_from(named)
                .unwrap_or(usize::MAX)
                .saturating_add(1);
            found.push((dsig, size, witness, k));
        }
        // The signatures without a witness yet, one search per `k`.
        let mut searched: HashMap<usize, search::Outcome> = HashMap::new();
        let mut ks: Vec<usize> = found
            .iter()
            .filter(|f| f.2.is_none())
            .map(|f| f.3)
            .collect();
        ks.sort_unstable();
        ks.dedup();
        for k in ks {
            let at: Vec<usize> = (0..found.len())
                .filter(|&i| found.get(i).is_some_and(|f| f.2.is_none() && f.3 == k))
                .collect();
            let sigs: Vec<&[u32]> = at
                .iter()
                .filter_map(|&i| found.get(i).map(|f| f.0.as_slice()))
                .collect();
            enumerated += sigs.len();
            let outcomes = search::witnesses(
                &dfa,
                &sigs,
                // Tabulated only here: most partitions find every witness
                // among the examples and samples, and never search.
                Validity::of(spec.rule),
                k,
                &is_exact,
                &|c| (spec.valid)(c),
                spec.budget,
            );
            searched.extend(at.into_iter().zip(outcomes));
        }
        for (i, (dsig, size, mut witness, _)) in found.into_iter().enumerate() {
            let mut unwitnessed = None;
            match searched.remove(&i) {
                None => {}
                Some(search::Outcome::Found(w)) => witness = Some(w),
                // Every string of this signature is named exactly, or
                // not one enforcement can meet: nothing is left.
                Some(search::Outcome::Empty) => continue,
                Some(search::Outcome::Unknown(why)) => unwitnessed = Some(why),
            }
            let sig = to_patterns(&dsig);
            sig_atoms.insert(dsig, u32::try_from(atoms.len()).unwrap_or(u32::MAX));
            atoms.push(Atom {
                witness,
                unwitnessed,
                size,
                exact: false,
                sig,
            });
        }
        let phases = format!(
            "  partition of {} patterns: build {t_build:?}, explore {:?}, witnesses {:?} ({enumerated} searched)",
            keys.len(),
            t_explore - t_build,
            t0.elapsed() - t_explore
        );
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
        let _ = &kinds;
        for (a, atom) in atoms.iter().enumerate() {
            for &p in &atom.sig {
                if let Some(m) = members.get_mut(p as usize) {
                    m.push(u32::try_from(a).unwrap_or(u32::MAX));
                }
            }
        }
        Ok(Self {
            atoms,
            members,
            keys: index,
            names: keys,
            dfa,
            exact_atoms,
            sig_atoms,
            phases,
        })
    }

    /// The atoms a pattern covers (empty for an unknown key).
    pub fn atoms_of(&self, key: &str) -> &[u32] {
        self.keys
            .get(key)
            .and_then(|&i| self.members.get(i as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// The key (canonical text) of a pattern.
    pub fn name(&self, pattern: u32) -> &str {
        self.names.get(pattern as usize).map_or("", String::as_str)
    }

    /// The atom a string belongs to; `None` outside the universe.
    pub fn classify(&self, s: &str) -> Option<u32> {
        if let Some(&a) = self.exact_atoms.get(s) {
            return Some(a);
        }
        let sig = self.dfa.signature(s);
        self.sig_atoms.get(&sig).copied()
    }

    /// Number of atoms.
    pub fn len(&self) -> usize {
        self.atoms.len()
    }

    /// No atoms: the dimension's universe is empty.
    pub fn is_empty(&self) -> bool {
        self.atoms.is_empty()
    }

    /// `None` for an id out of range.
    pub fn atom(&self, id: u32) -> Option<&Atom> {
        self.atoms.get(id as usize)
    }
}

/// A shortest string of a DFA state leaves every `[^/]*` segment empty
/// (`/repos//git-upload-pack`), which no canonical path or resolved
/// executable has; the same string with each empty segment spelled `x` is
/// usually what the witness search would find, for the price of one check
/// instead of a walk of the product with the validity automaton.
fn fill_empty_segments(s: &str) -> Option<String> {
    s.contains("//").then(|| {
        let mut out = s.replace("//", "/x/");
        // `///` leaves one `//` behind after a single pass.
        while out.contains("//") {
            out = out.replace("//", "/x/");
        }
        out
    })
}

/// The matcher writes regexes for Unicode mode; in byte mode its
/// "matches nothing" class must be spelled with bytes.
pub(crate) fn fit_regex(regex: &str, unicode: bool) -> String {
    let re = format!("(?:{regex})");
    if unicode {
        re
    } else {
        re.replace(r"[^\x{0}-\x{10FFFF}]", r"[a&&b]")
    }
}
