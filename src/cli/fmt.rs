use crate::output::{out, outln};
use std::path::PathBuf;

use policy_lang::source::SourceFile;
use policy_lang::{fmt, load, parser};

use super::inputs::{self, Input};
use super::{DiagFormat, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `.policy` files to format; a directory for every `.policy` file under
    /// it, or `-` to format standard input to standard output.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Do not write; exit 1 and list the files that are not formatted.
    #[arg(long)]
    check: bool,
}

pub fn run(args: &Args) -> u8 {
    let mut code = EXIT_OK;
    let (inputs, unusable) = inputs::expand(&args.files, inputs::is_formattable, "`.policy` files");
    for e in &unusable {
        eprintln!("error: {}", e.message);
        code = code.max(EXIT_INPUT);
    }
    for input in &inputs {
        code = code.max(format_one(input, args.check));
    }
    code
}

fn format_one(input: &Input, check: bool) -> u8 {
    let file = match input {
        Input::File(path) if load::is_yaml(path) => {
            eprintln!(
                "error: `{}` is OpenShell YAML; translate it with `openshell-policy import` first",
                path.display()
            );
            return EXIT_INPUT;
        }
        Input::File(path) => match load::read_source(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_INPUT;
            }
        },
        Input::Stdin => match inputs::read_stdin() {
            // Told apart as `check -` tells it: by its first significant
            // line.
            Ok(text) if inputs::reads_as_yaml(&text) => {
                eprintln!(
                    "error: standard input is OpenShell YAML; translate it with `openshell-policy import` first"
                );
                return EXIT_INPUT;
            }
            Ok(text) => SourceFile::new(report::STDIN_NAME, text),
            Err(e) => {
                eprintln!("error: {}", e.message);
                return EXIT_INPUT;
            }
        },
    };
    let shown = input.shown();
    // A policy is checked as `check` would check it (includes, names,
    // rules), not only parsed: a file with errors is never reported as
    // formatted. A fragment may use names the policies including it
    // define, so only its syntax is checked.
    let errors: Vec<_> = match input {
        Input::File(path) => match load::check(path, None) {
            Ok(checked) if checked.is_fragment => parser::parse(&file).1.sorted(),
            Ok(checked) => checked.diagnostics,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_INPUT;
            }
        },
        // Standard input has no directory to resolve an `include` from:
        // only its syntax is checked.
        Input::Stdin => parser::parse(&file).1.sorted(),
    }
    .into_iter()
    .filter(|d| d.is_error())
    .collect();
    let (doc, _) = parser::parse(&file);
    let Some(doc) = doc.filter(|_| errors.is_empty()) else {
        report::print_diagnostics(
            &[FileReport {
                path: shown.clone(),
                diagnostics: errors,
            }],
            DiagFormat::Human,
        );
        eprintln!("error: `{shown}` has errors; not formatted");
        return EXIT_FINDINGS;
    };
    let formatted = fmt::format_document(&doc);
    if *input == Input::Stdin && !check {
        out!("{formatted}");
        return EXIT_OK;
    }
    if formatted == file.text() {
        return EXIT_OK;
    }
    if check {
        outln!("{shown}");
        return EXIT_FINDINGS;
    }
    if let Input::File(path) = input
        && let Err(e) = std::fs::write(path, formatted)
    {
        eprintln!("error: cannot write `{}`: {e}", path.display());
        return EXIT_INPUT;
    }
    EXIT_OK
}
