//! The `openshell-policy` command line, shared by `openshell-policy` and
//! `openshell-policy-solver` (the same commands, with Z3 as the prover's
//! solver: see `prover::solver`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cli;
mod output;
mod report;

use std::process::ExitCode;

/// Parses the arguments and runs the command, without an SMT solver: a
/// proof that needs one is handed to `openshell-policy-solver`.
pub fn main() -> ExitCode {
    run(None)
}

/// [`main`] with `solver` answering every proof in process; the program
/// that passes it links it.
pub fn main_with(solver: &'static dyn prover::solver::Backend) -> ExitCode {
    run(Some(solver))
}

fn run(solver: Option<&'static dyn prover::solver::Backend>) -> ExitCode {
    cli::solver::set(solver);
    let code = match cli::parse() {
        Ok(args) => cli::run(args),
        Err(code) => code,
    };
    ExitCode::from(code)
}
