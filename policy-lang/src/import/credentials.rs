//! An OpenShell credentials file (`credentials: [{name, type, scopes,
//! injected_via, target_hosts}]`) → one `credential` block per entry.
//!
//! OpenShell hands the workload a placeholder in the `injected_via`
//! environment variable and the proxy swaps in the real secret, read from
//! the supervisor's environment variable of the same name, on requests to
//! `target_hosts`. That is our `secret env` + `placeholder env` +
//! `inject replace`.

use crate::ast::{CredStmt, Credential, Item, SecretSource, Stmt, Trivia, TriviaLine};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::patterns::{self, Translated};
use super::yaml::YNode;
use super::{Cx, item, key, sanitize_ident};

pub(super) fn credentials(cx: &mut Cx<'_>, root: &YNode) -> Vec<Item<Stmt>> {
    let Some(entries) = root.entries() else {
        cx.invalid(
            root.span,
            format!(
                "an OpenShell credentials file is a mapping, found {}",
                root.kind()
            ),
            "start the file with `credentials:`",
        );
        return Vec::new();
    };
    let mut list: &[YNode] = &[];
    let mut found = false;
    for (k, v) in entries {
        match key(k) {
            "credentials" => {
                found = true;
                list = cx.list(v, "`credentials`");
            }
            _ => cx.unsupported(
                k,
                "a credentials file",
                "a credentials file has one section, `credentials`",
            ),
        }
    }
    if !found {
        cx.invalid(
            root.span,
            "the credentials file has no `credentials` list",
            "write `credentials:` followed by a list of entries",
        );
    }
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        if let Some(it) = credential(cx, c, i > 0) {
            out.push(it);
        }
    }
    out
}

fn credential(cx: &mut Cx<'_>, node: &YNode, blank: bool) -> Option<Item<Stmt>> {
    let mut name = None;
    let mut kind = None;
    let mut scopes = Vec::new();
    let mut via = None;
    let mut hosts = None;
    let mut ok = true;
    for (k, v) in cx.map(node, "a credential") {
        match key(k) {
            "name" => name = cx.string(v, "`name`"),
            "type" => kind = cx.string(v, "`type`"),
            "scopes" => scopes = cx.strings(v, "`scopes`"),
            "injected_via" => via = cx.string(v, "`injected_via`"),
            "target_hosts" => hosts = Some((v.span, cx.strings(v, "`target_hosts`"))),
            _ => {
                cx.unsupported(
                    k,
                    "a credential",
                    "a credential has `name`, `type`, `scopes`, `injected_via` and `target_hosts`",
                );
                ok = false;
            }
        }
    }
    let missing: Vec<&str> = [
        (name.is_none(), "`name`"),
        (kind.is_none(), "`type`"),
        (via.is_none(), "`injected_via`"),
        (
            hosts.as_ref().is_none_or(|(_, h)| h.is_empty()),
            "`target_hosts`",
        ),
    ]
    .iter()
    .filter(|(m, _)| *m)
    .map(|(_, s)| *s)
    .collect();
    if !missing.is_empty() {
        cx.invalid(node.span, format!("credential is missing {}", missing.join(", ")), "every credential needs a name, a type, the variable it is injected via and its target hosts");
        return None;
    }
    let (Some(name), Some(kind), Some(via), Some((hosts_span, hosts))) = (name, kind, via, hosts)
    else {
        return None;
    };
    if !ok {
        return None;
    }
    let ident = sanitize_ident(&name.node);
    if ident != name.node {
        cx.push(
            codes::W0702,
            name.span,
            format!("credential `{}` is named `{ident}` here", name.node),
            "credential names use letters, digits, `_` and `-`",
        );
    }
    let mut host_nodes = Vec::new();
    for h in hosts {
        match patterns::host(&h.node) {
            Translated::Patterns { patterns, .. } => {
                host_nodes.extend(patterns.into_iter().map(|p| Node::new(p, h.span)))
            }
            Translated::Never(_) => {}
            Translated::Inexpressible(why) => {
                cx.push(
                    codes::E0704,
                    h.span,
                    format!(
                        "target host `{}` cannot be translated exactly: {why}",
                        h.node
                    ),
                    "use `*.example.com` or `**.example.com`",
                );
                return None;
            }
        }
    }
    let stmt = |s: CredStmt, span: Span| Item {
        trivia: Trivia::default(),
        stmt: Node::new(s, span),
    };
    let items = vec![
        stmt(
            CredStmt::Secret(Node::new(SecretSource::Env(via.node.clone()), via.span)),
            via.span,
        ),
        stmt(CredStmt::Placeholder(via.clone()), via.span),
        stmt(CredStmt::InjectReplace, via.span),
        stmt(CredStmt::Hosts(host_nodes), hosts_span),
    ];
    let mut comments = Vec::new();
    if blank {
        comments.push(TriviaLine::Blank);
    }
    let scope_text: Vec<&str> = scopes.iter().map(|s| s.node.as_str()).collect();
    let mut note = format!("type: {}", kind.node);
    if !scope_text.is_empty() {
        note.push_str(&format!(", scopes: {}", scope_text.join(", ")));
    }
    // On the block's first line: a comment line right after the fragment's
    // `{` would be read back as that line's trailing comment.
    let span = name.span;
    let cred = Credential {
        name: Node::new(ident, name.span),
        header_trailing: Some(note),
        items,
        end: Vec::new(),
    };
    Some(item(Stmt::Credential(cred), span, comments))
}
