//! Rendering prover findings: human text, JSON, SARIF 2.1.0, GitHub
//! workflow annotations, and a Markdown PR comment.

use crate::output::outln;
use prover::{Category, Finding, Report, Verdict};
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

pub fn print(report: &Report, format: FindingsFormat, names: &Names) {
    let out = match format {
        FindingsFormat::Human => human(report, names),
        FindingsFormat::Json => report.to_json().to_string(),
        FindingsFormat::Sarif => sarif_doc(report, names).to_string(),
        FindingsFormat::Github => github(report, names),
        FindingsFormat::Markdown => markdown(report, names),
    };
    outln!("{}", out.trim_end());
}

fn omitted_lines(report: &Report) -> Vec<String> {
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

fn headline(report: &Report) -> String {
    let open = report.findings.iter().filter(|f| !f.suppressed).count();
    let accepted = report.findings.len() - open;
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
        Verdict::NoNewAccess => format!("no new credentialed access{acc}"),
        Verdict::Inconclusive => format!(
            "inconclusive: {}",
            report
                .inconclusive
                .as_deref()
                .unwrap_or("the solver gave up")
        ),
    }
}

fn rule_text(f: &Finding) -> String {
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
        if let Some(a) = &f.acceptance {
            out.push_str(&format!(
                "  accepted: {} (by {}){}\n",
                a.reason,
                a.accepted_by,
                a.expired
                    .as_ref()
                    .map(|e| format!(" — {e}"))
                    .unwrap_or_default()
            ));
        }
    }
    for line in omitted_lines(report) {
        out.push_str(&format!("\n{line}\n"));
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
        Verdict::Inconclusive => "🟡",
    };
    let mut out = format!(
        "### {icon} Policy prover: {}\n\n`{}` → `{}`\n\n",
        headline(report),
        names.old,
        names.new
    );
    for f in &report.findings {
        let status = if f.suppressed { "✅ accepted" } else { "❌" };
        out.push_str(&format!(
            "- {status} **`{}`** — `{}` from `{}` · allowed by `{}` · before: {}\n",
            f.category,
            f.witness.request_text(),
            f.witness.binary,
            rule_text(f),
            if f.old_reason.is_empty() {
                "—"
            } else {
                &f.old_reason
            }
        ));
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
    for n in &report.notes {
        out.push_str(&format!("\n> note: {n}\n"));
    }
    out
}

fn github(report: &Report, names: &Names) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let level = if f.suppressed { "notice" } else { "error" };
        let (file, line) = f
            .new_rule
            .as_ref()
            .map_or((names.new.as_str(), 1), |l| (l.file.as_str(), l.line));
        let msg = format!(
            "{} — witness: {} from {} (before: {})",
            f.message,
            f.witness.request_text(),
            f.witness.binary,
            f.old_reason
        );
        out.push_str(&format!(
            "::{level} file={},line={line},title={}::{}\n",
            github_escape(file, true),
            github_escape(f.category.name(), true),
            github_escape(&msg, false)
        ));
    }
    let summary = headline(report);
    let level = match report.verdict {
        Verdict::Widened => "error",
        Verdict::Inconclusive => "warning",
        Verdict::NoNewAccess => "notice",
    };
    out.push_str(&format!(
        "::{level} title=policy prover::{}\n",
        github_escape(&summary, false)
    ));
    out
}

fn sarif_rules() -> Vec<Value> {
    Category::ALL
        .iter()
        .map(|c| {
            json!({
                "id": c.name(),
                "name": c.name(),
                "shortDescription": { "text": c.summary() },
                "defaultConfiguration": { "level": "error" },
                "properties": { "code": c.code().id },
            })
        })
        .collect()
}

fn sarif_doc(report: &Report, names: &Names) -> Value {
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let (file, line) = f
                .new_rule
                .as_ref()
                .map_or((names.new.as_str(), 1), |l| (l.file.as_str(), l.line));
            let mut r = json!({
                "ruleId": f.category.name(),
                "level": if f.suppressed { "note" } else { "error" },
                "message": { "text": format!("{} (witness: {} from {}; before: {})", f.message, f.witness.request_text(), f.witness.binary, f.old_reason) },
                "locations": [sarif::location(file, line, 1, line, 1)],
                "properties": {
                    "witness": f.witness,
                    "region": f.region,
                    "verified": f.verified,
                },
            });
            if f.suppressed
                && let Some(obj) = r.as_object_mut()
            {
                let why = f.acceptance.as_ref().map_or(String::new(), |a| a.reason.clone());
                obj.insert(
                    "suppressions".to_owned(),
                    json!([{ "kind": "external", "justification": why }]),
                );
            }
            r
        })
        .collect();
    sarif::document(sarif_rules(), results)
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
