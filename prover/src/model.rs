//! A bundle as formulas over the request variables, mirroring
//! `policy_bundle::eval::Evaluator` step by step:
//!
//! 1. the binary's identities: exact or glob path, and the SHA-256 pin;
//! 2. the routes of those identities that apply to the destination: port,
//!    host pattern (a wildcard never reaches a metadata name) or address
//!    set, the host's allowed `addresses`, and internal addresses refused
//!    unless named; a route that relays uninspected to a host a credential
//!    is bound to, without `uninspected_credentials`, matches nothing
//!    (`Route::credential_guard`);
//! 3. no matching route: denied; no matching inspected (L7) endpoint:
//!    relayed uninspected, every request passes;
//! 4. otherwise the participating endpoints (route matched, `path`
//!    restriction holds, no encoded slash unless allowed) decide: deny
//!    wins across all of them, audit only when every one is in audit mode;
//!    A JSON-RPC or MCP endpoint judges the call the body carries
//!    (`crate::calls`), a GraphQL endpoint the operation (`crate::graphql`):
//!    a body it cannot read is denied whatever the mode. Only websocket
//!    endpoints judge WebSocket upgrades and messages, and they refuse
//!    every plain request (`crate::websocket`);
//! 5. the proxy injects a credential when the request is let through and
//!    some credential binding covers host, method and path.

use std::collections::BTreeMap;

use policy_bundle::matcher::{AddrSet, internal_ranges};
use policy_bundle::{Bundle, L7Endpoint, L7Protocol, Via};
use policy_bundle::{Dest, Enforcement};

use crate::binding::cred_binding;
use crate::domain::{self, Domain, ENCODED_SLASH_KEY};
use crate::formula::Defs;
use crate::formula::{F, FALSE, Lit, and, ids, lit, not, or};
use crate::sandbox::Sandbox;
use policy_bundle::matcher::METADATA_HOSTS;

/// The formulas of one bundle.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// The connection is allowed (some route matches).
    pub(crate) conn: F,
    /// The request is let through (allowed or audited).
    pub(crate) allow: F,
    /// The request is let through only because every participating
    /// endpoint is in audit mode.
    pub(crate) audit: F,
    /// The proxy injects a credential on it.
    pub(crate) inject: F,
    /// What [`Model::injects`] is built from: per credential, in the
    /// bundle's order, its binding covers an HTTP request, and an upgrade
    /// `GET`; whether the request is a plain HTTP one; whether it is
    /// inspected.
    cred_matches: Vec<F>,
    get_matches: Vec<F>,
    http_kind: F,
    inspected: F,
    /// Some credential is bound to the destination host, or a secret the
    /// workload can read unlocks it (an address without a name could be
    /// any host): the destination is credentialed.
    pub(crate) scope: F,
    /// Let through and carrying a credential (injected or held).
    pub(crate) credentialed: F,
    /// Relayed without inspection, or by a binary that speaks a protocol
    /// the proxy cannot inspect.
    pub(crate) bypass: F,
    /// The binary lies where the workload can write (and run) a program of
    /// its own, and no pin is required.
    pub(crate) plantable: F,
    /// Where credential placeholders are replaced in bodies and messages.
    pub(crate) rewrites: crate::rewrite::Rewrites,
}

impl Model {
    /// Per credential of the bundle, in its order: the proxy injects that
    /// one (the first whose binding covers the request, as
    /// `Evaluator::credential_for` picks). Built on demand, as plain
    /// formulas: only containment asks which credential is injected, and
    /// their size grows with the square of the number of credentials.
    pub(crate) fn injects(&self) -> Vec<F> {
        (0..self.cred_matches.len())
            .map(|i| {
                let first = |ms: &[F]| {
                    let before = ms.get(..i).unwrap_or_default();
                    ms.get(i)
                        .map_or(FALSE, |m| and([m.clone(), not(or(before.iter().cloned()))]))
                };
                and([
                    self.allow.clone(),
                    self.inspected.clone(),
                    or([
                        and([self.http_kind.clone(), first(&self.cred_matches)]),
                        and([not(self.http_kind.clone()), first(&self.get_matches)]),
                    ]),
                ])
            })
            .collect()
    }
}

/// Facts about binary atoms from the registry.
#[derive(Debug, Clone, Default)]
pub(crate) struct BinaryFacts {
    pub(crate) bypass: Vec<u32>,
    pub(crate) exfil: Vec<u32>,
}

fn ports(set: &policy_bundle::matcher::PortSet) -> F {
    or(set.ranges().iter().map(|&(lo, hi)| lit(Lit::Port(lo, hi))))
}

/// The address lies in `set`: the address classes inside it (every set a
/// formula names was used to build the classes, so a class is wholly
/// inside or outside). Z3 ties the class variable to the address
/// bit-vectors once; route formulas then test a small finite domain.
pub(crate) fn addr_in(dom: &Domain, set: &AddrSet) -> F {
    let mut classes = Vec::new();
    let mut cells = Vec::new();
    for (k, class) in dom.addr_classes.iter().enumerate().skip(1) {
        let first = class.first().and_then(|c| c.first_ip());
        if first.is_some_and(|ip| set.contains(ip)) {
            classes.extend(u32::try_from(k).ok());
            cells.extend(class.iter().copied());
        }
    }
    lit(Lit::AddrClass(ids(classes), cells.into()))
}

/// The destination is a metadata or link-local endpoint: a metadata host
/// name reached by name (with an address, the address is where the
/// connection goes), or an address in the metadata and link-local ranges.
pub(crate) fn metadata_dest(dom: &Domain) -> F {
    let hosts: Vec<u32> = METADATA_HOSTS
        .iter()
        .flat_map(|h| dom.hosts.atoms_of(h).iter().copied())
        .collect();
    or([
        and([lit(Lit::Host(ids(hosts))), not(lit(Lit::HasAddr))]),
        addr_in(dom, &domain::metadata_ranges()),
    ])
}

pub(crate) fn host_none(dom: &Domain) -> F {
    lit(Lit::Host(ids(vec![dom.host_none()])))
}

/// Builds the formulas of a bundle; definitions are named `{prefix}.…`.
pub(crate) fn build(
    prefix: &str,
    b: &Bundle,
    dom: &Domain,
    facts: &BinaryFacts,
    sandbox: &Sandbox,
    defs: &mut Defs,
) -> Model {
    let t = &b.enforcement;
    let meta_hosts: Vec<u32> = METADATA_HOSTS
        .iter()
        .flat_map(|h| dom.hosts.atoms_of(h).iter().copied())
        .collect();
    let meta_hosts = ids(meta_hosts);
    let internal = addr_in(dom, &internal_ranges());
    let internal = defs.define(format!("{prefix}.internal"), internal);
    // Identities per route.
    let mut route_ids: BTreeMap<u32, Vec<F>> = BTreeMap::new();
    for id in &t.seccomp.identities {
        let bins = lit(Lit::Bin(ids(dom
            .bins
            .atoms_of(&domain::binary_key(&id.binary.glob))
            .to_vec())));
        let f = match &id.binary.sha256 {
            Some(pin) => and([bins, lit(Lit::Sha(dom.sha_index(Some(pin))))]),
            None => bins,
        };
        for &r in &id.routes {
            route_ids.entry(r).or_default().push(f.clone());
        }
    }
    let mut matched: Vec<F> = Vec::with_capacity(t.seccomp.routes.len());
    for (r, route) in t.seccomp.routes.iter().enumerate() {
        let r32 = u32::try_from(r).unwrap_or(u32::MAX);
        let who = or(route_ids.remove(&r32).unwrap_or_default());
        let dest = match &route.dest {
            Dest::Addrs(set) => and([lit(Lit::HasAddr), addr_in(dom, set)]),
            Dest::Host(h) => {
                let host = lit(Lit::Host(ids(dom
                    .hosts
                    .atoms_of(&domain::host_key(h))
                    .to_vec())));
                let not_meta = if h.is_exact() {
                    crate::formula::T
                } else {
                    not(lit(Lit::Host(meta_hosts.clone())))
                };
                let addr_ok = match &route.addresses {
                    Some(a) => addr_in(dom, a),
                    None => not(internal.clone()),
                };
                and([host, not_meta, or([not(lit(Lit::HasAddr)), addr_ok])])
            }
        };
        let body = if route.credential_guard(&t.credentials).is_some() {
            FALSE
        } else {
            and([ports(&route.ports), dest, who])
        };
        matched.push(defs.define(format!("{prefix}.route{r}"), body));
    }
    let conn = defs.define(format!("{prefix}.conn"), or(matched.iter().cloned()));

    // Which credential the upgrade `GET` carries: a message rides on it.
    let cred_get = or(t
        .credentials
        .iter()
        .filter(|c| c.methods.as_ref().is_none_or(|m| m.contains("GET")))
        .map(|c| cred_binding(dom, c, crate::formula::T)));
    // The hosts a credential is bound to, whatever its methods and paths:
    // credentialed endpoints, where a binary message is refused.
    let cred_hosts: Vec<u32> = t
        .credentials
        .iter()
        .flat_map(|c| c.hosts.iter())
        .flat_map(|h| dom.hosts.atoms_of(&domain::host_key(h)).iter().copied())
        .collect();
    let cred_host = lit(Lit::Host(ids(cred_hosts)));
    let mut ws_parts: Vec<WsPart> = Vec::new();
    let enc_slash = ids(dom.paths.atoms_of(ENCODED_SLASH_KEY).to_vec());
    let mut part: Vec<(F, bool)> = Vec::new();
    let mut deny_parts = Vec::new();
    let mut allow_parts = Vec::new();
    let mut inl7_all = Vec::new();
    let mut refused_parts = Vec::new();
    let mut alias_parts = Vec::new();
    let post = lit(Lit::Method(ids(vec![dom.method_index("POST")])));
    let get = lit(Lit::Method(ids(vec![dom.method_index("GET")])));
    for (e, ep) in t.l7.iter().enumerate() {
        let via: Vec<F> = t
            .seccomp
            .routes
            .iter()
            .zip(&matched)
            .filter(|(r, _)| r.via == Via::L7(u32::try_from(e).unwrap_or(u32::MAX)))
            .map(|(_, m)| m.clone())
            .collect();
        let inl7 = defs.define(format!("{prefix}.l7_{e}.reached"), or(via));
        inl7_all.push(inl7.clone());
        let restrict = match &ep.path {
            Some(p) => lit(Lit::Path(ids(dom
                .paths
                .atoms_of(&domain::endpoint_path_key(ep, p))
                .to_vec()))),
            None => crate::formula::T,
        };
        let slash_ok = if ep.encoded_slash || enc_slash.is_empty() {
            crate::formula::T
        } else {
            not(lit(Lit::Path(enc_slash.clone())))
        };
        // Another spelling of a body-judging endpoint's path is refused
        // before any rule, in audit mode too (`path_alias`).
        if let Some(g) = domain::alias_glob(ep) {
            let folded = ids(dom.paths.atoms_of(&format!("fold:{}", g.as_str())).to_vec());
            let exact = ids(dom.paths.atoms_of(&domain::path_key(g)).to_vec());
            alias_parts.push(and([
                inl7.clone(),
                slash_ok.clone(),
                lit(Lit::Path(folded)),
                not(lit(Lit::Path(exact))),
            ]));
        }
        let p = defs.define(
            format!("{prefix}.l7_{e}.part"),
            and([inl7, restrict, slash_ok]),
        );
        let rules = |rs: &[policy_bundle::Sourced<policy_bundle::L7Matcher>], deny: bool| {
            or(rs.iter().map(|m| {
                let qs = m.query.iter().map(|q| match dom.query_index(q) {
                    Some(i) if deny => lit(Lit::QDeny(i)),
                    Some(i) => lit(Lit::QAllow(i)),
                    None => FALSE,
                });
                and([
                    lit(Lit::Method(ids(dom.methods_of(&m.methods)))),
                    lit(Lit::Path(ids(dom
                        .paths
                        .atoms_of(&domain::endpoint_path_key(ep, &m.path))
                        .to_vec()))),
                ]
                .into_iter()
                .chain(qs))
            }))
        };
        if ep.protocol() == L7Protocol::Websocket {
            // A plain request on its path is refused whatever the mode;
            // upgrades and messages are judged below.
            refused_parts.push(p.clone());
            ws_parts.push(ws_part(dom, t, ep, e, &p, &matched, &cred_host));
        } else if !crate::calls::modelled(ep.protocol()) {
            // A protocol the model does not know: the endpoint is taken to
            // allow every request it sees, and the engine does not certify
            // a change that involves one (`engine::unmodelled_protocols`).
            allow_parts.push(p.clone());
        } else if ep.protocol() == L7Protocol::Graphql {
            let c = graphql(dom, ep, &post, &get);
            refused_parts.push(and([p.clone(), c.refused]));
            deny_parts.push(and([p.clone(), c.deny]));
            allow_parts.push(and([p.clone(), c.allow]));
        } else if crate::calls::reads_calls(ep) {
            let c = rpc(dom, ep, &post, &get);
            refused_parts.push(and([p.clone(), c.refused]));
            deny_parts.push(and([p.clone(), c.deny]));
            allow_parts.push(and([p.clone(), c.allow]));
        } else {
            deny_parts.push(and([p.clone(), rules(ep.deny(), true)]));
            allow_parts.push(and([p.clone(), rules(ep.allow(), false)]));
        }
        part.push((p, ep.enforcement == Enforcement::Enforce));
    }
    let inspected = defs.define(format!("{prefix}.inspected"), or(inl7_all));
    let deny = defs.define(format!("{prefix}.deny"), or(deny_parts));
    // A body some participating endpoint cannot read is denied whatever
    // the others say and whatever the enforcement mode.
    let readable = not(defs.define(format!("{prefix}.refused"), or(refused_parts)));
    let allow_rule = defs.define(format!("{prefix}.allow_rule"), or(allow_parts));
    let any_part = defs.define(
        format!("{prefix}.participating"),
        or(part.iter().map(|(p, _)| p.clone())),
    );
    let enforcing = or(part.iter().filter(|(_, enf)| *enf).map(|(p, _)| p.clone()));
    let all_audit = defs.define(
        format!("{prefix}.all_audit"),
        and([any_part.clone(), not(enforcing)]),
    );
    let allow_http = defs.define(
        format!("{prefix}.allow_http"),
        and([
            conn.clone(),
            or([
                not(inspected.clone()),
                and([
                    any_part.clone(),
                    readable.clone(),
                    or([
                        all_audit.clone(),
                        and([not(deny.clone()), allow_rule.clone()]),
                    ]),
                ]),
            ]),
        ]),
    );
    let audit_http = defs.define(
        format!("{prefix}.audit_http"),
        and([
            conn.clone(),
            inspected.clone(),
            any_part,
            readable,
            all_audit,
            or([deny, not(allow_rule)]),
        ]),
    );

    let http_kind = match &dom.ws {
        Some(k) => not(lit(Lit::Method(ids(k.all())))),
        None => crate::formula::T,
    };
    let ws = dom.ws.as_ref().map(|k| {
        ws_verdict(
            prefix,
            k,
            &ws_parts,
            &and([conn.clone(), not(inspected.clone())]),
            &and([conn.clone(), inspected.clone()]),
            defs,
        )
    });
    let (ws_allow, ws_audit) = ws.unwrap_or((FALSE, FALSE));
    let parts: Vec<F> = part.iter().map(|(p, _)| p.clone()).collect();
    let rewrites = crate::rewrite::build(
        prefix,
        dom,
        t,
        &crate::rewrite::Parts {
            matched: &matched,
            endpoints: &parts,
            http_kind: &http_kind,
            inspected: &inspected,
        },
        defs,
    );
    // An upgrade, and so every message after it, is refused alike.
    let not_alias = not(defs.define(format!("{prefix}.path_alias"), or(alias_parts)));
    let allow = defs.define(
        format!("{prefix}.allow"),
        and([
            not_alias.clone(),
            or([and([http_kind.clone(), allow_http]), ws_allow]),
        ]),
    );
    let audit = defs.define(
        format!("{prefix}.audit"),
        and([
            not_alias,
            or([and([http_kind.clone(), audit_http]), ws_audit]),
        ]),
    );
    let cred_matches: Vec<F> = t
        .credentials
        .iter()
        .map(|c| {
            let methods = c.methods.as_ref().map_or(crate::formula::T, |m| {
                lit(Lit::Method(ids(dom.methods_of(m))))
            });
            cred_binding(dom, c, methods)
        })
        .collect();
    let get_matches: Vec<F> = t
        .credentials
        .iter()
        .map(|c| {
            if c.methods.as_ref().is_none_or(|m| m.contains("GET")) {
                cred_binding(dom, c, crate::formula::T)
            } else {
                FALSE
            }
        })
        .collect();
    let cred_match = or(cred_matches.iter().cloned());
    // The upgrade carries the credential, and its messages ride on it.
    let inject = defs.define(
        format!("{prefix}.inject"),
        and([
            allow.clone(),
            inspected.clone(),
            or([
                and([http_kind.clone(), cred_match]),
                and([not(http_kind.clone()), cred_get]),
            ]),
        ]),
    );
    let readable: Vec<_> = t
        .secrets
        .iter()
        .filter(|s| sandbox.can_read(&s.source))
        .collect();
    let secret_hosts: Vec<u32> = readable
        .iter()
        .flat_map(|s| s.hosts.iter())
        .flat_map(|h| dom.hosts.atoms_of(&domain::host_key(h)).iter().copied())
        .collect();
    let held = or([
        lit(Lit::Host(ids(secret_hosts))),
        if readable.is_empty() {
            FALSE
        } else {
            host_none(dom)
        },
    ]);
    let held = defs.define(format!("{prefix}.held"), held);
    let scope = defs.define(
        format!("{prefix}.scope"),
        or([cred_host.clone(), held.clone()]),
    );
    let credentialed = defs.define(
        format!("{prefix}.credentialed"),
        or([inject.clone(), and([allow.clone(), held.clone()])]),
    );
    let bypass = defs.define(
        format!("{prefix}.bypass"),
        and([
            conn.clone(),
            or([
                not(inspected.clone()),
                lit(Lit::Bin(ids(facts.bypass.clone()))),
            ]),
        ]),
    );
    let plantable = plantable(dom, sandbox);
    Model {
        conn,
        allow,
        audit,
        inject,
        cred_matches,
        get_matches,
        http_kind,
        inspected: inspected.clone(),
        scope,
        credentialed,
        bypass,
        plantable,
        rewrites,
    }
}

/// How a call-reading endpoint judges a request, given that it
/// participates: formulas over the HTTP method and the body value.
struct Rpc {
    /// The body is refused (denied whatever the mode).
    refused: F,
    /// A call matches a deny rule.
    deny: F,
    /// Allowed by a rule, the all-MCP-methods profile, the MCP receive
    /// stream, or (MCP) a lone response frame.
    allow: F,
}

/// Mirrors `judge_rpc` in `policy_bundle::eval`: over the limit or
/// unreadable → refused; MCP `GET` without a body → allowed; another
/// method than `POST` → no rule; then deny rules, then allow rules.
fn rpc(dom: &Domain, ep: &L7Endpoint, post: &F, get: &F) -> Rpc {
    let calls = &dom.calls;
    let call = |v: Vec<u32>| lit(Lit::Call(ids(v)));
    // A GraphQL GET carries its operation in the query string: no body.
    let gql_get = and([call(calls.graphql_values()), get.clone()]);
    let no_body = or([call(vec![0]), gql_get.clone()]);
    let mcp = ep.protocol() == L7Protocol::Mcp;
    let stream = if mcp {
        and([no_body.clone(), get.clone()])
    } else {
        FALSE
    };
    Rpc {
        refused: or([
            and([call(calls.refused(ep)), not(gql_get)]),
            and([no_body, not(stream.clone())]),
        ]),
        deny: and([post.clone(), call(calls.matching(ep, ep.rpc_deny()))]),
        allow: or([stream, and([post.clone(), call(calls.allowed(ep))])]),
    }
}

/// Binary atoms inside a writable tree (and an executable one, unless the
/// ruleset is best effort), with no pin required.
fn plantable(dom: &Domain, sandbox: &Sandbox) -> F {
    let under = |trees: Vec<(String, policy_bundle::matcher::BinaryGlob)>| -> Vec<u32> {
        trees
            .iter()
            .flat_map(|(_, g)| dom.bins.atoms_of(&domain::binary_key(g)).iter().copied())
            .collect()
    };
    let write = lit(Lit::Bin(ids(under(sandbox.write_trees()))));
    let exec = if sandbox.best_effort {
        crate::formula::T
    } else {
        lit(Lit::Bin(ids(under(sandbox.exec_trees()))))
    };
    and([write, exec, lit(Lit::Sha(0))])
}

/// Mirrors `judge_graphql` in `policy_bundle::eval` (see `crate::graphql`):
/// a method other than `GET` or `POST`, a value that is no GraphQL
/// request, one over the limit or an unregistered persisted id → refused;
/// else the operation is denied (a deny rule, or no allow rule) or
/// allowed.
fn graphql(dom: &Domain, ep: &L7Endpoint, post: &F, get: &F) -> Rpc {
    let calls = &dom.calls;
    let call = |v: Vec<u32>| lit(Lit::Call(ids(v)));
    let read = or([post.clone(), get.clone()]);
    Rpc {
        refused: or([not(read.clone()), call(calls.graphql_refused(ep))]),
        deny: and([read.clone(), call(calls.graphql_denied(ep))]),
        allow: and([read, call(calls.graphql_allowed(ep))]),
    }
}

/// How one websocket endpoint judges what follows an upgrade, given that
/// it participates.
struct WsPart {
    part: F,
    enforce: bool,
    upgrade_deny: F,
    upgrade_allow: F,
    /// A text message is refused (GraphQL over WebSocket: one the
    /// endpoint cannot read, or an operation it cannot judge).
    text_refused: F,
    text_deny: F,
    text_allow: F,
    /// A binary message is refused: a credential is bound to the host
    /// (whether or not the upgrade carried it) and no matched route via
    /// this endpoint accepts uninspected credentials.
    binary_refused: F,
    /// Its message limit: a longer message is refused.
    limit: usize,
}

/// REST rules of `rs` that hold `method`, as formulas over path and query.
fn rules_for(
    dom: &Domain,
    ep: &L7Endpoint,
    rs: &[policy_bundle::Sourced<policy_bundle::L7Matcher>],
    deny: bool,
    method: &str,
) -> F {
    or(rs.iter().filter(|m| m.methods.contains(method)).map(|m| {
        let qs = m.query.iter().map(|q| match dom.query_index(q) {
            Some(i) if deny => lit(Lit::QDeny(i)),
            Some(i) => lit(Lit::QAllow(i)),
            None => FALSE,
        });
        and(std::iter::once(lit(Lit::Path(ids(dom
            .paths
            .atoms_of(&domain::endpoint_path_key(ep, &m.path))
            .to_vec()))))
        .chain(qs))
    }))
}

/// Mirrors `judge_websocket` in `policy_bundle::eval` for a websocket
/// endpoint.
fn ws_part(
    dom: &Domain,
    t: &policy_bundle::Tables,
    ep: &L7Endpoint,
    e: usize,
    part: &F,
    matched: &[F],
    cred_host: &F,
) -> WsPart {
    let e32 = u32::try_from(e).unwrap_or(u32::MAX);
    let accepts = or(t
        .seccomp
        .routes
        .iter()
        .zip(matched)
        .filter(|(r, _)| r.via == Via::L7(e32) && r.uninspected_credentials)
        .map(|(_, m)| m.clone()));
    let text = policy_bundle::matcher::WEBSOCKET_TEXT;
    let rest_deny = rules_for(dom, ep, ep.deny(), true, text);
    let (text_refused, text_deny, text_allow) = if ep.graphql_over_websocket() {
        graphql_message(dom, ep, rest_deny)
    } else {
        (
            FALSE,
            rest_deny,
            rules_for(dom, ep, ep.allow(), false, text),
        )
    };
    WsPart {
        part: part.clone(),
        enforce: ep.enforcement == Enforcement::Enforce,
        upgrade_deny: and([part.clone(), rules_for(dom, ep, ep.deny(), true, "GET")]),
        upgrade_allow: and([part.clone(), rules_for(dom, ep, ep.allow(), false, "GET")]),
        text_refused: and([part.clone(), text_refused]),
        text_deny: and([part.clone(), text_deny]),
        text_allow: and([part.clone(), text_allow]),
        binary_refused: and([part.clone(), cred_host.clone(), not(accepts)]),
        limit: ep.effective_body_limit(),
    }
}

/// Mirrors `graphql_message` in `policy_bundle::eval`: refused, denied
/// and allowed, over the body value (`crate::calls::WsRead`) and the
/// endpoint's `deny WEBSOCKET_TEXT` rules (`rest_deny`). A lifecycle
/// message is allowed before any rule is read; an operation matching a
/// `deny WEBSOCKET_TEXT` rule is denied before the registry is read, so
/// even an unregistered persisted query is then a deny, not a refusal.
fn graphql_message(dom: &Domain, ep: &L7Endpoint, rest_deny: F) -> (F, F, F) {
    use crate::calls::WsRead;
    use crate::graphql::Judged;
    let values = |keep: &dyn Fn(WsRead) -> bool| lit(Lit::Call(ids(dom.calls.ws_values(ep, keep))));
    let operation = values(&|r| matches!(r, WsRead::Operation(_)));
    let judged = |j: Judged| values(&|r| r == WsRead::Operation(j));
    (
        or([
            values(&|r| r == WsRead::Unreadable),
            and([judged(Judged::Refused), not(rest_deny.clone())]),
        ]),
        and([operation, or([rest_deny, judged(Judged::Denied)])]),
        or([values(&|r| r == WsRead::Lifecycle), judged(Judged::Allowed)]),
    )
}

/// Let through and audited, for the WebSocket kinds (see
/// `crate::websocket`): `l4` is a connection relayed uninspected, `l7`
/// one the proxy inspects.
fn ws_verdict(
    prefix: &str,
    k: &crate::websocket::Kinds,
    parts: &[WsPart],
    l4: &F,
    l7: &F,
    defs: &mut Defs,
) -> (F, F) {
    let kind = |m: u32| lit(Lit::Method(ids(vec![m])));
    let any = defs.define(
        format!("{prefix}.ws.participating"),
        or(parts.iter().map(|p| p.part.clone())),
    );
    let enforcing = or(parts.iter().filter(|p| p.enforce).map(|p| p.part.clone()));
    let all_audit = and([any.clone(), not(enforcing)]);
    let judged = |deny: F, allow_rule: F| {
        (
            and([
                any.clone(),
                or([
                    all_audit.clone(),
                    and([not(deny.clone()), allow_rule.clone()]),
                ]),
            ]),
            and([any.clone(), all_audit.clone(), or([deny, not(allow_rule)])]),
        )
    };
    let (up_ok, up_audit) = judged(
        or(parts.iter().map(|p| p.upgrade_deny.clone())),
        or(parts.iter().map(|p| p.upgrade_allow.clone())),
    );
    let up_ok = defs.define(format!("{prefix}.ws.upgrade"), up_ok);
    let (text_ok, text_audit) = judged(
        or(parts.iter().map(|p| p.text_deny.clone())),
        or(parts.iter().map(|p| p.text_allow.clone())),
    );
    // Refused by one endpoint: denied whatever the others say or the mode.
    let text_read = not(or(parts.iter().map(|p| p.text_refused.clone())));
    let text_ok = and([text_read.clone(), text_ok]);
    let text_audit = and([text_read, text_audit]);
    let text_ok = defs.define(format!("{prefix}.ws.text"), text_ok);
    let text_audit = defs.define(format!("{prefix}.ws.text_audit"), text_audit);
    let binary_ok = defs.define(
        format!("{prefix}.ws.binary"),
        and([
            any.clone(),
            not(or(parts.iter().map(|p| p.binary_refused.clone()))),
        ]),
    );
    let mut allow = vec![and([
        kind(k.upgrade),
        or([l4.clone(), and([l7.clone(), up_ok.clone()])]),
    ])];
    let mut audit = vec![and([kind(k.upgrade), l7.clone(), up_audit])];
    for class in &k.classes {
        // Refused, whatever the mode, by a taking-part endpoint whose
        // limit it exceeds.
        let fits = not(or(parts
            .iter()
            .filter(|p| p.limit < class.size)
            .map(|p| p.part.clone())));
        let inspected = and([l7.clone(), up_ok.clone(), fits]);
        allow.push(and([
            kind(class.text),
            or([l4.clone(), and([inspected.clone(), text_ok.clone()])]),
        ]));
        allow.push(and([
            kind(class.binary),
            or([l4.clone(), and([inspected.clone(), binary_ok.clone()])]),
        ]));
        audit.push(and([kind(class.text), inspected, text_audit.clone()]));
    }
    (or(allow), or(audit))
}
