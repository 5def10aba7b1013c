//! Routes that replace credential placeholders by their secrets, in REST
//! request bodies (`request_body_credential_rewrite`) and WebSocket text
//! messages (`websocket_credential_rewrite`): turning either on for a host
//! a credential with a placeholder is bound to sends the secret where the
//! same request was refused, a `credential_reach_expansion` whose witness
//! carries the placeholder and replays through the evaluator (NEW lets it
//! through with the secret in its place, OLD refuses it). Only inside the
//! credential's binding (host, methods, paths; a message as its upgrade,
//! a `GET`): a flag where the binding covers nothing the route lets
//! through, turning a flag off, one already on, and one on a host no such
//! credential is bound to add nothing.

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

const NARROW: &str = r#"
  credential token {
    secret env TOKEN
    placeholder env TOKEN
    inject replace
    hosts api.example.com realtime.example.com
    methods GET
    paths /v1/read/**
  }
"#;

/// A bundle with [`NARROW`] and one rule.
fn narrow(rule: &str) -> Bundle {
    compile(&policy(&format!("{NARROW}\n{rule}")))
}

/// The proxy replaces a placeholder only on a request its credential's
/// binding covers (host, methods, paths), as it injects a header: the
/// flag turned on for a `GET /v1/read/**` binding sends the secret in
/// bodies of `GET`s under `/v1/read/`, never in a `POST` body nor to
/// `/v1/write`. The finding's witness lies inside the binding and
/// replays.
#[test]
fn a_binding_restricted_by_method_and_path_restricts_rewriting() {
    let rules = |flag: &str| {
        narrow(&format!(
            "  allow /usr/bin/agent -> api.example.com:443 http {flag} {{\n    allow GET POST /v1/write\n    allow GET POST /v1/read/**\n  }}"
        ))
    };
    let (old, new) = (rules(""), rules("request_body_credential_rewrite"));
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    assert_rewrite_replays(f, &old, &new);
    assert_eq!(f.witness.method.as_deref(), Some("GET"), "{f:#?}");
    // `/v1/read/**` holds `/v1/read` itself.
    let path = f.witness.path.as_deref().unwrap();
    assert!(path.starts_with("/v1/read"), "{f:#?}");
    // The region names the binding's method alone.
    assert!(!f.region.text.contains("POST"), "{}", f.region.text);
    // Outside the binding, the new policy refuses what the witness
    // carries: a POST, or another path.
    let ev = Evaluator::new(new.clone());
    for (method, target) in [("POST", path), ("GET", "/v1/write"), ("POST", "/v1/write")] {
        let mut w = f.witness.clone();
        w.method = Some(method.to_owned());
        w.path = Some(target.to_owned());
        let d = ev.eval_with_typed_body(
            &replay(&w),
            w.body_bytes().as_deref(),
            w.content_type.as_deref(),
        );
        assert!(!let_through(&d), "{method} {target}: {d:#?}");
        assert_eq!(d.reason.refusal_code(), "credential_not_bound", "{d:#?}");
        assert!(replaced(&d).is_empty(), "{d:#?}");
    }
}

/// Where the binding covers none of what the flagged route lets through
/// (only `POST /v1/write`, a binding for `GET /v1/read/**`), turning the
/// flag on sends the secret nowhere: no finding.
#[test]
fn a_binding_covering_none_of_the_routes_requests_adds_nothing() {
    let rules = |flag: &str| {
        narrow(&format!(
            "  allow /usr/bin/agent -> api.example.com:443 http {flag} {{\n    allow POST /v1/write\n  }}"
        ))
    };
    let (old, new) = (rules(""), rules("request_body_credential_rewrite"));
    let r = prove(&old, &new);
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
}

/// A message rides on its upgrade: the flag turned on sends the secret in
/// messages after an upgrade the binding covers (`GET /v1/read/**`), and
/// nowhere when the websocket endpoint lies outside its paths, or when
/// the binding's methods leave out `GET`.
#[test]
fn a_binding_restricts_websocket_rewriting_to_its_upgrades() {
    let ws = |path: &str, flag: &str| {
        format!(
            "  allow /usr/bin/agent -> realtime.example.com:443 websocket read-write {flag} {{\n    path {path}\n  }}"
        )
    };
    let (old, new) = (
        narrow(&ws("/v1/**", "")),
        narrow(&ws("/v1/**", "websocket_credential_rewrite")),
    );
    let r = prove(&old, &new);
    let found = rewrites(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    assert_rewrite_replays(f, &old, &new);
    assert_eq!(f.witness.websocket.as_deref(), Some("text"));
    assert!(
        f.witness.path.as_deref().unwrap().starts_with("/v1/read"),
        "{f:#?}"
    );

    let (old, new) = (
        narrow(&ws("/v1/chat/**", "")),
        narrow(&ws("/v1/chat/**", "websocket_credential_rewrite")),
    );
    let r = prove(&old, &new);
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);

    let post_only = NARROW.replace("methods GET", "methods POST");
    let bundle = |flag: &str| compile(&policy(&format!("{post_only}\n{}", ws("/v1/**", flag))));
    let r = prove(&bundle(""), &bundle("websocket_credential_rewrite"));
    assert!(rewrites(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
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

/// With the flag on in both, widening the binding (`methods GET` to `GET
/// POST`) sends the secret in `POST` bodies that were refused: a finding
/// whose witness is a `POST`, replayed, besides what the request
/// questions say of the wider header injection.
#[test]
fn widening_the_binding_of_a_rewriting_route_is_a_widening_of_bodies() {
    let rule = "  allow /usr/bin/agent -> api.example.com:443 http request_body_credential_rewrite {\n    allow GET POST /v1/read/**\n  }";
    let old = narrow(rule);
    let wide = NARROW.replace("methods GET", "methods GET POST");
    let new = compile(&policy(&format!("{wide}\n{rule}")));
    let r = prove(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let found: Vec<&Finding> = rewrites(&r)
        .into_iter()
        .filter(|f| f.witness.websocket.is_none())
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    assert_rewrite_replays(found[0], &old, &new);
    assert_eq!(found[0].witness.method.as_deref(), Some("POST"));
}
