//! A located YAML reader: the YAML text becomes a small tree of scalars,
//! sequences and mappings, each carrying the byte span it came from, so the
//! importer can put every node it creates on the YAML line it came from.
//!
//! `serde_yaml` gives no positions, so the tree is built from the event
//! stream of `saphyr-parser`, whose events carry start and end markers.
//! Those markers count characters; they are turned into byte offsets here.
//! Anchors and aliases are resolved (an alias is a copy of the anchored node,
//! spans included); a document that expands beyond [`MAX_NODES`] nodes is
//! refused rather than exhausting memory.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::source::Span;

/// Upper bound on nodes after alias expansion ("billion laughs" guard).
pub(crate) const MAX_NODES: usize = 200_000;

/// A YAML value, anchors and aliases resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A scalar as written (after unquoting and escapes) and whether it was
    /// plain (unquoted, not a block scalar): only plain scalars can be
    /// numbers, booleans or null.
    Scalar {
        /// The text after unquoting and escapes.
        text: String,
        /// Unquoted and not a block scalar.
        plain: bool,
    },
    /// A sequence, in document order.
    Seq(Vec<YNode>),
    /// Keys are scalars, in document order.
    Map(Vec<(YNode, YNode)>),
}

/// A YAML value with the span of its text, so import errors point at
/// the YAML that caused them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YNode {
    /// The value; aliases are expanded.
    pub value: Value,
    /// The text it came from, quotes included; a collection's runs to its
    /// last item.
    pub span: Span,
}

/// Why the text is not a YAML document the importer can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// What the YAML reader refused.
    pub message: String,
    /// Where.
    pub span: Span,
}

impl YNode {
    /// The scalar text, if this is a scalar.
    pub fn scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// A plain `~`, `null` or empty scalar.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true }
            if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// A plain `true`/`false` (YAML 1.2 core schema spellings).
    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Scalar { text, plain: true } => match text.as_str() {
                "true" | "True" | "TRUE" => Some(true),
                "false" | "False" | "FALSE" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A plain non-negative decimal (or `0x`/`0o`) integer.
    pub fn as_u64(&self) -> Option<u64> {
        let Value::Scalar { text, plain: true } = &self.value else {
            return None;
        };
        let t = text.strip_prefix('+').unwrap_or(text);
        if let Some(hex) = t.strip_prefix("0x") {
            return u64::from_str_radix(hex, 16).ok();
        }
        if let Some(oct) = t.strip_prefix("0o") {
            return u64::from_str_radix(oct, 8).ok();
        }
        if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }

    /// A short description of the node's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            _ if self.is_null() => "nothing",
            Value::Scalar { .. } => "a value",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    /// The entries of a mapping.
    pub fn entries(&self) -> Option<&[(YNode, YNode)]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The items of a sequence.
    pub fn items(&self) -> Option<&[YNode]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }
}

/// Parse the first YAML document of `text`. `Ok(None)` for a text with no
/// document at all (empty or only comments).
pub fn parse(text: &str) -> Result<Option<YNode>, YamlError> {
    let offsets = CharOffsets::new(text);
    let mut builder = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        nodes: 0,
        documents: 0,
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let at = offsets.byte(e.marker().index());
            YamlError {
                message: e.info().to_string(),
                span: Span::new(at, at),
            }
        })?;
        let span = Span::new(
            offsets.byte(span.start.index()),
            offsets.byte(span.end.index()),
        );
        builder.event(event, span)?;
    }
    Ok(builder.root)
}

/// Converts the parser's character indices to byte offsets.
struct CharOffsets {
    bytes: Vec<usize>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        Self {
            bytes: text.char_indices().map(|(b, _)| b).collect(),
            len: text.len(),
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        self.bytes.get(char_index).copied().unwrap_or(self.len)
    }
}

enum Frame {
    Seq {
        items: Vec<YNode>,
        start: usize,
        anchor: usize,
    },
    Map {
        entries: Vec<(YNode, YNode)>,
        key: Option<YNode>,
        start: usize,
        anchor: usize,
    },
}

struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, YNode>,
    root: Option<YNode>,
    nodes: usize,
    documents: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), YamlError> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(YamlError {
                        message: "the file holds more than one YAML document".to_string(),
                        span,
                    });
                }
            }
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = matches!(style, ScalarStyle::Plain);
                let node = YNode {
                    value: Value::Scalar {
                        text: text.into_owned(),
                        plain,
                    },
                    span,
                };
                self.finish(node, anchor)?;
            }
            Event::Alias(id) => {
                let Some(anchored) = self.anchors.get(&id) else {
                    return Err(YamlError {
                        message: "alias to an unknown anchor".to_string(),
                        span,
                    });
                };
                // Count before copying, so a bomb is refused before it grows.
                self.nodes = self.nodes.saturating_add(count(anchored));
                if self.nodes > MAX_NODES {
                    return Err(YamlError {
                        message: format!("the document expands to more than {MAX_NODES} nodes"),
                        span,
                    });
                }
                let node = anchored.clone();
                self.finish(node, 0)?;
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq {
                items: Vec::new(),
                start: span.start,
                anchor,
            }),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map {
                entries: Vec::new(),
                key: None,
                start: span.start,
                anchor,
            }),
            Event::SequenceEnd => {
                if let Some(Frame::Seq {
                    items,
                    start,
                    anchor,
                }) = self.stack.pop()
                {
                    let node = YNode {
                        value: Value::Seq(items),
                        span: Span::new(start, span.end.max(start)),
                    };
                    self.finish(node, anchor)?;
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map {
                    entries,
                    start,
                    anchor,
                    ..
                }) = self.stack.pop()
                {
                    let end = entries
                        .last()
                        .map_or(span.end, |(_, v)| v.span.end.max(span.end));
                    let node = YNode {
                        value: Value::Map(entries),
                        span: Span::new(start, end.max(start)),
                    };
                    self.finish(node, anchor)?;
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// A complete node: remember its anchor and attach it to its parent.
    fn finish(&mut self, node: YNode, anchor: usize) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(1);
        if self.nodes > MAX_NODES {
            return Err(YamlError {
                message: format!("the document expands to more than {MAX_NODES} nodes"),
                span: node.span,
            });
        }
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => {
                    let Some(name) = node.scalar() else {
                        return Err(YamlError {
                            message: "a mapping key must be a plain value, not a list or mapping"
                                .to_string(),
                            span: node.span,
                        });
                    };
                    if entries.iter().any(|(k, _)| k.scalar() == Some(name)) {
                        return Err(YamlError {
                            message: format!("duplicate key `{name}`"),
                            span: node.span,
                        });
                    }
                    *key = Some(node);
                }
                Some(k) => entries.push((k, node)),
            },
        }
        Ok(())
    }
}

fn count(node: &YNode) -> usize {
    match &node.value {
        Value::Scalar { .. } => 1,
        Value::Seq(items) => 1 + items.iter().map(count).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| count(k) + count(v))
                .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(node: &'a YNode, key: &str) -> &'a YNode {
        &node
            .entries()
            .unwrap()
            .iter()
            .find(|(k, _)| k.scalar() == Some(key))
            .unwrap()
            .1
    }

    fn slice(text: &str, span: Span) -> &str {
        &text[span.start..span.end]
    }

    #[test]
    fn spans_are_byte_offsets_even_after_multibyte_text() {
        let text = "# é comment\nné: \"héllo\"\nk: [/usr, 'x y']\nm: { host: a.com, port: 443 }\n";
        let root = parse(text).unwrap().unwrap();
        assert_eq!(slice(text, at(&root, "né").span), "\"héllo\"");
        let k = at(&root, "k").items().unwrap();
        assert_eq!(slice(text, k[0].span), "/usr");
        assert_eq!(slice(text, k[1].span), "'x y'");
        assert_eq!(k[1].scalar(), Some("x y"));
        let m = at(&root, "m");
        assert_eq!(slice(text, at(m, "host").span), "a.com");
        assert_eq!(at(m, "port").as_u64(), Some(443));
        let key = &root.entries().unwrap()[0].0;
        assert_eq!(slice(text, key.span), "né");
    }

    #[test]
    fn anchors_and_aliases_copy_the_node() {
        let text = "a: &x [/usr, /lib]\nb: *x\n";
        let root = parse(text).unwrap().unwrap();
        assert_eq!(at(&root, "a").value, at(&root, "b").value);
        assert_eq!(slice(text, at(&root, "b").items().unwrap()[1].span), "/lib");
    }

    #[test]
    fn typed_scalars_need_plain_style() {
        let root = parse("a: true\nb: 'true'\nc: 0x1F\nd: \"12\"\ne:\nf: ~\n")
            .unwrap()
            .unwrap();
        assert_eq!(at(&root, "a").as_bool(), Some(true));
        assert_eq!(at(&root, "b").as_bool(), None);
        assert_eq!(at(&root, "c").as_u64(), Some(31));
        assert_eq!(at(&root, "d").as_u64(), None);
        assert!(at(&root, "e").is_null());
        assert!(at(&root, "f").is_null());
    }

    #[test]
    fn errors_are_located() {
        let text = "version: 1\nnetwork_policies: [oops\n";
        let err = parse(text).unwrap_err();
        assert!(err.span.start >= text.find("[oops").unwrap(), "{err:?}");
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.message, "duplicate key `a`");
        assert_eq!(err.span.start, 5);
        assert!(parse("a: *nope\n").is_err());
        assert_eq!(parse("# only a comment\n").unwrap(), None);
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("more than"), "{err:?}");
    }
}
