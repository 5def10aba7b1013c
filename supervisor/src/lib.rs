//! `openshell-supervisor`: enforces a compiled bundle on a workload.
//!
//! ```text
//!  bundle ──▶ launch plan (kernel tables, user, command) in a memfd
//!                 │
//!  run ──fork──▶ init: netns · mount ns (resolv.conf, noexec) · pidns
//!   │             └─ exec openshell-sandbox: forks the workload (user ·
//!   │                caps · no_new_privs · Landlock · seccomp), keeps its
//!   │                listener, brokers every trapped call, runs the DNS stub
//!   │◀══ sandbox protocol (relay: gRPC over a Unix socket pair) ══▶
//!   ├─ relay: each connect decided (eval + attribution + the caller's
//!   │        facts), opened upstream from here (L7 routes: through the
//!   │        proxy), its bytes relayed; refusals in the deny log
//!   ├─ dns: answers only allowed names, remembers name → address,
//!   │        resolves upstream with hickory
//!   ├─ l7: the proxy: TLS with a per-sandbox CA, decide_request per
//!   │        request, credentials injected where bound, TLS upstream;
//!   │        the advisor endpoint (policy.local) answered itself
//!   ├─ reload: SIGHUP / --watch swaps the network part of the bundle
//!   └─ lifecycle: wait, --timeout, signals, kill what is left
//! ```
//!
//! Modules, each small and named for its job: `cli` (arguments),
//! `run` (one launch), `serve` (a sandbox on another host), `tables` (bundle → launch plan), `workload`
//! (user, environment, program), `relay` (the supervisor's side of the
//! sandbox protocol), `broker` (what a relayed connect needs: the decider,
//! the log, the upstream), `dns` (the stub's answers), `attribution` (name
//! ↔ address memory), `denylog` (OCSF JSON lines), `l7` (the proxy),
//! `credentials` (secrets and placeholders), `policy` (the bundle in
//! force, swappable), `reload` (hot reload), `gateway` (bundles from the
//! gateway), `stdio` (transcript), `lifecycle` (waiting and cleanup).
//!
//! `docs/supervisor.md` is the operator's guide, `docs/proxy.md` the
//! proxy's; `docs/threat-model.md` says what is enforced, what is
//! continued and why.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attribution;
mod broker;
mod cli;
pub mod commands;
mod credentials;
mod decide;
mod denylog;
mod dns;
mod error;
mod gateway;
mod gateway_exec;
mod handoff;
mod l7;
mod lifecycle;

mod notes;
mod policy;
pub mod relay;
mod reload;
mod run;
mod serve;
mod session;
mod state;
mod stdio;
mod tables;
mod workload;

use std::process::ExitCode;

use clap::Parser as _;

/// The seccomp filter `run` installs for a bundle's syscall tables (before
/// the additions that depend on the workload's user and PID namespace),
/// converted exactly as `run` converts them; an error names what the
/// supervisor cannot enforce. Public so that the enforcer's kernel tests
/// prove the filter the product builds, not a copy of this conversion.
///
/// # Errors
///
/// The tables name an errno, an argument or a trapped call this
/// supervisor does not know, or do not trap `connect`.
pub fn seccomp_filter(table: &policy_bundle::SeccompTable) -> Result<enforcer::FilterSpec, String> {
    sandbox::plan::filter_spec(&table.deny, &table.notify).map_err(|e| e.to_string())
}

/// The command-line entry point.
#[must_use]
pub fn main() -> ExitCode {
    // Before anything holds a secret: a process of the workload's user may
    // not make the supervisor dump its memory (see `docs/threat-model.md`,
    // "The supervisor's memory").
    if let Err(errno) = enforcer::forbid_core_dumps() {
        eprintln!("openshell-supervisor: cannot forbid core dumps of itself: {errno}");
        return ExitCode::from(run::EXIT_LAUNCH_FAILED);
    }
    let cli = cli::Cli::parse();
    let code = match &cli.command {
        cli::Command::Run(args) => run::run(args),
        cli::Command::Serve(args) => serve::serve(args),
    };
    ExitCode::from(code)
}
