//! Commands run in a sandbox the gateway runs, on both backends: a person
//! queues one and follows its output, and the test plays the sandbox's
//! supervisor over HTTP with the session token the scripted driver was
//! given: it claims the command, sends its output in chunks (out of
//! order, retried, with a gap) and its end. Also: what a stop does to
//! commands, racing claims, the transcript limit, the command line, and
//! two gateways on one PostgreSQL waking each other's long-polls.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bundle_trust::client::{Client, Response};
use common::scripted::Scripted;
use common::{Backend, Gw, propose, send};
use serde_json::{Value, json};

const STOPPED: &str = "the sandbox stopped before the command ended";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap())
        .unwrap()
}

/// A gateway with the scripted driver and a policy `agent` to run.
async fn gateway(backend: Backend, driver: &Arc<Scripted>) -> Gw {
    let gw = Gw::start_driven(backend, driver, 30).await;
    propose(&gw.admin, "agent", common::BASE).await;
    gw
}

/// A ready sandbox `id` run by the gateway, and its supervisor: a client
/// with the session token the driver was given.
async fn sandbox(gw: &Gw, driver: &Scripted, id: &str) -> Client {
    let run = json!({
        "driver": "scripted", "command": ["sh", "-c", "sleep 1000"],
        "env_allow": ["TOKEN", "HOME"], "timeout_seconds": 30,
    });
    let r = send(
        &gw.admin,
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": id, "policy": "agent", "run": run})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    gw.admin.with_token(&driver.last_token(id).1)
}

async fn exec(gw: &Gw, id: &str, body: Value) -> Response {
    send(
        &gw.admin,
        "POST",
        &format!("/v1/sandboxes/{id}/execs"),
        Some(body),
    )
    .await
}

/// Queues `command` in `id`; the exec's id.
async fn queue(gw: &Gw, id: &str, command: &[&str]) -> String {
    let r = exec(gw, id, json!({ "command": command })).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()["id"].as_str().unwrap().to_owned()
}

async fn next(sup: &Client, id: &str, wait: u64) -> Response {
    let path = format!("/v1/sandboxes/{id}/execs/next?wait={wait}");
    send(sup, "GET", &path, None).await
}

/// Claims the next exec of `id`; its claim.
async fn claim(sup: &Client, id: &str) -> Value {
    let r = next(sup, id, 0).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.json()
}

async fn chunk(
    sup: &Client,
    id: &str,
    x: &str,
    stream: &str,
    offset: u64,
    data: &[u8],
) -> Response {
    let body = json!({"stream": stream, "offset": offset, "data": b64(data)});
    let path = format!("/v1/sandboxes/{id}/execs/{x}/output");
    send(sup, "POST", &path, Some(body)).await
}

async fn end(sup: &Client, id: &str, x: &str, body: Value) -> Response {
    send(
        sup,
        "POST",
        &format!("/v1/sandboxes/{id}/execs/{x}/end"),
        Some(body),
    )
    .await
}

async fn record(c: &Client, id: &str, x: &str) -> Value {
    let r = send(c, "GET", &format!("/v1/sandboxes/{id}/execs/{x}"), None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

async fn output(c: &Client, id: &str, x: &str, from: (u64, u64), wait: u64) -> Value {
    let (o, e) = from;
    let path = format!("/v1/sandboxes/{id}/execs/{x}/output?stdout={o}&stderr={e}&wait={wait}");
    let r = c
        .send("GET", &path, None, &[], Duration::from_secs(wait + 30))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

/// Each stream's bytes in an answer, and the streams in arrival order.
fn streams(answer: &Value) -> (Vec<u8>, Vec<u8>, Vec<String>) {
    let (mut out, mut err, mut order) = (Vec::new(), Vec::new(), Vec::new());
    for c in answer["chunks"].as_array().unwrap() {
        let bytes = unb64(&c["data"]);
        let s = c["stream"].as_str().unwrap().to_owned();
        if s == "stdout" { &mut out } else { &mut err }.extend_from_slice(&bytes);
        order.push(s);
    }
    (out, err, order)
}

/// The audit rows of `action`, their details parsed.
async fn audited(gw: &Gw, action: &str) -> Vec<Value> {
    let r = send(&gw.admin, "GET", "/v1/audit?limit=1000", None).await;
    r.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["action"] == action)
        .map(|row| serde_json::from_str(row["detail"].as_str().unwrap()).unwrap())
        .collect()
}

/// The `env` column of exec `x`, read from the database itself.
async fn stored_env(gw: &Gw, x: &str) -> Option<String> {
    use sqlx::Row as _;
    sqlx::any::install_default_drivers();
    let url = match gw.db.strip_prefix("sqlite:") {
        Some(path) => format!("sqlite://{path}?mode=ro"),
        None => gw.db.clone(),
    };
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let row = sqlx::query("SELECT env FROM execs WHERE id = $1")
        .bind(x)
        .fetch_one(&pool)
        .await
        .unwrap();
    let env: Option<String> = row.try_get("env").unwrap();
    pool.close().await;
    env
}

both!(
    an_exec_is_claimed_fed_ended_and_read,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        let sup = sandbox(&gw, &driver, "s1").await;

        let body = json!({
            "command": ["sh", "-c", "echo hi"], "env": {"TOKEN": "s3cret-value"},
            "workdir": "/srv",
        });
        let r = exec(&gw, "s1", body).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let v = r.json();
        let x = v["id"].as_str().unwrap().to_owned();
        assert!(x.starts_with("x-") && x.len() == 18, "{x}");
        assert_eq!(v["state"], "queued");
        assert_eq!(v["env_names"], json!(["TOKEN"]));
        assert_eq!(
            v["timeout_seconds"], 30,
            "the sandbox's timeout is the default"
        );
        assert_eq!(v["generation"], 1);
        assert_eq!(v["created_by"], "admin");
        assert!(!String::from_utf8_lossy(&r.body).contains("s3cret"), "{v}");
        let created = audited(&gw, "sandbox-exec").await;
        assert_eq!(created.len(), 1);
        assert_eq!(created[0]["exec"], x.as_str());
        assert_eq!(created[0]["env"], json!(["TOKEN"]));
        assert_eq!(created[0]["command"], json!(["sh", "-c", "echo hi"]));
        assert_eq!(
            stored_env(&gw, &x).await.as_deref(),
            Some(r#"{"TOKEN":"s3cret-value"}"#)
        );

        // A client follows the output before anything runs.
        let follower = gw.admin.clone();
        let follow_x = x.clone();
        let waiting = tokio::spawn(async move {
            let started = Instant::now();
            let v = output(&follower, "s1", &follow_x, (0, 0), 30).await;
            (started.elapsed(), v)
        });

        // The supervisor claims it: the env is answered this once.
        let c = claim(&sup, "s1").await;
        assert_eq!(
            c,
            json!({
                "exec_id": x, "command": ["sh", "-c", "echo hi"],
                "env": {"TOKEN": "s3cret-value"}, "workdir": "/srv", "timeout_seconds": 30,
            })
        );
        assert_eq!(next(&sup, "s1", 0).await.status, 204);
        assert_eq!(stored_env(&gw, &x).await, None);
        let v = record(&gw.admin, "s1", &x).await;
        assert_eq!(v["state"], "running");
        assert!(v["started_at"].is_i64(), "{v}");

        // Output: the first chunk wakes the follower long before its wait.
        assert_eq!(
            chunk(&sup, "s1", &x, "stdout", 0, b"hello ").await.status,
            204
        );
        let (took, first) = waiting.await.unwrap();
        assert!(took < Duration::from_secs(10), "woken after {took:?}");
        assert_eq!(streams(&first).0, b"hello ");
        assert_eq!(first["chunks"][0]["offset"], 0);

        assert_eq!(
            chunk(&sup, "s1", &x, "stderr", 0, b"oops\n").await.status,
            204
        );
        assert_eq!(
            chunk(&sup, "s1", &x, "stdout", 6, b"world\n").await.status,
            204
        );
        // A retry of what is stored is acknowledged; one that overlaps adds
        // only its tail; one past the stored length leaves a gap and is
        // refused with where to go on from.
        assert_eq!(
            chunk(&sup, "s1", &x, "stdout", 0, b"hello world\n")
                .await
                .status,
            204
        );
        assert_eq!(
            chunk(&sup, "s1", &x, "stdout", 9, b"ld\nmore").await.status,
            204
        );
        let r = chunk(&sup, "s1", &x, "stdout", 20, b"gap").await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            msg.contains("16 bytes stored") && msg.contains("offset 16"),
            "{msg}"
        );
        let r = chunk(&sup, "s1", &x, "stdout", 0, b"").await;
        assert_eq!(r.status, 204, "an empty chunk is a retry");
        let r = send(
            &sup,
            "POST",
            &format!("/v1/sandboxes/s1/execs/{x}/output"),
            Some(json!({"stream": "stdout", "offset": 16, "data": "not base64!"})),
        )
        .await;
        assert_eq!(r.status, 400, "{:?}", r.json());
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`data`")
        );

        let all = output(&gw.admin, "s1", &x, (0, 0), 0).await;
        let (out, err, order) = streams(&all);
        assert_eq!(out, b"hello world\nmore");
        assert_eq!(err, b"oops\n");
        assert_eq!(
            order,
            ["stdout", "stderr", "stdout", "stdout"],
            "arrival order"
        );
        let rest = output(&gw.admin, "s1", &x, (9, 5), 0).await;
        assert_eq!(
            streams(&rest),
            (
                b"ld\nmore".to_vec(),
                vec![],
                vec!["stdout".into(), "stdout".into()]
            )
        );
        assert_eq!(rest["chunks"][0]["offset"], 9);

        // The end, once; the same end again is acknowledged, another is not.
        let exited = json!({"exit_status": 3, "timed_out": false});
        assert_eq!(end(&sup, "s1", &x, exited.clone()).await.status, 204);
        assert_eq!(end(&sup, "s1", &x, exited).await.status, 204);
        let r = end(
            &sup,
            "s1",
            &x,
            json!({"exit_status": 4, "timed_out": false}),
        )
        .await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        assert_eq!(
            chunk(&sup, "s1", &x, "stdout", 16, b"late").await.status,
            409
        );
        let v = record(&gw.admin, "s1", &x).await;
        assert_eq!(
            (&v["state"], &v["exit_status"], &v["timed_out"], &v["error"]),
            (&json!("exited"), &json!(3), &json!(false), &Value::Null)
        );
        assert_eq!(
            (&v["stdout_bytes"], &v["stderr_bytes"]),
            (&json!(16), &json!(5))
        );
        assert_eq!(v["truncated"], false);
        assert!(v["ended_at"].as_i64().unwrap() >= v["started_at"].as_i64().unwrap());
        let ends = audited(&gw, "sandbox-exec-end").await;
        assert_eq!(
            ends,
            [json!({"exec": x, "exit_status": 3, "timed_out": false, "error": null})]
        );

        // An ended exec's output answers at once, with nothing new.
        let started = Instant::now();
        let v = output(&gw.admin, "s1", &x, (16, 5), 30).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(v["chunks"], json!([]));
        assert_eq!(v["exec"]["state"], "exited");

        // One that could not run.
        let y = queue(&gw, "s1", &["nope"]).await;
        assert_eq!(claim(&sup, "s1").await["exec_id"], y.as_str());
        let r = end(&sup, "s1", &y, json!({"error": "`nope`: no such program"})).await;
        assert_eq!(r.status, 204);
        let v = record(&gw.admin, "s1", &y).await;
        assert_eq!(
            (&v["state"], &v["error"]),
            (&json!("failed"), &json!("`nope`: no such program"))
        );

        // Newest first; a limit.
        let r = send(&gw.admin, "GET", "/v1/sandboxes/s1/execs", None).await;
        let listed = r.json();
        let ids: Vec<&str> = listed["execs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [y.as_str(), x.as_str()]);
        let r = send(&gw.admin, "GET", "/v1/sandboxes/s1/execs?limit=1", None).await;
        assert_eq!(r.json()["execs"].as_array().unwrap().len(), 1);

        // Nothing anywhere holds the value of the env.
        let r = send(&gw.admin, "GET", "/v1/audit?limit=1000", None).await;
        assert!(!String::from_utf8_lossy(&r.body).contains("s3cret"));
        let r = send(&gw.admin, "GET", "/v1/audit/verify", None).await;
        assert_eq!(r.json()["ok"], true, "{:?}", r.json());
    }
);

both!(
    an_exec_is_refused_with_the_field_named,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        let sup = sandbox(&gw, &driver, "s1").await;
        let refused = |body: Value, status: u16, says: &'static str| {
            let gw = &gw;
            async move {
                let r = exec(gw, "s1", body.clone()).await;
                assert_eq!(r.status, status, "{body}: {:?}", r.json());
                let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
                assert!(msg.contains(says), "{body}: {msg}");
            }
        };
        refused(
        json!({"command": ["env"], "env": {"SECRET": "x"}}),
        400,
        "`env` names `SECRET`, which is not in the `run.env_allow` of sandbox `s1`: add it to `run.env_allow` when the sandbox is created",
    )
    .await;
        refused(json!({"command": []}), 400, "`command`").await;
        refused(json!({"command": [""]}), 400, "empty program").await;
        refused(json!({"command": ["a", "b\u{0}"]}), 400, "`command[1]`").await;
        refused(
            json!({"command": ["a", "x".repeat(4097)]}),
            400,
            "`command[1]`",
        )
        .await;
        let many: Vec<String> = (0..257).map(|i| i.to_string()).collect();
        refused(json!({ "command": many }), 400, "`command` has 257 entries").await;
        refused(
            json!({"command": ["ls"], "workdir": "srv"}),
            400,
            "`workdir`",
        )
        .await;
        refused(
            json!({"command": ["ls"], "timeout_seconds": 0}),
            400,
            "`timeout_seconds`",
        )
        .await;
        refused(
            json!({"command": ["ls"], "user": "root"}),
            400,
            "unknown field `user`",
        )
        .await;
        refused(json!({"env": {}}), 400, "missing field `command`").await;
        // Nothing of these was queued.
        assert_eq!(next(&sup, "s1", 0).await.status, 204);

        // An explicit timeout wins over the sandbox's.
        let r = exec(&gw, "s1", json!({"command": ["ls"], "timeout_seconds": 5})).await;
        assert_eq!(r.json()["timeout_seconds"], 5);

        // A registered sandbox, a sandbox that is not there, one stopped.
        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "elsewhere", "policy": "agent"})),
        )
        .await;
        assert_eq!(r.status, 201);
        let registered = gw.admin.with_token(r.json()["token"].as_str().unwrap());
        let r = exec(&gw, "elsewhere", json!({"command": ["ls"]})).await;
        assert_eq!(r.status, 400, "{:?}", r.json());
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("registered")
        );
        assert_eq!(next(&registered, "elsewhere", 0).await.status, 204);
        let r = exec(&gw, "ghost", json!({"command": ["ls"]})).await;
        assert_eq!(r.status, 404);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let r = exec(&gw, "s1", json!({"command": ["ls"]})).await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is stopped")
        );

        // Who may: people with the admin role; the supervisor's half is the
        // sandbox's own token's, or an admin's.
        let alice = gw.person("alice", "author").await;
        assert_eq!(
            exec(&gw, "s1", json!({"command": ["ls"]})).await.status,
            409
        );
        let r = send(
            &alice,
            "POST",
            "/v1/sandboxes/s1/execs",
            Some(json!({"command": ["ls"]})),
        )
        .await;
        assert_eq!(r.status, 403);
        assert_eq!(next(&alice, "s1", 0).await.status, 403);
        assert_eq!(next(&registered, "s1", 0).await.status, 403);
        assert_eq!(next(&gw.admin, "s1", 0).await.status, 204);
    }
);

both!(
    a_stop_fails_queued_and_running_execs,
    |backend| async move {
        let driver = Arc::new(Scripted::default());
        let gw = gateway(backend, &driver).await;
        let sup = sandbox(&gw, &driver, "s1").await;
        let running = queue(&gw, "s1", &["sleep", "100"]).await;
        let queued = queue(&gw, "s1", &["echo", "later"]).await;
        assert_eq!(
            claim(&sup, "s1").await["exec_id"],
            running.as_str(),
            "oldest first"
        );
        assert_eq!(
            chunk(&sup, "s1", &running, "stdout", 0, b"zzz")
                .await
                .status,
            204
        );

        // Its follower and a follower of the queued one wait.
        let followers: Vec<_> = [(running.clone(), 3u64), (queued.clone(), 0)]
            .into_iter()
            .map(|(x, from)| {
                let c = gw.admin.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let v = output(&c, "s1", &x, (from, 0), 60).await;
                    (started.elapsed(), v)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;

        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        for f in followers {
            let (took, v) = f.await.unwrap();
            assert!(took < Duration::from_secs(20), "woken after {took:?}");
            assert_eq!(v["exec"]["state"], "failed", "{v}");
            assert_eq!(v["exec"]["error"], STOPPED);
        }
        for x in [&running, &queued] {
            let v = record(&gw.admin, "s1", x).await;
            assert_eq!(
                (&v["state"], &v["error"]),
                (&json!("failed"), &json!(STOPPED))
            );
            assert!(v["ended_at"].is_i64());
        }
        // The transcript stays; the supervisor's end comes too late.
        let v = output(&gw.admin, "s1", &running, (0, 0), 0).await;
        assert_eq!(streams(&v).0, b"zzz");
        let phases = audited(&gw, "sandbox-phase").await;
        assert!(
            phases
                .iter()
                .any(|d| d["to"] == "stopped" && d["execs_failed"] == 2),
            "{phases:?}"
        );

        // The next generation's supervisor sees none of them.
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/start", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let sup2 = gw.admin.with_token(&driver.last_token("s1").1);
        assert_eq!(next(&sup2, "s1", 0).await.status, 204);
        assert_eq!(next(&sup, "s1", 0).await.status, 401);
        let fresh = queue(&gw, "s1", &["true"]).await;
        let c = claim(&sup2, "s1").await;
        assert_eq!(c["exec_id"], fresh.as_str());
        assert_eq!(record(&gw.admin, "s1", &fresh).await["generation"], 2);
        let r = end(&sup2, "s1", &running, json!({"exit_status": 0})).await;
        assert_eq!(r.status, 409, "{:?}", r.json());

        // A stop that fails and rolls back to `ready` leaves them running.
        driver.fail("stop", true);
        let r = send(&gw.admin, "POST", "/v1/sandboxes/s1/stop", None).await;
        assert_eq!(r.status, 502, "{:?}", r.json());
        assert_eq!(record(&gw.admin, "s1", &fresh).await["state"], "running");
        driver.fail("stop", false);

        // A delete takes them with the sandbox.
        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/s1", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let r = send(
            &gw.admin,
            "GET",
            &format!("/v1/sandboxes/s1/execs/{fresh}"),
            None,
        )
        .await;
        assert_eq!(r.status, 404);
        sandbox(&gw, &driver, "s1").await;
        let r = send(&gw.admin, "GET", "/v1/sandboxes/s1/execs", None).await;
        assert_eq!(
            r.json()["execs"],
            json!([]),
            "a sandbox of the same id starts afresh"
        );
    }
);

both!(racing_claims_get_each_exec_once, |backend| async move {
    let driver = Arc::new(Scripted::default());
    let gw = gateway(backend, &driver).await;
    let sup = sandbox(&gw, &driver, "s1").await;
    let mut queued = std::collections::BTreeSet::new();
    for i in 0..5 {
        queued.insert(queue(&gw, "s1", &["echo", &i.to_string()]).await);
    }
    let claims: Vec<_> = (0..8)
        .map(|_| {
            let sup = sup.clone();
            tokio::spawn(async move { next(&sup, "s1", 0).await })
        })
        .collect();
    let mut got = std::collections::BTreeSet::new();
    let mut none = 0;
    for c in claims {
        let r = c.await.unwrap();
        match r.status {
            200 => assert!(got.insert(r.json()["exec_id"].as_str().unwrap().to_owned())),
            204 => none += 1,
            s => panic!("{s}: {:?}", r.body),
        }
    }
    assert_eq!((got, none), (queued, 3));

    // A supervisor waiting for work is woken by a new exec.
    let waiting = {
        let sup = sup.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = next(&sup, "s1", 60).await;
            (started.elapsed(), r)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let x = queue(&gw, "s1", &["true"]).await;
    let (took, r) = waiting.await.unwrap();
    assert!(took < Duration::from_secs(20), "woken after {took:?}");
    assert_eq!(r.json()["exec_id"], x.as_str());
});

both!(the_transcript_stops_at_its_limit, |backend| async move {
    const LIMIT: usize = 16 * 1024 * 1024;
    // Within the request limit once in base64 and JSON.
    const PIECE: usize = 700 * 1024;
    let driver = Arc::new(Scripted::default());
    let gw = gateway(backend, &driver).await;
    let sup = sandbox(&gw, &driver, "s1").await;
    let x = queue(&gw, "s1", &["yes"]).await;
    claim(&sup, "s1").await;
    let mut sent = Vec::new();
    let mut offset = 0u64;
    let mut n = 0u8;
    while sent.len() < LIMIT + PIECE {
        let piece: Vec<u8> = (0..PIECE)
            .map(|i| n.wrapping_add((i % 251) as u8))
            .collect();
        n = n.wrapping_add(1);
        let r = chunk(&sup, "s1", &x, "stdout", offset, &piece).await;
        assert_eq!(r.status, 204, "at {offset}: {:?}", r.json());
        offset += PIECE as u64;
        sent.extend_from_slice(&piece);
    }
    // stderr past the limit: counted, not kept.
    assert_eq!(
        chunk(&sup, "s1", &x, "stderr", 0, b"late").await.status,
        204
    );
    assert_eq!(
        end(&sup, "s1", &x, json!({"exit_status": 0})).await.status,
        204
    );
    let v = record(&gw.admin, "s1", &x).await;
    assert_eq!(v["truncated"], true);
    assert_eq!(v["stdout_bytes"], sent.len());
    assert_eq!(v["stderr_bytes"], 4);

    // Read back a page (at most 1 MiB) at a time: the first 16 MiB.
    let mut got = Vec::new();
    loop {
        let v = output(&gw.admin, "s1", &x, (got.len() as u64, 0), 0).await;
        let (out, err, _) = streams(&v);
        assert!(err.is_empty());
        assert!(
            out.len() <= 1024 * 1024,
            "{} bytes in one answer",
            out.len()
        );
        if out.is_empty() {
            break;
        }
        got.extend_from_slice(&out);
    }
    assert_eq!(got.len(), LIMIT);
    assert!(got == sent[..LIMIT], "the kept bytes are the first ones");
});

/// Plays the supervisor of `id`: claims the next exec (waiting for it),
/// writes `out` and `err`, then `end`s it. The exec's id.
async fn supervise(
    sup: Client,
    id: &'static str,
    out: &'static [u8],
    err: &'static [u8],
    end_with: Value,
) -> String {
    let r = next(&sup, id, 60).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let x = r.json()["exec_id"].as_str().unwrap().to_owned();
    assert_eq!(chunk(&sup, id, &x, "stdout", 0, out).await.status, 204);
    assert_eq!(chunk(&sup, id, &x, "stderr", 0, err).await.status, 204);
    assert_eq!(end(&sup, id, &x, end_with).await.status, 204);
    x
}

/// Runs the command line client against `gw` as admin: exit code, stdout,
/// stderr.
async fn cli(gw: &Gw, args: &[&str]) -> (i32, Vec<u8>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_openshell-gateway"));
    cmd.args(args)
        .env("OPENSHELL_GATEWAY", &gw.url)
        .env("OPENSHELL_GATEWAY_CA", gw.path("ca.pem"))
        .env("OPENSHELL_GATEWAY_TOKEN_FILE", gw.path("admin.token"))
        .env("TOKEN", "from-the-caller");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_runs_a_command_and_exits_with_its_status() {
    let driver = Arc::new(Scripted::default());
    let gw = gateway(Backend::Sqlite, &driver).await;
    let sup = sandbox(&gw, &driver, "s1").await;

    let played = tokio::spawn(supervise(
        sup.clone(),
        "s1",
        b"out\n\xff",
        b"err\n",
        json!({"exit_status": 7, "timed_out": false}),
    ));
    let args = [
        "sandbox",
        "exec",
        "s1",
        "--env",
        "TOKEN",
        "--env",
        "HOME=/root",
        "--workdir",
        "/srv",
        "--timeout",
        "9",
        "--",
        "sh",
        "-c",
        "echo out",
    ];
    let (rc, out, err) = cli(&gw, &args).await;
    let x = played.await.unwrap();
    assert_eq!(rc, 7, "{err}");
    assert_eq!(out, b"out\n\xff", "raw bytes");
    assert_eq!(err, "err\n");
    let created = audited(&gw, "sandbox-exec").await;
    assert_eq!(created[0]["env"], json!(["HOME", "TOKEN"]));
    assert_eq!(created[0]["timeout_seconds"], 9);
    assert_eq!(created[0]["workdir"], "/srv");

    let played = tokio::spawn(supervise(
        sup.clone(),
        "s1",
        b"",
        b"",
        json!({"exit_status": 137, "timed_out": true}),
    ));
    let (rc, _, err) = cli(&gw, &["sandbox", "exec", "s1", "--", "sleep", "99"]).await;
    played.await.unwrap();
    assert_eq!(rc, 137, "{err}");
    assert!(err.contains("timed out after 30s"), "{err}");

    let played = tokio::spawn(supervise(
        sup.clone(),
        "s1",
        b"",
        b"",
        json!({"error": "`nope`: no such program"}),
    ));
    let (rc, _, err) = cli(&gw, &["sandbox", "exec", "s1", "--", "nope"]).await;
    played.await.unwrap();
    assert_eq!(rc, 125, "{err}");
    assert!(err.contains("failed: `nope`: no such program"), "{err}");

    let (rc, _, err) = cli(
        &gw,
        &["sandbox", "exec", "s1", "--env", "SECRET=1", "--", "ls"],
    )
    .await;
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("add it to `run.env_allow`"), "{err}");

    let (rc, out, err) = cli(&gw, &["sandbox", "execs", "s1"]).await;
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["execs"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["execs"][2]["id"], x.as_str());

    let (rc, out, err) = cli(&gw, &["sandbox", "transcript", "s1", &x]).await;
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, b"out\n\xff");
    assert_eq!(
        err,
        format!("err\nopenshell-gateway: exec `{x}` exited with status 7\n")
    );
}

/// Two gateways on one PostgreSQL: what one stores wakes the long-polls
/// waiting on the other, through `NOTIFY` alone (each has its own
/// wake-ups).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_one_gateway_is_woken_by_what_another_stores() {
    let driver = Arc::new(Scripted::default());
    let a = gateway(Backend::Postgres, &driver).await;
    let sup_a = sandbox(&a, &driver, "s1").await;
    let replica = gateway::server::start(common::driven(&a.dir, &a.db, &driver, 30))
        .await
        .unwrap();
    let url = format!("https://127.0.0.1:{}", replica.addr.port());
    let token = std::fs::read_to_string(a.path("admin.token")).unwrap();
    let b_admin = Client::new(&url, &a.ca, &token).unwrap();
    let sup_b = b_admin.with_token(&driver.last_token("s1").1);

    // The supervisor waits on B; the exec is made on A.
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let r = next(&sup_b, "s1", 60).await;
        (started.elapsed(), r, sup_b)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let x = queue(&a, "s1", &["make", "test"]).await;
    let (took, r, sup_b) = waiting.await.unwrap();
    assert!(took < Duration::from_secs(20), "woken after {took:?}");
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.json()["exec_id"], x.as_str());

    // The person follows on A; the output is posted to B.
    let follow = |from: (u64, u64)| {
        let c = a.admin.clone();
        let x = x.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let v = output(&c, "s1", &x, from, 60).await;
            (started.elapsed(), v)
        })
    };
    let first = follow((0, 0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        chunk(&sup_b, "s1", &x, "stdout", 0, b"building\n")
            .await
            .status,
        204
    );
    let (took, v) = first.await.unwrap();
    assert!(took < Duration::from_secs(20), "woken after {took:?}");
    assert_eq!(streams(&v).0, b"building\n");

    let last = follow((9, 0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        end(
            &sup_b,
            "s1",
            &x,
            json!({"exit_status": 0, "timed_out": false})
        )
        .await
        .status,
        204
    );
    let (took, v) = last.await.unwrap();
    assert!(took < Duration::from_secs(20), "woken after {took:?}");
    assert_eq!(
        (&v["exec"]["state"], &v["chunks"]),
        (&json!("exited"), &json!([]))
    );

    // Either gateway's supervisor client sees the same queue.
    assert_eq!(next(&sup_a, "s1", 0).await.status, 204);
    replica.stop();
}
