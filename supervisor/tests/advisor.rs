//! The advisor's loop on a real run: a request the supervisor refused and
//! logged, handed as its deny log to `openshell-policy suggest`, becomes a
//! change that, compiled and enforced, lets that request through and
//! nothing else the run was refused.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dir, SUPERVISOR, SYSTEM, TestNet, clients, log_lines, output, stderr, stdout};

/// `openshell-policy`, beside the supervisor in this build's directory;
/// built there if this test run did not build it.
fn policy_cli() -> PathBuf {
    let cli = Path::new(SUPERVISOR).with_file_name("openshell-policy");
    if !cli.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args([
                "build",
                "-p",
                "openshell-policy",
                "--bin",
                "openshell-policy",
            ])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .status()
            .unwrap();
        assert!(status.success(), "cannot build openshell-policy");
    }
    cli
}

/// Runs `cmd` under `policy` compiled, with the deny log at `log`. The
/// server is on loopback, an internal address: the policy names it in
/// `addresses`, as a policy for an internal service does.
fn run(net: &TestNet, dir: &Dir, policy: &Path, log: &Path, cmd: &[&str]) -> String {
    let bundle = policy.with_extension("bundle");
    let (checked, compiled) = policy_lang::load::compile_file(policy, None).unwrap();
    let compiled =
        compiled.unwrap_or_else(|| panic!("{}: {:?}", policy.display(), checked.diagnostics));
    std::fs::write(&bundle, compiled.to_bytes()).unwrap();
    std::fs::set_permissions(&bundle, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let _ = std::fs::remove_file(log);
    let mut args = vec![
        "run",
        "--bundle",
        bundle.to_str().unwrap(),
        "--workdir",
        dir.path().to_str().unwrap(),
        "--resolve",
        "local.test=127.0.0.1",
        "--log",
        log.to_str().unwrap(),
        "--",
    ];
    args.extend_from_slice(cmd);
    let out = output(net.supervisor(&args, None));
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn a_logged_denial_becomes_a_suggestion_that_lets_the_request_through() {
    let net = TestNet::new();
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    let policy = dir.join("advised.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"advised\" {{\n  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  binaries clients = {}\n\n  allow clients -> local.test:{port} http {{\n    addresses 127.0.0.1\n    allow GET /v1/items\n  }}\n}}\n",
            clients()
        ),
    )
    .unwrap();
    let log = dir.log();
    let curl = |path: &str| {
        format!(
            "/usr/bin/curl -s -o /dev/null -w '{path} %{{http_code}}\\n' http://local.test:{port}{path}"
        )
    };
    let script = [curl("/v1/items"), curl("/v1/orders"), curl("/v2/admin")].join("; ");
    let cmd = ["/usr/bin/bash", "-c", &script];
    let before = run(&net, &dir, &policy, &log, &cmd);
    assert_eq!(before, "/v1/items 200\n/v1/orders 403\n/v2/admin 403\n");
    let denied = log_lines(&log);
    assert_eq!(denied.len(), 2, "{denied:?}");

    // The log as the supervisor wrote it; one denial of the two is asked
    // for, the other left out.
    let wanted: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("/v1/orders"))
        .map(str::to_owned)
        .collect();
    assert_eq!(wanted.len(), 1, "{denied:?}");
    let asked = dir.join("asked.log");
    std::fs::write(&asked, wanted.join("\n") + "\n").unwrap();
    let suggested = Command::new(policy_cli())
        .arg("suggest")
        .arg(&policy)
        .arg("--from")
        .arg(&asked)
        .args(["--format", "policy"])
        .output()
        .unwrap();
    assert!(suggested.status.success(), "{}", stderr(&suggested));
    let patched_text = stdout(&suggested);
    assert!(
        patched_text.contains("allow GET /v1/orders"),
        "{patched_text}"
    );
    assert!(!patched_text.contains("/v2/admin"), "{patched_text}");
    let patched = dir.join("patched.policy");
    std::fs::write(&patched, &patched_text).unwrap();

    let after = run(&net, &dir, &patched, &log, &cmd);
    assert_eq!(
        after,
        "/v1/items 200\n/v1/orders 200\n/v2/admin 403\n",
        "under the suggestion:\n{patched_text}\n{}",
        stderr(&suggested)
    );
}
