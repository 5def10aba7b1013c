//! One GraphQL document: parse, select the operation, collect its root
//! fields.
//!
//! Parsing uses `apollo-parser` with a recursion limit and a token limit, so
//! a hostile document (deep nesting, a flood of tokens) stops early with an
//! error instead of exhausting the stack or the time budget. The root-field
//! walk keeps its own stack on the heap and expands each fragment once, so
//! it is linear in the document.

use std::collections::{BTreeSet, HashMap};

use apollo_parser::Parser;
use apollo_parser::cst::{self, CstChildren};

use super::lexer::Unsure;
use super::reader;
use super::{GraphqlError, OperationType, RECURSION_LIMIT, Selected, TOKEN_LIMIT};

/// Parses `document` and selects the operation a server runs for
/// `operation_name` (already `None` when empty).
///
/// The purpose-built reader answers first; it answers only where it reads
/// exactly as apollo-parser does and the analysis succeeds, so every
/// refusal, message and position below stays apollo-parser's.
pub(super) fn analyze(
    document: &str,
    operation_name: Option<&str>,
) -> Result<Selected, GraphqlError> {
    match reader::read(document, operation_name) {
        Ok(selected) => Ok(selected),
        Err(Unsure) => analyze_with_apollo(document, operation_name),
    }
}

/// [`analyze`] through apollo-parser's syntax tree alone.
pub(super) fn analyze_with_apollo(
    document: &str,
    operation_name: Option<&str>,
) -> Result<Selected, GraphqlError> {
    let tree = Parser::new(document)
        .recursion_limit(RECURSION_LIMIT)
        .token_limit(TOKEN_LIMIT)
        .parse();
    if let Some(error) = tree.errors().next() {
        let (line, column) = line_column(document, error.index());
        return Err(GraphqlError::MalformedDocument {
            message: error.message().to_owned(),
            line,
            column,
        });
    }
    let mut operations: Vec<(Option<String>, cst::OperationDefinition)> = Vec::new();
    let mut fragments: HashMap<String, cst::FragmentDefinition> = HashMap::new();
    for definition in tree.document().definitions() {
        match definition {
            cst::Definition::OperationDefinition(op) => {
                operations.push((op.name().as_ref().and_then(name_text), op));
            }
            cst::Definition::FragmentDefinition(fragment) => {
                let name = fragment
                    .fragment_name()
                    .and_then(|f| f.name())
                    .as_ref()
                    .and_then(name_text)
                    .unwrap_or_default();
                if fragments.contains_key(&name) {
                    return Err(GraphqlError::DuplicateFragment { name });
                }
                fragments.insert(name, fragment);
            }
            // A server validating the document refuses it; one that does
            // not ignores the definition. Either way, refusing is safe.
            _ => return Err(GraphqlError::NotExecutable),
        }
    }
    let (kind, name, selection_set) = select(operations, operation_name)?;
    let root_fields = root_fields(selection_set, &fragments)?;
    Ok(Selected {
        kind,
        name,
        root_fields,
    })
}

fn name_text(name: &cst::Name) -> Option<String> {
    name.ident_token().map(|t| t.text().to_owned())
}

/// The GraphQL spec's GetOperation, with every case where servers differ
/// refused: two operations of one name (graphql-js runs the last, others
/// the first) and an anonymous operation beside others (the spec's "lone
/// anonymous operation" rule, which not every server checks before
/// running).
fn select(
    operations: Vec<(Option<String>, cst::OperationDefinition)>,
    operation_name: Option<&str>,
) -> Result<(OperationType, Option<String>, cst::SelectionSet), GraphqlError> {
    if operations.len() > 1 {
        let mut names = BTreeSet::new();
        for (name, _) in &operations {
            let Some(name) = name else {
                return Err(GraphqlError::AnonymousNotAlone);
            };
            if !names.insert(name.as_str()) {
                return Err(GraphqlError::DuplicateOperationName { name: name.clone() });
            }
        }
    }
    let count = operations.len();
    let (name, op) = match operation_name {
        Some(wanted) => operations
            .into_iter()
            .find(|(name, _)| name.as_deref() == Some(wanted))
            .ok_or_else(|| GraphqlError::UnknownOperationName {
                name: wanted.to_owned(),
            })?,
        None => {
            let mut operations = operations.into_iter();
            match (operations.next(), operations.next()) {
                (Some(only), None) => only,
                (None, _) => return Err(GraphqlError::NoOperation),
                (Some(_), Some(_)) => return Err(GraphqlError::AmbiguousOperation { count }),
            }
        }
    };
    let kind = match op.operation_type() {
        None => OperationType::Query,
        Some(t) if t.mutation_token().is_some() => OperationType::Mutation,
        Some(t) if t.subscription_token().is_some() => OperationType::Subscription,
        Some(_) => OperationType::Query,
    };
    // An operation without a selection set does not parse.
    let selection_set = op.selection_set().ok_or(GraphqlError::NoOperation)?;
    Ok((kind, name, selection_set))
}

/// A selection set being walked, and the fragment whose body it is.
struct Frame {
    selections: CstChildren<cst::Selection>,
    fragment: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Visit {
    /// On the current spread path: reaching it again is a cycle.
    Open,
    /// Expanded already; its fields are collected.
    Done,
}

/// The root fields a server executes for `set`: fields at the top, and the
/// fields at the top of every inline fragment and spread fragment there,
/// whatever their type condition (a mutation field in `... on Query` still
/// counts: a server without validation would run it). Field names, not
/// aliases: `viewer: deleteRepo` runs `deleteRepo`.
///
/// Depth-first with the path on an explicit stack, so a fragment spread on
/// its own path is a cycle, a fragment spread twice elsewhere is expanded
/// once, and no document can recurse the native stack.
fn root_fields(
    set: cst::SelectionSet,
    fragments: &HashMap<String, cst::FragmentDefinition>,
) -> Result<Vec<String>, GraphqlError> {
    let mut fields = BTreeSet::new();
    let mut visits: HashMap<String, Visit> = HashMap::new();
    let mut stack = vec![Frame {
        selections: set.selections(),
        fragment: None,
    }];
    while let Some(frame) = stack.last_mut() {
        let Some(selection) = frame.selections.next() else {
            if let Some(done) = stack.pop().and_then(|f| f.fragment) {
                visits.insert(done, Visit::Done);
            }
            continue;
        };
        match selection {
            cst::Selection::Field(field) => {
                if let Some(name) = field.name().as_ref().and_then(name_text) {
                    fields.insert(name);
                }
            }
            cst::Selection::InlineFragment(inline) => {
                if let Some(set) = inline.selection_set() {
                    stack.push(Frame {
                        selections: set.selections(),
                        fragment: None,
                    });
                }
            }
            cst::Selection::FragmentSpread(spread) => {
                let name = spread
                    .fragment_name()
                    .and_then(|f| f.name())
                    .as_ref()
                    .and_then(name_text)
                    .unwrap_or_default();
                match visits.get(&name) {
                    Some(Visit::Done) => {}
                    Some(Visit::Open) => return Err(GraphqlError::FragmentCycle { name }),
                    None => {
                        let set = fragments
                            .get(&name)
                            .and_then(cst::FragmentDefinition::selection_set)
                            .ok_or_else(|| GraphqlError::UnknownFragment { name: name.clone() })?;
                        visits.insert(name.clone(), Visit::Open);
                        stack.push(Frame {
                            selections: set.selections(),
                            fragment: Some(name),
                        });
                    }
                }
            }
        }
    }
    Ok(fields.into_iter().collect())
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = text.get(..end).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before.get(line_start..).unwrap_or("").chars().count() + 1;
    (line, column)
}
