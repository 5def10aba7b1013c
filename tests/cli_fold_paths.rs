//! `fold_paths` through the command line: `diff --prove` between a policy
//! that folds paths and one that does not names a witness, and `eval`
//! confirms it on both policies in both directions.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers fail loudly"
)]

mod common;

use common::{code, json, run, text};

const CRED: &str = "  credential gh {\n    secret env GH_TOKEN\n    placeholder env GH_TOKEN\n    inject replace\n    hosts api.github.com\n  }\n";

fn write(dir: &std::path::Path, name: &str, options: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "policy \"{name}\" {{\n{CRED}  allow /usr/bin/curl -> api.github.com:443 http{options} {{\n    allow GET /repos/**\n    deny GET /repos/x/secret\n  }}\n}}\n"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn eval(policy: &str, path: &str) -> String {
    let url = format!("https://api.github.com{path}");
    let o = run(&[
        "eval",
        "--policy",
        policy,
        "--binary",
        "/usr/bin/curl",
        "--url",
        &url,
        "--format",
        "json",
    ]);
    json(&o)["decision"].as_str().unwrap_or_default().to_owned()
}

/// The witness paths of `diff --prove OLD NEW`, with its exit code.
fn witnesses(old: &str, new: &str) -> (i32, Vec<String>) {
    let o = run(&["diff", "--prove", old, new, "--format", "json"]);
    let v = json(&o);
    assert!(v["findings"].is_array(), "{}", text(&o.stderr));
    let paths = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["witness"]["path"].as_str().map(str::to_owned))
        .collect();
    (code(&o), paths)
}

#[test]
fn witnesses_between_folding_and_plain_policies_replay_through_eval() {
    let dir = std::env::temp_dir().join(format!("osp-fold-paths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let folded = write(&dir, "folded.policy", " fold_paths");
    let plain = write(&dir, "plain.policy", "");
    for (old, new) in [(&folded, &plain), (&plain, &folded)] {
        let (status, paths) = witnesses(old, new);
        assert_eq!(status, 1, "a widening both ways: {paths:?}");
        assert!(!paths.is_empty());
        for p in &paths {
            assert_eq!(eval(new, p), "allow", "NEW on {p}");
            assert_eq!(eval(old, p), "deny", "OLD on {p}");
        }
    }
    assert_eq!(eval(&folded, "/REPOS/X/SECRET/"), "deny");
    assert_eq!(eval(&plain, "/repos/x/SECRET"), "allow");
    let _ = std::fs::remove_dir_all(&dir);
}
