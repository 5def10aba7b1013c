//! Lower syntax trees into the IR: resolve names, expand presets, parse
//! every pattern with the matcher module, and report what is wrong with
//! exact positions. All problems of a file are collected in one pass.

mod endpoint;
mod fs;

use std::collections::BTreeMap;

use crate::ast::{self, CredStmt, DocKind, Document, Stmt};
use crate::diag::{Code, Diagnostic, Diagnostics, codes};
use crate::ir::{
    self, BinaryRef, Credential, Injection, Landlock, Origin, Policy, RunAs, SandboxSecret,
};
use crate::source::{Node, SourceFile, Span};
use policy_bundle::matcher::{BinaryGlob, HostPattern, HttpPathGlob, MethodSet, PatternError};

/// Where each IR element came from, for diagnostics that need a span
/// (lints run on the IR but report against the source).
#[derive(Debug, Clone, Default)]
pub(crate) struct SpanTable {
    pub(crate) endpoints: Vec<(SourceFile, Span)>,
    pub(crate) credentials: Vec<(SourceFile, Span)>,
    pub(crate) secrets: Vec<(SourceFile, Span)>,
}

/// A resolved policy with the spans lints report against.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What the compiler and the prover read.
    pub policy: Policy,
    pub(crate) spans: SpanTable,
}

/// Resolve a main document and the fragments it includes (in include
/// order) into one policy.
pub fn resolve(docs: &[Document]) -> (Resolved, Diagnostics) {
    let mut r = Resolver::default();
    let name = docs
        .first()
        .map(|d| d.name.node.clone())
        .unwrap_or_default();
    // Names first, so rules may refer to sets defined later or in fragments.
    for doc in docs {
        r.collect_names(doc);
    }
    for doc in docs {
        r.doc(doc);
    }
    let policy = Policy {
        name,
        landlock: r.landlock.map(|(l, _)| l).unwrap_or_default(),
        run_as: r.run_as.map(|(ra, _)| ra),
        fs: Vec::new(),
        workdir: None,
        binary_sets: r
            .sets
            .iter()
            .map(|(k, v)| (k.clone(), v.refs.clone()))
            .collect(),
        endpoints: r.endpoints,
        credentials: r.credentials,
        secrets: r.secrets,
        advisor: r.advisor.map(|(a, _)| a),
    };
    let mut resolved = Resolved {
        policy,
        spans: r.spans,
    };
    let mut diags = r.diags;
    fs::finish(&r.fs, &mut resolved.policy, &mut diags);
    (resolved, diags)
}

#[derive(Debug, Clone)]
struct SetDef {
    refs: Vec<BinaryRef>,
    file: SourceFile,
    span: Span,
}

#[derive(Default)]
struct Resolver {
    diags: Diagnostics,
    sets: BTreeMap<String, SetDef>,
    landlock: Option<(Landlock, (SourceFile, Span))>,
    run_as: Option<(RunAs, (SourceFile, Span))>,
    fs: fs::FsCollector,
    endpoints: Vec<ir::Endpoint>,
    credentials: Vec<Credential>,
    secrets: Vec<SandboxSecret>,
    advisor: Option<(ir::Advisor, (SourceFile, Span))>,
    /// Credential and secret names with their first definition.
    secret_names: BTreeMap<String, (SourceFile, Span)>,
    spans: SpanTable,
}

/// Convert a matcher error into a diagnostic pointing inside the token.
pub(crate) fn pattern_diag(
    code: Code,
    file: &SourceFile,
    token: Span,
    err: &PatternError,
) -> Diagnostic {
    let text = file.slice(token);
    let quoted = text.starts_with('"') || text.starts_with('\'');
    let offset = err.offset + usize::from(quoted);
    Diagnostic::new(code, file, token.sub(offset, 1), err.message.clone())
        .label("here")
        .help(err.help.clone())
}

pub(crate) fn origin(file: &SourceFile, span: Span, rule: &str) -> Origin {
    let (line, column) = file.line_col(span.start);
    Origin {
        file: file.path().to_string(),
        line,
        column,
        rule: rule.to_string(),
    }
}

impl Resolver {
    fn err(
        &mut self,
        code: Code,
        file: &SourceFile,
        span: Span,
        msg: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags
            .push(Diagnostic::new(code, file, span, msg).help(help));
    }

    fn collect_names(&mut self, doc: &Document) {
        let file = &doc.file;
        for item in &doc.items {
            match &item.stmt.node {
                Stmt::Binaries { name, members } => {
                    let refs = self.binary_members(file, members);
                    if let Some(prev) = self.sets.get(&name.node) {
                        let d = duplicate(file, name, &prev.file, prev.span, "binary set");
                        self.diags.push(d);
                        continue;
                    }
                    self.sets.insert(
                        name.node.clone(),
                        SetDef {
                            refs,
                            file: file.clone(),
                            span: name.span,
                        },
                    );
                }
                Stmt::Credential(c) => self.claim_secret_name(file, &c.name),
                Stmt::Secret { name, .. } => self.claim_secret_name(file, name),
                _ => {}
            }
        }
    }

    fn claim_secret_name(&mut self, file: &SourceFile, name: &Node<String>) {
        if let Some((pf, ps)) = self.secret_names.get(&name.node) {
            let d = duplicate(file, name, pf, *ps, "credential or secret");
            self.diags.push(d);
        } else {
            self.secret_names
                .insert(name.node.clone(), (file.clone(), name.span));
        }
    }

    fn binary_members(
        &mut self,
        file: &SourceFile,
        members: &[ast::BinaryMember],
    ) -> Vec<BinaryRef> {
        let mut refs = Vec::new();
        for m in members {
            let glob = match BinaryGlob::parse(&m.path.node) {
                Ok(g) => g,
                Err(e) => {
                    self.diags
                        .push(pattern_diag(codes::E0303, file, m.path.span, &e));
                    continue;
                }
            };
            let sha256 = match &m.pin {
                None => None,
                Some(pin) => match parse_pin(&pin.node) {
                    Some(hex) if glob.is_exact() => Some(hex),
                    Some(_) => {
                        self.err(
                            codes::E0308,
                            file,
                            pin.span,
                            format!(
                                "a SHA-256 pin needs an exact path, not the pattern `{}`",
                                m.path.node
                            ),
                            "pin each executable separately by its full path",
                        );
                        None
                    }
                    None => {
                        self.err(
                            codes::E0308,
                            file,
                            pin.span,
                            format!("`{}` is not a SHA-256 digest", pin.node),
                            "write `sha256:` followed by 64 hexadecimal digits (`sha256sum FILE` prints them)",
                        );
                        None
                    }
                },
            };
            refs.push(BinaryRef { glob, sha256 });
        }
        refs
    }

    fn doc(&mut self, doc: &Document) {
        let file = &doc.file;
        for item in &doc.items {
            let span = item.stmt.span;
            match &item.stmt.node {
                Stmt::Include(_) | Stmt::Invalid(_) | Stmt::Binaries { .. } => {}
                Stmt::Landlock { mode, min_abi } => {
                    self.landlock(file, span, mode, min_abi.as_ref())
                }
                Stmt::RunAs { user, group } => {
                    let ra = RunAs {
                        user: user.as_ref().map(|u| u.node.clone()),
                        group: group.as_ref().map(|g| g.node.clone()),
                    };
                    if ra.user.as_deref().is_some_and(|u| u == "root" || u == "0") {
                        self.diags.push(
                            Diagnostic::new(codes::W0130, file, span, "the workload runs as root (uid 0)")
                                .label("uid 0 owns most of the host's files and the sockets of its root daemons")
                                .help("without capabilities it still reaches root-owned pathname unix sockets (Landlock does not mediate them) and may not change file modes or times at all (the supervisor refuses them); run it as a dedicated user unless it must be root"),
                        );
                    }
                    if let Some((_, (pf, ps))) = &self.run_as {
                        let d = twice(file, span, pf, *ps, "run_as");
                        self.diags.push(d);
                    } else {
                        self.run_as = Some((ra, (file.clone(), span)));
                    }
                }
                Stmt::Fs { kind, targets } => self.fs.add(file, kind, targets, &mut self.diags),
                Stmt::Credential(c) => self.credential(file, span, c),
                Stmt::Secret {
                    name,
                    source,
                    hosts,
                } => {
                    let source = match self.secret_source(file, source) {
                        Some(s) => s,
                        None => continue,
                    };
                    let hosts = self.hosts(file, hosts);
                    self.spans.secrets.push((file.clone(), name.span));
                    self.secrets.push(SandboxSecret {
                        name: name.node.clone(),
                        source,
                        hosts,
                        origin: origin(file, span, &name.node),
                    });
                }
                Stmt::Advisor { subjects } => self.advisor(file, span, subjects),
                Stmt::Allow(a) => {
                    if let Some(ep) = endpoint::resolve(self, file, span, a) {
                        // Diagnostics point at the rule's first line, not its block.
                        let head = Span::new(span.start, a.endpoint.span.end.max(span.start));
                        self.spans.endpoints.push((file.clone(), head));
                        self.endpoints.push(ep);
                    }
                }
            }
        }
        if doc.kind == DocKind::Fragment
            && doc
                .items
                .iter()
                .any(|i| matches!(i.stmt.node, Stmt::Include(_)))
        {
            // Fragments may include further fragments; the loader resolved them.
        }
    }

    /// `advisor BINARIES...`: once per policy, fragments included, and
    /// naming at least one binary (an endpoint open to nobody would only
    /// say the author forgot who).
    fn advisor(&mut self, file: &SourceFile, span: Span, subjects: &[Node<String>]) {
        if let Some((_, (pf, ps))) = &self.advisor {
            let d = twice(file, span, pf, *ps, "advisor");
            self.diags.push(d);
            return;
        }
        if subjects.is_empty() {
            self.diags.push(
                Diagnostic::new(codes::E0107, file, span, "`advisor` names no binary")
                    .label("who may reach `policy.local`?")
                    .help("name the binary sets or paths whose programs may read their denials and propose changes: `advisor agent` or `advisor /usr/bin/python3`"),
            );
            return;
        }
        let Some(binaries) = endpoint::subjects(self, file, subjects) else {
            return;
        };
        let rule = subjects
            .iter()
            .map(|s| s.node.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let advisor = ir::Advisor {
            binaries,
            origin: origin(file, span, &rule),
        };
        self.advisor = Some((advisor, (file.clone(), span)));
    }

    fn landlock(
        &mut self,
        file: &SourceFile,
        span: Span,
        mode: &Node<ast::LandlockMode>,
        min_abi: Option<&Node<u32>>,
    ) {
        let abi = match min_abi {
            None => 1,
            Some(n) if (1..=7).contains(&n.node) => u8::try_from(n.node).unwrap_or(1),
            Some(n) => {
                self.err(
                    codes::E0403,
                    file,
                    n.span,
                    format!("Landlock ABI `{}` is not known", n.node),
                    "Landlock ABIs run from 1 (Linux 5.13) to 7 (Linux 6.15)",
                );
                1
            }
        };
        if let Some((_, (pf, ps))) = &self.landlock {
            let d = twice(file, span, pf, *ps, "landlock");
            self.diags.push(d);
            return;
        }
        self.landlock = Some((
            Landlock {
                mode: mode.node,
                min_abi: abi,
            },
            (file.clone(), span),
        ));
    }

    fn secret_source(
        &mut self,
        file: &SourceFile,
        source: &Node<ast::SecretSource>,
    ) -> Option<ir::SecretSource> {
        match &source.node {
            ast::SecretSource::Env(v) => {
                if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    self.err(
                        codes::E0602,
                        file,
                        source.span,
                        format!("`{v}` is not an environment variable name"),
                        "use letters, digits and `_`, such as `GITHUB_TOKEN`",
                    );
                    return None;
                }
                Some(ir::SecretSource::Env(v.clone()))
            }
            ast::SecretSource::File(p) => {
                if !p.starts_with('/') {
                    self.err(
                        codes::E0602,
                        file,
                        source.span,
                        format!("secret file `{p}` must be an absolute path"),
                        "write the full path, such as `/run/secrets/token`",
                    );
                    return None;
                }
                Some(ir::SecretSource::File(p.clone()))
            }
        }
    }

    pub(crate) fn hosts(&mut self, file: &SourceFile, hosts: &[Node<String>]) -> Vec<HostPattern> {
        let mut out = Vec::new();
        for h in hosts {
            match HostPattern::parse(&h.node) {
                Ok(p) => out.push(p),
                Err(e) => self
                    .diags
                    .push(pattern_diag(codes::E0301, file, h.span, &e)),
            }
        }
        out.sort();
        out.dedup();
        out
    }

    pub(crate) fn methods(
        &mut self,
        file: &SourceFile,
        methods: &[Node<String>],
    ) -> Option<MethodSet> {
        let mut set: Option<MethodSet> = None;
        let mut ok = true;
        for m in methods {
            match MethodSet::parse(&m.node) {
                Ok(one) => {
                    set = Some(match set {
                        None => one,
                        Some(s) => s.union(&one),
                    })
                }
                Err(e) => {
                    ok = false;
                    self.diags
                        .push(pattern_diag(codes::E0306, file, m.span, &e));
                }
            }
        }
        if ok { set } else { None }
    }

    fn credential(&mut self, file: &SourceFile, span: Span, c: &ast::Credential) {
        let mut source = None;
        let mut placeholder = None;
        let mut inject = None;
        let mut hosts: Option<Vec<HostPattern>> = None;
        let mut methods = None;
        let mut paths: Option<Vec<HttpPathGlob>> = None;
        let mut unreadable = false;
        for item in &c.items {
            let s = item.stmt.span;
            let seen = match &item.stmt.node {
                CredStmt::Secret(src) => {
                    let src = self.secret_source(file, src);
                    unreadable |= src.is_none();
                    set_once(&mut source, src)
                }
                CredStmt::Placeholder(p) => set_once(&mut placeholder, Some(p.node.clone())),
                CredStmt::InjectHeader { name, template } => {
                    if !template.node.contains("{secret}") {
                        self.err(
                            codes::E0602,
                            file,
                            template.span,
                            "the header template does not contain `{secret}`",
                            "write where the secret goes, such as `\"Bearer {secret}\"`",
                        );
                    }
                    set_once(
                        &mut inject,
                        Some(Injection::Header {
                            name: name.node.clone(),
                            template: template.node.clone(),
                        }),
                    )
                }
                CredStmt::InjectReplace => set_once(&mut inject, Some(Injection::Replace)),
                CredStmt::Hosts(h) => {
                    let h = self.hosts(file, h);
                    set_once(&mut hosts, Some(h))
                }
                CredStmt::Methods(m) => {
                    let m = self.methods(file, m);
                    set_once(&mut methods, m)
                }
                CredStmt::Paths(p) => {
                    let mut globs = Vec::new();
                    for path in p {
                        match HttpPathGlob::parse(&path.node) {
                            Ok(g) => globs.push(g),
                            Err(e) => {
                                self.diags
                                    .push(pattern_diag(codes::E0302, file, path.span, &e))
                            }
                        }
                    }
                    set_once(&mut paths, Some(globs))
                }
                CredStmt::Invalid(_) => {
                    unreadable = true;
                    true
                }
            };
            if !seen {
                self.err(
                    codes::E0102,
                    file,
                    s,
                    "this credential setting is given twice",
                    "keep one line per setting; list several hosts, methods or paths on one line",
                );
            }
        }
        if matches!(inject, Some(Injection::Replace)) && placeholder.is_none() {
            self.err(
                codes::E0601,
                file,
                c.name.span,
                format!("credential `{}` injects by replacing a placeholder but declares none", c.name.node),
                "add `placeholder env VAR`: the workload sees VAR holding a placeholder the proxy replaces",
            );
        }
        let missing: Vec<&str> = [
            (source.is_none(), "`secret env VAR` or `secret file PATH`"),
            (
                inject.is_none(),
                "`inject header NAME \"... {secret}\"` or `inject replace`",
            ),
            (hosts.as_ref().is_none_or(Vec::is_empty), "`hosts HOST...`"),
        ]
        .iter()
        .filter(|(m, _)| *m)
        .map(|(_, s)| *s)
        .collect();
        // A setting that did not parse is already an error where it is
        // written; "incomplete" would only repeat it, and first.
        if !missing.is_empty() && !unreadable {
            self.err(
                codes::E0601,
                file,
                c.name.span,
                format!("credential `{}` is incomplete", c.name.node),
                format!("add {}", missing.join(", ")),
            );
            return;
        }
        let (Some(source), Some(inject), Some(hosts)) = (source, inject, hosts) else {
            return;
        };
        self.spans.credentials.push((file.clone(), c.name.span));
        self.credentials.push(Credential {
            name: c.name.node.clone(),
            source,
            placeholder,
            inject,
            hosts,
            methods,
            paths,
            origin: origin(file, span, &c.name.node),
        });
    }
}

fn set_once<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = value;
    true
}

fn parse_pin(text: &str) -> Option<String> {
    let hex = text.get(7..)?.to_ascii_lowercase();
    (text.get(..7)?.eq_ignore_ascii_case("sha256:")
        && hex.len() == 64
        && hex.chars().all(|c| c.is_ascii_hexdigit()))
    .then_some(hex)
}

fn where_(this: &SourceFile, other: &SourceFile, span: Span) -> String {
    let (line, _) = other.line_col(span.start);
    if this.same_file(other) {
        format!("line {line}")
    } else {
        format!("{}:{line}", other.path())
    }
}

fn duplicate(
    file: &SourceFile,
    name: &Node<String>,
    pf: &SourceFile,
    ps: Span,
    what: &str,
) -> Diagnostic {
    let mut d = Diagnostic::new(
        codes::E0202,
        file,
        name.span,
        format!(
            "{what} `{}` is already defined at {}",
            name.node,
            where_(file, pf, ps)
        ),
    )
    .label("second definition")
    .help("give each one its own name, or merge them");
    if file.same_file(pf) {
        d = d.secondary(ps, "first defined here");
    }
    d
}

fn twice(file: &SourceFile, span: Span, pf: &SourceFile, ps: Span, what: &str) -> Diagnostic {
    let mut d = Diagnostic::new(
        codes::E0102,
        file,
        span,
        format!("`{what}` is already set at {}", where_(file, pf, ps)),
    )
    .label("set again here")
    .help(format!(
        "a policy has one `{what}` line, including its fragments; remove one"
    ));
    if file.same_file(pf) {
        d = d.secondary(ps, "first set here");
    }
    d
}
