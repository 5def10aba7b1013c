//! Managing tokens and sandboxes, validating status reports, and paging
//! through the audit log, each test on SQLite and on PostgreSQL and over
//! real HTTPS. The security items are attacks: the attacker tries and fails.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::time::{Duration, Instant};

use bundle_trust::client::Client;
use common::*;
use gateway::server::{self, ApprovalMode, Config, Running};
use gateway::store::AuditEntry;
use serde_json::{Value, json};

/// Starts a gateway on `dir` and `db`; SQLite's lock may still be held for
/// a moment by a gateway just stopped, so this tries for a while.
async fn start_on(dir: &std::path::Path, db: &str) -> Running {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = server::start(Config {
            dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            db: db.to_owned(),
            approval: ApprovalMode::Manual,
            prove_timeout: Duration::from_secs(20),
            limits: gateway::app::Limits::default(),
            clients: quiet(),
            sandboxes: gateway::app::SandboxSettings::default(),
        })
        .await;
        match r {
            Ok(r) => return r,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying start: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn client_for(running: &Running, ca: &[u8], token: &str) -> Client {
    Client::new(
        &format!("https://127.0.0.1:{}", running.addr.port()),
        ca,
        token,
    )
    .unwrap()
}

fn message(r: &bundle_trust::client::Response) -> String {
    r.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A gateway whose policy `agent` has revision 1, approved.
async fn with_policy(b: Backend) -> (Gw, Client, Client) {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let r = approve(&bob, &propose(&alice, "agent", BASE).await).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    (gw, alice, bob)
}

fn actions(rows: &Value) -> Vec<String> {
    rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect()
}

both!(a_revoked_token_is_refused_at_once, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let alice = gw.person("alice", "author").await;
    let rita = gw.person("rita", "reader").await;
    assert_eq!(send(&alice, "GET", "/v1/proposals", None).await.status, 200);

    // The list names every token and never a way to use one.
    let list = send(&gw.admin, "GET", "/v1/tokens", None).await;
    assert_eq!(list.status, 200, "{:?}", list.json());
    let tokens = list.json()["tokens"].as_array().unwrap().clone();
    let names: Vec<&str> = tokens.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["admin", "alice", "rita"]);
    let a = tokens.iter().find(|t| t["name"] == "alice").unwrap();
    assert_eq!(a["role"], "author");
    assert!(a["created_at"].as_i64().unwrap() > 1_700_000_000, "{a}");
    for t in &tokens {
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["created_at", "expires_at", "name", "role", "sandbox"],
            "{t}"
        );
    }
    let text = String::from_utf8_lossy(&list.body).into_owned();
    let admin_token = std::fs::read_to_string(gw.path("admin.token")).unwrap();
    assert!(!text.contains(admin_token.trim()));
    assert!(!text.contains(&gateway::server::token_hash(&admin_token)));

    // Only an admin lists or revokes.
    assert_eq!(send(&rita, "GET", "/v1/tokens", None).await.status, 403);
    let r = send(&alice, "DELETE", "/v1/tokens/rita", None).await;
    assert_eq!(r.status, 403);
    assert_eq!(send(&rita, "GET", "/v1/proposals", None).await.status, 200);

    // Another replica on the same database (Postgres; SQLite serves one
    // process) sees the revocation at once too.
    let replica = match b {
        Backend::Postgres => {
            let r = start_on(gw.dir.path(), &gw.db).await;
            let c =
                client_for(&r, &gw.ca, &admin_token).with_token(&alice_token(&gw, "alice2").await);
            Some((r, c))
        }
        Backend::Sqlite => None,
    };
    if let Some((_, c)) = &replica {
        assert_eq!(send(c, "GET", "/v1/proposals", None).await.status, 200);
    }

    let r = send(&gw.admin, "DELETE", "/v1/tokens/alice", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json(), json!({"name": "alice", "revoked": true}));
    let refused = send(&alice, "GET", "/v1/proposals", None).await;
    assert_eq!(refused.status, 401, "{:?}", refused.json());
    let again = send(&gw.admin, "DELETE", "/v1/tokens/alice", None).await;
    assert_eq!(again.status, 404);
    assert!(message(&again).contains("alice"), "{:?}", again.json());
    if let Some((running, c)) = replica {
        let r = send(&gw.admin, "DELETE", "/v1/tokens/alice2", None).await;
        assert_eq!(r.status, 200);
        assert_eq!(send(&c, "GET", "/v1/proposals", None).await.status, 401);
        running.stop();
    }

    // The file's admin token is replaced through the file, not the API.
    let r = send(&gw.admin, "DELETE", "/v1/tokens/admin", None).await;
    assert_eq!(r.status, 403);
    assert!(message(&r).contains("admin.token"), "{:?}", r.json());
    for bad in ["bad%20name", "sandbox:", "%zz", "a%2Fb"] {
        let r = send(&gw.admin, "DELETE", &format!("/v1/tokens/{bad}"), None).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.json());
    }
    let rows = send(&rita, "GET", "/v1/audit", None).await.json();
    let revoke = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "token-revoke")
        .unwrap();
    assert_eq!(revoke["actor"], "admin");
    assert_eq!(revoke["subject"], "token:alice");
});

/// A token named `name` with role author.
async fn alice_token(gw: &Gw, name: &str) -> String {
    let r = send(
        &gw.admin,
        "POST",
        "/v1/tokens",
        Some(json!({"name": name, "role": "author"})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()["token"].as_str().unwrap().to_owned()
}

both!(
    the_old_admin_token_is_refused_once_the_file_is_rewritten,
    |b| async move {
        let Gw {
            dir,
            db,
            running,
            ca,
            admin,
            ..
        } = Gw::start(b, ApprovalMode::Manual).await;
        let old_token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
        assert_eq!(send(&admin, "GET", "/v1/tokens", None).await.status, 200);
        running.stop();

        let new = gateway::dir::new_token();
        std::fs::write(dir.path().join("admin.token"), format!("{new}\n")).unwrap();
        let running = start_on(dir.path(), &db).await;
        let old = client_for(&running, &ca, &old_token);
        let refused = send(&old, "GET", "/v1/tokens", None).await;
        assert_eq!(refused.status, 401, "{:?}", refused.json());
        let fresh = client_for(&running, &ca, &new);
        let list = send(&fresh, "GET", "/v1/tokens", None).await;
        assert_eq!(list.status, 200, "{:?}", list.json());
        let tokens = list.json()["tokens"].as_array().unwrap().clone();
        assert_eq!(tokens.iter().filter(|t| t["name"] == "admin").count(), 1);
        let rows = send(&fresh, "GET", "/v1/audit?limit=1000", None)
            .await
            .json();
        let replaced: Vec<&Value> = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["action"] == "token-replace")
            .collect();
        assert_eq!(replaced.len(), 1, "{rows}");
        assert_eq!(replaced[0]["actor"], "gateway");
        assert_eq!(replaced[0]["subject"], "token:admin");
        let detail: Value = serde_json::from_str(replaced[0]["detail"].as_str().unwrap()).unwrap();
        assert_eq!(detail["revoked"], 1);
        let seen = rows["rows"].as_array().unwrap().len();
        running.stop();

        // The same file again: nothing to replace, nothing written.
        let running = start_on(dir.path(), &db).await;
        let fresh = client_for(&running, &ca, &new);
        let rows = send(&fresh, "GET", "/v1/audit?limit=1000", None)
            .await
            .json();
        assert_eq!(rows["rows"].as_array().unwrap().len(), seen, "{rows}");
        let old = client_for(&running, &ca, &old_token);
        assert_eq!(send(&old, "GET", "/v1/tokens", None).await.status, 401);
        let v = send(&fresh, "GET", "/v1/audit/verify", None).await.json();
        assert_eq!(v["ok"], true, "{v}");
        running.stop();
    }
);

both!(
    a_database_from_before_unique_names_keeps_the_newest_of_each,
    |b| async move {
        let Gw {
            dir,
            db,
            running,
            ca,
            ..
        } = Gw::start(b, ApprovalMode::Manual).await;
        running.stop();
        // What an older gateway could leave: no unique index, two tokens
        // named alice, and the admin row of an older `admin.token`.
        let (old_alice, new_alice) = (gateway::dir::new_token(), gateway::dir::new_token());
        {
            sqlx::any::install_default_drivers();
            let pool = sqlx::AnyPool::connect(&db).await.unwrap();
            sqlx::query("DROP INDEX tokens_name")
                .execute(&pool)
                .await
                .unwrap();
            for (t, name, at) in [
                (old_alice.clone(), "alice", 100_i64),
                (new_alice.clone(), "alice", 200),
                (gateway::dir::new_token(), "admin", 0),
            ] {
                sqlx::query("INSERT INTO tokens (hash, name, role, sandbox, expires_at, created_at) VALUES ($1, $2, 'author', NULL, NULL, $3)")
                    .bind(gateway::server::token_hash(&t))
                    .bind(name)
                    .bind(at)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            pool.close().await;
        }
        let running = start_on(dir.path(), &db).await;
        let admin_token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
        let admin = client_for(&running, &ca, &admin_token);
        let old = admin.with_token(&old_alice);
        assert_eq!(send(&old, "GET", "/v1/proposals", None).await.status, 401);
        let new = admin.with_token(&new_alice);
        assert_eq!(send(&new, "GET", "/v1/proposals", None).await.status, 200);
        let tokens = send(&admin, "GET", "/v1/tokens", None).await.json();
        let names: Vec<String> = tokens["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["admin", "alice"]);
        let rows = send(&admin, "GET", "/v1/audit", None).await.json();
        let a = actions(&rows);
        assert!(a.iter().any(|x| x == "token-revoke"), "{a:?}");
        let v = send(&admin, "GET", "/v1/audit/verify", None).await.json();
        assert_eq!(v["ok"], true, "{v}");
        // The index is there again: a second alice is a conflict.
        let dup = send(
            &admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "alice", "role": "reader"})),
        )
        .await;
        assert_eq!(dup.status, 409, "{:?}", dup.json());
        running.stop();
    }
);

both!(
    token_names_are_unique_and_some_are_reserved,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let _alice = gw.person("alice", "author").await;
        let dup = send(
            &gw.admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "alice", "role": "admin"})),
        )
        .await;
        assert_eq!(dup.status, 409, "{:?}", dup.json());
        assert!(
            message(&dup).contains("`alice` exists already"),
            "{:?}",
            dup.json()
        );
        for reserved in ["admin", "gateway", "anonymous", "sandbox:sb", "sandbox:"] {
            let r = send(
                &gw.admin,
                "POST",
                "/v1/tokens",
                Some(json!({"name": reserved, "role": "admin"})),
            )
            .await;
            assert_eq!(r.status, 400, "{reserved}: {:?}", r.json());
            assert!(message(&r).contains("choose another"), "{:?}", r.json());
        }
        // Once revoked, the name is free again.
        let r = send(&gw.admin, "DELETE", "/v1/tokens/alice", None).await;
        assert_eq!(r.status, 200);
        let again = gw.person("alice", "reader").await;
        assert_eq!(send(&again, "GET", "/v1/proposals", None).await.status, 200);
    }
);

both!(
    an_expired_sandbox_token_is_renewed_and_the_old_one_refused,
    |b| async move {
        let (gw, alice, _bob) = with_policy(b).await;
        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "sb", "policy": "agent", "ttl_seconds": 0})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let expired = gw.admin.with_token(r.json()["token"].as_str().unwrap());
        let e = send(&expired, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(e.json()["error"]["code"], "token_expired");
        // The expired token, a person, and another sandbox cannot renew it.
        let other = gw.sandbox("other", "agent").await;
        for who in [&expired, &alice, &other] {
            let r = send(who, "POST", "/v1/sandboxes/sb/token", Some(json!({}))).await;
            assert!(matches!(r.status, 401 | 403), "{:?}", r.json());
        }
        // Renewed with an empty body: no expiry.
        let r = gw
            .admin
            .send("POST", "/v1/sandboxes/sb/token", None, &[], T)
            .await
            .unwrap();
        assert_eq!(r.status, 201, "{:?}", r.json());
        assert_eq!(r.json()["expires_at"], Value::Null);
        let first = gw.admin.with_token(r.json()["token"].as_str().unwrap());
        let ok = send(&first, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(ok.status, 200);
        // Renewed again, with a lifetime: the token it replaces is refused
        // at once, and so is the expired one (now unknown).
        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes/sb/token",
            Some(json!({"ttl_seconds": 3600})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        assert!(r.json()["expires_at"].as_i64().unwrap() > 1_700_000_000);
        let second = gw.admin.with_token(r.json()["token"].as_str().unwrap());
        let ok = send(&second, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(ok.status, 200);
        let old = send(&first, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(old.status, 401, "{:?}", old.json());
        assert_eq!(old.json()["error"]["code"], "unauthorized");
        let gone = send(&expired, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(gone.status, 401);
        // One token per sandbox in the list.
        let tokens = send(&gw.admin, "GET", "/v1/tokens", None).await.json();
        let sb: Vec<&Value> = tokens["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["sandbox"] == "sb")
            .collect();
        assert_eq!(sb.len(), 1, "{tokens}");
        assert_eq!(sb[0]["name"], "sandbox:sb");
        assert_eq!(sb[0]["role"], "sandbox");
        // A sandbox's token can be revoked by name, its `:` escaped or not.
        let r = send(&gw.admin, "DELETE", "/v1/tokens/sandbox%3Asb", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let gone = send(&second, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(gone.status, 401);
        let r = send(&gw.admin, "DELETE", "/v1/tokens/sandbox:other", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let none = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes/ghost/token",
            Some(json!({})),
        )
        .await;
        assert_eq!(none.status, 404);
        let bad = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes/sb/token",
            Some(json!({"ttl_seconds": -1})),
        )
        .await;
        assert_eq!(bad.status, 400);
        let rows = send(&gw.admin, "GET", "/v1/audit", None).await.json();
        assert!(actions(&rows).iter().any(|a| a == "sandbox-token"));
    }
);

both!(
    status_reports_name_what_the_gateway_offered,
    |b| async move {
        let (gw, alice, bob) = with_policy(b).await;
        // Another policy with two revisions: its revision 2 is not `agent`'s.
        let o = propose(&alice, "other", &BASE.replace("\"agent\"", "\"other\"")).await;
        assert_eq!(approve(&bob, &o).await.status, 200);
        let o2 = propose(&alice, "other", &narrow().replace("\"agent\"", "\"other\"")).await;
        assert_eq!(approve(&bob, &o2).await.status, 200);
        let sb = gw.sandbox("sb", "agent").await;
        let env: bundle_trust::Envelope =
            serde_json::from_slice(&send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await.body)
                .unwrap();
        let digest = env.claims.digest.clone();
        let before = send(&sb, "GET", "/v1/sandboxes/sb", None).await.json();
        let attacks = [
            json!({"revision": 999, "digest": digest, "result": "applied"}),
            json!({"revision": 1, "digest": "sha256:bogus", "result": "applied"}),
            json!({"revision": 1, "digest": "sha256:bogus", "result": "network_only"}),
            json!({"revision": 2, "digest": o2["digest"], "result": "applied"}),
            json!({"revision": 0, "digest": digest, "result": "applied"}),
            json!({"revision": -5, "digest": digest, "result": "refused", "error": "x"}),
            json!({"revision": 7, "digest": "sha256:bogus", "result": "refused", "error": "x"}),
            json!({"revision": 1, "digest": "x".repeat(100_000), "result": "refused"}),
        ];
        for (i, body) in attacks.iter().enumerate() {
            let r = send(&sb, "POST", "/v1/sandboxes/sb/status", Some(body.clone())).await;
            assert_eq!(r.status, 422, "case {i}: {:?}", r.json());
            assert_eq!(r.json()["error"]["code"], "unprocessable");
            let m = message(&r);
            assert!(
                m.contains("is not a revision of policy `agent`")
                    || m.contains("is not the digest"),
                "case {i}: {m}"
            );
            assert!(m.len() < 500, "case {i}: the message echoes the input: {m}");
        }
        let after = send(&sb, "GET", "/v1/sandboxes/sb", None).await.json();
        assert_eq!(after, before, "a refused report changed nothing");

        // A megabyte of `error`: kept (and audited) as 2 KiB, marked as cut.
        let huge = "é".repeat(400_000);
        let r = send(
            &sb,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(json!({"revision": 1, "digest": digest, "result": "refused", "error": huge})),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let kept = r.json()["error"].as_str().unwrap().to_owned();
        assert!(kept.len() <= 2048, "{}", kept.len());
        assert!(kept.starts_with("éé"));
        assert!(kept.ends_with("[cut: 800000 bytes in all]"), "{kept}");
        let rows = send(&gw.admin, "GET", "/v1/audit?after=0&limit=1000", None)
            .await
            .json();
        let status = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .rfind(|r| r["action"] == "status")
            .unwrap();
        let detail = status["detail"].as_str().unwrap();
        assert!(detail.len() < 3000, "{}", detail.len());
        // What was offered can be reported.
        let ok = send(
            &sb,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(json!({"revision": 1, "digest": digest, "result": "applied"})),
        )
        .await;
        assert_eq!(ok.status, 200, "{:?}", ok.json());
        assert_eq!(ok.json()["in_sync"], true);
        assert_eq!(ok.json()["error"], Value::Null);
    }
);

both!(
    a_sandbox_needs_its_policy_and_can_be_deleted,
    |b| async move {
        let (gw, alice, _bob) = with_policy(b).await;
        let rita = gw.person("rita", "reader").await;
        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "ghost", "policy": "nope"})),
        )
        .await;
        assert_eq!(r.status, 404, "{:?}", r.json());
        let m = message(&r);
        assert!(
            m.contains("`nope`") && m.contains("propose it first"),
            "{m}"
        );
        let ghost = send(&gw.admin, "GET", "/v1/sandboxes/ghost", None).await;
        assert_eq!(ghost.status, 404);
        let tokens = send(&gw.admin, "GET", "/v1/tokens", None).await.json();
        let sandbox_tokens = tokens["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["role"] == "sandbox")
            .count();
        assert_eq!(sandbox_tokens, 0);

        let sb = gw.sandbox("sb", "agent").await;
        let _two = gw.sandbox("two", "agent").await;
        let list = send(&rita, "GET", "/v1/sandboxes", None).await;
        assert_eq!(list.status, 200, "{:?}", list.json());
        let ids: Vec<String> = list.json()["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids, ["sb", "two"]);
        assert_eq!(list.json()["sandboxes"][0]["desired_revision"], 1);
        assert_eq!(send(&sb, "GET", "/v1/sandboxes", None).await.status, 403);

        // Neither a person nor the sandbox itself may delete it.
        for who in [&alice, &rita, &sb] {
            let r = send(who, "DELETE", "/v1/sandboxes/sb", None).await;
            assert_eq!(r.status, 403, "{:?}", r.json());
        }
        // A supervisor waiting for a new revision hears at once.
        let env: bundle_trust::Envelope =
            serde_json::from_slice(&send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await.body)
                .unwrap();
        let inm = format!("\"{}\"", env.claims.digest);
        let poll = {
            let sb = sb.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let r = sb
                    .send(
                        "GET",
                        "/v1/sandboxes/sb/bundle?wait=30",
                        None,
                        &[("if-none-match", &inm)],
                        T,
                    )
                    .await
                    .unwrap();
                (r.status, t0.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = send(&gw.admin, "DELETE", "/v1/sandboxes/sb", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["deleted"], true);
        let (status, waited) = poll.await.unwrap();
        assert_eq!(status, 404);
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        // Its token is revoked, it is gone, and it can be created again
        // with a new token only.
        let old = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(old.status, 401);
        let gone = send(&rita, "GET", "/v1/sandboxes/sb", None).await;
        assert_eq!(gone.status, 404);
        let twice = send(&gw.admin, "DELETE", "/v1/sandboxes/sb", None).await;
        assert_eq!(twice.status, 404);
        let again = gw.sandbox("sb", "agent").await;
        let ok = send(&again, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(ok.status, 200);
        let old = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(old.status, 401);
        let rows = send(&rita, "GET", "/v1/audit", None).await.json();
        let del = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["action"] == "sandbox-delete")
            .unwrap();
        assert_eq!(del["actor"], "admin");
        let detail: Value = serde_json::from_str(del["detail"].as_str().unwrap()).unwrap();
        assert_eq!(detail["revoked"], 1);
    }
);

/// Appends `n` rows through the store, as refused requests would.
async fn fill_audit(gw: &Gw, n: usize) {
    for i in 0..n {
        gw.running
            .app
            .store
            .audit(AuditEntry {
                at: 1_800_000_000,
                actor: "anonymous".into(),
                action: "refused".into(),
                subject: format!("GET /v1/x{i}"),
                detail: json!({ "status": 401, "i": i }),
            })
            .await
            .unwrap();
    }
}

both!(the_audit_log_is_read_a_page_at_a_time, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let rita = gw.person("rita", "reader").await;
    let t0 = Instant::now();
    fill_audit(&gw, 2500).await;
    eprintln!("2500 audit rows appended in {:?}", t0.elapsed());
    let (head, _) = gw.running.app.store.audit_head().await.unwrap();
    assert!(head > 2500);

    let first = send(&rita, "GET", "/v1/audit", None).await;
    let v = first.json();
    assert_eq!(v["rows"].as_array().unwrap().len(), 100);
    assert_eq!(v["rows"][0]["seq"], 1);
    assert_eq!(v["next"], 100);
    eprintln!("a default page: {} bytes", first.body.len());
    let clamped = send(&rita, "GET", "/v1/audit?after=100&limit=5000", None)
        .await
        .json();
    assert_eq!(clamped["rows"].as_array().unwrap().len(), 1000);
    assert_eq!(clamped["rows"][0]["seq"], 101);
    assert_eq!(clamped["next"], 1100);
    for bad in ["limit=0", "limit=-3", "limit=x", "after=-1", "after=1e3"] {
        let r = send(&rita, "GET", &format!("/v1/audit?{bad}"), None).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.json());
    }
    // Paging through: every row once, in order, to a `null` cursor.
    let mut after = 0;
    let mut seen = 0_i64;
    let mut pages = 0;
    loop {
        let path = format!("/v1/audit?after={after}&limit=700");
        let page = send(&rita, "GET", &path, None).await.json();
        pages += 1;
        for r in page["rows"].as_array().unwrap() {
            seen += 1;
            assert_eq!(r["seq"], seen);
        }
        match page["next"].as_i64() {
            Some(n) => after = n,
            None => break,
        }
    }
    assert!(seen >= head, "{seen} < {head}");
    assert_eq!(pages, (seen + 699) / 700);
    // Past the end: an empty page and no cursor.
    let end = send(&rita, "GET", &format!("/v1/audit?after={seen}"), None)
        .await
        .json();
    assert_eq!(end, json!({"rows": [], "next": null}));

    // Verification reads page by page and stays exact.
    let t0 = Instant::now();
    let ok = send(&rita, "GET", "/v1/audit/verify", None).await.json();
    eprintln!("verify of {} rows: {:?}", ok["rows"], t0.elapsed());
    assert_eq!(ok["ok"], true, "{ok}");
    assert!(ok["rows"].as_i64().unwrap() >= head);
    let pool = {
        sqlx::any::install_default_drivers();
        sqlx::AnyPool::connect(&gw.db).await.unwrap()
    };
    // An edit in the second page, and a row missing across a page boundary.
    sqlx::query("UPDATE audit SET actor = 'mallory' WHERE seq = 1500")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM audit WHERE seq = 1001")
        .execute(&pool)
        .await
        .unwrap();
    let bad = send(&rita, "GET", "/v1/audit/verify", None).await.json();
    assert_eq!(bad["ok"], false);
    let problems = bad["problems"].as_array().unwrap();
    let has = |seq: i64, word: &str| {
        problems
            .iter()
            .any(|p| p["seq"] == seq && p["problem"].as_str().unwrap().contains(word))
    };
    assert!(has(1500, "edited"), "{bad}");
    assert!(has(1001, "missing"), "{bad}");
    assert!(has(1002, "link"), "{bad}");
    assert_eq!(problems.len(), 3, "{bad}");
});

/// Runs the client binary against `gw` with `token`: exit status, stdout,
/// stderr.
async fn cli(gw: &Gw, token: &str, args: &[&str]) -> (i32, String, String) {
    let token_file = gw.path(&format!("cli-{}.token", gateway::dir::new_token()));
    std::fs::write(&token_file, token).unwrap();
    let (url, ca) = (gw.url.clone(), gw.path("ca.pem"));
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_openshell-gateway"))
            .args(&args)
            .env("OPENSHELL_GATEWAY", url)
            .env("OPENSHELL_GATEWAY_CA", ca)
            .env("OPENSHELL_GATEWAY_TOKEN_FILE", token_file)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

both!(
    the_client_commands_manage_tokens_sandboxes_and_the_log,
    |b| async move {
        let (gw, _alice, _bob) = with_policy(b).await;
        let admin = std::fs::read_to_string(gw.path("admin.token")).unwrap();
        let (rc, out, err) = cli(
            &gw,
            &admin,
            &["token", "create", "carol", "--role", "reader"],
        )
        .await;
        assert_eq!(rc, 0, "{err}");
        let carol = serde_json::from_str::<Value>(&out).unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let (rc, out, err) = cli(&gw, &admin, &["token", "list"]).await;
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("\"carol\"") && !out.contains(&carol), "{out}");
        let (rc, _, err) = cli(
            &gw,
            &admin,
            &["token", "create", "carol", "--role", "reader"],
        )
        .await;
        assert_eq!(rc, 1);
        assert!(
            err.contains("exists already") && err.contains("409"),
            "{err}"
        );

        // A sandbox of a policy nobody proposed.
        let (rc, _, err) = cli(
            &gw,
            &admin,
            &["sandbox", "create", "sb", "--policy", "nope"],
        )
        .await;
        assert_eq!(rc, 1);
        assert!(
            err.contains("propose it first") && err.contains("404"),
            "{err}"
        );
        let (rc, _, err) = cli(
            &gw,
            &admin,
            &["sandbox", "create", "sb", "--policy", "agent"],
        )
        .await;
        assert_eq!(rc, 0, "{err}");
        let (rc, out, err) = cli(&gw, &carol, &["sandbox", "list"]).await;
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["sandboxes"][0]["id"],
            "sb"
        );
        let (rc, out, err) = cli(&gw, &admin, &["sandbox", "token", "sb", "--ttl", "60"]).await;
        assert_eq!(rc, 0, "{err}");
        let renewed = serde_json::from_str::<Value>(&out).unwrap();
        assert!(
            renewed["token"].as_str().unwrap().starts_with("osg_"),
            "{renewed}"
        );
        assert!(renewed["expires_at"].as_i64().is_some(), "{renewed}");
        let (rc, _, err) = cli(&gw, &carol, &["sandbox", "delete", "sb"]).await;
        assert_eq!(rc, 1, "a reader may not delete: {err}");
        let (rc, out, err) = cli(&gw, &admin, &["sandbox", "delete", "sb"]).await;
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("deleted"), "{out}");

        let (rc, out, err) = cli(&gw, &admin, &["token", "revoke", "carol"]).await;
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("revoked"), "{out}");
        let (rc, _, err) = cli(&gw, &carol, &["sandbox", "list"]).await;
        assert_eq!(rc, 1, "{err}");
        assert!(err.contains("401"), "{err}");

        // The log: one page, a later page, and all of it across pages.
        fill_audit(&gw, 250).await;
        let (head, _) = gw.running.app.store.audit_head().await.unwrap();
        let (rc, out, err) = cli(&gw, &admin, &["audit", "--limit", "5"]).await;
        assert_eq!(rc, 0, "{err}");
        let page = serde_json::from_str::<Value>(&out).unwrap();
        assert_eq!(page["rows"].as_array().unwrap().len(), 5);
        assert_eq!(page["next"], 5);
        let (rc, out, err) = cli(&gw, &admin, &["audit", "--after", "5", "--limit", "2"]).await;
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["rows"][0]["seq"],
            6
        );
        let (rc, out, err) = cli(&gw, &admin, &["audit", "--all", "--limit", "40"]).await;
        assert_eq!(rc, 0, "{err}");
        let all = serde_json::from_str::<Value>(&out).unwrap();
        let seqs: Vec<i64> = all["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["seq"].as_i64().unwrap())
            .collect();
        assert!(seqs.len() as i64 >= head, "{} < {head}", seqs.len());
        assert!(seqs.iter().enumerate().all(|(i, s)| *s == i as i64 + 1));
        let (rc, out, err) = cli(&gw, &admin, &["audit", "--all", "--after", "100000"]).await;
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["rows"],
            json!([])
        );
        let (rc, _, err) = cli(&gw, &admin, &["audit", "--limit", "0"]).await;
        assert_eq!(rc, 1, "{err}");
        let (rc, out, err) = cli(&gw, &admin, &["audit", "--verify"]).await;
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("\"ok\": true"), "{out}");
    }
);

both!(
    two_renewals_racing_leave_one_working_token,
    |b| async move {
        let (gw, _alice, _bob) = with_policy(b).await;
        let _sb = gw.sandbox("sb", "agent").await;
        for _ in 0..5 {
            let renew = || send(&gw.admin, "POST", "/v1/sandboxes/sb/token", Some(json!({})));
            let (x, y) = tokio::join!(renew(), renew());
            let ok: Vec<&bundle_trust::client::Response> =
                [&x, &y].into_iter().filter(|r| r.status == 201).collect();
            assert!(!ok.is_empty(), "{:?} {:?}", x.json(), y.json());
            for r in [&x, &y] {
                assert!(matches!(r.status, 201 | 409), "{:?}", r.json());
            }
            // Both may win one after the other, or one loses with `409`:
            // either way exactly one token works, the last renewal's.
            let working = {
                let mut n = 0;
                for r in &ok {
                    let c = gw.admin.with_token(r.json()["token"].as_str().unwrap());
                    if send(&c, "GET", "/v1/sandboxes/sb/bundle", None)
                        .await
                        .status
                        == 200
                    {
                        n += 1;
                    }
                }
                n
            };
            assert_eq!(working, 1);
        }
        let tokens = send(&gw.admin, "GET", "/v1/tokens", None).await.json();
        let n = tokens["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["sandbox"] == "sb")
            .count();
        assert_eq!(n, 1, "{tokens}");
    }
);
