//! Blame property: on generated policies and requests, the rule the
//! reference evaluator names really applies to the request, since `eval`,
//! `diff --prove` ("allowed by"), the proxy's refusals and the deny log all
//! carry it. Routes and L7 endpoints are shared by content across rules
//! written for other binaries and hosts, so "some rule with this content"
//! is not enough: the named rule's own binaries and destination must match.

mod support;

use std::net::IpAddr;

use policy_bundle::eval::{Evaluator, Request, Verdict};
use policy_bundle::matcher::{canonical_ip, normalize_host};
use policy_bundle::{Dest, Origin};
use policy_lang::ir::{Endpoint, EndpointKind, Policy};
use support::generate::{self, Rng};

/// The IR of generated policy text.
#[expect(clippy::unwrap_used, reason = "test helper")]
fn resolve(text: &str) -> Policy {
    let path = support::scratch().join("p.policy");
    std::fs::write(&path, text).unwrap();
    let checked = policy_lang::load::check(&path, None).unwrap();
    assert!(
        !checked.has_errors(),
        "generated policy has errors:\n{text}"
    );
    checked.resolved.unwrap().policy
}

/// The policy rule a blamed origin belongs to: the endpoint rule itself, or
/// the endpoint rule an L7 allow/deny line was written in.
fn owners<'a>(policy: &'a Policy, o: &Origin) -> Vec<&'a Endpoint> {
    // The bundle was compiled from a copy of the text in another folder.
    let same = |x: &Origin| (x.line, x.column, &x.rule) == (o.line, o.column, &o.rule);
    policy
        .endpoints
        .iter()
        .filter(|e| {
            same(&e.origin)
                || match &e.kind {
                    EndpointKind::Http(h) => h.allow.iter().chain(&h.deny).any(|r| same(&r.origin)),
                    _ => false,
                }
        })
        .collect()
}

fn applies(e: &Endpoint, req: &Request) -> bool {
    let binary = e.binaries.iter().any(|b| {
        b.glob.matches(&req.binary)
            && b.sha256
                .as_deref()
                .is_none_or(|pin| req.sha256.as_deref() == Some(pin))
    });
    let literal = req
        .host
        .as_deref()
        .and_then(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().ok());
    // As the evaluator does: a known address wins over a literal host.
    let addr = req.addr.or(literal).map(canonical_ip);
    let dest = match &e.dest {
        Dest::Host(p) => {
            literal.is_none()
                && req
                    .host
                    .as_deref()
                    .and_then(|h| normalize_host(h).ok())
                    .is_some_and(|h| p.matches(&h))
        }
        Dest::Addrs(set) => addr.is_some_and(|a| set.contains(a)),
    };
    binary && dest && e.ports.contains(req.port)
}

fn aim(rng: &mut Rng, ir: &Policy, req: &mut Request) {
    let Some(e) = ir.endpoints.get(rng.below(ir.endpoints.len())) else {
        return;
    };
    if let Dest::Host(p) = &e.dest
        && let Some(h) = p.exact()
    {
        req.host = Some(h.to_owned());
    }
    let exact: Vec<&str> = e.binaries.iter().filter_map(|b| b.glob.exact()).collect();
    if !exact.is_empty() {
        req.binary = (*rng.pick(&exact)).to_owned();
    }
}

/// Copies one endpoint rule (with its block) for another binary, so that
/// two rules share a route and an L7 endpoint: the case blame gets wrong
/// when it takes the first rule of a shared route.
fn with_sibling(rng: &mut Rng, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("  allow ") && l.contains(" -> "))
        .map(|(i, _)| i)
        .collect();
    let Some(&start) = starts.get(rng.below(starts.len().max(1))) else {
        return text.to_owned();
    };
    let mut rule: Vec<String> = Vec::new();
    for (k, line) in lines.iter().enumerate().skip(start) {
        rule.push((*line).to_owned());
        let opens = k == start && line.ends_with(" {");
        if (k == start && !opens) || (k > start && *line == "  }") {
            break;
        }
    }
    let sibling = *rng.pick(&["/usr/bin/sibling", "/opt/sib/x", "/tmp/sibling"]);
    if let Some(first) = rule.first_mut() {
        let (_, dest) = first.split_once(" -> ").unwrap_or_default();
        *first = format!("  allow {sibling} -> {dest}");
    }
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let end = out.iter().rposition(|l| l == "}").unwrap_or(out.len());
    // Sometimes the sibling comes first, so "first rule" is wrong both ways.
    let at = if rng.chance(50) { start } else { end };
    for (k, l) in rule.into_iter().enumerate() {
        out.insert(at + k, l);
    }
    out.join("\n") + "\n"
}

fn blame_applies(seed: u64, policies: usize, per_policy: usize) -> usize {
    let mut named = 0;
    for i in 0..policies {
        let mut rng = Rng::new(seed + i as u64);
        let mut text = generate::policy(&mut rng);
        if rng.chance(70) {
            text = with_sibling(&mut rng, &text);
        }
        let ir = resolve(&text);
        let eval = Evaluator::new(support::compile(&text));
        for _ in 0..per_policy {
            let mut req = generate::request(&mut rng);
            // Half the requests connect only, so L4 blame is sampled too.
            if rng.chance(50) {
                req.http = None;
            }
            // Half aim at a rule's own binary and host, so that rules
            // sharing a route or an endpoint are exercised often.
            if rng.chance(50) {
                aim(&mut rng, &ir, &mut req);
            }
            let d = eval.eval(&req);
            let ctx = format!(
                "policy #{i} (seed {}):\n{text}\nrequest: {req:#?}\ndecision: {d:#?}",
                seed + i as u64
            );
            let Some(rule) = &d.rule else {
                assert_eq!(d.decision, Verdict::Deny, "an allow names no rule: {ctx}");
                continue;
            };
            let owners = owners(&ir, rule);
            assert!(
                !owners.is_empty(),
                "the named rule is no endpoint rule: {ctx}"
            );
            assert!(
                owners.iter().any(|e| applies(e, &req)),
                "the named rule is not for this binary and destination: {ctx}"
            );
            named += 1;
        }
    }
    named
}

#[test]
fn blame_names_a_rule_for_the_binary_and_destination() {
    let named = blame_applies(0xB1A3E, 300, 60);
    // Enough of the samples are allowed (or hit a deny rule) to mean something.
    assert!(named > 800, "only {named} samples named a rule");
}
