//! One pattern's DFA, as the tables the product automaton steps.
//!
//! Most patterns a diff compares are small globs (`/repos/[^/]*/hooks`,
//! `(?:/[^/]*)*`): a dozen states at most. regex-automata's dense builder
//! spends tens of microseconds on each of them in set-up that a handful of
//! states does not need, which on a typical small diff was a fifth of the
//! prover's time. Such a pattern is determinized here instead, by subset
//! construction over its Glushkov (position) automaton: the regex is parsed
//! by `regex-syntax` exactly as regex-automata parses it, so the meaning is
//! the same, and only the construction differs. A pattern with Unicode
//! classes, look-around or more than 128 positions still goes through
//! regex-automata; both end up in the same tables.

use regex_automata::dfa::Automaton as _;
use regex_automata::dfa::{StartKind, dense};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::sync::{Arc, Mutex};

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::error::ProverError;

/// Patterns recur: the two sides of a diff share most of theirs, and a
/// process that proves change after change (the gateway, a CI harness)
/// meets the same globs again and again. A pattern's DFA depends on the
/// regex alone, so it is kept: up to this many, then the cache starts over.
const CACHED_PATTERNS: usize = 4096;

/// Byte and character automata, by regex.
type Cache = [FxHashMap<String, Arc<PatternDfa>>; 2];
static CACHE: Mutex<Cache> = Mutex::new([
    FxHashMap::with_hasher(FxBuildHasher),
    FxHashMap::with_hasher(FxBuildHasher),
]);

/// The DFA of `pattern`, from the cache when it was built before.
pub(crate) fn cached(
    pattern: &str,
    unicode: bool,
    size_limit: usize,
) -> Result<Arc<PatternDfa>, ProverError> {
    let slot = usize::from(unicode);
    if let Ok(cache) = CACHE.lock()
        && let Some(dfa) = cache.get(slot).and_then(|m| m.get(pattern))
    {
        return Ok(Arc::clone(dfa));
    }
    let dfa = Arc::new(PatternDfa::build(pattern, unicode, size_limit)?);
    if let Ok(mut cache) = CACHE.lock()
        && let Some(map) = cache.get_mut(slot)
    {
        if map.len() >= CACHED_PATTERNS {
            map.clear();
        }
        map.insert(pattern.to_owned(), Arc::clone(&dfa));
    }
    Ok(dfa)
}

/// Empties the cache, so the next proofs build every automaton anew (to
/// measure them cold).
pub fn forget_cached() {
    if let Ok(mut cache) = CACHE.lock() {
        cache.iter_mut().for_each(FxHashMap::clear);
    }
}

/// No continuation: the pattern cannot match any longer string.
pub(crate) const DEAD: u32 = u32::MAX;

/// States a pattern's DFA may have; beyond it the pattern is refused.
const MAX_STATES: usize = 1 << 20;

/// A pattern's DFA: state 0 is the start, [`DEAD`] has no row.
pub(crate) struct PatternDfa {
    class: [u8; 256],
    classes: usize,
    /// `classes` entries per state: the next state, or [`DEAD`].
    trans: Vec<u32>,
    /// Per state: the pattern matches when the input ends here.
    accept: Vec<bool>,
}

impl PatternDfa {
    /// The DFA of an anchored regex that must match the whole input.
    pub(crate) fn build(
        pattern: &str,
        unicode: bool,
        size_limit: usize,
    ) -> Result<Self, ProverError> {
        if !unicode && let Some(dfa) = glushkov(pattern) {
            return Ok(dfa);
        }
        dense_tables(pattern, unicode, size_limit)
    }

    /// The byte class of `byte` in this pattern's alphabet.
    pub(crate) fn class_of(&self, byte: u8) -> u8 {
        self.class.get(usize::from(byte)).copied().unwrap_or(0)
    }

    pub(crate) fn next(&self, state: u32, byte: u8) -> u32 {
        (state as usize)
            .checked_mul(self.classes)
            .and_then(|row| row.checked_add(usize::from(self.class_of(byte))))
            .and_then(|at| self.trans.get(at))
            .copied()
            .unwrap_or(DEAD)
    }

    pub(crate) fn accepts(&self, state: u32) -> bool {
        self.accept.get(state as usize).copied().unwrap_or(false)
    }

    /// Whether some string (the empty one included) can still match from
    /// the start: a pattern that matches nothing takes no part.
    pub(crate) fn alive(&self) -> bool {
        self.accepts(0) || self.trans.iter().take(self.classes).any(|&n| n != DEAD)
    }

    /// Byte classes and a representative byte of each, lowest first.
    fn from_rows(class: [u8; 256], classes: usize) -> (Self, Vec<u8>) {
        let mut reps = vec![None; classes];
        for b in 0..=255u8 {
            let c = class.get(usize::from(b)).copied().unwrap_or(0);
            if let Some(slot @ None) = reps.get_mut(usize::from(c)) {
                *slot = Some(b);
            }
        }
        let dfa = Self {
            class,
            classes,
            trans: Vec::new(),
            accept: Vec::new(),
        };
        (dfa, reps.into_iter().flatten().collect())
    }
}

/// A set of positions (bit `i` = position `i`).
type Positions = u128;
const MAX_POSITIONS: usize = Positions::BITS as usize;

/// A sub-expression's positions: whether it matches the empty string,
/// which positions can come first and which last.
#[derive(Clone, Copy)]
struct Node {
    nullable: bool,
    first: Positions,
    last: Positions,
}

const EMPTY: Node = Node {
    nullable: true,
    first: 0,
    last: 0,
};

/// The Glushkov automaton under construction: one position per byte class
/// occurrence in the regex, and which positions may follow each.
#[derive(Default)]
struct Glushkov {
    /// The bytes each position reads, as a 256-bit set.
    labels: Vec<[u64; 4]>,
    follow: Vec<Positions>,
}

fn members(mut set: Positions) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let p = set.trailing_zeros();
        set &= set.wrapping_sub(1);
        (p < Positions::BITS).then_some(p as usize)
    })
}

impl Glushkov {
    fn position(&mut self, label: [u64; 4]) -> Option<Node> {
        let p = self.labels.len();
        if p >= MAX_POSITIONS {
            return None;
        }
        self.labels.push(label);
        self.follow.push(0);
        Some(Node {
            nullable: false,
            first: 1 << p,
            last: 1 << p,
        })
    }

    fn class(&mut self, ranges: impl Iterator<Item = (u32, u32)>) -> Option<Node> {
        let mut label = [0u64; 4];
        for (lo, hi) in ranges {
            for b in lo..=hi.min(255) {
                let word = label.get_mut((b >> 6) as usize)?;
                *word |= 1 << (b & 63);
            }
        }
        self.position(label)
    }

    fn link(&mut self, from: Positions, to: Positions) {
        for p in members(from) {
            if let Some(f) = self.follow.get_mut(p) {
                *f |= to;
            }
        }
    }

    fn concat(&mut self, a: Node, b: Node) -> Node {
        self.link(a.last, b.first);
        Node {
            nullable: a.nullable && b.nullable,
            first: a.first | if a.nullable { b.first } else { 0 },
            last: b.last | if b.nullable { a.last } else { 0 },
        }
    }

    /// `None` for what this construction does not cover.
    fn node(&mut self, hir: &Hir) -> Option<Node> {
        match hir.kind() {
            HirKind::Empty => Some(EMPTY),
            HirKind::Literal(lit) => {
                let mut n = EMPTY;
                for &b in lit.0.iter() {
                    let m = self.class(std::iter::once((u32::from(b), u32::from(b))))?;
                    n = self.concat(n, m);
                }
                Some(n)
            }
            HirKind::Class(Class::Bytes(c)) => {
                self.class(c.iter().map(|r| (u32::from(r.start()), u32::from(r.end()))))
            }
            HirKind::Class(Class::Unicode(_)) | HirKind::Look(_) => None,
            HirKind::Capture(c) => self.node(&c.sub),
            HirKind::Concat(parts) => {
                let mut n = EMPTY;
                for h in parts {
                    let m = self.node(h)?;
                    n = self.concat(n, m);
                }
                Some(n)
            }
            HirKind::Alternation(parts) => {
                let mut n = Node {
                    nullable: false,
                    first: 0,
                    last: 0,
                };
                for h in parts {
                    let m = self.node(h)?;
                    n = Node {
                        nullable: n.nullable || m.nullable,
                        first: n.first | m.first,
                        last: n.last | m.last,
                    };
                }
                Some(n)
            }
            HirKind::Repetition(r) => {
                // Each copy gets positions of its own: x{2,4} = x x x? x?,
                // x{2,} = x x x*.
                let copies = r.max.unwrap_or(r.min.saturating_add(1));
                if copies as usize > MAX_POSITIONS {
                    return None;
                }
                let mut n = EMPTY;
                for _ in 0..r.min {
                    let m = self.node(&r.sub)?;
                    n = self.concat(n, m);
                }
                if r.max.is_none() {
                    let m = self.node(&r.sub)?;
                    self.link(m.last, m.first);
                    n = self.concat(
                        n,
                        Node {
                            nullable: true,
                            ..m
                        },
                    );
                } else {
                    for _ in r.min..copies {
                        let m = self.node(&r.sub)?;
                        n = self.concat(
                            n,
                            Node {
                                nullable: true,
                                ..m
                            },
                        );
                    }
                }
                Some(n)
            }
        }
    }
}

/// Subset construction over the Glushkov automaton of a byte regex; `None`
/// when the regex uses what the construction does not cover (or does not
/// parse: regex-automata then reports the error).
fn glushkov(pattern: &str) -> Option<PatternDfa> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let mut g = Glushkov::default();
    let root = g.node(&hir)?;
    // Bytes that every position reads alike form one class. Positions
    // with one label (every `[^/]`) are taken together.
    let mut by_label: Vec<([u64; 4], Positions)> = Vec::new();
    for (p, label) in g.labels.iter().enumerate() {
        match by_label.iter_mut().find(|(l, _)| l == label) {
            Some((_, set)) => *set |= 1 << p,
            None => by_label.push((*label, 1 << p)),
        }
    }
    // The positions reading each byte, label by label over the label's own
    // bytes: a literal has one, so this is far less than every label for
    // every byte.
    let mut reading = [0 as Positions; 256];
    for (label, set) in &by_label {
        for (w, &word) in (0u8..).zip(label) {
            let mut bits = word;
            while bits != 0 {
                let b = usize::from(w) * 64 + bits.trailing_zeros() as usize;
                if let Some(m) = reading.get_mut(b) {
                    *m |= set;
                }
                bits &= bits - 1;
            }
        }
    }
    let mut masks: Vec<Positions> = Vec::new();
    let mut class = [0u8; 256];
    for (b, &mask) in reading.iter().enumerate() {
        let c = match masks.iter().position(|&m| m == mask) {
            Some(c) => c,
            None => {
                masks.push(mask);
                masks.len() - 1
            }
        };
        *class.get_mut(b)? = u8::try_from(c).ok()?;
    }
    let (mut dfa, _) = PatternDfa::from_rows(class, masks.len());
    // State 0 is the start; every other state is the set of positions
    // just read.
    let mut sets: Vec<Positions> = vec![0];
    let mut ids: FxHashMap<Positions, u32> = FxHashMap::default();
    let mut at = 0usize;
    while let Some(&set) = sets.get(at) {
        let follow = if at == 0 {
            root.first
        } else {
            members(set).fold(0, |f, p| f | g.follow.get(p).copied().unwrap_or(0))
        };
        dfa.accept.push(if at == 0 {
            root.nullable
        } else {
            set & root.last != 0
        });
        for &mask in &masks {
            let next = follow & mask;
            if next == 0 {
                dfa.trans.push(DEAD);
                continue;
            }
            let id = match ids.get(&next) {
                Some(&id) => id,
                None => {
                    if sets.len() >= MAX_STATES {
                        return None;
                    }
                    let id = u32::try_from(sets.len()).ok()?;
                    sets.push(next);
                    ids.insert(next, id);
                    id
                }
            };
            dfa.trans.push(id);
        }
        at += 1;
    }
    Some(dfa)
}

/// The tables of regex-automata's dense DFA for the pattern, from its
/// anchored start.
fn dense_tables(
    pattern: &str,
    unicode: bool,
    size_limit: usize,
) -> Result<PatternDfa, ProverError> {
    let d = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .minimize(false)
                .accelerate(false)
                .specialize_start_states(false)
                .determinize_size_limit(Some(size_limit))
                .dfa_size_limit(Some(size_limit)),
        )
        .syntax(
            regex_automata::util::syntax::Config::new()
                .unicode(unicode)
                .utf8(unicode),
        )
        .thompson(
            thompson::Config::new()
                .which_captures(WhichCaptures::None)
                .shrink(false),
        )
        .build(pattern)
        .map_err(|e| ProverError::Automaton(e.to_string()))?;
    let start = d
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| ProverError::Automaton(e.to_string()))?;
    let bytes = d.byte_classes();
    let mut class = [0u8; 256];
    for (b, slot) in (0..=255u8).zip(class.iter_mut()) {
        *slot = bytes.get(b);
    }
    let classes = class.iter().map(|&c| usize::from(c) + 1).max().unwrap_or(1);
    let (mut dfa, reps) = PatternDfa::from_rows(class, classes);
    let mut states = vec![start];
    let mut ids = FxHashMap::default();
    ids.insert(start, 0u32);
    let mut at = 0usize;
    while let Some(&s) = states.get(at) {
        dfa.accept.push(d.is_match_state(d.next_eoi_state(s)));
        for &rep in &reps {
            let n = d.next_state(s, rep);
            if d.is_dead_state(n) {
                dfa.trans.push(DEAD);
                continue;
            }
            let id = match ids.get(&n) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(states.len())
                        .ok()
                        .filter(|&id| id != DEAD && (id as usize) < MAX_STATES)
                        .ok_or_else(|| {
                            ProverError::Automaton(format!("{pattern}: too many states"))
                        })?;
                    states.push(n);
                    ids.insert(n, id);
                    id
                }
            };
            dfa.trans.push(id);
        }
        at += 1;
    }
    Ok(dfa)
}

#[cfg(test)]
mod tests {

    use super::*;
    use proptest::prelude::*;

    /// Whether the tables accept `s`.
    fn matches(dfa: &PatternDfa, s: &[u8]) -> bool {
        let mut state = 0;
        for &b in s {
            state = dfa.next(state, b);
            if state == DEAD {
                return false;
            }
        }
        dfa.accepts(state)
    }

    /// Regexes of the shapes the prover builds: the matchers' globs, the
    /// universes, and what `fit_regex` makes of them.
    const REGEXES: &[&str] = &[
        "/(?s:.)+",
        "/(?s:.*)",
        "(?:/(?s:.)*)",
        "(?s:[^\\x00])*",
        "(?:(?:/usr/bin(?:/[^/]*)*))",
        "(?:(?:/repos/[^/]*/[^/]*/branches/[^/]*/protection(?:/[^/]*)*))",
        "(?:(?:git\\-upload\\-pack))",
        "[0-9_a-z](?:[-0-9_a-z]*[0-9_a-z])?(?:\\.[0-9_a-z](?:[-0-9_a-z]*[0-9_a-z])?)*",
        "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])",
        "(?:[a&&b])",
        "(?:)",
        "a{2,4}b{3,}c?",
        "(?:ab|a)*b",
        "(?:x*)*",
        "[^a-c]{0,3}",
    ];

    #[test]
    fn the_shapes_the_prover_uses_are_built_here() {
        for re in REGEXES {
            assert!(glushkov(re).is_some(), "{re}");
        }
        assert!(
            glushkov("^a").is_none(),
            "look-around goes to regex-automata"
        );
        assert!(glushkov("a{200}").is_none(), "too many positions");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Same language as regex-automata's DFA of the same regex.
        #[test]
        fn glushkov_tables_match_what_regex_automata_matches(
            i in 0..REGEXES.len(),
            s in proptest::collection::vec(
                prop_oneof![Just(b'/'), Just(b'a'), Just(b'b'), Just(b'c'), Just(b'x'), Just(b'.'),
                            Just(b'-'), Just(b'0'), Just(b'2'), Just(b'5'), Just(b'9'), Just(0u8),
                            Just(0xffu8), Just(b'r'), Just(b'e'), Just(b'p'), Just(b'o'), Just(b's')],
                0..12),
        ) {
            let re = REGEXES[i];
            let ours = glushkov(re).expect("covered");
            let theirs = dense_tables(re, false, 1 << 24).expect("builds");
            prop_assert_eq!(matches(&ours, &s), matches(&theirs, &s), "{} on {:?}", re, s);
        }
    }

    #[test]
    fn a_pattern_that_matches_nothing_takes_no_part() {
        assert!(!glushkov("[a&&b]").unwrap().alive());
        assert!(glushkov("(?:)").unwrap().alive());
        assert!(!dense_tables("[a&&b]", false, 1 << 24).unwrap().alive());
    }
}
