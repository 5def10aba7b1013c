//! Time and token hashes as the store keeps them: leaf helpers every
//! module may use.

use sha2::{Digest as _, Sha256};

use crate::audit::hex;

/// Seconds since the Unix epoch.
#[must_use]
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// SHA-256 hex of a token: what the tokens table holds.
#[must_use]
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.trim().as_bytes()))
}
