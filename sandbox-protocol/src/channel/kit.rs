//! A generation's two halves, made by whoever starts the generation (a
//! driver) rather than by its supervisor: where the sandbox's bootstrap
//! must exist before either end runs (a Kubernetes Secret mounted into the
//! workload's Pod), the supervisor cannot be the one to write it. The
//! sandbox's half carries no launch plan; the supervisor sends the launch
//! in its first `Welcome` instead.

use serde::Serialize;

use super::{ChannelError, Credential, Endpoint, issue};
use crate::Binding;

/// The version of the bootstrap a kit writes: the first that may leave
/// out the plan, so that `openshell-sandbox` waits for its launch.
pub const KIT_BOOTSTRAP_VERSION: u32 = 3;

/// A generation's two halves, made by whoever starts it (a driver).
pub struct Kit {
    /// The sandbox's bootstrap, JSON: what `openshell-sandbox --bootstrap
    /// FILE` reads. It holds the sandbox's channel key.
    pub bootstrap: Vec<u8>,
    /// The supervisor's channel credential, JSON: what
    /// `openshell-supervisor serve --credential FILE` reads. It holds the
    /// supervisor's channel key.
    pub supervisor: Vec<u8>,
}

/// Both halves hold a private key: a log line must never show one.
impl std::fmt::Debug for Kit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kit")
            .field("bootstrap", &format_args!("{} bytes", self.bootstrap.len()))
            .field(
                "supervisor",
                &format_args!("{} bytes", self.supervisor.len()),
            )
            .finish()
    }
}

/// The field names `openshell-sandbox` reads in a bootstrap (its
/// `Bootstrap`, which a test there parses a kit's bootstrap into).
#[derive(Serialize)]
struct PlanlessBootstrap<'a> {
    version: u32,
    listen: &'a Endpoint,
    credential: &'a Credential,
    reattach_within: u64,
}

/// A new generation of `binding` whose sandbox listens on `listen` and
/// stays frozen up to `reattach_within` seconds after its channel drops:
/// fresh keys ([`issue`]), the sandbox's bootstrap without a plan, and the
/// supervisor's credential.
pub fn kit(
    binding: &Binding,
    listen: &Endpoint,
    reattach_within: u64,
) -> Result<Kit, ChannelError> {
    let (sandbox, supervisor) = issue(binding)?;
    let bootstrap = serde_json::to_vec_pretty(&PlanlessBootstrap {
        version: KIT_BOOTSTRAP_VERSION,
        listen,
        credential: &sandbox,
        reattach_within,
    })
    .map_err(|e| ChannelError::Bootstrap(e.to_string()))?;
    Ok(Kit {
        bootstrap,
        supervisor: supervisor.to_json()?,
    })
}
