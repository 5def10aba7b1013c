//! Finding every widened region of a query: solve, generalize the model to
//! the largest region around it on which the query still holds, report it,
//! block it, and solve again until the solver says unsat (or the cap).
//!
//! Generalization is star-shaped: each dimension is widened on its own to
//! every value for which the query holds with the other dimensions at the
//! model's values (evaluated in Rust on our formula DAG, re-evaluating only
//! the definitions that depend on the dimension). The product of these sets
//! is then checked with Z3 (region ∧ ¬query unsat); when it is not valid it
//! is shrunk by the counterexamples, down to the model's own elementary
//! cell, on which the query is constant.

use crate::domain::Domain;
use crate::fd;
use crate::formula::{Defs, F, Lit, Point, and, dim, ids, lit, not, or};
use crate::region::{QUERY_VALUES, Region, apply_addr, first_port, query_value};
use crate::solver::{LazySmt, Sat};
use crate::timing::Timings;
use crate::witness;

pub(crate) struct Search<'a> {
    pub(crate) dom: &'a Domain,
    pub(crate) defs: &'a Defs,
    pub(crate) smt: &'a LazySmt<'a>,
    /// Query-string readings found impossible, blocked for every query.
    pub(crate) learned: Vec<F>,
    pub(crate) timings: &'a Timings,
}

#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) point: Point,
    pub(crate) region: Region,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every region was found.
    Complete,
    /// The solver gave up (timeout or unknown); the reason.
    Inconclusive(String),
    /// More regions than the cap; how many were counted in all.
    Capped,
}

impl Search<'_> {
    /// Enumerates the regions where `q` holds, at most `cap` of them.
    ///
    /// Most queries of a typical change have no solution at all; the
    /// finite-domain search proves that without creating a Z3 context. On a
    /// small problem it also finds the points that the regions are
    /// generalized around, so a typical widening never pays for Z3's
    /// start-up (tens of milliseconds, more than everything else). On a
    /// large problem (where the search mostly gives up, and Z3's start-up
    /// is small beside the rest), or when it gives up, the regions are
    /// enumerated with Z3 as before.
    pub(crate) fn regions(&mut self, q: &F, cap: usize) -> (Vec<Found>, Outcome) {
        if std::time::Instant::now() >= self.smt.hard_deadline() {
            return (Vec::new(), Outcome::Inconclusive("timeout".to_owned()));
        }
        if let Some(done) = self.regions_fd(q, cap) {
            return done;
        }
        self.regions_smt(q, cap)
    }

    /// What every point must satisfy besides the query (Z3 has it among
    /// its domain constraints): a host name, an address, or both.
    pub(crate) fn destination(&self) -> F {
        or([
            not(lit(Lit::Host(ids(vec![self.dom.host_none()])))),
            lit(Lit::HasAddr),
        ])
    }

    /// The same enumeration as `regions_smt` with the finite-domain search
    /// as the solver: each point it finds is generalized and blocked, until
    /// it proves nothing is left. `None` when it gives up, or finds a point
    /// of a large problem; the caller then starts over with Z3. Learned
    /// blocks are kept either way: each is true of every query string.
    fn regions_fd(&mut self, q: &F, cap: usize) -> Option<(Vec<Found>, Outcome)> {
        let dom = self.dom;
        let full = Region::full(dom);
        let mut found: Vec<Found> = Vec::new();
        loop {
            let mut parts = vec![q.clone(), self.destination()];
            parts.extend(self.learned.iter().cloned());
            parts.extend(found.iter().map(|f| not(f.region.formula(dom))));
            let t = std::time::Instant::now();
            let outcome = fd::find(
                dom,
                self.defs,
                &and(parts),
                &full,
                fd::BUDGET,
                self.smt.hard_deadline(),
            );
            self.timings.note(|| {
                format!(
                    "  fd {} {:?}",
                    match &outcome {
                        fd::Outcome::Sat(_) => "sat",
                        fd::Outcome::Unsat => "unsat",
                        fd::Outcome::GaveUp => "gave up",
                    },
                    t.elapsed()
                )
            });
            let x = match outcome {
                fd::Outcome::Unsat => return Some((found, Outcome::Complete)),
                fd::Outcome::GaveUp => return None,
                fd::Outcome::Sat(_) if self.defs.items.len() > SMALL_DEFS => return None,
                fd::Outcome::Sat(x) => x,
            };
            // Enumerating regions is solver work and shares its budget, as
            // it does with Z3; proving a query has no solution is not.
            if std::time::Instant::now() >= self.smt.deadline() {
                return Some((found, Outcome::Inconclusive("timeout".to_owned())));
            }
            if let Some(block) = witness::unrealizable(dom, &x) {
                self.learned.push(block);
                continue;
            }
            if found.len() >= cap {
                return Some((found, Outcome::Capped));
            }
            let prior: Vec<&Region> = found.iter().map(|f| &f.region).collect();
            let t = std::time::Instant::now();
            let region = self.generalize(q, &x, &prior);
            self.timings
                .note(|| format!("  generalize {:?}", t.elapsed()));
            found.push(Found { point: x, region });
        }
    }

    fn regions_smt(&mut self, q: &F, cap: usize) -> (Vec<Found>, Outcome) {
        let Some(smt) = self.smt.get() else {
            return (Vec::new(), Outcome::Inconclusive("no solver".to_owned()));
        };
        // The query's blocked regions live in this scope; the query itself
        // is asserted only around each solve, so region checks can ask for
        // its negation.
        smt.push();
        for l in &self.learned {
            smt.assert(l);
        }
        let mut found: Vec<Found> = Vec::new();
        let outcome = loop {
            smt.push();
            smt.assert(q);
            let t = std::time::Instant::now();
            let result = smt.check();
            self.timings
                .note(|| format!("  solve {result} {:?}", t.elapsed()));
            let x = match result {
                Sat::Sat => smt.model(),
                _ => None,
            };
            smt.pop();
            match result {
                Sat::Unsat => break Outcome::Complete,
                Sat::Unknown(why) => break Outcome::Inconclusive(why),
                Sat::Sat => {}
            }
            let Some(x) = x else {
                break Outcome::Inconclusive("the solver returned no model".to_owned());
            };
            if let Some(block) = witness::unrealizable(self.dom, &x) {
                smt.assert(&block);
                self.learned.push(block);
                continue;
            }
            if found.len() >= cap {
                break Outcome::Capped;
            }
            let prior: Vec<&Region> = found.iter().map(|f| &f.region).collect();
            let t = std::time::Instant::now();
            let region = self.generalize(q, &x, &prior);
            self.timings
                .note(|| format!("  generalize {:?}", t.elapsed()));
            smt.assert(&not(region.formula(self.dom)));
            found.push(Found { point: x, region });
        };
        smt.pop();
        (found, outcome)
    }

    fn generalize(&self, q: &F, x: &Point, prior: &[&Region]) -> Region {
        let dom = self.dom;
        let base = self.defs.values(x);
        let holds = |p: &Point, dirty: u32| {
            if !(p.has_addr || p.host != dom.host_none()) {
                return false;
            }
            if prior.iter().any(|r| r.contains(p, dom)) {
                return false;
            }
            let vals = self.defs.values_from(p, &base, dirty);
            p.eval(q, &vals)
        };
        let ids = |n: usize| (0..n).filter_map(|i| u32::try_from(i).ok());
        let star = |n: usize, dirty: u32, set: &dyn Fn(&mut Point, u32)| -> Vec<u32> {
            ids(n)
                .filter(|&v| {
                    let mut p = x.clone();
                    set(&mut p, v);
                    holds(&p, dirty)
                })
                .collect()
        };
        let cell = Region::cell(x, dom);
        let mut r = Region {
            bins: star(dom.bins.len(), dim::BIN, &|p, v| p.bin = v),
            shas: star(dom.shas.len(), dim::SHA, &|p, v| p.sha = v),
            hosts: star(dom.hosts.len() + 1, dim::HOST, &|p, v| p.host = v),
            addrs: star(dom.addr_classes.len(), dim::ADDR, &|p, v| {
                apply_addr(dom, v, p)
            }),
            ports: star(dom.port_classes.len(), dim::PORT, &|p, v| {
                p.port = first_port(dom, v)
            }),
            methods: star(dom.methods.len(), dim::METHOD, &|p, v| p.method = v),
            paths: star(dom.paths.len(), dim::PATH, &|p, v| p.path = v),
            calls: star(dom.calls.len(), dim::CALL, &|p, v| p.call = v),
            queries: (0..dom.queries.len())
                .map(|qi| {
                    (0..QUERY_VALUES.len())
                        .filter_map(|v| u8::try_from(v).ok())
                        .filter(|&v| {
                            let mut p = x.clone();
                            if let Some(&(va, vd)) = QUERY_VALUES.get(usize::from(v)) {
                                if let Some(a) = p.qa.get_mut(qi) {
                                    *a = va;
                                }
                                if let Some(d) = p.qd.get_mut(qi) {
                                    *d = vd;
                                }
                            }
                            holds(&p, dim::QUERY)
                        })
                        .collect()
                })
                .collect(),
        };
        // The model's own cell always belongs (guards against a value the
        // star evaluation could not reproduce).
        keep(&mut r.bins, &cell.bins);
        keep(&mut r.shas, &cell.shas);
        keep(&mut r.hosts, &cell.hosts);
        keep(&mut r.addrs, &cell.addrs);
        keep(&mut r.ports, &cell.ports);
        keep(&mut r.methods, &cell.methods);
        keep(&mut r.paths, &cell.paths);
        keep(&mut r.calls, &cell.calls);
        for (mine, theirs) in r.queries.iter_mut().zip(&cell.queries) {
            keep(mine, theirs);
        }
        for _ in 0..16 {
            // Past the deadline the cell alone is a sound region.
            if std::time::Instant::now() >= self.smt.deadline() {
                return cell;
            }
            match self.counterexample(q, &r, &base, x) {
                Ok(None) => return r,
                Ok(Some(y)) => {
                    let fixes = |d: usize| {
                        let mut z = y.clone();
                        revert(&mut z, x, d);
                        z.eval(q, &self.defs.values(&z))
                    };
                    if !shrink(&mut r, &y, x, dom, &fixes) {
                        return cell;
                    }
                }
                Err(()) => return cell,
            }
        }
        cell
    }

    /// A point of the region where the query fails, if any: by enumerating
    /// the region's cells when there are few (the query is constant on a
    /// cell), by Z3 otherwise.
    fn counterexample(
        &self,
        q: &F,
        r: &Region,
        base: &[bool],
        x: &Point,
    ) -> Result<Option<Point>, ()> {
        let size = [
            r.bins.len(),
            r.shas.len(),
            r.hosts.len(),
            r.addrs.len(),
            r.ports.len(),
            r.methods.len(),
            r.paths.len(),
            r.calls.len(),
        ]
        .iter()
        .chain(r.queries.iter().map(Vec::len).collect::<Vec<_>>().iter())
        .try_fold(1usize, |acc, &n| acc.checked_mul(n.max(1)));
        // A valid region is settled by the finite-domain search; a
        // counterexample comes from enumeration or Z3, whose choices the
        // shrinking heuristics are tuned to. Only on small problems: on a
        // large one Z3 is created anyway and the search would mostly give
        // up.
        if self.defs.items.len() <= SMALL_DEFS {
            let f = and([not(q.clone()), self.destination()]);
            let deadline = self.smt.hard_deadline();
            if fd::find(self.dom, self.defs, &f, r, fd::BUDGET, deadline) == fd::Outcome::Unsat {
                return Ok(None);
            }
        }
        if size.is_some_and(|n| n <= ENUMERATE) {
            return Ok(self.enumerate(q, r, base, x));
        }
        self.counterexample_smt(q, r)
    }

    fn enumerate(&self, q: &F, r: &Region, base: &[bool], x: &Point) -> Option<Point> {
        let dom = self.dom;
        let mut found = None;
        let mut p = x.clone();
        let cells = |v: &[u32]| v.to_vec();
        'outer: for &bin in &r.bins {
            for &sha in &r.shas {
                for &host in &r.hosts {
                    for &a in &r.addrs {
                        for &port in &r.ports {
                            p.bin = bin;
                            p.sha = sha;
                            p.host = host;
                            apply_addr(dom, a, &mut p);
                            p.port = first_port(dom, port);
                            if !(p.has_addr || p.host != dom.host_none()) {
                                continue;
                            }
                            let outer = self.defs.values_from(
                                &p,
                                base,
                                dim::BIN | dim::SHA | dim::HOST | dim::ADDR | dim::PORT,
                            );
                            for &m in &cells(&r.methods) {
                                for &path in &cells(&r.paths) {
                                    for &call in &cells(&r.calls) {
                                        p.method = m;
                                        p.path = path;
                                        p.call = call;
                                        if !self.queries_hold(q, r, &mut p, &outer) {
                                            found = Some(p.clone());
                                            break 'outer;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        found
    }

    /// Whether `q` holds for every query reading of the region at `p`.
    fn queries_hold(&self, q: &F, r: &Region, p: &mut Point, outer: &[bool]) -> bool {
        let vals = self.defs.values_from(p, outer, INNER);
        if r.queries.iter().all(|v| v.len() == 1) {
            for (i, v) in r.queries.iter().enumerate() {
                if let Some(&(a, d)) = v.first().and_then(|&k| QUERY_VALUES.get(usize::from(k))) {
                    set_query(p, i, a, d);
                }
            }
            let vals = self.defs.values_from(p, &vals, dim::QUERY);
            return p.eval(q, &vals);
        }
        self.each_reading(q, r, p, 0, outer)
    }

    fn each_reading(&self, q: &F, r: &Region, p: &mut Point, i: usize, outer: &[bool]) -> bool {
        let Some(vs) = r.queries.get(i) else {
            let vals = self.defs.values_from(p, outer, INNER);
            return p.eval(q, &vals);
        };
        for &v in vs {
            if let Some(&(a, d)) = QUERY_VALUES.get(usize::from(v)) {
                set_query(p, i, a, d);
                if !self.each_reading(q, r, p, i + 1, outer) {
                    return false;
                }
            }
        }
        true
    }

    fn counterexample_smt(&self, q: &F, r: &Region) -> Result<Option<Point>, ()> {
        // Started first: its start-up is timed on its own.
        if self.smt.get().is_none() {
            return Err(());
        }
        let t = std::time::Instant::now();
        let out = self
            .smt
            .model_of(&and([r.formula(self.dom), not(q.clone())]));
        self.timings.note(|| {
            format!(
                "  region check {} {:?} (bins {} hosts {} addrs {} ports {} methods {} paths {} calls {})",
                match &out {
                    Ok(Some(_)) => "Sat",
                    Ok(None) => "Unsat",
                    Err(()) => "Unknown",
                },
                t.elapsed(),
                r.bins.len(),
                r.hosts.len(),
                r.addrs.len(),
                r.ports.len(),
                r.methods.len(),
                r.paths.len(),
                r.calls.len()
            )
        });
        out
    }
}

/// The dimensions `enumerate` varies innermost.
const INNER: u32 = dim::METHOD | dim::PATH | dim::CALL | dim::QUERY;

/// Problems with at most this many definitions try the finite-domain
/// search before Z3 for region checks.
const SMALL_DEFS: usize = 200;

/// Regions with at most this many cells are checked by enumeration.
const ENUMERATE: usize = 4096;

fn set_query(p: &mut Point, i: usize, a: bool, d: bool) {
    if let Some(x) = p.qa.get_mut(i) {
        *x = a;
    }
    if let Some(x) = p.qd.get_mut(i) {
        *x = d;
    }
}

fn keep<T: PartialEq + Clone + Ord>(set: &mut Vec<T>, must: &[T]) {
    for m in must {
        if !set.contains(m) {
            set.push(m.clone());
        }
    }
    set.sort();
}

/// Sets dimension `d` (in `shrink`'s order) of `z` to the model's value.
fn revert(z: &mut Point, x: &Point, d: usize) {
    match d {
        0 => z.bin = x.bin,
        1 => z.sha = x.sha,
        2 => z.host = x.host,
        3 => {
            z.has_addr = x.has_addr;
            z.v6 = x.v6;
            z.a4 = x.a4;
            z.a6 = x.a6;
        }
        4 => z.port = x.port,
        5 => z.method = x.method,
        6 => z.path = x.path,
        7 => z.call = x.call,
        _ => {
            z.qa.clone_from(&x.qa);
            z.qd.clone_from(&x.qd);
        }
    }
}

/// Removes the counterexample's value from one dimension where it differs
/// from the model: preferably one where the model's value alone would make
/// the query hold again (that dimension is why it fails), the widest such.
/// False when nothing can be removed.
fn shrink(
    r: &mut Region,
    y: &Point,
    x: &Point,
    dom: &Domain,
    fixes: &dyn Fn(usize) -> bool,
) -> bool {
    let ycell = Region::cell(y, dom);
    let xcell = Region::cell(x, dom);
    let mut best: Option<(usize, usize)> = None;
    let dims: [(usize, bool); 8] = [
        (r.bins.len(), y.bin != x.bin),
        (r.shas.len(), y.sha != x.sha),
        (r.hosts.len(), y.host != x.host),
        (r.addrs.len(), ycell.addrs != xcell.addrs),
        (r.ports.len(), ycell.ports != xcell.ports),
        (r.methods.len(), y.method != x.method),
        (r.paths.len(), y.path != x.path),
        (r.calls.len(), y.call != x.call),
    ];
    for responsible in [true, false] {
        for (i, &(len, differs)) in dims.iter().enumerate() {
            if differs && (!responsible || fixes(i)) && best.is_none_or(|(_, l)| len > l) {
                best = Some((i, len));
            }
        }
        if best.is_some() {
            break;
        }
    }
    let query_dim = (0..dom.queries.len()).find(|&q| query_value(y, q) != query_value(x, q));
    match best.map(|(i, _)| i) {
        Some(0) => r.bins.retain(|&v| v != y.bin),
        Some(1) => r.shas.retain(|&v| v != y.sha),
        Some(2) => r.hosts.retain(|&v| v != y.host),
        Some(3) => {
            let c = ycell.addrs.clone();
            r.addrs.retain(|v| !c.contains(v));
        }
        Some(4) => {
            let c = ycell.ports.clone();
            r.ports.retain(|v| !c.contains(v));
        }
        Some(5) => r.methods.retain(|&v| v != y.method),
        Some(6) => r.paths.retain(|&v| v != y.path),
        Some(7) => r.calls.retain(|&v| v != y.call),
        _ => match query_dim {
            Some(q) => {
                let v = query_value(y, q);
                if let Some(vs) = r.queries.get_mut(q) {
                    vs.retain(|&x| x != v);
                }
            }
            None => return false,
        },
    }
    true
}
