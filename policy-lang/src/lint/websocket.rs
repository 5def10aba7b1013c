//! W0111: a credential that covers the upgrade of a websocket endpoint.
//!
//! The proxy refuses an upgrade that a credential would be injected into:
//! after the 101 the server's messages reach the workload unread, so a
//! server that echoes the secret would hand it over (HTTP responses are
//! scrubbed, WebSocket messages are not). Such a policy compiles, and the
//! connection fails when the workload opens it; this warning says so
//! before, with a path where it happens. It is exact for one endpoint: the
//! path is one an allow `GET` rule, the endpoint's scope and the
//! credential's `paths` all match and no unconditional deny rule does.

use regex_automata::dfa::{Automaton as _, StartKind, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use std::collections::HashSet;

use super::hosts_overlap;
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::ir::{Dest, EndpointKind, L7Protocol, TlsMode};
use crate::matcher::HttpPathGlob;
use crate::resolve::Resolved;

pub(super) fn covered_upgrades(r: &Resolved, d: &mut Diagnostics) {
    let p = &r.policy;
    for (i, ep) in p.endpoints.iter().enumerate() {
        let (EndpointKind::Http(h), Dest::Host(host), Some((file, span))) =
            (&ep.kind, &ep.dest, r.spans.endpoints.get(i))
        else {
            continue;
        };
        if h.protocol != L7Protocol::Websocket || h.tls != TlsMode::Auto {
            continue;
        }
        let denied: Vec<&HttpPathGlob> = h
            .deny
            .iter()
            .filter(|rule| rule.methods.contains("GET") && rule.query.is_empty())
            .map(|rule| &rule.path)
            .collect();
        for c in &p.credentials {
            if !c.hosts.iter().any(|ch| hosts_overlap(ch, host))
                || c.methods.as_ref().is_some_and(|m| !m.contains("GET"))
            {
                continue;
            }
            let cred_paths: Vec<Option<&HttpPathGlob>> = match &c.paths {
                Some(ps) => ps.iter().map(Some).collect(),
                None => vec![None],
            };
            let upgrade = h
                .allow
                .iter()
                .filter(|rule| rule.methods.contains("GET"))
                .flat_map(|rule| cred_paths.iter().map(move |cp| (&rule.path, *cp)))
                .find_map(|(allowed, cred)| {
                    let must: Vec<&HttpPathGlob> = [Some(allowed), cred, h.path.as_ref()]
                        .into_iter()
                        .flatten()
                        .collect();
                    common_path(&must, &denied)
                });
            let Some(path) = upgrade else { continue };
            d.push(
                Diagnostic::new(
                    codes::W0111,
                    file,
                    *span,
                    format!(
                        "credential `{}` covers the WebSocket upgrade `GET {path}` of this endpoint, and the proxy refuses a credentialed upgrade",
                        c.name
                    ),
                )
                .label("upgrade refused at run time")
                .help("the server's messages are relayed unread, so they cannot be scrubbed of the secret; narrow the credential's `hosts`, `methods` or `paths` so that it does not cover the upgrade (the connection then opens without it)"),
            );
        }
    }
}

/// Product states explored before the check gives up (quietly); real
/// policies stay in the hundreds.
const MAX_STATES: usize = 100_000;

/// The shortest path (letters and digits preferred) that every pattern of
/// `must` matches and none of `not` does; `None` if there is none or an
/// automaton cannot be built (then no warning: the check stays quiet
/// rather than guess).
fn common_path(must: &[&HttpPathGlob], not: &[&HttpPathGlob]) -> Option<String> {
    let build = |g: &&HttpPathGlob| automaton(g);
    let must: Vec<dense::DFA<Vec<u32>>> = must.iter().map(build).collect::<Option<_>>()?;
    let not: Vec<dense::DFA<Vec<u32>>> = not.iter().map(build).collect::<Option<_>>()?;
    let anchored = start::Config::new().anchored(Anchored::Yes);
    let first: Vec<StateID> = must
        .iter()
        .chain(&not)
        .map(|dfa| dfa.start_state(&anchored).ok())
        .collect::<Option<_>>()?;
    // Breadth first, bytes in order: the first accepting tuple is reached
    // by the shortest, then smallest, path.
    let mut seen: HashSet<Vec<StateID>> = HashSet::from([first.clone()]);
    let mut level = vec![(first, Vec::new())];
    // Letters and digits first, so the path shown reads like one.
    let order: Vec<u8> = (b'a'..=b'z')
        .chain(b'0'..=b'9')
        .chain((0..=u8::MAX).filter(|b| !b.is_ascii_lowercase() && !b.is_ascii_digit()))
        .collect();
    while !level.is_empty() && seen.len() < MAX_STATES {
        let mut next_level = Vec::new();
        for (states, text) in level {
            let (m, n) = states.split_at(must.len());
            let all = must
                .iter()
                .zip(m)
                .all(|(dfa, &s)| dfa.is_match_state(dfa.next_eoi_state(s)));
            let none = not
                .iter()
                .zip(n)
                .all(|(dfa, &s)| !dfa.is_match_state(dfa.next_eoi_state(s)));
            if all && none {
                return String::from_utf8(text).ok();
            }
            for &b in &order {
                let stepped: Vec<StateID> = must
                    .iter()
                    .chain(&not)
                    .zip(&states)
                    .map(|(dfa, &s)| dfa.next_state(s, b))
                    .collect();
                let alive = must
                    .iter()
                    .zip(&stepped)
                    .all(|(dfa, &s)| !dfa.is_dead_state(s));
                if alive && seen.insert(stepped.clone()) {
                    let mut t = text.clone();
                    t.push(b);
                    next_level.push((stepped, t));
                }
            }
        }
        level = next_level;
    }
    None
}

fn automaton(glob: &HttpPathGlob) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored),
        )
        .build(&format!("^(?:{})$", glob.to_regex()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(s: &str) -> HttpPathGlob {
        match HttpPathGlob::parse(s) {
            Ok(g) => g,
            Err(e) => panic!("{s}: {e:?}"),
        }
    }

    fn common(must: &[&str], not: &[&str]) -> Option<String> {
        let must: Vec<HttpPathGlob> = must.iter().map(|s| glob(s)).collect();
        let not: Vec<HttpPathGlob> = not.iter().map(|s| glob(s)).collect();
        let path = common_path(
            &must.iter().collect::<Vec<_>>(),
            &not.iter().collect::<Vec<_>>(),
        );
        if let Some(p) = &path {
            assert!(
                must.iter().all(|g| g.matches(p)),
                "{p} misses one of {must:?}"
            );
            assert!(
                !not.iter().any(|g| g.matches(p)),
                "{p} matches one of {not:?}"
            );
        }
        path
    }

    #[test]
    fn finds_the_shortest_common_path() {
        assert_eq!(
            common(&["/ws/**", "/ws/v1/*"], &[]).as_deref(),
            Some("/ws/v1/")
        );
        assert_eq!(common(&["/ws"], &[]).as_deref(), Some("/ws"));
        assert_eq!(
            common(&["/ws/**", "/ws/**"], &["/ws/admin/**"]).as_deref(),
            Some("/ws")
        );
    }

    #[test]
    fn none_when_disjoint_or_denied() {
        assert_eq!(common(&["/ws/**", "/api/**"], &[]), None);
        assert_eq!(common(&["/ws"], &["/ws"]), None);
        assert_eq!(common(&["/ws/*"], &["/ws/**"]), None);
    }
}
