//! What runs a sandbox the gateway manages: a [`Driver`] starts a
//! generation of it, says whether it runs, stops it and removes it. The
//! gateway decides every phase change and records it in the database first
//! (see `lifecycle`); a driver only acts, so a driver call that fails or a
//! gateway that dies mid-call leaves a row the next gateway can finish.
//!
//! Every call names the sandbox by id and must be idempotent: a gateway
//! that took over an unfinished transition calls again what the last one
//! may already have done.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod host;
pub mod kubernetes;
pub mod local;
pub mod podman;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A driver call in flight.
pub type DriverFut<'a, T> = Pin<Box<dyn Future<Output = Result<T, DriverError>> + Send + 'a>>;

/// Why a driver call failed, in words an operator can act on; it becomes
/// the sandbox's `reason`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

/// How a sandbox is to run: what `POST /v1/sandboxes` takes as `run`, kept
/// with the sandbox and given to its driver at every start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The driver that runs it, one the gateway was started with.
    #[schemars(length(min = 1, max = 64))]
    pub driver: String,
    /// The workload's command, program first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub command: Vec<String>,
    /// Names of the environment variables a command may be given; no
    /// other variable reaches the workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env_allow: Vec<String>,
    /// The workspace: a directory of the driver's host or a volume; kept
    /// across stop and start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The root filesystem: a directory of the driver's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    /// An image the driver knows, instead of `rootfs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A command running longer than this is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<u64>,
}

/// The longest a value of a [`RunSpec`] may be (an argument, a path, a
/// name).
const MAX_VALUE: usize = 4096;

impl RunSpec {
    /// Refuses what no driver could run, naming the field and the fix.
    ///
    /// # Errors
    /// A sentence saying which field is wrong and why.
    pub fn validate(&self) -> Result<(), String> {
        if self.command.len() > 256 || self.env_allow.len() > 256 {
            return Err("`run.command` and `run.env_allow` take at most 256 entries".into());
        }
        let values = self
            .command
            .iter()
            .chain(&self.env_allow)
            .chain(&self.workspace)
            .chain(&self.rootfs)
            .chain(&self.image);
        for v in values {
            if v.len() > MAX_VALUE || v.contains('\0') {
                return Err(format!(
                    "`run` holds a value longer than {MAX_VALUE} bytes or with a NUL byte: `{}`",
                    v.chars().take(64).collect::<String>()
                ));
            }
        }
        if self.command.first().is_some_and(String::is_empty) {
            return Err("`run.command` starts with an empty program name".into());
        }
        if let Some(bad) = self.env_allow.iter().find(|n| !env_name(n)) {
            return Err(format!(
                "`run.env_allow` names `{bad}`, which is not an environment variable name (letters, digits and `_`, not starting with a digit)"
            ));
        }
        if self.rootfs.is_some() && self.image.is_some() {
            return Err("`run` names both `rootfs` and `image`: give one".into());
        }
        for (field, path) in [("workspace", &self.workspace), ("rootfs", &self.rootfs)] {
            if path.as_deref().is_some_and(|p| p.is_empty()) {
                return Err(format!("`run.{field}` is empty: leave it out or name one"));
            }
        }
        if self.timeout_seconds == Some(0) {
            return Err("`run.timeout_seconds` is 0: leave it out for no timeout".into());
        }
        Ok(())
    }
}

fn env_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// One generation of a sandbox to start.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The sandbox's id.
    pub id: String,
    /// Counts starts from 1; a start after a stop is the next one.
    pub generation: i64,
    /// The policy its supervisor fetches.
    pub policy: String,
    /// How it runs.
    pub spec: RunSpec,
    /// The generation's session token, for its supervisor only; it
    /// refreshes it (`POST /v1/sandboxes/{id}/session`) before it expires.
    pub token: String,
    /// When the token expires, in seconds since the epoch.
    pub token_expires_at: i64,
}

/// Runs sandboxes somewhere: processes on this host, containers, pods.
pub trait Driver: Send + Sync {
    /// The name `run.driver` gives.
    fn name(&self) -> &str;
    /// What this driver cannot run, refused (`400`) before anything is
    /// stored, so that nothing asked for is silently left out.
    fn check(&self, spec: &RunSpec) -> Result<(), String> {
        let _ = spec;
        Ok(())
    }
    /// Where this driver's sandboxes live, kept with each sandbox: a
    /// gateway acts on a sandbox (begins, takes over, watches a
    /// transition) only through a driver of the same place. One host's
    /// processes are that host's; a driver whose sandboxes every replica
    /// reaches keeps the default, its name.
    fn place(&self) -> String {
        self.name().to_owned()
    }
    /// Starts the generation; returns once the workload runs confined and
    /// its supervisor holds the session. A start that fails leaves nothing
    /// running.
    fn start(&self, launch: Launch) -> DriverFut<'_, ()>;
    /// Whether a generation of the sandbox is running.
    fn running(&self, id: &str) -> DriverFut<'_, bool>;
    /// Stops the workload and its supervisor; the workspace stays.
    /// Stopping what is not running succeeds.
    fn stop(&self, id: &str) -> DriverFut<'_, ()>;
    /// Removes what the driver made for the sandbox, after a stop; never a
    /// workspace or root filesystem the caller named.
    fn remove(&self, id: &str) -> DriverFut<'_, ()>;
}

/// The drivers a gateway runs sandboxes with, by name.
#[derive(Clone, Default)]
pub struct Drivers(BTreeMap<String, Arc<dyn Driver>>);

impl Drivers {
    /// The drivers given; a later one replaces an earlier one of its name.
    #[must_use]
    pub fn new(drivers: Vec<Arc<dyn Driver>>) -> Self {
        Self(
            drivers
                .into_iter()
                .map(|d| (d.name().to_owned(), d))
                .collect(),
        )
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Driver>> {
        self.0.get(name)
    }

    /// The names, for an error that lists them.
    pub(crate) fn names(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .keys()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Debug for Drivers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// How the gateway runs sandboxes through drivers.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// What runs them.
    pub drivers: Drivers,
    /// How long a gateway that stopped answering holds a sandbox in
    /// transition before another takes it over (`--sandbox-lease`).
    pub lease: Duration,
    /// How long a session token lives unless its supervisor refreshes it
    /// (`--session-ttl`).
    pub session_ttl: Duration,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            drivers: Drivers::default(),
            lease: Duration::from_secs(30),
            session_ttl: Duration::from_secs(600),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            driver: "local".into(),
            command: vec!["sh".into(), "-c".into(), "true".into()],
            env_allow: vec!["HOME".into(), "_X1".into()],
            workspace: Some("/srv/w".into()),
            rootfs: None,
            image: None,
            timeout_seconds: Some(5),
        }
    }

    #[test]
    fn a_plain_spec_is_valid() {
        assert_eq!(spec().validate(), Ok(()));
    }

    #[test]
    fn bad_specs_name_their_field() {
        type Change = fn(&mut RunSpec);
        let cases: [(Change, &str); 6] = [
            (
                |s| s.env_allow.push("1X".into()),
                "`run.env_allow` names `1X`",
            ),
            (
                |s| s.env_allow.push("A-B".into()),
                "`run.env_allow` names `A-B`",
            ),
            (
                |s| {
                    s.rootfs = Some("/r".into());
                    s.image = Some("img".into());
                },
                "`run` names both",
            ),
            (|s| s.rootfs = Some("/r".into()), ""),
            (
                |s| s.timeout_seconds = Some(0),
                "`run.timeout_seconds` is 0",
            ),
            (|s| s.command[0].clear(), "empty program name"),
        ];
        for (change, want) in cases {
            let mut s = spec();
            change(&mut s);
            match s.validate() {
                Ok(()) => assert!(want.is_empty(), "accepted, wanted `{want}`"),
                Err(e) => assert!(!want.is_empty() && e.contains(want), "{e}"),
            }
        }
        let mut s = spec();
        s.command.push("a\0b".into());
        assert!(s.validate().unwrap_err().contains("NUL"));
    }
}
