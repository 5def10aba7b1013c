//! `openshell-policy test`, and the directories and standard input that
//! `check` and `fmt` take.
#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;
mod sarif_schema;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, code, json, text, with_stdin};

/// A fresh directory for one test; commands run in it, so reports show
/// short relative paths that snapshots can hold.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("osp-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, body: &str) {
    let p = d.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

fn run_in(d: &Path, args: &[&str]) -> Output {
    bin().current_dir(d).args(args).output().unwrap()
}

fn run_stdin(d: &Path, args: &[&str], input: &str) -> Output {
    let mut cmd = bin();
    cmd.current_dir(d).args(args);
    with_stdin(cmd, input)
}

const POLICY: &str = r#"policy "t" {
  run_as user sandbox group sandbox
  credential tok {
    secret env TOK
    inject header Authorization "Bearer {secret}"
    hosts api.example.com
  }
  binaries agent = /usr/bin/agent
  allow agent -> api.example.com:443 http read-only {
    deny * /admin/**
  }
}
"#;

/// Three cases that pass and one that is wrong on every count.
const TESTS: &str = r#"policy: ../t.policy
cases:
  - name: a read gets the token
    binary: /usr/bin/agent
    url: https://api.example.com/items
    expect: allow
    rule: allow agent -> api.example.com:443 http read-only
    credential: tok
  - name: a write is refused, without the token
    binary: /usr/bin/agent
    url: https://api.example.com/items
    method: POST
    expect: deny
    rule: t.policy:9
    credential: none
  - name: another binary reaches nothing
    binary: /usr/bin/curl
    host: api.example.com
    port: 443
    expect: deny
    rule: none
  - name: the admin pages are open
    binary: /usr/bin/agent
    url: https://api.example.com/admin/users
    expect: allow
    rule: allow agent -> api.example.com:443 http read-only
    credential: tok
"#;

fn failing_tree(name: &str) -> PathBuf {
    let d = dir(name);
    write(&d, "t.policy", POLICY);
    write(
        &d,
        "tests/t.test.yaml",
        &TESTS.replace("rule: t.policy:9", "rule: ../t.policy:9"),
    );
    d
}

#[test]
fn shipped_policies_pass_their_tests() {
    let o = bin().args(["test", "policies/"]).output().unwrap();
    assert_eq!(code(&o), 0, "{}{}", text(&o.stdout), text(&o.stderr));
    let out = text(&o.stdout);
    let policies = std::fs::read_dir("policies")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "policy")
        })
        .count();
    assert!(
        out.contains(&format!("in {policies} files")),
        "one test file per policy: {out}"
    );
    for e in std::fs::read_dir("policies").unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "policy") {
            let stem = p.file_stem().unwrap().to_string_lossy();
            let t = format!("policies/tests/{stem}.test.yaml");
            assert!(Path::new(&t).is_file(), "{} has no {t}", p.display());
        }
    }
}

#[test]
fn a_failing_case_shows_the_rule_and_every_difference() {
    let d = failing_tree("failing");
    let o = run_in(&d, &["test", "tests"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    insta::assert_snapshot!(text(&o.stdout));
}

#[test]
fn json_reports_each_case() {
    let d = failing_tree("json");
    let o = run_in(&d, &["test", "--format", "json", "tests/t.test.yaml"]);
    assert_eq!(code(&o), 1);
    let v = json(&o);
    assert_eq!(v["cases"], 4);
    assert_eq!(v["failed"], 1);
    let cases = v["files"][0]["cases"].as_array().unwrap();
    let bad = &cases[3];
    assert_eq!(bad["passed"], false);
    assert_eq!(bad["line"], 22);
    assert_eq!(bad["actual"]["decision"], "deny");
    assert_eq!(bad["actual"]["rule"], "t.policy:10 (agent)");
    assert_eq!(bad["actual"]["rule_text"], "deny * /admin/**");
    let what: Vec<&str> = bad["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["what"].as_str().unwrap())
        .collect();
    assert_eq!(what, ["decision", "rule", "credential"]);
}

#[test]
fn an_unknown_key_is_located_with_a_suggestion() {
    let d = dir("unknown");
    write(&d, "t.policy", POLICY);
    write(
        &d,
        "t.test.yaml",
        "policy: t.policy\ncases:\n  - binary: /usr/bin/agent\n    url: https://api.example.com/\n    expcet: allow\n",
    );
    let o = run_in(&d, &["test", "t.test.yaml"]);
    assert_eq!(code(&o), 2);
    insta::assert_snapshot!(text(&o.stderr));
}

#[test]
fn malformed_test_files_are_input_errors() {
    let d = dir("malformed");
    write(&d, "t.policy", POLICY);
    let cases = [
        ("cases: [\n", "T0001"),
        ("policy: t.policy\ncases: []\n", "T0004"),
        (
            "cases:\n  - binary: /b\n    url: https://x/\n    expect: allow\n",
            "T0004",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    host: x\n    expect: allow\n",
            "T0004",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    expect: maybe\n",
            "T0003",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    port: 70000\n    expect: deny\n",
            "T0003",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    graphql: '{ a }'\n    body: x\n    expect: deny\n",
            "T0004",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    tool: t\n    expect: deny\n",
            "T0004",
        ),
        (
            "policy: t.policy\nbundle: t.bundle\ncases:\n  - binary: /b\n    url: https://x/\n    expect: deny\n",
            "T0004",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    rule: 9\n    expect: deny\n",
            "T0003",
        ),
        (
            "policy: t.policy\ncases:\n  - binary: /b\n    url: https://x/\n    refusal: forbidden\n    expect: deny\n",
            "T0003",
        ),
    ];
    for (body, want) in cases {
        write(&d, "x.test.yaml", body);
        let o = run_in(&d, &["test", "--format", "json", "x.test.yaml"]);
        assert_eq!(code(&o), 2, "{body}");
        let v = json(&o);
        let diags = v["files"][0]["diagnostics"].as_array().unwrap();
        assert!(
            diags
                .iter()
                .any(|x| x["code"] == want && x["line"].as_u64().unwrap() >= 1),
            "{body}: {v}"
        );
    }
}

#[test]
fn a_policy_with_errors_runs_no_case() {
    let d = dir("policy-errors");
    write(
        &d,
        "t.policy",
        "policy \"t\" {\n  allow nobody -> a.com:443\n}\n",
    );
    write(
        &d,
        "t.test.yaml",
        "policy: t.policy\ncases:\n  - binary: /b\n    url: https://a.com/\n    expect: deny\n",
    );
    let o = run_in(&d, &["test", "t.test.yaml"]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(
        err.contains("E0201") && err.contains("t.policy:2:9"),
        "{err}"
    );
}

#[test]
fn a_directory_without_tests_and_a_missing_file_are_input_errors() {
    let d = dir("empty");
    std::fs::create_dir_all(d.join("none")).unwrap();
    let o = run_in(&d, &["test", "none", "missing.test.yaml"]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(
        err.contains("no test files (`*.test.yaml`) under `none`"),
        "{err}"
    );
    assert!(err.contains("cannot read `missing.test.yaml`"), "{err}");
}

#[test]
fn standard_input_is_a_test_file_relative_to_the_working_directory() {
    let d = dir("stdin");
    write(&d, "t.policy", POLICY);
    let o = run_stdin(
        &d,
        &["test", "-"],
        &TESTS.replace("../t.policy", "t.policy"),
    );
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("<stdin>:22 the admin pages are open"));
}

#[test]
fn directories_are_searched_recursively_in_a_stable_order() {
    let d = dir("order");
    write(&d, "t.policy", POLICY);
    let one = "policy: ../t.policy\ncases:\n  - binary: /usr/bin/agent\n    url: https://api.example.com/\n    expect: allow\n";
    write(&d, "b/z.test.yaml", one);
    write(&d, "b/a.test.yml", one);
    write(&d, "a/deep/m.test.yaml", &one.replace("../", "../../"));
    write(&d, "b/ignored.yaml", "not: a test\n");
    let o = run_in(&d, &["test", "--format", "json", "."]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    let paths: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["./a/deep/m.test.yaml", "./b/a.test.yml", "./b/z.test.yaml"]
    );
}

#[test]
fn bodies_reach_the_evaluator_as_eval_sends_them() {
    let d = dir("bodies");
    write(
        &d,
        "m.test.yaml",
        &format!(
            "policy: {root}/policies/mcp-tools.policy\ncases:\n  - binary: /usr/bin/curl\n    url: https://mcp.example.com/mcp\n    jsonrpc: tools/call\n    tool: send_email\n    expect: deny\n    rule: deny rpc tools/call tool send_email\n",
            root = env!("CARGO_MANIFEST_DIR")
        ),
    );
    let o = run_in(&d, &["test", "--format", "json", "m.test.yaml"]);
    let v = json(&o);
    let case = &v["files"][0]["cases"][0];
    // The same question through `eval`.
    let e = bin()
        .args([
            "eval",
            "--policy",
            "policies/mcp-tools.policy",
            "--binary",
            "/usr/bin/curl",
            "--url",
            "https://mcp.example.com/mcp",
            "--jsonrpc-method",
            "tools/call",
            "--tool",
            "send_email",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let e = json(&e);
    assert_eq!(code(&o), 0, "{v}");
    assert_eq!(case["actual"]["decision"], e["decision"]);
    assert_eq!(case["actual"]["reason"], e["reason"]);
    assert_eq!(case["actual"]["credential"], e["credential"]);
}

/// A body's `content_type` decides, as `eval --content-type` does, whether
/// a placeholder in it is rewritten (`request_body_credential_rewrite`).
#[test]
fn a_case_gives_its_bodys_content_type() {
    let d = dir("content-type");
    write(
        &d,
        "r.policy",
        "policy \"r\" {\n  credential token {\n    secret env TOKEN\n    placeholder env TOKEN\n    inject replace\n    hosts api.example.com\n  }\n  allow /usr/bin/agent -> api.example.com:443 http read-write request_body_credential_rewrite\n}\n",
    );
    let token = "openshell-placeholder-token-0123456789abcdef0123456789abcdef";
    let case = |ct: &str, expect: &str| {
        format!(
            "  - binary: /usr/bin/agent\n    url: https://api.example.com/v1/items\n    body: '{{\"key\":\"{token}\"}}'\n{ct}    expect: {expect}\n"
        )
    };
    write(
        &d,
        "r.test.yaml",
        &format!(
            "policy: r.policy\ncases:\n{}{}",
            case("    content_type: application/json\n", "allow"),
            case("", "deny"),
        ),
    );
    let o = run_in(&d, &["test", "--format", "json", "r.test.yaml"]);
    let v = json(&o);
    assert_eq!(code(&o), 0, "{v}");
    let cases = v["files"][0]["cases"].as_array().unwrap();
    assert!(
        cases[0]["actual"]["reason"]
            .as_str()
            .unwrap()
            .contains("is replaced by its secret"),
        "{v}"
    );
    assert_eq!(cases[1]["actual"]["decision"], "deny", "{v}");
}

#[test]
fn an_openshell_policy_with_a_credentials_file() {
    let d = dir("openshell");
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shared/fixtures/openshell");
    write(
        &d,
        "p.test.yaml",
        &format!(
            "policy: {fx}/prover-policy.yaml\ncredentials: {fx}/prover-credentials.yaml\ncases:\n  - name: a read carries the token\n    binary: /usr/bin/gh\n    url: https://api.github.com/repos/o/r\n    expect: allow\n    rule: 'access: read-only'\n    credential: github-pat\n  - name: a write is refused without it\n    binary: /usr/bin/gh\n    url: https://api.github.com/repos/o/r\n    method: POST\n    expect: deny\n    rule: '- host: api.github.com'\n    credential: none\n",
            fx = fx.display()
        ),
    );
    let o = run_in(&d, &["test", "p.test.yaml"]);
    assert_eq!(code(&o), 0, "{}{}", text(&o.stdout), text(&o.stderr));
    // Without the credentials file no token is injected, and the case says so.
    let t = std::fs::read_to_string(d.join("p.test.yaml")).unwrap();
    let without: String = t
        .lines()
        .filter(|l| !l.starts_with("credentials:"))
        .map(|l| format!("{l}\n"))
        .collect();
    write(&d, "p.test.yaml", &without);
    let o = run_in(&d, &["test", "p.test.yaml"]);
    assert_eq!(code(&o), 1);
    assert!(
        text(&o.stdout).contains("credential: expected `github-pat`, got none"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn a_bundle_can_be_tested() {
    let d = dir("bundle");
    write(&d, "t.policy", POLICY);
    let c = run_in(&d, &["compile", "t.policy", "-o", "t.bundle"]);
    assert_eq!(code(&c), 0);
    write(
        &d,
        "t.test.yaml",
        &TESTS.replace("policy: ../t.policy", "bundle: t.bundle"),
    );
    let o = run_in(&d, &["test", "--format", "json", "t.test.yaml"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    assert_eq!(json(&o)["failed"], 1);
}

/// A minimal XML reader: well-formed nesting, and each element's name,
/// attributes and the names of its children.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// No `>` and every `&` an entity: text and attribute values as XML wants them.
fn assert_escaped(s: &str) {
    assert!(!s.contains('>'), "unescaped `>` in {s:?}");
    for (i, _) in s.match_indices('&') {
        let rest = &s[i..];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| rest.starts_with(e)),
            "unescaped `&` in {s:?}"
        );
    }
}

fn parse_xml(doc: &str) -> Element {
    let body = doc
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        .expect("an XML declaration");
    let mut stack: Vec<Element> = vec![Element {
        name: String::new(),
        attrs: Vec::new(),
        children: Vec::new(),
    }];
    let mut rest = body;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        assert_escaped(text);
        let j = rest[i..].find('>').unwrap() + i;
        let tag = &rest[i + 1..j];
        rest = &rest[j + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let done = stack.pop().unwrap();
            assert_eq!(done.name, name, "mismatched closing tag");
            stack.last_mut().unwrap().children.push(done);
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let (name, mut attrs_src) = tag.split_once(' ').unwrap_or((tag, ""));
        let mut attrs = Vec::new();
        while let Some(eq) = attrs_src.find("=\"") {
            let key = attrs_src[..eq].trim().to_owned();
            let after = &attrs_src[eq + 2..];
            let end = after.find('"').unwrap();
            let value = &after[..end];
            assert_escaped(value);
            attrs.push((key, value.to_owned()));
            attrs_src = &after[end + 1..];
        }
        let el = Element {
            name: name.to_owned(),
            attrs,
            children: Vec::new(),
        };
        if self_closing {
            stack.last_mut().unwrap().children.push(el);
        } else {
            stack.push(el);
        }
    }
    assert!(rest.trim().is_empty());
    assert_eq!(stack.len(), 1, "unclosed elements");
    let mut root = stack.pop().unwrap();
    assert_eq!(root.children.len(), 1, "one root element");
    root.children.pop().unwrap()
}

#[test]
fn junit_has_the_common_shape() {
    let d = failing_tree("junit");
    write(&d, "tests/broken.test.yaml", "policy: [\n");
    let o = run_in(&d, &["test", "--format", "junit", "tests"]);
    assert_eq!(code(&o), 2);
    let root = parse_xml(&text(&o.stdout));
    assert_eq!(root.name, "testsuites");
    let mut tests = 0;
    let mut failures = 0;
    let mut errors = 0;
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        assert!(suite.attr("name").is_some());
        let n: usize = suite.attr("tests").unwrap().parse().unwrap();
        assert_eq!(n, suite.children.len());
        let count = |what: &str| {
            suite
                .children
                .iter()
                .filter(|c| c.children.iter().any(|e| e.name == what))
                .count()
        };
        assert_eq!(
            suite.attr("failures").unwrap(),
            count("failure").to_string()
        );
        assert_eq!(suite.attr("errors").unwrap(), count("error").to_string());
        for case in &suite.children {
            assert_eq!(case.name, "testcase");
            assert!(case.attr("name").is_some() && case.attr("classname").is_some());
            for e in &case.children {
                assert!(matches!(e.name.as_str(), "failure" | "error"));
                assert!(e.attr("message").is_some());
            }
        }
        tests += n;
        failures += count("failure");
        errors += count("error");
    }
    assert_eq!(root.attr("tests").unwrap(), tests.to_string());
    assert_eq!(root.attr("failures").unwrap(), failures.to_string());
    assert_eq!(root.attr("errors").unwrap(), errors.to_string());
    assert_eq!((tests, failures, errors), (5, 1, 1));
}

#[test]
fn sarif_and_github_name_the_failing_case() {
    let d = failing_tree("sarif");
    let o = run_in(&d, &["test", "--format", "sarif", "tests"]);
    assert_eq!(code(&o), 1);
    let v = sarif_schema::validated(&o);
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ruleId"], "policy-test-failed");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "tests/t.test.yaml");
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "SRCROOT");
    assert_eq!(loc["region"]["startLine"], 22);
    let rules = v["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["id"] == "policy-test-failed"));

    let g = run_in(&d, &["test", "--format", "github", "tests"]);
    assert_eq!(code(&g), 1);
    let out = text(&g.stdout);
    assert!(
        out.starts_with("::error file=tests/t.test.yaml,line=22,title=policy-test-failed::the admin pages are open: decision: expected allow, got deny"),
        "{out}"
    );
}

#[test]
fn a_refused_command_line_still_prints_the_document() {
    let o = bin()
        .args(["test", "--format", "json", "--bogus", "x"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert_eq!(json(&o)["errors"][0]["path"], serde_json::Value::Null);
}

#[test]
fn check_takes_a_directory_and_standard_input() {
    let o = bin()
        .args(["check", "--format", "json", "policies/"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v = json(&o);
    let paths: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted);
    assert!(paths.contains(&"policies/fragments/system.policy"));
    assert!(
        !paths.iter().any(|p| p.ends_with(".test.yaml")),
        "{paths:?}"
    );

    let d = dir("check-stdin");
    let o = run_stdin(&d, &["check", "--format", "json", "-"], POLICY);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert_eq!(json(&o)["files"][0]["path"], "<stdin>");
    let o = run_stdin(
        &d,
        &["check", "-"],
        "policy \"x\" {\n  allow nobody -> a.com:443\n}\n",
    );
    assert_eq!(code(&o), 1);
    assert!(
        text(&o.stderr).contains("<stdin>:2:9"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn check_takes_openshell_yaml_from_a_directory() {
    let d = dir("check-yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/shared/fixtures/openshell/local-inference-policy.yaml"),
        d.join("p.yaml"),
    )
    .unwrap();
    write(&d, "sub/q.policy", POLICY);
    write(&d, "sub/q.test.yaml", "policy: q.policy\n");
    let o = run_in(&d, &["check", "--format", "json", "."]);
    let v = json(&o);
    let paths: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["./p.yaml", "./sub/q.policy"]);
    let empty = dir("check-empty");
    let o = run_in(&empty, &["check", "."]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stderr).contains("no policy files under `.`"));
}

#[test]
fn fmt_takes_a_directory_and_standard_input() {
    let d = dir("fmt");
    write(&d, "a/ok.policy", POLICY);
    write(
        &d,
        "a/b/messy.policy",
        "policy \"m\" {\n    run_as user sandbox group sandbox\n}\n",
    );
    write(&d, "a/b/skip.yaml", "not: formatted\n");
    let o = run_in(&d, &["fmt", "--check", "a"]);
    assert_eq!(code(&o), 1);
    assert_eq!(text(&o.stdout), "a/b/messy.policy\n");
    let o = run_in(&d, &["fmt", "a"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(code(&run_in(&d, &["fmt", "--check", "a"])), 0);

    let o = run_stdin(
        &d,
        &["fmt", "-"],
        "policy \"m\" {\n    run_as user sandbox group sandbox\n}\n",
    );
    assert_eq!(code(&o), 0);
    assert_eq!(
        text(&o.stdout),
        std::fs::read_to_string(d.join("a/b/messy.policy")).unwrap()
    );
    let o = run_stdin(
        &d,
        &["fmt", "--check", "-"],
        "policy \"m\" {\n    run_as user sandbox group sandbox\n}\n",
    );
    assert_eq!(code(&o), 1);
    assert_eq!(text(&o.stdout), "<stdin>\n");
}

#[test]
fn fmt_check_fails_on_a_file_with_errors() {
    let d = dir("fmt-errors");
    // Formatted, and parses, but names a binary set that does not exist.
    write(
        &d,
        "bad.policy",
        "policy \"x\" {\n  allow nobody -> a.com:443\n}\n",
    );
    for args in [
        &["fmt", "--check", "bad.policy"][..],
        &["fmt", "bad.policy"],
    ] {
        let o = run_in(&d, args);
        assert_eq!(code(&o), 1, "{args:?}");
        let err = text(&o.stderr);
        assert!(
            err.contains("E0201") && err.contains("bad.policy:2:9"),
            "{err}"
        );
        assert!(
            err.contains("`bad.policy` has errors; not formatted"),
            "{err}"
        );
    }
}

#[test]
fn fmt_formats_a_fragment_that_uses_its_includers_names() {
    let d = dir("fmt-fragment");
    write(
        &d,
        "f.policy",
        "fragment \"f\" {\n    allow agent -> a.com:443\n}\n",
    );
    let o = run_in(&d, &["fmt", "--check", "f.policy"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "f.policy\n");
    assert_eq!(code(&run_in(&d, &["fmt", "f.policy"])), 0);
    assert_eq!(code(&run_in(&d, &["fmt", "--check", "f.policy"])), 0);
}

#[test]
fn a_test_can_fail_because_the_policy_changed() {
    // The shipped test for github-readwrite, run against a copy of the
    // policy without its rulesets rule, catches the change.
    let d = dir("regression");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy = std::fs::read_to_string(root.join("policies/github-readwrite.policy")).unwrap();
    write(
        &d,
        "github-readwrite.policy",
        &policy.replace("    deny * /repos/*/*/rulesets/**\n", ""),
    );
    std::fs::create_dir_all(d.join("fragments")).unwrap();
    std::fs::copy(
        root.join("policies/fragments/system.policy"),
        d.join("fragments/system.policy"),
    )
    .unwrap();
    std::fs::copy(
        root.join("policies/tests/github-readwrite.test.yaml"),
        d.join("tests.test.yaml"),
    )
    .unwrap();
    let t = std::fs::read_to_string(d.join("tests.test.yaml")).unwrap();
    write(&d, "tests/github-readwrite.test.yaml", &t);
    std::fs::remove_file(d.join("tests.test.yaml")).unwrap();
    let o = run_in(&d, &["test", "tests"]);
    assert_eq!(code(&o), 1, "{}{}", text(&o.stdout), text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("a ruleset cannot be created"), "{out}");
    assert!(
        out.contains("decision:   expected deny, got allow"),
        "{out}"
    );
}
