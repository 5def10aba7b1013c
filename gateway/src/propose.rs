//! From a proposed source to a stored verdict: compile with policy-lang
//! (as `compile` does), prove against the active revision with the prover
//! (as `diff --prove` does), and the review token that binds an approval
//! to exactly what was proved.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use policy_bundle::Bundle;
use policy_lang::source::SourceFile;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::app::{ApiError, App};
use crate::audit::hex;
use crate::store::{NewProposal, ProposalState};

/// What a proposer sends.
pub(crate) use crate::wire::ProposalRequest as Candidate;

/// The review token: SHA-256 over the base digest, the candidate digest,
/// the proof document, the credentials, the source and each included
/// file (path and text), and, when the policy has a boundary, its digest
/// and the containment proof. Approving must present it, so an approval
/// is for exactly what the reviewer saw.
#[must_use]
pub(crate) fn review_token(
    base: Option<&str>,
    candidate: &str,
    proof: Option<&Value>,
    credentials: Option<&str>,
    source: &str,
    files: &BTreeMap<String, String>,
    boundary: Option<(&str, &Value)>,
) -> String {
    let mut h = Sha256::new();
    let proof = proof.map(Value::to_string).unwrap_or_default();
    let fixed = [
        base.unwrap_or(""),
        candidate,
        &proof,
        credentials.unwrap_or(""),
        source,
    ];
    // Every part is length-prefixed, so no file can pass for another
    // split of the same bytes; no files adds nothing, so a policy without
    // includes keeps the token it had.
    let named = files.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]);
    for part in fixed.into_iter().chain(named) {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    // Last, and only with a boundary: a policy without one keeps the
    // token it had.
    if let Some((digest, containment)) = boundary {
        for part in [digest.to_owned(), containment.to_string()] {
            h.update(part.len().to_le_bytes());
            h.update(part.as_bytes());
        }
    }
    format!("rt_{}", hex(&h.finalize()))
}

/// `413`: the text sent is over `--max-source-bytes`.
fn check_source_size(candidate: &Candidate, limit: usize) -> Result<(), ApiError> {
    let bytes = candidate.source.len()
        + candidate.credentials.as_ref().map_or(0, String::len)
        + candidate
            .files
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>();
    if bytes > limit {
        return Err(ApiError::new(
            hyper::StatusCode::PAYLOAD_TOO_LARGE,
            "policy_too_large",
            format!(
                "the policy, its fragments and credentials are {bytes} bytes, over this gateway's limit of {limit} (raise it with `serve --max-source-bytes`)"
            ),
        ));
    }
    Ok(())
}

/// What a compiled bundle weighs, for the limits.
struct Size {
    rules: usize,
    endpoints: usize,
    bytes: usize,
}

fn size(bundle: &Bundle, bytes: usize) -> Size {
    let e = &bundle.enforcement;
    let endpoints = e.seccomp.routes.len();
    let l7: usize = e.l7.iter().map(|x| x.allow().len() + x.deny().len()).sum();
    Size {
        rules: endpoints + l7 + e.landlock.paths.len(),
        endpoints,
        bytes,
    }
}

/// `422`: the compiled bundle is over one of the limits.
fn check_compiled_size(size: &Size, limits: &crate::app::Limits) -> Result<(), ApiError> {
    let over = [
        (
            size.bytes,
            limits.max_bundle_bytes,
            "bytes of bundle",
            "--max-bundle-bytes",
        ),
        (size.rules, limits.max_rules, "rules", "--max-rules"),
        (
            size.endpoints,
            limits.max_endpoints,
            "network endpoints",
            "--max-endpoints",
        ),
    ]
    .into_iter()
    .find(|(n, max, _, _)| n > max);
    match over {
        Some((n, max, what, flag)) => Err(ApiError::new(
            hyper::StatusCode::UNPROCESSABLE_ENTITY,
            "policy_too_large",
            format!(
                "the candidate compiles to {n} {what}, over this gateway's limit of {max} (raise it with `serve {flag}`, or split the policy)"
            ),
        )),
        None => Ok(()),
    }
}

/// `diff --prove --format json`'s document when there is no proof (the
/// solver gave up, or the time ran out).
fn inconclusive(why: &str) -> Value {
    json!({
        "verdict": "inconclusive",
        "findings": [],
        "credentials": [],
        "omitted": [],
        "inconclusive": why,
        "notes": [],
        "errors": [{ "path": null, "message": why }],
        "files": [],
    })
}

/// What compiling a candidate (or a boundary) gave: what `check` found,
/// and the bundle when there were no errors.
pub(crate) type Compiled = (policy_lang::load::Checked, Option<Bundle>);

/// Compiles `candidate`, shown as `{stem}.{ext}`, as `compile` does,
/// with its fragments from `files` only. `400` for an unknown format, a
/// file no include reaches; `413` over `--max-source-bytes`.
pub(crate) async fn compile(
    app: &Arc<App>,
    stem: &str,
    candidate: &Candidate,
) -> Result<(String, Compiled), ApiError> {
    let ext = match candidate.format.as_str() {
        "policy" => "policy",
        "yaml" => "yaml",
        other => {
            return Err(ApiError::bad_request(format!(
                "`{other}` is not a policy format (`policy` or `yaml`)"
            )));
        }
    };
    check_source_size(candidate, app.limits.max_source_bytes)?;
    let path = format!("{stem}.{ext}");
    let source = candidate.source.clone();
    let creds = candidate.credentials.clone();
    let files = candidate.files.clone();
    let shown = path.clone();
    let compiled = tokio::task::spawn_blocking(move || {
        let main = SourceFile::new(shown, source);
        let creds = creds.map(|c| SourceFile::new("credentials.yaml", c));
        policy_lang::load::compile_sources_with(main, &files, creds)
    })
    .await
    .map_err(|_| ApiError::bad_request("the policy could not be compiled"))?;
    let (checked, bundle) = compiled;
    // A file no include reached would be stored and covered by the review
    // token without being part of what was compiled.
    if let Some(unused) = candidate
        .files
        .keys()
        .find(|k| !checked.sources.iter().any(|s| s.path() == k.as_str()))
        && bundle.is_some()
    {
        return Err(ApiError::bad_request(format!(
            "`files` carries `{unused}`, which the policy does not include: send only the fragments it includes"
        )));
    }
    Ok((path, (checked, bundle)))
}

/// `check --format json` of a source that does not compile.
pub(crate) fn diagnostics(path: &str, checked: &policy_lang::load::Checked) -> Value {
    json!({
        "files": [{
            "path": path,
            "diagnostics": checked.diagnostics.iter().map(policy_lang::diag::Diagnostic::to_json).collect::<Vec<_>>(),
        }],
        "errors": [],
        "inconclusive": null,
    })
}

/// Compiles and proves `candidate` as the next revision of `policy`, and
/// within the policy's boundary when it has one.
pub(crate) async fn evaluate(
    app: &Arc<App>,
    policy: &str,
    candidate: Candidate,
    proposer: &str,
    rollback_of: Option<i64>,
) -> Result<NewProposal, ApiError> {
    let base = match app.store.policy(policy).await? {
        Some(p) => match p.active_revision {
            Some(rev) => app.store.revision(policy, rev).await?.map(|r| (rev, r)),
            None => None,
        },
        None => None,
    };
    let boundary = app.store.boundary(policy).await?;
    let (path, (checked, bundle)) = compile(app, policy, &candidate).await?;
    let mut proposal = NewProposal {
        policy: policy.to_owned(),
        state: ProposalState::Invalid,
        base_revision: base.as_ref().map(|(n, _)| *n),
        base_digest: base.as_ref().map(|(_, r)| r.digest.clone()),
        format: candidate.format.clone(),
        source: candidate.source.clone(),
        credentials: candidate.credentials.clone(),
        files: candidate.files.clone(),
        bundle: None,
        digest: None,
        verdict: None,
        proof: None,
        diagnostics: None,
        containment: None,
        boundary_digest: None,
        refusal: None,
        review_token: None,
        proposer: proposer.to_owned(),
        rollback_of,
        origin: None,
        rationale: None,
    };
    let Some(bundle) = bundle else {
        proposal.diagnostics = Some(diagnostics(&path, &checked));
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
    crate::secret_sources::check(app.limits.secret_sources.as_ref(), &bundle).map_err(|e| {
        ApiError::new(
            hyper::StatusCode::UNPROCESSABLE_ENTITY,
            "secret_source_not_allowed",
            e.to_string(),
        )
    })?;
    let bytes = String::from_utf8_lossy(&bundle.to_bytes()).into_owned();
    check_compiled_size(&size(&bundle, bytes.len()), &app.limits)?;
    let proof = match &base {
        Some((_, r)) => {
            let small = r.bundle.len() + bytes.len() <= app.limits.small_proof_bytes;
            Some(prove(app, &r.bundle, bundle.clone(), small, Question::Diff).await)
        }
        None => None,
    };
    // A first revision is proved within the boundary too: the boundary
    // holds from the policy's first line.
    let containment = match &boundary {
        Some(b) => {
            let small = b.bundle.len() + bytes.len() <= app.limits.small_proof_bytes;
            Some(prove(app, &b.bundle, bundle.clone(), small, Question::Within).await)
        }
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
        &candidate.files,
        boundary
            .as_ref()
            .map(|b| b.digest.as_str())
            .zip(containment.as_ref()),
    ));
    proposal.state = ProposalState::Pending;
    proposal.digest = Some(bundle.digest);
    proposal.bundle = Some(bytes);
    proposal.proof = proof;
    proposal.boundary_digest = boundary.map(|b| b.digest);
    if let Some(c) = &containment
        && let Some(why) = crate::contain::exceeds(c)
    {
        // Refused as it comes, whatever the approval mode: no person may
        // approve what the boundary's owner ruled out.
        proposal.state = ProposalState::Refused;
        proposal.review_token = None;
        proposal.refusal = Some(why);
    }
    proposal.containment = containment;
    Ok(proposal)
}

/// How long a proof's slot stays taken past its budget: the prover stops
/// at its deadline from its own clock, and this is the slack for it to
/// notice. Past it the slot is free again whatever the prover does.
const SLOT_MARGIN: Duration = Duration::from_millis(500);

/// Which question a proof answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Question {
    /// `diff --prove`: what the candidate adds to the active revision.
    Diff,
    /// `diff --prove --within`: whether the boundary allows everything
    /// the candidate allows.
    Within,
}

/// `diff --prove --format json` of the active bundle → the candidate (or
/// `--within` of the boundary and the candidate), in process, within the
/// gateway's prove timeout. `small` candidates may take the slot kept
/// for them when every other one is busy.
pub(crate) async fn prove(
    app: &Arc<App>,
    old: &str,
    new: Bundle,
    small: bool,
    question: Question,
) -> Value {
    let started = std::time::Instant::now();
    let proof = prove_in_a_slot(app, old, new, small, question).await;
    let verdict = proof
        .get("verdict")
        .and_then(Value::as_str)
        .unwrap_or("none");
    // Both questions can end `inconclusive`: a containment proof is
    // labelled apart, so that neither hides in the other's count.
    match question {
        Question::Diff => app.metrics.proof(verdict, started.elapsed()),
        Question::Within => app
            .metrics
            .proof(&format!("containment-{verdict}"), started.elapsed()),
    }
    proof
}

/// The proof, in a slot: waiting for one and proving each within the
/// budget.
async fn prove_in_a_slot(
    app: &Arc<App>,
    old: &str,
    new: Bundle,
    small: bool,
    question: Question,
) -> Value {
    let inconclusive = |why: &str| match question {
        Question::Diff => inconclusive(why),
        Question::Within => crate::contain::inconclusive(why),
    };
    let old = match Bundle::from_slice(old.as_bytes()) {
        Ok(b) => b,
        Err(e) => {
            let whose = match question {
                Question::Diff => "the active revision's",
                Question::Within => "the boundary's",
            };
            return inconclusive(&format!("{whose} bundle: {e}"));
        }
    };
    let budget = app.prove_timeout;
    let opts = prover::Options {
        timeout_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
        registry: app.registry.clone(),
        solver: Some(&prover_z3::Z3),
        ..prover::Options::default()
    };
    let general = Arc::clone(&app.proving);
    let reserved = Arc::clone(&app.proving_small);
    let acquire = async move {
        if small {
            tokio::select! {
                biased;
                p = general.acquire_owned() => p,
                p = reserved.acquire_owned() => p,
            }
        } else {
            general.acquire_owned().await
        }
    };
    // Waiting for a slot is bounded like the proof: a proposal is answered
    // within about twice the budget, whatever is queued before it.
    let permit = match tokio::time::timeout(budget, acquire).await {
        Ok(Ok(p)) => p,
        Ok(Err(_)) => return inconclusive("the prover is shutting down"),
        Err(_) => {
            return inconclusive(&format!(
                "every proof slot stayed busy for {} ms (--proof-slots, --prove-timeout-ms)",
                budget.as_millis()
            ));
        }
    };
    let mut work = tokio::task::spawn_blocking(move || match question {
        Question::Diff => prover::diff(&old, &new, &opts),
        Question::Within => prover::within(&old, &new, &opts),
    });
    match tokio::time::timeout(budget, &mut work).await {
        Ok(done) => {
            drop(permit);
            match done {
                Ok(Ok(report)) => report.to_json(),
                Ok(Err(e)) => inconclusive(&e.to_string()),
                Err(_) => inconclusive("the prover stopped unexpectedly"),
            }
        }
        Err(_) => {
            // The answer goes now; the slot is held for the margin only.
            tokio::spawn(async move {
                let _ = tokio::time::timeout(SLOT_MARGIN, work).await;
                drop(permit);
            });
            inconclusive(&format!(
                "the prover did not finish within {} ms (--prove-timeout-ms)",
                budget.as_millis()
            ))
        }
    }
}
