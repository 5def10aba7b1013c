//! The supervisor as a gateway client, end to end: a real gateway (in this
//! test's network namespace, SQLite), the real supervisor binary, a
//! loopback upstream, and a workload that tries the upstream at each step.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
mod upstream;

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bundle_trust::client::{Client, Response};
use common::{Dir, SYSTEM, TestNet, clients};
use gateway::server::{self, ApprovalMode, Config};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// A gateway serving inside `net`, on its own runtime (dropping it is
/// the gateway going down).
struct Gw {
    rt: Option<tokio::runtime::Runtime>,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Gw {
    fn start(net: &TestNet, dir: &Path, port: u16) -> Gw {
        let db = format!("sqlite:{}", dir.join("gateway.db").display());
        Gw::start_on(net, dir, port, &db)
    }

    /// A gateway on database `db` (several may share a PostgreSQL one).
    fn start_on(net: &TestNet, dir: &Path, port: u16, db: &str) -> Gw {
        Gw::start_with(net, dir, port, db, gateway::app::SandboxSettings::default())
    }

    fn start_with(
        net: &TestNet,
        dir: &Path,
        port: u16,
        db: &str,
        sandboxes: gateway::app::SandboxSettings,
    ) -> Gw {
        if !dir.join("ca.pem").exists() {
            gateway::dir::init(dir, &[]).unwrap();
        }
        let listener = net.tcp(&format!("127.0.0.1:{port}"));
        listener.set_nonblocking(true).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let config = Config {
            dir: dir.to_path_buf(),
            listen: listener.local_addr().unwrap(),
            db: db.to_owned(),
            approval: ApprovalMode::Manual,
            prove_timeout: Duration::from_secs(20),
            limits: gateway::app::Limits::default(),
            clients: gateway::app::ClientLimits::default(),
            sandboxes,
        };
        let addr = config.listen;
        rt.block_on(async {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            // Kept alive by the runtime's tasks.
            let _running = server::start_on(config, l).await.unwrap();
        });
        Gw {
            rt: Some(rt),
            dir: dir.to_path_buf(),
            addr,
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    fn client(&self, token: &str) -> Client {
        let ca = std::fs::read(self.dir.join("ca.pem")).unwrap();
        Client::new(&self.url(), &ca, token).unwrap()
    }

    fn admin(&self) -> Client {
        self.client(&std::fs::read_to_string(self.dir.join("admin.token")).unwrap())
    }

    /// Everything stops: listener, connections, waiting polls.
    fn kill(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One request from inside `net` (where the gateway listens).
fn call(net: &TestNet, c: &Client, method: &str, path: &str, body: Option<Value>) -> Response {
    let ns = std::fs::File::open(format!("/run/netns/{}", net.name)).unwrap();
    enforcer::in_netns(ns.as_fd(), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(c.send(method, path, body.as_ref(), &[], T))
    })
    .unwrap()
    .unwrap()
}

fn token(r: &Response) -> String {
    assert!(r.status < 300, "{:?}", r.json());
    r.json()["token"].as_str().unwrap().to_owned()
}

fn policy(port: u16, dir: &Path, allow_upstream: bool) -> String {
    let allow = if allow_upstream {
        format!("  allow clients -> local.test:{port}\n")
    } else {
        "  allow clients -> other.test:1\n".to_owned()
    };
    format!(
        "policy \"agent\" {{\n  landlock hard min_abi 4\n{SYSTEM}  fs write {}\n  run_as user nobody group nogroup\n  binaries clients = {}\n{allow}}}\n",
        dir.display(),
        clients()
    )
}

/// The workload: at each step, try the upstream, write the result, and
/// wait for the test to say go.
fn workload(dir: &Path, port: u16, steps: usize) -> String {
    let d = dir.display();
    let mut s = String::new();
    for i in 1..=steps {
        s.push_str(&format!(
            "while [ ! -f {d}/go{i} ]; do sleep 0.05; done\n/usr/bin/curl -s --max-time 5 http://local.test:{port}/ > {d}/out{i} 2>&1; echo $? > {d}/rc{i}\n"
        ));
    }
    s
}

/// Says go to step `i` and returns what the workload's request did.
fn step(dir: &Path, i: usize) -> (String, String) {
    std::fs::write(dir.join(format!("go{i}")), "").unwrap();
    let rc = dir.join(format!("rc{i}"));
    let start = Instant::now();
    while std::fs::read_to_string(&rc).map_or(true, |s| s.trim().is_empty()) {
        assert!(start.elapsed() < T, "step {i} never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    (
        std::fs::read_to_string(rc).unwrap().trim().to_owned(),
        std::fs::read_to_string(dir.join(format!("out{i}"))).unwrap(),
    )
}

struct Setup {
    net: TestNet,
    dir: Dir,
    gw: Gw,
    port: u16,
    alice: Client,
    bob: Client,
    /// Alice's and Bob's tokens, for a client of another gateway.
    tokens: (String, String),
    sandbox_token: PathBuf,
}

fn setup() -> Setup {
    setup_on(None)
}

/// The setup with its gateway on `db` (default: SQLite in its directory).
fn setup_on(db: Option<&str>) -> Setup {
    setup_with(db, gateway::app::SandboxSettings::default())
}

fn setup_with(db: Option<&str>, sandboxes: gateway::app::SandboxSettings) -> Setup {
    let net = TestNet::new();
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    let gwdir = dir.join("gw");
    let sqlite = format!("sqlite:{}", gwdir.join("gateway.db").display());
    let gw = Gw::start_with(&net, &gwdir, 0, db.unwrap_or(&sqlite), sandboxes);
    let admin = gw.admin();
    let alice_token = token(&call(
        &net,
        &admin,
        "POST",
        "/v1/tokens",
        Some(json!({"name": "alice", "role": "author"})),
    ));
    let bob_token = token(&call(
        &net,
        &admin,
        "POST",
        "/v1/tokens",
        Some(json!({"name": "bob", "role": "author"})),
    ));
    let alice = gw.client(&alice_token);
    let bob = gw.client(&bob_token);
    let work = dir.mkdir("work");
    let p = call(
        &net,
        &alice,
        "POST",
        "/v1/policies/agent/proposals",
        Some(json!({"source": policy(port, &work, false)})),
    )
    .json();
    assert_eq!(p["state"], "pending", "{p}");
    let r = call(
        &net,
        &bob,
        "POST",
        &format!("/v1/proposals/{}/approve", p["id"]),
        Some(json!({"review_token": p["review_token"]})),
    );
    assert_eq!(r.status, 200, "{:?}", r.json());
    let sb = token(&call(
        &net,
        &admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "sb", "policy": "agent"})),
    ));
    let sandbox_token = dir.join("sandbox.token");
    std::fs::write(&sandbox_token, sb).unwrap();
    Setup {
        net,
        dir,
        gw,
        port,
        alice,
        bob,
        tokens: (alice_token, bob_token),
        sandbox_token,
    }
}

impl Setup {
    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// `openshell-supervisor run --gateway ...` with the workload, started.
    fn run(&self, trust: &Path, script: &str) -> Child {
        self.run_at(
            &[self.gw.url()],
            &self.gw.dir.join("ca.pem"),
            trust,
            script,
            &[],
        )
    }

    /// The same against `urls` (each one `--gateway`), trusting `ca` for
    /// TLS, with `extra` flags; the state directory is the test's own
    /// unless `extra` names one.
    fn run_at(
        &self,
        urls: &[String],
        ca: &Path,
        trust: &Path,
        script: &str,
        extra: &[&str],
    ) -> Child {
        let args = self.run_args(urls, ca, trust, script, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn(self.net.supervisor(&args, None))
    }

    /// [`Setup::run`] in the two-host placement: `serve --gateway` here,
    /// the standalone sandbox in a namespace of its own.
    fn run_across_hosts(&self, trust: &Path, script: &str) -> Child {
        let ca = self.gw.dir.join("ca.pem");
        let args = self.run_args(&[self.gw.url()], &ca, trust, script, &[]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn(self.net.across_hosts(&args[1..], None))
    }

    fn run_args(
        &self,
        urls: &[String],
        ca: &Path,
        trust: &Path,
        script: &str,
        extra: &[&str],
    ) -> Vec<String> {
        let script_path = self.work().join("workload.sh");
        std::fs::write(&script_path, script).unwrap();
        let work = self.work();
        let state = self.state_dir();
        let mut args = vec!["run".to_owned()];
        for url in urls {
            args.extend(["--gateway".to_owned(), url.clone()]);
        }
        if !extra.contains(&"--state-dir") {
            args.extend(["--state-dir".to_owned(), state.display().to_string()]);
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let path = |p: &Path| p.display().to_string();
        args.extend([
            "--sandbox".to_owned(),
            "sb".to_owned(),
            "--token-file".to_owned(),
            path(&self.sandbox_token),
            "--gateway-ca".to_owned(),
            path(ca),
            "--trust-key".to_owned(),
            path(trust),
            "--workdir".to_owned(),
            path(&work),
            "--resolve".to_owned(),
            "local.test=127.0.0.1".to_owned(),
            "--".to_owned(),
            "/usr/bin/bash".to_owned(),
            path(&script_path),
        ]);
        args
    }

    fn spawn(&self, mut cmd: Command) -> Child {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("supervisor.err")).unwrap());
        cmd.spawn().unwrap()
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// Whether the supervisor's stderr says `text`, across the line
    /// breaks and margins of its error report.
    fn said(&self, text: &str) -> bool {
        let flat = |t: &str| {
            t.split_whitespace()
                .filter(|w| !matches!(*w, "│" | "×" | "╰─▶" | "├─▶"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        flat(&self.stderr()).contains(&flat(text))
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("supervisor.err")).unwrap_or_default()
    }

    fn sandbox(&self, query: &str) -> Value {
        call(
            &self.net,
            &self.gw.admin(),
            "GET",
            &format!("/v1/sandboxes/sb{query}"),
            None,
        )
        .json()
    }

    fn propose_and_approve(&self, allow: bool) -> Value {
        let p = call(
            &self.net,
            &self.alice,
            "POST",
            "/v1/policies/agent/proposals",
            Some(json!({"source": policy(self.port, &self.work(), allow)})),
        )
        .json();
        let r = call(
            &self.net,
            &self.bob,
            "POST",
            &format!("/v1/proposals/{}/approve", p["id"]),
            Some(json!({"review_token": p["review_token"]})),
        );
        assert_eq!(r.status, 200, "{:?}", r.json());
        r.json()
    }
}

fn wait_exit(child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        if start.elapsed() > T {
            let _ = child.kill();
            panic!("the supervisor did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_widening_applies_only_once_approved_and_the_supervisor_says_so() {
    let s = setup();
    let trust = s.gw.dir.join("trust.keys");
    let mut child = s.run(&trust, &workload(&s.work(), s.port, 3));
    // Revision 1 allows no upstream.
    let (rc, _) = step(&s.work(), 1);
    assert_ne!(rc, "0", "revision 1 refuses the upstream: {}", s.stderr());
    let status = s.sandbox("?revision=1&wait=20");
    assert_eq!(status["applied_revision"], 1, "{status}");
    assert_eq!(status["result"], "applied");
    // Proposed, not approved: still refused.
    let p = call(
        &s.net,
        &s.alice,
        "POST",
        "/v1/policies/agent/proposals",
        Some(json!({"source": policy(s.port, &s.work(), true)})),
    )
    .json();
    assert_eq!(p["state"], "pending", "{p}");
    let (rc, _) = step(&s.work(), 2);
    assert_ne!(rc, "0", "a pending proposal changes nothing");
    // Approved: the supervisor reloads and acknowledges revision 2.
    let r = call(
        &s.net,
        &s.bob,
        "POST",
        &format!("/v1/proposals/{}/approve", p["id"]),
        Some(json!({"review_token": p["review_token"]})),
    );
    assert_eq!(r.json()["revision"], 2);
    let status = s.sandbox("?revision=2&wait=30");
    assert_eq!(status["applied_revision"], 2, "{status}\n{}", s.stderr());
    // The new port is also a Landlock rule, which a running workload keeps:
    // the network part is in force, the rest waits for a relaunch.
    assert_eq!(status["result"], "network_only", "{status}");
    assert_eq!(status["relaunch_required"], true);
    assert_eq!(status["applied_digest"], p["digest"]);
    let (rc, out) = step(&s.work(), 3);
    assert_eq!((rc.as_str(), out.as_str()), ("0", "ok"), "{}", s.stderr());
    assert_eq!(wait_exit(&mut child), 0, "{}", s.stderr());
    assert!(s.stderr().contains("bundle reloaded"), "{}", s.stderr());
}

#[test]
fn an_untrusted_key_or_an_unreachable_gateway_never_starts_the_workload() {
    let s = setup();
    let script = format!("touch {}/started\n", s.work().display());
    // A trust file with another key only.
    let other = s.dir.join("other.keys");
    std::fs::write(
        &other,
        bundle_trust::SigningKey::from_seed(&[9; 32]).trust_line(),
    )
    .unwrap();
    let mut child = s.run(&other, &script);
    assert_eq!(wait_exit(&mut child), 125, "{}", s.stderr());
    assert!(s.stderr().contains("not trusted"), "{}", s.stderr());
    assert!(!s.work().join("started").exists());
    // The gateway down.
    let trust = s.gw.dir.join("trust.keys");
    let mut s = s;
    s.gw.kill();
    let mut child = s.run(&trust, &script);
    assert_eq!(wait_exit(&mut child), 125, "{}", s.stderr());
    assert!(
        s.stderr().contains("cannot reach the gateway"),
        "{}",
        s.stderr()
    );
    assert!(!s.work().join("started").exists());
}

#[test]
fn tampered_rolled_back_or_unknown_key_revisions_are_refused_and_the_rules_stay() {
    let mut s = setup();
    // The supervisor's own copy of the trust file.
    let trust = s.dir.join("trust.keys");
    std::fs::copy(s.gw.dir.join("trust.keys"), &trust).unwrap();
    let mut child = s.run(&trust, &workload(&s.work(), s.port, 4));
    // Revision 2 allows the upstream.
    s.propose_and_approve(true);
    assert_eq!(
        s.sandbox("?revision=2&wait=30")["applied_revision"],
        2,
        "{}",
        s.stderr()
    );
    let (rc, _) = step(&s.work(), 1);
    assert_eq!(rc, "0", "{}", s.stderr());
    let db = format!("sqlite:{}", s.gw.dir.join("gateway.db").display());
    let sql = |q: &str| {
        let q = q.to_owned();
        let db = db.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                sqlx::any::install_default_drivers();
                let pool = sqlx::AnyPool::connect(&db).await.unwrap();
                sqlx::query(&q).execute(&pool).await.unwrap();
                pool.close().await;
            });
        })
        .join()
        .unwrap();
    };
    // A revision 3 written into the database behind the gateway's back:
    // revision 1's bundle with one byte changed. The gateway signs what it
    // serves, but the bundle's digest no longer matches its content.
    sql(
        "INSERT INTO revisions (policy, revision, format, source, credentials, bundle, digest, signature, author, approved_by, proposal, created_at) SELECT policy, 3, format, source, credentials, replace(bundle, 'other.test', 'other.tesu'), digest, signature, author, approved_by, proposal, created_at FROM revisions WHERE revision = 1",
    );
    sql("UPDATE policies SET active_revision = 3");
    let pid = child.id();
    // No approval happened, so nothing woke the poll: SIGHUP asks again.
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    let start = Instant::now();
    loop {
        let st = s.sandbox("");
        if st["result"] == "refused" {
            assert_eq!(st["applied_revision"], 2, "{st}");
            let e = st["error"].as_str().unwrap();
            assert!(
                e.contains("does not verify") && e.contains("digest"),
                "{st}"
            );
            break;
        }
        assert!(start.elapsed() < T, "no report: {st}\n{}", s.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let (rc, _) = step(&s.work(), 2);
    assert_eq!(rc, "0", "the rules of revision 2 stay: {}", s.stderr());
    // The gateway's database pointed back at revision 1 (a replay): older
    // than what runs, refused.
    sql("UPDATE policies SET active_revision = 1");
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    let start = Instant::now();
    loop {
        let st = s.sandbox("");
        if st["error"]
            .as_str()
            .is_some_and(|e| e.contains("older than revision 2"))
        {
            assert_eq!(st["applied_revision"], 2);
            break;
        }
        assert!(
            start.elapsed() < T,
            "no refusal of the older revision: {st}\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A new signing key the supervisor does not trust yet signs revision 4.
    sql("UPDATE policies SET active_revision = 2");
    let gwdir = s.gw.dir.clone();
    let new_id = gateway::dir::rotate_key(&gwdir).unwrap();
    let port = s.gw.addr.port();
    s.gw.kill();
    s.gw = Gw::start(&s.net, &gwdir, port);
    s.propose_and_approve(false);
    let start = Instant::now();
    loop {
        let st = s.sandbox("");
        if st["error"].as_str().is_some_and(|e| e.contains(&new_id)) {
            assert_eq!(st["applied_revision"], 2, "{st}");
            break;
        }
        assert!(
            start.elapsed() < T,
            "no refusal of the unknown key: {st}\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (rc, _) = step(&s.work(), 3);
    assert_eq!(rc, "0", "still revision 2's rules");
    // Trusting the new key (no restart) and SIGHUP: revision 4 applies.
    // Replaced whole (write, then rename), as an operator should.
    let tmp = trust.with_extension("new");
    std::fs::copy(gwdir.join("trust.keys"), &tmp).unwrap();
    std::fs::rename(&tmp, &trust).unwrap();
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    let st = s.sandbox("?revision=4&wait=30");
    assert_eq!(st["applied_revision"], 4, "{st}\n{}", s.stderr());
    let (rc, _) = step(&s.work(), 4);
    assert_ne!(rc, "0", "revision 4 refuses the upstream");
    assert_eq!(wait_exit(&mut child), 0);
}

#[test]
fn a_gateway_restart_mid_poll_loses_nothing_and_the_supervisor_resumes() {
    let mut s = setup();
    let trust = s.gw.dir.join("trust.keys");
    let mut child = s.run(&trust, &workload(&s.work(), s.port, 2));
    assert_eq!(s.sandbox("?revision=1&wait=20")["applied_revision"], 1);
    // Down while the supervisor waits in a long-poll: its rules stay.
    let port = s.gw.addr.port();
    let gwdir = s.gw.dir.clone();
    s.gw.kill();
    std::thread::sleep(Duration::from_millis(500));
    let (rc, _) = step(&s.work(), 1);
    assert_ne!(rc, "0", "revision 1's rules stay in force");
    // Up again on the same address: an approval reaches the supervisor.
    s.gw = Gw::start(&s.net, &gwdir, port);
    s.propose_and_approve(true);
    let st = s.sandbox("?revision=2&wait=40");
    assert_eq!(st["applied_revision"], 2, "{st}\n{}", s.stderr());
    let (rc, out) = step(&s.work(), 2);
    assert_eq!((rc.as_str(), out.as_str()), ("0", "ok"));
    assert_eq!(wait_exit(&mut child), 0);
    assert!(
        s.stderr().contains("the gateway is unreachable"),
        "{}",
        s.stderr()
    );
}

/// An impostor on loopback: an HTTPS server with a CA of its own (which the
/// supervisor is made to trust, as if the attacker held the network and a
/// certificate) that answers every request with `body`, an envelope it
/// captured earlier. It records each request line.
struct Replayer {
    url: String,
    ca: PathBuf,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

fn replayer(net: &TestNet, dir: &Path, body: String) -> Replayer {
    let (ca_pem, config) = upstream::tls_server(&["127.0.0.1"]);
    let ca = dir.join("impostor-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let (url, seen) = fixed_server(net, config, "200 OK", body);
    Replayer { url, ca, seen }
}

/// A replica of the gateway that is broken: it holds the gateway's own
/// certificate but answers every request with `status`.
fn broken_replica(net: &TestNet, gw: &Gw, status: &str) -> String {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(gw.dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(gw.dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let body = json!({"error": {"status": 0, "code": "broken", "message": format!("a broken replica ({status})")}});
    fixed_server(net, config, status, body.to_string()).0
}

/// Serves `status` and `body` to every request, on loopback in `net`;
/// returns its URL and the request lines it saw.
fn fixed_server(
    net: &TestNet,
    mut config: rustls::ServerConfig,
    status: &str,
    body: String,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read as _, Write as _};
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = std::sync::Arc::new(config);
    let listener = net.tcp("127.0.0.1:0");
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let status = status.to_owned();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let conn = rustls::ServerConnection::new(std::sync::Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            log.lock().unwrap().push(line);
            let _ = write!(
                tls,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.flush();
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (url, seen)
}

impl Setup {
    /// The envelope the gateway hands the sandbox now, as bytes on the
    /// wire (what an eavesdropper on a broken channel would keep).
    fn capture(&self, query: &str) -> String {
        let token = std::fs::read_to_string(&self.sandbox_token).unwrap();
        let r = call(
            &self.net,
            &self.gw.client(&token),
            "GET",
            &format!("/v1/sandboxes/sb/bundle{query}"),
            None,
        );
        assert_eq!(r.status, 200, "{:?}", r.json());
        String::from_utf8(r.body.to_vec()).unwrap()
    }

    fn started(&self) -> PathBuf {
        self.work().join("started")
    }

    fn marker(&self) -> String {
        format!("touch {}\n", self.started().display())
    }

    /// Runs the marker workload against `urls` and returns the exit status.
    fn launch(&self, urls: &[String], ca: &Path, extra: &[&str]) -> i32 {
        let _ = std::fs::remove_file(self.started());
        let trust = self.gw.dir.join("trust.keys");
        let mut child = self.run_at(urls, ca, &trust, &self.marker(), extra);
        wait_exit(&mut child)
    }
}

#[test]
fn a_replayed_envelope_below_the_revision_floor_never_runs_even_after_a_restart() {
    let s = setup();
    // Revision 1, captured while it is current: validly signed, recent.
    let old = s.capture("");
    let trust = s.gw.dir.join("trust.keys");
    let mut child = s.run(&trust, &workload(&s.work(), s.port, 1));
    assert_eq!(s.sandbox("?revision=1&wait=20")["applied_revision"], 1);
    // Revision 2 arrives by the long-poll and is applied: the floor rises.
    s.propose_and_approve(true);
    let st = s.sandbox("?revision=2&wait=30");
    assert_eq!(st["applied_revision"], 2, "{st}\n{}", s.stderr());
    let (rc, _) = step(&s.work(), 1);
    assert_eq!(rc, "0", "{}", s.stderr());
    assert_eq!(wait_exit(&mut child), 0, "{}", s.stderr());
    let file = s.state_dir().join("sb.json");
    let floor: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(floor["revision"], 2, "{floor}");
    assert_eq!(floor["policy"], "agent");
    {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.uid()), (0o600, 0));
    }
    // The supervisor restarts; an impostor answers with revision 1.
    let fake = replayer(&s.net, s.dir.path(), old);
    let rc = s.launch(std::slice::from_ref(&fake.url), &fake.ca, &[]);
    assert_eq!(rc, 125, "{}", s.stderr());
    assert!(!s.started().exists(), "the workload ran under revision 1");
    assert!(
        s.said("older than revision 2") && s.said("revision floor"),
        "{}",
        s.stderr()
    );
    assert_eq!(fake.seen.lock().unwrap().len(), 1, "the impostor was asked");
    // The real gateway, same state: revision 2 runs.
    assert_eq!(
        s.launch(&[s.gw.url()], &s.gw.dir.join("ca.pem"), &[]),
        0,
        "{}",
        s.stderr()
    );
    assert!(s.started().exists());
}

#[test]
fn a_stale_or_foreign_envelope_is_refused_at_launch_and_a_fresh_one_runs() {
    let s = setup();
    // Captured without a nonce, then left to age past --max-bundle-age.
    let plain = s.capture("");
    // Captured by someone who sent a nonce of their own.
    let foreign = s.capture("?nonce=attackerattackerattacker");
    std::thread::sleep(Duration::from_millis(2100));
    let fake = replayer(&s.net, s.dir.path(), plain);
    let rc = s.launch(
        std::slice::from_ref(&fake.url),
        &fake.ca,
        &["--max-bundle-age", "1"],
    );
    assert_eq!(rc, 125, "{}", s.stderr());
    assert!(
        !s.started().exists(),
        "a stale envelope started the workload"
    );
    assert!(s.said("more than the 1 s accepted"), "{}", s.stderr());
    // The supervisor did send a nonce, which the impostor cannot sign.
    let line = fake.seen.lock().unwrap()[0].clone();
    assert!(
        line.starts_with("GET /v1/sandboxes/sb/bundle?nonce="),
        "{line}"
    );
    // Another request's nonce: refused whatever the allowed age.
    let fake = replayer(&s.net, s.dir.path(), foreign);
    let rc = s.launch(
        std::slice::from_ref(&fake.url),
        &fake.ca,
        &["--max-bundle-age", "3600"],
    );
    assert_eq!(rc, 125, "{}", s.stderr());
    assert!(!s.started().exists());
    assert!(s.said("answers another request"), "{}", s.stderr());
    // Nothing was applied, so no floor was written.
    assert!(!s.state_dir().join("sb.json").exists());
    // The same revision from the real gateway: it signs this launch's
    // nonce, so it is fresh whatever --max-bundle-age says.
    let rc = s.launch(
        &[s.gw.url()],
        &s.gw.dir.join("ca.pem"),
        &["--max-bundle-age", "0"],
    );
    assert_eq!(rc, 0, "{}", s.stderr());
    assert!(s.started().exists());
    // A nonce the gateway will not sign is a 400, not a signature.
    let token = std::fs::read_to_string(&s.sandbox_token).unwrap();
    for bad in ["short", "has%20space0123456789", &"x".repeat(129)] {
        let r = call(
            &s.net,
            &s.gw.client(&token),
            "GET",
            &format!("/v1/sandboxes/sb/bundle?nonce={bad}"),
            None,
        );
        assert_eq!(r.status, 400, "{bad}: {:?}", r.json());
    }
}

#[test]
fn a_corrupt_or_exposed_state_never_runs_the_workload() {
    use std::os::unix::fs::PermissionsExt as _;
    let s = setup();
    let ca = s.gw.dir.join("ca.pem");
    let urls = [s.gw.url()];
    assert_eq!(s.launch(&urls, &ca, &[]), 0, "{}", s.stderr());
    let file = s.state_dir().join("sb.json");
    let good = std::fs::read_to_string(&file).unwrap();
    // Corrupt: refused, and left as it is (never silently reset).
    std::fs::write(&file, "{\"version\":1,\"sandbox\":\"sb\",").unwrap();
    assert_eq!(s.launch(&urls, &ca, &[]), 125);
    assert!(!s.started().exists());
    assert!(s.said("is not valid"), "{}", s.stderr());
    assert!(s.said("it is not reset"), "{}", s.stderr());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"version\":1,\"sandbox\":\"sb\","
    );
    // Writable by everyone, the workload's user included.
    std::fs::write(&file, &good).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(s.launch(&urls, &ca, &[]), 125);
    assert!(!s.started().exists());
    assert!(s.said("mode 0666"), "{}", s.stderr());
    // Owned by the workload's user (`run_as user nobody`).
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    assert_eq!(s.launch(&urls, &ca, &[]), 125);
    assert!(!s.started().exists());
    assert!(s.said("owned by uid 65534"), "{}", s.stderr());
    std::os::unix::fs::chown(&file, Some(0), Some(0)).unwrap();
    assert_eq!(s.launch(&urls, &ca, &[]), 0, "{}", s.stderr());
    // A directory others may write.
    std::fs::set_permissions(s.state_dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(s.launch(&urls, &ca, &[]), 125);
    assert!(!s.started().exists());
    std::fs::set_permissions(s.state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // A state directory inside the policy's `fs write` tree.
    let inside = s.work().join("state");
    let rc = s.launch(&urls, &ca, &["--state-dir", inside.to_str().unwrap()]);
    assert_eq!(rc, 125);
    assert!(!s.started().exists());
    assert!(s.said("lets the workload write"), "{}", s.stderr());
}

#[test]
fn with_several_gateway_urls_a_dead_first_one_is_passed_over() {
    let s = setup();
    // A loopback port that was bound and closed: connection refused.
    let closed = {
        let l = s.net.tcp("127.0.0.1:0");
        format!("https://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let ca = s.gw.dir.join("ca.pem");
    // Repeated flags.
    assert_eq!(
        s.launch(&[closed.clone(), s.gw.url()], &ca, &[]),
        0,
        "{}",
        s.stderr()
    );
    assert!(s.started().exists());
    // One comma-separated list, and the long-poll and the status reports
    // going the same way.
    let trust = s.gw.dir.join("trust.keys");
    let mut child = s.run_at(
        &[format!("{closed},{}", s.gw.url())],
        &ca,
        &trust,
        &workload(&s.work(), s.port, 1),
        &[],
    );
    let st = s.sandbox("?revision=1&wait=20");
    assert_eq!(st["applied_revision"], 1, "{st}\n{}", s.stderr());
    s.propose_and_approve(true);
    let st = s.sandbox("?revision=2&wait=30");
    assert_eq!(st["applied_revision"], 2, "{st}\n{}", s.stderr());
    let (rc, out) = step(&s.work(), 1);
    assert_eq!((rc.as_str(), out.as_str()), ("0", "ok"), "{}", s.stderr());
    assert_eq!(wait_exit(&mut child), 0);
}

#[test]
fn a_replica_answering_5xx_is_passed_over_but_a_4xx_is_the_answer() {
    let s = setup();
    let ca = s.gw.dir.join("ca.pem");
    let unavailable = broken_replica(&s.net, &s.gw, "503 Service Unavailable");
    assert_eq!(
        s.launch(&[unavailable, s.gw.url()], &ca, &[]),
        0,
        "{}",
        s.stderr()
    );
    assert!(s.started().exists());
    // A refusal is the gateway's word, the same from every replica: the
    // next one is not asked, and nothing runs.
    let forbidden = broken_replica(&s.net, &s.gw, "403 Forbidden");
    assert_eq!(s.launch(&[forbidden, s.gw.url()], &ca, &[]), 125);
    assert!(!s.started().exists());
    assert!(s.said("a broken replica (403 Forbidden)"), "{}", s.stderr());
}

/// A database of its own on the PostgreSQL test server; the test fails
/// (never skips) without one.
fn fresh_postgres() -> String {
    use sqlx::Connection as _;
    let base = std::env::var("OPENSHELL_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "OPENSHELL_TEST_POSTGRES_URL is not set: start the test server with `export OPENSHELL_TEST_POSTGRES_URL=$(scripts/postgres-test-server)`"
        )
    });
    let name = format!(
        "osp_sup_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("the PostgreSQL test server at `{base}`: {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .unwrap();
    });
    let (prefix, _) = base.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

#[test]
fn two_gateways_on_one_postgresql_the_supervisor_follows_the_one_still_up() {
    let db = fresh_postgres();
    let mut s = setup_on(Some(&db));
    // A second replica: same directory (CA, certificate, signing key),
    // same database.
    let b = Gw::start_on(&s.net, &s.gw.dir.clone(), 0, &db);
    let trust = s.gw.dir.join("trust.keys");
    let urls = [s.gw.url(), b.url()];
    let mut child = s.run_at(
        &urls,
        &s.gw.dir.join("ca.pem"),
        &trust,
        &workload(&s.work(), s.port, 1),
        &[],
    );
    let st = s.sandbox("?revision=1&wait=20");
    assert_eq!(st["applied_revision"], 1, "{st}\n{}", s.stderr());
    // The first replica goes down while the supervisor waits on it.
    s.gw.kill();
    s.gw = b;
    s.alice = s.gw.client(&s.tokens.0);
    s.bob = s.gw.client(&s.tokens.1);
    s.propose_and_approve(true);
    // The poll and the report went to the second replica.
    let st = s.sandbox("?revision=2&wait=40");
    assert_eq!(st["applied_revision"], 2, "{st}\n{}", s.stderr());
    let (rc, out) = step(&s.work(), 1);
    assert_eq!((rc.as_str(), out.as_str()), ("0", "ok"), "{}", s.stderr());
    assert_eq!(wait_exit(&mut child), 0);
    // A restart with the first replica still down: the launch goes to the
    // second, and revision 2 is at the floor.
    assert_eq!(
        s.launch(&urls, &s.gw.dir.join("ca.pem"), &[]),
        0,
        "{}",
        s.stderr()
    );
    assert!(s.started().exists());
}

/// A driver that only hands each start's session over: this test starts
/// the supervisor itself.
#[derive(Default)]
struct Handover(std::sync::Mutex<Vec<gateway::driver::Launch>>);

impl gateway::driver::Driver for Handover {
    fn name(&self) -> &str {
        "handover"
    }
    fn start(&self, launch: gateway::driver::Launch) -> gateway::driver::DriverFut<'_, ()> {
        self.0.lock().unwrap().push(launch);
        Box::pin(async { Ok(()) })
    }
    fn running(&self, _: &str) -> gateway::driver::DriverFut<'_, bool> {
        Box::pin(async { Ok(true) })
    }
    fn stop(&self, _: &str) -> gateway::driver::DriverFut<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    fn remove(&self, _: &str) -> gateway::driver::DriverFut<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn a_session_token_is_refreshed_and_the_poll_goes_on_after_the_first_one_expired() {
    session_outlives_its_first_token(false);
}

#[test]
fn serve_follows_the_gateway_across_hosts_with_a_refreshed_session() {
    session_outlives_its_first_token(true);
}

/// A sandbox the gateway runs, supervised by `run` (or, `across_hosts`,
/// by `serve` with the sandbox in a namespace of its own): its session
/// outlives its first token, and revisions keep coming through.
fn session_outlives_its_first_token(across_hosts: bool) {
    let handover = std::sync::Arc::new(Handover::default());
    let sandboxes = gateway::app::SandboxSettings {
        drivers: gateway::driver::Drivers::new(vec![handover.clone()]),
        session_ttl: Duration::from_secs(4),
        ..gateway::app::SandboxSettings::default()
    };
    let s = setup_with(None, sandboxes);
    // `sb` becomes a sandbox the gateway runs, its session in the token
    // file as a driver writes it.
    let admin = s.gw.admin();
    assert_eq!(
        call(&s.net, &admin, "DELETE", "/v1/sandboxes/sb", None).status,
        200
    );
    let run = json!({"id": "sb", "policy": "agent", "run": {"driver": "handover"}});
    let r = call(&s.net, &admin, "POST", "/v1/sandboxes", Some(run));
    assert_eq!(r.status, 201, "{:?}", r.json());
    let launch = handover.0.lock().unwrap()[0].clone();
    let first = json!({"id": "sb", "generation": 1, "token": launch.token, "expires_at": launch.token_expires_at});
    std::fs::write(&s.sandbox_token, first.to_string()).unwrap();

    let trust = s.gw.dir.join("trust.keys");
    let script = workload(&s.work(), s.port, 2);
    let mut child = if across_hosts {
        s.run_across_hosts(&trust, &script)
    } else {
        s.run(&trust, &script)
    };
    let (rc, _) = step(&s.work(), 1);
    assert_ne!(rc, "0", "revision 1 refuses the upstream: {}", s.stderr());
    // Past the first token's life: only a refreshed one reaches the gateway.
    std::thread::sleep(Duration::from_secs(5));
    let expired = s.gw.client(&launch.token);
    let r = call(&s.net, &expired, "GET", "/v1/sandboxes/sb", None);
    assert_eq!(r.status, 401, "{:?}", r.json());
    s.propose_and_approve(true);
    let status = s.sandbox("?revision=2&wait=30");
    assert_eq!(status["applied_revision"], 2, "{status}\n{}", s.stderr());
    let (rc, out) = step(&s.work(), 2);
    assert_eq!((rc.as_str(), out.as_str()), ("0", "ok"), "{}", s.stderr());
    assert_eq!(wait_exit(&mut child), 0, "{}", s.stderr());

    // The file holds the newest session, owner-only; the gateway audited
    // each refresh as the sandbox's.
    let file = std::fs::read_to_string(&s.sandbox_token).unwrap();
    let now: Value = serde_json::from_str(&file).unwrap();
    assert_ne!(now["token"], first["token"], "{file}");
    assert!(
        now["expires_at"].as_i64() > first["expires_at"].as_i64(),
        "{file}"
    );
    let mode = std::fs::metadata(&s.sandbox_token).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let audit = call(&s.net, &admin, "GET", "/v1/audit?limit=1000", None).json();
    let refreshes = audit["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "session-refresh" && r["actor"] == "sandbox:sb")
        .count();
    assert!(refreshes >= 2, "{audit}");
}
