//! Containment against the reference evaluator: whenever `eval` shows a
//! request the candidate lets through and the boundary does not
//! (credentialed or not), or one the candidate sends a credential with
//! that the boundary does not send the same way, `within` must not
//! answer `within`. Pairs as in `soundness.rs`: the candidate is the
//! boundary with one edit, or an unrelated policy.

mod support;

use policy_bundle::Bundle;
use policy_bundle::eval::{Decision, Evaluator, Request};
use prover::Verdict;
use prover::strings::universe::is_resolved_binary;
use prover::websocket::Probe as WsProbe;
use support::generate::Rng;
use support::pairs::Spec;
use support::{decide, let_through};

const REQUESTS: usize = 48;

type Probe = (Request, Option<Vec<u8>>, Option<WsProbe>);

/// What the credential a decision names sends, and how.
fn binding(b: &Bundle, d: &Decision) -> Option<String> {
    let name = d.credential.as_deref()?;
    b.enforcement
        .credentials
        .iter()
        .find(|c| c.name == name)
        .map(|c| format!("{:?} {:?} {:?}", c.source, c.inject, c.placeholder))
}

/// Whether a body is a JSON-RPC batch: a batch the boundary refuses only
/// as a whole brings no call its messages would not bring alone, and
/// the model has single calls (`prover::calls`).
fn batch(body: Option<&[u8]>) -> bool {
    body.is_some_and(|b| {
        matches!(
            serde_json::from_slice::<serde_json::Value>(b),
            Ok(serde_json::Value::Array(_))
        )
    })
}

/// The first request that shows the candidate beyond the boundary.
fn excess(boundary: &Bundle, candidate: &Bundle, reqs: &[Probe]) -> Option<String> {
    let (eb, ec) = (
        Evaluator::new(boundary.clone()),
        Evaluator::new(candidate.clone()),
    );
    for (r, body, ws) in reqs
        .iter()
        .filter(|(r, _, _)| is_resolved_binary(&r.binary))
    {
        if batch(body.as_deref()) {
            continue;
        }
        let ((b, _), (c, _)) = (
            decide(&eb, r, body.as_deref(), ws.as_ref()),
            decide(&ec, r, body.as_deref(), ws.as_ref()),
        );
        if !let_through(&c) {
            continue;
        }
        if !let_through(&b) {
            return Some(format!("refused by the boundary: {r:?}\n{b:?}\n{c:?}"));
        }
        // A WebSocket message carries no credential of its own.
        if ws.as_ref().is_none_or(|p| !p.is_message())
            && c.credential.is_some()
            && binding(candidate, &c) != binding(boundary, &b)
        {
            return Some(format!("another credential: {r:?}\n{b:?}\n{c:?}"));
        }
    }
    None
}

#[expect(clippy::expect_used, reason = "a failure should stop the test")]
fn compile_in(dir: &std::path::Path, name: &str, text: &str) -> Option<Bundle> {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write policy");
    policy_lang::load::compile_file(&path, None)
        .expect("load policy")
        .1
}

#[test]
fn no_excess_shown_by_eval_is_missed() {
    let dir = support::scratch();
    let opts = support::opts();
    let (mut pairs, mut excesses, mut inconclusive) = (0, 0, 0);
    for seed in 1..=1_500u64 {
        let mut rng = Rng::new(seed);
        let boundary = Spec::random(&mut rng);
        let candidate = if rng.chance(80) {
            boundary.mutate(&mut rng)
        } else {
            Spec::random(&mut rng)
        };
        let reqs: Vec<Probe> = (0..REQUESTS)
            .map(|i| {
                if i % 2 == 0 {
                    candidate.request(&mut rng)
                } else {
                    boundary.request(&mut rng)
                }
            })
            .collect();
        let (bt, ct) = (boundary.text(), candidate.text());
        let (Some(bb), Some(cb)) = (
            compile_in(&dir, "boundary.policy", &bt),
            compile_in(&dir, "candidate.policy", &ct),
        ) else {
            continue;
        };
        pairs += 1;
        let Some(why) = excess(&bb, &cb, &reqs) else {
            continue;
        };
        excesses += 1;
        let r = prover::within(&bb, &cb, &opts).expect("prover runs");
        if r.verdict == Verdict::Inconclusive {
            inconclusive += 1;
        }
        assert_ne!(
            r.verdict,
            Verdict::Within,
            "seed {seed}: eval shows an excess the prover missed\n{why}\nBOUNDARY\n{bt}\nCANDIDATE\n{ct}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{pairs} pairs, {excesses} with an excess shown by eval, {inconclusive} inconclusive"
    );
    // Not vacuous.
    assert!(pairs >= 1_400, "{pairs}");
    assert!(excesses * 10 >= pairs, "only {excesses} of {pairs}");
    assert!(
        inconclusive * 100 <= excesses,
        "{inconclusive} of {excesses}"
    );
}
