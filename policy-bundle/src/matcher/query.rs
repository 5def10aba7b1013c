//! Query-string matching.
//!
//! The query is matched apart from the path and after decoding, so `%61`
//! and `a` are the same value. A key can repeat (`?id=1&id=2`), which is why
//! allow and deny quantify differently: an allow must hold for every value
//! (or `?id=ok&id=evil` would pass), a deny fires on any value.

use std::fmt;

use super::dotted::DottedGlob;
use super::error::PatternError;
use super::glob::{self, Item, Scope, Syntax, Tok};

/// A pattern for one whole decoded query value.
///
/// Plain: `*` any run of characters (including `/` and `.`), `?` one
/// character, `[...]` classes, `\` escapes. Written `dotted:GLOB`: a
/// `DottedGlob`, whose wildcards never cross a `.` (OpenShell's meaning).
/// A plain glob whose text starts with `dotted:` is written `\dotted:...`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueGlob {
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Plain(Vec<Tok>),
    Dotted(DottedGlob),
}

/// Marks a value pattern as a `DottedGlob`.
pub const DOTTED_PREFIX: &str = "dotted:";

const SYNTAX: Syntax = Syntax {
    separator: None,
    percent: false,
    check_literal: super::dotted::check_literal,
};

impl ValueGlob {
    /// Parses a value pattern such as `main`, `v1.*`, `[0-9]*` or
    /// `dotted:1.*`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if let Some(rest) = text.strip_prefix(DOTTED_PREFIX) {
            let dotted = DottedGlob::parse(rest).map_err(|mut e| {
                e.offset += DOTTED_PREFIX.len();
                e
            })?;
            return Ok(Self {
                text: format!("{DOTTED_PREFIX}{dotted}"),
                kind: Kind::Dotted(dotted),
            });
        }
        let mut toks: Vec<Tok> = Vec::new();
        for (_, item) in glob::tokenize(text, &SYNTAX)? {
            if let Item::Tok(tok) = item {
                // `**` means the same as `*` here; keep one spelling.
                if !(tok == Tok::Star && toks.last() == Some(&Tok::Star)) {
                    toks.push(tok);
                }
            }
        }
        let mut canonical = String::new();
        glob::write_tokens(&mut canonical, &toks);
        if canonical.starts_with(DOTTED_PREFIX) {
            canonical.insert(0, '\\');
        }
        Ok(Self {
            text: canonical,
            kind: Kind::Plain(toks),
        })
    }

    /// Whether a decoded value matches.
    pub fn matches(&self, value: &str) -> bool {
        match &self.kind {
            Kind::Plain(toks) => glob::match_tokens(toks, value, Scope::Anything, |_| true),
            Kind::Dotted(d) => d.matches(value),
        }
    }

    /// A regex (regex-automata syntax) for exactly the values `matches`
    /// accepts, to be used as a full match (`^(?:...)$`).
    pub fn to_regex(&self) -> String {
        match &self.kind {
            Kind::Plain(toks) => {
                let mut out = String::from("(?:");
                glob::write_regex(&mut out, toks, Scope::Anything);
                out.push(')');
                out
            }
            Kind::Dotted(d) => d.to_regex(),
        }
    }

    /// A concrete value the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        match &self.kind {
            Kind::Plain(toks) => glob::example(toks, Scope::Anything, "x"),
            Kind::Dotted(d) => d.example(),
        }
    }

    /// Values for a witness search: the example, and variants with each
    /// wildcard empty or covering a `.`, which is where a plain and a
    /// dotted glob of the same text disagree. Not all of them match.
    pub fn examples(&self) -> Vec<String> {
        let mut out = vec![self.example()];
        match &self.kind {
            Kind::Plain(toks) => {
                for star in ["", "x.x"] {
                    out.push(glob::example(toks, Scope::Anything, star));
                }
            }
            Kind::Dotted(d) => {
                out.push(d.example_with("", None));
                out.push(d.example_with("x.x", Some("x.x")));
            }
        }
        out.dedup();
        out
    }

    /// Whether the pattern has no wildcard or class: it matches one value.
    pub fn is_literal(&self) -> bool {
        match &self.kind {
            Kind::Plain(toks) => toks.iter().all(|t| matches!(t, Tok::Lit(_))),
            Kind::Dotted(d) => d.is_literal(),
        }
    }

    /// The canonical pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ValueGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for ValueGlob {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(ValueGlob, "a query value pattern");

/// One query condition: a key and the value patterns it may (or, in a deny
/// rule, must not) take. A rule with several matchers needs all of them.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct QueryMatcher {
    /// The decoded key, compared exactly.
    pub key: String,
    /// Alternatives; one is enough.
    pub any: Vec<ValueGlob>,
}

impl QueryMatcher {
    /// A matcher with its alternatives sorted and deduplicated, so equal
    /// conditions compare equal.
    pub fn new(
        key: impl Into<String>,
        any: impl IntoIterator<Item = ValueGlob>,
    ) -> Result<Self, PatternError> {
        let key = key.into();
        let mut any: Vec<ValueGlob> = any.into_iter().collect();
        any.sort();
        any.dedup();
        if any.is_empty() {
            return Err(PatternError::new(
                format!("query matcher for `{key}` has no value pattern"),
                "give at least one value pattern, e.g. `*` for any value",
                0,
            ));
        }
        Ok(Self { key, any })
    }

    fn values<'a>(&'a self, params: &'a [(String, String)]) -> impl Iterator<Item = &'a str> {
        params
            .iter()
            .filter(move |(k, _)| *k == self.key)
            .map(|(_, v)| v.as_str())
    }

    fn accepts(&self, value: &str) -> bool {
        self.any.iter().any(|g| g.matches(value))
    }

    /// For allow rules: the key is present and every one of its values
    /// matches an alternative.
    pub fn allows(&self, params: &[(String, String)]) -> bool {
        let mut values = self.values(params).peekable();
        values.peek().is_some() && values.all(|v| self.accepts(v))
    }

    /// For deny rules: the key is present and at least one of its values
    /// matches an alternative.
    pub fn denies(&self, params: &[(String, String)]) -> bool {
        self.values(params).any(|v| self.accepts(v))
    }
}

/// For reports: `key=glob`, alternatives separated by ` or `. Not parsed back.
impl fmt::Display for QueryMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=", self.key)?;
        for (i, glob) in self.any.iter().enumerate() {
            if i > 0 {
                f.write_str(" or ")?;
            }
            write!(f, "{glob}")?;
        }
        Ok(())
    }
}

/// Decodes a raw query string (without `?`) into (key, value) pairs in
/// order: split on `&` (empty pieces skipped), key and value at the first
/// `=` (no `=` means an empty value), `+` as space, percent-escapes decoded.
/// Invalid escapes, NUL and invalid UTF-8 are errors, because a lossy
/// decoding would let a backend see a value the matcher never saw.
pub fn parse_query_string(raw: &str) -> Result<Vec<(String, String)>, PatternError> {
    let mut out = Vec::new();
    let mut at = 0;
    for piece in raw.split('&') {
        if !piece.is_empty() {
            let (key, value, value_at) = match piece.split_once('=') {
                Some((k, v)) => (k, v, at + k.len() + 1),
                None => (piece, "", at + piece.len()),
            };
            out.push((decode(key, at)?, decode(value, value_at)?));
        }
        at += piece.len() + 1;
    }
    Ok(out)
}

fn decode(text: &str, base: usize) -> Result<String, PatternError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let (byte, width) = match b {
            b'+' => (b' ', 1),
            b'%' => {
                let hex = |k: usize| bytes.get(k).and_then(|&h| char::from(h).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    let shown: String = text.get(i..).unwrap_or("").chars().take(3).collect();
                    return Err(PatternError::new(
                        format!("invalid percent-escape `{shown}` in the query string"),
                        "`%` must be followed by two hex digits",
                        base + i,
                    ));
                };
                (u8::try_from(hi * 16 + lo).unwrap_or(0), 3)
            }
            _ => (b, 1),
        };
        if byte == 0 {
            return Err(PatternError::new(
                "NUL in the query string",
                "query strings containing NUL are rejected",
                base + i,
            ));
        }
        out.push(byte);
        i += width;
    }
    String::from_utf8(out).map_err(|e| {
        PatternError::new(
            "query string does not decode to UTF-8",
            "percent-escapes must encode valid UTF-8",
            base + e.utf8_error().valid_up_to(),
        )
    })
}
