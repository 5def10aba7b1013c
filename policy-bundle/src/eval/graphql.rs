//! How a `graphql` endpoint judges a request, following OpenShell's
//! runtime (its `l7/graphql.rs` and the GraphQL rules of its Rego policy)
//! and failing closed where that is lax.
//!
//! A GraphQL endpoint is authoritative for the paths it covers: a GET
//! carries its operation in the query string, a POST in its body (one
//! request object or a batch), and any other method is refused, as
//! OpenShell refuses it. Every operation is judged: an operation matching
//! a deny rule denies the request, and so does one that no allow rule
//! admits, even when another endpoint on the same path would allow the
//! request (OpenShell: "a GraphQL endpoint path is authoritative once it
//! matches"). A batch is allowed only when every operation is.
//!
//! A request that cannot be read exactly (over the body limit, malformed,
//! ambiguous) and a hash-only request whose id is not registered are
//! refused whatever the enforcement mode: no rule could see what the
//! server would run. A registered persisted query is judged as the
//! operation registered for it (type, name, root fields), as OpenShell
//! does. Stricter than OpenShell:
//!
//! - a GET with a body is refused, since a server might read either;
//! - a hash-only request whose `operationName` differs from the registered
//!   name is refused, since the stored document may hold other operations;
//! - a registered query that lists no root fields is taken to have unknown
//!   fields: field deny rules match it and field allow rules do not
//!   (OpenShell lets it pass every field deny rule).

use serde::Serialize;

use super::{BodyOutcome, BodyReason, Note, Rule};
use crate::bundle::{GraphqlOps, GraphqlRules};
use crate::l7body::graphql::{self, DocumentCache, GraphqlOp};
use crate::matcher::OperationType;

/// What a judged GraphQL request held, for the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphqlNote {
    /// Every operation in the request, in order.
    pub operations: Vec<GraphqlOp>,
    /// Index in `operations` of the operation that was denied or matched no
    /// allow rule (for an allow: the first operation).
    pub operation: Option<usize>,
    /// Whether the body was a batch, even of one.
    pub batch: bool,
}

/// An operation as the rules see it: a document's own, or the registered
/// one for a hash-only request. `fields: None` means not known.
struct Effective<'a> {
    kind: OperationType,
    name: Option<&'a str>,
    fields: Option<&'a [String]>,
    persisted: Option<&'a str>,
}

impl Effective<'_> {
    fn describe(&self, k: usize, count: usize) -> String {
        let mut out = if count > 1 {
            format!("batch operation {} of {count}: ", k + 1)
        } else {
            String::new()
        };
        match self.name {
            Some(name) => out.push_str(&format!("{} `{name}`", self.kind)),
            None => out.push_str(&format!("anonymous {}", self.kind)),
        }
        if let Some(id) = self.persisted {
            out.push_str(&format!(" (persisted query `{id}`)"));
        }
        out
    }
}

pub(super) fn judge_graphql(
    ep: &GraphqlRules,
    method: &str,
    query: Option<&str>,
    what: &str,
    body: &[u8],
    cache: &DocumentCache,
) -> BodyOutcome {
    let limit = ep.effective_body_limit();
    let read = match method {
        "POST" => graphql::post(body, limit, Some(cache)),
        "GET" if !body.is_empty() => {
            return refused(BodyReason::GraphqlGetWithBody {
                what: what.to_string(),
            });
        }
        "GET" => {
            graphql::query_string(query.unwrap_or_default(), limit, Some(cache)).map(|op| vec![op])
        }
        other => {
            return refused(BodyReason::GraphqlMethod {
                what: what.to_string(),
                method: other.to_string(),
            });
        }
    };
    let ops = match read {
        Ok(ops) => ops,
        Err(err) => {
            return refused(BodyReason::GraphqlUnreadable {
                what: what.to_string(),
                error: err.to_string(),
            });
        }
    };
    let batch = ops.len() > 1 || (method == "POST" && body.trim_ascii_start().starts_with(b"["));
    judge_operations(&ep.ops, what, ops, batch)
}

/// Judges the operations a request or message carries by the endpoint's
/// GraphQL rules and registry: deny wins, and an operation no allow rule
/// admits denies the whole request (the endpoint is authoritative).
pub(super) fn judge_operations(
    ep: &GraphqlOps,
    what: &str,
    ops: Vec<GraphqlOp>,
    batch: bool,
) -> BodyOutcome {
    let note = |operation: Option<usize>| Note {
        graphql: Some(GraphqlNote {
            operations: ops.clone(),
            operation,
            batch,
        }),
        ..Note::default()
    };
    let mut effective = Vec::with_capacity(ops.len());
    for (k, op) in ops.iter().enumerate() {
        match op {
            GraphqlOp::Parsed {
                kind,
                name,
                root_fields,
                ..
            } => effective.push(Effective {
                kind: *kind,
                name: name.as_deref(),
                fields: Some(root_fields),
                persisted: None,
            }),
            GraphqlOp::Persisted { hash, name } => {
                let Some(registered) = ep.persisted_query(hash) else {
                    return BodyOutcome::Refused(
                        BodyReason::PersistedUnregistered {
                            what: what.to_string(),
                            hash: hash.clone(),
                        },
                        note(Some(k)),
                    );
                };
                if let Some(asked) = name
                    && registered.name.as_deref() != Some(asked.as_str())
                {
                    return BodyOutcome::Refused(
                        BodyReason::PersistedNameMismatch {
                            what: what.to_string(),
                            asked: asked.clone(),
                            hash: hash.clone(),
                        },
                        note(Some(k)),
                    );
                }
                effective.push(Effective {
                    kind: registered.kind,
                    name: registered.name.as_deref(),
                    fields: registered.fields.as_deref(),
                    persisted: Some(hash),
                });
            }
        }
    }
    let count = effective.len();
    for (k, op) in effective.iter().enumerate() {
        for (i, rule) in ep.deny.iter().enumerate() {
            if let Some(field) = rule.denies(op.kind, op.name, op.fields) {
                return BodyOutcome::Denied(
                    Some(Rule::Graphql(i)),
                    BodyReason::GraphqlDenied {
                        what: what.to_string(),
                        operation: op.describe(k, count),
                        field: field.map(ToString::to_string),
                    },
                    note(Some(k)),
                );
            }
        }
    }
    let mut first_rule = None;
    for (k, op) in effective.iter().enumerate() {
        let rule = ep
            .allow
            .iter()
            .position(|r| r.allows(op.kind, op.name, op.fields));
        let Some(rule) = rule else {
            let near = ep.allow.iter().any(|r| r.type_and_name(op.kind, op.name));
            let field = op.fields.filter(|_| near).and_then(|fields| {
                fields.iter().find(|f| {
                    !ep.allow
                        .iter()
                        .any(|r| r.allows(op.kind, op.name, Some(std::slice::from_ref(*f))))
                })
            });
            let what = what.to_string();
            let operation = op.describe(k, count);
            let why = match field {
                Some(f) => BodyReason::GraphqlFieldUnallowed {
                    what,
                    operation,
                    field: f.clone(),
                },
                None => BodyReason::GraphqlUnmatched {
                    what,
                    operation,
                    fields_known: op.fields.is_some(),
                },
            };
            // The endpoint is authoritative: not allowed here is denied.
            return BodyOutcome::Denied(None, why, note(Some(k)));
        };
        if k == 0 {
            first_rule = Some(Rule::Graphql(rule));
        }
    }
    let what = what.to_string();
    let why = match effective.as_slice() {
        [op] => BodyReason::GraphqlAllowed {
            what,
            operation: op.describe(0, 1),
        },
        ops => BodyReason::GraphqlBatchAllowed {
            what,
            operations: ops.len(),
        },
    };
    BodyOutcome::Allowed(first_rule, why, note(Some(0)))
}

fn refused(why: BodyReason) -> BodyOutcome {
    BodyOutcome::Refused(why, Note::default())
}
