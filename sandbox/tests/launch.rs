//! `openshell-sandbox --plan-fd P --control-fd C` started as the supervisor
//! starts it (`enforcer::spawn_init`, as root, in new PID, mount and
//! network namespaces): it applies the plan's kernel tables to the
//! workload, hands the listener up over the link, and reports the status.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use enforcer::{ExitStatus, InitSpec, SpawnError};
use sandbox::plan::{LaunchPlan, PLAN_VERSION};

const SANDBOX: &str = env!("CARGO_BIN_EXE_openshell-sandbox");

fn plan(workdir: &Path, script: &str) -> LaunchPlan {
    let policy = workdir.join("t.policy");
    std::fs::write(
        &policy,
        "policy \"t\" {\n  landlock hard min_abi 1\n  fs exec /usr /bin /lib /lib64\n  fs read /etc /proc\n  fs write workdir\n  allow /usr/bin/curl -> example.com:443\n}\n",
    )
    .unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&policy, None).unwrap();
    let bundle = bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    LaunchPlan {
        version: PLAN_VERSION,
        landlock: bundle.enforcement.landlock,
        deny: bundle.enforcement.seccomp.deny,
        notify: bundle.enforcement.seccomp.notify,
        workdir: workdir.as_os_str().as_bytes().to_vec(),
        read_only: Vec::new(),
        private_proc: true,
        root_workload: true,
        shared_pid_namespace: false,
        drop_bounding: true,
        user: None,
        program: b"/bin/sh".to_vec(),
        argv: vec![b"sh".to_vec(), b"-c".to_vec(), script.as_bytes().to_vec()],
        envp: vec![b"PATH=/usr/bin:/bin".to_vec()],
        relay: None,
    }
}

fn spawn(plan: &LaunchPlan) -> Result<enforcer::Pending, SpawnError> {
    spawn_with_noexec(plan, &[])
}

fn spawn_with_noexec(
    plan: &LaunchPlan,
    noexec: &[CString],
) -> Result<enforcer::Pending, SpawnError> {
    let bytes = plan.to_bytes();
    let plan_fd = enforcer::memory_file(c"launch-plan", &bytes).unwrap();
    let program = CString::new(SANDBOX).unwrap();
    enforcer::spawn_init(&InitSpec {
        new_netns: true,
        bind_file: None,
        new_pidns: true,
        noexec,
        exec_again: &[],
        stdio: [None, None, None],
        program: &program,
        args: &[],
        plan: plan_fd.as_fd(),
        relay: None,
    })
}

#[test]
fn the_sandbox_applies_the_plan_and_hands_the_listener_up() {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let script = format!(
        "echo $$ $PPID > {w}/ids; cat /proc/1/cmdline > {w}/init; echo x > {o}/planted || echo refused > {w}/outside; exit 9",
        w = work.path().display(),
        o = outside.path().display()
    );
    let mut pending = spawn(&plan(work.path(), &script)).unwrap();
    let listener = pending
        .take_listener()
        .expect("the listener came over the link");
    let link = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        listener.as_raw_fd()
    }))
    .unwrap();
    assert_eq!(link, Path::new("anon_inode:seccomp notify"));
    assert_ne!(pending.workload_pid(), pending.pid());
    let running = pending.start().unwrap();
    assert_eq!(running.wait().unwrap(), ExitStatus::Code(9));
    // The workload ran as the child of PID 1, which is openshell-sandbox.
    let ids = std::fs::read_to_string(work.path().join("ids")).unwrap();
    assert_eq!(ids.split_whitespace().nth(1), Some("1"), "{ids}");
    let init = std::fs::read(work.path().join("init")).unwrap();
    assert!(init.starts_with(SANDBOX.as_bytes()), "{init:?}");
    // Landlock from the plan's table: nothing written outside the workdir.
    assert!(!outside.path().join("planted").exists());
    assert_eq!(
        std::fs::read_to_string(work.path().join("outside")).unwrap(),
        "refused\n"
    );
}

#[test]
fn a_plan_the_sandbox_cannot_apply_stops_the_launch_with_its_reason() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("ran");
    let mut plan = plan(work.path(), &format!("touch {}", marker.display()));
    plan.version = PLAN_VERSION + 1;
    let e = spawn(&plan).unwrap_err();
    assert!(
        matches!(&e, SpawnError::Init(why) if why.contains("version")),
        "{e}"
    );
    let mut plan = self::plan(work.path(), &format!("touch {}", marker.display()));
    plan.program = b"/no/such/program".to_vec();
    let pending = spawn(&plan).unwrap();
    let e = pending.start().unwrap_err();
    assert!(
        matches!(e, SpawnError::Exec(enforcer::Errno(libc::ENOENT))),
        "{e}"
    );
    let mut plan = self::plan(work.path(), &format!("touch {}", marker.display()));
    plan.workdir = b"/no/such/dir".to_vec();
    let e = spawn(&plan).unwrap_err();
    assert!(
        matches!(&e, SpawnError::Step { step, errno } if step.contains("working directory") && errno.raw() == libc::ENOENT),
        "{e}"
    );
    assert!(!marker.exists());
}

#[test]
fn a_workload_whose_supervisor_never_says_go_never_runs() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("ran");
    let pending = spawn(&plan(work.path(), &format!("touch {}", marker.display()))).unwrap();
    let init = pending.pid();
    drop(pending);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!marker.exists());
    assert!(!Path::new(&format!("/proc/{init}")).exists());
}

/// The workload may write the tree that holds openshell-sandbox (a build
/// directory inside its working directory): the tree is mounted `noexec`
/// for it, and the sandbox still starts, the program having been opened
/// before the mount.
#[test]
fn the_sandbox_starts_from_a_tree_mounted_noexec_for_the_workload() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("ran");
    // Not `touch`: the plan's workload is root, which may not set times.
    let plan = plan(work.path(), &format!("echo ran > {}", marker.display()));
    let dir = Path::new(SANDBOX).parent().unwrap();
    let noexec = [CString::new(dir.as_os_str().as_bytes()).unwrap()];
    let pending = spawn_with_noexec(&plan, &noexec).unwrap();
    assert_eq!(
        pending.start().unwrap().wait().unwrap(),
        ExitStatus::Code(0)
    );
    assert!(marker.exists());
}
