//! The gateway's directory: its TLS CA and server certificate, its
//! bundle-signing keys and the admin token. Secrets are written mode 0600.
//!
//! ```text
//! D/ca.pem          the CA clients and supervisors trust (--ca, --gateway-ca)
//! D/ca.key          its key (only `init` uses it)
//! D/server.pem      the server certificate (localhost, 127.0.0.1, ::1, --host)
//! D/server.key
//! D/signing/ID.key  Ed25519 signing keys, one per key id
//! D/signing/active  the id of the key that signs now
//! D/trust.keys      every signing key's public half: the supervisors' --trust-key
//! D/admin.token     the first admin token
//! ```
//!
//! A replica's directory (`replica`) has all of these but `ca.key` and the
//! signing keys that are not active: what `serve` reads, nothing it
//! could mint certificates with.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bundle_trust::SigningKey;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What is wrong with a gateway directory, or why one could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// Reading or writing a file failed.
    #[error("cannot {what} `{path}`: {source}")]
    Io {
        /// The verb, for the message: `read`, `write`, `create`.
        what: &'static str,
        /// The file or directory.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `init` on a directory that already holds a gateway: its key would be
    /// lost.
    #[error("`{0}` is already a gateway directory; `init` does not overwrite it")]
    Exists(String),
    /// The TLS certificate could not be generated or read.
    #[error("certificate: {0}")]
    Cert(String),
    /// A file is there but does not parse.
    #[error("`{path}`: {why}")]
    Invalid {
        /// The file.
        path: String,
        /// What does not parse.
        why: String,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DirError {
    let path = path.display().to_string();
    move |source| DirError::Io { what, path, source }
}

/// Writes a file only its owner can read.
pub(crate) fn write_secret(path: &Path, bytes: &[u8]) -> Result<(), DirError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io("create", path))?;
    f.write_all(bytes).map_err(io("write", path))
}

fn write_public(path: &Path, bytes: &[u8]) -> Result<(), DirError> {
    std::fs::write(path, bytes).map_err(io("write", path))
}

pub(crate) fn read_text(path: &Path) -> Result<String, DirError> {
    std::fs::read_to_string(path).map_err(io("read", path))
}

/// 32 random bytes from the operating system.
#[must_use]
pub(crate) fn random32() -> [u8; 32] {
    rand::random()
}

/// A new bearer token: 32 random bytes, URL-safe base64, `osg_` first.
#[must_use]
pub fn new_token() -> String {
    use base64::Engine as _;
    format!(
        "osg_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random32())
    )
}

fn cert_err(e: rcgen::Error) -> DirError {
    DirError::Cert(e.to_string())
}

/// Creates a gateway directory: CA, server certificate for `hosts` (plus
/// localhost and the loopback addresses), a signing key, an admin token.
pub fn init(dir: &Path, hosts: &[String]) -> Result<(), DirError> {
    if dir.join("ca.pem").exists() {
        return Err(DirError::Exists(dir.display().to_string()));
    }
    std::fs::create_dir_all(dir.join("signing")).map_err(io("create", dir))?;
    let ca_key = KeyPair::generate().map_err(cert_err)?;
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "openshell-policy");
    dn.push(DnType::CommonName, "openshell-gateway CA");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = rcgen::date_time_ymd(2024, 1, 1);
    ca.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let ca_cert = ca.self_signed(&ca_key).map_err(cert_err)?;
    let ca_key_pem = ca_key.serialize_pem();
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
    names.extend(hosts.iter().cloned());
    let server_key = KeyPair::generate().map_err(cert_err)?;
    let mut server = CertificateParams::new(names).map_err(cert_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "openshell-gateway");
    server.distinguished_name = dn;
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.not_before = rcgen::date_time_ymd(2024, 1, 1);
    server.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let issuer = Issuer::new(ca, ca_key);
    let server_cert = server.signed_by(&server_key, &issuer).map_err(cert_err)?;
    write_public(&dir.join("ca.pem"), ca_cert.pem().as_bytes())?;
    write_secret(&dir.join("ca.key"), ca_key_pem.as_bytes())?;
    write_public(&dir.join("server.pem"), server_cert.pem().as_bytes())?;
    write_secret(
        &dir.join("server.key"),
        server_key.serialize_pem().as_bytes(),
    )?;
    rotate_key(dir)?;
    write_secret(
        &dir.join("admin.token"),
        format!("{}\n", new_token()).as_bytes(),
    )?;
    Ok(())
}

/// Adds a new signing key, makes it the active one and appends its public
/// half to `trust.keys` (the old keys stay trusted until removed there).
/// Returns the new key's id.
pub fn rotate_key(dir: &Path) -> Result<String, DirError> {
    let key = SigningKey::from_seed(&random32());
    let signing = dir.join("signing");
    std::fs::create_dir_all(&signing).map_err(io("create", &signing))?;
    write_secret(
        &signing.join(format!("{}.key", key.id())),
        key.to_file().as_bytes(),
    )?;
    let trust = dir.join("trust.keys");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&trust)
        .map_err(io("open", &trust))?;
    f.write_all(key.trust_line().as_bytes())
        .map_err(io("write", &trust))?;
    let active = signing.join("active");
    let tmp = signing.join("active.new");
    std::fs::write(&tmp, format!("{}\n", key.id())).map_err(io("write", &tmp))?;
    std::fs::rename(&tmp, &active).map_err(io("replace", &active))?;
    Ok(key.id().to_owned())
}

/// The active signing key.
pub(crate) fn signing_key(dir: &Path) -> Result<SigningKey, DirError> {
    let active = dir.join("signing").join("active");
    let id = read_text(&active)?;
    let path = dir.join("signing").join(format!("{}.key", id.trim()));
    SigningKey::from_file(&read_text(&path)?).map_err(|e| DirError::Invalid {
        path: path.display().to_string(),
        why: e.to_string(),
    })
}

/// What a replica's directory holds, relative to it: every file `serve`
/// reads (the TLS pair, the active signing key, the admin token it
/// registers) and the two public files clients are given. `ca.key` is
/// left out on purpose: only `init` uses it, and a replica that holds it
/// could issue certificates any client of the gateway would trust.
const REPLICA_PUBLIC: &[&str] = &["ca.pem", "server.pem", "trust.keys"];
const REPLICA_SECRET: &[&str] = &["server.key", "admin.token"];

/// Writes in `out` (which must not be a gateway directory yet) what
/// another `serve` of the same database needs from `dir`. Returns the
/// files written.
pub(crate) fn replica(dir: &Path, out: &Path) -> Result<Vec<String>, DirError> {
    use std::os::unix::fs::DirBuilderExt as _;
    if out.join("ca.pem").exists() || out.join("signing").exists() {
        return Err(DirError::Exists(out.display().to_string()));
    }
    // Read everything first, so that a broken source leaves nothing behind.
    let active = read_text(&dir.join("signing").join("active"))?;
    let id = active.trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(DirError::Invalid {
            path: dir.join("signing").join("active").display().to_string(),
            why: format!("`{id}` is not a key id"),
        });
    }
    let key_name = format!("signing/{id}.key");
    let key_text = read_text(&dir.join(&key_name))?;
    SigningKey::from_file(&key_text).map_err(|e| DirError::Invalid {
        path: dir.join(&key_name).display().to_string(),
        why: e.to_string(),
    })?;
    let mut public = Vec::new();
    for name in REPLICA_PUBLIC {
        public.push((*name, read_text(&dir.join(name))?));
    }
    let mut secret = Vec::new();
    for name in REPLICA_SECRET {
        secret.push((*name, read_text(&dir.join(name))?));
    }
    let signing = out.join("signing");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&signing)
        .map_err(io("create", &signing))?;
    let mut written = Vec::new();
    for (name, text) in public {
        write_public(&out.join(name), text.as_bytes())?;
        written.push(name.to_owned());
    }
    for (name, text) in secret {
        write_secret(&out.join(name), text.as_bytes())?;
        written.push(name.to_owned());
    }
    write_secret(&out.join(&key_name), key_text.as_bytes())?;
    written.push(key_name);
    write_public(&signing.join("active"), format!("{id}\n").as_bytes())?;
    written.push("signing/active".into());
    Ok(written)
}

/// The admin token file's path.
#[must_use]
pub(crate) fn admin_token_path(dir: &Path) -> PathBuf {
    dir.join("admin.token")
}

/// The TLS server configuration (ring only, HTTP/1.1).
pub(crate) fn server_tls(dir: &Path) -> Result<Arc<rustls::ServerConfig>, DirError> {
    let cert_path = dir.join("server.pem");
    let key_path = dir.join("server.key");
    let invalid = |path: &Path, why: String| DirError::Invalid {
        path: path.display().to_string(),
        why,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| invalid(&cert_path, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(&cert_path, e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(|e| invalid(&key_path, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&cert_path, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| invalid(&key_path, e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
