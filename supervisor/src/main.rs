//! `openshell-supervisor run --bundle B [options] -- CMD ARGS...`
//!
//! Exit status: the workload's (128 + n when a signal ended it); 124 when
//! `--timeout` killed it; 125 when the sandbox could not be set up (the
//! command never ran); 126/127 when the command cannot be executed / is not
//! found; 2 for a usage error.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    supervisor::main()
}
