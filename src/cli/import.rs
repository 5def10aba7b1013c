use crate::output::out;
use std::path::PathBuf;

use policy_lang::{fmt, import, load};

use super::{DiagFormat, EXIT_FINDINGS, EXIT_OK, input_error};
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An OpenShell v1 policy (`.yaml`/`.yml`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Write the policy here instead of standard output.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
}

pub fn run(args: &Args) -> u8 {
    let file = match load::read_source(&args.file) {
        Ok(f) => f,
        Err(e) => return input_error(&e),
    };
    let (doc, diags) = import::yaml_to_document(&file);
    let diags = diags.sorted();
    let failed = diags.iter().any(|d| d.is_error());
    report::print_diagnostics(
        &[FileReport {
            path: args.file.display().to_string(),
            diagnostics: diags,
        }],
        DiagFormat::Human,
    );
    let Some(doc) = doc.filter(|_| !failed) else {
        eprintln!("error: `{}` was not imported", args.file.display());
        return EXIT_FINDINGS;
    };
    let text = fmt::format_document(&doc);
    match &args.output {
        None => out!("{text}"),
        Some(out) => {
            if let Err(e) = std::fs::write(out, text) {
                return input_error(&format!("cannot write `{}`: {e}", out.display()));
            }
        }
    }
    EXIT_OK
}
