//! The sandbox's certificate authority and the leaf certificates the
//! proxy presents.
//!
//! A fresh CA per sandbox (ECDSA P-256, made with rcgen when the supervisor
//! starts): its private key exists only in this process's memory, never on
//! disk and never in the workload. The workload trusts its certificate
//! through a file (see [`super::trust`]). Leaf certificates are minted on
//! demand for the name the client asked for (SNI), or for the destination
//! address when it sent none, all with one leaf key made at start, so a
//! new name costs one ECDSA signature. Minted leaves are kept in a bounded
//! cache, as ready-made rustls server configurations.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::setup::SetupError;

/// Leaf certificates kept at most.
pub const LEAF_CACHE: usize = 1024;
/// TLS sessions kept for resumption, shared by every leaf's configuration
/// (rustls checks the server name when a session is resumed).
const SESSIONS: usize = 1024;
/// A cached leaf is minted again after this long (it is valid for longer).
const LEAF_REFRESH: Duration = Duration::from_secs(7 * 24 * 3600);
const LEAF_DAYS: i64 = 30;
const CA_DAYS: i64 = 825;

/// What a leaf certificate names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LeafName {
    Dns(String),
    Ip(IpAddr),
}

impl fmt::Display for LeafName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dns(n) => f.write_str(n),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

#[derive(Default)]
struct Cache {
    by_name: HashMap<LeafName, (Arc<ServerConfig>, Instant)>,
    order: VecDeque<LeafName>,
}

/// The per-sandbox CA.
pub struct SandboxCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    leaf_key: KeyPair,
    leaf_signer: Arc<dyn rustls::sign::SigningKey>,
    provider: Arc<CryptoProvider>,
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
    cache: Mutex<Cache>,
}

impl fmt::Debug for SandboxCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxCa").finish_non_exhaustive()
    }
}

impl SandboxCa {
    /// A new CA and leaf key.
    pub fn new(provider: Arc<CryptoProvider>) -> Result<Self, SetupError> {
        let ca_key = KeyPair::generate().map_err(SetupError::Ca)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "openshell-policy");
        dn.push(
            DnType::CommonName,
            format!("openshell-supervisor sandbox CA {}", std::process::id()),
        );
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(random_serial());
        params.not_before = {
            let (y, mo, d) = day_offset(-1);
            rcgen::date_time_ymd(y, mo, d)
        };
        params.not_after = {
            let (y, mo, d) = day_offset(CA_DAYS);
            rcgen::date_time_ymd(y, mo, d)
        };
        let cert = params.self_signed(&ca_key).map_err(SetupError::Ca)?;
        let leaf_key = KeyPair::generate().map_err(SetupError::Ca)?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let leaf_signer = provider
            .key_provider
            .load_private_key(der)
            .map_err(SetupError::Tls)?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, ca_key),
            leaf_key,
            leaf_signer,
            provider,
            sessions: rustls::server::ServerSessionMemoryCache::new(SESSIONS),
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The CA certificate, PEM: what the workload trusts.
    #[must_use]
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server configuration presenting a leaf for `name`.
    pub fn server_config(&self, name: &LeafName) -> Result<Arc<ServerConfig>, SetupError> {
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((config, minted)) = cache.by_name.get(name)
                && minted.elapsed() < LEAF_REFRESH
            {
                return Ok(Arc::clone(config));
            }
        }
        let config = self.mint(name)?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache
            .by_name
            .insert(name.clone(), (Arc::clone(&config), Instant::now()))
            .is_none()
        {
            cache.order.push_back(name.clone());
            while cache.order.len() > LEAF_CACHE {
                if let Some(old) = cache.order.pop_front() {
                    cache.by_name.remove(&old);
                }
            }
        }
        Ok(config)
    }

    fn mint(&self, name: &LeafName) -> Result<Arc<ServerConfig>, SetupError> {
        let mut params = CertificateParams::default();
        let san = match name {
            LeafName::Dns(n) => SanType::DnsName(n.clone().try_into().map_err(SetupError::Ca)?),
            LeafName::Ip(ip) => SanType::IpAddress(*ip),
        };
        params.subject_alt_names = vec![san];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name.to_string());
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        params.not_before = {
            let (y, mo, d) = day_offset(-1);
            rcgen::date_time_ymd(y, mo, d)
        };
        params.not_after = {
            let (y, mo, d) = day_offset(LEAF_DAYS);
            rcgen::date_time_ymd(y, mo, d)
        };
        let leaf = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(SetupError::Ca)?;
        let key = Arc::new(CertifiedKey::new(
            vec![leaf.der().clone()],
            Arc::clone(&self.leaf_signer),
        ));
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .map_err(SetupError::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Fixed(key)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.session_storage = Arc::clone(&self.sessions);
        Ok(Arc::new(config))
    }
}

/// Always the same certificate: each configuration serves one name.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

fn random_serial() -> SerialNumber {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0_u8; 16];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    // Positive, non-zero.
    if let Some(first) = bytes.first_mut() {
        *first = (*first & 0x7f) | 0x01;
    }
    SerialNumber::from_slice(&bytes)
}

/// The date `days` from today (UTC), as (year, month, day).
fn day_offset(days: i64) -> (i32, u8, u8) {
    let today = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs() / 86_400).unwrap_or(0))
        .unwrap_or(0);
    civil_from_days(today + days)
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i32, u8, u8) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        i32::try_from(y).unwrap_or(2000),
        u8::try_from(m).unwrap_or(1),
        u8::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_computed_like_the_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn leaves_are_minted_once_per_name_and_the_cache_is_bounded() {
        let ca = SandboxCa::new(Arc::new(rustls::crypto::ring::default_provider())).unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let a = ca.server_config(&LeafName::Dns("a.test".into())).unwrap();
        let again = ca.server_config(&LeafName::Dns("a.test".into())).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        ca.server_config(&LeafName::Ip("127.0.0.1".parse().unwrap()))
            .unwrap();
        for i in 0..LEAF_CACHE + 5 {
            ca.server_config(&LeafName::Dns(format!("n{i}.test")))
                .unwrap();
        }
        let cache = ca.cache.lock().unwrap();
        assert_eq!(cache.by_name.len(), LEAF_CACHE);
        assert_eq!(cache.order.len(), LEAF_CACHE);
    }
}
