//! From denials to the narrowest rules that admit them: one rule per
//! binary (and pin) and destination, the exact host and port, and for
//! requests the proxy refused the exact methods and the smallest path
//! patterns covering the denied paths. Widening happens only when asked
//! (`--generalize`), and each widening is described.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use policy_bundle::Bundle;
use policy_bundle::matcher::{
    BinaryGlob, HostPattern, HttpPathGlob, canonicalize_path, normalize_host,
};

use crate::denylog::Denial;

/// What `--generalize` may widen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Generalize {
    /// Paths: one `P/**` per method, P the denied paths' common prefix.
    Paths,
    /// Hosts: `*.parent` for a host of three labels or more.
    Hosts,
}

impl Generalize {
    /// Every kind, by the word `--generalize` takes.
    pub const ALL: [(&'static str, Generalize); 2] =
        [("paths", Generalize::Paths), ("hosts", Generalize::Hosts)];

    /// The kind `word` names, if any.
    #[must_use]
    pub fn parse(word: &str) -> Option<Generalize> {
        Self::ALL.iter().find(|(w, _)| *w == word).map(|(_, g)| *g)
    }
}

/// A denial this module can name, with the log line it came from.
#[derive(Debug, Clone)]
pub struct Named {
    pub line: usize,
    pub denial: Denial,
    /// The binary as the rule writes it.
    binary: String,
    /// The destination as the rule writes it.
    dest: String,
    /// Canonical path segments of an HTTP denial.
    segments: Option<Vec<String>>,
}

/// One rule of the suggestion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// The binary as a pattern (the path, glob characters escaped).
    pub binary: String,
    pub sha256: Option<String>,
    /// The destination as written: a host, `*.parent`, an address.
    pub dest: String,
    pub port: u16,
    /// Through the L7 proxy (`http`).
    pub inspected: bool,
    /// `allow METHODS PATHS` lines.
    pub rules: Vec<L7Rule>,
    /// Internal addresses the host name resolved to (`addresses`).
    pub addresses: Vec<IpAddr>,
    /// Credentials bound to the destination: the proxy injects them on
    /// requests inside their binding.
    pub credentials: Vec<String>,
    /// What `--generalize` added, in words.
    pub widened: Vec<String>,
    /// The log lines it admits.
    pub lines: Vec<usize>,
}

/// `allow METHODS PATHS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L7Rule {
    pub methods: Vec<String>,
    pub paths: Vec<String>,
}

/// Checks that the language can name the denial's binary, destination,
/// method and path; why not otherwise.
pub fn name(line: usize, denial: Denial) -> Result<Named, String> {
    let binary = binary_text(&denial.binary)?;
    if policy_bundle::is_advisor_dest(denial.host.as_deref(), denial.ip) {
        return Err(format!(
            "`{}` is the in-sandbox advisor, which no `allow` rule reaches: add `advisor {binary}` to the policy to let this binary reach it",
            policy_bundle::ADVISOR_HOST
        ));
    }
    let dest = match (&denial.host, denial.ip) {
        (Some(h), _) => host_text(h)?,
        (None, Some(IpAddr::V4(ip))) => ip.to_string(),
        (None, Some(IpAddr::V6(ip))) => format!("[{ip}]"),
        (None, None) => return Err("the log names no destination".into()),
    };
    if denial.port == 0 {
        return Err("port 0 cannot be allowed".into());
    }
    let segments = match &denial.http {
        None => None,
        Some(h) => {
            if let Some(body) = &h.body {
                return Err(format!(
                    "the proxy judged the request body ({body}); `suggest` writes HTTP method and path rules only, write the {} rule by hand",
                    if body.starts_with("rpc") {
                        "`allow rpc`"
                    } else {
                        "`allow graphql`"
                    }
                ));
            }
            if h.method.is_empty()
                || !h
                    .method
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(format!(
                    "the method `{}` cannot be named in a rule",
                    h.method
                ));
            }
            let canon = canonicalize_path(&h.target, false)
                .map_err(|e| format!("the path `{}` cannot be named in a rule: {e}", h.target))?;
            let segs: Vec<String> = if canon.path == "/" {
                Vec::new()
            } else {
                canon
                    .path
                    .trim_start_matches('/')
                    .split('/')
                    .map(escape_segment)
                    .collect()
            };
            let text = path_text(&segs);
            match HttpPathGlob::parse(&text) {
                Ok(g) if g.is_exact() => {}
                _ => {
                    return Err(format!(
                        "the path `{}` cannot be written as a literal pattern",
                        canon.path
                    ));
                }
            }
            Some(segs)
        }
    };
    Ok(Named {
        line,
        denial,
        binary,
        dest,
        segments,
    })
}

fn binary_text(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!(
            "the binary `{path}` is not an absolute path; rules name executables by their path"
        ));
    }
    if path
        .chars()
        .any(|c| c.is_control() || c == '"' || c == '\\')
    {
        return Err(format!("the binary `{path}` cannot be written in a rule"));
    }
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    match BinaryGlob::parse(&out) {
        Ok(g) if g.is_exact() => {}
        Ok(_) => return Err(format!("the binary `{path}` cannot be named exactly")),
        Err(e) => return Err(format!("the binary `{path}` cannot be named: {e}")),
    }
    Ok(out)
}

fn host_text(host: &str) -> Result<String, String> {
    if let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        });
    }
    let normal =
        normalize_host(host).map_err(|e| format!("the host `{host}` cannot be named: {e}"))?;
    match HostPattern::parse(&normal) {
        Ok(p) if p.is_exact() => Ok(normal),
        Ok(_) => Err(format!("the host `{host}` cannot be named exactly")),
        Err(e) => Err(format!("the host `{host}` cannot be named: {e}")),
    }
}

/// A canonical path segment as literal pattern text: glob characters
/// escaped, and what the grammar reads as syntax percent-encoded (a
/// pattern's escapes are decoded like a request's, so `%7B` is `{`).
fn escape_segment(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    for c in seg.chars() {
        match c {
            '*' | '?' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            '"' => out.push_str("%22"),
            c => out.push(c),
        }
    }
    out
}

fn path_text(segs: &[String]) -> String {
    if segs.is_empty() {
        "/".to_owned()
    } else {
        segs.iter().map(|s| format!("/{s}")).collect()
    }
}

/// Whether an address is one the policy must name explicitly.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments().first().copied().unwrap_or_default();
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

type Key = (String, Option<String>, String, u16);

/// The suggestion for every named denial, in a stable order.
pub fn suggest(named: &[Named], bundle: &Bundle, generalize: &[Generalize]) -> Vec<Suggestion> {
    let wide_hosts = generalize.contains(&Generalize::Hosts);
    let mut groups: BTreeMap<Key, Vec<&Named>> = BTreeMap::new();
    for n in named {
        let dest = if wide_hosts && n.denial.host.is_some() {
            widen_host(&n.dest).unwrap_or_else(|| n.dest.clone())
        } else {
            n.dest.clone()
        };
        groups
            .entry((
                n.binary.clone(),
                n.denial.sha256.clone(),
                dest,
                n.denial.port,
            ))
            .or_default()
            .push(n);
    }
    groups
        .into_iter()
        .map(|((binary, sha256, dest, port), members)| {
            group(binary, sha256, dest, port, &members, bundle, generalize)
        })
        .collect()
}

/// `*.example.com` for `api.example.com`; `None` when the parent would be
/// a top-level domain or the host is an address.
fn widen_host(host: &str) -> Option<String> {
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return None;
    }
    let (_, parent) = host.split_once('.')?;
    parent.contains('.').then(|| format!("*.{parent}"))
}

fn group(
    binary: String,
    sha256: Option<String>,
    dest: String,
    port: u16,
    members: &[&Named],
    bundle: &Bundle,
    generalize: &[Generalize],
) -> Suggestion {
    let pattern = HostPattern::parse(dest.trim_start_matches('[').trim_end_matches(']')).ok();
    let credentials: Vec<String> = bundle
        .enforcement
        .credentials
        .iter()
        .filter(|c| {
            c.hosts.iter().any(|h| {
                pattern
                    .as_ref()
                    .is_some_and(|p| p.may_overlap(h) || h.matches(p.as_str()))
            })
        })
        .map(|c| c.name.clone())
        .collect();
    let mut per_method: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
    for n in members {
        if let (Some(h), Some(segs)) = (&n.denial.http, &n.segments) {
            per_method
                .entry(h.method.clone())
                .or_default()
                .insert(segs.clone());
        }
    }
    let mut widened = Vec::new();
    let hosts: BTreeSet<&str> = members.iter().map(|n| n.dest.as_str()).collect();
    if dest.starts_with("*.") {
        widened.push(format!(
            "`--generalize hosts`: `{dest}` admits every host one label under `{}`, not only {}",
            dest.trim_start_matches("*."),
            quoted_list(hosts.iter().copied())
        ));
    }
    let wide_paths = generalize.contains(&Generalize::Paths);
    let mut by_pattern: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (method, paths) in &per_method {
        let patterns = if wide_paths {
            let prefix = common_prefix(paths);
            let pattern = format!("{}/**", path_text(&prefix).trim_end_matches('/'));
            widened.push(format!(
                "`--generalize paths`: `{method} {pattern}` admits every path under `{}`, not only the {} denied",
                path_text(&prefix),
                plural(paths.len(), "path")
            ));
            vec![pattern]
        } else {
            merge(paths).iter().map(|p| path_text(p)).collect()
        };
        for p in patterns {
            by_pattern.entry(p).or_default().insert(method.clone());
        }
    }
    let mut by_methods: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for (pattern, methods) in by_pattern {
        by_methods
            .entry(methods.into_iter().collect())
            .or_default()
            .push(pattern);
    }
    let rules = by_methods
        .into_iter()
        .map(|(methods, paths)| L7Rule { methods, paths })
        .collect();
    // A request the proxy judged came through a rule that reaches the
    // address already: the new rule names it as that rule does. Naming an
    // address the reaching rule does not name (the operator's `--resolve`
    // named it) would leave the new rule alone to reach it, and the old
    // rule's requests refused; not naming one it names would leave the new
    // rule unable to.
    let is_name = members.iter().any(|n| n.denial.host.is_some());
    let addresses: BTreeSet<IpAddr> = if is_name {
        members
            .iter()
            .filter_map(|n| {
                let ip = n.denial.ip.filter(|ip| is_internal(*ip))?;
                let keep = match (&n.denial.http, &n.denial.host) {
                    (Some(_), Some(host)) => named_by_a_route(bundle, host, port, ip),
                    _ => true,
                };
                keep.then_some(ip)
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    let inspected = !per_method.is_empty() || !credentials.is_empty();
    let mut lines: Vec<usize> = members.iter().map(|n| n.line).collect();
    lines.sort_unstable();
    Suggestion {
        binary,
        sha256,
        dest,
        port,
        inspected,
        rules,
        addresses: addresses.into_iter().collect(),
        credentials,
        widened,
        lines,
    }
}

/// Whether a route to `host` on `port` lists `ip` among its addresses.
fn named_by_a_route(bundle: &Bundle, host: &str, port: u16, ip: IpAddr) -> bool {
    bundle.enforcement.seccomp.routes.iter().any(|r| {
        matches!(&r.dest, policy_bundle::Dest::Host(h) if h.matches(host))
            && r.ports.contains(port)
            && r.addresses.as_ref().is_some_and(|a| a.contains(ip))
    })
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn quoted_list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn common_prefix(paths: &BTreeSet<Vec<String>>) -> Vec<String> {
    let mut it = paths.iter();
    let Some(first) = it.next() else {
        return Vec::new();
    };
    let mut len = first.len();
    for p in it {
        len = len.min(first.iter().zip(p).take_while(|(a, b)| a == b).count());
    }
    first.iter().take(len).cloned().collect()
}

/// The smallest set of patterns covering `paths`: two paths of the same
/// length that differ in exactly one segment become one pattern with `*`
/// there, until no two do. A path that is alone stays a literal, and `*`
/// never spans segments (`**` is never written here).
pub fn merge(paths: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut set = paths.clone();
    loop {
        let mut changed = false;
        let longest = set.iter().map(Vec::len).max().unwrap_or(0);
        for pos in 0..longest {
            let mut buckets: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
            for p in &set {
                if p.len() > pos {
                    let mut key = p.clone();
                    if let Some(seg) = key.get_mut(pos) {
                        "\u{0}".clone_into(seg);
                    }
                    buckets.entry(key).or_default().insert(p.clone());
                }
            }
            for (key, members) in buckets {
                if members.len() < 2 {
                    continue;
                }
                for m in &members {
                    set.remove(m);
                }
                let mut merged = key;
                if let Some(seg) = merged.get_mut(pos) {
                    "*".clone_into(seg);
                }
                set.insert(merged);
                changed = true;
            }
        }
        if !changed {
            return set;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> BTreeSet<Vec<String>> {
        list.iter()
            .map(|p| {
                p.trim_start_matches('/')
                    .split('/')
                    .map(str::to_owned)
                    .collect()
            })
            .collect()
    }

    fn texts(set: &BTreeSet<Vec<String>>) -> Vec<String> {
        set.iter().map(|p| path_text(p)).collect()
    }

    #[test]
    fn the_advisor_endpoint_is_named_by_its_statement_not_an_allow_rule() {
        for (host, ip) in [
            (Some("policy.local"), Some("192.0.0.100")),
            (None, Some("192.0.0.100")),
        ] {
            let denial = Denial {
                binary: "/usr/bin/curl".into(),
                sha256: None,
                host: host.map(str::to_owned),
                ip: ip.and_then(|i| i.parse().ok()),
                port: 80,
                protocol: "tcp".into(),
                http: None,
                rule: None,
                reason: String::new(),
                policy: Some("p".into()),
                digest: None,
                product: None,
                openshell: false,
                operator_named: false,
            };
            let Err(why) = name(1, denial) else {
                panic!("an allow rule for the advisor endpoint");
            };
            assert!(why.contains("add `advisor /usr/bin/curl`"), "{why}");
        }
    }

    #[test]
    fn one_path_stays_a_literal() {
        assert_eq!(
            texts(&merge(&paths(&["/repos/o/r/pulls"]))),
            ["/repos/o/r/pulls"]
        );
    }

    #[test]
    fn a_star_only_where_paths_differ() {
        let got = merge(&paths(&[
            "/repos/a/x/pulls",
            "/repos/b/x/pulls",
            "/repos/c/x/pulls",
        ]));
        assert_eq!(texts(&got), ["/repos/*/x/pulls"]);
        let got = merge(&paths(&["/repos/a/x/pulls", "/repos/b/y/pulls"]));
        assert_eq!(texts(&got), ["/repos/a/x/pulls", "/repos/b/y/pulls"]);
        let got = merge(&paths(&["/a/b", "/a/b/c"]));
        assert_eq!(texts(&got), ["/a/b", "/a/b/c"]);
    }

    #[test]
    fn hosts_widen_one_label() {
        assert_eq!(
            widen_host("api.github.com").as_deref(),
            Some("*.github.com")
        );
        assert_eq!(widen_host("example.com"), None);
        assert_eq!(widen_host("10.0.0.1"), None);
    }
}
