//! `openshell-policy suggest POLICY --from DENY_LOG`: one test per rule of
//! narrowness, the bad-line and other-policy paths, YAML in and out, and
//! the patched policy checked, formatted and evaluated by the CLI itself.
//!
//! The deny logs are written here line by line with the fields, nesting
//! and values `supervisor/src/denylog.rs` writes (`network_event` and
//! `http`), the policy's own name and bundle digest included.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod common;

use std::path::{Path, PathBuf};

use common::{bin, code, json, run, text};
use serde_json::{Value, json};

/// A directory of its own for each test.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("suggest")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The policy written to `dir/name`, and its name and bundle digest as
/// the supervisor logs them.
struct Policy {
    path: PathBuf,
    name: String,
    digest: String,
}

fn policy(dir: &Path, file: &str, source: &str, name: &str) -> Policy {
    let path = dir.join(file);
    std::fs::write(&path, source).unwrap();
    let out = dir.join("p.bundle");
    let o = run(&[
        "compile",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    let digest = stdout
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap()
        .to_owned();
    Policy {
        path,
        name: name.to_owned(),
        digest,
    }
}

/// `network_event` of a refused connect.
fn connect(p: &Policy, binary: &str, host: Option<&str>, ip: &str, port: u16) -> Value {
    let mut dst = serde_json::Map::new();
    if let Some(h) = host {
        dst.insert("hostname".into(), json!(h));
    }
    dst.insert("ip".into(), json!(ip));
    dst.insert("port".into(), json!(port));
    json!({
        "class_uid": 4001,
        "class_name": "Network Activity",
        "category_uid": 4,
        "category_name": "Network Activity",
        "activity_id": 1,
        "activity_name": "Open",
        "type_uid": 400_101,
        "severity_id": 3,
        "action_id": 2,
        "action": "Denied",
        "disposition_id": 2,
        "disposition": "Blocked",
        "status_id": 2,
        "status": "Failure",
        "message": "no rule allows this binary to reach this destination",
        "actor": { "process": { "pid": 41, "tid": 42, "file": { "path": binary } } },
        "dst_endpoint": dst,
        "connection_info": { "protocol_name": "tcp", "direction": "Outbound", "direction_id": 2 },
        "firewall_rule": { "name": "default", "type": "default deny" },
        "unmapped": { "syscall": "connect", "address": null, "note": null },
        "time": 1_767_000_000_000_u64,
        "policy": { "name": p.name, "uid": p.digest },
        "metadata": {
            "version": "1.3.0",
            "product": { "name": "openshell-supervisor", "vendor_name": "openshell-policy", "version": "0.1.0" }
        }
    })
}

/// `http` of a request the L7 proxy refused.
fn request(p: &Policy, binary: &str, host: &str, method: &str, path: &str) -> Value {
    let mut e = connect(p, binary, Some(host), "140.82.112.6", 443);
    let activity = match method {
        "DELETE" => 2,
        "GET" => 3,
        "POST" => 6,
        "PUT" => 7,
        _ => 99,
    };
    let o = e.as_object_mut().unwrap();
    o.insert("class_uid".into(), json!(4002));
    o.insert("class_name".into(), json!("HTTP Activity"));
    o.insert("activity_id".into(), json!(activity));
    o.insert("activity_name".into(), json!(method));
    o.insert("type_uid".into(), json!(4002 * 100 + activity));
    o.insert(
        "message".into(),
        json!(format!("{method} {path} matches no allow rule")),
    );
    o.insert(
        "firewall_rule".into(),
        json!({ "name": "p.policy:12 (/usr/bin/gh)", "type": "policy rule" }),
    );
    o.insert(
        "http_request".into(),
        json!({
            "http_method": method,
            "url": { "hostname": host, "path": path, "port": 443, "scheme": "https" }
        }),
    );
    o.insert(
        "unmapped".into(),
        json!({ "syscall": "", "address": null, "note": null, "error": "policy_denied", "audit": false }),
    );
    e
}

fn write_log(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join("deny.log");
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(events: &[Value]) -> Vec<String> {
    events.iter().map(ToString::to_string).collect()
}

fn suggest(p: &Policy, log: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "suggest",
        p.path.to_str().unwrap(),
        "--from",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

const GH: &str = r#"policy "gh" {
  run_as user sandbox group sandbox
  fs read /usr

  credential github_pat {
    secret env GITHUB_TOKEN
    inject header Authorization "Bearer {secret}"
    hosts api.github.com
  }

  allow /usr/bin/gh -> api.github.com:443 http {
    allow GET /user
  }
}
"#;

/// Every suggested rule line of the JSON answer's patch.
fn patch(v: &Value) -> String {
    v["patch"].as_str().unwrap().to_owned()
}

#[test]
fn exact_binary_host_and_port_one_rule_each() {
    let d = dir("exact");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
            connect(
                &p,
                "/usr/bin/python3.12",
                Some("pypi.org"),
                "151.101.0.223",
                443,
            ),
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                8443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "json"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    let s = v["suggestions"].as_array().unwrap();
    let rules: Vec<(String, String, u64, bool)> = s
        .iter()
        .map(|s| {
            (
                s["binary"].as_str().unwrap().to_owned(),
                s["destination"].as_str().unwrap().to_owned(),
                s["port"].as_u64().unwrap(),
                s["inspected"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            ("/usr/bin/curl".into(), "example.com".into(), 443, false),
            ("/usr/bin/curl".into(), "example.com".into(), 8443, false),
            ("/usr/bin/python3.12".into(), "pypi.org".into(), 443, false),
        ]
    );
    assert_eq!(s[0]["lines"], json!([1, 2]));
    let text = patch(&v);
    assert!(
        text.contains("  allow /usr/bin/curl -> example.com:443\n"),
        "{text}"
    );
    assert!(
        text.contains("  allow /usr/bin/python3.12 -> pypi.org:443\n"),
        "{text}"
    );
    assert!(!text.contains('*'), "no wildcard anywhere: {text}");
    assert_eq!(v["proof"]["verdict"], "new-reach");
    assert_eq!(v["beyond_denials"], json!([]));
    let replay = v["replay"].as_array().unwrap();
    assert_eq!(replay.len(), 3, "one line per distinct request");
    assert!(
        replay
            .iter()
            .all(|r| r["before"] == "deny" && r["after"] == "allow"),
        "{replay:?}"
    );
}

#[test]
fn a_pin_in_the_log_becomes_a_pinned_binary() {
    let d = dir("pin");
    let p = policy(&d, "p.policy", GH, "gh");
    let hash = "ab".repeat(32);
    let mut e = connect(
        &p,
        "/usr/bin/curl",
        Some("example.com"),
        "93.184.216.34",
        443,
    );
    e["actor"]["process"]["file"]["hashes"] =
        json!([{ "algorithm_id": 3, "algorithm": "SHA-256", "value": hash }]);
    let log = write_log(&d, &lines(&[e]));
    let o = suggest(&p, &log, &["--format", "policy"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let patched = text(&o.stdout);
    assert!(
        patched.contains(&format!(
            "  binaries pinned_curl = /usr/bin/curl sha256:{hash}\n"
        )),
        "{patched}"
    );
    assert!(
        patched.contains("  allow pinned_curl -> example.com:443\n"),
        "{patched}"
    );
    let new = d.join("new.policy");
    std::fs::write(&new, &patched).unwrap();
    let eval = |sha: &str| {
        let o = run(&[
            "eval",
            "--policy",
            new.to_str().unwrap(),
            "--binary",
            "/usr/bin/curl",
            "--sha256",
            sha,
            "--host",
            "example.com",
            "--port",
            "443",
            "--format",
            "json",
        ]);
        json(&o)["decision"].as_str().unwrap().to_owned()
    };
    assert_eq!(eval(&hash), "allow");
    assert_eq!(
        eval(&"cd".repeat(32)),
        "deny",
        "another file at the path is not admitted"
    );
}

#[test]
fn exact_methods_and_a_literal_path() {
    let d = dir("methods");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            request(&p, "/usr/bin/gh", "api.github.com", "GET", "/user/repos"),
            request(&p, "/usr/bin/gh", "api.github.com", "POST", "/user/repos"),
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/rate_limit?x=1",
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "json"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    let s = &v["suggestions"][0];
    assert_eq!(s["inspected"], true);
    assert_eq!(
        s["rules"],
        json!([
            { "methods": ["GET"], "paths": ["/rate_limit"] },
            { "methods": ["GET", "POST"], "paths": ["/user/repos"] },
        ])
    );
    let text = patch(&v);
    assert!(text.contains("    allow GET POST /user/repos\n"), "{text}");
    assert!(!text.contains("DELETE") && !text.contains('*'), "{text}");
}

#[test]
fn a_star_only_in_the_segment_where_denied_paths_differ() {
    let d = dir("star");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/repos/a/x/pulls",
            ),
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/repos/b/x/pulls",
            ),
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/repos/c/y/issues",
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "json"]);
    let v = json(&o);
    assert_eq!(
        v["suggestions"][0]["rules"],
        json!([{ "methods": ["GET"], "paths": ["/repos/*/x/pulls", "/repos/c/y/issues"] }])
    );
    assert!(!patch(&v).contains("**"), "never `**` without the flag");
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
}

#[test]
fn generalize_paths_says_what_it_adds() {
    let d = dir("gen-paths");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/repos/a/x/pulls",
            ),
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "GET",
                "/repos/b/y/issues",
            ),
        ]),
    );
    let narrow = json(&suggest(&p, &log, &["--format", "json"]));
    assert!(!patch(&narrow).contains("**"));
    let o = suggest(&p, &log, &["--format", "json", "--generalize", "paths"]);
    let v = json(&o);
    assert_eq!(
        v["suggestions"][0]["rules"],
        json!([{ "methods": ["GET"], "paths": ["/repos/**"] }])
    );
    let widened = v["suggestions"][0]["widened"][0].as_str().unwrap();
    assert!(
        widened.contains(
            "`GET /repos/**` admits every path under `/repos`, not only the 2 paths denied"
        ),
        "{widened}"
    );
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n == widened));
    let human = text(&suggest(&p, &log, &["--generalize", "paths"]).stdout);
    assert!(human.contains(widened), "{human}");
}

#[test]
fn generalize_hosts_says_what_it_adds() {
    let d = dir("gen-hosts");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            connect(
                &p,
                "/usr/bin/curl",
                Some("a.cdn.example.com"),
                "93.184.216.34",
                443,
            ),
            connect(
                &p,
                "/usr/bin/curl",
                Some("b.cdn.example.com"),
                "93.184.216.35",
                443,
            ),
        ]),
    );
    let narrow = json(&suggest(&p, &log, &["--format", "json"]));
    assert_eq!(narrow["suggestions"].as_array().unwrap().len(), 2);
    let v = json(&suggest(
        &p,
        &log,
        &["--format", "json", "--generalize", "hosts"],
    ));
    let s = v["suggestions"].as_array().unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["destination"], "*.cdn.example.com");
    assert_eq!(
        s[0]["widened"],
        json!([
            "`--generalize hosts`: `*.cdn.example.com` admits every host one label under `cdn.example.com`, not only `a.cdn.example.com`, `b.cdn.example.com`"
        ])
    );
}

#[test]
fn a_credential_only_where_the_denied_request_went() {
    let d = dir("credential");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            request(&p, "/usr/bin/gh", "api.github.com", "GET", "/repos/o/r"),
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "json"]);
    let v = json(&o);
    let s = v["suggestions"].as_array().unwrap();
    let by_dest = |d: &str| s.iter().find(|s| s["destination"] == d).unwrap();
    assert_eq!(
        by_dest("api.github.com")["credentials"],
        json!(["github_pat"])
    );
    assert_eq!(by_dest("example.com")["credentials"], json!([]));
    assert!(
        !patch(&v)
            .lines()
            .any(|l| l.trim_start().starts_with("credential")),
        "no binding is written"
    );
    // The credentialed finding is the denied request's own: explained.
    assert_eq!(v["proof"]["verdict"], "widened");
    assert_eq!(v["beyond_denials"], json!([]));
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
}

#[test]
fn a_connection_to_a_credential_host_goes_through_the_proxy() {
    let d = dir("credential-connect");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[connect(
            &p,
            "/usr/bin/curl",
            Some("api.github.com"),
            "140.82.112.6",
            443,
        )]),
    );
    let o = suggest(&p, &log, &["--format", "json"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let v = json(&o);
    assert!(
        patch(&v).contains("  allow /usr/bin/curl -> api.github.com:443 http\n"),
        "an inspected rule with no request allowed, not a connection rule: {}",
        patch(&v)
    );
    assert_eq!(v["suggestions"][0]["credentials"], json!(["github_pat"]));
    assert_eq!(v["proof"]["verdict"], "no-new-access");
    assert_eq!(v["replay"][0]["after"], "allow");
}

#[test]
fn a_proof_that_shows_more_than_the_denials_says_so_first() {
    let d = dir("beyond");
    let text_policy = r#"policy "w" {
  landlock best_effort
  run_as user sandbox group sandbox
  fs read /usr
  fs write /sandbox
}
"#;
    let p = policy(&d, "p.policy", text_policy, "w");
    let log = write_log(
        &d,
        &lines(&[connect(
            &p,
            "/sandbox/bin/tool",
            Some("example.com"),
            "93.184.216.34",
            443,
        )]),
    );
    let o = suggest(&p, &log, &[]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let out = text(&o.stdout);
    let warn = out.find("the proof shows more than the denials").unwrap();
    let rules = out.find("rules to add").unwrap();
    assert!(warn < rules, "{out}");
    assert!(out.contains("writable_binary_identity"), "{out}");
    let v = json(&suggest(&p, &log, &["--format", "json"]));
    assert!(
        v["beyond_denials"][0]
            .as_str()
            .unwrap()
            .starts_with("writable_binary_identity (R0107)"),
        "{v}"
    );
}

#[test]
fn bad_lines_are_reported_one_by_one_and_the_rest_used() {
    let d = dir("bad-lines");
    let p = policy(&d, "p.policy", GH, "gh");
    let good = connect(
        &p,
        "/usr/bin/curl",
        Some("example.com"),
        "93.184.216.34",
        443,
    )
    .to_string();
    let truncated = good.get(..good.len() / 2).unwrap().to_owned();
    let mut unix = connect(&p, "/usr/bin/curl", None, "10.0.0.1", 1);
    unix["dst_endpoint"] = json!({});
    unix["unmapped"]["address"] = json!("/run/docker.sock");
    let relative = connect(&p, "python3", Some("example.com"), "93.184.216.34", 443);
    let mut allowed = connect(
        &p,
        "/usr/bin/curl",
        Some("example.org"),
        "93.184.216.34",
        443,
    );
    allowed["action_id"] = json!(1);
    let log = write_log(
        &d,
        &[
            truncated,
            "{\"hello\": \"world\"}".to_owned(),
            "plain text".to_owned(),
            unix.to_string(),
            relative.to_string(),
            allowed.to_string(),
            good,
        ],
    );
    let o = suggest(&p, &log, &[]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    let shown = log.display().to_string();
    for (line, what) in [
        (1, "a truncated line or another file"),
        (2, "not a deny-log event"),
        (3, "a truncated line or another file"),
        (4, "`/run/docker.sock`"),
        (5, "`python3` is not an absolute path"),
    ] {
        assert!(
            err.contains(&format!("{shown}:{line}: ")),
            "line {line}: {err}"
        );
        let msg = err
            .lines()
            .find(|l| l.contains(&format!("{shown}:{line}: ")))
            .unwrap();
        assert!(msg.contains(what), "{msg}");
    }
    assert!(
        !err.contains(&format!("{shown}:6:")),
        "an allowed event is no error: {err}"
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("allow /usr/bin/curl -> example.com:443"),
        "{out}"
    );
    assert!(!out.contains("example.org"), "{out}");
    let v = json(&suggest(&p, &log, &["--format", "json"]));
    assert_eq!(v["errors"].as_array().unwrap().len(), 5);
    assert_eq!(v["errors"][0]["line"], 1);
    assert_eq!(v["other_events"], 1);
}

#[test]
fn a_log_of_another_policy_is_refused_line_by_line() {
    let d = dir("digest");
    let p = policy(&d, "p.policy", GH, "gh");
    let other = Policy {
        path: p.path.clone(),
        name: "gh".into(),
        digest: format!("sha256:{}", "0".repeat(64)),
    };
    let renamed = Policy {
        path: p.path.clone(),
        name: "another".into(),
        digest: p.digest.clone(),
    };
    let log = write_log(
        &d,
        &lines(&[
            connect(
                &other,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
            connect(
                &renamed,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &[]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(
        err.contains(":1: a denial under bundle `sha256:0000"),
        "{err}"
    );
    assert!(
        err.contains(&format!("the policy compiles to `{}`", p.digest)),
        "{err}"
    );
    assert!(
        err.contains(":2: a denial under policy `another`, not `gh`"),
        "{err}"
    );
    assert!(text(&o.stdout).contains("nothing to suggest"));
}

#[test]
fn a_line_that_names_no_policy_is_refused_like_a_line_of_another_policy() {
    let d = dir("no-policy");
    let p = policy(&d, "p.policy", GH, "gh");
    let mut anonymous = connect(
        &p,
        "/usr/bin/curl",
        Some("example.org"),
        "93.184.216.34",
        443,
    );
    let o = anonymous.as_object_mut().unwrap();
    o.remove("policy");
    o.insert(
        "metadata".into(),
        json!({ "version": "1.3.0", "product": { "name": "OpenShell" } }),
    );
    let mut unnamed = connect(&p, "/usr/bin/curl", Some("example.net"), "192.0.2.1", 443);
    unnamed["policy"].as_object_mut().unwrap().remove("name");
    let log = write_log(
        &d,
        &lines(&[
            anonymous,
            unnamed,
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &[]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}:1: a denial that names no policy (no `policy.name` or `policy.uid`) (written by `OpenShell`), so it cannot be told to be of `gh`; skipped, as a line of another policy is",
            log.display()
        )),
        "{err}"
    );
    assert!(
        !err.contains(":2:") && !err.contains(":3:"),
        "the bundle digest alone names the policy: {err}"
    );
    let out = text(&o.stdout);
    assert!(!out.contains("example.org"), "{out}");
    assert!(
        out.contains("allow /usr/bin/curl -> example.net:443"),
        "{out}"
    );
    assert!(
        out.contains("allow /usr/bin/curl -> example.com:443"),
        "{out}"
    );
    let v = json(&suggest(&p, &log, &["--format", "json"]));
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["errors"][0]["line"], 1);
}

const WITH_FRAGMENT: &str = r#"policy "frag" {
  include "fragments/base.policy"
  run_as user sandbox group sandbox

  allow /usr/bin/gh -> api.github.com:443
}
"#;

const FRAGMENT: &str = r#"fragment "base" {
  fs read /usr /etc
}
"#;

/// `top/dir/p.policy`, which includes `top/dir/fragments/base.policy`.
fn policy_with_a_fragment(top: &Path) -> Policy {
    let sub = top.join("dir");
    std::fs::create_dir_all(sub.join("fragments")).unwrap();
    std::fs::write(sub.join("fragments/base.policy"), FRAGMENT).unwrap();
    policy(&sub, "p.policy", WITH_FRAGMENT, "frag")
}

#[test]
fn a_policy_with_an_include_is_patched_however_its_path_is_given() {
    let d = dir("include");
    let p = policy_with_a_fragment(&d);
    let log = write_log(
        &d,
        &lines(&[connect(
            &p,
            "/usr/bin/curl",
            Some("example.com"),
            "93.184.216.34",
            443,
        )]),
    );
    let absolute = p.path.to_str().unwrap();
    let sub = d.join("dir");
    for (cwd, given) in [
        (&d, "dir/p.policy"),
        (&d, "./dir/p.policy"),
        (&d, absolute),
        (&sub, "./p.policy"),
        (&sub, "p.policy"),
        (&sub, "../dir/p.policy"),
    ] {
        let o = bin()
            .current_dir(cwd)
            .args([
                "suggest",
                given,
                "--from",
                log.to_str().unwrap(),
                "--format",
                "json",
            ])
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{given}: {}", text(&o.stdout));
        let v = json(&o);
        assert_eq!(v["errors"], json!([]), "{given}");
        assert_eq!(
            patch(&v),
            format!(
                "  # denied in {}:1\n  allow /usr/bin/curl -> example.com:443\n",
                log.display()
            ),
            "{given}"
        );
        assert_eq!(v["proof"]["verdict"], "new-reach", "{given}");
        assert_eq!(v["beyond_denials"], json!([]), "{given}");
        assert_eq!(
            v["replay"],
            json!([{
                "lines": [1],
                "binary": "/usr/bin/curl",
                "request": "connection to example.com:443",
                "before": "deny",
                "after": "allow",
                "rule": "p.policy:8 (/usr/bin/curl)",
                "reason": "`/usr/bin/curl` may connect to `example.com:443` (relayed without inspection)",
            }]),
            "{given}: the rule is blamed relative to the policy's directory"
        );
    }
}

#[test]
fn a_policy_that_does_not_compile_is_reported_by_the_path_given() {
    let d = dir("include-broken");
    policy_with_a_fragment(&d);
    std::fs::write(
        d.join("dir/fragments/base.policy"),
        "fragment \"base\" {\n  fs read\n}\n",
    )
    .unwrap();
    let log = write_log(&d, &[String::new()]);
    let o = bin()
        .current_dir(&d)
        .args(["suggest", "dir/p.policy", "--from", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(err.contains("`dir/p.policy` does not compile"), "{err}");
    assert!(
        err.contains("dir/fragments/base.policy"),
        "the fragment as `check` names it: {err}"
    );
}

#[test]
fn the_patched_policy_checks_formats_unchanged_and_allows_every_denial() {
    let d = dir("roundtrip");
    let p = policy(&d, "p.policy", GH, "gh");
    let events = [
        request(
            &p,
            "/usr/bin/gh",
            "api.github.com",
            "GET",
            "/repos/a/x/pulls",
        ),
        request(
            &p,
            "/usr/bin/gh",
            "api.github.com",
            "GET",
            "/repos/b/x/pulls",
        ),
        request(
            &p,
            "/usr/bin/gh",
            "api.github.com",
            "DELETE",
            "/repos/a/x/labels/{bug}",
        ),
        connect(
            &p,
            "/usr/bin/curl",
            Some("db.internal.example"),
            "10.1.2.3",
            5432,
        ),
        connect(&p, "/usr/bin/ssh", None, "203.0.113.7", 22),
        request(
            &p,
            "/opt/My App/bin/tool[1]",
            "api.github.com",
            "GET",
            "/a/b*c",
        ),
    ];
    let log = write_log(&d, &lines(&events));
    let o = suggest(&p, &log, &["--format", "policy"]);
    // An address rule lets the binary reach any name resolving there, the
    // credential's host included: the proof says so, first.
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let warning = err.lines().nth(1).unwrap_or_default();
    assert!(
        warning.starts_with(
            "warning: the proof shows more than the denials: credential_reach_expansion"
        ) && warning.contains("from `/usr/bin/ssh`"),
        "{err}"
    );
    let patched = text(&o.stdout);
    assert!(
        patched.starts_with(GH.trim_end_matches("}\n")),
        "the policy is kept: {patched}"
    );
    assert!(patched.contains("    addresses 10.1.2.3\n"), "{patched}");
    assert!(
        patched.contains(
            "  allow \"/opt/My App/bin/tool\\\\[1\\\\]\" -> api.github.com:443 http {\n    allow GET \"/a/b\\\\*c\"\n"
        ),
        "glob characters escaped, the word quoted as `fmt` writes it: {patched}"
    );
    let new = d.join("new.policy");
    std::fs::write(&new, &patched).unwrap();
    let check = run(&["check", new.to_str().unwrap()]);
    assert_eq!(code(&check), 0, "{}", text(&check.stderr));
    let fmt = run(&["fmt", "--check", new.to_str().unwrap()]);
    assert_eq!(
        code(&fmt),
        0,
        "fmt would change the patch: {}",
        text(&fmt.stdout)
    );
    let np = new.to_str().unwrap();
    for (args, what) in [
        (
            vec![
                "--binary",
                "/usr/bin/gh",
                "--url",
                "https://api.github.com/repos/a/x/pulls",
            ],
            "GET a",
        ),
        (
            vec![
                "--binary",
                "/usr/bin/gh",
                "--url",
                "https://api.github.com/repos/b/x/pulls",
            ],
            "GET b",
        ),
        (
            vec![
                "--binary",
                "/usr/bin/gh",
                "--method",
                "DELETE",
                "--url",
                "https://api.github.com/repos/a/x/labels/{bug}",
            ],
            "DELETE",
        ),
        (
            vec![
                "--binary",
                "/usr/bin/curl",
                "--host",
                "db.internal.example",
                "--port",
                "5432",
                "--addr",
                "10.1.2.3",
            ],
            "internal",
        ),
        (
            vec![
                "--binary",
                "/usr/bin/ssh",
                "--host",
                "203.0.113.7",
                "--port",
                "22",
            ],
            "address",
        ),
        (
            vec![
                "--binary",
                "/opt/My App/bin/tool[1]",
                "--url",
                "https://api.github.com/a/b*c",
            ],
            "quoted",
        ),
    ] {
        let mut a = vec!["eval", "--policy", np, "--format", "json"];
        a.extend(args);
        let o = run(&a);
        assert_eq!(json(&o)["decision"], "allow", "{what}: {}", text(&o.stdout));
    }
    let still = run(&[
        "eval",
        "--policy",
        np,
        "--binary",
        "/usr/bin/gh",
        "--url",
        "https://api.github.com/repos/a/x/issues",
        "--format",
        "json",
    ]);
    assert_eq!(
        json(&still)["decision"],
        "deny",
        "nothing beyond the denials"
    );
}

#[test]
fn yaml_in_yaml_out() {
    let d = dir("yaml");
    let yaml = "version: 1\n\nfilesystem_policy:\n  read_only:\n    - /usr\n\nprocess:\n  run_as_user: sandbox\n  run_as_group: sandbox\n\n# Reviewed by hand.\nnetwork_policies:\n  github:\n    endpoints:\n      - host: api.github.com\n        port: 443\n        protocol: rest\n        enforcement: enforce\n        access: read-only\n    binaries:\n      - { path: /usr/bin/gh }\n";
    // An OpenShell policy is named after its file.
    let p = policy(&d, "p.yaml", yaml, "p");
    let log = write_log(
        &d,
        &lines(&[
            request(
                &p,
                "/usr/bin/gh",
                "api.github.com",
                "POST",
                "/repos/o/r/issues",
            ),
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "policy"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let patched = text(&o.stdout);
    assert!(
        patched.contains("# Reviewed by hand.\nnetwork_policies:\n"),
        "comments kept: {patched}"
    );
    let doc: serde_yaml::Value = serde_yaml::from_str(&patched).unwrap();
    let np = doc["network_policies"].as_mapping().unwrap();
    assert_eq!(np.len(), 3, "{patched}");
    let gh = &doc["network_policies"]["suggested_gh_api_github_com_443"];
    assert_eq!(gh["endpoints"][0]["protocol"], "rest");
    assert_eq!(gh["endpoints"][0]["enforcement"], "enforce");
    assert_eq!(gh["endpoints"][0]["rules"][0]["allow"]["method"], "POST");
    assert_eq!(
        gh["endpoints"][0]["rules"][0]["allow"]["path"],
        "/repos/o/r/issues"
    );
    assert_eq!(gh["binaries"][0]["path"], "/usr/bin/gh");
    let curl = &doc["network_policies"]["suggested_curl_example_com_443"];
    assert_eq!(curl["endpoints"][0]["host"], "example.com");
    assert!(curl["endpoints"][0].get("protocol").is_none());
    let new = d.join("new.yaml");
    std::fs::write(&new, &patched).unwrap();
    let check = run(&["check", new.to_str().unwrap()]);
    assert_eq!(code(&check), 0, "{}", text(&check.stderr));
    let o = run(&[
        "eval",
        "--policy",
        new.to_str().unwrap(),
        "--binary",
        "/usr/bin/gh",
        "--method",
        "POST",
        "--url",
        "https://api.github.com/repos/o/r/issues",
        "--format",
        "json",
    ]);
    assert_eq!(json(&o)["decision"], "allow");
}

#[test]
fn nothing_denied_nothing_to_suggest() {
    let d = dir("empty");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(&d, &[String::new()]);
    let o = suggest(&p, &log, &["--format", "json"]);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    assert_eq!(v["suggestions"], json!([]));
    assert_eq!(v["proof"], Value::Null);
}

#[test]
fn unreadable_inputs_exit_2_with_a_document() {
    let d = dir("unreadable");
    let p = policy(&d, "p.policy", GH, "gh");
    let o = suggest(&p, &d.join("missing.log"), &["--format", "json"]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot read"),
        "{v}"
    );
    let o = bin()
        .args(["suggest", "nope.policy", "--from", "x.log"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert!(text(&o.stderr).contains("nope.policy"));
}

#[test]
fn markdown_is_a_comment_with_the_diff_the_proof_and_the_replay() {
    let d = dir("markdown");
    let p = policy(&d, "p.policy", GH, "gh");
    let log = write_log(
        &d,
        &lines(&[
            request(&p, "/usr/bin/gh", "api.github.com", "GET", "/repos/o/r"),
            connect(
                &p,
                "/usr/bin/curl",
                Some("example.com"),
                "93.184.216.34",
                443,
            ),
        ]),
    );
    let o = suggest(&p, &log, &["--format", "markdown"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.starts_with("### Suggested policy change\n"), "{md}");
    let diff = md.find("```diff\n").unwrap();
    assert!(
        md.contains("\n+  allow /usr/bin/curl -> example.com:443\n"),
        "{md}"
    );
    let proof = md.find("Policy prover: widened").unwrap();
    let replay = md.find("<details><summary>Each denied request").unwrap();
    assert!(diff < proof && proof < replay, "{md}");
    let line = format!("- allow {}:2 connection to example.com:443", log.display());
    assert!(md.contains(&line), "{md}");
}

/// A request the proxy refused reached it through a rule that names the
/// internal address: the new rule names it too, so both reach it, and
/// what the old rule allowed stays allowed. (The supervisor's test of
/// the whole loop covers an address named by the operator's `--resolve`,
/// which the new rule must not name.)
#[test]
fn a_request_the_proxy_refused_on_an_internal_address_keeps_the_rule_that_reached_it() {
    let d = dir("internal-l7");
    let source = "policy \"svc\" {\n  run_as user sandbox group sandbox\n  fs read /usr\n\n  allow /usr/bin/curl -> svc.internal.example:8080 http {\n    addresses 10.1.2.3\n    allow GET /v1/items\n  }\n}\n";
    let p = policy(&d, "p.policy", source, "svc");
    let mut denied = request(
        &p,
        "/usr/bin/curl",
        "svc.internal.example",
        "GET",
        "/v1/orders",
    );
    denied["dst_endpoint"]["ip"] = json!("10.1.2.3");
    denied["dst_endpoint"]["port"] = json!(8080);
    denied["http_request"]["url"]["port"] = json!(8080);
    denied["http_request"]["url"]["scheme"] = json!("http");
    let log = write_log(&d, &lines(&[denied]));
    let o = suggest(&p, &log, &["--format", "policy"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let patched = text(&o.stdout);
    assert!(patched.contains("allow GET /v1/orders"), "{patched}");
    assert_eq!(
        patched.matches("    addresses 10.1.2.3\n").count(),
        2,
        "named as the author's rule names it: {patched}"
    );
    let new = d.join("new.policy");
    std::fs::write(&new, &patched).unwrap();
    for path in ["/v1/items", "/v1/orders"] {
        let url = format!("http://svc.internal.example:8080{path}");
        let e = run(&[
            "eval",
            "--policy",
            new.to_str().unwrap(),
            "--binary",
            "/usr/bin/curl",
            "--url",
            &url,
            "--addr",
            "10.1.2.3",
            "--format",
            "json",
        ]);
        assert_eq!(json(&e)["decision"], "allow", "{path}: {}", text(&e.stdout));
    }
}

/// OpenShell's own log (`openshell-ocsf`, as its supervisor writes a
/// refused CONNECT and a refused request) is read against the OpenShell
/// policy given, which it cannot name; against a policy in this language
/// its lines are refused, saying which policy they need.
#[test]
fn openshells_own_log_is_read_against_its_yaml_policy() {
    let d = dir("openshell-log");
    let yaml = "version: 1\n\nfilesystem_policy:\n  read_only:\n    - /usr\n\nprocess:\n  run_as_user: sandbox\n  run_as_group: sandbox\n\nnetwork_policies:\n  github:\n    endpoints:\n      - host: api.github.com\n        port: 443\n        protocol: rest\n        enforcement: enforce\n        access: read-only\n    binaries:\n      - { path: /usr/bin/gh }\n";
    let p = policy(&d, "p.yaml", yaml, "p");
    let product = json!({ "version": "1.8.0", "product": { "name": "OpenShell Sandbox Supervisor", "vendor_name": "OpenShell" }, "uid": "sb-1" });
    let connect = json!({
        "class_uid": 4001, "activity_id": 1, "action_id": 2, "action": "Denied",
        "message": "CONNECT denied pypi.org:443",
        "dst_endpoint": { "domain": "pypi.org", "port": 443 },
        "actor": { "process": { "name": "/usr/bin/python3", "pid": 77 } },
        "firewall_rule": { "name": "-", "type": "opa" },
        "metadata": product,
    });
    let request = json!({
        "class_uid": 4002, "activity_id": 6, "action_id": 2, "action": "Denied",
        "dst_endpoint": { "domain": "api.github.com", "port": 443 },
        "http_request": { "http_method": "POST", "url": { "scheme": "https", "hostname": "api.github.com", "path": "/repos/o/r/issues", "port": 443 } },
        "actor": { "process": { "name": "/usr/bin/gh", "pid": 78 } },
        "firewall_rule": { "name": "github", "type": "opa" },
        "metadata": product,
    });
    let log = write_log(&d, &lines(&[connect, request]));
    let o = suggest(&p, &log, &["--format", "json"]);
    let v = json(&o);
    assert_eq!(code(&o), 0, "{v}");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("2 denial(s) come from OpenShell's own log, which names no policy"),
        "{v}"
    );
    let replay = v["replay"].as_array().unwrap();
    assert_eq!(replay.len(), 2, "{v}");
    assert!(replay.iter().all(|r| r["after"] == "allow"), "{v}");

    let dsl = policy(&d, "p.policy", GH, "gh");
    let o = suggest(&dsl, &log, &[]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(
        err.contains(":1: a line of OpenShell's own log, which names no policy: it is read only against the OpenShell YAML policy the sandbox ran"),
        "{err}"
    );
}

/// A host whose internal address the operator named (`--resolve`): the
/// supervisor asked the host's rules without the address, its deny line
/// says so, and the replay asks as it did, so the suggested rule (which
/// names no address) is shown to admit the request.
#[test]
fn an_address_the_operator_named_replays_as_the_supervisor_decided() {
    let d = dir("operator-named");
    let p = policy(
        &d,
        "p.policy",
        "policy \"gh\" {\n  run_as user sandbox group sandbox\n  fs read /usr\n  allow /usr/bin/gh -> git.internal:443 http {\n    allow GET /health\n  }\n}\n",
        "gh",
    );
    let mut denied = request(
        &p,
        "/usr/bin/gh",
        "git.internal",
        "POST",
        "/repos/o/r/issues",
    );
    denied["dst_endpoint"]["ip"] = json!("10.0.0.5");
    denied["unmapped"]["resolved_by"] = json!("operator");
    let log = write_log(&d, &lines(&[denied]));
    let o = suggest(&p, &log, &["--format", "json"]);
    let v = json(&o);
    assert_eq!(code(&o), 0, "{v}");
    let patch = v["patch"].as_str().unwrap();
    assert!(!patch.contains("addresses"), "{patch}");
    let replay = &v["replay"][0];
    assert_eq!(replay["after"], "allow", "{v}");
}
