//! The running sandbox: waiting for the workload, `--timeout`, signals, and
//! making sure nothing the workload started outlives it.
//!
//! The workload runs under an init: `openshell-sandbox`, which the launch
//! child execs and which forks the workload (`enforcer::spawn_init`).
//! With the privilege to make namespaces it is PID 1 of
//! the workload's own PID namespace: it reaps whatever the workload
//! abandons, passes on the signals forwarded here, and when the workload
//! ends the kernel kills everything left in the namespace. Without that
//! privilege it is a child subreaper and kills what is left itself. If the
//! supervisor is killed, `PR_SET_PDEATHSIG` kills the init, and with it
//! the namespace, or (without one) the workload, whose own parent-death
//! signal fires.
//!
//! Without a PID namespace the supervisor is a child subreaper too, for
//! whatever outlives the init: when
//! the workload ends (or times out), every remaining descendant is killed
//! and reaped before the supervisor exits. Processes that escaped both
//! have lost the listener, so every trapped call fails (`ENOSYS`).

use std::time::Duration;

use enforcer::{ExitStatus, Running};
use tokio::signal::unix::{SignalKind, signal};

/// How the workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(ExitStatus),
    TimedOut,
}

/// Signals passed on to the workload. `SIGINT` and `SIGQUIT` are not: a
/// terminal sends them to the whole foreground group, workload included,
/// and forwarding would deliver them twice; the supervisor just survives
/// them. `SIGHUP` is not either: it reloads the bundle (`crate::reload`).
const FORWARDED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2];

/// Waits for the workload to end, forwarding signals, up to `timeout`.
pub async fn supervise(running: Running, timeout: Option<Duration>) -> std::io::Result<Outcome> {
    let pid = running.pid();
    let mut relays = Vec::new();
    for sig in FORWARDED {
        let mut stream = signal(SignalKind::from_raw(sig))?;
        relays.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {
                let _ = enforcer::send_signal(pid, sig);
            }
        }));
    }
    for kind in [SignalKind::interrupt(), SignalKind::quit()] {
        let mut stream = signal(kind)?;
        relays.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {}
        }));
    }
    let outcome = wait(running, timeout).await;
    for relay in relays {
        relay.abort();
    }
    outcome
}

async fn wait(running: Running, timeout: Option<Duration>) -> std::io::Result<Outcome> {
    let pid = running.pid();
    let mut waiter = tokio::task::spawn_blocking(move || running.wait());
    let exited = |joined: Result<Result<ExitStatus, enforcer::Errno>, _>| match joined {
        Ok(Ok(status)) => Ok(Outcome::Exited(status)),
        Ok(Err(e)) => Err(std::io::Error::from(e)),
        Err(e) => Err(std::io::Error::other(e)),
    };
    let Some(limit) = timeout else {
        return exited(waiter.await);
    };
    tokio::select! {
        joined = &mut waiter => exited(joined),
        () = tokio::time::sleep(limit) => {
            let _ = enforcer::send_signal(pid, libc::SIGKILL);
            let _ = waiter.await;
            Ok(Outcome::TimedOut)
        }
    }
}
