//! Credentials: the real secrets the supervisor holds, the placeholders the
//! workload sees instead, and how the proxy swaps one for the other.
//!
//! - At start (and at each reload) the supervisor reads each credential's
//!   secret from **its own** environment or from a file
//!   (`CredentialBinding.source`). The workload's environment is built
//!   separately and never inherits it (`--env` refuses to pass a secret).
//! - For a credential with `placeholder env VAR`, the workload's `VAR`
//!   holds a token-shaped random placeholder,
//!   `openshell-placeholder-<name>-<32 hex>`. It is worthless outside the
//!   sandbox: only this supervisor knows what it stands for.
//! - On a request whose host, method and path lie inside the binding
//!   (`Evaluator::credential_for`), `inject replace` swaps the placeholder
//!   for the secret wherever it appears in header values; `inject header
//!   NAME "template"` sets that header from the template (and swaps the
//!   placeholder elsewhere in the headers too), and only when the hop to
//!   the server is TLS. Anywhere else, a request carrying a placeholder is
//!   refused (`credential_not_bound`).
//! - Placeholders are stable for the life of the sandbox: a reload keeps a
//!   credential's placeholder (the workload's environment cannot change),
//!   and the placeholder of a credential a reload removed stays known, so
//!   it is refused rather than forwarded.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{LazyLock, Mutex, PoisonError};

use policy_bundle::Bundle;
use policy_bundle::{Injection, SecretSource};

/// Every placeholder starts with this, so one substring search per header
/// value finds them all.
pub const PLACEHOLDER_PREFIX: &str = policy_bundle::PLACEHOLDER_PREFIX;

/// The prefix search, built once (every header of every request runs it).
static PREFIX: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(PLACEHOLDER_PREFIX.as_bytes()));

/// A real secret. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The placeholders handed out, by credential name, for the life of the
/// sandbox.
#[derive(Debug, Default)]
pub struct Placeholders {
    by_name: Mutex<BTreeMap<String, String>>,
}

impl Placeholders {
    /// The placeholder of credential `name`, made on first use.
    pub fn get_or_make(&self, name: &str) -> String {
        let mut map = self.by_name.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(name.to_owned())
            .or_insert_with(|| format!("{PLACEHOLDER_PREFIX}{name}-{}", random_hex()))
            .clone()
    }

    /// Every placeholder ever handed out, with its credential's name.
    #[must_use]
    pub fn all(&self) -> Vec<(String, String)> {
        let map = self.by_name.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter().map(|(n, p)| (p.clone(), n.clone())).collect()
    }
}

fn random_hex() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0_u8; 16];
    // SystemRandom is getrandom(2); it does not fail on Linux >= 3.17. A
    // failure would leave zeros: still refused everywhere it is unbound.
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// One credential as the proxy uses it.
#[derive(Debug, Clone)]
pub struct Credential {
    pub name: String,
    /// The secret, or why it could not be read.
    pub secret: Result<Secret, String>,
    pub placeholder: Option<String>,
    pub inject: Injection,
}

/// The credentials of one bundle, and every placeholder ever handed out.
#[derive(Debug, Default)]
pub struct CredentialSet {
    creds: Vec<Credential>,
    /// (placeholder, credential name), longest first.
    known: Vec<(String, String)>,
}

impl CredentialSet {
    /// Reads the secrets `bundle` names. A secret that cannot be read is
    /// recorded as unavailable: requests that would carry it are refused.
    #[must_use]
    pub fn load(bundle: &Bundle, placeholders: &Placeholders) -> Self {
        let creds = bundle
            .enforcement
            .credentials
            .iter()
            .map(|c| Credential {
                name: c.name.clone(),
                secret: read_secret(&c.source),
                placeholder: c
                    .placeholder
                    .as_ref()
                    .map(|_| placeholders.get_or_make(&c.name)),
                inject: c.inject.clone(),
            })
            .collect();
        let mut known = placeholders.all();
        known.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Self { creds, known }
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Credential> {
        self.creds.iter().find(|c| c.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Credential> {
        self.creds.iter()
    }

    /// The names of the credentials whose placeholder occurs in `text`.
    #[must_use]
    pub fn placeholders_in(&self, text: &[u8]) -> Vec<&str> {
        let mut found: Vec<&str> = Vec::new();
        for at in PREFIX.find_iter(text) {
            let rest = text.get(at..).unwrap_or_default();
            if let Some((_, name)) = self
                .known
                .iter()
                .find(|(p, _)| rest.starts_with(p.as_bytes()))
                && !found.contains(&name.as_str())
            {
                found.push(name);
            }
        }
        found
    }

    /// Whether `text` holds any placeholder-shaped token at all (known or
    /// not): a cheap pre-check.
    #[must_use]
    pub fn may_hold_placeholder(text: &[u8]) -> bool {
        PREFIX.find(text).is_some()
    }
}

fn read_secret(source: &SecretSource) -> Result<Secret, String> {
    let value = match source {
        SecretSource::Env(var) => std::env::var(var)
            .map_err(|_| format!("the supervisor's environment has no `{var}`"))?,
        SecretSource::File(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
            text.trim_end_matches(['\n', '\r']).to_owned()
        }
    };
    if value.is_empty() {
        return Err("the secret is empty".into());
    }
    if value.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("the secret contains control characters and cannot go in a header".into());
    }
    Ok(Secret(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_stable_token_shaped_and_found_in_text() {
        let p = Placeholders::default();
        let a = p.get_or_make("gh");
        assert_eq!(a, p.get_or_make("gh"));
        assert!(a.starts_with("openshell-placeholder-gh-") && a.len() == 25 + 32);
        let b = p.get_or_make("other");
        let set = CredentialSet {
            creds: Vec::new(),
            known: p.all(),
        };
        let text = format!("Bearer {a}, x {b} {a}");
        assert_eq!(set.placeholders_in(text.as_bytes()), ["gh", "other"]);
        assert!(
            set.placeholders_in(b"openshell-placeholder-gh-000")
                .is_empty()
        );
        assert!(CredentialSet::may_hold_placeholder(
            b"openshell-placeholder-"
        ));
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = Secret("hunter2".into());
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
