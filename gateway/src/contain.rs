//! What the gateway makes of a containment proof (`diff --prove --within
//! --format json` of a policy's boundary and a candidate): a candidate
//! that exceeds the boundary is refused as it comes, in either approval
//! mode; one the prover could not settle is never approved by the
//! gateway and only an admin (the role that sets boundaries) may approve
//! it, because no proof says it stays inside.

use serde_json::{Value, json};

use crate::wire::{ContainmentView, FindingView, RuleView};

/// The document when there is no proof (the solver gave up, the time ran
/// out, a bundle did not read back): the shape `--within` writes.
pub(crate) fn inconclusive(why: &str) -> Value {
    json!({
        "question": "within",
        "verdict": "inconclusive",
        "findings": [],
        "sandbox": [],
        "unsupported": [],
        "omitted": [],
        "inconclusive": why,
        "notes": [],
        "errors": [{ "path": null, "message": why }],
        "files": [],
    })
}

fn view(doc: &Value) -> ContainmentView {
    serde_json::from_value(doc.clone()).unwrap_or_default()
}

fn at(rule: Option<&RuleView>) -> String {
    rule.map_or_else(
        || "no single rule".to_owned(),
        |r| format!("{}:{}", r.file, r.line),
    )
}

fn excess(f: &FindingView) -> String {
    let w = &f.witness;
    let request = match (&w.method, &w.path) {
        (Some(m), Some(p)) => format!("{m} {}:{}{p}", w.host, w.port.unwrap_or(0)),
        _ => format!("a connection to {}:{}", w.host, w.port.unwrap_or(0)),
    };
    format!(
        "{} (witness: {request} from `{}`; allowed by {})",
        f.message,
        w.binary,
        at(f.new_rule.as_ref())
    )
}

/// When the proof shows the policy exceeds the boundary: how many
/// excesses, and the first with its witness and the policy's rule to
/// blame. `None` for any other verdict.
#[must_use]
pub(crate) fn excesses(doc: &Value) -> Option<String> {
    let v = view(doc);
    if v.verdict.as_deref() != Some("exceeds") {
        return None;
    }
    let blocking: Vec<&FindingView> = v.findings.iter().filter(|f| !f.suppressed).collect();
    let n = blocking.len() + v.sandbox.len();
    let first = blocking.first().map(|f| excess(f)).or_else(|| {
        v.sandbox
            .first()
            .map(|c| format!("{} (granted by {})", c.message, at(c.rule.as_ref())))
    });
    Some(format!(
        "{n} excess{}{}",
        if n == 1 { "" } else { "es" },
        first.map(|f| format!("; first: {f}")).unwrap_or_default()
    ))
}

/// Why the candidate is refused, when the proof shows it exceeds the
/// boundary; `None` for any other verdict.
#[must_use]
pub(crate) fn exceeds(doc: &Value) -> Option<String> {
    excesses(doc).map(|e| {
        format!(
            "the candidate exceeds the policy's boundary ({e}): keep it inside the boundary, or ask an admin to widen the boundary"
        )
    })
}

/// Why no proof says the candidate stays inside the boundary, when the
/// verdict is neither `within` nor `exceeds`.
#[must_use]
pub(crate) fn unproved(doc: &Value) -> Option<String> {
    let v = view(doc);
    let verdict = v.verdict.as_deref().unwrap_or("none");
    if matches!(verdict, "within" | "exceeds") {
        return None;
    }
    let why = v
        .inconclusive
        .clone()
        .or_else(|| v.unsupported.first().cloned())
        .unwrap_or_default();
    Some(format!(
        "the proof within the policy's boundary is `{verdict}` ({why}): nothing shows the candidate stays inside it, so only an admin may approve it"
    ))
}
