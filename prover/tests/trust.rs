//! The prover never reports "no new access" by omission: regressions for
//! widenings once dropped, atoms without an example, and witnesses that
//! replay through the reference evaluator exactly as printed.

#![expect(clippy::panic, reason = "tests: a failure should stop the test")]

mod support;

use policy_bundle::eval::{Evaluator, RouteKind, Verdict as EvalVerdict};
use prover::{Options, Verdict};
use support::*;

const CREDS: &str = "credentials:\n  - name: github-pat\n    type: github-pat\n    scopes: [repo]\n    injected_via: GITHUB_TOKEN\n    target_hosts: [api.github.com]\n";

fn yaml(binary: &str) -> String {
    yaml_with(&[binary])
}

fn yaml_with(binaries: &[&str]) -> String {
    let binaries: String = binaries
        .iter()
        .map(|b| format!("      - {{ path: \"{b}\" }}\n"))
        .collect();
    format!(
        "version: 1\nfilesystem_policy:\n  read_only: [/usr]\nnetwork_policies:\n  gh:\n    name: gh\n    endpoints:\n      - host: api.github.com\n        port: 443\n        protocol: rest\n        enforcement: enforce\n        access: read-only\n    binaries:\n{binaries}"
    )
}

fn compile_yaml(text: &str) -> policy_bundle::Bundle {
    compile_yaml_with_credentials(text, CREDS)
}

/// The finding's witness, replayed as printed: NEW lets it through with
/// `credential`, OLD does not let it through.
fn replays_with_credential(
    old: &policy_bundle::Bundle,
    new: &policy_bundle::Bundle,
    r: &prover::Report,
    credential: &str,
) {
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = r
        .findings
        .iter()
        .find(|f| f.category.name() == "credential_reach_expansion")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert!(f.verified, "{f:#?}");
    let req = replay(&f.witness);
    let n = Evaluator::new(new.clone()).eval(&req);
    let o = Evaluator::new(old.clone()).eval(&req);
    assert_eq!(n.decision, EvalVerdict::Allow, "{n:?}");
    assert_eq!(n.credential.as_deref(), Some(credential), "{n:?}");
    assert_eq!(o.decision, EvalVerdict::Deny, "{o:?}");
}

/// OpenShell YAML: `**` in a binary path is one or more components, so
/// `/usr/bin/**` adds `/usr/bin/x/y` to the credentialed endpoint.
#[test]
fn usr_bin_star_to_double_star_is_widened_yaml() {
    let old = compile_yaml(&yaml("/usr/bin/*"));
    let new = compile_yaml(&yaml("/usr/bin/**"));
    let r = prover::diff(&old, &new, &opts()).unwrap();
    replays_with_credential(&old, &new, &r, "github-pat");
    let w = &r.findings[0].witness;
    assert_eq!(w.binary.matches('/').count(), 4, "{w:?}");
    assert!(w.binary.starts_with("/usr/bin/"), "{w:?}");
}

/// The same change in our language (`**` is zero or more components).
#[test]
fn usr_bin_star_to_double_star_is_widened_policy() {
    let body = |bin: &str| {
        format!(
            "  credential gh {{\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }}\n  allow {bin} -> api.github.com:443 http read-only"
        )
    };
    let old = compile(&policy(&body("/usr/bin/*")));
    let new = compile(&policy(&body("/usr/bin/**")));
    let r = prover::diff(&old, &new, &opts()).unwrap();
    replays_with_credential(&old, &new, &r, "gh");
}

/// When the witness search gives up on an atom, the atom is not taken for
/// empty: the widening it carries makes the verdict inconclusive, with the
/// reason.
#[test]
fn an_atom_without_example_makes_the_verdict_inconclusive() {
    // The new atom's shortest strings have an empty first component, and
    // spelling it `x` moves them into `/usr/bin/*x*/**`: only the search,
    // which may not look, could show it.
    let old = compile_yaml(&yaml_with(&["/usr/bin/*", "/usr/bin/*x*/**"]));
    let new = compile_yaml(&yaml_with(&["/usr/bin/**", "/usr/bin/*x*/**"]));
    let o = Options {
        string_search_budget: 0,
        ..opts()
    };
    let r = prover::diff(&old, &new, &o).unwrap();
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:#?}");
    let why = r.inconclusive.as_deref().unwrap_or("");
    assert!(why.contains("no concrete executable path"), "{why}");
    assert!(why.contains("/usr/bin/*/**"), "{why}");
}

/// An uninspected route to a credentialed host: the witness is the
/// connection (binary, host, port), and replaying that connection shows
/// NEW relaying it uninspected where OLD inspected it.
#[test]
fn an_l7_bypass_has_a_connection_witness_that_replays() {
    let cred = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }\n  binaries agent = /usr/bin/curl";
    let old = compile(&policy(&format!(
        "{cred}\n  allow agent -> api.github.com:443 http read-only"
    )));
    let new = compile(&policy(&format!(
        "{cred}\n  allow agent -> api.github.com:443 uninspected_credentials"
    )));
    let r = prover::diff(&old, &new, &opts()).unwrap();
    let f = r
        .findings
        .iter()
        .find(|f| f.category.name() == "l7_bypass_credentialed")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert!(f.verified, "{f:#?}");
    let w = &f.witness;
    assert!(w.is_connection(), "{w:?}");
    assert_eq!((w.method.as_deref(), w.path.as_deref()), (None, None));
    assert_eq!(
        (w.binary.as_str(), w.host.as_str(), w.port),
        ("/usr/bin/curl", "api.github.com", 443)
    );
    assert!(
        w.url().starts_with("connection to api.github.com:443"),
        "{}",
        w.url()
    );
    let req = replay(w);
    assert!(req.http.is_none());
    let n = Evaluator::new(new.clone()).eval(&req);
    let o = Evaluator::new(old.clone()).eval(&req);
    assert_eq!(
        (n.decision, n.route),
        (EvalVerdict::Allow, Some(RouteKind::L4)),
        "{n:?}"
    );
    assert_eq!(o.route, Some(RouteKind::L7), "{o:?}");
    // No other finding of this change shows a request NEW's rules deny.
    for f in &r.findings {
        let n = Evaluator::new(new.clone()).eval(&replay(&f.witness));
        assert_ne!(n.decision, EvalVerdict::Deny, "{f:#?}");
    }
}
