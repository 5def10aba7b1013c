//! `propose --from-denials`: the gateway reads a deny log against the
//! active revision, writes the narrowest change that admits its denials
//! into that revision's source, proves it like any proposal and leaves it
//! to a person, even with `--approval auto`. Lines it cannot use are
//! listed and the rest still used. Each API test on SQLite and on
//! PostgreSQL.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use bundle_trust::client::{Client, Response};
use common::*;
use gateway::server::ApprovalMode;
use serde_json::{Value, json};

/// A gateway in `mode` with BASE active as revision 1; an author who
/// did not approve it, and the active bundle's digest.
async fn started(b: Backend, mode: ApprovalMode) -> (Gw, Client, String) {
    let gw = Gw::start(b, mode).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let first = propose(&alice, "agent", BASE).await;
    assert_eq!(approve(&bob, &first).await.status, 200);
    let digest = first["digest"].as_str().unwrap().to_owned();
    (gw, alice, digest)
}

/// A refused connection as the supervisor logs it, under the bundle
/// `digest` of policy `agent`.
fn refused_connect(digest: &str, binary: &str, host: &str, port: u16) -> String {
    json!({
        "class_uid": 4001,
        "class_name": "Network Activity",
        "activity_id": 1,
        "type_uid": 400_101,
        "action_id": 2,
        "action": "Denied",
        "disposition_id": 2,
        "disposition": "Blocked",
        "message": "no rule allows this binary to reach this destination",
        "actor": { "process": { "pid": 41, "file": { "path": binary } } },
        "dst_endpoint": { "hostname": host, "ip": "104.16.0.35", "port": port },
        "connection_info": { "protocol_name": "tcp", "direction": "Outbound", "direction_id": 2 },
        "firewall_rule": { "name": "default", "type": "default deny" },
        "unmapped": { "syscall": "connect", "address": null, "note": null },
        "time": 1_767_000_000_000_u64,
        "policy": { "name": "agent", "uid": digest },
        "metadata": { "version": "1.3.0", "product": { "name": "openshell-supervisor" } }
    })
    .to_string()
}

async fn from_denials(c: &Client, policy: &str, body: Value) -> Response {
    send(
        c,
        "POST",
        &format!("/v1/policies/{policy}/proposals/from-denials"),
        Some(body),
    )
    .await
}

both!(
    the_advisors_proposal_admits_the_denials_and_waits_for_a_person,
    |b| async move {
        let (gw, alice, digest) = started(b, ApprovalMode::Auto).await;
        let log = [
            refused_connect(&digest, "/usr/bin/curl", "registry.npmjs.org", 443),
            refused_connect(&"0".repeat(64), "/usr/bin/curl", "evil.example", 443),
            "{\"class_uid\": 40".to_owned(),
            refused_connect(&digest, "/usr/bin/curl", "registry.npmjs.org", 443),
        ]
        .join("\n");
        let r = from_denials(
            &alice,
            "agent",
            json!({"denials": log, "log_name": "deny.log"}),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let p = r.json();
        assert_eq!(p["origin"], "advisor", "{p}");
        assert_eq!(p["state"], "pending", "{p}");
        assert_eq!(p["decided_by"], Value::Null, "auto approval took it: {p}");
        assert!(
            p["held"].as_str().unwrap().contains("advisor"),
            "the answer says why a person approves: {p}"
        );
        assert_ne!(p["verdict"], "no-new-access", "{p}");
        // The change is BASE with one rule for the one destination denied
        // under this revision, citing both lines that asked for it.
        let source = p["source"].as_str().unwrap();
        assert!(
            source.starts_with(BASE.trim_end_matches("}\n")),
            "the revision's source is kept: {source}"
        );
        let added = source
            .strip_prefix(BASE.trim_end_matches("}\n"))
            .unwrap()
            .trim_end_matches("}\n");
        assert_eq!(
            added,
            "\n  # denied in deny.log:1, 4\n  allow /usr/bin/curl -> registry.npmjs.org:443\n",
            "{source}"
        );
        assert!(
            !source.contains("evil.example"),
            "another bundle's denial: {source}"
        );
        let advice = &p["advice"];
        assert_eq!(advice["revision"], 1);
        assert_eq!(advice["lines"], 4);
        assert_eq!(advice["denials"], 2);
        let problems: Vec<i64> = advice["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["line"].as_i64().unwrap())
            .collect();
        assert_eq!(problems, [2, 3], "{advice}");
        assert!(
            advice["problems"][0]["message"]
                .as_str()
                .unwrap()
                .contains(&"0".repeat(64)),
            "{advice}"
        );
        // The proof shows the new reach, with a witness inside the rule.
        let reach = p["proof"]["reach"].as_array().unwrap();
        assert!(
            reach
                .iter()
                .any(|f| f["witness"]["host"] == "registry.npmjs.org"
                    && f["witness"]["binary"] == "/usr/bin/curl"),
            "{}",
            p["proof"]
        );
        // Stored with its origin; a person may approve it like any other.
        let stored = send(&alice, "GET", &format!("/v1/proposals/{}", p["id"]), None).await;
        assert_eq!(stored.json()["origin"], "advisor");
        assert!(stored.json().get("advice").is_none(), "only in the answer");
        let bob = gw.person("carol", "author").await;
        assert_eq!(approve(&bob, &p).await.status, 200);
    }
);

both!(
    denials_need_an_active_revision_and_something_to_admit,
    |b| async move {
        let (gw, alice, digest) = started(b, ApprovalMode::Manual).await;
        let r = from_denials(
            &alice,
            "other",
            json!({"denials": refused_connect(&digest, "/usr/bin/curl", "a.example", 443)}),
        )
        .await;
        assert_eq!(r.status, 409, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "no_active_revision");

        // Already allowed, or of another bundle: nothing to admit.
        let log = [
            refused_connect(&"0".repeat(64), "/usr/bin/curl", "a.example", 443),
            "not json".to_owned(),
        ]
        .join("\n");
        let r = from_denials(&alice, "agent", json!({"denials": log})).await;
        assert_eq!(r.status, 422, "{:?}", r.json());
        let e = &r.json()["error"];
        assert_eq!(e["code"], "nothing_to_suggest");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("2 line(s) could not be used, the first (line 1)"),
            "{message}"
        );

        // Only people propose; a widening asked by name is validated.
        let sandbox = gw.sandbox("sb-1", "agent").await;
        let body = json!({"denials": refused_connect(&digest, "/usr/bin/curl", "a.example", 443)});
        assert_eq!(
            from_denials(&sandbox, "agent", body.clone()).await.status,
            403
        );
        let mut wide = body;
        wide["generalize"] = json!(["everything"]);
        assert_eq!(from_denials(&alice, "agent", wide).await.status, 400);
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_proposes_from_a_log_file_and_shows_the_advice() {
    let (gw, _alice, digest) = started(Backend::Sqlite, ApprovalMode::Manual).await;
    let (_dave, token) = gw.person_file("dave", "author").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("deny.log");
    std::fs::write(
        &log,
        refused_connect(&digest, "/usr/bin/curl", "pypi.org", 443) + "\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_openshell-gateway"))
        .args(["propose", "agent", "--from-denials"])
        .arg(&log)
        .env("OPENSHELL_GATEWAY", &gw.url)
        .env("OPENSHELL_GATEWAY_CA", gw.path("ca.pem"))
        .env("OPENSHELL_GATEWAY_TOKEN_FILE", &token)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "pending",
        "written by the advisor from denials: only a person approves it",
        "the advisor read 1 line(s) against revision 1: 1 denial(s) admitted",
        "|   allow /usr/bin/curl -> pypi.org:443",
        "review token",
    ] {
        assert!(stdout.contains(expected), "`{expected}` in:\n{stdout}");
    }
}

both!(
    a_sandbox_asks_for_what_it_was_refused_within_its_limits,
    |b| async move {
        let (gw, alice, _) = started(b, ApprovalMode::Auto).await;
        // Only where the revision its sandbox runs enables the endpoint.
        let sb = gw.sandbox("sb-1", "agent").await;
        let first = json!({"denials": "{}", "rationale": "x"});
        let r = send(&sb, "POST", "/v1/sandboxes/sb-1/proposals", Some(first)).await;
        assert_eq!(r.status, 403, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "advisor_disabled");
        let advised = BASE.replace("\n}\n", "\n  advisor agent\n}\n");
        let p = propose(&alice, "agent", &advised).await;
        assert_eq!(p["verdict"], "new-reach", "{p}");
        let dave = gw.person("dave", "author").await;
        assert_eq!(approve(&dave, &p).await.status, 200);
        let digest = p["digest"].as_str().unwrap().to_owned();
        let ask = |host: &str, rationale: &str| {
            json!({
                "denials": refused_connect(&digest, "/usr/bin/curl", host, 443),
                "rationale": rationale,
            })
        };
        let post = |c: &Client, id: &str, body: Value| {
            let c = c.clone();
            let path = format!("/v1/sandboxes/{id}/proposals");
            async move { send(&c, "POST", &path, Some(body)).await }
        };
        let r = post(&sb, "sb-1", ask("pypi.org", "pip install needs the index")).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let p = r.json();
        assert_eq!(p["proposer"], "sandbox:sb-1");
        assert_eq!(p["origin"], "advisor");
        assert_eq!(p["rationale"], "pip install needs the index");
        assert_eq!(p["state"], "pending");
        assert_eq!(p["decided_by"], Value::Null, "auto approval took it: {p}");
        assert!(
            p["source"].as_str().unwrap().contains("pypi.org:443"),
            "{p}"
        );
        // Another sandbox's token, a person's, and an empty rationale.
        let other = gw.sandbox("sb-2", "agent").await;
        assert_eq!(
            post(&other, "sb-1", ask("a.example", "x")).await.status,
            403
        );
        assert_eq!(
            post(&alice, "sb-1", ask("a.example", "x")).await.status,
            403
        );
        assert_eq!(post(&sb, "sb-1", ask("a.example", "")).await.status, 400);
        let long = "x".repeat(2001);
        assert_eq!(post(&sb, "sb-1", ask("a.example", &long)).await.status, 400);
        // Three may wait for a person at once; the fourth waits its turn.
        for host in ["b.example", "c.example"] {
            assert_eq!(post(&sb, "sb-1", ask(host, "more")).await.status, 201);
        }
        let r = post(&sb, "sb-1", ask("d.example", "more")).await;
        assert_eq!(r.status, 429, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "too_many_pending");
        // Another sandbox's queue is its own.
        assert_eq!(
            post(&other, "sb-2", ask("d.example", "more")).await.status,
            201
        );
        // The sandbox cannot approve what it asked for.
        assert_eq!(approve(&sb, &p).await.status, 403);
    }
);
