//! The L7 proxy against the real kernel: real clients inside the sandbox
//! (curl, python3's http.client, git), a local upstream with its own CA
//! reached through `--resolve` and `--upstream-ca`, everything inside a
//! network namespace of the test's own.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::path::PathBuf;

use common::{Dir, SYSTEM, TestNet, exe, log_lines, output, stderr, stdout};
use serde_json::Value;

/// The secret the supervisor holds in the credential tests.
const SECRET: &str = "real-secret-0123456789";

/// Sends requests from inside the sandbox with http.client and prints one
/// JSON line per response. argv[1]: JSON list of
/// `[scheme, host, port, method, target, {headers}]`; `$TOKEN` in a header
/// value or the target is the workload's `TOKEN`. Requests to the same
/// scheme://host:port share one keep-alive connection.
const CLIENT_PY: &str = r#"
import http.client, json, os, ssl, sys
conns = {}
for scheme, host, port, method, target, headers in json.loads(sys.argv[1]):
    key = (scheme, host, port)
    if key not in conns:
        if scheme == "https":
            conns[key] = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(), timeout=10)
        else:
            conns[key] = http.client.HTTPConnection(host, port, timeout=10)
    c = conns[key]
    headers = {k: v.replace("$TOKEN", os.environ.get("TOKEN", "")) for k, v in headers.items()}
    target = target.replace("$TOKEN", os.environ.get("TOKEN", ""))
    try:
        c.putrequest(method, target, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in headers.items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        body = r.read().decode()
        print(json.dumps({"status": r.status, "policy": r.getheader("x-openshell-policy"),
                          "echo_auth": r.getheader("x-echo-authorization"), "body": body}), flush=True)
        if r.getheader("connection", "").lower() == "close":
            c.close(); del conns[key]
    except Exception as e:
        print(json.dumps({"status": 0, "error": repr(e)}), flush=True)
        c.close(); del conns[key]
"#;

struct Sandbox {
    net: TestNet,
    dir: Dir,
    /// Where the bundles live: outside what the workload may write, or a
    /// reload would refuse them.
    bundles: Dir,
    up: upstream::Upstream,
}

impl Sandbox {
    fn new() -> Self {
        let net = TestNet::new();
        let dir = Dir::new();
        let git = dir.mkdir("git");
        let up = upstream::serve(
            net.tcp("127.0.0.1:0"),
            net.tcp("127.0.0.1:0"),
            dir.path(),
            &["api.test", "other.test", "git.test"],
            Some(git),
        );
        Self {
            net,
            dir,
            bundles: Dir::new(),
            up,
        }
    }

    /// A bundle: the test's `rules` after the common part.
    fn bundle(&self, name: &str, rules: &str) -> PathBuf {
        let clients = [
            exe("/usr/bin/curl"),
            exe("/usr/bin/python3"),
            git_remote_https(),
        ]
        .join(" ");
        let rules = rules
            .replace("TLS", &self.up.tls_port.to_string())
            .replace("PLAIN", &self.up.plain_port.to_string());
        let body = format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  run_as user nobody group nogroup\n  binaries clients = {clients}\n{rules}"
        );
        common::bundle(&self.bundles, name, &body)
    }

    fn command(
        &self,
        bundle: &std::path::Path,
        extra: &[&str],
        cmd: &[&str],
    ) -> std::process::Command {
        let log = self.dir.log();
        let mut args = vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--resolve",
            "api.test=127.0.0.1",
            "--resolve",
            "other.test=127.0.0.1",
            "--resolve",
            "git.test=127.0.0.1",
            "--upstream-ca",
            self.up.ca_file.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(cmd);
        let mut c = self.net.supervisor(&args, None);
        c.env("TEST_SECRET", SECRET);
        c
    }

    fn run(&self, bundle: &std::path::Path, cmd: &[&str]) -> (std::process::Output, Vec<Value>) {
        let _ = std::fs::remove_file(self.dir.log());
        let out = output(self.command(bundle, &[], cmd));
        (out, log_lines(&self.dir.log()))
    }

    /// Runs CLIENT_PY with `requests`; the parsed responses, in order.
    fn requests(&self, bundle: &std::path::Path, requests: &Value) -> (Vec<Value>, Vec<Value>) {
        let arg = requests.to_string();
        let (out, log) = self.run(bundle, &["/usr/bin/python3", "-c", CLIENT_PY, &arg]);
        assert!(out.status.success(), "{}", stderr(&out));
        let responses: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            responses.len(),
            requests.as_array().unwrap().len(),
            "{}",
            stderr(&out)
        );
        (responses, log)
    }
}

/// The program git runs for `https://` remotes (it is what connects).
fn git_remote_https() -> String {
    let out = std::process::Command::new("git")
        .arg("--exec-path")
        .output()
        .unwrap();
    let dir = String::from_utf8(out.stdout).unwrap();
    exe(&format!("{}/git-remote-https", dir.trim()))
}

fn https(method: &str, target: &str) -> Value {
    serde_json::json!(["https", "api.test", 0, method, target, {}])
}

/// Fills in the port for each request's scheme.
fn ports(s: &Sandbox, mut requests: Value) -> Value {
    for r in requests.as_array_mut().unwrap() {
        let port = if r[0] == "https" {
            s.up.tls_port
        } else {
            s.up.plain_port
        };
        r[2] = port.into();
    }
    requests
}

fn body(r: &Value) -> Value {
    serde_json::from_str(r["body"].as_str().unwrap()).unwrap()
}

#[test]
fn a_read_only_endpoint_allows_get_and_head_and_refuses_post_with_json() {
    let s = Sandbox::new();
    let b = s.bundle("ro", "  allow clients -> api.test:TLS http read-only\n");
    let url = format!("https://api.test:{}/repos/o/r", s.up.tls_port);
    let script = format!(
        "curl -sS -o /dev/null -w '%{{http_code}}\\n' {url}; \
         curl -sS -I -o /dev/null -w '%{{http_code}}\\n' {url}; \
         curl -sS -D - -X POST -d x=1 {url}"
    );
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("200"), "GET: {text} {}", stderr(&out));
    assert_eq!(lines.next(), Some("200"), "HEAD: {text}");
    assert!(text.contains("HTTP/1.1 403"), "{text}");
    assert!(
        text.to_lowercase()
            .contains("x-openshell-policy: policy_denied"),
        "{text}"
    );
    let json: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(json["error"], "policy_denied");
    assert_eq!(json["method"], "POST");
    assert_eq!(json["path"], "/repos/o/r");
    assert!(
        json["rule"].as_str().unwrap().contains("ro.policy:"),
        "{json}"
    );
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("matches no allow rule")
    );
    let seen: Vec<String> = s.up.seen().iter().map(|r| r.method.clone()).collect();
    assert_eq!(seen, ["GET", "HEAD"], "the POST never reached the upstream");
    let http: Vec<&Value> = log.iter().filter(|l| l["class_uid"] == 4002).collect();
    assert_eq!(http.len(), 1, "one line for the refusal: {log:?}");
    let line = http[0];
    assert_eq!(line["action"], "Denied");
    assert_eq!(line["http_request"]["http_method"], "POST");
    assert_eq!(line["http_request"]["url"]["path"], "/repos/o/r");
    assert_eq!(line["dst_endpoint"]["hostname"], "api.test");
    assert_eq!(
        line["actor"]["process"]["file"]["path"],
        exe("/usr/bin/curl")
    );
    assert_eq!(line["unmapped"]["error"], "policy_denied");
}

#[test]
fn deny_beats_allow_and_star_is_one_segment_while_double_star_is_many() {
    let s = Sandbox::new();
    let b = s.bundle(
        "globs",
        "  allow clients -> api.test:TLS http {\n    allow GET /repos/**\n    allow GET /one/*\n    deny GET /repos/*/secret\n  }\n",
    );
    let reqs = ports(
        &s,
        serde_json::json!([
            https("GET", "/repos/a/b/c"),
            https("GET", "/repos"),
            https("GET", "/repos/a/secret"),
            https("GET", "/repos/a/b/secret"),
            https("GET", "/one/x"),
            https("GET", "/one/x/y"),
            https("GET", "/two"),
        ]),
    );
    let (r, _) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [200, 200, 403, 200, 200, 403, 403], "{r:?}");
    assert!(
        body(&r[2])["reason"]
            .as_str()
            .unwrap()
            .contains("deny rule")
    );
}

#[test]
fn encoded_dots_double_slashes_and_encoded_slashes_cannot_slip_past_a_deny() {
    let s = Sandbox::new();
    let b = s.bundle(
        "enc",
        "  allow clients -> api.test:TLS http {\n    allow GET /repos/**\n    deny GET /repos/o/secret\n  }\n",
    );
    let reqs = ports(
        &s,
        serde_json::json!([
            https("GET", "/repos/o/r/%2e%2e/secret"),
            https("GET", "/repos/o/r/.%2E/secret"),
            https("GET", "/repos//o//secret"),
            https("GET", "/repos/o%2Fsecret"),
            https("GET", "/repos/%2e%2e/admin"),
            https("GET", "/repos/o/./r/../x%7e"),
        ]),
    );
    let (r, _) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [403, 403, 403, 403, 403, 200], "{r:?}");
    assert_eq!(body(&r[0])["path"], "/repos/o/secret");
    assert_eq!(body(&r[4])["path"], "/admin", "not a path the rules allow");
    assert!(body(&r[3])["reason"].as_str().unwrap().contains("refused"));
    // What was checked is what the upstream got: the canonical target.
    let seen: Vec<String> = s.up.seen().iter().map(|x| x.target.clone()).collect();
    assert_eq!(seen, ["/repos/o/x~"]);
}

#[test]
fn an_endpoint_that_folds_paths_denies_every_spelling_of_a_denied_path() {
    let s = Sandbox::new();
    let b = s.bundle(
        "fold",
        "  allow clients -> api.test:TLS http fold_paths {\n    allow GET /Repos/**\n    deny GET /repos/o/secret\n  }\n",
    );
    let reqs = ports(
        &s,
        serde_json::json!([
            https("GET", "/repos/o/secret"),
            https("GET", "/REPOS/O/SECRET"),
            https("GET", "/Repos/o/Secret/"),
            https("GET", "/repos/o/%53ecret"),
            https("GET", "/REPOS/o/r/"),
            https("GET", "/repos/o/r"),
            https("GET", "/reposx"),
        ]),
    );
    let (r, _) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [403, 403, 403, 403, 200, 200, 403], "{r:?}");
    for x in &r[..4] {
        assert!(
            body(x)["reason"].as_str().unwrap().contains("deny rule"),
            "{x}"
        );
    }
    // The proxy folds only to match: the server gets the path as sent.
    let seen: Vec<String> = s.up.seen().iter().map(|x| x.target.clone()).collect();
    assert_eq!(seen, ["/REPOS/o/r/", "/repos/o/r"]);
}

#[test]
fn a_host_that_disagrees_with_the_sni_or_an_absolute_form_for_another_host_is_refused() {
    let s = Sandbox::new();
    let b = s.bundle(
        "hosts",
        "  allow clients -> api.test:TLS,PLAIN http read-only\n  allow clients -> other.test:TLS,PLAIN http read-only\n",
    );
    let other = |scheme: &str, target: &str, host: &str| serde_json::json!([scheme, "api.test", 0, "GET", target, {"Host": host}]);
    let reqs = ports(
        &s,
        serde_json::json!([
            other("https", "/x", "other.test"),
            other("https", "http://other.test/x", "other.test"),
            other("https", "https://other.test/x", "api.test"),
            ["http", "api.test", 0, "GET", "http://evil.example/x", {"Host": "evil.example"}],
            other("https", "/x", &format!("api.test:{}", s.up.plain_port)),
            https("GET", "/ok"),
        ]),
    );
    let (r, log) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [421, 421, 421, 421, 421, 200], "{r:?}");
    for x in &r[..5] {
        assert_eq!(x["policy"], "host_mismatch", "{x}");
    }
    assert_eq!(s.up.seen().len(), 1, "only the last request went through");
    assert_eq!(
        log.iter()
            .filter(|l| l["unmapped"]["error"] == "host_mismatch")
            .count(),
        5
    );
}

#[test]
fn plain_http_routes_are_inspected_the_same_way() {
    let s = Sandbox::new();
    let b = s.bundle(
        "plain",
        "  allow clients -> api.test:PLAIN http read-only\n",
    );
    let url = format!("http://api.test:{}/a", s.up.plain_port);
    let script = format!(
        "curl -sS -o /dev/null -w '%{{http_code}} ' {url}; curl -sS -o /dev/null -w '%{{http_code}}' -X DELETE {url}"
    );
    let (out, _) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert_eq!(stdout(&out), "200 403", "{}", stderr(&out));
    let seen = s.up.seen();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].tls);
}

const CREDENTIAL_RULES: &str = "  credential tok {\n    secret env TEST_SECRET\n    placeholder env TOKEN\n    inject replace\n    hosts api.test\n    methods GET\n  }\n  allow clients -> api.test:TLS http read-write\n  allow clients -> other.test:TLS http read-write\n";

#[test]
fn a_credential_is_injected_only_where_bound_and_never_seen_by_the_workload() {
    let s = Sandbox::new();
    let b = s.bundle("cred", CREDENTIAL_RULES);
    let auth = serde_json::json!({"Authorization": "Bearer $TOKEN"});
    let reqs = ports(
        &s,
        serde_json::json!([
            ["https", "api.test", 0, "GET", "/user", auth],
            ["https", "other.test", 0, "GET", "/user", auth],
            ["https", "api.test", 0, "POST", "/user", auth],
            ["https", "api.test", 0, "GET", "/user?token=$TOKEN", {}],
            ["https", "api.test", 0, "GET", "/anon", {}],
        ]),
    );
    let (r, log) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [200, 403, 403, 403, 200], "{r:?}");
    // The upstream got the secret, and only on the bound request.
    let seen = s.up.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(seen[1].header("authorization"), None);
    for x in &seen {
        let all = format!("{x:?}");
        assert!(
            !all.contains("openshell-placeholder-"),
            "a placeholder reached the upstream: {all}"
        );
    }
    // Refused: other host (not bound), POST (method outside the binding),
    // the placeholder in the target (never replaced there).
    for x in &r[1..4] {
        assert_eq!(x["policy"], "credential_not_bound", "{x}");
    }
    // The echo of the secret was scrubbed on the way back.
    let echo = r[0]["echo_auth"].as_str().unwrap();
    assert!(
        echo.starts_with("Bearer openshell-placeholder-tok-"),
        "{echo}"
    );
    for x in &r {
        assert!(
            !x.to_string().contains(SECRET),
            "the workload saw the secret: {x}"
        );
    }
    let text = std::fs::read_to_string(s.dir.log()).unwrap_or_default();
    assert!(!text.contains(SECRET), "the log holds the secret");
    assert_eq!(
        log.iter()
            .filter(|l| l["unmapped"]["error"] == "credential_not_bound")
            .count(),
        3
    );
}

/// A placeholder in a streamed (REST) body never reaches the server, on
/// any host of a sandbox that has credentials: refused with a `403`
/// before the head is sent when it comes with the first piece, and, when
/// a later piece completes it, the upstream request is aborted with no
/// byte of the marker sent (the client gets the same `403`). Bodies
/// without the whole marker go through unchanged, also when a piece ends
/// inside what could have been one.
#[test]
fn a_placeholder_in_a_streamed_body_never_reaches_the_server_even_cut_across_pieces() {
    let s = Sandbox::new();
    let b = s.bundle("cred-body", CREDENTIAL_RULES);
    let json = r#"{"k":"$TOKEN"}"#;
    let reqs = serde_json::json!([
        [
            "POST",
            "api.test",
            s.up.tls_port,
            "/whole",
            "length",
            null,
            json,
            [],
            0
        ],
        [
            "POST",
            "other.test",
            s.up.tls_port,
            "/split-chunked",
            "chunked",
            null,
            json,
            [10],
            0
        ],
        [
            "PUT",
            "api.test",
            s.up.tls_port,
            "/split-length",
            "length",
            null,
            json,
            [6, 26],
            0
        ],
        [
            "POST",
            "api.test",
            s.up.tls_port,
            "/clean",
            "chunked",
            null,
            "a openshell-placeholder b open",
            [13, 23],
            0
        ],
    ]);
    let (out, log) = s.run(
        &b,
        &["/usr/bin/python3", "-c", PIECES_PY, &reqs.to_string()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        r.len(),
        4,
        "{r:?}
{}",
        stderr(&out)
    );
    for x in &r[..3] {
        assert_eq!(x["status"], 403, "{x}");
        assert_eq!(x["policy"], "credential_not_bound", "{x}");
        assert_eq!(
            body(x)["reason"],
            "a credential placeholder in a request body is never replaced; send it in a header"
        );
    }
    assert_eq!(r[3]["status"], 200, "{}", r[3]);

    let seen = s.up.seen();
    let at = |target: &str| seen.iter().find(|x| x.target == target);
    for x in &seen {
        let body = String::from_utf8_lossy(&x.body);
        assert!(
            !body.contains("open") || x.target == "/clean",
            "a piece of the marker reached the upstream: {x:?}"
        );
    }
    // Refused before the head left.
    assert!(at("/whole").is_none(), "{seen:?}");
    // Broken off after the piece before the marker.
    assert_eq!(
        at("/split-chunked").map(|x| &x.body[..]),
        Some(&b"{\"k\":\""[..])
    );
    assert_eq!(
        at("/split-length").map(|x| &x.body[..]),
        Some(&b"{\"k\":\""[..])
    );
    assert_eq!(
        at("/clean").map(|x| &x.body[..]),
        Some(&b"a openshell-placeholder b open"[..])
    );
    // One deny line each, whether refused before or during the body.
    let refused: Vec<&Value> = log
        .iter()
        .filter(|l| l["unmapped"]["error"] == "credential_not_bound")
        .collect();
    assert_eq!(refused.len(), 3, "{log:#?}");
}

/// Sends one request per entry of argv[1], `[method, host, port, target,
/// framing, content_type (null: none), body, cuts, pad]`: the body
/// (`$TOKEN`, `$FAR`, `$GETTER` and `$READER` replaced by the workload's
/// variables of those names, then `pad` bytes of `x`) cut at the offsets
/// in `cuts` and written a piece at a time with a pause between, `chunked`
/// or with a `Content-Length`. One JSON line per response.
const PIECES_PY: &str = r#"
import http.client, json, os, ssl, sys, time
for method, host, port, target, framing, ctype, body, cuts, pad in json.loads(sys.argv[1]):
    for var in ("TOKEN", "FAR", "GETTER", "READER"):
        body = body.replace("$" + var, os.environ.get(var, ""))
    body = body.encode() + b"x" * pad
    bounds = [0] + cuts + [len(body)]
    pieces = [body[a:b] for a, b in zip(bounds, bounds[1:])]
    c = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(), timeout=10)
    c.putrequest(method, target, skip_accept_encoding=True)
    if ctype is not None:
        c.putheader("Content-Type", ctype)
    if framing == "chunked":
        c.putheader("Transfer-Encoding", "chunked")
    else:
        c.putheader("Content-Length", str(len(body)))
    c.endheaders()
    try:
        for i, p in enumerate(pieces):
            if i:
                time.sleep(0.2)
            c.send(b"%x\r\n%s\r\n" % (len(p), p) if framing == "chunked" else p)
        if framing == "chunked":
            c.send(b"0\r\n\r\n")
    except OSError:
        pass
    try:
        r = c.getresponse()
        print(json.dumps({"status": r.status, "policy": r.getheader("x-openshell-policy"),
                          "body": r.read().decode(errors="replace"), "token": os.environ.get("TOKEN")}), flush=True)
    except Exception as e:
        print(json.dumps({"status": 0, "error": repr(e)}), flush=True)
    c.close()
"#;

/// With `request_body_credential_rewrite`, the server gets the secret in
/// place of the placeholder in a JSON body and a chunked form body (sent in
/// pieces that cut the placeholder), re-sent with a `Content-Length` of
/// the new body and no `Transfer-Encoding`; its echo reaches the client
/// with the placeholder back. Another host's placeholder, a placeholder in
/// a body of another type, and a body over 256 KiB are refused before
/// anything reaches the server; a route without the option refuses the
/// placeholder as before. Neither the client nor the deny log ever sees
/// the secret.
///
/// A placeholder is replaced only on a request its credential's binding
/// covers, as a header is: a `methods GET` credential's placeholder in a
/// `POST` body, or a `paths /echo-body/read/**` credential's in a body to
/// another path, is refused (`403 credential_not_bound`, logged naming
/// the credential) and nothing reaches the server; in a `GET` body, or
/// one to `/echo-body/read/x`, it is replaced.
#[test]
fn request_body_credential_rewrite_sends_the_server_the_secret_and_the_client_only_placeholders() {
    let s = Sandbox::new();
    let rules = CREDENTIAL_RULES
        .replace(
            "    methods GET\n  }\n",
            "    methods GET POST\n  }\n  credential far {\n    secret env FAR_SECRET\n    placeholder env FAR\n    inject replace\n    hosts other.test\n  }\n  credential getter {\n    secret env TEST_SECRET\n    placeholder env GETTER\n    inject replace\n    hosts api.test\n    methods GET\n  }\n  credential reader {\n    secret env TEST_SECRET\n    placeholder env READER\n    inject replace\n    hosts api.test\n    paths /echo-body/read/**\n  }\n",
        )
        .replace(
            "api.test:TLS http read-write",
            "api.test:TLS http read-write request_body_credential_rewrite",
        );
    let b = s.bundle("body-rewrite", &rules);
    let port = s.up.tls_port;
    let json = r#"{"k":"$TOKEN"}"#;
    let one = |method: &str, host: &str, target: &str, ctype: &str, body: &str| {
        serde_json::json!([method, host, port, target, "length", ctype, body, [], 0])
    };
    let reqs = serde_json::json!([
        one(
            "POST",
            "api.test",
            "/echo-body/json",
            "application/json; charset=utf-8",
            json
        ),
        [
            "POST",
            "api.test",
            port,
            "/echo-body/form",
            "chunked",
            "application/x-www-form-urlencoded",
            "a=1+2&k=$TOKEN",
            [12],
            0
        ],
        one(
            "POST",
            "api.test",
            "/far",
            "application/json",
            r#"{"k":"$FAR"}"#
        ),
        one(
            "POST",
            "api.test",
            "/octets",
            "application/octet-stream",
            "$TOKEN"
        ),
        [
            "POST",
            "api.test",
            port,
            "/big",
            "length",
            "text/plain",
            "$TOKEN",
            [],
            300_000
        ],
        [
            "POST",
            "api.test",
            port,
            "/big-chunked",
            "chunked",
            "text/plain",
            "",
            [100_000, 200_000],
            270_000
        ],
        one("POST", "other.test", "/off", "application/json", json),
        // Outside the binding: refused, nothing sent.
        one(
            "POST",
            "api.test",
            "/echo-body/getter",
            "application/json",
            r#"{"k":"$GETTER"}"#
        ),
        one(
            "POST",
            "api.test",
            "/echo-body/write",
            "application/json",
            r#"{"k":"$READER"}"#
        ),
        // Inside it: replaced.
        one(
            "GET",
            "api.test",
            "/echo-body/getter",
            "application/json",
            r#"{"k":"$GETTER"}"#
        ),
        one(
            "POST",
            "api.test",
            "/echo-body/read/x",
            "application/json",
            r#"{"k":"$READER"}"#
        ),
    ]);
    let (out, log) = s.run(
        &b,
        &["/usr/bin/python3", "-c", PIECES_PY, &reqs.to_string()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(r.len(), 11, "{r:?}\n{}", stderr(&out));
    let token = r[0]["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("openshell-placeholder-tok-"), "{r:?}");
    let statuses: Vec<(u64, Value)> = r
        .iter()
        .map(|x| (x["status"].as_u64().unwrap(), x["policy"].clone()))
        .collect();
    let policy = |s: &str| Value::String(s.into());
    assert_eq!(
        statuses,
        [
            (200, Value::Null),
            (200, Value::Null),
            (403, policy("credential_not_bound")),
            (403, policy("credential_not_bound")),
            (413, policy("body_too_large")),
            (413, policy("body_too_large")),
            (403, policy("credential_not_bound")),
            (403, policy("credential_not_bound")),
            (403, policy("credential_not_bound")),
            (200, Value::Null),
            (200, Value::Null),
        ],
        "{r:?}"
    );
    // The echo gives the client its placeholder back.
    assert_eq!(r[0]["body"], format!(r#"{{"k":"{token}"}}"#));
    assert_eq!(r[1]["body"], format!("a=1+2&k={token}"));
    for x in &r[9..] {
        let body = x["body"].as_str().unwrap();
        assert!(body.starts_with(r#"{"k":"openshell-placeholder-"#), "{x}");
    }
    for x in &r {
        assert!(!x.to_string().contains(SECRET), "{x}");
    }
    // The refusal says which binding leaves the request out.
    assert!(
        r[7]["body"]
            .as_str()
            .unwrap()
            .contains("credential `getter`, whose binding does not cover POST /echo-body/getter"),
        "{}",
        r[7]
    );
    assert!(
        r[8]["body"]
            .as_str()
            .unwrap()
            .contains("credential `reader`, whose binding does not cover POST /echo-body/write"),
        "{}",
        r[8]
    );

    // The server never got a request outside a binding: no POST to
    // `/echo-body/getter`, nothing to `/echo-body/write`.
    let seen = s.up.seen();
    let requests: Vec<(&str, &str)> = seen
        .iter()
        .map(|x| (x.method.as_str(), x.target.as_str()))
        .collect();
    assert_eq!(
        requests,
        [
            ("POST", "/echo-body/json"),
            ("POST", "/echo-body/form"),
            ("GET", "/echo-body/getter"),
            ("POST", "/echo-body/read/x"),
        ],
        "{seen:?}"
    );
    let json_body = format!(r#"{{"k":"{SECRET}"}}"#);
    let form_body = format!("a=1+2&k={SECRET}");
    for (x, want) in seen
        .iter()
        .zip([&json_body, &form_body, &json_body, &json_body])
    {
        assert_eq!(String::from_utf8_lossy(&x.body), *want, "{x:?}");
        assert_eq!(
            x.header("content-length"),
            Some(want.len().to_string().as_str()),
            "{x:?}"
        );
        assert_eq!(x.header("transfer-encoding"), None, "{x:?}");
    }

    let text = format!("{log:?}");
    assert!(!text.contains(SECRET), "the deny log holds the secret");
    let refused = log
        .iter()
        .filter(|l| {
            matches!(
                l["unmapped"]["error"].as_str(),
                Some("credential_not_bound" | "body_too_large")
            )
        })
        .count();
    assert_eq!(refused, 7, "{log:#?}");
    let outside = log
        .iter()
        .filter(|l| {
            l["unmapped"]["error"] == "credential_not_bound"
                && l.to_string().contains("whose binding does not cover")
        })
        .count();
    assert_eq!(outside, 2, "{log:#?}");
}

#[test]
fn the_workload_environment_holds_placeholders_and_the_ca_never_the_secret() {
    let s = Sandbox::new();
    let b = s.bundle("env", CREDENTIAL_RULES);
    let (out, _) = s.run(&b, &[
            "/usr/bin/bash",
            "-c",
            "env; grep -c 'this sandbox.s proxy CA' \"$SSL_CERT_FILE\"; grep -c 'PRIVATE KEY' \"$SSL_CERT_FILE\"",
        ]);
    let text = stdout(&out);
    assert!(!text.contains(SECRET), "{text}");
    assert!(!text.contains("TEST_SECRET"));
    assert!(text.contains("TOKEN=openshell-placeholder-tok-"), "{text}");
    for var in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "CURL_CA_BUNDLE",
    ] {
        assert!(text.contains(&format!("{var}=/")), "{var}: {text}");
    }
    assert!(
        text.ends_with("\n1\n0\n"),
        "the trust file is readable, without a key: {text}"
    );
    // Passing the secret's variable on is refused.
    let out = output(s.command(&b, &["--env", "TEST_SECRET"], &["/usr/bin/true"]));
    assert_eq!(out.status.code(), Some(125));
    let out = output(s.command(&b, &["--env", "TOKEN=x"], &["/usr/bin/true"]));
    assert_eq!(
        out.status.code(),
        Some(125),
        "a placeholder cannot be overridden"
    );
}

/// The sandbox (the workload's PID 1, which brokers its calls and relays
/// its connections) holds nothing worth stealing. Read as root once a
/// credentialed request went through it: its environment, command line,
/// memory and descriptors hold neither the secret nor a private key. The
/// tree the workload may write, which the sandbox keeps to judge planted
/// code by, is found the same way: the scan sees what the process holds.
#[test]
fn the_sandbox_process_holds_no_secret_and_no_key() {
    let s = Sandbox::new();
    let b = s.bundle("bare", CREDENTIAL_RULES);
    let ready = s.dir.join("ready");
    let script = format!(
        "/usr/bin/curl -sS -o /dev/null -H \"Authorization: Bearer $TOKEN\" https://api.test:{}/ && : > {} && sleep 30",
        s.up.tls_port,
        ready.display()
    );
    let mut child = s
        .command(&b, &[], &["/usr/bin/bash", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the request did not go through: {}",
            common::read_all(child.stderr.take().unwrap())
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sandbox = s.net.sandbox_pid(child.id());
    let held = everything_held_by(sandbox);
    let _ = child.kill();
    let _ = child.wait();
    let found = |needle: &[u8]| held.windows(needle.len()).any(|w| w == needle);
    let tree = s.dir.path().canonicalize().unwrap();
    assert!(
        found(tree.as_os_str().as_encoded_bytes()),
        "the scan reads the sandbox's memory ({} bytes)",
        held.len()
    );
    assert!(!found(SECRET.as_bytes()), "the secret is in the sandbox");
    // Across hosts the sandbox holds one key by design: its own end of
    // the channel, which only proves it is this generation's sandbox.
    if !common::two_hosts() {
        assert!(!found(b"PRIVATE KEY"), "a private key is in the sandbox");
    }
    assert!(
        !found(b"TEST_SECRET"),
        "the secret's variable is in the sandbox"
    );
}

/// The environment, command line, every readable mapping and the content
/// of every file descriptor of process `pid`.
fn everything_held_by(pid: u32) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut held = Vec::new();
    for file in ["environ", "cmdline"] {
        held.extend(std::fs::read(format!("/proc/{pid}/{file}")).unwrap());
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next().unwrap(), fields.next().unwrap());
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        // A read-only mapping of a file is the program's or a library's
        // code and constants, as public as the file (the PEM labels TLS
        // code carries among them): what a process holds at run time is in
        // its writable and anonymous memory.
        let file_backed = line
            .split_whitespace()
            .nth(5)
            .is_some_and(|p| p.starts_with('/'));
        if file_backed && !perms.contains('w') {
            continue;
        }
        let (start, end) = range.split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        let mut region = vec![0_u8; usize::try_from(end - start).unwrap()];
        if mem.seek(SeekFrom::Start(start)).is_ok() && mem.read_exact(&mut region).is_ok() {
            held.extend(region);
        }
    }
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let target = std::fs::read_link(fd.path()).unwrap_or_default();
        held.extend(target.as_os_str().as_encoded_bytes());
        if let Ok(mut file) = std::fs::File::open(fd.path())
            && file.metadata().is_ok_and(|m| m.is_file())
        {
            let _ = file.read_to_end(&mut held);
        }
    }
    held
}

#[test]
fn header_injection_sets_the_header_from_the_template_only_within_the_binding() {
    let s = Sandbox::new();
    let secret_file = s.dir.join("secret.txt");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let rules = format!(
        "  credential key {{\n    secret file {}\n    inject header X-Api-Key \"k={{secret}}\"\n    hosts api.test\n    paths /v1/**\n  }}\n  allow clients -> api.test:TLS http read-only\n",
        secret_file.display()
    );
    let b = s.bundle("hdr", &rules);
    let reqs = ports(
        &s,
        serde_json::json!([https("GET", "/v1/a"), https("GET", "/v2/a")]),
    );
    let (r, _) = s.requests(&b, &reqs);
    assert_eq!(r[0]["status"], 200);
    assert_eq!(r[1]["status"], 200);
    let seen = s.up.seen();
    assert_eq!(
        seen[0].header("x-api-key"),
        Some(format!("k={SECRET}").as_str())
    );
    assert_eq!(seen[1].header("x-api-key"), None);
    assert!(
        !r[0].to_string().contains(SECRET),
        "echo scrubbed: {}",
        r[0]
    );
}

#[test]
fn audit_mode_forwards_and_logs() {
    let s = Sandbox::new();
    let b = s.bundle(
        "audit",
        "  allow clients -> api.test:TLS http audit {\n    allow GET /ok\n  }\n",
    );
    let reqs = ports(
        &s,
        serde_json::json!([https("GET", "/ok"), https("DELETE", "/repos/x")]),
    );
    let (r, log) = s.requests(&b, &reqs);
    assert_eq!(r[0]["status"], 200);
    assert_eq!(r[1]["status"], 200, "forwarded: {r:?}");
    assert_eq!(s.up.seen().len(), 2);
    let http: Vec<&Value> = log.iter().filter(|l| l["class_uid"] == 4002).collect();
    assert_eq!(http.len(), 1, "{log:?}");
    assert_eq!(http[0]["action"], "Allowed");
    assert_eq!(http[0]["disposition"], "Logged");
    assert_eq!(http[0]["unmapped"]["audit"], true);
    assert_eq!(http[0]["http_request"]["http_method"], "DELETE");
    assert_eq!(http[0]["http_request"]["url"]["path"], "/repos/x");
}

#[test]
fn connect_and_upgrades_are_refused() {
    let s = Sandbox::new();
    let b = s.bundle("upg", "  allow clients -> api.test:TLS http full\n");
    let reqs = ports(
        &s,
        serde_json::json!([
            ["https", "api.test", 0, "GET", "/ws", {"Connection": "Upgrade", "Upgrade": "websocket"}],
            ["https", "api.test", 0, "CONNECT", "other.test:443", {}],
        ]),
    );
    let (r, _) = s.requests(&b, &reqs);
    assert_eq!(r[0]["status"], 403);
    assert_eq!(r[0]["policy"], "upgrade_refused");
    assert_eq!(r[1]["status"], 403, "{r:?}");
    assert!(s.up.seen().is_empty());
}

#[test]
fn git_clones_over_https_through_the_proxy() {
    let s = Sandbox::new();
    // A bare repository served by the "dumb" HTTP protocol.
    let src = s.dir.join("src");
    let repo = s.dir.join("git/repo.git");
    let git = |args: &[&str], dir: &std::path::Path| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("README"), "hello through the proxy\n").unwrap();
    git(&["init", "-q", "-b", "main"], &src);
    git(&["add", "README"], &src);
    git(&["commit", "-q", "-m", "first"], &src);
    git(
        &[
            "clone",
            "-q",
            "--bare",
            src.to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
        s.dir.path(),
    );
    git(&["update-server-info"], &repo);
    let b = s.bundle(
        "git",
        "  allow clients -> git.test:TLS http {\n    allow GET /git/repo.git/**\n  }\n",
    );
    let url = format!("https://git.test:{}/git/repo.git", s.up.tls_port);
    let out_dir = s.dir.mkdir("clone");
    let script = format!(
        "git clone -q {url} {}/r && cat {}/r/README",
        out_dir.display(),
        out_dir.display()
    );
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert_eq!(
        stdout(&out),
        "hello through the proxy\n",
        "{} {log:?}",
        stderr(&out)
    );
}

/// Two requests, a pause until the test says `go`, then more requests on
/// the same keep-alive connections; one JSON line per response.
const RELOAD_PY: &str = r#"
import http.client, json, os, ssl, sys, time
tls, wd = int(sys.argv[1]), sys.argv[2]
def conn(host):
    return http.client.HTTPSConnection(host, tls, context=ssl.create_default_context(), timeout=10)
def get(c, path):
    try:
        c.request("GET", path)
        r = c.getresponse(); r.read()
        return r.status
    except Exception as e:
        return type(e).__name__
api, other = conn("api.test"), conn("other.test")
print(json.dumps([get(api, "/private"), get(other, "/x")]), flush=True)
open(os.path.join(wd, "first"), "w").close()
for _ in range(400):
    if os.path.exists(os.path.join(wd, "go")): break
    time.sleep(0.05)
print(json.dumps([get(api, "/private"), get(api, "/public/a"), get(other, "/x"), get(conn("other.test"), "/x")]), flush=True)
"#;

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed().as_secs() < 30,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn reloads(s: &Sandbox) -> Vec<Value> {
    log_lines(&s.dir.log())
        .into_iter()
        .filter(|l| l["class_uid"] == 6002)
        .collect()
}

#[test]
fn a_reload_tightens_the_rules_for_open_connections_and_a_bad_bundle_is_refused() {
    let s = Sandbox::new();
    let path = s.bundle(
        "live",
        "  allow clients -> api.test:TLS http read-only\n  allow clients -> other.test:TLS http read-only\n",
    );
    let tighter = s.bundle(
        "tighter",
        "  allow clients -> api.test:TLS http {\n    allow GET /public/**\n  }\n",
    );
    let port = s.up.tls_port.to_string();
    let wd = s.dir.path().to_str().unwrap().to_owned();
    let mut cmd = s.command(
        &path,
        &[],
        &["/usr/bin/python3", "-c", RELOAD_PY, &port, &wd],
    );
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // `ip netns exec` execs the supervisor: the child is the supervisor.
    let pid = child.id();
    let hup = || enforcer::send_signal(pid, libc::SIGHUP).unwrap();
    wait_for("the first requests", || s.dir.join("first").exists());
    // A bad bundle: refused, logged, the old rules stay.
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&path, b"{\"format_version\": 1, \"digest\": \"x\"}").unwrap();
    hup();
    wait_for("the refusal", || reloads(&s).len() == 1);
    assert_eq!(reloads(&s)[0]["status"], "Failure");
    std::fs::write(&path, &good).unwrap();
    // The tighter bundle: in force for the next request.
    std::fs::copy(&tighter, &path).unwrap();
    hup();
    wait_for("the reload", || reloads(&s).len() == 2);
    let line = &reloads(&s)[1];
    assert_eq!(line["status"], "Success", "{line}");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .contains("1 open connection(s) closed"),
        "{line}"
    );
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("[200, 200]"), "{text} {}", stderr(&out));
    let after: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    // Same connection, now denied; a path the new rules allow; the
    // connection to other.test was closed, and a new one is refused.
    assert_eq!(after[0], 403, "{after}");
    assert_eq!(after[1], 200, "{after}");
    assert!(after[2].is_string(), "closed: {after}");
    assert!(after[3].is_string(), "refused: {after}");
    let log = log_lines(&s.dir.log());
    assert!(
        log.iter().any(|l| l["unmapped"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("closed"))),
        "{log:?}"
    );
    assert!(
        log.iter()
            .filter(|l| l["policy"]["name"] == "tighter")
            .count()
            >= 2,
        "later lines name the new policy"
    );
}

/// A request, a pause until the test says `go`, then another request on a
/// new connection; the two statuses as one JSON line.
const ROTATE_PY: &str = r#"
import http.client, json, os, ssl, sys, time
tls, wd = int(sys.argv[1]), sys.argv[2]
def get(path):
    c = http.client.HTTPSConnection("api.test", tls, context=ssl.create_default_context(), timeout=10)
    c.request("GET", path)
    r = c.getresponse(); r.read()
    return r.status
first = get("/v1/a")
open(os.path.join(wd, "first"), "w").close()
for _ in range(400):
    if os.path.exists(os.path.join(wd, "go")): break
    time.sleep(0.05)
print(json.dumps([first, get("/v1/b")]), flush=True)
"#;

#[test]
fn sighup_with_an_unchanged_bundle_puts_a_rotated_secret_in_use() {
    let s = Sandbox::new();
    let secret_file = s.dir.join("secret.txt");
    std::fs::write(&secret_file, "first-secret-1111\n").unwrap();
    let rules = format!(
        "  credential key {{\n    secret file {}\n    inject header X-Api-Key \"k={{secret}}\"\n    hosts api.test\n  }}\n  allow clients -> api.test:TLS http read-only\n",
        secret_file.display()
    );
    let path = s.bundle("rotate", &rules);
    let port = s.up.tls_port.to_string();
    let wd = s.dir.path().to_str().unwrap().to_owned();
    let mut cmd = s.command(
        &path,
        &[],
        &["/usr/bin/python3", "-c", ROTATE_PY, &port, &wd],
    );
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("the first request", || s.dir.join("first").exists());
    // The token is rotated in place; the bundle file is not touched.
    std::fs::write(&secret_file, "second-secret-2222\n").unwrap();
    enforcer::send_signal(child.id(), libc::SIGHUP).unwrap();
    wait_for("the reload", || reloads(&s).len() == 1);
    let line = &reloads(&s)[0];
    assert_eq!(line["status"], "Success", "{line}");
    assert!(
        line["message"].as_str().unwrap().contains("read again"),
        "{line}"
    );
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(stdout(&out), "[200, 200]\n", "{}", stderr(&out));
    let seen: Vec<Option<String>> =
        s.up.seen()
            .iter()
            .map(|r| r.header("x-api-key").map(str::to_owned))
            .collect();
    assert_eq!(
        seen,
        [
            Some("k=first-secret-1111".to_owned()),
            Some("k=second-secret-2222".to_owned())
        ]
    );
}

#[test]
fn watch_reloads_when_the_bundle_file_changes() {
    let s = Sandbox::new();
    let path = s.bundle("w", "  allow clients -> api.test:TLS http read-only\n");
    let other = s.bundle("w2", "  allow clients -> api.test:TLS http full\n");
    let mut cmd = s.command(
        &path,
        &["--watch"],
        &["/usr/bin/python3", "-c", "import time; time.sleep(30)"],
    );
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _ = std::fs::remove_file(s.dir.log());
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let tmp = s.dir.join("w.tmp");
    std::fs::copy(&other, &tmp).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    wait_for("the reload", || !reloads(&s).is_empty());
    assert_eq!(reloads(&s)[0]["status"], "Success");
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends requests to api.test from inside the sandbox on one keep-alive
/// connection, and prints every response in full, one JSON line each:
/// status, reason phrase, headers (bytes as latin-1), body (gunzipped
/// when it says it is gzip). argv: scheme, port, JSON list of
/// `[method, target, {headers}]`; `$TOKEN` is the workload's `TOKEN`.
const ATTACK_PY: &str = r#"
import gzip, http.client, json, os, ssl, sys
scheme, port, reqs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
tok = os.environ.get("TOKEN", "")
def conn():
    if scheme == "https":
        return http.client.HTTPSConnection("api.test", port, context=ssl.create_default_context(), timeout=10)
    return http.client.HTTPConnection("api.test", port, timeout=10)
c = conn()
for method, target, headers in reqs:
    try:
        c.putrequest(method, target, skip_accept_encoding=True)
        for k, v in headers.items():
            c.putheader(k, v.replace("$TOKEN", tok))
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        coded = (r.getheader("content-encoding", "") + r.getheader("transfer-encoding", "")).lower()
        if "gzip" in coded:
            body = gzip.decompress(body)
        print(json.dumps({"status": r.status, "reason": r.reason, "headers": r.getheaders(),
                          "body": body.decode("latin-1")}), flush=True)
        if r.getheader("connection", "").lower() == "close":
            c.close(); c = conn()
    except Exception as e:
        print(json.dumps({"status": 0, "error": repr(e)}), flush=True)
        c.close(); c = conn()
"#;

impl Sandbox {
    /// Runs ATTACK_PY; the parsed responses, in order, and the log.
    fn attack(
        &self,
        bundle: &std::path::Path,
        scheme: &str,
        port: u16,
        requests: &Value,
    ) -> (Vec<Value>, Vec<Value>) {
        let (out, log) = self.run(
            bundle,
            &[
                "/usr/bin/python3",
                "-c",
                ATTACK_PY,
                scheme,
                &port.to_string(),
                &requests.to_string(),
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let responses: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            responses.len(),
            requests.as_array().unwrap().len(),
            "{}",
            stderr(&out)
        );
        (responses, log)
    }
}

/// The forms of the secret the attack upstream uses, as they would show
/// in what the workload got (base64 is case-sensitive, the rest not).
fn assert_no_secret_in(text: &str) {
    let lower = text.to_ascii_lowercase();
    let percent: String = SECRET.bytes().map(|b| format!("%{b:02x}")).collect();
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    let json = SECRET.replace('-', "\\u002d");
    for form in [SECRET, &percent, &hex, &json] {
        assert!(!lower.contains(form), "the workload got `{form}`: {text}");
    }
    // The base64 run of "Bearer <secret>" that depends on the secret only.
    assert!(
        !text.contains("IHJlYWwtc2VjcmV0LTAxMjM0NTY3OD"),
        "base64: {text}"
    );
}

/// Everything the workload received in one response, as one text.
fn everything(r: &Value) -> String {
    let mut all = format!(
        "{} {}\n",
        r["status"],
        r["reason"].as_str().unwrap_or_default()
    );
    for h in r["headers"].as_array().into_iter().flatten() {
        all.push_str(&format!(
            "{}: {}\n",
            h[0].as_str().unwrap(),
            h[1].as_str().unwrap()
        ));
    }
    all.push_str(r["body"].as_str().unwrap_or_default());
    all
}

fn header<'a>(r: &'a Value, name: &str) -> Option<&'a str> {
    r["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0].as_str().unwrap().eq_ignore_ascii_case(name))
        .and_then(|h| h[1].as_str())
}

#[test]
fn a_server_echoing_the_secret_in_the_status_line_header_names_odd_bytes_encodings_or_pieces_hands_back_only_the_placeholder()
 {
    let s = Sandbox::new();
    let b = s.bundle("echo", CREDENTIAL_RULES);
    let auth = serde_json::json!({"Authorization": "Bearer $TOKEN"});
    let kinds = [
        "reason",
        "header-name",
        "latin1",
        "encoded",
        "split",
        "wrapped",
        "hex-laid",
        "escapes",
    ];
    let reqs: Vec<Value> = kinds
        .iter()
        .map(|k| serde_json::json!(["GET", format!("/attack/{k}"), auth]))
        .collect();
    let (r, _) = s.attack(&b, "https", s.up.tls_port, &Value::from(reqs));
    let seen = s.up.seen();
    assert_eq!(seen.len(), kinds.len());
    for x in &seen {
        assert_eq!(
            x.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str()),
            "the upstream got the secret"
        );
    }
    for (kind, x) in kinds.iter().zip(&r) {
        assert_eq!(x["status"], 200, "{kind}: {x}");
        assert_no_secret_in(&everything(x));
    }
    let ph = "openshell-placeholder-tok-";
    assert_eq!(
        r[0]["reason"], "OK",
        "the canonical reason phrase: {}",
        r[0]
    );
    assert!(
        !r[1]["headers"].as_array().unwrap().iter().any(|h| h[0]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .starts_with("x-real")),
        "a header named after the secret is dropped: {}",
        r[1]
    );
    let latin1 = header(&r[2], "x-echo-latin1").unwrap();
    assert!(
        latin1.starts_with(&format!("\u{e9}\u{e8} Bearer {ph}")),
        "{latin1:?}"
    );
    let encoded: Vec<&str> = r[3]["body"].as_str().unwrap().lines().collect();
    assert_eq!(encoded.len(), 5, "{encoded:?}");
    for line in &encoded[..4] {
        assert!(
            line.to_ascii_lowercase().starts_with(ph),
            "replaced whole: {line}"
        );
    }
    let split = r[4]["body"].as_str().unwrap();
    assert!(
        split.starts_with(&format!("one {ph}")) && split.ends_with(" end"),
        "{split}"
    );
    assert_eq!(split.matches(ph).count(), 2, "{split}");
    assert_laid_out_echoes_hold_only_the_placeholder(&r[5..], ph);
}

/// The base64 runs of a text holding the secret that depend on it alone,
/// at each of the three offsets in a 3-byte group.
const SECRET_BASE64: [&str; 3] = [
    "cmVhbC1zZWNyZXQtMDEyMzQ1Njc4O",
    "JlYWwtc2VjcmV0LTAxMjM0NTY3OD",
    "yZWFsLXNlY3JldC0wMTIzNDU2Nzg5",
];

/// `wrapped`, `hex-laid` and `escapes` (see `upstream::attack`): every
/// section replaced once, and no piece of the secret left in any form.
fn assert_laid_out_echoes_hold_only_the_placeholder(r: &[Value], ph: &str) {
    let windows = |s: &str, n: usize| -> Vec<String> {
        s.as_bytes()
            .windows(n)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect()
    };
    let wrapped = r[0]["body"].as_str().unwrap();
    let sections: Vec<&str> = wrapped.split("\n--\n").collect();
    assert_eq!(sections.len(), 3, "{wrapped}");
    for section in sections {
        assert_eq!(section.matches(ph).count(), 1, "base64: {section}");
        let joined = section.replace(['\r', '\n'], "").replace("\\n", "");
        for core in SECRET_BASE64 {
            for w in windows(core, 12) {
                assert!(!joined.contains(&w), "base64 `{w}` left: {section}");
            }
        }
    }
    let hex = r[1]["body"].as_str().unwrap();
    let sections: Vec<&str> = hex.split("\n--\n").collect();
    assert_eq!(sections.len(), 5, "{hex}");
    for section in sections {
        assert_eq!(section.matches(ph).count(), 1, "hex: {section}");
        for w in windows(SECRET, 8) {
            assert!(!section.contains(&w), "`{w}` left: {section}");
        }
    }
    let escapes = r[2]["body"].as_str().unwrap();
    let lines: Vec<&str> = escapes.lines().collect();
    assert_eq!(lines.len(), 7, "{escapes}");
    for line in lines {
        assert!(
            line.starts_with(ph) && !line.contains(['\\', '&', '%']),
            "escaped: {line}"
        );
    }
}

#[test]
fn compressed_or_sliced_echoes_of_the_secret_never_reach_the_workload() {
    let s = Sandbox::new();
    let b = s.bundle("gz", CREDENTIAL_RULES);
    let req = |kind: &str, extra: Value| {
        let mut h =
            serde_json::json!({"Authorization": "Bearer $TOKEN", "Accept-Encoding": "gzip, br"});
        h.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::json!(["GET", format!("/attack/{kind}"), h])
    };
    let reqs = serde_json::json!([
        req("gzip-if-asked", serde_json::json!({})),
        req("gzip", serde_json::json!({})),
        req("te-gzip", serde_json::json!({})),
        req("range", serde_json::json!({"Range": "bytes=0-9"})),
        req("range", serde_json::json!({"Range": "bytes=10-19"})),
    ]);
    let (r, log) = s.attack(&b, "https", s.up.tls_port, &reqs);
    for x in &r {
        assert_no_secret_in(&everything(x));
    }
    // A conforming server, asked for no coding, answers plainly: scrubbed.
    assert_eq!(r[0]["status"], 200, "{}", r[0]);
    assert_eq!(header(&r[0], "content-encoding"), None);
    assert!(
        r[0]["body"]
            .as_str()
            .unwrap()
            .contains("Bearer openshell-placeholder-tok-"),
        "{}",
        r[0]
    );
    // One that compresses anyway is refused, and the refusal logged.
    for x in &r[1..3] {
        assert_eq!(x["status"], 502, "{x}");
        assert_eq!(
            header(x, "x-openshell-policy"),
            Some("response_not_scrubbable"),
            "{x}"
        );
    }
    assert_eq!(
        log.iter()
            .filter(|l| l["unmapped"]["error"] == "response_not_scrubbable")
            .count(),
        2,
        "{log:?}"
    );
    // Slices: the range is not asked for, the whole echo comes back scrubbed.
    for x in &r[3..] {
        assert_eq!(x["status"], 200, "{x}");
        assert!(
            x["body"]
                .as_str()
                .unwrap()
                .contains("openshell-placeholder-tok-"),
            "{x}"
        );
    }
    for x in s.up.seen() {
        assert_eq!(x.header("accept-encoding"), Some("identity"), "{x:?}");
        assert_eq!(x.header("range"), None, "{x:?}");
    }
}

#[test]
fn a_credential_never_goes_upstream_in_plain_http_even_to_the_https_port() {
    let s = Sandbox::new();
    let rules = format!(
        "{CREDENTIAL_RULES}  credential key {{\n    secret env TEST_SECRET\n    inject header X-Api-Key \"k={{secret}}\"\n    hosts git.test\n  }}\n  allow clients -> git.test:PLAIN http read-only\n"
    );
    let b = s.bundle("plain-cred", &rules);
    let auth = serde_json::json!({"Authorization": "Bearer $TOKEN"});
    let (tls, plain) = (s.up.tls_port, s.up.plain_port);
    let reqs = serde_json::json!([
        ["http", "api.test", tls, "GET", "/user", auth],
        ["http", "git.test", plain, "GET", "/x", {}],
        ["https", "api.test", tls, "GET", "/user", auth],
        ["http", "api.test", tls, "GET", "/anon", {}],
    ]);
    let (r, log) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(codes, [403, 403, 200, 502], "{r:?}");
    for x in &r[..2] {
        assert_eq!(x["policy"], "credential_not_bound", "{x}");
        assert!(
            body(x)["reason"]
                .as_str()
                .unwrap()
                .contains("only sent over TLS"),
            "{x}"
        );
    }
    // The TLS port got exactly one plain-HTTP request: the one without a
    // credential (which shows the hop really was plain); never the secret.
    let clear = s.up.cleartext();
    assert_eq!(clear.len(), 1, "{clear:?}");
    let text = String::from_utf8_lossy(&clear[0]);
    assert!(text.starts_with("GET /anon "), "{text}");
    assert!(
        !text.contains(SECRET) && !text.contains("openshell-placeholder"),
        "{text}"
    );
    // Over TLS the same request carries it.
    let seen = s.up.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].tls);
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(
        log.iter()
            .filter(|l| l["unmapped"]["error"] == "credential_not_bound")
            .count(),
        2,
        "{log:?}"
    );
}

#[test]
fn override_headers_cannot_turn_an_allowed_request_into_another_method_or_target() {
    // The test upstream honours overrides, as careless backends do, in
    // every spelling its server files under the same name.
    let honoured = upstream::effective(
        "GET",
        "/repos/o/r",
        &[("X-HTTP-Method-Override".into(), "DELETE".into())],
    );
    assert_eq!(honoured, ("DELETE".into(), "/repos/o/r".into()));
    let honoured = upstream::effective(
        "GET",
        "/repos/o/r",
        &[("X_HTTP_Method_Override".into(), "DELETE".into())],
    );
    assert_eq!(honoured, ("DELETE".into(), "/repos/o/r".into()));
    let honoured = upstream::effective("POST", "/forms/x?a=1;%5Fmethod=DELETE", &[]);
    assert_eq!(honoured.0, "DELETE");
    let s = Sandbox::new();
    let b = s.bundle(
        "ovr",
        "  allow clients -> api.test:TLS http {\n    allow GET /repos/**\n    allow GET /public/**\n    allow POST /forms/**\n  }\n",
    );
    let h = |pairs: &[(&str, &str)]| -> Value {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let get = |path: &str, headers: Value| {
        serde_json::json!(["https", "api.test", 0, "GET", path, headers])
    };
    let post = |target: &str| serde_json::json!(["https", "api.test", 0, "POST", target, {}]);
    let reqs = ports(
        &s,
        serde_json::json!([
            get("/repos/o/r", h(&[("X-HTTP-Method-Override", "DELETE")])),
            get(
                "/repos/o/r",
                h(&[("X-HTTP-Method", "DELETE"), ("X-Method-Override", "PUT")])
            ),
            get(
                "/public/a",
                h(&[
                    ("X-Original-URL", "/admin/wipe"),
                    ("X-Rewrite-URL", "/admin/wipe")
                ])
            ),
            post("/forms/x?a=1&_method=DELETE"),
            get(
                "/public/b",
                h(&[
                    ("X-Forwarded-Host", "admin.internal"),
                    ("Forwarded", "host=admin.internal"),
                    ("X-Forwarded-For", "10.0.0.1")
                ])
            ),
            ["https", "api.test", 0, "DELETE", "/repos/o/r", h(&[])],
            // The same overrides in the spellings a server decodes to them.
            get("/repos/o/r", h(&[("X_HTTP_Method_Override", "DELETE")])),
            get("/public/c", h(&[("x_original_url", "/admin/wipe")])),
            post("/forms/x?a=1;_method=DELETE"),
            post("/forms/x?a=1&%5Fmethod=DELETE"),
            post("/forms/x?_%6Dethod=DELETE"),
            post("/forms/x?.method=DELETE"),
            post("/forms/x?+method=DELETE"),
            post("/forms/x?%5Bmethod=DELETE"),
            post("/forms/x?_method%5B%5D=DELETE"),
            // A proxy or CDN in front, as the workload cannot be.
            get(
                "/public/d",
                h(&[
                    ("CF-Connecting-IP", "10.0.0.1"),
                    ("Fastly-Client-IP", "10.0.0.1"),
                    ("X-Cluster-Client-IP", "10.0.0.1"),
                    ("Client-IP", "10.0.0.1"),
                    ("X-Original-Host", "admin.internal"),
                    ("X_Forwarded_For", "10.0.0.1"),
                    ("X_Real_IP", "10.0.0.1"),
                    ("cf_connecting_ip", "10.0.0.1"),
                ])
            ),
            post("/forms/y?a=1;b=2"),
        ]),
    );
    let (r, log) = s.requests(&b, &reqs);
    let codes: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(
        codes,
        [
            200, 200, 200, 403, 200, 403, 200, 200, 403, 403, 403, 403, 403, 403, 403, 200, 200
        ],
        "{r:?}"
    );
    for i in [3, 8, 9, 10, 11, 12, 13, 14] {
        assert_eq!(r[i]["policy"], "override_refused", "{i}: {:?}", r[i]);
    }
    assert_eq!(
        log.iter()
            .filter(|l| l["unmapped"]["error"] == "override_refused")
            .count(),
        8,
        "{log:?}"
    );
    let seen = s.up.seen();
    let acted: Vec<(String, String)> = seen.iter().map(|x| x.effective.clone()).collect();
    assert_eq!(
        acted,
        [
            ("GET".into(), "/repos/o/r".into()),
            ("GET".into(), "/repos/o/r".into()),
            ("GET".into(), "/public/a".into()),
            ("GET".into(), "/public/b".into()),
            ("GET".into(), "/repos/o/r".into()),
            ("GET".into(), "/public/c".into()),
            ("GET".into(), "/public/d".into()),
            ("POST".into(), "/forms/y?a=1;b=2".into()),
        ],
        "the upstream acted only on what the rules allowed"
    );
    for x in &seen {
        for (name, _) in &x.headers {
            let filed = name.replace('_', "-");
            assert!(
                !filed.contains("override")
                    && !filed.contains("original")
                    && !filed.contains("rewrite")
                    && !filed.contains("client-ip")
                    && !filed.contains("connecting-ip")
                    && !filed.starts_with("x-forwarded")
                    && filed != "forwarded"
                    && filed != "x-real-ip"
                    && filed != "x-http-method",
                "{name} reached the upstream"
            );
        }
    }
}

/// The workload of the no-listener test: one request through the relay,
/// then it waits for the test to look, holding the connection open.
/// argv: workdir, the plain port.
const HELD_OPEN_PY: &str = r#"
import http.client, os, sys, time
wd, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection("api.test", port, timeout=10)
c.request("GET", "/relayed")
r = c.getresponse(); r.read()
print(r.status, flush=True)
go = os.path.join(wd, "go")
for _ in range(600):
    if os.path.exists(go): break
    time.sleep(0.05)
c.request("GET", "/again")
r = c.getresponse(); r.read()
print(r.status, flush=True)
"#;

/// "Nothing reaches the proxy but a connection the relay allowed": the
/// proxy has no listening socket. While the workload holds a proxied
/// connection open, the supervisor listens on no TCP port, IPv4 or IPv6,
/// so no process of its namespace has a way in; a proxy that listened
/// would be reachable by anything there that found the port.
#[test]
fn the_proxy_listens_on_no_port_while_it_serves() {
    let s = Sandbox::new();
    let b = s.bundle("held", "  allow clients -> api.test:PLAIN http read-only\n");
    let port = s.up.plain_port.to_string();
    let wd = s.dir.path().to_str().unwrap();
    let mut cmd = s.command(
        &b,
        &[],
        &["/usr/bin/python3", "-c", HELD_OPEN_PY, wd, &port],
    );
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert_eq!(first.trim(), "200", "the relayed connection is served");

    let listening = s.net.supervisor_listeners();
    std::fs::write(s.dir.join("go"), "").unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let err = common::read_all(child.stderr.take().unwrap());
    assert!(status.success(), "{err}");
    assert_eq!(
        rest.trim(),
        "200",
        "the connection stayed open and served: {err}"
    );
    assert!(
        listening.is_empty(),
        "the supervisor listens on {listening:?} while serving a proxied connection"
    );
    let seen: Vec<String> = s.up.seen().iter().map(|r| r.target.clone()).collect();
    assert_eq!(seen, ["/relayed", "/again"]);
}

/// The workload of the rogue-root test. argv: workdir, its CA (PEM), the
/// rogue upstream's port, the trusted upstream's port. It plants the CA
/// everywhere it can, then asks the proxy for both upstreams, without
/// verifying its own hop (the proxy's leaf): only the proxy's upstream
/// verification is in question. One JSON line.
const ROGUE_ROOT_PY: &str = r#"
import http.client, json, os, ssl, sys
wd, ca, rogue, good = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
res = {}
for f in [os.path.join(wd, "my-ca.pem"), os.path.join(wd, "certs", "my-ca.pem")]:
    os.makedirs(os.path.dirname(f), exist_ok=True)
    with open(f, "w") as out: out.write(ca)
handed = os.environ["CURL_CA_BUNDLE"]
def attempt(name, path, mode):
    try:
        with open(path, mode) as out: out.write(ca)
        res[name] = "written"
    except OSError as e:
        res[name] = e.errno
attempt("handed_append", handed, "a")
attempt("handed_dir", os.path.join(os.path.dirname(handed), "my-ca.pem"), "w")
attempt("system_bundle", "/etc/ssl/certs/ca-certificates.crt", "a")
attempt("system_dir", "/etc/ssl/certs/my-ca.pem", "w")
ctx = ssl._create_unverified_context()
def get(port, path):
    c = http.client.HTTPSConnection("api.test", port, context=ctx, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return {"status": r.status, "policy": r.getheader("x-openshell-policy"), "body": r.read().decode()}
    except Exception as e:
        return {"status": 0, "error": repr(e)}
res["env"] = {k: os.environ.get(k) for k in ["SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"]}
res["rogue"] = get(rogue, "/rogue")
res["good"] = get(good, "/good")
print(json.dumps(res), flush=True)
"#;

/// "The workload cannot add a root certificate the proxy trusts": the
/// proxy verifies upstreams against the system roots and `--upstream-ca`
/// only, all of them the operator's. A workload that writes its own CA
/// into its workdir, points every trust variable at it (`--env`), and
/// tries to add it to the trust file it was handed and to the system
/// bundle still gets `502 upstream_error` from a server whose
/// certificate that CA signed, and the server never sees the request.
/// The same run with the operator trusting that CA reaches it: trust is
/// the only thing in the way.
#[test]
fn a_root_the_workload_adds_is_not_trusted_by_the_proxy_upstream() {
    let s = Sandbox::new();
    // A server for the same allowed name, with a CA the workload holds.
    let rogue_dir = Dir::new();
    let rogue = upstream::serve(
        s.net.tcp("127.0.0.1:0"),
        s.net.tcp("127.0.0.1:0"),
        rogue_dir.path(),
        &["api.test"],
        None,
    );
    let ca = std::fs::read_to_string(&rogue.ca_file).unwrap();
    let b = s.bundle(
        "rogue",
        &format!(
            "  allow clients -> api.test:TLS,{} http read-only\n",
            rogue.tls_port
        ),
    );
    let wd = s.dir.path().to_str().unwrap().to_owned();
    let mine = format!("{wd}/my-ca.pem");
    // Already there at launch (the workload writes it again): a proxy
    // that read the workload's trust at any moment would find it.
    let certs = s.dir.mkdir("certs");
    for f in [PathBuf::from(&mine), certs.join("my-ca.pem")] {
        std::fs::write(&f, &ca).unwrap();
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    }
    let env: Vec<String> = [
        ("SSL_CERT_FILE", &mine),
        ("SSL_CERT_DIR", &format!("{wd}/certs")),
        ("REQUESTS_CA_BUNDLE", &mine),
        ("NODE_EXTRA_CA_CERTS", &mine),
        ("GIT_SSL_CAINFO", &mine),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={v}"))
    .collect();
    let mut extra = Vec::new();
    for e in &env {
        extra.extend(["--env", e.as_str()]);
    }
    let (rogue_port, good_port) = (rogue.tls_port.to_string(), s.up.tls_port.to_string());
    let attack = || {
        let out = output(s.command(
            &b,
            &extra,
            &[
                "/usr/bin/python3",
                "-c",
                ROGUE_ROOT_PY,
                &wd,
                &ca,
                &rogue_port,
                &good_port,
            ],
        ));
        assert!(out.status.success(), "{}", stderr(&out));
        let res: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| {
            panic!("{e}: {} {}", stdout(&out), stderr(&out));
        });
        res
    };

    let res = attack();
    assert_eq!(res["env"]["SSL_CERT_FILE"], mine.as_str(), "{res}");
    for place in ["handed_append", "handed_dir", "system_bundle", "system_dir"] {
        assert!(res[place].is_number(), "{place}: {res}");
    }
    assert_eq!(res["good"]["status"], 200, "the proxy path works: {res}");
    assert_eq!(res["rogue"]["status"], 502, "{res}");
    assert_eq!(res["rogue"]["policy"], "upstream_error", "{res}");
    assert!(
        res["rogue"]["body"]
            .as_str()
            .unwrap()
            .contains("invalid peer certificate: UnknownIssuer"),
        "{res}"
    );
    assert!(
        rogue.seen().is_empty(),
        "the workload's CA was trusted: {:?}",
        rogue.seen()
    );

    // Control: the operator trusting the same CA (`--upstream-ca`, read
    // at start) lets the same request through.
    let mut trusted = std::fs::read_to_string(&s.up.ca_file).unwrap();
    trusted.push_str(&ca);
    std::fs::write(&s.up.ca_file, trusted).unwrap();
    let res = attack();
    assert_eq!(res["rogue"]["status"], 200, "{res}");
    let seen: Vec<String> = rogue.seen().iter().map(|r| r.target.clone()).collect();
    assert_eq!(seen, ["/rogue"]);
}
