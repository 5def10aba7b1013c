//! The statically linked `openshell-sandbox` as a container runtime starts
//! it: PID 1 of a Podman container (crun) with no cgroup, no network, uid
//! 999, no capabilities and `no_new_privs`, its launch plan and its end of
//! the launch link passed in as descriptors 3 and 4 (`--preserve-fds`), and
//! this test on the other end as its supervisor. The sandbox forks the
//! workload with the plan's Landlock ruleset and seccomp filter and hands
//! the seccomp listener up; the test checks the waiting workload in
//! `/proc`, lets it run, and reads how it ended.
//!
//! The binary is the one `scripts/build-static-sandbox` prints, named by
//! `OPENSHELL_STATIC_SANDBOX`; the host is prepared by
//! `scripts/podman-host-prep`. Without either the tests fail, saying so.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

#[path = "podman/host.rs"]
mod host;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use enforcer::{ExitStatus, LaunchLink};
use host::{USER, confined_run, host_usr, require_podman, rootfs, static_sandbox};
use sandbox::plan::{LaunchPlan, PLAN_VERSION};

/// The longest a container may take, start to end.
const LIMIT: Duration = Duration::from_secs(60);

/// A launch plan compiled from `rules`, its Landlock table required at the
/// host kernel's own ABI: the sandbox refuses to start the workload if the
/// container sees less.
fn plan(rules: &str, program: &str, argv: &[&str]) -> LaunchPlan {
    let abi = enforcer::kernel_abi().unwrap();
    assert!(abi >= 1, "this kernel has no Landlock");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("podman.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"podman\" {{\n  landlock hard min_abi {abi}\n{rules}  allow /usr/bin/curl -> example.com:443\n}}\n"
        ),
    )
    .unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&policy, None).unwrap();
    let bundle = bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock,
        deny: bundle.enforcement.seccomp.deny,
        notify: bundle.enforcement.seccomp.notify,
        workdir: b"/".to_vec(),
        read_only: Vec::new(),
        // The container's PID namespace and /proc are the workload's own.
        private_proc: true,
        root_workload: false,
        shared_pid_namespace: false,
        // No CAP_SETPCAP: the runtime emptied the bounding set already.
        drop_bounding: false,
        user: None,
        program: program.as_bytes().to_vec(),
        argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
        envp: vec![b"PATH=/usr/bin:/bin".to_vec()],
        relay: None,
    }
}

/// A file of the root filesystem that every user may read.
fn world_readable(root: &Path, path: &str, text: &str) {
    let file = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, PermissionsExt::from_mode(0o644)).unwrap();
}

/// What the kernel says of a process in `/proc/PID/status`.
fn status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        .trim()
        .to_owned()
}

/// The waiting workload and its init, as the kernel describes them.
#[derive(Debug)]
struct Waiting {
    /// The workload's seccomp listener came over the link.
    listener_is_seccomp_notify: bool,
    sandbox_filters: u32,
    workload_filters: u32,
    workload_seccomp_mode: u32,
    workload_no_new_privs: bool,
    workload_uids: (u32, u32),
    /// Effective, permitted, inheritable, ambient, bounding.
    workload_caps: [u64; 5],
    /// The sandbox is PID 1 of the container.
    sandbox_nspid_is_1: bool,
}

/// How a container run went.
#[derive(Debug)]
struct Ran {
    waiting: Waiting,
    status: ExitStatus,
    podman: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `plan` under the static sandbox in a container on `root`, with
/// `volumes` (`-v` arguments) besides.
fn run_in_podman(root: &Path, volumes: &[&str], plan: &LaunchPlan) -> Ran {
    let pid_dir = tempfile::tempdir().unwrap();
    let pid_file = pid_dir.path().join("sandbox.pid");
    let plan_fd = enforcer::memory_file(c"launch-plan", &plan.to_bytes()).unwrap();
    let (link, init_end) = LaunchLink::pair().unwrap();
    let mut podman = confined_run();
    podman
        .args(["--preserve-fds", "2", "--pidfile"])
        .arg(&pid_file);
    for volume in volumes {
        podman.args(["-v", volume]);
    }
    podman
        .arg("--rootfs")
        .arg(root)
        .args(["/openshell-sandbox", "--plan-fd", "3", "--control-fd", "4"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    enforcer::pass_fds(&mut podman, vec![plan_fd, init_end]).unwrap();
    let child = podman
        .spawn()
        .expect("podman did not start: run scripts/podman-host-prep");
    // This process keeps no copy of the init's end: the link reads EOF
    // once the container is gone.
    drop(podman);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let waiting = match link.ready() {
            Ok(listener) => Ok(waiting(listener, &pid_file)),
            Err(e) => Err(e.to_string()),
        };
        let status = waiting.and_then(|waiting| {
            link.go().map_err(|e| e.to_string())?;
            let status = link.status().map_err(|e| e.to_string())?;
            Ok((waiting, status))
        });
        let out = child.wait_with_output().unwrap();
        let _ = tx.send((status, out));
    });
    let (outcome, out) = rx
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("the container did not end within {LIMIT:?}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (waiting, status) = outcome.unwrap_or_else(|e| {
        panic!(
            "the sandbox did not run its workload: {e}\npodman: {}\nstderr: {stderr}\n(run scripts/podman-host-prep if podman itself failed)",
            out.status
        )
    });
    Ran {
        waiting,
        status,
        podman: out.status,
        stdout,
        stderr,
    }
}

/// Reads the waiting workload and its init from `/proc`: the init's pid
/// from Podman's pid file, the workload as its only child.
fn waiting(listener: Option<OwnedFd>, pid_file: &Path) -> Waiting {
    let listener = listener.expect("the sandbox hands the listener up: the plan has no relay");
    let link = std::fs::read_link(format!("/proc/self/fd/{}", listener.as_raw_fd())).unwrap();
    let sandbox: u32 = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let children =
        std::fs::read_to_string(format!("/proc/{sandbox}/task/{sandbox}/children")).unwrap();
    let [workload] = children
        .split_whitespace()
        .map(|p| p.parse::<u32>().unwrap())
        .collect::<Vec<_>>()[..]
    else {
        panic!("the sandbox should have one child, it has `{children}`");
    };
    let filters = |pid| status_field(pid, "Seccomp_filters").parse().unwrap();
    Waiting {
        listener_is_seccomp_notify: link.as_os_str().as_bytes() == b"anon_inode:seccomp notify",
        sandbox_filters: filters(sandbox),
        workload_filters: filters(workload),
        workload_seccomp_mode: enforcer::seccomp_mode(workload).unwrap(),
        workload_no_new_privs: enforcer::no_new_privs(workload).unwrap(),
        workload_uids: enforcer::real_and_effective_uid(workload).unwrap(),
        workload_caps: ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"]
            .map(|set| enforcer::caps(workload, set).unwrap()),
        sandbox_nspid_is_1: status_field(sandbox, "NSpid").split_whitespace().last() == Some("1"),
    }
}

/// What every run shows of the waiting workload: the listener came up
/// (seccomp user notification works with no capability), the workload
/// carries the sandbox's filter on top of the runtime's, runs as the
/// container's user with `no_new_privs` and no capability, and its init is
/// PID 1.
fn assert_confined(w: &Waiting) {
    assert!(w.listener_is_seccomp_notify, "{w:?}");
    assert!(w.sandbox_nspid_is_1, "{w:?}");
    assert_eq!(w.workload_seccomp_mode, 2, "{w:?}");
    assert!(w.workload_filters > w.sandbox_filters, "{w:?}");
    assert!(w.workload_no_new_privs, "{w:?}");
    assert_eq!(w.workload_uids, (USER, USER), "{w:?}");
    assert_eq!(w.workload_caps, [0; 5], "{w:?}");
}

/// In a root filesystem with no C library, no shell and no loader (the
/// static sandbox alone and two small files), the sandbox starts, Landlock
/// at the host's ABI and the seccomp listener come up, and the workload
/// (the sandbox binary again, asked to read a bootstrap file) is refused
/// the file its ruleset does not grant and reads the one it does.
#[test]
fn the_static_sandbox_confines_its_workload_in_a_root_with_no_c_library() {
    require_podman();
    let sandbox = static_sandbox();
    let root = rootfs(&sandbox, |root| {
        world_readable(root, "/granted/bootstrap.json", "{}");
        world_readable(root, "/other/bootstrap.json", "{}");
    });
    let entries: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !entries
            .iter()
            .any(|e| ["lib", "lib64", "usr", "bin"].contains(&e.as_str())),
        "{entries:?}"
    );
    let rules = "  fs exec /openshell-sandbox\n  fs read /granted\n";
    for (file, said) in [
        // Readable by uid 999, but not granted: Landlock refuses it.
        (
            "/other/bootstrap.json",
            "the bootstrap file `/other/bootstrap.json`: cannot read it: Permission denied (os error 13)",
        ),
        // Granted: read, then not deleted (the tree is not writable).
        (
            "/granted/bootstrap.json",
            "the bootstrap file `/granted/bootstrap.json`: cannot delete it",
        ),
    ] {
        let plan = plan(
            rules,
            "/openshell-sandbox",
            &["openshell-sandbox", "--bootstrap", file],
        );
        let ran = run_in_podman(root.path(), &[], &plan);
        assert_confined(&ran.waiting);
        // openshell-sandbox's own "cannot do its job".
        assert_eq!(ran.status, ExitStatus::Code(125), "{ran:?}");
        assert_eq!(ran.podman.code(), Some(125), "{ran:?}");
        assert!(
            ran.stderr.contains(&format!("openshell-sandbox: {said}")),
            "{ran:?}"
        );
    }
}

/// A root filesystem that borrows the host's `/usr` read-only: a shell
/// workload runs under the sandbox, writes where the ruleset lets it, is
/// refused a file and a directory that every user may read and write but
/// the ruleset does not grant, and its exit code comes back over the link.
#[test]
fn a_shell_runs_confined_under_the_static_sandbox_on_the_hosts_usr() {
    require_podman();
    let sandbox = static_sandbox();
    let mut volumes = Vec::new();
    let root = rootfs(&sandbox, |root| {
        world_readable(root, "/other/secret", "secret\n");
        // Writable by every user: only the ruleset keeps the workload out.
        std::fs::set_permissions(root.join("other"), PermissionsExt::from_mode(0o1777)).unwrap();
        volumes = host_usr(root);
    });
    let volumes: Vec<&str> = volumes.iter().map(String::as_str).collect();
    let rules = "  fs exec /usr /bin /lib /lib64 /openshell-sandbox\n  fs write /tmp\n";
    let script = "echo uid=$(id -u) gid=$(id -g); \
         echo written > /tmp/out && cat /tmp/out; \
         cat /other/secret || echo refused; \
         echo planted > /other/planted || echo refused too; \
         exit 7";
    let plan = plan(rules, "/bin/sh", &["sh", "-c", script]);
    let ran = run_in_podman(root.path(), &volumes, &plan);
    assert_confined(&ran.waiting);
    assert_eq!(ran.status, ExitStatus::Code(7), "{ran:?}");
    assert_eq!(ran.podman.code(), Some(7), "{ran:?}");
    assert_eq!(
        ran.stdout,
        format!("uid={USER} gid={USER}\nwritten\nrefused\nrefused too\n"),
        "{ran:?}"
    );
    assert!(!root.path().join("other/planted").exists());
    assert!(
        ran.stderr.contains("/other/secret: Permission denied"),
        "{ran:?}"
    );
}

/// `openshell-sandbox preflight` in a confined container (no capability,
/// Podman's default seccomp profile, a root with no C library) passes every
/// check but `noexec` mounts; under a profile that refuses `seccomp(2)` it
/// fails, names the step, and exits 1.
#[test]
fn the_preflight_passes_in_a_confined_container_and_fails_where_seccomp_is_refused() {
    require_podman();
    let sandbox = static_sandbox();
    let root = rootfs(&sandbox, |_| {});
    let run = |extra: &[&str]| {
        let mut podman = confined_run();
        podman
            .args(extra)
            .arg("--rootfs")
            .arg(root.path())
            .args(["/openshell-sandbox", "preflight"]);
        let out = podman.output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a report ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), report)
    };
    let (code, report) = run(&[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["socket_installed"], true, "{report:#}");
    assert_eq!(report["noexec_mounts"], false, "{report:#}");

    let profile = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        profile.path(),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["seccomp"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#,
    )
    .unwrap();
    std::fs::set_permissions(profile.path(), PermissionsExt::from_mode(0o644)).unwrap();
    let seccomp = format!("seccomp={}", profile.path().display());
    let (code, report) = run(&["--security-opt", &seccomp]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["ok"], false, "{report:#}");
    assert_eq!(report["seccomp_listener"], false, "{report:#}");
    let failures = report["failures"].to_string();
    assert!(failures.contains("seccomp"), "{report:#}");
}
