//! A diff proved over what its changed rules can reach, so that a
//! one-line change to a policy of thousands of endpoints costs about what
//! the line costs (`docs/prover.md`, "Slicing a diff").
//!
//! A request's fate in a bundle follows from the *grants* that match it:
//! the pairs of a binary identity (glob and pin) and a route (destination,
//! ports, allowed addresses, how it is carried, and the inspected
//! endpoint's rules by content), together with the credentials, secrets
//! and Landlock tables. When those tables are the same in OLD and NEW, a
//! request that no changed grant (one in a single bundle) could match
//! meets the same grants in both, so every question, being false when
//! the two sides agree, is false there. Both models are therefore built
//! from the changed grants and the unchanged ones that may meet them;
//! the domain is still built from the whole bundles, so atoms, witnesses
//! and region descriptions are the ones the whole proof would give.

use std::collections::{BTreeMap, BTreeSet};

use policy_bundle::matcher::{AddrSet, BinaryGlob, HostPattern, PortSet};
use policy_bundle::{
    BinaryRef, Bundle, Dest, Identity, L7Endpoint, Route, SeccompTable, Tables, Via,
};

use crate::sandbox::Sandbox;

/// How a route's connection is carried; an inspected endpoint by its
/// rules (their equality ignores origins), not by its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Carrier<'a> {
    L4,
    Tcp,
    Uninspected,
    L7(Option<&'a L7Endpoint>),
}

/// A route by what it enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RouteKey<'a> {
    dest: &'a Dest,
    ports: &'a PortSet,
    addresses: &'a Option<AddrSet>,
    carrier: Carrier<'a>,
    uninspected_credentials: bool,
    /// Whether the proxy replaces credential placeholders in text messages
    /// and request bodies on it: turning either on sends secrets where
    /// the same grant refused them, so it is a change of the grant.
    websocket_credential_rewrite: bool,
    request_body_credential_rewrite: bool,
    /// Closed by a credential bound to its host (`Route::credential_guard`):
    /// a credential change can close or open a route whose rule did not
    /// change, for every host it reaches.
    guarded: bool,
}

impl RouteKey<'_> {
    /// Whether some request could match both routes' destination and
    /// port. It may answer yes where none does (that only keeps more); it
    /// never answers no where one does, which is what soundness rests on.
    fn may_meet(&self, other: &RouteKey<'_>) -> bool {
        !self.ports.intersection(other.ports).is_empty()
            && match (self.dest, other.dest) {
                (Dest::Host(a), Dest::Host(b)) => a.may_overlap(b),
                (Dest::Addrs(a), Dest::Addrs(b)) => !a.intersection(b).nets().is_empty(),
                // A request may name a host and carry an address: a host
                // route and an address route can both match it.
                _ => true,
            }
    }
}

/// Two executable patterns that may match one path: exact paths compare
/// as strings; every path a glob matches starts with its literal
/// directory, so two globs whose directories are not prefixes of one
/// another match nothing in common.
fn binaries_may_meet(a: &BinaryGlob, b: &BinaryGlob) -> bool {
    match (a.exact(), b.exact()) {
        (Some(x), Some(y)) => x == y,
        (Some(x), None) => b.matches(x),
        (None, Some(y)) => a.matches(y),
        (None, None) => {
            let (x, y) = (a.literal_prefix(), b.literal_prefix());
            x.starts_with(y) || y.starts_with(x)
        }
    }
}

fn carrier<'a>(b: &'a Bundle, via: Via) -> Carrier<'a> {
    match via {
        Via::L4 => Carrier::L4,
        Via::Tcp => Carrier::Tcp,
        Via::Uninspected => Carrier::Uninspected,
        Via::L7(e) => Carrier::L7(b.enforcement.l7.get(e as usize)),
    }
}

/// Numbers values by content across both bundles, so that a grant is a
/// pair of numbers and the two bundles' grants compare without comparing
/// endpoints again.
struct Numbering<K> {
    ids: BTreeMap<K, u32>,
    values: Vec<K>,
}

impl<K: Ord + Copy> Numbering<K> {
    fn new() -> Self {
        Numbering {
            ids: BTreeMap::new(),
            values: Vec::new(),
        }
    }

    fn id(&mut self, k: K) -> u32 {
        let next = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        let id = *self.ids.entry(k).or_insert(next);
        if id == next {
            self.values.push(k);
        }
        id
    }
}

/// One binary identity given one route, both by number; with the
/// identity and route indices in its bundle.
#[derive(Debug, Clone, Copy)]
struct Grant {
    binary: u32,
    route: u32,
    identity: usize,
    index: u32,
}

/// Every grant of a bundle.
fn grants<'a>(
    b: &'a Bundle,
    binaries: &mut Numbering<&'a BinaryRef>,
    routes: &mut Numbering<RouteKey<'a>>,
    guards: bool,
) -> Vec<Grant> {
    let credentials = &b.enforcement.credentials;
    let seccomp = &b.enforcement.seccomp;
    // Routes are shared by identities: each is numbered once.
    let route_ids: Vec<u32> = seccomp
        .routes
        .iter()
        .map(|r| {
            routes.id(RouteKey {
                dest: &r.dest,
                ports: &r.ports,
                addresses: &r.addresses,
                carrier: carrier(b, r.via),
                uninspected_credentials: r.uninspected_credentials,
                websocket_credential_rewrite: r.websocket_credential_rewrite,
                request_body_credential_rewrite: r.request_body_credential_rewrite,
                guarded: guards && r.credential_guard(credentials).is_some(),
            })
        })
        .collect();
    let mut out = Vec::new();
    for (identity, id) in seccomp.identities.iter().enumerate() {
        let binary = binaries.id(&id.binary);
        for &index in &id.routes {
            if let Some(&route) = route_ids.get(index as usize) {
                out.push(Grant {
                    binary,
                    route,
                    identity,
                    index,
                });
            }
        }
    }
    out
}

/// The two bundles cut down to what the change can reach; the models are
/// built from these, everything else from the whole bundles.
#[derive(Debug)]
pub(crate) struct Sliced {
    pub(crate) old: Bundle,
    pub(crate) new: Bundle,
    /// Grants and credentials in one bundle only.
    pub(crate) changed: usize,
    /// Grants kept, over both bundles, of `total`.
    pub(crate) kept: usize,
    pub(crate) total: usize,
}

/// Slices a diff, or `None` when the change reaches beyond the grants
/// and credentials: other secrets or Landlock paths or mode change what
/// a request meets everywhere (the credentialed scope of an address, the
/// plantable binaries). A secret the workload can read makes
/// `secret_exposure` ask whether a binary can send anywhere at all,
/// which a slice cannot answer.
pub(crate) fn slice(old: &Bundle, new: &Bundle) -> Option<Sliced> {
    let (o, n) = (&old.enforcement, &new.enforcement);
    // The model reads Landlock's paths and mode (`Sandbox`); its TCP
    // ports, scopes and ABI are compared as tables (`weakened`).
    let (ol, nl) = (&o.landlock, &n.landlock);
    if o.secrets != n.secrets || ol.paths != nl.paths || ol.mode != nl.mode {
        return None;
    }
    let sandbox = Sandbox::of(new);
    if n.secrets.iter().any(|s| sandbox.can_read(&s.source)) {
        return None;
    }
    // A credential in one bundle only (another host, method, path, secret
    // or injection) decides differently only requests to its hosts, and
    // routes it closes: those are compared as part of each route.
    let (oc, nc): (BTreeSet<_>, BTreeSet<_>) = (
        o.credentials.iter().collect(),
        n.credentials.iter().collect(),
    );
    let cred_hosts: Vec<&HostPattern> = oc
        .symmetric_difference(&nc)
        .flat_map(|c| c.hosts.iter())
        .collect();
    let guards = o.credentials != n.credentials;
    let mut binaries = Numbering::new();
    let mut routes = Numbering::new();
    let og = grants(old, &mut binaries, &mut routes, guards);
    let ng = grants(new, &mut binaries, &mut routes, guards);
    let pairs =
        |gs: &[Grant]| -> BTreeSet<(u32, u32)> { gs.iter().map(|g| (g.binary, g.route)).collect() };
    let (oset, nset) = (pairs(&og), pairs(&ng));
    let changed: Vec<(u32, u32)> = oset.symmetric_difference(&nset).copied().collect();
    // Which binaries and which routes may meet each changed grant's, so
    // that a grant is kept by two lookups per changed grant. Decided by
    // content, so OLD and NEW keep the same unchanged grants.
    let meets = |n: usize, f: &dyn Fn(usize, usize) -> bool| -> Vec<Vec<bool>> {
        changed
            .iter()
            .enumerate()
            .map(|(c, _)| (0..n).map(|i| f(c, i)).collect())
            .collect()
    };
    let bin_of = |i: u32| binaries.values.get(i as usize);
    let route_of = |i: u32| routes.values.get(i as usize);
    let bins_meet = meets(binaries.values.len(), &|c, i| {
        let a = changed.get(c).and_then(|&(b, _)| bin_of(b));
        let b = u32::try_from(i).ok().and_then(bin_of);
        a.zip(b)
            .is_none_or(|(a, b)| binaries_may_meet(&a.glob, &b.glob))
    });
    let routes_meet = meets(routes.values.len(), &|c, i| {
        let a = changed.get(c).and_then(|&(_, r)| route_of(r));
        let b = u32::try_from(i).ok().and_then(route_of);
        a.zip(b).is_none_or(|(a, b)| a.may_meet(b))
    });
    // Requests to a changed credential's hosts, from any binary on any
    // port: the routes that may reach them.
    let to_cred_hosts: Vec<bool> = routes
        .values
        .iter()
        .map(|r| match r.dest {
            Dest::Host(h) => cred_hosts.iter().any(|c| c.may_overlap(h)),
            // A request may name a host and carry an address.
            Dest::Addrs(_) => !cred_hosts.is_empty(),
        })
        .collect();
    let keep = |g: &Grant| {
        to_cred_hosts.get(g.route as usize).copied().unwrap_or(true)
            || bins_meet.iter().zip(&routes_meet).any(|(bm, rm)| {
                bm.get(g.binary as usize).copied().unwrap_or(true)
                    && rm.get(g.route as usize).copied().unwrap_or(true)
            })
    };
    let keep_old: Vec<bool> = og.iter().map(keep).collect();
    let keep_new: Vec<bool> = ng.iter().map(keep).collect();
    let kept = keep_old.iter().chain(&keep_new).filter(|k| **k).count();
    Some(Sliced {
        old: restrict(old, &og, &keep_old),
        new: restrict(new, &ng, &keep_new),
        changed: changed.len() + oc.symmetric_difference(&nc).count(),
        kept,
        total: og.len() + ng.len(),
    })
}

/// The bundle with only the kept grants: their identities, routes and
/// endpoints, renumbered. Provenance is left out: blame and replay read
/// the whole bundle.
fn restrict(b: &Bundle, grants: &[Grant], keep: &[bool]) -> Bundle {
    let t = &b.enforcement;
    let mut routes: Vec<Route> = Vec::new();
    let mut l7: Vec<L7Endpoint> = Vec::new();
    let mut route_at = BTreeMap::<u32, u32>::new();
    let mut l7_at = BTreeMap::<u32, u32>::new();
    let mut ids: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (g, _) in grants.iter().zip(keep).filter(|(_, k)| **k) {
        let (i, r) = (&g.identity, &g.index);
        let Some(route) = t.seccomp.routes.get(*r as usize) else {
            continue;
        };
        let at = match route_at.get(r) {
            Some(at) => *at,
            None => {
                let mut route = route.clone();
                if let Via::L7(e) = route.via {
                    // An index to no endpoint stays one: it reaches nothing.
                    let at = match (l7_at.get(&e), t.l7.get(e as usize)) {
                        (Some(at), _) => *at,
                        (None, Some(ep)) => {
                            let at = u32::try_from(l7.len()).unwrap_or(u32::MAX);
                            l7.push(ep.clone());
                            l7_at.insert(e, at);
                            at
                        }
                        (None, None) => u32::MAX,
                    };
                    route.via = Via::L7(at);
                }
                let at = u32::try_from(routes.len()).unwrap_or(u32::MAX);
                routes.push(route);
                route_at.insert(*r, at);
                at
            }
        };
        ids.entry(*i).or_default().push(at);
    }
    let identities = ids
        .into_iter()
        .filter_map(|(i, mut rs)| {
            let id = t.seccomp.identities.get(i)?;
            rs.sort_unstable();
            rs.dedup();
            Some(Identity {
                binary: id.binary.clone(),
                routes: rs,
                dns: Vec::new(),
            })
        })
        .collect();
    Bundle {
        format_version: b.format_version,
        digest: b.digest.clone(),
        enforcement: Tables {
            landlock: t.landlock.clone(),
            process: t.process.clone(),
            seccomp: SeccompTable {
                deny: t.seccomp.deny.clone(),
                notify: t.seccomp.notify.clone(),
                identities,
                routes,
            },
            l7,
            credentials: t.credentials.clone(),
            secrets: t.secrets.clone(),
            advisor: t.advisor.clone(),
        },
        provenance: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::binaries_may_meet;
    use policy_bundle::matcher::BinaryGlob;

    /// Whenever some path matches two patterns, they may meet: the test
    /// never answers no where a request could match both grants.
    #[test]
    fn binaries_that_share_a_path_may_meet() {
        let globs = [
            "/usr/bin/git",
            "/usr/bin/g*",
            "/usr/bin/*",
            "/usr/bin/**",
            "/usr/**",
            "/**",
            "/usr/local/bin/git",
            "/usr/local/**",
            "/usr/bin/?it",
            "/usr/bin2/*",
            "/usr/b*/git",
            "/opt/*/bin/tool",
        ];
        let paths = [
            "/usr/bin/git",
            "/usr/bin/gh",
            "/usr/bin/x",
            "/usr/bin/a/b",
            "/usr/local/bin/git",
            "/usr/bin2/git",
            "/usr/bin",
            "/opt/x/bin/tool",
            "/usr/bx/git",
        ];
        let globs: Vec<BinaryGlob> = globs
            .iter()
            .map(|g| BinaryGlob::parse(g).unwrap())
            .collect();
        for a in &globs {
            for b in &globs {
                let shared = paths.iter().find(|p| a.matches(p) && b.matches(p));
                if let Some(p) = shared {
                    assert!(
                        binaries_may_meet(a, b),
                        "`{}` and `{}` both match `{p}`",
                        a.as_str(),
                        b.as_str()
                    );
                }
            }
        }
        let (git, local) = (&globs[0], &globs[7]);
        assert!(!binaries_may_meet(git, local));
    }
}
