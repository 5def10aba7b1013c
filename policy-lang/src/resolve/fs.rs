//! Filesystem rules: Landlock is allow-list only and works on concrete
//! paths, so anything it cannot enforce (a glob, a denied subtree inside an
//! allowed one) is refused here rather than dropped later.

use std::collections::BTreeMap;

use crate::ast::{FsKind, FsTarget};
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::ir::{FsGrant, FsRights, Policy};
use crate::source::{Node, SourceFile, Span};

use super::origin;

#[derive(Default)]
pub(super) struct FsCollector {
    grants: BTreeMap<String, (FsRights, SourceFile, Span)>,
    denies: Vec<(String, SourceFile, Span)>,
    workdir: Option<FsRights>,
}

impl FsCollector {
    pub(super) fn add(
        &mut self,
        file: &SourceFile,
        kind: &Node<FsKind>,
        targets: &[Node<FsTarget>],
        diags: &mut Diagnostics,
    ) {
        let rights = match kind.node {
            FsKind::Read => FsRights::READ,
            FsKind::Write => FsRights {
                read: true,
                write: true,
                exec: false,
            },
            FsKind::Exec => FsRights {
                read: true,
                write: false,
                exec: true,
            },
            FsKind::Deny => FsRights::default(),
        };
        for t in targets {
            match &t.node {
                FsTarget::Workdir => {
                    if kind.node == FsKind::Deny {
                        diags.push(
                            Diagnostic::new(
                                codes::E0401,
                                file,
                                t.span,
                                "the working directory cannot be denied",
                            )
                            .help("leave `workdir` out of the fs rules to deny it"),
                        );
                        continue;
                    }
                    self.workdir = Some(self.workdir.unwrap_or_default().union(rights));
                }
                FsTarget::Path(p) => {
                    let Some(path) = check_path(file, t.span, p, diags) else {
                        continue;
                    };
                    if kind.node == FsKind::Deny {
                        self.denies.push((path, file.clone(), t.span));
                        continue;
                    }
                    let entry = self.grants.entry(path).or_insert((
                        FsRights::default(),
                        file.clone(),
                        t.span,
                    ));
                    entry.0 = entry.0.union(rights);
                }
            }
        }
    }
}

/// Check the deny rules against the grants, then move the grants into the policy.
pub(super) fn finish(c: &FsCollector, policy: &mut Policy, diags: &mut Diagnostics) {
    for (deny, file, span) in &c.denies {
        let covering = c.grants.iter().find(|(g, _)| is_within(deny, g));
        match covering {
            Some((g, (_, gf, gs))) => {
                let (gl, _) = gf.line_col(gs.start);
                let mut d = Diagnostic::new(
                    codes::E0401,
                    file,
                    *span,
                    format!("Landlock cannot deny `{deny}` inside the allowed tree `{g}` (line {gl})"),
                )
                .label("cannot be enforced")
                .help(format!(
                    "Landlock only grants access; list the subdirectories of `{g}` that are needed instead of granting `{g}` whole"
                ));
                if gf.same_file(file) {
                    d = d.secondary(*gs, "access granted here");
                }
                diags.push(d);
            }
            None => diags.push(
                Diagnostic::new(
                    codes::W0107,
                    file,
                    *span,
                    format!("`{deny}` is already denied: no fs rule grants it"),
                )
                .help("Landlock denies every path not granted; this line can go"),
            ),
        }
    }
    for (path, (rights, file, span)) in &c.grants {
        if let Some((parent, (prights, pf, ps))) = c
            .grants
            .iter()
            .rfind(|(g, _)| *g != path && is_within(path, g))
            && prights.contains(*rights)
        {
            let (pl, _) = pf.line_col(ps.start);
            diags.push(
                Diagnostic::new(
                    codes::W0107,
                    file,
                    *span,
                    format!("`{path}` already has these rights through `{parent}` (line {pl})"),
                )
                .help("remove the narrower rule, or narrow the broader one"),
            );
        }
        policy.fs.push(FsGrant {
            path: path.clone(),
            rights: *rights,
            origin: origin(file, *span, ""),
        });
    }
    policy.workdir = c.workdir;
}

/// `child` is `parent` or lies beneath it.
pub(crate) fn is_within(child: &str, parent: &str) -> bool {
    if parent == "/" {
        return true;
    }
    child == parent
        || child
            .strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn check_path(file: &SourceFile, span: Span, p: &str, diags: &mut Diagnostics) -> Option<String> {
    if !p.starts_with('/') {
        diags.push(
            Diagnostic::new(codes::E0402, file, span, format!("`{p}` is not an absolute path"))
                .label("relative path")
                .help("Landlock rules name absolute paths; write it from `/`, or use `workdir` for the working directory"),
        );
        return None;
    }
    if let Some(i) = p.find(['*', '?', '[']) {
        diags.push(
            Diagnostic::new(codes::E0401, file, span.sub(i, 1), format!("Landlock cannot enforce the pattern `{p}`"))
                .label("wildcard")
                .help("Landlock rules apply to concrete files and directories; list each path, or grant their common parent"),
        );
        return None;
    }
    let trimmed = if p.len() > 1 {
        p.trim_end_matches('/')
    } else {
        p
    };
    if trimmed != "/"
        && trimmed
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        diags.push(
            Diagnostic::new(
                codes::E0402,
                file,
                span,
                format!("`{p}` is not a normalized path"),
            )
            .help("remove `//`, `.` and `..` components; Landlock resolves the path as written"),
        );
        return None;
    }
    if let Some((at, why)) = proc_problem(trimmed) {
        diags.push(
            Diagnostic::new(codes::E0401, file, span, format!("`{p}` cannot be a Landlock rule"))
                .label(format!("`{at}` {why}"))
                .help("`/proc/self` (and `thread-self`, `net`, `mounts`) names the workload's own entries; a literal pid names another process's, and a magic link leads out of /proc: remove the rule, or name the path the link points to"),
        );
        return None;
    }
    Some(if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    })
}

/// A `/proc` path no rule may name: one process's entries by pid (the
/// supervisor opens rule paths, but a pid is nobody in the sandbox), or a
/// magic link under a process's entries (`root`, `cwd`, `exe`, `fd`,
/// `map_files`, `ns`), which names what it points at, not a path.
fn proc_problem(path: &str) -> Option<(String, &'static str)> {
    let rest = path.strip_prefix("/proc/")?;
    let mut parts = rest.split('/');
    let first = parts.next()?;
    if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
        return Some((format!("/proc/{first}"), "is one process, by pid"));
    }
    if !matches!(first, "self" | "thread-self") {
        return None;
    }
    let mut entry = parts.next()?;
    if entry == "task" {
        entry = parts.nth(1)?;
    }
    matches!(entry, "root" | "cwd" | "exe" | "fd" | "map_files" | "ns")
        .then(|| (entry.to_owned(), "is a magic link"))
}

#[cfg(test)]
mod tests {
    use super::{is_within, proc_problem};

    #[test]
    fn proc_paths_by_pid_and_magic_links_are_refused() {
        for p in [
            "/proc/1234",
            "/proc/1234/net",
            "/proc/self/root",
            "/proc/self/fd",
            "/proc/thread-self/cwd",
            "/proc/self/task/7/exe",
            "/proc/self/ns/net",
        ] {
            assert!(proc_problem(p).is_some(), "{p}");
        }
        for p in [
            "/proc",
            "/proc/self",
            "/proc/self/net/tcp",
            "/proc/self/status",
            "/proc/thread-self",
            "/proc/net",
            "/proc/sys",
            "/proc/selfish/root",
        ] {
            assert_eq!(proc_problem(p), None, "{p}");
        }
    }

    #[test]
    fn within() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/x", "/"));
    }
}
