//! `completions` and `man`: shell completions and manual pages generated
//! from the clap definitions when asked for, so they cannot drift from the
//! commands and cost nothing at the start of any other command.

use std::path::PathBuf;

use clap::CommandFactory;

use super::{Cli, EXIT_INPUT, EXIT_OK};
use crate::output::out;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The command whose page to print (the tool's own page without one).
    #[arg(value_name = "COMMAND")]
    command: Option<String>,
    /// Write every page (`openshell-policy.1`, `openshell-policy-check.1`,
    /// ...) into this directory instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    out: Option<PathBuf>,
}

const NAME: &str = "openshell-policy";

/// The footer of every page: a subcommand has no version of its own, and
/// a page without one cannot say which release it documents.
const SOURCE: &str = concat!("openshell-policy ", env!("CARGO_PKG_VERSION"));

/// One command's page, with the tool's name and version in its footer.
fn page(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd).source(SOURCE)
}

/// Writes the page of `cmd` and of each visible subcommand under it into
/// `dir`, as `clap_mangen::generate_to` does but with [`page`]'s footer.
fn write_pages(cmd: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    page(cmd.clone()).generate_to(dir).map(drop)
}

pub fn completions(args: &CompletionsArgs) -> u8 {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), NAME, &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    EXIT_OK
}

pub fn man(args: &ManArgs) -> u8 {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = &args.out {
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| write_pages(&cmd, dir)) {
            return super::input_error(&format!(
                "cannot write manual pages to `{}`: {e}",
                dir.display()
            ));
        }
        return EXIT_OK;
    }
    let page = match &args.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                eprintln!("error: no command `{name}`");
                return EXIT_INPUT;
            }
        },
    };
    let mut buf = Vec::new();
    if let Err(e) = self::page(page).render(&mut buf) {
        return super::input_error(&format!("cannot render the manual page: {e}"));
    }
    out!("{}", String::from_utf8_lossy(&buf));
    EXIT_OK
}
