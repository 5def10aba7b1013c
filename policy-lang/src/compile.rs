//! Compile the IR into a bundle.
//!
//! Canonical form: every list is sorted and de-duplicated by content, and
//! the provenance lists are permuted along with it. Two policies that mean
//! the same thing rule for rule (reordered, renamed binary sets, one rule
//! split into two) therefore produce the same enforcement bytes and digest.

use std::collections::{BTreeMap, BTreeSet};

use policy_bundle::kernel::landlock::{Abi, FsRight};
use policy_bundle::kernel::{deny_list, notify_list};
use policy_bundle::l7body::jsonrpc::RpcDialect;
use policy_bundle::matcher::{HostPattern, PortSet};
use policy_bundle::*;

use crate::ir::{self, EndpointKind, FsRights, Policy};

/// Writes the bundle enforcement and the prover read. Infallible: the
/// resolver has already refused whatever the bundle cannot express.
pub fn compile(policy: &Policy) -> Bundle {
    let mut prov = Provenance {
        policy: policy.name.clone(),
        ..Provenance::default()
    };
    let files: BTreeSet<String> = policy
        .endpoints
        .iter()
        .map(|e| e.origin.file.clone())
        .chain(policy.fs.iter().map(|f| f.origin.file.clone()))
        .chain(policy.credentials.iter().map(|c| c.origin.file.clone()))
        .chain(policy.advisor.iter().map(|a| a.origin.file.clone()))
        .filter(|f| !f.is_empty())
        .collect();
    prov.files = files.into_iter().collect();

    let (l7, l7_index) = l7_endpoints(policy);
    let (routes, route_prov, identities, identity_prov) = routes(policy, &l7_index);
    prov.routes = route_prov;
    prov.identities = identity_prov;

    let mut creds: Vec<(CredentialBinding, Origin)> = policy
        .credentials
        .iter()
        .map(|c| {
            (
                CredentialBinding {
                    name: c.name.clone(),
                    source: c.source.clone(),
                    placeholder: c.placeholder.clone(),
                    inject: c.inject.clone(),
                    hosts: c.hosts.clone(),
                    methods: c.methods.clone(),
                    paths: c.paths.as_ref().map(|p| sorted(p.clone())),
                },
                c.origin.clone(),
            )
        })
        .collect();
    creds.sort();
    let (credentials, cred_prov): (Vec<_>, Vec<_>) = creds.into_iter().unzip();
    prov.credentials = cred_prov;

    let mut secrets: Vec<(SecretEntry, Origin)> = policy
        .secrets
        .iter()
        .map(|s| {
            (
                SecretEntry {
                    name: s.name.clone(),
                    source: s.source.clone(),
                    hosts: s.hosts.clone(),
                },
                s.origin.clone(),
            )
        })
        .collect();
    secrets.sort();
    let (secrets, secret_prov): (Vec<_>, Vec<_>) = secrets.into_iter().unzip();
    prov.secrets = secret_prov;
    prov.fs = policy.fs.iter().map(|f| f.origin.clone()).collect();

    let needs_dns = routes.iter().any(|r| matches!(r.dest, Dest::Host(_)));
    let mut connect_ports = routes
        .iter()
        .fold(PortSet::default(), |acc, r| acc.union(&r.ports));
    if needs_dns && let Ok(dns) = PortSet::parse("53") {
        connect_ports = connect_ports.union(&dns);
    }
    // The advisor endpoint is reached by name on port 80: the workload
    // asks the DNS stub for it, then connects.
    if policy.advisor.is_some()
        && let Ok(advisor) = PortSet::parse(&format!("53,{ADVISOR_PORT}"))
    {
        connect_ports = connect_ports.union(&advisor);
    }
    prov.advisor = policy.advisor.as_ref().map(|a| a.origin.clone());

    let tables = Tables {
        landlock: LandlockTable {
            mode: policy.landlock.mode,
            min_abi: policy.landlock.min_abi,
            paths: policy
                .fs
                .iter()
                .map(|g| LandlockPath {
                    path: g.path.clone(),
                    access: landlock_rights(g.rights),
                })
                .collect(),
            workdir: policy.workdir.map(landlock_rights),
            tcp_connect_ports: connect_ports,
            scoped: vec!["abstract_unix_socket".to_string(), "signal".to_string()],
        },
        process: ProcessTable {
            user: policy.run_as.as_ref().and_then(|r| r.user.clone()),
            group: policy.run_as.as_ref().and_then(|r| r.group.clone()),
        },
        seccomp: SeccompTable {
            deny: deny_list(),
            notify: notify_list(),
            identities,
            routes,
        },
        l7,
        credentials,
        secrets,
        advisor: policy.advisor.as_ref().map(|a| AdvisorTable {
            binaries: sorted(a.binaries.clone()),
        }),
    };
    Bundle::new(tables, prov)
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// Build the L7 endpoint table, de-duplicated by content, each rule with
/// its origins. Returns the table and for each IR endpoint its L7 index
/// (if inspected).
fn l7_endpoints(policy: &Policy) -> (Vec<L7Endpoint>, Vec<Option<u32>>) {
    // Merge rules by content within each endpoint, keeping every origin.
    let mut by_content: BTreeMap<L7Endpoint, L7Provenance> = BTreeMap::new();
    let mut keys: Vec<Option<L7Endpoint>> = Vec::new();
    for ep in &policy.endpoints {
        let EndpointKind::Http(h) = &ep.kind else {
            keys.push(None);
            continue;
        };
        if h.tls == TlsMode::Skip {
            keys.push(None);
            continue;
        }
        let (allow, allow_prov) = merge_rules(&h.allow);
        let (deny, deny_prov) = merge_rules(&h.deny);
        let (rpc_allow, rpc_allow_prov) = merge_rpc_rules(&h.rpc_allow);
        let (rpc_deny, rpc_deny_prov) = merge_rpc_rules(&h.rpc_deny);
        let (graphql_allow, graphql_allow_prov) = merge_graphql_rules(&h.graphql_allow);
        let (graphql_deny, graphql_deny_prov) = merge_graphql_rules(&h.graphql_deny);
        let rest = RestRules {
            allow: sourced(allow),
            deny: sourced(deny),
        };
        let ops = GraphqlOps {
            allow: sourced(graphql_allow),
            deny: sourced(graphql_deny),
            persisted_queries: sorted(h.persisted.clone()),
        };
        let rpc = |dialect| RpcRules {
            dialect,
            allow: sourced(rpc_allow.clone()),
            deny: sourced(rpc_deny.clone()),
            body_limit: h.body_limit,
            strict_tool_names: h.strict_tool_names,
            all_mcp_methods: h.all_mcp_methods,
        };
        // Resolution has refused rules of other protocols, so only the
        // endpoint's own protocol has any to carry.
        let rules = match h.protocol {
            L7Protocol::Rest => L7Rules::Rest(rest),
            L7Protocol::JsonRpc => L7Rules::Rpc(rpc(RpcDialect::JsonRpc)),
            L7Protocol::Mcp => L7Rules::Rpc(rpc(RpcDialect::Mcp)),
            L7Protocol::Graphql => L7Rules::Graphql(GraphqlRules {
                ops,
                body_limit: h.body_limit,
            }),
            L7Protocol::Websocket => L7Rules::Websocket(WsRules {
                rest,
                graphql: ops,
                message_limit: h.body_limit,
            }),
        };
        let key = L7Endpoint {
            enforcement: h.enforcement,
            tls: h.tls,
            path: h.path.clone(),
            encoded_slash: h.encoded_slash,
            fold_paths: h.fold_paths,
            rules,
            origins: Vec::new(),
        };
        let entry = by_content
            .entry(key.clone())
            .or_insert_with(|| L7Provenance {
                endpoint: Vec::new(),
                allow: vec![Vec::new(); allow_prov.len()],
                deny: vec![Vec::new(); deny_prov.len()],
                allow_within: vec![Vec::new(); allow_prov.len()],
                deny_within: vec![Vec::new(); deny_prov.len()],
                rpc_allow: vec![Vec::new(); rpc_allow_prov.len()],
                rpc_deny: vec![Vec::new(); rpc_deny_prov.len()],
                rpc_allow_within: vec![Vec::new(); rpc_allow_prov.len()],
                rpc_deny_within: vec![Vec::new(); rpc_deny_prov.len()],
                graphql_allow: vec![Vec::new(); graphql_allow_prov.len()],
                graphql_deny: vec![Vec::new(); graphql_deny_prov.len()],
                graphql_allow_within: vec![Vec::new(); graphql_allow_prov.len()],
                graphql_deny_within: vec![Vec::new(); graphql_deny_prov.len()],
            });
        let within = u32::try_from(entry.endpoint.len()).unwrap_or(u32::MAX);
        entry.endpoint.push(ep.origin.clone());
        append_origins(
            &mut entry.allow,
            &mut entry.allow_within,
            allow_prov,
            within,
        );
        append_origins(&mut entry.deny, &mut entry.deny_within, deny_prov, within);
        append_origins(
            &mut entry.rpc_allow,
            &mut entry.rpc_allow_within,
            rpc_allow_prov,
            within,
        );
        append_origins(
            &mut entry.rpc_deny,
            &mut entry.rpc_deny_within,
            rpc_deny_prov,
            within,
        );
        append_origins(
            &mut entry.graphql_allow,
            &mut entry.graphql_allow_within,
            graphql_allow_prov,
            within,
        );
        append_origins(
            &mut entry.graphql_deny,
            &mut entry.graphql_deny_within,
            graphql_deny_prov,
            within,
        );
        keys.push(Some(key));
    }
    let index: BTreeMap<&L7Endpoint, u32> = by_content
        .keys()
        .enumerate()
        .map(|(i, k)| (k, u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let ids = keys
        .iter()
        .map(|k| k.as_ref().and_then(|k| index.get(k).copied()))
        .collect();
    let table = by_content
        .into_iter()
        .map(|(mut ep, prov)| {
            ep.attach_provenance(prov);
            ep
        })
        .collect();
    (table, ids)
}

fn sourced<T>(rules: Vec<T>) -> Vec<Sourced<T>> {
    rules.into_iter().map(Sourced::new).collect()
}

/// Add one IR endpoint's rule origins to the provenance lists of the
/// merged endpoint, noting which of its writings they came from.
fn append_origins(
    slots: &mut [Vec<Origin>],
    within: &mut [Vec<u32>],
    origins: Vec<Vec<Origin>>,
    at: u32,
) {
    for ((slot, w), origins) in slots.iter_mut().zip(within.iter_mut()).zip(origins) {
        w.extend(std::iter::repeat_n(at, origins.len()));
        slot.extend(origins);
    }
}

fn merge_rpc_rules(rules: &[ir::RpcRule]) -> (Vec<RpcMatcher>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<RpcMatcher, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        merged
            .entry(RpcMatcher {
                methods: r.methods.clone(),
                tools: r.tools.clone(),
            })
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

fn merge_graphql_rules(rules: &[ir::GraphqlRule]) -> (Vec<GraphqlRule>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<GraphqlRule, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        merged
            .entry(r.rule.clone())
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

fn merge_rules(rules: &[ir::L7Rule]) -> (Vec<L7Matcher>, Vec<Vec<Origin>>) {
    let mut merged: BTreeMap<L7Matcher, Vec<Origin>> = BTreeMap::new();
    for r in rules {
        let mut query = r.query.clone();
        query.sort();
        merged
            .entry(L7Matcher {
                methods: r.methods.clone(),
                path: r.path.clone(),
                query,
            })
            .or_default()
            .push(r.origin.clone());
    }
    merged.into_iter().unzip()
}

/// The route table and the identity table, each with its provenance.
type RouteTables = (
    Vec<Route>,
    Vec<Vec<Origin>>,
    Vec<Identity>,
    Vec<Vec<Vec<Origin>>>,
);

/// Routes de-duplicated by content, and the identity table mapping each
/// binary to the routes it may use, with the rules that granted each one.
fn routes(policy: &Policy, l7_index: &[Option<u32>]) -> RouteTables {
    let mut route_origins: BTreeMap<Route, Vec<Origin>> = BTreeMap::new();
    let mut endpoint_routes: Vec<Route> = Vec::with_capacity(policy.endpoints.len());
    for (ep, l7) in policy.endpoints.iter().zip(l7_index) {
        let via = match (&ep.kind, l7) {
            (EndpointKind::L4, _) => Via::L4,
            (EndpointKind::Tcp, _) => Via::Tcp,
            (EndpointKind::Http(_), Some(id)) => Via::L7(*id),
            (EndpointKind::Http(_), None) => Via::Uninspected,
        };
        let route = Route {
            dest: ep.dest.clone(),
            ports: ep.ports.clone(),
            addresses: ep.addresses.clone(),
            via,
            uninspected_credentials: ep.uninspected_credentials,
            websocket_credential_rewrite: ep.websocket_credential_rewrite,
            request_body_credential_rewrite: ep.request_body_credential_rewrite,
        };
        route_origins
            .entry(route.clone())
            .or_default()
            .push(ep.origin.clone());
        endpoint_routes.push(route);
    }
    let index: BTreeMap<&Route, u32> = route_origins
        .keys()
        .enumerate()
        .map(|(i, r)| (r, u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let routes_by_index: Vec<&Route> = route_origins.keys().collect();
    let mut per_binary: BTreeMap<&BinaryRef, BTreeMap<u32, Vec<Origin>>> = BTreeMap::new();
    for (ep, route) in policy.endpoints.iter().zip(&endpoint_routes) {
        let Some(&id) = index.get(route) else {
            continue;
        };
        for b in &ep.binaries {
            per_binary
                .entry(b)
                .or_default()
                .entry(id)
                .or_default()
                .push(ep.origin.clone());
        }
    }
    let mut identity_prov = Vec::with_capacity(per_binary.len());
    let identities = per_binary
        .into_iter()
        .map(|(binary, grants)| {
            let (ids, origins): (Vec<u32>, Vec<Vec<Origin>>) = grants
                .into_iter()
                .map(|(id, mut o)| {
                    o.sort();
                    o.dedup();
                    (id, o)
                })
                .unzip();
            identity_prov.push(origins);
            let mut dns: Vec<HostPattern> = ids
                .iter()
                .filter_map(
                    |&i| match routes_by_index.get(i as usize).map(|r| &r.dest) {
                        Some(Dest::Host(h)) => Some(h.clone()),
                        _ => None,
                    },
                )
                .collect();
            dns.sort();
            dns.dedup();
            Identity {
                binary: binary.clone(),
                routes: ids.into_iter().collect(),
                dns,
            }
        })
        .collect();
    let (routes, origins): (Vec<_>, Vec<_>) = route_origins.into_iter().unzip();
    (routes, origins, identities, identity_prov)
}

/// Landlock rights for the language's read / write / exec, split by the
/// ABI that introduced each right.
fn landlock_rights(r: FsRights) -> Vec<RightsAtAbi> {
    use FsRight::*;
    let mut wanted = Vec::new();
    if r.read || r.write || r.exec {
        wanted.extend([ReadDir, ReadFile]);
    }
    if r.exec {
        wanted.push(Execute);
    }
    if r.write {
        wanted.extend([
            MakeBlock, MakeChar, MakeDir, MakeFifo, MakeReg, MakeSock, MakeSym, RemoveDir,
            RemoveFile, WriteFile, Refer, Truncate, IoctlDev,
        ]);
    }
    let mut by_abi: BTreeMap<Abi, Vec<&str>> = BTreeMap::new();
    for right in wanted {
        by_abi.entry(right.since()).or_default().push(right.name());
    }
    by_abi
        .into_iter()
        .map(|(abi, mut rights)| {
            rights.sort_unstable();
            RightsAtAbi {
                abi: abi.0,
                rights: rights.into_iter().map(str::to_string).collect(),
            }
        })
        .collect()
}
