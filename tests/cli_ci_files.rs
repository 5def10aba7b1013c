//! The GitHub Action and the pre-commit hooks parse, and run commands the
//! CLI has.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod common;

use common::{bin, code, text};

fn yaml(path: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_pre_commit_hooks_run_on_a_policy() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hooks = hooks.as_sequence().unwrap();
    let ids: Vec<&str> = hooks.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["openshell-policy-check", "openshell-policy-fmt"]);
    let d = std::env::temp_dir().join(format!("osp-hooks-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    for h in hooks {
        let entry: Vec<&str> = h["entry"].as_str().unwrap().split_whitespace().collect();
        assert_eq!(entry[0], "openshell-policy");
        let file = d.join("p.policy");
        std::fs::write(&file, "policy \"p\" {\n    fs read   /usr\n}\n").unwrap();
        let o = bin().args(&entry[1..]).arg(&file).output().unwrap();
        assert_eq!(code(&o), 0, "{entry:?}: {}", text(&o.stderr));
        assert_eq!(h["files"], "\\.policy$");
    }
    // The fmt hook rewrote the file canonically.
    assert_eq!(
        std::fs::read_to_string(d.join("p.policy")).unwrap(),
        "policy \"p\" {\n  fs read /usr\n}\n"
    );
}

#[test]
fn the_action_runs_check_and_diff_prove() {
    let action = yaml("action.yml");
    assert_eq!(action["runs"]["using"], "composite");
    for input in ["policies", "base-ref", "format", "sarif-file"] {
        assert!(!action["inputs"][input].is_null(), "input {input}");
    }
    let scripts: Vec<&str> = action["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| s["run"].as_str().unwrap())
        .collect();
    let all = scripts.join("\n");
    for line in all.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("openshell-policy ") else {
            continue;
        };
        let command = rest.split_whitespace().next().unwrap();
        let o = bin().args([command, "--help"]).output().unwrap();
        assert_eq!(code(&o), 0, "`{command}` is not a command");
    }
    assert!(all.contains("openshell-policy check "), "{all}");
    assert!(all.contains("openshell-policy diff --prove "), "{all}");
    // Each format the action passes on is one both commands accept.
    let format = action["inputs"]["format"]["default"].as_str().unwrap();
    for cmd in [
        &["check", "policies/github-readonly.policy"][..],
        &[
            "diff",
            "--prove",
            "policies/github-readonly.policy",
            "policies/github-readonly.policy",
        ],
    ] {
        let o = bin().args(cmd).args(["--format", format]).output().unwrap();
        assert_eq!(code(&o), 0, "{cmd:?}: {}", text(&o.stderr));
    }
}
