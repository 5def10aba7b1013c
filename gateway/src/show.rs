//! A proposal for people (`show`, `propose`, `rollback`): its verdict,
//! the prover's findings with their witnesses, what exceeds the policy's
//! boundary and the rule to blame, the diagnostics of a
//! candidate that does not compile, and what to do next.

use std::fmt::Write as _;

use crate::wire::{ContainmentView, Proposal, ProposalState};

/// How `show` and the proposal commands print a proposal.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShowFormat {
    Human,
    Json,
    Markdown,
}

/// `Some(n)` as `n`, `None` as `null`: how the API writes it.
fn shown<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

/// A proposal for people (`human`), for a pull-request comment
/// (`markdown`), or as the API returns it (`json`).
#[must_use]
pub(crate) fn render(p: &Proposal, format: ShowFormat) -> String {
    if format == ShowFormat::Json {
        let text = serde_json::to_value(p).and_then(|v| serde_json::to_string_pretty(&v));
        return format!("{}\n", text.unwrap_or_default());
    }
    let md = format == ShowFormat::Markdown;
    let state = p.state.word();
    let verdict = p.verdict.as_deref().unwrap_or(match p.base_revision {
        None => "first revision (a person approves)",
        Some(_) => "none",
    });
    let mut out = if md {
        format!(
            "### Proposal {} for `{}`: {state} — {verdict}\n\n",
            p.id, p.policy
        )
    } else {
        format!(
            "proposal {} for `{}`: {state} ({verdict})\n",
            p.id, p.policy
        )
    };
    let line = |out: &mut String, text: String| {
        out.push_str(if md { "- " } else { "  " });
        out.push_str(&text);
        out.push('\n');
    };
    line(
        &mut out,
        format!(
            "proposed by `{}`, base revision {}",
            p.proposer,
            shown(p.base_revision)
        ),
    );
    if let Some(origin) = &p.origin {
        line(
            &mut out,
            format!("written by the {origin} from denials: only a person approves it"),
        );
    }
    if let Some(why) = &p.rationale {
        line(
            &mut out,
            format!("the sandbox's rationale (its agent's words): {why}"),
        );
    }
    if let Some(a) = &p.advice {
        advice(&mut out, a, md);
    }
    if let Some(d) = &p.digest {
        line(&mut out, format!("candidate digest `{d}`"));
    }
    let proof = p.proof_view().unwrap_or_default();
    for f in &proof.findings {
        let w = &f.witness;
        line(
            &mut out,
            format!(
                "{} `{}` {}: {} (witness: `{}` → {}:{}{})",
                if f.suppressed { "accepted" } else { "✗" },
                f.category,
                f.code,
                f.message,
                w.binary,
                w.host,
                shown(w.port),
                w.path.as_deref().unwrap_or(""),
            ),
        );
    }
    for c in &proof.credentials {
        line(
            &mut out,
            format!("✗ `{}` {}: {}", c.category, c.code, c.message),
        );
    }
    if let Some(why) = &proof.inconclusive {
        line(&mut out, format!("inconclusive: {why}"));
    }
    if let Some(c) = p.containment_view() {
        let digest = p.boundary_digest.as_deref().unwrap_or("");
        line(
            &mut out,
            format!(
                "within the boundary `{digest}`: {}",
                c.verdict.as_deref().unwrap_or("none")
            ),
        );
        for text in containment(&c) {
            line(&mut out, text);
        }
    }
    for file in p.check_view().unwrap_or_default().files {
        for d in file.diagnostics {
            line(
                &mut out,
                format!(
                    "{} {} {}:{}:{}: {}",
                    d.severity,
                    d.code,
                    d.file,
                    shown(d.line),
                    shown(d.column),
                    d.message
                ),
            );
        }
    }
    if let Some(t) = p
        .review_token
        .as_deref()
        .filter(|_| p.state == ProposalState::Pending)
    {
        line(
            &mut out,
            format!(
                "review token `{t}` (approve with `approve {} --review-token {t}`)",
                p.id
            ),
        );
    }
    if let Some(why) = &p.held {
        line(&mut out, format!("left to a person: {why}"));
    }
    if let Some(rev) = p.revision {
        line(
            &mut out,
            format!(
                "approved as revision {rev} by `{}` ({})",
                p.decided_by.as_deref().unwrap_or(""),
                p.decision.as_deref().unwrap_or("")
            ),
        );
    }
    if p.state == ProposalState::Refused {
        line(
            &mut out,
            format!(
                "refused by `{}`: {}",
                p.decided_by.as_deref().unwrap_or(""),
                p.reason.as_deref().unwrap_or("")
            ),
        );
    }
    if p.state == ProposalState::Rejected {
        line(
            &mut out,
            format!(
                "rejected by `{}`: {}",
                p.decided_by.as_deref().unwrap_or(""),
                p.reason.as_deref().unwrap_or("")
            ),
        );
    }
    out
}

/// What a containment proof found, one line each: every excess with its
/// witness and the rule to blame, what could not be compared, and why it
/// is inconclusive.
#[must_use]
pub(crate) fn containment(c: &ContainmentView) -> Vec<String> {
    let mut out = Vec::new();
    for f in c.findings.iter().filter(|f| !f.suppressed) {
        let w = &f.witness;
        let rule = f.new_rule.as_ref().map_or_else(String::new, |r| {
            format!(", allowed by {}:{}", r.file, r.line)
        });
        out.push(format!(
            "✗ beyond the boundary `{}` {}: {} (witness: `{}` → {} {}:{}{}{rule})",
            f.category,
            f.code,
            f.message,
            w.binary,
            w.method.as_deref().unwrap_or("connect"),
            w.host,
            shown(w.port),
            w.path.as_deref().unwrap_or(""),
        ));
    }
    for x in &c.sandbox {
        let rule = x.rule.as_ref().map_or_else(String::new, |r| {
            format!(" (granted by {}:{})", r.file, r.line)
        });
        out.push(format!(
            "✗ beyond the boundary `{}` {}: {}{rule}",
            x.category, x.code, x.message
        ));
    }
    for u in &c.unsupported {
        out.push(format!("? not compared with the boundary: {u}"));
    }
    if let Some(why) = c
        .inconclusive
        .as_ref()
        .filter(|_| c.verdict.as_deref() != Some("within"))
    {
        out.push(format!("containment inconclusive: {why}"));
    }
    out
}

/// What the advisor read and the rules it added, under the proposal's
/// first lines.
fn advice(out: &mut String, a: &crate::wire::Advice, md: bool) {
    let bullet = if md { "- " } else { "  " };
    let _ = writeln!(
        out,
        "{bullet}the advisor read {} line(s) against revision {}: {} denial(s) admitted, {} other event(s), {} line(s) not used",
        a.lines,
        a.revision,
        a.denials,
        a.other,
        a.problems.len()
    );
    for p in &a.problems {
        let _ = writeln!(out, "{bullet}  line {}: {}", p.line, p.message);
    }
    for n in &a.notes {
        let _ = writeln!(out, "{bullet}  note: {n}");
    }
    if md {
        let _ = writeln!(out, "\n```\n{}```\n", a.rules);
    } else {
        for l in a.rules.lines() {
            let _ = writeln!(out, "    | {l}");
        }
    }
}
