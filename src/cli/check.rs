use std::path::PathBuf;

use policy_lang::load;

use super::{CredentialsArg, DiagFormat, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Policy files: `.policy` (this language) or `.yaml`/`.yml` (OpenShell).
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    credentials: CredentialsArg,
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

/// The prover's single-policy risk queries, as warnings (R01xx).
fn risk_warnings(args: &Args, checked: &load::Checked) -> Vec<policy_lang::diag::Diagnostic> {
    let Some(resolved) = checked
        .resolved
        .as_ref()
        .filter(|_| !checked.has_errors() && !checked.is_fragment)
    else {
        return Vec::new();
    };
    let bundle = policy_lang::compile::compile(&resolved.policy);
    let opts = match super::diff::options(args.registry.as_deref(), None, args.timeout_ms) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("warning: risk queries skipped: {e}");
            return Vec::new();
        }
    };
    match prover::check(&bundle, &opts) {
        Ok(report) => {
            if let Some(why) = &report.inconclusive {
                eprintln!("note: risk queries inconclusive: {why}");
            }
            crate::report::findings::diagnostics(&report, &checked.sources)
        }
        Err(e) => {
            eprintln!("warning: risk queries skipped: {e}");
            Vec::new()
        }
    }
}

pub fn run(args: &Args) -> u8 {
    let mut reports = Vec::new();
    let mut unreadable = false;
    for path in &args.files {
        match load::check(path, args.credentials.credentials.as_deref()) {
            Ok(checked) => {
                let risks = if args.prove {
                    risk_warnings(args, &checked)
                } else {
                    Vec::new()
                };
                let mut diagnostics = checked.diagnostics;
                diagnostics.extend(risks);
                reports.push(FileReport {
                    path: path.display().to_string(),
                    diagnostics,
                });
            }
            Err(e) => {
                eprintln!("error: {e}");
                unreadable = true;
            }
        }
    }
    report::print_diagnostics(&reports, args.format);
    let errors = reports
        .iter()
        .flat_map(|r| &r.diagnostics)
        .any(|d| d.is_error());
    let warnings = reports
        .iter()
        .flat_map(|r| &r.diagnostics)
        .any(|d| !d.is_error());
    if unreadable {
        EXIT_INPUT
    } else if errors || (args.deny_warnings && warnings) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}
