//! Executable path globs, matched against `/proc/<pid>/exe`.
//!
//! The kernel hands us a resolved absolute path, so a pattern that could only
//! match an unresolved one (`.`/`..` components, `//`, a trailing `/`) is an
//! error rather than a rule that never fires.

use std::fmt;

use super::error::PatternError;
use super::glob::Syntax;
use super::segments::{self, PathKind, Seg};

/// A glob over absolute executable paths: `*` within a component, `**` as a
/// whole component for zero or more components, `?`, `[...]`, `\` escapes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BinaryGlob {
    text: String,
    segs: Vec<Seg>,
    /// The unescaped path when the pattern has no wildcard.
    exact: Option<String>,
    /// The unescaped directory before the first wildcard component.
    prefix: String,
}

fn check_literal(c: char, at: usize) -> Result<(), PatternError> {
    if c.is_control() {
        return Err(PatternError::new(
            "control character in a binary path",
            "remove it",
            at,
        ));
    }
    Ok(())
}

const SYNTAX: Syntax = Syntax {
    separator: Some('/'),
    percent: false,
    check_literal,
};

impl BinaryGlob {
    /// Parses an executable path pattern such as `/usr/bin/python3*`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let segs = segments::parse(text, &SYNTAX, PathKind::Binary)?;
        let literal: Vec<Option<String>> = segs
            .iter()
            .map(|s| match s {
                Seg::Glob(toks) => segments::literal_text(toks),
                Seg::Any => None,
            })
            .collect();
        let exact = literal
            .iter()
            .map(|s| s.as_ref().map(|s| format!("/{s}")))
            .collect::<Option<String>>();
        let dirs = literal.len().saturating_sub(1);
        let prefix = match &exact {
            Some(path) => path.clone(),
            None => {
                let dir: String = literal
                    .iter()
                    .take(dirs)
                    .map_while(|s| s.as_ref().map(|s| format!("/{s}")))
                    .collect();
                if dir.is_empty() { "/".to_owned() } else { dir }
            }
        };
        Ok(Self {
            text: segments::to_text(&segs),
            segs,
            exact,
            prefix,
        })
    }

    /// Whether an absolute executable path matches.
    pub fn matches(&self, path: &str) -> bool {
        segments::matches(&self.segs, path, PathKind::Binary)
    }

    /// A regex (regex-automata syntax) for exactly the paths `matches`
    /// accepts, to be used as a full match (`^(?:...)$`).
    pub fn to_regex(&self) -> String {
        segments::to_regex(&self.segs, PathKind::Binary)
    }

    /// Whether the pattern names exactly one path.
    pub fn is_exact(&self) -> bool {
        self.exact.is_some()
    }

    /// The one path this pattern names, unescaped, if it has no wildcard.
    pub fn exact(&self) -> Option<&str> {
        self.exact.as_deref()
    }

    /// The directory before the first wildcard component (`/usr/bin` for
    /// `/usr/bin/py*`, `/` for `/**`); the whole path for an exact pattern.
    /// Lets the compiler grant Landlock execute rights no wider than needed.
    pub fn literal_prefix(&self) -> &str {
        &self.prefix
    }

    /// A concrete path the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        segments::example(&self.segs, PathKind::Binary)
    }

    /// The canonical pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for BinaryGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for BinaryGlob {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(BinaryGlob, "a binary path pattern");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_exact() {
        let g = BinaryGlob::parse("/usr/bin/python3.*").unwrap();
        assert_eq!(g.literal_prefix(), "/usr/bin");
        assert_eq!(g.exact(), None);
        let g = BinaryGlob::parse("/opt/a\\*b").unwrap();
        assert_eq!(g.exact(), Some("/opt/a*b"));
        assert_eq!(g.literal_prefix(), "/opt/a*b");
        assert_eq!(BinaryGlob::parse("/**").unwrap().literal_prefix(), "/");
        assert_eq!(
            BinaryGlob::parse("/opt/**/bin/x").unwrap().literal_prefix(),
            "/opt"
        );
    }
}
