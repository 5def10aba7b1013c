//! The prover's SMT solver in this program, if it has one, and handing a
//! command to `openshell-policy-solver` when a proof needs Z3 and this
//! program does not link it (`prover::solver`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use prover::solver::Backend;

/// Set once, before the command runs, by the program's `main`: whether
/// it links a solver is a fact of the program, and every command that
/// proves asks it (through [`options`](super::diff::options) and
/// [`delegate_if_large`]).
static SOLVER: OnceLock<Option<&'static dyn Backend>> = OnceLock::new();

/// Records the program's solver; only the first call counts.
pub fn set(solver: Option<&'static dyn Backend>) {
    // A second call would come from a second `main`: the first stands.
    let _ = SOLVER.set(solver);
}

/// The program's solver; `None` hands the proofs that need one over.
pub fn backend() -> Option<&'static dyn Backend> {
    SOLVER.get().copied().flatten()
}

/// Names the solver program instead of the one beside this executable.
pub const SOLVER_ENV: &str = "OPENSHELL_POLICY_SOLVER";

const SOLVER_NAME: &str = "openshell-policy-solver";

/// Set on the solver's process: a program that lacks Z3 too must not hand
/// the command on again.
const DELEGATED_ENV: &str = "OPENSHELL_POLICY_DELEGATED";

/// Inputs of this many bytes in all (a policy of a thousand endpoints
/// is about 170 KiB) take Z3 to prove; a program without it hands them over
/// before compiling them, rather than after.
const LARGE_INPUT: u64 = 128 * 1024;

/// In a program without Z3, hands the command over at once when its
/// inputs are large ([`delegate`]); `None` when the command is to run here.
pub fn delegate_if_large(paths: &[&Path]) -> Option<String> {
    if backend().is_some() {
        return None;
    }
    let total: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    (total > LARGE_INPUT).then(delegate)
}

/// Why a proof failed; when it needs Z3, the command is handed to the
/// solver program first ([`delegate`]), and this only returns if that
/// cannot be done.
pub fn failure(e: prover::ProverError) -> String {
    match e {
        prover::ProverError::SolverNeeded => delegate(),
        e => e.to_string(),
    }
}

/// Replaces this process with the solver program, run with this
/// command's own arguments: it prints the whole answer and exits with its
/// status. Only returns when the program cannot be run, with why.
///
/// Nothing may have been written to stdout before: the solver's output
/// must be the command's only output.
fn delegate() -> String {
    if std::env::var_os(DELEGATED_ENV).is_some() {
        return format!(
            "{}, and neither does the program it was handed to",
            prover::ProverError::SolverNeeded
        );
    }
    let Some(path) = solver_path() else {
        return format!(
            "{}; cannot find `{SOLVER_NAME}` beside this program (set {SOLVER_ENV} to its path)",
            prover::ProverError::SolverNeeded
        );
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let err = Command::new(&path)
        .args(args)
        .env(DELEGATED_ENV, "1")
        .exec();
    format!(
        "{}; cannot run `{}`: {err}",
        prover::ProverError::SolverNeeded,
        path.display()
    )
}

fn solver_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(SOLVER_ENV) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let beside = exe.parent()?.join(SOLVER_NAME);
    beside.is_file().then_some(beside)
}
