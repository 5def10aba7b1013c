use crate::output::outln;
use std::path::PathBuf;

use policy_lang::load;

use super::{CredentialsArg, DiagFormat, EXIT_FINDINGS, EXIT_OK, input_error};
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The policy to compile (`.policy`, or OpenShell `.yaml`/`.yml`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Where to write the bundle.
    #[arg(short, long, value_name = "BUNDLE")]
    output: PathBuf,
    #[command(flatten)]
    credentials: CredentialsArg,
}

pub fn run(args: &Args) -> u8 {
    let (checked, bundle) =
        match load::compile_file(&args.file, args.credentials.credentials.as_deref()) {
            Ok(r) => r,
            Err(e) => return input_error(&e),
        };
    report::print_diagnostics(
        &[FileReport {
            path: args.file.display().to_string(),
            diagnostics: checked.diagnostics,
        }],
        DiagFormat::Human,
    );
    let Some(bundle) = bundle else {
        eprintln!(
            "error: `{}` has errors; no bundle written",
            args.file.display()
        );
        return EXIT_FINDINGS;
    };
    if let Err(e) = std::fs::write(&args.output, bundle.to_bytes()) {
        return input_error(&format!("cannot write `{}`: {e}", args.output.display()));
    }
    outln!("{}", bundle.digest);
    EXIT_OK
}
