//! Every policy shipped in `policies/`, as written, under the real
//! supervisor: it starts a program as the `sandbox` user, and for each
//! policy with network rules one request its rules allow reaches a local
//! upstream while one they refuse does not. The policies' host names are
//! mapped to loopback with `--resolve`, inside a network namespace this
//! test creates, so nothing leaves the machine.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Dir, TestNet, output, stderr, stdout};

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies");

/// The secrets the shipped policies' credentials read from the
/// supervisor's environment; stand-ins, the upstream is local.
const SECRETS: &[&str] = &[
    "GITHUB_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "MCP_API_KEY",
];

/// Prints each request's HTTP status (or `error:...`), space-separated.
const NODE_CLIENT: &str = r"
const reqs = JSON.parse(process.argv[1]);
(async () => {
  const out = [];
  for (const [method, url] of reqs) {
    const mod = require(url.startsWith('https:') ? 'https' : 'http');
    out.push(await new Promise((done) => {
      const q = mod.request(url, { method }, (res) => { res.resume(); res.on('end', () => done(res.statusCode)); });
      q.on('error', (e) => done('error:' + e.code));
      q.end();
    }));
  }
  console.log(out.join(' '));
})();
";

const PYTHON_CLIENT: &str = r"
import json, sys, urllib.request, urllib.error
out = []
for method, url in json.loads(sys.argv[1]):
    try:
        out.append(str(urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30).status))
    except urllib.error.HTTPError as e:
        out.append(str(e.code))
    except Exception as e:
        out.append('error:' + repr(e))
print(' '.join(out))
";

/// How a policy's own client is driven.
#[derive(Clone, Copy)]
enum Client {
    Curl,
    Node,
    Python,
    /// `git ls-remote URL`: git's HTTPS helper is what connects.
    Git,
}

/// One allowed and one refused request for a policy with network rules.
struct NetCase {
    policy: &'static str,
    client: Client,
    /// Host names the policy's rules use, all mapped to 127.0.0.1.
    hosts: &'static [&'static str],
    /// The port the local plain-HTTP upstream listens on (TLS is on 443).
    plain_port: u16,
    allowed: (&'static str, &'static str),
    refused: (&'static str, &'static str),
    /// JSON bodies of the allowed and the refused request (curl only, sent
    /// as `application/json`), for endpoints whose rules judge the body.
    bodies: Option<(&'static str, &'static str)>,
}

const NET_CASES: &[NetCase] = &[
    NetCase {
        policy: "claude-code",
        client: Client::Node,
        hosts: &["api.anthropic.com"],
        plain_port: 80,
        allowed: ("POST", "https://api.anthropic.com/v1/messages"),
        refused: ("GET", "https://api.anthropic.com/v1/files"),
        bodies: None,
    },
    NetCase {
        policy: "codex",
        client: Client::Node,
        hosts: &["api.openai.com"],
        plain_port: 80,
        allowed: ("POST", "https://api.openai.com/v1/responses"),
        refused: ("DELETE", "https://api.openai.com/v1/models"),
        bodies: None,
    },
    NetCase {
        policy: "git-clone",
        client: Client::Git,
        hosts: &["github.com"],
        plain_port: 80,
        allowed: ("GET", "https://github.com/o/r"),
        refused: ("GET", "https://github.com/o/r/extra"),
        bodies: None,
    },
    NetCase {
        policy: "github-graphql",
        client: Client::Curl,
        hosts: &["api.github.com"],
        plain_port: 80,
        allowed: ("POST", "https://api.github.com/graphql"),
        refused: ("POST", "https://api.github.com/graphql"),
        bodies: Some((
            r#"{"query":"query { viewer { login } }"}"#,
            r#"{"query":"mutation Star { addStar(input: {starrableId: \"R_1\"}) { clientMutationId } }"}"#,
        )),
    },
    NetCase {
        policy: "github-readonly",
        client: Client::Curl,
        hosts: &["api.github.com"],
        plain_port: 80,
        allowed: ("GET", "https://api.github.com/repos/o/r"),
        refused: ("POST", "https://api.github.com/repos/o/r/issues"),
        bodies: None,
    },
    NetCase {
        policy: "github-readwrite",
        client: Client::Node,
        hosts: &["api.github.com"],
        plain_port: 80,
        allowed: ("POST", "https://api.github.com/repos/o/r/issues"),
        refused: ("PUT", "https://api.github.com/repos/o/r/rulesets/1"),
        bodies: None,
    },
    NetCase {
        policy: "local-inference",
        client: Client::Curl,
        hosts: &[],
        plain_port: 11434,
        allowed: ("POST", "http://127.0.0.1:11434/api/generate"),
        refused: ("DELETE", "http://127.0.0.1:11434/api/delete"),
        bodies: None,
    },
    NetCase {
        policy: "mcp-tools",
        client: Client::Curl,
        hosts: &["mcp.example.com"],
        plain_port: 80,
        allowed: ("POST", "https://mcp.example.com/mcp"),
        refused: ("POST", "https://mcp.example.com/mcp"),
        bodies: Some((
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_email","arguments":{}}}"#,
        )),
    },
    NetCase {
        policy: "package-install",
        client: Client::Python,
        hosts: &["pypi.org"],
        plain_port: 80,
        allowed: ("GET", "https://pypi.org/simple/requests/"),
        refused: ("POST", "https://pypi.org/legacy/"),
        bodies: None,
    },
];

/// The shipped policies run as `sandbox`; without that user nothing runs.
fn require_sandbox_user() {
    let found = Command::new("getent")
        .args(["passwd", "sandbox"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "the shipped policies say `run_as user sandbox group sandbox`, and this machine has no \
         user `sandbox`: run scripts/install-deps, which creates it"
    );
}

fn shipped() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(POLICIES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "policy"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "policies/ holds {} policies", v.len());
    v
}

fn name(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// Compiles a shipped policy as it is; (bundle path, has network rules).
fn compile(dir: &Dir, policy: &Path) -> (PathBuf, bool) {
    let (checked, bundle) = policy_lang::load::compile_file(policy, None).unwrap();
    let bundle = bundle.unwrap_or_else(|| {
        panic!(
            "{} does not compile: {:?}",
            policy.display(),
            checked.diagnostics
        )
    });
    let out = dir.join(&format!("{}.bundle", name(policy)));
    std::fs::write(&out, bundle.to_bytes()).unwrap();
    (out, !bundle.enforcement.seccomp.routes.is_empty())
}

fn run(net: &TestNet, dir: &Dir, bundle: &Path, extra: &[String], cmd: &[&str]) -> Output {
    let mut args = vec![
        "run".to_owned(),
        "--bundle".to_owned(),
        bundle.display().to_string(),
        "--workdir".to_owned(),
        dir.path().display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    args.push("--".to_owned());
    args.extend(cmd.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut c = net.supervisor(&args, None);
    for s in SECRETS {
        c.env(s, "stand-in-secret");
    }
    output(c)
}

#[test]
fn every_shipped_policy_starts_a_program_as_the_sandbox_user() {
    require_sandbox_user();
    for policy in shipped() {
        let (net, dir) = (TestNet::new(), Dir::new());
        let (bundle, _) = compile(&dir, &policy);
        let out = run(
            &net,
            &dir,
            &bundle,
            &[],
            &[
                "/usr/bin/sh",
                "-c",
                "id -un && echo started > ./started && cat ./started",
            ],
        );
        assert!(
            out.status.success(),
            "{}: exit {:?}\n{}",
            policy.display(),
            out.status.code(),
            stderr(&out)
        );
        assert_eq!(stdout(&out), "sandbox\nstarted\n", "{}", policy.display());
    }
}

#[test]
fn a_command_that_is_not_found_exits_127() {
    require_sandbox_user();
    let (net, dir) = (TestNet::new(), Dir::new());
    let (bundle, _) = compile(&dir, &Path::new(POLICIES).join("default.policy"));
    let out = run(&net, &dir, &bundle, &[], &["no-such-command-here"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
}

/// curl's arguments for one request, with its JSON body if it has one.
fn curl_args(method: &str, url: &str, body: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = vec!["-sS".into(), "-X".into(), method.into(), url.into()];
    if let Some(body) = body {
        args.extend([
            "-H".into(),
            "Content-Type: application/json".into(),
            "--data-raw".into(),
            body.into(),
        ]);
    }
    args
}

fn client_command(
    client: Client,
    requests: &[(&str, &str)],
    bodies: Option<(&str, &str)>,
) -> Vec<String> {
    let json = serde_json::to_string(requests).unwrap();
    match client {
        Client::Curl => {
            let bodies = bodies.map(|(a, r)| [a, r]);
            let script = requests
                .iter()
                .enumerate()
                .map(|(i, (m, u))| {
                    let body = bodies.and_then(|b| b.get(i).copied());
                    let args: Vec<String> = curl_args(m, u, body)
                        .iter()
                        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
                        .collect();
                    format!("curl -o /dev/null -w '%{{http_code}} ' {}", args.join(" "))
                })
                .collect::<Vec<_>>()
                .join("; ");
            vec!["/usr/bin/sh".into(), "-c".into(), script]
        }
        Client::Node => vec![
            common::exe("/usr/bin/node"),
            "-e".into(),
            NODE_CLIENT.into(),
            json,
        ],
        Client::Python => vec![
            "/usr/bin/python3.11".into(),
            "-c".into(),
            PYTHON_CLIENT.into(),
            json,
        ],
        Client::Git => {
            let script = requests
                .iter()
                .map(|(_, u)| format!("/usr/bin/git ls-remote {u} 2>&1; echo"))
                .collect::<Vec<_>>()
                .join("; ");
            vec!["/usr/bin/sh".into(), "-c".into(), script]
        }
    }
}

/// The origin-form target the upstream sees for `url` (git adds its
/// discovery request's path and query).
fn target(client: Client, url: &str) -> String {
    let after = url.split_once("://").unwrap().1;
    let path = after.find('/').map_or("/", |i| &after[i..]);
    match client {
        Client::Git => format!("{path}/info/refs?service=git-upload-pack"),
        _ => path.to_owned(),
    }
}

#[test]
fn every_shipped_policy_with_network_rules_allows_its_own_and_refuses_others() {
    require_sandbox_user();
    let mut covered = Vec::new();
    for policy in shipped() {
        let dir = Dir::new();
        let (bundle, networked) = compile(&dir, &policy);
        let n = name(&policy);
        let case = NET_CASES.iter().find(|c| c.policy == n);
        if !networked {
            assert!(case.is_none(), "{n} has no network rules but a case");
            continue;
        }
        let case = case.unwrap_or_else(|| {
            panic!("{n} has network rules: add an allowed and a refused request to NET_CASES")
        });
        covered.push(n.clone());
        let net = TestNet::new();
        let up = upstream::serve(
            net.tcp("127.0.0.1:443"),
            net.tcp(&format!("127.0.0.1:{}", case.plain_port)),
            dir.path(),
            case.hosts,
            None,
        );
        let log = dir.log();
        let mut extra: Vec<String> = case
            .hosts
            .iter()
            .flat_map(|h| ["--resolve".to_owned(), format!("{h}=127.0.0.1")])
            .collect();
        extra.extend([
            "--upstream-ca".to_owned(),
            up.ca_file.display().to_string(),
            "--log".to_owned(),
            log.display().to_string(),
        ]);
        let cmd = client_command(case.client, &[case.allowed, case.refused], case.bodies);
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let out = run(&net, &dir, &bundle, &extra, &cmd);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        // Bodies are compared only where the rules judge them.
        let (allowed_body, refused_body) = case.bodies.unwrap_or_default();
        let seen: Vec<(String, String, Vec<u8>)> = up
            .seen()
            .into_iter()
            .map(|s| {
                let body = if case.bodies.is_some() {
                    s.body
                } else {
                    Vec::new()
                };
                (s.method, s.target, body)
            })
            .collect();
        let (allowed, refused) = (case.allowed, case.refused);
        let want = (
            allowed.0.to_owned(),
            target(case.client, allowed.1),
            allowed_body.as_bytes().to_vec(),
        );
        assert!(
            seen.contains(&want),
            "{n}: the allowed {} {} did not reach the upstream (it saw {seen:?})\n{said}",
            allowed.0,
            allowed.1
        );
        let refused_target = target(case.client, refused.1);
        assert!(
            !seen
                .iter()
                .any(|(_, t, b)| *t == refused_target && b == refused_body.as_bytes()),
            "{n}: the refused {} {} reached the upstream\n{said}",
            refused.0,
            refused.1
        );
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            said.contains("403"),
            "{n}: the refused request did not get the proxy's 403\n{said}\nlog: {log_text}"
        );
        assert!(
            log_text.contains(&format!("{n}.policy:")),
            "{n}: the deny log does not name the policy's rule\n{log_text}\n{said}"
        );
        if let Client::Curl = case.client {
            assert_refusal_names_the_rule(&net, &dir, &bundle, &extra, case, &log_text);
        }
    }
    let mut expected: Vec<&str> = NET_CASES.iter().map(|c| c.policy).collect();
    expected.sort_unstable();
    assert_eq!(covered, expected, "every case is for a shipped policy");
}

/// The 403 body's `rule` is the documented `file:line (binaries)` of a
/// rule in this policy, the same one the deny log names.
fn assert_refusal_names_the_rule(
    net: &TestNet,
    dir: &Dir,
    bundle: &Path,
    extra: &[String],
    case: &NetCase,
    log_text: &str,
) {
    let (method, url) = case.refused;
    let mut cmd = vec!["/usr/bin/curl".to_owned()];
    cmd.extend(curl_args(method, url, case.bodies.map(|(_, r)| r)));
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = run(net, dir, bundle, extra, &cmd);
    let body: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
        panic!(
            "{}: 403 body is not JSON ({e}): {}",
            case.policy,
            stdout(&out)
        )
    });
    let rule = body["rule"].as_str().unwrap_or_default();
    let file_line = format!("{}.policy:", case.policy);
    assert!(
        rule.contains(&file_line) && rule.ends_with(')') && rule.contains(" ("),
        "{}: the 403 body's rule is not `file:line (binaries)`: {body}",
        case.policy
    );
    assert!(
        log_text.contains(&format!("\"name\":\"{rule}\"")),
        "{}: the 403 body names `{rule}`, the deny log another rule\n{log_text}",
        case.policy
    );
}
