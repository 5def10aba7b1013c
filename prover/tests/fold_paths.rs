//! `fold_paths`: on an endpoint that folds paths, a request path is
//! admitted when its fold (ASCII lowercase, one trailing `/` removed)
//! matches the folded pattern. Findings between folding and non-folding
//! policies name a spelling only one side admits, and replay through
//! `eval`; equivalent spellings of a folded rule prove equal.

mod support;

use policy_bundle::matcher::{HttpPathGlob, fold_path};
use prover::Verdict;
use support::*;

const CRED: &str = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }\n  binaries agent = /usr/bin/curl";

fn endpoint(options: &str, rules: &str) -> String {
    format!("{CRED}\n  allow agent -> api.github.com:443 http{options} {{\n{rules}\n  }}")
}

fn replayed(old: &str, new: &str) -> prover::Report {
    let (o, n) = (compile(&policy(old)), compile(&policy(new)));
    let r = diff_bundles(&o, &n);
    assert_eq!(
        r.verdict == Verdict::Widened,
        !r.findings.is_empty(),
        "{:#?}",
        r.findings
    );
    for f in &r.findings {
        assert_replays(f, &o, &n);
    }
    r
}

#[test]
fn folding_an_allow_rule_admits_its_other_spellings() {
    let plain = endpoint("", "    allow GET /repos/x");
    let folded = endpoint(" fold_paths", "    allow GET /repos/x");
    let r = replayed(&plain, &folded);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    assert_eq!(categories(&r), ["capability_expansion"]);
    for f in &r.findings {
        let path = f.witness.path.as_deref().unwrap_or("");
        assert_ne!(path, "/repos/x", "{f:#?}");
        assert_eq!(fold_path(path), "/repos/x", "{f:#?}");
    }
    // The other way round nothing is new: `/repos/x` is admitted by both.
    let back = replayed(&folded, &plain);
    assert_eq!(back.verdict, Verdict::NoNewAccess, "{:#?}", back.findings);
}

#[test]
fn unfolding_a_deny_rule_lets_its_other_spellings_through() {
    let rules = "    allow GET /**\n    deny GET /admin/**";
    let folded = endpoint(" fold_paths", rules);
    let plain = endpoint("", rules);
    let r = replayed(&folded, &plain);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let deny = HttpPathGlob::parse("/admin/**").unwrap();
    for f in &r.findings {
        let path = f.witness.path.as_deref().unwrap_or("");
        assert!(deny.matches_folded(path) && !deny.matches(path), "{f:#?}");
    }
    let back = replayed(&plain, &folded);
    assert_eq!(back.verdict, Verdict::NoNewAccess, "{:#?}", back.findings);
}

#[test]
fn spellings_a_folding_endpoint_reads_alike_prove_equal() {
    let a = endpoint(
        " fold_paths",
        "    allow GET /Repos/*/\n    deny GET /repos/SECRET",
    );
    let b = endpoint(
        " fold_paths",
        "    allow GET /repos/*\n    deny GET /Repos/secret/",
    );
    for (old, new) in [(&a, &b), (&b, &a)] {
        let r = replayed(old, new);
        assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
    }
}

#[test]
fn a_folded_rule_narrower_than_the_case_sensitive_one_is_found_both_ways() {
    // `/a/*` folded no longer matches `/a/` (it reads as `/a`), while the
    // case-sensitive rule does; folded, it matches `/A/X`, which the other
    // does not.
    let plain = endpoint("", "    allow GET /a/*");
    let folded = endpoint(" fold_paths", "    allow GET /a/*");
    let glob = HttpPathGlob::parse("/a/*").unwrap();
    let wider = replayed(&plain, &folded);
    assert_eq!(wider.verdict, Verdict::Widened, "{:#?}", wider.findings);
    for f in &wider.findings {
        let path = f.witness.path.as_deref().unwrap_or("");
        assert!(glob.matches_folded(path) && !glob.matches(path), "{f:#?}");
    }
    let narrower = replayed(&folded, &plain);
    assert_eq!(
        narrower.verdict,
        Verdict::Widened,
        "{:#?}",
        narrower.findings
    );
    for f in &narrower.findings {
        let path = f.witness.path.as_deref().unwrap_or("");
        assert!(glob.matches(path) && !glob.matches_folded(path), "{f:#?}");
    }
}
