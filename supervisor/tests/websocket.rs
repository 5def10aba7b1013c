//! WebSocket endpoints through the L7 proxy, against the real kernel: the
//! upgrade is judged by the endpoint's `GET` rules, then every complete
//! client message is judged before the server gets it, and the proxy
//! closes the connection (1002, 1007, 1008, 1009) rather than forward a
//! frame it would read otherwise than the server.
//!
//! The server is real: python `websockets` over TLS with its own CA
//! (`tests/websocket/server.py`), recording every handshake and message it
//! received; it echoes, and speaks graphql-transport-ws under `/graphql`.
//! The clients run inside the sandbox (`tests/websocket/client.py`): the
//! `websockets` client, gql's GraphQL-over-WebSocket transport, and a raw
//! TLS socket for the frames no well-behaved client sends. All from the
//! venv `scripts/install-deps` makes.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dir, SYSTEM, TestNet, exe, log_lines, output, stderr, stdout};
use serde_json::Value;

/// The venv `scripts/install-deps` makes, with websockets and gql pinned.
const VENV: &str = "/opt/openshell-test/venv";

const SERVER_PY: &str = include_str!("websocket/server.py");
const CLIENT_PY: &str = include_str!("websocket/client.py");

/// The secret the supervisor holds for `cred.test`.
const SECRET: &str = "real-secret-0123456789";

/// The message limit of `rt.test` in these tests.
const LIMIT: usize = 64;

struct Sandbox {
    net: TestNet,
    dir: Dir,
    bundles: Dir,
    server: upstream::PythonServer,
}

impl Sandbox {
    fn new() -> Self {
        let net = TestNet::new();
        let dir = Dir::new();
        let python = Path::new(VENV).join("bin/python");
        let has = |module: &str| {
            Command::new(&python)
                .args(["-c", &format!("import {module}")])
                .status()
                .is_ok_and(|s| s.success())
        };
        assert!(
            has("websockets") && has("gql.transport.websockets"),
            "{} lacks websockets or gql's websockets transport: run scripts/install-deps (it installs them, pinned, there)",
            python.display()
        );
        let server = upstream::PythonServer::start(
            &net.name,
            &python,
            dir.path(),
            "ws",
            &["rt.test", "gql.test", "cred.test"],
            SERVER_PY,
        );
        Self {
            net,
            dir,
            bundles: Dir::new(),
            server,
        }
    }

    /// The bundle of these tests: three websocket endpoints.
    fn bundle(&self) -> PathBuf {
        self.bundle_of("websocket", &rules(""))
    }

    /// A bundle for bash and the venv's python with `rules` (`PORT`
    /// standing for the server's port).
    fn bundle_of(&self, name: &str, rules: &str) -> PathBuf {
        let clients = [exe("/usr/bin/bash"), exe(&format!("{VENV}/bin/python"))].join(" ");
        let rules = rules.replace("PORT", &self.server.port.to_string());
        let body = format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs exec {VENV}\n  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {clients}\n{rules}"
        );
        common::bundle(&self.bundles, name, &body)
    }

    /// The supervisor running the client's `group` of steps on `bundle`.
    fn command(&self, bundle: &Path, group: &str) -> Command {
        let client = self.dir.join("ws_client.py");
        std::fs::write(&client, CLIENT_PY).unwrap();
        let python = format!("{VENV}/bin/python");
        let port = self.server.port.to_string();
        let limit = LIMIT.to_string();
        let log = self.dir.log();
        let args = vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--upstream-ca",
            self.server.ca.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            "--resolve",
            "rt.test=127.0.0.1",
            "--resolve",
            "gql.test=127.0.0.1",
            "--resolve",
            "cred.test=127.0.0.1",
            "--",
            &python,
            client.to_str().unwrap(),
            &port,
            &limit,
            group,
            self.dir.path().to_str().unwrap(),
        ];
        let mut c = self.net.supervisor(&args, None);
        c.env("TEST_SECRET", SECRET);
        c
    }

    /// Runs the client's `group` of steps in the sandbox: its steps by
    /// name, and the deny log's lines.
    fn run(&self, group: &str) -> (Steps, Vec<Value>) {
        self.run_on(&self.bundle(), group)
    }

    /// [`Self::run`] on another bundle.
    fn run_on(&self, bundle: &Path, group: &str) -> (Steps, Vec<Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let out = output(self.command(bundle, group));
        let text = stdout(&out);
        let steps = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| (v["step"].as_str().unwrap_or_default().to_owned(), v))
            .collect();
        let context = format!(
            "client stdout:\n{text}\nstderr:\n{}\nserver:\n{}\nserver record:\n{}",
            stderr(&out),
            self.server.stderr(),
            std::fs::read_to_string(&self.server.record).unwrap_or_default()
        );
        (Steps { steps, context }, log_lines(&log))
    }

    /// What the server recorded.
    fn seen(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.server.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The messages the server received on `path` (text, or binary as hex).
    fn messages(&self, path: &str) -> Vec<String> {
        self.seen()
            .iter()
            .filter(|e| e["path"] == path && (e["event"] == "text" || e["event"] == "binary"))
            .map(|e| e["data"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The handshake the server received on `path`.
    fn opened(&self, path: &str) -> Option<Value> {
        self.seen()
            .into_iter()
            .find(|e| e["path"] == path && e["event"] == "open")
    }
}

/// The endpoints of these tests (`extra` added to `rt.test`'s), and the
/// credential bound to `cred.test`.
fn rules(extra: &str) -> String {
    format!(
        "  credential tok {{\n    secret env TEST_SECRET\n    inject header Authorization \"Bearer {{secret}}\"\n    hosts cred.test\n  }}\n\
         \x20 allow clients -> rt.test:PORT websocket {{\n    body_limit {LIMIT}\n    allow GET /v1/realtime/**\n    allow WEBSOCKET_TEXT /v1/realtime/**\n    deny WEBSOCKET_TEXT /v1/realtime/admin/**\n{extra}  }}\n\
         \x20 allow clients -> gql.test:PORT websocket {{\n    allow GET /graphql\n    allow graphql subscription field messageAdded\n    allow graphql query field viewer\n  }}\n\
         \x20 allow clients -> cred.test:PORT websocket {{\n    allow GET /stream/**\n    allow WEBSOCKET_TEXT /stream/**\n  }}\n"
    )
}

struct Steps {
    steps: Vec<(String, Value)>,
    context: String,
}

impl Steps {
    fn get(&self, name: &str) -> &Value {
        self.steps
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no step {name}\n{}", self.context))
    }

    /// The step ended with the proxy's (or the server's) close `code`.
    fn closed(&self, name: &str, code: u16) -> &Value {
        let s = self.get(name);
        assert_eq!(s["status"], 101, "{name}: {s}\n{}", self.context);
        assert_eq!(s["close"], code, "{name}: {s}\n{}", self.context);
        s
    }

    /// The upgrade was answered by the proxy with `status` and `policy`.
    fn refused(&self, name: &str, status: u16, policy: &str) {
        let s = self.get(name);
        assert_eq!(s["status"], status, "{name}: {s}\n{}", self.context);
        assert_eq!(s["policy"], policy, "{name}: {s}\n{}", self.context);
    }
}

/// The HTTP lines of the deny log.
fn http_lines(log: &[Value]) -> Vec<&Value> {
    log.iter().filter(|l| l["class_uid"] == 4002).collect()
}

fn method_of(line: &Value) -> &str {
    line["http_request"]["http_method"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn real_clients_get_allowed_messages_through_and_denied_ones_closed_with_1008() {
    let s = Sandbox::new();
    let (steps, log) = s.run("clients");

    // Allowed upgrade and messages, echoed back; the client's
    // permessage-deflate offer never reached the server.
    let allowed = steps.closed("allowed", 1000);
    assert_eq!(
        allowed["received"],
        serde_json::json!(["echo:hello", "echo:again"])
    );
    assert_eq!(s.messages("/v1/realtime/allowed"), ["hello", "again"]);
    let open = s.opened("/v1/realtime/allowed").unwrap();
    assert_eq!(open["extensions"], Value::Null, "{open}");

    // A text message on a path whose WEBSOCKET_TEXT rules deny it.
    steps.closed("denied", 1008);
    assert!(s.opened("/v1/realtime/admin/denied").is_some());
    assert_eq!(
        s.messages("/v1/realtime/admin/denied"),
        Vec::<String>::new()
    );

    // An upgrade no GET rule allows never reaches the server.
    steps.refused("not-allowed-path", 403, "policy_denied");
    assert!(s.opened("/v2/elsewhere").is_none());

    // The server's own refusal is relayed as a response, not the proxy's.
    let s404 = steps.get("server-refuses");
    assert_eq!(s404["status"], 404, "{s404}\n{}", steps.context);
    assert_eq!(s404["policy"], Value::Null, "{s404}");
    assert!(s.seen().iter().any(|e| e["event"] == "refused"));

    // The credential is injected into the upgrade; text passes, binary
    // (which nothing could check for the secret) does not.
    assert_eq!(
        steps.get("credentialed-text")["received"],
        serde_json::json!(["echo:hi"])
    );
    let open = s.opened("/stream/text").unwrap();
    assert_eq!(open["authorization"], format!("Bearer {SECRET}"));
    steps.closed("credentialed-binary", 1008);
    assert_eq!(s.messages("/stream/binary"), Vec::<String>::new());
    // Nor does a text message carrying a placeholder: it is never replaced
    // inside messages, so the connection ends before the server sees it.
    steps.closed("credentialed-placeholder", 1008);
    assert_eq!(s.messages("/stream/placeholder"), Vec::<String>::new());

    // A server that echoes the injected header: every message (whole,
    // in fragments, binary) and the close reason reach the client with
    // the secret replaced.
    let reflect = steps.get("credentialed-reflect");
    let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        reflect["received"],
        serde_json::json!([
            "auth=Bearer openshell-redacted",
            "frag=Bearer openshell-redacted",
            hex("Bearer openshell-redacted"),
        ]),
        "{reflect}\n{}",
        steps.context
    );
    assert_eq!(reflect["close"], 4000, "{reflect}");
    assert_eq!(reflect["reason"], "", "{reflect}");
    let open = s.opened("/stream/reflect").unwrap();
    assert_eq!(open["authorization"], format!("Bearer {SECRET}"));

    // GraphQL over WebSocket with gql: query and subscription allowed,
    // the mutation closed before the server saw it.
    let q = steps.get("gql-query");
    assert_eq!(q["ok"], true, "{q}\n{}", steps.context);
    assert_eq!(
        q["result"],
        serde_json::json!({"viewer": {"login": "octocat"}})
    );
    let sub = steps.get("gql-subscription");
    assert_eq!(sub["ok"], true, "{sub}\n{}", steps.context);
    assert_eq!(sub["result"].as_array().map(Vec::len), Some(2), "{sub}");
    let m = steps.get("gql-mutation");
    assert_eq!(m["ok"], false, "{m}");
    assert_eq!(m["close"], 1008, "{m}\n{}", steps.context);
    let seen = s.messages("/graphql?step=gql-mutation");
    assert!(
        seen.iter().any(|t| t.contains("connection_init")),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|t| t.contains("deleteRepository")),
        "{seen:?}"
    );

    // One deny line per denied message, naming its kind; the GraphQL one
    // names the operation.
    let http = http_lines(&log);
    let denied: Vec<&&Value> = http.iter().filter(|l| l["action"] == "Denied").collect();
    assert!(
        denied.iter().any(|l| method_of(l) == "WEBSOCKET_TEXT"
            && l["http_request"]["url"]["path"] == "/v1/realtime/admin/denied"),
        "{denied:#?}"
    );
    assert!(
        denied.iter().any(|l| method_of(l) == "WEBSOCKET_BINARY"),
        "{denied:#?}"
    );
    assert!(
        denied.iter().any(|l| method_of(l) == "WEBSOCKET_TEXT"
            && l["unmapped"]["graphql_operation_type"] == "mutation"),
        "{denied:#?}"
    );
    let text = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
    assert!(!text.contains(SECRET), "the log holds the secret");
}

/// A credentialed host is guarded as a whole, as OpenShell guards it: with
/// the credential bound to `POST` only, the `GET` upgrade carries none,
/// yet a binary message and a text message with a placeholder close the
/// connection before the server sees them.
#[test]
fn a_credentialed_host_closes_binary_and_placeholder_messages_when_the_upgrade_carried_no_credential()
 {
    let s = Sandbox::new();
    let rules = rules("").replace(
        "    hosts cred.test\n",
        "    hosts cred.test\n    methods POST\n",
    );
    let bundle = s.bundle_of("post-only", &rules);
    let (steps, log) = s.run_on(&bundle, "post-credential");
    assert_eq!(
        steps.get("post-only-text")["received"],
        serde_json::json!(["echo:hi"])
    );
    let open = s.opened("/stream/text").unwrap();
    assert_eq!(open["authorization"], Value::Null, "{open}");
    steps.closed("post-only-binary", 1008);
    assert_eq!(s.messages("/stream/binary"), Vec::<String>::new());
    steps.closed("post-only-placeholder", 1008);
    assert_eq!(s.messages("/stream/placeholder"), Vec::<String>::new());
    let denied: Vec<&str> = http_lines(&log)
        .into_iter()
        .filter(|l| l["action"] == "Denied")
        .map(method_of)
        .collect();
    assert_eq!(denied, ["WEBSOCKET_BINARY", "WEBSOCKET_TEXT"], "{log:#?}");
}

/// With `websocket_credential_rewrite`, the server gets the secret in place
/// of the placeholder (in a whole message and in one sent in fragments),
/// though the upgrade carried none (`inject replace`, no placeholder in
/// its headers); its echo reaches the client with the placeholder back. A
/// placeholder of another host's credential and a binary message close
/// the connection before the server sees them, and the deny log never
/// holds the secret.
///
/// Only after an upgrade the credential's binding covers (a `GET` on its
/// `paths`): the same placeholder after an upgrade on a path outside
/// them, or the placeholder of a `methods POST` credential of the host,
/// closes the connection with 1008 and never reaches the server; the deny
/// log says which binding leaves the upgrade out.
#[test]
fn websocket_credential_rewrite_sends_the_server_the_secret_and_the_client_only_placeholders() {
    let s = Sandbox::new();
    let rules = rules("")
        .replace(
            "    inject header Authorization \"Bearer {secret}\"\n    hosts cred.test\n",
            "    placeholder env TOKEN\n    inject replace\n    hosts cred.test\n    paths /stream/**\n  }\n  credential far {\n    secret env FAR_SECRET\n    placeholder env FAR\n    inject replace\n    hosts rt.test\n  }\n  credential poster {\n    secret env TEST_SECRET\n    placeholder env POSTER\n    inject replace\n    hosts cred.test\n    methods POST\n",
        )
        .replace(
            "cred.test:PORT websocket {",
            "cred.test:PORT websocket websocket_credential_rewrite {",
        )
        .replace(
            "    allow WEBSOCKET_TEXT /stream/**\n",
            "    allow WEBSOCKET_TEXT /stream/**\n    allow GET /outside/**\n    allow WEBSOCKET_TEXT /outside/**\n",
        );
    let bundle = s.bundle_of("rewrite", &rules);
    let (steps, log) = s.run_on(&bundle, "rewrite");
    let env = steps.get("env");
    let token = env["token"].as_str().unwrap().to_owned();
    let far = env["far"].as_str().unwrap().to_owned();
    assert!(token.starts_with("openshell-placeholder-tok-"), "{env}");
    assert!(far.starts_with("openshell-placeholder-far-"), "{env}");

    let text = steps.closed("rewrite-text", 1000);
    assert_eq!(
        text["received"],
        serde_json::json!([format!("echo:{{\"token\": \"{token}\"}}")]),
        "{text}\n{}",
        steps.context
    );
    assert_eq!(
        s.messages("/stream/rewrite"),
        [format!("{{\"token\": \"{SECRET}\"}}")]
    );
    let open = s.opened("/stream/rewrite").unwrap();
    assert_eq!(open["authorization"], Value::Null, "{open}");

    let frags = steps.closed("rewrite-fragments", 1000);
    assert_eq!(
        frags["received"],
        serde_json::json!([format!("echo:{{\"a\": \"{token}\"}}")]),
        "{frags}"
    );
    assert_eq!(
        s.messages("/stream/fragments"),
        [format!("{{\"a\": \"{SECRET}\"}}")]
    );

    steps.closed("rewrite-foreign", 1008);
    assert_eq!(s.messages("/stream/foreign"), Vec::<String>::new());
    steps.closed("rewrite-binary", 1008);
    assert_eq!(s.messages("/stream/binary"), Vec::<String>::new());

    // Outside the binding: the upgrade goes through, the placeholder never
    // does, let alone the secret.
    let poster = env["poster"].as_str().unwrap().to_owned();
    assert!(poster.starts_with("openshell-placeholder-poster-"), "{env}");
    steps.closed("rewrite-outside-paths", 1008);
    assert!(s.opened("/outside/x").is_some());
    assert_eq!(s.messages("/outside/x"), Vec::<String>::new());
    steps.closed("rewrite-outside-methods", 1008);
    assert!(s.opened("/stream/poster").is_some());
    assert_eq!(s.messages("/stream/poster"), Vec::<String>::new());

    let denied: Vec<&str> = http_lines(&log)
        .into_iter()
        .filter(|l| l["action"] == "Denied")
        .map(method_of)
        .collect();
    assert_eq!(
        denied,
        [
            "WEBSOCKET_TEXT",
            "WEBSOCKET_BINARY",
            "WEBSOCKET_TEXT",
            "WEBSOCKET_TEXT"
        ],
        "{log:#?}"
    );
    for (credential, path) in [("tok", "/outside/x"), ("poster", "/stream/poster")] {
        assert!(
            http_lines(&log).iter().any(|l| {
                l["http_request"]["url"]["path"] == path
                    && l.to_string().contains(&format!(
                        "credential `{credential}`, whose binding does not cover the upgrade"
                    ))
            }),
            "{credential} {path}: {log:#?}"
        );
    }
    let text = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
    assert!(!text.contains(SECRET), "the log holds the secret");
    for (name, step) in &steps.steps {
        assert!(
            !step.to_string().contains(SECRET),
            "{name} read the secret: {step}"
        );
    }
}

#[test]
fn frames_the_server_could_read_otherwise_close_the_connection_before_it_sees_them() {
    let s = Sandbox::new();
    let (steps, log) = s.run("raw");

    // A denied operation split across fragments, its denied part in the
    // continuation: nothing of it reaches the server.
    steps.closed("split-denied", 1008);
    let seen = s.messages("/graphql?step=split-denied");
    assert!(!seen.iter().any(|t| t.contains("delete")), "{seen:?}");

    // An allowed one with a ping between its fragments: the pong comes
    // back, and the server gets the message whole.
    let ping = steps.get("split-allowed-ping");
    assert_eq!(ping["pongs"], 1, "{ping}\n{}", steps.context);
    let seen = s.messages("/graphql?step=split-allowed-ping");
    assert!(seen.iter().any(|t| t.contains("viewer")), "{seen:?}");
    let got = ping["received"].as_array().unwrap();
    assert!(
        got.iter()
            .any(|m| m.as_str().unwrap_or_default().contains("octocat")),
        "{ping}"
    );

    // A server-to-client message type sent by the client.
    steps.closed("client-sends-response", 1008);
    let seen = s.messages("/graphql?step=client-sends-response");
    assert!(!seen.iter().any(|t| t.contains("\"next\"")), "{seen:?}");

    for (name, code) in [
        ("unmasked", 1002),
        ("rsv1", 1002),
        ("over-limit", 1009),
        ("invalid-utf8", 1007),
        ("pipelined-denied", 1008),
    ] {
        steps.closed(name, code);
    }
    for path in [
        "/v1/realtime/unmasked",
        "/v1/realtime/rsv1",
        "/v1/realtime/over-limit",
        "/v1/realtime/invalid-utf8",
        "/v1/realtime/admin/pipelined",
    ] {
        assert_eq!(s.messages(path), Vec::<String>::new(), "{path}");
    }
    let at = steps.get("at-limit");
    assert_eq!(
        at["received"],
        serde_json::json!([format!("echo:{}", "a".repeat(LIMIT))]),
        "{at}"
    );

    // Frames sent with the upgrade request, before the 101, are judged too.
    let early = steps.get("pipelined");
    assert_eq!(
        early["received"],
        serde_json::json!(["echo:early"]),
        "{early}\n{}",
        steps.context
    );
    assert_eq!(s.messages("/v1/realtime/pipelined"), ["early"]);

    // Other upgrades, and a malformed WebSocket one, stay refused.
    steps.refused("h2c", 403, "upgrade_refused");
    steps.refused("no-key", 403, "upgrade_refused");
    assert!(s.opened("/v1/realtime/no-key").is_none());

    let http = http_lines(&log);
    assert!(
        http.iter()
            .any(|l| l["unmapped"]["error"] == "websocket_protocol_error"),
        "{http:#?}"
    );
}

#[test]
fn a_reload_judges_the_next_message_by_the_new_rules_and_closes_revoked_relays_with_1012() {
    let s = Sandbox::new();
    let path = s.bundle_of("live", &rules(""));
    // rt.test now denies every text message; gql.test is gone.
    let tighter = rules("    deny WEBSOCKET_TEXT /v1/realtime/**\n");
    let start = tighter.find("  allow clients -> gql.test").unwrap();
    let end = tighter.find("  allow clients -> cred.test").unwrap();
    let tighter = format!("{}{}", &tighter[..start], &tighter[end..]);
    let tighter = s.bundle_of("tighter", &tighter);
    let mut cmd = s.command(&path, "reload");
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // `ip netns exec` execs the supervisor: the child is the supervisor.
    let pid = child.id();
    let mut wait_for = |what: &str, cond: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !cond() {
            if let Ok(Some(_)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let mut out = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut o, &mut out);
                }
                let denied = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
                let served = std::fs::read_to_string(&s.server.record).unwrap_or_default();
                panic!(
                    "the run ended before {what}:\n{out}\n{err}\ndeny log:\n{denied}\nthe server saw:\n{served}\nthe server's stderr:\n{}",
                    s.server.stderr()
                );
            }
            assert!(
                start.elapsed().as_secs() < 30,
                "timed out waiting for {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait_for("the connections", &|| s.dir.join("first").exists());
    std::fs::copy(&tighter, &path).unwrap();
    enforcer::send_signal(pid, libc::SIGHUP).unwrap();
    wait_for("the reload", &|| {
        log_lines(&s.dir.log())
            .iter()
            .any(|l| l["class_uid"] == 6002)
    });
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let line: Value =
        serde_json::from_str(text.lines().next().unwrap_or("null")).unwrap_or(Value::Null);
    assert_eq!(line["before"], "echo:before", "{text}\n{}", stderr(&out));
    assert_eq!(line["rt"]["close"], 1008, "{line}");
    assert_eq!(line["gql"]["close"], 1012, "{line}");
    assert_eq!(s.messages("/v1/realtime/reload"), ["before"]);
}
