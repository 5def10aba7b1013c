//! The phases of a sandbox the gateway runs through a driver.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a managed sandbox is in its life. `provisioning`, `stopping`,
/// `starting` and `deleting` are transitions: a gateway holds a lease on
/// the row while its driver acts, and another gateway finishes or rolls
/// back a transition whose lease ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    /// Its first generation is being started.
    Provisioning,
    /// Running, confined, its supervisor holding the session.
    Ready,
    Stopping,
    /// Nothing runs; the workspace is kept; no token works.
    Stopped,
    /// A new generation is being started.
    Starting,
    /// Nothing runs; `reason` says why. It may be started or deleted.
    Failed,
    Deleting,
}

impl Phase {
    pub(crate) const ALL: [Phase; 7] = [
        Phase::Provisioning,
        Phase::Ready,
        Phase::Stopping,
        Phase::Stopped,
        Phase::Starting,
        Phase::Failed,
        Phase::Deleting,
    ];

    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            Phase::Provisioning => "provisioning",
            Phase::Ready => "ready",
            Phase::Stopping => "stopping",
            Phase::Stopped => "stopped",
            Phase::Starting => "starting",
            Phase::Failed => "failed",
            Phase::Deleting => "deleting",
        }
    }

    #[must_use]
    pub(crate) fn parse(word: &str) -> Option<Self> {
        Phase::ALL.into_iter().find(|p| p.word() == word)
    }

    /// A driver is acting on the sandbox, under a lease.
    #[must_use]
    pub(crate) fn in_transition(self) -> bool {
        matches!(
            self,
            Phase::Provisioning | Phase::Stopping | Phase::Starting | Phase::Deleting
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Phase;

    #[test]
    fn every_phase_reads_back_from_its_word() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.word()), Some(p));
            assert_eq!(
                serde_json::to_value(p).ok(),
                Some(serde_json::Value::from(p.word()))
            );
        }
        assert_eq!(Phase::parse("Ready"), None);
    }
}
