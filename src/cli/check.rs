use std::path::{Path, PathBuf};

use policy_lang::load;
use policy_lang::source::SourceFile;

use super::inputs::{self, Input};

use super::{CredentialsArg, DiagFormat, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_INPUT, EXIT_OK};
use crate::report::{self, FileReport, InputError};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Policy files: `.policy` (this language) or `.yaml`/`.yml` (OpenShell);
    /// a directory for every such file under it (test files `*.test.yaml`
    /// excepted), or `-` for standard input: OpenShell YAML when its first
    /// line that is not a comment is a YAML key (`version: 1`) or `---`,
    /// this language otherwise.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    credentials: CredentialsArg,
    /// Diagnostics for people (stderr) or a document for CI (stdout), printed
    /// on every exit.
    #[arg(long, value_enum, default_value = "human")]
    format: DiagFormat,
    /// Treat warnings as errors (exit 1).
    #[arg(long)]
    deny_warnings: bool,
    /// Also ask the prover the single-policy risk questions (metadata
    /// reach, credentials reachable uninspected, secrets a binary can send,
    /// binaries the workload can plant, audit where a credential flows),
    /// reported as R01xx warnings. Costs Z3's start-up, tens of ms.
    #[arg(long)]
    prove: bool,
    /// Binary capability registry for the prover's risk queries (YAML file
    /// or directory, added to the embedded defaults).
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// Time budget for the prover's risk queries, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    timeout_ms: u64,
}

/// What the prover's single-policy risk queries said about one file.
#[derive(Default)]
struct Risks {
    /// R01xx warnings.
    warnings: Vec<policy_lang::diag::Diagnostic>,
    /// Why a question went unanswered (solver timeout, unknown, error).
    inconclusive: Option<String>,
}

/// The prover's single-policy risk queries, as warnings (R01xx).
fn risk_warnings(checked: &load::Checked, opts: &prover::Options, path: &std::path::Path) -> Risks {
    let Some(resolved) = checked
        .resolved
        .as_ref()
        .filter(|_| !checked.has_errors() && !checked.is_fragment)
    else {
        return Risks::default();
    };
    let bundle = policy_lang::compile::compile(&resolved.policy);
    match prover::check(&bundle, opts) {
        Ok(report) => {
            super::diff::print_phases(&report);
            Risks {
                warnings: crate::report::findings::diagnostics(&report, &checked.sources),
                inconclusive: report
                    .inconclusive
                    .as_ref()
                    .map(|why| format!("`{}`: {why}", path.display())),
            }
        }
        Err(e) => Risks {
            warnings: Vec::new(),
            inconclusive: Some(format!(
                "`{}`: {}",
                path.display(),
                super::solver::failure(e)
            )),
        },
    }
}

pub fn run(args: &Args) -> u8 {
    let mut reports = Vec::new();
    let mut errors: Vec<InputError> = Vec::new();
    let mut inconclusive: Vec<String> = Vec::new();
    let opts = if args.prove {
        match super::diff::options(args.registry.as_deref(), None, args.timeout_ms) {
            Ok(o) => Some(o),
            Err(e) => {
                let path = args.registry.as_ref().map(|p| p.display().to_string());
                report::print_check(
                    &[],
                    &[InputError::new(path, e.to_string())],
                    None,
                    args.format,
                    EXIT_INPUT,
                );
                return EXIT_INPUT;
            }
        }
    } else {
        None
    };
    let (inputs, unusable) = inputs::expand(&args.files, inputs::is_checkable, "policy files");
    errors.extend(unusable);
    if opts.is_some() {
        let paths: Vec<&std::path::Path> = inputs
            .iter()
            .filter_map(|i| match i {
                Input::File(p) => Some(p.as_path()),
                Input::Stdin => None,
            })
            .collect();
        if let Some(why) = super::solver::delegate_if_large(&paths) {
            report::print_check(&[], &[], Some(&why), args.format, EXIT_INCONCLUSIVE);
            return EXIT_INCONCLUSIVE;
        }
    }
    for input in &inputs {
        match check_input(input, args.credentials.credentials.as_deref()) {
            Ok((name, checked)) => {
                let shown = std::path::PathBuf::from(&name);
                let risks = match &opts {
                    Some(o) => risk_warnings(&checked, o, &shown),
                    None => Risks::default(),
                };
                inconclusive.extend(risks.inconclusive);
                let mut diagnostics = checked.diagnostics;
                diagnostics.extend(risks.warnings);
                reports.push(FileReport {
                    path: name,
                    diagnostics,
                });
            }
            Err(e) => errors.push(e),
        }
    }
    let why = (!inconclusive.is_empty()).then(|| inconclusive.join("; "));
    let count = |error: bool| {
        reports
            .iter()
            .flat_map(|r| &r.diagnostics)
            .filter(|d| d.is_error() == error)
            .count()
    };
    let (n_errors, n_warnings) = (count(true), count(false));
    let code = if !errors.is_empty() {
        EXIT_INPUT
    } else if n_errors > 0 || (args.deny_warnings && n_warnings > 0) {
        EXIT_FINDINGS
    } else if why.is_some() {
        EXIT_INCONCLUSIVE
    } else {
        EXIT_OK
    };
    report::print_check(&reports, &errors, why.as_deref(), args.format, code);
    if args.format == DiagFormat::Human {
        eprintln!(
            "{}",
            summary(
                reports.len() + errors.len(),
                errors.len(),
                n_errors,
                n_warnings
            )
        );
        if let Some(why) = &why {
            eprintln!("inconclusive: a risk question was not answered: {why}");
        }
    }
    code
}

/// Checks one input, and the name its diagnostics carry. Standard input
/// is read as OpenShell YAML when it looks like YAML, as this language
/// otherwise; having no directory of its own, it cannot `include` (an
/// error that says so).
fn check_input(
    input: &Input,
    credentials: Option<&Path>,
) -> Result<(String, load::Checked), InputError> {
    let path = match input {
        Input::File(p) => p,
        Input::Stdin => {
            let text = inputs::read_stdin()?;
            let name = if inputs::reads_as_yaml(&text) {
                report::STDIN_YAML_NAME
            } else {
                report::STDIN_NAME
            };
            let creds = credentials
                .map(load::read_source)
                .transpose()
                .map_err(|e| {
                    InputError::new(credentials.map(|c| c.display().to_string()), e.to_string())
                })?;
            let main = SourceFile::new(name, text);
            let checked = load::check_loaded(load::load_sources(main, creds));
            return Ok((name.to_owned(), checked));
        }
    };
    load::check(path, credentials)
        .map(|checked| (input.shown(), checked))
        .map_err(|e| InputError::new(Some(path.display().to_string()), e.to_string()))
}

/// `checked 3 files: no errors, 2 warnings`, for people.
fn summary(files: usize, unreadable: usize, errors: usize, warnings: usize) -> String {
    let count = |n: usize, what: &str| match n {
        0 => format!("no {what}s"),
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    let mut s = format!(
        "checked {}: {}, {}",
        match files {
            1 => "1 file".to_owned(),
            n => format!("{n} files"),
        },
        count(errors, "error"),
        count(warnings, "warning")
    );
    if unreadable > 0 {
        s.push_str(&format!(", {} unreadable", unreadable));
    }
    s
}
