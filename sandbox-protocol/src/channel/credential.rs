//! One generation's keys: a CA made for the generation signs the
//! sandbox's server certificate and the supervisor's client certificate,
//! and its key is dropped before [`issue`] returns. Nothing can sign for
//! the generation afterwards, so a certificate that chains to its CA is of
//! this generation and no other, and a new generation (new CA) makes every
//! older credential useless.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

use super::{ChannelError, SERVER_NAME};
use crate::{Binding, MAX_SANDBOX_ID};

/// How long a generation's certificates are valid: longer than any
/// generation runs (a restart is a new generation, with new keys).
const VALID_DAYS: i64 = 400;

/// Which end of the channel a credential is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `openshell-sandbox`: the TLS server.
    Sandbox,
    /// `openshell-supervisor`: the TLS client.
    Supervisor,
}

/// One end's credential for one generation: the generation's CA (the only
/// root it trusts), its own certificate and key. Written as JSON, PEM
/// inside.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// The end this is for.
    pub role: Role,
    /// The sandbox's id.
    pub sandbox_id: String,
    /// Its generation.
    pub generation: u64,
    /// The generation's CA certificate, PEM.
    pub ca: String,
    /// This end's certificate, PEM.
    pub cert: String,
    /// This end's private key, PKCS#8 PEM.
    pub key: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("role", &self.role)
            .field("sandbox_id", &self.sandbox_id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// The parsed parts of a [`Credential`].
pub(super) struct Parts {
    pub ca: CertificateDer<'static>,
    pub cert: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
}

impl Credential {
    /// The binding the credential is for.
    #[must_use]
    pub fn binding(&self) -> Binding {
        Binding {
            sandbox_id: self.sandbox_id.clone(),
            generation: self.generation,
        }
    }

    /// Reads a credential written by [`Credential::to_json`], for `role`.
    pub fn from_json(bytes: &[u8], role: Role) -> Result<Self, ChannelError> {
        let c: Self = serde_json::from_slice(bytes)
            .map_err(|e| ChannelError::Credential(format!("not a channel credential: {e}")))?;
        if c.role != role {
            return Err(ChannelError::Credential(format!(
                "a credential for the {:?} end, not the {role:?} end",
                c.role
            )));
        }
        c.parts()?;
        Ok(c)
    }

    /// The credential as JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ChannelError> {
        serde_json::to_vec_pretty(self).map_err(|e| ChannelError::Credential(e.to_string()))
    }

    pub(super) fn parts(&self) -> Result<Parts, ChannelError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            ChannelError::Credential(format!("its {what} is not readable PEM: {e}"))
        };
        Ok(Parts {
            ca: CertificateDer::from_pem_slice(self.ca.as_bytes()).map_err(|e| bad("CA", &e))?,
            cert: CertificateDer::from_pem_slice(self.cert.as_bytes())
                .map_err(|e| bad("certificate", &e))?,
            key: PrivateKeyDer::from_pem_slice(self.key.as_bytes()).map_err(|e| bad("key", &e))?,
        })
    }
}

/// A new generation's credentials for `binding`: the sandbox's and the
/// supervisor's, signed by a CA whose key is gone when this returns.
pub fn issue(binding: &Binding) -> Result<(Credential, Credential), ChannelError> {
    if binding.sandbox_id.is_empty() || binding.sandbox_id.len() > MAX_SANDBOX_ID {
        return Err(ChannelError::Credential(format!(
            "a sandbox id has 1 to {MAX_SANDBOX_ID} bytes"
        )));
    }
    let named = format!(
        "sandbox {} generation {}",
        binding.sandbox_id, binding.generation
    );
    let ca_key = KeyPair::generate()?;
    let mut ca = params(&format!("openshell channel CA of {named}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let end = |role: Role| -> Result<Credential, ChannelError> {
        let key = KeyPair::generate()?;
        let mut p = params(&match role {
            Role::Sandbox => named.clone(),
            Role::Supervisor => format!("supervisor of {named}"),
        });
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.use_authority_key_identifier_extension = true;
        match role {
            Role::Sandbox => {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                p.subject_alt_names = vec![SanType::DnsName(SERVER_NAME.try_into()?)];
            }
            Role::Supervisor => {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
        }
        let cert = p.signed_by(&key, &issuer)?;
        Ok(Credential {
            role,
            sandbox_id: binding.sandbox_id.clone(),
            generation: binding.generation,
            ca: ca_cert.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    };
    let pair = (end(Role::Sandbox)?, end(Role::Supervisor)?);
    // The CA's key goes with the issuer: nothing signs for this
    // generation again.
    drop(issuer);
    Ok(pair)
}

/// A certificate's parameters: `name`, valid from a day ago for
/// [`VALID_DAYS`]. rcgen derives the serial from the certificate's fresh
/// public key.
fn params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "openshell-policy");
    dn.push(DnType::CommonName, name);
    p.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(VALID_DAYS);
    p
}
