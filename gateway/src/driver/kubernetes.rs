//! The Kubernetes driver: a sandbox as a workload Pod and a supervisor
//! Pod of one namespace (`docs/kubernetes.md`). Its objects are built as
//! the API's own typed objects (`k8s-openapi`), so a misspelt field or a
//! value of the wrong type does not compile; [`Kubernetes`] makes them
//! through the API server.
//!
//! A generation is made in this order, each step relying on the last:
//!
//! 1. what a start that never finished left, removed (by label, each
//!    object by its uid);
//! 2. the namespace's [`fence`]: a NetworkPolicy under which a workload
//!    Pod sends nothing and receives only the supervisors' connections on
//!    [`SANDBOX_PORT`], so that a workload whose sandbox failed to broker
//!    a connect still reaches nothing;
//! 3. the [`workload_pod`], held back by a scheduling gate, so nothing
//!    of it runs before the driver has seen what admission made of it;
//! 4. that inspection: a mutating webhook may have added a sidecar, a
//!    volume or a capability the fence and the confinement below do not
//!    account for;
//! 5. the generation's Secrets ([`bootstrap_secret`],
//!    [`supervisor_secret`]: each half of keys made for the generation,
//!    immutable, owned by the workload Pod);
//! 6. the workload's gate lifted: its sandbox listens and waits, nothing
//!    of the workload forked, its launch to come from the supervisor;
//! 7. once it has an IP, the [`supervisor_pod`], owned (not controlled)
//!    by the workload Pod, inspected, its gate lifted;
//! 8. ready once the supervisor confirmed the sandbox's enforcement.
//!
//! Both Pods run as a user that is not root, with every capability
//! dropped, no privilege escalation, the runtime's default seccomp
//! profile, no service account token and no service links: a workload
//! that escaped its sandbox still holds nothing of the cluster.

use std::collections::BTreeMap;
use std::net::IpAddr;

mod cluster;
mod inspect;
mod manifests;
mod names;
mod rbac;
mod sample;

pub use cluster::{Kubernetes, Settings};
pub use manifests::{
    FENCE, bootstrap_secret, fence, supervisor_pod, supervisor_secret, workload_pod,
};
pub use names::Names;
pub use rbac::{DRIVER_ROLE, driver_role};
pub use sample::manifests_for_validation;

/// The port the sandbox listens on in the workload Pod and the fence
/// admits supervisors to: one for every sandbox, since the fence is the
/// namespace's.
pub const SANDBOX_PORT: u16 = 7000;

/// The scheduling gate both Pods are created with; the driver lifts it
/// once it has inspected them.
pub const SCHEDULING_GATE: &str = "openshell.dev/supervisor";

/// Labels every object carries; the fence selects Pods by the first two.
pub const PART_OF: &str = "app.kubernetes.io/part-of";
/// Which of a sandbox's Pods this is: [`ROLE_WORKLOAD`] or
/// [`ROLE_SUPERVISOR`].
pub const ROLE: &str = "openshell.dev/role";
/// The sandbox, as [`Names::sandbox`] names it.
pub const SANDBOX: &str = "openshell.dev/sandbox";
/// The generation, in decimal.
pub const GENERATION: &str = "openshell.dev/generation";
/// The sandbox's id exactly as the gateway knows it (an annotation: an id
/// need not be a valid label value).
pub const SANDBOX_ID: &str = "openshell.dev/sandbox-id";
/// [`PART_OF`]'s value.
pub const OPENSHELL: &str = "openshell";
/// [`ROLE`] of the Pod that runs `openshell-sandbox` and the workload.
pub const ROLE_WORKLOAD: &str = "workload";
/// [`ROLE`] of the Pod that runs `openshell-supervisor serve`.
pub const ROLE_SUPERVISOR: &str = "supervisor";

/// One generation of a sandbox, as the driver would be asked to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationSpec {
    /// Where the sandbox's objects go; the namespace needs the [`fence`].
    pub namespace: String,
    /// The sandbox's id at the gateway.
    pub sandbox_id: String,
    /// Counts starts from 1.
    pub generation: u64,
    /// The workload's image; `openshell-sandbox` is copied into it, so
    /// any image will do.
    pub image: String,
    /// The workload's command, its program an absolute path in the image.
    pub command: Vec<String>,
    /// A command running longer than this is ended.
    pub timeout_seconds: Option<u64>,
    /// A PersistentVolumeClaim mounted at [`WORKSPACE`], kept across
    /// generations; none: an empty directory that goes with the Pod.
    pub workspace_claim: Option<String>,
    /// The user both Pods run as: never root.
    pub user: i64,
    /// Their group, and the group the volumes are given to.
    pub group: i64,
    /// The supervisor's image: `openshell-supervisor` and a statically
    /// linked `openshell-sandbox` in `/usr/local/bin`, and `cp`.
    pub supervisor_image: String,
    /// How the supervisor reaches the gateway, tried in order.
    pub gateway_urls: Vec<String>,
    /// More labels for every object, e.g. a cost centre; none may be one
    /// of the driver's own.
    pub labels: BTreeMap<String, String>,
}

/// Where the workspace is in the workload's container.
pub const WORKSPACE: &str = "/workspace";

/// What the driver learnt of the admitted workload Pod, for its
/// supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedWorkload {
    /// The Pod's uid: the supervisor Pod's owner reference names it, so
    /// a workload Pod made again under the same name does not adopt it.
    pub uid: String,
    /// The Pod's IP, where its sandbox listens.
    pub ip: IpAddr,
}

/// What the supervisor is given in its Secret, besides what it makes
/// itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorTrust {
    /// The generation's session, which the supervisor refreshes and
    /// writes back (so it is copied out of the read-only Secret first).
    pub session: Vec<u8>,
    /// The gateway's CA certificate (`ca.pem`).
    pub gateway_ca: Vec<u8>,
    /// The signing keys to trust (`trust.keys`).
    pub trust_keys: Vec<u8>,
    /// The supervisor's half of the generation's channel keys
    /// (`sandbox_protocol::channel::Kit::supervisor`).
    pub credential: Vec<u8>,
}

/// Why a generation's objects cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A name the API would refuse.
    #[error(
        "{what} `{value}` is not a DNS-1123 label (lowercase letters, digits and `-`, at most 63, starting and ending with a letter or digit)"
    )]
    NotALabel {
        /// What the name is for.
        what: &'static str,
        /// The name.
        value: String,
    },
    /// A workspace claim the API would refuse.
    #[error(
        "the workspace claim `{0}` is not a DNS-1123 subdomain (lowercase letters, digits, `-` and `.`, at most 253)"
    )]
    NotASubdomain(String),
    /// Generations count from 1.
    #[error("generation 0: generations count from 1")]
    GenerationZero,
    /// Root, or a negative id.
    #[error(
        "the Pods' user and group must be from 1 to 2147483647, not {user}:{group}: they never run as root"
    )]
    Identity {
        /// The user given.
        user: i64,
        /// The group given.
        group: i64,
    },
    /// An empty value where one is needed.
    #[error("{0} is empty")]
    Missing(&'static str),
    /// A program that is not an absolute path.
    #[error("the command starts with `{0}`: give the program's absolute path in the image")]
    RelativeProgram(String),
    /// A timeout of 0.
    #[error("a timeout of 0 seconds: leave it out for no timeout")]
    TimeoutZero,
    /// A label that is not one, or one the driver sets itself.
    #[error("the label `{key}={value}` cannot be given: {why}")]
    Label {
        /// Its key.
        key: String,
        /// Its value.
        value: String,
        /// Why not.
        why: &'static str,
    },
    /// A uid the workload Pod cannot have.
    #[error("the workload Pod's uid `{0}` is not a uid")]
    Uid(String),
    /// More than a Secret holds.
    #[error("the {0} Secret would hold {1} bytes; a Secret holds at most 1 MiB")]
    SecretTooLarge(&'static str, usize),
    /// An object serde could not encode.
    #[error("cannot encode `{0}`: {1}")]
    Encode(String, String),
}

/// A [`GenerationSpec`] checked, with its objects' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    spec: GenerationSpec,
    names: Names,
}

impl Generation {
    /// Checks `spec` as the API server would, and more: never root, an
    /// absolute program, none of the driver's own labels overridden.
    ///
    /// # Errors
    /// The first thing wrong with it.
    pub fn new(spec: GenerationSpec) -> Result<Self, ManifestError> {
        names::check_label("the namespace", &spec.namespace)?;
        if spec.sandbox_id.is_empty() {
            return Err(ManifestError::Missing("the sandbox id"));
        }
        if spec.generation == 0 {
            return Err(ManifestError::GenerationZero);
        }
        let id_ok = |id: i64| (1..=i64::from(i32::MAX)).contains(&id);
        if !id_ok(spec.user) || !id_ok(spec.group) {
            return Err(ManifestError::Identity {
                user: spec.user,
                group: spec.group,
            });
        }
        for (what, value) in [
            ("the workload's image", &spec.image),
            ("the supervisor's image", &spec.supervisor_image),
        ] {
            if value.trim().is_empty() {
                return Err(ManifestError::Missing(what));
            }
        }
        match spec.command.first() {
            None => return Err(ManifestError::Missing("the command")),
            Some(p) if !p.starts_with('/') => {
                return Err(ManifestError::RelativeProgram(p.clone()));
            }
            Some(_) => {}
        }
        if spec.timeout_seconds == Some(0) {
            return Err(ManifestError::TimeoutZero);
        }
        if let Some(claim) = &spec.workspace_claim
            && !names::is_subdomain(claim)
        {
            return Err(ManifestError::NotASubdomain(claim.clone()));
        }
        if spec.gateway_urls.iter().all(|u| u.trim().is_empty()) {
            return Err(ManifestError::Missing("the gateway's URLs"));
        }
        for (key, value) in &spec.labels {
            names::check_extra_label(key, value)?;
        }
        let names = Names::new(&spec.sandbox_id, spec.generation);
        Ok(Self { spec, names })
    }

    /// What it was made from.
    #[must_use]
    pub fn spec(&self) -> &GenerationSpec {
        &self.spec
    }

    /// Its objects' names.
    #[must_use]
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The labels of its objects; a Pod's add [`ROLE`].
    fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.spec.labels.clone();
        labels.insert(PART_OF.into(), OPENSHELL.into());
        labels.insert(SANDBOX.into(), self.names.sandbox.clone());
        labels.insert(GENERATION.into(), self.spec.generation.to_string());
        labels
    }
}
