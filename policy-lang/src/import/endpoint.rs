//! One OpenShell endpoint → one `allow SET -> DEST:PORTS OPTIONS { ... }`
//! per destination it covers.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::ast::{
    Access, Allow, EndpointBody, EndpointOption, EndpointStmt, Enforcement, Item, Protocol,
    RuleAction, Stmt, TlsMode, Trivia,
};
use crate::diag::codes;
use crate::source::{Node, Span};

use super::binding::{self, Seen};
use super::patterns::{self, PathKind, Translated};
use super::yaml::YNode;
use super::{Cx, item, key};
use super::{graphql, l7, rpc, websocket};

mod checks;

/// Endpoint fields OpenShell accepts that we refuse unless left at their
/// default (`false`, empty, `0`).
const UNSUPPORTED: &[(&str, &str)] = &[
    ("credential_signing", SIGNING),
    ("signing_service", SIGNING),
    ("signing_region", SIGNING),
];

const SIGNING: &str = "request signing (`credential_signing: sigv4`) is left out: a signature covers each request's canonical bytes with a secret key the proxy would hold, which the prover cannot reason about; reach the service with a header credential";

#[derive(Default)]
struct Fields<'n> {
    host: Option<Node<String>>,
    /// `host` was written but is not usable (already reported).
    host_invalid: bool,
    path: Option<Node<String>>,
    port: Option<&'n YNode>,
    ports: Option<&'n YNode>,
    protocol: Option<Node<String>>,
    tls: Option<Node<String>>,
    enforcement: Option<(&'n YNode, Option<Node<String>>)>,
    access: Option<Node<String>>,
    rules: Option<&'n YNode>,
    deny_rules: Option<&'n YNode>,
    allowed_ips: Vec<Node<String>>,
    encoded_slash: Option<Span>,
    uninspected: Option<Span>,
    ws_rewrite: Option<Span>,
    body_rewrite: Option<Span>,
    /// `credential_signing` was set (refused as unsupported).
    signing: bool,
    /// The `credential_binding` key and its value, unless null.
    binding: Option<(Span, &'n YNode)>,
    mcp: Option<&'n YNode>,
    json_rpc: Option<&'n YNode>,
    persisted_queries: Option<Node<String>>,
    graphql_persisted_queries: Option<&'n YNode>,
    graphql_max_body_bytes: Option<&'n YNode>,
}

pub(super) fn endpoint(
    cx: &mut Cx<'_>,
    ep: &YNode,
    set: &Node<String>,
    index: usize,
) -> Vec<Item<Stmt>> {
    let f = match fields(cx, ep) {
        Some(f) => f,
        None => return Vec::new(),
    };
    if !checks::accepted(cx, ep, &f) {
        return Vec::new();
    }
    let Some(ports) = ports(cx, ep, &f) else {
        return Vec::new();
    };
    let bound = match f.binding {
        Some((key, v)) => match binding::bound(cx, f.host.as_ref(), f.path.as_ref(), key, v) {
            Some(b) => Some(b),
            None => return Vec::new(),
        },
        None => None,
    };
    let proto = match f.protocol.as_ref().map(|p| p.node.as_str()) {
        None | Some("") => Protocol::L4,
        Some("rest") => Protocol::Http,
        Some("tcp") => Protocol::Tcp,
        Some("mcp") => Protocol::Mcp,
        Some("json-rpc") => Protocol::JsonRpc,
        Some("graphql") => Protocol::Graphql,
        Some("websocket") => Protocol::Websocket,
        Some(other) => {
            let span = f.protocol.as_ref().map_or(ep.span, |p| p.span);
            if other == "sql" {
                cx.push(
                    codes::E0702,
                    span,
                    format!("unsupported field value `protocol: {other}`"),
                    "only `rest` (inspected HTTP), `websocket`, `graphql`, `mcp`, `json-rpc`, `tcp` and plain L4 endpoints can be imported",
                );
            } else {
                cx.invalid(
                    span,
                    format!("unknown protocol `{other}`"),
                    "OpenShell protocols are `rest`, `websocket`, `graphql`, `mcp`, `json-rpc`, `tcp`, or none for plain L4",
                );
            }
            return Vec::new();
        }
    };
    let mut options = Vec::new();
    let mut body = Vec::new();
    let mut all_mcp_methods = false;
    if proto.is_l7() {
        options.push(Node::new(
            EndpointOption::Protocol(proto),
            f.protocol.as_ref().map_or(ep.span, |p| p.span),
        ));
        if !http_options(cx, ep, &f, &mut options) {
            return Vec::new();
        }
        if let Some(p) = &f.path {
            match patterns::path(&p.node, PathKind::Http) {
                Translated::Patterns { patterns, .. } if patterns.len() == 1 => {
                    for pat in patterns {
                        body.push(stmt_item(
                            EndpointStmt::Path(Node::new(pat, p.span)),
                            p.span,
                        ));
                    }
                }
                Translated::Patterns { .. } => {
                    cx.push(
                        codes::E0704,
                        p.span,
                        format!("endpoint path `{}` has `{{...}}` alternatives", p.node),
                        "split the endpoint into one endpoint per path",
                    );
                    return Vec::new();
                }
                Translated::Never(why) => {
                    cx.push(codes::W0702, p.span, format!("endpoint path `{}` never matches in OpenShell ({why}); endpoint dropped", p.node), "endpoint paths start with `/`");
                    return Vec::new();
                }
                Translated::Inexpressible(why) => {
                    cx.push(
                        codes::E0704,
                        p.span,
                        format!(
                            "endpoint path `{}` cannot be translated exactly: {why}",
                            p.node
                        ),
                        "rewrite it with `*` (within a segment) and `**` (whole segments)",
                    );
                    return Vec::new();
                }
            }
        }
        match rpc_options(cx, &f, proto, &mut options, &mut body) {
            Some(all) => all_mcp_methods = all,
            None => return Vec::new(),
        }
        if proto == Protocol::Websocket
            && let Some(v) = f.graphql_max_body_bytes.filter(|v| !is_default(v))
        {
            cx.push(
                codes::W0702,
                v.span,
                "`graphql_max_body_bytes` has no effect on `protocol: websocket`: OpenShell judges client messages up to 4 MiB; not imported",
                "remove the field",
            );
        }
        let max_body = f
            .graphql_max_body_bytes
            .filter(|_| proto == Protocol::Graphql);
        if proto.takes_graphql()
            && !graphql::options(
                cx,
                f.persisted_queries.as_ref(),
                f.graphql_persisted_queries,
                max_body,
                &mut body,
            )
        {
            return Vec::new();
        }
    } else {
        if proto == Protocol::Tcp {
            options.push(Node::new(
                EndpointOption::Protocol(Protocol::Tcp),
                f.protocol.as_ref().map_or(ep.span, |p| p.span),
            ));
        }
        ignored_without_http(cx, &f, proto);
    }
    if !proto.takes_graphql() && !graphql_fields_absent(cx, &f) {
        return Vec::new();
    }
    if let Some(s) = f.uninspected {
        options.push(Node::new(EndpointOption::UninspectedCredentials, s));
    }
    if let Some(s) = f.ws_rewrite {
        options.push(Node::new(EndpointOption::WebsocketCredentialRewrite, s));
    }
    if let Some(s) = f.body_rewrite {
        options.push(Node::new(EndpointOption::RequestBodyCredentialRewrite, s));
    }
    let mut rules = Vec::new();
    if proto.is_rpc() {
        if let Some(r) = f.rules {
            rules.extend(rpc::rules(cx, r, RuleAction::Allow, proto, all_mcp_methods));
        }
        if let Some(r) = f.deny_rules {
            rules.extend(rpc::rules(cx, r, RuleAction::Deny, proto, all_mcp_methods));
        }
    } else if proto == Protocol::Graphql {
        if let Some(r) = f.rules {
            rules.extend(graphql::rules(cx, r, RuleAction::Allow));
        }
        if let Some(r) = f.deny_rules {
            rules.extend(graphql::rules(cx, r, RuleAction::Deny));
        }
    } else if proto == Protocol::Websocket {
        if let Some(r) = f.rules {
            rules.extend(websocket::rules(cx, r, RuleAction::Allow));
        }
        if let Some(r) = f.deny_rules {
            rules.extend(websocket::rules(cx, r, RuleAction::Deny));
        }
    } else if proto == Protocol::Http {
        if let Some(r) = f.rules {
            rules.extend(l7::rules(cx, r, RuleAction::Allow));
        }
        if let Some(r) = f.deny_rules {
            rules.extend(l7::rules(cx, r, RuleAction::Deny));
        }
    }
    if proto == Protocol::Websocket {
        read_write_beside_graphql(&mut options, &body, &rules);
    }
    let dests = destinations(cx, ep, &f);
    let protocol = f.protocol.as_ref().map_or("", |p| p.node.trim());
    let tls = f.tls.as_ref().map_or("", |t| t.node.trim());
    let hostless = f.host.as_ref().is_none_or(|h| h.node.is_empty());
    cx.seen.push(Seen {
        rule: set.node.clone(),
        index,
        span: ep.span,
        host: f.host.as_ref().map_or(String::new(), |h| h.node.clone()),
        hosts: if hostless {
            Vec::new()
        } else {
            dests.iter().map(|(d, _, _)| d.clone()).collect()
        },
        ports: ports.split(',').filter_map(|p| p.parse().ok()).collect(),
        path: f.path.as_ref().map_or(String::new(), |p| p.node.clone()),
        uninspected: if protocol.is_empty() {
            Some("L4-only")
        } else if tls.eq_ignore_ascii_case("skip") {
            Some("tls: skip")
        } else {
            None
        },
        opted_in: f.uninspected.is_some(),
        tcp: protocol.eq_ignore_ascii_case("tcp"),
        contributes: (!protocol.is_empty() && !protocol.eq_ignore_ascii_case("tcp"))
            || !f.allowed_ips.is_empty()
            || !tls.is_empty()
            || bound.is_some(),
        binding: bound,
    });
    let mut out = Vec::new();
    for (dest, span, addresses) in dests {
        let mut items = body.clone();
        if !addresses.is_empty() {
            let s = addresses.first().map_or(span, |a| a.span);
            items.push(stmt_item(EndpointStmt::Addresses(addresses), s));
        }
        items.extend(rules.iter().cloned());
        let allow = Allow {
            subjects: vec![Node::new(set.node.clone(), set.span)],
            endpoint: Node::new(format!("{dest}:{ports}"), span),
            options: options.clone(),
            body: (!items.is_empty()).then(|| EndpointBody {
                header_trailing: None,
                items,
                end: Vec::new(),
            }),
        };
        out.push(item(Stmt::Allow(allow), ep.span, Vec::new()));
    }
    out
}

fn stmt_item(stmt: EndpointStmt, span: Span) -> Item<EndpointStmt> {
    Item {
        trivia: Trivia::default(),
        stmt: Node::new(stmt, span),
    }
}

fn fields<'n>(cx: &mut Cx<'_>, ep: &'n YNode) -> Option<Fields<'n>> {
    let Some(entries) = ep.entries() else {
        cx.invalid(
            ep.span,
            format!("an endpoint must be a mapping, found {}", ep.kind()),
            "write `{ host: api.example.com, port: 443 }`",
        );
        return None;
    };
    let mut f = Fields::default();
    let mut ok = true;
    for (k, v) in entries {
        let name = key(k);
        match name {
            "host" => {
                f.host = cx.string(v, "`host`");
                f.host_invalid = f.host.is_none() && !v.is_null();
            }
            "path" => f.path = cx.string(v, "`path`"),
            "port" => f.port = Some(v),
            "ports" => f.ports = Some(v),
            "protocol" => f.protocol = cx.string(v, "`protocol`"),
            "tls" => f.tls = cx.string(v, "`tls`"),
            "enforcement" => f.enforcement = Some((k, cx.string(v, "`enforcement`"))),
            "access" => f.access = cx.string(v, "`access`"),
            "rules" => f.rules = Some(v),
            "deny_rules" => f.deny_rules = Some(v),
            "mcp" => f.mcp = Some(v),
            "json_rpc" => f.json_rpc = Some(v),
            "persisted_queries" => f.persisted_queries = cx.string(v, "`persisted_queries`"),
            "graphql_persisted_queries" => f.graphql_persisted_queries = Some(v),
            "graphql_max_body_bytes" => f.graphql_max_body_bytes = Some(v),
            "allowed_ips" => f.allowed_ips = cx.strings(v, "`allowed_ips`"),
            "allow_encoded_slash" => {
                f.encoded_slash = cx.bool(v, "`allow_encoded_slash`").then_some(v.span)
            }
            "allow_uninspected_credentials" => {
                f.uninspected = cx
                    .bool(v, "`allow_uninspected_credentials`")
                    .then_some(v.span)
            }
            "websocket_credential_rewrite" => {
                f.ws_rewrite = cx
                    .bool(v, "`websocket_credential_rewrite`")
                    .then_some(v.span)
            }
            "request_body_credential_rewrite" => {
                f.body_rewrite = cx
                    .bool(v, "`request_body_credential_rewrite`")
                    .then_some(v.span)
            }
            // OpenShell reads a null binding as none (`Option`).
            "credential_binding" => f.binding = (!v.is_null()).then_some((k.span, v)),
            _ => {
                match UNSUPPORTED.iter().find(|(n, _)| *n == name) {
                    Some((_, why)) => {
                        if !is_default(v) {
                            f.signing |= name == "credential_signing";
                            cx.unsupported(k, "an endpoint", &format!("{why}; remove the field (or set it to its default) to import the endpoint"));
                            ok = false;
                        }
                    }
                    None => {
                        cx.unsupported(k, "an endpoint", "see docs/openshell-import.md for the endpoint fields that can be imported");
                        ok = false;
                    }
                }
            }
        }
    }
    // OpenShell refuses the policy (`CredentialSigningWithBodyRewrite`):
    // a signature over the body the workload wrote would not match the
    // body with its placeholders replaced.
    if let Some(s) = f.body_rewrite.filter(|_| f.signing) {
        cx.push(
            codes::E0703,
            s,
            "`credential_signing` and `request_body_credential_rewrite` are both set; OpenShell refuses the policy: these options are mutually exclusive",
            "remove one of them",
        );
        ok = false;
    }
    ok.then_some(f)
}

/// GraphQL fields on an endpoint that is not `protocol: graphql`. OpenShell
/// ignores them there with a warning; they are refused here, since a
/// policy that sets them means something its endpoint does not do.
fn graphql_fields_absent(cx: &mut Cx<'_>, f: &Fields<'_>) -> bool {
    let mut ok = true;
    let set = [
        (
            "persisted_queries",
            f.persisted_queries
                .as_ref()
                .filter(|m| !m.node.is_empty())
                .map(|m| m.span),
        ),
        (
            "graphql_persisted_queries",
            f.graphql_persisted_queries
                .filter(|v| !is_default(v))
                .map(|v| v.span),
        ),
        (
            "graphql_max_body_bytes",
            f.graphql_max_body_bytes
                .filter(|v| !is_default(v))
                .map(|v| v.span),
        ),
    ];
    for (name, span) in set {
        if let Some(span) = span {
            cx.invalid(
                span,
                format!("`{name}` on an endpoint that is not `protocol: graphql` or `websocket`"),
                "OpenShell ignores it there; remove the field or make the endpoint `protocol: graphql` (or `websocket` for GraphQL over WebSocket)",
            );
            ok = false;
        }
    }
    ok
}

/// `false`, empty, `0` or null: what OpenShell does when the field is absent.
fn is_default(v: &YNode) -> bool {
    v.is_null()
        || v.as_bool() == Some(false)
        || v.as_u64() == Some(0)
        || v.scalar() == Some("")
        || v.entries().is_some_and(<[_]>::is_empty)
        || v.items().is_some_and(<[_]>::is_empty)
}

/// `ports` wins over `port`; the text after `:` in our endpoint.
fn ports(cx: &mut Cx<'_>, ep: &YNode, f: &Fields<'_>) -> Option<String> {
    let mut list: Vec<(u64, Span)> = Vec::new();
    if let Some(p) = f.ports {
        for n in cx.list(p, "`ports`") {
            list.push((n.as_u64().unwrap_or(u64::MAX), n.span));
        }
    }
    if list.is_empty()
        && let Some(p) = f.port
        && !p.is_null()
    {
        list.push((p.as_u64().unwrap_or(u64::MAX), p.span));
        if p.as_u64() == Some(0) {
            list.clear();
        }
    }
    if list.is_empty() {
        cx.invalid(
            ep.span,
            "endpoint has no `port` or `ports`",
            "add `port: 443`; OpenShell never matches an endpoint without a port",
        );
        return None;
    }
    let mut out: Vec<u64> = Vec::new();
    for (n, span) in list {
        if !(1..=65535).contains(&n) {
            cx.invalid(
                span,
                "a port must be a number from 1 to 65535",
                "write the port as an unquoted number, such as `443`",
            );
            return None;
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Some(out.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
}

/// `mcp.*` and `json_rpc.*`: flags and the body limit of an MCP or
/// JSON-RPC endpoint. Returns whether the MCP allow-all profile is on, or
/// None on an error that drops the endpoint.
fn rpc_options(
    cx: &mut Cx<'_>,
    f: &Fields<'_>,
    proto: Protocol,
    options: &mut Vec<Node<EndpointOption>>,
    body: &mut Vec<Item<EndpointStmt>>,
) -> Option<bool> {
    let mut ok = true;
    let mut all = false;
    if proto.is_rpc()
        && let Some(a) = &f.access
    {
        cx.invalid(
            a.span,
            format!("`access: {}` is not valid on `protocol: {}`", a.node, if proto == Protocol::Mcp { "mcp" } else { "json-rpc" }),
            "OpenShell rejects access presets on MCP and JSON-RPC endpoints; write explicit `rules`",
        );
        ok = false;
    }
    for (name, node, wanted) in [
        ("mcp", f.mcp, Protocol::Mcp),
        ("json_rpc", f.json_rpc, Protocol::JsonRpc),
    ] {
        let Some(node) = node else { continue };
        if proto != wanted {
            if !is_default(node) {
                cx.invalid(
                    node.span,
                    format!(
                        "`{name}` options on an endpoint that is not `protocol: {}`",
                        if wanted == Protocol::Mcp {
                            "mcp"
                        } else {
                            "json-rpc"
                        }
                    ),
                    "OpenShell rejects them; remove the field or change the protocol",
                );
                ok = false;
            }
            continue;
        }
        for (k, v) in cx.map(node, &format!("`{name}`")) {
            match key(k) {
                "max_body_bytes" => match v.as_u64() {
                    Some(n) => body.push(stmt_item(
                        EndpointStmt::BodyLimit(Node::new(n, v.span)),
                        v.span,
                    )),
                    None => {
                        cx.invalid(
                            v.span,
                            "`max_body_bytes` must be a whole number of bytes",
                            "write a number such as `65536`",
                        );
                        ok = false;
                    }
                },
                "strict_tool_names" if wanted == Protocol::Mcp => {
                    if !v.is_null() && !cx.bool(v, "`strict_tool_names`") {
                        options.push(Node::new(EndpointOption::LooseToolNames, v.span));
                    }
                }
                "allow_all_known_mcp_methods" if wanted == Protocol::Mcp => {
                    if cx.bool(v, "`allow_all_known_mcp_methods`") {
                        all = true;
                        options.push(Node::new(EndpointOption::AllMcpMethods, v.span));
                    }
                }
                _ => {
                    cx.unsupported(k, &format!("`{name}`"), "see docs/openshell-import.md for the MCP and JSON-RPC fields that can be imported");
                    ok = false;
                }
            }
        }
    }
    ok.then_some(all)
}

/// Options of an inspected (`protocol: rest`) endpoint. False on an error
/// that drops the endpoint.
fn http_options(
    cx: &mut Cx<'_>,
    ep: &YNode,
    f: &Fields<'_>,
    options: &mut Vec<Node<EndpointOption>>,
) -> bool {
    let mut ok = true;
    match &f.enforcement {
        Some((_, Some(e))) if e.node == "enforce" => {}
        Some((_, Some(e))) if e.node == "audit" => options.push(Node::new(
            EndpointOption::Enforcement(Enforcement::Audit),
            e.span,
        )),
        Some((_, Some(e))) => {
            cx.invalid(
                e.span,
                format!("unknown enforcement `{}`", e.node),
                "use `enforce` or `audit`",
            );
            ok = false;
        }
        None | Some((_, None)) => {
            let span = f.enforcement.as_ref().map_or(ep.span, |(k, _)| k.span);
            cx.push(
                codes::W0701,
                span,
                "no `enforcement` on an inspected endpoint: OpenShell only audits it (logs, never blocks), written here as `audit`",
                "add `enforcement: enforce` to block requests the rules do not allow",
            );
            options.push(Node::new(
                EndpointOption::Enforcement(Enforcement::Audit),
                span,
            ));
        }
    }
    if let Some(a) = &f.access {
        let access = match a.node.as_str() {
            "read-only" => Some(Access::ReadOnly),
            "read-write" => Some(Access::ReadWrite),
            "full" => Some(Access::Full),
            other => {
                cx.invalid(
                    a.span,
                    format!("unknown access preset `{other}`"),
                    "use `read-only`, `read-write` or `full`",
                );
                ok = false;
                None
            }
        };
        if f.rules
            .is_some_and(|r| !r.items().is_none_or(<[_]>::is_empty))
        {
            cx.invalid(
                a.span,
                "`access` and `rules` on the same endpoint",
                "OpenShell rejects this combination: use either a preset or explicit rules",
            );
            ok = false;
        }
        if let Some(access) = access {
            options.push(Node::new(EndpointOption::Access(access), a.span));
        }
    }
    if let Some(t) = &f.tls {
        match t.node.as_str() {
            "" | "auto" => {}
            "skip" => options.push(Node::new(EndpointOption::Tls(TlsMode::Skip), t.span)),
            "terminate" | "passthrough" => {
                if !cx.tls_noted {
                    cx.tls_noted = true;
                    cx.push(
                        codes::W0702,
                        t.span,
                        format!("`tls: {}` is a deprecated alias of automatic TLS handling in OpenShell; nothing to write", t.node),
                        "the proxy terminates TLS when the client speaks it; remove `tls` from the YAML",
                    );
                }
            }
            other => {
                cx.invalid(
                    t.span,
                    format!("unknown tls mode `{other}`"),
                    "use `skip`, or leave `tls` out",
                );
                ok = false;
            }
        }
    }
    if let Some(s) = f.encoded_slash {
        options.push(Node::new(EndpointOption::EncodedSlash, s));
    }
    ok
}

/// Warn about L7 settings OpenShell ignores on an endpoint it does not inspect.
fn ignored_without_http(cx: &mut Cx<'_>, f: &Fields<'_>, proto: Protocol) {
    let what = if proto == Protocol::Tcp {
        "a `protocol: tcp` endpoint"
    } else {
        "an endpoint without `protocol`"
    };
    let mut ignored: Vec<(&str, Span)> = Vec::new();
    if let Some(r) = f.rules {
        ignored.push(("rules", r.span));
    }
    if let Some(r) = f.deny_rules {
        ignored.push(("deny_rules", r.span));
    }
    if let Some(a) = &f.access {
        ignored.push(("access", a.span));
    }
    if let Some((k, Some(_))) = &f.enforcement {
        ignored.push(("enforcement", k.span));
    }
    if let Some(p) = &f.path {
        ignored.push(("path", p.span));
    }
    if let Some(s) = f.encoded_slash {
        ignored.push(("allow_encoded_slash", s));
    }
    for (name, span) in ignored {
        cx.push(
            codes::W0702,
            span,
            format!("`{name}` has no effect on {what}: OpenShell does not inspect its requests; not imported"),
            "add `protocol: rest` to have requests inspected",
        );
    }
}

/// The destinations an endpoint covers, each with the `addresses` body line
/// it needs: hostnames (one per `{...}` alternative), an IP literal, or,
/// for a hostless endpoint, each `allowed_ips` entry.
fn destinations(
    cx: &mut Cx<'_>,
    ep: &YNode,
    f: &Fields<'_>,
) -> Vec<(String, Span, Vec<Node<String>>)> {
    let Some(h) = f.host.as_ref().filter(|h| !h.node.is_empty()) else {
        if f.allowed_ips.is_empty() && !f.host_invalid {
            cx.invalid(
                ep.span,
                "endpoint has neither `host` nor `allowed_ips`",
                "add `host: api.example.com`",
            );
        }
        return f
            .allowed_ips
            .iter()
            .map(|a| (dest_text(&a.node), a.span, Vec::new()))
            .collect();
    };
    let bare = h
        .node
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(&h.node);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        if !f.allowed_ips.is_empty() && !f.allowed_ips.iter().any(|a| contains(&a.node, ip)) {
            cx.push(
                codes::W0702,
                h.span,
                format!("host `{}` is outside every `allowed_ips` entry, so OpenShell never connects to it; endpoint dropped", h.node),
                "add the address to `allowed_ips` or remove the endpoint",
            );
            return Vec::new();
        }
        return vec![(dest_text(&ip.to_string()), h.span, Vec::new())];
    }
    if let Some(why) = patterns::openshell_refused_host(&h.node) {
        cx.push(
            codes::E0703,
            h.span,
            format!(
                "OpenShell refuses host `{}` when it loads the policy: {why}",
                h.node
            ),
            "OpenShell never runs this policy as written; name the domain (`*.example.com`) or list the hosts",
        );
        return Vec::new();
    }
    match patterns::host(&h.node) {
        Translated::Patterns { patterns, notes } => {
            for note in notes {
                cx.push(
                    codes::W0702,
                    h.span,
                    format!("host `{}`: {note}", h.node),
                    "each becomes its own rule",
                );
            }
            patterns
                .into_iter()
                .map(|p| (p, h.span, f.allowed_ips.clone()))
                .collect()
        }
        Translated::Never(why) => {
            cx.push(
                codes::W0702,
                h.span,
                format!("host `{}` never matches ({why}); endpoint dropped", h.node),
                "",
            );
            Vec::new()
        }
        Translated::Inexpressible(why) => {
            cx.push(codes::E0704, h.span, format!("host pattern `{}` cannot be translated exactly: {why}", h.node), "use `*` for one label (`*.example.com`) or a leading `**` for any number of labels");
            Vec::new()
        }
    }
}

/// An address or CIDR as a destination: IPv6 in brackets.
fn dest_text(addr: &str) -> String {
    if addr.contains(':') && !addr.starts_with('[') {
        format!("[{addr}]")
    } else {
        addr.to_string()
    }
}

fn contains(cidr: &str, ip: IpAddr) -> bool {
    if let Ok(net) = cidr.parse::<IpNet>() {
        return net.contains(&ip);
    }
    cidr.parse::<IpAddr>().is_ok_and(|a| a == ip)
}

/// On a websocket endpoint with GraphQL rules or a persisted-query
/// registry, every client text message is a GraphQL-over-WebSocket
/// message, so OpenShell's `read-write` preset (the upgrade and
/// `WEBSOCKET_TEXT` messages) allows exactly what `read-only` (the
/// upgrade) does: the GraphQL rules decide the messages. Our language
/// refuses a `WEBSOCKET_TEXT` allowance there (E0507), so the importer
/// writes the preset with that meaning.
fn read_write_beside_graphql(
    options: &mut [Node<EndpointOption>],
    body: &[Item<EndpointStmt>],
    rules: &[Item<EndpointStmt>],
) {
    let graphql_policy = body.iter().chain(rules).any(|i| {
        matches!(
            i.stmt.node,
            EndpointStmt::Graphql { .. } | EndpointStmt::Persisted { .. }
        )
    });
    if !graphql_policy {
        return;
    }
    for o in options.iter_mut() {
        if o.node == EndpointOption::Access(Access::ReadWrite) {
            o.node = EndpointOption::Access(Access::ReadOnly);
        }
    }
}
