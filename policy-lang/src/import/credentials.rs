//! An OpenShell credentials file (`credentials: [{name, type, scopes,
//! injected_via, target_hosts}]`) → one `credential` block per entry.
//!
//! OpenShell hands the workload a placeholder in the `injected_via`
//! environment variable and the proxy swaps in the real secret, read from
//! the supervisor's environment variable of the same name, on requests to
//! `target_hosts`. That is our `secret env` + `placeholder env` +
//! `inject replace`.
//!
//! An entry without `target_hosts` is a provider whose profile defines no
//! endpoints: OpenShell withholds its credentials until an endpoint of the
//! policy binds it (`credential_binding`), and then sends them to the bound
//! endpoints only, so its `hosts` (and `paths`) come from those endpoints.

use crate::ast::{CredStmt, Credential, Item, SecretSource, Stmt, Trivia, TriviaLine};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::binding::{Entry, Seen};
use super::patterns::{self, Translated};
use super::yaml::YNode;
use super::{Cx, item, key, sanitize_ident};

/// The credential blocks, and every entry's name for the binding checks.
pub(super) fn credentials(
    cx: &mut Cx<'_>,
    root: &YNode,
    seen: &[Seen],
) -> (Vec<Item<Stmt>>, Vec<Entry>) {
    let Some(entries) = root.entries() else {
        cx.invalid(
            root.span,
            format!(
                "an OpenShell credentials file is a mapping, found {}",
                root.kind()
            ),
            "start the file with `credentials:`",
        );
        return (Vec::new(), Vec::new());
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
    let mut entries = Vec::new();
    for c in list {
        if let Some(it) = credential(cx, c, !out.is_empty(), seen, &mut entries) {
            out.push(it);
        }
    }
    (out, entries)
}

fn credential(
    cx: &mut Cx<'_>,
    node: &YNode,
    blank: bool,
    seen: &[Seen],
    entries: &mut Vec<Entry>,
) -> Option<Item<Stmt>> {
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
    let hosts = hosts.filter(|(_, h)| !h.is_empty());
    if let Some(n) = &name {
        entries.push(Entry {
            name: n.node.clone(),
            has_hosts: hosts.is_some(),
        });
    }
    let missing: Vec<&str> = [
        (name.is_none(), "`name`"),
        (kind.is_none(), "`type`"),
        (via.is_none(), "`injected_via`"),
    ]
    .iter()
    .filter(|(m, _)| *m)
    .map(|(_, s)| *s)
    .collect();
    if !missing.is_empty() {
        cx.invalid(
            node.span,
            format!("credential is missing {}", missing.join(", ")),
            "every credential needs a name, a type and the variable it is injected via",
        );
        return None;
    }
    let (Some(name), Some(kind), Some(via)) = (name, kind, via) else {
        return None;
    };
    if !ok {
        return None;
    }
    let bound: Vec<&Seen> = seen
        .iter()
        .filter(|s| {
            s.binding
                .as_ref()
                .is_some_and(|b| b.provider.node == name.node)
        })
        .collect();
    let ident = sanitize_ident(&name.node);
    if ident != name.node {
        cx.push(
            codes::W0702,
            name.span,
            format!("credential `{}` is named `{ident}` here", name.node),
            "credential names use letters, digits, `_` and `-`",
        );
    }
    let mut paths = None;
    let (hosts_span, host_nodes) = match hosts {
        Some((span, hosts)) => (span, target_hosts(cx, hosts)?),
        None if bound.is_empty() => {
            cx.push(
                codes::W0702,
                name.span,
                format!("credential `{}` has no `target_hosts` and no endpoint binds it: OpenShell withholds the credentials of a provider whose profile defines no endpoints; not imported", name.node),
                format!("bind it on the endpoints it is for (`credential_binding: {{ provider: {} }}`), or list its `target_hosts`", name.node),
            );
            return None;
        }
        // The bound endpoints' hosts, already our patterns. Spans in this
        // fragment point into this file: at the entry's name.
        None => {
            let mut hosts: Vec<Node<String>> = Vec::new();
            for h in bound.iter().flat_map(|s| &s.hosts) {
                if !hosts.iter().any(|x| x.node == *h) {
                    hosts.push(Node::new(h.clone(), name.span));
                }
            }
            paths = bound
                .first()
                .and_then(|s| s.binding.as_ref())
                .and_then(|b| b.paths.clone());
            (name.span, hosts)
        }
    };
    let stmt = |s: CredStmt, span: Span| Item {
        trivia: Trivia::default(),
        stmt: Node::new(s, span),
    };
    let mut items = vec![
        stmt(
            CredStmt::Secret(Node::new(SecretSource::Env(via.node.clone()), via.span)),
            via.span,
        ),
        stmt(CredStmt::Placeholder(via.clone()), via.span),
        stmt(CredStmt::InjectReplace, via.span),
        stmt(CredStmt::Hosts(host_nodes), hosts_span),
    ];
    if let Some(p) = paths {
        let nodes = p.into_iter().map(|p| Node::new(p, name.span)).collect();
        items.push(stmt(CredStmt::Paths(nodes), name.span));
    }
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

/// `target_hosts` as our host patterns; `None` after an error.
fn target_hosts(cx: &mut Cx<'_>, hosts: Vec<Node<String>>) -> Option<Vec<Node<String>>> {
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
    Some(host_nodes)
}
