//! The `openshell-policy` command line, shared by `openshell-policy` and
//! `openshell-policy-solver` (the same commands, with Z3 linked: see
//! `prover::solver`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cli;
pub mod denylog;
mod output;
mod report;

use std::process::ExitCode;

/// Parses the arguments and runs the command.
pub fn main() -> ExitCode {
    let code = match cli::parse() {
        Ok(args) => cli::run(args),
        Err(code) => code,
    };
    ExitCode::from(code)
}
