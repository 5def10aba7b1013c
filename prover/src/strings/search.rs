//! Finding a witness for a signature, or proving there is none.
//!
//! Breadth-first search over the product of the multi-pattern DFA and the
//! dimension's [`Validity`] automaton, walking byte classes of both, in
//! which each product state is entered at most `k` times, `k` being one
//! more than the number of strings of the signature that patterns name
//! exactly (those belong to atoms of their own and cannot be the witness).
//! This enumerates, for every product state, its `k` shortest class paths;
//! at a target state up to `k` spellings of each path are tried. So:
//!
//! - if some valid string of the signature is named by no exact pattern,
//!   the search meets it: either its own class path is walked (and has
//!   more than `k - 1` spellings, or all of them are tried), or `k` other
//!   paths reached its state first, whose spellings cannot all be among
//!   the `k - 1` named strings; and
//! - if the search runs out of states without meeting one, and the
//!   dimension's own predicate agreed with the automaton on every string
//!   the search met, the atom holds no string enforcement can meet: it is
//!   *proved* empty.
//!
//! Anything else (the state budget runs out, or the predicate refused a
//! string the automaton accepted) is *unknown*, never "empty": the caller
//! keeps the atom without a witness, and a finding that would need it makes
//! the verdict inconclusive.

use std::collections::{HashMap, VecDeque};

use super::dfa::State;

use super::dfa::{MultiDfa, niceness, set_grow};
use super::validity::{DEAD, Validity};

/// What the search found for one signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A valid string no pattern names exactly.
    Found(String),
    /// No string of the signature is valid and unnamed.
    Empty,
    /// The search could not decide; why.
    Unknown(String),
}

/// Product states the search may enter before giving up.
pub const BUDGET: usize = 200_000;

/// Bytes grouped by how both automata treat them: each class's members,
/// nicest first, and the classes by their nicest member. Strings that
/// differ only within classes reach the same product state, so the search
/// walks classes and spells a class path with its members only when it
/// needs a string no exact pattern names.
fn joint_classes(dfa: &MultiDfa, v: &Validity) -> Vec<Vec<u8>> {
    let mut classes: HashMap<(u8, Vec<u16>), Vec<u8>> = HashMap::new();
    for b in 0..=255u8 {
        let column: Vec<u16> = (0..v.states())
            .map(|q| v.step(u16::try_from(q).unwrap_or(DEAD), b))
            .collect();
        classes
            .entry((dfa.byte_class(b), column))
            .or_default()
            .push(b);
    }
    let mut out: Vec<Vec<u8>> = classes.into_values().collect();
    for c in &mut out {
        c.sort_by_key(|&b| niceness(b));
    }
    out.sort_by_key(|c| c.first().map_or(u32::MAX, |&b| niceness(b)));
    out
}

/// Up to `k` distinct strings along one class path (an odometer over the
/// classes' members, last position fastest).
fn spellings(path: &[&[u8]], k: usize) -> Vec<Vec<u8>> {
    let mut digits = vec![0usize; path.len()];
    let mut out = Vec::new();
    while out.len() < k {
        out.push(
            path.iter()
                .zip(&digits)
                .filter_map(|(c, &d)| c.get(d).copied())
                .collect(),
        );
        let mut i = path.len();
        loop {
            let Some(j) = i.checked_sub(1) else {
                return out;
            };
            i = j;
            let (Some(d), Some(c)) = (digits.get_mut(i), path.get(i)) else {
                return out;
            };
            *d += 1;
            if *d < c.len() {
                break;
            }
            *d = 0;
        }
    }
    out
}

/// Searches for a string with DFA signature `sig` that the validity
/// automaton and `check` accept and `named` does not; `k` bounds the visits
/// per product state (one more than the named strings of the signature).
pub fn witness(
    dfa: &MultiDfa,
    sig: &[u32],
    v: &Validity,
    k: usize,
    named: &dyn Fn(&str) -> bool,
    check: &dyn Fn(&str) -> bool,
    budget: usize,
) -> Outcome {
    witnesses(dfa, &[sig], v, k, named, check, budget)
        .pop()
        .unwrap_or_else(|| Outcome::Unknown("no search was made".to_owned()))
}

/// [`witness`] for several signatures with the same `k`, in one search.
///
/// The breadth-first walk does not depend on the target: the queue and the
/// visit counts evolve alike whichever signature is sought, and the search
/// for one signature is the walk up to the moment it is decided. Walking
/// once for all of them therefore gives each the outcome (and the witness)
/// its own search would, for the price of the longest.
pub(crate) fn witnesses(
    dfa: &MultiDfa,
    sigs: &[&[u32]],
    v: &Validity,
    k: usize,
    named: &dyn Fn(&str) -> bool,
    check: &dyn Fn(&str) -> bool,
    budget: usize,
) -> Vec<Outcome> {
    let mut out: Vec<Option<Outcome>> = vec![None; sigs.len()];
    let mut refused: Vec<Option<String>> = vec![None; sigs.len()];
    // A signature listed twice is searched once (at its first place).
    let first: Vec<usize> = sigs
        .iter()
        .enumerate()
        .map(|(i, s)| sigs.iter().position(|x| x == s).unwrap_or(i))
        .collect();
    let mut pending = first.iter().enumerate().filter(|&(i, &f)| i == f).count();
    let classes = joint_classes(dfa, v);
    // Per DFA state (by index): the target its signature is, plus one;
    // 0 for none, `usize::MAX` not yet looked at.
    let mut target: Vec<usize> = Vec::new();
    // Arena of (parent, class) for the class paths in the queue.
    let mut arena: Vec<(u32, u16)> = vec![(u32::MAX, 0)];
    // Visits per product state, at `dfa index * validity states + q`.
    let vstates = v.states().max(1);
    let slot = |d: State, q: u16| dfa.index(d) * vstates + usize::from(q);
    let mut entered: Vec<usize> = Vec::new();
    let mut queue: VecDeque<(State, u16, u32)> = VecDeque::new();
    queue.push_back((dfa.start(), v.start(), 0));
    set_grow(&mut entered, slot(dfa.start(), v.start()), 1);
    'walk: while let Some((d, q, node)) = queue.pop_front() {
        let di = dfa.index(d);
        let t = match target.get(di) {
            Some(&t) if t != usize::MAX => t.checked_sub(1),
            _ => {
                let sig = dfa.state_signature(d);
                let t = sigs.iter().position(|s| *s == sig.as_slice());
                set_grow(&mut target, di, t.map_or(0, |t| t + 1));
                t
            }
        };
        if let Some(t) = t
            && v.accepts(q)
            && out.get(t).is_some_and(Option::is_none)
            && let Some(&sig) = sigs.get(t)
        {
            let path: Vec<&[u8]> = class_path(&arena, node)
                .iter()
                .filter_map(|&c| classes.get(usize::from(c)).map(Vec::as_slice))
                .collect();
            // Fewer than `k` spellings are all named only if the path has
            // no more strings than that.
            for s in spellings(&path, k) {
                match String::from_utf8(s) {
                    Ok(s) if named(&s) => {}
                    Ok(s) if check(&s) && dfa.signature(&s) == sig => {
                        if let Some(slot) = out.get_mut(t) {
                            *slot = Some(Outcome::Found(s));
                        }
                        pending -= 1;
                        if pending == 0 {
                            break 'walk;
                        }
                        break;
                    }
                    Ok(s) => {
                        if let Some(r) = refused.get_mut(t) {
                            r.get_or_insert(s);
                        }
                    }
                    Err(e) => {
                        if let Some(r) = refused.get_mut(t) {
                            r.get_or_insert(String::from_utf8_lossy(e.as_bytes()).into_owned());
                        }
                    }
                }
            }
        }
        for (ci, class) in classes.iter().enumerate() {
            let Some(&b) = class.first() else { continue };
            let Some(nd) = dfa.next(d, b) else { continue };
            let nq = v.step(q, b);
            if nq == DEAD {
                continue;
            }
            let at = slot(nd, nq);
            let count = match entered.get(at) {
                Some(&c) if c != usize::MAX => c,
                _ => 0,
            };
            if count >= k {
                continue;
            }
            set_grow(&mut entered, at, count + 1);
            if arena.len() >= budget {
                let why = format!("the search for an example string gave up after {budget} steps");
                let out = out
                    .into_iter()
                    .map(|o| o.unwrap_or_else(|| Outcome::Unknown(why.clone())))
                    .collect();
                return copy_firsts(out, &first);
            }
            let id = u32::try_from(arena.len()).unwrap_or(u32::MAX);
            arena.push((node, u16::try_from(ci).unwrap_or(u16::MAX)));
            queue.push_back((nd, nq, id));
        }
    }
    let out = out
        .into_iter()
        .zip(refused)
        .map(|(o, r)| {
            o.unwrap_or_else(|| match r {
                None => Outcome::Empty,
                Some(s) => Outcome::Unknown(format!(
                    "`{}` has the right patterns but is not a string enforcement meets, and no other was found",
                    s.escape_debug()
                )),
            })
        })
        .collect();
    copy_firsts(out, &first)
}

/// Gives a repeated signature the outcome of its first place.
fn copy_firsts(mut out: Vec<Outcome>, first: &[usize]) -> Vec<Outcome> {
    for (i, &f) in first.iter().enumerate() {
        if f != i
            && let Some(o) = out.get(f).cloned()
            && let Some(slot) = out.get_mut(i)
        {
            *slot = o;
        }
    }
    out
}

fn class_path(arena: &[(u32, u16)], mut node: u32) -> Vec<u16> {
    let mut out = Vec::new();
    while let Some(&(parent, c)) = arena.get(node as usize) {
        if parent == u32::MAX {
            break;
        }
        out.push(c);
        node = parent;
    }
    out.reverse();
    out
}
