//! The full "adds nothing" proof: a change that lets a binary reach a new
//! destination, port, method or message without a credential, or grants a
//! new filesystem right, or weakens the sandbox, is `new-reach`, never
//! `no-new-access`; narrowing and equivalent rewrites still are.

mod support;

use prover::{Category, Verdict};
use support::*;

const BASE: &str = "  binaries agent = /usr/bin/curl\n  binaries py = /usr/bin/python3\n  allow agent -> example.com:443 http read-only";

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

/// Every reach witness replays: NEW lets it through, OLD does not, and no
/// credential rides on it.
fn assert_reach_replays(r: &prover::Report, old: &str, new: &str) {
    use policy_bundle::eval::Evaluator;
    let (o, n) = (compile(&policy(old)), compile(&policy(new)));
    for f in &r.reach {
        assert_eq!(f.category, Category::ReachExpansion, "{f:#?}");
        assert!(f.verified, "{f:#?}");
        let req = replay(&f.witness);
        let (nd, cred) = replay_decision(&Evaluator::new(n.clone()), &f.witness, &req);
        let (od, _) = replay_decision(&Evaluator::new(o.clone()), &f.witness, &req);
        assert!(let_through(&nd) && !cred, "{nd:#?}\n{f:#?}");
        assert!(!let_through(&od), "{od:#?}\n{f:#?}");
    }
}

fn new_reach(old: &str, new: &str) -> prover::Report {
    let r = diff(old, new);
    assert_eq!(r.verdict, Verdict::NewReach, "{r:#?}");
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(!r.credentials_declared);
    assert_reach_replays(&r, old, new);
    r
}

#[test]
fn identical_and_equivalent_policies_add_nothing() {
    let r = diff(BASE, BASE);
    assert_eq!(r.verdict, Verdict::NoNewAccess);
    assert!(r.findings.is_empty() && r.reach.is_empty() && r.sandbox.is_empty());
    // Splitting a rule in two: the same requests.
    let split = "  binaries agent = /usr/bin/curl\n  binaries py = /usr/bin/python3\n  allow agent -> example.com:443 http {\n    allow GET /**\n  }\n  allow agent -> example.com:443 http {\n    allow HEAD OPTIONS /**\n  }";
    let r = diff(BASE, split);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.reach.is_empty(), "{:#?}", r.reach);
}

#[test]
fn narrowing_adds_nothing() {
    let old = with("  allow py -> pypi.org:443");
    let r = diff(&old, BASE);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.reach.is_empty());
}

#[test]
fn a_private_range_on_every_port_is_new_reach() {
    let new = with("  allow py -> 10.0.0.0/8:1-65535");
    let r = new_reach(BASE, &new);
    let w = &r.reach[0].witness;
    assert_eq!(w.binary, "/usr/bin/python3");
    assert!(w.host.starts_with("10."), "{w:#?}");
    assert!(w.method.is_none(), "an L4 route: a connection witness");
}

#[test]
fn ssh_to_a_subnet_and_a_wildcard_host_are_new_reach() {
    let r = new_reach(BASE, &with("  allow py -> 192.168.0.0/16:22"));
    assert_eq!(r.reach[0].witness.port, 22);
    let r = new_reach(BASE, &with("  allow py -> **.example.com:1-65535"));
    assert!(r.reach[0].witness.host.ends_with("example.com"), "{r:#?}");
}

#[test]
fn a_new_method_on_an_inspected_route_is_new_reach() {
    let new = BASE.replace("http read-only", "http read-write");
    let r = new_reach(BASE, &new);
    let w = &r.reach[0].witness;
    assert_eq!(w.host, "example.com");
    assert!(
        ["POST", "PUT", "PATCH", "DELETE"].contains(&w.method.as_deref().unwrap_or("")),
        "{w:#?}"
    );
}

#[test]
fn a_new_rpc_call_on_an_mcp_endpoint_is_new_reach() {
    let ep = |calls: &str| {
        format!(
            "  binaries agent = /usr/bin/curl\n  allow agent -> mcp.example.com:443 mcp {{\n    path /mcp\n    allow rpc initialize tools/list\n{calls}  }}"
        )
    };
    let old = ep("");
    let new = ep("    allow rpc tools/call tool search\n");
    let r = new_reach(&old, &new);
    assert_eq!(r.reach[0].witness.rpc_method.as_deref(), Some("tools/call"));
    assert_eq!(r.reach[0].witness.tool.as_deref(), Some("search"));
}

#[test]
fn a_new_file_right_is_new_reach_with_path_and_right() {
    let new = format!("  fs write /sandbox\n{BASE}");
    let r = diff(BASE, &new);
    assert_eq!(r.verdict, Verdict::NewReach, "{r:#?}");
    assert!(r.reach.is_empty());
    let c = r
        .sandbox
        .iter()
        .find(|c| c.rights.iter().any(|r| r == "write_file"))
        .unwrap_or_else(|| panic!("{:#?}", r.sandbox));
    assert_eq!(c.category, Category::FileRightsExpansion);
    assert_eq!(c.path.as_deref(), Some("/sandbox"));
    assert_eq!(c.code, "R0109");
    // A right already held through an ancestor is nothing new.
    let r = diff(&new, &format!("  fs write /sandbox/sub\n{new}"));
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.sandbox);
}

#[test]
fn weaker_enforcement_is_new_reach() {
    let hard = format!("  landlock hard min_abi 4\n  run_as user sandbox group sandbox\n{BASE}");
    let changes = |new: &str| {
        let r = diff(&hard, new);
        assert_eq!(r.verdict, Verdict::NewReach, "{r:#?}");
        r.sandbox
            .iter()
            .filter(|c| c.category == Category::EnforcementWeakened)
            .filter_map(|c| c.setting.clone())
            .collect::<Vec<_>>()
    };
    assert!(changes(&hard.replace("hard", "best_effort")).contains(&"landlock.mode".to_owned()));
    assert!(
        changes(&hard.replace("min_abi 4", "min_abi 1")).contains(&"landlock.min_abi".to_owned())
    );
    assert!(
        changes(&hard.replace("user sandbox", "user root")).contains(&"run_as.user".to_owned())
    );
    // The other way round is stronger enforcement: nothing new.
    let r = diff(&hard.replace("hard", "best_effort"), &hard);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.sandbox);
}

#[test]
fn a_credentialed_widening_is_still_widened_and_not_repeated_as_reach() {
    let cred = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }";
    let old = format!("{cred}\n{BASE}\n  allow agent -> api.github.com:443 http read-only");
    let new = old.replace(
        "api.github.com:443 http read-only",
        "api.github.com:443 http read-write",
    );
    let r = diff(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened);
    assert!(r.credentials_declared);
    assert!(r.reach.is_empty(), "{:#?}", r.reach);
}

/// Many hosts × rules: a proof that cannot finish in its budget answers
/// `inconclusive`, whichever phase the deadline falls in.
#[test]
fn a_large_diff_with_a_tiny_budget_is_inconclusive() {
    let rules = |extra: bool| {
        let mut s = String::from("  binaries agent = /usr/bin/curl /usr/bin/python3\n");
        for i in 0..600 {
            s.push_str(&format!(
                "  allow agent -> svc{i}.corp{}.example.com:443 http {{\n    allow GET /api/v{}/**\n    deny * /admin/**\n  }}\n",
                i % 20,
                i % 7
            ));
        }
        if extra {
            s.push_str("  allow agent -> 10.0.0.0/8:1-65535\n");
        }
        s
    };
    let (o, n) = (
        compile(&policy(&rules(false))),
        compile(&policy(&rules(true))),
    );
    for timeout_ms in [0, 1, 20] {
        let opts = prover::Options {
            timeout_ms,
            ..support::with_z3()
        };
        let r = prover::diff(&o, &n, &opts).unwrap();
        assert_eq!(r.verdict, Verdict::Inconclusive, "{timeout_ms} ms: {r:#?}");
        assert!(r.inconclusive.is_some());
    }
    // With time enough the same diff is decided.
    let r = prover::diff(&o, &n, &opts()).unwrap();
    assert_eq!(r.verdict, Verdict::NewReach, "{:#?}", r.inconclusive);
}
