//! The endpoint checks OpenShell runs when it loads a policy
//! (`validate_sandbox_policy`, its L7 validation and the proxy's
//! `allowed_ips` parsing, at 2f7fb65), reproduced so that a policy
//! OpenShell never runs is not imported either. Each refusal quotes
//! OpenShell's reason.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::super::Cx;
use super::super::yaml::YNode;
use super::{Fields, is_default};
use crate::source::Span;

/// Where, what (the field as written, shown in backticks), OpenShell's
/// reason, and how to fix it.
type Refusal = (Span, String, String, &'static str);

/// False when OpenShell would refuse the endpoint (each reason reported).
pub(super) fn accepted(cx: &mut Cx<'_>, ep: &YNode, f: &Fields<'_>) -> bool {
    let mut refusals: Vec<Refusal> = Vec::new();
    let protocol = f.protocol.as_ref().map_or("", |p| p.node.as_str());
    let has_rules = f.rules.is_some_and(non_empty_list);
    let has_deny_rules = f.deny_rules.is_some_and(non_empty_list);
    let has_access = f.access.as_ref().is_some_and(|a| !a.node.is_empty());
    let rules_span = f.rules.map_or(ep.span, |r| r.span);
    // An empty list is not an absent one to OpenShell: it refuses both
    // whatever else the endpoint says (an `access` preset, no protocol),
    // since `rules: []` reads as "allow nothing" and `deny_rules: []` as a
    // denial that was meant and lost.
    if let Some(r) = f.rules.filter(|r| empty_list(r)) {
        refusals.push((
            r.span,
            "rules: []".into(),
            "rules list cannot be empty (would deny all traffic). Use `access: full` or remove rules.".into(),
            "remove `rules`, or list what the endpoint allows",
        ));
    }
    if let Some(d) = f.deny_rules.filter(|d| empty_list(d)) {
        refusals.push((
            d.span,
            "deny_rules: []".into(),
            "deny_rules list cannot be empty (would have no effect). Remove it if no denials are needed.".into(),
            "remove `deny_rules`, or list the requests it should refuse",
        ));
    }
    match protocol {
        "tcp" => tcp(ep, f, has_rules, has_deny_rules, has_access, &mut refusals),
        "" => {
            if let Some(d) = f.deny_rules.filter(|_| has_deny_rules) {
                refusals.push((
                    d.span,
                    "deny_rules".into(),
                    "deny_rules require protocol (L7 inspection must be enabled)".into(),
                    "add `protocol: rest` (and `rules` or `access`), or remove `deny_rules`",
                ));
            }
        }
        // Other protocols (`sql`, unknown names) are refused by the
        // translation itself.
        "rest" | "websocket" | "graphql" | "json-rpc" | "mcp" => {
            let mcp = protocol == "mcp";
            let all_mcp = mcp && f.mcp.is_some_and(allow_all_known_mcp_methods);
            if !has_rules && !has_access {
                let reason = match protocol {
                    "json-rpc" => "protocol json-rpc requires explicit rules with allow.method",
                    "mcp" if !all_mcp => {
                        "protocol mcp requires rules when mcp.allow_all_known_mcp_methods is false"
                    }
                    "mcp" => "",
                    _ => "protocol requires rules or access to define allowed traffic",
                };
                if !reason.is_empty() {
                    refusals.push((
                        rules_span,
                        format!("protocol: {protocol}"),
                        reason.into(),
                        "list what the endpoint allows in `rules`, or use an `access` preset",
                    ));
                }
            }
            if has_rules && !all_mcp && f.rules.is_some_and(every_rule_lacks_allow) {
                refusals.push((
                    rules_span,
                    "rules".into(),
                    "rules would deny all traffic (no allow clause found). Use `access: full` or add allow clauses to rules.".into(),
                    "give each rule an `allow` with a method, path or operation",
                ));
            }
            if has_deny_rules && !mcp && !has_rules && !has_access {
                let span = f.deny_rules.map_or(ep.span, |d| d.span);
                refusals.push((
                    span,
                    "deny_rules".into(),
                    "deny_rules require rules or access to define the base allow set".into(),
                    "add the `rules` (or `access` preset) the deny rules carve out of",
                ));
            }
        }
        _ => {}
    }
    for a in &f.allowed_ips {
        if parse_net(&a.node).is_some_and(always_blocked) {
            refusals.push((
                a.span,
                format!("allowed_ips: {}", a.node),
                format!(
                    "allowed_ips entry {} falls within always-blocked range (loopback/link-local/unspecified); remove this entry — SSRF hardening prevents traffic to these destinations regardless of policy",
                    a.node
                ),
                "remove the entry; OpenShell never connects to loopback, link-local or unspecified addresses",
            ));
        }
    }
    let accepted = refusals.is_empty();
    for (span, what, reason, help) in refusals {
        cx.invalid(
            span,
            format!("OpenShell refuses `{what}` when it loads the policy: {reason}"),
            help,
        );
    }
    accepted
}

/// `protocol: tcp` is OpenShell's explicit L4 spelling, reached through
/// policy DNS: it needs a hostname and takes no L7 field.
fn tcp(
    ep: &YNode,
    f: &Fields<'_>,
    has_rules: bool,
    has_deny_rules: bool,
    has_access: bool,
    refusals: &mut Vec<Refusal>,
) {
    match f.host.as_ref().filter(|h| !h.node.trim().is_empty()) {
        None => refusals.push((
            ep.span,
            "protocol: tcp".into(),
            "protocol tcp requires a DNS hostname; hostless allowed_ips endpoints are supported only by the forward proxy".into(),
            "add `host`, or drop `protocol: tcp` to have the forward proxy reach the addresses",
        )),
        Some(h) if h.node.parse::<IpAddr>().is_ok() => refusals.push((
            h.span,
            format!("host: {}", h.node),
            format!(
                "protocol tcp endpoint '{}' must use a DNS hostname, not an IP literal; direct IP connections bypass policy DNS and are blocked",
                h.node
            ),
            "name the host by its DNS name, or drop `protocol: tcp` for a plain L4 endpoint",
        )),
        Some(_) => {}
    }
    if has_rules || has_deny_rules || has_access {
        refusals.push((
            ep.span,
            "protocol: tcp".into(),
            "protocol tcp does not support access, rules, or deny_rules; remove those L7 fields"
                .into(),
            "remove them, or use `protocol: rest` to have requests inspected",
        ));
    }
    let mut l7_only: Vec<&str> = Vec::new();
    if f.enforcement.as_ref().is_some_and(|(_, e)| e.is_some()) {
        l7_only.push("enforcement");
    }
    if f.path.is_some() {
        l7_only.push("path");
    }
    if f.encoded_slash.is_some() {
        l7_only.push("allow_encoded_slash");
    }
    if f.persisted_queries
        .as_ref()
        .is_some_and(|p| !p.node.is_empty())
    {
        l7_only.push("persisted_queries");
    }
    for (name, node) in [
        ("graphql_persisted_queries", f.graphql_persisted_queries),
        ("graphql_max_body_bytes", f.graphql_max_body_bytes),
        ("json_rpc", f.json_rpc),
    ] {
        if node.is_some_and(|n| !is_default(n)) {
            l7_only.push(name);
        }
    }
    if f.mcp.is_some() {
        l7_only.push("mcp");
    }
    if f.binding.is_some() {
        l7_only.push("credential_binding");
    }
    if !l7_only.is_empty() {
        refusals.push((
            ep.span,
            "protocol: tcp".into(),
            format!(
                "protocol tcp does not support L7-only fields: {}; remove those fields",
                l7_only.join(", ")
            ),
            "remove them, or use an inspected protocol",
        ));
    }
}

fn non_empty_list(n: &YNode) -> bool {
    n.items().is_some_and(|i| !i.is_empty())
}

/// A list written with no items (`[]`); a null or absent field is not one.
fn empty_list(n: &YNode) -> bool {
    n.items().is_some_and(<[YNode]>::is_empty)
}

/// OpenShell's `rules_would_deny_all`: every rule lacks an `allow` with
/// something in it.
fn every_rule_lacks_allow(rules: &YNode) -> bool {
    const ALLOW_FIELDS: &[&str] = &[
        "method",
        "path",
        "command",
        "operation_type",
        "operation_name",
        "fields",
        "params",
    ];
    rules.items().unwrap_or_default().iter().all(|rule| {
        let allow = rule
            .entries()
            .unwrap_or_default()
            .iter()
            .find(|(k, _)| k.scalar() == Some("allow"));
        allow.is_none_or(|(_, a)| {
            a.entries()
                .unwrap_or_default()
                .iter()
                .all(|(k, v)| !ALLOW_FIELDS.contains(&k.scalar().unwrap_or("")) || is_default(v))
        })
    })
}

fn allow_all_known_mcp_methods(mcp: &YNode) -> bool {
    mcp.entries().unwrap_or_default().iter().any(|(k, v)| {
        k.scalar() == Some("allow_all_known_mcp_methods") && v.as_bool() == Some(true)
    })
}

/// An `allowed_ips` entry as OpenShell reads it: a CIDR, else a bare
/// address as a one-address network. Unreadable entries are left to the
/// resolver's own error.
fn parse_net(entry: &str) -> Option<IpNet> {
    entry
        .parse::<IpNet>()
        .ok()
        .or_else(|| entry.parse::<IpAddr>().ok().map(IpNet::from))
}

/// OpenShell's `is_always_blocked_net`: the network overlaps loopback or
/// link-local, or holds the unspecified address (IPv4-mapped forms
/// included).
fn always_blocked(net: IpNet) -> bool {
    let mapped = |v4: Ipv4Addr| v4.to_ipv6_mapped();
    match net {
        IpNet::V4(n) => {
            let (lo, hi) = (n.network(), n.broadcast());
            let overlaps = |a: Ipv4Addr, b: Ipv4Addr| hi >= a && lo <= b;
            overlaps(
                Ipv4Addr::new(127, 0, 0, 0),
                Ipv4Addr::new(127, 255, 255, 255),
            ) || overlaps(
                Ipv4Addr::new(169, 254, 0, 0),
                Ipv4Addr::new(169, 254, 255, 255),
            ) || lo == Ipv4Addr::UNSPECIFIED
        }
        IpNet::V6(n) => {
            let network = n.network();
            n.contains(&Ipv6Addr::LOCALHOST)
                || n.contains(&Ipv6Addr::UNSPECIFIED)
                || (network.segments().first().copied().unwrap_or(0) & 0xffc0) == 0xfe80
                || n.contains(&Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0))
                || network
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_link_local() || v4.is_unspecified())
                || n.contains(&mapped(Ipv4Addr::LOCALHOST))
                || n.contains(&mapped(Ipv4Addr::new(169, 254, 0, 0)))
                || n.contains(&mapped(Ipv4Addr::UNSPECIFIED))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_blocked_follows_openshell() {
        for blocked in [
            "127.0.0.1",
            "127.0.0.0/8",
            "0.0.0.0/0",
            "0.0.0.0",
            "169.254.169.254",
            "169.254.0.0/16",
            "168.0.0.0/6",
            "::1",
            "::/0",
            "fe80::1",
            "fe80::/10",
            "::ffff:127.0.0.1",
            "::ffff:169.254.1.1/128",
            "::ffff:168.0.0.0/103",
        ] {
            assert!(always_blocked(parse_net(blocked).unwrap()), "{blocked}");
        }
        for open in [
            "10.0.0.0/8",
            "192.168.1.0/24",
            "128.0.0.0/8",
            "169.253.0.0/16",
            "2001:db8::/32",
            "::ffff:10.0.0.1",
            "fc00::/7",
        ] {
            assert!(!always_blocked(parse_net(open).unwrap()), "{open}");
        }
    }
}
