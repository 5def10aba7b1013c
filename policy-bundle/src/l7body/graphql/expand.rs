//! What the reader does once the document is read: select the operation
//! and expand fragments at its root, as `document::select` and
//! `document::root_fields` do on apollo-parser's tree, every refusal there
//! being [`Unsure`] here.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use super::OperationType;
use super::lexer::Unsure;

/// What a root-level selection set contributes: fields by name (not alias)
/// and fragment spreads. Inline fragments are flattened in place, which
/// visits spreads in the order of apollo-parser's walk.
#[derive(Debug, Clone, Copy)]
pub(super) enum Item<'a> {
    Field(&'a str),
    Spread(&'a str),
}

pub(super) struct Operation<'a> {
    pub(super) kind: OperationType,
    pub(super) name: Option<&'a str>,
    pub(super) items: Range<usize>,
}

pub(super) struct Fragment<'a> {
    pub(super) name: &'a str,
    pub(super) items: Range<usize>,
}

/// The operation a server runs, where `document::select` would find one;
/// every refusal there is [`Unsure`] here.
pub(super) fn select<'a>(
    operations: Vec<Operation<'a>>,
    operation_name: Option<&str>,
) -> Result<Operation<'a>, Unsure> {
    if operations.len() > 1 {
        let mut names = BTreeSet::new();
        for operation in &operations {
            if !names.insert(operation.name.ok_or(Unsure)?) {
                return Err(Unsure);
            }
        }
    }
    match operation_name {
        Some(wanted) => operations
            .into_iter()
            .find(|op| op.name == Some(wanted))
            .ok_or(Unsure),
        None if operations.len() == 1 => operations.into_iter().next().ok_or(Unsure),
        None => Err(Unsure),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Visit {
    New,
    Open,
    Done,
}

/// The walk of `document::root_fields` over the kept items: depth first
/// with the spread path on an explicit stack, each fragment expanded once,
/// an undefined fragment, a duplicate definition or a cycle [`Unsure`].
pub(super) fn root_fields(
    items: &[Item<'_>],
    root: Range<usize>,
    fragments: &[Fragment<'_>],
) -> Result<Vec<String>, Unsure> {
    let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(fragments.len());
    for (index, fragment) in fragments.iter().enumerate() {
        match by_name.entry(fragment.name) {
            Entry::Occupied(_) => return Err(Unsure),
            Entry::Vacant(slot) => {
                slot.insert(index);
            }
        }
    }
    let mut visits = vec![Visit::New; fragments.len()];
    let mut fields = BTreeSet::new();
    let mut stack: Vec<(Range<usize>, Option<usize>)> = vec![(root, None)];
    while let Some((range, _)) = stack.last_mut() {
        let Some(index) = range.next() else {
            if let Some((_, Some(done))) = stack.pop() {
                *visits.get_mut(done).ok_or(Unsure)? = Visit::Done;
            }
            continue;
        };
        match items.get(index).ok_or(Unsure)? {
            Item::Field(name) => {
                fields.insert(*name);
            }
            Item::Spread(name) => {
                let fragment = *by_name.get(name).ok_or(Unsure)?;
                let visit = visits.get_mut(fragment).ok_or(Unsure)?;
                match *visit {
                    Visit::Done => {}
                    Visit::Open => return Err(Unsure),
                    Visit::New => {
                        *visit = Visit::Open;
                        let body = fragments.get(fragment).ok_or(Unsure)?.items.clone();
                        stack.push((body, Some(fragment)));
                    }
                }
            }
        }
    }
    Ok(fields.into_iter().map(str::to_owned).collect())
}
