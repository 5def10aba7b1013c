//! The `openshell-gateway` binary as a process: one SQLite file refuses a
//! second process, two processes on one PostgreSQL wake each other's
//! long-polls, a gateway killed mid-poll restarts with nothing lost, and
//! the client commands drive a whole approval.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bundle_trust::client::Client;
use common::process::serve;
use common::*;
use serde_json::json;

const GATEWAY: &str = env!("CARGO_BIN_EXE_openshell-gateway");

fn init(dir: &Path) {
    let out = Command::new(GATEWAY)
        .args(["init", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn port(url: &str) -> &str {
    url.rsplit(':').next().unwrap()
}

async fn db_for(b: Backend, dir: &Path) -> String {
    match b {
        Backend::Sqlite => format!("sqlite:{}", dir.join("gateway.db").display()),
        Backend::Postgres => fresh_postgres().await,
    }
}

#[tokio::test]
async fn a_second_gateway_on_the_same_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path());
    let db = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let _first = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let Err(second) = serve(dir.path(), "127.0.0.1:0", &db, "manual") else {
        panic!("a second process served the same SQLite file");
    };
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("is in use by another gateway process"),
        "{err}"
    );
    assert!(err.contains("use PostgreSQL for several replicas"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_on_one_postgres_replica_wakes_a_poll_on_the_other() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path());
    let db = fresh_postgres().await;
    let a = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let b = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let token = |c: &Client, name: &str| {
        let c = c.clone();
        let name = name.to_owned();
        async move {
            let r = send(
                &c,
                "POST",
                "/v1/tokens",
                Some(json!({"name": name, "role": "author"})),
            )
            .await;
            c.with_token(r.json()["token"].as_str().unwrap())
        }
    };
    let alice = token(&a.admin, "alice").await;
    let bob = token(&a.admin, "bob").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    let r = send(
        &a.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "sb", "policy": "agent"})),
    )
    .await;
    let sb_token = r.json()["token"].as_str().unwrap().to_owned();
    // The sandbox polls replica B.
    let sb_on_b = b.admin.with_token(&sb_token);
    let first = send(&sb_on_b, "GET", "/v1/sandboxes/sb/bundle", None).await;
    let digest = first.json()["claims"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let poll = tokio::spawn(async move {
        let inm = format!("\"{digest}\"");
        let r = sb_on_b
            .send(
                "GET",
                "/v1/sandboxes/sb/bundle?wait=60",
                None,
                &[("if-none-match", &inm)],
                T,
            )
            .await
            .unwrap();
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Approved on replica A.
    let p = propose(&alice, "agent", &narrow()).await;
    assert_eq!(approve(&bob, &p).await.status, 200);
    let approved = Instant::now();
    let (r, at) = poll.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["claims"]["revision"], 2);
    let lag = at.saturating_duration_since(approved);
    assert!(
        lag < Duration::from_secs(5),
        "woken {lag:?} after the approval"
    );
    drop(a);
    drop(b);
}

async fn restart_mid_poll(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path());
    let db = db_for(backend, dir.path()).await;
    let mut gw = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let url = gw.url.clone();
    let alice = gw.admin.with_token(
        send(
            &gw.admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "alice", "role": "author"})),
        )
        .await
        .json()["token"]
            .as_str()
            .unwrap(),
    );
    let bob = gw.admin.with_token(
        send(
            &gw.admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "bob", "role": "author"})),
        )
        .await
        .json()["token"]
            .as_str()
            .unwrap(),
    );
    let first = propose(&alice, "agent", BASE).await;
    assert_eq!(approve(&bob, &first).await.status, 200);
    let pending = propose(&alice, "agent", &narrow()).await;
    let r = send(
        &gw.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "sb", "policy": "agent"})),
    )
    .await;
    let sb = gw.admin.with_token(r.json()["token"].as_str().unwrap());
    let inm = format!("\"{}\"", first["digest"].as_str().unwrap());
    let poll = {
        let sb = sb.clone();
        let inm = inm.clone();
        tokio::spawn(async move {
            sb.send(
                "GET",
                "/v1/sandboxes/sb/bundle?wait=60",
                None,
                &[("if-none-match", &inm)],
                T,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SIGKILL mid-poll: the poll fails, nothing is answered.
    gw.child.kill().unwrap();
    gw.child.wait().unwrap();
    assert!(
        poll.await.unwrap().is_err(),
        "the poll ended with the process"
    );
    drop(gw);
    // Started again on the same address and database.
    let gw = serve(
        dir.path(),
        &format!("127.0.0.1:{}", port(&url)),
        &db,
        "manual",
    )
    .unwrap();
    let revs = send(&bob, "GET", "/v1/policies/agent/revisions", None)
        .await
        .json();
    assert_eq!(revs["active_revision"], 1);
    assert_eq!(revs["revisions"][0]["digest"], first["digest"]);
    let p = send(
        &bob,
        "GET",
        &format!("/v1/proposals/{}", pending["id"]),
        None,
    )
    .await
    .json();
    assert_eq!(p["state"], "pending");
    // The supervisor's poll resumes; the pending proposal is approved.
    let poll = {
        let sb = sb.clone();
        tokio::spawn(async move {
            sb.send(
                "GET",
                "/v1/sandboxes/sb/bundle?wait=60",
                None,
                &[("if-none-match", &inm)],
                T,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(approve(&bob, &pending).await.status, 200);
    let r = poll.await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["claims"]["revision"], 2);
    let audit = send(&bob, "GET", "/v1/audit/verify", None).await.json();
    assert_eq!(audit["ok"], true, "{audit}");
    drop(gw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_poll_restarts_with_nothing_lost_sqlite() {
    restart_mid_poll(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_poll_restarts_with_nothing_lost_postgres() {
    restart_mid_poll(Backend::Postgres).await;
}

/// Runs a client command; (exit code, stdout, stderr).
fn cli(dir: &Path, url: &str, token: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(GATEWAY)
        .args(args)
        .env("OPENSHELL_GATEWAY", url)
        .env("OPENSHELL_GATEWAY_CA", dir.join("ca.pem"))
        .env("OPENSHELL_GATEWAY_TOKEN_FILE", token)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_commands_drive_an_approval() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path());
    for f in ["admin.token", "ca.key", "server.key"] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    let db = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let gw = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let d = dir.path();
    let admin = d.join("admin.token");
    let token_of = |out: &str| {
        serde_json::from_str::<serde_json::Value>(out).unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (rc, out, err) = cli(
        d,
        &gw.url,
        &admin,
        &["token", "create", "alice", "--role", "author"],
    );
    assert_eq!(rc, 0, "{err}");
    std::fs::write(d.join("alice"), token_of(&out)).unwrap();
    let (_, out, _) = cli(
        d,
        &gw.url,
        &admin,
        &["token", "create", "bob", "--role", "author"],
    );
    std::fs::write(d.join("bob"), token_of(&out)).unwrap();
    std::fs::write(d.join("agent.policy"), BASE).unwrap();
    std::fs::write(d.join("wide.policy"), wide()).unwrap();
    let (rc, out, err) = cli(
        d,
        &gw.url,
        &d.join("alice"),
        &["propose", "agent", d.join("agent.policy").to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("proposal 1 for `agent`: pending (first revision (a person approves))"),
        "{out}"
    );
    let (rc, _, err) = cli(d, &gw.url, &d.join("alice"), &["approve", "1"]);
    assert_eq!(rc, 1);
    assert!(err.contains("may not approve it"), "{err}");
    let (rc, out, err) = cli(d, &gw.url, &d.join("bob"), &["approve", "1"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("revision 1"), "{out}");
    let (rc, out, _) = cli(
        d,
        &gw.url,
        &d.join("alice"),
        &["propose", "agent", d.join("wide.policy").to_str().unwrap()],
    );
    assert_eq!(rc, 0);
    assert!(
        out.contains("pending (widened)") && out.contains("capability_expansion"),
        "{out}"
    );
    let (rc, out, _) = cli(
        d,
        &gw.url,
        &d.join("bob"),
        &["show", "2", "--format", "markdown"],
    );
    assert_eq!(rc, 0);
    assert!(
        out.starts_with("### Proposal 2 for `agent`: pending — widened"),
        "{out}"
    );
    let (rc, _, err) = cli(
        d,
        &gw.url,
        &d.join("bob"),
        &["reject", "2", "--reason", "writes are not needed"],
    );
    assert_eq!(rc, 0, "{err}");
    let (rc, out, _) = cli(
        d,
        &gw.url,
        &admin,
        &["sandbox", "create", "sb", "--policy", "agent"],
    );
    assert_eq!(rc, 0);
    let sb = gw.admin.with_token(&token_of(&out));
    // `status --wait 1` returns once the sandbox reports revision 1.
    let waiter = {
        let (d, url, admin) = (d.to_path_buf(), gw.url.clone(), admin.clone());
        std::thread::spawn(move || {
            cli(
                &d,
                &url,
                &admin,
                &["status", "sb", "--wait", "1", "--timeout", "30"],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let env = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None)
        .await
        .json();
    let r = send(
        &sb,
        "POST",
        "/v1/sandboxes/sb/status",
        Some(json!({"revision": 1, "digest": env["claims"]["digest"], "result": "applied"})),
    )
    .await;
    assert_eq!(r.status, 200);
    let (rc, out, err) = waiter.join().unwrap();
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("\"applied_revision\": 1"), "{out}");
    let (rc, out, _) = cli(d, &gw.url, &d.join("bob"), &["audit", "--verify"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("\"ok\": true"));
    let (rc, _, err) = cli(d, "https://127.0.0.1:1", &admin, &["proposals"]);
    assert_eq!(rc, 3, "unreachable: {err}");
}

// `SIGTERM` as an orchestrator sends it: the waiting poll is answered at
// once (its supervisor reconnects, to another replica), and the process
// exits 0 once nothing is in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_waiting_polls_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path());
    let db = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let mut gw = serve(dir.path(), "127.0.0.1:0", &db, "manual").unwrap();
    let person = |name: &str, role: &str| {
        let c = gw.admin.clone();
        let body = json!({"name": name, "role": role});
        async move {
            let r = send(&c, "POST", "/v1/tokens", Some(body)).await;
            c.with_token(r.json()["token"].as_str().unwrap())
        }
    };
    let alice = person("alice", "author").await;
    let bob = person("bob", "author").await;
    let carol = person("carol", "reader").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    let r = send(
        &gw.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "sb", "policy": "agent"})),
    )
    .await;
    let sb = gw.admin.with_token(r.json()["token"].as_str().unwrap());
    let first = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await;
    let inm = format!("\"{}\"", first.json()["claims"]["digest"].as_str().unwrap());
    let poll = tokio::spawn(async move {
        sb.send(
            "GET",
            "/v1/sandboxes/sb/bundle?wait=120",
            None,
            &[("if-none-match", inm.as_str())],
            Duration::from_secs(150),
        )
        .await
        .unwrap()
    });
    let deadline = Instant::now() + T;
    loop {
        let m = send(&carol, "GET", "/metrics", None).await;
        if String::from_utf8_lossy(&m.body).contains("openshell_gateway_waiting_polls 1") {
            break;
        }
        assert!(Instant::now() < deadline, "the poll never parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = Command::new("kill")
        .args(["-TERM", &gw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let answered = tokio::time::timeout(T, poll).await.unwrap().unwrap();
    assert_eq!(answered.status, 304, "{:?}", answered.json());
    let status = loop {
        if let Some(s) = gw.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the gateway did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    let err = std::fs::read_to_string(&gw.log).unwrap();
    assert!(err.contains("openshell-gateway: stopped"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("\"route\":\"/v1/sandboxes/{id}/bundle\"")
                && l.contains("\"status\":304")),
        "no access-log line for the answered poll:\n{err}"
    );
}
