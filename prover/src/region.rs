//! Regions: products of value sets, one per dimension, that a solver model
//! is generalized to. A finding reports one region; the solver is then told
//! to look outside it.

use crate::domain::Domain;
use crate::formula::{AddrCell, F, Lit, Point, T, and, ids, lit, not, or};

/// The three consistent readings of one query condition: key absent or no
/// value matching, some value matching, every value matching.
pub(crate) const QUERY_VALUES: [(bool, bool); 3] = [(false, false), (false, true), (true, true)];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) bins: Vec<u32>,
    pub(crate) shas: Vec<u32>,
    pub(crate) hosts: Vec<u32>,
    /// Address classes (indices into `Domain::addr_classes`).
    pub(crate) addrs: Vec<u32>,
    /// Port classes (indices into `Domain::port_classes`).
    pub(crate) ports: Vec<u32>,
    pub(crate) methods: Vec<u32>,
    pub(crate) paths: Vec<u32>,
    /// Body values (indices into `Calls::values`).
    pub(crate) calls: Vec<u32>,
    /// Per query condition, the readings (indices into `QUERY_VALUES`).
    pub(crate) queries: Vec<Vec<u8>>,
}

pub(crate) fn query_value(p: &Point, q: usize) -> u8 {
    let a = p.qa.get(q).copied().unwrap_or(false);
    let d = p.qd.get(q).copied().unwrap_or(false);
    QUERY_VALUES
        .iter()
        .position(|&v| v == (a, d))
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(0)
}

impl Region {
    /// Every value in every dimension.
    pub(crate) fn full(dom: &Domain) -> Region {
        let all = |n: usize| {
            (0..n)
                .filter_map(|i| u32::try_from(i).ok())
                .collect::<Vec<_>>()
        };
        Region {
            bins: all(dom.bins.len()),
            shas: all(dom.shas.len()),
            hosts: all(dom.hosts.len() + 1),
            addrs: all(dom.addr_classes.len()),
            ports: all(dom.port_classes.len()),
            methods: all(dom.methods.len()),
            paths: all(dom.paths.len()),
            calls: all(dom.calls.len()),
            queries: vec![(0..3).collect(); dom.queries.len()],
        }
    }

    /// The elementary cell of a point.
    pub(crate) fn cell(p: &Point, dom: &Domain) -> Region {
        Region {
            bins: vec![p.bin],
            shas: vec![p.sha],
            hosts: vec![p.host],
            addrs: vec![dom.addr_class_of(p)],
            ports: vec![dom.port_class_of(p.port)],
            methods: vec![p.method],
            paths: vec![p.path],
            calls: vec![p.call],
            queries: (0..dom.queries.len())
                .map(|q| vec![query_value(p, q)])
                .collect(),
        }
    }

    pub(crate) fn contains(&self, p: &Point, dom: &Domain) -> bool {
        self.bins.contains(&p.bin)
            && self.shas.contains(&p.sha)
            && self.hosts.contains(&p.host)
            && self.addrs.contains(&dom.addr_class_of(p))
            && self.ports.contains(&dom.port_class_of(p.port))
            && self.methods.contains(&p.method)
            && self.paths.contains(&p.path)
            && self.calls.contains(&p.call)
            && self
                .queries
                .iter()
                .enumerate()
                .all(|(q, vs)| vs.contains(&query_value(p, q)))
    }

    /// The region as a formula (full dimensions left out).
    pub(crate) fn formula(&self, dom: &Domain) -> F {
        let set = |v: &[u32], n: usize, mk: fn(crate::formula::Ids) -> Lit| {
            if v.len() >= n {
                T
            } else {
                lit(mk(ids(v.to_vec())))
            }
        };
        let addrs = if self.addrs.len() >= dom.addr_classes.len() {
            T
        } else {
            lit(Lit::AddrClass(
                ids(self.addrs.clone()),
                self.addr_cells(dom).into(),
            ))
        };
        let ports = if self.ports.len() >= dom.port_classes.len() {
            T
        } else {
            or(merge(&self.port_cells(dom))
                .into_iter()
                .map(|(lo, hi)| lit(Lit::Port(lo, hi))))
        };
        let queries = self.queries.iter().enumerate().map(|(q, vs)| {
            if vs.len() >= QUERY_VALUES.len() {
                return T;
            }
            let q32 = u32::try_from(q).unwrap_or(u32::MAX);
            or(vs
                .iter()
                .filter_map(|&v| QUERY_VALUES.get(usize::from(v)))
                .map(|&(a, d)| {
                    let la = lit(Lit::QAllow(q32));
                    let ld = lit(Lit::QDeny(q32));
                    and([if a { la } else { not(la) }, if d { ld } else { not(ld) }])
                }))
        });
        and([
            set(&self.bins, dom.bins.len(), Lit::Bin),
            if self.shas.len() >= dom.shas.len() {
                T
            } else {
                or(self.shas.iter().map(|&s| lit(Lit::Sha(s))))
            },
            set(&self.hosts, dom.hosts.len() + 1, Lit::Host),
            addrs,
            ports,
            set(&self.methods, dom.methods.len(), Lit::Method),
            set(&self.paths, dom.paths.len(), Lit::Path),
            set(&self.calls, dom.calls.len(), Lit::Call),
        ]
        .into_iter()
        .chain(queries))
    }
}

impl Region {
    pub(crate) fn addr_cells(&self, dom: &Domain) -> Vec<AddrCell> {
        self.addrs
            .iter()
            .filter_map(|&c| dom.addr_classes.get(c as usize))
            .flatten()
            .copied()
            .collect()
    }

    pub(crate) fn port_cells(&self, dom: &Domain) -> Vec<(u16, u16)> {
        self.ports
            .iter()
            .filter_map(|&c| dom.port_classes.get(c as usize))
            .flatten()
            .copied()
            .collect()
    }
}

/// Puts the first address of an address class into a point.
pub(crate) fn apply_addr(dom: &Domain, class: u32, p: &mut Point) {
    if let Some(cell) = dom.addr_classes.get(class as usize).and_then(|c| c.first()) {
        cell.apply(p);
    }
}

/// The first port of a port class.
pub(crate) fn first_port(dom: &Domain, class: u32) -> u16 {
    dom.port_classes
        .get(class as usize)
        .and_then(|c| c.first())
        .map_or(1, |&(lo, _)| lo)
}

/// Merges adjacent port cells.
pub(crate) fn merge(cells: &[(u16, u16)]) -> Vec<(u16, u16)> {
    let mut v = cells.to_vec();
    v.sort_unstable();
    let mut out: Vec<(u16, u16)> = Vec::new();
    for (lo, hi) in v {
        match out.last_mut() {
            Some(last) if u32::from(last.1) + 1 >= u32::from(lo) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}
