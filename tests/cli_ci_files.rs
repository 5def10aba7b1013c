//! The pre-commit hooks and the GitHub Action, run as CI runs them: the
//! hooks' entries on files, and the action's `run:` steps in order, with
//! bash, against a pull request in a scratch git repository.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test helpers fail loudly"
)]

mod common;
mod sarif_schema;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, code, text};

fn yaml(path: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("osp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_pre_commit_hooks_run_on_a_policy() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hooks = hooks.as_sequence().unwrap();
    let ids: Vec<&str> = hooks.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "openshell-policy-check",
            "openshell-policy-fmt",
            "openshell-policy-test"
        ]
    );
    let d = scratch("hooks");
    std::fs::write(
        d.join("p.policy"),
        "policy \"p\" {\n    fs read   /usr\n}\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.join("tests")).unwrap();
    std::fs::write(
        d.join("tests/p.test.yaml"),
        "policy: ../p.policy\ncases:\n  - binary: /usr/bin/curl\n    host: example.com\n    port: 443\n    expect: deny\n",
    )
    .unwrap();
    for h in hooks {
        let mut entry: Vec<String> = h["entry"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(entry[0], "openshell-policy");
        entry.extend(
            h["args"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|a| a.as_str().unwrap().to_owned()),
        );
        let mut cmd = bin();
        cmd.args(&entry[1..]).current_dir(&d);
        // pre-commit passes the staged files that match, unless told not to.
        if h["pass_filenames"].as_bool() != Some(false) {
            cmd.arg("p.policy");
        }
        let o = cmd.output().unwrap();
        assert_eq!(code(&o), 0, "{entry:?}: {}", text(&o.stderr));
        let files = regex_like(h["files"].as_str().unwrap());
        assert!(files("p.policy"), "{:?} runs on a policy", h["id"]);
    }
    // The fmt hook rewrote the file canonically.
    assert_eq!(
        std::fs::read_to_string(d.join("p.policy")).unwrap(),
        "policy \"p\" {\n  fs read /usr\n}\n"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// The hooks' `files` patterns are suffix alternations (`\.(a|b)$`); this
/// reads just that shape, so a pattern of another shape fails the test
/// rather than being half understood.
fn regex_like(pattern: &str) -> impl Fn(&str) -> bool {
    let body = pattern.strip_suffix('$').unwrap();
    let alternatives: Vec<String> =
        if let Some(group) = body.strip_prefix("\\.(").and_then(|b| b.strip_suffix(')')) {
            group
                .split('|')
                .flat_map(|a| match a.strip_suffix("a?ml") {
                    Some(stem) => vec![format!(".{stem}aml"), format!(".{stem}ml")],
                    None => vec![format!(".{a}")],
                })
                .collect()
        } else {
            vec![body.replace("\\.", ".")]
        };
    assert!(
        alternatives.iter().all(|a| !a.contains(['\\', '(', '?'])),
        "unsupported pattern {pattern}"
    );
    move |name: &str| alternatives.iter().any(|a| name.ends_with(a.as_str()))
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=ci", "-c", "user.email=ci@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "git {args:?}: {}", text(&o.stderr));
}

fn write(root: &Path, path: &str, contents: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, contents).unwrap();
}

fn shipped(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// A repository whose `main` holds a read-only GitHub policy and whose
/// checked-out branch is a pull request that makes it read-write (a
/// credentialed widening), adds a policy, and adds a test file with one
/// failing case.
fn pull_request_repo(root: &Path) {
    git(root, &["init", "-q"]);
    write(
        root,
        "policies/fragments/system.policy",
        &shipped("policies/fragments/system.policy"),
    );
    write(
        root,
        "policies/gh.policy",
        &shipped("policies/github-readonly.policy"),
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    git(root, &["checkout", "-q", "-b", "pr"]);
    write(
        root,
        "policies/gh.policy",
        &shipped("policies/github-readwrite.policy"),
    );
    write(
        root,
        "policies/new.policy",
        "# A workload that writes its working directory and nothing else.\n\
         policy \"new\" {\n  include \"fragments/system.policy\"\n  landlock hard min_abi 1\n  \
         run_as user sandbox group sandbox\n  fs write workdir\n  fs deny /srv/secrets\n}\n",
    );
    let tests = shipped("policies/tests/github-readwrite.test.yaml")
        .replace("github-readwrite.policy", "gh.policy");
    write(
        root,
        "policies/tests/gh.test.yaml",
        &format!(
            "{tests}  - name: curl reaches the API\n    binary: /usr/bin/curl\n    \
             url: https://api.github.com/\n    expect: allow\n"
        ),
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "pull request"]);
}

/// A value of a step's `env:`: a literal, or one of the two expressions
/// the action uses there. Anything else fails the test, so the action
/// cannot come to depend on an expression this harness does not evaluate.
fn evaluate(
    value: &str,
    inputs: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let Some(expr) = value
        .strip_prefix("${{ ")
        .and_then(|v| v.strip_suffix(" }}"))
    else {
        assert!(
            !value.contains("${{"),
            "unsupported expression in `{value}`"
        );
        return value.to_owned();
    };
    if let Some(name) = expr.strip_prefix("inputs.") {
        return inputs
            .get(name)
            .unwrap_or_else(|| panic!("no input `{name}`"))
            .clone();
    }
    let (step, name) = expr
        .strip_prefix("steps.")
        .and_then(|e| e.split_once(".outputs."))
        .unwrap_or_else(|| panic!("unsupported expression `{expr}`"));
    outputs
        .get(step)
        .and_then(|o| o.get(name))
        .cloned()
        .unwrap_or_default()
}

/// `name=value` lines of a `$GITHUB_OUTPUT` file.
fn read_outputs(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("output line {l:?}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

struct ActionRun {
    /// The names of the steps run, in order.
    ran: Vec<String>,
    /// Exit status of the last step run.
    status: i32,
    /// Everything the steps printed on stdout (annotations included).
    log: String,
    outputs: BTreeMap<String, BTreeMap<String, String>>,
}

/// Runs the action's `run:` steps in order as the runner would (bash
/// `--noprofile --norc -eo pipefail`, a fresh `$GITHUB_OUTPUT` each),
/// stopping at the first that fails. The steps that build and install the
/// programs are the ones `install: false` turns off; `uses:` steps (cache,
/// SARIF upload) need GitHub and are left out.
fn run_action(
    workspace: &Path,
    runner: &Path,
    mut inputs: BTreeMap<String, String>,
    path: &str,
) -> ActionRun {
    let action = yaml("action.yml");
    assert_eq!(action["runs"]["using"], "composite");
    for (name, spec) in action["inputs"].as_mapping().unwrap() {
        let name = name.as_str().unwrap().to_owned();
        let default = spec["default"].as_str().unwrap_or("").to_owned();
        inputs.entry(name).or_insert(default);
    }
    assert_eq!(inputs["install"], "false");
    let summary = runner.join("summary.md");
    let mut run = ActionRun {
        ran: Vec::new(),
        status: 0,
        log: String::new(),
        outputs: BTreeMap::new(),
    };
    for (i, step) in action["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = step["name"].as_str().unwrap().to_owned();
        let condition = step["if"].as_str().unwrap_or("");
        if let Some(uses) = step["uses"].as_str() {
            assert!(
                uses.starts_with("actions/cache@")
                    || uses.starts_with("github/codeql-action/upload-sarif@"),
                "{uses}"
            );
            continue;
        }
        let script = step["run"].as_str().unwrap();
        assert_eq!(step["shell"], "bash", "{name}");
        assert!(
            !script.contains("${{"),
            "{name}: an expression in the script"
        );
        if condition.starts_with("inputs.install == 'true'") {
            // Not run here, but the script must at least parse.
            let o = Command::new("bash")
                .args(["-n", "-c", script])
                .output()
                .unwrap();
            assert_eq!(code(&o), 0, "{name}: {}", text(&o.stderr));
            continue;
        }
        assert_eq!(
            condition, "",
            "{name}: a condition this harness cannot evaluate"
        );
        let output = runner.join(format!("output-{i}"));
        let script_file = runner.join(format!("step-{i}.sh"));
        std::fs::write(&script_file, script).unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script_file)
            .current_dir(workspace)
            .env_clear()
            .env("PATH", path)
            .env("HOME", runner)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_EVENT_NAME", "pull_request")
            .env("GITHUB_BASE_REF", "main")
            .env("GITHUB_HEAD_REF", "pr")
            .env("GITHUB_WORKSPACE", workspace)
            .env("GITHUB_ACTION_PATH", env!("CARGO_MANIFEST_DIR"))
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_PATH", runner.join("path"))
            .env("RUNNER_TEMP", runner)
            .env("RUNNER_OS", "Linux");
        if let Some(env) = step["env"].as_mapping() {
            for (k, v) in env {
                cmd.env(
                    k.as_str().unwrap(),
                    evaluate(v.as_str().unwrap(), &inputs, &run.outputs),
                );
            }
        }
        let o = cmd.output().unwrap();
        run.log.push_str(&text(&o.stdout));
        run.status = code(&o);
        if let Some(id) = step["id"].as_str() {
            run.outputs.insert(id.to_owned(), read_outputs(&output));
        }
        run.ran.push(name.clone());
        if run.status != 0 {
            eprintln!("step `{name}` exited {}: {}", run.status, text(&o.stderr));
            break;
        }
    }
    run
}

/// A SARIF file the action wrote: valid SARIF 2.1.0 with a complete
/// rules table, and its results' rule ids.
fn sarif(path: &str) -> (serde_json::Value, Vec<String>) {
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}")),
    )
    .unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    sarif_schema::assert_valid(&doc);
    sarif_schema::assert_complete(&doc);
    let ids = doc["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap().to_owned())
        .collect();
    (doc, ids)
}

#[test]
fn the_action_checks_tests_and_proves_a_pull_request() {
    let d = scratch("action");
    let workspace = d.join("repo");
    let runner = d.join("runner");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&runner).unwrap();
    pull_request_repo(&workspace);
    // The freshly built command on PATH, as the install step leaves it.
    let bin_dir = d.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_openshell-policy"),
        bin_dir.join("openshell-policy"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let reports = d.join("reports");
    let inputs = BTreeMap::from([
        ("policies".to_owned(), "policies".to_owned()),
        ("install".to_owned(), "false".to_owned()),
        ("report-dir".to_owned(), reports.display().to_string()),
    ]);

    let run = run_action(&workspace, &runner, inputs, &path);
    let log = &run.log;
    assert_eq!(
        run.ran,
        [
            "Prepare the report directory",
            "Check policies",
            "Run policy tests",
            "Prove changed policies add no credentialed reach",
            "Verdict"
        ],
        "{log}"
    );
    // The widening and the failed case fail the job, with exit 1 as the
    // commands give it; the check has a warning only.
    assert_eq!(run.status, 1, "{log}");
    assert_eq!(run.outputs["check"]["status"], "0", "{log}");
    assert_eq!(run.outputs["test"]["status"], "1", "{log}");
    assert_eq!(run.outputs["prove"]["status"], "1", "{log}");

    // check: every policy, SARIF and annotations.
    let (_, ids) = sarif(&run.outputs["check"]["sarif"]);
    assert_eq!(ids, ["W0107"], "{log}");
    assert!(
        log.contains("::warning file=policies/new.policy,line=7,col=11,")
            && log.contains("title=W0107::"),
        "{log}"
    );

    // test: the failing case in SARIF, JUnit and an annotation at its line.
    let (_, ids) = sarif(&run.outputs["test"]["sarif"]);
    assert_eq!(ids, ["policy-test-failed"], "{log}");
    let junit = std::fs::read_to_string(&run.outputs["test"]["junit"]).unwrap();
    assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
    assert!(
        log.contains("::error file=policies/tests/gh.test.yaml,line=")
            && log.contains("title=policy-test-failed::"),
        "{log}"
    );

    // diff --prove: the changed policy against main, the new one against
    // an empty base, in one SARIF run of two invocations.
    let (doc, ids) = sarif(&run.outputs["prove"]["sarif"]);
    let run0 = &doc["runs"][0];
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
    let verdicts: Vec<&str> = run0["properties"]["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["widened", "new-reach"], "{log}");
    let exits: Vec<u64> = run0["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["exitCode"].as_u64().unwrap())
        .collect();
    assert_eq!(exits, [1, 0]);
    assert!(ids.iter().any(|i| i == "R0101"), "{ids:?}");
    let files: Vec<&str> = run0["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(files.contains(&"policies/gh.policy"), "{files:?}");
    assert!(files.contains(&"policies/new.policy"), "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| *f == "policies/gh.policy" || *f == "policies/new.policy"),
        "{files:?}"
    );
    assert!(
        log.contains(
            "::error file=policies/gh.policy,line=22,col=42,title=credential_reach_expansion::"
        ),
        "{log}"
    );
    assert!(
        log.contains("::notice file=policies/new.policy,title=new policy::"),
        "{log}"
    );
    // Neither the fragment nor the test file is proved, and the base
    // tree is cleaned away.
    assert!(!log.contains("diff --prove policies/fragments"), "{log}");
    assert!(!log.contains("diff --prove policies/tests"), "{log}");
    let worktrees = Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(&workspace)
        .output()
        .unwrap();
    assert_eq!(text(&worktrees.stdout).matches("worktree ").count(), 1);

    // The verdict names each failing command; the summary has the table.
    assert!(
        log.contains("::error title=openshell-policy::`openshell-policy test` exited 1")
            && log.contains(
                "::error title=openshell-policy::`openshell-policy diff --prove` exited 1"
            )
            && !log.contains("`openshell-policy check` exited"),
        "{log}"
    );
    let summary = std::fs::read_to_string(runner.join("summary.md")).unwrap();
    assert!(
        summary.contains("| `policies/gh.policy` | main | 1 | **widened** |")
            && summary.contains("| `policies/new.policy` | none (new file) | 0 |"),
        "{summary}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_action_proves_every_includer_of_a_changed_fragment() {
    let d = scratch("action-fragment");
    let workspace = d.join("repo");
    let runner = d.join("runner");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&runner).unwrap();
    git(&workspace, &["init", "-q"]);
    let fragment = "fragment \"files\" {\n  fs read /usr\n}\n";
    write(&workspace, "policies/fragments/files.policy", fragment);
    write(
        &workspace,
        "policies/a.policy",
        "policy \"a\" {\n  include \"fragments/files.policy\"\n}\n",
    );
    git(&workspace, &["add", "-A"]);
    git(&workspace, &["commit", "-q", "-m", "base"]);
    git(&workspace, &["checkout", "-q", "-b", "pr"]);
    write(
        &workspace,
        "policies/fragments/files.policy",
        &fragment.replace("/usr\n", "/usr\n  fs read /opt\n"),
    );
    git(&workspace, &["commit", "-q", "-am", "pull request"]);
    let bin_dir = d.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_openshell-policy"),
        bin_dir.join("openshell-policy"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let inputs = BTreeMap::from([
        ("policies".to_owned(), "policies".to_owned()),
        ("install".to_owned(), "false".to_owned()),
        (
            "report-dir".to_owned(),
            d.join("reports").display().to_string(),
        ),
    ]);
    let run = run_action(&workspace, &runner, inputs, &path);
    let log = &run.log;
    // No credential in play: the proof passes, and the job with it.
    assert_eq!(run.status, 0, "{log}");
    assert!(
        log.contains("fragment `policies/fragments/files.policy` changed"),
        "{log}"
    );
    assert_eq!(run.outputs["test"]["status"], "0", "{log}");
    assert!(log.contains("no policy test file"), "{log}");
    assert!(
        log.contains("diff --prove policies/a.policy (base: main)"),
        "{log}"
    );
    let (doc, _) = sarif(&run.outputs["prove"]["sarif"]);
    let proofs = doc["runs"][0]["properties"]["proofs"].as_array().unwrap();
    assert_eq!(proofs.len(), 1, "only the includer is proved: {proofs:?}");
    std::fs::remove_dir_all(&d).unwrap();
}
