//! W0112: a deny rule on an endpoint without `fold_paths` that a server
//! folding ASCII case or a trailing slash would not honour.
//!
//! Many servers route `/Admin`, `/admin` and `/admin/` to one handler.
//! Path rules match case-sensitively and exactly unless the endpoint says
//! `fold_paths`, so against such a server a deny rule covers one spelling
//! of what it means to refuse. Allow rules are not warned about: there a
//! server's folding only takes requests away.

use policy_bundle::matcher::HttpPathGlob;

use crate::diag::{Diagnostic, codes};
use crate::source::{Node, SourceFile, Span};

use super::Resolver;

/// The first path of a deny rule that has another spelling (ASCII case,
/// a trailing slash) the rule does not match, with that spelling.
pub(super) struct Unfolded {
    span: Span,
    glob: HttpPathGlob,
    escape: String,
    more: usize,
}

impl Unfolded {
    /// Notes the paths of one deny rule.
    pub(super) fn note(found: &mut Option<Unfolded>, paths: &[Node<String>]) {
        for p in paths {
            let Ok(glob) = HttpPathGlob::parse(&p.node) else {
                continue;
            };
            let Some(escape) = other_spelling(&glob) else {
                continue;
            };
            match found {
                Some(first) => first.more += 1,
                None => {
                    *found = Some(Unfolded {
                        span: p.span,
                        glob,
                        escape,
                        more: 0,
                    });
                }
            }
        }
    }

    /// W0112, once per endpoint, at its first such path.
    pub(super) fn warn(self, r: &mut Resolver, file: &SourceFile) {
        let more = match self.more {
            0 => String::new(),
            1 => " (so does 1 more deny path on this endpoint)".to_owned(),
            n => format!(" (so do {n} more deny paths on this endpoint)"),
        };
        // OpenShell YAML has no such option; the language does.
        let help = if crate::source::is_yaml(std::path::Path::new(file.path())) {
            "OpenShell matches paths as written and has no option to fold them: if the server ignores ASCII case or a trailing slash, deny the other spellings too, or import the policy (`openshell-policy import`) and add `fold_paths` to the endpoint"
        } else {
            "if the server ignores ASCII case or a trailing slash in paths, add `fold_paths` to the endpoint's options so its rules match every spelling; otherwise deny the other spellings too"
        };
        r.diags.push(
            Diagnostic::new(
                codes::W0112,
                file,
                self.span,
                format!(
                    "deny path `{}` is case-sensitive and exact about a trailing slash: it denies `{}` but not `{}`{more}",
                    self.glob,
                    self.glob.example(),
                    self.escape
                ),
            )
            .label("a server that folds case or a trailing slash serves both alike")
            .help(help),
        );
    }
}

/// A spelling of a path the glob matches, differing only in ASCII case or
/// a trailing slash, that the glob does not match.
fn other_spelling(glob: &HttpPathGlob) -> Option<String> {
    let example = glob.example();
    let upper = upper_outside_escapes(&example);
    let slash = match example.strip_suffix('/') {
        Some(bare) if !bare.is_empty() => bare.to_owned(),
        Some(_) => return (upper != example && !glob.matches(&upper)).then_some(upper),
        None => format!("{example}/"),
    };
    [upper, slash]
        .into_iter()
        .find(|s| *s != example && !glob.matches(s))
}

/// `path` with its ASCII letters uppercased, but not the hex digits of its
/// escapes, which a canonical path already writes in uppercase.
fn upper_outside_escapes(path: &str) -> String {
    let mut escape = 0;
    path.chars()
        .map(|c| {
            if c == '%' {
                escape = 2;
                c
            } else if escape > 0 {
                escape -= 1;
                c
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelling(text: &str) -> Option<String> {
        HttpPathGlob::parse(text)
            .ok()
            .and_then(|g| other_spelling(&g))
    }

    #[test]
    fn names_a_spelling_the_rule_misses() {
        assert_eq!(spelling("/admin/**").as_deref(), Some("/ADMIN"));
        assert_eq!(spelling("/123").as_deref(), Some("/123/"));
        assert_eq!(spelling("/123/").as_deref(), Some("/123"));
        assert_eq!(spelling("/a%C3%A9").as_deref(), Some("/A%C3%A9"));
    }

    #[test]
    fn is_silent_when_every_spelling_is_matched() {
        assert_eq!(spelling("/**"), None);
        assert_eq!(spelling("/"), None);
        assert_eq!(spelling("/[aA]/**"), None);
        assert_eq!(spelling("/1/**"), None);
    }
}
