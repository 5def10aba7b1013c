//! `openshell-policy-solver`: the `openshell-policy` commands with Z3
//! linked in process.
//!
//! `openshell-policy` itself does not link `libz3`, whose loading would
//! cost every run a third of a typical `diff --prove`; the finite-domain
//! search settles most questions without it. When a question needs Z3
//! (a large problem, or a search that gives up), `openshell-policy` hands
//! its whole command line to this program, which it finds beside itself
//! (or at `$OPENSHELL_POLICY_SOLVER`), and this program answers it.
//!
//! Z3 comes from the `prover-z3` crate, which only this program and the
//! gateway depend on; a cargo feature of `prover` would have been turned
//! on for `openshell-policy` too whenever the workspace is built at once.

#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // The shared command line is named `openshell-policy`; the version
    // line names this program.
    if matches!(std::env::args().nth(1).as_deref(), Some("--version" | "-V")) {
        println!("openshell-policy-solver {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    openshell_policy::main_with(&prover_z3::Z3)
}
