//! Differential tests: on generated policies and requests, the prover's
//! formulas (decided by Z3 at the request's point) agree with the reference
//! evaluator on "allowed?", "audited?" and "credential injected?"; and on
//! generated policy pairs every `diff --prove` witness replays.

// The prover's own test helpers: the generated policies are the same.
#[path = "../../prover/tests/support/mod.rs"]
mod support;

use policy_bundle::eval::{Evaluator, Verdict};
use prover_z3::oracle::Oracle;
use support::generate::{self as generate, Rng};

#[derive(Clone, Copy)]
enum How {
    /// Z3: substitute the request's values, simplify.
    Simplify,
    /// Z3: assert the request's values, solve.
    Solver,
    /// Our own evaluation of the formula DAG.
    Rust,
}

/// Runs `policies × per_policy` samples; returns how many were compared.
#[expect(clippy::unwrap_used, reason = "test helper")]
fn agree(seed: u64, policies: usize, per_policy: usize, how: How) -> usize {
    let mut compared = 0;
    for i in 0..policies {
        let mut rng = Rng::new(seed + i as u64);
        let text = generate::policy(&mut rng);
        let bundle = support::compile(&text);
        let oracle = Oracle::new(&bundle).unwrap();
        let eval = Evaluator::new(bundle);
        for _ in 0..per_policy {
            let req = generate::request(&mut rng);
            // A JSON-RPC or MCP call in half the requests (REST endpoints
            // ignore it).
            let body = if rng.chance(50) {
                support::rpc::any_body(&mut rng)
            } else {
                None
            };
            let body = body.as_deref();
            let d = eval.eval_with_body(&req, body);
            let want = (
                matches!(d.decision, Verdict::Allow | Verdict::Audit),
                d.decision == Verdict::Audit,
                d.credential.is_some(),
            );
            let got = match how {
                How::Simplify => oracle.decide(&req, body),
                How::Solver => oracle.decide_by_solver(&req, body),
                How::Rust => oracle.decide_fast(&req, body),
            };
            // Targets canonicalization refuses are outside the model (its
            // path variable is a canonical path); the generator makes few.
            // Batches are too: the model has single calls (`prover::calls`
            // says why that loses nothing).
            let Some(got) = got else { continue };
            assert_eq!(
                (got.allowed, got.audited, got.credential),
                want,
                "policy #{i} (seed {}):\n{text}\nrequest: {req:#?}\nbody: {:?}\neval: {d:#?}",
                seed + i as u64,
                body.map(String::from_utf8_lossy),
            );
            compared += 1;
        }
    }
    compared
}

#[test]
fn z3_formulas_agree_with_eval_on_ten_thousand_samples() {
    let n = agree(1, 20, 560, How::Simplify);
    assert!(n >= 10_000, "only {n} samples compared");
}

#[test]
fn rust_evaluation_and_solving_agree_too() {
    let n = agree(10_000, 10, 300, How::Rust);
    assert!(n >= 2_500, "only {n} samples compared");
    let n = agree(20_000, 5, 200, How::Solver);
    assert!(n >= 900, "only {n} samples compared");
}

#[test]
#[ignore = "long: run with --ignored"]
fn z3_formulas_agree_with_eval_long() {
    let n = agree(1_000_000, 400, 500, How::Simplify);
    assert!(n >= 180_000, "only {n} samples compared");
}

#[expect(clippy::unwrap_used, reason = "test helper")]
fn witnesses_replay(seed: u64, pairs: usize) {
    for i in 0..pairs {
        let mut rng = Rng::new(seed + i as u64);
        let old = generate::policy(&mut rng);
        // The new policy: the old one with one endpoint added or replaced.
        let new = if rng.chance(50) {
            generate::policy(&mut rng)
        } else {
            let mut other = Rng::new(seed + i as u64 + 7);
            let extra = generate::policy(&mut other);
            let rule = extra
                .lines()
                .find(|l| l.starts_with("  allow ") && !l.ends_with('{'))
                .unwrap_or("")
                .to_owned();
            old.replacen(
                "  fs read /usr /etc\n",
                &format!("  fs read /usr /etc\n{rule}\n"),
                1,
            )
        };
        let (o, n) = (support::compile(&old), support::compile(&new));
        let r = prover::diff(&o, &n, &support::opts()).unwrap();
        assert_ne!(r.verdict, prover::Verdict::Inconclusive, "pair #{i}");
        for f in &r.findings {
            assert!(
                f.verified,
                "pair #{i} (seed {}):\nOLD\n{old}\nNEW\n{new}\n{f:#?}",
                seed + i as u64
            );
        }
        let same = prover::diff(&n, &n, &support::opts()).unwrap();
        assert!(
            same.findings.is_empty(),
            "a policy widens itself:\n{new}\n{:#?}",
            same.findings
        );
    }
}

#[test]
fn every_diff_witness_replays_through_eval() {
    witnesses_replay(500, 12);
}

#[test]
#[ignore = "long: run with --ignored"]
fn every_diff_witness_replays_through_eval_long() {
    witnesses_replay(90_000, 1_000);
}
