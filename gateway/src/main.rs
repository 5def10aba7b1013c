//! `openshell-gateway init | serve | <client command>`; see `--help` and
//! `docs/gateway.md`. Exit status: 0 done, 1 the gateway refused or a
//! check failed, 2 usage or input error, 3 could not reach the gateway.

fn main() -> std::process::ExitCode {
    gateway::cli::main()
}
