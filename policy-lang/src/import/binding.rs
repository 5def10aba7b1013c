//! OpenShell's `credential_binding: { provider: NAME }`: an endpoint names
//! a provider attached to the sandbox whose profile defines no endpoints,
//! and that provider's credentials then go to the endpoint's host, on its
//! ports, under its `path` (OpenShell 2f7fb65: the gateway's
//! `policy_static_credential_endpoint_bindings`, the supervisor's
//! `resolver_for_endpoint`).
//!
//! The import reads providers from the credentials file, where OpenShell's
//! prover lists them: an entry without `target_hosts` is a provider whose
//! profile defines no endpoints. A binding and the file meet only here, so
//! a policy is translated first, every endpoint noted ([`Seen`]), and
//! [`check`] then holds the bindings against the file and the other
//! endpoints.

use policy_bundle::matcher::HostPattern;

use crate::diag::{Code, Diagnostic, Diagnostics, codes};
use crate::source::{Node, SourceFile, Span};

use super::patterns::{self, PathKind, Translated};

/// What the later checks need to know of one translated endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The policy group (binary set) it belongs to.
    pub(crate) rule: String,
    /// Its position in the group's `endpoints`, for OpenShell's messages.
    pub(crate) index: usize,
    pub(crate) span: Span,
    /// `host` as written; empty for a hostless (`allowed_ips`) endpoint.
    pub(crate) host: String,
    /// The host as our patterns; empty for a hostless endpoint.
    pub(crate) hosts: Vec<String>,
    pub(crate) ports: Vec<u64>,
    /// `path` as written.
    pub(crate) path: String,
    /// `L4-only` or `tls: skip` when OpenShell relays it uninspected.
    pub(crate) uninspected: Option<&'static str>,
    /// `allow_uninspected_credentials: true`.
    pub(crate) opted_in: bool,
    /// `protocol: tcp`: relayed uninspected, never closed for a credential.
    pub(crate) tcp: bool,
    /// OpenShell's `endpoint_contributes_request_pipeline_metadata`: an
    /// inspecting protocol, `allowed_ips`, `tls` or a binding.
    pub(crate) contributes: bool,
    pub(crate) binding: Option<Bound>,
}

/// An endpoint's `credential_binding`.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    /// The `credential_binding` key, where refusals point.
    pub(crate) key: Span,
    pub(crate) provider: Node<String>,
    /// The credential's `paths` in our syntax; `None` for every path.
    pub(crate) paths: Option<Vec<String>>,
}

/// A credentials-file entry, as far as bindings care.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) has_hosts: bool,
}

/// The `provider` of a `credential_binding` value, or `None` after an
/// error. OpenShell reads the value strictly (`deny_unknown_fields`,
/// `provider` required) and then refuses an empty or padded name.
fn provider(
    cx: &mut super::Cx<'_>,
    value: &super::yaml::YNode,
    host: &str,
) -> Option<Node<String>> {
    let mut provider = None;
    let mut ok = true;
    for (k, v) in cx.map(value, "`credential_binding`") {
        match super::key(k) {
            "provider" => provider = Some((v.span, cx.string(v, "`credential_binding.provider`"))),
            _ => {
                cx.unsupported(
                    k,
                    "`credential_binding`",
                    "OpenShell knows only `provider` there and refuses the policy otherwise",
                );
                ok = false;
            }
        }
    }
    let Some((span, name)) = provider else {
        cx.invalid(
            value.span,
            "`credential_binding` has no `provider`; OpenShell refuses the policy: missing field `provider`",
            "write `credential_binding: { provider: NAME }` with the name of the provider attached to the sandbox",
        );
        return None;
    };
    let name = name.unwrap_or_else(|| Node::new(String::new(), span));
    if name.node.trim().is_empty() {
        cx.invalid(
            span,
            format!("OpenShell refuses the policy: credential_binding.provider is required for endpoint '{host}'"),
            "name the provider attached to the sandbox",
        );
        return None;
    }
    if name.node.trim() != name.node {
        cx.invalid(
            span,
            format!("OpenShell refuses the policy: credential_binding.provider '{}' must not contain leading or trailing whitespace", name.node),
            "remove the spaces around the name",
        );
        return None;
    }
    ok.then_some(name)
}

/// The endpoint's `credential_binding`, checked as OpenShell checks it
/// before it resolves the provider; `None` after an error.
pub(super) fn bound(
    cx: &mut super::Cx<'_>,
    host: Option<&Node<String>>,
    path: Option<&Node<String>>,
    key: Span,
    value: &super::yaml::YNode,
) -> Option<Bound> {
    let host = host.map_or("", |h| h.node.as_str());
    let provider = provider(cx, value, host)?;
    if host.trim().is_empty() {
        cx.invalid(
            key,
            format!("OpenShell refuses the policy: credential-bound endpoint for provider '{}' must define a host", provider.node),
            "add `host`: a credential goes to a named host, not to addresses",
        );
        return None;
    }
    match paths(path.map_or("", |p| p.node.as_str())) {
        Ok(paths) => Some(Bound {
            key,
            provider,
            paths,
        }),
        Err(why) => {
            cx.push(
                codes::E0704,
                path.map_or(key, |p| p.span),
                format!("the credential bound to this endpoint cannot be scoped exactly: {why}"),
                "use no `path`, a literal path, or a literal path followed by `/**`",
            );
            None
        }
    }
}

/// The credential's `paths` for an endpoint `path`, as OpenShell scopes a
/// bound credential (`EndpointPathPattern`: empty, `**` and `/**` are
/// every path, `P/**` is `P` and below, anything else a `glob` crate
/// pattern). That last dialect differs from the one the endpoint's own
/// `path` is matched with, so only literal paths and literal subtrees are
/// translated.
fn paths(path: &str) -> Result<Option<Vec<String>>, String> {
    if matches!(path, "" | "**" | "/**") {
        return Ok(None);
    }
    let (literal, subtree) = match path.strip_suffix("/**") {
        Some(prefix) => (prefix, true),
        None => (path, false),
    };
    if literal.contains(['*', '?', '[', ']', '{', '}', '\\']) || !literal.starts_with('/') {
        return Err(format!(
            "OpenShell scopes a bound credential to `{path}` with another glob dialect than the endpoint's; only a literal path or a literal path followed by `/**` is translated"
        ));
    }
    match patterns::path(literal, PathKind::Http) {
        Translated::Patterns { patterns, .. } => Ok(Some(
            patterns
                .into_iter()
                .map(|p| if subtree { format!("{p}/**") } else { p })
                .collect(),
        )),
        Translated::Never(why) | Translated::Inexpressible(why) => Err(format!(
            "the path `{path}` cannot be translated exactly: {why}"
        )),
    }
}

fn parsed(hosts: &[String]) -> Vec<HostPattern> {
    hosts
        .iter()
        .filter_map(|h| HostPattern::parse(h).ok())
        .collect()
}

/// Whether two endpoints can match one host; a hostless endpoint matches
/// any host, as in OpenShell's ambiguity check.
fn hosts_overlap(a: &Seen, b: &Seen) -> bool {
    if a.hosts.is_empty() || b.hosts.is_empty() {
        return true;
    }
    let (pa, pb) = (parsed(&a.hosts), parsed(&b.hosts));
    pa.iter().any(|x| pb.iter().any(|y| x.may_overlap(y)))
}

fn shared_ports(a: &Seen, b: &Seen) -> Vec<u64> {
    a.ports
        .iter()
        .copied()
        .filter(|p| b.ports.contains(p))
        .collect()
}

fn selector(s: &Seen) -> String {
    let host = if s.host.is_empty() {
        "<any-host>"
    } else {
        &s.host
    };
    let ports: Vec<String> = s.ports.iter().map(u64::to_string).collect();
    format!("{host}:{}{}", ports.join(","), s.path)
}

fn provider_of(s: &Seen) -> &str {
    s.binding.as_ref().map_or("", |b| b.provider.node.as_str())
}

/// The bindings held against the credentials file (`None`: no
/// `--credentials`) and against the other endpoints. Reported in the
/// policy file, at the binding or the endpoint OpenShell would refuse.
pub(crate) fn check(file: &SourceFile, seen: &[Seen], entries: Option<&[Entry]>) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let mut push = |code: Code, span: Span, message: String, help: String| {
        diags.push(Diagnostic::new(code, file, span, message).help(help));
    };
    let bound: Vec<(&Seen, &Bound)> = seen
        .iter()
        .filter_map(|s| s.binding.as_ref().map(|b| (s, b)))
        .collect();
    // Providers OpenShell would resolve to an endpointless profile.
    let mut endpointless: Vec<&str> = Vec::new();
    for (_, b) in &bound {
        let name = b.provider.node.as_str();
        match entries.map(|e| e.iter().find(|e| e.name == name)) {
            None => push(
                codes::E0706,
                b.key,
                format!(
                    "`credential_binding` names provider `{name}`, but no credentials file was given"
                ),
                format!(
                    "pass `--credentials FILE` whose entry `name: {name}` has no `target_hosts` (its provider profile defines no endpoints)"
                ),
            ),
            Some(None) => push(
                codes::E0706,
                b.key,
                format!(
                    "OpenShell refuses the policy: credential_binding references provider '{name}', but that provider is not attached to the sandbox (the credentials file has no entry named `{name}`)"
                ),
                format!(
                    "add an entry `name: {name}` without `target_hosts` to the credentials file, or correct the name: it must match exactly"
                ),
            ),
            Some(Some(e)) if e.has_hosts => push(
                codes::E0703,
                b.key,
                format!(
                    "OpenShell refuses the policy: credential_binding provider '{name}' profile already defines endpoints; profile endpoints remain the credential boundary"
                ),
                format!(
                    "remove `credential_binding` (the credential already goes to the `target_hosts` of `{name}`), or remove `target_hosts` from `{name}` in the credentials file"
                ),
            ),
            Some(Some(_)) => {
                if !endpointless.contains(&name) {
                    endpointless.push(name);
                }
            }
        }
    }
    // A credential here has one list of paths for all its hosts.
    for (i, (s, b)) in bound.iter().enumerate() {
        let first = bound
            .iter()
            .take(i)
            .find(|(_, o)| o.provider.node == b.provider.node && o.paths != b.paths);
        if let Some((o, _)) = first {
            let shown = |p: &str| {
                if p.is_empty() {
                    "no `path`".to_string()
                } else {
                    format!("`{p}`")
                }
            };
            push(
                codes::E0704,
                b.key,
                format!(
                    "provider `{}` is bound on endpoints with different paths ({} and {}); a credential here has one list of paths for all its hosts",
                    b.provider.node,
                    shown(&o.path),
                    shown(&s.path)
                ),
                "bind the provider only on endpoints with the same `path` (or none)".into(),
            );
        }
    }
    ambiguities(seen, &mut push);
    for name in endpointless {
        let of: Vec<&Seen> = bound
            .iter()
            .filter(|(_, b)| b.provider.node == name)
            .map(|(s, _)| *s)
            .collect();
        uninspected(seen, &of, &mut push);
        other_ports(seen, name, &of, &mut push);
    }
    diags
}

/// OpenShell's endpoint ambiguity check, for the one field bindings add:
/// two endpoints that can serve the same request must name the same
/// provider (or none).
fn ambiguities(seen: &[Seen], push: &mut impl FnMut(Code, Span, String, String)) {
    for (i, a) in seen.iter().enumerate() {
        for b in seen.iter().skip(i + 1) {
            if provider_of(a) == provider_of(b) || !(a.contributes && b.contributes) {
                continue;
            }
            let ports = shared_ports(a, b);
            if ports.is_empty() || !hosts_overlap(a, b) {
                continue;
            }
            let any = |p: &str| matches!(p, "" | "**" | "/**");
            let specificity = |p: &str| p.chars().filter(|c| *c != '*').count();
            // OpenShell decides overlap of two other globs with its own
            // glob intersection; equal text is the case that always overlaps.
            let paths_overlap = any(&a.path) || any(&b.path) || a.path == b.path;
            if !paths_overlap || specificity(&a.path) != specificity(&b.path) {
                continue;
            }
            let span = b
                .binding
                .as_ref()
                .or(a.binding.as_ref())
                .map_or(b.span, |x| x.key);
            let ports: Vec<String> = ports.iter().map(u64::to_string).collect();
            push(
                codes::E0703,
                span,
                format!(
                    "OpenShell refuses the policy: network policies '{}' endpoint[{}] ({}) and '{}' endpoint[{}] ({}) overlap on port(s) {} with conflicting metadata: credential_binding.provider",
                    a.rule, a.index, selector(a), b.rule, b.index, selector(b), ports.join(",")
                ),
                "bind the same provider on both endpoints, or give them different hosts, ports or paths".into(),
            );
        }
    }
}

/// OpenShell's admission gate: an endpoint it relays uninspected (no
/// `protocol`, or `tls: skip`) that reaches a bound host on a bound port
/// would carry the credential's placeholder out unchecked, so the policy
/// is refused unless the endpoint opts in.
fn uninspected(seen: &[Seen], bound: &[&Seen], push: &mut impl FnMut(Code, Span, String, String)) {
    for s in seen {
        let Some(mode) = s.uninspected.filter(|_| !s.opted_in) else {
            continue;
        };
        if s.hosts.is_empty() {
            continue;
        }
        if !bound
            .iter()
            .any(|b| hosts_overlap(s, b) && !shared_ports(s, b).is_empty())
        {
            continue;
        }
        push(
            codes::E0703,
            s.span,
            format!(
                "OpenShell refuses the policy: credentialed endpoint '{}:{}' in rule '{}' uses {mode}; configure L7 inspection or explicitly set allow_uninspected_credentials: true",
                s.host,
                s.ports.first().copied().unwrap_or(0),
                s.rule
            ),
            if mode == "L4-only" {
                "add `protocol: rest` with `rules` or `access`, or set `allow_uninspected_credentials: true` on this endpoint".into()
            } else {
                "remove `tls: skip`, or set `allow_uninspected_credentials: true` on this endpoint"
                    .into()
            },
        );
    }
}

/// OpenShell injects a bound credential on the bound ports only; a
/// credential here goes to its hosts on every port. The two agree unless
/// another endpoint reaches a bound host on another port where either
/// would act on the credential: inspected (OpenShell leaves the
/// placeholder, we inject), or uninspected without opting in (OpenShell
/// relays it, we refuse the connection).
fn other_ports(
    seen: &[Seen],
    provider: &str,
    bound: &[&Seen],
    push: &mut impl FnMut(Code, Span, String, String),
) {
    for s in seen {
        if s.tcp || s.hosts.is_empty() || (s.uninspected.is_some() && s.opted_in) {
            continue;
        }
        for b in bound.iter().filter(|b| hosts_overlap(s, b)) {
            let covered = |p: &u64| {
                bound
                    .iter()
                    .any(|o| o.hosts == b.hosts && o.ports.contains(p))
            };
            let Some(port) = s.ports.iter().find(|p| !covered(p)) else {
                continue;
            };
            let ports: Vec<String> = b.ports.iter().map(u64::to_string).collect();
            push(
                codes::E0704,
                s.span,
                format!(
                    "provider `{provider}` is bound to `{}` on port {}, and this endpoint reaches `{}` on port {port}: OpenShell injects the credential on the bound ports only, a credential here goes to every port of its hosts",
                    b.host,
                    ports.join(","),
                    s.host
                ),
                "bind the provider on this port too (list it in the bound endpoint's `ports`), or remove this endpoint".into(),
            );
            break;
        }
    }
}
