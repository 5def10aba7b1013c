//! Sandboxes the gateway runs: every phase change through the API on both
//! backends, the session each generation holds, a driver failing at each
//! step, and a gateway dying in the middle of a transition. The driver
//! here is a scripted one that fails or hangs where a test says; the real
//! drivers pass the same steps in their own suites.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bundle_trust::client::Client;
use common::scripted::Scripted;
use common::{Backend, Gw, T, propose, send};
use serde_json::{Value, json};

/// A gateway with the scripted driver and a policy `agent` to run.
async fn gateway(backend: Backend, driver: &Arc<Scripted>) -> Gw {
    gateway_leased(backend, driver, 30).await
}

async fn gateway_leased(backend: Backend, driver: &Arc<Scripted>, lease: u64) -> Gw {
    let gw = Gw::start_driven(backend, driver, lease).await;
    propose(&gw.admin, "agent", common::BASE).await;
    gw
}

fn run() -> Value {
    json!({"driver": "scripted", "command": ["sh", "-c", "true"], "workspace": "/srv/w"})
}

async fn create(gw: &Gw, id: &str) -> bundle_trust::client::Response {
    send(
        &gw.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": id, "policy": "agent", "run": run()})),
    )
    .await
}

async fn show(c: &Client, id: &str) -> Value {
    let r = send(c, "GET", &format!("/v1/sandboxes/{id}"), None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

/// The status the sandbox's own token gets reading its sandbox.
async fn session_status(gw: &Gw, id: &str, token: &str) -> u16 {
    let c = gw.admin.with_token(token);
    send(&c, "GET", &format!("/v1/sandboxes/{id}"), None)
        .await
        .status
}

/// An audit row's detail, which the API answers as the JSON text hashed.
fn detail(row: &Value) -> Value {
    serde_json::from_str(row["detail"].as_str().unwrap()).unwrap()
}

/// The audit rows about `id`: `(action, to)`.
async fn history(gw: &Gw, id: &str) -> Vec<(String, String)> {
    let r = send(&gw.admin, "GET", "/v1/audit?limit=1000", None).await;
    r.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["subject"] == format!("sandbox:{id}"))
        .map(|row| {
            let d = detail(row);
            let to = d["to"].as_str().or(d["phase"].as_str()).unwrap_or("");
            (row["action"].as_str().unwrap().to_owned(), to.to_owned())
        })
        .collect()
}

async fn wait_for_phase(c: &Client, id: &str, phase: &str) -> Value {
    let deadline = Instant::now() + T;
    loop {
        let r = send(c, "GET", &format!("/v1/sandboxes/{id}"), None).await;
        let v = r.json();
        let now = if r.status == 404 {
            "deleted"
        } else {
            v["phase"].as_str().unwrap_or("")
        };
        if now == phase {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "sandbox `{id}` did not become {phase}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

both!(a_sandbox_goes_through_its_life, |backend| async move {
    let driver = Arc::new(Scripted::default());
    let gw = gateway(backend, &driver).await;
    let r = create(&gw, "s1").await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let v = r.json();
    assert_eq!(v["phase"], "ready");
    assert_eq!(v["generation"], 1);
    assert_eq!(v["run"], run());
    assert!(v.get("token").is_none(), "the session is the driver's: {v}");
    assert_eq!(driver.runs("s1"), Some(1));
    let (g1, first) = driver.last_token("s1");
    assert_eq!(g1, 1);
    assert_eq!(session_status(&gw, "s1", &first).await, 200);

    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["phase"], "stopped");
    assert_eq!(driver.runs("s1"), None);
    assert_eq!(session_status(&gw, "s1", &first).await, 401);

    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["phase"], "ready");
    assert_eq!(r.json()["generation"], 2);
    let (g2, second) = driver.last_token("s1");
    assert_eq!(g2, 2);
    assert_ne!(first, second);
    assert_eq!(session_status(&gw, "s1", &second).await, 200);
    assert_eq!(session_status(&gw, "s1", &first).await, 401);

    let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s1", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(
        r.json(),
        json!({"id": "s1", "policy": "agent", "deleted": true})
    );
    assert_eq!(session_status(&gw, "s1", &second).await, 401);
    assert!(driver.state.lock().unwrap().made.is_empty());
    let r = send(&gw.admin, "GET", "/v1/sandboxes/s1", None).await;
    assert_eq!(r.status, 404);

    let steps: Vec<(String, String)> = [
        ("sandbox-create", ""),
        ("sandbox-phase", "ready"),
        ("sandbox-stop", "stopping"),
        ("sandbox-phase", "stopped"),
        ("sandbox-start", "starting"),
        ("sandbox-phase", "ready"),
        ("sandbox-delete", "deleting"),
        ("sandbox-phase", "deleted"),
    ]
    .iter()
    .map(|(a, t)| ((*a).to_owned(), (*t).to_owned()))
    .collect();
    assert_eq!(history(&gw, "s1").await, steps);
    let r = send(&gw.admin, "GET", "/v1/audit/verify", None).await;
    assert_eq!(r.json()["ok"], true, "{:?}", r.json());
});

both!(
    a_failed_stop_or_delete_keeps_the_session,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        assert_eq!(create(&gw, "s1").await.status, 201);
        let (_, token) = driver.last_token("s1");

        driver.fail("stop", true);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "driver_failed");
        let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            msg.contains("stop refused by the script") && msg.ends_with("it is ready now"),
            "{msg}"
        );
        let v = show(&gw.admin, "s1").await;
        assert_eq!(v["phase"], "ready");
        assert!(
            v["reason"].as_str().unwrap().contains("the stop failed"),
            "{v}"
        );
        assert_eq!(session_status(&gw, "s1", &token).await, 200);

        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s1", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        assert_eq!(show(&gw.admin, "s1").await["phase"], "ready");
        assert_eq!(session_status(&gw, "s1", &token).await, 200);

        // Stopped by hand meanwhile: a failed stop cannot leave it `ready`.
        driver.state.lock().unwrap().running.clear();
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        assert_eq!(show(&gw.admin, "s1").await["phase"], "failed");
        assert_eq!(session_status(&gw, "s1", &token).await, 401);

        driver.fail("stop", false);
        driver.fail("remove", true);
        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s1", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        assert_eq!(show(&gw.admin, "s1").await["phase"], "failed");
        driver.fail("remove", false);
        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s1", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
);

both!(
    a_failed_start_leaves_nothing_running,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        driver.fail("start", true);
        let r = create(&gw, "s1").await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        let v = show(&gw.admin, "s1").await;
        assert_eq!(v["phase"], "failed");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("generation 1 did not start: start refused by the script"),
            "{v}"
        );
        assert_eq!(driver.runs("s1"), None);
        assert!(
            driver.calls().contains(&"stop s1".to_owned()),
            "{:?}",
            driver.calls()
        );
        // No token of it works: the only one was the driver's, never used.
        let tokens = send(&gw.admin, "GET", "/v1/tokens", None).await.json();
        assert!(
            !tokens.to_string().contains("sandbox:s1"),
            "a failed sandbox holds no token: {tokens}"
        );

        // A failed start of a stopped sandbox goes back to stopped.
        driver.fail("start", false);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["generation"], 2);
        assert_eq!(
            send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None)
                .await
                .status,
            200
        );
        driver.fail("start", true);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        let v = show(&gw.admin, "s1").await;
        assert_eq!(v["phase"], "stopped");
        assert_eq!(v["generation"], 3);
        assert_eq!(driver.runs("s1"), None);
    }
);

both!(
    requests_that_cannot_be_run_are_refused,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        let cases = [
            (
                json!({"id": "x", "policy": "agent", "run": {"driver": "podman"}}),
                400,
                "this gateway has no driver `podman`; it runs sandboxes with: `scripted`",
            ),
            (
                json!({"id": "x", "policy": "agent", "run": {"driver": "scripted", "env_allow": ["A-B"]}}),
                400,
                "`run.env_allow` names `A-B`",
            ),
            (
                json!({"id": "x", "policy": "agent", "ttl_seconds": 5, "run": {"driver": "scripted"}}),
                400,
                "`ttl_seconds` is for a registered sandbox's token",
            ),
            (
                json!({"id": "x", "policy": "nope", "run": {"driver": "scripted"}}),
                404,
                "no policy `nope`",
            ),
        ];
        for (body, status, says) in cases {
            let r = send(&gw.admin, "POST", "/v1/sandboxes", Some(body.clone())).await;
            assert_eq!(r.status, status, "{body}: {:?}", r.json());
            let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
            assert!(msg.contains(says), "{body}: {msg}");
        }
        assert!(driver.calls().is_empty(), "{:?}", driver.calls());

        assert_eq!(create(&gw, "s1").await.status, 201);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
        assert_eq!(r.status, 409);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("sandbox `s1` is ready: `start` needs it stopped, failed"),
            "{:?}",
            r.json()
        );
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/token", None).await;
        assert_eq!(r.status, 409, "{:?}", r.json());

        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "elsewhere", "policy": "agent"})),
        )
        .await;
        assert_eq!(r.status, 201);
        assert!(r.json().get("phase").is_none());
        let r = send(&gw.admin, "POST", "/v1/sandboxes/elsewhere/stop", None).await;
        assert_eq!(r.status, 409);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("registered to run elsewhere"),
            "{:?}",
            r.json()
        );
        let reader = gw.person("rita", "reader").await;
        let r = send(&reader, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 403);
        assert_eq!(show(&reader, "s1").await["phase"], "ready");
    }
);

/// Serves `dir` and `db` once the last gateway on them let go (SQLite's
/// lock goes with that process's last connection).
async fn restart(dir: tempfile::TempDir, db: &str, driver: &Arc<Scripted>, lease: u64) -> Gw {
    let deadline = Instant::now() + T;
    loop {
        match gateway::server::start(common::driven(&dir, db, driver, lease)).await {
            Ok(running) => return Gw::from_running(dir, db.to_owned(), running),
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying start: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Waits until the driver was asked for `step` on `id`.
async fn wait_for_call(driver: &Scripted, call: &str) {
    let deadline = Instant::now() + T;
    while !driver.calls().iter().any(|c| c == call) {
        assert!(
            Instant::now() < deadline,
            "no `{call}`: {:?}",
            driver.calls()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The audit row of the takeover of `id`, and that it came only once the
/// lease had run out (on SQLite, at once: no other process can hold it).
async fn took_over(c: &Client, id: &str, backend: Backend) {
    let r = send(c, "GET", "/v1/audit?limit=1000", None).await;
    let rows = r.json()["rows"].as_array().unwrap().clone();
    let row = rows
        .iter()
        .find(|row| {
            row["action"] == "sandbox-takeover" && row["subject"] == format!("sandbox:{id}")
        })
        .unwrap_or_else(|| panic!("no takeover of `{id}`: {rows:?}"));
    assert_eq!(row["actor"], "gateway");
    if backend == Backend::Postgres {
        let until = detail(row)["lease_until"].as_i64().unwrap();
        assert!(
            row["at"].as_i64().unwrap() > until,
            "taken before the lease ran out: {row}"
        );
    }
}

both!(
    a_transition_whose_gateway_died_is_finished_by_the_next,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway_leased(backend, &driver, 2).await;
        for id in ["s1", "s2", "s3"] {
            assert_eq!(create(&gw, id).await.status, 201);
        }
        let (_, s1_token) = driver.last_token("s1");

        // s1 stopping, s2 deleting, s3 starting: each driver call hangs and the
        // gateway dies in it.
        driver.hang("stop s1", true);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop?wait=0", None).await;
        assert_eq!(r.status, 202, "{:?}", r.json());
        assert_eq!(r.json()["phase"], "stopping");
        wait_for_call(&driver, "stop s1").await;
        // The session holds until the stop commits.
        assert_eq!(session_status(&gw, "s1", &s1_token).await, 200);
        driver.hang("remove s2", true);
        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s2?wait=0", None).await;
        assert_eq!(r.status, 202, "{:?}", r.json());
        wait_for_call(&driver, "remove s2").await;
        assert_eq!(
            send(&gw.admin, "POST", "/v1/sandboxes/s3/stop", None)
                .await
                .status,
            200
        );
        driver.hang("start s3", true);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s3/start?wait=0", None).await;
        assert_eq!(r.status, 202, "{:?}", r.json());
        wait_for_call(&driver, "start s3").await;

        let Gw {
            dir, db, running, ..
        } = gw;
        running.stop();
        for call in ["stop s1", "remove s2", "start s3"] {
            driver.hang(call, false);
        }
        // s1 was stopped by hand meanwhile; s3's generation 2 never started.
        driver.state.lock().unwrap().running.remove("s1");

        let gw = restart(dir, &db, &driver, 2).await;
        let v = wait_for_phase(&gw.admin, "s1", "stopped").await;
        assert_eq!(v["reason"], Value::Null, "{v}");
        assert_eq!(session_status(&gw, "s1", &s1_token).await, 401);
        wait_for_phase(&gw.admin, "s2", "deleted").await;
        assert!(!driver.state.lock().unwrap().made.contains("s2"));
        let v = wait_for_phase(&gw.admin, "s3", "stopped").await;
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("the gateway starting generation 2 stopped before it was ready"),
            "{v}"
        );
        assert_eq!(driver.runs("s3"), None);
        for id in ["s1", "s2", "s3"] {
            took_over(&gw.admin, id, backend).await;
        }
        let r = send(&gw.admin, "GET", "/v1/audit/verify", None).await;
        assert_eq!(r.json()["ok"], true, "{:?}", r.json());
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_leaves_a_live_gateways_transition_alone_and_finishes_a_dead_ones() {
    let driver = Arc::new(Scripted::default());
    let gw = gateway_leased(Backend::Postgres, &driver, 2).await;
    assert_eq!(create(&gw, "s1").await.status, 201);
    let replica = gateway::server::start(common::driven(&gw.dir, &gw.db, &driver, 2))
        .await
        .unwrap();
    let token = std::fs::read_to_string(gw.path("admin.token")).unwrap();
    let url = format!("https://127.0.0.1:{}", replica.addr.port());
    let other = Client::new(&url, &gw.ca, &token).unwrap();

    driver.hang("stop s1", true);
    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop?wait=0", None).await;
    assert_eq!(r.status, 202, "{:?}", r.json());
    wait_for_call(&driver, "stop s1").await;
    // Two and a half leases: the first gateway renews its lease, and the replica
    // never acts on the sandbox.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(show(&other, "s1").await["phase"], "stopping");
    let stops = driver.calls().iter().filter(|c| *c == "stop s1").count();
    assert_eq!(stops, 1, "{:?}", driver.calls());

    let Gw { dir, running, .. } = gw;
    running.stop();
    driver.hang("stop s1", false);
    wait_for_phase(&other, "s1", "stopped").await;
    took_over(&other, "s1", Backend::Postgres).await;
    replica.stop();
    drop(dir);
}

/// Runs the command line client against `gw` as admin: exit code, stdout,
/// stderr.
async fn cli(gw: &Gw, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_openshell-gateway"));
    cmd.args(args)
        .env("OPENSHELL_GATEWAY", &gw.url)
        .env("OPENSHELL_GATEWAY_CA", gw.path("ca.pem"))
        .env("OPENSHELL_GATEWAY_TOKEN_FILE", gw.path("admin.token"));
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_commands_run_a_sandbox_through_its_life() {
    let driver = Arc::new(Scripted::default());
    let gw = gateway(Backend::Sqlite, &driver).await;
    let create = [
        "sandbox",
        "create",
        "s1",
        "--policy",
        "agent",
        "--driver",
        "scripted",
        "--workspace",
        "/srv/w",
        "--env-allow",
        "HOME",
        "--timeout",
        "30",
        "--",
        "sh",
        "-c",
        "echo hi",
    ];
    let (rc, out, err) = cli(&gw, &create).await;
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["phase"], "ready");
    assert_eq!(
        v["run"],
        json!({"driver": "scripted", "command": ["sh", "-c", "echo hi"], "env_allow": ["HOME"], "workspace": "/srv/w", "timeout_seconds": 30})
    );

    driver.fail("stop", true);
    let (rc, _, err) = cli(&gw, &["sandbox", "stop", "s1"]).await;
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains(
            "sandbox `s1`: the stop failed: stop refused by the script; it is ready now (502)"
        ),
        "{err}"
    );
    driver.fail("stop", false);
    let (rc, out, err) = cli(&gw, &["sandbox", "stop", "s1"]).await;
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["phase"],
        "stopped"
    );
    let (rc, _, err) = cli(&gw, &["sandbox", "start", "s1"]).await;
    assert_eq!(rc, 0, "{err}");
    let (rc, out, err) = cli(&gw, &["sandbox", "show", "s1"]).await;
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["phase"].as_str(), v["generation"].as_i64()),
        (Some("ready"), Some(2))
    );
    let (rc, out, err) = cli(&gw, &["sandbox", "delete", "s1"]).await;
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "sandbox `s1` deleted; its tokens are revoked\n");

    let (rc, _, err) = cli(
        &gw,
        &[
            "sandbox",
            "create",
            "s2",
            "--policy",
            "agent",
            "--workspace",
            "/w",
        ],
    )
    .await;
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("add `--driver D`"), "{err}");
}

/// Refreshes the session of `id` with `token` through `c`'s gateway: the
/// status and the answer.
async fn refresh(c: &Client, id: &str, token: &str) -> (u16, Value) {
    let r = send(
        &c.with_token(token),
        "POST",
        &format!("/v1/sandboxes/{id}/session"),
        None,
    )
    .await;
    (r.status, r.json())
}

/// A refresh that must work: the new token.
async fn refreshed(c: &Client, id: &str, token: &str, generation: i64) -> String {
    let (status, v) = refresh(c, id, token).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["generation"], generation, "{v}");
    assert!(v["expires_at"].as_i64().unwrap() > gateway_now(), "{v}");
    v["token"].as_str().unwrap().to_owned()
}

fn gateway_now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_refreshed_by_any_gateway_process_and_after_restarts() {
    let driver = Arc::new(Scripted::default());
    let gw = gateway(Backend::Postgres, &driver).await;
    assert_eq!(create(&gw, "s1").await.status, 201);
    let (_, t1) = driver.last_token("s1");
    // Two gateway processes on the database, neither of which made the
    // sandbox or its session.
    let serve = || common::process::serve(gw.dir.path(), "127.0.0.1:0", &gw.db, "manual").unwrap();
    let (a, b) = (serve(), serve());
    let t2 = refreshed(&a.admin, "s1", &t1, 1).await;
    let t3 = refreshed(&b.admin, "s1", &t2, 1).await;
    // The token that asked works until it expires: an answer lost on its
    // way leaves the supervisor a working one. The one before it is gone.
    assert_eq!(session_status(&gw, "s1", &t2).await, 200);
    assert_eq!(session_status(&gw, "s1", &t1).await, 401);

    drop((a, b));
    let c = serve();
    let t4 = refreshed(&c.admin, "s1", &t3, 1).await;

    // Only the sandbox's own session refreshes it.
    let (status, v) = refresh(
        &c.admin,
        "s1",
        &std::fs::read_to_string(gw.path("admin.token")).unwrap(),
    )
    .await;
    assert_eq!(status, 403, "{v}");
    let r = send(
        &gw.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "elsewhere", "policy": "agent"})),
    )
    .await;
    let registered = r.json()["token"].as_str().unwrap().to_owned();
    assert_eq!(refresh(&c.admin, "elsewhere", &registered).await.0, 403);
    assert_eq!(create(&gw, "s2").await.status, 201);
    let (_, other) = driver.last_token("s2");
    assert_eq!(refresh(&c.admin, "s1", &other).await.0, 403);

    // A stop that fails leaves the session refreshing; one that commits
    // ends it.
    driver.fail("stop", true);
    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
    assert_eq!(r.status, 502, "{:?}", r.json());
    let t5 = refreshed(&c.admin, "s1", &t4, 1).await;
    driver.fail("stop", false);
    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    for t in [&t1, &t5] {
        assert_eq!(refresh(&c.admin, "s1", t).await.0, 401);
    }

    // The next generation's session is its own.
    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let (g, t6) = driver.last_token("s1");
    assert_eq!(g, 2);
    refreshed(&c.admin, "s1", &t6, 2).await;
    assert_eq!(refresh(&c.admin, "s1", &t5).await.0, 401);
    let audited = history(&gw, "s1").await;
    let refreshes = audited
        .iter()
        .filter(|(a, _)| a == "session-refresh")
        .count();
    assert_eq!(refreshes, 5, "{audited:?}");
}

both!(
    sessions_expire_and_only_the_last_two_are_kept,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let (dir, db) = common::fresh_dir(backend).await;
        let mut config = common::driven(&dir, &db, &driver, 30);
        config.sandboxes.session_ttl = Duration::from_secs(3);
        let gw = Gw::serve(dir, config).await;
        propose(&gw.admin, "agent", common::BASE).await;
        assert_eq!(create(&gw, "s1").await.status, 201);
        let (_, first) = driver.last_token("s1");
        let mut tokens = vec![first];
        for _ in 0..5 {
            let next = refreshed(&gw.admin, "s1", tokens.last().unwrap(), 1).await;
            tokens.push(next);
        }
        // Six made: the one that asked last, and its answer.
        for (i, t) in tokens.iter().enumerate() {
            let want = if i < 4 { 401 } else { 200 };
            assert_eq!(session_status(&gw, "s1", t).await, want, "token {i}");
        }
        tokio::time::sleep(Duration::from_millis(3100)).await;
        let last = tokens.last().unwrap();
        let (status, v) = refresh(&gw.admin, "s1", last).await;
        assert_eq!(status, 401, "{v}");
        assert_eq!(v["error"]["code"], "token_expired", "{v}");
    }
);

both!(
    a_workload_that_ends_on_its_own_leaves_its_sandbox_stopped,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway_leased(backend, &driver, 2).await;
        assert_eq!(create(&gw, "s1").await.status, 201);
        let (_, token) = driver.last_token("s1");
        driver.state.lock().unwrap().running.clear();
        let v = wait_for_phase(&gw.admin, "s1", "stopped").await;
        assert_eq!(v["reason"], "the workload ended on its own", "{v}");
        assert_eq!(session_status(&gw, "s1", &token).await, 401);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["reason"], Value::Null);
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_gateway_whose_driver_is_of_the_sandboxs_place_acts_on_it() {
    let here = Arc::new(Scripted::default());
    let gw = gateway_leased(Backend::Postgres, &here, 2).await;
    assert_eq!(create(&gw, "s1").await.status, 201);
    assert_eq!(show(&gw.admin, "s1").await["place"], "scripted");
    // A replica on the same database whose driver runs sandboxes
    // elsewhere: it refuses to act, and never takes a transition over.
    let elsewhere = Arc::new(Scripted::at("another-host"));
    let replica = gateway::server::start(common::driven(&gw.dir, &gw.db, &elsewhere, 2))
        .await
        .unwrap();
    let token = std::fs::read_to_string(gw.path("admin.token")).unwrap();
    let url = format!("https://127.0.0.1:{}", replica.addr.port());
    let other = Client::new(&url, &gw.ca, &token).unwrap();
    let r = send(&other, "POST", "/v1/sandboxes/s1/stop", None).await;
    assert_eq!(r.status, 409, "{:?}", r.json());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox `s1` runs at `scripted`"),
        "{:?}",
        r.json()
    );
    here.hang("stop s1", true);
    let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop?wait=0", None).await;
    assert_eq!(r.status, 202, "{:?}", r.json());
    wait_for_call(&here, "stop s1").await;
    let Gw { dir, running, .. } = gw;
    running.stop();
    // Three leases: the replica's driver is of another place.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(show(&other, "s1").await["phase"], "stopping");
    assert!(elsewhere.calls().is_empty(), "{:?}", elsewhere.calls());
    replica.stop();
    drop(dir);
}
