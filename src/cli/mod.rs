//! Command-line definitions and dispatch.

mod check;
mod compile;
mod diff;
mod eval;
mod explain;
mod fmt;
mod import;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub const EXIT_OK: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_INPUT: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "openshell-policy",
    version,
    about = "Check, compile, explain, evaluate, format and import sandbox policies"
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
    Eval(eval::Args),
    /// Format policies canonically (in place, or `--check`).
    Fmt(fmt::Args),
    /// Translate an OpenShell YAML policy into this language.
    Import(import::Args),
    /// Prove whether a policy change widens credentialed reach (`--prove`).
    Diff(diff::Args),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagFormat {
    Human,
    Json,
    Github,
    Sarif,
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
    }
}

/// Print an input error (unreadable file, bad bundle) the same way everywhere.
pub fn input_error(err: &dyn std::fmt::Display) -> u8 {
    eprintln!("error: {err}");
    EXIT_INPUT
}
