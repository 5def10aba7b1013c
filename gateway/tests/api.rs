//! The API over real HTTPS on 127.0.0.1:0, each test on SQLite and on
//! PostgreSQL: proposals, proofs, approvals, refusals, long-polls, audit.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use gateway::server::ApprovalMode;
use serde_json::json;

both!(first_revision_needs_another_person, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Auto).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let p = propose(&alice, "agent", BASE).await;
    // No base: nothing to prove against, a person decides even in auto mode.
    assert_eq!(p["state"], "pending");
    assert_eq!(p["verdict"], json!(null));
    assert_eq!(p["base_revision"], json!(null));
    let own = approve(&alice, &p).await;
    assert_eq!(own.status, 403, "{:?}", own.json());
    assert!(
        own.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another person")
    );
    let ok = approve(&bob, &p).await;
    assert_eq!(ok.status, 200, "{:?}", ok.json());
    assert_eq!(ok.json()["revision"], 1);
    assert_eq!(ok.json()["decision"], "manual");
    let revs = send(&bob, "GET", "/v1/policies/agent/revisions", None)
        .await
        .json();
    assert_eq!(revs["active_revision"], 1);
    assert_eq!(revs["revisions"][0]["author"], "alice");
    assert_eq!(revs["revisions"][0]["approved_by"], "bob");
    assert_eq!(revs["revisions"][0]["digest"], p["digest"]);
});

// The stored proof is `diff --prove --format json` of the same pair.
both!(
    a_widening_waits_for_a_person_even_in_auto_mode,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Auto).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        assert_eq!(
            approve(&bob, &propose(&alice, "agent", BASE).await)
                .await
                .status,
            200
        );
        let p = propose(&alice, "agent", &wide()).await;
        assert_eq!(p["state"], "pending");
        assert_eq!(p["verdict"], "widened");
        assert_eq!(p["base_revision"], 1);
        let proof = &p["proof"];
        assert_eq!(proof["verdict"], "widened");
        let finding = &proof["findings"][0];
        assert_eq!(finding["category"], "capability_expansion");
        assert_eq!(finding["witness"]["host"], "api.github.com");
        for key in ["findings", "omitted", "notes", "stats"] {
            assert!(proof.get(key).is_some(), "`{key}` missing from {proof}");
        }
        // Narrowing is no new access: approved at once, by the gateway.
        let n = propose(&alice, "agent", &narrow()).await;
        assert_eq!(n["verdict"], "no-new-access", "{n}");
        assert_eq!(n["state"], "approved");
        assert_eq!(n["decision"], "auto");
        assert_eq!(n["decided_by"], "gateway");
        assert_eq!(n["revision"], 2);
        // The widening's base moved: its approval is refused.
        let stale = approve(&bob, &p).await;
        assert_eq!(stale.status, 409, "{:?}", stale.json());
        assert!(
            stale.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("re-propose")
        );
    }
);

both!(
    manual_mode_waits_for_a_person_even_on_no_new_access,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        assert_eq!(
            approve(&bob, &propose(&alice, "agent", BASE).await)
                .await
                .status,
            200
        );
        let n = propose(&alice, "agent", &narrow()).await;
        assert_eq!(n["verdict"], "no-new-access");
        assert_eq!(n["state"], "pending");
        let wrong = send(
            &bob,
            "POST",
            &format!("/v1/proposals/{}/approve", n["id"]),
            Some(json!({"review_token": "rt_0"})),
        )
        .await;
        assert_eq!(wrong.status, 409);
        assert_eq!(approve(&bob, &n).await.status, 200);
        let again = approve(&bob, &n).await;
        assert_eq!(
            again.status, 409,
            "an approved proposal cannot be approved twice"
        );
        let rejected = propose(&alice, "agent", &wide()).await;
        let r = send(
            &bob,
            "POST",
            &format!("/v1/proposals/{}/reject", rejected["id"]),
            Some(json!({"reason": "too wide"})),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["state"], "rejected");
        assert_eq!(approve(&bob, &rejected).await.status, 409);
    }
);

both!(two_approvals_racing_exactly_one_wins, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let carol = gw.person("carol", "admin").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    // The same proposal approved twice at once.
    let p = propose(&alice, "agent", &narrow()).await;
    let (x, y) = tokio::join!(approve(&bob, &p), approve(&carol, &p));
    let mut codes = [x.status, y.status];
    codes.sort_unstable();
    assert_eq!(codes, [200, 409], "{:?} {:?}", x.json(), y.json());
    // Two proposals on the same base approved at once: one revision only.
    let p1 = propose(&alice, "agent", &wide()).await;
    let p2 = propose(&alice, "agent", BASE).await;
    let (x, y) = tokio::join!(approve(&bob, &p1), approve(&carol, &p2));
    let mut codes = [x.status, y.status];
    codes.sort_unstable();
    assert_eq!(codes, [200, 409], "{:?} {:?}", x.json(), y.json());
    let revs = send(&bob, "GET", "/v1/policies/agent/revisions", None)
        .await
        .json();
    assert_eq!(revs["revisions"].as_array().unwrap().len(), 3);
    assert_eq!(revs["active_revision"], 3);
    // The losers' refusals and the winners' approvals were appended at the
    // same time: the chain is still one line.
    let audit = send(&bob, "GET", "/v1/audit/verify", None).await.json();
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(
        audit["rows"].as_u64().unwrap(),
        send(&bob, "GET", "/v1/audit", None).await.json()["rows"]
            .as_array()
            .unwrap()
            .len() as u64
    );
});

both!(
    a_policy_with_errors_is_stored_invalid_with_check_diagnostics,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Auto).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let broken = BASE.replace("binaries agent", "binaries agnet");
        let p = propose(&alice, "agent", &broken).await;
        assert_eq!(p["state"], "invalid");
        assert_eq!(p["awaiting_approval"], false);
        // What `openshell-policy check --format json agent.policy` prints.
        insta::assert_json_snapshot!("invalid_proposal_diagnostics", p["diagnostics"]);
        let files = &p["diagnostics"]["files"];
        assert_eq!(files[0]["path"], "agent.policy");
        let d = &files[0]["diagnostics"][0];
        assert_eq!(d["severity"], "error");
        assert_eq!(d["file"], "agent.policy");
        assert!(d["code"].as_str().unwrap().starts_with('E'), "{d}");
        for key in [
            "message",
            "help",
            "line",
            "column",
            "end_line",
            "end_column",
        ] {
            assert!(d.get(key).is_some(), "`{key}` missing from {d}");
        }
        assert_eq!(p["diagnostics"]["errors"], json!([]));
        let r = send(
            &bob,
            "POST",
            &format!("/v1/proposals/{}/approve", p["id"]),
            Some(json!({"review_token": "rt_x"})),
        )
        .await;
        assert_eq!(r.status, 409);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invalid, not pending")
        );
        // An include cannot read the gateway's disk.
        let inc = BASE.replace(
            "binaries agent",
            "include \"/etc/passwd\"\n  binaries agent",
        );
        let p = propose(&alice, "agent", &inc).await;
        assert_eq!(p["state"], "invalid");
        assert!(p["diagnostics"].to_string().contains("not read from disk"));
    }
);

both!(bad_input_gets_a_json_4xx, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let alice = gw.person("alice", "author").await;
    let reader = gw.person("rita", "reader").await;
    let post = |c: &bundle_trust::client::Client, path: &str, body: &'static [u8]| {
        let c = c.clone();
        let path = path.to_owned();
        async move {
            // Raw bytes: send through a JSON string is not possible, so
            // build the request by hand with the client's headers.
            let v: Option<serde_json::Value> = serde_json::from_slice(body).ok();
            match v {
                Some(v) => c.send("POST", &path, Some(&v), &[], T).await.unwrap(),
                None => c
                    .send(
                        "POST",
                        &path,
                        None,
                        &[("content-type", "application/json")],
                        T,
                    )
                    .await
                    .unwrap(),
            }
        }
    };
    let cases = [
        (
            post(&alice, "/v1/policies/agent/proposals", b"{\"source\": 1}").await,
            400,
        ),
        (
            post(&alice, "/v1/policies/agent/proposals", b"not json").await,
            400,
        ),
        (
            send(
                &alice,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({"source": BASE, "extra": 1})),
            )
            .await,
            400,
        ),
        (
            send(
                &alice,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({"source": BASE, "format": "toml"})),
            )
            .await,
            400,
        ),
        (
            send(
                &alice,
                "POST",
                "/v1/policies/bad%20name/proposals",
                Some(json!({"source": BASE})),
            )
            .await,
            400,
        ),
        (
            send(
                &alice,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({"source": "x".repeat(2 * 1024 * 1024)})),
            )
            .await,
            413,
        ),
        (send(&alice, "GET", "/v1/proposals/abc", None).await, 400),
        (send(&alice, "GET", "/v1/proposals/999", None).await, 404),
        (send(&alice, "GET", "/v1/nothing", None).await, 404),
        (
            send(
                &reader,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({"source": BASE})),
            )
            .await,
            403,
        ),
        (
            send(
                &alice.with_token("osg_not_a_token"),
                "GET",
                "/v1/proposals",
                None,
            )
            .await,
            401,
        ),
        (
            send(
                &alice,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "x", "role": "admin"})),
            )
            .await,
            403,
        ),
        (
            send(
                &gw.admin,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "x", "role": "root"})),
            )
            .await,
            400,
        ),
        (
            send(
                &gw.admin,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "gateway", "role": "author"})),
            )
            .await,
            400,
        ),
    ];
    for (i, (r, want)) in cases.iter().enumerate() {
        assert_eq!(r.status, *want, "case {i}: {:?}", r.json());
        let e = &r.json()["error"];
        assert_eq!(e["status"], *want, "case {i}");
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "case {i}"
        );
    }
    // Nothing was stored by any of them.
    let list = send(&reader, "GET", "/v1/proposals", None).await.json();
    assert_eq!(list["proposals"], json!([]));
});

both!(
    sandbox_tokens_reach_only_their_own_sandbox,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        assert_eq!(
            approve(&bob, &propose(&alice, "agent", BASE).await)
                .await
                .status,
            200
        );
        let one = gw.sandbox("one", "agent").await;
        let _two = gw.sandbox("two", "agent").await;
        assert_eq!(
            send(&one, "GET", "/v1/sandboxes/one/bundle", None)
                .await
                .status,
            200
        );
        assert_eq!(
            send(&one, "GET", "/v1/sandboxes/two/bundle", None)
                .await
                .status,
            403
        );
        assert_eq!(
            send(
                &one,
                "POST",
                "/v1/sandboxes/two/status",
                Some(json!({"revision": 1, "digest": "x", "result": "applied"}))
            )
            .await
            .status,
            403
        );
        assert_eq!(
            send(
                &one,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({"source": BASE}))
            )
            .await
            .status,
            403
        );
        assert_eq!(send(&one, "GET", "/v1/proposals", None).await.status, 403);
        // An expired sandbox token.
        let r = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "old", "policy": "agent", "ttl_seconds": 0})),
        )
        .await;
        let old = gw.admin.with_token(r.json()["token"].as_str().unwrap());
        let e = send(&old, "GET", "/v1/sandboxes/old/bundle", None).await;
        assert_eq!(e.status, 401);
        assert_eq!(e.json()["error"]["code"], "token_expired");
        // A duplicate sandbox is a conflict.
        let dup = send(
            &gw.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "one", "policy": "agent"})),
        )
        .await;
        assert_eq!(dup.status, 409);
    }
);

both!(
    an_approval_wakes_a_long_poll_with_a_signed_bundle,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        assert_eq!(
            approve(&bob, &propose(&alice, "agent", BASE).await)
                .await
                .status,
            200
        );
        let sb = gw.sandbox("sb", "agent").await;
        let first = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await;
        assert_eq!(first.status, 200);
        let env: bundle_trust::Envelope = serde_json::from_slice(&first.body).unwrap();
        let trust = gw.trust();
        let v = trust.verify(&env, "sb", None).unwrap();
        assert_eq!(v.claims.revision, 1);
        assert_eq!(
            first.etag.as_deref(),
            Some(format!("\"{}\"", v.claims.digest).as_str())
        );
        // No change: 304 once the wait ends.
        let inm = format!("\"{}\"", v.claims.digest);
        let t0 = Instant::now();
        let r = sb
            .send(
                "GET",
                "/v1/sandboxes/sb/bundle?wait=1",
                None,
                &[("if-none-match", &inm)],
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.status, 304);
        assert!(t0.elapsed() >= Duration::from_millis(900));
        // A waiting poll returns as soon as a change is approved.
        let p = propose(&alice, "agent", &narrow()).await;
        let poll = {
            let sb = sb.clone();
            let inm = inm.clone();
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
                (r, t0.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let approved = Instant::now();
        assert_eq!(approve(&bob, &p).await.status, 200);
        let (r, waited) = poll.await.unwrap();
        assert_eq!(r.status, 200);
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        assert!(approved.elapsed() < Duration::from_secs(5));
        let env: bundle_trust::Envelope = serde_json::from_slice(&r.body).unwrap();
        let v2 = trust.verify(&env, "sb", Some(1)).unwrap();
        assert_eq!(v2.claims.revision, 2);
        assert_eq!(v2.claims.digest, p["digest"].as_str().unwrap());
        // The supervisor reports; `status --wait` sees it.
        let waiter = {
            let reader = gw.person("rita", "reader").await;
            tokio::spawn(async move {
                send(&reader, "GET", "/v1/sandboxes/sb?revision=2&wait=30", None).await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let r = send(
            &sb,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(json!({"revision": 2, "digest": v2.claims.digest, "result": "network_only"})),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let s = waiter.await.unwrap().json();
        assert_eq!(s["applied_revision"], 2);
        assert_eq!(s["relaunch_required"], true);
        assert_eq!(s["in_sync"], true);
        // A refusal (of an older revision offered again) keeps what runs.
        let r = send(&sb, "POST", "/v1/sandboxes/sb/status", Some(json!({"revision": 1, "digest": v.claims.digest, "result": "refused", "error": "older than the revision in force"}))).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        assert_eq!(r.json()["applied_revision"], 2);
        assert_eq!(r.json()["result"], "refused");
        let bad = send(
            &sb,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(json!({"revision": 3, "digest": "x", "result": "maybe"})),
        )
        .await;
        assert_eq!(bad.status, 400);
    }
);

both!(
    rollback_is_a_proved_proposal_and_a_new_revision,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let first = propose(&alice, "agent", BASE).await;
        assert_eq!(approve(&bob, &first).await.status, 200);
        assert_eq!(
            approve(&bob, &propose(&alice, "agent", &narrow()).await)
                .await
                .status,
            200
        );
        let r = send(
            &alice,
            "POST",
            "/v1/policies/agent/rollback",
            Some(json!({"revision": 1})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let p = r.json();
        assert_eq!(p["rollback_of"], 1);
        assert_eq!(p["base_revision"], 2);
        // Back to revision 1 adds example.com again: proved, not waved through.
        assert_eq!(p["verdict"], "new-reach");
        assert_eq!(p["digest"], first["digest"]);
        let ok = approve(&bob, &p).await;
        assert_eq!(ok.json()["revision"], 3);
        let rev = send(&bob, "GET", "/v1/policies/agent/revisions/3", None)
            .await
            .json();
        assert_eq!(rev["source"], BASE);
        assert_eq!(rev["bundle"]["digest"], first["digest"]);
        // Proposing what is active is refused.
        let same = send(
            &alice,
            "POST",
            "/v1/policies/agent/proposals",
            Some(json!({"source": BASE})),
        )
        .await;
        assert_eq!(same.status, 422);
        let none = send(
            &alice,
            "POST",
            "/v1/policies/agent/rollback",
            Some(json!({"revision": 9})),
        )
        .await;
        assert_eq!(none.status, 404);
    }
);

/// A policy large enough that proving it takes longer than a millisecond.
fn large(hosts: usize, skip: Option<usize>) -> String {
    let mut s = String::from(
        "policy \"big\" {\n  credential pat {\n    secret env PAT\n    placeholder env PAT\n    inject replace\n    hosts api.github.com\n  }\n  binaries agent = /usr/bin/curl\n",
    );
    for i in 0..hosts {
        if Some(i) != skip {
            s.push_str(&format!(
                "  allow agent -> h{i}.example.com:443 http read-only\n"
            ));
        }
    }
    s.push_str("  allow agent -> api.github.com:443 http read-only\n}\n");
    s
}

both!(
    a_prover_timeout_in_auto_mode_stays_pending,
    |b| async move {
        let gw = Gw::start_with(b, ApprovalMode::Auto, Duration::from_millis(1)).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        assert_eq!(
            approve(&bob, &propose(&alice, "big", &large(300, None)).await)
                .await
                .status,
            200
        );
        // A rule removed alone is proved from its slice well within the
        // grace the search has past the deadline; a Landlock change too
        // makes the prover model the whole bundles, which takes longer.
        let changed = large(300, Some(7)).replacen("  binaries", "  fs read /opt\n  binaries", 1);
        let p = propose(&alice, "big", &changed).await;
        assert_eq!(p["verdict"], "inconclusive", "{}", p["proof"]);
        assert_eq!(p["state"], "pending");
        assert!(
            p["proof"]["inconclusive"]
                .as_str()
                .unwrap()
                .contains("1 ms"),
            "{}",
            p["proof"]
        );
        assert_eq!(
            approve(&bob, &p).await.status,
            200,
            "a person may still approve"
        );
    }
);

both!(
    the_audit_chain_records_everything_and_detects_tampering,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let p = propose(&alice, "agent", BASE).await;
        assert_eq!(approve(&alice, &p).await.status, 403);
        assert_eq!(approve(&bob, &p).await.status, 200);
        let sb = gw.sandbox("sb", "agent").await;
        assert_eq!(
            send(&sb, "GET", "/v1/sandboxes/sb/bundle", None)
                .await
                .status,
            200
        );
        // A delivery's row is written just after the answer.
        let mut rows = send(&bob, "GET", "/v1/audit", None).await.json();
        for _ in 0..100 {
            if rows.to_string().contains("\"deliver\"") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            rows = send(&bob, "GET", "/v1/audit", None).await.json();
        }
        let actions: Vec<&str> = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["action"].as_str().unwrap())
            .collect();
        for a in [
            "token-create",
            "propose",
            "refused",
            "approve",
            "sandbox-create",
            "deliver",
        ] {
            assert!(actions.contains(&a), "`{a}` not in {actions:?}");
        }
        let approval = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["action"] == "approve")
            .unwrap();
        let detail: serde_json::Value =
            serde_json::from_str(approval["detail"].as_str().unwrap()).unwrap();
        assert_eq!(approval["actor"], "bob");
        assert_eq!(detail["decision"], "manual");
        assert_eq!(detail["revision"], 1);
        let ok = send(&bob, "GET", "/v1/audit/verify", None).await.json();
        assert_eq!(ok["ok"], true, "{ok}");

        let pool = {
            sqlx::any::install_default_drivers();
            sqlx::AnyPool::connect(&gw.db).await.unwrap()
        };
        // Edit a row.
        sqlx::query("UPDATE audit SET actor = 'mallory' WHERE action = 'approve'")
            .execute(&pool)
            .await
            .unwrap();
        let bad = send(&bob, "GET", "/v1/audit/verify", None).await.json();
        assert_eq!(bad["ok"], false);
        assert!(bad["problems"].to_string().contains("edited"), "{bad}");
        sqlx::query("UPDATE audit SET actor = 'bob' WHERE action = 'approve'")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(
            send(&bob, "GET", "/v1/audit/verify", None).await.json()["ok"],
            true
        );
        // Revisions cannot be changed or deleted, even with the database's own
        // tools.
        for q in ["UPDATE revisions SET source = 'x'", "DELETE FROM revisions"] {
            let e = sqlx::query(q).execute(&pool).await.unwrap_err();
            assert!(e.to_string().contains("revisions are immutable"), "{e}");
        }
        // Delete a row in the middle.
        sqlx::query("DELETE FROM audit WHERE seq = 2")
            .execute(&pool)
            .await
            .unwrap();
        let bad = send(&bob, "GET", "/v1/audit/verify", None).await.json();
        assert_eq!(bad["ok"], false);
        assert!(bad["problems"].to_string().contains("missing"), "{bad}");
    }
);
