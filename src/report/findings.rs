//! Rendering prover findings: human text, JSON, SARIF 2.1.0, GitHub
//! workflow annotations, and a Markdown PR comment.

use prover::{CredentialChange, Finding, Report, Verdict};
use serde_json::{Value, json};

use super::{github_escape, sarif};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingsFormat {
    Human,
    Json,
    Sarif,
    Github,
    Markdown,
}

/// The two policy files, for headings and for locations when a finding
/// has no rule of its own.
pub struct Names {
    pub old: String,
    pub new: String,
}

/// The report as text of the format, for commands that print it inside
/// their own (`suggest`).
pub fn render(report: &Report, format: FindingsFormat, names: &Names, exit_code: u8) -> String {
    match format {
        FindingsFormat::Human => human(report, names),
        FindingsFormat::Json => report.to_json().to_string(),
        FindingsFormat::Sarif => sarif_doc(report, names, exit_code).to_string(),
        FindingsFormat::Github => github(report, names),
        FindingsFormat::Markdown => markdown(report, names),
    }
}

pub(super) fn omitted_lines(report: &Report) -> Vec<String> {
    report
        .omitted
        .iter()
        .map(|o| {
            format!(
                "and {}{} more `{}` region{}",
                if o.at_least { "at least " } else { "" },
                o.count,
                o.category,
                if o.count == 1 { "" } else { "s" }
            )
        })
        .collect()
}

/// The reach section's size: distinct binaries and destinations of the
/// new uncredentialed reach, and the sandbox changes.
fn reach_counts(report: &Report) -> (usize, usize, usize) {
    let mut bins = std::collections::BTreeSet::new();
    let mut dests = std::collections::BTreeSet::new();
    for f in &report.reach {
        bins.extend(f.region.binaries.iter());
        dests.extend(f.region.hosts.iter().filter(|h| !h.starts_with('<')));
        dests.extend(f.region.addresses.iter());
    }
    (
        bins.len(),
        dests.len().max(usize::from(!report.reach.is_empty())),
        report.sandbox.len(),
    )
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One line on the reach section: `2 binaries × 3 destinations, 1
/// filesystem or enforcement change`.
fn reach_line(report: &Report) -> String {
    let (b, d, s) = reach_counts(report);
    let more = report
        .omitted
        .iter()
        .filter(|o| o.category.is_reach())
        .map(|o| o.count)
        .sum::<usize>();
    let mut parts = Vec::new();
    if !report.reach.is_empty() {
        parts.push(format!(
            "{} × {} ({}{})",
            count(b, "binary", "binaries"),
            count(d, "destination", "destinations"),
            count(report.reach.len(), "witness", "witnesses"),
            if more > 0 {
                format!(", {more} more regions")
            } else {
                String::new()
            }
        ));
    }
    if s > 0 {
        parts.push(count(
            s,
            "filesystem or enforcement change",
            "filesystem or enforcement changes",
        ));
    }
    parts.join(", ")
}

/// Said whenever the credentialed question had nothing to ask about.
const NO_CREDENTIALS: &str = "neither policy declares a credential or secret: \"no new credentialed access\" holds vacuously, and only the new reach tells what changed";

fn headline(report: &Report) -> String {
    let accepted = report.findings.iter().filter(|f| f.suppressed).count();
    let open = report.findings.len() - accepted + report.credentials.len();
    let acc = if accepted > 0 {
        format!(", {accepted} accepted")
    } else {
        String::new()
    };
    match report.verdict {
        Verdict::Widened => format!(
            "widened: {open} finding{}{acc}",
            if open == 1 { "" } else { "s" }
        ),
        Verdict::NoNewAccess => format!("no new access: the candidate adds nothing{acc}"),
        Verdict::NewReach => {
            let line = reach_line(report);
            let but = if line.is_empty() {
                String::new()
            } else {
                format!(", but {line}")
            };
            format!("new reach: no new credentialed access{acc}{but}")
        }
        // A containment report is rendered by `within`.
        Verdict::Within | Verdict::Exceeds | Verdict::Unsupported => {
            super::containment_headline(report)
        }
        Verdict::Inconclusive => format!(
            "inconclusive: {}",
            report
                .inconclusive
                .as_deref()
                .unwrap_or("the solver gave up")
        ),
    }
}

pub(super) fn rule_text(f: &Finding) -> String {
    f.new_rule
        .as_ref()
        .map_or_else(|| "(no single rule)".to_owned(), ToString::to_string)
}

fn human(report: &Report, names: &Names) -> String {
    let mut out = format!(
        "diff --prove {} → {}: {}\n",
        names.old,
        names.new,
        headline(report)
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
            out.push_str(&format!("  before:   {}\n", f.old_reason));
        }
        if let Some(line) = acceptance_line(f) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    for c in &report.credentials {
        out.push_str(&format!(
            "\n✗ {} ({})\n  {}\n  defined at: {}\n",
            c.category,
            c.code,
            c.message,
            change_rule(c)
        ));
    }
    if !report.reach.is_empty() || !report.sandbox.is_empty() {
        out.push_str(&format!(
            "\nnew reach (does not block; not \"adds nothing\"): {}\n",
            reach_line(report)
        ));
    }
    for f in &report.reach {
        out.push_str(&format!(
            "\n+ {} ({})\n  {}\n  witness:  {} from `{}`\n  allowed by: {}\n",
            f.category,
            f.code,
            f.message,
            f.witness.request_text(),
            f.witness.binary,
            rule_text(f)
        ));
        if !f.old_reason.is_empty() {
            out.push_str(&format!("  before:   {}\n", f.old_reason));
        }
    }
    for c in &report.sandbox {
        out.push_str(&format!(
            "\n+ {} ({})\n  {}\n",
            c.category, c.code, c.message
        ));
    }
    for line in omitted_lines(report) {
        out.push_str(&format!("\n{line}\n"));
    }
    if !report.credentials_declared {
        out.push_str(&format!("\nnote: {NO_CREDENTIALS}\n"));
    }
    for n in &report.notes {
        out.push_str(&format!("\nnote: {n}\n"));
    }
    if report.verdict == Verdict::Widened
        && let Some(why) = &report.inconclusive
    {
        out.push_str(&format!("\nnote: not every question was decided: {why}\n"));
    }
    out
}

fn markdown(report: &Report, names: &Names) -> String {
    let icon = match report.verdict {
        Verdict::Widened => "🔴",
        Verdict::NoNewAccess => "🟢",
        Verdict::NewReach => "🔵",
        Verdict::Inconclusive | Verdict::Unsupported => "🟡",
        Verdict::Within => "🟢",
        Verdict::Exceeds => "🔴",
    };
    let mut out = format!(
        "### {icon} Policy prover: {}\n\n`{}` → `{}`\n\n",
        headline(report),
        names.old,
        names.new
    );
    for f in &report.findings {
        out.push_str(&markdown_finding(f, "before"));
    }
    for c in &report.credentials {
        out.push_str(&format!(
            "- ❌ **`{}`** — {} · defined at `{}`\n",
            c.category,
            c.message,
            change_rule(c)
        ));
    }
    for line in omitted_lines(report) {
        out.push_str(&format!("- …{line}\n"));
    }
    if !report.findings.is_empty() {
        out.push_str("\n<details><summary>Details</summary>\n\n");
        for f in &report.findings {
            out.push_str(&format!("- **`{}`**: {}\n", f.category, f.message));
            if let Some(line) = acceptance_line(f) {
                out.push_str(&format!("  ({line})\n"));
            }
        }
        out.push_str("\n</details>\n");
    }
    if !report.reach.is_empty() || !report.sandbox.is_empty() {
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(&format!(
            "#### New reach (does not block)\n\n{}\n\n",
            reach_line(report)
        ));
        for f in &report.reach {
            out.push_str(&format!(
                "- ➕ **`{}`** — `{}` from `{}` · allowed by `{}` · {}\n",
                f.category,
                f.witness.request_text(),
                f.witness.binary,
                rule_text(f),
                f.message
            ));
        }
        for c in &report.sandbox {
            out.push_str(&format!("- ➕ **`{}`** — {}\n", c.category, c.message));
        }
    }
    if !report.credentials_declared {
        out.push_str(&format!("\n> note: {NO_CREDENTIALS}\n"));
    }
    for n in &report.notes {
        out.push_str(&format!("\n> note: {n}\n"));
    }
    out
}

fn github(report: &Report, names: &Names) -> String {
    let mut out = String::new();
    // New reach does not block: a notice, like an accepted finding.
    let blocking = report.findings.iter().map(|f| (f, !f.suppressed));
    for (f, blocks) in blocking.chain(report.reach.iter().map(|f| (f, false))) {
        let level = if blocks { "error" } else { "notice" };
        out.push_str(&finding_annotation(level, f, names, "before"));
    }
    for c in &report.credentials {
        out.push_str(&annotation(
            "error",
            change_place(c, names),
            c.category.name(),
            &c.message,
        ));
    }
    for c in &report.sandbox {
        out.push_str(&annotation(
            "notice",
            (&names.new, 1, 0),
            c.category.name(),
            &c.message,
        ));
    }
    if !report.credentials_declared {
        out.push_str(&format!(
            "::notice title=policy prover::{}\n",
            github_escape(NO_CREDENTIALS, false)
        ));
    }
    let summary = headline(report);
    let level = match report.verdict {
        Verdict::Widened | Verdict::Exceeds => "error",
        Verdict::Inconclusive | Verdict::Unsupported => "warning",
        Verdict::NoNewAccess | Verdict::NewReach | Verdict::Within => "notice",
    };
    out.push_str(&format!(
        "::{level} title=policy prover::{}\n",
        github_escape(&summary, false)
    ));
    out
}

/// One finding as a Markdown list item; `against` names what its old
/// reason describes (`before`, `boundary`).
pub(super) fn markdown_finding(f: &Finding, against: &str) -> String {
    let status = if f.suppressed { "✅ accepted" } else { "❌" };
    format!(
        "- {status} **`{}`** — `{}` from `{}` · allowed by `{}` · {against}: {}\n",
        f.category,
        f.witness.request_text(),
        f.witness.binary,
        rule_text(f),
        if f.old_reason.is_empty() {
            "—"
        } else {
            &f.old_reason
        }
    )
}

/// A finding's message with its witness, as a GitHub annotation and a
/// SARIF result say it; `against` as for [`markdown_finding`].
fn github_text(f: &Finding, against: &str) -> String {
    format!(
        "{} — witness: {} from {} ({against}: {}){}",
        f.message,
        f.witness.request_text(),
        f.witness.binary,
        f.old_reason,
        acceptance_suffix(f)
    )
}

fn sarif_text(f: &Finding, against: &str) -> String {
    format!(
        "{} (witness: {} from {}; {against}: {}){}",
        f.message,
        f.witness.request_text(),
        f.witness.binary,
        f.old_reason,
        acceptance_suffix(f)
    )
}

/// What an accepted-risk entry of the finding's category did to it. CI
/// shows only the annotation or the SARIF message: an entry that was meant
/// to suppress the finding and did not (a scope that leaves part of the
/// region out, an expiry passed) must say so there, or the author sees a
/// blocking finding and a risks file that looks right.
fn acceptance_line(f: &Finding) -> Option<String> {
    let a = f.acceptance.as_ref()?;
    if let Some(why) = &a.not_covered {
        return Some(format!(
            "not accepted: the `{}` entry (by {}) does not suppress it: {why}",
            a.query, a.accepted_by
        ));
    }
    if f.suppressed {
        return Some(format!("accepted: {} (by {})", a.reason, a.accepted_by));
    }
    a.expired.as_ref().map(|e| {
        format!(
            "not accepted: the `{}` entry (by {}) {e}",
            a.query, a.accepted_by
        )
    })
}

fn acceptance_suffix(f: &Finding) -> String {
    acceptance_line(f).map_or_else(String::new, |line| format!(" — {line}"))
}

/// Each of the report's findings as a SARIF result at the rule that
/// allows it: an error, or a suppressed note when accepted; `against` as
/// for [`markdown_finding`].
pub(super) fn push_findings(log: &mut sarif::Log, report: &Report, names: &Names, against: &str) {
    for f in &report.findings {
        let (file, line, column) = place(f, names);
        let region = sarif::Region::at(line, column.max(1));
        let mut r = json!({
            "level": if f.suppressed { "note" } else { "error" },
            "message": { "text": sarif_text(f, against) },
            "locations": log.locations(file, Some(region)),
            "properties": finding_properties(f),
        });
        suppress(&mut r, f);
        log.push(&sarif::Rule::category(f.category), r);
    }
}

/// One GitHub workflow annotation at `place`: a column only when known.
pub(super) fn annotation(
    level: &str,
    (file, line, column): (&str, u32, u32),
    title: &str,
    message: &str,
) -> String {
    let col = if column > 0 {
        format!(",col={column}")
    } else {
        String::new()
    };
    format!(
        "::{level} file={},line={line}{col},title={}::{}\n",
        github_escape(file, true),
        github_escape(title, true),
        github_escape(message, false)
    )
}

/// A finding's annotation, its witness in the message.
pub(super) fn finding_annotation(level: &str, f: &Finding, names: &Names, against: &str) -> String {
    annotation(
        level,
        place(f, names),
        f.category.name(),
        &github_text(f, against),
    )
}

/// What a SARIF result says of a finding besides its message.
fn finding_properties(f: &Finding) -> Value {
    let mut p = json!({
        "category": f.category.name(),
        "witness": f.witness,
        "region": f.region,
        "verified": f.verified,
    });
    if let (Some(a), Some(map)) = (&f.acceptance, p.as_object_mut()) {
        map.insert("acceptance".to_owned(), json!(a));
    }
    p
}

/// Where a finding is reported: the rule that allows it, or the new
/// policy's first line when no single rule does. The column is the one
/// the JSON report gives (`new_rule.column`), absent when it has none.
fn place<'a>(f: &'a Finding, names: &'a Names) -> (&'a str, u32, u32) {
    f.new_rule.as_ref().map_or((names.new.as_str(), 1, 0), |l| {
        (l.file.as_str(), l.line, l.column)
    })
}

/// Where a credential change is reported: the new policy's definition of
/// the credential, or its first line.
fn change_place<'a>(c: &'a CredentialChange, names: &'a Names) -> (&'a str, u32, u32) {
    c.rule.as_ref().map_or((names.new.as_str(), 1, 0), |l| {
        (l.file.as_str(), l.line, l.column)
    })
}

fn change_rule(c: &CredentialChange) -> String {
    c.rule
        .as_ref()
        .map_or_else(|| "(unknown)".to_owned(), ToString::to_string)
}

fn sarif_doc(report: &Report, names: &Names, exit_code: u8) -> Value {
    let mut log = sarif::Log::new();
    let region = |line: u32, column: u32| sarif::Region::at(line, column.max(1));
    push_findings(&mut log, report, names, "before");
    for c in &report.credentials {
        let (file, line, column) = change_place(c, names);
        let r = json!({
            "level": "error",
            "message": { "text": c.message },
            "locations": log.locations(file, Some(region(line, column))),
            "properties": { "category": c.category.name(), "change": c },
        });
        log.push(&sarif::Rule::category(c.category), r);
    }
    // New reach is a note: it does not block, but code scanning shows it.
    for f in &report.reach {
        let (file, line, column) = place(f, names);
        let mut properties = finding_properties(f);
        if let Some(map) = properties.as_object_mut() {
            map.insert("credentialed".into(), json!(false));
        }
        let r = json!({
            "level": "note",
            "message": { "text": sarif_text(f, "before") },
            "locations": log.locations(file, Some(region(line, column))),
            "properties": properties,
        });
        log.push(&sarif::Rule::category(f.category), r);
    }
    for c in &report.sandbox {
        let r = json!({
            "level": "note",
            "message": { "text": c.message },
            "locations": log.locations(&names.new, Some(sarif::Region::at(1, 1))),
            "properties": { "category": c.category.name(), "change": c },
        });
        log.push(&sarif::Rule::category(c.category), r);
    }
    if report.verdict == Verdict::Inconclusive
        && let Some(why) = &report.inconclusive
    {
        log.notify("warning", why);
    }
    log.set_properties(json!({
        "verdict": report.verdict.word(),
        "credentials_declared": report.credentials_declared,
    }));
    log.finish(exit_code)
}

/// `check`: each finding of the single-policy queries as a warning at the
/// rule it blames, with the category's stable code (R01xx).
pub fn diagnostics(
    report: &Report,
    sources: &[policy_lang::source::SourceFile],
) -> Vec<policy_lang::diag::Diagnostic> {
    use policy_lang::diag::Diagnostic;
    use policy_lang::source::Span;
    let mut out = Vec::new();
    for f in report.findings.iter().filter(|f| !f.suppressed) {
        let Some(loc) = &f.new_rule else { continue };
        let Some(file) = sources.iter().find(|s| s.path() == loc.file) else {
            continue;
        };
        let text = file.text();
        let line_start = text
            .split_inclusive('\n')
            .take(loc.line.saturating_sub(1) as usize)
            .map(str::len)
            .sum::<usize>();
        let line_text = text
            .get(line_start..)
            .and_then(|t| t.lines().next())
            .unwrap_or("");
        let col = loc.column.saturating_sub(1) as usize;
        let start = line_start + line_text.char_indices().nth(col).map_or(0, |(i, _)| i);
        let end = (line_start + line_text.len()).max(start);
        let code = f.category.code();
        let message = format!("{}: {}", f.category, f.message);
        let help = format!(
            "witness: {} from `{}`; narrow the rule, or record the risk in an accepted-risks file (`diff --prove --accepted-risks`)",
            f.witness.request_text(),
            f.witness.binary
        );
        out.push(
            Diagnostic::new(code, file, Span::new(start, end), message)
                .label(f.category.name())
                .help(help),
        );
    }
    out
}

/// Marks a SARIF result suppressed when its finding was accepted, with the
/// acceptance's reason.
fn suppress(result: &mut serde_json::Value, f: &Finding) {
    if f.suppressed
        && let Some(obj) = result.as_object_mut()
    {
        let why = f
            .acceptance
            .as_ref()
            .map_or(String::new(), |a| a.reason.clone());
        obj.insert(
            "suppressions".to_owned(),
            json!([{ "kind": "external", "justification": why }]),
        );
    }
}
