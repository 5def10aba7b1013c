//! Writing a suggestion into the policy: rules in this language inserted
//! before the policy block's closing brace (in the formatter's layout, so
//! `fmt` leaves them unchanged), or OpenShell `network_policies` entries
//! for a YAML policy.

use std::fmt::Write as _;

use policy_lang::fmt::token;

use crate::narrow::Suggestion;

/// The rules in this language, indented for the policy block, with a
/// comment naming the log lines each admits. `taken` holds words the
/// policy already uses, so a pinned binary set gets a fresh name.
pub fn dsl(suggestions: &[Suggestion], log: &str, taken: &str) -> String {
    let mut out = String::new();
    let mut used = Vec::new();
    for s in suggestions {
        let _ = writeln!(out, "  # {}", lines_comment(log, &s.lines));
        let subject = match &s.sha256 {
            Some(hash) => {
                let name = fresh_name(&s.binary, taken, &used);
                let _ = writeln!(
                    out,
                    "  binaries {name} = {} sha256:{hash}",
                    token(&s.binary)
                );
                used.push(name.clone());
                name
            }
            None => token(&s.binary),
        };
        let _ = write!(out, "  allow {subject} -> {}:{}", s.dest, s.port);
        if s.inspected {
            out.push_str(" http");
        }
        if s.rules.is_empty() && s.addresses.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str(" {\n");
        if !s.addresses.is_empty() {
            let list: Vec<String> = s.addresses.iter().map(ToString::to_string).collect();
            let _ = writeln!(out, "    addresses {}", list.join(" "));
        }
        for r in &s.rules {
            let paths: Vec<String> = r.paths.iter().map(|p| token(p)).collect();
            let _ = writeln!(out, "    allow {} {}", r.methods.join(" "), paths.join(" "));
        }
        out.push_str("  }\n");
    }
    out
}

/// `deny.log:3, 7, 9 and 12 more`
fn lines_comment(log: &str, lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(5).map(ToString::to_string).collect();
    let more = lines.len().saturating_sub(shown.len());
    let mut text = format!("denied in {log}:{}", shown.join(", "));
    if more > 0 {
        let _ = write!(text, " and {more} more");
    }
    text
}

fn fresh_name(binary: &str, taken: &str, used: &[String]) -> String {
    let base = format!("pinned_{}", identifier(file_name(binary)));
    let free = |n: &str| {
        !used.iter().any(|u| u == n)
            && !taken
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == n)
    };
    if free(&base) {
        return base;
    }
    (2..)
        .map(|i| format!("{base}_{i}"))
        .find(|n| free(n))
        .unwrap_or(base)
}

/// The policy text with `rules` inserted before the main block's closing
/// brace, after a blank line. `None` when the text has no such brace.
pub fn insert_dsl(text: &str, rules: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let close = lines.iter().rposition(|l| l.trim_end() == "}")?;
    let mut out = String::with_capacity(text.len() + rules.len() + 2);
    for l in lines.iter().take(close) {
        out.push_str(l);
        out.push('\n');
    }
    let previous_blank = close == 0
        || lines
            .get(close - 1)
            .is_some_and(|l| l.trim().is_empty() || l.trim_end().ends_with('{'));
    if !previous_blank {
        out.push('\n');
    }
    out.push_str(rules);
    for l in lines.iter().skip(close) {
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}

/// What a YAML suggestion leaves out or adds because OpenShell's format
/// cannot say it.
pub fn yaml_notes(suggestions: &[Suggestion]) -> Vec<String> {
    let mut notes = Vec::new();
    for s in suggestions {
        if s.sha256.is_some() {
            notes.push(format!(
                "OpenShell YAML has no binary pin: `{}` is admitted whatever its content (the log gave its SHA-256)",
                s.binary
            ));
        }
        if s.inspected && s.rules.is_empty() {
            notes.push(format!(
                "OpenShell needs `access` or `rules` on an inspected endpoint: `access: read-only` on `{}:{}` admits GET, HEAD and OPTIONS on every path, more than the denied connection",
                s.dest, s.port
            ));
        }
    }
    notes
}

/// `network_policies` entries in OpenShell's schema, indented by two
/// spaces per level from column 0.
pub fn yaml(suggestions: &[Suggestion], log: &str) -> String {
    let mut out = String::new();
    let mut keys: Vec<String> = Vec::new();
    for s in suggestions {
        let base = identifier(&format!(
            "suggested_{}_{}_{}",
            file_name(&s.binary),
            s.dest,
            s.port
        ));
        let mut key = base.clone();
        let mut i = 2;
        while keys.contains(&key) {
            key = format!("{base}_{i}");
            i += 1;
        }
        keys.push(key.clone());
        let q = |s: &str| serde_json::Value::from(s).to_string();
        let _ = writeln!(out, "# {}", lines_comment(log, &s.lines));
        let _ = writeln!(out, "{key}:");
        out.push_str("  endpoints:\n");
        let host = s.dest.trim_start_matches('[').trim_end_matches(']');
        let _ = writeln!(out, "    - host: {}", q(host));
        let _ = writeln!(out, "      port: {}", s.port);
        if s.inspected {
            out.push_str("      protocol: rest\n      enforcement: enforce\n");
            if s.rules.is_empty() {
                out.push_str("      access: read-only\n");
            } else {
                out.push_str("      rules:\n");
                for r in &s.rules {
                    for m in &r.methods {
                        for p in &r.paths {
                            let _ = writeln!(
                                out,
                                "        - allow: {{ method: {}, path: {} }}",
                                q(m),
                                q(p)
                            );
                        }
                    }
                }
            }
        }
        if !s.addresses.is_empty() {
            let list: Vec<String> = s.addresses.iter().map(|a| q(&a.to_string())).collect();
            let _ = writeln!(out, "      allowed_ips: [{}]", list.join(", "));
        }
        out.push_str("  binaries:\n");
        let _ = writeln!(out, "    - {{ path: {} }}", q(s.binary.trim_matches('"')));
    }
    out
}

/// The YAML policy with `entries` added to its `network_policies` map:
/// right after the key when it is a block mapping (or empty), or as a new
/// map at the end when there is none. `None` for a flow-style map with
/// entries, which cannot be extended line by line.
pub fn insert_yaml(text: &str, entries: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| {
        l.strip_prefix("network_policies:").is_some_and(|rest| {
            let rest = rest.trim();
            rest.is_empty() || rest.starts_with('#') || rest == "{}"
        })
    });
    let indent_all = |indent: usize| -> String {
        let pad = " ".repeat(indent);
        entries
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_owned()
                } else {
                    format!("{pad}{l}\n")
                }
            })
            .collect()
    };
    let Some(h) = header else {
        if lines.iter().any(|l| l.starts_with("network_policies:")) {
            return None;
        }
        let mut out = text.to_owned();
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str("network_policies:\n");
        out.push_str(&indent_all(2));
        return Some(out);
    };
    let indent = lines
        .iter()
        .skip(h + 1)
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.len() - l.trim_start().len())
        .filter(|n| *n > 0)
        .unwrap_or(2);
    let mut out = String::with_capacity(text.len() + entries.len() * 2);
    for (i, l) in lines.iter().enumerate() {
        if i == h {
            out.push_str("network_policies:\n");
            out.push_str(&indent_all(indent));
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    Some(out)
}

/// The last component of a binary's path, unquoted.
fn file_name(binary: &str) -> &str {
    binary.trim_matches('"').rsplit('/').next().unwrap_or("bin")
}

/// `text` as a name the language accepts: ASCII letters and digits in
/// lower case, `_` for everything else.
fn identifier(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_before_the_closing_brace() {
        let text = "policy \"p\" {\n  fs read /usr\n}\n";
        let got = insert_dsl(text, "  allow /usr/bin/curl -> example.com:443\n").unwrap();
        assert_eq!(
            got,
            "policy \"p\" {\n  fs read /usr\n\n  allow /usr/bin/curl -> example.com:443\n}\n"
        );
    }

    #[test]
    fn yaml_goes_under_network_policies() {
        let text = "version: 1\nnetwork_policies:\n    a:\n      x: 1\n";
        let got = insert_yaml(text, "k:\n  v: 1\n").unwrap();
        assert_eq!(
            got,
            "version: 1\nnetwork_policies:\n    k:\n      v: 1\n    a:\n      x: 1\n"
        );
        let got = insert_yaml("version: 1\n", "k: 1\n").unwrap();
        assert_eq!(got, "version: 1\nnetwork_policies:\n  k: 1\n");
        assert_eq!(insert_yaml("network_policies: {a: 1}\n", "k: 1\n"), None);
    }
}
