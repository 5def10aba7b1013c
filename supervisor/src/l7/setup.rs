//! Why the proxy could not be set up: a module of its own, so that the
//! parts that can fail (the CA, the trust file) depend on it and not on
//! the proxy that uses them.

use std::path::PathBuf;

/// Why the proxy could not be set up. The command never runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("cannot make the sandbox's certificate authority: {0}")]
    Ca(#[source] rcgen::Error),
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] rustls::Error),
    #[error("cannot use a root certificate: {0}")]
    Webpki(#[source] rustls::Error),
    #[error("cannot use `{}` as an upstream CA: {why}", .path.display())]
    UpstreamCa { path: PathBuf, why: String },
    #[error(
        "no trusted root certificate found on this machine (install `ca-certificates`, or pass `--upstream-ca`)"
    )]
    NoRoots,
    #[error("cannot start the proxy's thread: {0}")]
    Runtime(#[source] std::io::Error),
}
