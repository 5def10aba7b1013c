//! Endpoint rules: `allow BINARIES -> DEST:PORTS OPTIONS { ... }`.

use std::net::Ipv4Addr;

use crate::ast::{self, Access, EndpointOption, EndpointStmt, Protocol, RuleAction};
use crate::diag::{Diagnostic, codes};
use crate::ir::{
    BinaryRef, Dest, Endpoint, EndpointKind, Enforcement, HttpEndpoint, L7Protocol, L7Rule, TlsMode,
};
use crate::source::{Node, SourceFile, Span};
use policy_bundle::matcher::{
    AddrSet, BinaryGlob, EXTENSION_METHODS, EndpointTextError, HostPattern, HttpPathGlob,
    MethodSet, OperationTypeSet, PatternError, PortSet, QueryMatcher, STANDARD_METHODS, ValueGlob,
    WEBSOCKET_TEXT, split_endpoint,
};

use super::{Resolver, origin, pattern_diag};

mod fold;
mod graphql;
mod rpc;
mod websocket;
use graphql::GraphqlRules;
use rpc::{MAX_BODY_LIMIT, RpcRules};
use websocket::WebsocketChecks;

pub(super) fn resolve(
    r: &mut Resolver,
    file: &SourceFile,
    span: Span,
    a: &ast::Allow,
) -> Option<Endpoint> {
    let rule_name = a
        .subjects
        .iter()
        .map(|s| s.node.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let binaries = subjects(r, file, &a.subjects);
    let dest = match parse_endpoint(&a.endpoint.node) {
        Ok(d) => Some(d),
        Err((code, e)) => {
            r.diags.push(pattern_diag(code, file, a.endpoint.span, &e));
            None
        }
    };

    let mut protocol: Option<Node<Protocol>> = None;
    let mut enforcement: Option<Node<Enforcement>> = None;
    let mut access: Option<Node<Access>> = None;
    let mut tls: Option<Node<TlsMode>> = None;
    let mut encoded_slash = None;
    let mut fold_paths = None;
    let mut uninspected = false;
    let mut all_mcp_methods: Option<Span> = None;
    let mut loose_tool_names: Option<Span> = None;
    let mut ws_rewrite: Option<Span> = None;
    let mut body_rewrite: Option<Span> = None;
    for opt in &a.options {
        let conflict = match opt.node {
            EndpointOption::Protocol(p) => once(&mut protocol, Node::new(p, opt.span)),
            EndpointOption::Enforcement(e) => once(&mut enforcement, Node::new(e, opt.span)),
            EndpointOption::Access(x) => once(&mut access, Node::new(x, opt.span)),
            EndpointOption::Tls(t) => once(&mut tls, Node::new(t, opt.span)),
            EndpointOption::EncodedSlash => once(&mut encoded_slash, Node::new((), opt.span)),
            EndpointOption::FoldPaths => once(&mut fold_paths, Node::new((), opt.span)),
            EndpointOption::UninspectedCredentials => {
                let was = uninspected;
                uninspected = true;
                was.then_some(())
            }
            EndpointOption::AllMcpMethods => once(&mut all_mcp_methods, opt.span),
            EndpointOption::LooseToolNames => once(&mut loose_tool_names, opt.span),
            EndpointOption::WebsocketCredentialRewrite => once(&mut ws_rewrite, opt.span),
            EndpointOption::RequestBodyCredentialRewrite => once(&mut body_rewrite, opt.span),
        };
        if conflict.is_some() {
            r.diags.push(
                Diagnostic::new(codes::E0502, file, opt.span, "this option conflicts with an earlier one on the same rule")
                    .label("conflicting option")
                    .help("give one protocol, one enforcement mode, one access preset and one tls mode per rule"),
            );
        }
    }
    let proto = protocol.as_ref().map_or(Protocol::L4, |p| p.node);
    if !proto.is_l7() {
        let http_only: [(Option<Span>, &str); 5] = [
            (enforcement.as_ref().map(|n| n.span), "enforcement modes"),
            (access.as_ref().map(|n| n.span), "access presets"),
            (tls.as_ref().map(|n| n.span), "tls modes"),
            (encoded_slash.as_ref().map(|n| n.span), "`encoded_slash`"),
            (fold_paths.as_ref().map(|n| n.span), "`fold_paths`"),
        ];
        for (s, what) in http_only.into_iter() {
            if let Some(s) = s {
                r.diags.push(http_only_diag(file, s, what, proto));
            }
        }
    }
    if proto.is_rpc()
        && let Some(acc) = &access
    {
        r.diags.push(
            protocol_diag(
                file,
                acc.span,
                format!("access presets are not valid on {}", protocol_name(proto)),
            )
            .help("HTTP method and path presets cannot authorize JSON-RPC calls; write `allow rpc METHOD...` rules (or `all_mcp_methods` on an MCP endpoint)"),
        );
    }
    for (s, what) in [
        (all_mcp_methods, "`all_mcp_methods`"),
        (loose_tool_names, "`loose_tool_names`"),
    ] {
        if let Some(s) = s.filter(|_| proto != Protocol::Mcp) {
            r.diags.push(
                protocol_diag(
                    file,
                    s,
                    format!(
                        "{what} needs the `mcp` protocol; this is {}",
                        protocol_name(proto)
                    ),
                )
                .label("needs `mcp`")
                .help("add `mcp` to the rule's options, or remove the flag"),
            );
        }
    }

    if let Some(s) = ws_rewrite.filter(|_| !matches!(proto, Protocol::Websocket | Protocol::Http)) {
        r.diags.push(ws_rewrite_diag(file, s, proto));
    }
    if let Some(s) = body_rewrite.filter(|_| proto != Protocol::Http) {
        r.diags.push(body_rewrite_diag(file, s, proto));
    }

    let mut allow = Vec::new();
    let mut deny = Vec::new();
    let mut path = None;
    let mut addresses: Option<AddrSet> = None;
    let mut rpc = RpcRules::default();
    let mut gql = GraphqlRules::default();
    let mut ws = WebsocketChecks::default();
    let mut unfolded = None;
    if let Some(acc) = access.as_ref().filter(|_| proto == Protocol::Graphql) {
        let types = match acc.node {
            Access::ReadOnly => OperationTypeSet::read_only(),
            Access::ReadWrite => OperationTypeSet::read_write(),
            Access::Full => OperationTypeSet::all(),
        };
        gql.preset(types, file, acc.span, &rule_name);
    }
    if let Some(acc) = access.as_ref().filter(|_| !proto.reads_body()) {
        let methods = match acc.node {
            _ if proto == Protocol::Websocket => {
                ws.any_allow = true;
                if acc.node == Access::ReadWrite {
                    ws.text_allows.push(acc.span);
                }
                websocket::preset_methods(acc.node)
            }
            Access::ReadOnly => MethodSet::read_only(),
            Access::ReadWrite => MethodSet::read_write(),
            Access::Full => MethodSet::full(),
        };
        if let Ok(all) = HttpPathGlob::parse("/**") {
            allow.push(L7Rule {
                methods,
                path: all,
                query: Vec::new(),
                origin: origin(file, acc.span, &rule_name),
            });
        }
    }
    for item in a.body.iter().flat_map(|b| b.items.iter()) {
        let s = item.stmt.span;
        match &item.stmt.node {
            EndpointStmt::Rule {
                action,
                methods,
                paths,
                query,
            } => {
                if proto.reads_body() {
                    let help = if proto == Protocol::Graphql {
                        "write `allow graphql TYPES... [name GLOB] [field GLOB...]` rules here; REST rules for other paths belong on an `http` endpoint beside it"
                    } else {
                        "write `allow rpc METHOD... [tool GLOB...]` rules here, or make the endpoint `http`"
                    };
                    r.diags.push(
                        protocol_diag(
                            file,
                            s,
                            format!(
                                "HTTP method and path rules are not valid on {}",
                                protocol_name(proto)
                            ),
                        )
                        .help(help),
                    );
                    continue;
                }
                if !matches!(proto, Protocol::Http | Protocol::Websocket) {
                    r.diags.push(http_only_diag(file, s, "L7 rules", proto));
                    continue;
                }
                if !websocket::check_methods(r, file, proto, methods) {
                    gql.refused = true;
                    ws.any_allow |= action.node == RuleAction::Allow;
                    continue;
                }
                if proto == Protocol::Websocket && action.node == RuleAction::Allow {
                    ws.any_allow = true;
                    if websocket::names_text(methods) {
                        ws.text_allows.push(s);
                    }
                }
                let rules = l7_rules(r, file, s, &rule_name, methods, paths, query);
                let inspected = tls.as_ref().is_none_or(|t| t.node == TlsMode::Auto);
                if action.node == RuleAction::Deny && fold_paths.is_none() && inspected {
                    fold::Unfolded::note(&mut unfolded, paths);
                }
                match action.node {
                    RuleAction::Allow => allow.extend(rules),
                    RuleAction::Deny => deny.extend(rules),
                }
            }
            EndpointStmt::Rpc {
                action,
                methods,
                tools,
            } => {
                if !proto.is_rpc() {
                    r.diags.push(
                        protocol_diag(
                            file,
                            s,
                            format!(
                                "`rpc` rules need the `mcp` or `json-rpc` protocol; this is {}",
                                protocol_name(proto)
                            ),
                        )
                        .label("needs `mcp` or `json-rpc`")
                        .help("add `mcp` or `json-rpc` to the rule's options; an `http` endpoint takes `allow METHOD /path` rules"),
                    );
                    continue;
                }
                rpc.rule(r, file, s, &rule_name, proto, action.node, methods, tools);
            }
            EndpointStmt::Graphql {
                action,
                types,
                name,
                fields,
            } => {
                if !proto.takes_graphql() {
                    r.diags
                        .push(needs_graphql(file, s, "`graphql` rules", proto));
                    continue;
                }
                gql.rule(
                    r,
                    file,
                    s,
                    &rule_name,
                    action.node,
                    types,
                    name.as_ref(),
                    fields,
                );
            }
            EndpointStmt::Persisted {
                id,
                kind,
                name,
                fields,
            } => {
                if !proto.takes_graphql() {
                    r.diags
                        .push(needs_graphql(file, s, "`persisted` queries", proto));
                    continue;
                }
                gql.persisted(r, file, id, kind, name.as_ref(), fields);
            }
            EndpointStmt::BodyLimit(n) => {
                if !proto.reads_body() && proto != Protocol::Websocket {
                    r.diags.push(
                        protocol_diag(
                            file,
                            s,
                            format!(
                                "`body_limit` needs the `mcp`, `json-rpc`, `graphql` or `websocket` protocol; this is {}",
                                protocol_name(proto)
                            ),
                        )
                        .label("needs `mcp`, `json-rpc`, `graphql` or `websocket`")
                        .help(
                            "only JSON-RPC, MCP and GraphQL endpoints read request bodies, and WebSocket endpoints client messages; remove the line",
                        ),
                    );
                    continue;
                }
                if n.node == 0 || n.node > MAX_BODY_LIMIT {
                    r.diags.push(
                        Diagnostic::new(
                            codes::E0505,
                            file,
                            n.span,
                            format!("body limit {} is out of range", n.node),
                        )
                        .label("1 to 16777216")
                        .help(if proto == Protocol::Websocket {
                            "give the largest client message to assemble and judge, in bytes, from 1 to 16777216 (16 MiB); without `body_limit` it is 4194304 (4 MiB)"
                        } else {
                            "give the bytes of request body to inspect, from 1 to 16777216 (16 MiB); without `body_limit` it is 65536"
                        }),
                    );
                } else if rpc.body_limit.is_some() {
                    r.diags.push(
                        Diagnostic::new(
                            codes::E0102,
                            file,
                            s,
                            "`body_limit` is given twice for this endpoint",
                        )
                        .help("keep one `body_limit` line"),
                    );
                } else {
                    rpc.body_limit = Some(n.node);
                }
            }
            EndpointStmt::Path(p) => {
                if !proto.is_l7() {
                    r.diags.push(http_only_diag(file, s, "`path`", proto));
                    continue;
                }
                match HttpPathGlob::parse(&p.node) {
                    Ok(g) if path.is_none() => path = Some(g),
                    Ok(_) => r.diags.push(
                        Diagnostic::new(
                            codes::E0102,
                            file,
                            s,
                            "`path` is given twice for this endpoint",
                        )
                        .help(
                            "an endpoint has one `path`; split it into two rules if it serves two",
                        ),
                    ),
                    Err(e) => r.diags.push(pattern_diag(codes::E0302, file, p.span, &e)),
                }
            }
            EndpointStmt::Addresses(list) => {
                let mut set = addresses.take().unwrap_or_default();
                for v in list {
                    match AddrSet::parse(&v.node) {
                        Ok(one) => set = set.union(&one),
                        Err(e) => r.diags.push(pattern_diag(codes::E0305, file, v.span, &e)),
                    }
                }
                addresses = Some(set);
            }
            EndpointStmt::Invalid(_) => {
                rpc.refused = true;
                gql.refused = true;
            }
        }
    }

    if proto == Protocol::Graphql {
        gql.check(r, file, a.endpoint.span);
    }
    if proto == Protocol::Websocket {
        let graphql_policy =
            !gql.allow.is_empty() || !gql.deny.is_empty() || !gql.persisted.is_empty();
        ws.check(
            r,
            file,
            a.endpoint.span,
            graphql_policy,
            !gql.allow.is_empty(),
            gql.refused,
        );
    }
    if proto.is_rpc() {
        rpc.check(
            r,
            file,
            a.endpoint.span,
            proto,
            all_mcp_methods.is_some(),
            loose_tool_names.is_some(),
        );
    }
    if let Some(u) = unfolded {
        u.warn(r, file);
    }
    let l7_protocol = match proto {
        Protocol::Mcp => L7Protocol::Mcp,
        Protocol::JsonRpc => L7Protocol::JsonRpc,
        Protocol::Graphql => L7Protocol::Graphql,
        Protocol::Websocket => L7Protocol::Websocket,
        _ => L7Protocol::Rest,
    };
    let kind = match proto {
        Protocol::L4 => EndpointKind::L4,
        Protocol::Tcp => EndpointKind::Tcp,
        Protocol::Http
        | Protocol::Mcp
        | Protocol::JsonRpc
        | Protocol::Graphql
        | Protocol::Websocket => EndpointKind::Http(HttpEndpoint {
            tls: tls.map_or(TlsMode::Auto, |t| t.node),
            enforcement: enforcement.map_or(Enforcement::Enforce, |e| e.node),
            path,
            allow,
            deny,
            encoded_slash: encoded_slash.is_some(),
            fold_paths: fold_paths.is_some(),
            protocol: l7_protocol,
            body_limit: rpc.body_limit,
            strict_tool_names: loose_tool_names.is_none(),
            all_mcp_methods: all_mcp_methods.is_some(),
            rpc_allow: rpc.allow.into_iter().map(|(_, rule)| rule).collect(),
            rpc_deny: rpc.deny.into_iter().map(|(_, rule)| rule).collect(),
            graphql_allow: gql.allow,
            graphql_deny: gql.deny,
            persisted: gql.persisted,
        }),
    };
    let binaries = binaries?;
    let (dest, ports) = dest?;
    if matches!(dest, Dest::Addrs(_)) && addresses.is_some() {
        r.diags.push(
            Diagnostic::new(
                codes::E0502,
                file,
                a.endpoint.span,
                "`addresses` only applies to a host name destination",
            )
            .help("the destination is already an address; widen or narrow it instead"),
        );
    }
    Some(Endpoint {
        binaries,
        dest,
        ports,
        addresses,
        kind,
        uninspected_credentials: uninspected,
        websocket_credential_rewrite: ws_rewrite.is_some() && proto == Protocol::Websocket,
        request_body_credential_rewrite: body_rewrite.is_some() && proto == Protocol::Http,
        origin: origin(file, span, &rule_name),
    })
}

fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    if slot.is_some() {
        return Some(());
    }
    *slot = Some(v);
    None
}

/// `a JSON-RPC endpoint` and the like, for messages.
fn protocol_name(proto: Protocol) -> &'static str {
    match proto {
        Protocol::L4 => "an L4 (uninspected) endpoint",
        Protocol::Tcp => "a transparent `tcp` endpoint",
        Protocol::Http => "an `http` endpoint",
        Protocol::Mcp => "an `mcp` endpoint",
        Protocol::JsonRpc => "a `json-rpc` endpoint",
        Protocol::Graphql => "a `graphql` endpoint",
        Protocol::Websocket => "a `websocket` endpoint",
    }
}

fn needs_graphql(file: &SourceFile, span: Span, what: &str, proto: Protocol) -> Diagnostic {
    protocol_diag(
        file,
        span,
        format!(
            "{what} need the `graphql` protocol; this is {}",
            protocol_name(proto)
        ),
    )
    .label("needs `graphql`")
    .help(
        "add `graphql` to the rule's options; an `http` endpoint takes `allow METHOD /path` rules",
    )
}

fn protocol_diag(file: &SourceFile, span: Span, message: String) -> Diagnostic {
    Diagnostic::new(codes::E0501, file, span, message)
}

/// Placeholders are replaced only in messages the proxy reads after an
/// upgrade it judged: a `websocket` endpoint's, or (as OpenShell accepts
/// it there) an `http` one's, where upgrades are refused and it changes
/// nothing. Elsewhere the proxy never sees a message to rewrite.
fn ws_rewrite_diag(file: &SourceFile, span: Span, proto: Protocol) -> Diagnostic {
    protocol_diag(
        file,
        span,
        format!(
            "`websocket_credential_rewrite` needs the `websocket` protocol; this is {}",
            protocol_name(proto)
        ),
    )
    .label("needs `websocket`")
    .help("make the rule `websocket` so the proxy reads each client message and can replace placeholders in it, or remove the flag")
}

/// Bodies are rewritten only where the proxy streams them to a REST
/// endpoint, as OpenShell does only on `protocol: rest`: a JSON-RPC, MCP
/// or GraphQL body is judged as the workload wrote it, and an L4 or `tcp`
/// one is never read.
fn body_rewrite_diag(file: &SourceFile, span: Span, proto: Protocol) -> Diagnostic {
    protocol_diag(
        file,
        span,
        format!(
            "`request_body_credential_rewrite` needs the `http` protocol; this is {}",
            protocol_name(proto)
        ),
    )
    .label("needs `http`")
    .help("make the rule `http` so the proxy reads each request body and can replace placeholders in it, or remove the flag")
}

fn http_only_diag(file: &SourceFile, span: Span, what: &str, proto: Protocol) -> Diagnostic {
    let p = match proto {
        Protocol::L4 | Protocol::Tcp => protocol_name(proto),
        _ => "this endpoint",
    };
    Diagnostic::new(
        codes::E0501,
        file,
        span,
        format!("{what} need the `http` protocol; this is {p}"),
    )
    .label("needs `http`")
    .help("add `http` to the rule's options so the proxy inspects its requests")
}

pub(super) fn subjects(
    r: &mut Resolver,
    file: &SourceFile,
    subjects: &[Node<String>],
) -> Option<Vec<BinaryRef>> {
    let mut out = Vec::new();
    let mut ok = true;
    for s in subjects {
        if s.node.starts_with('/') {
            match BinaryGlob::parse(&s.node) {
                Ok(glob) => out.push(BinaryRef { glob, sha256: None }),
                Err(e) => {
                    ok = false;
                    r.diags.push(pattern_diag(codes::E0303, file, s.span, &e));
                }
            }
            continue;
        }
        match r.sets.get(&s.node) {
            Some(set) => out.extend(set.refs.iter().cloned()),
            None => {
                ok = false;
                let known: Vec<&str> = r.sets.keys().map(String::as_str).collect();
                let help = match closest(&s.node, &known) {
                    Some(k) => format!(
                        "did you mean `{k}`? binary sets are defined with `binaries NAME = PATH...`"
                    ),
                    None => {
                        "define it with `binaries NAME = PATH...`, or write an absolute binary path"
                            .to_string()
                    }
                };
                r.diags.push(
                    Diagnostic::new(
                        codes::E0201,
                        file,
                        s.span,
                        format!("unknown binary set `{}`", s.node),
                    )
                    .label("not defined")
                    .help(help),
                );
            }
        }
    }
    out.sort();
    out.dedup();
    ok.then_some(out)
}

fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let del = prev.get(j + 1).copied().unwrap_or(0) + 1;
            let ins = cur.get(j).copied().unwrap_or(0) + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// One IR rule per path of an `allow|deny METHODS PATHS QUERY` line.
fn l7_rules(
    r: &mut Resolver,
    file: &SourceFile,
    span: Span,
    rule_name: &str,
    methods: &[Node<String>],
    paths: &[Node<String>],
    query: &[Node<String>],
) -> Vec<L7Rule> {
    let parsed = r.methods(file, methods);
    if parsed.is_some() {
        unknown_methods(r, file, methods);
    }
    let methods = parsed;
    let mut globs = Vec::new();
    for p in paths {
        match HttpPathGlob::parse(&p.node) {
            Ok(g) => globs.push(g),
            Err(e) => r.diags.push(pattern_diag(codes::E0302, file, p.span, &e)),
        }
    }
    let mut matchers = Vec::new();
    let mut ok = globs.len() == paths.len();
    for q in query {
        match parse_query_matcher(&q.node) {
            Ok(m) => matchers.push(m),
            Err(e) => {
                ok = false;
                r.diags.push(pattern_diag(codes::E0307, file, q.span, &e));
            }
        }
    }
    let Some(methods) = methods.filter(|_| ok) else {
        return Vec::new();
    };
    globs
        .into_iter()
        .map(|path| L7Rule {
            methods: methods.clone(),
            path,
            query: matchers.clone(),
            origin: origin(file, span, rule_name),
        })
        .collect()
}

/// Warns of each method of a rule that is neither one RFC 9110 defines nor
/// a common extension method: most often a misspelling (`GTE`), which
/// would otherwise allow or deny nothing the client sends.
fn unknown_methods(r: &mut Resolver, file: &SourceFile, methods: &[Node<String>]) {
    let known: Vec<&str> = STANDARD_METHODS
        .iter()
        .chain(EXTENSION_METHODS)
        .chain(&[WEBSOCKET_TEXT])
        .copied()
        .collect();
    for m in methods {
        let upper = m.node.to_ascii_uppercase();
        let words = upper
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty() && *w != "*" && !known.contains(w));
        for word in words {
            let help = match closest(word, &known) {
                Some(k) => format!(
                    "did you mean `{k}`? a method other than {} is matched exactly as written, and only a server that defines it receives it",
                    STANDARD_METHODS.join(", ")
                ),
                None => format!(
                    "the methods HTTP defines are {}; an extension method is matched exactly as written, and only a server that defines it receives it",
                    STANDARD_METHODS.join(", ")
                ),
            };
            r.diags.push(
                Diagnostic::new(
                    codes::W0111,
                    file,
                    m.span,
                    format!("`{word}` is not a known HTTP method"),
                )
                .label("unknown method")
                .help(help),
            );
        }
    }
}

/// `?key=glob` or `?key=glob|glob`: the key must be present and every value
/// must match one alternative (for deny rules: some value matches one).
pub(crate) fn parse_query_matcher(text: &str) -> Result<QueryMatcher, PatternError> {
    let body = text.strip_prefix('?').unwrap_or(text);
    let Some((key, values)) = body.split_once('=') else {
        return Err(PatternError {
            message: format!("query matcher `{text}` has no `=`"),
            help: "write `?key=glob`, such as `?state=open|closed`".to_string(),
            offset: text.len().saturating_sub(1),
        });
    };
    if key.is_empty() {
        return Err(PatternError {
            message: "query matcher has an empty key".to_string(),
            help: "write `?key=glob`".to_string(),
            offset: 1,
        });
    }
    let mut any = Vec::new();
    let mut offset = 1 + key.len() + 1;
    for alt in values.split('|') {
        match ValueGlob::parse(alt) {
            Ok(g) => any.push(g),
            Err(mut e) => {
                e.offset += offset;
                return Err(e);
            }
        }
        offset += alt.len() + 1;
    }
    Ok(QueryMatcher {
        key: key.to_string(),
        any,
    })
}

fn perr(message: String, help: &str, offset: usize) -> PatternError {
    PatternError {
        message,
        help: help.to_string(),
        offset,
    }
}

/// Split `dest:ports` into a destination and a port set.
pub(crate) fn parse_endpoint(
    text: &str,
) -> Result<(Dest, PortSet), (crate::diag::Code, PatternError)> {
    let parts = split_endpoint(text, true).map_err(|e| {
        let (message, help, offset) = match e {
            EndpointTextError::UnclosedBracket => (
                format!("`{text}` has no closing `]`"),
                "write IPv6 destinations as `[2001:db8::1]:443`",
                0,
            ),
            EndpointTextError::NoPort if text.starts_with('[') => (
                format!("endpoint `{text}` has no port"),
                "add the port after the address: `[2001:db8::1]:443`",
                text.len(),
            ),
            EndpointTextError::NoPort => (
                format!("endpoint `{text}` has no port"),
                "write `host:port`, `host:80,443` or `host:8000-8100`",
                text.len().saturating_sub(1),
            ),
            EndpointTextError::UnbracketedV6 => (
                format!("`{text}`: an IPv6 address must be in brackets"),
                "write `[2001:db8::1]:443`",
                0,
            ),
        };
        (codes::E0309, perr(message, help, offset))
    })?;
    let (host, host_off) = (parts.host, parts.host_offset);
    let (ports, ports_off) = parts.ports.unwrap_or(("", text.len()));
    let ports = PortSet::parse(ports).map_err(|mut e| {
        e.offset += ports_off;
        (codes::E0304, e)
    })?;
    let shift = |mut e: PatternError| {
        e.offset += host_off;
        e
    };
    if host.is_empty() {
        return Err((
            codes::E0309,
            perr(
                format!("endpoint `{text}` has no host"),
                "write `host:port`",
                0,
            ),
        ));
    }
    let looks_v4 = host.split('/').next().is_some_and(|h| {
        h.split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
    });
    let dest = if parts.bracketed || host.contains('/') || looks_v4 {
        if looks_v4 && !host.contains('/') && host.parse::<Ipv4Addr>().is_err() {
            return Err((
                codes::E0305,
                perr(
                    format!("`{host}` is not a valid IPv4 address"),
                    "each of the four parts is 0 to 255",
                    0,
                ),
            ));
        }
        Dest::Addrs(AddrSet::parse(host).map_err(|e| (codes::E0305, shift(e)))?)
    } else {
        Dest::Host(HostPattern::parse(host).map_err(|e| (codes::E0301, shift(e)))?)
    };
    Ok((dest, ports))
}
