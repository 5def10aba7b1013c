//! OpenShell's glob syntax, read the way its runtime reads it.
//!
//! OpenShell evaluates its Rego policy with regorus 0.9, whose `glob.match`
//! is built on `globset` 0.4 (`literal_separator(true)`, backslash escapes
//! on): for the delimiter `/` the pattern goes to globset unchanged; for
//! `.` (hosts, and query values, where an empty delimiter list means `.`)
//! every `.` is first rewritten to `/./` so that globset's separator logic
//! applies to labels. This module mirrors globset's parser token for token
//! (notably the rules that decide when `**` is recursive and when it is just
//! two `*`), so the translation to our patterns starts from exactly what
//! OpenShell compiles. The mirror is checked against globset itself in
//! `tests/import_patterns.rs`.

/// One globset token. Regex meaning (with `/` the separator):
/// `Any` = `[^/]`, `Star` = `[^/]*`, `RecPrefix` = `(?:/?|.*/)`,
/// `RecSuffix` = `/.*`, `RecZero` = `(?:/|/.*/)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GTok {
    Lit(char),
    Any,
    Star,
    RecPrefix,
    RecSuffix,
    RecZero,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alt(Vec<Vec<GTok>>),
}

impl GTok {
    /// Whether this single-character token can match a `/`.
    pub(crate) fn can_match_slash(&self) -> bool {
        match self {
            GTok::Lit(c) => *c == '/',
            GTok::Class { negated, ranges } => {
                let inside = ranges.iter().any(|&(lo, hi)| lo <= '/' && '/' <= hi);
                inside != *negated
            }
            _ => false,
        }
    }
}

fn is_separator(c: char) -> bool {
    c == '/'
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    prev: Option<char>,
    cur: Option<char>,
    branches: Vec<Vec<GTok>>,
    alternates: Vec<usize>,
}

/// Parse a glob as globset 0.4.18 does. `Err` carries globset's reason.
pub(crate) fn parse(glob: &str) -> Result<Vec<GTok>, String> {
    let mut p = Parser {
        chars: glob.chars().peekable(),
        prev: None,
        cur: None,
        branches: vec![Vec::new()],
        alternates: Vec::new(),
    };
    while let Some(c) = p.bump() {
        match c {
            '?' => p.push(GTok::Any)?,
            '*' => p.star()?,
            '[' => p.class()?,
            '{' => {
                p.alternates.push(p.branches.len());
                p.branches.push(Vec::new());
            }
            '}' => {
                let start = p.alternates.pop().ok_or("unopened alternate group `}`")?;
                let alts: Vec<Vec<GTok>> = p.branches.drain(start..).collect();
                p.push(GTok::Alt(alts))?;
            }
            ',' if !p.alternates.is_empty() => p.branches.push(Vec::new()),
            '\\' => {
                let c = p.bump().ok_or("dangling `\\` at the end")?;
                p.push(GTok::Lit(c))?;
            }
            c => p.push(GTok::Lit(c))?,
        }
    }
    if !p.alternates.is_empty() || p.branches.len() != 1 {
        return Err("unclosed alternate group `{`".to_string());
    }
    Ok(p.branches.pop().unwrap_or_default())
}

impl Parser<'_> {
    fn bump(&mut self) -> Option<char> {
        self.prev = self.cur;
        self.cur = self.chars.next();
        self.cur
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn push(&mut self, tok: GTok) -> Result<(), String> {
        match self.branches.last_mut() {
            Some(b) => {
                b.push(tok);
                Ok(())
            }
            None => Err("unopened alternate group".to_string()),
        }
    }

    fn pop(&mut self) -> Option<GTok> {
        self.branches.last_mut().and_then(Vec::pop)
    }

    fn have_tokens(&self) -> bool {
        self.branches.last().is_some_and(|b| !b.is_empty())
    }

    fn two_stars(&mut self) -> Result<(), String> {
        self.push(GTok::Star)?;
        self.push(GTok::Star)
    }

    /// globset's `parse_star`, rule for rule.
    fn star(&mut self) -> Result<(), String> {
        let prev = self.prev;
        if self.peek() != Some('*') {
            return self.push(GTok::Star);
        }
        self.bump();
        if !self.have_tokens() {
            if !self.peek().is_none_or(is_separator) {
                return self.two_stars();
            }
            self.push(GTok::RecPrefix)?;
            self.bump();
            return Ok(());
        }
        if !prev.is_some_and(is_separator)
            && (self.branches.len() <= 1 || (prev != Some(',') && prev != Some('{')))
        {
            return self.two_stars();
        }
        let is_suffix = match self.peek() {
            None => true,
            Some(',' | '}') if self.branches.len() >= 2 => true,
            Some(c) if is_separator(c) => {
                self.bump();
                false
            }
            _ => return self.two_stars(),
        };
        let tok = match self.pop() {
            Some(GTok::RecPrefix) => GTok::RecPrefix,
            Some(GTok::RecSuffix) => GTok::RecSuffix,
            _ if is_suffix => GTok::RecSuffix,
            _ => GTok::RecZero,
        };
        self.push(tok)
    }

    /// globset's `parse_class` (an unclosed class is an error).
    fn class(&mut self) -> Result<(), String> {
        let mut ranges: Vec<(char, char)> = Vec::new();
        let negated = matches!(self.peek(), Some('!' | '^'));
        if negated {
            self.bump();
        }
        let mut first = true;
        let mut in_range = false;
        loop {
            let c = self.bump().ok_or("unclosed character class `[`")?;
            match c {
                ']' if !first => break,
                '-' if !first && in_range => {
                    extend_range(&mut ranges, '-')?;
                    in_range = false;
                }
                '-' if !first => in_range = true,
                c => {
                    if in_range {
                        extend_range(&mut ranges, c)?;
                    } else {
                        ranges.push((c, c));
                    }
                    in_range = false;
                }
            }
            first = false;
        }
        if in_range {
            ranges.push(('-', '-'));
        }
        self.push(GTok::Class { negated, ranges })
    }
}

fn extend_range(ranges: &mut [(char, char)], hi: char) -> Result<(), String> {
    let Some(last) = ranges.last_mut() else {
        return Err("invalid character range".to_string());
    };
    last.1 = hi;
    if last.1 < last.0 {
        return Err(format!("invalid character range `{}-{}`", last.0, last.1));
    }
    Ok(())
}

/// Expand alternate groups into flat token sequences whose union is the
/// glob. Empty alternatives are dropped, as globset drops them (its
/// `empty_alternates` option is off), unless every alternative is empty.
/// `None` when there would be more than `limit` sequences.
pub(crate) fn expand(toks: &[GTok], limit: usize) -> Option<Vec<Vec<GTok>>> {
    let mut out: Vec<Vec<GTok>> = vec![Vec::new()];
    for tok in toks {
        match tok {
            GTok::Alt(branches) => {
                let mut alts: Vec<Vec<GTok>> = Vec::new();
                for b in branches {
                    alts.extend(expand(b, limit)?.into_iter().filter(|s| !s.is_empty()));
                }
                if alts.is_empty() {
                    continue;
                }
                let mut next = Vec::new();
                for prefix in &out {
                    for alt in &alts {
                        let mut seq = prefix.clone();
                        seq.extend(alt.iter().cloned());
                        next.push(seq);
                    }
                }
                if next.len() > limit {
                    return None;
                }
                out = next;
            }
            t => out.iter_mut().for_each(|s| s.push(t.clone())),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::GTok::*;
    use super::*;

    #[test]
    fn double_star_is_recursive_only_at_segment_edges() {
        assert_eq!(parse("**").unwrap(), vec![RecPrefix]);
        assert_eq!(parse("/**").unwrap(), vec![RecSuffix]);
        assert_eq!(parse("/a/**").unwrap(), vec![Lit('/'), Lit('a'), RecSuffix]);
        assert_eq!(parse("/**/b").unwrap(), vec![RecZero, Lit('b')]);
        assert_eq!(parse("**/b").unwrap(), vec![RecPrefix, Lit('b')]);
        assert_eq!(parse("/a**").unwrap(), vec![Lit('/'), Lit('a'), Star, Star]);
        assert_eq!(
            parse("/**.json").unwrap(),
            vec![
                Lit('/'),
                Star,
                Star,
                Lit('.'),
                Lit('j'),
                Lit('s'),
                Lit('o'),
                Lit('n')
            ]
        );
    }

    #[test]
    fn classes_alternates_and_escapes() {
        assert_eq!(
            parse("[!a-c]").unwrap(),
            vec![Class {
                negated: true,
                ranges: vec![('a', 'c')]
            }]
        );
        assert_eq!(
            parse("[]-]").unwrap(),
            vec![Class {
                negated: false,
                ranges: vec![(']', ']'), ('-', '-')]
            }]
        );
        assert_eq!(parse("\\*a").unwrap(), vec![Lit('*'), Lit('a')]);
        assert_eq!(parse("a,b").unwrap(), vec![Lit('a'), Lit(','), Lit('b')]);
        assert!(parse("[abc").is_err());
        assert!(parse("{a,b").is_err());
        assert!(parse("a}").is_err());
        assert!(parse("[c-a]").is_err());
        let alts = expand(&parse("/{a,b}/{c,}").unwrap(), 16).unwrap();
        assert_eq!(alts.len(), 2);
        assert_eq!(alts[1], vec![Lit('/'), Lit('b'), Lit('/'), Lit('c')]);
        assert!(expand(&parse("{a,b}{c,d}{e,f}").unwrap(), 4).is_none());
    }
}
