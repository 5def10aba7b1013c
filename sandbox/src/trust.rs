//! The file through which the workload trusts the proxy's CA: the system
//! bundle of the host it runs on, followed by the CA certificate, so that
//! TLS the proxy does not see (`tls skip`, L4 routes) still verifies.
//! Only the certificate is written; the CA key stays with the supervisor.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where distributions keep the system bundle, first found wins.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The trust file's name in its directory.
pub const FILE_NAME: &str = "ca-bundle.pem";

/// Writes `dir/ca-bundle.pem`, readable by everyone (the workload may run
/// as another user): this host's system bundle, then `ca_pem`. `dir`
/// must exist. The file's path.
pub fn write(dir: &Path, ca_pem: &str) -> io::Result<PathBuf> {
    let mut text = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# openshell: this sandbox's proxy CA\n");
    text.push_str(ca_pem);
    let file = dir.join(FILE_NAME);
    std::fs::write(&file, text)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    Ok(file)
}
