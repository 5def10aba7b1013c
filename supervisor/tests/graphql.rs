//! GraphQL endpoints through the L7 proxy, against the real kernel: a
//! POST's body is read and judged before anything is forwarded, a GET is
//! judged from its query string, and the server receives exactly what was
//! judged.
//!
//! The server is real: graphql-core behind a small HTTPS handler
//! (`tests/graphql/server.py`), lenient the way an attacker hopes a server
//! is (it reads bodies by their Content-Type, keeps the last of duplicate
//! keys, runs mutations sent by GET and documents of its own persisted-query
//! registry), and it records every request and every root field it
//! executed. It is driven from inside the sandbox with curl, and with a real
//! GraphQL client (python `gql` over httpx, `tests/graphql/client.py`), both
//! from the venv `scripts/install-deps` makes.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dir, SYSTEM, TestNet, exe, log_lines, output, stderr, stdout};
use serde_json::Value;

/// The venv `scripts/install-deps` makes, with graphql-core and gql pinned.
const VENV: &str = "/opt/openshell-test/venv";

const SERVER_PY: &str = include_str!("graphql/server.py");
const CLIENT_PY: &str = include_str!("graphql/client.py");

/// The secret the supervisor holds in the credential test.
const SECRET: &str = "real-secret-0123456789";

/// The body limit of the endpoint in these tests.
const LIMIT: usize = 512;

/// The GraphQL server, killed on drop.
struct Server(upstream::PythonServer);

impl std::ops::Deref for Server {
    type Target = upstream::PythonServer;

    fn deref(&self) -> &upstream::PythonServer {
        &self.0
    }
}

/// One HTTP request as the server recorded it.
#[derive(Debug)]
struct Seen {
    method: String,
    body: String,
    query: String,
    content_length: Option<String>,
    transfer_encoding: Option<String>,
    authorization: Option<String>,
    /// The root fields it executed: (operation type, field).
    executed: Vec<(String, String)>,
}

impl Server {
    fn start(net: &TestNet, dir: &Dir) -> Self {
        let python = Path::new(VENV).join("bin/python");
        let has = |module: &str| {
            Command::new(&python)
                .args(["-c", &format!("import {module}")])
                .status()
                .is_ok_and(|s| s.success())
        };
        assert!(
            has("graphql") && has("gql"),
            "{} lacks graphql-core or gql: run scripts/install-deps (it installs them, pinned, there)",
            python.display()
        );
        Self(upstream::PythonServer::start(
            &net.name,
            &python,
            dir.path(),
            "gql",
            &["gql.test", "other.test"],
            SERVER_PY,
        ))
    }

    fn seen(&self) -> Vec<Seen> {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Seen {
                    method: text(&v["method"]).unwrap(),
                    body: text(&v["body"]).unwrap(),
                    query: text(&v["query"]).unwrap(),
                    content_length: text(&v["content_length"]),
                    transfer_encoding: text(&v["transfer_encoding"]),
                    authorization: text(&v["authorization"]),
                    executed: v["executed"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| (text(&e["type"]).unwrap(), text(&e["field"]).unwrap()))
                        .collect(),
                }
            })
            .collect()
    }

    /// Every root field the server executed, in order.
    fn executed(&self) -> Vec<(String, String)> {
        self.seen().into_iter().flat_map(|s| s.executed).collect()
    }

    /// Repositories deleted: the harm the denied mutation would do.
    fn deleted(&self) -> String {
        std::fs::read_to_string(self.record.with_extension("jsonl.deleted")).unwrap_or_default()
    }
}

struct Sandbox {
    net: TestNet,
    dir: Dir,
    bundles: Dir,
    server: Server,
}

impl Sandbox {
    fn new() -> Self {
        let net = TestNet::new();
        let dir = Dir::new();
        let server = Server::start(&net, &dir);
        Self {
            net,
            dir,
            bundles: Dir::new(),
            server,
        }
    }

    /// A bundle for curl, bash and the venv's python: the test's `rules`
    /// (`PORT` standing for the server's port) after the common part.
    fn bundle(&self, name: &str, rules: &str) -> PathBuf {
        let clients = [
            exe("/usr/bin/curl"),
            exe("/usr/bin/bash"),
            exe(&format!("{VENV}/bin/python")),
        ]
        .join(" ");
        let rules = rules.replace("PORT", &self.server.port.to_string());
        let body = format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs exec {VENV}\n  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {clients}\n{rules}"
        );
        common::bundle(&self.bundles, name, &body)
    }

    /// Runs `cmd` in the sandbox; its output and the deny log's lines.
    fn run(&self, bundle: &Path, cmd: &[&str]) -> (std::process::Output, Vec<Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let args = [
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
            "gql.test=127.0.0.1",
            "--resolve",
            "other.test=127.0.0.1",
            "--",
        ];
        let mut args: Vec<&str> = args.to_vec();
        args.extend_from_slice(cmd);
        let mut c = self.net.supervisor(&args, None);
        c.env("TEST_SECRET", SECRET);
        let out = output(c);
        (out, log_lines(&log))
    }

    fn url(&self) -> String {
        format!("https://gql.test:{}/graphql", self.server.port)
    }
}

/// The GraphQL endpoint of these tests, in the language.
fn rules(extra: &str) -> String {
    format!(
        "  allow clients -> gql.test:PORT graphql {{\n    path /graphql\n    body_limit {LIMIT}\n    allow graphql query\n    allow graphql mutation name Issue* field createIssue addComment\n    deny graphql mutation field deleteRepository\n    deny graphql query field __schema __type\n    persisted {viewer_hash} query name Viewer field viewer\n{extra}  }}\n",
        viewer_hash = sha256_hex(VIEWER)
    )
}

/// The HTTP lines of the deny log.
fn http_lines(log: &[Value]) -> Vec<&Value> {
    log.iter().filter(|l| l["class_uid"] == 4002).collect()
}

/// One curl request of the attack table.
struct Case {
    name: &'static str,
    body: String,
    /// curl's arguments; `@BODY` is the body's file, `URL` the endpoint's
    /// (appended when not named).
    args: &'static str,
    /// The status and `x-openshell-policy` expected (`-`: none).
    status: &'static str,
    policy: &'static str,
}

const JSON: &str = "-H 'Content-Type: application/json' --data-binary @BODY";

fn case(
    name: &'static str,
    body: impl Into<String>,
    args: &'static str,
    status: &'static str,
    policy: &'static str,
) -> Case {
    Case {
        name,
        body: body.into(),
        args,
        status,
        policy,
    }
}

/// A POST body holding one document.
fn doc(document: &str) -> String {
    serde_json::json!({ "query": document }).to_string()
}

/// An allowed query, padded (inside a variable the document does not
/// declare, which the server ignores) to exactly `len` bytes.
fn padded(len: usize) -> String {
    let head = r#"{"query":"query Pad { viewer { login } }","variables":{"pad":""#;
    let tail = r#""}}"#;
    format!("{head}{}{tail}", "a".repeat(len - head.len() - tail.len()))
}

/// The SHA-256 of `text`, hex, as an automatic persisted query sends it.
fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const DELETE: &str = r#"mutation IssueCleanup { deleteRepository(name: "r") }"#;
const VIEWER: &str = "query Viewer { viewer { login } }";

fn attack_cases() -> Vec<Case> {
    let hash_only = |document: &str| {
        serde_json::json!({
            "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(document) } }
        })
        .to_string()
    };
    vec![
        case("query", doc(VIEWER), JSON, "200", "-"),
        case(
            "mutation-allowed",
            doc(r#"mutation IssueCreate { createIssue(title: "t") }"#),
            JSON,
            "200",
            "-",
        ),
        case("mutation-denied", doc(DELETE), JSON, "403", "policy_denied"),
        // An allowed mutation field, but no name the rule allows.
        case(
            "mutation-anonymous",
            doc(r#"mutation { createIssue(title: "t") }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        // Names that lie: a mutation named like a query; an operationName
        // that names no operation of the document; one that picks the
        // mutation of two (the other picks the query, which alone runs).
        case(
            "name-lies",
            doc(r#"mutation Viewer { deleteRepository(name: "r") }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "name-unknown",
            serde_json::json!({"query": DELETE, "operationName": "Viewer"}).to_string(),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "name-picks-mutation",
            serde_json::json!({"query": format!("{VIEWER} {DELETE}"), "operationName": "IssueCleanup"})
                .to_string(),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "name-picks-query",
            serde_json::json!({"query": format!("{VIEWER} {DELETE}"), "operationName": "Viewer"})
                .to_string(),
            JSON,
            "200",
            "-",
        ),
        case(
            "two-operations",
            doc(&format!("{VIEWER} {DELETE}")),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "fragment-spread",
            doc(r#"mutation IssueFrag { ...F } fragment F on Mutation { deleteRepository(name: "r") }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "inline-fragment",
            doc(r#"mutation IssueInline { ... on Mutation { deleteRepository(name: "r") } }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "alias",
            doc(r#"mutation IssueCreate { viewer: deleteRepository(name: "r") }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "alias-as-allowed",
            doc(r#"mutation IssueCreate { createIssue: deleteRepository(name: "r") }"#),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "batch-mixed",
            format!("[{},{}]", doc(VIEWER), doc(DELETE)),
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "batch-allowed",
            format!(
                "[{},{}]",
                doc(VIEWER),
                doc(r#"mutation IssueComment { addComment(body: "b") }"#)
            ),
            JSON,
            "200",
            "-",
        ),
        case(
            "get-query",
            VIEWER,
            "-G --data-urlencode query@BODY",
            "200",
            "-",
        ),
        case(
            "get-mutation",
            DELETE,
            "-G --data-urlencode query@BODY",
            "403",
            "policy_denied",
        ),
        // A GET whose body a server could read as the request.
        case(
            "get-with-body",
            doc(DELETE),
            "-X GET -H 'Content-Type: application/json' --data-binary @BODY URL?query=%7B%20viewer%20%7B%20login%20%7D%20%7D",
            "403",
            "policy_denied",
        ),
        case("typename", doc("{ __typename }"), JSON, "200", "-"),
        case(
            "introspection",
            doc("{ __schema { queryType { name } } }"),
            JSON,
            "403",
            "policy_denied",
        ),
        case("at-limit", padded(LIMIT), JSON, "200", "-"),
        case("over-limit", padded(LIMIT + 1), JSON, "413", "body_too_large"),
        case(
            "over-limit-chunked",
            padded(LIMIT + 1),
            "-H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' --data-binary @BODY",
            "413",
            "body_too_large",
        ),
        case(
            "chunked",
            doc("query Chunked { viewer { login } }"),
            "-H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' --data-binary @BODY",
            "200",
            "-",
        ),
        case(
            "charset-utf8",
            doc("query Charset { viewer { login } }"),
            "-H 'Content-Type: application/json; charset=utf-8' --data-binary @BODY",
            "200",
            "-",
        ),
        // Content-Type games: the server reads these bodies otherwise.
        case(
            "ct-graphql",
            DELETE,
            "-H 'Content-Type: application/graphql' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-graphql-query",
            VIEWER,
            "-H 'Content-Type: application/graphql' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        // Valid JSON holding an allowed query, and as a form a mutation.
        case(
            "ct-form",
            format!(
                r#"{{"query":"{{ viewer {{ login }} }}","variables":{{"a":"&query={}&b="}}}}"#,
                "mutation%20IssueX%20%7B%20deleteRepository(name%3A%20%22r%22)%20%7D"
            ),
            "--data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-missing",
            doc(VIEWER),
            "-H 'Content-Type:' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-text",
            doc(VIEWER),
            "-H 'Content-Type: text/plain' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-utf16",
            doc(VIEWER),
            "-H 'Content-Type: application/json; charset=utf-16' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-two",
            doc(VIEWER),
            "-H 'Content-Type: application/json' -H 'Content-type: application/graphql' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "ct-multipart",
            doc(DELETE),
            "-F operations=<BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "gzip",
            doc(VIEWER),
            "-H 'Content-Type: application/json' -H 'Content-Encoding: gzip' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "malformed",
            r#"{"query":"{ viewer { login } }""#,
            JSON,
            "403",
            "policy_denied",
        ),
        case(
            "duplicate-query",
            format!(r#"{{"query":"{{ viewer {{ login }} }}","query":{}}}"#, serde_json::json!(DELETE)),
            JSON,
            "403",
            "policy_denied",
        ),
        case("empty", "", JSON, "403", "policy_denied"),
        case(
            "persisted-unregistered",
            hash_only(DELETE),
            JSON,
            "403",
            "policy_denied",
        ),
        // Registered in the policy as the query it is on the server.
        case("persisted-registered", hash_only(VIEWER), JSON, "200", "-"),
        case(
            "ct-graphql-expect",
            DELETE,
            "-H 'Content-Type: application/graphql' -H 'Expect: 100-continue' --data-binary @BODY",
            "415",
            "body_not_inspectable",
        ),
        case(
            "put",
            doc(VIEWER),
            "-X PUT -H 'Content-Type: application/json' --data-binary @BODY",
            "403",
            "policy_denied",
        ),
    ]
}

/// A script that sends each case with curl and prints `NAME STATUS POLICY`.
fn curl_script(dir: &Path, url: &str, cases: &[Case]) -> String {
    let mut script = format!("cd {}\n", dir.display());
    for c in cases {
        let mut args = c.args.replace("BODY", &format!("body-{}", c.name));
        if args.contains("URL") {
            args = args.replace("URL", url);
        } else {
            args = format!("{args} {url}");
        }
        script.push_str(&format!(
            "printf '%s ' {n}; curl -sS -o out-{n} -D hdr-{n} -w '%{{http_code}} ' {args}; \
             (grep -i '^x-openshell-policy:' hdr-{n} | tr -d '\\r' | cut -d' ' -f2; echo -) | head -1\n",
            n = c.name
        ));
    }
    script
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
fn curl_attacks_are_judged_as_the_server_would_read_them_and_refused_ones_never_reach_it() {
    let s = Sandbox::new();
    let b = s.bundle("attacks", &rules(""));
    let cases = attack_cases();
    for c in &cases {
        std::fs::write(s.dir.join(&format!("body-{}", c.name)), &c.body).unwrap();
    }
    let script = curl_script(s.dir.path(), &s.url(), &cases);
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    let text = stdout(&out);
    let mut wrong = Vec::new();
    for c in &cases {
        let got = outcome(&text, c.name);
        if got != (c.status, c.policy) {
            let said =
                std::fs::read_to_string(s.dir.join(&format!("out-{}", c.name))).unwrap_or_default();
            wrong.push(format!(
                "{}: got {got:?}, want {:?}: {said}",
                c.name,
                (c.status, c.policy)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n{}\nserver: {}",
        wrong.join("\n"),
        stderr(&out),
        s.server.stderr()
    );
    // The server saw the allowed requests, each exactly as sent, and
    // nothing else: no refused request reached it, in part or whole.
    let seen = s.server.seen();
    let allowed: Vec<&Case> = cases.iter().filter(|c| c.status == "200").collect();
    assert_eq!(seen.len(), allowed.len(), "{seen:#?}");
    for (c, got) in allowed.iter().zip(&seen) {
        if c.args.starts_with("-G") {
            assert_eq!(got.method, "GET", "{}", c.name);
            assert!(got.body.is_empty(), "{}: {got:?}", c.name);
            assert!(got.query.starts_with("query="), "{}: {got:?}", c.name);
        } else {
            assert_eq!(got.method, "POST", "{}", c.name);
            assert_eq!(got.body, c.body, "{}", c.name);
            assert_eq!(
                got.content_length.as_deref(),
                Some(c.body.len().to_string().as_str()),
                "{}: judged bodies go upstream with a length of their own",
                c.name
            );
            assert_eq!(got.transfer_encoding, None, "{}", c.name);
        }
    }
    let executed = s.server.executed();
    assert!(
        executed.iter().all(|(_, f)| f != "deleteRepository"),
        "{executed:?}"
    );
    assert_eq!(s.server.deleted(), "", "a repository was deleted");
    // The operation the query-picking operationName selected is the one the
    // server ran, and the only one.
    let picked = seen
        .iter()
        .find(|x| x.body.contains(r#""operationName":"Viewer""#))
        .unwrap();
    assert_eq!(picked.executed, [("query".into(), "viewer".into())]);
    // The registered hash ran the server's stored query, as registered.
    let persisted = seen
        .iter()
        .find(|x| x.body.contains(&sha256_hex(VIEWER)))
        .unwrap();
    assert_eq!(persisted.executed, [("query".into(), "viewer".into())]);
    // One deny-log line per refusal; the policy refusals name what they
    // refused: the operation type, its name and the root field.
    let http = http_lines(&log);
    let refused = cases.iter().filter(|c| c.status != "200").count();
    assert_eq!(http.len(), refused, "{log:#?}");
    let line = |needle: &str| {
        http.iter()
            .find(|l| l["message"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no line names {needle}: {http:#?}"))
    };
    let denied = line("deleteRepository");
    assert_eq!(denied["unmapped"]["error"], "policy_denied");
    assert_eq!(denied["unmapped"]["graphql_operation_type"], "mutation");
    assert_eq!(denied["unmapped"]["graphql_operation_name"], "IssueCleanup");
    assert_eq!(
        denied["unmapped"]["graphql_fields"],
        serde_json::json!(["deleteRepository"])
    );
    assert_eq!(denied["http_request"]["url"]["path"], "/graphql");
    let batch = line("batch operation 2 of 2");
    assert_eq!(batch["unmapped"]["graphql_operation_name"], "IssueCleanup");
    let unregistered = line(&sha256_hex(DELETE));
    assert_eq!(
        unregistered["unmapped"]["graphql_persisted_query"],
        sha256_hex(DELETE)
    );
    assert_eq!(
        unregistered["unmapped"]["graphql_operation_type"],
        Value::Null
    );
    let introspection = line("__schema");
    assert_eq!(
        introspection["unmapped"]["graphql_fields"],
        serde_json::json!(["__schema"])
    );
}

#[test]
fn other_spellings_of_the_graphql_path_and_semicolons_in_a_get_do_not_escape_its_rules() {
    let s = Sandbox::new();
    // Beside the GraphQL endpoint, a REST one that allows everything else
    // on the host: the server serves GraphQL on every path.
    let b = s.bundle(
        "aliases",
        &format!(
            "{}  allow clients -> gql.test:PORT http {{\n    allow GET /**\n    allow POST /**\n  }}\n",
            rules("")
        ),
    );
    let cases = vec![
        case("exact", doc(VIEWER), JSON, "200", "-"),
        case("exact-denied", doc(DELETE), JSON, "403", "policy_denied"),
        case(
            "trailing-slash",
            doc(DELETE),
            "-H 'Content-Type: application/json' --data-binary @BODY URL/",
            "403",
            "path_alias",
        ),
        case(
            "case",
            doc(DELETE),
            "--path-as-is -H 'Content-Type: application/json' --data-binary @BODY URL/../GraphQL",
            "403",
            "path_alias",
        ),
        case(
            "case-slash",
            doc(VIEWER),
            "--path-as-is -H 'Content-Type: application/json' --data-binary @BODY URL/../GRAPHQL/",
            "403",
            "path_alias",
        ),
        case(
            "dot-segment",
            doc(DELETE),
            "--path-as-is -H 'Content-Type: application/json' --data-binary @BODY URL/.",
            "403",
            "path_alias",
        ),
        // These are the canonical path itself, so the GraphQL rules judge.
        case(
            "double-slash",
            doc(DELETE),
            "--path-as-is -H 'Content-Type: application/json' --data-binary @BODY URL/..//graphql",
            "403",
            "policy_denied",
        ),
        case(
            "dot-dot",
            doc(DELETE),
            "--path-as-is -H 'Content-Type: application/json' --data-binary @BODY URL/../x/../graphql",
            "403",
            "policy_denied",
        ),
        // A second `query` after a `;`: the server reads it, and runs it.
        case(
            "get-semicolon",
            "",
            "-X GET 'URL?query=%7Bviewer%7Blogin%7D%7D&variables=%7B%7D;query=mutation%20IssueCleanup%7BdeleteRepository(name:%22r%22)%7D'",
            "403",
            "policy_denied",
        ),
        case(
            "get-semicolon-allowed",
            "",
            "-X GET 'URL?query=%7Bviewer%7Blogin%7D%7D;variables=%7B%7D'",
            "200",
            "-",
        ),
    ];
    for c in &cases {
        std::fs::write(s.dir.join(&format!("body-{}", c.name)), &c.body).unwrap();
    }
    let script = curl_script(s.dir.path(), &s.url(), &cases);
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    let text = stdout(&out);
    for c in &cases {
        let said =
            std::fs::read_to_string(s.dir.join(&format!("out-{}", c.name))).unwrap_or_default();
        assert_eq!(
            outcome(&text, c.name),
            (c.status, c.policy),
            "{}: {said}\n{text}\n{}\nserver: {}",
            c.name,
            stderr(&out),
            s.server.stderr()
        );
    }
    // The server ran the two allowed queries and nothing else.
    assert_eq!(
        s.server.executed(),
        [
            ("query".to_owned(), "viewer".to_owned()),
            ("query".to_owned(), "viewer".to_owned())
        ]
    );
    assert_eq!(s.server.deleted(), "", "a repository was deleted");
    let http = http_lines(&log);
    let aliases: Vec<&&Value> = http
        .iter()
        .filter(|l| l["unmapped"]["error"] == "path_alias")
        .collect();
    assert_eq!(aliases.len(), 4, "{http:#?}");
    assert!(
        aliases[0]["message"]
            .as_str()
            .unwrap()
            .contains("`/graphql`"),
        "{aliases:#?}"
    );
}

#[test]
fn a_real_graphql_client_gets_data_for_allowed_operations_and_the_proxys_refusal_for_denied_ones() {
    let s = Sandbox::new();
    let b = s.bundle(
        "client",
        &rules("    allow graphql subscription field ticks\n"),
    );
    let client = s.dir.join("gql_client.py");
    std::fs::write(&client, CLIENT_PY).unwrap();
    let python = format!("{VENV}/bin/python");
    let (out, log) = s.run(&b, &[&python, client.to_str().unwrap(), &s.url()]);
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
                s.server.stderr()
            )
        })
    };
    let ok = |name: &str| {
        let st = step(name);
        assert_eq!(st["ok"], true, "{name}: {st}");
        st["result"].clone()
    };
    let refused = |name: &str| {
        let st = step(name);
        assert_eq!(st["ok"], false, "{name} must be refused: {st}");
        assert_eq!(st["status"], 403, "{name}: {st}");
        assert_eq!(
            st["policy"], "policy_denied",
            "{name}: the client got the proxy's refusal: {st}"
        );
        let body: Value = serde_json::from_str(st["body"].as_str().unwrap()).unwrap();
        assert!(
            body["reason"]
                .as_str()
                .unwrap()
                .contains("`deleteRepository`"),
            "{name}: {body}"
        );
    };
    assert_eq!(ok("viewer")["viewer"]["login"], "octocat");
    assert_eq!(ok("create-issue")["createIssue"], "issue: from gql");
    refused("delete-repository");
    assert_eq!(ok("batch-allowed")[1]["addComment"], "comment: b");
    refused("batch-mixed");
    // The connection is still good after the refusals.
    assert_eq!(ok("after-refusals")["repository"]["name"], "x");
    // The event stream came through event by event: the first event was
    // read before `release` was sent, and the server held the second back
    // until it arrived.
    let stream = ok("stream");
    assert_eq!(stream["status"], 200, "{stream}");
    let events = stream["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{stream}");
    assert_eq!(events[0]["data"]["data"]["ticks"], 1);
    assert_eq!(events[0]["release_status"], 200);
    assert_eq!(
        events[1]["data"]["released"], true,
        "the first event was not relayed before the stream went on: {stream}"
    );
    // What the server executed: the allowed operations, never the denied.
    let executed = s.server.executed();
    let fields: Vec<&str> = executed.iter().map(|(_, f)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "viewer",
            "createIssue",
            "viewer",
            "addComment",
            "repository",
            "ticks",
            "release"
        ],
        "{executed:?}"
    );
    assert_eq!(s.server.deleted(), "");
    // Two refusals, each one deny-log line naming the mutation refused.
    let http = http_lines(&log);
    assert_eq!(http.len(), 2, "{http:#?}");
    for l in &http {
        assert_eq!(l["action"], "Denied");
        assert_eq!(l["unmapped"]["error"], "policy_denied");
        assert_eq!(l["unmapped"]["graphql_operation_type"], "mutation", "{l}");
        assert_eq!(
            l["unmapped"]["graphql_operation_name"], "IssueCleanup",
            "{l}"
        );
        assert_eq!(
            l["unmapped"]["graphql_fields"],
            serde_json::json!(["deleteRepository"]),
            "{l}"
        );
        let message = l["message"].as_str().unwrap();
        assert!(
            message.contains("deleteRepository") && message.contains("IssueCleanup"),
            "{message}"
        );
    }
}

#[test]
fn credentials_are_injected_on_allowed_operations_and_audit_mode_forwards_and_logs() {
    let s = Sandbox::new();
    let rules = format!(
        "  credential tok {{\n    secret env TEST_SECRET\n    inject header Authorization \"Bearer {{secret}}\"\n    hosts gql.test\n  }}\n{}  allow clients -> other.test:PORT graphql audit {{\n    allow graphql query\n  }}\n",
        rules("")
    );
    let b = s.bundle("cred", &rules);
    let post = |host: &str, body: &str| {
        format!(
            "curl -sS -o /dev/null -w '%{{http_code}}\\n' -H 'Content-Type: application/json' --data-raw '{body}' https://{host}:{}/graphql",
            s.server.port
        )
    };
    let script = [
        post("gql.test", &doc(VIEWER)),
        post("gql.test", &doc(DELETE)),
        post("other.test", &doc(VIEWER)),
        post(
            "other.test",
            &doc(r#"mutation IssueCreate { createIssue(title: "audited") }"#),
        ),
    ]
    .join("; ");
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    let codes: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        codes,
        ["200", "403", "200", "200"],
        "{}\nserver: {}",
        stderr(&out),
        s.server.stderr()
    );
    let seen = s.server.seen();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    // The allowed operation carried the secret; the audited endpoint has
    // no credential bound.
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(seen[1].authorization, None);
    assert_eq!(
        seen[2].executed,
        [("mutation".to_owned(), "createIssue".to_owned())]
    );
    let http = http_lines(&log);
    let audited: Vec<&&Value> = http
        .iter()
        .filter(|l| l["unmapped"]["audit"] == true)
        .collect();
    assert_eq!(audited.len(), 1, "{http:#?}");
    assert_eq!(audited[0]["action"], "Allowed");
    assert_eq!(
        audited[0]["unmapped"]["graphql_fields"],
        serde_json::json!(["createIssue"])
    );
    assert_eq!(s.server.deleted(), "");
    let text = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
    assert!(!text.contains(SECRET), "the log holds the secret");
}
