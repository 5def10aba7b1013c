//! The contract around the workload: exit status, refusal of bad bundles,
//! fail-closed death, timeout, transcript, environment.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Dir, SYSTEM, TestNet, bundle, clients, output, stderr, stdout};

fn plain(dir: &Dir) -> PathBuf {
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {}\n",
        clients()
    );
    bundle(dir, "plain", &body)
}

#[test]
fn the_exit_status_is_the_workloads() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let code = |cmd: &[&str]| net.run(&dir, &b, &[], cmd).status.code();
    assert_eq!(code(&["/usr/bin/true"]), Some(0));
    assert_eq!(code(&["/usr/bin/false"]), Some(1));
    assert_eq!(code(&["/usr/bin/bash", "-c", "exit 42"]), Some(42));
    assert_eq!(
        code(&["/usr/bin/bash", "-c", "kill -TERM $$"]),
        Some(128 + 15)
    );
    assert_eq!(code(&["/nonexistent/program"]), Some(127));
}

#[test]
fn a_bad_bundle_is_refused_and_the_command_never_runs() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let good = std::fs::read_to_string(plain(&dir)).unwrap();
    let marker = dir.join("ran");
    let script = format!("touch {}", marker.display());
    let cases = [
        ("garbage", "garbage\n".to_owned()),
        (
            "version",
            good.replacen("\"format_version\":2", "\"format_version\":99", 1),
        ),
        ("digest", good.replacen("nobody", "root", 1)),
    ];
    for (name, text) in cases {
        assert_ne!(text, good, "{name}: the case must change the bundle");
        let path = dir.join(&format!("{name}.bundle"));
        std::fs::write(&path, text).unwrap();
        let out = net.run(&dir, &path, &[], &["/usr/bin/bash", "-c", &script]);
        assert_eq!(out.status.code(), Some(125), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("refusing the bundle"),
            "{name}: {}",
            stderr(&out)
        );
        assert!(!marker.exists(), "{name}: the command ran");
    }
}

#[test]
fn a_kernel_that_cannot_keep_a_hard_bundle_means_the_command_never_runs() {
    let (net, dir) = (TestNet::new(), Dir::new());
    // No compiler writes ABI 99; a newer one could ask for an ABI this
    // kernel lacks, which is the same thing to the supervisor.
    let body = format!("  landlock hard min_abi 4\n{SYSTEM}");
    let b = bundle(&dir, "hard", &body);
    let mut parsed = policy_bundle::Bundle::from_slice(&std::fs::read(&b).unwrap()).unwrap();
    parsed.enforcement.landlock.min_abi = 99;
    let parsed = policy_bundle::Bundle::new(parsed.enforcement, parsed.provenance);
    std::fs::write(&b, parsed.to_bytes()).unwrap();
    let marker = dir.join("ran");
    let out = net.run(&dir, &b, &[], &["/usr/bin/touch", marker.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("below the required 99"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists());
}

#[test]
fn killing_the_supervisor_kills_the_workload() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let pidfile = dir.join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let mut child = net
        .supervisor(
            &[
                "run",
                "--bundle",
                b.to_str().unwrap(),
                "--workdir",
                dir.path().to_str().unwrap(),
                "--",
                "/usr/bin/bash",
                "-c",
                &script,
            ],
            None,
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let pid = loop {
        if let Ok(p) = std::fs::read_to_string(&pidfile)
            && let Ok(p) = p.trim().parse::<u32>()
        {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the workload never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // `ip netns exec` execs the supervisor: the child is the supervisor.
    // The pid file is written just before bash execs `sleep`.
    let is_sleep = || {
        std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap()
            .starts_with("sleep")
    };
    while !is_sleep() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the workload never became `sleep`"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = (0..500).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let dead = state.is_empty() || state.contains(") Z ");
        if !dead {
            std::thread::sleep(Duration::from_millis(10));
        }
        dead
    });
    assert!(gone, "the workload outlived its supervisor");
}

#[test]
fn a_timeout_kills_the_workload_and_says_so() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let start = Instant::now();
    let out = net.run(&dir, &b, &["--timeout", "1"], &["/usr/bin/sleep", "30"]);
    assert_eq!(out.status.code(), Some(124));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(stderr(&out).contains("was killed"), "{}", stderr(&out));
}

#[test]
fn the_transcript_holds_stdout_and_stderr_which_still_pass_through() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let t = dir.join("transcript");
    let out = net.run(
        &dir,
        &b,
        &["--transcript", t.to_str().unwrap()],
        &["/usr/bin/bash", "-c", "echo out; echo err >&2"],
    );
    assert!(out.status.success());
    assert_eq!(stdout(&out), "out\n");
    assert!(stderr(&out).contains("err\n"));
    let text = std::fs::read_to_string(&t).unwrap();
    assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
}

#[test]
fn environment_reaches_the_workload_only_through_env_flags() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let mut cmd = net.supervisor(
        &[
            "run",
            "--bundle",
            b.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
            "--env",
            "GIVEN=yes",
            "--env",
            "PASSED",
            "--",
            "/usr/bin/env",
        ],
        None,
    );
    cmd.env("PASSED", "through").env("LEAKED", "no");
    let out = output(cmd);
    let env = stdout(&out);
    let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "GIVEN",
            "HOME",
            "LANG",
            "NODE_EXTRA_CA_CERTS",
            "PASSED",
            "PATH",
            "REQUESTS_CA_BUNDLE",
            "SSL_CERT_FILE"
        ],
        "{env}"
    );
    assert!(env.contains("GIVEN=yes\n") && env.contains("PASSED=through\n"));
}
