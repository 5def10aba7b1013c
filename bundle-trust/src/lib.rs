//! The signed envelope in which the gateway delivers a bundle, and its
//! verification.
//!
//! A supervisor trusts a bundle because of a signature and a digest, never
//! because of the channel it came by. The gateway signs, with Ed25519, the
//! canonical JSON of the claims `{digest, issued_at, policy, revision,
//! sandbox}` (keys sorted, no spaces); the envelope carries the claims, the
//! signing key's id, the signature and the bundle's exact bytes. The
//! supervisor checks, in order: the key id is one it trusts, the signature
//! holds, the claims name its own sandbox, the bundle's bytes verify (format
//! version, digest of the content) and their digest is the one signed, and
//! the revision is not older than the one it runs.
//!
//! A signature says who issued an envelope, not when: an old envelope,
//! captured and replayed, verifies forever. So the claims may also carry a
//! `nonce`, the random string the supervisor sent with its request: an
//! envelope that signs the supervisor's own nonce was issued for that
//! request, and one without it can only be judged by its `issued_at`
//! ([`Verified::check_fresh`]). The nonce is left out of the canonical JSON
//! when there is none, so envelopes signed before it existed verify as they
//! always did.
//!
//! Several keys may be trusted at once (a trust file lists them), so a
//! gateway can start signing with a new key while supervisors still accept
//! the old one: rotation without restarting anything.
//!
//! This crate holds no runtime and no database: the supervisor links it
//! next to its own network code, the gateway next to its store.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, Verifier as _};
use policy_bundle::{Bundle, BundleError};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// What the signature covers, besides an optional nonce (see
/// [`Envelope::nonce`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The bundle's digest, `sha256:<hex>`.
    pub digest: String,
    /// Seconds since the Unix epoch when the gateway signed.
    pub issued_at: i64,
    /// The policy's name in the gateway.
    pub policy: String,
    /// The policy's revision number (1, 2, ...; a rollback is a new one).
    pub revision: i64,
    /// The sandbox the envelope is for.
    pub sandbox: String,
}

impl Claims {
    /// The bytes that are signed without a nonce: compact JSON with sorted
    /// keys.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn canonical(&self) -> Vec<u8> {
        self.canonical_with(None)
    }

    /// The bytes that are signed with `nonce` among the claims (sorted
    /// between `issued_at` and `policy`); without one, exactly the bytes
    /// envelopes were signed over before nonces existed.
    #[must_use]
    pub(crate) fn canonical_with(&self, nonce: Option<&str>) -> Vec<u8> {
        serde_json::to_vec(&WireClaims::of(self, nonce.map(str::to_owned))).unwrap_or_default()
    }
}

/// The longest nonce accepted, in characters.
pub const MAX_NONCE_LEN: usize = 128;
/// The shortest: a nonce must be hard to guess, so that an attacker cannot
/// have obtained, in advance, an envelope signing the one a supervisor
/// will send.
pub const MIN_NONCE_LEN: usize = 16;

/// Whether `nonce` may be signed: [`MIN_NONCE_LEN`] to [`MAX_NONCE_LEN`]
/// characters of `A-Z a-z 0-9 - _`, so it travels in a query string and a
/// JSON string without escaping.
#[must_use]
pub fn valid_nonce(nonce: &str) -> bool {
    (MIN_NONCE_LEN..=MAX_NONCE_LEN).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A bundle as the gateway delivers it.
///
/// On the wire the nonce is one of the claims (`claims.nonce`); here it
/// stands beside them so that [`Claims`] keeps the fields every envelope
/// has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireEnvelope", into = "WireEnvelope")]
pub struct Envelope {
    /// Signed, but not yet verified: trust them only through
    /// [`TrustedKeys::verify`].
    pub claims: Claims,
    /// The nonce of the request this envelope answers, when it sent one;
    /// signed with the claims.
    pub nonce: Option<String>,
    /// Which key signed: the first 16 hex digits of the SHA-256 of its
    /// public key, as the trust file lists it.
    pub key_id: String,
    /// The Ed25519 signature, base64, of the claims' canonical JSON (keys
    /// sorted, no spaces) with the nonce among them when there is one.
    pub signature: String,
    /// The bundle's bytes exactly as `openshell-policy compile` writes them.
    pub bundle: String,
}

/// The claims as they are serialized and signed; the fields are declared
/// in sorted order, so their serialization is the canonical JSON.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireClaims {
    digest: String,
    issued_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nonce: Option<String>,
    policy: String,
    revision: i64,
    sandbox: String,
}

impl WireClaims {
    fn of(c: &Claims, nonce: Option<String>) -> Self {
        Self {
            digest: c.digest.clone(),
            issued_at: c.issued_at,
            nonce,
            policy: c.policy.clone(),
            revision: c.revision,
            sandbox: c.sandbox.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEnvelope {
    claims: WireClaims,
    key_id: String,
    signature: String,
    bundle: String,
}

impl TryFrom<WireEnvelope> for Envelope {
    type Error = String;

    fn try_from(w: WireEnvelope) -> Result<Self, String> {
        if let Some(n) = &w.claims.nonce
            && !valid_nonce(n)
        {
            return Err(format!(
                "the nonce is not {MIN_NONCE_LEN} to {MAX_NONCE_LEN} characters of A-Z a-z 0-9 - _"
            ));
        }
        let c = w.claims;
        Ok(Self {
            claims: Claims {
                digest: c.digest,
                issued_at: c.issued_at,
                policy: c.policy,
                revision: c.revision,
                sandbox: c.sandbox,
            },
            nonce: c.nonce,
            key_id: w.key_id,
            signature: w.signature,
            bundle: w.bundle,
        })
    }
}

impl From<Envelope> for WireEnvelope {
    fn from(e: Envelope) -> Self {
        Self {
            claims: WireClaims::of(&e.claims, e.nonce),
            key_id: e.key_id,
            signature: e.signature,
            bundle: e.bundle,
        }
    }
}

/// Why an envelope, a trust file or a key file was refused. Every refusal
/// of an envelope leaves the bundle in force as it was.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum TrustError {
    /// Not an envelope's JSON, or a nonce of the wrong shape; the parser's
    /// message.
    #[error("the envelope is not valid: {0}")]
    Malformed(String),
    /// The key id the envelope names is not in the trust file.
    #[error("the bundle is signed with key `{0}`, which is not trusted")]
    UnknownKey(String),
    /// A trusted key id, but the signature is not that key's over these
    /// claims; the id of the key tried.
    #[error(
        "the signature does not verify with key `{0}`: the envelope was modified or signed by another key"
    )]
    BadSignature(String),
    /// Validly signed for another sandbox: never applied here.
    #[error("the bundle is for sandbox `{found}`, not `{expected}`")]
    WrongSandbox {
        /// The verifier's own sandbox.
        expected: String,
        /// The one the claims name.
        found: String,
    },
    /// The bundle's bytes are not a bundle this build accepts (format
    /// version, content digest); the bundle crate's message.
    #[error("the bundle does not verify: {0}")]
    Bundle(String),
    /// The bundle verifies on its own, but is not the one signed.
    #[error("the signed digest is {signed}, but the bundle's is {actual}")]
    DigestMismatch {
        /// From the claims.
        signed: String,
        /// Computed from the bundle's bytes.
        actual: String,
    },
    /// A rollback attack, or a stale replica; a rollback on purpose is
    /// issued as a new revision.
    #[error("revision {offered} of `{policy}` is older than revision {applied}, which is in force")]
    OlderRevision {
        /// The policy's name, from the claims.
        policy: String,
        /// The envelope's revision.
        offered: i64,
        /// The revision in force.
        applied: i64,
    },
    /// A line of the trust file that is not a valid key entry, or a file
    /// with no key at all.
    #[error("the trust file is not valid: line {line}: {why}")]
    TrustFile {
        /// 1-based; 0 when the file as a whole is at fault.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// The secret key file is not what [`SigningKey::to_file`] writes.
    #[error("the signing key file is not valid: {0}")]
    KeyFile(String),
    /// See [`Verified::check_fresh`].
    #[error(
        "the envelope answers another request (its signed nonce is not the one sent): a replay"
    )]
    NonceMismatch,
    /// See [`Verified::check_fresh`]; both in seconds.
    #[error(
        "the envelope was issued {age} s ago, more than the {max_age} s accepted, and does not sign the nonce sent: a replay, or a gateway that does not know nonces"
    )]
    Stale {
        /// How long ago the envelope was issued.
        age: i64,
        /// The most accepted.
        max_age: i64,
    },
    /// See [`Verified::check_fresh`]; both in seconds.
    #[error(
        "the envelope was issued {ahead} s in the future (at most {skew} s of clock skew is accepted)"
    )]
    FromTheFuture {
        /// How far ahead of the verifier's clock `issued_at` is.
        ahead: i64,
        /// The most accepted.
        skew: i64,
    },
}

/// A key's id: the first 16 hex digits of the SHA-256 of its public key.
#[must_use]
pub(crate) fn key_id(public: &ed25519_dalek::VerifyingKey) -> String {
    let hash = Sha256::digest(public.as_bytes());
    hash.iter()
        .take(8)
        .fold(String::with_capacity(16), |mut s, b| {
            s.push_str(&format!("{b:02x}"));
            s
        })
}

/// The gateway's signing key.
pub struct SigningKey {
    id: String,
    key: ed25519_dalek::SigningKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).finish()
    }
}

impl SigningKey {
    /// A key from 32 secret random bytes.
    #[must_use]
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        Self {
            id: key_id(&key.verifying_key()),
            key,
        }
    }

    /// The id envelopes sealed with this key carry, and the trust file
    /// lists.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret key file: `ed25519-secret <key id> <base64 seed>`.
    #[must_use]
    pub fn to_file(&self) -> String {
        format!(
            "ed25519-secret {} {}\n",
            self.id,
            B64.encode(self.key.to_bytes())
        )
    }

    /// Reads what [`SigningKey::to_file`] wrote.
    pub fn from_file(text: &str) -> Result<Self, TrustError> {
        let mut words = text.split_whitespace();
        let (Some("ed25519-secret"), Some(id), Some(seed), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(TrustError::KeyFile(
                "expected `ed25519-secret <key id> <base64 seed>`".into(),
            ));
        };
        let bytes = B64
            .decode(seed)
            .map_err(|e| TrustError::KeyFile(format!("the seed is not base64: {e}")))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| TrustError::KeyFile("the seed is not 32 bytes".into()))?;
        let key = Self::from_seed(&seed);
        if key.id != id {
            return Err(TrustError::KeyFile(format!(
                "the file names key `{id}`, but its seed is key `{}`",
                key.id
            )));
        }
        Ok(key)
    }

    /// The trust-file line for this key's public half.
    #[must_use]
    pub fn trust_line(&self) -> String {
        format!(
            "{} ed25519:{}\n",
            self.id,
            B64.encode(self.key.verifying_key().as_bytes())
        )
    }

    /// Signs `claims` over `bundle` (its exact bytes).
    #[must_use]
    pub fn seal(&self, claims: Claims, bundle: String) -> Envelope {
        self.seal_with_nonce(claims, None, bundle)
    }

    /// Signs `claims` and the request's `nonce` (already checked with
    /// [`valid_nonce`]) over `bundle`.
    #[must_use]
    pub fn seal_with_nonce(
        &self,
        claims: Claims,
        nonce: Option<String>,
        bundle: String,
    ) -> Envelope {
        let signature = self.key.sign(&claims.canonical_with(nonce.as_deref()));
        Envelope {
            claims,
            nonce,
            key_id: self.id.clone(),
            signature: B64.encode(signature.to_bytes()),
            bundle,
        }
    }
}

/// The public keys a supervisor accepts, by id.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<(String, ed25519_dalek::VerifyingKey)>,
}

/// What a verified envelope holds.
#[derive(Debug, Clone)]
pub struct Verified {
    /// Checked: signed by a trusted key, for this sandbox, not older than
    /// the revision in force. Freshness is the caller's to check.
    pub claims: Claims,
    /// The signed nonce, if the envelope carries one.
    pub nonce: Option<String>,
    /// The trusted key that signed, for the log.
    pub key_id: String,
    /// Parsed, and its digest is the signed one.
    pub bundle: Bundle,
}

impl Verified {
    /// Whether the envelope is fresh: it signs `sent`, the nonce of the
    /// request it answers, or else it was issued at most `max_age` seconds
    /// before `now` and at most `skew` seconds after. A signed nonce other
    /// than the one sent is refused whatever its age: that envelope was
    /// issued for another request.
    pub fn check_fresh(
        &self,
        sent: Option<&str>,
        now: i64,
        max_age: i64,
        skew: i64,
    ) -> Result<(), TrustError> {
        match (sent, self.nonce.as_deref()) {
            (Some(s), Some(n)) if s == n => return Ok(()),
            (_, Some(_)) => return Err(TrustError::NonceMismatch),
            (_, None) => {}
        }
        let age = now.saturating_sub(self.claims.issued_at);
        if age < 0 {
            let ahead = age.saturating_neg();
            if ahead > skew {
                return Err(TrustError::FromTheFuture { ahead, skew });
            }
        } else if age > max_age {
            return Err(TrustError::Stale { age, max_age });
        }
        Ok(())
    }
}

impl TrustedKeys {
    /// Reads a trust file: one `<key id> ed25519:<base64 public key>` per
    /// line; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Self, TrustError> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| TrustError::TrustFile {
                line: n + 1,
                why: why.to_owned(),
            };
            let mut words = line.split_whitespace();
            let (Some(id), Some(key), None) = (words.next(), words.next(), words.next()) else {
                return Err(bad("expected `<key id> ed25519:<base64 public key>`"));
            };
            let b64 = key
                .strip_prefix("ed25519:")
                .ok_or_else(|| bad("the key is not `ed25519:<base64>`"))?;
            let bytes: [u8; 32] = B64
                .decode(b64)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("the key is not 32 bytes of base64"))?;
            let public = ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                .map_err(|_| bad("the key is not an Ed25519 public key"))?;
            if key_id(&public) != id {
                return Err(bad(&format!(
                    "the id `{id}` is not this key's (`{}`)",
                    key_id(&public)
                )));
            }
            keys.push((id.to_owned(), public));
        }
        if keys.is_empty() {
            return Err(TrustError::TrustFile {
                line: 0,
                why: "it lists no key".into(),
            });
        }
        Ok(Self { keys })
    }

    /// The ids of the trusted keys.
    #[cfg(test)]
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// Verifies `envelope` for `sandbox`, which runs revision `applied` of
    /// its policy (if any): key, signature, sandbox, bundle, digest, and
    /// that the revision is not older.
    pub fn verify(
        &self,
        envelope: &Envelope,
        sandbox: &str,
        applied: Option<i64>,
    ) -> Result<Verified, TrustError> {
        let public = self
            .keys
            .iter()
            .find(|(id, _)| *id == envelope.key_id)
            .map(|(_, k)| k)
            .ok_or_else(|| TrustError::UnknownKey(envelope.key_id.clone()))?;
        let sig: [u8; 64] = B64
            .decode(&envelope.signature)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| TrustError::BadSignature(envelope.key_id.clone()))?;
        public
            .verify(
                &envelope.claims.canonical_with(envelope.nonce.as_deref()),
                &Signature::from_bytes(&sig),
            )
            .map_err(|_| TrustError::BadSignature(envelope.key_id.clone()))?;
        let claims = &envelope.claims;
        if claims.sandbox != sandbox {
            return Err(TrustError::WrongSandbox {
                expected: sandbox.to_owned(),
                found: claims.sandbox.clone(),
            });
        }
        let bundle = Bundle::from_slice(envelope.bundle.as_bytes())
            .map_err(|e: BundleError| TrustError::Bundle(e.to_string()))?;
        if bundle.digest != claims.digest {
            return Err(TrustError::DigestMismatch {
                signed: claims.digest.clone(),
                actual: bundle.digest,
            });
        }
        if let Some(applied) = applied
            && claims.revision < applied
        {
            return Err(TrustError::OlderRevision {
                policy: claims.policy.clone(),
                offered: claims.revision,
                applied,
            });
        }
        Ok(Verified {
            claims: claims.clone(),
            nonce: envelope.nonce.clone(),
            key_id: envelope.key_id.clone(),
            bundle,
        })
    }
}

/// Parses an envelope from the gateway's response body.
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, TrustError> {
    serde_json::from_slice(bytes).map_err(|e| TrustError::Malformed(e.to_string()))
}

#[cfg(feature = "client")]
pub mod client;

#[cfg(test)]
mod tests;
