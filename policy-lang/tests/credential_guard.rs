//! A rule that relays uninspected (L4, or `http` with `tls skip`) to a host
//! a credential is bound to is refused at connect unless it says
//! `uninspected_credentials`, as OpenShell's supervisor refuses such a
//! CONNECT (`EndpointCredentialGuard::blocks_connect`); transparent `tcp`
//! (OpenShell's `protocol: tcp`) is not closed, and an inspected rule
//! reaching the same destination carries the connection.

mod support;

use policy_bundle::eval::Evaluator;
use policy_lang::load;
use support::compile;

const CRED: &str = r#"  credential gh {
    secret env GH_TOKEN
    placeholder env GH_TOKEN
    inject replace
    hosts api.github.com
  }
"#;

fn connect(ev: &Evaluator, binary: &str, host: &str, port: u16) -> (bool, String) {
    let c = ev.decide_connection(binary, None, Some(host), None, port);
    (c.allowed(), c.reason.to_string())
}

#[test]
fn uninspected_rules_to_a_credentialed_host_are_refused_without_the_flag() {
    let ev = Evaluator::new(compile(
        "guard",
        &format!(
            r#"policy "guard" {{
{CRED}  allow /usr/bin/git -> api.github.com:443
  allow /usr/bin/skip -> api.github.com:443 http tls skip read-only
  allow /usr/bin/nc -> api.github.com:443 uninspected_credentials
  allow /usr/bin/tcp -> api.github.com:443 tcp
  allow /usr/bin/wild -> *.github.com:443
  allow /usr/bin/git -> example.com:443
}}
"#
        ),
    ));
    for binary in ["/usr/bin/git", "/usr/bin/skip", "/usr/bin/wild"] {
        let (allowed, reason) = connect(&ev, binary, "api.github.com", 443);
        assert!(!allowed, "{binary}: {reason}");
        assert!(
            reason.contains("credential `gh`") && reason.contains("uninspected_credentials"),
            "{binary}: {reason}"
        );
    }
    // The guard closes the rule, not the host: a wildcard rule that may
    // reach a credentialed host is closed for every host it matches.
    let (allowed, reason) = connect(&ev, "/usr/bin/wild", "raw.github.com", 443);
    assert!(!allowed, "{reason}");
    for binary in ["/usr/bin/nc", "/usr/bin/tcp"] {
        let (allowed, reason) = connect(&ev, binary, "api.github.com", 443);
        assert!(allowed, "{binary}: {reason}");
    }
    let (allowed, reason) = connect(&ev, "/usr/bin/git", "example.com", 443);
    assert!(allowed, "{reason}");
}

#[test]
fn an_inspected_rule_to_the_same_destination_carries_the_connection() {
    let ev = Evaluator::new(compile(
        "inspected",
        &format!(
            r#"policy "inspected" {{
{CRED}  allow /usr/bin/curl -> api.github.com:443
  allow /usr/bin/curl -> api.github.com:443 http read-only
}}
"#
        ),
    ));
    let c = ev.decide_connection("/usr/bin/curl", None, Some("api.github.com"), None, 443);
    assert!(c.allowed(), "{}", c.reason);
    assert!(!c.l7.is_empty(), "{}", c.reason);
}

/// OpenShell YAML imports with the same meaning: an L4 endpoint to a
/// target host of the credentials file is refused, and
/// `allow_uninspected_credentials: true` opens it.
#[test]
fn an_imported_l4_endpoint_to_a_credentialed_host_is_refused() {
    let dir = std::env::temp_dir().join(format!("osp-guard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let creds = dir.join("creds.yaml");
    std::fs::write(
        &creds,
        "credentials:\n  - name: github-pat\n    type: github-pat\n    injected_via: GITHUB_TOKEN\n    target_hosts: [api.github.com]\n",
    )
    .unwrap();
    let policy = |flag: &str| {
        format!(
            "version: 1\nlandlock: {{ compatibility: best_effort }}\nprocess: {{ run_as_user: sandbox, run_as_group: sandbox }}\nnetwork_policies:\n  git:\n    endpoints:\n      - {{ host: api.github.com, port: 443{flag} }}\n    binaries: [{{ path: /usr/bin/git }}]\n"
        )
    };
    for (name, flag, open) in [
        ("closed", "", false),
        ("open", ", allow_uninspected_credentials: true", true),
    ] {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, policy(flag)).unwrap();
        let (checked, bundle) = load::compile_file(&path, Some(&creds)).unwrap();
        let bundle = bundle.unwrap_or_else(|| panic!("{name}: {:?}", checked.diagnostics));
        let (allowed, reason) = connect(
            &Evaluator::new(bundle),
            "/usr/bin/git",
            "api.github.com",
            443,
        );
        assert_eq!(allowed, open, "{name}: {reason}");
        if !open {
            assert!(reason.contains("credential `github-pat`"), "{reason}");
            assert!(
                checked
                    .diagnostics
                    .iter()
                    .any(|d| d.code.id == "W0102" && d.message.contains("refused")),
                "{:?}",
                checked.diagnostics
            );
        }
    }
}

/// W0102's help names the fix in the source's own words: OpenShell's
/// `protocol: rest` and `allow_uninspected_credentials: true` in YAML, our
/// `http` and `uninspected_credentials` in a policy; `tls skip` is removed.
#[test]
fn the_refusal_names_the_flag_in_the_sources_own_words() {
    let dir = std::env::temp_dir().join(format!("osp-guard-help-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let creds = dir.join("creds.yaml");
    std::fs::write(
        &creds,
        "credentials:\n  - name: github-pat\n    type: github-pat\n    injected_via: GITHUB_TOKEN\n    target_hosts: [api.github.com]\n",
    )
    .unwrap();
    let yaml = dir.join("p.yaml");
    std::fs::write(
        &yaml,
        "version: 1\nlandlock: { compatibility: best_effort }\nprocess: { run_as_user: sandbox, run_as_group: sandbox }\nnetwork_policies:\n  git:\n    endpoints:\n      - { host: api.github.com, port: 443 }\n      - { host: api.github.com, port: 8443, protocol: rest, tls: skip, access: read-only, enforcement: enforce }\n    binaries: [{ path: /usr/bin/git }]\n",
    )
    .unwrap();
    let policy = dir.join("p.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"p\" {{\n  landlock best_effort\n  run_as user sandbox group sandbox\n{CRED}  allow /usr/bin/git -> api.github.com:443\n  allow /usr/bin/git -> api.github.com:8443 http tls skip read-only\n}}\n"
        ),
    )
    .unwrap();
    let mut out = String::new();
    for (path, creds) in [(&yaml, Some(creds.as_path())), (&policy, None)] {
        let (checked, _) = load::compile_file(path, creds).unwrap();
        for d in checked.diagnostics.iter().filter(|d| d.code.id == "W0102") {
            let (l, c) = d.line_col();
            let name = path.file_name().unwrap().to_string_lossy();
            out.push_str(&format!(
                "{name}:{l}:{c} {}\n  help: {}\n",
                d.message, d.help
            ));
        }
    }
    insta::assert_snapshot!(out);
}
