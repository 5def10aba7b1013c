//! Proposals that carry their included fragments, size limits, proof
//! slots that keep small changes moving, and replicas that serve without
//! the CA's key; each test on SQLite and on PostgreSQL.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use gateway::app::Limits;
use gateway::server::ApprovalMode;
use serde_json::{Value, json};

const GATEWAY: &str = env!("CARGO_BIN_EXE_openshell-gateway");

fn policies() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("policy"))
        .collect();
    all.sort();
    all
}

/// `openshell-gateway ARGS` with the connection flags; status and stdout.
async fn client(gw: &Gw, token: &Path, args: &[&str]) -> (i32, String, String) {
    let ca = gw.path("ca.pem");
    let mut cmd = std::process::Command::new(GATEWAY);
    cmd.args(args)
        .arg("--gateway")
        .arg(&gw.url)
        .arg("--ca")
        .arg(&ca)
        .arg("--token-file")
        .arg(token);
    let out = run(cmd).await;
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn last_proposal(c: &bundle_trust::client::Client, policy: &str) -> Value {
    let list = send(c, "GET", &format!("/v1/proposals?policy={policy}"), None)
        .await
        .json();
    let id = list["proposals"].as_array().unwrap().last().unwrap()["id"].clone();
    send(c, "GET", &format!("/v1/proposals/{id}"), None)
        .await
        .json()
}

/// Runs a command off the runtime's threads.
async fn run(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn disk_digest(path: &Path) -> String {
    let (checked, bundle) = policy_lang::load::compile_file(path, None).unwrap();
    assert!(!checked.has_errors(), "{}", path.display());
    bundle.unwrap().digest
}

// Every shipped policy includes `fragments/system.policy`; proposed by the
// client as it is, it compiles to the bundle `compile` makes of the file.
both!(
    every_shipped_policy_proposed_by_the_client_compiles_as_on_disk,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let (alice, token) = gw.person_file("alice", "author").await;
        let all = policies();
        assert_eq!(all.len(), 10);
        for path in &all {
            let name = path.file_stem().unwrap().to_str().unwrap();
            let (code, out, err) =
                client(&gw, &token, &["propose", name, path.to_str().unwrap()]).await;
            assert_eq!(code, 0, "{name}: {out}{err}");
            let p = last_proposal(&alice, name).await;
            assert_eq!(p["state"], "pending", "{name}: {p}");
            assert_eq!(p["digest"], disk_digest(path), "{name}");
            assert!(
                p["files"]["fragments/system.policy"].is_string(),
                "{name}: {p}"
            );
        }
    }
);

// A rollback compiles the revision's source with the revision's fragments.
both!(a_rollback_recompiles_the_stored_fragments, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let (alice, token) = gw.person_file("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let all = policies();
    let first = all.iter().find(|p| p.ends_with("default.policy")).unwrap();
    let second = all.iter().find(|p| p.ends_with("codex.policy")).unwrap();
    for path in [first, second] {
        let (code, out, err) =
            client(&gw, &token, &["propose", "agent", path.to_str().unwrap()]).await;
        assert_eq!(code, 0, "{out}{err}");
        let p = last_proposal(&alice, "agent").await;
        let r = approve(&bob, &p).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
    let rev1 = send(&alice, "GET", "/v1/policies/agent/revisions/1", None)
        .await
        .json();
    assert!(
        rev1["files"]["fragments/system.policy"].is_string(),
        "{rev1}"
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
    assert_eq!(p["state"], "pending", "{p}");
    assert_eq!(p["digest"], disk_digest(first));
    assert_eq!(p["rollback_of"], 1);
});

const FRAGMENT: &str = "fragment \"tools\" {\n  binaries tools = /usr/bin/curl\n}\n";

fn including(path: &str) -> String {
    format!("policy \"p\" {{\n  include \"{path}\"\n  allow tools -> api.example.com:443\n}}\n")
}

async fn propose_files(c: &bundle_trust::client::Client, source: &str, files: Value) -> Value {
    let r = send(
        c,
        "POST",
        "/v1/policies/p/proposals",
        Some(json!({"source": source, "files": files})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()
}

// An include is looked up in `files` only: a path that climbs out, an
// absolute path or a file not sent are diagnostics at the include; the
// gateway's own disk is never read.
both!(
    an_include_that_escapes_is_refused_where_it_is,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let alice = gw.person("alice", "author").await;
        let secret = gw.path("secret.policy");
        std::fs::write(&secret, FRAGMENT).unwrap();
        for (path, files, expected) in [
            (
                "../secret.policy",
                json!({"../secret.policy": FRAGMENT}),
                "leaves the policy's directory",
            ),
            (secret.to_str().unwrap(), json!({}), "the path is absolute"),
            (
                "fragments/tools.policy",
                json!({}),
                "carries no file `fragments/tools.policy`",
            ),
        ] {
            let p = propose_files(&alice, &including(path), files).await;
            assert_eq!(p["state"], "invalid", "{path}: {p}");
            let d = &p["diagnostics"]["files"][0]["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["message"].as_str().unwrap().contains(expected))
                .unwrap_or_else(|| panic!("{path}: {p}"))
                .clone();
            assert_eq!(d["code"], "E0103");
            assert_eq!(d["file"], "p.policy");
            assert_eq!(d["line"], 2);
            assert_eq!(d["column"], 11);
        }
        // A file no include reaches is refused, not stored.
        let r = send(
            &alice,
            "POST",
            "/v1/policies/p/proposals",
            Some(json!({
                "source": including("fragments/tools.policy"),
                "files": {"fragments/tools.policy": FRAGMENT, "other.policy": FRAGMENT},
            })),
        )
        .await;
        assert_eq!(r.status, 400, "{:?}", r.json());
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`other.policy`")
        );
    }
);

// The review token covers the fragments: two proposals whose fragments
// differ only in a comment compile to one bundle but have two tokens.
both!(the_review_token_covers_the_fragments, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let alice = gw.person("alice", "author").await;
    let src = including("f/tools.policy");
    let a = propose_files(&alice, &src, json!({"f/tools.policy": FRAGMENT})).await;
    let commented = format!("# reviewed\n{FRAGMENT}");
    let b2 = propose_files(&alice, &src, json!({"f/tools.policy": commented})).await;
    assert_eq!(a["state"], "pending", "{a}");
    assert_eq!(a["digest"], b2["digest"]);
    assert_ne!(a["review_token"], b2["review_token"]);
});

fn endpoints(n: usize) -> String {
    let mut s = String::from("policy \"big\" {\n  binaries tools = /usr/bin/curl\n");
    for i in 0..n {
        s.push_str(&format!("  allow tools -> svc{i}.example.com:443\n"));
    }
    s.push_str("}\n");
    s
}

// Past a limit the answer is 413 (source) or 422 (compiled), naming the
// flag that raises it; nothing is stored.
both!(
    a_policy_over_a_limit_is_refused_with_the_flag,
    |b| async move {
        let limits = Limits {
            max_source_bytes: 4096,
            max_endpoints: 20,
            ..Limits::default()
        };
        let gw = Gw::start_limits(b, ApprovalMode::Manual, Duration::from_secs(20), limits).await;
        let alice = gw.person("alice", "author").await;
        let propose_big = |n: usize| {
            let alice = alice.clone();
            async move {
                send(
                    &alice,
                    "POST",
                    "/v1/policies/big/proposals",
                    Some(json!({"source": endpoints(n)})),
                )
                .await
            }
        };
        let r = propose_big(200).await;
        assert_eq!(r.status, 413, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "policy_too_large");
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-source-bytes")
        );
        let r = propose_big(30).await;
        assert_eq!(r.status, 422, "{:?}", r.json());
        let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            msg.contains("30 network endpoints") && msg.contains("--max-endpoints"),
            "{msg}"
        );
        let list = send(&alice, "GET", "/v1/proposals", None).await.json();
        assert_eq!(list["proposals"], json!([]));
        assert_eq!(
            propose(&alice, "big", &endpoints(10)).await["state"],
            "pending"
        );
    }
);

// Through the client: a fragment outside the policy's directory is not
// sent, even when it exists, and the gateway names the include.
both!(the_client_sends_no_fragment_from_outside, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let (_, token) = gw.person_file("alice", "author").await;
    let top = tempfile::tempdir().unwrap();
    std::fs::create_dir(top.path().join("p")).unwrap();
    std::fs::write(top.path().join("outside.policy"), FRAGMENT).unwrap();
    let file = top.path().join("p/p.policy");
    std::fs::write(&file, including("../outside.policy")).unwrap();
    let (code, out, err) = client(&gw, &token, &["propose", "p", file.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("E0103") && out.contains("leaves the policy's directory"),
        "{out}"
    );
});

// A proposal waits for a proof slot no longer than the prove budget.
both!(waiting_for_a_proof_slot_is_bounded, |b| async move {
    let limits = Limits {
        proof_slots: 1,
        small_proof_bytes: 0,
        ..Limits::default()
    };
    let gw = Gw::start_limits(b, ApprovalMode::Manual, Duration::from_millis(300), limits).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    let held = std::sync::Arc::clone(&gw.running.app.proving)
        .acquire_owned()
        .await
        .unwrap();
    let p = propose(&alice, "agent", &wide()).await;
    drop(held);
    assert_eq!(p["verdict"], "inconclusive", "{p}");
    assert!(
        p["proof"]["inconclusive"]
            .as_str()
            .unwrap()
            .contains("every proof slot stayed busy"),
        "{p}"
    );
});

/// Proposes `source` for `policy` in the background.
fn spawn_propose(
    c: &bundle_trust::client::Client,
    policy: &str,
    source: String,
) -> tokio::task::JoinHandle<bundle_trust::client::Response> {
    let c = c.clone();
    let path = format!("/v1/policies/{policy}/proposals");
    tokio::spawn(async move { send(&c, "POST", &path, Some(json!({"source": source}))).await })
}

// Every general proof slot is taken (held here, as a big proof holds it):
// a big candidate waits for one, a small one takes the slot kept for small
// proofs and is answered while the big one still waits.
both!(
    a_small_proposal_never_waits_behind_big_ones,
    |b| async move {
        let limits = Limits {
            proof_slots: 1,
            small_proof_bytes: 64 * 1024,
            ..Limits::default()
        };
        let gw = Gw::start_limits(b, ApprovalMode::Manual, Duration::from_secs(30), limits).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        for (policy, source) in [("big", endpoints(400)), ("agent", BASE.to_owned())] {
            let p = propose(&alice, policy, &source).await;
            assert_eq!(approve(&bob, &p).await.status, 200);
        }
        let app = &gw.running.app;
        let held = std::sync::Arc::clone(&app.proving)
            .acquire_owned()
            .await
            .unwrap();
        let big = spawn_propose(&alice, "big", endpoints(401));
        let small = propose(&alice, "agent", &wide()).await;
        assert_eq!(small["verdict"], "widened", "{small}");
        assert!(
            !big.is_finished(),
            "the big proposal had no slot to prove in"
        );
        assert_eq!(
            app.proving_small.available_permits(),
            1,
            "the small slot is free again"
        );
        drop(held);
        let big = big.await.unwrap();
        assert_eq!(big.status, 201, "{:?}", big.json()["error"]);
        assert_eq!(
            big.json()["verdict"],
            "new-reach",
            "{:?}",
            big.json()["proof"]
        );
    }
);

// The same with a real big proof in the only general slot. A big proof that
// ends before the small answer arrives proves nothing either way, so the
// big policy doubles until one is still proving when the small answer
// comes; a small proposal that waited for it never sees that.
both!(
    a_small_proposal_is_answered_while_a_big_one_proves,
    |b| async move {
        for size in [1500, 3000, 6000] {
            if small_answered_during_big_proof(b, size).await {
                return;
            }
        }
        panic!("every small answer came only after the big proof ended");
    }
);

async fn small_answered_during_big_proof(b: Backend, size: usize) -> bool {
    let limits = Limits {
        proof_slots: 1,
        small_proof_bytes: 64 * 1024,
        max_endpoints: 2 * size,
        max_rules: 2 * size,
        max_bundle_bytes: 64 * 1024 * 1024,
        ..Limits::default()
    };
    let gw = Gw::start_limits(b, ApprovalMode::Manual, Duration::from_secs(120), limits).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    for (policy, source) in [("big", endpoints(size)), ("agent", BASE.to_owned())] {
        let p = propose(&alice, policy, &source).await;
        assert_eq!(approve(&bob, &p).await.status, 200);
    }
    let app = &gw.running.app;
    let big = spawn_propose(&alice, "big", endpoints(size + 1));
    while app.proving.available_permits() != 0 {
        assert!(
            !big.is_finished(),
            "{:?}",
            big.await.unwrap().json()["error"]
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let small = propose(&alice, "agent", &wide()).await;
    assert_eq!(small["verdict"], "widened", "{small}");
    let during = app.proving.available_permits() == 0 && !big.is_finished();
    let big = big.await.unwrap();
    assert_eq!(big.status, 201, "{:?}", big.json()["error"]);
    during
}

// The revisions kept in memory stay within their byte budget: the oldest
// go first.
both!(the_revision_cache_is_bounded_by_bytes, |b| async move {
    const CAP: usize = 24 * 1024;
    let limits = Limits {
        revision_cache_bytes: CAP,
        ..Limits::default()
    };
    let gw = Gw::start_limits(b, ApprovalMode::Manual, Duration::from_secs(20), limits).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let app = &gw.running.app;
    let mut total = 0;
    for (i, source) in [BASE.to_owned(), wide(), narrow()].iter().enumerate() {
        let p = propose(&alice, "agent", source).await;
        assert_eq!(approve(&bob, &p).await.status, 200);
        let rev = i64::try_from(i).unwrap() + 1;
        let row = app.revision("agent", rev).await.unwrap().unwrap();
        total += row.bundle.len() + row.source.len();
        let bytes = app.revisions.lock().unwrap().bytes();
        assert!(bytes > 0 && bytes <= CAP, "{bytes}");
    }
    assert!(
        total > CAP,
        "three revisions ({total} bytes) do not fit: one was evicted"
    );
});

// `replica-dir` writes what `serve` needs and no CA key; a gateway serves
// from it (on PostgreSQL: the primary's database, seeing its proposals).
both!(
    a_replica_directory_serves_without_the_ca_key,
    |b| async move {
        let primary = Gw::start(b, ApprovalMode::Manual).await;
        let alice = primary.person("alice", "author").await;
        let p = propose(&alice, "agent", BASE).await;
        let out = tempfile::tempdir().unwrap();
        let replica = out.path().join("r");
        let replica_dir = || {
            let mut cmd = std::process::Command::new(GATEWAY);
            cmd.args(["replica-dir", "--dir"])
                .arg(primary.dir.path())
                .arg("--out")
                .arg(&replica);
            run(cmd)
        };
        let status = replica_dir().await;
        assert!(status.status.success(), "{status:?}");
        assert!(!replica.join("ca.key").exists());
        for f in [
            "ca.pem",
            "server.pem",
            "server.key",
            "trust.keys",
            "admin.token",
            "signing/active",
        ] {
            assert!(replica.join(f).exists(), "{f}");
        }
        let keys: Vec<_> = std::fs::read_dir(replica.join("signing"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(keys.len(), 2, "active and its one key: {keys:?}");
        use std::os::unix::fs::PermissionsExt as _;
        for f in ["server.key", "admin.token"] {
            let mode = std::fs::metadata(replica.join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{f}");
        }
        // A second run does not overwrite it.
        let again = replica_dir().await;
        assert_eq!(again.status.code(), Some(2));
        let dir = tempfile::TempDir::new_in(out.path()).unwrap();
        for e in walk(&replica) {
            let to = dir.path().join(e.strip_prefix(&replica).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&e, &to).unwrap();
        }
        let db = match b {
            Backend::Postgres => primary.db.clone(),
            Backend::Sqlite => format!("sqlite:{}", dir.path().join("gateway.db").display()),
        };
        let limits = Limits {
            db_pool_size: Some(2),
            ..Limits::default()
        };
        let gw = Gw::start_on_dir(
            dir,
            db,
            ApprovalMode::Manual,
            Duration::from_secs(20),
            limits,
        )
        .await;
        let r = send(&gw.admin, "GET", "/v1/proposals", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        if b == Backend::Postgres {
            assert_eq!(r.json()["proposals"][0]["id"], p["id"]);
            // The replica signs with the same key as the primary.
            let bob = gw.person("bob", "author").await;
            let ok = approve(&bob, &p).await;
            assert_eq!(ok.status, 200, "{:?}", ok.json());
            let rev = send(&alice, "GET", "/v1/policies/agent/revisions/1", None)
                .await
                .json();
            let key = primary.running.app.key.id().to_owned();
            assert!(
                rev["signature"].as_str().unwrap().starts_with(&key),
                "{rev}"
            );
        }
    }
);

// `openshell-gateway serve` itself starts from a replica's directory, on
// the primary's database (PostgreSQL) or a file of its own (SQLite).
both!(serve_runs_from_a_replica_directory, |b| async move {
    use std::io::BufRead as _;
    let primary = Gw::start(b, ApprovalMode::Manual).await;
    let alice = primary.person("alice", "author").await;
    propose(&alice, "agent", BASE).await;
    let out = tempfile::tempdir().unwrap();
    let replica = out.path().join("r");
    let mut cmd = std::process::Command::new(GATEWAY);
    cmd.args(["replica-dir", "--dir"])
        .arg(primary.dir.path())
        .arg("--out")
        .arg(&replica);
    assert!(run(cmd).await.status.success());
    assert!(!replica.join("ca.key").exists());
    let db = match b {
        Backend::Postgres => primary.db.clone(),
        Backend::Sqlite => format!("sqlite:{}", replica.join("gateway.db").display()),
    };
    let mut child = std::process::Command::new(GATEWAY)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--db-pool-size",
            "2",
            "--no-access-log",
            "--db",
            &db,
            "--dir",
        ])
        .arg(&replica)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        line
    })
    .await
    .unwrap();
    assert!(line.contains("listening on https://"), "{line:?}: {:?}", {
        let _ = child.kill();
        child.wait_with_output().unwrap()
    });
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    let token = std::fs::read_to_string(replica.join("admin.token")).unwrap();
    let admin = bundle_trust::client::Client::new(&url, &primary.ca, &token).unwrap();
    let r = send(&admin, "GET", "/v1/proposals", None).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.status, 200, "{:?}", r.json());
    let seen = r.json()["proposals"].as_array().unwrap().len();
    assert_eq!(seen, usize::from(b == Backend::Postgres));
});

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
