//! `diff --prove` on hand-written changes: each widening is found with a
//! witness that replays through the reference evaluator, and equivalent
//! rewrites produce no finding.

mod support;

use prover::Verdict;
use support::*;

const CRED: &str = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }";

fn with_cred(rules: &str) -> String {
    format!("{CRED}\n  binaries agent = /usr/bin/curl /usr/bin/gh\n{rules}")
}

#[test]
fn identical_policies_prove_safe() {
    let p = with_cred("  allow agent -> api.github.com:443 http read-only");
    let r = diff(&p, &p);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
    assert!(r.findings.is_empty());
}

#[test]
fn read_only_to_read_write_is_a_capability_expansion() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let new = with_cred("  allow agent -> api.github.com:443 http read-write");
    let r = diff(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened);
    assert_eq!(categories(&r), ["capability_expansion"]);
    assert_verified(&r);
    let f = &r.findings[0];
    assert!(
        ["POST", "PUT", "PATCH"].contains(&f.witness.method.as_deref().unwrap_or("")),
        "{f:#?}"
    );
    assert_eq!(f.witness.host, "api.github.com");
    assert_eq!(f.new_rule.as_ref().unwrap().line, 12);
    assert!(
        f.old_reason.contains("narrower pattern"),
        "{}",
        f.old_reason
    );
    // One region for the whole change, not one per method or binary.
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
}

#[test]
fn removing_a_deny_rule_is_found_with_the_rule_as_reason() {
    let old = with_cred(
        "  allow agent -> api.github.com:443 http read-write {\n    deny * /repos/*/*/rulesets/**\n  }",
    );
    let new = with_cred("  allow agent -> api.github.com:443 http read-write");
    let r = diff(&old, &new);
    assert_eq!(categories(&r), ["capability_expansion"]);
    assert_verified(&r);
    let f = &r.findings[0];
    let path = f.witness.path.as_deref().unwrap_or("");
    assert!(path.starts_with("/repos/"), "{f:#?}");
    assert!(path.contains("/rulesets"), "{f:#?}");
    assert!(f.old_reason.contains("deny rule at"), "{}", f.old_reason);
}

#[test]
fn a_new_credentialed_host_is_credential_reach() {
    let old = with_cred("  allow agent -> example.com:443 http read-only");
    let new = with_cred(
        "  allow agent -> example.com:443 http read-only\n  allow agent -> api.github.com:443 http read-only",
    );
    let r = diff(&old, &new);
    assert_eq!(categories(&r), ["credential_reach_expansion"]);
    assert_verified(&r);
    assert!(r.findings[0].old_reason.starts_with("default deny"));
}

#[test]
fn a_wider_wildcard_reports_the_region_not_each_host() {
    let cred = "  credential raw {\n    secret env T\n    inject header Authorization \"Bearer {secret}\"\n    hosts *.githubusercontent.com\n  }\n  binaries agent = /usr/bin/curl";
    let old = format!("{cred}\n  allow agent -> raw.githubusercontent.com:443 http read-only");
    let new = format!("{cred}\n  allow agent -> *.githubusercontent.com:443 http read-only");
    let r = diff(&old, &new);
    assert_eq!(categories(&r), ["credential_reach_expansion"]);
    assert_verified(&r);
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.region.host_count, "infinite");
    assert!(
        f.region
            .text
            .contains("every host matching `*.githubusercontent.com`"),
        "{}",
        f.region.text
    );
    assert!(
        f.witness.host.ends_with(".githubusercontent.com")
            && f.witness.host != "raw.githubusercontent.com"
    );
}

#[test]
fn enforce_to_audit_is_a_downgrade() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let new = with_cred("  allow agent -> api.github.com:443 http audit read-only");
    let r = diff(&old, &new);
    assert_eq!(categories(&r), ["enforcement_downgrade"]);
    assert_verified(&r);
}

#[test]
fn uninspected_route_to_a_credentialed_host_is_an_l7_bypass() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let new = with_cred(
        "  allow agent -> api.github.com:443 http read-only\n  allow /usr/bin/nc -> api.github.com:443 uninspected_credentials",
    );
    let r = diff(&old, &new);
    assert!(
        categories(&r).contains(&"l7_bypass_credentialed"),
        "{:#?}",
        r.findings
    );
    assert_verified(&r);
}

/// An uninspected rule to a credentialed host without
/// `uninspected_credentials` is refused at connect (as OpenShell refuses
/// it): adding one widens nothing, adding the flag to it is the widening,
/// and moving a credentialed REST rule to it narrows.
#[test]
fn the_credential_guard_closes_uninspected_rules_until_the_flag_opens_them() {
    let inspected = "  allow agent -> api.github.com:443 http read-only";
    let guarded = "  allow /usr/bin/nc -> api.github.com:443";
    let skipped = "  allow /usr/bin/nc -> api.github.com:443 http tls skip read-only";
    let opened = "  allow /usr/bin/nc -> api.github.com:443 uninspected_credentials";
    let old = with_cred(inspected);
    for closed in [guarded, skipped] {
        let r = diff(&old, &with_cred(&format!("{inspected}\n{closed}")));
        assert_eq!(
            r.verdict,
            Verdict::NoNewAccess,
            "{closed}: {:#?}",
            r.findings
        );
        assert!(r.findings.is_empty(), "{closed}: {:#?}", r.findings);
    }
    let r = diff(
        &with_cred(&format!("{inspected}\n{guarded}")),
        &with_cred(&format!("{inspected}\n{opened}")),
    );
    assert_eq!(r.verdict, Verdict::Widened);
    assert!(
        categories(&r).contains(&"l7_bypass_credentialed"),
        "{:#?}",
        r.findings
    );
    assert_verified(&r);
    let r = diff(&old, &with_cred("  allow agent -> api.github.com:443"));
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn a_wider_cidr_is_counted_in_addresses() {
    let secret =
        "  secret tok file /tmp/token hosts internal.example.com\n  binaries agent = /usr/bin/curl";
    let old = format!("{secret}\n  allow agent -> 10.0.0.0/24:443");
    let new = format!("{secret}\n  allow agent -> 10.0.0.0/8:443");
    let r = diff(&old, &new);
    assert!(
        categories(&r).contains(&"credential_reach_expansion"),
        "{:#?}",
        r.findings
    );
    assert_verified(&r);
    let f = r
        .findings
        .iter()
        .find(|f| f.category.name() == "credential_reach_expansion")
        .unwrap();
    assert_eq!(f.region.address_count, "16776960", "{:#?}", f.region);
}

#[test]
fn metadata_addresses_are_found_cidr_aware() {
    let old = "  binaries agent = /usr/bin/curl\n  allow agent -> 10.0.0.0/8:80";
    let new = "  binaries agent = /usr/bin/curl\n  allow agent -> 10.0.0.0/8:80\n  allow agent -> 169.254.0.0/16:80";
    let r = diff(old, new);
    assert_eq!(categories(&r), ["metadata_reach"]);
    assert_verified(&r);
    assert_eq!(r.findings[0].region.address_count, "65536");
    assert_eq!(r.findings[0].witness.host, "169.254.169.254");
}

#[test]
fn a_glob_that_now_covers_git_is_found() {
    let old = with_cred("  allow /usr/bin/curl -> api.github.com:443 http read-only");
    let new = with_cred("  allow /usr/bin/* -> api.github.com:443 http read-only");
    let r = diff(&old, &new);
    assert!(
        categories(&r).contains(&"credential_reach_expansion"),
        "{:#?}",
        r.findings
    );
    assert!(
        categories(&r).contains(&"l7_bypass_credentialed"),
        "git bypasses L7: {:#?}",
        r.findings
    );
    assert_verified(&r);
}

#[test]
fn dropping_a_pin_is_found() {
    let pin = "a".repeat(64);
    let old = format!(
        "{CRED}\n  binaries pinned = /usr/bin/curl sha256:{pin}\n  allow pinned -> api.github.com:443 http read-only"
    );
    let new = format!("{CRED}\n  allow /usr/bin/curl -> api.github.com:443 http read-only");
    let r = diff(&old, &new);
    assert_eq!(categories(&r), ["credential_reach_expansion"]);
    assert_verified(&r);
    assert_eq!(r.findings[0].witness.sha256, None);
}

#[test]
fn widening_a_credential_binding_attaches_it_to_more_requests() {
    let cred = |paths: &str| {
        format!(
            "  credential gh {{\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n    paths {paths}\n  }}\n  binaries agent = /usr/bin/curl"
        )
    };
    let rule = "  allow agent -> api.github.com:443 http read-only";
    let r = diff(
        &format!("{}\n{rule}", cred("/repos/**")),
        &format!("{}\n{rule}", cred("/**")),
    );
    assert_eq!(categories(&r), ["credential_reach_expansion"]);
    assert_verified(&r);
    assert!(
        r.findings[0].message.contains("now attached"),
        "{}",
        r.findings[0].message
    );
}

#[test]
fn a_binary_under_a_writable_tree_is_plantable() {
    // Under `landlock hard` such a rule is a compile error (E0410).
    let old = "  landlock best_effort\n  fs write /sandbox\n  fs exec /sandbox\n  allow /usr/bin/curl -> example.com:443";
    let new = "  landlock best_effort\n  fs write /sandbox\n  fs exec /sandbox\n  allow /usr/bin/curl /sandbox/bin/* -> example.com:443";
    let r = diff(old, new);
    assert_eq!(categories(&r), ["writable_binary_identity"]);
    assert_verified(&r);
    assert!(r.findings[0].witness.binary.starts_with("/sandbox/bin/"));
}

#[test]
fn a_readable_secret_with_a_new_way_out_is_exposed() {
    let old = "  fs read /run/secrets\n  secret tok file /run/secrets/tok hosts api.example.com\n  allow /usr/bin/python3 -> pypi.org:443 http read-only";
    let new = "  fs read /run/secrets\n  secret tok file /run/secrets/tok hosts api.example.com\n  allow /usr/bin/python3 -> pypi.org:443 http read-only\n  allow /usr/bin/curl -> paste.example.net:443";
    let r = diff(old, new);
    assert!(
        categories(&r).contains(&"secret_exposure"),
        "{:#?}",
        r.findings
    );
    assert_verified(&r);
    let f = r
        .findings
        .iter()
        .find(|f| f.category.name() == "secret_exposure")
        .unwrap();
    assert_eq!(f.witness.binary, "/usr/bin/curl");
}

// ---- Equivalent rewrites: no finding. ----

fn assert_equivalent(old: &str, new: &str) {
    let r = diff(old, new);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{:#?}", r.findings);
    let r = diff(new, old);
    assert_eq!(
        r.verdict,
        Verdict::NoNewAccess,
        "reverse: {:#?}",
        r.findings
    );
}

#[test]
fn reordering_rules_is_not_a_widening() {
    let a = "  allow agent -> api.github.com:443 http read-only\n  allow agent -> uploads.github.com:443 http {\n    allow POST /repos/**\n  }";
    let b = "  allow agent -> uploads.github.com:443 http {\n    allow POST /repos/**\n  }\n  allow agent -> api.github.com:443 http read-only";
    assert_equivalent(&with_cred(a), &with_cred(b));
}

#[test]
fn renaming_binary_sets_is_not_a_widening() {
    let a = format!(
        "{CRED}\n  binaries agent = /usr/bin/curl /usr/bin/gh\n  allow agent -> api.github.com:443 http read-only"
    );
    let b = format!(
        "{CRED}\n  binaries tools = /usr/bin/gh /usr/bin/curl\n  allow tools -> api.github.com:443 http read-only"
    );
    assert_equivalent(&a, &b);
}

#[test]
fn splitting_a_rule_is_not_a_widening() {
    let a = with_cred("  allow agent -> api.github.com:443 http read-only");
    let b = with_cred(
        "  allow /usr/bin/curl -> api.github.com:443 http read-only\n  allow /usr/bin/gh -> api.github.com:443 http read-only",
    );
    assert_equivalent(&a, &b);
    let c = with_cred(
        "  allow agent -> api.github.com:443 http {\n    allow GET HEAD OPTIONS /**\n  }",
    );
    assert_equivalent(&a, &c);
}

#[test]
fn the_same_set_written_differently_is_not_a_widening() {
    let a = with_cred("  allow agent -> api.github.com:443 http {\n    allow GET /repos/**\n  }");
    let b = with_cred(
        "  allow agent -> api.github.com:443 http {\n    allow GET /repos /repos/*/**\n  }",
    );
    assert_equivalent(&a, &b);
    let c = with_cred("  allow agent -> api.github.com:443 http {\n    allow GET /v[0-9]/x\n  }");
    let d = with_cred(
        "  allow agent -> api.github.com:443 http {\n    allow GET /v[0-4]/x /v[5-9]/x\n  }",
    );
    assert_equivalent(&c, &d);
    let e = "  allow /usr/bin/curl -> 10.0.0.0/9,10.128.0.0/9:443";
    let f = "  allow /usr/bin/curl -> 10.0.0.0/8:443";
    assert_equivalent(e, f);
    let g = "  allow /usr/bin/curl -> example.com:80,81,82,443";
    let h = "  allow /usr/bin/curl -> example.com:80-82,443";
    assert_equivalent(g, h);
}

#[test]
fn yaml_and_its_import_are_equivalent() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shared/fixtures/openshell");
    let creds = fixtures.join("prover-credentials.yaml");
    for name in [
        "prover-policy.yaml",
        "quickstart-policy.yaml",
        "supervisor-sandbox-policy.yaml",
    ] {
        let yaml = fixtures.join(name);
        if !yaml.exists() {
            continue;
        }
        let src = policy_lang::load::read_source(&yaml).unwrap();
        let (doc, _) = policy_lang::import::yaml_to_document(&src);
        let text = policy_lang::fmt::format_document(&doc.unwrap());
        let dir = scratch();
        let imported = dir.join("imported.policy");
        std::fs::write(&imported, text).unwrap();
        let load = |p: &std::path::Path| {
            policy_lang::load::compile_file(p, Some(&creds))
                .unwrap()
                .1
                .unwrap()
        };
        let (a, b) = (load(&yaml), load(&imported));
        for (x, y) in [(&a, &b), (&b, &a)] {
            let r = prover::diff(x, y, &opts()).unwrap();
            assert_eq!(r.verdict, Verdict::NoNewAccess, "{name}: {:#?}", r.findings);
        }
    }
}

#[test]
fn contract_widening_on_the_openshell_fixture() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shared/fixtures/openshell");
    let yaml = std::fs::read_to_string(fixtures.join("prover-policy.yaml")).unwrap();
    let creds = fixtures.join("prover-credentials.yaml");
    let dir = scratch();
    let (old, new) = (dir.join("old.yaml"), dir.join("new.yaml"));
    std::fs::write(&old, &yaml).unwrap();
    std::fs::write(
        &new,
        yaml.replace("access: read-only", "access: read-write"),
    )
    .unwrap();
    let load = |p: &std::path::Path| {
        policy_lang::load::compile_file(p, Some(&creds))
            .unwrap()
            .1
            .unwrap()
    };
    let r = prover::diff(&load(&old), &load(&new), &opts()).unwrap();
    assert_eq!(r.verdict, Verdict::Widened);
    assert!(categories(&r).contains(&"capability_expansion"));
    assert_verified(&r);
}

#[test]
fn accepted_risks_suppress_only_whole_regions_and_expire() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let new = with_cred("  allow agent -> api.github.com:443 http read-write");
    let (o, n) = (compile(&policy(&old)), compile(&policy(&new)));
    let run = |yaml: &str| {
        let mut opts = opts();
        opts.accepted = prover::accepted::parse("risks.yaml", yaml).unwrap();
        prover::diff(&o, &n, &opts).unwrap()
    };
    let whole = run(
        "accepted_risks:\n  - query: capability_expansion\n    reason: reviewed\n    accepted_by: sec\n    endpoint: api.github.com:443\n",
    );
    // Accepted, it no longer blocks; but the change still adds something.
    assert_eq!(whole.verdict, Verdict::NewReach);
    assert!(
        whole.findings.iter().all(|f| f.suppressed),
        "{:#?}",
        whole.findings
    );
    let partial = run(
        "accepted_risks:\n  - query: capability_expansion\n    reason: curl only\n    accepted_by: sec\n    binary: /usr/bin/curl\n",
    );
    assert_eq!(
        partial.verdict,
        Verdict::Widened,
        "region has gh too: {:#?}",
        partial.findings
    );
    // The finding says why the entry did not suppress it.
    let note = partial.findings[0].acceptance.as_ref().unwrap();
    let why = note.not_covered.as_deref().unwrap_or_default();
    assert!(
        why.contains("`binary: /usr/bin/curl`") && why.contains("`/usr/bin/gh`"),
        "{note:?}"
    );
    assert!(!partial.findings[0].suppressed);
    let ports = run(
        "accepted_risks:\n  - query: capability_expansion\n    reason: tls only\n    accepted_by: sec\n    endpoint: api.github.com:8443\n",
    );
    let note = ports.findings[0].acceptance.as_ref().unwrap();
    assert!(
        note.not_covered
            .as_deref()
            .is_some_and(|w| w.contains("ports `8443`") && w.contains("port 443")),
        "{note:?}"
    );
    let expired = run(
        "accepted_risks:\n  - query: capability_expansion\n    reason: old\n    accepted_by: sec\n    expires: 2001-01-01\n",
    );
    assert_eq!(expired.verdict, Verdict::Widened);
    let note = expired.findings[0].acceptance.as_ref().unwrap();
    assert!(note.expired.as_ref().unwrap().contains("2001-01-01"));
    let openshell = run(
        "accepted_risks:\n  - query: inference_relay\n    reason: demo\n    accepted_by: demo\n",
    );
    assert_eq!(openshell.verdict, Verdict::Widened);
    assert!(
        openshell
            .notes
            .iter()
            .any(|n| n.contains("inference_relay"))
    );
}

#[test]
fn check_reports_single_policy_risks() {
    let p = policy(&with_cred(
        "  allow agent -> api.github.com:443 http audit read-only\n  allow /usr/bin/git -> api.github.com:443\n  allow agent -> 169.254.169.254:80",
    ));
    let r = prover::check(&compile(&p), &opts()).unwrap();
    let cats = categories(&r);
    for c in [
        "enforcement_downgrade",
        "l7_bypass_credentialed",
        "metadata_reach",
    ] {
        assert!(cats.contains(&c), "{c}: {:#?}", r.findings);
    }
    assert_verified(&r);
}

#[test]
fn print_smt_dumps_the_queries() {
    let p = compile(&policy(&with_cred(
        "  allow agent -> api.github.com:443 http read-only",
    )));
    let mut o = opts();
    o.print_smt = true;
    let r = prover::diff(&p, &p, &o).unwrap();
    let smt = r.smt.unwrap();
    assert!(
        smt.contains("(declare-fun host ()"),
        "{}",
        &smt[..smt.len().min(400)]
    );
    assert!(smt.contains("; query capability_expansion"));
}

#[test]
fn a_metadata_name_beside_an_allowed_address_is_not_metadata_reach() {
    // A connection attributed to the name `metadata` but made to an allowed
    // loopback address goes to the loopback address.
    let p = policy("  allow /usr/bin/curl -> 127.0.0.1:11434 http read-only");
    let r = prover::check(&compile(&p), &opts()).unwrap();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let q = policy("  allow /usr/bin/curl -> metadata.google.internal:80 http read-only");
    let r = prover::check(&compile(&q), &opts()).unwrap();
    assert_eq!(categories(&r), ["metadata_reach"]);
    assert_verified(&r);
}

#[test]
fn a_credential_sending_another_secret_is_widened_without_new_requests() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let cases = [
        (
            "secret env GH_TOKEN",
            "secret file /root/.ssh/id_rsa",
            "secret",
        ),
        (
            "inject replace",
            "inject header X-Echo \"{secret}\"",
            "inject",
        ),
        (
            "placeholder env GH_TOKEN",
            "placeholder env OTHER",
            "placeholder",
        ),
    ];
    for (from, to, part) in cases {
        let new = old.replace(from, to);
        let r = diff(&old, &new);
        assert_eq!(r.verdict, Verdict::Widened, "{part}: {:#?}", r.credentials);
        assert!(r.findings.is_empty(), "{part}: {:#?}", r.findings);
        assert_eq!(r.credentials.len(), 1, "{part}");
        assert_eq!(r.credentials[0].changed, [part]);
        assert_eq!(r.credentials[0].code, "R0111");
    }
}

#[test]
fn a_credential_with_a_new_scope_but_the_same_secret_is_not_changed() {
    let old = with_cred("  allow agent -> api.github.com:443 http read-only");
    let new = old.replace(
        "    hosts api.github.com",
        "    hosts api.github.com\n    methods GET",
    );
    let r = diff(&old, &new);
    assert!(r.credentials.is_empty(), "{:#?}", r.credentials);
    assert_ne!(r.verdict, Verdict::Widened, "{:#?}", r.findings);
}
