//! What can stop a launch. Every variant means the command never ran.

use std::path::PathBuf;

/// A launch that did not happen, with what to do about it.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum LaunchError {
    #[error("cannot read the bundle `{}`", .path.display())]
    #[diagnostic(code(supervisor::bundle_unreadable))]
    BundleUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("refusing the bundle `{}`", .path.display())]
    #[diagnostic(
        code(supervisor::bundle_refused),
        help(
            "compile the policy again with `openshell-policy compile`; a bundle is never half-applied"
        )
    )]
    BundleRefused {
        path: PathBuf,
        #[source]
        source: policy_bundle::BundleError,
    },

    #[error("the bundle cannot be enforced: {0}")]
    #[diagnostic(
        code(supervisor::bundle_unenforceable),
        help("this supervisor is older or newer than the compiler that wrote the bundle")
    )]
    Unenforceable(String),

    #[error("landlock cannot enforce the bundle on this kernel")]
    #[diagnostic(
        code(supervisor::landlock),
        help(
            "hard mode refuses rather than run with less protection; use `landlock best_effort` to run anyway"
        )
    )]
    Landlock(#[source] enforcer::LandlockError),

    #[error("cannot build the seccomp filter")]
    #[diagnostic(code(supervisor::seccomp))]
    Seccomp(#[source] enforcer::SeccompError),

    #[error("{0}")]
    #[diagnostic(code(supervisor::usage))]
    Usage(String),

    #[error("no verified bundle from the gateway: {0}")]
    #[diagnostic(
        code(supervisor::gateway),
        help(
            "the command runs only under a bundle signed by a trusted key; check the gateway URL, its CA, the sandbox token and the trust file"
        )
    )]
    Gateway(String),

    #[error("the revision floor: {0}")]
    #[diagnostic(
        code(supervisor::state),
        help(
            "the state directory (`--state-dir`, default /var/lib/openshell-supervisor) must be the supervisor's own: owned by its user, mode 0700, files 0600, outside every tree the policy lets the workload write"
        )
    )]
    State(String),

    #[error("`--watch` would reload `{}`, which the workload can change: {why}", .path.display())]
    #[diagnostic(
        code(supervisor::writable_bundle),
        help(
            "keep the bundle where the workload cannot write: outside its `fs write` trees and the working directory, owned by another user than the workload's"
        )
    )]
    WritableBundle { path: PathBuf, why: String },

    #[error("the deny log `{}` is one the workload can change: {why}", .path.display())]
    #[diagnostic(
        code(supervisor::writable_log),
        help(
            "keep the log where the workload cannot write: outside its `fs write` trees and the working directory, owned by another user than the workload's; without `--log` it goes to stderr"
        )
    )]
    WritableLog { path: PathBuf, why: String },

    /// Exits 127, as a shell does for a command it cannot find.
    #[error("`{0}` is not found in the workload's PATH")]
    #[diagnostic(
        code(supervisor::not_found),
        help("the workload's PATH is /usr/local/bin:/usr/bin:/bin; give the program's full path")
    )]
    NotFound(String),

    #[error("cannot set up the L7 proxy")]
    #[diagnostic(code(supervisor::proxy))]
    Proxy(#[source] crate::l7::SetupError),

    #[error("cannot start the sandbox")]
    #[diagnostic(code(supervisor::spawn))]
    Spawn(#[source] enforcer::SpawnError),

    #[error("the channel to the sandbox")]
    #[diagnostic(code(supervisor::channel))]
    Channel(#[source] sandbox_protocol::channel::ChannelError),

    #[error("cannot {what}")]
    #[diagnostic(code(supervisor::io))]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl LaunchError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

impl From<sandbox::plan::PlanError> for LaunchError {
    fn from(e: sandbox::plan::PlanError) -> Self {
        match e {
            sandbox::plan::PlanError::WorkdirIsRoot => Self::Usage(e.to_string()),
            sandbox::plan::PlanError::Unenforceable(why) => Self::Unenforceable(why),
            other => Self::Unenforceable(other.to_string()),
        }
    }
}
