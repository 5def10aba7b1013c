//! Source files and byte spans.
//!
//! Every AST node carries a [`Span`] into the text of the file it came from,
//! so diagnostics and bundle provenance can point at `file:line:column`
//! without re-reading anything.

use std::sync::Arc;

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

impl Span {
    /// `start..end`, in bytes.
    pub fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// A sub-span at `offset..offset+len` relative to this span's start,
    /// clamped to this span, used to point inside a token (a pattern error
    /// at byte 7 of a host, say).
    pub fn sub(self, offset: usize, len: usize) -> Span {
        let start = self.start.saturating_add(offset).min(self.end);
        let end = start
            .saturating_add(len.max(1))
            .min(self.end.max(start + 1));
        Span { start, end }
    }

    /// In bytes.
    pub fn len(self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// A point rather than a range.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// A node with its location. Equality ignores the location so two policies
/// that differ only in layout compare equal.
#[derive(Debug, Clone)]
pub struct Node<T> {
    /// The value.
    pub node: T,
    /// Where it was written; ignored by equality.
    pub span: Span,
}

impl<T> Node<T> {
    /// Attaches a span.
    pub fn new(node: T, span: Span) -> Self {
        Self { node, span }
    }
}

impl<T: PartialEq> PartialEq for Node<T> {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node
    }
}

impl<T: Eq> Eq for Node<T> {}

impl<T> std::ops::Deref for Node<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.node
    }
}

/// One loaded file: its display path and text, shared cheaply between the
/// AST, diagnostics and the miette renderer.
#[derive(Debug, Clone)]
pub struct SourceFile {
    inner: Arc<SourceInner>,
}

#[derive(Debug)]
struct SourceInner {
    path: String,
    text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// Indexes the line starts once, so positions are cheap to compute.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Self {
            inner: Arc::new(SourceInner {
                path: path.into(),
                text,
                line_starts,
            }),
        }
    }

    /// As shown in diagnostics (may be `<stdin>` or a display name).
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.inner.text
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.inner.text.len());
        let line_idx = match self.inner.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let line_start = self.inner.line_starts.get(line_idx).copied().unwrap_or(0);
        let column = self
            .inner
            .text
            .get(line_start..offset)
            .map_or(offset - line_start, |s| s.chars().count());
        (
            u32::try_from(line_idx + 1).unwrap_or(u32::MAX),
            u32::try_from(column + 1).unwrap_or(u32::MAX),
        )
    }

    /// The text of a span; empty when it is out of range.
    pub fn slice(&self, span: Span) -> &str {
        self.inner.text.get(span.start..span.end).unwrap_or("")
    }

    pub(crate) fn same_file(&self, other: &SourceFile) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// True for files this tool reads as OpenShell YAML.
pub fn is_yaml(path: &std::path::Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let f = SourceFile::new("a", "ab\ncdé\nx");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        assert_eq!(f.line_col(7), (2, 4));
        assert_eq!(f.line_col(8), (3, 1));
        assert_eq!(f.line_col(100), (3, 2));
    }
}
