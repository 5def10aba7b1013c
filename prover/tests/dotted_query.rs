//! `diff --prove` through dotted query globs (`?k=dotted:GLOB`, whose
//! wildcards never cross a `.`): a widening between the two kinds, or
//! within the dotted kind, is found with a witness that replays through the
//! reference evaluator; the same set written either way is no finding.

#![expect(clippy::unwrap_used, reason = "test harness")]

mod support;

use policy_bundle::matcher::parse_query_string;
use prover::Verdict;
use support::*;

const CRED: &str = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }\n  binaries agent = /usr/bin/curl";

fn search(query: &str) -> String {
    format!(
        "{CRED}\n  allow agent -> api.github.com:443 http {{\n    allow GET /search/code {query}\n  }}"
    )
}

/// The witness's decoded values for `key`.
fn witness_values(r: &prover::Report, key: &str) -> Vec<String> {
    let f = r.findings.first().unwrap();
    let raw = f.witness.query.as_deref().unwrap_or("");
    parse_query_string(raw)
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn plain_star_over_dotted_star_is_a_widening_across_a_dot() {
    let old = search("?q=dotted:repo:acme/*");
    let new = search("?q=repo:acme/*");
    let r = diff(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    assert_eq!(categories(&r), ["capability_expansion"]);
    assert_verified(&r);
    let values = witness_values(&r, "q");
    assert!(
        values
            .iter()
            .any(|v| v.starts_with("repo:acme/") && v["repo:acme/".len()..].contains('.')),
        "the witness must cross a `.`: {values:?}"
    );
}

#[test]
fn a_dotted_double_star_is_a_widening_over_one_label() {
    let old = search("?v=dotted:1.*");
    let new = search("?v=dotted:1.**");
    let r = diff(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    assert_verified(&r);
    let values = witness_values(&r, "v");
    assert!(
        values
            .iter()
            .any(|v| v == "1" || v.matches('.').count() >= 2),
        "{values:?}"
    );
}

#[test]
fn narrowing_to_dotted_is_no_new_access() {
    let old = search("?q=repo:acme/*");
    let new = search("?q=dotted:repo:acme/*");
    let r = diff(&old, &new);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
}

#[test]
fn the_same_set_as_plain_or_dotted_is_no_finding() {
    // Without a wildcard the two kinds are the same set.
    let r = diff(&search("?v=1.4|2.0"), &search("?v=dotted:1.4|dotted:2.0"));
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
    let r = diff(&search("?v=dotted:1.4|dotted:2.0"), &search("?v=1.4|2.0"));
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
}
