//! MCP tool-name matchers: the `tool` part of an `rpc` rule, matched
//! against `params.name` of a `tools/call`.
//!
//! A tool set is one or more value globs, any of which may match (OpenShell's
//! `tool: GLOB` and `tool: { any: [...] }`). Each is a query-value glob
//! ([`ValueGlob`]) with its one meaning: plain `*` covers any run of
//! characters, and `dotted:` makes `*` and `?` stop at a `.`, which is how
//! OpenShell's `glob.match(g, [], name)` reads a tool glob (the importer
//! writes that form).

use std::fmt;

use super::error::PatternError;
use super::query::ValueGlob;

/// Tool-name patterns, sorted and deduplicated; one match is enough.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolSet(Vec<ValueGlob>);

impl ToolSet {
    /// A set from patterns, sorted and deduplicated so equal sets compare
    /// equal. Refuses an empty list.
    pub fn new(any: impl IntoIterator<Item = ValueGlob>) -> Result<Self, PatternError> {
        let mut any: Vec<ValueGlob> = any.into_iter().collect();
        any.sort();
        any.dedup();
        if any.is_empty() {
            return Err(PatternError::new(
                "empty tool list",
                "name at least one tool or tool glob, such as `search_*`",
                0,
            ));
        }
        Ok(Self(any))
    }

    /// Parses one tool pattern.
    pub fn parse_one(text: &str) -> Result<ValueGlob, PatternError> {
        if text.is_empty() {
            return Err(PatternError::new(
                "empty tool name",
                "write a tool name or glob such as `search_*`",
                0,
            ));
        }
        ValueGlob::parse(text)
    }

    /// Parses tool patterns separated by spaces (the canonical text).
    /// Patterns containing a space only come from quoted policy words and
    /// are stored as a list in bundles.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut globs = Vec::new();
        let mut at = 0;
        for word in text.split(' ') {
            if !word.is_empty() {
                globs.push(Self::parse_one(word).map_err(|e| PatternError {
                    offset: at + e.offset,
                    ..e
                })?);
            }
            at += word.len() + 1;
        }
        Self::new(globs)
    }

    /// The tool globs, in the set's canonical order.
    pub fn globs(&self) -> &[ValueGlob] {
        &self.0
    }

    /// Whether a tool name matches one of the patterns.
    pub(crate) fn matches(&self, tool: &str) -> bool {
        self.0.iter().any(|g| g.matches(tool))
    }

    /// Whether any pattern has a wildcard (refused beside
    /// `loose_tool_names`, as OpenShell refuses it).
    pub fn has_wildcard(&self) -> bool {
        self.0.iter().any(|g| !g.is_literal())
    }

    /// A regex for exactly the names `matches` accepts, as a full match.
    #[cfg(test)]
    pub(crate) fn to_regex(&self) -> String {
        let alts: Vec<String> = self.0.iter().map(ValueGlob::to_regex).collect();
        format!("(?:{})", alts.join("|"))
    }

    /// A concrete tool name the set matches, for witnesses.
    #[cfg(test)]
    pub(crate) fn example(&self) -> String {
        self.0.first().map(ValueGlob::example).unwrap_or_default()
    }
}

/// Space-separated patterns; a pattern with a space is shown quoted.
impl fmt::Display for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, glob) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{glob}")?;
        }
        Ok(())
    }
}

impl serde::Serialize for ToolSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ToolSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let any = <Vec<ValueGlob> as serde::Deserialize>::deserialize(deserializer)?;
        Self::new(any).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_of_and_wildcards() {
        let set = ToolSet::parse("search_* read_file").unwrap();
        assert!(set.matches("search_web"));
        assert!(set.matches("read_file"));
        assert!(!set.matches("read_files"));
        assert!(set.has_wildcard());
        assert!(!ToolSet::parse("read_file").unwrap().has_wildcard());
        let dotted = ToolSet::parse("dotted:github.*").unwrap();
        assert!(dotted.matches("github.search"));
        assert!(!dotted.matches("github.a.b"));
        assert!(dotted.has_wildcard());
        assert!(!ToolSet::parse("dotted:a.b").unwrap().has_wildcard());
    }

    #[test]
    fn errors_point_into_the_text() {
        let err = ToolSet::parse("ok bad[").unwrap_err();
        assert!(err.offset >= 3, "{err:?}");
        assert!(ToolSet::parse("").is_err());
    }
}
