//! Credential placeholders the proxy replaces by their secrets in what the
//! workload writes: REST request bodies (`request_body_credential_rewrite`)
//! and WebSocket text messages (`websocket_credential_rewrite`).
//!
//! The request questions read a request as "carries a credential" when the
//! proxy injects one by its binding (host, methods, paths). A rewriting
//! route sends a secret another way: a body or text message carrying the
//! placeholder of a credential, which every route without the flag
//! refuses (`Evaluator::body_placeholders`, `placeholders_in_text`), goes
//! on with the secret in it. Only where the credential's binding covers
//! the request, as for a header: host, method and path for a body
//! (`Evaluator::body_rewrites`), host, `GET` and the upgrade's path for a
//! message, which rides on its upgrade (`Evaluator::ws_rewrites`); the
//! placeholder of a credential bound to the host for other methods or
//! paths is refused (the supervisor's relay follows the decision). So a
//! change that turns a flag on widens what reaches the host with the
//! secret, inside the binding, even when no request gains a route, a rule
//! or a binding, and the request questions, which see no placeholder,
//! would call it nothing new; where the binding covers none of the
//! requests the flagged route lets through, nothing widens.
//!
//! What is modelled, per bundle: the requests on which the proxy reads
//! the body and replaces placeholders (a participating REST endpoint
//! reached by a flagged route, and no endpoint that judges bodies), the
//! text messages it lets through with placeholders replaced (every
//! participating websocket endpoint either rewrites or takes
//! uninspected credentials, and one rewrites), and per credential with a
//! placeholder, the requests and messages its binding covers. A question
//! per credential (`query::rewrites`) asks for a request NEW lets through
//! with that credential's placeholder replaced where OLD does not; its
//! witness carries the placeholder ([`body`], [`text`]).

use policy_bundle::{L7Protocol, PLACEHOLDER_PREFIX, PLACEHOLDER_RANDOM_HEX, Tables, Via};

use crate::domain::Domain;
use crate::formula::{Defs, F, FALSE, Lit, T, and, ids, lit, not, or};

/// Where one bundle replaces placeholders.
#[derive(Debug, Clone)]
pub(crate) struct Rewrites {
    /// An HTTP request whose body the proxy reads and rewrites (before
    /// the rules' verdict: conjoin `allow`).
    pub(crate) body: F,
    /// A text message let through with placeholders replaced (before the
    /// rules' verdict: conjoin `allow`).
    pub(crate) text: F,
    /// Per credential of the bundle, in its order.
    pub(crate) placeholders: Vec<Placeholder>,
}

/// One credential as a rewriting route reads it.
#[derive(Debug, Clone)]
pub(crate) struct Placeholder {
    pub(crate) name: String,
    /// An HTTP request the credential's binding covers (host, method,
    /// path), when it has a placeholder (`FALSE` when it has none: nothing
    /// to replace).
    pub(crate) body_binding: F,
    /// A message after an upgrade the binding covers (host, `GET`, the
    /// upgrade's path), when it has a placeholder.
    pub(crate) text_binding: F,
    /// The text message kinds a message carrying its placeholder fits in.
    pub(crate) text_fits: F,
}

/// The placeholder a witness carries: the shape the supervisor issues,
/// with a fixed random part.
pub(crate) fn placeholder(name: &str) -> String {
    let hex: String = "0123456789abcdef"
        .chars()
        .cycle()
        .take(PLACEHOLDER_RANDOM_HEX)
        .collect();
    format!("{PLACEHOLDER_PREFIX}{name}-{hex}")
}

/// A JSON body (and a plain text message) carrying the placeholder.
pub(crate) fn body(name: &str) -> String {
    format!(r#"{{"token":"{}"}}"#, placeholder(name))
}

/// What [`build`] reads of a bundle's model.
#[derive(Clone, Copy)]
pub(crate) struct Parts<'a> {
    /// Per route: it matches the connection.
    pub(crate) matched: &'a [F],
    /// Per L7 endpoint: it takes part (reached, its `path` holds, the
    /// target reads).
    pub(crate) endpoints: &'a [F],
    /// A plain HTTP request (no WebSocket kind).
    pub(crate) http_kind: &'a F,
    /// A connection the proxy inspects.
    pub(crate) inspected: &'a F,
}

/// Builds the formulas of one bundle; definitions are named `{prefix}.…`.
pub(crate) fn build(
    prefix: &str,
    dom: &Domain,
    t: &Tables,
    m: &Parts<'_>,
    defs: &mut Defs,
) -> Rewrites {
    let Parts {
        matched,
        endpoints: parts,
        http_kind,
        inspected,
    } = *m;
    let flagged = |e: usize, flag: fn(&policy_bundle::Route) -> bool| {
        let e = u32::try_from(e).unwrap_or(u32::MAX);
        or(t.seccomp
            .routes
            .iter()
            .zip(matched)
            .filter(|(r, _)| r.via == Via::L7(e) && flag(r))
            .map(|(_, m)| m.clone()))
    };
    let mut body_rw = Vec::new();
    let mut body_readers = Vec::new();
    let mut ws_rw = Vec::new();
    let mut ws_refuse = Vec::new();
    for ((e, ep), p) in t.l7.iter().enumerate().zip(parts) {
        if ep.reads_body() {
            body_readers.push(p.clone());
        }
        match ep.protocol() {
            L7Protocol::Rest => {
                body_rw.push(and([
                    p.clone(),
                    flagged(e, |r| r.request_body_credential_rewrite),
                ]));
            }
            L7Protocol::Websocket => {
                let rw = flagged(e, |r| r.websocket_credential_rewrite);
                let accepts = flagged(e, |r| r.uninspected_credentials);
                ws_rw.push(and([p.clone(), rw.clone()]));
                ws_refuse.push(and([p.clone(), not(rw), not(accepts)]));
            }
            _ => {}
        }
    }
    let body = defs.define(
        format!("{prefix}.body_rewrite"),
        and([http_kind.clone(), or(body_rw), not(or(body_readers))]),
    );
    let text_kinds: Vec<u32> = dom
        .ws
        .as_ref()
        .map(|k| k.classes.iter().map(|c| c.text).collect())
        .unwrap_or_default();
    let text = defs.define(
        format!("{prefix}.text_rewrite"),
        and([
            lit(Lit::Method(ids(text_kinds))),
            inspected.clone(),
            or(ws_rw),
            not(or(ws_refuse)),
        ]),
    );
    let placeholders = t
        .credentials
        .iter()
        .map(|c| {
            let (body_binding, text_binding) = if c.placeholder.is_some() {
                let methods = c
                    .methods
                    .as_ref()
                    .map_or(T, |m| lit(Lit::Method(ids(dom.methods_of(m)))));
                let get = c.methods.as_ref().is_none_or(|m| m.contains("GET"));
                (
                    crate::binding::cred_binding(dom, c, methods),
                    if get {
                        crate::binding::cred_binding(dom, c, T)
                    } else {
                        FALSE
                    },
                )
            } else {
                (FALSE, FALSE)
            };
            Placeholder {
                name: c.name.clone(),
                body_binding,
                text_binding,
                text_fits: text_fits(dom, &c.name),
            }
        })
        .collect();
    Rewrites {
        body,
        text,
        placeholders,
    }
}

/// The text kinds whose class holds a message carrying the placeholder
/// of `name`: every class whose largest message is no shorter.
fn text_fits(dom: &Domain, name: &str) -> F {
    let Some(kinds) = &dom.ws else {
        return FALSE;
    };
    let len = body(name).len();
    let fits: Vec<u32> = kinds
        .classes
        .iter()
        .filter(|c| kinds.upper(c.size).is_none_or(|u| u >= len))
        .map(|c| c.text)
        .collect();
    lit(Lit::Method(ids(fits)))
}
