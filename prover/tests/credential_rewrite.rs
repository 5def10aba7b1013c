//! Routes that replace credential placeholders by their secrets, in REST
//! request bodies (`request_body_credential_rewrite`) and WebSocket text
//! messages (`websocket_credential_rewrite`): turning either on for a host
//! a credential with a placeholder is bound to sends the secret where the
//! same request was refused, a `credential_reach_expansion` whose witness
//! carries the placeholder and replays through the evaluator (NEW lets it
//! through with the secret in its place, OLD refuses it). Turning a flag
//! off, one already on, and one on a host no such credential is bound to
//! add nothing.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod support;

use policy_bundle::Bundle;
use policy_bundle::eval::{Decision, Evaluator, Reason};
use prover::{Finding, Report, Verdict};
use support::*;

const TOKEN: &str = r#"
  credential token {
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts api.example.com realtime.example.com
  }
"#;

fn bundle(body: &str) -> Bundle {
    compile(&policy(&format!("{TOKEN}\n{body}")))
}

fn prove(old: &Bundle, new: &Bundle) -> Report {
    prover::diff(old, new, &opts()).unwrap()
}

/// The findings whose witness carries a placeholder.
fn rewrites(r: &Report) -> Vec<&Finding> {
    r.findings
        .iter()
        .filter(|f| {
            let w = &f.witness;
            w.body
                .as_deref()
                .is_some_and(|b| b.contains("openshell-placeholder-"))
                || w.websocket_text
                    .as_deref()
                    .is_some_and(|t| t.contains("openshell-placeholder-"))
        })
        .collect()
}

/// The credentials whose placeholders a decision replaces.
fn replaced(d: &Decision) -> Vec<String> {
    match &d.reason {
        Reason::Rewritten { credentials, .. } | Reason::BodyRewritten { credentials, .. } => {
            credentials.clone()
        }
        _ => Vec::new(),
    }
}

/// The witness as `eval` takes it: the body with its `--content-type`,
/// or the text message after the upgrade.
fn replay_rewrite(ev: &Evaluator, f: &Finding) -> Decision {
    let req = replay(&f.witness);
    match f.witness.probe() {
        Some(p) => p.decide(ev, &req),
        None => ev.eval_with_typed_body(
            &req,
            f.witness.body_bytes().as_deref(),
            f.witness.content_type.as_deref(),
        ),
    }
}

/// NEW lets the witness through with `token`'s placeholder replaced; OLD
/// refuses it.
fn assert_rewrite_replays(f: &Finding, old: &Bundle, new: &Bundle) {
    assert_eq!(f.category, prover::Category::CredentialReachExpansion);
    assert_eq!(f.code, "R0101");
    assert!(f.verified, "{f:#?}");
    let n = replay_rewrite(&Evaluator::new(new.clone()), f);
    assert!(let_through(&n), "NEW refuses the witness: {n:#?}\n{f:#?}");
    assert_eq!(replaced(&n), ["token"], "{n:#?}");
    let o = replay_rewrite(&Evaluator::new(old.clone()), f);
    assert!(
        !let_through(&o),
        "OLD lets the witness through: {o:#?}\n{f:#?}"
    );
}

#[test]
fn request_body_rewrite_turned_on_is_a_widening() {
    let old = bundle("  allow /usr/bin/agent -> api.example.com:443 http read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite",
    );
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    assert_rewrite_replays(f, &old, &new);
    let w = &f.witness;
    assert_eq!(w.host, "api.example.com");
    assert_eq!(w.port, 443);
    assert_eq!(w.binary, "/usr/bin/agent");
    assert_eq!(w.content_type.as_deref(), Some("application/json"));
    assert!(w.websocket.is_none());
    assert!(
        f.message.contains("`request_body_credential_rewrite`"),
        "{}",
        f.message
    );
    assert!(f.old_reason.contains("refused"), "{}", f.old_reason);
    assert!(f.new_rule.is_some());
    // Nothing else changed: no other finding.
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
}

#[test]
fn websocket_rewrite_turned_on_is_a_widening() {
    let old = bundle("  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite",
    );
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    assert_rewrite_replays(f, &old, &new);
    assert_eq!(f.witness.websocket.as_deref(), Some("text"));
    assert_eq!(f.witness.host, "realtime.example.com");
    assert!(f.message.contains("`websocket_credential_rewrite`"));
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
}

#[test]
fn a_new_route_with_the_flag_sends_the_secret_in_bodies() {
    let old = bundle("  allow /usr/bin/agent -> other.example.com:443 http read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> other.example.com:443 http read-write\n  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite",
    );
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    assert_rewrite_replays(found[0], &old, &new);
    assert!(found[0].old_reason.starts_with("default deny"));
}

#[test]
fn the_flag_on_a_host_no_credential_is_bound_to_adds_nothing() {
    let old = bundle("  allow /usr/bin/agent -> other.example.com:443 http read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> other.example.com:443 http read-write request_body_credential_rewrite\n  allow /usr/bin/agent -> other.example.com:443 websocket read-write websocket_credential_rewrite",
    );
    let r = prove(&old, &new);
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
}

#[test]
fn the_flag_for_a_credential_without_placeholder_adds_nothing() {
    let header = r#"
  credential key {
    secret env KEY
    inject header Authorization "Bearer {secret}"
    hosts api.example.com
  }
"#;
    let old = compile(&policy(&format!(
        "{header}\n  allow /usr/bin/agent -> api.example.com:443 http read-write"
    )));
    let new = compile(&policy(&format!(
        "{header}\n  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite"
    )));
    let r = prove(&old, &new);
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
}

#[test]
fn turning_a_flag_off_adds_nothing() {
    let on = bundle(
        "  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite\n  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite",
    );
    let off = bundle(
        "  allow /usr/bin/agent -> api.example.com:443 http read-write\n  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write",
    );
    let r = prove(&on, &off);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
}

#[test]
fn a_flag_already_on_adds_nothing() {
    let rules = "  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite\n  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite";
    let old = bundle(rules);
    // An unrelated change, so that the proof runs.
    let new = bundle(&format!(
        "{rules}\n  allow /usr/bin/agent -> other.example.com:443 http read-only"
    ));
    let r = prove(&old, &new);
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

/// The proxy replaces the placeholder of any credential bound to the host,
/// whatever the `methods` and `paths` of its binding (as OpenShell does):
/// a binding for `GET /v1/read` does not keep its secret out of a `POST`
/// body to `/v1/write`. The flag is a widening there too.
#[test]
fn a_binding_restricted_by_method_and_path_does_not_restrict_rewriting() {
    let narrow = r#"
  credential token {
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts api.example.com
    methods GET
    paths /v1/read
  }
"#;
    let rules = |flag: &str| {
        compile(&policy(&format!(
            "{narrow}\n  allow /usr/bin/agent -> api.example.com:443 http {flag} {{\n    allow POST /v1/write\n  }}"
        )))
    };
    let (old, new) = (rules(""), rules("request_body_credential_rewrite"));
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    assert_rewrite_replays(found[0], &old, &new);
    assert_eq!(found[0].witness.method.as_deref(), Some("POST"));
    assert_eq!(found[0].witness.path.as_deref(), Some("/v1/write"));
}

#[test]
fn an_accepted_risk_suppresses_it() {
    let old = bundle("  allow /usr/bin/agent -> api.example.com:443 http read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite",
    );
    let mut o = opts();
    o.accepted = prover::accepted::parse(
        "risks.yaml",
        "accepted_risks:\n  - query: credential_reach_expansion\n    reason: the API takes its key in the body\n    accepted_by: sec\n    endpoint: api.example.com:443\n",
    )
    .unwrap();
    let r = prover::diff(&old, &new, &o).unwrap();
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    assert!(found[0].suppressed);
    assert_eq!(r.verdict, Verdict::NewReach, "{:#?}", r.findings);
}

/// Without slicing, the whole bundles give the same answer.
#[test]
fn the_whole_bundles_give_the_same_answer() {
    let old = bundle("  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write");
    let new = bundle(
        "  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write websocket_credential_rewrite",
    );
    let r = prover::diff(
        &old,
        &new,
        &prover::Options {
            slice: false,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(rewrites(&r).len(), 1, "{:#?}", r.findings);
}
