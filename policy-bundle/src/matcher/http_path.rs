//! HTTP request path globs, matched against canonical paths.
//!
//! Patterns are matched after `canonicalize_path`, so the pattern itself is
//! brought to canonical spelling when parsed (`%7e` → `~`, `%2f` → `%2F`) and
//! anything a canonical path can never contain (dot segments, `//`, spaces,
//! non-ASCII, `?`, `#`, `\`) is an error instead of a rule that silently
//! never fires.

use std::fmt;

use super::error::PatternError;
use super::glob::Syntax;
use super::segments::{self, PathKind, Seg};

/// A glob over canonical request paths: `*` within a segment, `**` as a
/// whole segment for zero or more segments, `?`, `[...]` and `\` escapes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HttpPathGlob {
    text: String,
    segs: Vec<Seg>,
}

fn check_literal(c: char, at: usize) -> Result<(), PatternError> {
    let (message, help) = match c {
        '?' => (
            "a path pattern cannot contain a literal `?`".to_owned(),
            "the query string is matched separately; use a query matcher",
        ),
        '#' => (
            "a path pattern cannot contain `#`".to_owned(),
            "fragments are never sent to the server; remove it",
        ),
        '\\' => (
            "a path pattern cannot contain a literal backslash".to_owned(),
            "requests with `\\` in the path are rejected before matching",
        ),
        ';' => (
            "a path pattern cannot contain `;`".to_owned(),
            "requests with `;` in the path are rejected before matching; write `%3B` for an encoded one",
        ),
        c if !c.is_ascii() => (
            format!("non-ASCII character `{c}` in a path pattern"),
            "percent-encode its UTF-8 bytes, e.g. `%C3%A9` for `é`",
        ),
        c if c.is_ascii_control() || c == ' ' => (
            "control character or space in a path pattern".to_owned(),
            "percent-encode it, e.g. `%20` for a space",
        ),
        _ => return Ok(()),
    };
    Err(PatternError::new(message, help, at))
}

const SYNTAX: Syntax = Syntax {
    separator: Some('/'),
    percent: true,
    check_literal,
};

impl HttpPathGlob {
    /// Parses a path pattern such as `/repos/*/*/pulls/**`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let segs = segments::parse(text, &SYNTAX, PathKind::Http)?;
        Ok(Self {
            text: segments::to_text(&segs),
            segs,
        })
    }

    /// Whether a canonical path (output of `canonicalize_path`) matches.
    /// Non-canonical input is matched literally and may miss; canonicalize
    /// first.
    pub fn matches(&self, path: &str) -> bool {
        segments::matches(&self.segs, path, PathKind::Http)
    }

    /// A regex (regex-automata syntax) for exactly the paths `matches`
    /// accepts, to be used as a full match (`^(?:...)$`).
    pub fn to_regex(&self) -> String {
        segments::to_regex(&self.segs, PathKind::Http)
    }

    /// The leading wildcard-free segments, e.g. `/repos` for `/repos/*/x`,
    /// `/` when the first segment has a wildcard.
    pub fn literal_prefix(&self) -> String {
        segments::literal_prefix(&self.segs)
    }

    /// A realistic canonical path the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        segments::example(&self.segs, PathKind::Http)
    }

    /// Whether the pattern has no wildcard, i.e. matches one path.
    pub fn is_exact(&self) -> bool {
        self.segs
            .iter()
            .all(|s| matches!(s, Seg::Glob(t) if segments::literal_text(t).is_some()))
    }

    /// The canonical pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for HttpPathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for HttpPathGlob {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(HttpPathGlob, "an HTTP path pattern");

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> HttpPathGlob {
        HttpPathGlob::parse(text).unwrap()
    }

    #[test]
    fn star_never_crosses_a_slash() {
        assert!(!glob("/repos/*/pulls/*/reviews").matches("/repos/o/r/pulls/1/reviews"));
        assert!(glob("/repos/*/*/pulls/*/reviews").matches("/repos/o/r/pulls/1/reviews"));
    }

    #[test]
    fn pattern_text_is_canonicalized() {
        assert_eq!(glob("/a%7e/%2f/**/**/x").to_string(), "/a~/%2F/**/x");
        assert_eq!(glob("/a/[cba]\\*").to_string(), "/a/[a-c]\\*");
    }

    #[test]
    fn examples_match_and_are_realistic() {
        assert_eq!(glob("/repos/*/*/pulls/**").example(), "/repos/x/x/pulls");
        assert_eq!(glob("/**/").example(), "/x/");
        assert_eq!(glob("/**").example(), "/");
        assert_eq!(glob("/repos/**").literal_prefix(), "/repos");
    }
}
