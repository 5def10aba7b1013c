//! Which strings enforcement can meet, as small byte automata.
//!
//! The universes in [`super::universe`] are deliberately loose (spelling
//! out "canonical path" inside the multi-pattern DFA multiplies its states);
//! the tight rule is a predicate checked on witnesses. A witness search that
//! only tried a few strings per DFA state could then run out of tries on
//! non-canonical prefixes (`/usr/bin//x`) and miss the atom altogether. The
//! search instead walks the product of the DFA with one of these automata,
//! so it reaches every valid string, and a search that finds nothing is a
//! proof that the atom holds no string enforcement can meet.
//!
//! Each automaton accepts a superset of what its predicate accepts (for
//! binaries and paths exactly the same set; for hosts the length limits are
//! left to the predicate). Tests compare them with the predicates.

use std::sync::OnceLock;

/// A deterministic byte automaton, as a table.
#[derive(Debug, Clone)]
pub struct Validity {
    /// `next[state][byte]`, [`DEAD`] for no transition.
    next: Vec<[u16; 256]>,
    accept: Vec<bool>,
}

pub(crate) const DEAD: u16 = u16::MAX;

/// Which validity rule a dimension follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Resolved absolute executable paths (`is_resolved_binary`).
    Binary,
    /// Canonical request paths (`is_canonical_path`).
    HttpPath {
        /// A `%2F` is allowed in a segment.
        encoded_slash: bool,
    },
    /// Host names: the universe regex already spells the label syntax.
    Any,
}

impl Validity {
    pub(crate) fn start(&self) -> u16 {
        0
    }

    pub(crate) fn step(&self, state: u16, byte: u8) -> u16 {
        self.next
            .get(usize::from(state))
            .and_then(|row| row.get(usize::from(byte)))
            .copied()
            .unwrap_or(DEAD)
    }

    pub(crate) fn accepts(&self, state: u16) -> bool {
        self.accept
            .get(usize::from(state))
            .copied()
            .unwrap_or(false)
    }

    pub(crate) fn states(&self) -> usize {
        self.next.len()
    }

    /// Whether the automaton accepts a whole string.
    #[cfg(test)]
    pub(crate) fn accepts_str(&self, s: &str) -> bool {
        let mut q = self.start();
        for &b in s.as_bytes() {
            q = self.step(q, b);
            if q == DEAD {
                return false;
            }
        }
        self.accepts(q)
    }

    /// The automaton of a rule, tabulated once per process.
    pub fn of(rule: Rule) -> &'static Validity {
        static BINARY: OnceLock<Validity> = OnceLock::new();
        static PATH: OnceLock<Validity> = OnceLock::new();
        static PATH_SLASH: OnceLock<Validity> = OnceLock::new();
        static ANY: OnceLock<Validity> = OnceLock::new();
        let cell = match rule {
            Rule::Binary => &BINARY,
            Rule::HttpPath {
                encoded_slash: false,
            } => &PATH,
            Rule::HttpPath {
                encoded_slash: true,
            } => &PATH_SLASH,
            Rule::Any => &ANY,
        };
        cell.get_or_init(|| Self::tabulate(rule))
    }

    fn tabulate(rule: Rule) -> Self {
        match rule {
            Rule::Binary => build(binary_step, binary_accept),
            Rule::HttpPath { encoded_slash } => {
                if encoded_slash {
                    build(|s, b| path_step(s, b, true), path_accept)
                } else {
                    build(|s, b| path_step(s, b, false), path_accept)
                }
            }
            Rule::Any => Validity {
                next: vec![[0; 256]],
                accept: vec![true],
            },
        }
    }
}

/// Tabulates an automaton given as a step function over dense state
/// numbers starting at 0; the state numbers used must stay below 256.
/// Each reachable state's row is computed once (this runs in every
/// process that proves, so its cost is part of every `diff --prove`);
/// unreachable state numbers get dead rows.
fn build(step: impl Fn(u16, u8) -> u16, accept: fn(u16) -> bool) -> Validity {
    let mut next: Vec<[u16; 256]> = Vec::new();
    let mut todo: Vec<u16> = vec![0];
    let mut seen = [false; 256];
    seen[0] = true;
    while let Some(s) = todo.pop() {
        let mut row = [DEAD; 256];
        for (b, slot) in (0..=255u8).zip(row.iter_mut()) {
            let t = step(s, b);
            *slot = t;
            if let Some(flag) = seen.get_mut(usize::from(t))
                && !*flag
            {
                *flag = true;
                todo.push(t);
            }
        }
        let s = usize::from(s);
        if next.len() <= s {
            next.resize(s + 1, [DEAD; 256]);
        }
        if let Some(slot) = next.get_mut(s) {
            *slot = row;
        }
    }
    let accept = (0..next.len())
        .map(|s| u16::try_from(s).is_ok_and(accept))
        .collect();
    Validity { next, accept }
}

// Binary paths: `/` then components, none empty, `.` or `..`, no control
// character (C0, DEL, C1), well-formed UTF-8.
const B_START: u16 = 0;
const B_SEG_START: u16 = 1;
const B_DOT1: u16 = 2;
const B_DOT2: u16 = 3;
const B_IN_SEG: u16 = 4;
/// UTF-8 continuation states: 8 + need*8 + kind, where `kind` restricts
/// the next byte (0: 80–BF; 1: A0–BF after E0, and after C2, where 80–9F
/// are the C1 controls; 2: 80–9F after ED; 3: 90–BF after F0; 4: 80–8F
/// after F4).
const B_CONT: u16 = 8;

fn binary_cont(need: u16, lo: u8, hi: u8) -> u16 {
    // need 1..=3, (lo, hi) one of the five ranges.
    let kind = match (lo, hi) {
        (0x80, 0xbf) => 0,
        (0xa0, 0xbf) => 1,
        (0x80, 0x9f) => 2,
        (0x90, 0xbf) => 3,
        _ => 4,
    };
    B_CONT + need * 8 + kind
}

fn binary_cont_range(state: u16) -> Option<(u16, u8, u8)> {
    let x = state.checked_sub(B_CONT)?;
    let (need, kind) = (x / 8, x % 8);
    let (lo, hi) = match kind {
        0 => (0x80, 0xbf),
        1 => (0xa0, 0xbf),
        2 => (0x80, 0x9f),
        3 => (0x90, 0xbf),
        4 => (0x80, 0x8f),
        _ => return None,
    };
    (1..=3).contains(&need).then_some((need, lo, hi))
}

fn binary_step(s: u16, b: u8) -> u16 {
    if s == B_START {
        return if b == b'/' { B_SEG_START } else { DEAD };
    }
    if let Some((need, lo, hi)) = binary_cont_range(s) {
        if !(lo..=hi).contains(&b) {
            return DEAD;
        }
        return if need == 1 {
            B_IN_SEG
        } else {
            binary_cont(need - 1, 0x80, 0xbf)
        };
    }
    if !matches!(s, B_SEG_START | B_DOT1 | B_DOT2 | B_IN_SEG) {
        return DEAD;
    }
    match b {
        b'/' => {
            if s == B_IN_SEG {
                B_SEG_START
            } else {
                DEAD
            }
        }
        b'.' => match s {
            B_SEG_START => B_DOT1,
            B_DOT1 => B_DOT2,
            _ => B_IN_SEG,
        },
        0x00..=0x1f | 0x7f => DEAD,
        0x20..=0x7e => B_IN_SEG,
        0xc2 => binary_cont(1, 0xa0, 0xbf),
        0xc3..=0xdf => binary_cont(1, 0x80, 0xbf),
        0xe0 => binary_cont(2, 0xa0, 0xbf),
        0xe1..=0xec | 0xee..=0xef => binary_cont(2, 0x80, 0xbf),
        0xed => binary_cont(2, 0x80, 0x9f),
        0xf0 => binary_cont(3, 0x90, 0xbf),
        0xf1..=0xf3 => binary_cont(3, 0x80, 0xbf),
        0xf4 => binary_cont(3, 0x80, 0x8f),
        _ => DEAD,
    }
}

fn binary_accept(s: u16) -> bool {
    s == B_IN_SEG
}

// Canonical request paths (see `policy_bundle::matcher::canonicalize_path`):
// printable ASCII only; no `#`, `?`, `\`, `;`; no empty segment except a
// trailing one; no `.` or `..` segment, nor one continued by `%3B`; every
// escape two uppercase hex digits naming a byte that canonicalization
// keeps escaped (not `%00`, not `%2F` unless encoded slashes are allowed).
const P_START: u16 = 0;
const P_SEG_START: u16 = 1;
const P_DOT1: u16 = 2;
const P_DOT2: u16 = 3;
const P_IN_SEG: u16 = 4;
/// After `%`: 8 (in a segment) or 9 (right after `.` or `..`).
const P_ESC1: u16 = 8;
/// After `%` and the first digit: 16 + dot*16 + digit.
const P_ESC2: u16 = 16;

fn hex_upper(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'A'..=b'F' => Some(u16::from(b - b'A') + 10),
        _ => None,
    }
}

fn stays_escaped(v: u8, encoded_slash: bool) -> bool {
    match v {
        0 => false,
        b'/' => encoded_slash,
        b'\\' => false,
        _ => !policy_lang_decodes(v),
    }
}

/// Mirrors `decodes_to_literal` of the matcher module.
fn policy_lang_decodes(v: u8) -> bool {
    v.is_ascii_graphic() && !matches!(v, b'/' | b'?' | b'#' | b'%' | b';' | b'\\')
}

fn path_step(s: u16, b: u8, encoded_slash: bool) -> u16 {
    if s == P_START {
        return if b == b'/' { P_SEG_START } else { DEAD };
    }
    if s == P_ESC1 || s == P_ESC1 + 1 {
        let dot = s - P_ESC1;
        return hex_upper(b).map_or(DEAD, |d| P_ESC2 + dot * 16 + d);
    }
    if (P_ESC2..P_ESC2 + 32).contains(&s) {
        let x = s - P_ESC2;
        let (dot, hi) = (x / 16, x % 16);
        let Some(lo) = hex_upper(b) else { return DEAD };
        let v = u8::try_from(hi * 16 + lo).unwrap_or(0);
        if !stays_escaped(v, encoded_slash) || (dot == 1 && v == b';') {
            return DEAD;
        }
        return P_IN_SEG;
    }
    if !matches!(s, P_SEG_START | P_DOT1 | P_DOT2 | P_IN_SEG) {
        return DEAD;
    }
    match b {
        b'/' => {
            if s == P_IN_SEG {
                P_SEG_START
            } else {
                DEAD
            }
        }
        b'.' => match s {
            P_SEG_START => P_DOT1,
            P_DOT1 => P_DOT2,
            _ => P_IN_SEG,
        },
        b'%' => {
            if matches!(s, P_DOT1 | P_DOT2) {
                P_ESC1 + 1
            } else {
                P_ESC1
            }
        }
        b'#' | b'?' | b'\\' | b';' => DEAD,
        0x21..=0x7e => P_IN_SEG,
        _ => DEAD,
    }
}

fn path_accept(s: u16) -> bool {
    matches!(s, P_SEG_START | P_IN_SEG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strings::universe::{is_canonical_path, is_resolved_binary};
    use proptest::prelude::*;

    fn agrees(rule: Rule, pred: impl Fn(&str) -> bool, s: &str) {
        let v = Validity::of(rule);
        assert_eq!(v.accepts_str(s), pred(s), "{rule:?} on {s:?}");
    }

    #[test]
    fn tables() {
        for s in [
            "/", "/a", "/a/", "//", "/a//b", "/.", "/..", "/./a", "/a/.", "/.a", "/..a", "/...",
            "/%2E", "/%2e", "/%41", "/%20", "/%2F", "/%2f", "/%3B", "/.%3B", "/..%3Bx", "/%00",
            "/a?b", "/a#b", "/a;b", "/a\\b", "/%7F", "/%FF", "/%C3%A9", "/x%25y", "/%", "/%4", "a",
        ] {
            agrees(
                Rule::HttpPath {
                    encoded_slash: false,
                },
                |s| is_canonical_path(s, false),
                s,
            );
            agrees(
                Rule::HttpPath {
                    encoded_slash: true,
                },
                |s| is_canonical_path(s, true),
                s,
            );
        }
        for s in [
            "/",
            "/a",
            "/a/",
            "//a",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/.a",
            "/..a",
            "/é",
            "/a\u{85}",
            "/a\u{7f}",
            "/a\u{1}",
            "/\u{a0}",
            "/\u{10ffff}",
            "/\u{d7ff}",
            "a",
            "/usr/bin/x/y",
        ] {
            agrees(Rule::Binary, is_resolved_binary, s);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn path_automaton_is_the_predicate(s in "/[a./%;?#\\\\0-9A-Fa-f ]{0,8}") {
            agrees(Rule::HttpPath { encoded_slash: false }, |s| is_canonical_path(s, false), &s);
            agrees(Rule::HttpPath { encoded_slash: true }, |s| is_canonical_path(s, true), &s);
        }

        #[test]
        fn binary_automaton_is_the_predicate(s in "/[a./\\x00-\\x1f\\x7f\\u{80}-\\u{a0}é\\u{fffd}\\u{10000}]{0,8}") {
            agrees(Rule::Binary, is_resolved_binary, &s);
        }
    }
}
