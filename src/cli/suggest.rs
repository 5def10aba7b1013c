//! `openshell-policy suggest POLICY --from DENY_LOG`: the narrowest change
//! to POLICY that admits what the supervisor denied, proved against
//! POLICY with `diff --prove`'s prover and replayed through `eval`'s
//! evaluator, one line per denied request.
//!
//! Exit 0 a suggestion whose proof shows nothing the denials do not
//! explain, and which admits every denial (or nothing to suggest); 1 the
//! proof shows more than the denials, a denial stays denied, or the
//! patched policy does not compile; 2 input that cannot be used (the
//! policy, the log, or any line of it: the other lines are still used);
//! 3 the proof is inconclusive.

mod report;

use std::path::{Path, PathBuf};

use policy_bundle::Bundle;
use policy_bundle::eval::{Evaluator, Verdict};
use policy_lang::load;
use policy_lang::source::SourceFile;
use prover::Category;

use super::eval::{Ask, decide};
use super::{CredentialsArg, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_INPUT, EXIT_OK};
use advisor::denylog::Denial;
use advisor::{Generalize, LineProblem, Named, Suggestion};

use crate::report::{Failure, FileReport, InputError};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The rules to add, the proof and the replay, for a terminal.
    Human,
    /// One JSON document.
    Json,
    /// A pull-request comment.
    Markdown,
    /// The patched policy file itself, on stdout (the report on stderr).
    Policy,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The policy the log was written under (`.policy` or OpenShell `.yaml`).
    #[arg(value_name = "POLICY")]
    policy: PathBuf,
    /// The supervisor's deny log (OCSF JSON lines), or `-` for standard input.
    #[arg(long = "from", value_name = "DENY_LOG")]
    from: PathBuf,
    #[command(flatten)]
    credentials: CredentialsArg,
    /// Widen deliberately: `paths` (one `PREFIX/**` per method) or `hosts`
    /// (`*.parent` for a host of three labels or more); the output says
    /// what each adds.
    #[arg(long, value_delimiter = ',', value_name = "WHAT", value_parser = generalize)]
    generalize: Vec<Generalize>,
    /// Binary capability registry for the proof (as `diff --prove`).
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// Time budget for the proof, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    timeout_ms: u64,
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
}

/// One distinct denied request, decided again by the evaluator.
#[derive(Debug, Clone)]
pub struct Replay {
    pub lines: Vec<usize>,
    pub binary: String,
    pub request: String,
    pub before: Verdict,
    pub after: Verdict,
    pub rule: Option<String>,
    pub reason: String,
}

/// Everything the report prints.
pub struct Outcome {
    pub policy: String,
    pub log: String,
    pub yaml: bool,
    pub lines: usize,
    pub denials: usize,
    pub other: usize,
    pub problems: Vec<LineProblem>,
    pub suggestions: Vec<Suggestion>,
    pub patch: String,
    pub patched: String,
    pub notes: Vec<String>,
    pub beyond: Vec<String>,
    pub proof: Option<prover::Report>,
    pub inconclusive: Option<String>,
    pub replay: Vec<Replay>,
    pub failure: Option<Failure>,
}

impl Outcome {
    fn code(&self) -> u8 {
        if !self.problems.is_empty() {
            return EXIT_INPUT;
        }
        let stays_denied = self.replay.iter().any(|r| r.after == Verdict::Deny);
        if self.failure.is_some() || !self.beyond.is_empty() || stays_denied {
            return EXIT_FINDINGS;
        }
        if self.inconclusive.is_some() {
            return EXIT_INCONCLUSIVE;
        }
        EXIT_OK
    }
}

pub fn run(args: &Args) -> u8 {
    let shown = args.policy.display().to_string();
    let failed = |f: Failure| {
        report::failed(args.format, &shown, &args.from.display().to_string(), &f);
        EXIT_INPUT
    };
    if let Some(why) = super::solver::delegate_if_large(&[&args.policy]) {
        return failed(Failure::error(None, why));
    }
    let creds = args.credentials.credentials.as_deref();
    let text = match load::read_source(&args.policy) {
        Ok(s) => s.text().to_owned(),
        Err(e) => return failed(Failure::error(Some(shown.clone()), e.to_string())),
    };
    let old = match compile(&args.policy, &text, creds, Compiling::Policy) {
        Ok(b) => b,
        Err(f) => return failed(f),
    };
    let log_name = if args.from.as_os_str() == "-" {
        crate::report::STDIN_NAME.to_owned()
    } else {
        args.from.display().to_string()
    };
    let bytes = match read_log(&args.from) {
        Ok(b) => b,
        Err(e) => return failed(Failure::error(Some(log_name), e)),
    };
    let advice = advisor::advise(
        &text,
        load::is_yaml(&args.policy),
        &old,
        &bytes,
        &log_name,
        &args.generalize,
    );
    let read = advice.read;
    let mut out = Outcome {
        policy: shown.clone(),
        log: log_name.clone(),
        yaml: load::is_yaml(&args.policy),
        lines: read.lines,
        denials: read.named.len(),
        other: read.other,
        problems: read.problems,
        suggestions: advice.suggestions,
        patch: advice.patch,
        patched: text.clone(),
        notes: advice.notes,
        beyond: Vec::new(),
        proof: None,
        inconclusive: None,
        replay: Vec::new(),
        failure: None,
    };
    if out.suggestions.is_empty() {
        report::print(args.format, &out);
        return out.code();
    }
    match advice.patched {
        Ok(patched) => out.patched = patched,
        Err(why) => {
            out.failure = Some(Failure::error(Some(shown), why));
            report::print(args.format, &out);
            return out.code();
        }
    }
    let new = match compile(&args.policy, &out.patched, creds, Compiling::Patched) {
        Ok(b) => b,
        Err(f) => {
            out.failure = Some(f);
            report::print(args.format, &out);
            return out.code();
        }
    };
    let opts = match super::diff::options(args.registry.as_deref(), None, args.timeout_ms) {
        Ok(o) => o,
        Err(e) => return failed(Failure::error(None, e.to_string())),
    };
    match prover::diff(&old, &new, &opts) {
        Ok(r) => {
            if r.verdict == prover::Verdict::Inconclusive {
                out.inconclusive = r.inconclusive.clone().or(Some("the solver gave up".into()));
            }
            out.beyond = beyond(&r, &out.suggestions, &old, &new);
            out.proof = Some(r);
        }
        Err(e) => out.inconclusive = Some(super::solver::failure(e)),
    }
    out.replay = replay(&read.named, &old, &new);
    report::print(args.format, &out);
    out.code()
}

/// `--generalize`'s words.
fn generalize(word: &str) -> Result<Generalize, String> {
    Generalize::parse(word).ok_or_else(|| {
        let words: Vec<&str> = Generalize::ALL.iter().map(|(w, _)| *w).collect();
        format!("`{word}` is not one of: {}", words.join(", "))
    })
}

/// The JSON document of a command line clap refused.
pub(super) fn print_usage_error(failure: &Failure) {
    report::failed(Format::Json, "", "", failure);
}

fn read_log(path: &Path) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

/// Which text [`compile`] is given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compiling {
    /// POLICY as read from disk.
    Policy,
    /// POLICY with the suggested rules.
    Patched,
}

/// Compiles `text` as POLICY's, from memory, its includes read from
/// beside POLICY.
///
/// Both the policy and the patched policy go this way, so that the proof
/// and the replay blame their rules by the same file names. Those names
/// are relative to POLICY's directory: the include closure keys fragments
/// so, and an include is looked up relative to the main file's name, so a
/// main file named by the path as given (`policies/p.policy`, an absolute
/// path, `./p.policy`) would look for every fragment under that
/// directory a second time.
fn compile(
    path: &Path,
    text: &str,
    creds: Option<&Path>,
    what: Compiling,
) -> Result<Bundle, Failure> {
    let shown = path.display().to_string();
    let cannot = |e: load::LoadError| Failure::error(Some(shown.clone()), e.to_string());
    let creds_file = creds.map(load::read_source).transpose().map_err(cannot)?;
    let (checked, bundle) = if load::is_yaml(path) {
        load::compile_sources(SourceFile::new(shown.clone(), text), creds_file)
    } else {
        let files = load::include_closure(path).map_err(cannot)?;
        let main = SourceFile::new(name_in_its_directory(path), text);
        load::compile_sources_with(main, &files, creds_file)
    };
    if let Some(b) = bundle {
        return Ok(b);
    }
    let checked = match what {
        Compiling::Policy => diagnosed_from_disk(path, creds).unwrap_or(checked),
        Compiling::Patched => checked,
    };
    Err(Failure {
        files: vec![FileReport {
            path: shown.clone(),
            diagnostics: checked
                .diagnostics
                .into_iter()
                .filter(|d| d.is_error())
                .collect(),
        }],
        errors: vec![InputError::new(
            Some(shown.clone()),
            match what {
                Compiling::Policy => {
                    format!("`{shown}` does not compile; fix it before asking for a change")
                }
                Compiling::Patched => {
                    format!("`{shown}` with the suggested rules does not compile")
                }
            },
        )],
    })
}

/// POLICY's file name: its name relative to its own directory, where the
/// include closure's keys start.
fn name_in_its_directory(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The errors of POLICY compiled from disk, when it fails there too: they
/// name its files as the user gave them, as `check` does. When it compiles
/// from disk but not from memory (an include outside its directory), the
/// memory errors are the ones that say why.
fn diagnosed_from_disk(path: &Path, creds: Option<&Path>) -> Option<load::Checked> {
    match load::compile_file(path, creds) {
        Ok((checked, None)) => Some(checked),
        _ => None,
    }
}

/// What the proof shows that the denials do not explain: a category no
/// new rule for a denied request gives, or a witness outside every
/// suggested rule.
fn beyond(
    r: &prover::Report,
    suggestions: &[Suggestion],
    old: &Bundle,
    new: &Bundle,
) -> Vec<String> {
    let mut out = Vec::new();
    for f in r.findings.iter().chain(&r.reach) {
        let explained = matches!(
            f.category,
            Category::ReachExpansion
                | Category::CredentialReachExpansion
                | Category::CapabilityExpansion
        ) && suggestions.iter().any(|s| covers(s, &f.witness));
        if !explained {
            out.push(format!(
                "{} ({}): {} (witness: {} from `{}`)",
                f.category,
                f.code,
                f.message,
                f.witness.request_text(),
                f.witness.binary
            ));
        }
    }
    for c in &r.sandbox {
        let ports_of_denials = c.setting.as_deref() == Some("landlock.tcp_connect_ports")
            && new_ports(old, new).all(|p| suggestions.iter().any(|s| s.port == p));
        if !ports_of_denials {
            out.push(format!("{} ({}): {}", c.category, c.code, c.message));
        }
    }
    for c in &r.credentials {
        out.push(format!("{} ({}): {}", c.category, c.code, c.message));
    }
    out
}

/// The TCP ports Landlock lets the workload connect to under `new` and
/// not under `old` (a denied port the suggestion admits is one).
fn new_ports<'a>(old: &'a Bundle, new: &'a Bundle) -> impl Iterator<Item = u16> + 'a {
    let before = &old.enforcement.landlock.tcp_connect_ports;
    new.enforcement
        .landlock
        .tcp_connect_ports
        .ranges()
        .iter()
        .flat_map(|&(lo, hi)| lo..=hi)
        .filter(move |p| !before.contains(*p))
}

/// Whether the witness lies inside the suggestion's binary, destination
/// and port.
fn covers(s: &Suggestion, w: &prover::Witness) -> bool {
    let binary = s.binary.trim_matches('"').replace('\\', "");
    let dest = s.dest.trim_start_matches('[').trim_end_matches(']');
    let host_ok = dest == w.host
        || policy_bundle::matcher::HostPattern::parse(dest)
            .is_ok_and(|p| !p.is_exact() && p.matches(&w.host));
    binary == w.binary && s.port == w.port && host_ok
}

/// Each distinct denied request, decided by the evaluator under the
/// policy and under the patched policy.
fn replay(named: &[Named], old: &Bundle, new: &Bundle) -> Vec<Replay> {
    let before = Evaluator::new(old.clone());
    let after = Evaluator::new(new.clone());
    let mut seen: std::collections::HashMap<RequestKey, usize> = std::collections::HashMap::new();
    let mut out: Vec<Replay> = Vec::new();
    for n in named {
        let d = &n.denial;
        let key = request_key(d);
        if let Some(&i) = seen.get(&key) {
            if let Some(r) = out.get_mut(i) {
                r.lines.push(n.line);
            }
            continue;
        }
        let (url, host, request) = target(d);
        let ask = Ask {
            binary: &d.binary,
            sha256: d.sha256.clone(),
            hash_binary: false,
            url: url.as_deref(),
            method: d.http.as_ref().map(|h| h.method.as_str()),
            host: host.as_deref(),
            port: host.is_some().then_some(d.port),
            // As the supervisor decided it: an address the operator named
            // for the host is not asked about, the host's rules are.
            addr: d.ip.filter(|_| !d.operator_named),
            body: None,
            content_type: None,
            websocket: false,
            ws_message: None,
        };
        seen.insert(key, out.len());
        let mut r = Replay {
            lines: vec![n.line],
            binary: d.binary.clone(),
            request,
            before: Verdict::Deny,
            after: Verdict::Deny,
            rule: None,
            reason: "`eval` cannot ask about this request".to_owned(),
        };
        if let (Ok(b), Ok(a)) = (decide(&before, &ask), decide(&after, &ask)) {
            r.before = b.decision;
            r.after = a.decision;
            r.rule = a.rule.as_ref().map(policy_bundle::Origin::blame);
            r.reason = a.reason.to_string();
        }
        out.push(r);
    }
    out
}

type RequestKey = (
    String,
    Option<String>,
    Option<String>,
    Option<std::net::IpAddr>,
    u16,
    Option<(String, String)>,
);

fn request_key(d: &Denial) -> RequestKey {
    (
        d.binary.clone(),
        d.sha256.clone(),
        d.host.clone(),
        d.ip,
        d.port,
        d.http
            .as_ref()
            .map(|h| (h.method.clone(), h.target.clone())),
    )
}

/// The request `eval` is asked about (its URL, or its host for a
/// connection), and how reports show it.
fn target(d: &Denial) -> (Option<String>, Option<String>, String) {
    let host = d
        .host
        .clone()
        .or_else(|| d.ip.map(|ip| ip.to_string()))
        .unwrap_or_default();
    let url_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    match &d.http {
        Some(h) => {
            let default = matches!((h.scheme.as_str(), d.port), ("https", 443) | ("http", 80));
            let url = if default {
                format!("{}://{url_host}{}", h.scheme, h.target)
            } else {
                format!("{}://{url_host}:{}{}", h.scheme, d.port, h.target)
            };
            let shown = format!("{} {url}", h.method);
            (Some(url), None, shown)
        }
        None => {
            let shown = format!("connection to {url_host}:{}", d.port);
            (None, Some(host), shown)
        }
    }
}
