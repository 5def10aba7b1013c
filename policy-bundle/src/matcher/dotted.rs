//! Dotted value globs: query-value globs in which `.` delimits labels.
//!
//! OpenShell matches query values with `glob.match(g, [], v)`, and an empty
//! delimiter list means `.`: its `*` never crosses a `.`, so `1.*` admits
//! `1.2` but not `1.2.3`. A plain value glob has no "run without `.`", so
//! that meaning gets a kind of its own, written `dotted:GLOB` in a query
//! matcher (see `query.rs`); the prefix keeps anyone from writing it by
//! accident.
//!
//! The value is read as labels split on `.` (`1.2` is `[1, 2]`, the empty
//! value is one empty label, `a.` is `[a, ""]`). Inside a label `*`, `?` and
//! classes never match `.`; `**` as a whole label stands for zero or more
//! whole labels. It is the segment model of paths with `.` for `/`.

use std::fmt;

use super::error::PatternError;
use super::glob::{self, Item, Scope, Syntax, Tok};
use super::segments::{self, Seg};

/// A glob over the `.`-separated labels of a decoded query value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct DottedGlob {
    text: String,
    labels: Vec<Seg>,
}

/// Refuses a NUL in a query value pattern; plain query value globs
/// ([`super::query`]) use it too.
pub(super) fn check_literal(c: char, at: usize) -> Result<(), PatternError> {
    if c == '\0' {
        return Err(PatternError::new(
            "NUL in a query value pattern",
            "query strings containing NUL are rejected before matching; remove it",
            at,
        ));
    }
    Ok(())
}

const SYNTAX: Syntax = Syntax {
    separator: Some('.'),
    percent: false,
    check_literal,
};

/// Zero or more labels, each after a `.`.
const MORE_LABELS: &str = r"(?:\.[^\.]*)*";

impl DottedGlob {
    /// Parses the glob after `dotted:`, such as `1.*` or `**.json`.
    pub(crate) fn parse(text: &str) -> Result<Self, PatternError> {
        let mut raw: Vec<(usize, Vec<Tok>)> = Vec::new();
        let mut current = (0, Vec::new());
        for (at, item) in glob::tokenize(text, &SYNTAX)? {
            match item {
                Item::Sep => raw.push(std::mem::replace(&mut current, (at + 1, Vec::new()))),
                Item::Tok(tok) => current.1.push(tok),
            }
        }
        raw.push(current);
        let mut labels: Vec<Seg> = Vec::with_capacity(raw.len());
        for (at, toks) in raw {
            let label = if toks == [Tok::Star, Tok::Star] {
                Seg::Any
            } else if toks.windows(2).any(|w| w == [Tok::Star, Tok::Star]) {
                return Err(PatternError::new(
                    format!("`**` mixed with other characters in a label of `{text}`"),
                    "use `*` within a label or `**` as a whole label",
                    at,
                ));
            } else {
                Seg::Glob(toks)
            };
            if !(label == Seg::Any && labels.last() == Some(&Seg::Any)) {
                labels.push(label);
            }
        }
        let text = labels
            .iter()
            .map(|l| match l {
                Seg::Any => "**".to_owned(),
                Seg::Glob(toks) => {
                    let mut out = String::new();
                    glob::write_tokens(&mut out, toks);
                    out
                }
            })
            .collect::<Vec<_>>()
            .join(".");
        Ok(Self { text, labels })
    }

    /// Whether a decoded value matches.
    pub(crate) fn matches(&self, value: &str) -> bool {
        let parts: Vec<&str> = value.split('.').collect();
        segments::match_parts(&self.labels, &parts, Scope::Label)
    }

    /// A regex (regex-automata syntax) for exactly the values `matches`
    /// accepts, to be used as a full match (`^(?:...)$`).
    ///
    /// Read over `.` + value, every label is `\.LABEL` and `**` is
    /// `(?:\.[^.]*)*`; the leading `.` is then moved to the right of a
    /// leading `**` so the regex reads the value itself.
    pub(crate) fn to_regex(&self) -> String {
        let label = |out: &mut String, toks: &[Tok]| glob::write_regex(out, toks, Scope::Label);
        let mut out = String::from("(?:");
        let rest = match self.labels.as_slice() {
            [Seg::Any] => {
                out.push_str("(?s:.)*)");
                return out;
            }
            [Seg::Any, Seg::Glob(first), rest @ ..] => {
                out.push_str(r"(?:[^\.]*\.)*");
                label(&mut out, first);
                rest
            }
            [Seg::Glob(first), rest @ ..] => {
                label(&mut out, first);
                rest
            }
            // Not produced by `parse`: at least one label, no `**` twice
            // in a row.
            _ => &[],
        };
        for l in rest {
            match l {
                Seg::Any => out.push_str(MORE_LABELS),
                Seg::Glob(toks) => {
                    out.push_str(r"\.");
                    label(&mut out, toks);
                }
            }
        }
        out.push(')');
        out
    }

    /// A concrete value the pattern matches, for witnesses.
    pub(crate) fn example(&self) -> String {
        let short = self.example_with("x", None);
        if self.matches(&short) {
            short
        } else {
            self.example_with("x", Some("x"))
        }
    }

    /// A value built from the pattern: each `*` becomes `star`, each `**`
    /// becomes `any` (or nothing). Witness search passes a `star` with a
    /// `.` in it to get the near miss that tells this kind from a plain glob.
    pub(crate) fn example_with(&self, star: &str, any: Option<&str>) -> String {
        self.labels
            .iter()
            .filter_map(|l| match l {
                Seg::Any => any.map(str::to_owned),
                Seg::Glob(toks) => Some(glob::example(toks, Scope::Label, star)),
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The canonical pattern text (without the `dotted:` prefix).
    /// Whether the glob has no wildcard: it matches one value only.
    pub(crate) fn is_literal(&self) -> bool {
        self.labels.iter().all(|l| match l {
            Seg::Any => false,
            Seg::Glob(toks) => toks.iter().all(|t| matches!(t, Tok::Lit(_))),
        })
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for DottedGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_stays_in_its_label() {
        let g = DottedGlob::parse("1.*").unwrap();
        assert!(g.matches("1.2"));
        assert!(g.matches("1."));
        assert!(!g.matches("1.2.3"));
        assert!(!g.matches("1"));
    }

    #[test]
    fn double_star_is_whole_labels() {
        let g = DottedGlob::parse("a.**.b").unwrap();
        assert!(g.matches("a.b"));
        assert!(g.matches("a.x.y.b"));
        assert!(!g.matches("ab"));
        assert!(DottedGlob::parse("a**").is_err());
        assert_eq!(DottedGlob::parse("**.**.a").unwrap().as_str(), "**.a");
    }
}
