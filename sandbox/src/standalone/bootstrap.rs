//! What a standalone sandbox starts from: its bootstrap file, and the
//! launch (the plan and what goes with it) that the file carries or that
//! the supervisor's `Welcome` brings to a sandbox started from a kit
//! (`sandbox_protocol::channel::kit`).

use std::path::{Path, PathBuf};

use sandbox_protocol::channel::{Credential, Endpoint, Role};
use serde::{Deserialize, Serialize};

use super::StandaloneError;
use crate::plan::{LaunchPlan, RelayPlan};

/// The bootstrap format written: version 3 may leave out the plan (a
/// kit's bootstrap), so that the sandbox waits for its launch.
pub const BOOTSTRAP_VERSION: u32 = 3;

/// The oldest format still read: version 1 differs only in listening on
/// TCP alone, in the `IP:PORT` form version 2 reads unchanged.
pub const OLDEST_BOOTSTRAP_VERSION: u32 = 1;

/// [`Bootstrap::reattach_within`] unless the bootstrap says otherwise.
pub const REATTACH_WITHIN: u64 = 30;

fn default_reattach_within() -> u64 {
    REATTACH_WITHIN
}

/// What a standalone sandbox starts from. The launch's fields are the
/// bootstrap's own, side by side with the channel's, so that versions 1
/// and 2 read unchanged.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// [`BOOTSTRAP_VERSION`].
    pub version: u32,
    /// Where to listen for the supervisor: `IP:PORT`, or
    /// `unix:/absolute/path` in a directory the supervisor sees too.
    pub listen: Endpoint,
    /// The sandbox's channel credential for this generation.
    pub credential: Credential,
    /// The launch plan, as in [`Launch::plan`]; `None` (version 3 only):
    /// the launch comes in the first supervisor's `Welcome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<LaunchPlan>,
    /// As in [`Launch::run_as`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as: Option<RunAs>,
    /// As in [`Launch::trust`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// Seconds the workload stays frozen after the channel dropped,
    /// waiting for its supervisor to attach again, before it is killed.
    #[serde(default = "default_reattach_within")]
    pub reattach_within: u64,
    /// As in [`Launch::timeout_seconds`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// What the workload is and how it runs: the part of a bootstrap that is
/// not the channel's. A supervisor that did not write the bootstrap sends
/// it, as JSON, in its `Welcome`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The launch plan; its relay names the same sandbox and generation as
    /// the sandbox's credential. Its user and what depends on the
    /// sandbox's host (PID namespace, capabilities) are settled there at
    /// start.
    pub plan: LaunchPlan,
    /// The bundle's `run_as`, resolved against the sandbox host's user
    /// database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as: Option<RunAs>,
    /// The proxy's CA, for the workload's trust file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// Seconds the workload may run before it is ended as a `SIGTERM`
    /// would end it; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The user and group names the workload runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAs {
    /// The user; `None` keeps the sandbox's.
    pub user: Option<String>,
    /// The group; `None`: the user's primary group.
    pub group: Option<String>,
}

/// Where the workload's trust file goes, and the CA it adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trust {
    /// A directory the sandbox creates (absolute); the plan grants the
    /// workload read access to it and names its `ca-bundle.pem` in the
    /// environment.
    pub dir: PathBuf,
    /// The proxy's CA certificate, PEM.
    pub proxy_ca: String,
}

/// The channel's part of a bootstrap.
pub(crate) struct Channel {
    pub listen: Endpoint,
    pub credential: Credential,
    pub reattach_within: u64,
}

/// The plan can be large, and the credential holds a key.
impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("listen", &self.listen)
            .field("credential", &self.credential)
            .field("planful", &self.plan.is_some())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("relay", &self.plan.relay)
            .field("run_as", &self.run_as)
            .field("timeout_seconds", &self.timeout_seconds)
            .finish_non_exhaustive()
    }
}

impl Bootstrap {
    /// A bootstrap of this version that carries `launch`.
    #[must_use]
    pub fn with_launch(
        listen: Endpoint,
        credential: Credential,
        launch: Launch,
        reattach_within: u64,
    ) -> Self {
        Self {
            version: BOOTSTRAP_VERSION,
            listen,
            credential,
            plan: Some(launch.plan),
            run_as: launch.run_as,
            trust: launch.trust,
            reattach_within,
            timeout_seconds: launch.timeout_seconds,
        }
    }

    /// The bootstrap as the bytes of its file.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain data with string keys: it always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads the bootstrap at `path` and deletes the file.
    pub fn take(path: &Path) -> Result<Self, StandaloneError> {
        let bad = |why: String| StandaloneError::Bootstrap {
            path: path.display().to_string(),
            why,
        };
        let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        std::fs::remove_file(path).map_err(|e| {
            bad(format!(
                "cannot delete it ({e}): it holds the sandbox's channel key, which the workload must not read; give it on a writable path"
            ))
        })?;
        Self::from_bytes(&bytes).map_err(bad)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let Versioned { version } =
            serde_json::from_slice(bytes).map_err(|e| format!("not a bootstrap: {e}"))?;
        if !(OLDEST_BOOTSTRAP_VERSION..=BOOTSTRAP_VERSION).contains(&version) {
            return Err(format!(
                "version {version}; this openshell-sandbox reads versions {OLDEST_BOOTSTRAP_VERSION} to {BOOTSTRAP_VERSION}"
            ));
        }
        let b: Self = serde_json::from_slice(bytes).map_err(|e| format!("not a bootstrap: {e}"))?;
        if version < 2 && matches!(b.listen, Endpoint::Unix(_)) {
            return Err(format!(
                "version {version} listens on TCP only, and it names `{}` (a Unix socket is version 2)",
                b.listen
            ));
        }
        // The credential's own checks: its role and readable PEM.
        Credential::from_json(
            &b.credential.to_json().map_err(|e| e.to_string())?,
            Role::Sandbox,
        )
        .map_err(|e| e.to_string())?;
        match &b.plan {
            Some(plan) => relay_for(plan, &b.credential).map(drop)?,
            None if version < 3 => {
                return Err(format!(
                    "version {version} has no plan (a bootstrap that waits for its launch is version 3)"
                ));
            }
            None if b.run_as.is_some() || b.trust.is_some() || b.timeout_seconds.is_some() => {
                return Err(
                    "it has no plan but names `run_as`, `trust` or `timeout_seconds`: they come with the launch".into(),
                );
            }
            None => {}
        }
        Ok(b)
    }

    /// The channel's part, and the launch when the bootstrap carries one.
    pub(crate) fn into_parts(self) -> (Channel, Option<Launch>) {
        let channel = Channel {
            listen: self.listen,
            credential: self.credential,
            reattach_within: self.reattach_within,
        };
        let launch = self.plan.map(|plan| Launch {
            plan,
            run_as: self.run_as,
            trust: self.trust,
            timeout_seconds: self.timeout_seconds,
        });
        (channel, launch)
    }
}

impl Launch {
    /// The launch as the bytes a `Welcome` carries.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain data with string keys: it always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The launch a `Welcome` carried to the sandbox of `credential`:
    /// refused unless its plan's relay names the same sandbox and
    /// generation, as a bootstrap's must.
    pub fn from_welcome(bytes: &[u8], credential: &Credential) -> Result<Self, String> {
        let launch: Self =
            serde_json::from_slice(bytes).map_err(|e| format!("not a launch: {e}"))?;
        relay_for(&launch.plan, credential)?;
        Ok(launch)
    }

    /// The plan's relay, which a standalone sandbox always has.
    pub(crate) fn relay(&self) -> Option<&RelayPlan> {
        self.plan.relay.as_ref()
    }
}

/// The relay of `plan`, which must be for the sandbox and generation of
/// `credential`: a plan of another generation would run under this one's
/// channel.
fn relay_for<'p>(plan: &'p LaunchPlan, credential: &Credential) -> Result<&'p RelayPlan, String> {
    let Some(relay) = &plan.relay else {
        return Err("its plan has no relay: a standalone sandbox brokers".into());
    };
    if (relay.sandbox_id.as_str(), relay.generation)
        != (credential.sandbox_id.as_str(), credential.generation)
    {
        return Err(format!(
            "its plan is for sandbox \"{}\" generation {}, its credential for sandbox \"{}\" generation {}",
            relay.sandbox_id, relay.generation, credential.sandbox_id, credential.generation
        ));
    }
    Ok(relay)
}

#[cfg(test)]
#[path = "bootstrap_tests.rs"]
mod tests;
