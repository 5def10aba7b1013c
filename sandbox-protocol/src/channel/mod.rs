//! The channel between two hosts: TLS 1.3 only, over TCP or a Unix socket
//! in a directory both ends see ([`Endpoint`]), both ends authenticated by
//! their generation's CA ([`credential`]). The sandbox is
//! the TLS server and the supervisor the client; on top, the sandbox is
//! the gRPC client as on a local socket pair ([`crate::transport`]).
//!
//! The sandbox trusts no root but its generation's CA and accepts only a
//! client certificate that CA signed for client use; the supervisor trusts
//! only that CA, for a server certificate naming [`SERVER_NAME`]. TLS 1.3
//! makes each end prove it holds its key (a copied certificate alone is
//! refused), and the protocol's binding then checks every message's
//! sandbox id and generation on top.

mod credential;
mod endpoint;
mod kit;
mod stream;
#[cfg(test)]
mod tests;

pub use credential::{Credential, Role, issue};
pub use endpoint::{Endpoint, EndpointError, MAX_UNIX_PATH};
pub use kit::{KIT_BOOTSTRAP_VERSION, Kit, kit};
pub use stream::{Listener, Peer, Stream};

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The name the sandbox's certificate carries and the supervisor asks
/// for: the sandbox's address varies (a Pod's IP), its CA does not.
pub const SERVER_NAME: &str = "sandbox.openshell.invalid";

/// The one ALPN protocol both ends offer: a peer speaking anything else
/// is refused in the handshake.
pub const ALPN: &[u8] = b"openshell-sandbox/1";

/// How long a peer has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The sandbox's end of one attachment.
pub type SandboxStream = tokio_rustls::server::TlsStream<Stream>;
/// The supervisor's end of one attachment.
pub type SupervisorStream = tokio_rustls::client::TlsStream<Stream>;

/// Why a credential cannot be used, or a peer was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The credential is malformed or for the other end.
    #[error("the channel credential cannot be used: {0}")]
    Credential(String),
    /// Keys or certificates could not be made.
    #[error("cannot make the generation's keys: {0}")]
    Keys(#[from] rcgen::Error),
    /// TLS refused the configuration.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The peer was refused, or the TLS connection failed.
    #[error("{0}")]
    Refused(String),
    /// Nothing answered at the address (yet).
    #[error("{0}")]
    Unreachable(String),
    /// The sandbox's bootstrap could not be written.
    #[error("cannot write the sandbox's bootstrap: {0}")]
    Bootstrap(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca: rustls::pki_types::CertificateDer<'static>) -> Result<RootCertStore, ChannelError> {
    let mut roots = RootCertStore::empty();
    roots.add(ca)?;
    Ok(roots)
}

/// The sandbox's end: accepts a supervisor of its generation.
#[derive(Clone)]
pub struct SandboxEnd {
    acceptor: TlsAcceptor,
    timeout: Duration,
}

impl std::fmt::Debug for SandboxEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxEnd").finish_non_exhaustive()
    }
}

impl SandboxEnd {
    /// The end `cred` (a sandbox's credential) serves.
    pub fn new(cred: &Credential) -> Result<Self, ChannelError> {
        if cred.role != Role::Sandbox {
            return Err(ChannelError::Credential(
                "a supervisor's credential cannot serve the sandbox's end".into(),
            ));
        }
        let parts = cred.parts()?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots(parts.ca)?), provider())
                .build()
                .map_err(|e| ChannelError::Credential(e.to_string()))?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![parts.cert], parts.key)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        // No resumption: each attachment proves its key afresh.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            timeout: HANDSHAKE_TIMEOUT,
        })
    }

    /// Gives a peer `limit` to complete the handshake, not
    /// [`HANDSHAKE_TIMEOUT`].
    #[must_use]
    pub fn handshake_within(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// Completes the handshake of the connection `io`: the stream of a
    /// supervisor of this generation, or why the peer was refused.
    pub async fn handshake(&self, io: impl Into<Stream>) -> Result<SandboxStream, ChannelError> {
        match tokio::time::timeout(self.timeout, self.acceptor.accept(io.into())).await {
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => Err(ChannelError::Refused(why(&e))),
            Err(_) => Err(ChannelError::Refused(format!(
                "the peer did not complete the TLS handshake within {:?}",
                self.timeout
            ))),
        }
    }
}

/// The supervisor's end: attaches to the sandbox of its generation.
#[derive(Clone)]
pub struct SupervisorEnd {
    connector: TlsConnector,
}

impl std::fmt::Debug for SupervisorEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorEnd").finish_non_exhaustive()
    }
}

impl SupervisorEnd {
    /// The end `cred` (a supervisor's credential) connects as.
    pub fn new(cred: &Credential) -> Result<Self, ChannelError> {
        if cred.role != Role::Supervisor {
            return Err(ChannelError::Credential(
                "a sandbox's credential cannot attach as the supervisor".into(),
            ));
        }
        let parts = cred.parts()?;
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots(parts.ca)?)
            .with_client_auth_cert(vec![parts.cert], parts.key)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        config.resumption = rustls::client::Resumption::disabled();
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Connects to the sandbox at `to` and completes the handshake within
    /// [`HANDSHAKE_TIMEOUT`].
    pub async fn connect(&self, to: impl Into<Endpoint>) -> Result<SupervisorStream, ChannelError> {
        let addr = to.into();
        let io = Stream::connect(&addr).await.map_err(|e| {
            ChannelError::Unreachable(format!("cannot reach the sandbox at {addr}: {e}"))
        })?;
        let name = ServerName::try_from(SERVER_NAME)
            .map_err(|e| ChannelError::Credential(e.to_string()))?;
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connector.connect(name, io)).await {
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => Err(ChannelError::Refused(format!(
                "cannot attach to the sandbox at {addr}: {}",
                why(&e)
            ))),
            Err(_) => Err(ChannelError::Refused(format!(
                "the sandbox at {addr} did not complete the TLS handshake within {HANDSHAKE_TIMEOUT:?}"
            ))),
        }
    }
}

/// What a failed handshake means, in words a log reader can act on.
fn why(e: &io::Error) -> String {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return format!("the connection failed: {e}");
    };
    use rustls::{CertificateError, Error};
    match tls {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the peer's certificate is not of this sandbox's generation (another CA signed it)"
                .into()
        }
        Error::InvalidCertificate(CertificateError::BadSignature) => {
            "a bad signature: the peer does not hold the key of the certificate it presented, or the certificate is forged".into()
        }
        Error::InvalidCertificate(c) => format!("the peer's certificate is refused: {c:?}"),
        Error::NoCertificatesPresented => "the peer presented no certificate".into(),
        Error::InvalidMessage(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. } => {
            format!("the peer does not speak TLS 1.3 ({tls})")
        }
        Error::NoApplicationProtocol => {
            "the peer does not speak the sandbox protocol (ALPN)".into()
        }
        Error::AlertReceived(alert) => format!("the peer refused the handshake ({alert:?})"),
        Error::PeerIncompatible(p) => format!("the peer's TLS is incompatible: {p:?}"),
        other => format!("the TLS handshake failed: {other}"),
    }
}
