//! What the drivers that run sandboxes on the gateway's own host share:
//! names derived from a sandbox's id, running a host command, and the
//! driver's calls made of blocking steps run off the gateway's runtime.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use super::{DriverError, DriverFut, Launch};

/// A driver's place: its kind, this host's name and its root. A sandbox
/// is acted on only through a driver of the place it was started in.
pub(crate) fn place(kind: &str, root: &Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{kind}@{}:{}", host.trim(), root.display())
}

/// An error saying what failed and why.
pub(crate) fn fail(what: &str, e: impl std::fmt::Display) -> DriverError {
    DriverError(format!("{what}: {e}"))
}

/// A short tag of the driver's root and the sandbox id, for interface,
/// namespace and container names (at most 15 bytes for an interface): two
/// drivers on one host never share one.
pub(crate) fn tag(root: &Path, id: &str) -> String {
    let mut h = Sha256::new();
    h.update(root.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(id.as_bytes());
    h.finalize()
        .iter()
        .take(5)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `cmd` (`what`, in a message) to its end: an error with its
/// standard error when it fails.
pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<(), DriverError> {
    let out = cmd
        .output()
        .map_err(|e| fail(&format!("cannot run {what}"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(DriverError(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The last lines of a log, for a message saying why a start failed.
pub(crate) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(6).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Runs a driver's blocking work (processes, files) off the runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DriverError> + Send + 'static,
) -> Result<T, DriverError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| fail("the driver's task stopped", e))?
}

/// A driver of this host as blocking steps; [`Driver`](super::Driver)'s
/// calls are made of them here, the same for every such driver.
pub(crate) trait Steps: Clone + Send + Sync + 'static {
    /// Starts the launch's generation; the caller stops what a failure
    /// left.
    fn start_blocking(&self, launch: &Launch) -> Result<(), DriverError>;
    /// Whether everything of sandbox `id` runs.
    fn running_blocking(&self, id: &str) -> bool;
    /// Stops everything of sandbox `id` and removes its secrets.
    fn stop_blocking(&self, id: &str);
    /// Sandbox `id`'s directory.
    fn dir_of(&self, id: &str) -> PathBuf;
}

/// [`Driver::start`](super::Driver::start): a start that fails leaves
/// nothing running.
pub(crate) fn start<S: Steps>(steps: &S, launch: Launch) -> DriverFut<'_, ()> {
    let me = steps.clone();
    Box::pin(blocking(move || {
        let started = me.start_blocking(&launch);
        if started.is_err() {
            me.stop_blocking(&launch.id);
        }
        started
    }))
}

/// [`Driver::running`](super::Driver::running).
pub(crate) fn running<'a, S: Steps>(steps: &'a S, id: &str) -> DriverFut<'a, bool> {
    let (me, id) = (steps.clone(), id.to_owned());
    Box::pin(blocking(move || Ok(me.running_blocking(&id))))
}

/// [`Driver::stop`](super::Driver::stop): an error if anything still runs.
pub(crate) fn stop<'a, S: Steps>(steps: &'a S, id: &str) -> DriverFut<'a, ()> {
    let (me, id) = (steps.clone(), id.to_owned());
    Box::pin(blocking(move || {
        me.stop_blocking(&id);
        if me.running_blocking(&id) {
            return Err(DriverError(format!(
                "sandbox `{id}` still runs after it was killed"
            )));
        }
        Ok(())
    }))
}

/// [`Driver::remove`](super::Driver::remove): stopped, then its directory
/// gone.
pub(crate) fn remove<'a, S: Steps>(steps: &'a S, id: &str) -> DriverFut<'a, ()> {
    let (me, id) = (steps.clone(), id.to_owned());
    Box::pin(blocking(move || {
        me.stop_blocking(&id);
        let dir = me.dir_of(&id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(fail(&format!("cannot remove `{}`", dir.display()), e)),
        }
    }))
}
