//! GraphQL operation types and name globs, for GraphQL allow and deny rules.
//!
//! OpenShell matches an operation name and each root field with
//! `glob.match(pattern, [], name)`, where an empty delimiter list means `.`.
//! A GraphQL name is `[_A-Za-z][_0-9A-Za-z]*` and never holds a `.`, so its
//! wildcards reach across the whole name: `*` is any run of name characters,
//! `?` one name character, `[...]` one name character of a class, and `**`
//! means the same as `*`. A pattern that could never match a name (a `.`,
//! `-`, `{a,b}` or a class of no name character) is refused instead of kept
//! as a rule that silently matches nothing; a list of patterns says what
//! `{a,b}` would.
//!
//! An anonymous operation has the name `""` (OpenShell matches the empty
//! string there), so `*` covers it and `Get*` does not.
//!
//! Operation types compare case-insensitively when written (`Query` reads
//! as `query`, as in OpenShell) and print in lowercase.

use std::collections::BTreeSet;
use std::fmt;

use super::error::PatternError;
use super::glob::{self, Item, Scope, Syntax, Tok};

/// The three GraphQL operation types, ordered from mildest to strongest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OperationType {
    /// Reads; the one type `read_only` allows.
    Query,
    /// Writes.
    Mutation,
    /// A long-lived stream of results, over WebSocket or SSE.
    Subscription,
}

impl OperationType {
    /// In keyword order, for iterating every type.
    pub const ALL: [Self; 3] = [Self::Query, Self::Mutation, Self::Subscription];

    /// The keyword, as GraphQL writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Mutation => "mutation",
            Self::Subscription => "subscription",
        }
    }

    /// Reads a keyword in any case.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                PatternError::new(
                    format!("`{text}` is not a GraphQL operation type"),
                    "write `query`, `mutation`, `subscription`, or `*` for all three",
                    0,
                )
            })
    }
}

impl fmt::Display for OperationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The operation types a rule covers. Stored as the set itself, so `*` and
/// `query mutation subscription` are one pattern and print as `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationTypeSet(BTreeSet<OperationType>);

impl OperationTypeSet {
    /// `*`.
    pub fn all() -> Self {
        Self(OperationType::ALL.into_iter().collect())
    }

    /// The `read-only` preset: `query`.
    pub fn read_only() -> Self {
        Self::of([OperationType::Query])
    }

    /// The `read-write` preset: `query mutation`.
    pub fn read_write() -> Self {
        Self::of([OperationType::Query, OperationType::Mutation])
    }

    /// A set of exactly these types.
    pub fn of(types: impl IntoIterator<Item = OperationType>) -> Self {
        Self(types.into_iter().collect())
    }

    /// Parses `*` or types separated by spaces or commas
    /// (`query, mutation`). Offsets in errors point at the bad word.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut set = BTreeSet::new();
        let mut star = None;
        let mut count = 0;
        for (at, word) in words(text) {
            count += 1;
            if word == "*" {
                star = Some(at);
                continue;
            }
            let ty = OperationType::parse(word).map_err(|e| PatternError { offset: at, ..e })?;
            set.insert(ty);
        }
        match (star, count) {
            (_, 0) => Err(PatternError::new(
                "empty operation type list",
                "write `query`, `mutation`, `subscription`, or `*` for all three",
                0,
            )),
            (Some(_), 1) => Ok(Self::all()),
            (Some(at), _) => Err(PatternError::new(
                format!("`*` mixed with other operation types in `{text}`"),
                "`*` already covers every operation type; write `*` alone",
                at,
            )),
            (None, _) => Ok(Self(set)),
        }
    }

    /// Whether operations of this type are covered.
    pub fn contains(&self, ty: OperationType) -> bool {
        self.0.contains(&ty)
    }

    /// Whether the lowercase keyword `text` names a covered type. Anything
    /// else (another case included) is covered by no set: the analysis
    /// only ever produces the lowercase keywords.
    #[cfg(test)]
    pub(crate) fn matches(&self, text: &str) -> bool {
        OperationType::ALL
            .into_iter()
            .any(|t| t.as_str() == text && self.contains(t))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = OperationType> + '_ {
        self.0.iter().copied()
    }

    pub(crate) fn is_all(&self) -> bool {
        self.0.len() == OperationType::ALL.len()
    }

    /// A regex over the lowercase keywords, for the prover.
    #[cfg(test)]
    pub(crate) fn to_regex(&self) -> String {
        if self.0.is_empty() {
            return r"(?:[^\x{0}-\x{10FFFF}])".to_owned();
        }
        let alts: Vec<&str> = self.iter().map(OperationType::as_str).collect();
        format!("(?:{})", alts.join("|"))
    }

    /// A covered keyword, for witnesses; `None` for the empty set.
    #[cfg(test)]
    pub(crate) fn example(&self) -> Option<OperationType> {
        self.0.first().copied()
    }
}

/// Words of `text` split on whitespace and commas, with byte offsets.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .scan(0, |at, word| {
            let here = *at;
            *at += word.len() + 1;
            Some((here, word))
        })
        .filter(|(_, w)| !w.is_empty())
}

impl fmt::Display for OperationTypeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("*");
        }
        let names: Vec<&str> = self.iter().map(OperationType::as_str).collect();
        f.write_str(&names.join(" "))
    }
}

impl std::str::FromStr for OperationTypeSet {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(OperationTypeSet, "a GraphQL operation type set");

/// A character a GraphQL name may hold.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every string that is a GraphQL name, as a regex (full match). The regex
/// of a [`GraphqlNameGlob`] stays inside `[_0-9A-Za-z]*`; intersect it with
/// this for exactly the names a glob can meet.
pub const GRAPHQL_NAME_REGEX: &str = "(?:[A-Z_a-z][0-9A-Z_a-z]*)";

const NAME_CHAR_RE: &str = "[0-9A-Z_a-z]";

fn check_literal(c: char, at: usize) -> Result<(), PatternError> {
    if is_name_char(c) {
        return Ok(());
    }
    let help = match c {
        '{' | '}' | ',' => "write each alternative as its own pattern instead of `{a,b}`",
        _ => {
            "GraphQL names hold only letters, digits and `_`; a pattern with any other character matches nothing"
        }
    };
    Err(PatternError::new(
        format!("`{c}` cannot appear in a GraphQL name"),
        help,
        at,
    ))
}

const SYNTAX: Syntax = Syntax {
    separator: None,
    percent: false,
    check_literal,
};

/// A glob over one GraphQL name: an operation name or a root field name
/// (the field's name, never its alias).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphqlNameGlob {
    text: String,
    toks: Vec<Tok>,
}

impl GraphqlNameGlob {
    /// Parses a glob such as `viewer`, `create*` or `Issue[A-Z]*`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(PatternError::new(
                "empty GraphQL name pattern",
                "write a name or a glob such as `viewer` or `create*`; `*` matches any name",
                0,
            ));
        }
        let mut toks: Vec<Tok> = Vec::new();
        for (at, item) in glob::tokenize(text, &SYNTAX)? {
            let Item::Tok(tok) = item else { continue };
            if let Tok::Class(class) = &tok
                && !NAME_CHARS.chars().any(|c| class.contains(c))
            {
                return Err(PatternError::new(
                    "this character class holds no character of a GraphQL name",
                    "GraphQL names hold only letters, digits and `_`; a class of none of them matches nothing",
                    at,
                ));
            }
            // `**` means the same as `*` here; keep one spelling.
            if !(tok == Tok::Star && toks.last() == Some(&Tok::Star)) {
                toks.push(tok);
            }
        }
        let mut canonical = String::new();
        glob::write_tokens(&mut canonical, &toks);
        Ok(Self {
            text: canonical,
            toks,
        })
    }

    /// Whether a name matches. A string with a character no GraphQL name
    /// holds matches no pattern.
    pub fn matches(&self, name: &str) -> bool {
        name.chars().all(is_name_char)
            && glob::match_tokens(&self.toks, name, Scope::Anything, is_name_char)
    }

    /// For operation-name rules: an anonymous operation is named `""`.
    pub fn matches_operation_name(&self, name: Option<&str>) -> bool {
        self.matches(name.unwrap_or(""))
    }

    /// A regex (regex-automata syntax) for exactly the strings `matches`
    /// accepts, to be used as a full match (`^(?:...)$`).
    pub fn to_regex(&self) -> String {
        let mut out = String::from("(?:");
        for tok in &self.toks {
            match tok {
                Tok::Lit(c) => glob::push_regex_literal(&mut out, *c),
                Tok::Star => {
                    out.push_str(NAME_CHAR_RE);
                    out.push('*');
                }
                Tok::One => out.push_str(NAME_CHAR_RE),
                Tok::Class(class) => {
                    out.push('[');
                    out.extend(NAME_CHARS.chars().filter(|&c| class.contains(c)));
                    out.push(']');
                }
            }
        }
        out.push(')');
        out
    }

    /// A concrete name the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        let mut out = String::new();
        for tok in &self.toks {
            match tok {
                Tok::Lit(c) => out.push(*c),
                Tok::Star => {}
                Tok::One => out.push('x'),
                Tok::Class(class) => {
                    out.extend(NAME_CHARS.chars().find(|&c| class.contains(c)));
                }
            }
        }
        out
    }

    /// The name itself when the pattern has no wildcard.
    pub fn exact(&self) -> Option<&str> {
        self.toks
            .iter()
            .all(|t| matches!(t, Tok::Lit(_)))
            .then_some(self.text.as_str())
    }

    /// The canonical pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The name characters, in the order examples prefer them.
const NAME_CHARS: &str = "xabcdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";

impl fmt::Display for GraphqlNameGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for GraphqlNameGlob {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(GraphqlNameGlob, "a GraphQL name pattern");

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> GraphqlNameGlob {
        GraphqlNameGlob::parse(text).unwrap()
    }

    #[test]
    fn operation_type_sets_parse_print_and_match() {
        let set = OperationTypeSet::parse("Mutation, query").unwrap();
        assert_eq!(set.to_string(), "query mutation");
        assert!(set.contains(OperationType::Query));
        assert!(!set.contains(OperationType::Subscription));
        assert!(set.matches("mutation"));
        assert!(!set.matches("Mutation"), "only the analysis' own spelling");
        assert_eq!(
            OperationTypeSet::parse("query mutation subscription").unwrap(),
            OperationTypeSet::all()
        );
        assert_eq!(OperationTypeSet::all().to_string(), "*");
        assert_eq!(
            OperationTypeSet::parse(" * ").unwrap(),
            OperationTypeSet::all()
        );
    }

    #[test]
    fn operation_type_errors_point_at_the_word() {
        let err = OperationTypeSet::parse("query mutaton").unwrap_err();
        assert_eq!(err.offset, 6);
        assert!(err.message.contains("`mutaton`"), "{}", err.message);
        let err = OperationTypeSet::parse("query, *").unwrap_err();
        assert_eq!(err.offset, 7);
        assert_eq!(OperationTypeSet::parse(" ,").unwrap_err().offset, 0);
    }

    #[test]
    fn operation_type_serde_is_the_canonical_text() {
        let set = OperationTypeSet::read_write();
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#""query mutation""#);
        assert_eq!(
            serde_json::from_str::<OperationTypeSet>(&json).unwrap(),
            set
        );
        assert!(serde_json::from_str::<OperationTypeSet>(r#""update""#).is_err());
        assert_eq!(
            serde_json::to_string(&OperationType::Subscription).unwrap(),
            r#""subscription""#
        );
    }

    #[test]
    fn name_globs_cover_whole_names() {
        assert!(glob("viewer").matches("viewer"));
        assert!(
            !glob("viewer").matches("Viewer"),
            "names are case-sensitive"
        );
        assert!(glob("create*").matches("create"));
        assert!(glob("create*").matches("createIssue"));
        assert!(!glob("create*").matches("recreate"));
        assert!(glob("*Issue").matches("closeIssue"));
        assert!(glob("Issue?").matches("Issue2"));
        assert!(glob("[a-c]*").matches("b"));
        assert!(!glob("[!a-c]*").matches("b"));
        assert!(glob("[!a-c]*").matches("_x"));
        assert!(!glob("*").matches("a.b"), "not a name");
        assert!(!glob("[!a]").matches("-"), "a negated class stays in names");
    }

    #[test]
    fn anonymous_operations_are_named_empty() {
        assert!(glob("*").matches_operation_name(None));
        assert!(!glob("Get*").matches_operation_name(None));
        assert!(glob("Get*").matches_operation_name(Some("GetViewer")));
    }

    #[test]
    fn name_glob_canonical_text() {
        assert_eq!(glob("a**b").as_str(), "a*b");
        assert_eq!(glob("\\a[cba]").as_str(), "a[a-c]");
        assert_eq!(glob("viewer").exact(), Some("viewer"));
        assert_eq!(glob("view*").exact(), None);
        assert_eq!(glob("[!a]?x*").example(), "xxx");
    }

    #[test]
    fn name_glob_errors_point_at_the_character() {
        let cases = [
            ("", 0, "empty"),
            ("repo.name", 4, "`.`"),
            ("{a,b}", 0, "`{`"),
            ("ab-c", 2, "`-`"),
            ("ab[.-]", 2, "no character"),
            ("ab[c", 2, "unclosed"),
            ("a\\", 1, "lone"),
        ];
        for (text, offset, message) in cases {
            let err = GraphqlNameGlob::parse(text).unwrap_err();
            assert_eq!(err.offset, offset, "`{text}`: {err:?}");
            assert!(err.message.contains(message), "`{text}`: {}", err.message);
        }
        assert!(
            GraphqlNameGlob::parse("{a,b}")
                .unwrap_err()
                .help
                .contains("own pattern")
        );
    }

    #[test]
    fn name_glob_serde_is_the_canonical_text() {
        let g = glob("create**");
        assert_eq!(serde_json::to_string(&g).unwrap(), r#""create*""#);
        assert_eq!(
            serde_json::from_str::<GraphqlNameGlob>(r#""create*""#).unwrap(),
            g
        );
        assert!(serde_json::from_str::<GraphqlNameGlob>(r#""a.b""#).is_err());
    }
}
