//! Other spellings of a body-judging endpoint's path: the evaluator
//! refuses them (`path_alias`) before any rule, so a REST rule that allows
//! one grants nothing, and the prover must not name one as a widening.
//! Every witness on such a host replays through `eval`.

mod support;

use policy_bundle::matcher::HttpPathGlob;
use prover::Verdict;
use support::*;

const CRED: &str = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }\n  binaries agent = /usr/bin/curl";

/// A GraphQL endpoint at `path` (with `options`) beside REST rules on the
/// same host.
fn beside(protocol: &str, path: &str, options: &str, rest: &str) -> String {
    let rules = match protocol {
        "graphql" => "    allow graphql query",
        _ => "    allow rpc tools/list",
    };
    format!(
        "{CRED}\n  allow agent -> api.github.com:443 {protocol}{options} {{\n    path {path}\n{rules}\n  }}\n  allow agent -> api.github.com:443 http {{\n    allow GET /repos/**\n{rest}\n  }}"
    )
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
fn allowing_only_other_spellings_of_the_graphql_path_grants_nothing() {
    for protocol in ["graphql", "mcp"] {
        let old = beside(protocol, "/graphql", "", "");
        let new = beside(
            protocol,
            "/graphql",
            "",
            "    allow POST /GraphQL\n    allow POST /graphql/\n    allow GET /GRAPHQL/",
        );
        let r = replayed(&old, &new);
        assert_eq!(
            r.verdict,
            Verdict::NoNewAccess,
            "{protocol}: {:#?}",
            r.findings
        );
    }
}

#[test]
fn a_wide_rest_rule_beside_the_graphql_path_is_named_by_a_witness_eval_confirms() {
    let alias = HttpPathGlob::parse("/api/graphql").unwrap();
    for protocol in ["graphql", "mcp"] {
        let old = beside(protocol, "/api/graphql", "", "");
        let new = beside(protocol, "/api/graphql", "", "    allow POST /**");
        let r = replayed(&old, &new);
        assert_eq!(r.verdict, Verdict::Widened, "{protocol}: {:#?}", r.findings);
        for f in &r.findings {
            let path = f.witness.path.as_deref().unwrap_or("");
            assert!(alias.matches(path) || !alias.matches_folded(path), "{f:#?}");
        }
    }
}

#[test]
fn folding_the_body_endpoints_path_admits_the_spellings_it_refused() {
    // Without `fold_paths` `/GraphQL` is refused whatever the REST rules
    // say; with it the GraphQL rules judge it, and allow a query there.
    let plain = beside("graphql", "/graphql", "", "    allow POST /GraphQL");
    let folded = beside(
        "graphql",
        "/graphql",
        " fold_paths",
        "    allow POST /GraphQL",
    );
    let (o, n) = (compile(&policy(&plain)), compile(&policy(&folded)));
    let r = replayed(&plain, &folded);
    assert_eq!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
    let old = policy_bundle::eval::Evaluator::new(o);
    let new = policy_bundle::eval::Evaluator::new(n);
    for f in &r.findings {
        let req = replay(&f.witness);
        let (d, _) = replay_decision(&old, &f.witness, &req);
        assert_eq!(d.refusal(), Some("path_alias"), "{d:#?}\n{f:#?}");
        let (d, _) = replay_decision(&new, &f.witness, &req);
        assert_eq!(d.refusal(), None, "{d:#?}\n{f:#?}");
    }
    let back = replayed(&folded, &plain);
    assert_eq!(back.verdict, Verdict::NoNewAccess, "{:#?}", back.findings);
}
