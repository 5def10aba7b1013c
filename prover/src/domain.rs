//! The finite and bit-vector domains the solver works over, built from the
//! patterns and sets of both bundles (and the registry, accepted risks and
//! Landlock paths): string atoms per dimension, method and SHA-256 pin
//! domains, query conditions, and the elementary port and address cells.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use policy_bundle::Dest;
use policy_bundle::matcher::method::STANDARD_METHODS;
use policy_bundle::matcher::{
    AddrSet, BinaryGlob, HostPattern, HttpPathGlob, METADATA_HOSTS, MethodSet, PortSet,
    QueryMatcher, internal_ranges,
};
use policy_bundle::{Bundle, L7Endpoint, Tables};

use crate::calls::Calls;
use crate::error::ProverError;
use crate::formula::AddrCell;
use crate::strings::validity::Rule;
use crate::strings::{DimSpec, Partition, PatternKind, PatternSet, universe};
use crate::timing::Timings;

/// Per query key: each set of conditions (indices into `Domain::queries`)
/// some single value matches, with such a value.
pub(crate) type QueryValues = std::collections::BTreeMap<String, Vec<(Vec<usize>, String)>>;

/// Key of the path predicate "contains an encoded slash".
pub(crate) const ENCODED_SLASH_KEY: &str = "<contains %2F>";

/// Extra patterns the queries need besides the bundles' own.
#[derive(Debug, Default, Clone)]
pub(crate) struct Extra {
    pub(crate) binaries: Vec<BinaryGlob>,
    pub(crate) hosts: Vec<HostPattern>,
    pub(crate) paths: Vec<HttpPathGlob>,
    pub(crate) methods: Vec<String>,
    pub(crate) ports: Vec<PortSet>,
    pub(crate) addrs: Vec<AddrSet>,
}

/// Every dimension's values, from both bundles.
#[derive(Debug)]
pub struct Domain {
    pub(crate) bins: Partition,
    /// Host atoms; the value `hosts.len()` stands for "no host name".
    pub(crate) hosts: Partition,
    pub(crate) paths: Partition,
    /// Method names by index; the last one stands for every method neither
    /// policy names.
    pub(crate) methods: Vec<String>,
    /// SHA-256 pins by index; index 0 is "a digest no rule pins".
    pub(crate) shas: Vec<Option<String>>,
    pub(crate) queries: Vec<QueryMatcher>,
    /// Per query key, every combination of its conditions some single
    /// value matches (indices into `queries`, sorted), with such a value:
    /// the exact basis for deciding which readings a query string can
    /// give (see `witness::realize_key`).
    pub(crate) query_values: QueryValues,
    /// Port classes: elementary port intervals grouped by which port sets
    /// hold them (every formula treats a class alike).
    pub(crate) port_classes: Vec<Vec<(u16, u16)>>,
    /// Address classes, likewise; class 0 is "no address".
    pub(crate) addr_classes: Vec<Vec<AddrCell>>,
    /// The distinct address sets the classes were built from, and each
    /// class's membership in them (`None` for "no address").
    pub(crate) addr_sets: Vec<AddrSet>,
    pub(crate) addr_sigs: Vec<Option<Vec<bool>>>,
    pub(crate) encoded_slash: bool,
    /// The body values: the JSON-RPC call a request carries.
    pub(crate) calls: Calls,
    /// The WebSocket kinds in the method dimension, when a bundle has a
    /// websocket endpoint.
    pub(crate) ws: Option<crate::websocket::Kinds>,
}

/// How many values each finite variable of a [`Domain`] ranges over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Binary atoms.
    pub bins: usize,
    /// SHA-256 pins, "a digest no rule pins" included.
    pub shas: usize,
    /// Host atoms and "no host name".
    pub hosts: usize,
    /// Methods, "any other method" included.
    pub methods: usize,
    /// Path atoms.
    pub paths: usize,
    /// Address classes, "no address" included.
    pub addr_classes: usize,
    /// Body values, "no body" included.
    pub calls: usize,
    /// Query-string conditions (two booleans each).
    pub queries: usize,
}

impl Domain {
    pub(crate) fn port_class_of(&self, port: u16) -> u32 {
        self.port_classes
            .iter()
            .position(|c| c.iter().any(|&(lo, hi)| lo <= port && port <= hi))
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0)
    }

    pub(crate) fn addr_class_of(&self, p: &crate::formula::Point) -> u32 {
        self.addr_classes
            .iter()
            .position(|c| c.iter().any(|cell| cell.contains(p)))
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0)
    }

    /// The host value that stands for "no host name".
    pub fn host_none(&self) -> u32 {
        u32::try_from(self.hosts.len()).unwrap_or(u32::MAX)
    }

    /// How many values each finite variable ranges over.
    pub fn sizes(&self) -> Sizes {
        Sizes {
            bins: self.bins.len(),
            shas: self.shas.len(),
            hosts: self.hosts.len() + 1,
            methods: self.methods.len(),
            paths: self.paths.len(),
            addr_classes: self.addr_classes.len(),
            calls: self.calls.len(),
            queries: self.queries.len(),
        }
    }

    /// The address classes: class `k` is the union of its cells.
    pub fn addr_classes(&self) -> &[Vec<AddrCell>] {
        &self.addr_classes
    }

    /// The address sets the classes were built from, and each class's
    /// membership in every one of them (`None`: the class of "no
    /// address"). A solver ties its class variable to the address with
    /// these, not with the cells, which can be many more.
    pub fn addr_sets(&self) -> (&[AddrSet], &[Option<Vec<bool>>]) {
        (&self.addr_sets, &self.addr_sigs)
    }

    pub(crate) fn method_index(&self, m: &str) -> u32 {
        let up = m.to_ascii_uppercase();
        let other = self.methods.len().saturating_sub(1);
        let i = self.methods.iter().position(|x| *x == up).unwrap_or(other);
        u32::try_from(i).unwrap_or(u32::MAX)
    }

    pub(crate) fn sha_index(&self, sha: Option<&str>) -> u32 {
        let i = sha
            .and_then(|s| {
                self.shas
                    .iter()
                    .position(|p| p.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(s)))
            })
            .unwrap_or(0);
        u32::try_from(i).unwrap_or(0)
    }

    pub(crate) fn query_index(&self, q: &QueryMatcher) -> Option<u32> {
        self.queries
            .iter()
            .position(|x| x == q)
            .and_then(|i| u32::try_from(i).ok())
    }

    /// Atoms of a method set.
    pub(crate) fn methods_of(&self, set: &MethodSet) -> Vec<u32> {
        (0..self.methods.len())
            .filter(|&i| {
                let last = i + 1 == self.methods.len();
                let ws = self
                    .ws
                    .as_ref()
                    .is_some_and(|k| k.kind(u32::try_from(i).unwrap_or(u32::MAX)).is_some());
                if ws {
                    return false;
                }
                match set {
                    MethodSet::Any => true,
                    MethodSet::Only(_) if last => false,
                    MethodSet::Only(_) => self.methods.get(i).is_some_and(|m| set.contains(m)),
                }
            })
            .filter_map(|i| u32::try_from(i).ok())
            .collect()
    }

    /// `budget`: product states the witness search of each string signature
    /// may enter ([`crate::strings::search::BUDGET`]).
    pub(crate) fn build(
        bundles: &[&Bundle],
        extra: &Extra,
        budget: usize,
        timings: &Timings,
    ) -> Result<Domain, ProverError> {
        let encoded_slash = bundles
            .iter()
            .any(|b| b.enforcement.l7.iter().any(|e| e.encoded_slash));
        let mut bins = PatternSet::default();
        let mut hosts = PatternSet::default();
        let mut paths = PatternSet::default();
        let mut methods: BTreeSet<String> =
            STANDARD_METHODS.iter().map(|m| (*m).to_owned()).collect();
        methods.extend(extra.methods.iter().map(|m| m.to_ascii_uppercase()));
        let mut shas: BTreeSet<String> = BTreeSet::new();
        let mut queries: BTreeSet<QueryMatcher> = BTreeSet::new();
        let mut ports: Vec<&PortSet> = extra.ports.iter().collect();
        let mut addrs: Vec<AddrSet> = extra.addrs.clone();
        addrs.push(internal_ranges());
        addrs.push(metadata_ranges());
        for h in METADATA_HOSTS {
            if let Ok(p) = HostPattern::parse(h) {
                add_host(&mut hosts, &p);
            }
        }
        for b in &extra.binaries {
            add_binary(&mut bins, b);
        }
        for h in &extra.hosts {
            add_host(&mut hosts, h);
        }
        for p in &extra.paths {
            add_path(&mut paths, p);
        }
        if encoded_slash {
            paths.add(
                ENCODED_SLASH_KEY,
                PatternKind::Glob {
                    regex: "(?s:.*)%2F(?s:.*)".to_owned(),
                    example: "/x%2Fx".to_owned(),
                },
            );
        }
        let mut add_methods = |set: &MethodSet| {
            if let MethodSet::Only(ms) = set {
                methods.extend(ms.iter().map(ToString::to_string));
            }
        };
        for b in bundles {
            let t = &b.enforcement;
            for id in &t.seccomp.identities {
                add_binary(&mut bins, &id.binary.glob);
                if let Some(pin) = &id.binary.sha256 {
                    shas.insert(pin.to_ascii_lowercase());
                }
            }
            for r in &t.seccomp.routes {
                ports.push(&r.ports);
                match &r.dest {
                    Dest::Host(h) => add_host(&mut hosts, h),
                    Dest::Addrs(a) => addrs.push(a.clone()),
                }
                if let Some(a) = &r.addresses {
                    addrs.push(a.clone());
                }
            }
            for (p, fold) in request_paths(t) {
                if fold {
                    add_folded_path(&mut paths, p);
                } else {
                    add_path(&mut paths, p);
                }
            }
            // The other spellings of a body-judging endpoint's path, which
            // the evaluator refuses (`path_alias`): the folded paths of its
            // glob that the glob itself does not match.
            for p in t.l7.iter().filter_map(alias_glob) {
                add_folded_path(&mut paths, p);
            }
            for m in t.l7.iter().flat_map(|e| e.allow().iter().chain(e.deny())) {
                add_methods(&m.methods);
                queries.extend(m.query.iter().cloned());
            }
            for c in &t.credentials {
                for h in &c.hosts {
                    add_host(&mut hosts, h);
                }
                if let Some(ms) = &c.methods {
                    add_methods(ms);
                }
            }
            for s in &t.secrets {
                for h in &s.hosts {
                    add_host(&mut hosts, h);
                }
            }
        }
        addrs.sort();
        addrs.dedup();
        let (addr_classes, addr_sigs) = addr_classes(&addrs);
        let mut method_list: Vec<String> = methods.into_iter().collect();
        let mut other = String::from("X-OTHER");
        while method_list.contains(&other) {
            other.push('X');
        }
        let sizes = crate::websocket::sizes(bundles);
        let ws = (!sizes.is_empty()).then(|| {
            let first = u32::try_from(method_list.len()).unwrap_or(u32::MAX);
            method_list.extend(crate::websocket::Kinds::names(&sizes));
            crate::websocket::Kinds::numbered(first, &sizes)
        });
        method_list.push(other);
        let path_valid: fn(&str) -> bool = if encoded_slash {
            |s| universe::is_canonical_path(s, true)
        } else {
            |s| universe::is_canonical_path(s, false)
        };
        let t = std::time::Instant::now();
        let bins_part = Partition::build(
            bins,
            &DimSpec {
                universe: universe::binaries(),
                valid: universe::is_resolved_binary,
                rule: Rule::Binary,
                budget,
            },
        )?;
        let t_bins = t.elapsed();
        let hosts_part = Partition::build(
            hosts,
            &DimSpec {
                universe: universe::hosts(),
                valid: universe::is_normal_host,
                rule: Rule::Any,
                budget,
            },
        )?;
        let t_hosts = t.elapsed();
        let paths_part = Partition::build(
            paths,
            &DimSpec {
                universe: universe::http_paths(),
                valid: path_valid,
                rule: Rule::HttpPath { encoded_slash },
                budget,
            },
        )?;
        let t_paths = t.elapsed();
        let calls = Calls::build(bundles, budget)?;
        for part in [&bins_part, &hosts_part, &paths_part] {
            timings.note(|| part.phases.clone());
        }
        timings.note(|| {
            format!(
                "partitions: binaries {t_bins:?}, hosts {:?}, paths {:?}, calls {:?}",
                t_hosts - t_bins,
                t_paths - t_hosts,
                t.elapsed() - t_paths
            )
        });
        Ok(Domain {
            bins: bins_part,
            hosts: hosts_part,
            paths: paths_part,
            methods: method_list,
            shas: std::iter::once(None)
                .chain(shas.into_iter().map(Some))
                .collect(),
            query_values: query_values(&queries)?,
            queries: queries.into_iter().collect(),
            port_classes: port_classes(&ports),
            addr_classes,
            addr_sets: addrs,
            addr_sigs,
            encoded_slash,
            calls,
            ws,
        })
    }
}

/// The value signatures of each query key: a DFA over the key's value
/// patterns (values are decoded strings without NUL), explored like a
/// string dimension.
fn query_values(queries: &BTreeSet<QueryMatcher>) -> Result<QueryValues, ProverError> {
    let mut out = std::collections::BTreeMap::new();
    let list: Vec<&QueryMatcher> = queries.iter().collect();
    let mut keys: Vec<&str> = list.iter().map(|q| q.key.as_str()).collect();
    keys.dedup();
    for key in keys {
        // As in a string dimension (`PatternSet::needs_chars`): unless a
        // pattern matches single characters or names non-ASCII ones, a byte
        // automaton reads valid UTF-8 values exactly as a character one
        // does, with a fraction of the states, and its samples are ASCII.
        let chars = list.iter().filter(|q| q.key == key).any(|q| {
            q.any
                .iter()
                .any(|alt| alt.as_str().contains(['?', '[']) || !alt.as_str().is_ascii())
        });
        // DFA patterns: 0 is the universe, then (condition, alternative).
        let mut regexes = vec!["(?s:[^\\x00])*".to_owned()];
        let mut owner: Vec<usize> = Vec::new();
        for (i, q) in list.iter().enumerate().filter(|(_, q)| q.key == key) {
            for alt in &q.any {
                regexes.push(crate::strings::fit_regex(&alt.to_regex(), chars));
                owner.push(i);
            }
        }
        let dfa = crate::strings::dfa::MultiDfa::build(&regexes, chars)?;
        let explored = dfa.explore(&|sig: &[u32]| sig.first() == Some(&0));
        let mut sigs: Vec<(Vec<usize>, String)> = Vec::new();
        for (sig, info) in explored {
            let mut conds: Vec<usize> = sig
                .iter()
                .filter_map(|&p| usize::try_from(p).ok()?.checked_sub(1))
                .filter_map(|p| owner.get(p).copied())
                .collect();
            conds.sort_unstable();
            conds.dedup();
            let Some(sample) = info.samples.first() else {
                continue;
            };
            if !sigs.iter().any(|(c, _)| *c == conds) {
                sigs.push((conds, sample.clone()));
            }
        }
        out.insert(key.to_owned(), sigs);
    }
    Ok(out)
}

pub(crate) fn binary_key(g: &BinaryGlob) -> String {
    g.as_str().to_owned()
}

pub(crate) fn host_key(h: &HostPattern) -> String {
    h.as_str().to_owned()
}

pub(crate) fn path_key(p: &HttpPathGlob) -> String {
    p.as_str().to_owned()
}

/// The key of a path glob as one endpoint reads it: folded on an endpoint
/// that folds paths, another pattern than the same glob elsewhere.
pub(crate) fn endpoint_path_key(ep: &L7Endpoint, p: &HttpPathGlob) -> String {
    if ep.fold_paths {
        format!("fold:{}", p.as_str())
    } else {
        path_key(p)
    }
}

fn add_binary(set: &mut PatternSet, g: &BinaryGlob) {
    // `?` and classes match one character, and the matcher writes a
    // non-ASCII literal as a code point escape: both need a UTF-8 automaton.
    if g.as_str().contains(['?', '[']) || !g.as_str().is_ascii() {
        set.needs_chars();
    }
    let kind = match g.exact() {
        Some(e) => PatternKind::Exact(e.to_owned()),
        None => PatternKind::Glob {
            regex: g.to_regex(),
            example: g.example(),
        },
    };
    set.add(&binary_key(g), kind);
}

fn add_host(set: &mut PatternSet, h: &HostPattern) {
    let kind = match h.exact() {
        Some(e) => PatternKind::Exact(e.to_owned()),
        None => PatternKind::Glob {
            regex: h.to_regex(),
            example: h.example(),
        },
    };
    set.add(&host_key(h), kind);
}

/// Every request-path glob of a bundle: each endpoint's path and its
/// rules' paths, then the credentials' paths; with whether it is read
/// folded (its endpoint folds paths).
fn request_paths(t: &Tables) -> impl Iterator<Item = (&HttpPathGlob, bool)> {
    let endpoints = t.l7.iter().flat_map(|e| {
        e.path
            .iter()
            .chain(e.allow().iter().chain(e.deny()).map(|m| &m.path))
            .map(|p| (p, e.fold_paths))
    });
    endpoints.chain(
        t.credentials
            .iter()
            .flat_map(|c| c.paths.iter().flatten())
            .map(|p| (p, false)),
    )
}

/// The path glob whose other spellings (ASCII case, a trailing slash) the
/// evaluator refuses on this endpoint (`L7Endpoint::is_aliased_by`): a
/// body-judging endpoint's `path`, unless it folds paths.
pub(crate) fn alias_glob(ep: &L7Endpoint) -> Option<&HttpPathGlob> {
    ep.path
        .as_ref()
        .filter(|_| ep.reads_body() && !ep.fold_paths)
}

/// A path glob of an endpoint that folds paths: the paths whose fold the
/// folded glob matches, every spelling of them in case and a trailing
/// slash, so never one exact string.
fn add_folded_path(set: &mut PatternSet, p: &HttpPathGlob) {
    set.add(
        &format!("fold:{}", p.as_str()),
        PatternKind::Glob {
            regex: p.to_folded_regex(),
            example: p.folded_example(),
        },
    );
}

fn add_path(set: &mut PatternSet, p: &HttpPathGlob) {
    let kind = if p.is_exact() {
        PatternKind::Exact(p.literal_prefix())
    } else {
        PatternKind::Glob {
            regex: p.to_regex(),
            example: p.example(),
        }
    };
    set.add(&path_key(p), kind);
}

/// The glob for "this file or anything below this directory", for a
/// Landlock path.
pub(crate) fn tree_glob(path: &str) -> Option<BinaryGlob> {
    let mut text = String::new();
    for c in path.trim_end_matches('/').chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            text.push('\\');
        }
        text.push(c);
    }
    text.push_str("/**");
    BinaryGlob::parse(&text).ok()
}

/// Link-local and metadata addresses, with their NAT64 and 6to4 images:
/// what `metadata_reach` is about.
pub(crate) fn metadata_ranges() -> AddrSet {
    let v4: [(&str, u8); 2] = [("169.254.0.0", 16), ("100.100.100.200", 32)];
    let mut nets: Vec<IpNet> = Vec::new();
    for (a, len) in v4 {
        let Ok(ip) = a.parse::<std::net::Ipv4Addr>() else {
            continue;
        };
        nets.extend(IpNet::new(IpAddr::V4(ip), len).ok());
        let bits = u128::from(u32::from(ip));
        // NAT64 well-known prefix 64:ff9b::/96 and 6to4 2002::/16.
        let nat64 = (0x0064_ff9b_u128 << 96) | bits;
        let six_to_four = (0x2002_u128 << 112) | (bits << 80);
        nets.extend(IpNet::new(IpAddr::V6(nat64.into()), 96 + len).ok());
        nets.extend(IpNet::new(IpAddr::V6(six_to_four.into()), 16 + len).ok());
    }
    for (a, len) in [("fe80::", 10u8), ("fd00:ec2::254", 128)] {
        if let Ok(ip) = a.parse::<std::net::Ipv6Addr>() {
            nets.extend(IpNet::new(IpAddr::V6(ip), len).ok());
        }
    }
    AddrSet::from_nets(nets)
}

/// The IPv4 or IPv6 intervals of an address set.
pub(crate) fn intervals(set: &AddrSet, v6: bool) -> Vec<(u128, u128)> {
    set.nets()
        .iter()
        .filter_map(|n| match (n.trunc(), v6) {
            (IpNet::V4(n), false) => Some((
                u128::from(u32::from(n.network())),
                u128::from(u32::from(n.broadcast())),
            )),
            (IpNet::V6(n), true) => Some((u128::from(n.network()), u128::from(n.broadcast()))),
            _ => None,
        })
        .collect()
}

/// Elementary intervals: the coarsest split of the space on which every
/// given set is either full or empty.
fn cells(bounds: BTreeSet<u128>, max: u128, min: u128) -> Vec<(u128, u128)> {
    let mut starts: Vec<u128> = bounds
        .into_iter()
        .filter(|&b| b > min && b <= max)
        .collect();
    starts.insert(0, min);
    starts.dedup();
    let mut out = Vec::with_capacity(starts.len());
    for (i, &s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(max, |&n| n - 1);
        out.push((s, end));
    }
    out
}

/// Groups cells by the sets that hold them, keeping first-seen order;
/// each group with its membership signature.
fn classes<C: Copy>(cells: Vec<C>, member: impl Fn(C) -> Vec<bool>) -> Vec<(Vec<bool>, Vec<C>)> {
    let mut by_sig: Vec<(Vec<bool>, Vec<C>)> = Vec::new();
    for c in cells {
        let sig = member(c);
        match by_sig.iter_mut().find(|(s, _)| *s == sig) {
            Some((_, v)) => v.push(c),
            None => by_sig.push((sig, vec![c])),
        }
    }
    by_sig
}

fn port_classes(sets: &[&PortSet]) -> Vec<Vec<(u16, u16)>> {
    classes(port_cells(sets), |(lo, _)| {
        sets.iter().map(|s| s.contains(lo)).collect()
    })
    .into_iter()
    .map(|(_, v)| v)
    .collect()
}

/// Address classes (cells) and their signatures over the sets.
type AddrClasses = (Vec<Vec<AddrCell>>, Vec<Option<Vec<bool>>>);

fn addr_classes(sets: &[AddrSet]) -> AddrClasses {
    let v4 = addr_cells(sets, false)
        .into_iter()
        .filter_map(|(a, b)| Some(AddrCell::V4(u32::try_from(a).ok()?, u32::try_from(b).ok()?)));
    let v6 = addr_cells(sets, true)
        .into_iter()
        .map(|(a, b)| AddrCell::V6(a, b));
    let mut cells = vec![vec![AddrCell::None]];
    let mut sigs = vec![None];
    for (sig, group) in classes(v4.chain(v6).collect(), |c| {
        sets.iter()
            .map(|s| c.first_ip().is_some_and(|ip| s.contains(ip)))
            .collect()
    }) {
        cells.push(group);
        sigs.push(Some(sig));
    }
    (cells, sigs)
}

fn port_cells(sets: &[&PortSet]) -> Vec<(u16, u16)> {
    let mut bounds = BTreeSet::new();
    for s in sets {
        for &(lo, hi) in s.ranges() {
            bounds.insert(u128::from(lo));
            bounds.insert(u128::from(hi) + 1);
        }
    }
    cells(bounds, u128::from(u16::MAX), 1)
        .into_iter()
        .map(|(a, b)| {
            (
                u16::try_from(a).unwrap_or(u16::MAX),
                u16::try_from(b).unwrap_or(u16::MAX),
            )
        })
        .collect()
}

/// IPv4-mapped IPv6 addresses (`::ffff:0:0/96`) are IPv4 to every decision;
/// the IPv6 domain leaves them out.
pub const MAPPED_V6: (u128, u128) = (0xffff_0000_0000, 0xffff_ffff_ffff);

fn addr_cells(sets: &[AddrSet], v6: bool) -> Vec<(u128, u128)> {
    let mut bounds = BTreeSet::new();
    for s in sets {
        for (lo, hi) in intervals(s, v6) {
            bounds.insert(lo);
            bounds.insert(hi.saturating_add(1));
        }
    }
    let max = if v6 { u128::MAX } else { u128::from(u32::MAX) };
    if v6 {
        bounds.insert(MAPPED_V6.0);
        bounds.insert(MAPPED_V6.1 + 1);
    }
    cells(bounds, max, 0)
        .into_iter()
        .filter(|&(lo, hi)| !(v6 && lo >= MAPPED_V6.0 && hi <= MAPPED_V6.1))
        .collect()
}
