//! The forms in which a server may hand a secret back, and a matcher that
//! finds any of them in bytes that arrive a piece at a time.
//!
//! A server that echoes what it received rarely echoes it byte for byte:
//! it may change the case (a header name is lowercased), percent-encode it
//! (a URL it builds), escape it for JSON, HTML, C or JavaScript, hex- or
//! base64-encode it (a debug dump, a base64 of the whole `Authorization`
//! value), and lay that out for people (wrapped, grouped, dumped). One
//! matcher recognises the secret in each of these forms, and in any mix
//! of them within one occurrence, so `REAL%2dsecret` is found as well as
//! `real-secret`:
//!
//! - each byte of the secret, as itself (ASCII case ignored), or escaped
//!   in any spelling [`escape`] reads;
//! - the secret hex-encoded (either case), its bytes run together or
//!   separated as [`layout`] allows (groups, a dump's lines);
//! - the secret base64-encoded inside any longer text (standard and URL
//!   alphabets), wrapped at any column: for each of the three offsets the
//!   secret can start at in a 3-byte group, the run of base64 characters
//!   that depends on the secret alone. Only when that run is at least
//!   [`MIN_BASE64_CORE`] characters long, so that a short secret does not
//!   match ordinary text.
//!
//! The matcher canonicalises as it reads (skips a separator, decodes an
//! escape) instead of listing spellings, so a mix costs nothing extra and
//! an occurrence cut anywhere between two pieces is held until decided.
//!
//! A server that transforms the secret further (encrypts it, reverses it,
//! sends it a slice per response) is not an echo but an accomplice, and it
//! holds the secret anyway: that is outside what scrubbing can stop (see
//! `docs/threat-model.md`, which lists the encodings left out).

mod escape;
mod layout;

use escape::{Escape, escape_of};
use layout::{Layout, Skip, column_tail, separators};

/// The shortest base64 run worth matching: 16 characters are 96 bits of
/// the secret, which ordinary text does not contain by chance.
pub(super) const MIN_BASE64_CORE: usize = 16;

/// The outcome of matching at one position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// An occurrence of this many bytes starts here.
    At(usize),
    /// None starts here.
    No,
    /// The text ended inside what could still be an occurrence.
    NeedMore,
}

/// A literal form of the secret (hex, a base64 run).
#[derive(Debug, Clone)]
struct Literal {
    bytes: Vec<u8>,
    fold_case: bool,
    layout: Layout,
}

/// The secret in every form above.
#[derive(Debug, Clone)]
pub(super) struct SecretForms {
    secret: Vec<u8>,
    literals: Vec<Literal>,
    /// Bytes that can start an occurrence: everything else is skipped
    /// without trying a match.
    starts: [bool; 256],
}

/// Where occurrences are, and how far the text could be decided.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Occurrences, as byte ranges, in order, not overlapping.
    pub found: Vec<std::ops::Range<usize>>,
    /// Bytes before this are decided; the rest may be the start of an
    /// occurrence that the next piece completes.
    pub decided: usize,
}

impl SecretForms {
    pub(super) fn new(secret: &[u8]) -> Self {
        // The secret as itself is the escaped form with no escape in it.
        let mut literals = vec![Literal {
            bytes: hex(secret),
            fold_case: true,
            layout: Layout::Hex,
        }];
        for alphabet in [STANDARD, URL_SAFE] {
            for offset in 0..3 {
                let core = base64_core(secret, offset, alphabet);
                if core.len() >= MIN_BASE64_CORE {
                    literals.push(Literal {
                        bytes: core,
                        fold_case: false,
                        layout: Layout::Base64,
                    });
                }
            }
        }
        literals.retain(|l| !l.bytes.is_empty());
        let mut starts = [false; 256];
        for l in &literals {
            if let Some(&b) = l.bytes.first() {
                mark(&mut starts, b, l.fold_case);
            }
        }
        if let Some(&b) = secret.first() {
            mark(&mut starts, b, true);
        }
        for b in [b'%', b'\\', b'&', b'+'] {
            mark(&mut starts, b, false);
        }
        Self {
            secret: secret.to_vec(),
            literals,
            starts,
        }
    }

    /// Every occurrence in `text`. Unless `end` (no more text follows),
    /// scanning stops at the first position where an occurrence could
    /// begin but the text ends first.
    pub(super) fn scan(&self, text: &[u8], end: bool) -> Scan {
        let mut scan = Scan::default();
        let mut at = 0;
        while let Some(skip) = text
            .get(at..)
            .and_then(|rest| rest.iter().position(|&b| self.is_start(b)))
        {
            at += skip;
            let rest = text.get(at..).unwrap_or_default();
            match self.match_at(rest, end) {
                // (An empty secret matches nowhere; secrets are never empty.)
                Found::At(len) if len > 0 => {
                    scan.found.push(at..at + len);
                    at += len;
                }
                Found::NeedMore if !end => {
                    scan.decided = at;
                    return scan;
                }
                Found::At(_) | Found::No | Found::NeedMore => at += 1,
            }
        }
        scan.decided = text.len();
        scan
    }

    /// Whether `text` (complete) holds the secret in any form.
    pub(super) fn found_in(&self, text: &[u8]) -> bool {
        !self.scan(text, true).found.is_empty()
    }

    /// `text` with every occurrence replaced by `with`, or `None` when it
    /// holds none.
    pub(super) fn replaced(&self, text: &[u8], with: &[u8]) -> Option<Vec<u8>> {
        let scan = self.scan(text, true);
        if scan.found.is_empty() {
            return None;
        }
        Some(splice(text, &scan.found, with))
    }

    fn is_start(&self, b: u8) -> bool {
        self.starts.get(usize::from(b)).copied().unwrap_or(false)
    }

    fn match_at(&self, text: &[u8], end: bool) -> Found {
        let mut need_more = false;
        for l in &self.literals {
            match literal_at(l, &self.secret, text, end) {
                Found::At(n) => return Found::At(n),
                Found::NeedMore => need_more = true,
                Found::No => {}
            }
        }
        match self.escaped_at(&self.secret, text) {
            Found::At(n) => Found::At(n),
            Found::NeedMore => Found::NeedMore,
            Found::No if need_more => Found::NeedMore,
            Found::No => Found::No,
        }
    }

    /// `secret` at the start of `text`, each byte as itself or escaped.
    /// Where a byte could be read both ways (the secret holds `%`, `\`,
    /// `&` or `+`), both readings are tried.
    fn escaped_at(&self, secret: &[u8], text: &[u8]) -> Found {
        let mut t = 0;
        let mut need_more = false;
        for (i, &want) in secret.iter().enumerate() {
            let Some(rest) = text.get(t..).filter(|r| !r.is_empty()) else {
                return Found::NeedMore;
            };
            let raw = rest.first().is_some_and(|c| c.eq_ignore_ascii_case(&want));
            match escape_of(rest, want) {
                Escape::Byte(len) => {
                    if raw {
                        // Ambiguous: try the escape reading on its own.
                        let tail = secret.get(i + 1..).unwrap_or_default();
                        match self.escaped_at(tail, rest.get(len..).unwrap_or_default()) {
                            Found::At(n) => return Found::At(t + len + n),
                            Found::NeedMore => need_more = true,
                            Found::No => {}
                        }
                    } else {
                        t += len;
                        continue;
                    }
                }
                Escape::Partial if !raw => return Found::NeedMore,
                Escape::Partial => need_more = true,
                Escape::No => {}
            }
            if !raw {
                return if need_more {
                    Found::NeedMore
                } else {
                    Found::No
                };
            }
            t += 1;
        }
        Found::At(t)
    }
}

fn mark(starts: &mut [bool; 256], b: u8, fold_case: bool) {
    for c in [b, b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
        if (fold_case || c == b)
            && let Some(slot) = starts.get_mut(usize::from(c))
        {
            *slot = true;
        }
    }
}

/// `l` at the start of `text`: each character as itself or escaped, with
/// the separators its layout allows between them. Of the readings of a
/// separator, the first after which the next character follows is taken;
/// there is no backtracking, so a crafted text cannot make this slow.
/// `secret` is what `l` encodes, `end` whether `text` is all there is.
fn literal_at(l: &Literal, secret: &[u8], text: &[u8], end: bool) -> Found {
    // Most positions are rejected by their first byte: keep that cheap.
    if let (Some(&c), Some(&want)) = (text.first(), l.bytes.first())
        && !(c == want || l.fold_case && c.eq_ignore_ascii_case(&want) || is_escape(c))
    {
        return Found::No;
    }
    let mut t = 0;
    // The first character after the last dump line end passed over.
    let mut line_start = None;
    for (i, &want) in l.bytes.iter().enumerate() {
        let rest = text.get(t..).unwrap_or_default();
        // Most characters follow directly: separators are read only when
        // the character does not.
        let mut need_more = match char_at(l, want, rest) {
            Found::At(m) => {
                t += m;
                continue;
            }
            Found::NeedMore => true,
            Found::No => false,
        };
        let mut step = None;
        for skip in separators(l.layout, i, rest) {
            let n = match skip {
                Skip::Len(n) | Skip::Line(n) => n,
                Skip::Partial => {
                    need_more = true;
                    continue;
                }
                Skip::No => continue,
            };
            match char_at(l, want, rest.get(n..).unwrap_or_default()) {
                Found::At(m) => {
                    step = Some(n + m);
                    if matches!(skip, Skip::Line(_)) {
                        line_start = Some(i);
                    }
                    break;
                }
                Found::NeedMore => need_more = true,
                Found::No => {}
            }
        }
        match step {
            Some(n) => t += n,
            None if need_more => return Found::NeedMore,
            None => return Found::No,
        }
    }
    // A dump shows the bytes of its last line once more, as themselves.
    if let Some(i) = line_start {
        let tail = secret.get(i / 2..).unwrap_or_default();
        match column_tail(text.get(t..).unwrap_or_default(), tail, end) {
            Some(n) => t += n,
            None => return Found::NeedMore,
        }
    }
    Found::At(t)
}

/// Whether an escape can begin with `c`.
fn is_escape(c: u8) -> bool {
    matches!(c, b'%' | b'\\' | b'&' | b'+')
}

/// One character of a literal form, as itself or escaped.
fn char_at(l: &Literal, want: u8, text: &[u8]) -> Found {
    let Some(&c) = text.first() else {
        return Found::NeedMore;
    };
    if c == want || l.fold_case && c.eq_ignore_ascii_case(&want) {
        return Found::At(1);
    }
    match escape_of(text, want) {
        Escape::Byte(n) => Found::At(n),
        Escape::Partial => Found::NeedMore,
        Escape::No => Found::No,
    }
}

/// `text` with each range replaced by `with`.
pub(super) fn splice(text: &[u8], found: &[std::ops::Range<usize>], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut last = 0;
    for r in found {
        out.extend_from_slice(text.get(last..r.start).unwrap_or_default());
        out.extend_from_slice(with);
        last = r.end;
    }
    out.extend_from_slice(text.get(last..).unwrap_or_default());
    out
}

fn hex(bytes: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digit = |n: u8| DIGITS.get(usize::from(n)).copied().unwrap_or(b'0');
    bytes
        .iter()
        .flat_map(|&b| [digit(b >> 4), digit(b & 0xf)])
        .collect()
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters of a text that holds `secret` starting `offset`
/// bytes into a 3-byte group, which depend on the secret's bytes only.
fn base64_core(secret: &[u8], offset: usize, alphabet: &[u8; 64]) -> Vec<u8> {
    let mut input = vec![0_u8; offset];
    input.extend_from_slice(secret);
    let (first_bit, end_bit) = (offset * 8, (offset + secret.len()) * 8);
    let mut out = Vec::new();
    let mut bit = 0;
    while bit + 6 <= input.len() * 8 {
        if bit >= first_bit && bit + 6 <= end_bit {
            let sextet = (0..6).fold(0_u8, |acc, k| {
                let at = bit + k;
                let byte = input.get(at / 8).copied().unwrap_or(0);
                (acc << 1) | ((byte >> (7 - at % 8)) & 1)
            });
            out.push(alphabet.get(usize::from(sextet)).copied().unwrap_or(b'A'));
        }
        bit += 6;
    }
    out
}

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
