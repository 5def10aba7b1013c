//! HTTP request path globs, matched against canonical paths.
//!
//! Patterns are matched after `canonicalize_path`, so the pattern itself is
//! brought to canonical spelling when parsed (`%7e` → `~`, `%2f` → `%2F`) and
//! anything a canonical path can never contain (dot segments, `//`, spaces,
//! non-ASCII, `?`, `#`, `\`) is an error instead of a rule that silently
//! never fires.

use std::borrow::Cow;
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
    /// The pattern as an endpoint that folds paths reads it ([`segments::fold`]).
    folded: Vec<Seg>,
}

/// A canonical request path folded the way a server that ignores ASCII
/// case and a trailing slash reads it: ASCII letters lowercased (the hex
/// digits of escapes too), then one trailing `/` removed unless the path
/// is `/`. Idempotent on canonical paths, which never end in `//`.
pub fn fold_path(path: &str) -> Cow<'_, str> {
    let trimmed = match path.strip_suffix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => path,
    };
    if trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(trimmed.to_ascii_lowercase())
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// A canonical request path as the path rules of one endpoint read it:
/// as it is, or folded ([`fold_path`]) on an endpoint that folds paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPath<'a> {
    path: Cow<'a, str>,
    folded: bool,
}

impl<'a> RequestPath<'a> {
    /// `canonical` as an endpoint reads it; `fold` is whether the endpoint
    /// folds paths.
    pub fn new(canonical: &'a str, fold: bool) -> Self {
        let path = if fold {
            fold_path(canonical)
        } else {
            Cow::Borrowed(canonical)
        };
        Self { path, folded: fold }
    }

    /// Whether `glob` matches the path, folded with it when the endpoint
    /// folds paths.
    pub fn matched_by(&self, glob: &HttpPathGlob) -> bool {
        if self.folded {
            segments::matches(&glob.folded, &self.path, PathKind::Http)
        } else {
            glob.matches(&self.path)
        }
    }

    /// The path the rules read.
    pub fn as_str(&self) -> &str {
        &self.path
    }
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
            folded: segments::fold(&segs),
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

    /// Whether a canonical path matches on an endpoint that folds paths:
    /// whether [`fold_path`] of it matches the pattern folded the same way
    /// (lowercase, without a trailing `/`).
    pub fn matches_folded(&self, path: &str) -> bool {
        RequestPath::new(path, true).matched_by(self)
    }

    /// A regex for exactly the paths `matches_folded` accepts, to be used
    /// as a full match.
    pub fn to_folded_regex(&self) -> String {
        segments::to_folded_regex(&self.folded)
    }

    /// A realistic canonical path `matches_folded` accepts, for witnesses.
    pub fn folded_example(&self) -> String {
        // The folded pattern writes escapes in lowercase; a canonical path
        // writes their hex digits in uppercase, and folds alike.
        let mut escape = 0;
        segments::example(&self.folded, PathKind::Http)
            .chars()
            .map(|c| {
                if c == '%' {
                    escape = 2;
                    c
                } else if escape > 0 {
                    escape -= 1;
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }

    /// The pattern as an endpoint that folds paths reads it, as text: what
    /// `matches_folded` compares a folded path with. Lowercasing an escape
    /// (`%C3` as `%c3`) leaves text that parses back uppercased, so this
    /// is for showing, not for parsing.
    pub fn folded_text(&self) -> String {
        segments::to_text(&self.folded)
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
    fn folding_ignores_ascii_case_and_one_trailing_slash() {
        assert_eq!(fold_path("/Admin/X/"), "/admin/x");
        assert_eq!(fold_path("/"), "/");
        assert_eq!(fold_path("/caf%C3%A9"), "/caf%c3%a9");
        let admin = glob("/Admin/**");
        for path in ["/admin", "/ADMIN/", "/aDmIn/Users/1", "/admin/x/"] {
            assert!(admin.matches_folded(path), "{path}");
        }
        assert!(!admin.matches_folded("/administrator"));
        assert!(!admin.matches("/ADMIN/x"));
        let repo = glob("/repos/x/");
        assert!(repo.matches_folded("/REPOS/X"));
        assert!(repo.matches_folded("/repos/x/"));
        assert!(!repo.matches_folded("/repos/x/y"));
        // `*` reads the folded path, which has no trailing empty segment.
        assert!(!glob("/a/*").matches_folded("/a/"));
        assert!(glob("/a/*").matches_folded("/A/B/"));
        assert!(glob("/v[A-C]").matches_folded("/Vb"));
        assert!(!glob("/v[!A-Z]").matches_folded("/vb"));
        assert!(glob("/caf%c3%a9").matches_folded("/CAF%C3%A9/"));
        assert!(glob("/**").matches_folded("/"));
        assert!(glob("/").matches_folded("/"));
        assert!(!glob("/").matches_folded("/a"));
    }

    #[test]
    fn folded_regex_and_example_agree_with_the_folded_matcher() {
        for text in [
            "/Admin/**",
            "/repos/x/",
            "/a/*",
            "/**/",
            "/**",
            "/",
            "/v[A-C]",
            "/v[!a-z]x",
            "/*/x/**",
            "/caf%c3%a9",
            "/**/info/Refs*",
        ] {
            let g = glob(text);
            let re = regex_automata::meta::Regex::new(&format!("^(?:{})$", g.to_folded_regex()))
                .unwrap();
            for path in [
                "/",
                "/admin",
                "/ADMIN/",
                "/Admin/x/",
                "/repos/x",
                "/REPOS/X/",
                "/a/",
                "/a/b",
                "/A/B/",
                "/vB",
                "/v1x",
                "/V1X/",
                "/q/X/y",
                "/Q/x",
                "/CAF%C3%A9",
                "/caf%c3%a9/",
                "/o/R/info/refs",
                "/info/REFS.git/",
                "//",
                "/a//",
            ] {
                assert_eq!(
                    re.is_match(path),
                    g.matches_folded(path),
                    "{text} on {path}"
                );
            }
            let example = g.folded_example();
            assert!(g.matches_folded(&example), "{text}: {example}");
        }
    }

    #[test]
    fn examples_match_and_are_realistic() {
        assert_eq!(glob("/repos/*/*/pulls/**").example(), "/repos/x/x/pulls");
        assert_eq!(glob("/**/").example(), "/x/");
        assert_eq!(glob("/**").example(), "/");
        assert_eq!(glob("/repos/**").literal_prefix(), "/repos");
    }
}
