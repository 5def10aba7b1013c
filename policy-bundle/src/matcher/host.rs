//! Host names and host patterns.
//!
//! Hosts are compared in one spelling: lowercase, no trailing dot, IDNs in
//! punycode. Patterns are normalized the same way when parsed, so `matches`
//! is a plain comparison on labels and the regex needs no case folding.
//!
//! Wildcards are deliberately narrow: `*` is one label (or part of one), `**`
//! one or more labels on the left only, and no wildcard may cover a
//! top-level domain or stand alone, because `*.com` or `*` in an allow rule
//! is almost always a mistake that opens the whole internet.

use std::fmt;

use super::error::PatternError;
use super::glob::{self, Scope, Tok};

/// Characters of a normalized label; what a host wildcard may cover.
fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
}

const LABEL_RE: &str = "[-0-9_a-z]";
const MAX_HOST: usize = 253;
const MAX_LABEL: usize = 63;

/// One label of a host pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Label {
    Literal(String),
    /// `*`: exactly one whole label.
    One,
    /// `**`: one or more whole labels, leftmost only.
    Many,
    /// Text with `*` inside (`*-api`): each `*` is zero or more label
    /// characters.
    Partial(Vec<Tok>),
}

impl Label {
    fn is_wildcard(&self) -> bool {
        !matches!(self, Self::Literal(_))
    }

    fn matches(&self, part: &str) -> bool {
        match self {
            Self::Literal(l) => l == part,
            Self::One | Self::Many => !part.is_empty() && part.chars().all(is_label_char),
            Self::Partial(toks) => glob::match_tokens(toks, part, Scope::Anything, is_label_char),
        }
    }

    fn write_regex(&self, out: &mut String) {
        match self {
            Self::Literal(l) => l.chars().for_each(|c| glob::push_regex_literal(out, c)),
            Self::One => {
                out.push_str(LABEL_RE);
                out.push('+');
            }
            Self::Many => {
                out.push_str(LABEL_RE);
                out.push_str("+(?:\\.");
                out.push_str(LABEL_RE);
                out.push_str("+)*");
            }
            Self::Partial(toks) => {
                for tok in toks {
                    match tok {
                        Tok::Lit(c) => glob::push_regex_literal(out, *c),
                        _ => {
                            out.push_str(LABEL_RE);
                            out.push('*');
                        }
                    }
                }
            }
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(l) => f.write_str(l),
            Self::One => f.write_str("*"),
            Self::Many => f.write_str("**"),
            Self::Partial(toks) => {
                let mut out = String::new();
                glob::write_tokens(&mut out, toks);
                f.write_str(&out)
            }
        }
    }
}

/// A host pattern: an exact host, or labels with `*`/`**` wildcards.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    text: String,
    labels: Vec<Label>,
}

/// Splits on `.` and the dots IDNA maps to `.`, with byte offsets.
fn split_labels(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if matches!(c, '.' | '\u{3002}' | '\u{ff0e}' | '\u{ff61}') {
            out.push((start, text.get(start..at).unwrap_or("")));
            start = at + c.len_utf8();
        }
    }
    out.push((start, text.get(start..).unwrap_or("")));
    out
}

fn strip_trailing_dot(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

/// Checks one normalized literal label.
fn check_label(label: &str, at: usize, whole: &str) -> Result<(), PatternError> {
    if label.is_empty() {
        return Err(PatternError::new(
            format!("empty label in `{whole}`"),
            "remove the extra `.`",
            at,
        ));
    }
    if let Some((i, c)) = label.char_indices().find(|&(_, c)| !is_label_char(c)) {
        return Err(PatternError::new(
            format!("invalid character `{c}` in host `{whole}`"),
            "host labels contain letters, digits, `-` and `_`",
            at + i,
        ));
    }
    if label.len() > MAX_LABEL {
        return Err(PatternError::new(
            format!("label `{label}` is longer than 63 characters"),
            "DNS labels are at most 63 characters",
            at,
        ));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(PatternError::new(
            format!("label `{label}` starts or ends with `-`"),
            "DNS labels cannot start or end with `-`",
            at,
        ));
    }
    Ok(())
}

/// Lowercases an ASCII label or converts a Unicode one to punycode.
fn ascii_label(label: &str, at: usize, whole: &str) -> Result<String, PatternError> {
    if label.is_ascii() {
        return Ok(label.to_ascii_lowercase());
    }
    match idna::domain_to_ascii(label) {
        Ok(ascii) if !ascii.is_empty() && !ascii.contains('.') => Ok(ascii),
        _ => Err(PatternError::new(
            format!("`{label}` is not a valid internationalized label in `{whole}`"),
            "write the label in punycode (`xn--...`) or fix the characters",
            at,
        )),
    }
}

fn check_length(host: &str, whole: &str) -> Result<(), PatternError> {
    if host.len() > MAX_HOST {
        return Err(PatternError::new(
            format!("host `{whole}` is longer than 253 characters"),
            "DNS names are at most 253 characters",
            0,
        ));
    }
    Ok(())
}

/// Brings a host name to the one spelling matchers compare: ASCII
/// lowercase, one trailing dot stripped, IDN labels in punycode, each label
/// checked. IP literals pass if they are hostname-shaped; callers decide
/// about IPs first.
pub fn normalize_host(raw: &str) -> Result<String, PatternError> {
    let text = strip_trailing_dot(raw);
    if text.is_empty() {
        return Err(PatternError::new(
            "empty host name",
            "write a host such as `api.example.com`",
            0,
        ));
    }
    let mut labels = Vec::new();
    for (at, label) in split_labels(text) {
        let ascii = ascii_label(label, at, raw)?;
        check_label(&ascii, at, raw)?;
        labels.push(ascii);
    }
    let host = labels.join(".");
    check_length(&host, raw)?;
    Ok(host)
}

fn parse_label(label: &str, at: usize, whole: &str) -> Result<Label, PatternError> {
    if !label.contains('*') {
        let ascii = ascii_label(label, at, whole)?;
        check_label(&ascii, at, whole)?;
        return Ok(Label::Literal(ascii));
    }
    match label {
        "*" => return Ok(Label::One),
        "**" => return Ok(Label::Many),
        _ => {}
    }
    if label.contains("**") {
        return Err(PatternError::new(
            format!("`**` mixed with text in label `{label}`"),
            "`**` must be a whole label; use `*` for part of a label",
            at,
        ));
    }
    let lower = label.to_ascii_lowercase();
    if let Some((i, c)) = lower
        .char_indices()
        .find(|&(_, c)| c != '*' && !is_label_char(c))
    {
        return Err(PatternError::new(
            format!("invalid character `{c}` in host pattern `{whole}`"),
            "wildcard labels contain ASCII letters, digits, `-`, `_` and `*`",
            at + i,
        ));
    }
    if lower.starts_with('-') || lower.ends_with('-') {
        return Err(PatternError::new(
            format!("label `{label}` starts or ends with `-`"),
            "DNS labels cannot start or end with `-`",
            at,
        ));
    }
    let toks = lower
        .chars()
        .map(|c| if c == '*' { Tok::Star } else { Tok::Lit(c) })
        .collect();
    Ok(Label::Partial(toks))
}

impl HostPattern {
    /// Parses a host pattern such as `api.example.com`, `*.example.com`,
    /// `*-api.example.com` or `**.example.com`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let body = strip_trailing_dot(text);
        if body.is_empty() {
            return Err(PatternError::new(
                "empty host pattern",
                "write a host such as `api.example.com`",
                0,
            ));
        }
        let mut labels = Vec::new();
        let mut offsets = Vec::new();
        for (at, label) in split_labels(body) {
            labels.push(parse_label(label, at, text)?);
            offsets.push(at);
        }
        check_structure(&labels, &offsets, text)?;
        let canonical = labels
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(".");
        check_length(&canonical, text)?;
        Ok(Self {
            text: canonical,
            labels,
        })
    }

    /// Whether a normalized host (output of `normalize_host`) matches.
    /// Un-normalized input (uppercase, trailing dot, Unicode) never matches
    /// a wildcard and is compared literally otherwise.
    pub fn matches(&self, host: &str) -> bool {
        let parts: Vec<&str> = host.split('.').collect();
        match self.labels.split_first() {
            Some((Label::Many, rest)) => {
                let Some(cut) = parts.len().checked_sub(rest.len()) else {
                    return false;
                };
                let (head, tail) = parts.split_at(cut);
                !head.is_empty()
                    && head.iter().all(|p| Label::Many.matches(p))
                    && rest.iter().zip(tail).all(|(l, p)| l.matches(p))
            }
            _ => {
                parts.len() == self.labels.len()
                    && self.labels.iter().zip(&parts).all(|(l, p)| l.matches(p))
            }
        }
    }

    /// A regex (regex-automata syntax) for exactly the normalized hosts
    /// `matches` accepts, to be used as a full match (`^(?:...)$`).
    pub fn to_regex(&self) -> String {
        let mut out = String::from("(?:");
        for (i, label) in self.labels.iter().enumerate() {
            if i > 0 {
                out.push_str("\\.");
            }
            label.write_regex(&mut out);
        }
        out.push(')');
        out
    }

    /// Whether the pattern has no wildcard.
    pub fn is_exact(&self) -> bool {
        !self.is_wildcard()
    }

    /// Whether the pattern has a wildcard.
    pub fn is_wildcard(&self) -> bool {
        self.labels.iter().any(Label::is_wildcard)
    }

    /// The host itself when the pattern has no wildcard.
    pub fn exact(&self) -> Option<&str> {
        self.is_exact().then_some(self.text.as_str())
    }

    /// Whether the two patterns can match a common host: exact when either
    /// is a literal host; for two wildcards a necessary condition (one
    /// literal suffix ends with the other), so it may answer yes where no
    /// host matches both, as OpenShell's own overlap test does.
    pub fn may_overlap(&self, other: &HostPattern) -> bool {
        match (self.exact(), other.exact()) {
            (Some(x), Some(y)) => x == y,
            (Some(x), None) => other.matches(x),
            (None, Some(y)) => self.matches(y),
            (None, None) => {
                let (x, y) = (self.literal_suffix(), other.literal_suffix());
                x.ends_with(y) || y.ends_with(x)
            }
        }
    }

    /// The labels right of the rightmost wildcard label (`api.example.com`
    /// for `*.api.example.com`), the whole host for an exact pattern. Every
    /// matching host ends with `.` + this, so patterns can be indexed by it.
    pub fn literal_suffix(&self) -> &str {
        let Some(last_wild) = self.labels.iter().rposition(Label::is_wildcard) else {
            return &self.text;
        };
        self.text
            .match_indices('.')
            .nth(last_wild)
            .and_then(|(dot, _)| self.text.get(dot + 1..))
            .unwrap_or("")
    }

    /// A concrete host the pattern matches, for witnesses.
    pub fn example(&self) -> String {
        self.labels
            .iter()
            .map(|l| match l {
                Label::Literal(s) => s.clone(),
                Label::One | Label::Many => "x".to_owned(),
                Label::Partial(toks) => glob::example(toks, Scope::Anything, "x"),
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The canonical pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn check_structure(labels: &[Label], offsets: &[usize], text: &str) -> Result<(), PatternError> {
    let at = |i: usize| offsets.get(i).copied().unwrap_or(0);
    if let [only] = labels
        && matches!(only, Label::One | Label::Many)
    {
        return Err(PatternError::new(
            format!("host pattern `{text}` matches every host"),
            "name the hosts, e.g. `*.example.com`; unrestricted egress is not a host rule",
            0,
        ));
    }
    if let Some(i) = labels.iter().skip(1).position(|l| *l == Label::Many) {
        return Err(PatternError::new(
            format!("`**` is only allowed as the leftmost label in `{text}`"),
            "write `**.example.com`, or use `*` for exactly one label",
            at(i + 1),
        ));
    }
    let Some(last_wild) = labels.iter().rposition(Label::is_wildcard) else {
        return Ok(());
    };
    if last_wild + 1 == labels.len() {
        return Err(PatternError::new(
            format!("wildcard top-level domain in `{text}`"),
            "write the top-level domain out, e.g. `example.com`",
            at(last_wild),
        ));
    }
    if labels.len() - last_wild - 1 < 2 {
        return Err(PatternError::new(
            format!("wildcard over a whole top-level domain in `{text}`"),
            "a wildcard needs at least two literal labels to its right, e.g. `*.example.com`",
            at(last_wild),
        ));
    }
    Ok(())
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for HostPattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

super::serde_str::impl_serde_str!(HostPattern, "a host pattern");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_is_right_of_the_rightmost_wildcard() {
        let p = HostPattern::parse("**.*-eu.api.Example.com.").unwrap();
        assert_eq!(p.to_string(), "**.*-eu.api.example.com");
        assert_eq!(p.literal_suffix(), "api.example.com");
        assert_eq!(
            HostPattern::parse("a.b.c").unwrap().literal_suffix(),
            "a.b.c"
        );
    }

    #[test]
    fn idn_labels_become_punycode() {
        assert_eq!(
            normalize_host("Bücher.example.").unwrap(),
            "xn--bcher-kva.example"
        );
        let p = HostPattern::parse("*.bücher.example").unwrap();
        assert!(p.matches("a.xn--bcher-kva.example"));
    }
}
