//! Containment (`prover::within`): a candidate inside its boundary is
//! `within`; one that goes beyond it in any dimension (a request, a
//! credential, a file right, a process or Landlock setting) `exceeds`,
//! each excess with a witness the reference evaluator confirms against
//! the candidate and refutes against the boundary.
mod support;

use policy_bundle::eval::Evaluator;
use prover::{Category, Verdict};
use support::*;

const CRED: &str = "  credential tok {\n    secret env TOK\n    placeholder env TOK\n    inject header Authorization \"Bearer {secret}\"\n    hosts api.example.com\n  }";

fn team(extra: &str) -> String {
    format!(
        "{CRED}\n  binaries agent = /usr/bin/curl\n  allow agent -> api.example.com:443 http {{\n    allow GET /v1/**\n  }}\n  allow agent -> 10.1.2.0/24:5432\n{extra}"
    )
}

/// Every request excess replays: the candidate lets it through, and the
/// boundary refuses it or sends another credential (or none) with it.
fn assert_excesses_replay(r: &prover::Report, boundary: &str, candidate: &str) {
    let (bb, cb) = (compile(&policy(boundary)), compile(&policy(candidate)));
    assert_bundle_excesses_replay(r, &bb, &cb);
}

/// [`assert_excesses_replay`] for compiled policies.
fn assert_bundle_excesses_replay(
    r: &prover::Report,
    bb: &policy_bundle::Bundle,
    cb: &policy_bundle::Bundle,
) {
    // What a credential sends and how, whatever its name.
    let binding = |b: &policy_bundle::Bundle, name: Option<&String>| {
        name.and_then(|n| b.enforcement.credentials.iter().find(|c| &c.name == n))
            .map(|c| (c.source.clone(), c.inject.clone(), c.placeholder.clone()))
    };
    let (b, c) = (Evaluator::new(bb.clone()), Evaluator::new(cb.clone()));
    for f in &r.findings {
        assert!(f.verified, "{f:#?}");
        assert!(f.new_rule.is_some(), "{f:#?}");
        let req = replay(&f.witness);
        let (cd, _) = replay_decision(&c, &f.witness, &req);
        let (bd, _) = replay_decision(&b, &f.witness, &req);
        assert!(let_through(&cd), "{cd:#?}\n{f:#?}");
        // A connection the candidate relays and the boundary inspects.
        let relayed = f.witness.is_connection()
            && cd.route == Some(policy_bundle::eval::RouteKind::L4)
            && bd.route != Some(policy_bundle::eval::RouteKind::L4);
        assert!(
            relayed
                || !let_through(&bd)
                || binding(bb, bd.credential.as_ref()) != binding(cb, cd.credential.as_ref()),
            "{bd:#?}\n{cd:#?}\n{f:#?}"
        );
    }
}

fn exceeds(boundary: &str, candidate: &str) -> prover::Report {
    let r = within(boundary, candidate);
    assert_eq!(r.verdict, Verdict::Exceeds, "{r:#?}");
    assert!(r.containment);
    assert!(r.reach.is_empty(), "every request excess is a finding");
    assert_excesses_replay(&r, boundary, candidate);
    r
}

#[test]
fn a_policy_is_within_itself_and_within_a_wider_one() {
    let t = team("");
    assert_eq!(within(&t, &t).verdict, Verdict::Within);
    let wider = format!(
        "{CRED}\n  binaries agent = /usr/bin/curl /usr/bin/python3\n  allow agent -> *.example.com:443 http read-write\n  allow agent -> 10.0.0.0/8:5432"
    );
    let r = within(&wider, &t);
    assert_eq!(r.verdict, Verdict::Within, "{r:#?}");
    assert!(r.findings.is_empty() && r.sandbox.is_empty());
}

#[test]
fn a_credential_renamed_is_the_same_credential() {
    let t = team("");
    let renamed = t.replace("credential tok", "credential platform");
    assert_eq!(within(&renamed, &t).verdict, Verdict::Within);
}

#[test]
fn every_request_dimension_is_an_excess() {
    let t = team("");
    let cases = [
        (
            "binary",
            t.replace("agent = /usr/bin/curl", "agent = /usr/bin/wget"),
        ),
        (
            "host",
            t.replace("-> api.example.com:443", "-> other.example.com:443"),
        ),
        ("port", t.replace("10.1.2.0/24:5432", "10.1.2.0/24:5433")),
        ("cidr", t.replace("10.1.2.0/24:5432", "10.1.2.0/25:5432")),
        (
            "path",
            t.replace("allow GET /v1/**", "allow GET /v1/public/**"),
        ),
        ("method", t.replace("allow GET /v1/**", "allow HEAD /v1/**")),
    ];
    for (what, boundary) in cases {
        let r = exceeds(&boundary, &t);
        assert!(!r.findings.is_empty(), "{what}: {r:#?}");
        let w = &r.findings[0].witness;
        match what {
            "binary" => assert_eq!(w.binary, "/usr/bin/curl"),
            "host" => assert_eq!(w.host, "api.example.com"),
            "port" => assert!(r.findings.iter().any(|f| f.witness.port == 5432)),
            "cidr" => assert!(
                r.findings
                    .iter()
                    .any(|f| f.witness.address.as_deref() == Some("10.1.2.128")
                        || f.witness.host == "10.1.2.128"),
                "{r:#?}"
            ),
            "path" => assert_eq!(w.path.as_deref(), Some("/v1")),
            _ => assert_eq!(w.method.as_deref(), Some("GET")),
        }
    }
}

#[test]
fn an_uncredentialed_excess_blocks_too() {
    let boundary =
        "  binaries agent = /usr/bin/curl\n  allow agent -> example.com:443 http read-only";
    let candidate = format!("{boundary}\n  allow agent -> pypi.org:443");
    let r = exceeds(boundary, &candidate);
    assert!(
        r.findings
            .iter()
            .all(|f| f.category == Category::ReachExpansion && f.witness.host == "pypi.org"),
        "{r:#?}"
    );
}

#[test]
fn a_credential_sent_another_way_or_another_secret_is_an_excess() {
    let t = team("");
    for boundary in [
        t.replace(
            "inject header Authorization \"Bearer {secret}\"",
            "inject header X-Token \"{secret}\"",
        ),
        t.replace("secret env TOK", "secret env OTHER"),
    ] {
        let r = exceeds(&boundary, &t);
        let f = &r.findings[0];
        assert_eq!(f.category, Category::CredentialReachExpansion, "{f:#?}");
        assert!(f.message.contains("credential `tok`"), "{}", f.message);
        assert!(
            f.old_reason
                .contains("injects credential `tok` there instead"),
            "{}",
            f.old_reason
        );
    }
}

#[test]
fn a_file_right_beyond_the_boundary_is_an_excess_at_its_rule() {
    // `policy` puts the body on line 5.
    let r = exceeds("", "  fs write /srv");
    assert!(r.findings.is_empty());
    let c = &r.sandbox[0];
    assert_eq!(c.category, Category::FileRightsExpansion);
    assert_eq!(c.path.as_deref(), Some("/srv"));
    assert!(c.rights.iter().any(|x| x == "write_file"), "{c:#?}");
    assert_eq!(c.rule.as_ref().map(|l| l.line), Some(5), "{c:#?}");
    // Beneath a tree the boundary grants: inherited, within.
    assert_eq!(
        within("  fs write /srv", "  fs write /srv/data").verdict,
        Verdict::Within
    );
}

#[test]
fn run_as_must_match_unless_the_boundary_names_none() {
    let r = exceeds("  run_as user a group g", "  run_as user b group g");
    assert_eq!(r.sandbox.len(), 1, "{:#?}", r.sandbox);
    assert_eq!(r.sandbox[0].setting.as_deref(), Some("run_as.user"));
    let r = exceeds("  run_as user a group g", "");
    assert_eq!(r.sandbox.len(), 2, "{:#?}", r.sandbox);
    // A boundary naming no user leaves it to the candidate.
    assert_eq!(
        within("", "  run_as user b group g").verdict,
        Verdict::Within
    );
}

#[test]
fn landlock_mode_and_abi_are_bounded() {
    let r = exceeds(
        "  landlock hard min_abi 3",
        "  landlock best_effort min_abi 3",
    );
    assert_eq!(r.sandbox[0].setting.as_deref(), Some("landlock.mode"));
    let r = exceeds("  landlock hard min_abi 3", "  landlock hard min_abi 2");
    assert_eq!(r.sandbox[0].setting.as_deref(), Some("landlock.min_abi"));
    assert_eq!(
        within(
            "  landlock best_effort min_abi 2",
            "  landlock hard min_abi 4"
        )
        .verdict,
        Verdict::Within
    );
}

#[test]
fn an_uninspected_relay_exceeds_a_boundary_that_inspects() {
    let boundary =
        "  binaries agent = /usr/bin/curl\n  allow agent -> example.com:443 http read-write";
    let candidate = "  binaries agent = /usr/bin/curl\n  allow agent -> example.com:443";
    let r = exceeds(boundary, candidate);
    // Methods read-write does not allow, and the relay itself.
    let f = r
        .findings
        .iter()
        .find(|f| f.witness.is_connection())
        .unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(f.category, Category::ReachExpansion, "{f:#?}");
    assert!(f.message.contains("relayed uninspected"), "{}", f.message);
    assert!(
        r.findings
            .iter()
            .any(|f| f.witness.method.as_deref() == Some("DELETE")),
        "{r:#?}"
    );
    // The other way round: inspecting is within relaying.
    assert_eq!(within(candidate, boundary).verdict, Verdict::Within);
}

#[test]
fn a_credential_sent_where_the_boundary_sends_another_is_an_excess() {
    // The boundary sends `a` to api.example.com and `b` to
    // other.example.com; the candidate sends `a` to both. Every request
    // carries a credential on both sides and `a` itself is unchanged, so
    // only asking which credential reaches where finds it.
    let cred = |name: &str, var: &str, hosts: &str| {
        format!(
            "  credential {name} {{\n    secret env {var}\n    placeholder env {var}\n    inject replace\n    hosts {hosts}\n  }}"
        )
    };
    let rules = "  binaries agent = /usr/bin/curl\n  allow agent -> api.example.com:443 http read-only\n  allow agent -> other.example.com:443 http read-only";
    let boundary = format!(
        "{}\n{}\n{rules}",
        cred("a", "A", "api.example.com"),
        cred("b", "B", "other.example.com")
    );
    let candidate = format!(
        "{}\n{rules}",
        cred("a", "A", "api.example.com other.example.com")
    );
    let r = exceeds(&boundary, &candidate);
    assert!(!r.findings.is_empty());
    for f in &r.findings {
        assert_eq!(f.category, Category::CredentialReachExpansion, "{f:#?}");
        assert_eq!(f.witness.host, "other.example.com", "{f:#?}");
        assert!(f.message.contains("credential `a`"), "{}", f.message);
        assert!(
            f.old_reason
                .contains("injects credential `b` there instead"),
            "{}",
            f.old_reason
        );
    }
    // Sending B to other.example.com as the boundary does is within,
    // whatever the credential is called.
    let same = format!(
        "{}\n{}\n{rules}",
        cred("a", "A", "api.example.com"),
        cred("b_renamed", "B", "other.example.com")
    );
    assert_eq!(within(&boundary, &same).verdict, Verdict::Within);
}

/// Along the community policies' histories, in both directions: every
/// version is within itself; a later or earlier version is within
/// another exactly when `diff --prove` from that one finds it adds
/// nothing; and every excess replays against the reference evaluator.
#[test]
fn community_histories_are_contained_exactly_where_diff_finds_nothing_new() {
    let (mut pairs, mut exceeding) = (0, 0);
    for history in community_histories() {
        for (a, ab) in &history {
            let itself = prover::within(ab, ab, &opts()).unwrap();
            assert_eq!(itself.verdict, Verdict::Within, "{a} within itself");
        }
        for (a, ab) in &history {
            for (b, bb) in &history {
                if a == b {
                    continue;
                }
                let contained = prover::within(ab, bb, &opts()).unwrap();
                let diff = prover::diff(ab, bb, &opts()).unwrap();
                let decided =
                    !matches!(
                        contained.verdict,
                        Verdict::Inconclusive | Verdict::Unsupported
                    ) && !matches!(diff.verdict, Verdict::Inconclusive | Verdict::Unsupported);
                if !decided {
                    continue;
                }
                pairs += 1;
                assert_eq!(
                    contained.verdict == Verdict::Within,
                    diff.verdict == Verdict::NoNewAccess,
                    "{b} within {a}: {:?}, diff {a} → {b}: {:?}\n{contained:#?}",
                    contained.verdict,
                    diff.verdict
                );
                if contained.verdict == Verdict::Exceeds {
                    exceeding += 1;
                    assert_bundle_excesses_replay(&contained, ab, bb);
                }
            }
        }
    }
    eprintln!("{pairs} ordered pairs decided, {exceeding} exceeding");
    assert!(
        pairs >= 20,
        "only {pairs} ordered pairs of versions compiled"
    );
    assert!(exceeding > 0, "no history widens anything");
}
