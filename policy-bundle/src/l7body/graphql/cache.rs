//! Analyses of documents seen before.
//!
//! Reading the document is most of the cost of a request: a few
//! microseconds for a 2 KiB query through the purpose-built reader, tens
//! of microseconds for the documents it leaves to `apollo-parser`, while
//! the JSON around it takes two. Agents send the same few documents again
//! and again (every `gh pr list` is the same text with other variables), so
//! the proxy keeps the answers. The key is the exact document text and
//! operation name, so a hit is the answer for the very same input.
//!
//! The map hashes with foldhash, seeded at random per process: std's
//! SipHash took 10 µs of the 26 µs a cached 32 KiB document cost, and
//! was the proxy's costliest function after AES-GCM while it judged such
//! requests. foldhash is not a keyed PRF: a client that found colliding
//! documents would slow only lookups in a cache bounded to `max_bytes`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use foldhash::quality::RandomState;

use super::GraphqlError;
use super::Selected;
use super::document;

type Answer = Result<Selected, GraphqlError>;

/// The answers for one document text, by operation name.
type ByName = Vec<(Option<Box<str>>, Answer)>;

/// Answers per document text, then per operation name (almost always one).
#[derive(Default)]
struct Entries {
    by_document: HashMap<Box<str>, ByName, RandomState>,
    bytes: usize,
}

/// A bounded, thread-safe cache of document analyses. Share one per
/// endpoint (or per proxy); the lock is held for a lookup or an insert,
/// never while parsing.
pub(crate) struct DocumentCache {
    entries: Mutex<Entries>,
    max_bytes: usize,
}

impl DocumentCache {
    /// A cache holding documents of at most `max_bytes` in total. When an
    /// insert would pass that, the cache starts over: simple, and no
    /// sequence of requests can make it grow.
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            entries: Mutex::new(Entries::default()),
            max_bytes,
        }
    }

    pub(super) fn analyze(&self, text: &str, operation_name: Option<&str>) -> Answer {
        if let Some(answer) = self.lookup(text, operation_name) {
            return answer;
        }
        let answer = document::analyze(text, operation_name);
        let size = text.len() + operation_name.map_or(0, str::len);
        if size <= self.max_bytes {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if entries.bytes + size > self.max_bytes {
                *entries = Entries::default();
            }
            let answers = entries.by_document.entry(text.into()).or_default();
            // Another thread may have analysed the same document meanwhile.
            if !answers
                .iter()
                .any(|(name, _)| name.as_deref() == operation_name)
            {
                answers.push((operation_name.map(Into::into), answer.clone()));
                entries.bytes += size;
            }
        }
        answer
    }

    pub(super) fn lookup(&self, text: &str, operation_name: Option<&str>) -> Option<Answer> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .by_document
            .get(text)?
            .iter()
            .find(|(name, _)| name.as_deref() == operation_name)
            .map(|(_, answer)| answer.clone())
    }

    /// Documents held, for tests and metrics.
    pub(crate) fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.by_document.values().map(Vec::len).sum()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for DocumentCache {
    /// Room for a few hundred typical documents.
    fn default() -> Self {
        Self::new(1 << 20)
    }
}

impl std::fmt::Debug for DocumentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentCache")
            .field("documents", &self.len())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}
