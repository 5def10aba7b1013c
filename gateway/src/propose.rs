//! From a proposed source to a stored verdict: compile with policy-lang
//! (as `compile` does), prove against the active revision with the prover
//! (as `diff --prove` does), and the review token that binds an approval
//! to exactly what was proved.

use std::sync::Arc;

use policy_lang::bundle::Bundle;
use policy_lang::source::SourceFile;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::app::{ApiError, App};
use crate::audit::hex;
use crate::store::{NewProposal, ProposalState};

/// What a proposer sends.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// The policy text.
    pub source: String,
    /// `policy` (this language) or `yaml` (OpenShell).
    #[serde(default = "default_format")]
    pub format: String,
    /// An OpenShell credentials file, when the policy needs one.
    #[serde(default)]
    pub credentials: Option<String>,
}

fn default_format() -> String {
    "policy".into()
}

/// The review token: SHA-256 over the base digest, the candidate digest,
/// the proof document, the credentials and the source. Approving must
/// present it, so an approval is for exactly what the reviewer saw.
#[must_use]
pub fn review_token(
    base: Option<&str>,
    candidate: &str,
    proof: Option<&Value>,
    credentials: Option<&str>,
    source: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        base.unwrap_or(""),
        candidate,
        &proof.map(Value::to_string).unwrap_or_default(),
        credentials.unwrap_or(""),
        source,
    ] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    format!("rt_{}", hex(&h.finalize()))
}

/// `diff --prove --format json`'s document when there is no proof (the
/// solver gave up, or the time ran out).
fn inconclusive(why: &str) -> Value {
    json!({
        "verdict": "inconclusive",
        "findings": [],
        "omitted": [],
        "inconclusive": why,
        "notes": [],
        "errors": [{ "path": null, "message": why }],
        "files": [],
    })
}

/// Compiles and proves `candidate` as the next revision of `policy`.
pub async fn evaluate(
    app: &Arc<App>,
    policy: &str,
    candidate: Candidate,
    proposer: &str,
    rollback_of: Option<i64>,
) -> Result<NewProposal, ApiError> {
    let ext = match candidate.format.as_str() {
        "policy" => "policy",
        "yaml" => "yaml",
        other => {
            return Err(ApiError::bad_request(format!(
                "`{other}` is not a policy format (`policy` or `yaml`)"
            )));
        }
    };
    let base = match app.store.policy(policy).await? {
        Some(p) => match p.active_revision {
            Some(rev) => app.store.revision(policy, rev).await?.map(|r| (rev, r)),
            None => None,
        },
        None => None,
    };
    let path = format!("{policy}.{ext}");
    let source = candidate.source.clone();
    let creds = candidate.credentials.clone();
    let shown = path.clone();
    let compiled = tokio::task::spawn_blocking(move || {
        let main = SourceFile::new(shown, source);
        let creds = creds.map(|c| SourceFile::new("credentials.yaml", c));
        policy_lang::load::compile_sources(main, creds)
    })
    .await
    .map_err(|_| ApiError::bad_request("the policy could not be compiled"))?;
    let (checked, bundle) = compiled;
    let mut proposal = NewProposal {
        policy: policy.to_owned(),
        state: ProposalState::Invalid,
        base_revision: base.as_ref().map(|(n, _)| *n),
        base_digest: base.as_ref().map(|(_, r)| r.digest.clone()),
        format: candidate.format.clone(),
        source: candidate.source.clone(),
        credentials: candidate.credentials.clone(),
        bundle: None,
        digest: None,
        verdict: None,
        proof: None,
        diagnostics: None,
        review_token: None,
        proposer: proposer.to_owned(),
        rollback_of,
    };
    let Some(bundle) = bundle else {
        // `check --format json` of the file.
        proposal.diagnostics = Some(json!({
            "files": [{
                "path": path,
                "diagnostics": checked.diagnostics.iter().map(policy_lang::diag::Diagnostic::to_json).collect::<Vec<_>>(),
            }],
            "errors": [],
            "inconclusive": null,
        }));
        return Ok(proposal);
    };
    if let Some((rev, r)) = &base
        && r.digest == bundle.digest
    {
        return Err(ApiError::new(
            hyper::StatusCode::UNPROCESSABLE_ENTITY,
            "unchanged",
            format!(
                "the candidate compiles to revision {rev}'s bundle ({}), which is active: nothing to approve",
                r.digest
            ),
        ));
    }
    let bytes = String::from_utf8_lossy(&bundle.to_bytes()).into_owned();
    let proof = match &base {
        Some((_, r)) => Some(prove(app, &r.bundle, bundle.clone()).await),
        None => None,
    };
    proposal.verdict = proof
        .as_ref()
        .and_then(|p| p.get("verdict"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    proposal.review_token = Some(review_token(
        proposal.base_digest.as_deref(),
        &bundle.digest,
        proof.as_ref(),
        candidate.credentials.as_deref(),
        &candidate.source,
    ));
    proposal.state = ProposalState::Pending;
    proposal.digest = Some(bundle.digest);
    proposal.bundle = Some(bytes);
    proposal.proof = proof;
    Ok(proposal)
}

/// `diff --prove --format json` of the active bundle → the candidate, in
/// process, within the gateway's prove timeout.
async fn prove(app: &Arc<App>, old: &str, new: Bundle) -> Value {
    let old = match Bundle::from_slice(old.as_bytes()) {
        Ok(b) => b,
        Err(e) => return inconclusive(&format!("the active revision's bundle: {e}")),
    };
    let budget = app.prove_timeout;
    let opts = prover::Options {
        timeout_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
        registry: app.registry.clone(),
        ..prover::Options::default()
    };
    // The permit lives as long as the proof, which may outlast the answer
    // (it stops at the same budget, from its own clock).
    let Ok(permit) = Arc::clone(&app.proving).acquire_owned().await else {
        return inconclusive("the prover is shutting down");
    };
    let work = tokio::task::spawn_blocking(move || {
        let report = prover::diff(&old, &new, &opts);
        drop(permit);
        report
    });
    match tokio::time::timeout(budget, work).await {
        Ok(Ok(Ok(report))) => report.to_json(),
        Ok(Ok(Err(e))) => inconclusive(&e.to_string()),
        Ok(Err(_)) => inconclusive("the prover stopped unexpectedly"),
        Err(_) => inconclusive(&format!(
            "the prover did not finish within {} ms (--prove-timeout-ms)",
            budget.as_millis()
        )),
    }
}
