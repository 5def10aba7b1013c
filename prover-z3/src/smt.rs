//! Z3 side: the request variables as bit-vectors and booleans, definitions
//! as named constants, formulas translated, models read back as points.
//! Strings never reach Z3: string dimensions are atom indices.

use std::cell::RefCell;
use std::time::Instant;

use prover::backend::{AddrCell, Defs, Domain, F, Lit, MAPPED_V6, Point, Timings};
use z3::ast::Ast as _;
use z3::ast::{BV, Bool};
use z3::{Model, Params, SatResult, Solver};

/// Budget of the incremental solver before a check moves to a fresh one.
const INCREMENTAL_MS: u32 = 250;

/// Bits for a variable over `0..n`: enough to also write the bound `n`.
fn width(n: usize) -> u32 {
    let mut w = 1u32;
    while (1usize << w) <= n {
        w += 1;
    }
    w
}

pub(crate) struct Vars {
    /// Domain sizes of the finite variables: bin, sha, host, method, path,
    /// address class, body value.
    pub(crate) sizes: [usize; 7],
    pub(crate) bin: BV,
    pub(crate) sha: BV,
    pub(crate) host: BV,
    pub(crate) has_addr: Bool,
    pub(crate) v6: Bool,
    pub(crate) a4: BV,
    pub(crate) a6: BV,
    pub(crate) port: BV,
    /// The address class (see `Domain::addr_classes`), tied to the address
    /// by definition; regions name classes, not address ranges.
    pub(crate) acls: BV,
    pub(crate) method: BV,
    pub(crate) path: BV,
    /// The body value (`prover`'s `calls`); none when "no body" is the only
    /// one (no endpoint reads bodies), so a REST-only problem is the one
    /// it was before bodies were modelled: Z3's search is sensitive to
    /// every variable, and a constant one made a large unsatisfiable
    /// question forty times slower.
    pub(crate) call: Option<BV>,
    pub(crate) qa: Vec<Bool>,
    pub(crate) qd: Vec<Bool>,
}

fn bv(x: u128, w: u32) -> BV {
    if w <= 64 {
        BV::from_u64(u64::try_from(x).unwrap_or(u64::MAX), w)
    } else {
        BV::from_str(w, &x.to_string()).unwrap_or_else(|| BV::from_u64(0, w))
    }
}

fn in_range(v: &BV, lo: u128, hi: u128) -> Bool {
    let w = v.get_size();
    if lo == hi {
        return v.eq(bv(lo, w));
    }
    Bool::and(&[bv(lo, w).bvule(v), v.bvule(bv(hi, w))])
}

/// Membership of a variable over `0..n` in a sorted id set, as ranges —
/// of the set, or of its complement when that is shorter (the domain
/// constraint keeps the variable below `n`).
fn in_ids(v: &BV, set: &[u32], n: usize) -> Bool {
    let runs = |s: &[u32]| {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for &x in s {
            match out.last_mut() {
                Some(last) if last.1 + 1 == x => last.1 = x,
                _ => out.push((x, x)),
            }
        }
        out
    };
    let direct = runs(set);
    let complement: Vec<u32> = (0..n)
        .filter_map(|i| u32::try_from(i).ok())
        .filter(|i| set.binary_search(i).is_err())
        .collect();
    let other = runs(&complement);
    if other.len() < direct.len() {
        return ranges(v, &other).not();
    }
    ranges(v, &direct)
}

fn ranges(v: &BV, runs: &[(u32, u32)]) -> Bool {
    let parts: Vec<Bool> = runs
        .iter()
        .map(|&(lo, hi)| in_range(v, u128::from(lo), u128::from(hi)))
        .collect();
    match parts.len() {
        0 => Bool::from_bool(false),
        1 => parts
            .into_iter()
            .next()
            .unwrap_or_else(|| Bool::from_bool(false)),
        _ => Bool::or(&parts),
    }
}

/// A solver over one domain, with definitions asserted.
///
/// A check first runs on the incremental solver with a short budget; when
/// that does not settle it, it runs again on a fresh Z3 solver holding the
/// base constraints (domains, definitions) and the current assertion
/// scopes. A solver without push/pop history takes Z3's non-incremental
/// path (simplify, bit-blast, SAT), slower to start but far more
/// predictable once blocking clauses pile up.
pub(crate) struct Smt {
    pub(crate) vars: Vars,
    classes: Vec<Vec<AddrCell>>,
    base: Vec<Bool>,
    stack: RefCell<Vec<Vec<Bool>>>,
    /// The incremental solver, tried first with a short budget.
    inc: Solver,
    /// The fresh solver of the last check, when the incremental one gave up.
    last: RefCell<Option<Solver>>,
    defs: Vec<Bool>,
    deadline: Instant,
    /// The deadline passed before every definition was asserted: no
    /// answer may come from the solver (a missing definition reads as
    /// false).
    incomplete: std::cell::Cell<bool>,
}

impl Smt {
    pub(crate) fn new(dom: &Domain, deadline: Instant, timings: &Timings) -> Smt {
        let t = Instant::now();
        let n = dom.sizes();
        let vars = Vars {
            sizes: [
                n.bins,
                n.shas,
                n.hosts,
                n.methods,
                n.paths,
                n.addr_classes,
                n.calls,
            ],
            bin: BV::new_const("bin", width(n.bins)),
            sha: BV::new_const("sha", width(n.shas)),
            host: BV::new_const("host", width(n.hosts)),
            has_addr: Bool::new_const("has_addr"),
            v6: Bool::new_const("v6"),
            a4: BV::new_const("a4", 32),
            a6: BV::new_const("a6", 128),
            port: BV::new_const("port", 16),
            acls: BV::new_const("addr_class", width(n.addr_classes)),
            method: BV::new_const("method", width(n.methods)),
            path: BV::new_const("path", width(n.paths)),
            call: (n.calls > 1).then(|| BV::new_const("call", width(n.calls))),
            qa: (0..n.queries)
                .map(|i| Bool::new_const(format!("q{i}.allow")))
                .collect(),
            qd: (0..n.queries)
                .map(|i| Bool::new_const(format!("q{i}.deny")))
                .collect(),
        };
        timings.note(|| format!("  z3 vars {:?}", t.elapsed()));
        let below = |v: &BV, n: usize| v.bvult(bv(n as u128, v.get_size()));
        let mut domain = vec![
            below(&vars.bin, n.bins),
            below(&vars.sha, n.shas),
            below(&vars.host, n.hosts),
            below(&vars.method, n.methods),
            below(&vars.path, n.paths),
            vars.port.bvuge(bv(1, 16)),
        ];
        if let Some(call) = &vars.call {
            domain.push(below(call, n.calls));
        }
        // A destination is a host name, an address, or both.
        domain.push(Bool::or(&[
            vars.host
                .eq(bv(u128::from(dom.host_none()), vars.host.get_size()))
                .not(),
            vars.has_addr.clone(),
        ]));
        // One spelling per address: unused parts are zero, IPv4-mapped IPv6
        // is IPv4.
        domain.push(vars.has_addr.not().implies(Bool::and(&[
            vars.v6.not(),
            vars.a4.eq(bv(0, 32)),
            vars.a6.eq(bv(0, 128)),
        ])));
        domain.push(vars.v6.implies(vars.a4.eq(bv(0, 32))));
        domain.push(vars.v6.not().implies(vars.a6.eq(bv(0, 128))));
        domain.push(
            vars.v6
                .implies(in_range(&vars.a6, MAPPED_V6.0, MAPPED_V6.1).not()),
        );
        for (a, d) in vars.qa.iter().zip(&vars.qd) {
            // Every value matching means some value matches.
            domain.push(a.implies(d));
        }
        let class_bound = below(&vars.acls, n.addr_classes);
        domain.push(class_bound);
        let mut smt = Smt {
            vars,
            classes: dom.addr_classes().to_vec(),
            base: Vec::new(),
            stack: RefCell::new(vec![Vec::new()]),
            // Every variable is a bit-vector or a boolean: the QF_BV solver
            // skips the general-purpose setup and is several times faster
            // per check here.
            inc: Solver::new_for_logic("QF_BV").unwrap_or_default(),
            last: RefCell::new(None),
            defs: Vec::new(),
            deadline,
            incomplete: std::cell::Cell::new(false),
        };
        // The class variable is tied to the address bit-vectors through the
        // address sets the classes were built from: an address is in class
        // k exactly when its membership in every set is k's signature. Each
        // set is its canonical CIDR list, one prefix equality per network.
        let (addr_sets, addr_sigs) = dom.addr_sets();
        let members: Vec<Bool> = addr_sets
            .iter()
            .map(|set| {
                let nets: Vec<Bool> = set.nets().iter().map(|n| smt.in_net(n)).collect();
                Bool::and(&[smt.vars.has_addr.clone(), Bool::or(&nets)])
            })
            .collect();
        let width_c = smt.vars.acls.get_size();
        for (k, sig) in addr_sigs.iter().enumerate() {
            let is_k = smt.vars.acls.eq(bv(k as u128, width_c));
            let inside = match sig {
                None => smt.vars.has_addr.not(),
                Some(sig) => {
                    let mut parts = vec![smt.vars.has_addr.clone()];
                    for (m, &yes) in members.iter().zip(sig) {
                        parts.push(if yes { m.clone() } else { m.not() });
                    }
                    Bool::and(&parts)
                }
            };
            domain.push(is_k.eq(&inside));
        }
        timings.note(|| format!("  z3 domain {:?}", t.elapsed()));
        for c in &domain {
            smt.inc.assert(c);
        }
        smt.base.extend(domain);
        smt
    }

    /// The address lies in one CIDR network: a prefix equality.
    fn in_net(&self, n: &ipnet::IpNet) -> Bool {
        let v = &self.vars;
        let (var, fam, bits, addr) = match n.trunc() {
            ipnet::IpNet::V4(n) => (&v.a4, v.v6.not(), 32u32, u128::from(u32::from(n.network()))),
            ipnet::IpNet::V6(n) => (&v.a6, v.v6.clone(), 128u32, u128::from(n.network())),
        };
        let len = u32::from(n.prefix_len());
        if len == 0 {
            return fam;
        }
        let low = bits - len;
        Bool::and(&[fam, var.extract(bits - 1, low).eq(bv(addr >> low, len))])
    }

    pub(crate) fn push(&self) {
        self.stack.borrow_mut().push(Vec::new());
        self.inc.push();
    }

    pub(crate) fn pop(&self) {
        let mut st = self.stack.borrow_mut();
        if st.len() > 1 {
            st.pop();
            self.inc.pop(1);
        }
    }

    pub(crate) fn assert(&self, b: Bool) {
        self.inc.assert(&b);
        if let Some(top) = self.stack.borrow_mut().last_mut() {
            top.push(b);
        }
    }

    fn solver(&self) -> Solver {
        let solver = Solver::new_for_logic("QF_BV").unwrap_or_default();
        for c in &self.base {
            solver.assert(c);
        }
        for c in self.stack.borrow().iter().flatten() {
            solver.assert(c);
        }
        solver
    }

    /// Asserts definitions (may be called several times, for several
    /// definition lists appended in order).
    pub(crate) fn define(&mut self, defs: &Defs) {
        for d in defs.items.iter().skip(self.defs.len()) {
            // Translating a large model takes seconds; the deadline holds
            // here as in the checks.
            if Instant::now() >= self.deadline {
                self.incomplete.set(true);
                return;
            }
            let c = Bool::new_const(d.name.clone());
            let body = self.translate(&d.body);
            let eq = c.eq(&body);
            self.inc.assert(&eq);
            self.base.push(eq);
            self.defs.push(c);
        }
    }

    pub(crate) fn translate(&self, f: &F) -> Bool {
        match f {
            F::Const(b) => Bool::from_bool(*b),
            F::Lit(l) => self.lit(l),
            F::Not(inner) => self.translate(inner).not(),
            F::And(v) => Bool::and(&v.iter().map(|x| self.translate(x)).collect::<Vec<_>>()),
            F::Or(v) => Bool::or(&v.iter().map(|x| self.translate(x)).collect::<Vec<_>>()),
        }
    }

    fn lit(&self, l: &Lit) -> Bool {
        let v = &self.vars;
        match l {
            Lit::Bin(s) => in_ids(&v.bin, s, v.sizes[0]),
            Lit::Sha(k) => v.sha.eq(bv(u128::from(*k), v.sha.get_size())),
            Lit::Host(s) => in_ids(&v.host, s, v.sizes[2]),
            Lit::HasAddr => v.has_addr.clone(),
            Lit::Port(lo, hi) => in_range(&v.port, u128::from(*lo), u128::from(*hi)),
            Lit::Method(s) => in_ids(&v.method, s, v.sizes[3]),
            Lit::Path(s) => in_ids(&v.path, s, v.sizes[4]),
            Lit::Call(s) => match &v.call {
                Some(call) => in_ids(call, s, v.sizes[6]),
                None => Bool::from_bool(s.contains(&0)),
            },
            Lit::QAllow(q) => {
                v.qa.get(*q as usize)
                    .cloned()
                    .unwrap_or_else(|| Bool::from_bool(false))
            }
            Lit::QDeny(q) => {
                v.qd.get(*q as usize)
                    .cloned()
                    .unwrap_or_else(|| Bool::from_bool(false))
            }
            Lit::Def(d) => self
                .defs
                .get(*d as usize)
                .cloned()
                .unwrap_or_else(|| Bool::from_bool(false)),
            Lit::AddrClass(s, _) => in_ids(&v.acls, s, v.sizes[5]),
        }
    }

    /// Checks with the time left before the deadline.
    pub(crate) fn check(&self) -> SatResult {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX);
        if ms == 0 || self.incomplete.get() {
            return SatResult::Unknown;
        }
        let mut p = Params::new();
        p.set_u32("timeout", ms.min(INCREMENTAL_MS));
        self.inc.set_params(&p);
        *self.last.borrow_mut() = None;
        let r = self.inc.check();
        if r != SatResult::Unknown || ms <= INCREMENTAL_MS {
            return r;
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        let mut p = Params::new();
        p.set_u32(
            "timeout",
            u32::try_from(left.as_millis()).unwrap_or(u32::MAX).max(1),
        );
        let solver = self.solver();
        solver.set_params(&p);
        let r = solver.check();
        *self.last.borrow_mut() = Some(solver);
        r
    }

    /// The model of the last check.
    pub(crate) fn model(&self) -> Option<Model> {
        match self.last.borrow().as_ref() {
            Some(s) => s.get_model(),
            None => self.inc.get_model(),
        }
    }

    /// Why the last check was unknown.
    pub(crate) fn reason_unknown(&self) -> Option<String> {
        if Instant::now() >= self.deadline {
            return Some("timeout".to_owned());
        }
        match self.last.borrow().as_ref() {
            Some(s) => s.get_reason_unknown(),
            None => self.inc.get_reason_unknown(),
        }
    }

    /// Reads a point off a model.
    pub(crate) fn point(&self, m: &Model) -> Point {
        let v = &self.vars;
        let num = |x: &BV| m.eval(x, true).and_then(|x| x.as_u64()).unwrap_or(0);
        let small = |x: &BV| u32::try_from(num(x)).unwrap_or(u32::MAX);
        let boolean = |x: &Bool| m.eval(x, true).and_then(|x| x.as_bool()).unwrap_or(false);
        let hi = num(&v.a6.extract(127, 64));
        let lo = num(&v.a6.extract(63, 0));
        Point {
            bin: small(&v.bin),
            sha: small(&v.sha),
            host: small(&v.host),
            has_addr: boolean(&v.has_addr),
            v6: boolean(&v.v6),
            a4: small(&v.a4),
            a6: (u128::from(hi) << 64) | u128::from(lo),
            port: u16::try_from(num(&v.port)).unwrap_or(0),
            method: small(&v.method),
            path: small(&v.path),
            call: v.call.as_ref().map_or(0, small),
            qa: v.qa.iter().map(boolean).collect(),
            qd: v.qd.iter().map(boolean).collect(),
        }
    }

    /// The variables equal to a point (for replaying concrete requests).
    pub(crate) fn at(&self, p: &Point) -> Vec<Bool> {
        let v = &self.vars;
        let mut out = vec![
            v.bin.eq(bv(u128::from(p.bin), v.bin.get_size())),
            v.sha.eq(bv(u128::from(p.sha), v.sha.get_size())),
            v.host.eq(bv(u128::from(p.host), v.host.get_size())),
            if p.has_addr {
                v.has_addr.clone()
            } else {
                v.has_addr.not()
            },
            if p.v6 { v.v6.clone() } else { v.v6.not() },
            v.a4.eq(bv(u128::from(p.a4), 32)),
            v.a6.eq(bv(p.a6, 128)),
            v.port.eq(bv(u128::from(p.port), 16)),
            v.method.eq(bv(u128::from(p.method), v.method.get_size())),
            v.path.eq(bv(u128::from(p.path), v.path.get_size())),
        ];
        if let Some(call) = &v.call {
            out.push(call.eq(bv(u128::from(p.call), call.get_size())));
        }
        for (x, &b) in v.qa.iter().zip(&p.qa) {
            out.push(if b { x.clone() } else { x.not() });
        }
        for (x, &b) in v.qd.iter().zip(&p.qd) {
            out.push(if b { x.clone() } else { x.not() });
        }
        out
    }

    /// `f` with every definition replaced by its body (no named constants
    /// left), so substituting values for the variables decides it.
    pub(crate) fn inline(&self, defs: &Defs, f: &F) -> Bool {
        let mut memo: Vec<Option<Bool>> = vec![None; defs.items.len()];
        self.inline_with(defs, f, &mut memo)
    }

    fn inline_with(&self, defs: &Defs, f: &F, memo: &mut Vec<Option<Bool>>) -> Bool {
        match f {
            F::Lit(Lit::Def(d)) => {
                let i = *d as usize;
                if let Some(Some(b)) = memo.get(i) {
                    return b.clone();
                }
                let b = defs.items.get(i).map_or_else(
                    || Bool::from_bool(false),
                    |def| self.inline_with(defs, &def.body, memo),
                );
                if let Some(slot) = memo.get_mut(i) {
                    *slot = Some(b.clone());
                }
                b
            }
            F::Const(_) | F::Lit(_) => self.translate(f),
            F::Not(inner) => self.inline_with(defs, inner, memo).not(),
            F::And(v) => Bool::and(
                &v.iter()
                    .map(|x| self.inline_with(defs, x, memo))
                    .collect::<Vec<_>>(),
            ),
            F::Or(v) => Bool::or(
                &v.iter()
                    .map(|x| self.inline_with(defs, x, memo))
                    .collect::<Vec<_>>(),
            ),
        }
    }

    fn class_of(&self, p: &Point) -> u32 {
        self.classes
            .iter()
            .position(|c| c.iter().any(|cell| cell.contains(p)))
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0)
    }

    /// Several formulas at once: `ite`s concatenated into one bit-vector,
    /// substituted and simplified in one pass.
    pub(crate) fn pack(fs: &[Bool]) -> BV {
        let mut it = fs.iter().map(|f| f.ite(&bv(1, 1), &bv(0, 1)));
        let first = it.next().unwrap_or_else(|| bv(0, 1));
        it.fold(first, |acc, b| acc.concat(&b)).simplify()
    }

    /// The value of a packed bit-vector at a point.
    pub(crate) fn bits_at(&self, f: &BV, p: &Point) -> Option<u64> {
        let v = &self.vars;
        let mut bvs = vec![
            (&v.bin, bv(u128::from(p.bin), v.bin.get_size())),
            (&v.sha, bv(u128::from(p.sha), v.sha.get_size())),
            (&v.host, bv(u128::from(p.host), v.host.get_size())),
            (&v.a4, bv(u128::from(p.a4), 32)),
            (&v.a6, bv(p.a6, 128)),
            (&v.port, bv(u128::from(p.port), 16)),
            (&v.method, bv(u128::from(p.method), v.method.get_size())),
            (&v.path, bv(u128::from(p.path), v.path.get_size())),
            (&v.acls, bv(u128::from(self.class_of(p)), v.acls.get_size())),
        ];
        if let Some(call) = &v.call {
            bvs.push((call, bv(u128::from(p.call), call.get_size())));
        }
        let pairs: Vec<(&BV, &BV)> = bvs.iter().map(|(a, b)| (*a, b)).collect();
        let f = f.substitute(&pairs);
        let mut bools: Vec<(Bool, Bool)> = vec![
            (v.has_addr.clone(), Bool::from_bool(p.has_addr)),
            (v.v6.clone(), Bool::from_bool(p.v6)),
        ];
        for (x, &b) in v.qa.iter().zip(&p.qa) {
            bools.push((x.clone(), Bool::from_bool(b)));
        }
        for (x, &b) in v.qd.iter().zip(&p.qd) {
            bools.push((x.clone(), Bool::from_bool(b)));
        }
        let pairs: Vec<(&Bool, &Bool)> = bools.iter().map(|(a, b)| (a, b)).collect();
        f.substitute(&pairs).simplify().as_u64()
    }

    /// Whether `f` holds at a point, decided by Z3 (the differential tests
    /// compare this with the reference evaluator).
    pub(crate) fn holds_at(&self, f: &F, p: &Point) -> Option<bool> {
        self.push();
        for c in self.at(p) {
            self.assert(c);
        }
        self.assert(self.translate(f));
        let r = match self.check() {
            SatResult::Sat => Some(true),
            SatResult::Unsat => Some(false),
            SatResult::Unknown => None,
        };
        self.pop();
        r
    }

    pub(crate) fn to_smt2(&self) -> String {
        self.solver().to_smt2()
    }
}
