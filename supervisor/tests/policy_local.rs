//! The advisor endpoint inside the sandbox, `http://policy.local/`,
//! attacked from the workload: a refused request is listed with no secret
//! in it, a proposal forwards exactly the logged line (to a fake gateway
//! that records it), and the agent can neither invent a denial, flood the
//! gateway, reach the endpoint from a binary the policy does not name,
//! nor reach it in a policy without the statement, over TLS, or by
//! sending `Host: policy.local` down a connection to another host.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Dir, SYSTEM, TestNet, exe, log_lines, output, stderr, stdout};
use serde_json::{Value, json};

/// The secret the supervisor holds for the credential.
const SECRET: &str = "advisor-secret-0123456789";

/// The agent: python3, asking everything it asks in one run and printing
/// one JSON line per answer. argv[1]: the plain upstream's port, argv[2]:
/// the steps to take (a JSON list of names).
const AGENT_PY: &str = r#"
import http.client, json, os, socket, ssl, sys
port, steps = int(sys.argv[1]), json.loads(sys.argv[2])
def ask(host, p, method, path, body=None, headers=None):
    try:
        c = http.client.HTTPConnection(host, p, timeout=10)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        text = r.read().decode()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = text
        return {"status": r.status, "body": doc, "policy": r.getheader("x-openshell-policy"),
                "retry_after": r.getheader("retry-after"), "allow": r.getheader("allow")}
    except Exception as e:
        return {"status": 0, "error": repr(e)}
def out(name, v):
    print(json.dumps({"step": name, "answer": v}), flush=True)
ids = []
for step in steps:
    if step == "refused":
        out(step, ask("local.test", port, "GET", "/public", headers={"Authorization": "Bearer " + os.environ.get("TOKEN", "")}))
    elif step == "denials":
        a = ask("policy.local", 80, "GET", "/denials")
        if a.get("status") == 200:
            ids = [d["id"] for d in a["body"]["denials"]]
        out(step, a)
    elif step.startswith("propose"):
        body = json.dumps({"denials": ids[-1:], "rationale": "the agent needs /public with its token " + step})
        out(step, ask("policy.local", 80, "POST", "/proposals", body, {"Content-Type": "application/json"}))
    elif step == "invented":
        out(step, ask("policy.local", 80, "POST", "/proposals", json.dumps({"denials": [99999], "rationale": "trust me"})))
    elif step == "too_large":
        out(step, ask("policy.local", 80, "POST", "/proposals", json.dumps({"denials": ids[-1:], "rationale": "x" * 20000})))
    elif step == "not_found":
        out(step, ask("policy.local", 80, "GET", "/approve"))
    elif step == "wrong_method":
        out(step, ask("policy.local", 80, "DELETE", "/denials"))
    elif step == "smuggled_host":
        out(step, ask("local.test", port, "GET", "/denials", headers={"Host": "policy.local"}))
    elif step == "tls_443":
        try:
            s = socket.create_connection(("policy.local", 443), timeout=5)
            ssl.create_default_context().wrap_socket(s, server_hostname="policy.local")
            out(step, {"status": "connected"})
        except Exception as e:
            out(step, {"status": 0, "error": repr(e)})
    elif step == "tls_80":
        try:
            s = socket.create_connection(("policy.local", 80), timeout=5)
            ssl.create_default_context().wrap_socket(s, server_hostname="policy.local")
            out(step, {"status": "handshake"})
        except Exception as e:
            out(step, {"status": 0, "error": repr(e)})
    elif step == "resolve":
        try:
            out(step, {"addrs": sorted({a[4][0] for a in socket.getaddrinfo("policy.local", 80)})})
        except Exception as e:
            out(step, {"error": repr(e)})
    elif step == "by_address":
        out(step, ask("192.0.0.100", 80, "GET", "/denials"))
"#;

/// A sandbox whose agent is python3; curl is a client the advisor
/// statement does not name.
struct Sandbox {
    net: TestNet,
    dir: Dir,
    bundles: Dir,
    port: u16,
}

impl Sandbox {
    fn new() -> Self {
        let net = TestNet::new();
        let port = common::http_server(net.tcp("127.0.0.1:0")).port();
        Self {
            net,
            dir: Dir::new(),
            bundles: Dir::new(),
            port,
        }
    }

    /// The policy's source: python3 and curl may GET `/public` on the
    /// plain upstream, where a credential is bound; `advisor` adds the
    /// statement naming python3 only.
    fn source(&self, advisor: bool) -> String {
        format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  run_as user nobody group nogroup\n  binaries agent = {}\n  binaries other = {}\n  credential tok {{\n    secret env TEST_SECRET\n    placeholder env TOKEN\n    inject replace\n    hosts local.test\n  }}\n  allow agent other -> local.test:{} http {{\n    addresses 127.0.0.1\n    allow GET /public\n  }}\n{}",
            exe("/usr/bin/python3"),
            exe("/usr/bin/curl"),
            self.port,
            if advisor { "  advisor agent\n" } else { "" }
        )
    }

    fn bundle(&self, name: &str, advisor: bool) -> PathBuf {
        common::bundle(&self.bundles, name, &self.source(advisor))
    }

    fn args<'a>(&'a self, bundle: &'a Path, log: &'a Path) -> Vec<&'a str> {
        vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--resolve",
            "local.test=127.0.0.1",
            "--log",
            log.to_str().unwrap(),
        ]
    }

    /// Runs the agent through `steps` under `bundle`: its answers by step,
    /// and the deny log.
    fn agent(&self, bundle: &Path, steps: &[&str]) -> (Vec<(String, Value)>, Vec<Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let mut args = self.args(bundle, &log);
        let port = self.port.to_string();
        let steps = json!(steps).to_string();
        args.extend(["--", "/usr/bin/python3", "-c", AGENT_PY, &port, &steps]);
        let mut cmd = self.net.supervisor(&args, None);
        cmd.env("TEST_SECRET", SECRET);
        let out = output(cmd);
        assert!(out.status.success(), "{}", stderr(&out));
        (answers(&stdout(&out)), log_lines(&log))
    }
}

fn answers(text: &str) -> Vec<(String, Value)> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["step"].as_str().unwrap().to_owned(), v["answer"].clone())
        })
        .collect()
}

fn answer<'a>(all: &'a [(String, Value)], step: &str) -> &'a Value {
    &all.iter().find(|(s, _)| s == step).unwrap().1
}

/// Refusals of the proxy and of the endpoint carry the same body shape.
fn assert_refusal(a: &Value, status: u64, code: &str) {
    assert_eq!(a["status"], status, "{a}");
    assert_eq!(a["policy"], code, "{a}");
    let body = &a["body"];
    assert_eq!(body["error"], code, "{a}");
    for key in ["rule", "reason", "method", "path"] {
        assert!(body.get(key).is_some(), "`{key}` missing: {a}");
    }
}

#[test]
fn the_agent_reads_its_denials_without_a_secret_and_cannot_misuse_the_endpoint() {
    let s = Sandbox::new();
    let bundle = s.bundle("advised", true);
    let (all, log) = s.agent(
        &bundle,
        &[
            "resolve",
            "refused",
            "denials",
            "propose",
            "invented",
            "too_large",
            "not_found",
            "wrong_method",
            "smuggled_host",
            "tls_443",
            "tls_80",
            "by_address",
        ],
    );
    assert_eq!(answer(&all, "resolve")["addrs"], json!(["192.0.0.100"]));
    // The request carried the placeholder over plain HTTP: refused, and
    // logged by the credential's name.
    assert_refusal(answer(&all, "refused"), 403, "credential_not_bound");

    let denials = answer(&all, "denials");
    assert_eq!(denials["status"], 200, "{denials}");
    let listed = denials["body"]["denials"].as_array().unwrap();
    let denied: Vec<&Value> = log.iter().filter(|l| l["action"] == "Denied").collect();
    let refused = listed
        .iter()
        .find(|d| d["event"]["http_request"]["url"]["path"] == "/public")
        .unwrap_or_else(|| panic!("the refusal is listed: {denials}"));
    assert!(refused["id"].as_u64().unwrap() > 0, "{refused}");
    assert!(
        denied.contains(&&refused["event"]),
        "listed as the log wrote it: {refused} in {denied:?}"
    );
    let text = denials.to_string();
    assert!(!text.contains(SECRET), "a secret in the denials: {text}");
    assert!(text.contains("`tok`"), "the credential named: {text}");

    // A local run has no gateway to send a proposal to.
    assert_refusal(answer(&all, "propose"), 503, "gateway_unavailable");
    // An id the supervisor never gave is refused before anything else.
    let invented = answer(&all, "invented");
    assert_refusal(invented, 503, "gateway_unavailable");
    assert_refusal(answer(&all, "too_large"), 413, "body_too_large");
    assert_refusal(answer(&all, "not_found"), 404, "not_found");
    let wrong = answer(&all, "wrong_method");
    assert_refusal(wrong, 405, "method_not_allowed");
    assert_eq!(wrong["allow"], "GET, HEAD", "{wrong}");

    // `Host: policy.local` down the connection to local.test: the proxy
    // refuses it as a misdirected request; the advisor never sees it.
    let smuggled = answer(&all, "smuggled_host");
    assert_refusal(smuggled, 421, "host_mismatch");
    assert!(smuggled["body"].get("denials").is_none(), "{smuggled}");

    // TLS: port 443 is refused at connect, and a handshake on port 80 is
    // dropped unanswered.
    assert_eq!(answer(&all, "tls_443")["status"], 0);
    assert!(
        answer(&all, "tls_443")["error"]
            .as_str()
            .unwrap()
            .contains("ConnectionRefused"),
        "{all:?}"
    );
    assert_eq!(answer(&all, "tls_80")["status"], 0, "{all:?}");
    assert!(log.iter().any(|l| {
        l["dst_endpoint"]["port"] == 443
            && l["message"]
                .as_str()
                .is_some_and(|m| m.contains("port 80 only"))
    }));
    assert!(log.iter().any(|l| {
        l["message"]
            .as_str()
            .is_some_and(|m| m.contains("plain HTTP only"))
    }));
    // The reserved address reaches it as the name does.
    assert_eq!(answer(&all, "by_address")["status"], 200);
    // The endpoint's own answers are not denials of the log.
    assert!(
        !log.iter()
            .any(|l| l["http_request"]["url"]["hostname"] == "policy.local"),
        "{log:?}"
    );
}

#[test]
fn a_binary_the_statement_does_not_name_and_a_policy_without_it_get_nothing() {
    let s = Sandbox::new();
    // curl is allowed to local.test, but the statement names python3 only.
    let bundle = s.bundle("advised", true);
    let log = s.dir.log();
    let _ = std::fs::remove_file(&log);
    let mut args = s.args(&bundle, &log);
    args.extend([
        "--",
        "/usr/bin/curl",
        "-s",
        "--max-time",
        "5",
        "http://policy.local/denials",
    ]);
    let out = output(s.net.supervisor(&args, None));
    assert_eq!(
        out.status.code(),
        Some(7),
        "connection refused: {}",
        stderr(&out)
    );
    let lines = log_lines(&log);
    assert!(
        lines.iter().any(
            |l| l["actor"]["process"]["file"]["path"] == exe("/usr/bin/curl")
                && l["dst_endpoint"]["ip"] == "192.0.0.100"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("does not name"))
        ),
        "{lines:?}"
    );

    // Without the statement: the name does not exist, and the address
    // leads nowhere, for the agent too.
    let without = s.bundle("plain", false);
    let (all, log) = s.agent(&without, &["resolve", "by_address"]);
    assert!(
        answer(&all, "resolve")["error"]
            .as_str()
            .is_some_and(|e| e.contains("gaierror")),
        "{all:?}"
    );
    assert_eq!(answer(&all, "by_address")["status"], 0, "{all:?}");
    assert!(
        log.iter().any(|l| l["class_uid"] == 4003
            && l["query"]["hostname"] == "policy.local"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.contains("no `advisor` statement"))),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l["dst_endpoint"]["ip"] == "192.0.0.100" && l["action"] == "Denied"),
        "{log:?}"
    );
}

/// A gateway played by the test: it signs and serves the sandbox's bundle,
/// takes status reports, answers long polls with `304`, and records each
/// proposal, answering `201` with a proposal that carries a review token.
struct FakeGateway {
    url: String,
    ca: PathBuf,
    trust: PathBuf,
    /// Each proposal's authorization header and JSON body.
    proposals: Arc<Mutex<Vec<(String, Value)>>>,
}

fn fake_gateway(net: &TestNet, dir: &Path, bundle: &Path) -> FakeGateway {
    let (ca_pem, mut config) = upstream::tls_server(&["127.0.0.1"]);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let ca = dir.join("gateway-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let key = bundle_trust::SigningKey::from_seed(&[7; 32]);
    let trust = dir.join("trust.keys");
    std::fs::write(&trust, key.trust_line()).unwrap();
    let text = std::fs::read_to_string(bundle).unwrap();
    let digest = policy_bundle::Bundle::from_slice(text.as_bytes())
        .unwrap()
        .digest;
    let listener = net.tcp("127.0.0.1:0");
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let proposals = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&proposals);
    let key = Arc::new(key);
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let (config, seen, key, text, digest) = (
                Arc::clone(&config),
                Arc::clone(&seen),
                Arc::clone(&key),
                text.clone(),
                digest.clone(),
            );
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let Some((head, body)) = read_request(&mut tls) else {
                    return;
                };
                let line = head.lines().next().unwrap_or("").to_owned();
                let (status, reply) = if line.starts_with("GET /v1/sandboxes/sb/bundle?nonce=") {
                    let claims = bundle_trust::Claims {
                        digest,
                        issued_at: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_secs()
                            .try_into()
                            .unwrap(),
                        policy: "agent".into(),
                        revision: 1,
                        sandbox: "sb".into(),
                    };
                    let envelope = key.seal(claims, text);
                    ("200 OK", serde_json::to_string(&envelope).unwrap())
                } else if line.starts_with("GET /v1/sandboxes/sb/bundle") {
                    std::thread::sleep(Duration::from_secs(2));
                    ("304 Not Modified", String::new())
                } else if line.starts_with("POST /v1/sandboxes/sb/status") {
                    ("200 OK", "{}".to_owned())
                } else if line.starts_with("POST /v1/sandboxes/sb/proposals ") {
                    let auth = head
                        .lines()
                        .find_map(|l| l.strip_prefix("authorization: "))
                        .unwrap_or("")
                        .to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let mut seen = seen.lock().unwrap();
                    seen.push((auth, body));
                    let proposal = json!({
                        "id": seen.len(), "policy": "agent", "state": "pending",
                        "verdict": "new-reach", "origin": "advisor",
                        "held": "the advisor's proposals wait for a person",
                        "advice": {"lines": 1, "used": 1},
                        "review_token": "rt-must-stay-at-the-gateway",
                        "source": "policy \"agent\" { ... }", "proposer": "sandbox:sb",
                    });
                    ("201 Created", proposal.to_string())
                } else {
                    (
                        "404 Not Found",
                        json!({"error": {"status": 404, "code": "not_found", "message": line}})
                            .to_string(),
                    )
                };
                let _ = write!(
                    tls,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    FakeGateway {
        url,
        ca,
        trust,
        proposals,
    }
}

/// A request's head (header names lowercased) and its body, read by its
/// `Content-Length`.
fn read_request(tls: &mut impl std::io::Read) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0_u8; 4096];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let head: String = String::from_utf8_lossy(&got[..end])
        .lines()
        .enumerate()
        .map(|(i, l)| match (i, l.split_once(": ")) {
            (0, _) | (_, None) => format!("{l}\n"),
            (_, Some((k, v))) => format!("{}: {v}\n", k.to_ascii_lowercase()),
        })
        .collect();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let mut body = got[end..].to_vec();
    while body.len() < len {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    Some((head, body))
}

#[test]
fn a_proposal_forwards_exactly_the_logged_line_and_nothing_the_agent_wrote() {
    let s = Sandbox::new();
    let bundle = s.bundle("advised", true);
    let gw = fake_gateway(&s.net, s.bundles.path(), &bundle);
    let token = s.bundles.join("sandbox.token");
    std::fs::write(&token, "osg_sandbox_token\n").unwrap();
    let state = s.bundles.mkdir("state");
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let log = s.dir.log();
    let port = s.port.to_string();
    let steps = json!([
        "refused", "denials", "invented", "propose1", "propose2", "propose3", "propose4"
    ])
    .to_string();
    let args = [
        "run",
        "--gateway",
        &gw.url,
        "--sandbox",
        "sb",
        "--token-file",
        token.to_str().unwrap(),
        "--gateway-ca",
        gw.ca.to_str().unwrap(),
        "--trust-key",
        gw.trust.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--workdir",
        s.dir.path().to_str().unwrap(),
        "--resolve",
        "local.test=127.0.0.1",
        "--log",
        log.to_str().unwrap(),
        "--",
        "/usr/bin/python3",
        "-c",
        AGENT_PY,
        &port,
        &steps,
    ];
    let mut cmd = s.net.supervisor(&args, None);
    cmd.env("TEST_SECRET", SECRET);
    let started = Instant::now();
    let out = output(cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(50));
    let all = answers(&stdout(&out));

    // An id the supervisor never gave: refused, nothing sent.
    let invented = answer(&all, "invented");
    assert_refusal(invented, 422, "unknown_denials");
    assert!(
        invented["body"]["reason"]
            .as_str()
            .unwrap()
            .contains("99999"),
        "{invented}"
    );

    // The first proposal: the gateway's answer, without its review token
    // or the policy's source.
    let first = answer(&all, "propose1");
    assert_eq!(first["status"], 201, "{first}");
    assert_eq!(
        first["body"],
        json!({
            "id": 1, "state": "pending", "verdict": "new-reach", "origin": "advisor",
            "held": "the advisor's proposals wait for a person",
            "advice": {"lines": 1, "used": 1},
        })
    );
    assert!(!first.to_string().contains("rt-must-stay"), "{first}");
    assert_eq!(answer(&all, "propose2")["status"], 201);
    assert_eq!(answer(&all, "propose3")["status"], 201);
    // The fourth within the minute: not sent.
    let fourth = answer(&all, "propose4");
    assert_refusal(fourth, 429, "rate_limited");
    let wait: u64 = fourth["retry_after"].as_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{fourth}");

    // What reached the gateway: the sandbox's own token, and the line the
    // supervisor wrote for the refusal, byte for byte.
    let sent = gw.proposals.lock().unwrap().clone();
    assert_eq!(sent.len(), 3, "{sent:?}");
    let written = std::fs::read_to_string(&log).unwrap();
    let line = written
        .lines()
        .find(|l| l.contains("\"/public\""))
        .unwrap_or_else(|| panic!("the refusal is logged: {written}"));
    let (auth, body) = &sent[0];
    assert_eq!(auth, "Bearer osg_sandbox_token");
    assert_eq!(body["denials"], format!("{line}\n"));
    assert_eq!(
        body["rationale"],
        "the agent needs /public with its token propose1"
    );
    assert_eq!(
        body.as_object().unwrap().len(),
        2,
        "nothing else is sent: {body}"
    );
    assert!(!body.to_string().contains(SECRET));
}

/// Asks for the denials, waits for the test's go, asks again on a new
/// connection; both statuses as one JSON line.
const RELOAD_PY: &str = r#"
import http.client, json, os, sys, time
wd = sys.argv[1]
def get():
    try:
        c = http.client.HTTPConnection("policy.local", 80, timeout=5)
        c.request("GET", "/denials")
        return c.getresponse().status
    except Exception as e:
        return repr(e)
first = get()
open(os.path.join(wd, "first"), "w").close()
for _ in range(600):
    if os.path.exists(os.path.join(wd, "go")): break
    time.sleep(0.05)
print(json.dumps([first, get()]), flush=True)
"#;

#[test]
fn a_reload_that_drops_the_statement_takes_the_endpoint_away() {
    let s = Sandbox::new();
    let path = s.bundle("live", true);
    let without = s.bundle("without", false);
    let log = s.dir.log();
    let mut args = s.args(&path, &log);
    let wd = s.dir.path().to_str().unwrap().to_owned();
    args.extend(["--", "/usr/bin/python3", "-c", RELOAD_PY, &wd]);
    let mut cmd = s.net.supervisor(&args, None);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let start = Instant::now();
    while !s.dir.join("first").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no first request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::copy(&without, &path).unwrap();
    enforcer::send_signal(pid, libc::SIGHUP).unwrap();
    let reloaded = || {
        log_lines(&log)
            .iter()
            .any(|l| l["class_uid"] == 6002 && l["status"] == "Success")
    };
    while !reloaded() {
        assert!(start.elapsed() < Duration::from_secs(30), "no reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let statuses: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(statuses[0], 200, "{statuses} {}", stderr(&out));
    // The address was given before the reload; the connect is refused now.
    assert!(statuses[1].is_string(), "{statuses}");
}
