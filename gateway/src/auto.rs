//! `--approval auto`: whether the gateway may approve a proposal itself,
//! and if not, the reason it gives (in the answer and the audit log).
//!
//! The verdict alone would do today, since a changed credential makes the
//! proof `widened`. The credential list is read on its own as well: what
//! secret goes out, and where, is the change an attacker most wants
//! approved unread, and it must stay with a person even if a later prover
//! weighed it differently in the verdict.

use serde_json::Value;

use crate::store::{NewProposal, ProposalState};

/// Why `p` waits for a person; `None` when the gateway approves it. Only a
/// pending proposal is asked about: an invalid one has nothing to approve.
#[must_use]
pub(crate) fn held(p: &NewProposal) -> Option<String> {
    if p.state != ProposalState::Pending {
        return None;
    }
    // Whatever its proof says: the advisor's change admits what was
    // denied by construction, and a person decides whether it should be.
    if p.origin.as_deref() == Some(crate::advise::ADVISOR) {
        return Some(
            "the advisor wrote it from denials, which it admits by construction: a person approves every advisor proposal".to_owned(),
        );
    }
    // Before the verdict: a proof that adds nothing to the active
    // revision says nothing about the boundary, which may have narrowed.
    if let Some(why) = p.containment.as_ref().and_then(crate::contain::unproved) {
        return Some(why);
    }
    if p.base_revision.is_none() {
        return Some("a policy's first revision is approved by a person".to_owned());
    }
    if let Some(why) = p.proof.as_ref().and_then(changed_credentials) {
        return Some(why);
    }
    match p.verdict.as_deref() {
        Some("no-new-access") => None,
        Some(v) => Some(format!(
            "the proof's verdict is `{v}`, not `no-new-access`: a person approves anything the candidate adds"
        )),
        None => Some("there is no proof: a person approves".to_owned()),
    }
}

/// The credentials the proof says changed, as one sentence.
fn changed_credentials(proof: &Value) -> Option<String> {
    let changes = proof.get("credentials")?.as_array()?;
    let names: Vec<String> = changes
        .iter()
        .map(|c| {
            let name = c.get("credential").and_then(Value::as_str).unwrap_or("?");
            let parts: Vec<&str> = c
                .get("changed")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!("`{name}` ({})", parts.join(", "))
        })
        .collect();
    if names.is_empty() {
        return None;
    }
    Some(format!(
        "the candidate changes what secret credential {} sends or where it puts it (`credential_changed`, R0111): a person approves every such change",
        names.join(", ")
    ))
}
