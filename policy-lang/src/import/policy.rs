//! The top level of an OpenShell v1 policy: version, filesystem, Landlock,
//! process identity and the network policy groups.

use std::collections::BTreeSet;

use crate::ast::{BinaryMember, FsKind, FsTarget, Item, LandlockMode, Stmt, TriviaLine};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::patterns::{self, Translated};
use super::yaml::{Value, YNode};
use super::{Cx, endpoint, item, key, sanitize_ident};

const TOP_LEVEL: &str = "`version`, `filesystem_policy`, `landlock`, `process`, `network_policies`";

pub(super) fn policy(cx: &mut Cx<'_>, root: &YNode) -> Vec<Item<Stmt>> {
    let Some(entries) = root.entries() else {
        cx.invalid(
            root.span,
            format!(
                "an OpenShell policy is a mapping at the top level, found {}",
                root.kind()
            ),
            "start the file with `version: 1`",
        );
        return Vec::new();
    };
    let mut version = None;
    let mut fs = None;
    let mut landlock = None;
    let mut process = None;
    let mut network = None;
    for (k, v) in entries {
        match key(k) {
            "version" => version = Some((k, v)),
            "filesystem_policy" => fs = Some(v),
            "landlock" => landlock = Some(v),
            "process" => process = Some(v),
            "network_policies" => network = Some(v),
            "network_middlewares" => {
                if !(v.is_null() || v.entries().is_some_and(<[_]>::is_empty)) {
                    cx.unsupported(k, "the policy", "network middlewares are left out: they run operator-supplied interceptors on every request, so what the policy allows would depend on code neither `check` nor the prover can see; remove the section to import the rest");
                }
            }
            other => {
                let help = match other {
                    "inference" => "inference routing is configured outside the sandbox policy here; remove the section to import the rest".to_string(),
                    _ => format!("an OpenShell v1 policy has only {TOP_LEVEL}; this file may follow another schema"),
                };
                cx.unsupported(k, "the policy", &help);
            }
        }
    }
    check_version(cx, version);
    let mut items = Vec::new();
    items.extend(landlock_stmt(cx, landlock));
    if let Some(p) = process {
        items.extend(process_stmt(cx, p));
    }
    if let Some(f) = fs {
        items.extend(filesystem(cx, f));
    }
    if let Some(n) = network {
        items.extend(network_policies(cx, n));
    }
    items
}

fn check_version(cx: &mut Cx<'_>, version: Option<(&YNode, &YNode)>) {
    let Some((_, v)) = version else {
        cx.invalid(
            Span::new(0, 0),
            "the policy has no `version`",
            "add `version: 1` at the top; OpenShell refuses policies without it",
        );
        return;
    };
    match v.as_u64() {
        Some(1) => {}
        Some(n) => cx.push(
            codes::E0705,
            v.span,
            format!("OpenShell policy version `{n}` is not supported"),
            "only version 1 policies can be imported",
        ),
        None => cx.push(
            codes::E0705,
            v.span,
            match &v.value {
                Value::Scalar { text, plain: false } => format!(
                    "the policy version must be the number 1, found the quoted string `{text}`"
                ),
                _ => format!(
                    "the policy version must be the number 1, found `{}`",
                    v.scalar().unwrap_or(v.kind())
                ),
            },
            "write `version: 1` (a number, unquoted); OpenShell reads the version as an integer",
        ),
    }
}

fn landlock_stmt(cx: &mut Cx<'_>, node: Option<&YNode>) -> Option<Item<Stmt>> {
    let mut mode_node = None;
    if let Some(node) = node {
        for (k, v) in cx.map(node, "`landlock`") {
            match key(k) {
                "compatibility" => mode_node = cx.string(v, "`landlock.compatibility`"),
                _ => cx.unsupported(k, "`landlock`", "`landlock` has one field, `compatibility`"),
            }
        }
    }
    let Some(m) = mode_node else {
        let span = node.map_or(Span::new(0, 0), |n| n.span);
        cx.push(
            codes::W0701,
            span,
            "no Landlock compatibility given: OpenShell applies Landlock best effort, written here as `landlock best_effort`",
            "say `landlock: { compatibility: hard_requirement }` to make the sandbox refuse kernels without Landlock",
        );
        let mode = Node::new(LandlockMode::BestEffort, span);
        return Some(item(
            Stmt::Landlock {
                mode,
                min_abi: None,
            },
            span,
            Vec::new(),
        ));
    };
    let mode = match m.node.as_str() {
        "best_effort" => LandlockMode::BestEffort,
        "hard_requirement" | "strict" => LandlockMode::Hard,
        other => {
            cx.invalid(
                m.span,
                format!("unknown Landlock compatibility `{other}`"),
                "use `best_effort` or `hard_requirement`",
            );
            return None;
        }
    };
    Some(item(
        Stmt::Landlock {
            mode: Node::new(mode, m.span),
            min_abi: None,
        },
        m.span,
        Vec::new(),
    ))
}

fn process_stmt(cx: &mut Cx<'_>, node: &YNode) -> Option<Item<Stmt>> {
    let mut user = None;
    let mut group = None;
    for (k, v) in cx.map(node, "`process`") {
        match key(k) {
            "run_as_user" => user = cx.string(v, "`process.run_as_user`"),
            "run_as_group" => group = cx.string(v, "`process.run_as_group`"),
            _ => cx.unsupported(
                k,
                "`process`",
                "`process` has `run_as_user` and `run_as_group`",
            ),
        }
    }
    let user_ok = user
        .as_ref()
        .is_none_or(|v| sandbox_identity(cx, "run_as_user", v));
    let group_ok = group
        .as_ref()
        .is_none_or(|v| sandbox_identity(cx, "run_as_group", v));
    if !(user_ok && group_ok) {
        return None;
    }
    let span = user.as_ref().or(group.as_ref())?.span;
    Some(item(Stmt::RunAs { user, group }, span, Vec::new()))
}

/// OpenShell's `is_valid_sandbox_identity`: `sandbox` or a numeric id
/// other than root's and the invalid-id sentinel; a name such as `root` or
/// `nobody` is refused.
fn sandbox_identity(cx: &mut Cx<'_>, field: &str, v: &Node<String>) -> bool {
    const MAX: u32 = u32::MAX - 1;
    let ok = v.node == "sandbox"
        || v.node
            .parse::<u32>()
            .is_ok_and(|id| (1..=MAX).contains(&id));
    if !ok {
        cx.invalid(
            v.span,
            format!(
                "OpenShell refuses `{field}: {}` when it loads the policy: {field} must be 'sandbox' or a numeric UID/GID in range [1, {MAX}], got '{}'",
                v.node, v.node
            ),
            "run the workload as `sandbox` or a dedicated numeric id, never as root (0)",
        );
    }
    ok
}

/// OpenShell's filesystem checks: no `..` component, no read-write `/`,
/// at most 256 paths of at most 4096 bytes. (A relative path is left to
/// the resolver, whose E0402 says the same.)
fn filesystem_refused(
    cx: &mut Cx<'_>,
    read: &[Node<String>],
    write: &[Node<String>],
    at: Span,
) -> bool {
    const MAX_PATHS: usize = 256;
    const MAX_LEN: usize = 4096;
    let mut refused = false;
    let mut refuse = |cx: &mut Cx<'_>, span: Span, reason: String, help: &str| {
        refused = true;
        cx.invalid(
            span,
            format!("OpenShell refuses `filesystem_policy` when it loads the policy: {reason}"),
            help,
        );
    };
    let count = read.len() + write.len();
    if count > MAX_PATHS {
        refuse(
            cx,
            at,
            format!("too many filesystem paths ({count} > {MAX_PATHS})"),
            "grant common parent directories instead of listing each path",
        );
    }
    for p in read.iter().chain(write) {
        if p.node.len() > MAX_LEN {
            refuse(
                cx,
                p.span,
                format!("path exceeds maximum length ({} > {MAX_LEN})", p.node.len()),
                "name a shorter path, such as a parent directory",
            );
        } else if p.node.split('/').any(|c| c == "..") {
            refuse(
                cx,
                p.span,
                format!("path contains '..' traversal component: {}", p.node),
                "write the path without `..`, as `realpath` prints it",
            );
        }
    }
    for p in write {
        if p.node.trim_end_matches('/').is_empty() && !p.node.is_empty() {
            refuse(
                cx,
                p.span,
                format!("read-write path is overly broad: {}", p.node),
                "list the directories the workload writes (its workspace, `/tmp`), or make `/` read-only",
            );
        }
    }
    refused
}

fn filesystem(cx: &mut Cx<'_>, node: &YNode) -> Vec<Item<Stmt>> {
    let mut out = Vec::new();
    let mut workdir = None;
    let mut read = None;
    let mut write = None;
    for (k, v) in cx.map(node, "`filesystem_policy`") {
        match key(k) {
            "include_workdir" => {
                if cx.bool(v, "`include_workdir`") {
                    workdir = Some(v.span);
                }
            }
            "read_only" => read = Some((k.span, cx.strings(v, "`read_only`"))),
            "read_write" => write = Some((k.span, cx.strings(v, "`read_write`"))),
            _ => cx.unsupported(
                k,
                "`filesystem_policy`",
                "`filesystem_policy` has `include_workdir`, `read_only` and `read_write`",
            ),
        }
    }
    if filesystem_refused(
        cx,
        read.as_ref().map_or(&[][..], |(_, l)| l),
        write.as_ref().map_or(&[][..], |(_, l)| l),
        node.span,
    ) {
        return Vec::new();
    }
    let read = read.map(|(span, list)| (span, kernel_spelling(cx, list)));
    let write = write.map(|(span, list)| (span, kernel_spelling(cx, list)));
    // OpenShell grants its Landlock rules with the landlock crate's
    // `from_read` (read_only) and `from_all` (read_write, the working
    // directory), and both include execute: read-only paths become `fs exec`,
    // writable ones `fs write` plus `fs exec`.
    let mut note = vec![TriviaLine::Comment(
        "OpenShell's read_only and read_write both allow executing files".to_string(),
    )];
    let mut fs = |kind: FsKind, span: Span, targets: Vec<Node<FsTarget>>| {
        if !targets.is_empty() {
            out.push(item(
                Stmt::Fs {
                    kind: Node::new(kind, span),
                    targets,
                },
                span,
                std::mem::take(&mut note),
            ));
        }
    };
    let paths = |list: &[Node<String>]| -> Vec<Node<FsTarget>> {
        list.iter()
            .map(|p| Node::new(FsTarget::Path(p.node.clone()), p.span))
            .collect()
    };
    if let Some((span, list)) = read {
        fs(FsKind::Exec, span, paths(&list));
    }
    if let Some((span, list)) = write {
        fs(FsKind::Write, span, paths(&list));
        fs(FsKind::Exec, span, paths(&list));
    }
    if let Some(span) = workdir {
        for kind in [FsKind::Write, FsKind::Exec] {
            fs(kind, span, vec![Node::new(FsTarget::Workdir, span)]);
        }
    }
    out
}

/// Absolute paths with `.` or empty components, rewritten without them
/// (W0702). OpenShell hands the path to the kernel as written, and the
/// kernel's path walk reads `/a/./b` and `/a//b` as `/a/b`; our paths are
/// written normalized, so a rule keeps OpenShell's meaning only rewritten.
/// Relative paths are left as they are, for the resolver's E0402.
fn kernel_spelling(cx: &mut Cx<'_>, list: Vec<Node<String>>) -> Vec<Node<String>> {
    list.into_iter()
        .map(|p| {
            if !p.node.starts_with('/') {
                return p;
            }
            let parts: Vec<&str> = p
                .node
                .split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .collect();
            let normal = format!("/{}", parts.join("/"));
            let as_written = match p.node.trim_end_matches('/') {
                "" => "/",
                t => t,
            };
            if normal == as_written {
                return p;
            }
            cx.push(
                codes::W0702,
                p.span,
                format!("filesystem path `{}` is written `{normal}` here", p.node),
                "the kernel reads `.` and empty components as nothing, so both name the same file; write the path without them",
            );
            Node::new(normal, p.span)
        })
        .collect()
}

fn network_policies(cx: &mut Cx<'_>, node: &YNode) -> Vec<Item<Stmt>> {
    let mut out = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (k, v) in cx.map(node, "`network_policies`") {
        let raw = key(k).to_string();
        let mut name = sanitize_ident(&raw);
        if names.contains(&name) {
            let base = name.clone();
            let mut n = 2;
            while names.contains(&format!("{base}_{n}")) {
                n += 1;
            }
            name = format!("{base}_{n}");
            cx.push(
                codes::W0702,
                k.span,
                format!("policy group `{raw}` is named `{name}` here: `{base}` is taken by another group after renaming"),
                "binary set names use letters, digits, `_` and `-`; rename the group to choose the name",
            );
        }
        names.insert(name.clone());
        let set = Node::new(name, k.span);
        out.extend(group(cx, k, v, set));
    }
    out
}

/// One `network_policies` entry: its binary set and one rule per endpoint.
fn group(cx: &mut Cx<'_>, k: &YNode, v: &YNode, set: Node<String>) -> Vec<Item<Stmt>> {
    let raw = key(k);
    let mut display = None;
    let mut endpoints: &[YNode] = &[];
    let mut binaries: &[YNode] = &[];
    for (fk, fv) in cx.map(v, "a network policy") {
        match key(fk) {
            "name" => display = cx.string(fv, "`name`"),
            "endpoints" => endpoints = cx.list(fv, "`endpoints`"),
            "binaries" => binaries = cx.list(fv, "`binaries`"),
            _ => cx.unsupported(
                fk,
                "a network policy",
                "a network policy has `name`, `endpoints` and `binaries`",
            ),
        }
    }
    let members = binary_members(cx, binaries);
    let mut rules = Vec::new();
    for (i, ep) in endpoints.iter().enumerate() {
        rules.extend(endpoint::endpoint(cx, ep, &set, i));
    }
    if endpoints.is_empty() || members.is_empty() {
        let why = if endpoints.is_empty() {
            "no endpoints"
        } else if binaries.is_empty() {
            "no binaries"
        } else {
            "no binaries that can match"
        };
        cx.push(
            codes::W0703,
            k.span,
            format!("policy group `{raw}` has {why}, so OpenShell allows nothing through it; not imported"),
            "a group needs both `endpoints` and `binaries` to allow a connection",
        );
        return Vec::new();
    }
    let mut comments = vec![TriviaLine::Blank];
    if set.node != raw {
        comments.push(TriviaLine::Comment(format!("network_policies key: {raw}")));
    }
    if let Some(d) = display.filter(|d| d.node != raw) {
        comments.push(TriviaLine::Comment(format!("name: {}", d.node)));
    }
    let span = set.span;
    let mut out = vec![item(Stmt::Binaries { name: set, members }, span, comments)];
    out.extend(rules);
    out
}

fn binary_members(cx: &mut Cx<'_>, list: &[YNode]) -> Vec<BinaryMember> {
    let mut members = Vec::new();
    for b in list {
        let mut path = None;
        for (k, v) in cx.map(b, "a binary") {
            match key(k) {
                "path" => path = cx.string(v, "a binary `path`"),
                // Deprecated in OpenShell and ignored by it.
                "harness" => {}
                _ => cx.unsupported(k, "a binary", "a binary has one field, `path`"),
            }
        }
        let Some(path) = path else {
            if b.entries().is_some() {
                cx.invalid(
                    b.span,
                    "a binary needs a `path`",
                    "write `{ path: /usr/bin/git }`",
                );
            }
            continue;
        };
        match patterns::binary(&path.node) {
            Translated::Patterns { patterns, notes } => {
                for note in notes {
                    cx.push(
                        codes::W0702,
                        path.span,
                        format!("binary `{}`: {note}", path.node),
                        "the translation matches the same executables",
                    );
                }
                for p in patterns {
                    members.push(BinaryMember {
                        path: Node::new(p, path.span),
                        pin: None,
                    });
                }
            }
            Translated::Never(why) => cx.push(
                codes::W0702,
                path.span,
                format!(
                    "binary `{}` never matches in OpenShell ({why}); dropped",
                    path.node
                ),
                "write the absolute path of the executable, as `readlink -f` prints it",
            ),
            Translated::Inexpressible(why) => cx.push(
                codes::E0704,
                path.span,
                format!(
                    "binary pattern `{}` cannot be translated exactly: {why}",
                    path.node
                ),
                "rewrite it with `*` (within a path component) and `**` (whole components)",
            ),
        }
    }
    members
}
