//! Landlock as the supervisor applies a bundle: attacks from bash inside
//! the sandbox that must fail, next to the allowed work that must succeed.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use common::{Dir, SYSTEM, TestNet, bundle, clients, output, stderr, stdout};

/// A sandbox with `ro/` read-only, `rw/` and the workdir writable, and a
/// `secret/` directory that no rule names.
struct Setup {
    net: TestNet,
    dir: Dir,
    work: std::path::PathBuf,
    bundle: std::path::PathBuf,
}

fn setup() -> Setup {
    let net = TestNet::new();
    let dir = Dir::new();
    let ro = dir.mkdir("ro");
    let rw = dir.mkdir("rw");
    let secret = dir.mkdir("secret");
    let work = dir.mkdir("work");
    std::fs::write(ro.join("file"), "keep my length").unwrap();
    std::fs::write(rw.join("file"), "mine").unwrap();
    std::fs::write(secret.join("key"), "secret").unwrap();
    for f in [ro.join("file"), rw.join("file"), secret.join("key")] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs read {}\n  fs write {} workdir\n  run_as user nobody group nogroup\n  binaries clients = {}\n",
        ro.display(),
        rw.display(),
        clients()
    );
    let bundle = bundle(&dir, "fs", &body);
    Setup {
        net,
        dir,
        work,
        bundle,
    }
}

impl Setup {
    /// Runs `script` with bash in the sandbox; returns stdout.
    fn bash(&self, script: &str) -> String {
        let out = output(self.net.supervisor(
            &[
                "run",
                "--bundle",
                self.bundle.to_str().unwrap(),
                "--workdir",
                self.work.to_str().unwrap(),
                "--",
                "/usr/bin/bash",
                "-c",
                script,
            ],
            None,
        ));
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    }

    fn path(&self, p: &str) -> String {
        self.dir.join(p).display().to_string()
    }
}

/// `ok` or `denied` for each command, one per line.
fn attempts(cmds: &[String]) -> String {
    cmds.iter()
        .map(|c| format!("if {{ {c}; }} >/dev/null 2>&1; then echo ok; else echo denied; fi\n"))
        .collect()
}

#[test]
fn writing_outside_the_write_paths_fails() {
    let s = setup();
    let out = s.bash(&attempts(&[
        "echo x > /etc/osp-test-write".into(),
        format!("echo x > {}", s.path("ro/new")),
        format!("echo x > {}", s.path("rw/new")),
        "echo x > ./in-workdir".into(),
    ]));
    assert_eq!(out, "denied\ndenied\nok\nok\n");
    assert!(!std::path::Path::new("/etc/osp-test-write").exists());
}

#[test]
fn reading_an_unlisted_path_fails() {
    let s = setup();
    let out = s.bash(&attempts(&[
        format!("cat {}", s.path("secret/key")),
        format!("ls {}", s.path("secret")),
        format!("cat {}", s.path("ro/file")),
    ]));
    assert_eq!(out, "denied\ndenied\nok\n");
}

#[test]
fn executing_from_a_path_without_exec_fails() {
    let s = setup();
    let out = s.bash(&attempts(&[
        format!(
            "cp /usr/bin/true {0} && chmod +x {0} && {0}",
            s.path("rw/mytrue")
        ),
        "cp /usr/bin/true ./mytrue && chmod +x ./mytrue && ./mytrue".into(),
        "/usr/bin/true".into(),
    ]));
    assert_eq!(out, "denied\ndenied\nok\n");
}

#[test]
fn truncating_and_renaming_across_roots_fail() {
    let s = setup();
    let out = s.bash(&attempts(&[
        format!("truncate -s 0 {}", s.path("ro/file")),
        format!("mv {} {}", s.path("ro/file"), s.path("rw/stolen")),
        format!("mv {} {}", s.path("rw/file"), s.path("ro/planted")),
        format!("ln {} {}", s.path("rw/file"), s.path("ro/link")),
        format!("mv {} ./moved", s.path("rw/file")),
    ]));
    assert_eq!(out, "denied\ndenied\ndenied\ndenied\nok\n");
    assert_eq!(
        std::fs::read_to_string(s.dir.join("ro/file")).unwrap(),
        "keep my length"
    );
}
