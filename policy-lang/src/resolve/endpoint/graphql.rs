//! `allow|deny graphql TYPES... [name GLOB] [field GLOB...]` rules and
//! `persisted ID TYPE [name NAME] [field NAME...]` registry entries of
//! GraphQL endpoints, with the checks OpenShell makes on them (and a few
//! it does not, where a rule would otherwise silently mean less than it
//! says).

use crate::ast::RuleAction;
use crate::diag::{Diagnostic, codes};
use crate::ir::GraphqlRule;
use crate::source::{Node, SourceFile, Span};
use policy_bundle::matcher::{GraphqlNameGlob, OperationType, OperationTypeSet};
use policy_bundle::{GraphqlRule as Matcher, PersistedQuery};

use super::super::{Resolver, origin, pattern_diag};

/// The GraphQL rules and registry of one endpoint.
#[derive(Default)]
pub(super) struct GraphqlRules {
    pub(super) allow: Vec<GraphqlRule>,
    pub(super) deny: Vec<GraphqlRule>,
    pub(super) persisted: Vec<PersistedQuery>,
    /// Where each registry id was written, for duplicates.
    ids: Vec<(String, Span)>,
    /// A rule was refused; "no allow rule" would only repeat that error.
    pub(super) refused: bool,
}

impl GraphqlRules {
    /// An access preset: `read-only` is `query`, `read-write` `query
    /// mutation`, `full` every type, as OpenShell expands them.
    pub(super) fn preset(
        &mut self,
        types: OperationTypeSet,
        file: &SourceFile,
        span: Span,
        rule_name: &str,
    ) {
        self.allow.push(GraphqlRule {
            rule: Matcher {
                types,
                name: None,
                fields: None,
            },
            origin: origin(file, span, rule_name),
        });
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call per rule form; a struct would only restate the parameters"
    )]
    pub(super) fn rule(
        &mut self,
        r: &mut Resolver,
        file: &SourceFile,
        span: Span,
        rule_name: &str,
        action: RuleAction,
        types: &[Node<String>],
        name: Option<&Node<String>>,
        fields: &[Node<String>],
    ) {
        let types = operation_types(r, file, types);
        let name = name.map(|n| name_glob(r, file, n));
        let fields: Option<Vec<Option<GraphqlNameGlob>>> =
            (!fields.is_empty()).then(|| fields.iter().map(|f| name_glob(r, file, f)).collect());
        let (Some(types), Some(name), Some(fields)) = (
            types,
            name.map_or(Some(None), |n| n.map(Some)),
            fields.map_or(Some(None), |fs| {
                fs.into_iter().collect::<Option<Vec<_>>>().map(Some)
            }),
        ) else {
            self.refused = true;
            return;
        };
        let rule = GraphqlRule {
            rule: Matcher {
                types,
                name,
                fields,
            },
            origin: origin(file, span, rule_name),
        };
        match action {
            RuleAction::Allow => self.allow.push(rule),
            RuleAction::Deny => self.deny.push(rule),
        }
    }

    /// A registry entry. Its name and fields are what the stored document
    /// holds, so they are GraphQL names, never patterns: a `*` there would
    /// be matched as a literal character by OpenShell's glob.
    pub(super) fn persisted(
        &mut self,
        r: &mut Resolver,
        file: &SourceFile,
        id: &Node<String>,
        kind: &Node<String>,
        name: Option<&Node<String>>,
        fields: &[Node<String>],
    ) {
        let mut ok = true;
        if id.node.is_empty() {
            ok = false;
            r.diags.push(
                Diagnostic::new(codes::E0313, file, id.span, "a persisted-query id cannot be empty")
                    .label("empty")
                    .help("write the `sha256Hash` the client sends, or the saved-query id (`id`, `documentId`, `queryId`)"),
            );
        }
        if let Some((_, first)) = self.ids.iter().find(|(i, _)| *i == id.node) {
            ok = false;
            r.diags.push(
                Diagnostic::new(
                    codes::E0506,
                    file,
                    id.span,
                    format!("persisted query `{}` is registered twice", id.node),
                )
                .label("registered again")
                .secondary(*first, "first registered here")
                .help("a hash or id runs one stored document; keep one `persisted` line for it"),
            );
        }
        let kind = match OperationType::parse(&kind.node) {
            Ok(k) => Some(k),
            Err(e) => {
                let help = if kind.node == "*" {
                    "a registered query runs one operation: write `query`, `mutation` or `subscription`"
                        .to_string()
                } else {
                    e.help.clone()
                };
                r.diags.push(
                    Diagnostic::new(codes::E0312, file, kind.span, e.message)
                        .label("not one operation type")
                        .help(help),
                );
                None
            }
        };
        let mut exact = |n: &Node<String>| -> Option<String> {
            let glob = name_glob(r, file, n)?;
            match glob.exact() {
                Some(e) => Some(e.to_string()),
                None => {
                    r.diags.push(
                        Diagnostic::new(
                            codes::E0313,
                            file,
                            n.span,
                            format!("`{}` is a pattern; a registered query holds names", n.node),
                        )
                        .label("not a GraphQL name")
                        .help("write the operation name and root fields the stored document holds, without wildcards"),
                    );
                    None
                }
            }
        };
        let name = name.map(&mut exact);
        let field_names: Vec<Option<String>> = fields.iter().map(&mut exact).collect();
        let (Some(kind), true) = (kind, ok) else {
            self.refused = true;
            return;
        };
        let Some(name) = name.map_or(Some(None), |n| n.map(Some)) else {
            self.refused = true;
            return;
        };
        let Some(field_names) = field_names.into_iter().collect::<Option<Vec<_>>>() else {
            self.refused = true;
            return;
        };
        self.ids.push((id.node.clone(), id.span));
        let mut field_names = field_names;
        field_names.sort();
        field_names.dedup();
        self.persisted.push(PersistedQuery {
            id: id.node.clone(),
            kind,
            name,
            fields: (!field_names.is_empty()).then_some(field_names),
        });
    }

    /// What OpenShell checks across an endpoint's rules: a GraphQL endpoint
    /// needs an access preset or an allow rule.
    pub(super) fn check(&self, r: &mut Resolver, file: &SourceFile, endpoint: Span) {
        if self.allow.is_empty() && !self.refused {
            r.diags.push(
                Diagnostic::new(
                    codes::E0503,
                    file,
                    endpoint,
                    "this `graphql` endpoint has no access preset and no `allow graphql` rule",
                )
                .label("allows no operation")
                .help("add an access preset (`read-only` is queries, `read-write` queries and mutations, `full` every operation) or `allow graphql TYPES...` lines in a block"),
            );
        }
    }
}

fn operation_types(
    r: &mut Resolver,
    file: &SourceFile,
    types: &[Node<String>],
) -> Option<OperationTypeSet> {
    let mut set = Vec::new();
    let mut star = None;
    let mut ok = true;
    for t in types {
        if t.node == "*" {
            star = Some(t.span);
            continue;
        }
        match OperationType::parse(&t.node) {
            Ok(k) => set.push(k),
            Err(e) => {
                ok = false;
                r.diags.push(
                    Diagnostic::new(codes::E0312, file, t.span, e.message)
                        .label("not an operation type")
                        .help(e.help),
                );
            }
        }
    }
    if let Some(s) = star.filter(|_| types.len() > 1) {
        r.diags.push(
            Diagnostic::new(
                codes::E0312,
                file,
                s,
                "`*` mixed with other operation types",
            )
            .label("already every type")
            .help("`*` covers `query`, `mutation` and `subscription`; write `*` alone"),
        );
        return None;
    }
    if !ok {
        return None;
    }
    Some(match star {
        Some(_) => OperationTypeSet::all(),
        None => OperationTypeSet::of(set),
    })
}

fn name_glob(r: &mut Resolver, file: &SourceFile, n: &Node<String>) -> Option<GraphqlNameGlob> {
    match GraphqlNameGlob::parse(&n.node) {
        Ok(g) => Some(g),
        Err(e) => {
            r.diags.push(pattern_diag(codes::E0313, file, n.span, &e));
            None
        }
    }
}
