//! Command-line definitions and dispatch.

mod check;
mod compile;
mod diff;
mod eval;
mod explain;
mod fmt;
mod import;
mod inputs;
mod manual;
pub(crate) mod solver;
mod suggest;
mod test;
mod test_file;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub use crate::report::DiagFormat;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_INPUT: u8 = 2;
/// A question the prover could not answer in time.
pub const EXIT_INCONCLUSIVE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "openshell-policy",
    version,
    about = "Check, compile, explain, evaluate, test, format and import sandbox policies"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check policies for errors and risky constructs.
    Check(check::Args),
    /// Compile a policy into a bundle the supervisor enforces.
    Compile(compile::Args),
    /// Show what a bundle enforces, artefact by artefact.
    Explain(explain::Args),
    /// Decide one concrete request with the reference evaluator.
    Eval(Box<eval::Args>),
    /// Format policies canonically (in place, or `--check`).
    Fmt(fmt::Args),
    /// Translate an OpenShell YAML policy into this language.
    Import(import::Args),
    /// Prove whether a policy change widens credentialed reach (`--prove`).
    Diff(diff::Args),
    /// Suggest the narrowest policy change that admits what a deny log
    /// shows denied, proved with `diff --prove` and replayed with `eval`.
    Suggest(suggest::Args),
    /// Run policy test files (`*.test.yaml`): requests and the decisions
    /// they must get.
    Test(test::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(manual::CompletionsArgs),
    /// Print a manual page (roff), or write every page with `--out DIR`.
    Man(manual::ManArgs),
}

/// Shared `--credentials` option: an OpenShell credentials file.
#[derive(clap::Args, Debug, Clone)]
pub struct CredentialsArg {
    /// OpenShell credentials file (`credentials: [{name, type, scopes, injected_via, target_hosts}]`).
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
}

pub fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Check(a) => check::run(&a),
        Command::Compile(a) => compile::run(&a),
        Command::Explain(a) => explain::run(&a),
        Command::Eval(a) => eval::run(&a),
        Command::Fmt(a) => fmt::run(&a),
        Command::Import(a) => import::run(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Suggest(a) => suggest::run(&a),
        Command::Test(a) => test::run(&a),
        Command::Completions(a) => manual::completions(&a),
        Command::Man(a) => manual::man(&a),
    }
}

/// Parses the command line. A usage error goes to stderr as clap writes
/// it, and when the command asked for a machine format, a document of
/// that format goes to stdout too: a CI step parsing stdout always gets one.
pub fn parse() -> Result<Cli, u8> {
    use clap::error::ErrorKind;
    let err = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    let _ = err.print();
    let code = u8::try_from(err.exit_code()).unwrap_or(EXIT_INPUT);
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        return Err(code);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.iter().find(|a| !a.starts_with('-'));
    let format = requested_format(&args);
    // The error paragraph, without the usage and help lines after it.
    let rendered = err.render().to_string();
    let message = rendered
        .split("\n\n")
        .next()
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let failure = crate::report::Failure::error(None, message);
    match (command.map(String::as_str), format.as_deref()) {
        (Some("check"), Some(f)) => {
            if let Ok(f) = DiagFormat::from_str(f, true)
                && f != DiagFormat::Human
            {
                crate::report::print_check(&[], &failure.errors, None, f, code);
            }
        }
        (Some("diff"), Some(f)) => {
            if let Ok(f) = crate::report::findings::FindingsFormat::from_str(f, true)
                && f != crate::report::findings::FindingsFormat::Human
            {
                let within = args.iter().any(|a| a == "--within");
                diff::print_failure(&failure, f, "error", None, within);
            }
        }
        (Some("eval"), Some("json")) => {
            eval::failed_json(&failure);
        }
        (Some("test"), Some(f)) => test::print_usage_error(f, failure),
        (Some("suggest"), Some("json")) => suggest::print_usage_error(&failure),
        _ => {}
    }
    Err(code)
}

/// The value of `--format` on a command line clap refused.
fn requested_format(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return None;
        }
        if let Some(v) = a.strip_prefix("--format=") {
            return Some(v.to_owned());
        }
        if a == "--format" {
            return it.next().cloned();
        }
    }
    None
}

/// Print an input error (unreadable file, bad bundle) the same way everywhere.
pub fn input_error(err: &dyn std::fmt::Display) -> u8 {
    eprintln!("error: {err}");
    EXIT_INPUT
}
