//! The README's examples, run as written: every `$ ` command in a
//! ```console block runs from the repository root (continuation lines
//! joined, the workspace's binaries first on PATH, `sudo ` dropped when
//! already root), must exit 0 (or 1, a finding), and must print every line
//! shown under it, in order; `…` in a shown line stands for any text.
//! The first ```sh block (quickstart, the test suite itself) is what CI
//! runs: checked, not run, since it runs this test; the gateway's ```sh
//! block runs as written; the policy shown is checked and held to the
//! shipped one it is an excerpt of.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails loudly"
)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct Example {
    command: String,
    shown: Vec<String>,
}

fn examples(readme: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_console = false;
    let mut continuing = false;
    for line in readme.lines() {
        if !in_console {
            in_console = line.trim() == "```console";
            continue;
        }
        if line.trim() == "```" {
            in_console = false;
            continue;
        }
        if continuing && let Some(last) = out.last_mut() {
            last.command.push('\n');
            last.command.push_str(line);
            continuing = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Example {
                command: cmd.to_owned(),
                shown: Vec::new(),
            });
            continuing = cmd.ends_with('\\');
        } else if let Some(last) = out.last_mut() {
            last.shown.push(line.trim_end().to_owned());
        } else {
            panic!("output before any command in a console block: {line}");
        }
    }
    out
}

/// `shown` matches `actual`, where `…` stands for any text.
fn line_matches(shown: &str, actual: &str) -> bool {
    let actual = actual.trim_end();
    let parts: Vec<&str> = shown.split('…').collect();
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return shown == actual;
    }
    if !actual.starts_with(first) || !actual.ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// What a command printed, standard output then standard error.
fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Where this build's binaries are; the supervisor and the gateway are
/// built there if this test run did not build them.
fn bin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_openshell-policy"))
        .parent()
        .unwrap()
        .to_path_buf();
    for (package, bin) in [
        ("supervisor", "openshell-supervisor"),
        ("gateway", "openshell-gateway"),
    ] {
        if !dir.join(bin).exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let status = Command::new(cargo)
                .args(["build", "-p", package, "--bin", bin])
                .current_dir(ROOT)
                .status()
                .unwrap();
            assert!(status.success(), "cannot build {bin}");
        }
    }
    dir
}

/// The set-up block (the first ```sh block) builds everything and runs
/// the whole suite, this test among it, so it cannot run here; what it
/// says is held instead: it is valid shell, every script it calls exists
/// and is executable, the directory it puts on PATH is where quickstart
/// builds, and its test command is exactly what CI runs (`.ci/run`).
#[test]
fn the_setup_block_is_what_ci_runs() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let start = readme.find("```sh\n").expect("a ```sh block") + 6;
    let block = &readme[start..start + readme[start..].find("```\n").unwrap()];
    let syntax = Command::new("bash")
        .args(["-n", "-c", block])
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{}", printed(&syntax));
    let commands: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for script in commands.iter().filter(|c| c.starts_with("scripts/")) {
        let path = Path::new(ROOT).join(script);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("`{script}`: {e}"))
                .permissions(),
        );
        assert!(mode & 0o111 != 0, "`{script}` is not executable");
    }
    let quickstart = std::fs::read_to_string(Path::new(ROOT).join("scripts/quickstart")).unwrap();
    assert!(
        commands.contains(&"export PATH=\"$PWD/target/release:$PATH\"")
            && quickstart.contains("--release")
            && quickstart.contains("target/release"),
        "the block's PATH is not where scripts/quickstart builds:\n{block}"
    );
    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
    let ci_last = ci.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert_eq!(
        commands.last(),
        Some(&ci_last),
        "the README's test command is not what .ci/run runs"
    );
}

/// The gateway walkthrough (the ```sh block under "## Gateway"), run as
/// written, as root (the supervisor makes a network namespace), in a
/// scratch directory where `policies/` is the repository's.
#[test]
fn the_gateway_walkthrough_runs_as_written() {
    assert!(is_root(), "the walkthrough runs as root, as CI does");
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = &readme[readme.find("\n## Gateway\n").expect("a Gateway section")..];
    let start = section.find("```sh\n").expect("a ```sh block") + 6;
    let block = &section[start..start + section[start..].find("```\n").unwrap()];
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("walkthrough-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(Path::new(ROOT).join("policies"), dir.join("policies")).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // What an earlier run of the walkthrough applied for `sb` (another
    // build, another digest for revision 1) would be a rollback here.
    let _ = std::fs::remove_file("/var/lib/openshell-supervisor/sb.json");
    // Output to files, not pipes: a gateway left running by a failed step
    // would hold a pipe open for ever. Its process group is killed after.
    let (stdout, stderr) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", block])
        .current_dir(&dir)
        .env("PATH", &path)
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let said = format!(
        "{}{}",
        std::fs::read_to_string(&stdout).unwrap_or_default(),
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "the walkthrough failed:\n{said}");
    for line in [
        "proposal 1 approved: `agent` revision 1",
        "\"applied_revision\": 1,",
        "\"in_sync\": true,",
    ] {
        assert!(said.contains(line), "no `{line}` in:\n{said}");
    }
}

#[test]
fn every_readme_example_runs_as_written() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 5, "found {} examples", examples.len());
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let root = is_root();
    let before: Vec<_> = bundles_in_root();
    for ex in &examples {
        let command = match ex.command.strip_prefix("sudo ") {
            Some(rest) if root => rest,
            _ => ex.command.as_str(),
        };
        let out = Command::new("bash")
            .args(["-c", command])
            .current_dir(ROOT)
            .env("PATH", &path)
            .output()
            .unwrap();
        let said = printed(&out);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "`{}` exited {code:?}:\n{said}",
            ex.command
        );
        let mut actual = said.lines();
        for shown in ex.shown.iter().filter(|l| !l.is_empty()) {
            assert!(
                actual.any(|a| line_matches(shown, a)),
                "`{}` did not print (in order) the README's line\n{shown}\nit printed:\n{said}",
                ex.command
            );
        }
    }
    assert_eq!(
        bundles_in_root(),
        before,
        "an example left a bundle in the repository root"
    );
}

fn bundles_in_root() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(ROOT)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bundle"))
        .collect();
    v.sort();
    v
}

#[test]
fn shown_lines_match_with_ellipses() {
    assert!(line_matches("sha256:…", "sha256:abc"));
    assert!(line_matches("a … c … e", "a b c d e"));
    assert!(!line_matches("a … c", "a b d"));
    assert!(!line_matches("exact", "exactly"));
}

/// The policy shown under "What it looks like" is an excerpt of the
/// shipped `policies/github-readwrite.policy`: it must check clean beside
/// the shipped fragments, be formatted as `fmt` writes it, and hold
/// nothing the shipped policy does not.
#[test]
fn the_policy_shown_checks_clean_and_is_of_the_shipped_one() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = readme
        .split("## What it looks like")
        .nth(1)
        .expect("the section");
    let shown = section.split("```\n").nth(1).expect("a plain ``` block");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-policy");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(Path::new(ROOT).join("policies/fragments"))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(copy.success());
    let file = dir.join("shown.policy");
    std::fs::write(&file, shown).unwrap();
    let cli = env!("CARGO_BIN_EXE_openshell-policy");
    for args in [&["check"][..], &["fmt", "--check"][..]] {
        let out = Command::new(cli).args(args).arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "`openshell-policy {}` on the README's policy:\n{}",
            args.join(" "),
            printed(&out)
        );
    }
    let shipped =
        std::fs::read_to_string(Path::new(ROOT).join("policies/github-readwrite.policy")).unwrap();
    for line in shown.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            shipped.lines().any(|s| s == line),
            "the README's policy line `{line}` is not in policies/github-readwrite.policy"
        );
    }
}
