//! `serve --allow-secret-source`: a proposal whose credential reads a
//! secret source outside the list is refused with `422
//! secret_source_not_allowed`, nothing stored, whatever the approval mode;
//! sources inside it are proposed and proved as usual. Each test on SQLite
//! and on PostgreSQL.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::time::Duration;

use common::*;
use gateway::app::Limits;
use gateway::secret_sources::SecretSources;
use gateway::server::ApprovalMode;
use serde_json::json;

/// A gateway in auto mode that allows `GITHUB_TOKEN` and the files under
/// `/run/secrets/`.
async fn restricted(b: Backend) -> Gw {
    let patterns = ["env:GITHUB_TOKEN", "file:/run/secrets/*"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    let limits = Limits {
        secret_sources: SecretSources::new(patterns),
        ..Limits::default()
    };
    Gw::start_limits(b, ApprovalMode::Auto, Duration::from_secs(20), limits).await
}

both!(
    a_secret_source_outside_the_list_is_refused,
    |b| async move {
        let gw = restricted(b).await;
        let alice = gw.person("alice", "author").await;
        let bob = gw.person("bob", "author").await;
        let first = propose(&alice, "agent", BASE).await;
        assert_eq!(approve(&bob, &first).await.status, 200);
        let refused = [
            BASE.replace("secret env GITHUB_TOKEN", "secret file /root/.ssh/id_rsa"),
            BASE.replace(
                "secret env GITHUB_TOKEN",
                "secret env AWS_SECRET_ACCESS_KEY",
            ),
            BASE.replace(
                "secret env GITHUB_TOKEN",
                "secret file /run/secrets/../../root/.ssh/id_rsa",
            ),
        ];
        for source in &refused {
            let r = send(
                &alice,
                "POST",
                "/v1/policies/agent/proposals",
                Some(json!({ "source": source })),
            )
            .await;
            let body = r.json();
            assert_eq!(r.status, 422, "{body}");
            assert_eq!(body["error"]["code"], "secret_source_not_allowed", "{body}");
            let msg = body["error"]["message"].as_str().unwrap();
            assert!(
                msg.contains("credential `github_pat`")
                    && msg.contains("--allow-secret-source")
                    && msg.contains("`env:GITHUB_TOKEN`"),
                "{msg}"
            );
        }
        // Nothing was stored: only the first revision's proposal.
        let list = send(&alice, "GET", "/v1/proposals", None).await.json();
        assert_eq!(list["proposals"].as_array().unwrap().len(), 1, "{list}");
        // A source inside the list is proposed and proved; it changes the
        // credential, so it waits for a person.
        let allowed = BASE.replace("secret env GITHUB_TOKEN", "secret file /run/secrets/gh");
        let p = propose(&alice, "agent", &allowed).await;
        assert_eq!(p["state"], "pending", "{p}");
        assert_eq!(p["proof"]["credentials"][0]["changed"], json!(["secret"]));
    }
);

both!(
    a_first_revision_is_checked_against_the_list_too,
    |b| async move {
        let gw = restricted(b).await;
        let alice = gw.person("alice", "author").await;
        let source = BASE.replace("secret env GITHUB_TOKEN", "secret env HOME_TOKEN");
        let r = send(
            &alice,
            "POST",
            "/v1/policies/fresh/proposals",
            Some(json!({ "source": source })),
        )
        .await;
        assert_eq!(r.status, 422, "{:?}", r.json());
        assert_eq!(r.json()["error"]["code"], "secret_source_not_allowed");
    }
);
