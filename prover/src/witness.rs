//! From atoms back to a concrete request: realistic values chosen inside a
//! region, a query string that realizes the query conditions' readings,
//! and what the reference evaluator observes about the request.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use policy_bundle::eval::{Decision, Evaluator, HttpRequest, Request, Verdict};
use policy_bundle::matcher::{is_metadata_host, normalize_host};

use crate::domain::{self, Domain};
use crate::formula::AddrCell;
use crate::formula::{Defs, F, Lit, Point, and, lit, not};
use crate::region::Region;
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::websocket::{Kind, Probe};

/// Query conditions by key.
fn groups(dom: &Domain) -> BTreeMap<&str, Vec<usize>> {
    let mut out: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, q) in dom.queries.iter().enumerate() {
        out.entry(q.key.as_str()).or_default().push(i);
    }
    out
}

/// Parameters for one key that give each of its conditions the wanted
/// reading, found by a small search over example values.
fn realize_key(dom: &Domain, key: &str, qs: &[usize], p: &Point) -> Option<Vec<(String, String)>> {
    let want: Vec<(usize, bool, bool)> = qs
        .iter()
        .map(|&q| {
            (
                q,
                p.qa.get(q).copied().unwrap_or(false),
                p.qd.get(q).copied().unwrap_or(false),
            )
        })
        .collect();
    if want.iter().all(|&(_, a, d)| !a && !d) {
        return Some(Vec::new());
    }
    let mut candidates: Vec<String> = qs
        .iter()
        .filter_map(|&q| dom.queries.get(q))
        .flat_map(|m| m.any.iter().flat_map(|g| g.examples()))
        .collect();
    candidates.extend(["zz-other".to_owned(), String::new(), "0".to_owned()]);
    candidates.sort();
    candidates.dedup();
    let ok = |vals: &[&String]| {
        let params: Vec<(String, String)> = vals
            .iter()
            .map(|v| (key.to_owned(), (*v).clone()))
            .collect();
        let fits = want.iter().all(|&(q, a, d)| {
            dom.queries
                .get(q)
                .is_some_and(|m| m.allows(&params) == a && m.denies(&params) == d)
        });
        fits.then_some(params)
    };
    let n = candidates.len();
    for i in 0..n {
        let a = candidates.get(i)?;
        if let Some(p) = ok(&[a]) {
            return Some(p);
        }
    }
    for i in 0..n {
        for j in i..n {
            let (a, b) = (candidates.get(i)?, candidates.get(j)?);
            if let Some(p) = ok(&[a, b]) {
                return Some(p);
            }
        }
    }
    // Beyond the quick tries, decide exactly. A set of values gives
    // condition i "every value matches" iff i is in every value's
    // signature, and "some value matches" iff i is in some value's: the
    // readings (A, D) are possible iff the signatures S with A ⊆ S ⊆ D,
    // all used together, meet in A and join to D.
    let all_want: Vec<(usize, bool, bool)> = want.clone();
    let sigs = dom.query_values.get(key)?;
    let fits: Vec<&(Vec<usize>, String)> = sigs
        .iter()
        .filter(|(sig, _)| {
            all_want.iter().all(|&(q, a, d)| {
                let has = sig.contains(&q);
                (!a || has) && (d || !has)
            })
        })
        .collect();
    let meets = all_want
        .iter()
        .all(|&(q, a, _)| a || fits.iter().any(|(sig, _)| !sig.contains(&q)));
    let joins = all_want
        .iter()
        .all(|&(q, _, d)| !d || fits.iter().any(|(sig, _)| sig.contains(&q)));
    if fits.is_empty() || !meets || !joins {
        return None;
    }
    let values: Vec<&String> = fits.iter().map(|(_, v)| v).collect();
    Some(
        values
            .iter()
            .map(|v| (key.to_owned(), (*v).clone()))
            .collect(),
    )
}

/// A query string giving every condition the point's reading.
pub(crate) fn query_params(dom: &Domain, p: &Point) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (key, qs) in groups(dom) {
        out.extend(realize_key(dom, key, &qs, p)?);
    }
    Some(out)
}

/// When no query string gives the point's readings, a formula excluding
/// that combination for the key that fails. `realize_key` decides this
/// exactly (from the value signatures of the key), so a blocked
/// combination is one no query string has, never one an example search
/// missed.
pub(crate) fn unrealizable(dom: &Domain, p: &Point) -> Option<F> {
    for (key, qs) in groups(dom) {
        if realize_key(dom, key, &qs, p).is_none() {
            let same = qs.iter().map(|&q| {
                let q32 = u32::try_from(q).unwrap_or(u32::MAX);
                let la = lit(Lit::QAllow(q32));
                let ld = lit(Lit::QDeny(q32));
                let a = p.qa.get(q).copied().unwrap_or(false);
                let d = p.qd.get(q).copied().unwrap_or(false);
                and([if a { la } else { not(la) }, if d { ld } else { not(ld) }])
            });
            return Some(not(and(same.collect::<Vec<_>>())));
        }
    }
    None
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        let c = char::from(b);
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '*' | '/') {
            out.push(c);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn query_string(params: &[(String, String)]) -> Option<String> {
    if params.is_empty() {
        return None;
    }
    Some(
        params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&"),
    )
}

/// The concrete request a point stands for.
pub(crate) fn request(dom: &Domain, p: &Point) -> Request {
    let text = |part: &crate::strings::Partition, id: u32| {
        part.atom(id)
            .and_then(|a| a.witness.clone())
            .unwrap_or_default()
    };
    let mut target = text(&dom.paths, p.path);
    let mut query: Vec<String> = query_params(dom, p)
        .as_deref()
        .and_then(query_string)
        .into_iter()
        .collect();
    if graphql_get(dom, p) {
        query.extend(dom.calls.graphql_query_string(p.call));
    }
    if !query.is_empty() {
        target.push('?');
        target.push_str(&query.join("&"));
    }
    Request {
        binary: text(&dom.bins, p.bin),
        sha256: dom.shas.get(p.sha as usize).cloned().flatten(),
        host: (p.host != dom.host_none()).then(|| text(&dom.hosts, p.host)),
        addr: p.has_addr.then(|| {
            if p.v6 {
                IpAddr::V6(Ipv6Addr::from(p.a6))
            } else {
                IpAddr::V4(Ipv4Addr::from(p.a4))
            }
        }),
        port: p.port,
        http: Some(HttpRequest {
            method: if probe(dom, p).is_some() {
                "GET".to_owned()
            } else {
                dom.methods
                    .get(p.method as usize)
                    .cloned()
                    .unwrap_or_default()
            },
            target,
        }),
    }
}

/// The body of the request a point stands for (`None`: no body).
pub(crate) fn body(dom: &Domain, p: &Point) -> Option<Vec<u8>> {
    if graphql_get(dom, p) || probe(dom, p).is_some() {
        return None;
    }
    dom.calls.body(p.call)
}

/// The WebSocket upgrade or message a point stands for (`request` is then
/// the upgrade); `None` for a plain HTTP request.
pub(crate) fn probe(dom: &Domain, p: &Point) -> Option<Probe> {
    let kinds = dom.ws.as_ref()?;
    Some(match kinds.kind(p.method)? {
        Kind::Upgrade => Probe::Upgrade,
        Kind::Text(size) => {
            Probe::Text(crate::websocket::text(&dom.calls, kinds, size, p.call).unwrap_or_default())
        }
        Kind::Binary(size) => Probe::Binary(size),
    })
}

/// Why a point's WebSocket text message cannot be written within its
/// size class, if it cannot.
fn unshowable_text(dom: &Domain, p: &Point) -> Option<String> {
    let kinds = dom.ws.as_ref()?;
    match kinds.kind(p.method)? {
        Kind::Text(size) => crate::websocket::text(&dom.calls, kinds, size, p.call).err(),
        _ => None,
    }
}

/// The evaluator's decision on a request with this body, or on the
/// upgrade or message `probe` says.
pub(crate) fn decide(
    ev: &Evaluator,
    req: &Request,
    body: Option<&[u8]>,
    probe: Option<&Probe>,
) -> Decision {
    match probe {
        Some(pr) if req.http.is_some() => pr.decide(ev, req),
        _ => ev.eval_with_body(req, body),
    }
}

/// A GraphQL `GET`: the operation travels in the query string.
fn graphql_get(dom: &Domain, p: &Point) -> bool {
    dom.calls.is_graphql(p.call)
        && dom
            .methods
            .get(p.method as usize)
            .is_some_and(|m| m == "GET")
}

/// Why a point cannot be shown as a concrete request: one of its string
/// atoms has no witness (see `strings::search`), or its body cannot be
/// written within its size class. `None` when it can.
pub(crate) fn unshowable(dom: &Domain, p: &Point) -> Option<String> {
    let lacking = |part: &crate::strings::Partition, id: u32, what: &str| {
        let a = part.atom(id)?;
        if a.is_witnessed() {
            return None;
        }
        let pats: Vec<&str> = a.sig.iter().map(|&k| part.name(k)).collect();
        Some(format!(
            "no concrete {what} was found among the strings matching exactly {} ({})",
            if pats.is_empty() {
                "no pattern".to_owned()
            } else {
                pats.iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            a.unwitnessed.as_deref().unwrap_or("no reason recorded")
        ))
    };
    lacking(&dom.bins, p.bin, "executable path")
        .or_else(|| {
            (p.host != dom.host_none())
                .then(|| lacking(&dom.hosts, p.host, "host name"))
                .flatten()
        })
        .or_else(|| lacking(&dom.paths, p.path, "request path"))
        .or_else(|| unshowable_text(dom, p))
        .or_else(|| dom.calls.unshowable(p.call))
}

/// Whether every string dimension of a region has an atom with a witness
/// (a region not detailed is counted only then).
pub(crate) fn region_showable(dom: &Domain, r: &Region) -> bool {
    let any = |part: &crate::strings::Partition, set: &[u32], none: Option<u32>| {
        set.iter().any(|&a| {
            Some(a) == none || part.atom(a).is_some_and(crate::strings::Atom::is_witnessed)
        })
    };
    any(&dom.bins, &r.bins, None)
        && any(&dom.hosts, &r.hosts, Some(dom.host_none()))
        && any(&dom.paths, &r.paths, None)
        && r.calls.iter().any(|&c| dom.calls.unshowable(c).is_none())
}

/// A realistic point of the region where the query holds: a host name
/// without an address, an exact host or binary, `GET` or `POST`, port 443,
/// a short path, no query string, no pin, whenever the region allows.
/// Atoms with a witness come first; the result still lacks one (see
/// [`unshowable`]) only when the region offers no other.
pub(crate) fn choose(dom: &Domain, defs: &Defs, q: &F, r: &Region, x: &Point) -> Point {
    let fits = |p: &Point| {
        (p.has_addr || p.host != dom.host_none())
            && r.contains(p, dom)
            && p.eval(q, &defs.values(p))
            && query_params(dom, p).is_some()
    };
    let mut best = x.clone();
    if unshowable(dom, &best).is_some() {
        best = showable_start(dom, r, &best, &fits);
    }
    let showable = unshowable(dom, &best).is_none();
    let good = |p: &Point| fits(p) && (!showable || unshowable(dom, p).is_none());
    let try_each = |best: &mut Point, cands: Vec<Point>| {
        if let Some(c) = cands.into_iter().find(|c| good(c)) {
            *best = c;
        }
    };
    // No address when the host name suffices.
    let mut c = best.clone();
    AddrCell::None.apply(&mut c);
    try_each(&mut best, vec![c]);
    // Exact hosts, then other host atoms; when an address is needed
    // anyway, the address alone.
    let mut hosts = r.hosts.clone();
    let by_address = best.has_addr;
    hosts.sort_by_key(|&h| {
        let a = dom.hosts.atom(h);
        (
            (h == dom.host_none()) != by_address,
            !a.is_some_and(|a| a.exact),
            a.map_or(usize::MAX, |a| a.witness_len()),
        )
    });
    let c: Vec<Point> = hosts
        .iter()
        .map(|&h| Point {
            host: h,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    if best.has_addr {
        let nice = nice_addr(&r.addr_cells(dom), &best);
        try_each(&mut best, nice);
    }
    let mut bins = r.bins.clone();
    bins.sort_by_key(|&b| {
        let a = dom.bins.atom(b);
        (
            !a.is_some_and(|a| a.exact),
            a.map_or(usize::MAX, |a| a.witness_len()),
        )
    });
    let c: Vec<Point> = bins
        .iter()
        .map(|&b| Point {
            bin: b,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    let c = vec![Point {
        sha: 0,
        ..best.clone()
    }];
    try_each(&mut best, c);
    // A GraphQL operation goes in a POST body, as `eval --graphql` sends it.
    let order = if dom.calls.is_graphql(best.call) {
        ["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD"]
    } else {
        ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    };
    let mut methods: Vec<u32> = order.iter().map(|m| dom.method_index(m)).collect();
    methods.extend(r.methods.iter().copied());
    let c: Vec<Point> = methods
        .iter()
        .map(|&m| Point {
            method: m,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    let mut paths = r.paths.clone();
    paths.sort_by_key(|&p| dom.paths.atom(p).map_or(usize::MAX, |a| a.witness_len()));
    let c: Vec<Point> = paths
        .iter()
        .map(|&p| Point {
            path: p,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    // No body when none is needed (every REST request); else a plain
    // call, the shortest body first.
    let mut calls = r.calls.clone();
    calls.sort_by_key(|&c| call_rank(dom, c));
    let c: Vec<Point> = calls
        .iter()
        .map(|&call| Point {
            call,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    let ports: Vec<u16> = [443u16, 80, 8443, 8080]
        .into_iter()
        .chain(r.port_cells(dom).iter().map(|&(lo, _)| lo))
        .collect();
    let c: Vec<Point> = ports
        .iter()
        .map(|&port| Point {
            port,
            ..best.clone()
        })
        .collect();
    try_each(&mut best, c);
    let n = dom.queries.len();
    let quiet = Point {
        qa: vec![false; n],
        qd: vec![false; n],
        ..best.clone()
    };
    try_each(&mut best, vec![quiet]);
    best
}

/// Swaps each unwitnessed atom of `x` for a witnessed one of the region,
/// dimension by dimension, as long as the point stays one where the query
/// holds.
fn showable_start(dom: &Domain, r: &Region, x: &Point, fits: &dyn Fn(&Point) -> bool) -> Point {
    let mut best = x.clone();
    let witnessed = |part: &crate::strings::Partition, id: u32| {
        part.atom(id)
            .is_some_and(crate::strings::Atom::is_witnessed)
    };
    if !witnessed(&dom.bins, best.bin)
        && let Some(p) = r
            .bins
            .iter()
            .filter(|&&b| witnessed(&dom.bins, b))
            .map(|&b| Point {
                bin: b,
                ..best.clone()
            })
            .find(|p| fits(p))
    {
        best = p;
    }
    if best.host != dom.host_none()
        && !witnessed(&dom.hosts, best.host)
        && let Some(p) = r
            .hosts
            .iter()
            .filter(|&&h| h == dom.host_none() || witnessed(&dom.hosts, h))
            .map(|&h| Point {
                host: h,
                ..best.clone()
            })
            .find(|p| fits(p))
    {
        best = p;
    }
    if !witnessed(&dom.paths, best.path)
        && let Some(p) = r
            .paths
            .iter()
            .filter(|&&a| witnessed(&dom.paths, a))
            .map(|&a| Point {
                path: a,
                ..best.clone()
            })
            .find(|p| fits(p))
    {
        best = p;
    }
    // A WebSocket message too long for its size class: another class or
    // content of the region.
    if unshowable(dom, &best).is_some()
        && let Some(p) = r
            .methods
            .iter()
            .flat_map(|&method| r.calls.iter().map(move |&call| (method, call)))
            .map(|(method, call)| Point {
                method,
                call,
                ..best.clone()
            })
            .find(|p| unshowable(dom, p).is_none() && fits(p))
    {
        best = p;
    }
    best
}

/// Preference among body values for a witness: no body, then a request
/// naming a tool or a method, then the unusual shapes; smaller bodies
/// first.
fn call_rank(dom: &Domain, c: u32) -> (u8, usize, usize) {
    use crate::calls::Shape;
    let Some(v) = dom.calls.value(c) else {
        return (u8::MAX, 0, 0);
    };
    let kind = match v.shape {
        Shape::NoBody => 0,
        Shape::Tool(_) => 1,
        Shape::Call(_) => 2,
        Shape::McpRefused(_) => 3,
        Shape::Graphql(_) => 1,
        Shape::Persisted(_) => 2,
        Shape::Response => 4,
        Shape::Unreadable => 5,
        Shape::WsGraphql(_) => 1,
        Shape::WsPersisted(_) | Shape::WsLifecycle => 2,
        Shape::WsUnregistered => 3,
    };
    let len = dom.calls.message(c).ok().flatten().map_or(0, |m| m.len());
    (kind, v.size, len)
}

fn nice_addr(cells: &[AddrCell], p: &Point) -> Vec<Point> {
    let mut out = Vec::new();
    for c in cells {
        let mut q = p.clone();
        c.apply(&mut q);
        match *c {
            AddrCell::V4(lo, hi) => {
                for special in [0xa9fe_a9feu32] {
                    if lo <= special && special <= hi {
                        let mut s = q.clone();
                        s.a4 = special;
                        out.push(s);
                    }
                }
                if hi > lo && lo & 0xff == 0 {
                    q.a4 = lo + 1;
                }
            }
            AddrCell::V6(lo, hi) if hi > lo && lo & 0xffff == 0 => q.a6 = lo + 1,
            _ => {}
        }
        out.push(q);
    }
    out
}

/// What the reference evaluator (and the registry, and the Landlock rules)
/// say about one request in one bundle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Observed {
    pub(crate) conn: bool,
    pub(crate) inspected: bool,
    pub(crate) allow: bool,
    pub(crate) audit: bool,
    pub(crate) inject: bool,
    pub(crate) cred_host: bool,
    pub(crate) held: bool,
    pub(crate) bypass: bool,
    pub(crate) plantable: bool,
    pub(crate) meta: bool,
}

impl Observed {
    pub(crate) fn scope(&self) -> bool {
        self.cred_host || self.held
    }

    pub(crate) fn credentialed(&self) -> bool {
        self.inject || (self.allow && self.held)
    }
}

/// What the evaluator says of a request with this body (`None`: no body).
pub(crate) fn observe(
    ev: &Evaluator,
    req: &Request,
    body: Option<&[u8]>,
    probe: Option<&Probe>,
    registry: &Registry,
) -> Observed {
    let b = ev.bundle();
    let t = &b.enforcement;
    let sandbox = Sandbox::of(b);
    let conn = ev.decide_connection(
        &req.binary,
        req.sha256.as_deref(),
        req.host.as_deref(),
        req.addr,
        req.port,
    );
    let d = decide(ev, req, body, probe);
    let host = req.host.as_deref().and_then(|h| normalize_host(h).ok());
    let cred_host = host.as_deref().is_some_and(|h| {
        t.credentials
            .iter()
            .any(|c| c.hosts.iter().any(|p| p.matches(h)))
    });
    let readable: Vec<_> = t
        .secrets
        .iter()
        .filter(|s| sandbox.can_read(&s.source))
        .collect();
    let held = match host.as_deref() {
        Some(h) => readable
            .iter()
            .any(|s| s.hosts.iter().any(|p| p.matches(h))),
        None => !readable.is_empty(),
    };
    let allow = matches!(d.decision, Verdict::Allow | Verdict::Audit);
    let under = |trees: Vec<(String, policy_bundle::matcher::BinaryGlob)>| {
        trees.iter().any(|(_, g)| g.matches(&req.binary))
    };
    let plantable = req.sha256.is_none()
        && under(sandbox.write_trees())
        && (sandbox.best_effort || under(sandbox.exec_trees()));
    // With an address, the address is where the connection goes; a
    // metadata name matters when the connection is made by name.
    let meta = match req.addr {
        Some(a) => domain::metadata_ranges().contains(a),
        None => host.as_deref().is_some_and(is_metadata_host),
    };
    Observed {
        conn: conn.allowed(),
        inspected: !conn.l7.is_empty(),
        allow,
        audit: d.decision == Verdict::Audit,
        // A message rides on the connection its upgrade credentialed.
        inject: match probe {
            Some(pr) if pr.is_message() && req.http.is_some() => {
                allow && ev.eval_websocket(req, None).credential.is_some()
            }
            _ => d.credential.is_some(),
        },
        cred_host,
        held,
        bypass: conn.allowed() && (conn.l7.is_empty() || registry.facts(&req.binary).bypasses_l7()),
        plantable,
        meta,
    }
}
