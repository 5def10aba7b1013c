use crate::output::outln;
use std::path::PathBuf;

use policy_lang::{fmt, load, parser};

use super::{DiagFormat, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `.policy` files to format.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Do not write; exit 1 and list the files that are not formatted.
    #[arg(long)]
    check: bool,
}

pub fn run(args: &Args) -> u8 {
    let mut code = EXIT_OK;
    for path in &args.files {
        if load::is_yaml(path) {
            eprintln!(
                "error: `{}` is OpenShell YAML; translate it with `openshell-policy import` first",
                path.display()
            );
            code = code.max(EXIT_INPUT);
            continue;
        }
        let file = match load::read_source(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                code = code.max(EXIT_INPUT);
                continue;
            }
        };
        let (doc, diags) = parser::parse(&file);
        let diags = diags.sorted();
        let Some(doc) = doc.filter(|_| !diags.iter().any(|d| d.is_error())) else {
            report::print_diagnostics(
                &[FileReport {
                    path: path.display().to_string(),
                    diagnostics: diags,
                }],
                DiagFormat::Human,
            );
            eprintln!("error: `{}` has errors; not formatted", path.display());
            code = code.max(EXIT_FINDINGS);
            continue;
        };
        let formatted = fmt::format_document(&doc);
        if formatted == file.text() {
            continue;
        }
        if args.check {
            outln!("{}", path.display());
            code = code.max(EXIT_FINDINGS);
        } else if let Err(e) = std::fs::write(path, formatted) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            code = code.max(EXIT_INPUT);
        }
    }
    code
}
