//! The segment-level glob engine shared by HTTP path and binary path globs.
//!
//! Both kinds split on `/` and give `*`, `?` and classes the same meaning
//! inside a segment; `**` is a whole segment standing for zero or more whole
//! segments. Inputs are read with one segment model: `/` is zero segments,
//! `/a` is `[a]`, `/a/` is `[a, ""]`, `/a/b` is `[a, b]`.

use super::error::PatternError;
use super::glob::{self, Item, Scope, Syntax, Tok};

/// One segment of a path glob.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Seg {
    /// `**`: zero or more whole segments.
    Any,
    Glob(Vec<Tok>),
}

/// The two path kinds differ only at the edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathKind {
    /// Request paths: `/` is a valid input (zero segments), a trailing slash
    /// is an empty last segment, and dot or empty segments in a pattern could
    /// never meet a canonical path.
    Http,
    /// Executable paths: `/` alone, trailing slashes and `//` are not paths
    /// of a file.
    Binary,
}

impl PathKind {
    fn noun(self) -> &'static str {
        match self {
            Self::Http => "path pattern",
            Self::Binary => "binary path",
        }
    }
}

/// Splits parsed items into segments and checks the segment rules.
pub(crate) fn parse(text: &str, syntax: &Syntax, kind: PathKind) -> Result<Vec<Seg>, PatternError> {
    let items = glob::tokenize(text, syntax)?;
    let mut items = items.into_iter();
    if !matches!(items.next(), Some((0, Item::Sep))) {
        let help = match kind {
            PathKind::Http => "write an absolute path such as `/repos/**`",
            PathKind::Binary => "write an absolute path such as `/usr/bin/git`",
        };
        return Err(PatternError::new(
            format!("{} `{text}` does not start with `/`", kind.noun()),
            help,
            0,
        ));
    }
    let mut raw: Vec<(usize, Vec<Tok>)> = Vec::new();
    let mut current = (1, Vec::new());
    for (at, item) in items {
        match item {
            Item::Sep => raw.push(std::mem::replace(&mut current, (at + 1, Vec::new()))),
            Item::Tok(tok) => current.1.push(tok),
        }
    }
    if !(raw.is_empty() && current.1.is_empty()) {
        raw.push(current);
    }
    if raw.is_empty() && kind == PathKind::Binary {
        return Err(PatternError::new(
            "binary path `/` names no file",
            "use `/**` to match every executable",
            0,
        ));
    }
    let count = raw.len();
    let mut segs: Vec<Seg> = Vec::with_capacity(count);
    for (index, (at, toks)) in raw.into_iter().enumerate() {
        let seg = check_segment(text, at, toks, index + 1 == count, kind)?;
        if !(seg == Seg::Any && segs.last() == Some(&Seg::Any)) {
            segs.push(seg);
        }
    }
    Ok(segs)
}

fn check_segment(
    text: &str,
    at: usize,
    toks: Vec<Tok>,
    last: bool,
    kind: PathKind,
) -> Result<Seg, PatternError> {
    if toks == [Tok::Star, Tok::Star] {
        return Ok(Seg::Any);
    }
    if toks.windows(2).any(|w| w == [Tok::Star, Tok::Star]) {
        return Err(PatternError::new(
            format!("`**` mixed with other characters in a segment of `{text}`"),
            "use `*` within a segment or `**` as a whole segment",
            at,
        ));
    }
    if toks.is_empty() && (kind == PathKind::Binary || !last) {
        let (message, help) = match kind {
            PathKind::Http => (
                "empty segment (`//`) in a path pattern never matches",
                "`//` is collapsed before matching; write a single `/`",
            ),
            PathKind::Binary if last => (
                "binary path ends with `/`",
                "name a file; use `/dir/*` for its entries or `/dir/**` for everything below",
            ),
            PathKind::Binary => (
                "empty component (`//`) in a binary path",
                "write a single `/`",
            ),
        };
        return Err(PatternError::new(message, help, at.saturating_sub(1)));
    }
    if toks == [Tok::Lit('.')] || toks == [Tok::Lit('.'), Tok::Lit('.')] {
        let help = match kind {
            PathKind::Http => "dot segments are resolved before matching; write the resolved path",
            PathKind::Binary => "executable paths are resolved; write the resolved path",
        };
        return Err(PatternError::new(
            format!("dot segment in {} `{text}` never matches", kind.noun()),
            help,
            at,
        ));
    }
    Ok(Seg::Glob(toks))
}

/// Splits an input path by the segment model; `None` if it is not one.
fn split_input(input: &str, kind: PathKind) -> Option<Vec<&str>> {
    let rest = input.strip_prefix('/')?;
    if rest.is_empty() {
        return (kind == PathKind::Http).then(Vec::new);
    }
    Some(rest.split('/').collect())
}

/// Whether `input` matches.
pub(crate) fn matches(segs: &[Seg], input: &str, kind: PathKind) -> bool {
    split_input(input, kind).is_some_and(|parts| match_parts(segs, &parts, Scope::Segment))
}

/// Whether a list of parts (segments, or the labels of a dotted value)
/// matches, wildcards covering characters of `scope`. Greedy with one
/// backtrack point per `**`, which is exact because `**` absorbs any run of
/// parts and every other pattern part matches exactly one input part.
pub(crate) fn match_parts(segs: &[Seg], parts: &[&str], scope: Scope) -> bool {
    let part_matches = |toks: &[Tok], part: &str| glob::match_tokens(toks, part, scope, |_| true);
    let (mut p, mut i) = (0, 0);
    let mut resume: Option<(usize, usize)> = None;
    while let Some(part) = parts.get(i) {
        match segs.get(p) {
            Some(Seg::Any) => {
                resume = Some((p, i));
                p += 1;
            }
            Some(Seg::Glob(toks)) if part_matches(toks, part) => {
                p += 1;
                i += 1;
            }
            _ => match resume {
                Some((rp, ri)) => {
                    p = rp + 1;
                    i = ri + 1;
                    resume = Some((rp, ri + 1));
                }
                None => return false,
            },
        }
    }
    segs.get(p..)
        .is_some_and(|rest| rest.iter().all(|s| *s == Seg::Any))
}

/// A regex that matches no string.
const NOTHING: &str = r"[^\x{0}-\x{10FFFF}]";

/// A regex for exactly the inputs `matches` accepts.
///
/// The pattern's segments become `/seg` and `**` becomes `(?:/[^/]*)*`. That
/// reads `/` as one empty segment and the empty string as zero segments,
/// where the segment model reads `/` as zero segments; the two cases where
/// that matters (all-`**` patterns, and a single segment that can be empty)
/// are written out by hand.
pub(crate) fn to_regex(segs: &[Seg], kind: PathKind) -> String {
    regex_with(segs, kind, glob::write_regex)
}

/// How a segment's tokens are written as a regex.
type TokenWriter = fn(&mut String, &[Tok], Scope);

fn regex_with(segs: &[Seg], kind: PathKind, write: TokenWriter) -> String {
    let globs: Vec<&Vec<Tok>> = segs
        .iter()
        .filter_map(|s| match s {
            Seg::Glob(t) => Some(t),
            Seg::Any => None,
        })
        .collect();
    const SEGS: &str = "(?:/[^/]*)";
    match globs.as_slice() {
        [] if segs.is_empty() => "/".to_owned(),
        [] => match kind {
            PathKind::Http => "/(?s:.)*".to_owned(),
            PathKind::Binary => "/(?s:.)+".to_owned(),
        },
        [only] if glob::nullable(only) => {
            // `only` is `*` (any segment) or empty (the trailing empty
            // segment); the list [""] must not be read as the input `/`.
            let (one, nonempty) = if only.is_empty() {
                ("", None)
            } else {
                ("[^/]*", Some("[^/]+"))
            };
            let lead = segs.first() == Some(&Seg::Any);
            let trail = segs.last() == Some(&Seg::Any);
            let mut alts: Vec<String> = nonempty.map(|n| format!("/{n}")).into_iter().collect();
            if lead {
                let rest = if trail { "(?:/[^/]*)*" } else { "" };
                alts.push(format!("{SEGS}+/{one}{rest}"));
            }
            if trail {
                alts.push(format!("/{one}{SEGS}+"));
            }
            if alts.is_empty() {
                return NOTHING.to_owned();
            }
            format!("(?:{})", alts.join("|"))
        }
        _ => {
            let mut out = String::from("(?:");
            for seg in segs {
                match seg {
                    Seg::Any => {
                        out.push_str(SEGS);
                        out.push('*');
                    }
                    Seg::Glob(toks) => {
                        out.push('/');
                        write(&mut out, toks, Scope::Segment);
                    }
                }
            }
            out.push(')');
            out
        }
    }
}

/// The segments of a pattern on an endpoint that folds paths: letters
/// lowercased, and a trailing `/` (the last, empty segment) removed, as
/// [`fold_path`](super::http_path::fold_path) does to a request path.
pub(crate) fn fold(segs: &[Seg]) -> Vec<Seg> {
    let mut out: Vec<Seg> = segs
        .iter()
        .map(|s| match s {
            Seg::Any => Seg::Any,
            Seg::Glob(toks) => Seg::Glob(glob::lowercase_tokens(toks)),
        })
        .collect();
    if out.len() > 1 && out.last() == Some(&Seg::Glob(Vec::new())) {
        out.pop();
    }
    out
}

/// A regex for exactly the request paths `p` whose fold (ASCII lowercase,
/// one trailing `/` removed unless `p` is `/`) `folded` matches, `folded`
/// being the output of [`fold`].
///
/// Three parts: `/` itself when the pattern matches it; a path not ending
/// in `/`, in either case, when its lowercase matches; and any string the
/// pattern matches in either case, followed by one `/`.
pub(crate) fn to_folded_regex(folded: &[Seg]) -> String {
    let any_case = |segs: &[Seg]| regex_with(segs, PathKind::Http, glob::write_regex_any_case);
    let mut alts: Vec<String> = Vec::new();
    if matches(folded, "/", PathKind::Http) {
        alts.push("/".to_owned());
    }
    alts.extend(last_segment_nonempty(folded));
    alts.push(format!("{}/", any_case(folded)));
    format!("(?:{})", alts.join("|"))
}

/// A regex, letters in either case, for the paths of one or more segments
/// whose last segment is not empty that `segs` matches; `None` when there
/// are none.
fn last_segment_nonempty(segs: &[Seg]) -> Option<String> {
    let (last, init) = segs.split_last()?;
    let mut prefix = String::new();
    for seg in init {
        match seg {
            Seg::Any => prefix.push_str("(?:/[^/]*)*"),
            Seg::Glob(toks) => {
                prefix.push('/');
                glob::write_regex_any_case(&mut prefix, toks, Scope::Segment);
            }
        }
    }
    match last {
        Seg::Glob(toks) if toks.is_empty() => None,
        Seg::Glob(toks) if glob::nullable(toks) => Some(format!("{prefix}/[^/]+")),
        Seg::Glob(toks) => {
            let mut out = format!("{prefix}/");
            glob::write_regex_any_case(&mut out, toks, Scope::Segment);
            Some(out)
        }
        Seg::Any => {
            let more = format!("{prefix}(?:/[^/]*)*/[^/]+");
            Some(match last_segment_nonempty(init) {
                Some(fewer) => format!("(?:{more}|{fewer})"),
                None => more,
            })
        }
    }
}

/// Canonical text: `/` joined segments, `/` for zero segments.
pub(crate) fn to_text(segs: &[Seg]) -> String {
    if segs.is_empty() {
        return "/".to_owned();
    }
    let mut out = String::new();
    for seg in segs {
        out.push('/');
        match seg {
            Seg::Any => out.push_str("**"),
            Seg::Glob(toks) => glob::write_tokens(&mut out, toks),
        }
    }
    out
}

/// The leading segments that contain no wildcard, as plain text.
pub(crate) fn literal_prefix(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        let Seg::Glob(toks) = seg else { break };
        let Some(text) = literal_text(toks) else {
            break;
        };
        out.push('/');
        out.push_str(&text);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The unescaped text of a wildcard-free segment.
pub(crate) fn literal_text(toks: &[Tok]) -> Option<String> {
    toks.iter()
        .map(|t| match t {
            Tok::Lit(c) => Some(*c),
            _ => None,
        })
        .collect()
}

/// A concrete path the pattern matches: `**` contributes nothing unless the
/// pattern needs at least one segment there.
pub(crate) fn example(segs: &[Seg], kind: PathKind) -> String {
    let build = |any: &str| {
        let mut out = String::new();
        for seg in segs {
            match seg {
                Seg::Any if any.is_empty() => {}
                Seg::Any => {
                    out.push('/');
                    out.push_str(any);
                }
                Seg::Glob(toks) => {
                    out.push('/');
                    out.push_str(&glob::example(toks, Scope::Segment, "x"));
                }
            }
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    };
    let short = build("");
    if matches(segs, &short, kind) {
        short
    } else {
        build("x")
    }
}
