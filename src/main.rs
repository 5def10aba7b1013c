//! `openshell-policy`: check, compile, explain, evaluate, format and import
//! sandbox policies.
//!
//! Exit codes: 0 clean, 1 errors or findings, 2 usage or unreadable input.

mod cli;
mod report;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let code = cli::run(args);
    ExitCode::from(code)
}
