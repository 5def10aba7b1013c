//! One multi-pattern automaton per string dimension, and what we read off it.
//!
//! The automaton is the product of one DFA per pattern (each anchored, full
//! match at end of input), explored from the start: a state records how far
//! every pattern still alive has got. The patterns a string matches (its
//! *signature*) are those whose DFA accepts where the string ends. Walking
//! the reachable states therefore lists every signature that some string
//! has, with a shortest string for each (the witness) and the number of
//! strings. Determinizing the union of the patterns' NFAs gives the same
//! states, but costs an epsilon closure over every pattern's NFA states per
//! transition; stepping each pattern's own small DFA costs one table lookup
//! per pattern still alive, which on the small policies most diffs compare
//! is most of the prover's time saved.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;

use super::pattern;
use crate::error::ProverError;

/// The number of strings in a set, when finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// This many strings.
    Finite(u128),
    /// Unboundedly many (a `*` or `**` somewhere).
    Infinite,
}

impl Size {
    /// Saturating: a sum too large for `u128` is as good as infinite.
    pub fn plus(self, o: Size) -> Size {
        match (self, o) {
            (Size::Finite(a), Size::Finite(b)) => Size::Finite(a.saturating_add(b)),
            _ => Size::Infinite,
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Size::Finite(n) => write!(f, "{n}"),
            Size::Infinite => f.write_str("infinitely many"),
        }
    }
}

/// Pattern indices a string matches, sorted.
pub(crate) type Signature = Vec<u32>;

/// What exploring the DFA found for one signature.
#[derive(Debug, Clone)]
pub(crate) struct SigInfo {
    /// Shortest strings reaching the signature (one per DFA state, nicest
    /// characters first), for witnesses.
    pub(crate) samples: Vec<String>,
    pub(crate) size: Size,
}

/// A state of the product automaton (an index into its tables).
pub(crate) type State = u32;

/// No pattern can match any more.
const DEAD: State = State::MAX;

/// The product automaton over a dimension's patterns and its universe.
pub struct MultiDfa {
    /// The joint byte class of each byte: bytes no pattern tells apart.
    class: [u8; 256],
    classes: usize,
    /// `classes` entries per state: the next state, or [`DEAD`].
    trans: Vec<State>,
    /// Per state, the patterns that match if the input ends there.
    accepts: Vec<Signature>,
}

impl std::fmt::Debug for MultiDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiDfa")
            .field("states", &self.accepts.len())
            .field("classes", &self.classes)
            .finish()
    }
}

/// Memory the exploration may use for one dimension: every product state
/// holds a (pattern, state) pair per pattern still alive.
const SIZE_LIMIT: usize = 96 << 20;

/// A live pattern and where its DFA is.
type Part = (u32, u32);

impl MultiDfa {
    /// Builds the product of the patterns' DFAs; `unicode` reads UTF-8
    /// characters instead of bytes. Fails when the product outgrows its limit.
    pub fn build(patterns: &[String], unicode: bool) -> Result<Self, ProverError> {
        let parts = patterns
            .iter()
            .map(|p| pattern::cached(p, unicode, SIZE_LIMIT))
            .collect::<Result<Vec<_>, _>>()?;
        // Joint classes: bytes every pattern's DFA puts in the same class,
        // refined one pattern at a time. Each pair (joint class so far,
        // pattern's class) gets the next number when first met, scanning
        // the bytes in order.
        let mut class = [0u8; 256];
        let mut classes = 1usize;
        for d in &parts {
            let width = (0..=255u8)
                .map(|b| usize::from(d.class_of(b)) + 1)
                .max()
                .unwrap_or(1);
            let mut number: Vec<u16> = vec![u16::MAX; classes * width];
            let mut count: u16 = 0;
            for (b, slot) in (0..=255u8).zip(class.iter_mut()) {
                let pair = usize::from(*slot) * width + usize::from(d.class_of(b));
                if let Some(n) = number.get_mut(pair) {
                    if *n == u16::MAX {
                        *n = count;
                        count += 1;
                    }
                    *slot = u8::try_from(*n).unwrap_or(u8::MAX);
                }
            }
            classes = usize::from(count).max(1);
        }
        let mut reps: Vec<u8> = Vec::with_capacity(classes);
        for b in 0..=255u8 {
            if usize::from(class.get(usize::from(b)).copied().unwrap_or(0)) == reps.len() {
                reps.push(b);
            }
        }
        let accepts_of = |live: &[Part]| -> Signature {
            live.iter()
                .filter(|&&(p, s)| parts.get(p as usize).is_some_and(|d| d.accepts(s)))
                .map(|&(p, _)| p)
                .collect()
        };
        let start: Vec<Part> = parts
            .iter()
            .enumerate()
            .filter(|(_, d)| d.alive())
            .map(|(p, _)| (u32::try_from(p).unwrap_or(u32::MAX), 0))
            .collect();
        // States waiting for their row of transitions, in id order (rows of
        // `trans` are filled in the same order).
        let mut pending: VecDeque<Vec<Part>> = VecDeque::new();
        let mut count: usize = 1;
        let mut index: FxHashMap<Vec<Part>, State> = FxHashMap::default();
        let mut trans: Vec<State> = Vec::new();
        let mut accepts: Vec<Signature> = Vec::new();
        let mut memory = 0usize;
        accepts.push(accepts_of(&start));
        index.insert(start.clone(), 0);
        pending.push_back(start);
        let mut next: Vec<Part> = Vec::new();
        while let Some(live) = pending.pop_front() {
            for &rep in &reps {
                next.clear();
                for &(p, s) in &live {
                    if let Some(d) = parts.get(p as usize) {
                        let n = d.next(s, rep);
                        if n != pattern::DEAD {
                            next.push((p, n));
                        }
                    }
                }
                if next.is_empty() {
                    trans.push(DEAD);
                    continue;
                }
                let id = match index.get(&next) {
                    Some(&id) => id,
                    None => {
                        let id = State::try_from(count)
                            .ok()
                            .filter(|&id| id != DEAD)
                            .ok_or_else(|| ProverError::Automaton("too many states".into()))?;
                        count += 1;
                        memory += next.len() * std::mem::size_of::<Part>() * 2 + 64;
                        if memory > SIZE_LIMIT {
                            return Err(ProverError::Automaton(format!(
                                "the product of {} patterns exceeds {} MiB",
                                patterns.len(),
                                SIZE_LIMIT >> 20
                            )));
                        }
                        accepts.push(accepts_of(&next));
                        index.insert(next.clone(), id);
                        pending.push_back(next.clone());
                        id
                    }
                };
                trans.push(id);
            }
        }
        Ok(Self {
            class,
            classes,
            trans,
            accepts,
        })
    }

    /// The signature of a string (the patterns it fully matches).
    pub(crate) fn signature(&self, s: &str) -> Signature {
        let mut state = self.start();
        for &b in s.as_bytes() {
            match self.next(state, b) {
                Some(n) => state = n,
                None => return Vec::new(),
            }
        }
        self.state_signature(state)
    }

    /// Every signature some string reaches, with samples and sizes. Only
    /// signatures accepted by `keep` are reported.
    pub(crate) fn explore(&self, keep: &dyn Fn(&[u32]) -> bool) -> BTreeMap<Signature, SigInfo> {
        let g = self.graph();
        let counts = g.counts();
        let mut out: BTreeMap<Signature, SigInfo> = BTreeMap::new();
        for (i, &state) in g.states.iter().enumerate() {
            let Some(sig) = self.accepts.get(state as usize) else {
                continue;
            };
            if sig.is_empty() || !keep(sig) {
                continue;
            }
            let size = counts.get(i).copied().unwrap_or(Size::Infinite);
            let entry = out.entry(sig.clone()).or_insert_with(|| SigInfo {
                samples: Vec::new(),
                size: Size::Finite(0),
            });
            entry.size = entry.size.plus(size);
            if entry.samples.len() < 8 {
                entry.samples.push(g.path_to(i));
            }
        }
        for info in out.values_mut() {
            info.samples.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
        }
        out
    }

    pub(crate) fn start(&self) -> State {
        0
    }

    pub(crate) fn next(&self, state: State, byte: u8) -> Option<State> {
        let at = (state as usize)
            .checked_mul(self.classes)?
            .checked_add(usize::from(self.byte_class(byte)))?;
        self.trans.get(at).copied().filter(|&n| n != DEAD)
    }

    /// A dense index of a state, for tables indexed by state.
    pub(crate) fn index(&self, state: State) -> usize {
        state as usize
    }

    pub(crate) fn state_signature(&self, state: State) -> Signature {
        self.accepts
            .get(state as usize)
            .cloned()
            .unwrap_or_default()
    }

    /// The joint byte class of each byte.
    pub(crate) fn byte_class(&self, byte: u8) -> u8 {
        self.class.get(usize::from(byte)).copied().unwrap_or(0)
    }

    fn graph(&self) -> Graph {
        let classes = ClassInfo::of(self);
        // Graph node of each DFA state (by `index`), `usize::MAX` if unseen.
        let mut index: Vec<usize> = vec![usize::MAX; self.accepts.len()];
        let mut g = Graph {
            edges: Vec::with_capacity(self.accepts.len() * classes.order.len()),
            ..Graph::default()
        };
        set_grow(&mut index, self.index(self.start()), 0);
        g.states.push(self.start());
        g.parent.push(None);
        // Nodes are numbered in the order they are queued, so each node's
        // edges follow those of the node before it.
        let mut queue = VecDeque::from([0usize]);
        while let Some(i) = queue.pop_front() {
            g.first.push(g.edges.len());
            let Some(&state) = g.states.get(i) else {
                continue;
            };
            for &(class, rep) in &classes.order {
                let Some(next) = self.next(state, rep) else {
                    continue;
                };
                let j = match index.get(self.index(next)) {
                    Some(&j) if j != usize::MAX => j,
                    _ => {
                        let j = g.states.len();
                        set_grow(&mut index, self.index(next), j);
                        g.states.push(next);
                        g.parent.push(Some((i, rep)));
                        queue.push_back(j);
                        j
                    }
                };
                let mult = classes.size.get(usize::from(class)).copied().unwrap_or(1);
                g.edges.push((j, mult));
            }
        }
        g.first.push(g.edges.len());
        g
    }
}

/// The byte classes of a DFA: a nice representative byte for each class and
/// how many bytes it stands for.
struct ClassInfo {
    /// (class, representative), nicest representative first.
    order: Vec<(u8, u8)>,
    size: Vec<u16>,
}

/// Rank of a byte as a witness character: lower is nicer.
pub(crate) fn niceness(b: u8) -> u32 {
    match b {
        b'x' => 0,
        b'a'..=b'z' => 1 + u32::from(b - b'a'),
        b'0'..=b'9' => 30 + u32::from(b - b'0'),
        b'-' => 40,
        b'.' => 41,
        b'_' => 42,
        b'/' => 43,
        b'A'..=b'Z' => 50 + u32::from(b - b'A'),
        0x21..=0x7e => 100 + u32::from(b),
        _ => 300 + u32::from(b),
    }
}

impl ClassInfo {
    fn of(dfa: &MultiDfa) -> Self {
        let n = dfa.classes;
        let mut best: Vec<Option<u8>> = vec![None; n];
        let mut size = vec![0u16; n];
        for b in 0..=255u8 {
            let c = usize::from(dfa.byte_class(b));
            if let Some(s) = size.get_mut(c) {
                *s += 1;
            }
            if let Some(slot) = best.get_mut(c) {
                let better = slot.is_none_or(|cur| niceness(b) < niceness(cur));
                if better {
                    *slot = Some(b);
                }
            }
        }
        let mut order: Vec<(u8, u8)> = best
            .iter()
            .enumerate()
            .filter_map(|(c, b)| Some((u8::try_from(c).ok()?, (*b)?)))
            .collect();
        order.sort_by_key(|&(_, b)| niceness(b));
        Self { order, size }
    }
}

/// The reachable part of a DFA, as a graph with edge multiplicities.
#[derive(Default)]
struct Graph {
    states: Vec<State>,
    /// BFS parent and the byte taken, for shortest strings.
    parent: Vec<Option<(usize, u8)>>,
    /// Node `i`'s edges are `edges[first[i]..first[i + 1]]`: the node
    /// reached, and how many bytes lead there. One flat list: a list per
    /// node cost more in fresh pages than the walk itself.
    first: Vec<usize>,
    edges: Vec<(usize, u16)>,
}

impl Graph {
    fn edges(&self, i: usize) -> &[(usize, u16)] {
        match (self.first.get(i), self.first.get(i + 1)) {
            (Some(&a), Some(&b)) => self.edges.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn path_to(&self, mut i: usize) -> String {
        let mut bytes = Vec::new();
        while let Some(Some((p, b))) = self.parent.get(i) {
            bytes.push(*b);
            i = *p;
        }
        bytes.reverse();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// For each state, how many strings reach it from the start (infinite
    /// when a cycle lies on some path to it).
    fn counts(&self) -> Vec<Size> {
        let n = self.states.len();
        let on_cycle = self.cyclic();
        // Infinite: reachable from a cyclic state.
        let mut infinite = on_cycle.clone();
        let mut stack: Vec<usize> = (0..n).filter(|&i| on_cycle.get(i) == Some(&true)).collect();
        while let Some(i) = stack.pop() {
            for &(j, _) in self.edges(i) {
                if let Some(f) = infinite.get_mut(j)
                    && !*f
                {
                    *f = true;
                    stack.push(j);
                }
            }
        }
        // Finite part is a DAG: count paths in topological order.
        let mut indeg = vec![0usize; n];
        for i in 0..n {
            if infinite.get(i) == Some(&true) {
                continue;
            }
            for &(j, _) in self.edges(i) {
                if let Some(d) = indeg.get_mut(j) {
                    *d += 1;
                }
            }
        }
        let mut paths = vec![0u128; n];
        if let Some(p) = paths.first_mut() {
            *p = 1;
        }
        let mut ready: Vec<usize> = (0..n)
            .filter(|&i| indeg.get(i) == Some(&0) && infinite.get(i) == Some(&false))
            .collect();
        while let Some(i) = ready.pop() {
            let here = paths.get(i).copied().unwrap_or(0);
            for &(j, mult) in self.edges(i) {
                if infinite.get(j) == Some(&true) {
                    continue;
                }
                if let Some(p) = paths.get_mut(j) {
                    *p = p.saturating_add(here.saturating_mul(u128::from(mult)));
                }
                if let Some(d) = indeg.get_mut(j) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(j);
                    }
                }
            }
        }
        (0..n)
            .map(|i| {
                if infinite.get(i) == Some(&true) {
                    Size::Infinite
                } else {
                    Size::Finite(paths.get(i).copied().unwrap_or(0))
                }
            })
            .collect()
    }

    /// States on a cycle (iterative Tarjan).
    fn cyclic(&self) -> Vec<bool> {
        let n = self.states.len();
        let mut index = vec![usize::MAX; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut out = vec![false; n];
        let mut next = 0usize;
        for root in 0..n {
            if index.get(root) != Some(&usize::MAX) {
                continue;
            }
            let mut work: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some(&mut (v, ref mut ei)) = work.last_mut() {
                if *ei == 0 && index.get(v) == Some(&usize::MAX) {
                    set(&mut index, v, next);
                    set(&mut low, v, next);
                    next += 1;
                    stack.push(v);
                    set(&mut on_stack, v, true);
                }
                if let Some(&(w, _)) = self.edges(v).get(*ei) {
                    *ei += 1;
                    if w == v {
                        set(&mut out, v, true);
                    }
                    if index.get(w) == Some(&usize::MAX) {
                        work.push((w, 0));
                    } else if on_stack.get(w) == Some(&true) {
                        let lw = index.get(w).copied().unwrap_or(0);
                        let lv = low.get(v).copied().unwrap_or(0);
                        set(&mut low, v, lv.min(lw));
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    let lv = low.get(v).copied().unwrap_or(0);
                    let lp = low.get(parent).copied().unwrap_or(0);
                    set(&mut low, parent, lp.min(lv));
                }
                if low.get(v) == index.get(v) {
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        set(&mut on_stack, w, false);
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 {
                        for w in members {
                            set(&mut out, w, true);
                        }
                    }
                }
            }
        }
        out
    }
}

/// Sets `v[i]`, growing `v` with `usize::MAX` as needed.
pub(crate) fn set_grow(v: &mut Vec<usize>, i: usize, x: usize) {
    if v.len() <= i {
        v.resize(i + 1, usize::MAX);
    }
    set(v, i, x);
}

fn set<T>(v: &mut [T], i: usize, x: T) {
    if let Some(slot) = v.get_mut(i) {
        *slot = x;
    }
}
