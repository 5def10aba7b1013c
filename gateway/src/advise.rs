//! `POST /v1/policies/{name}/proposals/from-denials`: the advisor's change
//! to a policy's active revision, written from a deny log, as a candidate
//! proved like any other and left to a person.
//!
//! The gateway writes the candidate itself from the revision it serves,
//! so what is proposed is exactly the narrowest change `suggest` makes
//! (and an advisor proposal is known to be one): the proposer sends only
//! the log. The candidate keeps the revision's includes and credentials.

use std::sync::Arc;

use hyper::StatusCode;
use policy_bundle::Bundle;

use crate::app::{ApiError, App};
use crate::propose::Candidate;
use crate::wire::{self, Advice};

/// The proposal's origin when the gateway wrote it from denials.
pub(crate) const ADVISOR: &str = "advisor";

/// Who asks for the change.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Asker<'a> {
    /// A person, with a log they hold.
    Person,
    /// A sandbox's agent, through its supervisor: only where the revision
    /// it runs enables the endpoint (`advisor`), as its supervisor checks
    /// too.
    Sandbox(&'a str),
}

/// The candidate the advisor writes for `policy` from the deny log
/// `denials` (cited as `log` in the rules it adds), and what it read
/// there.
pub(crate) async fn candidate(
    app: &Arc<App>,
    policy: &str,
    asker: Asker<'_>,
    denials: &str,
    log: &str,
    generalize: &[advisor::Generalize],
) -> Result<(Candidate, Advice), ApiError> {
    let no_revision = || {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_active_revision",
            format!(
                "`{policy}` has no active revision for the denials to be read against: propose its first revision from a file"
            ),
        )
    };
    let rev = app
        .store
        .policy(policy)
        .await?
        .and_then(|p| p.active_revision)
        .ok_or_else(no_revision)?;
    let row = app
        .store
        .revision(policy, rev)
        .await?
        .ok_or_else(no_revision)?;
    let base = Bundle::from_slice(row.bundle.as_bytes()).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("revision {rev}'s stored bundle cannot be read: {e}"),
        )
    })?;
    if let Asker::Sandbox(id) = asker
        && base.enforcement.advisor.is_none()
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "advisor_disabled",
            format!(
                "revision {rev} of `{policy}`, which sandbox `{id}` runs, has no `advisor` statement: its agent cannot ask for changes"
            ),
        ));
    }
    let advice = advisor::advise(
        &row.source,
        row.format == "yaml",
        &base,
        denials.as_bytes(),
        log,
        generalize,
    );
    let summary = Advice {
        revision: rev,
        lines: advice.read.lines,
        denials: advice.read.named.len(),
        other: advice.read.other,
        problems: advice
            .read
            .problems
            .iter()
            .map(|p| wire::LineProblem {
                line: p.line,
                message: p.message.clone(),
            })
            .collect(),
        rules: advice.patch.clone(),
        notes: advice.notes.clone(),
    };
    if advice.suggestions.is_empty() {
        let why = match summary.problems.first() {
            Some(p) => format!(
                "; {} line(s) could not be used, the first (line {}): {}",
                summary.problems.len(),
                p.line,
                p.message
            ),
            None => String::new(),
        };
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "nothing_to_suggest",
            format!(
                "the log holds no denial of `{policy}` revision {rev} to admit ({} line(s) read, {} other event(s)){why}",
                summary.lines, summary.other
            ),
        ));
    }
    let source = advice.patched.map_err(|why| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "cannot_patch",
            format!("the advisor's rules cannot be written into revision {rev}'s source: {why}"),
        )
    })?;
    let candidate = Candidate {
        source,
        format: row.format,
        credentials: row.credentials,
        files: row.files,
    };
    Ok((candidate, summary))
}
