//! Warnings about policies that parse and resolve but probably do not mean
//! what their author thinks: credentials reachable without inspection,
//! audit mode where a credential flows, rules another rule makes pointless.
//! The prover answers these questions exactly; these checks are the quick,
//! conservative versions that never warn about something that is fine.

mod planted;

use std::collections::HashMap;

use crate::ast::Document;
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::ir::{BinaryRef, Dest, Endpoint, EndpointKind, Enforcement, L7Protocol, TlsMode};
use crate::resolve::Resolved;

/// W0131 on the policy's header: without a user the workload keeps the
/// supervisor's, which is root wherever the supervisor runs as root.
pub(crate) fn no_run_as_user(main: &Document, r: &Resolved) -> Option<Diagnostic> {
    if r.policy.run_as.as_ref().is_some_and(|ra| ra.user.is_some()) {
        return None;
    }
    Some(
        Diagnostic::new(codes::W0131, &main.file, main.name.span, "the policy names no `run_as` user")
            .label("under a supervisor running as root, the workload runs as root (uid 0)")
            .help("uid 0 without capabilities still reaches the pathname unix sockets of root daemons (Landlock does not mediate them); add `run_as user NAME group NAME` (`process.run_as_user` in OpenShell YAML) with a dedicated user"),
    )
}

/// The warnings of a resolved policy: rules that do not mean what they
/// say. Run only when resolution found no error.
pub fn lint(r: &Resolved) -> Diagnostics {
    let mut d = Diagnostics::default();
    let p = &r.policy;
    let eps = &p.endpoints;
    let shadowed = shadowed_rules(eps);
    for (i, ep) in p.endpoints.iter().enumerate() {
        let Some((file, span)) = r.spans.endpoints.get(i) else {
            continue;
        };
        let host = match &ep.dest {
            Dest::Host(h) => Some(h),
            Dest::Addrs(_) => None,
        };
        if let (EndpointKind::Tcp, Some(h)) = (&ep.kind, host)
            && h.is_wildcard()
        {
            d.push(
                Diagnostic::new(codes::W0101, file, *span, format!("wildcard host `{h}` on a transparent `tcp` endpoint"))
                    .label("DNS-label exfiltration channel")
                    .help("the workload resolves names under this wildcard itself, so it can encode data in DNS labels the stub forwards upstream; name the hosts exactly, or use an L4 or `http` rule"),
            );
        }
        if ep.binaries.iter().any(|b| b.glob.as_str() == "/**") {
            d.push(
                Diagnostic::new(codes::W0108, file, *span, "every program in the sandbox may use this rule (`/**`)")
                    .help("name the binaries that need this destination; a workload can always write and run a program of its own"),
            );
        }
        let creds: Vec<&str> = host
            .map(|h| {
                p.credentials
                    .iter()
                    .filter(|c| c.hosts.iter().any(|ch| ch.may_overlap(h)))
                    .map(|c| c.name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        match &ep.kind {
            EndpointKind::Http(h) => {
                let has_rules = !h.allow.is_empty() || !h.deny.is_empty() || !h.protocol.is_rest();
                if h.tls == TlsMode::Skip && has_rules {
                    d.push(
                        Diagnostic::new(codes::W0109, file, *span, "`tls skip` relays this endpoint without inspection: its L7 rules are not enforced")
                            .help("remove `tls skip` so the proxy can apply the rules, or remove the rules"),
                    );
                } else if h.tls == TlsMode::Auto && h.protocol.is_rest() && h.allow.is_empty() {
                    d.push(
                        Diagnostic::new(codes::W0105, file, *span, "this inspected endpoint allows no request")
                            .help("add `allow` rules or an access preset (`read-only`, `read-write`, `full`)"),
                    );
                } else if h.tls == TlsMode::Auto
                    && h.protocol == L7Protocol::Websocket
                    && !(h.allow.is_empty() && h.graphql_allow.is_empty())
                    && !h.allow.iter().any(|r| r.methods.contains("GET"))
                {
                    d.push(
                        Diagnostic::new(codes::W0105, file, *span, "this websocket endpoint allows no upgrade, so no message can be sent")
                            .label("no `allow GET` rule")
                            .help("add `allow GET PATH` for the upgrade handshake, or the `read-only` preset"),
                    );
                }
                if h.tls == TlsMode::Auto
                    && h.enforcement == Enforcement::Audit
                    && !creds.is_empty()
                {
                    d.push(
                        Diagnostic::new(codes::W0103, file, *span, format!("audit mode on an endpoint where credential `{}` is injected", creds.join("`, `")))
                            .label("requests are forwarded even when no rule allows them")
                            .help("use `enforce` (the default) so the credential only travels on allowed requests"),
                    );
                }
            }
            EndpointKind::L4 | EndpointKind::Tcp => {}
        }
        // A rule an inspected one shadows never carries the connection
        // (W0104 says so), so nothing reaches the credential through it.
        let inspected_instead = shadowed
            .iter()
            .any(|&(a, b)| a == i && eps.get(b).is_some_and(|b| b.kind.is_inspected()));
        if !ep.kind.is_inspected()
            && !creds.is_empty()
            && !ep.uninspected_credentials
            && !inspected_instead
        {
            let closed = !matches!(ep.kind, EndpointKind::Tcp);
            let (message, label) = if closed {
                (
                    format!(
                        "every connection over this rule is refused: credential `{}` is bound to a host it reaches without inspection",
                        creds.join("`, `")
                    ),
                    "refused at connect, as OpenShell refuses it",
                )
            } else {
                (
                    format!(
                        "credential `{}` is bound to a host this rule reaches without inspection",
                        creds.join("`, `")
                    ),
                    "not inspected",
                )
            };
            // An imported endpoint is fixed in the YAML, whose author
            // knows OpenShell's names for the protocol and the flag.
            let yaml = crate::source::is_yaml(std::path::Path::new(file.path()));
            let skip = matches!(&ep.kind, EndpointKind::Http(_));
            let help = match (yaml, skip) {
                (true, true) => {
                    "remove `tls: skip` so the proxy checks each request, or set `allow_uninspected_credentials: true` to accept the risk"
                }
                (true, false) => {
                    "set `protocol: rest` on the endpoint so the proxy checks each request, or `allow_uninspected_credentials: true` to accept the risk"
                }
                (false, true) => {
                    "remove `tls skip` so the proxy checks each request, or add `uninspected_credentials` to accept the risk"
                }
                (false, false) => {
                    "make the rule `http` so the proxy checks each request, or add `uninspected_credentials` to accept the risk"
                }
            };
            d.push(
                Diagnostic::new(codes::W0102, file, *span, message)
                    .label(label)
                    .help(help),
            );
        }
    }
    for (i, c) in p.credentials.iter().enumerate() {
        let Some((file, span)) = r.spans.credentials.get(i) else {
            continue;
        };
        let reached = p.endpoints.iter().any(|ep| {
            ep.kind.is_inspected()
                && matches!(&ep.dest, Dest::Host(h) if c.hosts.iter().any(|ch| ch.may_overlap(h)))
        });
        if !reached {
            d.push(
                Diagnostic::new(
                    codes::W0106,
                    file,
                    *span,
                    format!(
                        "credential `{}` is never injected: no inspected rule reaches its hosts",
                        c.name
                    ),
                )
                .help("add an `http` rule for one of its hosts, or remove the credential"),
            );
        }
    }
    shadowing(r, &shadowed, &mut d);
    planted::planted(r, &mut d);
    d
}

/// Rules that have no effect because another rule covers them, as
/// (shadowed, shadowing) pairs: an uninspected rule inside an inspected one
/// (inspection wins), or a rule inside another of the same kind.
fn shadowed_rules(eps: &[Endpoint]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // Only rules whose destinations can contain one another are compared:
    // an exact host against the same host and the wildcards matching it, a
    // wildcard against the same wildcard, addresses against addresses.
    let mut by_host: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut wildcards: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut by_suffix: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut addrs = Vec::new();
    for (i, ep) in eps.iter().enumerate() {
        match &ep.dest {
            Dest::Host(h) => match h.exact() {
                Some(e) => by_host.entry(e).or_default().push(i),
                None => {
                    wildcards.entry(h.as_str()).or_default().push(i);
                    by_suffix.entry(h.literal_suffix()).or_default().push(i);
                }
            },
            Dest::Addrs(_) => addrs.push(i),
        }
    }
    let none: Vec<usize> = Vec::new();
    for (i, a) in eps.iter().enumerate() {
        let candidates: Vec<usize> = match &a.dest {
            Dest::Host(h) => match h.exact() {
                Some(e) => {
                    let mut c = by_host.get(e).unwrap_or(&none).clone();
                    let mut rest = e;
                    while let Some((_, tail)) = rest.split_once('.') {
                        c.extend(by_suffix.get(tail).unwrap_or(&none));
                        rest = tail;
                    }
                    c
                }
                None => wildcards.get(h.as_str()).unwrap_or(&none).clone(),
            },
            Dest::Addrs(_) => addrs.clone(),
        };
        if let Some(j) = candidates
            .into_iter()
            .find(|&j| j != i && shadows(eps, j, i))
        {
            out.push((i, j));
        }
    }
    out
}

fn shadowing(r: &Resolved, shadowed: &[(usize, usize)], d: &mut Diagnostics) {
    let eps = &r.policy.endpoints;
    for &(i, j) in shadowed {
        let Some(a) = eps.get(i) else { continue };
        let (Some((file, span)), Some((bfile, bspan))) =
            (r.spans.endpoints.get(i), r.spans.endpoints.get(j))
        else {
            continue;
        };
        let Some(b) = eps.get(j) else { continue };
        let (bl, _) = bfile.line_col(bspan.start);
        let msg = if a.kind.is_inspected() == b.kind.is_inspected() {
            format!("this rule allows nothing the rule at line {bl} does not already allow")
        } else {
            format!(
                "this uninspected rule has no effect: the inspected rule at line {bl} covers it, and inspection wins"
            )
        };
        let mut diag = Diagnostic::new(codes::W0104, file, *span, msg)
            .label("shadowed")
            .help("remove this rule, or narrow the other one");
        if file.same_file(bfile) {
            diag = diag.secondary(*bspan, "covered by this rule");
        }
        d.push(diag);
    }
}

/// Rule `b` makes rule `a` pointless.
fn shadows(eps: &[Endpoint], b: usize, a: usize) -> bool {
    let (Some(a_ep), Some(b_ep)) = (eps.get(a), eps.get(b)) else {
        return false;
    };
    let (ai, bi) = (a_ep.kind.is_inspected(), b_ep.kind.is_inspected());
    let same_kind = std::mem::discriminant(&a_ep.kind) == std::mem::discriminant(&b_ep.kind);
    let kind_ok = match (ai, bi) {
        (false, true) => true,
        (false, false) => same_kind,
        // Inspected rules add up; neither makes the other pointless.
        (true, _) => false,
    };
    if !kind_ok || !covers(b_ep, a_ep) {
        return false;
    }
    // Of two identical rules, report the later one only.
    !(covers(a_ep, b_ep) && ai == bi && same_kind && a < b)
}

/// Every connection rule `a` allows, rule `b` allows too (cheapest tests
/// first: this runs for every pair of rules that could overlap).
fn covers(b: &Endpoint, a: &Endpoint) -> bool {
    a.ports.is_subset(&b.ports)
        && match (&a.dest, &b.dest) {
            (Dest::Host(x), Dest::Host(y)) => x == y || x.exact().is_some_and(|e| y.matches(e)),
            (Dest::Addrs(x), Dest::Addrs(y)) => x.is_subset(y),
            _ => false,
        }
        && match (&a.addresses, &b.addresses) {
            (_, None) => true,
            (Some(x), Some(y)) => x.is_subset(y),
            (None, Some(_)) => false,
        }
        && a.binaries
            .iter()
            .all(|ab| b.binaries.iter().any(|bb| binary_covers(bb, ab)))
}

fn binary_covers(b: &BinaryRef, a: &BinaryRef) -> bool {
    if b.sha256.is_some() && b.sha256 != a.sha256 {
        return false;
    }
    b.glob == a.glob
        || a.glob.exact().is_some_and(|e| b.glob.matches(e))
        || b.glob.to_string() == "/**"
}
