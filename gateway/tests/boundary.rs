//! A policy's boundary: every proposal is proved within it; one that
//! exceeds it is refused as it comes (stored `refused`, with the
//! witnesses and the candidate's rule to blame), in manual and in auto
//! mode; one whose containment the prover cannot settle is never approved
//! by the gateway and only by an admin. A boundary that the active
//! revision exceeds is refused with the findings. Setting and removing a
//! boundary is the admin's, audited, and moves what pending proposals
//! were proved against. Each test on SQLite and on PostgreSQL.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::time::Duration;

use bundle_trust::client::{Client, Response};
use common::*;
use gateway::server::ApprovalMode;
use serde_json::{Value, json};

async fn set_boundary(c: &Client, policy: &str, source: &str) -> Response {
    send(
        c,
        "PUT",
        &format!("/v1/policies/{policy}/boundary"),
        Some(json!({ "source": source })),
    )
    .await
}

/// An audit row's detail, which the log keeps as JSON text.
fn detail(row: &Value) -> Value {
    serde_json::from_str(row["detail"].as_str().unwrap()).unwrap()
}

fn actions(rows: &Value) -> Vec<String> {
    rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect()
}

/// Checks `p` was refused for leaving the boundary: the excess, its
/// witness (write access to api.github.com) and the candidate's rule.
fn assert_refused(p: &Value) {
    assert_eq!(p["state"], "refused", "{p}");
    assert_eq!(p["awaiting_approval"], false, "{p}");
    assert_eq!(p["decided_by"], "gateway", "{p}");
    assert_eq!(p["decision"], "boundary", "{p}");
    assert_eq!(p["review_token"], Value::Null, "{p}");
    assert_eq!(p["revision"], Value::Null, "{p}");
    let c = &p["containment"];
    assert_eq!(c["question"], "within", "{c}");
    assert_eq!(c["verdict"], "exceeds", "{c}");
    let findings = c["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{c}");
    let f = &findings[0];
    assert_eq!(f["witness"]["binary"], "/usr/bin/curl", "{f}");
    assert_eq!(f["witness"]["host"], "api.github.com", "{f}");
    let method = f["witness"]["method"].as_str().unwrap();
    assert!(!["GET", "HEAD"].contains(&method), "{f}");
    // The candidate's rule: line 10 of the proposed source.
    assert_eq!(f["new_rule"]["file"], "agent.policy", "{f}");
    assert_eq!(f["new_rule"]["line"], 10, "{f}");
    let reason = p["reason"].as_str().unwrap();
    assert!(
        reason.contains("exceeds the policy's boundary") && reason.contains("agent.policy:10"),
        "{reason}"
    );
}

/// BASE active as revision 1 (alice proposed, bob approved) and BASE set
/// as the boundary of `agent`.
async fn bounded(gw: &Gw) -> (Client, Client) {
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let first = propose(&alice, "agent", BASE).await;
    assert_eq!(approve(&bob, &first).await.status, 200);
    let r = set_boundary(&gw.admin, "agent", BASE).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let b = r.json();
    assert_eq!(b["checked_revision"], 1, "{b}");
    assert_eq!(b["containment"]["verdict"], "within", "{b}");
    (alice, bob)
}

both!(
    a_proposal_beyond_the_boundary_is_refused_in_manual_mode,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let (alice, bob) = bounded(&gw).await;
        let boundary = send(&alice, "GET", "/v1/policies/agent/boundary", None)
            .await
            .json();
        let p = propose(&alice, "agent", &wide()).await;
        assert_refused(&p);
        assert_eq!(p["boundary_digest"], boundary["digest"], "{p}");
        // Stored as answered, and nothing can approve it.
        let stored = send(&bob, "GET", &format!("/v1/proposals/{}", p["id"]), None)
            .await
            .json();
        assert_refused(&stored);
        let r = send(
            &bob,
            "POST",
            &format!("/v1/proposals/{}/approve", p["id"]),
            Some(json!({"review_token": "rt_x"})),
        )
        .await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        let r = send(
            &gw.admin,
            "POST",
            &format!("/v1/proposals/{}/approve", p["id"]),
            Some(json!({"review_token": "rt_x"})),
        )
        .await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        // A change within the boundary waits for a person as before, and
        // carries its proof within the boundary.
        let n = propose(&alice, "agent", &narrow()).await;
        assert_eq!(n["state"], "pending", "{n}");
        assert_eq!(n["containment"]["verdict"], "within", "{n}");
        assert_eq!(approve(&bob, &n).await.status, 200);
        // The log keeps the refusal and its reason.
        let rows = send(&gw.admin, "GET", "/v1/audit", None).await.json();
        let refused = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(detail)
            .find(|d| d["state"] == "refused")
            .unwrap_or_else(|| panic!("no refused propose row: {rows}"));
        assert_eq!(refused["containment"], "exceeds", "{refused}");
        assert!(refused["refused"].is_string(), "{refused}");
        let v = send(&gw.admin, "GET", "/v1/audit/verify", None)
            .await
            .json();
        assert_eq!(v["ok"], true, "{v}");
    }
);

both!(
    a_proposal_beyond_the_boundary_is_refused_in_auto_mode,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Auto).await;
        let (alice, _bob) = bounded(&gw).await;
        let p = propose(&alice, "agent", &wide()).await;
        assert_refused(&p);
        assert_eq!(p["held"], Value::Null, "{p}");
        // Within the boundary and adding nothing: approved by the gateway.
        let n = propose(&alice, "agent", &narrow()).await;
        assert_eq!(n["state"], "approved", "{n}");
        assert_eq!(n["decision"], "auto", "{n}");
        assert_eq!(n["containment"]["verdict"], "within", "{n}");
    }
);

both!(
    a_first_revision_is_proved_within_a_boundary_set_before_it,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        // A boundary for a policy nobody proposed yet.
        let r = set_boundary(&gw.admin, "agent", BASE).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["checked_revision"], Value::Null);
        assert_eq!(r.json()["containment"], Value::Null);
        let p = propose(&alice, "agent", &wide()).await;
        assert_refused(&p);
        assert_eq!(p["base_revision"], Value::Null, "{p}");
        let ok = propose(&alice, "agent", BASE).await;
        assert_eq!(ok["state"], "pending", "{ok}");
        assert_eq!(approve(&bob, &ok).await.status, 200);
    }
);

both!(
    a_boundary_the_active_revision_exceeds_is_refused_with_findings,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let first = propose(&alice, "agent", &wide()).await;
        assert_eq!(approve(&bob, &first).await.status, 200);
        let r = set_boundary(&gw.admin, "agent", BASE).await;
        assert_eq!(r.status, 422, "{:?}", r.json());
        let body = r.json();
        assert_eq!(body["error"]["code"], "boundary_exceeded", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("revision 1"), "{message}");
        let c = &body["containment"];
        assert_eq!(c["verdict"], "exceeds", "{c}");
        let f = &c["findings"][0];
        assert_eq!(f["witness"]["host"], "api.github.com", "{f}");
        assert_eq!(f["new_rule"]["line"], 10, "{f}");
        // Nothing was set.
        let get = send(&gw.admin, "GET", "/v1/policies/agent/boundary", None).await;
        assert_eq!(get.status, 404, "{:?}", get.json());
        // A boundary that does not compile: its diagnostics.
        let r = set_boundary(&gw.admin, "agent", "policy \"agent\" {\n  allow ->\n}\n").await;
        assert_eq!(r.status, 422, "{:?}", r.json());
        let body = r.json();
        assert_eq!(body["error"]["code"], "boundary_invalid", "{body}");
        assert!(
            !body["diagnostics"]["files"][0]["diagnostics"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{body}"
        );
        // Wider than what runs: set.
        let r = set_boundary(&gw.admin, "agent", &wide()).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["containment"]["verdict"], "within");
    }
);

both!(
    only_an_admin_sets_or_removes_a_boundary_and_it_is_audited,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let rita = gw.person("rita", "reader").await;
        let r = set_boundary(&alice, "agent", BASE).await;
        assert_eq!(r.status, 403, "{:?}", r.json());
        let r = set_boundary(&gw.admin, "agent", BASE).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let set = r.json();
        assert_eq!(set["set_by"], "admin", "{set}");
        let read = send(&rita, "GET", "/v1/policies/agent/boundary", None).await;
        assert_eq!(read.status, 200, "{:?}", read.json());
        assert_eq!(read.json()["digest"], set["digest"]);
        assert_eq!(read.json()["source"], BASE);
        let r = send(&alice, "DELETE", "/v1/policies/agent/boundary", None).await;
        assert_eq!(r.status, 403, "{:?}", r.json());
        let r = send(&gw.admin, "DELETE", "/v1/policies/agent/boundary", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json(), json!({"policy": "agent", "removed": true}));
        let r = send(&gw.admin, "DELETE", "/v1/policies/agent/boundary", None).await;
        assert_eq!(r.status, 404, "{:?}", r.json());
        // Without a boundary a proposal carries no containment.
        let p = propose(&alice, "agent", &wide()).await;
        assert_eq!(p["state"], "pending", "{p}");
        assert!(p.get("containment").is_none(), "{p}");
        let rows = send(&gw.admin, "GET", "/v1/audit", None).await.json();
        let a = actions(&rows);
        assert!(a.contains(&"boundary-set".to_owned()), "{a:?}");
        assert!(a.contains(&"boundary-remove".to_owned()), "{a:?}");
        let row = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["action"] == "boundary-set")
            .unwrap();
        assert_eq!(row["actor"], "admin", "{row}");
        assert_eq!(row["subject"], "policy:agent", "{row}");
        assert_eq!(detail(row)["digest"], set["digest"], "{row}");
    }
);

both!(
    a_proposal_proved_before_the_boundary_changed_is_proposed_again,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let first = propose(&alice, "agent", BASE).await;
        assert_eq!(approve(&bob, &first).await.status, 200);
        // Proved with no boundary; then one is set.
        let pending = propose(&alice, "agent", &narrow()).await;
        assert_eq!(pending["state"], "pending");
        let r = set_boundary(&gw.admin, "agent", BASE).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let r = approve(&bob, &pending).await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("boundary"), "{message}");
        let again = propose(&alice, "agent", &narrow()).await;
        assert_eq!(approve(&bob, &again).await.status, 200);
    }
);

/// A policy whose curl reaches `n` hosts (one rule each), less those in
/// `skip`: big enough that proving it takes far more than a millisecond.
fn hosts(n: usize, skip: &[usize]) -> String {
    let mut out = String::from("policy \"agent\" {\n  binaries agent = /usr/bin/curl\n");
    for i in (0..n).filter(|i| !skip.contains(i)) {
        out.push_str(&format!(
            "  allow agent -> h{i}.example.com:443 http read-only\n"
        ));
    }
    out.push_str("}\n");
    out
}

both!(
    an_unsettled_containment_is_left_to_an_admin,
    |b| async move {
        // A millisecond to prove a first revision within a boundary of
        // two hundred rules: the proof is inconclusive.
        let gw = Gw::start_with(b, ApprovalMode::Auto, Duration::from_millis(1)).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let r = set_boundary(&gw.admin, "agent", &hosts(200, &[])).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let p = propose(&alice, "agent", &hosts(200, &[7])).await;
        assert_eq!(p["state"], "pending", "{p}");
        assert_eq!(p["containment"]["verdict"], "inconclusive", "{p}");
        let held = p["held"].as_str().unwrap();
        assert!(
            held.contains("`inconclusive`") && held.contains("only an admin"),
            "{held}"
        );
        let r = approve(&bob, &p).await;
        assert_eq!(r.status, 403, "{:?}", r.json());
        let r = approve(&gw.admin, &p).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["decided_by"], "admin");
    }
);

both!(
    an_approval_racing_a_new_boundary_never_slips_past_it,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        for i in 0..6 {
            let policy = format!("agent{i}");
            let first = propose(&alice, &policy, &narrow()).await;
            assert_eq!(approve(&bob, &first).await.status, 200);
            let pending = propose(&alice, &policy, BASE).await;
            assert_eq!(pending["state"], "pending", "{pending}");
            let (approved, set) = tokio::join!(
                approve(&bob, &pending),
                set_boundary(&gw.admin, &policy, BASE)
            );
            match (approved.status, set.status) {
                // The approval came first and the boundary was proved
                // over what it made.
                (200, 200) => assert_eq!(set.json()["checked_revision"], 2, "{i}"),
                // The boundary came first: the proposal was proved
                // without it.
                (409, 200) => assert_eq!(set.json()["checked_revision"], 1, "{i}"),
                // The approval moved the policy while the boundary was
                // proved over revision 1.
                (200, 409) => {}
                other => panic!("{i}: {other:?} {:?} {:?}", approved.json(), set.json()),
            }
        }
    }
);

both!(
    a_database_from_before_boundaries_is_migrated,
    |b| async move {
        let Gw {
            dir, db, running, ..
        } = Gw::start(b, ApprovalMode::Manual).await;
        running.stop();
        {
            sqlx::any::install_default_drivers();
            let pool = sqlx::AnyPool::connect(&db).await.unwrap();
            for stmt in [
                "DROP TABLE boundaries",
                "ALTER TABLE proposals DROP COLUMN containment",
                "ALTER TABLE proposals DROP COLUMN boundary_digest",
            ] {
                sqlx::query(stmt).execute(&pool).await.unwrap();
            }
            pool.close().await;
        }
        // The old process's SQLite lock goes with its last connection.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let gw = Gw::start_on_dir(
            dir,
            db,
            ApprovalMode::Manual,
            Duration::from_secs(20),
            gateway::app::Limits::default(),
        )
        .await;
        let alice = gw.person("alice", "author").await;
        let r = set_boundary(&gw.admin, "agent", BASE).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_refused(&propose(&alice, "agent", &wide()).await);
    }
);

const GATEWAY: &str = env!("CARGO_BIN_EXE_openshell-gateway");

/// Runs the command line client against `gw` with the token in `token`:
/// exit code, stdout, stderr.
fn cli(gw: &Gw, token: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(GATEWAY)
        .args(args)
        .env("OPENSHELL_GATEWAY", &gw.url)
        .env("OPENSHELL_GATEWAY_CA", gw.path("ca.pem"))
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
async fn the_client_commands_set_a_boundary_and_show_a_refusal() {
    let gw = Gw::start(Backend::Sqlite, ApprovalMode::Manual).await;
    let admin = gw.path("admin.token");
    let (_alice, alice) = gw.person_file("alice", "author").await;
    let (_bob, bob) = gw.person_file("bob", "author").await;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    std::fs::create_dir_all(dir.path().join("wide")).unwrap();
    let base = write("agent.policy", BASE);
    let narrow_file = write("narrow.policy", &narrow());
    let wide_file = write("wide/agent.policy", &wide());

    // An author may not set one.
    let (code, _, err) = cli(&gw, &alice, &["boundary", "set", "agent", &narrow_file]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("403"), "{err}");
    // What runs (BASE) exceeds the narrower boundary: refused, with the
    // findings.
    let (code, _, _) = cli(&gw, &alice, &["propose", "agent", &base]);
    assert_eq!(code, 0);
    let (code, _, err) = cli(&gw, &bob, &["approve", "1"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&gw, &admin, &["boundary", "set", "agent", &narrow_file]);
    assert_eq!(code, 1, "{out}{err}");
    insta::assert_snapshot!("boundary_set_refused", err);
    let (code, out, err) = cli(&gw, &admin, &["boundary", "set", "agent", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("revision 1, which is active, is within it"),
        "{out}"
    );
    let (code, out, _) = cli(&gw, &alice, &["boundary", "show", "agent"]);
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["source"], BASE);
    // A proposal beyond it: exit 1, and `show` says what and where.
    let (code, out, err) = cli(&gw, &alice, &["propose", "agent", &wide_file]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("refused"), "{out}");
    let (code, out, _) = cli(&gw, &bob, &["show", "2"]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("refused_proposal_shown", out);
    let (code, out, err) = cli(&gw, &admin, &["boundary", "remove", "agent"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("removed"), "{out}");
}
