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
}

pub fn run(args: &Args) -> u8 {
    let mut reports = Vec::new();
    let mut unreadable = false;
    for path in &args.files {
        match load::check(path, args.credentials.credentials.as_deref()) {
            Ok(checked) => reports.push(FileReport {
                path: path.display().to_string(),
                diagnostics: checked.diagnostics,
            }),
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
