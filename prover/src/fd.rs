//! A finite-domain search in Rust, tried before Z3.
//!
//! Every dimension of the model is finite once strings are atoms,
//! addresses and ports classes, and query conditions their three readings,
//! and every formula is constant on such a cell. A small pair of policies
//! has few cells where anything happens, so a depth-first search that
//! evaluates the formula in three-valued logic on partial assignments
//! (unassigned dimensions unknown) settles a typical query in microseconds,
//! where creating a Z3 context alone takes milliseconds. It branches only
//! on dimensions the still-undecided part of the formula mentions: a
//! dimension it does not mention cannot change the outcome, so any value
//! of it will do.
//!
//! The search is exact: `Sat` comes with a point on which the formula is
//! then evaluated concretely, and `Unsat` means every cell was ruled out.
//! It gives up after a budget of work; the caller then asks Z3.

use std::time::Instant;

use crate::domain::Domain;
use crate::formula::{Defs, F, Lit, Point, dim};
use crate::region::{QUERY_VALUES, Region, apply_addr, first_port};

/// Outcome of one search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Sat(Point),
    Unsat,
    /// Over budget (or too many query conditions to track): ask Z3.
    GaveUp,
}

/// Work one search may do, counted in definition evaluations (each search
/// node re-evaluates the definitions that depend on the dimension it
/// assigns): a few milliseconds at most, so that on a large problem the
/// search gives up quickly and Z3 takes over.
pub(crate) const BUDGET: usize = 400_000;

/// Dimensions in branching order; query conditions follow as bits 8...
const ORDER: [u32; 8] = [
    dim::BIN,
    dim::HOST,
    dim::PORT,
    dim::ADDR,
    dim::SHA,
    dim::METHOD,
    dim::PATH,
    dim::CALL,
];
const QUERY_BIT0: u32 = 9;
const MAX_QUERIES: usize = 55;

/// Three-valued value and the unknown dimensions it depends on.
type V3 = (Option<bool>, u64);

struct Ctx<'a> {
    dom: &'a Domain,
    defs: &'a Defs,
    within: &'a Region,
    f: &'a F,
    nodes: usize,
    budget: usize,
    /// The proof's deadline: past it the search gives up like over budget.
    deadline: Instant,
    /// The literals of each dimension being branched on that its subtree
    /// has read, with their values (see [`Ctx::branch`]).
    reads: Reads<'a>,
    /// The definitions `f` refers to, directly or through others: the
    /// search carries only these from node to node (a query names a few of
    /// the model's).
    needed: Vec<u32>,
    /// Per depth, the memo of the node being searched there.
    memos: Vec<Vec<Memo>>,
}

fn mark_defs(f: &F, needed: &mut [bool]) {
    match f {
        F::Const(_) => {}
        F::Lit(Lit::Def(d)) => {
            if let Some(n) = needed.get_mut(*d as usize) {
                *n = true;
            }
        }
        F::Lit(_) => {}
        F::Not(inner) => mark_defs(inner, needed),
        F::And(v) | F::Or(v) => v.iter().for_each(|x| mark_defs(x, needed)),
    }
}

/// Which definitions `f` depends on. A definition refers only to earlier
/// ones, so one pass from the last to the first finds them all.
fn needed_defs(defs: &Defs, f: &F) -> Vec<bool> {
    let mut needed = vec![false; defs.items.len()];
    mark_defs(f, &mut needed);
    for (i, d) in defs.items.iter().enumerate().rev() {
        if needed.get(i) == Some(&true) {
            mark_defs(&d.body, &mut needed);
        }
    }
    needed
}

/// The search bit of a literal's dimension (a definition has none: its
/// value comes from the memo).
fn bit_of(l: &Lit) -> u64 {
    match l {
        Lit::Bin(_) => u64::from(dim::BIN),
        Lit::Sha(_) => u64::from(dim::SHA),
        Lit::Host(_) => u64::from(dim::HOST),
        Lit::HasAddr | Lit::AddrClass(..) => u64::from(dim::ADDR),
        Lit::Port(..) => u64::from(dim::PORT),
        Lit::Method(_) => u64::from(dim::METHOD),
        Lit::Path(_) => u64::from(dim::PATH),
        Lit::Call(_) => u64::from(dim::CALL),
        Lit::QAllow(q) | Lit::QDeny(q) => 1u64 << (QUERY_BIT0 + q),
        Lit::Def(_) => 0,
    }
}

/// A definition's value at a search node, computed when first read: an
/// `And`/`Or` that one part decides never reads the definitions of the
/// others, so most are never evaluated at most nodes.
#[derive(Clone, Copy)]
enum Memo {
    Unset,
    Val(V3),
}

/// What the subtree of each open branch read of its dimension: the
/// literals of that dimension it evaluated and their values, innermost
/// branch last.
#[derive(Default)]
struct Reads<'a> {
    open: Vec<(u64, Vec<(&'a Lit, bool)>)>,
}

impl<'a> Reads<'a> {
    fn note(&mut self, bit: u64, l: &'a Lit, value: bool) {
        if let Some((_, log)) = self.open.iter_mut().rev().find(|(b, _)| *b == bit) {
            log.push((l, value));
        }
    }
}

impl<'a> Ctx<'a> {
    fn eval3(&mut self, f: &'a F, p: &Point, known: u64, memo: &mut [Memo]) -> V3 {
        match f {
            F::Const(b) => (Some(*b), 0),
            F::Lit(Lit::Def(d)) => self.def3(*d as usize, p, known, memo),
            F::Lit(l) => {
                let bit = bit_of(l);
                if known & bit != 0 {
                    let value = p.lit(l, &[]);
                    self.reads.note(bit, l, value);
                    (Some(value), 0)
                } else {
                    (None, bit)
                }
            }
            F::Not(inner) => {
                let (v, m) = self.eval3(inner, p, known, memo);
                (v.map(|b| !b), m)
            }
            F::And(parts) => self.junction(parts, p, known, memo, false),
            F::Or(parts) => self.junction(parts, p, known, memo, true),
        }
    }

    fn def3(&mut self, d: usize, p: &Point, known: u64, memo: &mut [Memo]) -> V3 {
        match memo.get(d) {
            Some(Memo::Val(v)) => *v,
            Some(Memo::Unset) => {
                let defs = self.defs;
                let v = match defs.items.get(d) {
                    Some(def) => self.eval3(&def.body, p, known, memo),
                    None => (None, 0),
                };
                if let Some(slot) = memo.get_mut(d) {
                    *slot = Memo::Val(v);
                }
                v
            }
            None => (None, 0),
        }
    }

    /// `And` (`short` false) or `Or` (`short` true): a part equal to `short`
    /// decides; otherwise unknown parts leave it unknown.
    fn junction(
        &mut self,
        parts: &'a [F],
        p: &Point,
        known: u64,
        memo: &mut [Memo],
        short: bool,
    ) -> V3 {
        let mut mask = 0u64;
        let mut unknown = false;
        for x in parts {
            match self.eval3(x, p, known, memo) {
                (Some(b), _) if b == short => return (Some(short), 0),
                (Some(_), _) => {}
                (None, m) => {
                    unknown = true;
                    mask |= m;
                }
            }
        }
        if unknown {
            (None, mask)
        } else {
            (Some(!short), 0)
        }
    }

    /// The memo of a child node that assigns `bit`: a decided value stays
    /// decided when more dimensions are known
    /// (three-valued logic is monotone), and an undecided one whose unknown
    /// dimensions exclude `bit` evaluates exactly as before; the rest are
    /// evaluated anew when read.
    fn child_memo(&self, parent: &[Memo], bit: u64, out: &mut [Memo]) {
        for &i in &self.needed {
            let i = i as usize;
            if let (Some(slot), Some(&m)) = (out.get_mut(i), parent.get(i)) {
                *slot = match m {
                    Memo::Val((None, mask)) if mask & bit != 0 => Memo::Unset,
                    other => other,
                };
            }
        }
    }

    fn values(&self, bit: u64) -> Vec<u32> {
        let r = self.within;
        let q = bit.trailing_zeros().checked_sub(QUERY_BIT0);
        if let Some(q) = q {
            return r
                .queries
                .get(q as usize)
                .map(|v| v.iter().map(|&x| u32::from(x)).collect())
                .unwrap_or_default();
        }
        let b = u32::try_from(bit).unwrap_or(0);
        match b {
            dim::BIN => r.bins.clone(),
            dim::HOST => r.hosts.clone(),
            dim::PORT => r.ports.clone(),
            dim::ADDR => r.addrs.clone(),
            dim::SHA => r.shas.clone(),
            dim::METHOD => r.methods.clone(),
            dim::PATH => r.paths.clone(),
            dim::CALL => r.calls.clone(),
            _ => Vec::new(),
        }
    }

    fn set(&self, p: &mut Point, bit: u64, v: u32) {
        if let Some(q) = bit.trailing_zeros().checked_sub(QUERY_BIT0) {
            if let Some(&(a, d)) = QUERY_VALUES.get(v as usize) {
                if let Some(x) = p.qa.get_mut(q as usize) {
                    *x = a;
                }
                if let Some(x) = p.qd.get_mut(q as usize) {
                    *x = d;
                }
            }
            return;
        }
        match u32::try_from(bit).unwrap_or(0) {
            dim::BIN => p.bin = v,
            dim::HOST => p.host = v,
            dim::PORT => p.port = first_port(self.dom, v),
            dim::ADDR => apply_addr(self.dom, v, p),
            dim::SHA => p.sha = v,
            dim::METHOD => p.method = v,
            dim::PATH => p.path = v,
            dim::CALL => p.call = v,
            _ => {}
        }
    }

    /// The next dimension to branch on: the first of `mask` in branching
    /// order.
    fn pick(mask: u64) -> Option<u64> {
        ORDER
            .iter()
            .map(|&d| u64::from(d))
            .find(|&d| mask & d != 0)
            .or_else(|| {
                (mask >> QUERY_BIT0 != 0).then(|| 1u64 << mask.trailing_zeros().max(QUERY_BIT0))
            })
    }

    fn dfs(&mut self, p: &mut Point, known: u64, depth: usize) -> Option<bool> {
        self.nodes += 1 + self.defs.items.len();
        // A node evaluates many formulas; reading the clock is small beside.
        if self.nodes > self.budget || Instant::now() >= self.deadline {
            return None;
        }
        let mut memo = std::mem::take(self.memos.get_mut(depth)?);
        let f = self.f;
        let result = match self.eval3(f, p, known, &mut memo) {
            (Some(b), _) => Some(b),
            (None, mask) => self.branch(p, known, depth, &memo, mask),
        };
        if let Some(slot) = self.memos.get_mut(depth) {
            *slot = memo;
        }
        result
    }

    fn branch(
        &mut self,
        p: &mut Point,
        known: u64,
        depth: usize,
        memo: &[Memo],
        mask: u64,
    ) -> Option<bool> {
        let bit = Self::pick(mask & !known)?;
        // A value on which every literal of this dimension that an empty
        // subtree read has the value it had there leads the search down
        // the same path to the same end: it is skipped. The first point
        // found is the one a full search finds first.
        let mut empty: Vec<Vec<(&Lit, bool)>> = Vec::new();
        for val in self.values(bit) {
            self.set(p, bit, val);
            if empty
                .iter()
                .any(|log| log.iter().all(|&(l, v)| p.lit(l, &[]) == v))
            {
                continue;
            }
            if self.memos.len() <= depth + 1 {
                self.memos.push(vec![Memo::Unset; self.defs.items.len()]);
            }
            let mut next = std::mem::take(self.memos.get_mut(depth + 1)?);
            self.child_memo(memo, bit, &mut next);
            if let Some(slot) = self.memos.get_mut(depth + 1) {
                *slot = next;
            }
            self.reads.open.push((bit, Vec::new()));
            let found = self.dfs(p, known | bit, depth + 1);
            let (_, mut log) = self.reads.open.pop()?;
            match found? {
                true => return Some(true),
                false => {
                    log.sort_unstable_by_key(|&(l, v)| (std::ptr::from_ref(l), v));
                    log.dedup_by_key(|&mut (l, _)| std::ptr::from_ref(l));
                    empty.push(log);
                }
            }
        }
        Some(false)
    }
}

/// Looks for a point of `within` where `f` holds. `f` must include every
/// constraint the point must meet (see `Search`).
pub(crate) fn find(
    dom: &Domain,
    defs: &Defs,
    f: &F,
    within: &Region,
    budget: usize,
    deadline: Instant,
) -> Outcome {
    if dom.queries.len() > MAX_QUERIES {
        return Outcome::GaveUp;
    }
    // Start every dimension at the region's first value, so dimensions
    // never branched on hold a value of the region.
    let nq = dom.queries.len();
    let mut p = Point {
        bin: 0,
        sha: 0,
        host: 0,
        has_addr: false,
        v6: false,
        a4: 0,
        a6: 0,
        port: 1,
        method: 0,
        path: 0,
        call: 0,
        qa: vec![false; nq],
        qd: vec![false; nq],
    };
    let needed = needed_defs(defs, f);
    let needed: Vec<u32> = (0u32..)
        .zip(&needed)
        .filter_map(|(i, n)| n.then_some(i))
        .collect();
    let mut cx = Ctx {
        dom,
        defs,
        within,
        f,
        nodes: 0,
        budget,
        deadline,
        reads: Reads::default(),
        needed,
        memos: vec![vec![Memo::Unset; defs.items.len()]],
    };
    let all: Vec<u64> = ORDER
        .iter()
        .map(|&d| u64::from(d))
        .chain((0..nq).map(|q| 1u64 << (QUERY_BIT0 as usize + q)))
        .collect();
    for &bit in &all {
        let Some(&first) = cx.values(bit).first() else {
            return Outcome::Unsat;
        };
        cx.set(&mut p, bit, first);
    }
    match cx.dfs(&mut p, 0, 0) {
        None => Outcome::GaveUp,
        Some(false) => Outcome::Unsat,
        Some(true) => {
            // The concrete check guards the three-valued reasoning.
            if within.contains(&p, dom) && p.eval(f, &defs.values(&p)) {
                Outcome::Sat(p)
            } else {
                Outcome::GaveUp
            }
        }
    }
}
