//! JSON-RPC and MCP endpoints through the L7 proxy, against the real
//! kernel: the request body is read and judged before anything is
//! forwarded, and the server receives exactly the bytes judged.
//!
//! Two kinds of server, both inside the test's own network namespace:
//! the recording upstream of the proxy tests (`tests/upstream`) for the
//! JSON-RPC attack cases, driven by curl and by a raw-socket client for
//! the framings curl will not send; and a real MCP Streamable HTTP server
//! (the Python `mcp` package's `FastMCP`, over TLS with the test's CA)
//! driven by the same package's client, from the venv
//! `scripts/install-deps` makes.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::path::{Path, PathBuf};

use common::{Dir, SYSTEM, TestNet, exe, log_lines, output, stderr, stdout};
use serde_json::Value;

/// The venv `scripts/install-deps` makes, with the pinned `mcp` package.
const VENV: &str = "/opt/openshell-test/venv";

/// The secret the supervisor holds in the credential test.
const SECRET: &str = "real-secret-0123456789";

/// The body limit of the JSON-RPC endpoint in these tests.
const LIMIT: usize = 256;

struct Sandbox {
    net: TestNet,
    dir: Dir,
    bundles: Dir,
    up: upstream::Upstream,
}

impl Sandbox {
    fn new() -> Self {
        let net = TestNet::new();
        let dir = Dir::new();
        let up = upstream::serve(
            net.tcp("127.0.0.1:0"),
            net.tcp("127.0.0.1:0"),
            dir.path(),
            &["rpc.test", "api.test"],
            None,
        );
        Self {
            net,
            dir,
            bundles: Dir::new(),
            up,
        }
    }

    /// A bundle for curl, python3 and bash: the test's `rules` (with `TLS`
    /// and `PLAIN` standing for the upstream's ports) after the common part.
    fn bundle(&self, name: &str, rules: &str) -> PathBuf {
        let clients = [
            exe("/usr/bin/curl"),
            exe("/usr/bin/python3"),
            exe("/usr/bin/bash"),
        ]
        .join(" ");
        let rules = rules
            .replace("TLS", &self.up.tls_port.to_string())
            .replace("PLAIN", &self.up.plain_port.to_string());
        let body = format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs exec {VENV}\n  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {clients}\n{rules}"
        );
        common::bundle(&self.bundles, name, &body)
    }

    /// Runs `cmd` in the sandbox; its output and the deny log's lines.
    fn run(
        &self,
        bundle: &Path,
        resolve: &[&str],
        cmd: &[&str],
    ) -> (std::process::Output, Vec<Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let mut args = vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--upstream-ca",
            self.up.ca_file.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ];
        for r in resolve {
            args.extend(["--resolve", r]);
        }
        args.push("--");
        args.extend_from_slice(cmd);
        let mut c = self.net.supervisor(&args, None);
        c.env("TEST_SECRET", SECRET);
        let out = output(c);
        (out, log_lines(&log))
    }

    /// What the upstream received on `target`, in order.
    fn bodies(&self, target: &str) -> Vec<Vec<u8>> {
        self.up
            .seen()
            .into_iter()
            .filter(|s| s.target == target)
            .map(|s| s.body)
            .collect()
    }
}

/// One JSON-RPC 2.0 request object.
fn call(id: u64, method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"q":"x"}}}}"#)
}

/// A `reports.search` call padded (inside a string parameter) to exactly
/// `len` bytes.
fn padded(len: usize) -> String {
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"reports.search","params":{"q":""#;
    let tail = r#""}}"#;
    let pad = len - head.len() - tail.len();
    format!("{head}{}{tail}", "a".repeat(pad))
}

/// The JSON-RPC endpoint of the attack cases: one method allowed.
fn rpc_rules() -> String {
    format!(
        "  allow clients -> rpc.test:TLS json-rpc {{\n    body_limit {LIMIT}\n    allow rpc reports.search\n  }}\n"
    )
}

/// Sends each file of `dir` named in `cases` to `url` with curl, with
/// the case's extra curl arguments; prints `NAME STATUS POLICY` per case.
fn curl_script(url: &str, cases: &[(&str, &str)]) -> String {
    cases
        .iter()
        .map(|(name, extra)| {
            format!(
                "printf '%s ' {name}; curl -sS -o /dev/null -D hdr-{name} -w '%{{http_code}} ' {extra} --data-binary @body-{name} {url}; \
                 (grep -i '^x-openshell-policy:' hdr-{name} | tr -d '\\r' | cut -d' ' -f2; echo -) | head -1\n"
            )
        })
        .collect()
}

/// The status and policy code the script printed for `name`.
fn outcome<'a>(text: &'a str, name: &str) -> (&'a str, &'a str) {
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name}: {text}"));
    let mut words = line.split(' ').skip(1);
    (words.next().unwrap_or(""), words.next().unwrap_or(""))
}

#[test]
fn json_rpc_bodies_are_judged_whole_and_the_server_gets_exactly_what_was_judged() {
    let s = Sandbox::new();
    let b = s.bundle("rpc", &rpc_rules());
    let cases: Vec<(&str, String, &str)> = vec![
        // name, body, extra curl arguments
        (
            "allowed",
            call(1, "reports.search"),
            "-H 'Content-Type: application/json'",
        ),
        (
            "denied",
            call(2, "reports.delete"),
            "-H 'Content-Type: application/json'",
        ),
        (
            "batch",
            format!(
                "[{},{}]",
                call(3, "reports.search"),
                call(4, "reports.delete")
            ),
            "-H 'Content-Type: application/json'",
        ),
        (
            "at-limit",
            padded(LIMIT),
            "-H 'Content-Type: application/json'",
        ),
        (
            "over-limit",
            padded(LIMIT + 1),
            "-H 'Content-Type: application/json'",
        ),
        (
            "over-limit-expect",
            padded(LIMIT + 1),
            "-H 'Content-Type: application/json' -H 'Expect: 100-continue'",
        ),
        (
            "over-limit-chunked",
            padded(LIMIT + 1),
            "-H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked'",
        ),
        (
            "chunked",
            call(5, "reports.search"),
            "-H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked'",
        ),
        (
            "expect",
            call(6, "reports.search"),
            "-H 'Content-Type: application/json' -H 'Expect: 100-continue'",
        ),
        (
            "text-allowed",
            call(8, "reports.search"),
            "-H 'Content-Type: text/plain'",
        ),
        (
            "text-denied",
            call(9, "reports.delete"),
            "-H 'Content-Type: text/plain'",
        ),
        (
            "response-frame",
            r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#.into(),
            "-H 'Content-Type: application/json'",
        ),
        (
            "duplicate-method",
            r#"{"jsonrpc":"2.0","id":1,"method":"reports.search","method":"reports.delete"}"#
                .into(),
            "-H 'Content-Type: application/json'",
        ),
        (
            "malformed",
            r#"{"jsonrpc":"2.0","id":1,"method":"reports.search""#.into(),
            "-H 'Content-Type: application/json'",
        ),
        (
            "gzip",
            call(10, "reports.search"),
            "-H 'Content-Type: application/json' -H 'Content-Encoding: gzip'",
        ),
        (
            "empty",
            String::new(),
            "-H 'Content-Type: application/json'",
        ),
    ];
    for (name, body, _) in &cases {
        std::fs::write(s.dir.join(&format!("body-{name}")), body).unwrap();
    }
    let url = format!("https://rpc.test:{}/rpc", s.up.tls_port);
    let script_cases: Vec<(&str, &str)> = cases.iter().map(|(n, _, e)| (*n, *e)).collect();
    let script = format!(
        "cd {} && {}",
        s.dir.path().display(),
        curl_script(&url, &script_cases)
    );
    let (out, log) = s.run(
        &b,
        &["rpc.test=127.0.0.1"],
        &["/usr/bin/bash", "-c", &script],
    );
    let text = stdout(&out);
    let expect = [
        ("allowed", "200", "-"),
        ("denied", "403", "policy_denied"),
        ("batch", "403", "policy_denied"),
        ("at-limit", "200", "-"),
        ("over-limit", "413", "body_too_large"),
        ("over-limit-expect", "413", "body_too_large"),
        ("over-limit-chunked", "413", "body_too_large"),
        ("chunked", "200", "-"),
        ("expect", "200", "-"),
        ("text-allowed", "200", "-"),
        ("text-denied", "403", "policy_denied"),
        ("response-frame", "403", "policy_denied"),
        ("duplicate-method", "403", "policy_denied"),
        ("malformed", "403", "policy_denied"),
        ("gzip", "415", "body_not_inspectable"),
        ("empty", "403", "policy_denied"),
    ];
    for (name, status, policy) in expect {
        assert_eq!(
            outcome(&text, name),
            (status, policy),
            "{name}: {text}\n{}",
            stderr(&out)
        );
    }
    // The server saw the allowed bodies, byte for byte, and nothing else.
    let bodies = s.bodies("/rpc");
    let allowed: Vec<Vec<u8>> = ["allowed", "at-limit", "chunked", "expect", "text-allowed"]
        .iter()
        .map(|n| {
            cases
                .iter()
                .find(|c| c.0 == *n)
                .unwrap()
                .1
                .clone()
                .into_bytes()
        })
        .collect();
    assert_eq!(
        bodies, allowed,
        "the upstream got exactly the judged bodies"
    );
    for seen in s.up.seen() {
        assert_eq!(
            seen.header("content-length"),
            Some(seen.body.len().to_string().as_str())
        );
        assert_eq!(seen.header("transfer-encoding"), None);
        assert_eq!(seen.header("expect"), None);
    }
    // One deny-log line per refusal, naming the RPC method refused.
    let http: Vec<&Value> = log.iter().filter(|l| l["class_uid"] == 4002).collect();
    assert_eq!(http.len(), 11, "{log:#?}");
    let message = |code: &str| -> Vec<String> {
        http.iter()
            .filter(|l| l["unmapped"]["error"] == code)
            .map(|l| l["message"].as_str().unwrap().to_owned())
            .collect()
    };
    let denied = message("policy_denied");
    assert_eq!(denied.len(), 7, "{denied:?}");
    assert!(
        denied[0].contains("reports.delete"),
        "the line names the refused method: {denied:?}"
    );
    assert!(
        denied[1].contains("reports.delete"),
        "the batch's line names the refused method: {denied:?}"
    );
    let batch = http
        .iter()
        .filter(|l| l["unmapped"]["error"] == "policy_denied")
        .nth(1)
        .unwrap();
    assert_eq!(batch["unmapped"]["rpc_method"], "reports.delete", "{batch}");
    let large = message("body_too_large");
    assert_eq!(large.len(), 3);
    assert!(large[0].contains(&format!("{LIMIT} bytes")), "{large:?}");
}

/// A raw HTTP/1.1 client over TLS, for framings curl will not send: argv[1]
/// host, argv[2] port, argv[3] a JSON list of pieces written with a pause
/// between each (so each reaches the proxy in a read of its own). Prints
/// the status code and the `x-openshell-policy` header of each response.
const RAW_PY: &str = r#"
import json, socket, ssl, sys, time
host, port, pieces = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
s = ssl.create_default_context().wrap_socket(socket.create_connection((host, port), timeout=10), server_hostname=host)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for p in pieces:
    s.sendall(p.encode())
    time.sleep(0.1)
got = b""
while True:
    try:
        chunk = s.recv(65536)
    except (ConnectionError, ssl.SSLError, socket.timeout):
        break
    if not chunk:
        break
    got += chunk
for head in got.split(b"HTTP/1.1 ")[1:]:
    status = head[:3].decode()
    policy = "-"
    for line in head.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"x-openshell-policy:"):
            policy = line.split(b":", 1)[1].strip().decode()
    print(status, policy, flush=True)
"#;

#[test]
fn a_tools_call_notification_is_judged_by_its_tool_alone_and_in_a_batch() {
    let s = Sandbox::new();
    let b = s.bundle(
        "mcp-note",
        "  allow clients -> rpc.test:TLS mcp {\n    path /mcp\n    allow rpc ping tools/call\n    deny rpc tools/call tool send_email\n  }\n",
    );
    let tool = |id: Option<u64>, name: &str| match id {
        Some(id) => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
        ),
        None => format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
        ),
    };
    let json =
        "-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'";
    let cases: Vec<(&str, String, &str)> = vec![
        ("call-allowed", tool(Some(1), "search"), json),
        ("call-denied", tool(Some(2), "send_email"), json),
        ("note-allowed", tool(None, "search"), json),
        ("note-denied", tool(None, "send_email"), json),
        (
            "note-batch-denied",
            format!(r#"[{},{}]"#, call(3, "ping"), tool(None, "send_email")),
            json,
        ),
        (
            "note-no-name",
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{}}}"#.into(),
            json,
        ),
    ];
    for (name, body, _) in &cases {
        std::fs::write(s.dir.join(&format!("body-{name}")), body).unwrap();
    }
    let url = format!("https://rpc.test:{}/mcp", s.up.tls_port);
    let script_cases: Vec<(&str, &str)> = cases.iter().map(|(n, _, e)| (*n, *e)).collect();
    let script = format!(
        "cd {} && {}",
        s.dir.path().display(),
        curl_script(&url, &script_cases)
    );
    let (out, log) = s.run(
        &b,
        &["rpc.test=127.0.0.1"],
        &["/usr/bin/bash", "-c", &script],
    );
    let text = stdout(&out);
    for (name, status, policy) in [
        ("call-allowed", "200", "-"),
        ("call-denied", "403", "policy_denied"),
        ("note-allowed", "200", "-"),
        ("note-denied", "403", "policy_denied"),
        ("note-batch-denied", "403", "policy_denied"),
        ("note-no-name", "403", "policy_denied"),
    ] {
        assert_eq!(
            outcome(&text, name),
            (status, policy),
            "{name}: {text}\n{}",
            stderr(&out)
        );
    }
    // The server received the allowed calls and nothing naming send_email.
    let bodies = s.bodies("/mcp");
    assert_eq!(
        bodies,
        [
            tool(Some(1), "search").into_bytes(),
            tool(None, "search").into_bytes()
        ],
        "{bodies:?}"
    );
    let denied: Vec<&Value> = log
        .iter()
        .filter(|l| l["unmapped"]["rpc_tool"] == "send_email")
        .collect();
    assert_eq!(denied.len(), 3, "{log:#?}");
    assert!(
        denied
            .iter()
            .any(|l| l["message"].as_str().unwrap().contains("notification")),
        "{denied:#?}"
    );
}

#[test]
fn split_writes_smuggled_lengths_and_trailers_change_nothing_the_server_reads() {
    let s = Sandbox::new();
    let b = s.bundle("raw", &rpc_rules());
    let port = s.up.tls_port.to_string();
    let head = |extra: &str| {
        format!(
            "POST /rpc HTTP/1.1\r\nHost: rpc.test:{port}\r\nContent-Type: application/json\r\n{extra}"
        )
    };
    let allowed = call(1, "reports.search");
    let denied = call(2, "reports.delete");
    let chunked =
        |body: &str, trailer: &str| format!("{:x}\r\n{body}\r\n0\r\n{trailer}\r\n", body.len());
    let run = |name: &str, pieces: Vec<String>| -> String {
        let arg = serde_json::to_string(&pieces).unwrap();
        let (out, _) = s.run(
            &b,
            &["rpc.test=127.0.0.1"],
            &["/usr/bin/python3", "-c", RAW_PY, "rpc.test", &port, &arg],
        );
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        stdout(&out)
    };
    // The head, then the body in three writes, cut inside the method name.
    let (a, rest) = denied.split_at(30);
    let (b2, c) = rest.split_at(10);
    let split = run(
        "split",
        vec![
            head(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                denied.len()
            )),
            a.into(),
            b2.into(),
            c.into(),
        ],
    );
    assert_eq!(
        split.trim(),
        "403 policy_denied",
        "a split body is judged whole"
    );
    // Content-Length and Transfer-Encoding together: read as chunked
    // (hyper drops the length); the server gets the chunked body judged,
    // with a length of its own, and nothing of the bytes the length
    // would have ended on.
    let both = run(
        "cl-te",
        vec![head(&format!(
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            chunked(&allowed, "")
        ))],
    );
    assert_eq!(both.trim(), "200 -", "{both}");
    // The same with a denied call hidden past the length a server that
    // trusted Content-Length would stop at.
    let hidden = run(
        "cl-te-denied",
        vec![head(&format!(
            "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            4,
            chunked(&denied, "")
        ))],
    );
    assert_eq!(hidden.trim(), "403 policy_denied", "{hidden}");
    // Trailers are dropped, not forwarded.
    let trailers = run(
        "trailers",
        vec![head(&format!(
            "Transfer-Encoding: chunked\r\nTrailer: X-Method\r\nConnection: close\r\n\r\n{}",
            chunked(&allowed, "X-Method: reports.delete\r\n")
        ))],
    );
    assert_eq!(trailers.trim(), "200 -", "{trailers}");
    // Two pipelined requests, the second denied: only the first arrives.
    let pipelined = run(
        "pipelined",
        vec![format!(
            "{}{allowed}{}{denied}",
            head(&format!("Content-Length: {}\r\n\r\n", allowed.len())),
            head(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                denied.len()
            ))
        )],
    );
    assert_eq!(pipelined, "200 -\n403 policy_denied\n", "{pipelined}");
    let seen = s.up.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for x in &seen {
        assert_eq!(x.body, allowed.as_bytes(), "{x:?}");
        assert_eq!(
            x.header("content-length"),
            Some(allowed.len().to_string().as_str())
        );
        assert_eq!(x.header("transfer-encoding"), None);
        assert_eq!(x.header("x-method"), None);
        assert_eq!(x.header("trailer"), None);
    }
}

#[test]
fn rest_bodies_still_stream_through_unread_beside_an_rpc_endpoint() {
    let s = Sandbox::new();
    let rules = format!(
        "{}  allow clients -> api.test:TLS http {{\n    allow POST /upload\n  }}\n",
        rpc_rules()
    );
    let b = s.bundle("rest", &rules);
    // A REST body far over the RPC limit, and not JSON: not read, not judged.
    let big = "x".repeat(LIMIT * 64);
    std::fs::write(s.dir.join("big"), &big).unwrap();
    let script = format!(
        "curl -sS -o /dev/null -w '%{{http_code}}\\n' --data-binary @{}/big https://api.test:{}/upload",
        s.dir.path().display(),
        s.up.tls_port
    );
    let (out, _) = s.run(
        &b,
        &["rpc.test=127.0.0.1", "api.test=127.0.0.1"],
        &["/usr/bin/bash", "-c", &script],
    );
    assert_eq!(stdout(&out).trim(), "200", "{}", stderr(&out));
    assert_eq!(s.bodies("/upload"), [big.into_bytes()]);
}

#[test]
fn audit_mode_and_credential_injection_behave_on_rpc_endpoints_as_on_rest() {
    let s = Sandbox::new();
    let rules = "  credential tok {\n    secret env TEST_SECRET\n    placeholder env TOKEN\n    inject header Authorization \"Bearer {secret}\"\n    hosts rpc.test\n  }\n  allow clients -> rpc.test:TLS json-rpc {\n    allow rpc reports.search\n  }\n  allow clients -> api.test:TLS json-rpc audit {\n    allow rpc reports.search\n  }\n";
    let b = s.bundle("cred", rules);
    let (allowed, denied) = (call(1, "reports.search"), call(2, "reports.delete"));
    let with_placeholder =
        r#"{"jsonrpc":"2.0","id":3,"method":"reports.search","params":{"t":"$TOKEN"}}"#;
    let script = format!(
        "for u in https://rpc.test:{p}/r https://api.test:{p}/a; do \
           curl -sS -o /dev/null -w '%{{http_code}}\\n' --data-binary '{allowed}' $u; \
           curl -sS -o /dev/null -w '%{{http_code}}\\n' --data-binary '{denied}' $u; \
         done; \
         curl -sS -o /dev/null -w '%{{http_code}}\\n' --data-binary \"${{BODY/\\$TOKEN/$TOKEN}}\" https://rpc.test:{p}/r",
        p = s.up.tls_port
    );
    let (out, log) = {
        let log = s.dir.log();
        let _ = std::fs::remove_file(&log);
        let mut c = s.net.supervisor(
            &[
                "run",
                "--bundle",
                b.to_str().unwrap(),
                "--workdir",
                s.dir.path().to_str().unwrap(),
                "--upstream-ca",
                s.up.ca_file.to_str().unwrap(),
                "--log",
                log.to_str().unwrap(),
                "--resolve",
                "rpc.test=127.0.0.1",
                "--resolve",
                "api.test=127.0.0.1",
                "--env",
                &format!("BODY={with_placeholder}"),
                "--",
                "/usr/bin/bash",
                "-c",
                &script,
            ],
            None,
        );
        c.env("TEST_SECRET", SECRET);
        (output(c), log_lines(&log))
    };
    let codes: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        codes,
        ["200", "403", "200", "200", "403"],
        "enforce, audit, a placeholder in the body: {}",
        stderr(&out)
    );
    // The enforced endpoint's allowed call carried the secret; the audited
    // endpoint forwarded both calls, with one log line for the other.
    let rpc = s.up.seen();
    let on = |t: &str| rpc.iter().filter(|x| x.target == t).collect::<Vec<_>>();
    assert_eq!(on("/r").len(), 1);
    assert_eq!(
        on("/r")[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(on("/a").len(), 2);
    assert_eq!(on("/a")[1].body, denied.as_bytes());
    let http: Vec<&Value> = log.iter().filter(|l| l["class_uid"] == 4002).collect();
    let audited: Vec<&&Value> = http
        .iter()
        .filter(|l| l["unmapped"]["audit"] == true)
        .collect();
    assert_eq!(audited.len(), 1, "{log:#?}");
    assert_eq!(audited[0]["action"], "Allowed");
    assert!(
        audited[0]["message"]
            .as_str()
            .unwrap()
            .contains("reports.delete"),
        "{:?}",
        audited[0]
    );
    assert!(
        http.iter()
            .any(|l| l["unmapped"]["error"] == "credential_not_bound"),
        "{log:#?}"
    );
    let text = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
    assert!(!text.contains(SECRET), "the log holds the secret");
}

// ------------------------------------------------------------------- MCP

/// A FastMCP server with two tools, on streamable HTTP over TLS. argv: the
/// file every request is recorded in (one JSON line: method, path, body),
/// certificate and key files. Prints its port once it listens.
const MCP_SERVER_PY: &str = r#"
import json, socket, sys
import uvicorn
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

seen, cert, key = sys.argv[1:4]
mcp = FastMCP("rpc-test", transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))

@mcp.tool()
def search(query: str) -> str:
    """Searches the test corpus."""
    return f"found: {query}"

@mcp.tool()
def send_email(to: str, text: str) -> str:
    """Sends an email."""
    with open(seen + ".sent", "a") as f:
        f.write(to + "\n")
    return f"sent to {to}"

inner = mcp.streamable_http_app()

def record(scope, body):
    with open(seen, "a") as f:
        f.write(json.dumps({"method": scope["method"], "path": scope["path"],
                            "body": body.decode("utf-8", "replace")}) + "\n")

async def app(scope, receive, send):
    if scope["type"] != "http":
        return await inner(scope, receive, send)
    if scope["method"] != "POST":
        record(scope, b"")
        return await inner(scope, receive, send)
    chunks, done = [], False
    async def recv():
        nonlocal done
        m = await receive()
        if m["type"] == "http.request" and not done:
            chunks.append(m.get("body", b""))
            if not m.get("more_body", False):
                done = True
                record(scope, b"".join(chunks))
        return m
    await inner(scope, recv, send)

sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(64)
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, ssl_certfile=cert, ssl_keyfile=key, log_level="warning", lifespan="on")
uvicorn.Server(config).run(sockets=[sock])
"#;

/// The MCP client: initialize, tools/list, an allowed tools/call, a
/// denied one. One JSON line per step; a failure prints every exception
/// it carried.
const MCP_CLIENT_PY: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

def out(**kw):
    print(json.dumps(kw), flush=True)

async def main(url):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            out(step="initialize", server=init.serverInfo.name)
            tools = await s.list_tools()
            out(step="tools/list", tools=sorted(t.name for t in tools.tools))
            r = await s.call_tool("search", {"query": "cats"})
            out(step="search", is_error=r.isError, text=r.content[0].text)
            r = await asyncio.wait_for(s.call_tool("send_email", {"to": "a@b.example", "text": "hi"}), 20)
            out(step="send_email", is_error=r.isError, text=[c.text for c in r.content])

def flatten(e):
    if isinstance(e, BaseExceptionGroup):
        return [x for sub in e.exceptions for x in flatten(sub)]
    return [repr(e)]

try:
    asyncio.run(main(sys.argv[1]))
except BaseException as e:
    out(step="failed", errors=flatten(e))
"#;

/// The MCP server, killed on drop.
struct McpServer(upstream::PythonServer);

impl std::ops::Deref for McpServer {
    type Target = upstream::PythonServer;

    fn deref(&self) -> &upstream::PythonServer {
        &self.0
    }
}

impl McpServer {
    fn start(net: &TestNet, dir: &Dir) -> Self {
        let python = Path::new(VENV).join("bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/install-deps (it installs the pinned `mcp` package there)",
            python.display()
        );
        Self(upstream::PythonServer::start(
            &net.name,
            &python,
            dir.path(),
            "mcp",
            &["mcp.test"],
            MCP_SERVER_PY,
        ))
    }

    /// Every request the server received: (HTTP method, body).
    fn seen(&self) -> Vec<(String, Value)> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let body = v["body"].as_str().unwrap();
                let body = if body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(body).unwrap()
                };
                (v["method"].as_str().unwrap().to_owned(), body)
            })
            .collect()
    }
}

#[test]
fn a_real_mcp_client_lists_and_calls_an_allowed_tool_and_a_denied_one_never_reaches_the_server() {
    let net = TestNet::new();
    let dir = Dir::new();
    let server = McpServer::start(&net, &dir);
    let bundles = Dir::new();
    let python = exe(&format!("{VENV}/bin/python"));
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs exec {VENV}\n  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {python}\n  allow clients -> mcp.test:{port} mcp {{\n    path /mcp\n    allow rpc initialize notifications/initialized tools/list\n    allow rpc tools/call tool search\n    deny rpc tools/call tool send_email\n  }}\n",
        port = server.port
    );
    let bundle = common::bundle(&bundles, "mcp", &body);
    let client = dir.join("mcp_client.py");
    std::fs::write(&client, MCP_CLIENT_PY).unwrap();
    let log = dir.log();
    let url = format!("https://mcp.test:{}/mcp", server.port);
    let out = output(net.supervisor(
        &[
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
            "--resolve",
            "mcp.test=127.0.0.1",
            "--upstream-ca",
            dir.join("mcp-ca.pem").to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            "--",
            &format!("{VENV}/bin/python"),
            client.to_str().unwrap(),
            &url,
        ],
        None,
    ));
    let text = stdout(&out);
    let steps: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step = |name: &str| {
        steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| {
            panic!(
                "no step {name}: {text}\n{}\nserver: {}",
                stderr(&out),
                server.stderr()
            )
        })
    };
    assert_eq!(step("initialize")["server"], "rpc-test");
    assert_eq!(
        step("tools/list")["tools"],
        serde_json::json!(["search", "send_email"])
    );
    assert_eq!(step("search")["is_error"], false);
    assert_eq!(step("search")["text"], "found: cats");
    // The denied call failed with the proxy's refusal.
    assert!(
        steps.iter().all(|s| s["step"] != "send_email"),
        "the denied call must not succeed: {text}"
    );
    let errors = step("failed")["errors"].to_string();
    assert!(errors.contains("403"), "{errors}");
    // The server never saw it: no tools/call naming send_email, no email.
    let seen = server.seen();
    let calls: Vec<&Value> = seen
        .iter()
        .filter(|(_, b)| b["method"] == "tools/call")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(calls.len(), 1, "{seen:?}");
    assert_eq!(calls[0]["params"]["name"], "search");
    let methods: Vec<&str> = seen
        .iter()
        .filter_map(|(_, b)| b["method"].as_str())
        .collect();
    assert!(methods.contains(&"initialize"), "{methods:?}");
    assert!(methods.contains(&"tools/list"), "{methods:?}");
    assert!(
        !dir.join("mcp-seen.jsonl.sent").exists(),
        "an email was sent"
    );
    // One deny-log line, naming the tool.
    let lines: Vec<Value> = log_lines(&log)
        .into_iter()
        .filter(|l| l["class_uid"] == 4002 && l["action"] == "Denied")
        .collect();
    let refused: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"].as_str().unwrap().contains("send_email"))
        .collect();
    assert_eq!(refused.len(), 1, "{lines:#?}");
    assert_eq!(refused[0]["unmapped"]["error"], "policy_denied");
    assert_eq!(refused[0]["unmapped"]["rpc_method"], "tools/call");
    assert_eq!(refused[0]["unmapped"]["rpc_tool"], "send_email");
    assert_eq!(refused[0]["http_request"]["url"]["path"], "/mcp");
}
