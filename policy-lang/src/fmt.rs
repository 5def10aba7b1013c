//! The canonical formatter: one statement per line, two-space indentation,
//! single spaces between tokens, options in a fixed order, comments and
//! paragraph breaks kept where the author put them. Statement order is the
//! author's; formatting never changes what a policy means.

use std::fmt::Write as _;

use crate::ast::*;

/// The canonical text of a document, comments kept. Parsing the output
/// gives an equal document, and formatting it again changes nothing.
pub fn format_document(doc: &Document) -> String {
    let mut out = String::new();
    trivia_lines(&mut out, &doc.header, 0);
    let kind = match doc.kind {
        DocKind::Policy => "policy",
        DocKind::Fragment => "fragment",
    };
    let _ = write!(out, "{kind} {} {{", quote_always(&doc.name.node));
    trailing(&mut out, doc.header_trailing.as_deref());
    for item in &doc.items {
        trivia_lines(&mut out, &item.trivia.before, 1);
        indent(&mut out, 1);
        stmt(&mut out, &item.stmt.node, item.trivia.trailing.as_deref());
    }
    trivia_lines(&mut out, &doc.end, 1);
    out.push_str("}\n");
    if !doc.footer.is_empty() {
        out.push('\n');
        trivia_lines(&mut out, &doc.footer, 0);
    }
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn trailing(out: &mut String, comment: Option<&str>) {
    if let Some(c) = comment {
        out.push_str("  #");
        if !c.is_empty() {
            out.push(' ');
            out.push_str(c);
        }
    }
    out.push('\n');
}

fn trivia_lines(out: &mut String, lines: &[TriviaLine], level: usize) {
    for l in lines {
        match l {
            TriviaLine::Blank => out.push('\n'),
            TriviaLine::Comment(c) => {
                indent(out, level);
                out.push('#');
                if !c.is_empty() {
                    out.push(' ');
                    out.push_str(c);
                }
                out.push('\n');
            }
        }
    }
}

/// A value as a token: bare when the grammar reads it back as one word,
/// quoted otherwise.
pub fn token(v: &str) -> String {
    let bare = !v.is_empty()
        && v != "->"
        && !v.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '#' | '{' | '}' | '"' | '\\')
        });
    if bare { v.to_string() } else { quote_always(v) }
}

fn quote_always(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

fn join<'a>(values: impl IntoIterator<Item = &'a String>) -> String {
    values
        .into_iter()
        .map(|v| token(v))
        .collect::<Vec<_>>()
        .join(" ")
}

fn stmt(out: &mut String, s: &Stmt, comment: Option<&str>) {
    match s {
        Stmt::Include(p) => {
            let _ = write!(out, "include {}", quote_always(&p.node));
        }
        Stmt::Landlock { mode, min_abi } => {
            out.push_str(match mode.node {
                LandlockMode::BestEffort => "landlock best_effort",
                LandlockMode::Hard => "landlock hard",
            });
            if let Some(abi) = min_abi {
                let _ = write!(out, " min_abi {}", abi.node);
            }
        }
        Stmt::RunAs { user, group } => {
            out.push_str("run_as");
            if let Some(u) = user {
                let _ = write!(out, " user {}", token(&u.node));
            }
            if let Some(g) = group {
                let _ = write!(out, " group {}", token(&g.node));
            }
        }
        Stmt::Fs { kind, targets } => {
            let k = match kind.node {
                FsKind::Read => "read",
                FsKind::Write => "write",
                FsKind::Exec => "exec",
                FsKind::Deny => "deny",
            };
            let _ = write!(out, "fs {k}");
            for t in targets {
                match &t.node {
                    FsTarget::Workdir => out.push_str(" workdir"),
                    FsTarget::Path(p) => {
                        out.push(' ');
                        out.push_str(&token(p));
                    }
                }
            }
        }
        Stmt::Binaries { name, members } => {
            let _ = write!(out, "binaries {} =", name.node);
            for m in members {
                out.push(' ');
                out.push_str(&token(&m.path.node));
                if let Some(pin) = &m.pin {
                    out.push(' ');
                    out.push_str(&pin.node.to_ascii_lowercase());
                }
            }
        }
        Stmt::Secret {
            name,
            source,
            hosts,
        } => {
            let _ = write!(
                out,
                "secret {} {} hosts {}",
                name.node,
                secret_source(&source.node),
                join(hosts.iter().map(|h| &h.node))
            );
        }
        Stmt::Credential(c) => {
            credential(out, c, comment);
            return;
        }
        Stmt::Allow(a) => {
            allow(out, a, comment);
            return;
        }
        Stmt::Advisor { subjects } => {
            out.push_str("advisor");
            if !subjects.is_empty() {
                out.push(' ');
                out.push_str(&join(subjects.iter().map(|s| &s.node)));
            }
        }
        Stmt::Invalid(text) => out.push_str(text.trim_end()),
    }
    trailing(out, comment);
}

fn secret_source(s: &SecretSource) -> String {
    match s {
        SecretSource::Env(v) => format!("env {}", token(v)),
        SecretSource::File(p) => format!("file {}", token(p)),
    }
}

fn credential(out: &mut String, c: &Credential, comment: Option<&str>) {
    let _ = write!(out, "credential {} {{", c.name.node);
    trailing(out, c.header_trailing.as_deref());
    for item in &c.items {
        trivia_lines(out, &item.trivia.before, 2);
        indent(out, 2);
        match &item.stmt.node {
            CredStmt::Secret(s) => {
                let _ = write!(out, "secret {}", secret_source(&s.node));
            }
            CredStmt::Placeholder(p) => {
                let _ = write!(out, "placeholder env {}", token(&p.node));
            }
            CredStmt::InjectHeader { name, template } => {
                let _ = write!(
                    out,
                    "inject header {} {}",
                    token(&name.node),
                    quote_always(&template.node)
                );
            }
            CredStmt::InjectReplace => out.push_str("inject replace"),
            CredStmt::Hosts(h) => {
                let _ = write!(out, "hosts {}", join(h.iter().map(|n| &n.node)));
            }
            CredStmt::Methods(m) => {
                let upper: Vec<String> = m.iter().map(|n| n.node.to_ascii_uppercase()).collect();
                let _ = write!(out, "methods {}", upper.join(" "));
            }
            CredStmt::Paths(p) => {
                let _ = write!(out, "paths {}", join(p.iter().map(|n| &n.node)));
            }
            CredStmt::Invalid(t) => out.push_str(t.trim_end()),
        }
        trailing(out, item.trivia.trailing.as_deref());
    }
    trivia_lines(out, &c.end, 2);
    indent(out, 1);
    out.push('}');
    trailing(out, comment);
}

fn option_text(o: EndpointOption) -> &'static str {
    match o {
        EndpointOption::Protocol(Protocol::Http) => "http",
        EndpointOption::Protocol(Protocol::Tcp) => "tcp",
        EndpointOption::Protocol(Protocol::L4) => "l4",
        EndpointOption::Protocol(Protocol::Mcp) => "mcp",
        EndpointOption::Protocol(Protocol::JsonRpc) => "json-rpc",
        EndpointOption::Protocol(Protocol::Graphql) => "graphql",
        EndpointOption::Protocol(Protocol::Websocket) => "websocket",
        EndpointOption::Tls(TlsMode::Auto) => "tls auto",
        EndpointOption::Tls(TlsMode::Skip) => "tls skip",
        EndpointOption::Enforcement(Enforcement::Enforce) => "enforce",
        EndpointOption::Enforcement(Enforcement::Audit) => "audit",
        EndpointOption::Access(Access::ReadOnly) => "read-only",
        EndpointOption::Access(Access::ReadWrite) => "read-write",
        EndpointOption::Access(Access::Full) => "full",
        EndpointOption::EncodedSlash => "encoded_slash",
        EndpointOption::FoldPaths => "fold_paths",
        EndpointOption::UninspectedCredentials => "uninspected_credentials",
        EndpointOption::WebsocketCredentialRewrite => "websocket_credential_rewrite",
        EndpointOption::RequestBodyCredentialRewrite => "request_body_credential_rewrite",
        EndpointOption::AllMcpMethods => "all_mcp_methods",
        EndpointOption::LooseToolNames => "loose_tool_names",
    }
}

/// A method named `tool` would read as the start of the tool list.
fn rpc_token(v: &str) -> String {
    if v == "tool" {
        quote_always(v)
    } else {
        token(v)
    }
}

/// ` name N field F...` of a GraphQL rule or registry entry.
fn graphql_tail(
    out: &mut String,
    name: Option<&crate::source::Node<String>>,
    fields: &[crate::source::Node<String>],
) {
    if let Some(n) = name {
        out.push_str(" name ");
        out.push_str(&token(&n.node));
    }
    if !fields.is_empty() {
        out.push_str(" field");
        for f in fields {
            out.push(' ');
            out.push_str(&token(&f.node));
        }
    }
}

fn allow(out: &mut String, a: &Allow, comment: Option<&str>) {
    let _ = write!(
        out,
        "allow {} -> {}",
        join(a.subjects.iter().map(|s| &s.node)),
        token(&a.endpoint.node)
    );
    let mut opts: Vec<EndpointOption> = a.options.iter().map(|o| o.node).collect();
    // Order: protocol, tls, enforcement, access, flags (the enum order) —
    // unless two options of one kind conflict, where the written order is
    // what the error message refers to.
    let kinds: std::collections::HashSet<_> = opts.iter().map(std::mem::discriminant).collect();
    if kinds.len() == opts.len() {
        opts.sort();
    }
    for o in opts {
        out.push(' ');
        out.push_str(option_text(o));
    }
    let Some(body) = &a.body else {
        trailing(out, comment);
        return;
    };
    out.push_str(" {");
    trailing(out, body.header_trailing.as_deref());
    for item in &body.items {
        trivia_lines(out, &item.trivia.before, 2);
        indent(out, 2);
        match &item.stmt.node {
            EndpointStmt::Rule {
                action,
                methods,
                paths,
                query,
            } => {
                out.push_str(match action.node {
                    RuleAction::Allow => "allow",
                    RuleAction::Deny => "deny",
                });
                for m in methods {
                    out.push(' ');
                    out.push_str(&m.node.to_ascii_uppercase());
                }
                for p in paths {
                    out.push(' ');
                    out.push_str(&token(&p.node));
                }
                for q in query {
                    out.push(' ');
                    out.push_str(&q.node);
                }
            }
            EndpointStmt::Rpc {
                action,
                methods,
                tools,
            } => {
                out.push_str(match action.node {
                    RuleAction::Allow => "allow rpc",
                    RuleAction::Deny => "deny rpc",
                });
                for m in methods {
                    out.push(' ');
                    out.push_str(&rpc_token(&m.node));
                }
                if !tools.is_empty() {
                    out.push_str(" tool");
                    for t in tools {
                        out.push(' ');
                        out.push_str(&token(&t.node));
                    }
                }
            }
            EndpointStmt::Graphql {
                action,
                types,
                name,
                fields,
            } => {
                out.push_str(match action.node {
                    RuleAction::Allow => "allow graphql",
                    RuleAction::Deny => "deny graphql",
                });
                for t in types {
                    out.push(' ');
                    out.push_str(&token(&t.node.to_ascii_lowercase()));
                }
                graphql_tail(out, name.as_ref(), fields);
            }
            EndpointStmt::Persisted {
                id,
                kind,
                name,
                fields,
            } => {
                let _ = write!(
                    out,
                    "persisted {} {}",
                    token(&id.node),
                    token(&kind.node.to_ascii_lowercase())
                );
                graphql_tail(out, name.as_ref(), fields);
            }
            EndpointStmt::BodyLimit(n) => {
                let _ = write!(out, "body_limit {}", n.node);
            }
            EndpointStmt::Path(p) => {
                let _ = write!(out, "path {}", token(&p.node));
            }
            EndpointStmt::Addresses(list) => {
                let _ = write!(out, "addresses {}", join(list.iter().map(|n| &n.node)));
            }
            EndpointStmt::Invalid(t) => out.push_str(t.trim_end()),
        }
        trailing(out, item.trivia.trailing.as_deref());
    }
    trivia_lines(out, &body.end, 2);
    indent(out, 1);
    out.push('}');
    trailing(out, comment);
}

#[cfg(test)]
mod tests {
    use crate::parser::parse;
    use crate::source::SourceFile;

    fn format(text: &str) -> String {
        let (doc, diags) = parse(&SourceFile::new("t.policy", text));
        assert!(!diags.has_errors());
        super::format_document(&doc.unwrap())
    }

    #[test]
    fn values_a_bare_word_cannot_hold_are_quoted() {
        for v in ["a b", "x\u{f}y", "", "->", "#x", "{", "a\"b", "c\\d"] {
            let t = super::token(v);
            assert!(t.starts_with('"'), "{v:?} -> {t}");
        }
        assert_eq!(super::token("/usr/bin/git"), "/usr/bin/git");
    }

    #[test]
    fn options_are_ordered_unless_they_conflict() {
        let sorted =
            format("policy \"p\" {\n  allow /x -> h.example.com:1 read-only audit http\n}\n");
        assert!(
            sorted.contains("-> h.example.com:1 http audit read-only\n"),
            "{sorted}"
        );
        // Conflicting options keep their order: the error names the second.
        let kept = format("policy \"p\" {\n  allow /x -> h.example.com:1 http tcp\n}\n");
        assert!(kept.contains("-> h.example.com:1 http tcp\n"), "{kept}");
    }
}
