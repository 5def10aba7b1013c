//! JSON-RPC and MCP method names in `rpc` rules.
//!
//! A method pattern is `*` (every method), an exact name, or a glob that
//! only MCP accepts and only within the `tools/` family (`tools/*`), as
//! OpenShell does. Which of these a rule may use depends on the endpoint's
//! protocol, so there are two parsers ([`RpcMethod::parse_json_rpc`],
//! [`RpcMethod::parse_mcp`]) and one permissive one for canonical text
//! ([`RpcMethod::parse`]); the meaning of a parsed pattern is the same
//! whichever accepted it.
//!
//! A glob is a query-value glob ([`ValueGlob`]): `*` covers any run of
//! characters and `dotted:` makes the wildcards stop at a `.`, which is
//! what OpenShell's `glob.match(g, [], m)` does (the importer writes that
//! form). No pattern matches the empty method: OpenShell never lets a call
//! with an empty method match a rule.

use std::fmt;

use super::error::PatternError;
use super::query::{DOTTED_PREFIX, ValueGlob};

/// The only family in which MCP accepts method globs.
pub(crate) const MCP_GLOB_FAMILY: &str = "tools/";

/// The MCP method whose `params.name` is the tool.
pub const TOOLS_CALL: &str = "tools/call";

/// A method pattern of an `rpc` rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RpcMethod {
    /// `*`: every (non-empty) method.
    Any,
    /// One method, compared exactly (case matters).
    Exact(String),
    /// A glob whose text starts with `tools/`.
    Glob(ValueGlob),
}

/// Characters that make a method text a glob in OpenShell (`{` is globset
/// alternation, which our globs spell as separate patterns).
fn is_wild(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\')
}

fn check_name(text: &str) -> Result<(), PatternError> {
    if text.is_empty() {
        return Err(PatternError::new(
            "empty method name",
            "write a method such as `initialize` or `tools/list`",
            0,
        ));
    }
    if let Some((at, c)) = text.char_indices().find(|(_, c)| c.is_control()) {
        return Err(PatternError::new(
            format!("control character {c:?} in a method name"),
            "method names are printable text; remove it",
            at,
        ));
    }
    Ok(())
}

impl RpcMethod {
    /// Canonical text: `*`, an exact name, or a `tools/` glob. Used for
    /// bundles; policy text goes through the protocol's own parser.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text == "*" {
            return Ok(Self::Any);
        }
        Self::parse_mcp(text)
    }

    /// A generic JSON-RPC method: `*` as the allow-all sentinel, otherwise
    /// an exact name; any other wildcard is refused, as OpenShell does.
    pub fn parse_json_rpc(text: &str) -> Result<Self, PatternError> {
        if text == "*" {
            return Ok(Self::Any);
        }
        check_name(text)?;
        if let Some((at, _)) = text.char_indices().find(|&(_, c)| is_wild(c)) {
            return Err(PatternError::new(
                format!("`{text}` is a glob, and JSON-RPC methods are exact names"),
                "write the exact method name, or `*` alone for every method",
                at,
            ));
        }
        Ok(Self::Exact(text.to_string()))
    }

    /// An MCP method: an exact name, or a glob within `tools/`. `*` is
    /// refused: the allow-all MCP profile is the endpoint flag
    /// `all_mcp_methods`.
    pub fn parse_mcp(text: &str) -> Result<Self, PatternError> {
        check_name(text)?;
        if text == "*" {
            return Err(PatternError::new(
                "`*` is not an MCP method pattern",
                "list the MCP methods, or set `all_mcp_methods` on the endpoint for the allow-all profile",
                0,
            ));
        }
        let Some((at, _)) = text.char_indices().find(|&(_, c)| is_wild(c)) else {
            return Ok(Self::Exact(text.to_string()));
        };
        let body = text.strip_prefix(DOTTED_PREFIX).unwrap_or(text);
        let shift = text.len() - body.len();
        if !body.starts_with(MCP_GLOB_FAMILY) || at < shift + MCP_GLOB_FAMILY.len() {
            return Err(PatternError::new(
                format!("`{text}` is a glob outside the `tools/` family"),
                "MCP method globs must start with `tools/` (such as `tools/*`); name other methods exactly",
                at,
            ));
        }
        if let Some(brace) = text.find(['{', '}']) {
            return Err(PatternError::new(
                "`{...}` alternatives are not supported in a method glob",
                "write one rule per alternative",
                brace,
            ));
        }
        let glob = ValueGlob::parse(text)?;
        Ok(Self::Glob(glob))
    }

    /// Whether a call's method matches.
    pub(crate) fn matches(&self, method: &str) -> bool {
        match self {
            Self::Any => !method.is_empty(),
            Self::Exact(name) => name == method,
            Self::Glob(glob) => !method.is_empty() && glob.matches(method),
        }
    }

    /// Whether `tools/call` is among the methods matched: a rule that does
    /// is a broad `tools/call` rule unless it names tools.
    pub fn covers_tools_call(&self) -> bool {
        self.matches(TOOLS_CALL)
    }

    /// A regex (regex-automata syntax) for exactly the methods `matches`
    /// accepts, to be used as a full match.
    pub fn to_regex(&self) -> String {
        match self {
            Self::Any => "(?s:.)+".to_string(),
            Self::Exact(name) => {
                let mut out = String::from("(?:");
                for c in name.chars() {
                    super::glob::push_regex_literal(&mut out, c);
                }
                out.push(')');
                out
            }
            // A `tools/` glob cannot match the empty string.
            Self::Glob(glob) => glob.to_regex(),
        }
    }

    /// A concrete method the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        match self {
            Self::Any => "x".to_string(),
            Self::Exact(name) => name.clone(),
            Self::Glob(glob) => glob.example(),
        }
    }
}

impl fmt::Display for RpcMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Exact(name) => f.write_str(name),
            Self::Glob(glob) => write!(f, "{glob}"),
        }
    }
}

impl std::str::FromStr for RpcMethod {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(RpcMethod, "a JSON-RPC method pattern");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rpc_accepts_exact_and_star_only() {
        assert_eq!(RpcMethod::parse_json_rpc("*"), Ok(RpcMethod::Any));
        assert_eq!(
            RpcMethod::parse_json_rpc("reports.search"),
            Ok(RpcMethod::Exact("reports.search".into()))
        );
        let err = RpcMethod::parse_json_rpc("reports.*").unwrap_err();
        assert_eq!(err.offset, 8);
        assert!(RpcMethod::parse_json_rpc("").is_err());
    }

    #[test]
    fn mcp_globs_only_within_tools() {
        assert!(matches!(
            RpcMethod::parse_mcp("tools/*"),
            Ok(RpcMethod::Glob(_))
        ));
        let err = RpcMethod::parse_mcp("resources/*").unwrap_err();
        assert_eq!(err.offset, 10);
        let err = RpcMethod::parse_mcp("tool*").unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(RpcMethod::parse_mcp("*").is_err());
        assert!(RpcMethod::parse_mcp("tools/{a,b}").is_err());
        assert!(matches!(
            RpcMethod::parse_mcp("dotted:tools/*"),
            Ok(RpcMethod::Glob(_))
        ));
    }

    #[test]
    fn matching() {
        let glob = RpcMethod::parse_mcp("tools/*").unwrap();
        assert!(glob.matches("tools/call"));
        assert!(glob.matches("tools/list"));
        assert!(!glob.matches("resources/list"));
        assert!(glob.covers_tools_call());
        let dotted = RpcMethod::parse_mcp("dotted:tools/*").unwrap();
        assert!(dotted.matches("tools/call"));
        assert!(!dotted.matches("tools/a.b"));
        assert!(RpcMethod::Any.matches("x"));
        assert!(!RpcMethod::Any.matches(""));
        assert!(
            !RpcMethod::parse_mcp("initialize")
                .unwrap()
                .covers_tools_call()
        );
    }

    #[test]
    fn canonical_text_round_trips() {
        for text in ["*", "initialize", "tools/*", "dotted:tools/*", "a b"] {
            let m = RpcMethod::parse(text).unwrap();
            assert_eq!(RpcMethod::parse(&m.to_string()).unwrap(), m, "{text}");
        }
    }
}
