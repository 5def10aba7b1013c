//! GraphQL operations as values of the body dimension (`crate::calls`).
//!
//! A `graphql` endpoint judges the operations a request carries (a POST
//! body, or a GET query string): an operation matching a deny rule denies
//! the request, one that no allow rule admits denies it too (the endpoint
//! is authoritative for its path), a request it cannot read is refused
//! whatever the mode (`policy_bundle::eval`'s `judge_graphql`). The model
//! gives a request one operation, from:
//!
//! - [`Op`]: a document's operation, as a type, a name atom (or
//!   anonymous) and ONE root field atom. Atoms come from the rules'
//!   `GraphqlNameGlob` regexes, names and fields separately, plus "any
//!   other name";
//! - a registered persisted query (a hash-only request, by id): judged as
//!   the operation the endpoint's registry names for it, exactly as the
//!   evaluator does, with the registered (concrete) names; an endpoint
//!   that does not register the id refuses it.
//!
//! # Why one root field per operation suffices
//!
//! A document's operation has at least one root field: GraphQL's grammar
//! has no empty selection set, every fragment spread at the root expands
//! to a selection set of its own, and a fragment cycle is refused, so
//! expanding the root always reaches a field. An allow rule admits an
//! operation iff type and name match and, when it lists field globs,
//! every root field matches one of them; so when it admits a field set it
//! admits every non-empty sub-set, in particular each single field. A deny
//! rule matches iff type and name match and, when it lists field globs,
//! *any* root field matches one; so no deny rule matches a field set
//! unless it matches one of its single fields. `__typename` is a root
//! field like any other (the evaluator gives it no exception). Hence an
//! operation an endpoint lets through with fields F is let through with
//! each single field of F, and the fields that can reach the server are
//! exactly the single-field operations that pass: a model of one field
//! loses no field NEW newly lets through. If OLD refuses a single field
//! that NEW lets through in a larger operation, NEW lets it through alone
//! too, and the widening shows on one field. One case is not reported, on
//! purpose: OLD may refuse an operation whose fields are each admitted by
//! a *different* allow rule, while admitting each alone; a NEW admitting
//! the whole operation brings no new field to the server.
//!
//! A batch is denied whole when one operation is denied, and allowed only
//! when every operation is; across endpoints the verdict combines per
//! operation as for JSON-RPC batches, so every operation of a batch NEW
//! lets through passes alone (padded to the batch's size class): batches
//! add no reach. GET and POST carry the same operations and are judged
//! alike (the value is the operation in the query string for a GET, with
//! an empty body; in the body for a POST); every other HTTP method, and a
//! GET with a body, is refused, and so is every body that is not a GraphQL
//! request (a JSON-RPC value of the dimension, no body, an unreadable
//! one). Audit mode needs nothing here: a denied operation is a deny,
//! audited when every participating endpoint is in audit mode, as in the
//! model's general rule; a refused one is denied whatever the mode.
//!
//! What is not modelled: a hash-only request whose `operationName`
//! differs from the registered name (refused, so it adds no reach), and
//! an APQ request with its document (judged as the document, which the
//! document values cover).

use policy_bundle::matcher::{GRAPHQL_NAME_REGEX, GraphqlNameGlob, OperationType};
use policy_bundle::{GraphqlRule, L7Endpoint};

use crate::error::ProverError;
use crate::strings::validity::Rule;
use crate::strings::{DimSpec, Partition, PatternKind, PatternSet, universe::Universe};

/// One document operation: type, name atom (`None`: anonymous) and its
/// one root field atom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) kind: OperationType,
    pub(crate) name: Option<u32>,
    pub(crate) field: u32,
}

/// How a GraphQL endpoint judges an operation value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Not readable (an id the endpoint does not register).
    Refused,
    /// A deny rule matches, or no allow rule admits it.
    Denied,
    Allowed,
}

/// The GraphQL part of the body dimension.
#[derive(Debug)]
pub(crate) struct Ops {
    /// Operation-name atoms (named operations only).
    pub(crate) names: Partition,
    /// Root-field atoms.
    pub(crate) fields: Partition,
    /// Persisted-query ids registered by some endpoint of either bundle.
    pub(crate) persisted: Vec<String>,
}

fn spec(budget: usize) -> DimSpec {
    DimSpec {
        universe: Universe {
            accept: GRAPHQL_NAME_REGEX.to_owned(),
            reject: Vec::new(),
            unicode: false,
        },
        valid: |_| true,
        rule: Rule::Any,
        budget,
    }
}

fn add(set: &mut PatternSet, g: &GraphqlNameGlob) {
    let kind = match g.exact() {
        Some(name) => PatternKind::Exact(name.to_owned()),
        None => PatternKind::Glob {
            regex: g.to_regex(),
            example: g.example(),
        },
    };
    if g.as_str().contains(['?', '[']) {
        set.needs_chars();
    }
    set.add(g.as_str(), kind);
}

fn rules(ep: &L7Endpoint) -> impl Iterator<Item = &GraphqlRule> {
    ep.graphql_allow()
        .iter()
        .chain(ep.graphql_deny())
        .map(|r| &r.rule)
}

impl Ops {
    pub(crate) fn build(eps: &[&L7Endpoint], budget: usize) -> Result<Ops, ProverError> {
        let mut names = PatternSet::default();
        let mut fields = PatternSet::default();
        let mut persisted = Vec::new();
        for ep in eps {
            for r in rules(ep) {
                if let Some(g) = &r.name {
                    add(&mut names, g);
                }
                for g in r.fields.iter().flatten() {
                    add(&mut fields, g);
                }
            }
            for q in ep.persisted_queries() {
                if !persisted.contains(&q.id) {
                    persisted.push(q.id.clone());
                }
            }
        }
        persisted.sort();
        Ok(Ops {
            names: Partition::build(names, &spec(budget))?,
            fields: Partition::build(fields, &spec(budget))?,
            persisted,
        })
    }

    /// Every document operation value.
    pub(crate) fn ops(&self) -> Vec<Op> {
        let mut out = Vec::new();
        let names = (0..self.names.len()).filter_map(|n| u32::try_from(n).ok());
        let names: Vec<Option<u32>> = std::iter::once(None).chain(names.map(Some)).collect();
        for kind in OperationType::ALL {
            for &name in &names {
                for field in 0..self.fields.len() {
                    if let Ok(field) = u32::try_from(field) {
                        out.push(Op { kind, name, field });
                    }
                }
            }
        }
        out
    }

    fn name_matches(&self, g: &GraphqlNameGlob, name: Option<u32>) -> bool {
        match name {
            None => g.matches_operation_name(None),
            Some(a) => self.names.atoms_of(g.as_str()).contains(&a),
        }
    }

    /// Whether a rule matches the operation. With one root field, an
    /// allow rule's "every field matches" and a deny rule's "some field
    /// matches" are the same condition.
    fn matches(&self, r: &GraphqlRule, op: Op) -> bool {
        r.types.contains(op.kind)
            && r.name
                .as_ref()
                .is_none_or(|g| self.name_matches(g, op.name))
            && r.fields.as_ref().is_none_or(|gs| {
                gs.iter()
                    .any(|g| self.fields.atoms_of(g.as_str()).contains(&op.field))
            })
    }

    pub(crate) fn judge_op(&self, ep: &L7Endpoint, op: Op) -> Judged {
        if ep.graphql_deny().iter().any(|r| self.matches(r, op)) {
            Judged::Denied
        } else if ep.graphql_allow().iter().any(|r| self.matches(r, op)) {
            Judged::Allowed
        } else {
            Judged::Denied
        }
    }

    /// A hash-only request for persisted query `i`, judged as the
    /// evaluator does: as the registered operation, with the bundle's own
    /// rule functions on the registered names.
    pub(crate) fn judge_persisted(&self, ep: &L7Endpoint, i: u32) -> Judged {
        let Some(q) = self
            .persisted
            .get(i as usize)
            .and_then(|id| ep.persisted_query(id))
        else {
            return Judged::Refused;
        };
        let (kind, name, fields) = (q.kind, q.name.as_deref(), q.fields.as_deref());
        if ep
            .graphql_deny()
            .iter()
            .any(|r| r.denies(kind, name, fields).is_some())
        {
            Judged::Denied
        } else if ep
            .graphql_allow()
            .iter()
            .any(|r| r.allows(kind, name, fields))
        {
            Judged::Allowed
        } else {
            Judged::Denied
        }
    }

    fn text(part: &Partition, a: u32) -> Option<String> {
        part.atom(a)?.witness.clone()
    }

    /// The operation's document, e.g. `mutation { createIssue }`; `Err`
    /// when an atom has no concrete name.
    pub(crate) fn document(&self, op: Op) -> Result<String, String> {
        let field = Self::text(&self.fields, op.field)
            .ok_or_else(|| "no concrete GraphQL field name was found for an atom".to_owned())?;
        Ok(match op.name {
            None => format!("{} {{ {field} }}", op.kind),
            Some(n) => {
                let name = Self::text(&self.names, n).ok_or_else(|| {
                    "no concrete GraphQL operation name was found for an atom".to_owned()
                })?;
                format!("{} {name} {{ {field} }}", op.kind)
            }
        })
    }

    /// The id of persisted query `i`.
    pub(crate) fn persisted_id(&self, i: u32) -> Option<&str> {
        self.persisted.get(i as usize).map(String::as_str)
    }

    /// The value of a concrete single operation with one root field.
    pub(crate) fn classify(
        &self,
        kind: OperationType,
        name: Option<&str>,
        field: &str,
    ) -> Option<Op> {
        let name = match name {
            None => None,
            Some(n) => Some(self.names.classify(n)?),
        };
        Some(Op {
            kind,
            name,
            field: self.fields.classify(field)?,
        })
    }

    /// How an operation reads in a region summary.
    pub(crate) fn describe(&self, op: Op) -> String {
        let atom = |part: &Partition, a: u32| {
            part.atom(a)
                .map(|atom| match (&atom.witness, atom.exact) {
                    (Some(w), true) => format!("`{w}`"),
                    _ => {
                        let pats: Vec<String> = atom
                            .sig
                            .iter()
                            .map(|&k| format!("`{}`", part.name(k)))
                            .collect();
                        if pats.is_empty() {
                            "any other".to_owned()
                        } else {
                            format!("matching {}", pats.join(" "))
                        }
                    }
                })
                .unwrap_or_default()
        };
        let name = match op.name {
            None => "anonymous".to_owned(),
            Some(n) => format!("named {}", atom(&self.names, n)),
        };
        format!(
            "{} {name} with root field {}",
            op.kind,
            atom(&self.fields, op.field)
        )
    }
}
