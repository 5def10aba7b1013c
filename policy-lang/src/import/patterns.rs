//! OpenShell patterns → our patterns, with exactly the same matches.
//!
//! OpenShell's globs are read with [`rego_glob`](super::rego_glob) (what its
//! runtime compiles), alternate groups are expanded into several patterns,
//! and each flat token sequence is written in our syntax. Where our syntax
//! cannot say the same thing the result is [`Translated::Inexpressible`]
//! (an E0704 error); a pattern that can never match what it is compared
//! against (a request path not starting with `/`, say) is
//! [`Translated::Never`] (the importer drops the rule with a warning, since
//! it never allowed anything). `docs/openshell-import.md` has the tables.

use super::rego_glob::{self, GTok};
use policy_bundle::matcher::HttpPathGlob;

// Callers find every pattern translation here; `query_glob` only borrows
// this module's helpers, so the re-export is the one edge back.
pub use super::query_glob::query_value;

/// The most patterns one alternation may expand into.
pub(crate) const MAX_EXPANSION: usize = 16;

/// An OpenShell pattern in our syntax, or why it cannot be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translated {
    /// Our patterns whose union matches what the OpenShell pattern matched,
    /// with notes about translations worth a warning.
    Patterns {
        /// Never empty.
        patterns: Vec<String>,
        /// One W0702 each.
        notes: Vec<String>,
    },
    /// The OpenShell pattern matches nothing it is ever compared with.
    Never(String),
    /// Our syntax cannot express the same set; the reason.
    Inexpressible(String),
}

impl Translated {
    fn one(p: String) -> Self {
        Self::Patterns {
            patterns: vec![p],
            notes: Vec::new(),
        }
    }
}

/// Which kind of path a pattern is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// Canonical HTTP request paths (rules and the endpoint `path`).
    Http,
    /// Executable paths (`/proc/<pid>/exe`).
    Binary,
}

fn parse_expand(pattern: &str) -> Result<(Vec<GTok>, Vec<Vec<GTok>>), Translated> {
    let toks = rego_glob::parse(pattern)
        .map_err(|e| Translated::Inexpressible(format!("OpenShell cannot compile it: {e}")))?;
    let seqs = rego_glob::expand(&toks, MAX_EXPANSION).ok_or_else(|| {
        Translated::Inexpressible(format!(
            "its `{{...}}` alternatives expand to more than {MAX_EXPANSION} patterns"
        ))
    })?;
    Ok((toks, seqs))
}

/// Translate a request-path or binary-path glob (`glob.match(p, ["/"], x)`).
pub fn path(pattern: &str, kind: PathKind) -> Translated {
    // OpenShell's `path_matches` treats the exact pattern `**` as "every
    // path"; globset agrees (a lone `**` compiles to `.*`).
    if pattern == "**" {
        return Translated::one("/**".to_string());
    }
    let (toks, seqs) = match parse_expand(pattern) {
        Ok(v) => v,
        Err(t) => return t,
    };
    if toks == [GTok::RecPrefix] {
        return Translated::one("/**".to_string());
    }
    let mut patterns = Vec::new();
    let mut never = None;
    let mut notes = Vec::new();
    let double = pattern.contains("**");
    for seq in &seqs {
        let mut variants = vec![seq.as_slice()];
        if let [GTok::RecPrefix, tail @ ..] = seq.as_slice() {
            // `(?:/?|.*/)R`: the empty alternative lets R match the whole
            // path too (when R starts with `*`s and a `/`).
            variants.push(tail);
        }
        for (i, v) in variants.into_iter().enumerate() {
            match path_seq(v, kind) {
                Ok(p) if has_impossible_segment(&p, kind) => {
                    if i == 0 {
                        never = Some("it has an empty, `.` or `..` segment, which canonical paths never have".to_string());
                    }
                }
                Ok(p) => {
                    if !patterns.contains(&p) {
                        patterns.push(p);
                    }
                }
                Err(Translated::Never(why)) => {
                    if i == 0 {
                        never = Some(why);
                    }
                }
                Err(other) => return other,
            }
        }
    }
    if kind == PathKind::Http
        && seqs.iter().any(|s| seq_matches(s, "/"))
        && !patterns
            .iter()
            .any(|p| HttpPathGlob::parse(p).is_ok_and(|g| g.matches("/")))
    {
        // OpenShell reads `/` as one empty segment (`/*` matches it); we
        // read it as none, so the root is added as a pattern of its own.
        patterns.push("/".to_string());
    }
    if patterns.is_empty() {
        return Translated::Never(never.unwrap_or_else(|| "it matches nothing".to_string()));
    }
    if seqs.len() > 1 {
        notes.push(format!(
            "its `{{...}}` alternatives become {} patterns",
            patterns.len()
        ));
    }
    if double
        && seqs
            .iter()
            .any(|s| s.windows(2).any(|w| w == [GTok::Star, GTok::Star]))
    {
        notes.push(
            "a `**` that shares its segment with other characters means `*` in OpenShell"
                .to_string(),
        );
    }
    Translated::Patterns { patterns, notes }
}

fn path_seq(seq: &[GTok], kind: PathKind) -> Result<String, Translated> {
    let mut out = String::new();
    let mut rest = seq;
    if let [GTok::RecPrefix, tail @ ..] = seq {
        // `(?:/?|.*/)R` on an absolute path: R matches from just after some
        // `/`, which is our `/**/R`.
        if tail.is_empty() {
            return Ok("/**".to_string());
        }
        if tail.first().is_some_and(GTok::can_match_slash) {
            return Err(Translated::Inexpressible(
                "a `/` right after a leading `**/`".to_string(),
            ));
        }
        out.push_str("/**/");
        rest = tail;
    } else {
        // Paths start with `/`: leading `*`s can only match the empty string.
        let skip = seq.iter().take_while(|t| **t == GTok::Star).count();
        rest = rest.get(skip..).unwrap_or(&[]);
        match rest.first() {
            Some(GTok::Lit('/') | GTok::RecSuffix | GTok::RecZero) => {}
            Some(t @ GTok::Class { .. }) if t.can_match_slash() => {
                return Err(Translated::Inexpressible(
                    "a character class that can match the leading `/`".to_string(),
                ));
            }
            None => {
                return Err(Translated::Never(
                    "it can only match an empty path".to_string(),
                ));
            }
            Some(_) => {
                return Err(Translated::Never(
                    "it does not start with `/` (or `**`), so it never matches an absolute path"
                        .to_string(),
                ));
            }
        }
    }
    let last = rest.len().saturating_sub(1);
    let mut star = false;
    for (i, tok) in rest.iter().enumerate() {
        let was_star = std::mem::replace(&mut star, false);
        match tok {
            GTok::Lit('/') => out.push('/'),
            GTok::Lit(c) => push_literal(&mut out, *c, kind),
            GTok::Any => out.push('?'),
            GTok::Star => {
                star = true;
                if !was_star {
                    out.push('*');
                }
            }
            GTok::Class { negated, ranges } => {
                if tok.can_match_slash() {
                    return Err(Translated::Inexpressible(
                        "a character class that can match `/` (in OpenShell a class is not confined to one segment)".to_string(),
                    ));
                }
                push_class(&mut out, *negated, ranges, kind)?;
            }
            GTok::RecSuffix if i == last => {
                // `/.*`: one or more segments, the first possibly empty.
                if out.is_empty() {
                    out.push_str("/**");
                } else {
                    out.push_str("/*/**");
                }
            }
            GTok::RecZero => out.push_str("/**/"),
            GTok::RecSuffix | GTok::RecPrefix | GTok::Alt(_) => {
                return Err(Translated::Inexpressible(
                    "a recursive `**` inside an alternative that is followed by more pattern"
                        .to_string(),
                ));
            }
        }
    }
    if kind == PathKind::Binary && out.ends_with('/') {
        return Err(Translated::Never(
            "it ends with `/`, so it never names an executable".to_string(),
        ));
    }
    Ok(out)
}

/// A `//`, `.` or `..` segment (or, for executables, a trailing `/`):
/// paths are canonical (OpenShell collapses `//` and resolves dot segments
/// before matching, the kernel reports resolved executable paths), so such
/// a pattern never matches.
fn has_impossible_segment(ours: &str, kind: PathKind) -> bool {
    if kind == PathKind::Binary && ours == "/" {
        return true;
    }
    let segs: Vec<&str> = ours.split('/').skip(1).collect();
    let last = segs.len().saturating_sub(1);
    segs.iter().enumerate().any(|(i, s)| {
        *s == "."
            || *s == ".."
            || (s.is_empty() && (i < last || kind == PathKind::Binary) && ours != "/")
    })
}

/// Whether a flat token sequence matches `input` (globset's regex meaning,
/// `/` the separator); backtracking, for short inputs such as `/`.
fn seq_matches(seq: &[GTok], input: &str) -> bool {
    let chars: Vec<char> = input.chars().collect();
    matches_from(seq, &chars)
}

fn matches_from(seq: &[GTok], input: &[char]) -> bool {
    let Some((tok, rest)) = seq.split_first() else {
        return input.is_empty();
    };
    // Every split point where `tok` can end, then the rest.
    let any_run = |from: usize, stop_at_slash: bool| -> Vec<usize> {
        let mut ends = vec![from];
        for (i, c) in input.iter().enumerate().skip(from) {
            if *c == '\n' || (stop_at_slash && *c == '/') {
                break;
            }
            ends.push(i + 1);
        }
        ends
    };
    let first_is = |c: char| input.first() == Some(&c);
    let ends: Vec<usize> = match tok {
        GTok::Lit(c) => {
            if first_is(*c) {
                vec![1]
            } else {
                vec![]
            }
        }
        GTok::Any => {
            if input.first().is_some_and(|c| *c != '/') {
                vec![1]
            } else {
                vec![]
            }
        }
        GTok::Class { negated, ranges } => match input.first() {
            Some(c) if ranges.iter().any(|&(lo, hi)| lo <= *c && *c <= hi) != *negated => vec![1],
            _ => vec![],
        },
        GTok::Star => any_run(0, true),
        // `(?:/?|.*/)`
        GTok::RecPrefix => {
            let mut e = vec![0];
            if first_is('/') {
                e.push(1);
            }
            e.extend(
                any_run(0, false)
                    .into_iter()
                    .filter(|&i| i > 0 && input.get(i - 1) == Some(&'/')),
            );
            e
        }
        // `/.*`
        GTok::RecSuffix => {
            if first_is('/') {
                any_run(1, false)
            } else {
                vec![]
            }
        }
        // `(?:/|/.*/)`
        GTok::RecZero => {
            if first_is('/') {
                any_run(1, false)
                    .into_iter()
                    .filter(|&i| input.get(i - 1) == Some(&'/'))
                    .collect()
            } else {
                vec![]
            }
        }
        GTok::Alt(_) => vec![],
    };
    ends.into_iter()
        .any(|e| matches_from(rest, input.get(e..).unwrap_or(&[])))
}

/// Our escape for a literal character in a segment glob.
fn push_literal(out: &mut String, c: char, kind: PathKind) {
    match kind {
        PathKind::Binary => {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        PathKind::Http => {
            // OpenShell matches the decoded path; ours keeps reserved and
            // unsafe characters percent-encoded, so write those encoded.
            let keep = c.is_ascii_alphanumeric() || "-._~!$&'()+,;=:@".contains(c);
            if keep {
                out.push(c);
            } else if matches!(c, '*' | '[' | ']') {
                out.push('\\');
                out.push(c);
            } else {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
}

pub(super) fn push_class(
    out: &mut String,
    negated: bool,
    ranges: &[(char, char)],
    kind: PathKind,
) -> Result<(), Translated> {
    if kind == PathKind::Http
        && ranges.iter().any(|&(lo, hi)| {
            !lo.is_ascii_graphic() || !hi.is_ascii_graphic() || lo <= '%' && '%' <= hi
        })
    {
        return Err(Translated::Inexpressible(
            "a character class over characters that request paths keep percent-encoded".to_string(),
        ));
    }
    out.push('[');
    if negated {
        out.push('!');
    }
    for &(lo, hi) in ranges {
        push_class_char(out, lo);
        if hi != lo {
            out.push('-');
            push_class_char(out, hi);
        }
    }
    out.push(']');
    Ok(())
}

fn push_class_char(out: &mut String, c: char) {
    if matches!(c, '\\' | ']' | '[' | '-' | '!' | '^') {
        out.push('\\');
    }
    out.push(c);
}

/// Translate a binary `path`. Without `*` OpenShell compares it exactly
/// (no glob at all), so special characters are escaped.
pub fn binary(path: &str) -> Translated {
    if path.contains('*') {
        return self::path(path, PathKind::Binary);
    }
    if !path.starts_with('/') {
        return Translated::Never(
            "it is not an absolute path, and OpenShell compares it exactly".to_string(),
        );
    }
    if path.len() > 1 && path.ends_with('/') {
        return Translated::Never("it ends with `/`, so it never names an executable".to_string());
    }
    if has_impossible_segment(path, PathKind::Binary) {
        return Translated::Never(
            "it has an empty, `.` or `..` component, which resolved executable paths never have"
                .to_string(),
        );
    }
    let mut out = String::new();
    for c in path.chars() {
        push_literal(&mut out, c, PathKind::Binary);
    }
    Translated::one(out)
}

/// Why OpenShell refuses an endpoint host when it loads the policy, if it
/// does: its L7 validator (and, since 2026-07, its policy validator) rejects
/// these wildcard shapes with an error, so such a policy never runs and
/// there is nothing to translate. Checked against OpenShell 2f7fb65
/// (`validate_host_wildcard`); bare `*` has been refused since host
/// wildcards exist (2026-03, before that it was compared as the literal
/// text `*` and matched no host).
pub(crate) fn openshell_refused_host(host: &str) -> Option<&'static str> {
    if !host.contains('*') {
        return None;
    }
    if host == "*" || host == "**" {
        return Some("a bare `*` or `**` matches all hosts");
    }
    let labels: Vec<&str> = host.split('.').collect();
    let first = labels.first().copied().unwrap_or_default();
    if first.contains("**") && first != "**" {
        return Some("`**` is only allowed as the entire first DNS label");
    }
    for label in labels.iter().skip(1) {
        if label.contains("**") {
            return Some("`**` is only allowed as the entire first DNS label");
        }
        if label.contains('*') && *label != "*" {
            return Some("a wildcard in a later label must be the entire label `*`");
        }
    }
    if labels.len() <= 2 {
        return Some(
            "a wildcard needs at least two labels to its right (no TLD or single-label wildcards)",
        );
    }
    None
}

/// Translate an endpoint host. Without `*` OpenShell compares it exactly
/// (case-insensitively); with `*` it is a glob over `.`-separated labels.
pub fn host(host: &str) -> Translated {
    let lower = host.to_ascii_lowercase();
    if !lower.contains('*') {
        return Translated::one(lower);
    }
    if lower
        .chars()
        .any(|c| matches!(c, '?' | '[' | ']' | '\\' | '/'))
    {
        return Translated::Inexpressible(
            "host patterns here have only `*` and `**` wildcards (no `?`, classes or escapes)"
                .to_string(),
        );
    }
    let hosts = match expand_braces(&lower) {
        Ok(h) => h,
        Err(why) => return Translated::Inexpressible(why),
    };
    let mut patterns = Vec::new();
    for h in &hosts {
        if !h.contains('*') {
            // An alternative without `*` is still glob-matched: a literal.
            patterns.push(h.clone());
            continue;
        }
        match host_labels(h) {
            Ok(p) => patterns.push(p),
            Err(t) => return t,
        }
    }
    patterns.dedup();
    let notes = if hosts.len() > 1 {
        vec![format!(
            "its `{{...}}` alternatives become {} endpoints",
            patterns.len()
        )]
    } else {
        Vec::new()
    };
    Translated::Patterns { patterns, notes }
}

fn host_labels(h: &str) -> Result<String, Translated> {
    let labels: Vec<&str> = h.split('.').collect();
    if labels.len() == 1 {
        let why = if h == "*" {
            "bare `*` matches every single-label host name in OpenShell; name the domain, e.g. `*.example.com`"
        } else {
            "a wildcard host without a domain matches every host name"
        };
        return Err(Translated::Inexpressible(why.to_string()));
    }
    let mut out = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        if *label == "**" {
            if i == 0 {
                out.push("**".to_string());
                continue;
            }
            return Err(Translated::Inexpressible(
                "`**` as a label other than the leftmost (one or more labels in OpenShell; ours allows it leftmost only)".to_string(),
            ));
        }
        // Any other run of `*` in a label is globset's `[^/]*`: part of one
        // label, possibly empty.
        let mut collapsed = String::new();
        for c in label.chars() {
            if !(c == '*' && collapsed.ends_with('*')) {
                collapsed.push(c);
            }
        }
        out.push(collapsed);
    }
    Ok(out.join("."))
}

/// Expand simple (non-nested) `{a,b}` groups, dropping empty alternatives
/// as globset does.
fn expand_braces(text: &str) -> Result<Vec<String>, String> {
    let Some(open) = text.find('{') else {
        if text.contains('}') {
            return Err("an unopened `}`".to_string());
        }
        return Ok(vec![text.to_string()]);
    };
    let (head, after) = text.split_at(open);
    let after = after.get(1..).unwrap_or("");
    let close = after.find('}').ok_or("an unclosed `{`")?;
    let (group, tail) = after.split_at(close);
    let tail = tail.get(1..).unwrap_or("");
    if group.contains('{') {
        return Err("nested `{...}` groups".to_string());
    }
    if group.contains("**") {
        return Err("`**` inside a `{...}` group".to_string());
    }
    let mut alts: Vec<&str> = group.split(',').filter(|a| !a.is_empty()).collect();
    if alts.is_empty() {
        alts.push("");
    }
    let mut out = Vec::new();
    for rest in expand_braces(tail)? {
        for alt in &alts {
            out.push(format!("{head}{alt}{rest}"));
            if out.len() > MAX_EXPANSION {
                return Err(format!(
                    "`{{...}}` alternatives that expand to more than {MAX_EXPANSION} hosts"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(t: Translated) -> Vec<String> {
        match t {
            Translated::Patterns { patterns, .. } => patterns,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn path_translations() {
        let p = |s| ours(path(s, PathKind::Http));
        assert_eq!(p("**"), ["/**"]);
        assert_eq!(p("/**"), ["/**"]);
        assert_eq!(p("/repos/**"), ["/repos/*/**"]);
        assert_eq!(p("/**/info/refs*"), ["/**/info/refs*"]);
        assert_eq!(p("**/info/refs"), ["/**/info/refs"]);
        assert_eq!(p("/api**"), ["/api*"]);
        assert_eq!(p("/x/**.json"), ["/x/*.json"]);
        assert_eq!(p("/a/{b,c}/d"), ["/a/b/d", "/a/c/d"]);
        assert_eq!(p("*/x"), ["/x"]);
        assert_eq!(p("/a b%"), ["/a%20b%25"]);
        assert!(matches!(
            path("api/x", PathKind::Http),
            Translated::Never(_)
        ));
        assert!(matches!(
            path("/a[!x]", PathKind::Http),
            Translated::Inexpressible(_)
        ));
        assert!(matches!(
            path("/a[", PathKind::Http),
            Translated::Inexpressible(_)
        ));
    }

    #[test]
    fn binary_translations() {
        assert_eq!(
            ours(binary("/sandbox/.uv/python/**/python3*")),
            ["/sandbox/.uv/python/**/python3*"]
        );
        assert_eq!(
            ours(binary("/sandbox/.uv/python/**")),
            ["/sandbox/.uv/python/*/**"]
        );
        assert_eq!(ours(binary("/**")), ["/**"]);
        assert_eq!(
            ours(binary("/usr/bin/python3.[0-9]")),
            ["/usr/bin/python3.\\[0-9\\]"]
        );
        assert!(matches!(binary("python3"), Translated::Never(_)));
    }

    #[test]
    fn host_translations() {
        assert_eq!(ours(host("API.GitHub.com")), ["api.github.com"]);
        assert_eq!(ours(host("*.x.com")), ["*.x.com"]);
        assert_eq!(ours(host("**.x.com")), ["**.x.com"]);
        assert_eq!(ours(host("a**.x.com")), ["a*.x.com"]);
        assert_eq!(ours(host("*.{a,b}.com")), ["*.a.com", "*.b.com"]);
        assert!(matches!(host("*"), Translated::Inexpressible(_)));
        assert!(matches!(host("**"), Translated::Inexpressible(_)));
        assert!(matches!(host("a.**.com"), Translated::Inexpressible(_)));
        assert!(matches!(host("a?.*.com"), Translated::Inexpressible(_)));
    }

    #[test]
    fn hosts_openshell_refuses_at_load() {
        for refused in [
            "*",
            "**",
            "*.com",
            "**.com",
            "*-api",
            "api.*",
            "a**.example.com",
            "api.**.example.com",
            "a.b*.example.com",
        ] {
            assert!(openshell_refused_host(refused).is_some(), "{refused}");
        }
        for loaded in [
            "api.example.com",
            "*.example.com",
            "**.example.com",
            "*-api.example.com",
            "a.*.example.com",
            "*.{a,b}.example.com",
        ] {
            assert_eq!(openshell_refused_host(loaded), None, "{loaded}");
        }
    }

    #[test]
    fn query_translations() {
        assert_eq!(query_value("main").unwrap(), ["main"]);
        assert_eq!(query_value("{open,closed}").unwrap(), ["open", "closed"]);
        assert_eq!(query_value("**").unwrap(), ["*"]);
        assert_eq!(query_value("v1.*").unwrap(), ["dotted:v1.*"]);
        assert!(query_value("v?").is_err());
        assert!(query_value("a|b").is_err());
    }
}
