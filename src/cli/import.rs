use std::path::{Path, PathBuf};

use policy_lang::ast::{Item, Stmt};
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

/// Prints one file's diagnostics; false when one is an error (the file is
/// then not imported).
fn reported(path: &Path, diags: policy_lang::diag::Diagnostics) -> bool {
    let diags = diags.sorted();
    let failed = diags.iter().any(|d| d.is_error());
    report::print_diagnostics(
        &[FileReport {
            path: path.display().to_string(),
            diagnostics: diags,
        }],
        DiagFormat::Human,
    );
    if failed {
        eprintln!("error: `{}` was not imported", path.display());
    }
    !failed
}

pub fn run(args: &Args) -> u8 {
    let file = match load::read_source(&args.file) {
        Ok(f) => f,
        Err(e) => return input_error(&e),
    };
    let creds = match args
        .credentials
        .as_deref()
        .map(load::read_source)
        .transpose()
    {
        Ok(c) => c,
        Err(e) => return input_error(&e),
    };
    // Read together: an endpoint's `credential_binding` gives a
    // credential its hosts, and is refused when the file lacks it.
    let imported = import::yaml_with_credentials(&file, creds.as_ref());
    let policy_ok = reported(&args.file, imported.policy_diagnostics);
    let creds_ok = match &args.credentials {
        Some(path) => reported(path, imported.credential_diagnostics),
        None => true,
    };
    let Some(mut doc) = imported.policy.filter(|_| policy_ok && creds_ok) else {
        if policy_ok && creds_ok {
            eprintln!("error: `{}` was not imported", args.file.display());
        }
        return EXIT_FINDINGS;
    };
    if let (Some(creds), Some(out_path)) = (&args.credentials, &args.output) {
        let Some(fragment) = imported.credentials else {
            eprintln!("error: `{}` was not imported", creds.display());
            return EXIT_FINDINGS;
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
