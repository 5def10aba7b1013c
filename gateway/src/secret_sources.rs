//! `serve --allow-secret-source`: the secret sources a proposal's
//! credentials may read. The supervisor reads a credential's secret from
//! its own environment or disk and sends it to the credential's hosts, so
//! whoever may propose could otherwise name any file the supervisor can
//! read (`secret file /root/.ssh/id_rsa`) and have it sent. The prover
//! reports such a change and auto approval leaves it to a person; the
//! list keeps it from being proposed at all.
//!
//! Only credentials are checked: a sandbox-held `secret` is a declaration
//! of what the workload can already read, never read by the supervisor,
//! and refusing it would only teach authors to leave it out.

use std::str::FromStr;

use policy_bundle::{Bundle, SecretSource};

/// Why a `--allow-secret-source` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Neither `env:` nor `file:`.
    #[error("`{0}` is not `env:NAME` or `file:PATH`")]
    Kind(String),
    /// A `*` that is not the last character.
    #[error("`{0}`: `*` may only end a pattern")]
    Star(String),
    /// `env:` or `file:` and nothing after it.
    #[error("`{0}` names no source (use `env:*` or `file:/*` for any)")]
    Empty(String),
}

/// A credential of the candidate reads a source outside the list; the
/// API answers it as `422 secret_source_not_allowed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "credential `{credential}` reads secret `{secret}`, which this gateway does not allow; allowed: {allowed} (`serve --allow-secret-source`)"
)]
pub struct NotAllowed {
    credential: String,
    secret: String,
    allowed: String,
}

/// One allowed source: exactly `env:NAME` / `file:PATH`, or every source
/// of that kind beginning with the text before a final `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePattern {
    file: bool,
    text: String,
    prefix: bool,
    shown: String,
}

impl FromStr for SourcePattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, PatternError> {
        let (file, rest) = match (s.strip_prefix("env:"), s.strip_prefix("file:")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => return Err(PatternError::Kind(s.to_owned())),
        };
        if rest.is_empty() {
            return Err(PatternError::Empty(s.to_owned()));
        }
        let (text, prefix) = match rest.strip_suffix('*') {
            Some(t) => (t, true),
            None => (rest, false),
        };
        if text.contains('*') {
            return Err(PatternError::Star(s.to_owned()));
        }
        Ok(SourcePattern {
            file,
            text: text.to_owned(),
            prefix,
            shown: s.to_owned(),
        })
    }
}

impl SourcePattern {
    fn allows(&self, source: &SecretSource) -> bool {
        let (file, name) = match source {
            SecretSource::Env(v) => (false, v.as_str()),
            SecretSource::File(f) => (true, f.as_str()),
        };
        if file != self.file {
            return false;
        }
        if !self.prefix {
            return name == self.text;
        }
        // `file:/run/secrets/*` must not reach `/run/secrets/../../root`.
        let climbs = file && name.split('/').any(|c| c == ".." || c == ".");
        name.starts_with(&self.text) && !climbs
    }
}

/// The allow-list; a gateway without one allows every source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSources(Vec<SourcePattern>);

impl SecretSources {
    /// `None` for no patterns: the flag not given.
    #[must_use]
    pub fn new(patterns: Vec<SourcePattern>) -> Option<SecretSources> {
        (!patterns.is_empty()).then_some(SecretSources(patterns))
    }

    fn allows(&self, source: &SecretSource) -> bool {
        self.0.iter().any(|p| p.allows(source))
    }

    fn shown(&self) -> String {
        self.0
            .iter()
            .map(|p| format!("`{}`", p.shown))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The first credential of `bundle` that reads a source outside `list`.
pub(crate) fn check(list: Option<&SecretSources>, bundle: &Bundle) -> Result<(), NotAllowed> {
    let Some(list) = list else {
        return Ok(());
    };
    match bundle
        .enforcement
        .credentials
        .iter()
        .find(|c| !list.allows(&c.source))
    {
        Some(c) => Err(NotAllowed {
            credential: c.name.clone(),
            secret: prover::source_text(&c.source),
            allowed: list.shown(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(p: &[&str]) -> SecretSources {
        SecretSources::new(p.iter().map(|s| s.parse().unwrap()).collect()).unwrap()
    }

    #[test]
    fn exact_and_prefix_patterns() {
        let l = list(&["env:GITHUB_TOKEN", "file:/run/secrets/*"]);
        assert!(l.allows(&SecretSource::Env("GITHUB_TOKEN".into())));
        assert!(!l.allows(&SecretSource::Env("GITHUB_TOKEN2".into())));
        assert!(l.allows(&SecretSource::File("/run/secrets/gh".into())));
        assert!(!l.allows(&SecretSource::File("/root/.ssh/id_rsa".into())));
        assert!(!l.allows(&SecretSource::File(
            "/run/secrets/../../root/.ssh/id_rsa".into()
        )));
        // A file pattern never allows an environment variable.
        assert!(!l.allows(&SecretSource::Env("/run/secrets/x".into())));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        assert_eq!(
            "GITHUB_TOKEN".parse::<SourcePattern>(),
            Err(PatternError::Kind("GITHUB_TOKEN".into()))
        );
        assert!(matches!(
            "file:/a/*/b".parse::<SourcePattern>(),
            Err(PatternError::Star(_))
        ));
        assert!(matches!(
            "env:".parse::<SourcePattern>(),
            Err(PatternError::Empty(_))
        ));
        assert_eq!(SecretSources::new(Vec::new()), None);
    }
}
