//! How the workload comes to trust the sandbox CA, and whom the proxy
//! trusts upstream.
//!
//! **Workload.** The CA certificate, appended to the system bundle (so TLS
//! the proxy does not see, such as `tls skip` or L4 routes, still
//! verifies), is written to `ca-bundle.pem` in a directory of its own that
//! the supervisor creates before the fork; the supervisor adds a read rule
//! for that directory to the Landlock ruleset it applies (outside the
//! bundle's rules), and the usual variables point at it:
//! [`WORKLOAD_VARS`]. Only the certificate is written: the CA key stays in
//! the supervisor's memory.
//!
//! **Upstream.** The proxy verifies real servers against the system roots
//! (`rustls-native-certs`: the same file and directory OpenSSL uses, which
//! on Debian is `/etc/ssl/certs`, including certificates an administrator
//! added with `update-ca-certificates`, and the `SSL_CERT_FILE` /
//! `SSL_CERT_DIR` overrides), plus `--upstream-ca FILE` for private CAs and
//! tests. `webpki-roots` would compile in a fixed Mozilla list instead and
//! ignore the machine's own trust decisions.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use super::setup::SetupError;

/// The variables that name the trust file, for the clients that read them:
/// OpenSSL (and Python's `ssl`), requests, Node, git, curl.
pub const WORKLOAD_VARS: [&str; 5] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
];

/// The workload's trust file, removed with the directory when dropped.
#[derive(Debug)]
pub struct TrustFile {
    dir: tempfile::TempDir,
    file: PathBuf,
}

impl TrustFile {
    /// Writes the system bundle followed by `ca_pem` in a directory of
    /// its own.
    pub fn write(ca_pem: &str) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("openshell-trust-")
            .tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let file = sandbox::trust::write(dir.path(), ca_pem)?;
        Ok(Self { dir, file })
    }

    /// The directory the workload is granted read access to.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    #[must_use]
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// The certificates of a PEM file given with `--upstream-ca`, read (and
/// refused when unusable) before the launch.
pub fn read_upstream_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let refuse = |why: String| SetupError::UpstreamCa {
        path: path.to_path_buf(),
        why,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| refuse(e.to_string()))?;
    if certs.is_empty() {
        return Err(refuse("no certificate in it".into()));
    }
    let mut check = RootCertStore::empty();
    for cert in &certs {
        check.add(cert.clone()).map_err(|e| refuse(e.to_string()))?;
    }
    Ok(certs)
}

/// The proxy's TLS client: system roots plus `extra`, HTTP/1.1. Loading
/// the system roots reads every file of `/etc/ssl/certs` (a few ms), so
/// it happens after the workload's `exec`, on the proxy's thread.
pub fn client_config(
    provider: Arc<CryptoProvider>,
    extra: &[CertificateDer<'static>],
) -> Result<Arc<ClientConfig>, SetupError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    for cert in extra {
        roots.add(cert.clone()).map_err(SetupError::Webpki)?;
    }
    if roots.is_empty() {
        return Err(SetupError::NoRoots);
    }
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(SetupError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
