//! A diff proved over its slice (the changed grants and the unchanged ones
//! that may meet them) answers exactly as the proof over the whole
//! bundles: the same report, finding for finding, witness for witness.
//! Checked on random pairs of several endpoints with one edit (so that
//! most grants are unchanged and many are cut away) or one credential
//! changed, on generated pairs
//! like `bench/prover_gen.py`'s, and on every pair of versions of the
//! community policies in `tests/shared/fixtures`.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers: a failure should stop the test"
)]

mod support;

use policy_bundle::Bundle;
use support::generate::Rng;
use support::pairs::{HostPat, Spec};

/// The report as JSON, without timing and sizes (`stats` counts the
/// definitions, which slicing is there to shrink).
fn answer(old: &Bundle, new: &Bundle, slice: bool) -> serde_json::Value {
    let opts = prover::Options {
        slice,
        ..support::opts()
    };
    let mut json = prover::diff(old, new, &opts).unwrap().to_json();
    if let Some(o) = json.as_object_mut() {
        o.remove("stats");
    }
    json
}

/// What a report claims, whichever way its regions were cut: the verdict,
/// the categories found (detailed or counted), the credential and sandbox
/// changes, whether something was left undecided, the notes. Two proofs
/// may cut the same set of requests into regions differently (a solver
/// on the whole problem, the finite-domain search on the slice, each
/// picks its own first point), so findings are compared by category.
fn claims(r: &serde_json::Value) -> serde_json::Value {
    let categories = |key: &str| {
        let mut c: Vec<String> = r[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| f["category"].to_string())
            .chain(
                r["omitted"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|o| {
                        let reach =
                            ["\"reach_expansion\""].contains(&o["category"].to_string().as_str());
                        reach == (key == "reach")
                    })
                    .map(|o| o["category"].to_string()),
            )
            .collect();
        c.sort();
        c.dedup();
        c
    };
    // A witness that does not replay (a query key read as a method
    // override, `docs/prover.md`) is no slicing matter, but must not
    // come or go with it.
    let mut unverified: Vec<String> = r["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["verified"] != true)
        .map(|f| f["category"].to_string())
        .collect();
    unverified.sort();
    unverified.dedup();
    serde_json::json!({
        "verdict": r["verdict"],
        "findings": categories("findings"),
        "reach": categories("reach"),
        "credentials": r["credentials"],
        "sandbox": r["sandbox"],
        "inconclusive": r["inconclusive"].is_string(),
        "notes": r["notes"],
        "unverified": unverified,
    })
}

/// What differs between two reports, member by member.
fn difference(sliced: &serde_json::Value, whole: &serde_json::Value) -> String {
    let mut out = String::new();
    if let (Some(a), Some(b)) = (sliced.as_object(), whole.as_object()) {
        for (k, v) in b {
            if a.get(k) != Some(v) {
                out += &format!(
                    "{k}: sliced {:#}\nwhole {v:#}\n",
                    a.get(k).unwrap_or(&serde_json::Value::Null)
                );
            }
        }
    }
    out
}

/// The sliced and the whole proof claim the same; returns whether their
/// reports are the same to the letter.
fn assert_same(old: &Bundle, new: &Bundle, what: &str) -> bool {
    let (sliced, whole) = (answer(old, new, true), answer(old, new, false));
    let (a, b) = (claims(&sliced), claims(&whole));
    assert!(
        a == b,
        "{what}: the sliced proof answers otherwise than the whole one\n{}",
        difference(&a, &b)
    );
    sliced == whole
}

/// A policy of several small specs side by side: the first spec's
/// credentials, every spec's endpoints.
fn merged(specs: &[Spec]) -> Spec {
    let mut out = specs[0].clone();
    for s in &specs[1..] {
        out.endpoints.extend(s.endpoints.iter().cloned());
        out.creds.extend(s.creds.iter().cloned());
    }
    out
}

/// The same policy with one credential changed: a host of its own or
/// one an endpoint reaches (which closes or opens uninspected routes), or
/// its methods.
fn recredential(old: &Spec, rng: &mut Rng) -> Spec {
    let mut s = old.clone();
    let c = rng.below(s.creds.len());
    let host = if rng.chance(50) {
        s.endpoints[rng.below(s.endpoints.len())].host.clone()
    } else {
        HostPat::random(rng)
    };
    let cred = &mut s.creds[c];
    match rng.below(3) {
        0 => {
            let h = rng.below(cred.hosts.len());
            cred.hosts[h] = host;
        }
        1 => cred.hosts.push(host),
        _ => {
            cred.methods = match cred.methods {
                None => Some("GET"),
                Some(_) => None,
            }
        }
    }
    s
}

#[test]
fn sliced_and_whole_proofs_agree_on_random_pairs() {
    let (mut widened, mut alike) = (0, 0);
    for seed in 0..300u64 {
        let mut rng = Rng::new(0x51ce + seed);
        let parts: Vec<Spec> = (0..3 + rng.below(3))
            .map(|_| Spec::random(&mut rng))
            .collect();
        let old = merged(&parts);
        let new = if rng.chance(30) {
            recredential(&old, &mut rng)
        } else {
            old.mutate(&mut rng)
        };
        let (ob, nb) = (support::compile(&old.text()), support::compile(&new.text()));
        let what = format!("seed {seed}\nOLD\n{}\nNEW\n{}", old.text(), new.text());
        if assert_same(&ob, &nb, &what) {
            alike += 1;
        }
        if prover::diff(&ob, &nb, &support::opts()).unwrap().verdict == prover::Verdict::Widened {
            widened += 1;
        }
    }
    eprintln!("{alike} of 300 reports the same to the letter, {widened} widened");
    // Not vacuous: many edits widen.
    assert!(widened >= 30, "only {widened} of 300 pairs widen");
}

/// `bench/prover_gen.py`'s shape, small: many endpoints over binary sets,
/// credentials bound to wildcard domains, L4, CIDR and wildcard rules, and
/// one deny rule removed (a widening) or one rule changed in another way.
fn generated(n: usize, edit: usize) -> (String, String) {
    let paths = ["/api/v1/**", "/v1/models", "/repos/*/*/issues", "/health"];
    let text = |changed: bool| {
        let mut s = String::from("policy \"gen\" {\n  fs read /usr /etc\n  fs exec /usr/bin\n");
        for d in 0..4 {
            // Edit 3 narrows a credential to two methods, edit 4 binds one
            // to the hosts of a read-only wildcard rule as well.
            let (methods, more) = match (changed, edit, d) {
                (true, 3, 0) => ("    methods GET HEAD\n", ""),
                (true, 4, 1) => ("", " *.cdn1.example.net"),
                _ => ("", ""),
            };
            s += &format!(
                "  credential token{d} {{\n    secret env TOKEN{d}\n    placeholder env TOKEN{d}\n    inject replace\n    hosts **.corp{d}.example.com{more}\n{methods}  }}\n"
            );
        }
        for k in 0..4 {
            s += &format!("  binaries set{k} = /usr/bin/tool{k}a /usr/bin/tool{k}b\n");
        }
        // The edited rule: an L4 one (`i % 10 == 3`) for a port edit, else
        // an `http` one.
        let buried = n / 20 * 10 + if edit == 1 { 3 } else { 1 };
        for i in 0..n {
            let who = format!("set{}", i % 4);
            let host = format!("svc{i}.corp{}.example.com", i % 4);
            let this = changed && i == buried;
            match i % 10 {
                7 => s += &format!("  allow {who} -> 10.{i}.0.0/16:5432\n"),
                8 => {
                    s += &format!(
                        "  allow {who} -> *.cdn{}.example.net:443 http read-only\n",
                        i % 3
                    )
                }
                3 => {
                    let port = if this && edit == 1 { "22-23" } else { "22" };
                    s += &format!("  allow {who} -> {host}:{port}\n");
                }
                _ => {
                    s += &format!("  allow {who} -> {host}:443 http {{\n");
                    s += &format!("    allow GET HEAD {}\n", paths[i % paths.len()]);
                    s += "    allow * /admin/**\n";
                    if !(this && edit == 0) {
                        s += "    deny * /admin/**\n";
                    }
                    if this && edit == 2 {
                        s += "    allow POST /v1/messages\n";
                    }
                    s += "  }\n";
                }
            }
        }
        s + "}\n"
    };
    (text(false), text(true))
}

#[test]
fn sliced_and_whole_proofs_agree_on_generated_pairs() {
    let cases = [
        (40, 0),
        (40, 2),
        (60, 0),
        (60, 2),
        (60, 1),
        (80, 0),
        (40, 3),
        (40, 4),
    ];
    for (n, edit) in cases {
        let (old, new) = generated(n, edit);
        let (ob, nb) = (support::compile(&old), support::compile(&new));
        // One change among many: the regions are the same too.
        assert!(assert_same(
            &ob,
            &nb,
            &format!("{n} endpoints, edit {edit}")
        ));
        assert!(assert_same(
            &nb,
            &ob,
            &format!("{n} endpoints, edit {edit}, reversed")
        ));
        let r = prover::diff(&ob, &nb, &support::opts()).unwrap();
        support::assert_verified(&r);
        // The slice is a slice: it models fewer definitions.
        let whole = prover::Options {
            slice: false,
            ..support::opts()
        };
        let w = prover::diff(&ob, &nb, &whole).unwrap();
        assert!(
            r.stats.definitions < w.stats.definitions,
            "{n} endpoints, edit {edit}: {} definitions sliced, {} whole",
            r.stats.definitions,
            w.stats.definitions
        );
        if matches!(edit, 1 | 3) {
            // Port 23 on a credentialed host, relayed at L4: the guard
            // refuses it; fewer methods carry a credential: narrowings.
            continue;
        }
        assert_eq!(
            r.verdict,
            prover::Verdict::Widened,
            "{n} endpoints, edit {edit}"
        );
    }
}

#[test]
fn sliced_and_whole_proofs_agree_on_community_histories() {
    let (mut pairs, mut alike) = (0, 0);
    for vs in support::community_histories() {
        for (i, (a, ab)) in vs.iter().enumerate() {
            for (b, bb) in vs.iter().skip(i + 1) {
                alike += usize::from(assert_same(ab, bb, &format!("{a} → {b}")));
                alike += usize::from(assert_same(bb, ab, &format!("{b} → {a}")));
                pairs += 2;
            }
        }
    }
    eprintln!("{pairs} pairs of versions, {alike} reports the same to the letter");
    assert!(pairs >= 20, "only {pairs} pairs of versions compiled");
}
