//! Rendering a containment proof (`diff --prove --within BOUNDARY
//! CANDIDATE`): every excess blocks, so there is no "new reach" section;
//! file rights and process settings are excesses like requests. JSON is
//! `prover::Report::to_json`; the other formats are here.

use prover::{Report, SandboxChange, Verdict};
use serde_json::{Value, json};

use super::findings::{
    Names, annotation, finding_annotation, markdown_finding, omitted_lines, push_findings,
    rule_text,
};
use super::{github_escape, sarif};

/// The report in `format` (JSON excepted, which the prover writes).
pub fn render(
    report: &Report,
    format: super::findings::FindingsFormat,
    names: &Names,
    exit_code: u8,
) -> String {
    use super::findings::FindingsFormat as F;
    match format {
        F::Human => human(report, names),
        F::Json => report.to_json().to_string(),
        F::Sarif => sarif_doc(report, names, exit_code).to_string(),
        F::Github => github(report, names),
        F::Markdown => markdown(report, names),
    }
}

/// Where a sandbox excess is reported: the candidate's rule that grants
/// it, or the candidate's first line.
fn sandbox_place<'a>(c: &'a SandboxChange, names: &'a Names) -> (&'a str, u32, u32) {
    c.rule.as_ref().map_or((names.new.as_str(), 1, 0), |l| {
        (l.file.as_str(), l.line, l.column)
    })
}

fn sandbox_rule(c: &SandboxChange) -> String {
    c.rule.as_ref().map_or_else(
        || "(a setting of the policy, no single rule)".to_owned(),
        ToString::to_string,
    )
}

fn human(report: &Report, names: &Names) -> String {
    let mut out = format!(
        "diff --prove --within {} {}: {}\n",
        names.old,
        names.new,
        super::containment_headline(report)
    );
    for f in &report.findings {
        let mark = if f.suppressed { "accepted" } else { "✗" };
        out.push_str(&format!(
            "\n{mark} {} ({})\n  {}\n  witness:  {} from `{}`\n  allowed by: {}\n",
            f.category,
            f.code,
            f.message,
            f.witness.request_text(),
            f.witness.binary,
            rule_text(f)
        ));
        if !f.old_reason.is_empty() {
            out.push_str(&format!("  boundary: {}\n", f.old_reason));
        }
        if let Some(a) = f.acceptance.as_ref().filter(|_| f.suppressed) {
            out.push_str(&format!(
                "  accepted: {} (by {})\n",
                a.reason, a.accepted_by
            ));
        }
    }
    for c in &report.sandbox {
        out.push_str(&format!(
            "\n✗ {} ({})\n  {}\n  granted by: {}\n",
            c.category,
            c.code,
            c.message,
            sandbox_rule(c)
        ));
    }
    for u in &report.unsupported {
        out.push_str(&format!("\n? unsupported\n  {u}\n"));
    }
    for line in omitted_lines(report) {
        out.push_str(&format!("\n{line}\n"));
    }
    if !report.credentials_declared {
        out.push_str(&format!("\nnote: {}\n", no_credentials()));
    }
    for n in &report.notes {
        out.push_str(&format!("\nnote: {n}\n"));
    }
    if report.verdict == Verdict::Exceeds
        && let Some(why) = &report.inconclusive
    {
        out.push_str(&format!("\nnote: not every question was decided: {why}\n"));
    }
    out
}

/// Containment asks about every request, credentialed or not: without a
/// credential only the credential question is vacuous.
fn no_credentials() -> &'static str {
    "neither policy declares a credential or secret: no credential can go beyond the boundary, and every request was compared"
}

fn markdown(report: &Report, names: &Names) -> String {
    let icon = match report.verdict {
        Verdict::Exceeds => "🔴",
        Verdict::Inconclusive | Verdict::Unsupported => "🟡",
        Verdict::Within | Verdict::NoNewAccess | Verdict::NewReach | Verdict::Widened => "🟢",
    };
    let mut out = format!(
        "### {icon} Policy prover: {}\n\n`{}` within `{}`\n\n",
        super::containment_headline(report),
        names.new,
        names.old
    );
    for f in &report.findings {
        out.push_str(&markdown_finding(f, "boundary"));
    }
    for c in &report.sandbox {
        out.push_str(&format!(
            "- ❌ **`{}`** — {} · granted by `{}`\n",
            c.category,
            c.message,
            sandbox_rule(c)
        ));
    }
    for u in &report.unsupported {
        out.push_str(&format!("- ❔ unsupported — {u}\n"));
    }
    for line in omitted_lines(report) {
        out.push_str(&format!("- …{line}\n"));
    }
    if !report.findings.is_empty() {
        out.push_str("\n<details><summary>Details</summary>\n\n");
        for f in &report.findings {
            out.push_str(&format!("- **`{}`**: {}\n", f.category, f.message));
        }
        out.push_str("\n</details>\n");
    }
    if !report.credentials_declared {
        out.push_str(&format!("\n> note: {}\n", no_credentials()));
    }
    for n in &report.notes {
        out.push_str(&format!("\n> note: {n}\n"));
    }
    out
}

fn github(report: &Report, names: &Names) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let level = if f.suppressed { "notice" } else { "error" };
        out.push_str(&finding_annotation(level, f, names, "boundary"));
    }
    for c in &report.sandbox {
        out.push_str(&annotation(
            "error",
            sandbox_place(c, names),
            c.category.name(),
            &c.message,
        ));
    }
    for u in &report.unsupported {
        out.push_str(&format!(
            "::warning file={},line=1,title=unsupported::{}\n",
            github_escape(&names.new, true),
            github_escape(u, false)
        ));
    }
    let level = match report.verdict {
        Verdict::Exceeds => "error",
        Verdict::Inconclusive | Verdict::Unsupported => "warning",
        Verdict::Within | Verdict::NoNewAccess | Verdict::NewReach | Verdict::Widened => "notice",
    };
    out.push_str(&format!(
        "::{level} title=policy prover::{}\n",
        github_escape(&super::containment_headline(report), false)
    ));
    out
}

fn sarif_doc(report: &Report, names: &Names, exit_code: u8) -> Value {
    let mut log = sarif::Log::new();
    let region = |line: u32, column: u32| sarif::Region::at(line, column.max(1));
    push_findings(&mut log, report, names, "boundary");
    for c in &report.sandbox {
        let (file, line, column) = sandbox_place(c, names);
        let r = json!({
            "level": "error",
            "message": { "text": c.message },
            "locations": log.locations(file, Some(region(line, column))),
            "properties": { "category": c.category.name(), "change": c },
        });
        log.push(&sarif::Rule::category(c.category), r);
    }
    for u in &report.unsupported {
        log.notify("warning", u);
    }
    if report.verdict == Verdict::Inconclusive
        && let Some(why) = &report.inconclusive
    {
        log.notify("warning", why);
    }
    log.set_properties(json!({
        "question": "within",
        "verdict": report.verdict.word(),
        "credentials_declared": report.credentials_declared,
    }));
    log.finish(exit_code)
}
