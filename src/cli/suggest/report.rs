//! Printing a suggestion: for a terminal, as JSON, as a pull-request
//! comment, or as the patched policy file itself.

use std::fmt::Write as _;

use policy_bundle::eval::Verdict;
use serde_json::{Value, json};

use super::{Format, Outcome, Replay};
use crate::output::outln;
use crate::report::Failure;
use crate::report::findings::{self, FindingsFormat, Names};

/// Prints the outcome in the requested format; problems with log lines go
/// to stderr in every format but JSON (where they are `errors`).
pub fn print(format: Format, o: &Outcome) {
    if format != Format::Json {
        for p in &o.problems {
            eprintln!("error: {}:{}: {}", o.log, p.line, p.message);
        }
        if let Some(f) = &o.failure {
            f.print_human();
        }
    }
    match format {
        Format::Human => outln!("{}", human(o).trim_end()),
        Format::Markdown => outln!("{}", markdown(o).trim_end()),
        Format::Json => outln!("{}", to_json(o)),
        Format::Policy => {
            eprint!("{}", summary_lines(o));
            if o.failure.is_none() {
                crate::output::out!("{}", o.patched);
            }
        }
    }
}

/// No suggestion at all: the policy or the log cannot be used.
pub fn failed(format: Format, policy: &str, log: &str, f: &Failure) {
    match format {
        Format::Json => {
            let (files, errors) = f.json_members();
            outln!(
                "{}",
                json!({
                    "policy": policy,
                    "log": log,
                    "suggestions": [],
                    "patch": "",
                    "patched": null,
                    "beyond_denials": [],
                    "notes": [],
                    "proof": null,
                    "replay": [],
                    "errors": errors,
                    "files": files,
                })
            );
        }
        Format::Markdown => {
            f.print_human();
            outln!("{}", f.markdown().trim_end());
        }
        Format::Human | Format::Policy => f.print_human(),
    }
}

fn names(o: &Outcome) -> Names {
    Names {
        old: o.policy.clone(),
        new: format!("{} + suggestion", o.policy),
    }
}

fn headline(o: &Outcome) -> String {
    let rules = o.suggestions.len();
    let mut text = format!(
        "suggest: {} in {} ({} read",
        count(o.denials, "denial", "denials"),
        o.log,
        count(o.lines, "line", "lines")
    );
    if o.other > 0 {
        let _ = write!(text, ", {} not denials", count(o.other, "event", "events"));
    }
    if !o.problems.is_empty() {
        let _ = write!(
            text,
            ", {} unusable",
            count(o.problems.len(), "line", "lines")
        );
    }
    text.push(')');
    if rules == 0 {
        text.push_str(": nothing to suggest");
    } else {
        let _ = write!(
            text,
            " → {} for {}",
            count(rules, "rule", "rules"),
            o.policy
        );
    }
    text
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Audit => "audit",
    }
}

fn lines(log: &str, r: &Replay) -> String {
    let shown: Vec<String> = r.lines.iter().take(3).map(ToString::to_string).collect();
    let more = r.lines.len().saturating_sub(shown.len());
    let mut text = format!("{log}:{}", shown.join(","));
    if more > 0 {
        let _ = write!(text, " (+{more})");
    }
    text
}

fn replay_line(log: &str, r: &Replay) -> String {
    let why = match (&r.rule, r.after) {
        (Some(rule), Verdict::Allow | Verdict::Audit) => format!("by {rule}"),
        _ => format!("still denied: {}", r.reason),
    };
    format!(
        "{:<5} {} {} from `{}`: {why}",
        verdict(r.after),
        lines(log, r),
        r.request,
        r.binary
    )
}

/// The verdict, whether it shows more than the denials, and the replay
/// count: what `--format policy` says on stderr.
fn summary_lines(o: &Outcome) -> String {
    let mut out = format!("{}\n", headline(o));
    for b in &o.beyond {
        let _ = writeln!(out, "warning: the proof shows more than the denials: {b}");
    }
    if let Some(r) = &o.proof {
        let _ = writeln!(out, "proof: {}", r.verdict.word());
    }
    if let Some(why) = &o.inconclusive {
        let _ = writeln!(out, "proof: inconclusive: {why}");
    }
    let still = o.replay.iter().filter(|r| r.after == Verdict::Deny).count();
    if !o.replay.is_empty() {
        let _ = writeln!(
            out,
            "replay: {} of {} denied requests allowed with the change",
            o.replay.len() - still,
            o.replay.len()
        );
    }
    out
}

fn human(o: &Outcome) -> String {
    let mut out = format!("{}\n", headline(o));
    if !o.beyond.is_empty() {
        out.push_str("\n✗ the proof shows more than the denials explain:\n");
        for b in &o.beyond {
            let _ = writeln!(out, "  - {b}");
        }
    }
    if o.suggestions.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n{} to {}:",
        if o.yaml {
            "network_policies entries to add"
        } else {
            "rules to add"
        },
        o.policy
    );
    for l in o.patch.lines() {
        let _ = writeln!(out, "+ {l}");
    }
    for n in &o.notes {
        let _ = writeln!(out, "\nnote: {n}");
    }
    if o.failure.is_some() {
        out.push_str("\nthe patched policy cannot be proved or replayed (errors above)\n");
        return out;
    }
    out.push('\n');
    match &o.proof {
        Some(r) => {
            out.push_str(&findings::render(r, FindingsFormat::Human, &names(o), 0));
            if o.beyond.is_empty() && (!r.findings.is_empty() || !r.reach.is_empty()) {
                out.push_str("\nexplained: every finding above is a denied request's binary, destination and port\n");
            }
        }
        None => {
            let _ = writeln!(
                out,
                "diff --prove: inconclusive: {}",
                o.inconclusive.as_deref().unwrap_or_default()
            );
        }
    }
    if !o.replay.is_empty() {
        out.push_str("\neach denied request, under the patched policy (`eval`):\n");
        for r in &o.replay {
            let _ = writeln!(out, "  {}", replay_line(&o.log, r));
        }
    }
    out
}

fn markdown(o: &Outcome) -> String {
    let mut out = format!("### Suggested policy change\n\n{}\n", headline(o));
    if !o.beyond.is_empty() {
        out.push_str("\n**⚠ The proof shows more than the denials explain:**\n\n");
        for b in &o.beyond {
            let _ = writeln!(out, "- {b}");
        }
    }
    if o.suggestions.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n```diff");
    for l in o.patch.lines() {
        let _ = writeln!(out, "+{l}");
    }
    out.push_str("```\n");
    for n in &o.notes {
        let _ = writeln!(out, "\n> {n}");
    }
    if let Some(f) = &o.failure {
        let _ = writeln!(out, "\n{}", f.markdown().trim_end());
        return out;
    }
    out.push('\n');
    match &o.proof {
        Some(r) => out.push_str(&findings::render(r, FindingsFormat::Markdown, &names(o), 0)),
        None => {
            let _ = writeln!(
                out,
                "Proof inconclusive: {}",
                o.inconclusive.as_deref().unwrap_or_default()
            );
        }
    }
    if !o.replay.is_empty() {
        out.push_str(
            "\n\n<details><summary>Each denied request, under the patched policy</summary>\n\n",
        );
        for r in &o.replay {
            let _ = writeln!(out, "- {}", replay_line(&o.log, r));
        }
        out.push_str("\n</details>\n");
    }
    out
}

fn to_json(o: &Outcome) -> Value {
    let suggestions: Vec<Value> = o
        .suggestions
        .iter()
        .map(|s| {
            json!({
                "binary": s.binary,
                "sha256": s.sha256,
                "destination": s.dest,
                "port": s.port,
                "inspected": s.inspected,
                "rules": s.rules.iter().map(|r| json!({"methods": r.methods, "paths": r.paths})).collect::<Vec<_>>(),
                "addresses": s.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "credentials": s.credentials,
                "widened": s.widened,
                "lines": s.lines,
            })
        })
        .collect();
    let replay: Vec<Value> = o
        .replay
        .iter()
        .map(|r| {
            json!({
                "lines": r.lines,
                "binary": r.binary,
                "request": r.request,
                "before": verdict(r.before),
                "after": verdict(r.after),
                "rule": r.rule,
                "reason": r.reason,
            })
        })
        .collect();
    let mut errors: Vec<Value> = o
        .problems
        .iter()
        .map(|p| json!({"path": o.log, "line": p.line, "message": p.message}))
        .collect();
    let mut files = Value::Array(Vec::new());
    if let Some(f) = &o.failure {
        let (fs, es) = f.json_members();
        files = fs;
        if let Value::Array(es) = es {
            errors.extend(es);
        }
    }
    json!({
        "policy": o.policy,
        "log": o.log,
        "format": if o.yaml { "openshell-yaml" } else { "policy" },
        "lines": o.lines,
        "denials": o.denials,
        "other_events": o.other,
        "suggestions": suggestions,
        "patch": o.patch,
        "patched": if o.failure.is_none() { Value::from(o.patched.as_str()) } else { Value::Null },
        "beyond_denials": o.beyond,
        "notes": o.notes,
        "proof": o.proof.as_ref().map(prover::Report::to_json),
        "inconclusive": o.inconclusive,
        "replay": replay,
        "errors": errors,
        "files": files,
    })
}
