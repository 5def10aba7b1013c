//! HTTP methods and method sets.

use std::collections::BTreeSet;
use std::fmt;

use super::error::PatternError;

/// An HTTP method, stored uppercase (`[A-Z][A-Z0-9_-]*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Method(String);

/// The methods RFC 9110 defines; others are extension methods.
pub const STANDARD_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
];

/// Extension methods in common use (WebDAV, RFC 4918 and RFC 3253, and
/// the `QUERY` method of the HTTP working group), which `check` takes as
/// known beside [`STANDARD_METHODS`].
pub const EXTENSION_METHODS: &[&str] = &[
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
    "REPORT",
    "SEARCH",
    "QUERY",
];

/// The synthetic method of a client text message on an upgraded WebSocket
/// connection, as OpenShell names it in rules.
pub const WEBSOCKET_TEXT: &str = "WEBSOCKET_TEXT";

impl Method {
    /// Parses a method in any case; `get` becomes `GET`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let upper = text.to_ascii_uppercase();
        let mut chars = upper.char_indices();
        let first_ok = chars.next().is_some_and(|(_, c)| c.is_ascii_uppercase());
        let bad = chars.find(|&(_, c)| {
            !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-')
        });
        if !first_ok || bad.is_some() {
            return Err(PatternError::new(
                format!("`{text}` is not an HTTP method"),
                "write a method such as `GET` or `POST`: a letter, then letters, digits, `_` or `-`",
                bad.map_or(0, |(i, _)| i),
            ));
        }
        Ok(Self(upper))
    }

    /// A regex for this method (uppercase input).
    pub(crate) fn to_regex(&self) -> String {
        // Method characters are `[A-Z0-9_-]`; only `-` is a regex meta
        // character, and it is literal outside a class.
        self.0.clone()
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Method {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(Method, "an HTTP method");

/// The methods a rule covers: every method, or a set. There is no implicit
/// `HEAD` for `GET`: what is written is what is allowed, and the OpenShell
/// importer adds `HEAD` explicitly where OpenShell implied it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MethodSet {
    /// `*`: every method.
    Any,
    /// These methods only. Empty only as the result of a set operation;
    /// `parse` refuses an empty list.
    Only(BTreeSet<Method>),
}

fn set(names: &[&str]) -> MethodSet {
    MethodSet::Only(names.iter().map(|n| Method(String::from(*n))).collect())
}

impl MethodSet {
    /// `GET HEAD OPTIONS`.
    pub fn read_only() -> Self {
        set(&["GET", "HEAD", "OPTIONS"])
    }

    /// `GET HEAD OPTIONS POST PUT PATCH`.
    pub fn read_write() -> Self {
        set(&["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"])
    }

    /// `*`.
    pub fn full() -> Self {
        Self::Any
    }

    /// Parses `*` or methods separated by spaces or commas (`GET HEAD`).
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut words = Vec::new();
        let mut start = None;
        for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
            let separator = c == ',' || c.is_whitespace();
            match (start, separator) {
                (None, false) => start = Some(at),
                (Some(s), true) => {
                    words.push((s, text.get(s..at).unwrap_or("")));
                    start = None;
                }
                _ => {}
            }
        }
        Self::from_words(words.into_iter(), text)
    }

    fn from_words<'a>(
        words: impl Iterator<Item = (usize, &'a str)>,
        whole: &str,
    ) -> Result<Self, PatternError> {
        let mut methods = BTreeSet::new();
        let mut star = None;
        let mut count = 0;
        for (at, word) in words {
            count += 1;
            if word == "*" {
                star = Some(at);
                continue;
            }
            let method = Method::parse(word).map_err(|e| PatternError {
                offset: at + e.offset,
                ..e
            })?;
            methods.insert(method);
        }
        match (star, count) {
            (_, 0) => Err(PatternError::new(
                "empty method list",
                "write methods such as `GET HEAD`, or `*` for every method",
                0,
            )),
            (Some(_), 1) => Ok(Self::Any),
            (Some(at), _) => Err(PatternError::new(
                format!("`*` mixed with other methods in `{whole}`"),
                "`*` already covers every method; write `*` alone",
                at,
            )),
            (None, _) => Ok(Self::Only(methods)),
        }
    }

    /// Whether a request method is covered, compared case-insensitively.
    /// A string that is not a method token is covered by no set, not even
    /// `*`: the proxy refuses such requests.
    pub fn contains(&self, method: &str) -> bool {
        let Ok(method) = Method::parse(method) else {
            return false;
        };
        match self {
            Self::Any => true,
            Self::Only(set) => set.contains(&method),
        }
    }

    /// Both sets' methods; `Any` absorbs the other.
    pub fn union(&self, other: &Self) -> Self {
        match (self, other) {
            (Self::Only(a), Self::Only(b)) => Self::Only(a.union(b).cloned().collect()),
            _ => Self::Any,
        }
    }

    /// Whether every method of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        match (self, other) {
            (_, Self::Any) => true,
            (Self::Any, Self::Only(_)) => false,
            (Self::Only(a), Self::Only(b)) => a.is_subset(b),
        }
    }

    /// A regex over uppercase method tokens, for the prover.
    pub fn to_regex(&self) -> String {
        match self {
            Self::Any => "(?:[A-Z][-0-9A-Z_]*)".to_owned(),
            Self::Only(set) => {
                let alts: Vec<String> = set.iter().map(Method::to_regex).collect();
                if alts.is_empty() {
                    // Matches nothing.
                    "(?:[^\\x{0}-\\x{10FFFF}])".to_owned()
                } else {
                    format!("(?:{})", alts.join("|"))
                }
            }
        }
    }

    fn names(&self) -> Vec<String> {
        match self {
            Self::Any => vec!["*".to_owned()],
            Self::Only(set) => set.iter().map(ToString::to_string).collect(),
        }
    }
}

impl fmt::Display for MethodSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(" "))
    }
}

impl std::str::FromStr for MethodSet {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for MethodSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.names())
    }
}

impl<'de> serde::Deserialize<'de> for MethodSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = <Vec<String> as serde::Deserialize>::deserialize(deserializer)?;
        let joined = names.join(" ");
        let mut at = 0;
        let words = names.iter().map(|n| {
            let here = at;
            at += n.len() + 1;
            (here, n.as_str())
        });
        Self::from_words(words, &joined).map_err(serde::de::Error::custom)
    }
}
