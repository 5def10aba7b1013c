//! `openshell-policy test`: policy test files (`*.test.yaml`), each a
//! policy or bundle and the decisions concrete requests must get. Every
//! decision comes from [`super::eval::decide`], the function `eval` answers
//! with, so a passing case is one `eval` would answer the same way.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use policy_bundle::Bundle;
use policy_bundle::Origin;
use policy_bundle::eval::{Decision, Evaluator, RouteKind, Verdict};
use policy_lang::diag::Diagnostic;
use policy_lang::load;
use policy_lang::source::SourceFile;
use serde_json::{Value, json};

use super::eval::{Ask, AskError, WsMessageArg, decide};
use super::inputs::{self, Input};
use super::test_file::{self, Case, ExpectRule, Target};
use super::{EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::output::outln;
use crate::report::{Failure, FileReport, InputError, github_escape, sarif};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
    Junit,
    Github,
    Sarif,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Test files (`*.test.yaml`), directories to search for them
    /// recursively, or `-` for one test file on standard input.
    #[arg(required = true, value_name = "PATHS")]
    paths: Vec<PathBuf>,
    /// `human` (failures and a summary), `json`, `junit` (JUnit XML),
    /// `github` (workflow annotations) or `sarif`; printed on every exit.
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
}

/// One test file's outcome.
struct FileRun {
    path: String,
    /// The policy or bundle it ran against, as reports show it.
    target: Option<String>,
    cases: Vec<CaseRun>,
    /// Why it could not run: its own mistakes, or its policy's errors.
    failure: Option<Failure>,
}

struct CaseRun {
    case: Case,
    /// The decision, or why the case describes no request.
    outcome: Result<Actual, String>,
    mismatches: Vec<Mismatch>,
}

struct Actual {
    decision: Decision,
    /// The blamed rule's first line, when its source is at hand.
    rule_text: Option<String>,
}

/// A part of the answer that is not what the case expects.
struct Mismatch {
    what: &'static str,
    expected: String,
    actual: String,
}

impl CaseRun {
    fn passed(&self) -> bool {
        self.outcome.is_ok() && self.mismatches.is_empty()
    }
}

/// The document of `format` when the command line itself was refused.
pub(super) fn print_usage_error(format: &str, failure: Failure) {
    if let Ok(f) = Format::from_str(format, true)
        && f != Format::Human
    {
        let runs = [FileRun {
            path: "command line".to_owned(),
            target: None,
            cases: Vec::new(),
            failure: Some(failure),
        }];
        print(&runs, f, EXIT_INPUT);
    }
}

pub fn run(args: &Args) -> u8 {
    let (inputs, unusable) = inputs::expand(
        &args.paths,
        inputs::is_test_file,
        "test files (`*.test.yaml`)",
    );
    let mut runs: Vec<FileRun> = unusable
        .into_iter()
        .map(|e| FileRun {
            path: e.path.clone().unwrap_or_default(),
            target: None,
            cases: Vec::new(),
            failure: Some(Failure {
                files: Vec::new(),
                errors: vec![e],
            }),
        })
        .collect();
    runs.extend(inputs.iter().map(run_file));
    let code = exit_code(&runs);
    print(&runs, args.format, code);
    code
}

fn exit_code(runs: &[FileRun]) -> u8 {
    if runs
        .iter()
        .any(|r| r.failure.is_some() || r.cases.iter().any(|c| c.outcome.is_err()))
    {
        EXIT_INPUT
    } else if runs.iter().flat_map(|r| &r.cases).any(|c| !c.passed()) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}

fn run_file(input: &Input) -> FileRun {
    let path = input.shown();
    let mut run = FileRun {
        path: path.clone(),
        target: None,
        cases: Vec::new(),
        failure: None,
    };
    let (text, base) = match input {
        Input::File(p) => match std::fs::read_to_string(p) {
            Ok(t) => (t, p.parent().map(Path::to_path_buf).unwrap_or_default()),
            Err(e) => {
                run.failure = Some(Failure::error(
                    Some(path.clone()),
                    format!("cannot read `{path}`: {e}"),
                ));
                return run;
            }
        },
        Input::Stdin => match inputs::read_stdin() {
            Ok(t) => (t, PathBuf::new()),
            Err(e) => {
                run.failure = Some(Failure {
                    files: Vec::new(),
                    errors: vec![e],
                });
                return run;
            }
        },
    };
    let file = SourceFile::new(path.clone(), text);
    let spec = match test_file::parse(&file, &base) {
        Ok(s) => s,
        Err(diagnostics) => {
            run.failure = Some(Failure {
                files: vec![FileReport {
                    path: path.clone(),
                    diagnostics,
                }],
                errors: vec![InputError::new(
                    Some(path.clone()),
                    format!("`{path}` is not a valid test file; no case was run"),
                )],
            });
            return run;
        }
    };
    let (bundle, sources) = match load_target(&spec.target) {
        Ok(b) => b,
        Err(f) => {
            run.failure = Some(f);
            return run;
        }
    };
    run.target = Some(match &spec.target {
        Target::Policy { path, .. } | Target::Bundle(path) => path.display().to_string(),
    });
    let ev = Evaluator::new(bundle);
    run.cases = spec
        .cases
        .into_iter()
        .map(|case| run_case(&ev, &sources, case))
        .collect();
    run
}

/// The compiled policy, exactly as `eval --policy` compiles it, or the
/// bundle; and the policy's sources, for the rule texts.
fn load_target(target: &Target) -> Result<(Bundle, Vec<SourceFile>), Failure> {
    match target {
        Target::Bundle(path) => {
            let shown = path.display().to_string();
            let bytes = std::fs::read(path).map_err(|e| {
                Failure::error(
                    Some(shown.clone()),
                    format!("cannot read the bundle `{shown}`: {e}"),
                )
            })?;
            let bundle = Bundle::from_slice(&bytes)
                .map_err(|e| Failure::error(Some(shown.clone()), format!("`{shown}`: {e}")))?;
            Ok((bundle, Vec::new()))
        }
        Target::Policy { path, credentials } => {
            let shown = path.display().to_string();
            let (checked, bundle) = load::compile_file(path, credentials.as_deref())
                .map_err(|e| Failure::error(Some(shown.clone()), e.to_string()))?;
            match bundle {
                Some(b) => Ok((b, checked.sources)),
                None => Err(Failure {
                    files: vec![FileReport {
                        path: shown.clone(),
                        diagnostics: checked.diagnostics,
                    }],
                    errors: vec![InputError::new(
                        Some(shown.clone()),
                        format!("`{shown}` has errors; no case was run"),
                    )],
                }),
            }
        }
    }
}

fn run_case(ev: &Evaluator, sources: &[SourceFile], case: Case) -> CaseRun {
    let ask = Ask {
        binary: &case.binary,
        sha256: case.sha256.clone(),
        hash_binary: false,
        url: case.url.as_deref(),
        method: case.method.as_deref(),
        host: case.host.as_deref(),
        port: case.port,
        addr: case.addr,
        body: case.body.clone(),
        content_type: case.content_type.as_deref(),
        websocket: case.websocket,
        ws_message: case.websocket_text.clone().map(WsMessageArg::Text),
    };
    let decision = match decide(ev, &ask) {
        Ok(d) => d,
        Err(e) => {
            let why = match e {
                AskError::Url(e) => format!("invalid `url`: {e}"),
                AskError::WebsocketWithBody => {
                    "a WebSocket upgrade is a GET without a body".to_owned()
                }
            };
            return CaseRun {
                case,
                outcome: Err(why),
                mismatches: Vec::new(),
            };
        }
    };
    let rule_text = decision.rule.as_ref().and_then(|o| source_line(sources, o));
    let actual = Actual {
        decision,
        rule_text,
    };
    let mismatches = compare(&case, &actual);
    CaseRun {
        case,
        outcome: Ok(actual),
        mismatches,
    }
}

/// The first line of the rule `origin` names, from the policy's sources
/// (or, for a bundle, the file its provenance names, when readable).
fn source_line(sources: &[SourceFile], origin: &Origin) -> Option<String> {
    let index = usize::try_from(origin.line).ok()?.checked_sub(1)?;
    let from_disk;
    let text = match sources.iter().find(|s| s.path() == origin.file) {
        Some(s) => s.text(),
        None => {
            from_disk = std::fs::read_to_string(&origin.file).ok()?;
            from_disk.as_str()
        }
    };
    text.lines().nth(index).map(test_file::rule_text)
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Audit => "audit",
    }
}

fn compare(case: &Case, actual: &Actual) -> Vec<Mismatch> {
    let d = &actual.decision;
    let mut out = Vec::new();
    let got = verdict(d.decision);
    if got != case.expect.as_str() {
        out.push(Mismatch {
            what: "decision",
            expected: case.expect.as_str().to_owned(),
            actual: got.to_owned(),
        });
    }
    if let Some(want) = &case.rule {
        let matches = match (want, &d.rule) {
            (ExpectRule::None, None) => true,
            (ExpectRule::Text(t), Some(_)) => actual.rule_text.as_deref() == Some(t.as_str()),
            (ExpectRule::At { file, line }, Some(o)) => {
                o.line == *line && same_file(file, Path::new(&o.file))
            }
            _ => false,
        };
        if !matches {
            out.push(Mismatch {
                what: "rule",
                expected: want.to_string(),
                actual: blame(actual),
            });
        }
    }
    if let Some(want) = &case.credential
        && *want != d.credential
    {
        let show = |c: &Option<String>| c.as_ref().map_or("none".to_owned(), |c| format!("`{c}`"));
        out.push(Mismatch {
            what: "credential",
            expected: show(want),
            actual: show(&d.credential),
        });
    }
    if let Some(want) = &case.refusal
        && want.as_deref() != d.refusal()
    {
        let show = |c: Option<&str>| c.map_or("none".to_owned(), |c| format!("`{c}`"));
        out.push(Mismatch {
            what: "refusal",
            expected: show(want.as_deref()),
            actual: show(d.refusal()),
        });
    }
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => inputs::normalize(a) == inputs::normalize(b),
    }
}

/// The rule as `eval` names it, with its text: `file:line (binaries) `text``.
fn blame(actual: &Actual) -> String {
    match (&actual.decision.rule, &actual.rule_text) {
        (Some(o), Some(t)) => format!("{} `{t}`", o.blame()),
        (Some(o), None) => o.blame(),
        (None, _) => "none (no rule allowed it)".to_owned(),
    }
}

struct Totals {
    cases: usize,
    failed: usize,
    unusable: usize,
}

fn totals(runs: &[FileRun]) -> Totals {
    let cases = runs.iter().map(|r| r.cases.len()).sum();
    let failed = runs
        .iter()
        .flat_map(|r| &r.cases)
        .filter(|c| !c.passed())
        .count();
    Totals {
        cases,
        failed,
        unusable: runs.iter().filter(|r| r.failure.is_some()).count(),
    }
}

fn print(runs: &[FileRun], format: Format, exit_code: u8) {
    match format {
        Format::Human => print_human(runs),
        Format::Json => outln!("{}", json_doc(runs)),
        Format::Junit => crate::output::out!("{}", junit(runs)),
        Format::Github => {
            for line in github(runs) {
                outln!("{line}");
            }
        }
        Format::Sarif => outln!("{}", sarif_doc(runs, exit_code)),
    }
}

fn print_human(runs: &[FileRun]) {
    for r in runs {
        if let Some(f) = &r.failure {
            f.print_human();
            continue;
        }
        let failed: Vec<&CaseRun> = r.cases.iter().filter(|c| !c.passed()).collect();
        if failed.is_empty() {
            outln!("ok   {}: {} passed", r.path, plural(r.cases.len(), "case"));
            continue;
        }
        outln!(
            "FAIL {}: {} of {} cases failed",
            r.path,
            failed.len(),
            r.cases.len()
        );
        for c in failed {
            outln!("  ✗ {}:{} {}", r.path, c.case.line, c.case.name);
            for line in case_details(c) {
                outln!("      {line}");
            }
        }
    }
    let t = totals(runs);
    let mut summary = format!(
        "test: {} in {}: {} passed, {} failed",
        plural(t.cases, "case"),
        plural(runs.len(), "file"),
        t.cases - t.failed,
        t.failed
    );
    if t.unusable > 0 {
        summary.push_str(&format!(", {} not run", plural(t.unusable, "file")));
    }
    outln!("{summary}");
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// What a failing case shows: the request, each difference, the rule that
/// decided and why.
fn case_details(c: &CaseRun) -> Vec<String> {
    let mut lines = vec![format!("request:    {}", c.case.request())];
    let actual = match &c.outcome {
        Ok(a) => a,
        Err(why) => {
            lines.push(format!("error:      {why}"));
            return lines;
        }
    };
    for m in &c.mismatches {
        lines.push(format!(
            "{:<11} expected {}, got {}",
            format!("{}:", m.what),
            m.expected,
            m.actual
        ));
    }
    let route = match actual.decision.route {
        Some(RouteKind::L4) => " via L4",
        Some(RouteKind::L7) => " via the L7 proxy",
        None => "",
    };
    lines.push(format!(
        "decided:    {}{route} by {}",
        verdict(actual.decision.decision),
        blame(actual)
    ));
    lines.push(format!("reason:     {}", actual.decision.reason));
    lines
}

/// One line per difference, for JUnit and annotations.
fn failure_message(c: &CaseRun) -> String {
    match &c.outcome {
        Err(why) => why.clone(),
        Ok(_) => c
            .mismatches
            .iter()
            .map(|m| format!("{}: expected {}, got {}", m.what, m.expected, m.actual))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn json_doc(runs: &[FileRun]) -> Value {
    let t = totals(runs);
    let mut errors = Vec::new();
    let files: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut diagnostics = Vec::new();
            if let Some(f) = &r.failure {
                diagnostics.extend(f.diagnostics().map(Diagnostic::to_json));
                if let (_, Value::Array(e)) = f.json_members() {
                    errors.extend(e);
                }
            }
            json!({
                "path": r.path,
                "target": r.target,
                "cases": r.cases.iter().map(|c| case_json(&r.path, c)).collect::<Vec<_>>(),
                "diagnostics": diagnostics,
            })
        })
        .collect();
    json!({
        "files": files,
        "cases": t.cases,
        "passed": t.cases - t.failed,
        "failed": t.failed,
        "errors": errors,
    })
}

fn case_json(path: &str, c: &CaseRun) -> Value {
    let expected = json!({
        "decision": c.case.expect.as_str(),
        "rule": c.case.rule.as_ref().map(|r| match r {
            ExpectRule::None => "none".to_owned(),
            ExpectRule::Text(t) => t.clone(),
            ExpectRule::At { file, line } => format!("{}:{line}", file.display()),
        }),
        "credential": c.case.credential.as_ref().map(|c| c.clone().unwrap_or_else(|| "none".to_owned())),
        "refusal": c.case.refusal.as_ref().map(|r| r.clone().unwrap_or_else(|| "none".to_owned())),
    });
    let (actual, error) = match &c.outcome {
        Ok(a) => (
            json!({
                "decision": verdict(a.decision.decision),
                "route": a.decision.route,
                "rule": a.decision.rule.as_ref().map(Origin::blame),
                "rule_text": a.rule_text,
                "credential": a.decision.credential,
                "refusal": a.decision.refusal(),
                "reason": a.decision.reason,
            }),
            Value::Null,
        ),
        Err(why) => (Value::Null, Value::String(why.clone())),
    };
    json!({
        "name": c.case.name,
        "file": path,
        "line": c.case.line,
        "request": c.case.request(),
        "passed": c.passed(),
        "expected": expected,
        "actual": actual,
        "mismatches": c.mismatches.iter().map(|m| json!({
            "what": m.what, "expected": m.expected, "actual": m.actual,
        })).collect::<Vec<_>>(),
        "error": error,
    })
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML as CI systems read it: one `<testsuite>` per test file, one
/// `<testcase>` per case; a file that could not run is one case in error.
fn junit(runs: &[FileRun]) -> String {
    let t = totals(runs);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"openshell-policy test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"0\">\n",
        t.cases + t.unusable,
        t.failed,
        t.unusable
    ));
    for r in runs {
        let path = xml(&r.path);
        if let Some(f) = &r.failure {
            let details: Vec<String> = f
                .diagnostics()
                .map(|d| {
                    let (line, col) = d.line_col();
                    format!(
                        "{}:{line}:{col}: {} {}",
                        d.file.path(),
                        d.code.id,
                        d.message
                    )
                })
                .chain(f.errors.iter().map(|e| e.message.clone()))
                .collect();
            out.push_str(&format!(
                "  <testsuite name=\"{path}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n    <testcase name=\"load\" classname=\"{path}\" file=\"{path}\" time=\"0\">\n      <error message=\"{}\" type=\"input-error\">{}</error>\n    </testcase>\n  </testsuite>\n",
                xml(&f.headline()),
                xml(&details.join("\n"))
            ));
            continue;
        }
        let failed = r.cases.iter().filter(|c| !c.passed()).count();
        out.push_str(&format!(
            "  <testsuite name=\"{path}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"0\">\n",
            r.cases.len()
        ));
        for c in &r.cases {
            out.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{path}\" file=\"{path}\" line=\"{}\" time=\"0\"",
                xml(&c.case.name),
                c.case.line
            ));
            if c.passed() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(&format!(
                ">\n      <failure message=\"{}\" type=\"mismatch\">{}</failure>\n    </testcase>\n",
                xml(&failure_message(c)),
                xml(&case_details(c).join("\n"))
            ));
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// One `::error` per failing case, at its line; input problems as `check
/// --format github` prints them.
fn github(runs: &[FileRun]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in runs {
        if let Some(f) = &r.failure {
            lines.extend(f.github().lines().map(str::to_owned));
        }
        for c in r.cases.iter().filter(|c| !c.passed()) {
            lines.push(format!(
                "::error file={},line={},title=policy-test-failed::{}",
                github_escape(&r.path, true),
                c.case.line,
                github_escape(&format!("{}: {}", c.case.name, failure_message(c)), false)
            ));
        }
    }
    lines
}

fn sarif_doc(runs: &[FileRun], exit_code: u8) -> Value {
    let mut log = sarif::Log::new();
    for f in runs.iter().filter_map(|r| r.failure.as_ref()) {
        f.push_sarif(&mut log);
    }
    let failed = sarif::Rule::new(
        "policy-test-failed",
        "policy test failed",
        "a request got another decision, rule or credential than its test expects: the message names the case and each difference; fix the policy, or the case if the policy is right",
        "error",
    );
    for r in runs {
        for c in r.cases.iter().filter(|c| !c.passed()) {
            let result = json!({
                "level": "error",
                "message": { "text": format!("{}: {}", c.case.name, failure_message(c)) },
                "locations": log.locations(&r.path, Some(sarif::Region::at(c.case.line, 1))),
            });
            log.push(&failed, result);
        }
    }
    log.finish(exit_code)
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn escapes_xml() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;?");
    }
}
