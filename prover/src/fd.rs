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

use crate::domain::Domain;
use crate::formula::{Defs, F, Lit, Point, dim};
use crate::region::{QUERY_VALUES, Region, apply_addr, first_port};

/// Outcome of one search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sat(Point),
    Unsat,
    /// Over budget (or too many query conditions to track): ask Z3.
    GaveUp,
}

/// Work one search may do, counted in definition evaluations (each search
/// node re-evaluates the definitions that depend on the dimension it
/// assigns): a few milliseconds at most, so that on a large problem the
/// search gives up quickly and Z3 takes over.
pub const BUDGET: usize = 400_000;

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
    /// Per set dimension, the class of each value (see [`Classes`]).
    classes: Classes,
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

/// Values of a dimension that no literal of the formula or the definitions
/// tells apart: they are members of exactly the same literal sets. The
/// formula sees a dimension only through its literals, so a subtree proved
/// empty under one value is empty under every value of its class, and the
/// search skips them. The first point found is the one it found before:
/// only subtrees without one are skipped.
#[derive(Default)]
struct Classes {
    bins: Vec<u32>,
    shas: Vec<u32>,
    hosts: Vec<u32>,
    methods: Vec<u32>,
    paths: Vec<u32>,
    calls: Vec<u32>,
}

/// The literal sets of each set dimension.
#[derive(Default)]
struct Sets<'f> {
    bins: Vec<&'f [u32]>,
    shas: Vec<u32>,
    hosts: Vec<&'f [u32]>,
    methods: Vec<&'f [u32]>,
    paths: Vec<&'f [u32]>,
    calls: Vec<&'f [u32]>,
}

fn collect<'f>(f: &'f F, s: &mut Sets<'f>) {
    match f {
        F::Const(_) => {}
        F::Lit(l) => match l {
            Lit::Bin(x) => s.bins.push(x),
            Lit::Sha(k) => s.shas.push(*k),
            Lit::Host(x) => s.hosts.push(x),
            Lit::Method(x) => s.methods.push(x),
            Lit::Path(x) => s.paths.push(x),
            Lit::Call(x) => s.calls.push(x),
            _ => {}
        },
        F::Not(inner) => collect(inner, s),
        F::And(v) | F::Or(v) => {
            for x in v {
                collect(x, s);
            }
        }
    }
}

/// Class ids of the values `0..n` by their membership in `sets`, in time
/// linear in the sets' sizes.
fn classes_of(n: usize, sets: &mut Vec<&[u32]>) -> Vec<u32> {
    sets.sort_unstable();
    sets.dedup();
    let mut member_of: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, set) in sets.iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        for &v in set.iter() {
            if let Some(m) = member_of.get_mut(v as usize) {
                m.push(i);
            }
        }
    }
    let mut ids: std::collections::HashMap<Vec<u32>, u32> = std::collections::HashMap::new();
    member_of
        .into_iter()
        .map(|key| {
            let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
            *ids.entry(key).or_insert(next)
        })
        .collect()
}

impl Classes {
    fn of(dom: &Domain, defs: &Defs, f: &F, needed: &[bool]) -> Classes {
        let mut s = Sets::default();
        collect(f, &mut s);
        for (d, _) in defs.items.iter().zip(needed).filter(|(_, n)| **n) {
            collect(&d.body, &mut s);
        }
        let shas: Vec<[u32; 1]> = s.shas.iter().map(|&k| [k]).collect();
        let mut sha_sets: Vec<&[u32]> = shas.iter().map(|k| &k[..]).collect();
        Classes {
            bins: classes_of(dom.bins.len(), &mut s.bins),
            shas: classes_of(dom.shas.len(), &mut sha_sets),
            hosts: classes_of(dom.hosts.len() + 1, &mut s.hosts),
            methods: classes_of(dom.methods.len(), &mut s.methods),
            paths: classes_of(dom.paths.len(), &mut s.paths),
            calls: classes_of(dom.calls.len(), &mut s.calls),
        }
    }

    /// The class of a value of a set dimension; `None` for the others.
    fn of_value(&self, bit: u64, v: u32) -> Option<u32> {
        let of = match u32::try_from(bit).unwrap_or(0) {
            dim::BIN => &self.bins,
            dim::SHA => &self.shas,
            dim::HOST => &self.hosts,
            dim::METHOD => &self.methods,
            dim::PATH => &self.paths,
            dim::CALL => &self.calls,
            _ => return None,
        };
        of.get(v as usize).copied()
    }
}

/// The search bit of a literal's dimension (a definition has none: its
/// value comes from the memo).
fn bit_of(l: &Lit) -> u64 {
    match l {
        Lit::Bin(_) => u64::from(dim::BIN),
        Lit::Sha(_) => u64::from(dim::SHA),
        Lit::Host(_) => u64::from(dim::HOST),
        Lit::HasAddr | Lit::V6 | Lit::A4(..) | Lit::A6(..) | Lit::AddrClass(..) => {
            u64::from(dim::ADDR)
        }
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

impl Ctx<'_> {
    fn eval3(&self, f: &F, p: &Point, known: u64, memo: &mut [Memo]) -> V3 {
        match f {
            F::Const(b) => (Some(*b), 0),
            F::Lit(Lit::Def(d)) => self.def3(*d as usize, p, known, memo),
            F::Lit(l) => {
                let bit = bit_of(l);
                if known & bit != 0 {
                    (Some(p.lit(l, &[])), 0)
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

    fn def3(&self, d: usize, p: &Point, known: u64, memo: &mut [Memo]) -> V3 {
        match memo.get(d) {
            Some(Memo::Val(v)) => *v,
            Some(Memo::Unset) => {
                let v = match self.defs.items.get(d) {
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
    fn junction(&self, parts: &[F], p: &Point, known: u64, memo: &mut [Memo], short: bool) -> V3 {
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
        if self.nodes > self.budget {
            return None;
        }
        let mut memo = std::mem::take(self.memos.get_mut(depth)?);
        let result = match self.eval3(self.f, p, known, &mut memo) {
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
        let mut empty: Vec<u32> = Vec::new();
        for val in self.values(bit) {
            let class = self.classes.of_value(bit, val);
            if class.is_some_and(|c| empty.contains(&c)) {
                continue;
            }
            self.set(p, bit, val);
            if self.memos.len() <= depth + 1 {
                self.memos.push(vec![Memo::Unset; self.defs.items.len()]);
            }
            let mut next = std::mem::take(self.memos.get_mut(depth + 1)?);
            self.child_memo(memo, bit, &mut next);
            if let Some(slot) = self.memos.get_mut(depth + 1) {
                *slot = next;
            }
            match self.dfs(p, known | bit, depth + 1)? {
                true => return Some(true),
                false => empty.extend(class),
            }
        }
        Some(false)
    }
}

/// Looks for a point of `within` where `f` holds. `f` must include every
/// constraint the point must meet (see `Search`).
pub fn find(dom: &Domain, defs: &Defs, f: &F, within: &Region, budget: usize) -> Outcome {
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
    let classes = Classes::of(dom, defs, f, &needed);
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
        classes,
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
