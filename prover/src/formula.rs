//! Formulas over the request variables, kept as our own small DAG so the
//! same formula can be handed to Z3, printed as SMT-LIB, and evaluated on a
//! concrete point (to generalize a solver model into a region cheaply).
//!
//! Variables: the binary atom, the SHA-256 pin index, the host atom (or
//! "no host"), whether an address is known, its family and value (bv32 /
//! bv128), the port (bv16), the method index, the path atom, the body
//! value (the JSON-RPC call, `crate::calls`), and two
//! booleans per query condition (its allow reading and its deny reading).
//! Named sub-formulas ("definitions") are shared: each is a Z3 constant
//! asserted equal to its body.

use std::rc::Rc;

/// Dimensions a formula can depend on, as bits.
pub(crate) mod dim {
    pub(crate) const BIN: u32 = 1;
    pub(crate) const SHA: u32 = 2;
    pub(crate) const HOST: u32 = 4;
    pub(crate) const ADDR: u32 = 8;
    pub(crate) const PORT: u32 = 16;
    pub(crate) const METHOD: u32 = 32;
    pub(crate) const PATH: u32 = 64;
    pub(crate) const QUERY: u32 = 128;
    /// The JSON-RPC call in the body (`crate::calls`).
    pub(crate) const CALL: u32 = 256;
}

/// A sorted set of atom indices.
pub type Ids = Rc<[u32]>;

/// An atomic condition on the request variables.
#[derive(Debug, Clone)]
pub enum Lit {
    /// The binary atom is one of these.
    Bin(Ids),
    /// The SHA-256 pin index is this one.
    Sha(u32),
    /// The host atom (or "no host name") is one of these.
    Host(Ids),
    /// The request names an address.
    HasAddr,
    /// The port lies in this range, both ends included.
    Port(u16, u16),
    /// The method index is one of these.
    Method(Ids),
    /// The path atom is one of these.
    Path(Ids),
    /// The body value (index into `Calls::values`) is one of these.
    Call(Ids),
    /// The allow reading of this query condition holds.
    QAllow(u32),
    /// The deny reading of this query condition holds.
    QDeny(u32),
    /// This definition (`Defs::items`) holds.
    Def(u32),
    /// The address lies in one of these address classes (the cells are
    /// what Rust evaluation checks; Z3 uses the class variable).
    AddrClass(Ids, Rc<[AddrCell]>),
}

/// A formula over the request variables.
#[derive(Debug, Clone)]
pub enum F {
    /// True or false.
    Const(bool),
    /// An atomic condition.
    Lit(Lit),
    /// Negation.
    Not(Box<F>),
    /// Conjunction; empty is true.
    And(Vec<F>),
    /// Disjunction; empty is false.
    Or(Vec<F>),
}

pub(crate) const T: F = F::Const(true);
pub(crate) const FALSE: F = F::Const(false);

pub(crate) fn ids(mut v: Vec<u32>) -> Ids {
    v.sort_unstable();
    v.dedup();
    v.into()
}

pub(crate) fn lit(l: Lit) -> F {
    match &l {
        Lit::Bin(s)
        | Lit::Host(s)
        | Lit::Method(s)
        | Lit::Path(s)
        | Lit::Call(s)
        | Lit::AddrClass(s, _)
            if s.is_empty() =>
        {
            FALSE
        }
        _ => F::Lit(l),
    }
}

pub(crate) fn not(f: F) -> F {
    match f {
        F::Const(b) => F::Const(!b),
        F::Not(inner) => *inner,
        other => F::Not(Box::new(other)),
    }
}

pub(crate) fn and(parts: impl IntoIterator<Item = F>) -> F {
    let mut out = Vec::new();
    for p in parts {
        match p {
            F::Const(true) => {}
            F::Const(false) => return FALSE,
            F::And(inner) => out.extend(inner),
            other => out.push(other),
        }
    }
    match out.len() {
        0 => T,
        1 => out.pop().unwrap_or(T),
        _ => F::And(out),
    }
}

pub(crate) fn or(parts: impl IntoIterator<Item = F>) -> F {
    let mut out = Vec::new();
    for p in parts {
        match p {
            F::Const(false) => {}
            F::Const(true) => return T,
            F::Or(inner) => out.extend(inner),
            other => out.push(other),
        }
    }
    match out.len() {
        0 => FALSE,
        1 => out.pop().unwrap_or(FALSE),
        _ => F::Or(out),
    }
}

/// A named, shared sub-formula.
#[derive(Debug, Clone)]
pub struct Def {
    /// The name the solver knows it by.
    pub name: String,
    /// What it stands for.
    pub body: F,
    /// The dimensions the body depends on (through other definitions too).
    pub(crate) mask: u32,
}

/// Definitions in dependency order: a body only refers to earlier ones.
#[derive(Debug, Default, Clone)]
pub struct Defs {
    /// The definitions; `Lit::Def(i)` is the `i`th.
    pub items: Vec<Def>,
}

impl Defs {
    /// Names `body`; constants and single literals are returned as they are.
    pub(crate) fn define(&mut self, name: impl Into<String>, body: F) -> F {
        match body {
            F::Const(_) | F::Lit(_) => body,
            F::Not(ref inner) if matches!(**inner, F::Lit(_)) => body,
            _ => {
                let mask = self.mask(&body);
                let id = u32::try_from(self.items.len()).unwrap_or(u32::MAX);
                self.items.push(Def {
                    name: name.into(),
                    body,
                    mask,
                });
                F::Lit(Lit::Def(id))
            }
        }
    }

    pub(crate) fn mask(&self, f: &F) -> u32 {
        match f {
            F::Const(_) => 0,
            F::Lit(l) => match l {
                Lit::Bin(_) => dim::BIN,
                Lit::Sha(_) => dim::SHA,
                Lit::Host(_) => dim::HOST,
                Lit::HasAddr | Lit::AddrClass(..) => dim::ADDR,
                Lit::Port(..) => dim::PORT,
                Lit::Method(_) => dim::METHOD,
                Lit::Path(_) => dim::PATH,
                Lit::Call(_) => dim::CALL,
                Lit::QAllow(_) | Lit::QDeny(_) => dim::QUERY,
                Lit::Def(d) => self.items.get(*d as usize).map_or(0, |d| d.mask),
            },
            F::Not(inner) => self.mask(inner),
            F::And(v) | F::Or(v) => v.iter().fold(0, |m, x| m | self.mask(x)),
        }
    }
}

/// A concrete request in atom space.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Point {
    /// The binary atom.
    pub bin: u32,
    /// The SHA-256 pin index.
    pub sha: u32,
    /// The host atom; `Domain::host_none` for no host name.
    pub host: u32,
    /// Whether the request names an address.
    pub has_addr: bool,
    /// Whether that address is IPv6.
    pub v6: bool,
    /// The IPv4 address (0 unless one).
    pub a4: u32,
    /// The IPv6 address (0 unless one).
    pub a6: u128,
    /// The port.
    pub port: u16,
    /// The method index.
    pub method: u32,
    /// The path atom.
    pub path: u32,
    /// The body value (`Calls::values`); 0 is "no body".
    pub call: u32,
    /// Each query condition's allow reading.
    pub qa: Vec<bool>,
    /// Each query condition's deny reading.
    pub qd: Vec<bool>,
}

fn member(set: &[u32], x: u32) -> bool {
    set.binary_search(&x).is_ok()
}

impl Point {
    pub(crate) fn lit(&self, l: &Lit, defs: &[bool]) -> bool {
        match l {
            Lit::Bin(s) => member(s, self.bin),
            Lit::Sha(k) => self.sha == *k,
            Lit::Host(s) => member(s, self.host),
            Lit::HasAddr => self.has_addr,
            Lit::Port(lo, hi) => *lo <= self.port && self.port <= *hi,
            Lit::Method(s) => member(s, self.method),
            Lit::Path(s) => member(s, self.path),
            Lit::Call(s) => member(s, self.call),
            Lit::QAllow(q) => self.qa.get(*q as usize).copied().unwrap_or(false),
            Lit::QDeny(q) => self.qd.get(*q as usize).copied().unwrap_or(false),
            Lit::Def(d) => defs.get(*d as usize).copied().unwrap_or(false),
            // Class 0 is "no address" (its cell `AddrCell::None`), as Z3
            // ties the class variable; a region may name it.
            Lit::AddrClass(_, cells) => cells.iter().any(|c| c.contains(self)),
        }
    }

    pub(crate) fn eval(&self, f: &F, defs: &[bool]) -> bool {
        match f {
            F::Const(b) => *b,
            F::Lit(l) => self.lit(l, defs),
            F::Not(inner) => !self.eval(inner, defs),
            F::And(v) => v.iter().all(|x| self.eval(x, defs)),
            F::Or(v) => v.iter().any(|x| self.eval(x, defs)),
        }
    }
}

impl Defs {
    /// Values of every definition at a point.
    pub(crate) fn values(&self, p: &Point) -> Vec<bool> {
        let mut out = Vec::with_capacity(self.items.len());
        for d in &self.items {
            let v = p.eval(&d.body, &out);
            out.push(v);
        }
        out
    }

    /// Values at a point that differs from `base`'s point only in the
    /// dimensions of `dirty`: definitions that do not depend on them are
    /// copied.
    pub(crate) fn values_from(&self, p: &Point, base: &[bool], dirty: u32) -> Vec<bool> {
        let mut out = Vec::with_capacity(self.items.len());
        for (i, d) in self.items.iter().enumerate() {
            let v = if d.mask & dirty == 0 {
                base.get(i).copied().unwrap_or(false)
            } else {
                p.eval(&d.body, &out)
            };
            out.push(v);
        }
        out
    }
}

/// A value of the address dimension: no address, or an elementary cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddrCell {
    /// No address.
    None,
    /// IPv4 addresses from the first to the second, both included.
    V4(u32, u32),
    /// IPv6 addresses likewise.
    V6(u128, u128),
}

impl AddrCell {
    /// The cell's first address.
    pub(crate) fn first_ip(self) -> Option<std::net::IpAddr> {
        match self {
            AddrCell::None => None,
            AddrCell::V4(lo, _) => Some(std::net::IpAddr::V4(lo.into())),
            AddrCell::V6(lo, _) => Some(std::net::IpAddr::V6(lo.into())),
        }
    }

    /// Puts this cell's first address into a point.
    pub(crate) fn apply(self, p: &mut Point) {
        match self {
            AddrCell::None => {
                p.has_addr = false;
                p.v6 = false;
                p.a4 = 0;
                p.a6 = 0;
            }
            AddrCell::V4(lo, _) => {
                p.has_addr = true;
                p.v6 = false;
                p.a4 = lo;
                p.a6 = 0;
            }
            AddrCell::V6(lo, _) => {
                p.has_addr = true;
                p.v6 = true;
                p.a4 = 0;
                p.a6 = lo;
            }
        }
    }

    pub(crate) fn count(self) -> u128 {
        match self {
            AddrCell::None => 0,
            AddrCell::V4(lo, hi) => u128::from(hi - lo) + 1,
            AddrCell::V6(lo, hi) => (hi - lo).saturating_add(1),
        }
    }

    /// Whether the point's address is in the cell.
    pub fn contains(self, p: &Point) -> bool {
        match self {
            AddrCell::None => !p.has_addr,
            AddrCell::V4(lo, hi) => p.has_addr && !p.v6 && lo <= p.a4 && p.a4 <= hi,
            AddrCell::V6(lo, hi) => p.has_addr && p.v6 && lo <= p.a6 && p.a6 <= hi,
        }
    }
}
