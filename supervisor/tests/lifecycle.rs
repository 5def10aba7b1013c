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

/// The children of `pid`, over all its threads (the supervisor forks
/// from whichever tokio thread runs the launch).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .map(|t| std::fs::read_to_string(t.path().join("children")).unwrap_or_default())
        .collect::<Vec<_>>()
        .iter()
        .flat_map(|c| c.split_whitespace())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The live (not zombie) processes whose PID namespace is `ns`, with
/// their command lines.
fn members(ns: &std::path::Path) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if std::fs::read_link(entry.path().join("ns/pid"))
            .ok()
            .as_deref()
            != Some(ns)
        {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    found
}

#[test]
fn killing_the_supervisor_kills_the_workload_and_all_it_left_behind() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let ready = dir.join("ready");
    // The daemon is double-forked into its own session, as a server an
    // agent starts and forgets would be: only the PID namespace ends it.
    let script = format!(
        "(setsid sleep 61 &); echo > {}; exec sleep 60",
        ready.display()
    );
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
    let until = |what: &str, done: &mut dyn FnMut() -> bool| {
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    until("the workload never started", &mut || ready.exists());
    // `ip netns exec` execs the supervisor: the child is the supervisor,
    // its one child the init of the workload's PID namespace.
    let init = children(child.id());
    assert_eq!(init.len(), 1, "the supervisor's children: {init:?}");
    let ns = std::fs::read_link(format!("/proc/{}/ns/pid_for_children", init[0])).unwrap();
    assert_ne!(
        std::fs::read_link("/proc/self/ns/pid").unwrap(),
        ns,
        "the workload shares the supervisor's PID namespace"
    );
    until("the workload and its daemon never ran", &mut || {
        let cmds: Vec<String> = members(&ns).into_iter().map(|(_, c)| c).collect();
        cmds.iter().any(|c| c.starts_with("sleep 60"))
            && cmds.iter().any(|c| c.starts_with("sleep 61"))
    });
    // PID 1 is openshell-sandbox (built beside the supervisor by a
    // workspace build), no copy of the supervisor's memory.
    let init_cmd = std::fs::read(format!("/proc/{}/cmdline", init[0])).unwrap();
    let init_cmd = String::from_utf8_lossy(&init_cmd).replace('\0', " ");
    assert!(
        init_cmd.contains("openshell-sandbox --plan-fd "),
        "{init_cmd}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = (0..500).any(|_| {
        let left = members(&ns);
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
        left.is_empty()
    });
    assert!(gone, "outlived the supervisor: {:?}", members(&ns));
}

#[test]
fn a_daemon_the_workload_leaves_behind_ends_with_the_run() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = plain(&dir);
    let (ns_file, up) = (dir.join("ns"), dir.join("up"));
    // The workload names its PID namespace, starts a daemon in a session
    // of its own and exits once it runs, as an agent's command that
    // forgets its server would.
    let script = format!(
        "readlink /proc/self/ns/pid > {ns}; (setsid bash -c 'echo > {up}; exec sleep 61' &); while [ ! -e {up} ]; do sleep 0.01; done; exit 7",
        ns = ns_file.display(),
        up = up.display()
    );
    let out = net.run(&dir, &b, &[], &["/usr/bin/bash", "-c", &script]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let ns = PathBuf::from(std::fs::read_to_string(&ns_file).unwrap().trim());
    assert_ne!(std::fs::read_link("/proc/self/ns/pid").unwrap(), ns);
    let left = members(&ns);
    assert!(left.is_empty(), "outlived the run: {left:?}");
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
