//! `openshell-policy diff --prove OLD NEW`: does NEW let a credentialed
//! binary reach anything OLD did not? Exit 0 no new credentialed access
//! (`no-new-access` when NEW adds nothing at all, `new-reach` when it adds
//! uncredentialed reach or sandbox rights), 1 widening found, 2 input
//! error, 3 inconclusive.
//!
//! `diff --prove --within BOUNDARY CANDIDATE`: does BOUNDARY allow
//! everything CANDIDATE allows? The same proof with the boundary as OLD,
//! where every excess blocks, credentialed or not. Exit 0 `within`, 1
//! `exceeds`, 2 input error, 3 `inconclusive` or `unsupported`.

use std::path::{Path, PathBuf};

use policy_bundle::Bundle;
use policy_lang::load;
use prover::{Options, Registry, Verdict};

use super::{CredentialsArg, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_INPUT, EXIT_OK};
use crate::output::outln;
use crate::report::{self, Failure, FileReport, InputError, findings::FindingsFormat};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Prove with the SMT solver (the only mode; accepted for clarity in CI
    /// scripts).
    #[arg(long)]
    prove: bool,
    /// Containment: prove that OLD, a boundary policy, allows everything
    /// NEW (the candidate) allows: every request, credential, file right
    /// and process setting. Each excess blocks, credentialed or not.
    #[arg(long)]
    within: bool,
    /// The policy before the change (`.policy` or OpenShell `.yaml`); with
    /// `--within`, the boundary.
    #[arg(value_name = "OLD")]
    old: PathBuf,
    /// The policy after the change; with `--within`, the candidate.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    #[command(flatten)]
    credentials: CredentialsArg,
    /// Binary capability registry: a YAML file or a directory of them
    /// (OpenShell format), added to the embedded defaults.
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// Accepted risks (OpenShell `accepted_risks:` format, plus `expires`
    /// and scope fields).
    #[arg(long, value_name = "FILE")]
    accepted_risks: Option<PathBuf>,
    /// The report for people, CI or a pull-request comment; machine formats
    /// print a document on every exit, input errors included.
    #[arg(long, value_enum, default_value = "human")]
    format: FindingsFormat,
    /// Time budget for all solver calls together, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    timeout_ms: u64,
    /// Print the SMT-LIB queries to stderr.
    #[arg(long)]
    print_smt: bool,
}

/// Loads and compiles one side; what went wrong when it cannot.
fn bundle(path: &Path, credentials: Option<&Path>) -> Result<Bundle, Failure> {
    let shown = path.display().to_string();
    let (checked, bundle) = load::compile_file(path, credentials)
        .map_err(|e| Failure::error(Some(shown.clone()), e.to_string()))?;
    match bundle {
        Some(b) => Ok(b),
        None => {
            let errors: Vec<_> = checked
                .diagnostics
                .into_iter()
                .filter(|d| d.is_error())
                .collect();
            Err(Failure {
                files: vec![FileReport {
                    path: shown.clone(),
                    diagnostics: errors,
                }],
                errors: vec![InputError::new(
                    Some(shown.clone()),
                    format!("`{shown}` does not compile; nothing to prove"),
                )],
            })
        }
    }
}

/// Prints why there is no proof, as a document of the requested format;
/// `within` when containment was asked (`--within`), whose JSON says so.
pub(super) fn print_failure(
    failure: &Failure,
    format: FindingsFormat,
    verdict: &str,
    inconclusive: Option<&str>,
    within: bool,
) {
    match format {
        FindingsFormat::Human => failure.print_human(),
        FindingsFormat::Json => {
            let (files, errors) = failure.json_members();
            let mut doc = serde_json::json!({
                    "verdict": verdict,
                    "findings": [],
                    "reach": [],
                    "sandbox": [],
                    "credentials": [],
                    "omitted": [],
                    "inconclusive": inconclusive,
                    "notes": [],
                    "errors": errors,
                    "files": files,
            });
            if within && let Some(obj) = doc.as_object_mut() {
                obj.insert("question".to_owned(), "within".into());
            }
            outln!("{doc}");
        }
        FindingsFormat::Sarif => {
            let code = if verdict == "inconclusive" {
                EXIT_INCONCLUSIVE
            } else {
                EXIT_INPUT
            };
            outln!("{}", failure.sarif(code));
        }
        FindingsFormat::Github => report::failure::emit(&failure.github()),
        FindingsFormat::Markdown => outln!("{}", failure.markdown().trim_end()),
    }
}

pub fn options(
    registry: Option<&Path>,
    accepted: Option<&Path>,
    timeout_ms: u64,
) -> Result<Options, prover::ProverError> {
    let mut reg = Registry::embedded();
    if let Some(r) = registry {
        reg.add_path(r)?;
    }
    let accepted = accepted
        .map(prover::accepted::load)
        .transpose()?
        .unwrap_or_default();
    Ok(Options {
        timeout_ms,
        registry: reg,
        accepted,
        timings: std::env::var_os("PROVER_TIMING").is_some(),
        solver: super::solver::backend(),
        ..Options::default()
    })
}

/// The prover's phases, when `PROVER_TIMING` asked for them
/// (`bench/prover.sh` reads these lines).
pub fn print_phases(report: &prover::Report) {
    for line in &report.stats.phases {
        eprintln!("prover: {line}");
    }
}

/// Whether two paths hold the same bytes (then NEW need not be compiled:
/// it is the same bundle).
fn same_file(a: &Path, b: &Path) -> bool {
    a.extension() == b.extension()
        && matches!((std::fs::read(a), std::fs::read(b)), (Ok(x), Ok(y)) if x == y)
}

/// Inputs of this many bytes in all are compiled on two threads. Below
/// it one thread does it all: a thread this process starts mostly shares
/// its CPU for its first milliseconds (the scheduler packs tasks onto
/// few CPUs), so work moved to one came on top of its own start-up
/// (docs/benchmarks.md): the 300-endpoint pair (110 KB) took 1.4 ms
/// longer on two. Compiling a policy of a thousand endpoints takes about
/// 35 ms, long enough for the second thread to find the other CPU; a diff
/// that slices well then spends most of its time here. The size is the
/// one a build without Z3 hands over to the solver at (`solver.rs`).
const PARALLEL_INPUT: u64 = 128 * 1024;

/// A compiled side and how long it took.
type Compiled = (Bundle, std::time::Duration);

fn timed_bundle(path: &Path, credentials: Option<&Path>) -> Result<Compiled, Failure> {
    let t = std::time::Instant::now();
    bundle(path, credentials).map(|b| (b, t.elapsed()))
}

/// Compiles OLD and NEW (NEW not at all when the files are the same);
/// OLD's failure is the one reported when both fail, as when they were
/// compiled one after the other.
fn compile_both(
    old: &Path,
    new: &Path,
    credentials: Option<&Path>,
) -> Result<(Bundle, Bundle, std::time::Duration, std::time::Duration), Failure> {
    if same_file(old, new) {
        let (b, t) = timed_bundle(old, credentials)?;
        return Ok((b.clone(), b, t, std::time::Duration::ZERO));
    }
    let size: u64 = [old, new]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let (o, n) = if size > PARALLEL_INPUT {
        std::thread::scope(|s| {
            let o = s.spawn(|| timed_bundle(old, credentials));
            let n = timed_bundle(new, credentials);
            let o = o
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (o, n)
        })
    } else {
        let o = timed_bundle(old, credentials)?;
        (Ok(o), timed_bundle(new, credentials))
    };
    let ((o, to), (n, tn)) = (o?, n?);
    Ok((o, n, to, tn))
}

pub fn run(args: &Args) -> u8 {
    let timing = std::env::var_os("PROVER_TIMING").is_some();
    let t0 = std::time::Instant::now();
    let creds = args.credentials.credentials.as_deref();
    let failed = |f: Failure, code: u8| {
        print_failure(&f, args.format, "error", None, args.within);
        code
    };
    let inconclusive = |why: String| {
        print_failure(
            &Failure::error(None, why.clone()),
            args.format,
            "inconclusive",
            Some(&why),
            args.within,
        );
        EXIT_INCONCLUSIVE
    };
    if let Some(why) = super::solver::delegate_if_large(&[&args.old, &args.new]) {
        return inconclusive(why);
    }
    let (old, new, t_old, t_new) = match compile_both(&args.old, &args.new, creds) {
        Ok(both) => both,
        Err(f) => return failed(f, EXIT_INPUT),
    };
    let t_compiled = t0.elapsed();
    let mut opts = match options(
        args.registry.as_deref(),
        args.accepted_risks.as_deref(),
        args.timeout_ms,
    ) {
        Ok(o) => o,
        Err(e) => return failed(Failure::error(None, e.to_string()), EXIT_INPUT),
    };
    opts.print_smt = args.print_smt;
    let t_opts = t0.elapsed();
    let proved = if args.within {
        prover::within(&old, &new, &opts)
    } else {
        prover::diff_owned(old, new, &opts)
    };
    let report = match proved {
        Ok(r) => r,
        Err(e) => return inconclusive(super::solver::failure(e)),
    };
    print_phases(&report);
    if timing {
        eprintln!(
            "diff: compile old {t_old:?}, new {t_new:?}, registry {:?}, prove {:?}",
            t_opts - t_compiled,
            t0.elapsed() - t_opts
        );
    }
    if let Some(smt) = &report.smt {
        eprintln!("{smt}");
    }
    let names = report::findings::Names {
        old: args.old.display().to_string(),
        new: args.new.display().to_string(),
    };
    let code = match report.verdict {
        Verdict::Widened | Verdict::Exceeds => EXIT_FINDINGS,
        Verdict::Inconclusive | Verdict::Unsupported => EXIT_INCONCLUSIVE,
        Verdict::NoNewAccess | Verdict::NewReach | Verdict::Within => EXIT_OK,
    };
    report::print_proof(&report, args.format, &names, code);
    code
}
