//! `--approval auto` approves a proposal only when the prover shows it
//! adds nothing. A proposal that opens new reach without a credential (a
//! private range on every port, SSH to a subnet, a wildcard domain), a new
//! file right or a new method waits for a person; a narrowing or an
//! equivalent rewrite is still approved by the gateway. A change of what
//! secret a credential sends, or where it puts it, reaches no new request
//! and still waits, with the reason in the answer and the audit log. Each
//! test on SQLite and on PostgreSQL.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use bundle_trust::client::Client;
use common::*;
use gateway::server::ApprovalMode;

const AUTO_BASE: &str = r#"policy "agent" {
  fs read /usr /etc
  credential github_pat {
    secret env GITHUB_TOKEN
    placeholder env GITHUB_TOKEN
    inject replace
    hosts api.github.com
    methods GET HEAD
  }
  binaries agent = /usr/bin/curl
  binaries py = /usr/bin/python3
  allow agent -> api.github.com:443 http read-only
  allow agent -> example.com:443 http read-only
}
"#;

/// AUTO_BASE with `line` added before the closing brace.
fn plus(line: &str) -> String {
    AUTO_BASE.replace("\n}\n", &format!("\n{line}\n}}\n"))
}

/// A gateway in auto mode with AUTO_BASE active as revision 1.
async fn started(b: Backend) -> (Gw, Client) {
    let gw = Gw::start(b, ApprovalMode::Auto).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    let first = propose(&alice, "agent", AUTO_BASE).await;
    assert_eq!(approve(&bob, &first).await.status, 200);
    (gw, alice)
}

both!(attacks_on_auto_approval_wait_for_a_person, |b| async move {
    let (_gw, alice) = started(b).await;
    let attacks = [
        (
            "private range, every port",
            plus("  allow py -> 10.0.0.0/8:1-65535"),
        ),
        ("ssh to a subnet", plus("  allow py -> 192.168.0.0/16:22")),
        (
            "wildcard domain, every port",
            plus("  allow py -> **.example.com:1-65535"),
        ),
        ("new file write right", plus("  fs write /sandbox")),
        (
            "new method on an inspected route",
            AUTO_BASE.replace(
                "example.com:443 http read-only",
                "example.com:443 http read-write",
            ),
        ),
    ];
    let mut verdicts = Vec::new();
    for (what, source) in &attacks {
        let p = propose(&alice, "agent", source).await;
        assert_eq!(p["state"], "pending", "{what}: {p}");
        assert_ne!(p["verdict"], "no-new-access", "{what}: {p}");
        assert_eq!(p["decided_by"], serde_json::Value::Null, "{what}: {p}");
        let proof = &p["proof"];
        let shown = |k: &str| proof[k].as_array().map_or(0, Vec::len);
        if p["verdict"] == "widened" {
            // An address route also reaches the credentialed host through
            // an address in the range: the credentialed question catches
            // it first.
            assert!(shown("findings") > 0, "{what}: {proof}");
        } else {
            assert_eq!(p["verdict"], "new-reach", "{what}: {p}");
            assert!(
                shown("reach") + shown("sandbox") > 0,
                "{what}: the proof shows nothing new: {proof}"
            );
        }
        verdicts.push(p["verdict"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(
        verdicts,
        ["widened", "widened", "new-reach", "new-reach", "new-reach"]
    );
});

both!(
    narrowing_and_equivalent_rewrites_are_still_approved,
    |b| async move {
        let (_gw, alice) = started(b).await;
        // The same requests, written as two rules.
        let rewrite = AUTO_BASE.replace(
        "  allow agent -> example.com:443 http read-only\n",
        "  allow agent -> example.com:443 http {\n    allow GET /**\n  }\n  allow agent -> example.com:443 http {\n    allow HEAD OPTIONS /**\n  }\n",
    );
        let p = propose(&alice, "agent", &rewrite).await;
        assert_eq!(p["verdict"], "no-new-access", "{p}");
        assert_eq!(p["state"], "approved", "{p}");
        assert_eq!(p["decided_by"], "gateway");
        let narrow: String = rewrite
            .lines()
            .filter(|l| !l.contains("HEAD OPTIONS"))
            .map(|l| format!("{l}\n"))
            .collect();
        let n = propose(&alice, "agent", &narrow).await;
        assert_eq!(n["verdict"], "no-new-access", "{n}");
        assert_eq!(n["state"], "approved", "{n}");
        assert_eq!(n["decision"], "auto");
    }
);

both!(
    a_changed_credential_waits_for_a_person_and_says_why,
    |b| async move {
        let (gw, alice) = started(b).await;
        let changes = [
            (
                "secret",
                AUTO_BASE.replace("secret env GITHUB_TOKEN", "secret file /root/.ssh/id_rsa"),
            ),
            (
                "inject",
                AUTO_BASE.replace("inject replace", "inject header X-Echo \"{secret}\""),
            ),
            (
                "placeholder",
                AUTO_BASE.replace("placeholder env GITHUB_TOKEN", "placeholder env OTHER"),
            ),
        ];
        for (part, source) in &changes {
            let p = propose(&alice, "agent", source).await;
            assert_eq!(p["state"], "pending", "{part}: {p}");
            assert_eq!(p["decided_by"], serde_json::Value::Null, "{part}: {p}");
            let proof = &p["proof"];
            // No request is new: only the credential table tells.
            assert_eq!(proof["findings"], serde_json::json!([]), "{part}: {proof}");
            assert_eq!(proof["verdict"], "widened", "{part}: {proof}");
            assert_eq!(
                proof["credentials"][0]["changed"],
                serde_json::json!([part])
            );
            let held = p["held"].as_str().unwrap_or_default();
            assert!(
                held.contains("`github_pat`") && held.contains("credential_changed"),
                "{part}: {p}"
            );
        }
        let rows = send(&gw.admin, "GET", "/v1/audit", None).await.json();
        let held: Vec<serde_json::Value> = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["action"] == "propose")
            .map(|r| serde_json::from_str(r["detail"].as_str().unwrap()).unwrap())
            .filter(|d: &serde_json::Value| d.get("held").is_some())
            .collect();
        // The first revision (waiting for bob) and the three changes.
        assert_eq!(held.len(), 4, "{held:?}");
        assert!(
            held[1..]
                .iter()
                .all(|d| d["held"].as_str().unwrap().contains("R0111")),
            "{held:?}"
        );
    }
);
