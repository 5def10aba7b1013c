//! The character-level glob engine shared by HTTP paths, binary paths and
//! query values.
//!
//! One tokenizer, one matcher and one regex emitter, so the three glob kinds
//! cannot drift apart: they differ only in which characters a wildcard may
//! cover (`Scope`) and in which literal characters their input can contain
//! (`Syntax::check_literal`).

use std::fmt::Write as _;

use super::error::PatternError;

/// One element of a glob after parsing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Tok {
    Lit(char),
    /// Zero or more characters of the scope.
    Star,
    /// Exactly one character of the scope.
    One,
    Class(CharClass),
}

/// A bracket class, kept as sorted, merged ranges so that `[abc]` and
/// `[a-c]` compare equal and print the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CharClass {
    negated: bool,
    ranges: Vec<(char, char)>,
}

/// What a wildcard may cover. Segment globs never cross `/`, label globs
/// (dotted query values) never cross `.`; a plain query value has no
/// delimiter at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Segment,
    Label,
    Anything,
}

impl Scope {
    pub(crate) fn allows(self, c: char) -> bool {
        match self {
            Self::Segment => c != '/',
            Self::Label => c != '.',
            Self::Anything => true,
        }
    }

    fn excluded(self) -> Option<char> {
        match self {
            Self::Segment => Some('/'),
            Self::Label => Some('.'),
            Self::Anything => None,
        }
    }

    fn regex_one(self) -> &'static str {
        match self {
            Self::Segment => "[^/]",
            Self::Label => r"[^\.]",
            Self::Anything => "(?s:.)",
        }
    }
}

/// One parsed item: a token or a path separator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Sep,
    Tok(Tok),
}

/// How a glob kind reads its text.
pub(crate) struct Syntax {
    /// The character that separates segments (`/`) or labels (`.`); it may
    /// not appear inside a class or escape.
    pub(crate) separator: Option<char>,
    /// `%XX` escapes are normalized the way request canonicalization does.
    pub(crate) percent: bool,
    /// Rejects a literal character the input can never contain.
    pub(crate) check_literal: fn(char, usize) -> Result<(), PatternError>,
}

impl CharClass {
    pub(crate) fn contains(&self, c: char) -> bool {
        let inside = self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        inside != self.negated
    }

    /// The class once a pattern is folded to lowercase: every ASCII
    /// uppercase letter among its members (for a negated class, among the
    /// characters it excludes) becomes its lowercase letter, so `[A-Z]`
    /// reads `[a-z]` and `[!A-Z]` reads `[!a-z]`.
    pub(crate) fn lowercased(&self) -> CharClass {
        let mut ranges = Vec::with_capacity(self.ranges.len() + 2);
        for &(lo, hi) in &self.ranges {
            let (inside, outside) = split_letters(lo, hi, 'A', 'Z');
            ranges.extend(outside);
            ranges.extend(inside.map(|(l, h)| (l.to_ascii_lowercase(), h.to_ascii_lowercase())));
        }
        CharClass {
            negated: self.negated,
            ranges: merge_ranges(ranges),
        }
    }

    /// The class with both cases of every ASCII letter among its members:
    /// for a lowercased class, exactly the characters whose lowercase it
    /// reads.
    pub(crate) fn case_closed(&self) -> CharClass {
        let mut ranges = self.ranges.clone();
        for &(lo, hi) in &self.ranges {
            if let (Some((l, h)), _) = split_letters(lo, hi, 'a', 'z') {
                ranges.push((l.to_ascii_uppercase(), h.to_ascii_uppercase()));
            }
            if let (Some((l, h)), _) = split_letters(lo, hi, 'A', 'Z') {
                ranges.push((l.to_ascii_lowercase(), h.to_ascii_lowercase()));
            }
        }
        CharClass {
            negated: self.negated,
            ranges: merge_ranges(ranges),
        }
    }

    fn write_text(&self, out: &mut String) {
        out.push('[');
        if self.negated {
            out.push('!');
        }
        for &(lo, hi) in &self.ranges {
            push_class_char(out, lo);
            if hi != lo {
                out.push('-');
                push_class_char(out, hi);
            }
        }
        out.push(']');
    }

    fn write_regex(&self, out: &mut String, scope: Scope) {
        let excluded = scope.excluded();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &(lo, hi) in &self.ranges {
            let (lo, hi) = (u32::from(lo), u32::from(hi));
            match excluded.map(u32::from) {
                Some(x) if !self.negated && lo <= x && x <= hi => {
                    if lo < x {
                        ranges.push((lo, x - 1));
                    }
                    if x < hi {
                        ranges.push((x + 1, hi));
                    }
                }
                _ => ranges.push((lo, hi)),
            }
        }
        if self.negated
            && let Some(x) = excluded
        {
            ranges.push((u32::from(x), u32::from(x)));
        }
        if ranges.is_empty() {
            // Only reachable for a class whose sole member the scope excludes;
            // this class matches nothing.
            out.push_str(r"[^\x{0}-\x{10FFFF}]");
            return;
        }
        out.push('[');
        if self.negated {
            out.push('^');
        }
        for (lo, hi) in ranges {
            let _ = write!(out, r"\x{{{lo:X}}}");
            if hi != lo {
                let _ = write!(out, r"-\x{{{hi:X}}}");
            }
        }
        out.push(']');
    }

    /// A realistic member for witnesses: a lowercase letter or digit when the
    /// class has one, so examples stay canonical paths.
    fn example(&self, scope: Scope) -> Option<char> {
        let preferred = "xabcdefghijklmnopqrstuvwyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_~";
        preferred
            .chars()
            .chain(self.ranges.iter().flat_map(|&(lo, hi)| [lo, hi]))
            .chain((' '..='~').chain('\u{a0}'..='\u{ff}'))
            .find(|&c| self.contains(c) && scope.allows(c))
    }
}

fn push_class_char(out: &mut String, c: char) {
    if matches!(c, '\\' | ']' | '[' | '-' | '!' | '^') {
        out.push('\\');
    }
    out.push(c);
}

/// Characters that have a meaning in our glob syntax and need `\` to be
/// literal.
fn is_glob_special(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '\\')
}

/// Writes a literal character into regex syntax. Only regex-syntax's meta
/// characters are escaped: escaping anything else is not always a no-op
/// (`\<` is a word boundary).
pub(crate) fn push_regex_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else if matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    ) {
        out.push('\\');
        out.push(c);
    } else if c.is_ascii_graphic() {
        out.push(c);
    } else {
        let _ = write!(out, r"\x{{{:X}}}", u32::from(c));
    }
}

/// Writes tokens back as canonical glob text.
pub(crate) fn write_tokens(out: &mut String, toks: &[Tok]) {
    for tok in toks {
        match tok {
            Tok::Lit(c) => {
                if is_glob_special(*c) {
                    out.push('\\');
                }
                out.push(*c);
            }
            Tok::Star => out.push('*'),
            Tok::One => out.push('?'),
            Tok::Class(class) => class.write_text(out),
        }
    }
}

/// Writes tokens as a regex over one scope.
pub(crate) fn write_regex(out: &mut String, toks: &[Tok], scope: Scope) {
    for tok in toks {
        match tok {
            Tok::Lit(c) => push_regex_literal(out, *c),
            Tok::Star => {
                out.push_str(scope.regex_one());
                out.push('*');
            }
            Tok::One => out.push_str(scope.regex_one()),
            Tok::Class(class) => class.write_regex(out, scope),
        }
    }
}

/// The tokens once a pattern is folded: ASCII letters lowercased, classes
/// as [`CharClass::lowercased`].
pub(crate) fn lowercase_tokens(toks: &[Tok]) -> Vec<Tok> {
    toks.iter()
        .map(|t| match t {
            Tok::Lit(c) => Tok::Lit(c.to_ascii_lowercase()),
            Tok::Class(class) => Tok::Class(class.lowercased()),
            other => other.clone(),
        })
        .collect()
}

/// Writes lowercased tokens as a regex over one scope for every string
/// whose ASCII lowercase they match: a letter stands for both its cases.
pub(crate) fn write_regex_any_case(out: &mut String, toks: &[Tok], scope: Scope) {
    for tok in toks {
        match tok {
            Tok::Lit(c) if c.is_ascii_alphabetic() => {
                out.push('[');
                out.push(c.to_ascii_lowercase());
                out.push(c.to_ascii_uppercase());
                out.push(']');
            }
            Tok::Class(class) => class.case_closed().write_regex(out, scope),
            other => write_regex(out, std::slice::from_ref(other), scope),
        }
    }
}

/// A concrete string the tokens match: `*` → `x`, `?` → `x`, a class → a
/// member. `star` is what a `*` becomes (callers pass `""` to retry).
pub(crate) fn example(toks: &[Tok], scope: Scope, star: &str) -> String {
    let mut out = String::new();
    for tok in toks {
        match tok {
            Tok::Lit(c) => out.push(*c),
            Tok::Star => out.push_str(star),
            Tok::One => out.push('x'),
            Tok::Class(class) => {
                if let Some(c) = class.example(scope) {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Whether `input` matches `toks`, where wildcards cover characters of
/// `scope` and, for `*`, only characters accepted by `star_ok`.
///
/// A dynamic program over (token, position): linear in the input for each
/// token, so a hostile pattern or input cannot make it backtrack
/// exponentially.
pub(crate) fn match_tokens(
    toks: &[Tok],
    input: &str,
    scope: Scope,
    star_ok: fn(char) -> bool,
) -> bool {
    let chars: Vec<char> = input.chars().collect();
    let mut cur = vec![false; chars.len() + 1];
    if let Some(first) = cur.first_mut() {
        *first = true;
    }
    for tok in toks {
        let mut next = vec![false; chars.len() + 1];
        match tok {
            Tok::Star => {
                let mut reach = false;
                let prev = std::iter::once(None).chain(chars.iter().map(Some));
                for ((nx, &here), before) in next.iter_mut().zip(&cur).zip(prev) {
                    if let Some(&c) = before {
                        reach = reach && scope.allows(c) && star_ok(c);
                    }
                    reach = reach || here;
                    *nx = reach;
                }
            }
            single => {
                for ((nx, &here), &c) in next.iter_mut().skip(1).zip(&cur).zip(&chars) {
                    *nx = here
                        && match single {
                            Tok::Lit(l) => *l == c,
                            Tok::One => scope.allows(c),
                            Tok::Class(class) => scope.allows(c) && class.contains(c),
                            Tok::Star => false,
                        };
                }
            }
        }
        if !next.iter().any(|&b| b) {
            return false;
        }
        cur = next;
    }
    cur.last().copied().unwrap_or(false)
}

/// Whether a token sequence can match the empty string.
pub(crate) fn nullable(toks: &[Tok]) -> bool {
    toks.iter().all(|t| *t == Tok::Star)
}

/// Parses glob text into items, with byte offsets for errors.
pub(crate) fn tokenize(text: &str, syntax: &Syntax) -> Result<Vec<(usize, Item)>, PatternError> {
    let mut items = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let item = match c {
            c if Some(c) == syntax.separator => Item::Sep,
            '*' => Item::Tok(Tok::Star),
            '?' => Item::Tok(Tok::One),
            '[' => Item::Tok(Tok::Class(parse_class(text, at, &mut chars, syntax)?)),
            '\\' => {
                let Some((lit_at, lit)) = chars.next() else {
                    return Err(PatternError::new(
                        "pattern ends with a lone `\\`",
                        "write `\\\\` for a literal backslash, or remove it",
                        at,
                    ));
                };
                if lit == '/' && syntax.separator == Some('/') {
                    return Err(PatternError::new(
                        "a segment cannot contain an escaped `/`",
                        "`/` always separates segments; use `%2F` for an encoded slash",
                        at,
                    ));
                }
                if lit == '.' && syntax.separator == Some('.') {
                    return Err(PatternError::new(
                        "a label cannot contain an escaped `.`",
                        "`.` always separates labels in a `dotted:` glob; use a plain glob to match a literal `.` anywhere",
                        at,
                    ));
                }
                if lit == '%' && syntax.percent {
                    return Err(PatternError::new(
                        "`%` cannot be escaped",
                        "write a percent-escape such as `%25` instead",
                        at,
                    ));
                }
                (syntax.check_literal)(lit, lit_at)?;
                Item::Tok(Tok::Lit(lit))
            }
            '%' if syntax.percent => {
                push_percent(text, at, &mut chars, &mut items)?;
                continue;
            }
            _ => {
                (syntax.check_literal)(c, at)?;
                Item::Tok(Tok::Lit(c))
            }
        };
        items.push((at, item));
    }
    Ok(items)
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

/// Normalizes `%XX` the way `canonicalize_path` does, so a pattern written
/// with `%7e` or `%2f` still matches the canonical path.
fn push_percent(
    text: &str,
    at: usize,
    chars: &mut Chars<'_>,
    items: &mut Vec<(usize, Item)>,
) -> Result<(), PatternError> {
    let hi = chars.next().and_then(|(_, c)| c.to_digit(16));
    let lo = chars.next().and_then(|(_, c)| c.to_digit(16));
    let (Some(hi), Some(lo)) = (hi, lo) else {
        let shown: String = text.get(at..).unwrap_or("").chars().take(3).collect();
        return Err(PatternError::new(
            format!("invalid percent-escape `{shown}`"),
            "`%` must be followed by two hex digits, e.g. `%2F`",
            at,
        ));
    };
    let byte = hi * 16 + lo;
    let decoded = char::from_u32(byte).unwrap_or('\0');
    if byte == 0 {
        return Err(PatternError::new(
            "`%00` never appears in a canonical path",
            "requests containing `%00` are rejected before matching; remove it",
            at,
        ));
    }
    if decoded == '\\' {
        return Err(PatternError::new(
            "`%5C` never appears in a canonical path",
            "requests with a backslash in the path are rejected before matching; remove it",
            at,
        ));
    }
    if super::canon::decodes_to_literal(decoded) {
        items.push((at, Item::Tok(Tok::Lit(decoded))));
    } else {
        for c in ['%', hex_digit(hi), hex_digit(lo)] {
            items.push((at, Item::Tok(Tok::Lit(c))));
        }
    }
    Ok(())
}

fn hex_digit(v: u32) -> char {
    char::from_digit(v, 16).map_or('0', |c| c.to_ascii_uppercase())
}

fn parse_class(
    text: &str,
    open: usize,
    chars: &mut Chars<'_>,
    syntax: &Syntax,
) -> Result<CharClass, PatternError> {
    let unclosed = || {
        PatternError::new(
            format!(
                "unclosed character class `{}`",
                text.get(open..).unwrap_or("")
            ),
            "close the class with `]`, or write `\\[` for a literal `[`",
            open,
        )
    };
    let mut negated = false;
    match chars.peek() {
        Some(&(_, '!')) => {
            negated = true;
            chars.next();
        }
        Some(&(at, '^')) => {
            return Err(PatternError::new(
                "`[^` is not a negated class here",
                "write `[!...]` to negate a class, or `[\\^...]` for a literal `^`",
                at,
            ));
        }
        _ => {}
    }
    let mut ranges: Vec<(char, char)> = Vec::new();
    loop {
        let (at, c) = chars.next().ok_or_else(unclosed)?;
        let lo = match c {
            ']' => break,
            '\\' => chars.next().ok_or_else(unclosed)?.1,
            _ => c,
        };
        check_class_char(lo, at, syntax)?;
        let is_range = matches!(chars.peek(), Some(&(_, '-')))
            && chars.clone().nth(1).is_some_and(|(_, n)| n != ']');
        if !is_range {
            ranges.push((lo, lo));
            continue;
        }
        chars.next();
        let (hi_at, hc) = chars.next().ok_or_else(unclosed)?;
        let hi = if hc == '\\' {
            chars.next().ok_or_else(unclosed)?.1
        } else {
            hc
        };
        check_class_char(hi, hi_at, syntax)?;
        if hi < lo {
            return Err(PatternError::new(
                format!("reversed range `{lo}-{hi}` in a character class"),
                format!("write the smaller bound first: `{hi}-{lo}`"),
                at,
            ));
        }
        ranges.push((lo, hi));
    }
    if ranges.is_empty() {
        return Err(PatternError::new(
            "empty character class",
            "list at least one character, e.g. `[abc]` or `[a-z]`",
            open,
        ));
    }
    Ok(CharClass {
        negated,
        ranges: merge_ranges(ranges),
    })
}

fn check_class_char(c: char, at: usize, syntax: &Syntax) -> Result<(), PatternError> {
    if c == '/' && syntax.separator == Some('/') {
        return Err(PatternError::new(
            "a character class cannot contain `/`",
            "a class matches one character within a segment; `/` separates segments",
            at,
        ));
    }
    if c == '.' && syntax.separator == Some('.') {
        return Err(PatternError::new(
            "a character class cannot contain `.`",
            "a class matches one character within a label; `.` separates labels",
            at,
        ));
    }
    if c.is_control() {
        return Err(PatternError::new(
            "control character in a character class",
            "remove it",
            at,
        ));
    }
    Ok(())
}

/// An inclusive range of characters.
type Range = (char, char);

/// The part of `lo..=hi` within `first..=last`, and the parts outside it.
fn split_letters(lo: char, hi: char, first: char, last: char) -> (Option<Range>, Vec<Range>) {
    let mut outside = Vec::new();
    if lo < first {
        outside.push((lo, hi.min(before(first))));
    }
    if hi > last {
        outside.push((lo.max(after(last)), hi));
    }
    let inside = (lo <= last && hi >= first).then(|| (lo.max(first), hi.min(last)));
    (inside, outside)
}

/// The ASCII character before `c` (`c` is an ASCII letter here).
fn before(c: char) -> char {
    char::from_u32(u32::from(c).saturating_sub(1)).unwrap_or(c)
}

/// The character after `c` (`c` is an ASCII letter here).
fn after(c: char) -> char {
    char::from_u32(u32::from(c).saturating_add(1)).unwrap_or(c)
}

fn merge_ranges(mut ranges: Vec<(char, char)>) -> Vec<(char, char)> {
    ranges.sort_unstable();
    let mut merged: Vec<(char, char)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        if let Some(last) = merged.last_mut() {
            let adjacent = u32::from(last.1).checked_add(1) == Some(u32::from(lo));
            if lo <= last.1 || adjacent {
                last.1 = last.1.max(hi);
                continue;
            }
        }
        merged.push((lo, hi));
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: char, _: usize) -> Result<(), PatternError> {
        Ok(())
    }

    const VALUE: Syntax = Syntax {
        separator: None,
        percent: false,
        check_literal: any,
    };

    fn toks(text: &str) -> Vec<Tok> {
        tokenize(text, &VALUE)
            .unwrap()
            .into_iter()
            .filter_map(|(_, i)| match i {
                Item::Tok(t) => Some(t),
                Item::Sep => None,
            })
            .collect()
    }

    #[test]
    fn classes_merge_and_print_canonically() {
        let mut out = String::new();
        write_tokens(&mut out, &toks("[cab][!x-z0-9]"));
        assert_eq!(out, "[a-c][!0-9x-z]");
    }

    #[test]
    fn dp_matches_stars_without_backtracking_blowup() {
        let pattern = toks(&"*a".repeat(30));
        assert!(!match_tokens(
            &pattern,
            &"a".repeat(29),
            Scope::Anything,
            |_| true
        ));
        assert!(match_tokens(
            &pattern,
            &"a".repeat(300),
            Scope::Anything,
            |_| true
        ));
    }

    #[test]
    fn class_errors_point_at_the_bracket() {
        assert_eq!(tokenize("ab[cd", &VALUE).unwrap_err().offset, 2);
        assert!(tokenize("[]", &VALUE).is_err());
        assert!(tokenize("[z-a]", &VALUE).is_err());
        assert!(tokenize("[^a]", &VALUE).is_err());
        assert!(tokenize("a\\", &VALUE).is_err());
    }
}
