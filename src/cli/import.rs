use std::path::{Path, PathBuf};

use policy_lang::ast::{Document, Item, Stmt};
use policy_lang::source::{Node, Span};
use policy_lang::{fmt, import, load};

use super::{DiagFormat, EXIT_FINDINGS, EXIT_OK, input_error};
use crate::output::out;
use crate::report::{self, FileReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An OpenShell v1 policy (`.yaml`/`.yml`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Write the policy here instead of standard output.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// An OpenShell credentials file: written as a fragment of `credential`
    /// blocks next to OUT (named after this file), which OUT includes.
    #[arg(long, value_name = "FILE", requires = "output")]
    credentials: Option<PathBuf>,
}

/// Translates one YAML file; prints its diagnostics. `None` when it failed.
fn translate(
    path: &Path,
    how: fn(&policy_lang::source::SourceFile) -> (Option<Document>, policy_lang::diag::Diagnostics),
) -> Result<Option<Document>, u8> {
    let file = load::read_source(path).map_err(|e| input_error(&e))?;
    let (doc, diags) = how(&file);
    let diags = diags.sorted();
    let failed = diags.iter().any(|d| d.is_error());
    report::print_diagnostics(
        &[FileReport {
            path: path.display().to_string(),
            diagnostics: diags,
        }],
        DiagFormat::Human,
    );
    if failed || doc.is_none() {
        eprintln!("error: `{}` was not imported", path.display());
        return Ok(None);
    }
    Ok(doc)
}

pub fn run(args: &Args) -> u8 {
    let mut doc = match translate(&args.file, import::yaml_to_document) {
        Ok(Some(d)) => d,
        Ok(None) => return EXIT_FINDINGS,
        Err(code) => return code,
    };
    if let (Some(creds), Some(out_path)) = (&args.credentials, &args.output) {
        let fragment = match translate(creds, import::credentials_to_document) {
            Ok(Some(d)) => d,
            Ok(None) => return EXIT_FINDINGS,
            Err(code) => return code,
        };
        let name = format!("{}.policy", fragment.name.node);
        let target = out_path.with_file_name(&name);
        if target == *out_path {
            return input_error(&format!(
                "the credentials fragment would overwrite `{}`; choose another OUT",
                out_path.display()
            ));
        }
        if let Err(e) = std::fs::write(&target, fmt::format_document(&fragment)) {
            return input_error(&format!("cannot write `{}`: {e}", target.display()));
        }
        // The include comes first, where a reader looks for what a policy
        // is built from.
        doc.items.insert(
            0,
            Item::new(Node::new(
                Stmt::Include(Node::new(name, Span::new(0, 0))),
                Span::new(0, 0),
            )),
        );
    }
    let text = fmt::format_document(&doc);
    match &args.output {
        None => out!("{text}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                return input_error(&format!("cannot write `{}`: {e}", path.display()));
            }
        }
    }
    EXIT_OK
}
