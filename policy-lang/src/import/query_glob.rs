//! OpenShell query-value globs → our value globs, with the same matches.
//!
//! Split from [`patterns`](super::patterns) because query values are read
//! with `.` as the delimiter, which needs its own mapping back from the
//! globset tokens; the tables are in `docs/openshell-import.md`.

use super::patterns::{MAX_EXPANSION, PathKind, push_class};
use super::rego_glob::{self, GTok};
use policy_bundle::matcher::DOTTED_PREFIX;

/// Translate one query value glob (`glob.match(g, [], v)`, where the empty
/// delimiter list means `.`) into alternatives in our value-glob syntax.
///
/// regorus first turns every `/` (no delimiter here) into a placeholder and
/// every `.` into `/./`, in the glob and in the value, then hands the glob
/// to globset with `/` as the separator. So OpenShell's `*` and `?` stop at
/// a `.`, and a `**` beside a `.` covers any run of labels. Globs with a
/// wildcard become `dotted:` globs, which have exactly that meaning; the
/// others (literals, classes) stay plain. The exact pattern `**` is every
/// value, in globset as in our `*`.
pub fn query_value(glob: &str) -> Result<Vec<String>, String> {
    if glob == "**" {
        return Ok(vec!["*".to_string()]);
    }
    if glob.contains('\0') {
        return Err("it contains a NUL, which OpenShell's `glob.match` refuses".to_string());
    }
    let rewritten = glob.replace('/', "\0").replace('.', "/./");
    let toks =
        rego_glob::parse(&rewritten).map_err(|e| format!("OpenShell cannot compile it: {e}"))?;
    let seqs = rego_glob::expand(&toks, MAX_EXPANSION).ok_or_else(|| {
        format!("its `{{...}}` alternatives expand to more than {MAX_EXPANSION} values")
    })?;
    let mut out = Vec::new();
    for seq in seqs {
        let text = query_seq(&seq)?;
        if text.contains('|') || text.chars().any(char::is_whitespace) || text.contains('#') {
            return Err("a `|`, `#` or whitespace inside a query value cannot be written in a query matcher".to_string());
        }
        if !out.contains(&text) {
            out.push(text);
        }
    }
    Ok(out)
}

/// A query glob's pieces in the value's own terms.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ValueItem {
    Lit(char),
    Star,
    Class(Vec<(char, char)>),
    /// A `.` between labels.
    Sep,
    /// Any run of characters, dots included (a recursive `**`).
    Deep,
}

/// Reads one flat globset token sequence (over the rewritten glob) as
/// value items, and writes them in our syntax.
///
/// In the rewritten value every `/` belongs to a `/./`, so `(?:/?|.*/)`
/// before `./` can only be `.*/`, and `(?:/|/.*/)` between `/.` and `./`
/// only `/.*/` (a bare `/` would make `/././`, which no value becomes):
/// the recursive tokens are `.*` runs between separators.
fn query_seq(seq: &[GTok]) -> Result<String, String> {
    let byte = "OpenShell matches globs over bytes, so its `?` and negated classes match one byte of a non-ASCII character; list the values instead";
    let mut flat: Vec<Option<ValueItem>> = Vec::new();
    for tok in seq {
        match tok {
            // `None` stands for the `/` of a separator, paired up below.
            GTok::Lit('/') => flat.push(None),
            GTok::Lit('\0') => flat.push(Some(ValueItem::Lit('/'))),
            GTok::Lit(c) => flat.push(Some(ValueItem::Lit(*c))),
            GTok::Star => flat.push(Some(ValueItem::Star)),
            GTok::Any | GTok::Class { negated: true, .. } => return Err(byte.to_string()),
            GTok::Class {
                negated: false,
                ranges,
            } => {
                if ranges
                    .iter()
                    .any(|&(lo, hi)| !hi.is_ascii() || (lo <= '/' && '.' <= hi) || lo == '\0')
                {
                    return Err(
                        "a character class over `.`, `/` or non-ASCII characters".to_string()
                    );
                }
                flat.push(Some(ValueItem::Class(ranges.clone())));
            }
            GTok::RecPrefix => flat.extend([Some(ValueItem::Deep), None]),
            GTok::RecSuffix => flat.extend([None, Some(ValueItem::Deep)]),
            GTok::RecZero => flat.extend([None, Some(ValueItem::Deep), None]),
            GTok::Alt(_) => {
                return Err(
                    "a recursive `**` inside an alternative that is followed by more pattern"
                        .to_string(),
                );
            }
        }
    }
    let mut items: Vec<ValueItem> = Vec::new();
    let mut rest = flat.as_slice();
    while let Some((first, tail)) = rest.split_first() {
        match (first, tail) {
            (None, [Some(ValueItem::Lit('.')), None, after @ ..]) => {
                items.push(ValueItem::Sep);
                rest = after;
            }
            (Some(item), _) if *item != ValueItem::Lit('.') => {
                items.push(item.clone());
                rest = tail;
            }
            _ => {
                return Err(
                    "a recursive `**` inside an alternative that is followed by more pattern"
                        .to_string(),
                );
            }
        }
    }
    let dotted = items
        .iter()
        .any(|t| matches!(t, ValueItem::Star | ValueItem::Deep));
    let mut text = String::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            ValueItem::Lit(c) => {
                if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                    text.push('\\');
                }
                text.push(*c);
            }
            ValueItem::Star => {
                if i.checked_sub(1).and_then(|j| items.get(j)) != Some(&ValueItem::Star) {
                    text.push('*');
                }
            }
            ValueItem::Class(ranges) => push_class(&mut text, false, ranges, PathKind::Binary)
                .map_err(|_| "a character class".to_string())?,
            ValueItem::Sep => text.push('.'),
            ValueItem::Deep => {
                let sep_before =
                    i == 0 || i.checked_sub(1).and_then(|j| items.get(j)) == Some(&ValueItem::Sep);
                let sep_after = i + 1 == items.len() || items.get(i + 1) == Some(&ValueItem::Sep);
                if !(sep_before && sep_after) {
                    return Err("a recursive `**` that shares its label with other characters after expansion".to_string());
                }
                // One or more labels: any run, dots included.
                text.push_str("*.**");
            }
        }
    }
    if dotted {
        text.insert_str(0, DOTTED_PREFIX);
    } else if text.starts_with(DOTTED_PREFIX) {
        text.insert(0, '\\');
    }
    Ok(text)
}
