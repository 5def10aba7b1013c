//! The output contract CI steps rely on: a machine format prints a document
//! on every exit (input and usage errors included), a closed stdout never
//! crashes a command, inconclusive risk questions exit 3, no failure is
//! silent, and blame names the rule written for the request.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod common;
mod sarif_schema;

use std::path::PathBuf;
use std::process::{Output, Stdio};

use common::{bin, code, json, run, text};

fn tmp(name: &str, content: &str) -> String {
    let d = std::env::temp_dir().join(format!("osp-contract-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p: PathBuf = d.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_string_lossy().into_owned()
}

const GOOD: &str = "policies/github-readonly.policy";

#[test]
fn diff_prints_a_document_when_a_side_does_not_compile() {
    let broken = tmp("broken.policy", "policy \"b\" {\n  fs reed /usr\n}\n");
    let o = run(&["diff", "--prove", &broken, GOOD, "--format", "json"]);
    assert_eq!(code(&o), 2, "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["verdict"], "error");
    assert_eq!(v["findings"], serde_json::json!([]));
    let d = &v["files"][0]["diagnostics"][0];
    assert_eq!(d["code"], "E0100");
    assert_eq!(d["line"], 2);
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("does not compile")
    );

    let o = run(&[
        "diff",
        "--prove",
        GOOD,
        "no/such.policy",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    assert_eq!(json(&o)["errors"][0]["path"], "no/such.policy");

    let o = run(&["diff", "--prove", &broken, GOOD, "--format", "sarif"]);
    assert_eq!(code(&o), 2);
    let v = sarif_schema::validated(&o);
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["results"][0]["ruleId"], "E0100");
    assert_eq!(v["runs"][0]["invocations"][0]["executionSuccessful"], false);

    let o = run(&["diff", "--prove", &broken, GOOD, "--format", "github"]);
    assert_eq!(code(&o), 2);
    assert!(
        text(&o.stdout).starts_with("::error file="),
        "{}",
        text(&o.stdout)
    );

    let o = run(&["diff", "--prove", &broken, GOOD, "--format", "markdown"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stdout).contains("E0100"), "{}", text(&o.stdout));
}

#[test]
fn check_and_eval_print_a_document_on_input_errors() {
    let o = run(&["check", GOOD, "no/such.policy", "--format", "json"]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["files"][0]["path"], GOOD);
    assert_eq!(v["errors"][0]["path"], "no/such.policy");

    let o = run(&["check", "no/such.policy", "--format", "sarif"]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        sarif_schema::validated(&o)["runs"][0]["results"][0]["ruleId"],
        "input-error"
    );

    let o = run(&["check", "no/such.policy", "--format", "github"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stdout).starts_with("::error file=no/such.policy"));

    let broken = tmp("eval-broken.policy", "policy \"b\" {\n  alow x -> y:1\n}\n");
    let o = run(&[
        "eval",
        "--policy",
        &broken,
        "--binary",
        "/usr/bin/curl",
        "--host",
        "a.example.com",
        "--port",
        "443",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    let v = json(&o);
    assert_eq!(v["decision"], "error");
    assert_eq!(v["files"][0]["diagnostics"][0]["code"], "E0101");

    let o = run(&[
        "eval",
        "--policy",
        GOOD,
        "--binary",
        "/usr/bin/curl",
        "--url",
        "ftp://x",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    assert!(json(&o)["reason"].as_str().unwrap().contains("--url"));
}

#[test]
fn usage_errors_print_a_document_in_machine_formats() {
    let o = run(&["eval", "--format", "json", "--binary", "/usr/bin/curl"]);
    assert_eq!(code(&o), 2);
    assert_eq!(json(&o)["decision"], "error");
    assert!(text(&o.stderr).contains("required"), "{}", text(&o.stderr));

    let o = run(&["diff", "--prove", GOOD, "--format=json"]);
    assert_eq!(code(&o), 2);
    assert_eq!(json(&o)["verdict"], "error");

    let o = run(&["check", "--format", "sarif"]);
    assert_eq!(code(&o), 2);
    assert_eq!(sarif_schema::validated(&o)["version"], "2.1.0");

    // Human format: clap's message on stderr, nothing on stdout.
    let o = run(&["check"]);
    assert_eq!(code(&o), 2);
    assert!(o.stdout.is_empty());
}

/// Runs `args` with stdout a pipe whose reading end is already closed.
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    bin()
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let bundle = std::env::temp_dir().join(format!("osp-contract-{}.bundle", std::process::id()));
    let b = bundle.to_str().unwrap();
    assert_eq!(code(&run(&["compile", GOOD, "-o", b])), 0);
    let cases: &[(&[&str], i32)] = &[
        (&["explain", b], 0),
        (&["check", GOOD, "--format", "json"], 0),
        (&["compile", GOOD, "-o", b], 0),
        (
            &[
                "eval",
                "--bundle",
                b,
                "--binary",
                "/usr/bin/curl",
                "--host",
                "x",
                "--port",
                "1",
            ],
            0,
        ),
        (
            &["diff", "--prove", GOOD, "policies/github-readwrite.policy"],
            1,
        ),
        (
            &[
                "import",
                "tests/shared/fixtures/openshell/prover-policy.yaml",
            ],
            0,
        ),
    ];
    for (args, want) in cases {
        let o = with_closed_stdout(args);
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(code(&o), *want, "{args:?} keeps its own exit status: {err}");
    }
    let _ = std::fs::remove_file(bundle);
}

#[test]
fn check_prove_exits_3_when_a_risk_question_is_inconclusive() {
    // A question with a solution goes to the solver, and a zero budget
    // leaves it no time to answer; questions the finite-domain search
    // settles are answered whatever the budget.
    let settled = [
        "check",
        "--prove",
        "--timeout-ms",
        "0",
        "policies/github-readwrite.policy",
    ];
    assert_eq!(code(&run(&settled)), 0);
    let args = [
        "check",
        "--prove",
        "--timeout-ms",
        "0",
        "examples/risky.policy",
    ];
    let o = run(&args);
    assert_eq!(code(&o), 3, "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("inconclusive"));
    let o = run(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(code(&o), 3);
    assert!(json(&o)["inconclusive"].is_string());
    // Errors outrank an unanswered question.
    let broken = tmp("prove-broken.policy", "policy \"b\" {\n  fs reed /usr\n}\n");
    assert_eq!(
        code(&run(&["check", "--prove", "--timeout-ms", "0", &broken])),
        1
    );
}

#[test]
fn an_empty_policy_is_an_error_everywhere() {
    for content in ["", "# only a comment\n"] {
        let f = tmp("empty.policy", content);
        let check = run(&["check", &f]);
        let compile = run(&["compile", &f, "-o", &format!("{f}.bundle")]);
        let eval = run(&[
            "eval",
            "--policy",
            &f,
            "--binary",
            "/x",
            "--host",
            "a.example.com",
            "--port",
            "1",
        ]);
        let fmt = run(&["fmt", "--check", &f]);
        for (what, o, want) in [
            ("check", &check, 1),
            ("compile", &compile, 1),
            ("eval", &eval, 2),
            ("fmt", &fmt, 1),
        ] {
            assert_eq!(code(o), want, "{what} on {content:?}");
            assert!(
                text(&o.stderr).contains("E0106"),
                "{what} on {content:?} says why: {}",
                text(&o.stderr)
            );
        }
    }
}

#[test]
fn a_clean_check_says_so_in_one_line_and_machine_formats_stay_quiet() {
    let o = run(&["check", GOOD, "policies/default.policy"]);
    assert_eq!(code(&o), 0);
    assert_eq!(text(&o.stderr), "checked 2 files: no errors, no warnings\n");
    let o = run(&["check", GOOD, "--format", "json"]);
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

#[test]
fn a_misspelt_statement_gets_a_suggestion() {
    let f = tmp(
        "typo.policy",
        "policy \"t\" {\n  alow /usr/bin/curl -> a.example.com:443\n}\n",
    );
    let o = run(&["check", &f, "--format", "json"]);
    assert_eq!(code(&o), 1);
    let help = json(&o)["files"][0]["diagnostics"][0]["help"].clone();
    assert!(
        help.as_str().unwrap().starts_with("did you mean `allow`?"),
        "{help}"
    );
}

#[test]
fn every_flag_of_every_command_is_described() {
    for cmd in [
        "check", "compile", "explain", "eval", "fmt", "import", "diff",
    ] {
        let help = text(&run(&[cmd, "--help"]).stdout);
        for line in help.lines().filter(|l| l.trim_start().starts_with('-')) {
            let described = line.trim_start().split_once("  ").is_some_and(|(_, rest)| {
                let rest = rest.trim();
                !rest.is_empty() && !rest.starts_with('[')
            });
            assert!(described, "`{cmd} --help` does not describe: {line}");
        }
    }
}

#[test]
fn blame_names_the_rule_written_for_the_binary() {
    let f = tmp(
        "blame.policy",
        "policy \"blame\" {\n  binaries a = /usr/bin/aaa\n  binaries b = /usr/bin/bbb\n  allow a -> example.com:443\n  allow b -> example.com:443\n}\n",
    );
    for (binary, line, name) in [("/usr/bin/aaa", 4, "a"), ("/usr/bin/bbb", 5, "b")] {
        let o = run(&[
            "eval",
            "--policy",
            &f,
            "--binary",
            binary,
            "--host",
            "example.com",
            "--port",
            "443",
        ]);
        assert_eq!(code(&o), 0);
        let want = format!("rule:       {f}:{line} ({name})");
        assert!(text(&o.stdout).contains(&want), "{}", text(&o.stdout));
    }
    let o = run(&[
        "eval",
        "--policy",
        &f,
        "--binary",
        "/usr/bin/ccc",
        "--host",
        "example.com",
        "--port",
        "443",
    ]);
    assert!(
        text(&o.stdout).contains("rule:       none (no rule allowed it)"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn import_writes_the_credentials_fragment_and_keeps_the_digest() {
    let fx = "tests/shared/fixtures/openshell";
    let dir = std::env::temp_dir().join(format!("osp-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("p.policy");
    let out_s = out.to_str().unwrap();
    let creds = format!("{fx}/prover-credentials.yaml");
    let yaml = format!("{fx}/prover-policy.yaml");
    let o = run(&["import", &yaml, "--credentials", &creds, "-o", out_s]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let fragment = std::fs::read_to_string(dir.join("prover-credentials.policy")).unwrap();
    assert!(fragment.contains("credential github-pat {"), "{fragment}");
    let policy = std::fs::read_to_string(&out).unwrap();
    assert!(
        policy.contains("include \"prover-credentials.policy\""),
        "{policy}"
    );
    let digest = |args: &[&str]| {
        let o = run(args);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        text(&o.stdout).trim().to_owned()
    };
    let a = dir.join("a.bundle");
    let b = dir.join("b.bundle");
    assert_eq!(
        digest(&["compile", out_s, "-o", a.to_str().unwrap()]),
        digest(&[
            "compile",
            &yaml,
            "--credentials",
            &creds,
            "-o",
            b.to_str().unwrap()
        ])
    );
    // Without -o there is nowhere to put the fragment: a usage error.
    assert_eq!(code(&run(&["import", &yaml, "--credentials", &creds])), 2);
}

/// An endpoint's `credential_binding` gives an endpointless credential of
/// the credentials file its host: `eval` on the imported policy injects it
/// on a request to that host and not to another endpoint's, and the
/// imported policy compiles to the digest of the YAML with `--credentials`.
#[test]
fn import_binds_a_credential_to_its_endpoint() {
    let dir = std::env::temp_dir().join(format!("osp-binding-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("bound.yaml");
    std::fs::write(
        &yaml,
        "version: 1\nnetwork_policies:\n  cloud:\n    endpoints:\n      - { host: api.cloud.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: work-cloud } }\n      - { host: other.example, port: 443, protocol: rest, access: full, enforcement: enforce }\n    binaries: [{ path: /usr/bin/curl }]\n",
    )
    .unwrap();
    let creds = dir.join("cloud-credentials.yaml");
    std::fs::write(
        &creds,
        "credentials:\n  - { name: work-cloud, type: generic, injected_via: CLOUD_TOKEN }\n",
    )
    .unwrap();
    let (yaml, creds) = (yaml.to_str().unwrap(), creds.to_str().unwrap());
    let out = dir.join("bound.policy");
    let out_s = out.to_str().unwrap();
    let o = run(&["import", yaml, "--credentials", creds, "-o", out_s]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let fragment = std::fs::read_to_string(dir.join("cloud-credentials.policy")).unwrap();
    assert!(fragment.contains("hosts api.cloud.example\n"), "{fragment}");
    let eval = |url: &str| {
        let o = run(&[
            "eval",
            "--policy",
            out_s,
            "--binary",
            "/usr/bin/curl",
            "--url",
            url,
            "--format",
            "json",
        ]);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        json(&o)
    };
    let bound = eval("https://api.cloud.example/v1/x");
    assert_eq!(bound["decision"], "allow", "{bound}");
    assert_eq!(bound["credential"], "work-cloud", "{bound}");
    let other = eval("https://other.example/v1/x");
    assert_eq!(other["decision"], "allow", "{other}");
    assert!(other["credential"].is_null(), "{other}");
    let digest = |args: &[&str]| {
        let o = run(args);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        text(&o.stdout).trim().to_owned()
    };
    let (a, b) = (dir.join("a.bundle"), dir.join("b.bundle"));
    assert_eq!(
        digest(&["compile", out_s, "-o", a.to_str().unwrap()]),
        digest(&[
            "compile",
            yaml,
            "--credentials",
            creds,
            "-o",
            b.to_str().unwrap()
        ])
    );
    // Without the credentials file the binding names nothing: refused at
    // its key, with the fix.
    let o = run(&["check", yaml]);
    assert_eq!(code(&o), 1);
    let err = text(&o.stdout) + &text(&o.stderr);
    assert!(
        err.contains("E0706") && err.contains("--credentials"),
        "{err}"
    );
}

#[test]
fn diff_blames_the_rule_that_allows_the_witness_binary() {
    // In base v2 copilot's group reaches github.com and api.github.com at
    // L4, where the credentials file binds a credential: OpenShell refuses
    // those connections (no `allow_uninspected_credentials`), so no
    // credentialed access is new. The new reach is copilot's, to the
    // group's other hosts, blamed on the line of the witness's host.
    let base = "tests/shared/fixtures/community/base";
    let o = run(&[
        "diff",
        "--prove",
        &format!("{base}/v1.yaml"),
        &format!("{base}/v2.yaml"),
        "--credentials",
        "tests/shared/fixtures/openshell/prover-credentials.yaml",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v = json(&o);
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v}");
    let reach = v["reach"].as_array().unwrap();
    assert!(!reach.is_empty());
    let yaml = std::fs::read_to_string(format!("{base}/v2.yaml")).unwrap();
    for f in reach {
        assert!(
            f["witness"]["binary"].as_str().unwrap().contains("copilot"),
            "{f}"
        );
        let hosts: Vec<&str> = f["region"]["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        assert!(
            !hosts.contains(&"github.com") && !hosts.contains(&"api.github.com"),
            "{f}"
        );
        let line = f["new_rule"]["line"].as_u64().unwrap() as usize;
        let host = f["witness"]["host"].as_str().unwrap();
        assert!(
            yaml.lines().nth(line - 1).unwrap().contains(host),
            "line {line} does not name {host}: {f}"
        );
    }
}
