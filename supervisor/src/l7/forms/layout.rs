//! The separators a hex or base64 form of the secret may be broken by.
//!
//! Tools lay these encodings out for people: base64 is wrapped at 64
//! (PEM) or 76 (MIME) columns, hex is grouped (`de:ad:be:ef`,
//! `de ad be ef`, `0xde, 0xad`) and dumped a line at a time with an
//! offset and an ASCII column (`xxd`, `hexdump -C`, `xxd -p`). Rather than
//! enumerate each layout, the matcher skips a separator wherever one may
//! stand: between any two base64 characters, and between two hex-encoded
//! bytes (never inside one). The characters of the form must still all be
//! there in order, so the skipping adds no way for ordinary text to match.
//!
//! Separators are short and bounded, so the stream scanner never holds
//! more than a line of a dump while it waits for the rest.

/// How a literal form may be broken up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// Between hex-encoded bytes.
    Hex,
    /// At line ends, between any two characters.
    Base64,
}

/// One reading of what stands before the next character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skip {
    /// A separator of this many bytes.
    Len(usize),
    /// A dump's line end, of this many bytes: the line's ASCII column,
    /// passed over, showed the secret's bytes as themselves.
    Line(usize),
    /// The text ends inside what could be a separator.
    Partial,
    No,
}

/// The most bytes between a dump line's last hex digit and its line end:
/// two spaces and a 32-byte ASCII column in `|…|` (`xxd -c 32`,
/// `hexdump -C`), and a `\r`.
const LINE_TAIL: usize = 40;
/// The most hex digits in a dump's offset column.
const OFFSET_DIGITS: usize = 16;
/// The most blanks after an offset, or after a folded line's break.
const INDENT: usize = 4;
/// The most characters of a hex group separator (`, `, ` : `).
const PUNCT: usize = 3;

/// The separators that may stand before character `i` of a form laid out
/// as `layout`, at the start of `text`, in the order to try them.
pub(super) fn separators(layout: Layout, i: usize, text: &[u8]) -> [Skip; 4] {
    match layout {
        Layout::Hex if i > 0 && i.is_multiple_of(2) => {
            let (plain, prefixed) = grouped(text);
            [
                plain,
                prefixed,
                dump_break(text, false),
                dump_break(text, true),
            ]
        }
        Layout::Base64 if i > 0 => [line_break(text), Skip::No, Skip::No, Skip::No],
        _ => [Skip::No; 4],
    }
}

/// `:`, ` `, `-`, `,` or `.` (a few of them), then `0x` or not: the
/// separators of grouped hex and of a C array.
fn grouped(text: &[u8]) -> (Skip, Skip) {
    let n = text
        .iter()
        .take(PUNCT)
        .take_while(|c| matches!(c, b' ' | b'\t' | b':' | b',' | b'.' | b'-'))
        .count();
    if n == 0 {
        return (Skip::No, Skip::No);
    }
    let rest = text.get(n..).unwrap_or_default();
    let prefixed = match rest {
        [b'0', b'x' | b'X', ..] => Skip::Len(n + 2),
        [b'0'] => Skip::Partial,
        _ => Skip::No,
    };
    (Skip::Len(n), prefixed)
}

/// A dump's line end: blanks and the ASCII column, the newline, then (if
/// `offset`) the next line's offset and the blanks after it.
fn dump_break(text: &[u8], offset: bool) -> Skip {
    // What follows a line's hex digits starts with a blank or ends it.
    match text.first() {
        None => return Skip::Partial,
        Some(b' ' | b'\t' | b'\r' | b'\n') => {}
        Some(_) => return Skip::No,
    }
    let window = text.get(..text.len().min(LINE_TAIL + 1)).unwrap_or(text);
    let Some(nl) = window.iter().position(|&c| c == b'\n') else {
        return if text.len() <= LINE_TAIL && line_tail(text) {
            Skip::Partial
        } else {
            Skip::No
        };
    };
    if !line_tail(text.get(..nl).unwrap_or_default()) {
        return Skip::No;
    }
    let next = text.get(nl + 1..).unwrap_or_default();
    if !offset {
        return match blanks(next) {
            (n, true) => Skip::Line(nl + 1 + n),
            (_, false) => Skip::Partial,
        };
    }
    let digits = next
        .iter()
        .take(OFFSET_DIGITS + 1)
        .take_while(|c| c.is_ascii_hexdigit())
        .count();
    if digits > OFFSET_DIGITS {
        return Skip::No;
    }
    let colon = usize::from(next.get(digits) == Some(&b':'));
    let after = next.get(digits + colon..).unwrap_or_default();
    match (digits, blanks(after)) {
        _ if digits == next.len() || digits + colon == next.len() => Skip::Partial,
        (0, _) | (_, (0, true)) => Skip::No,
        (_, (n, true)) => Skip::Line(nl + 1 + digits + colon + n),
        (_, (_, false)) => Skip::Partial,
    }
}

/// Whether bytes can be what follows a dump line's hex digits: nothing,
/// or a blank then printable characters, and a `\r` at the end.
fn line_tail(tail: &[u8]) -> bool {
    let tail = tail.strip_suffix(b"\r").unwrap_or(tail);
    match tail.first() {
        None => true,
        Some(b' ' | b'\t') => tail.iter().all(|&c| c == b' ' || c.is_ascii_graphic()),
        Some(_) => false,
    }
}

/// How many blanks (up to [`INDENT`]) `text` starts with, and whether
/// that is decided (`false`: the text ended among them).
fn blanks(text: &[u8]) -> (usize, bool) {
    let n = text
        .iter()
        .take(INDENT)
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    (n, n == INDENT || n < text.len())
}

/// A line break in wrapped base64: `\r\n` or `\n`, as such or as the JSON
/// escapes a PEM file quoted in JSON has, then the blanks of a folded
/// header line.
fn line_break(text: &[u8]) -> Skip {
    const BREAKS: [&[u8]; 4] = [b"\r\n", b"\n", b"\\r\\n", b"\\n"];
    for brk in BREAKS {
        if let Some(rest) = text.strip_prefix(brk) {
            return match blanks(rest) {
                (n, true) => Skip::Len(brk.len() + n),
                (_, false) => Skip::Partial,
            };
        }
    }
    if BREAKS.iter().any(|brk| brk.starts_with(text)) && !text.is_empty() {
        Skip::Partial
    } else {
        Skip::No
    }
}

/// The most bytes from a dump line's last matched hex digit to the end of
/// its ASCII column (`xxd -c 32`: 80 of hex and blanks, 2, 32).
const LINE_REST: usize = 160;

/// After the last hex digit of a secret dumped across lines, how far the
/// occurrence extends: to the end of `tail` (the secret's bytes on that
/// line) in the line's ASCII column, which shows them as themselves.
/// `None` when the text ends before that is decided.
pub(super) fn column_tail(text: &[u8], tail: &[u8], end: bool) -> Option<usize> {
    let window = text.get(..text.len().min(LINE_REST)).unwrap_or(text);
    let line_end = window.iter().position(|&c| c == b'\n');
    let line = window
        .get(..line_end.unwrap_or(window.len()))
        .unwrap_or(window);
    let found = (0..line.len())
        .rev()
        .find(|&p| line.get(p..).is_some_and(|r| r.starts_with(tail)))
        .map(|p| p + tail.len());
    match found {
        Some(n) => Some(n),
        None if line_end.is_none() && text.len() < LINE_REST && !end => None,
        None => Some(0),
    }
}
