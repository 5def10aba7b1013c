//! The forms in which a server may hand a secret back, and a matcher that
//! finds any of them in bytes that arrive a piece at a time.
//!
//! A server that echoes what it received rarely echoes it byte for byte:
//! it may change the case (a header name is lowercased), percent-encode it
//! (a URL it builds), escape it for JSON or HTML, hex- or base64-encode it
//! (a debug dump, a base64 of the whole `Authorization` value). One
//! matcher recognises the secret in each of these forms, and in any mix
//! of them within one occurrence, so `REAL%2dsecret` is found as well as
//! `real-secret`:
//!
//! - each byte of the secret, as itself (ASCII case ignored), or escaped:
//!   `%HH`, `\xHH`, `\u00HH`, `\` before a punctuation character,
//!   `&#NN;`, `&#xHH;`, the five named XML entities, `+` for a space;
//! - the secret hex-encoded (either case);
//! - the secret base64-encoded inside any longer text (standard and URL
//!   alphabets): for each of the three offsets the secret can start at in
//!   a 3-byte group, the run of base64 characters that depends on the
//!   secret alone. Only when that run is at least [`MIN_BASE64_CORE`]
//!   characters long, so that a short secret does not match ordinary text.
//!
//! A server that transforms the secret further (encrypts it, reverses it,
//! sends it a slice per response) is not an echo but an accomplice, and it
//! holds the secret anyway: that is outside what scrubbing can stop (see
//! `docs/threat-model.md`).

/// The shortest base64 run worth matching: 16 characters are 96 bits of
/// the secret, which ordinary text does not contain by chance.
pub(super) const MIN_BASE64_CORE: usize = 16;

/// The longest escape of one byte (`&#x0HH;` and the like).
const MAX_ESCAPE: usize = 8;

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
        let mut literals = vec![
            Literal {
                bytes: hex(secret),
                fold_case: true,
            },
            Literal {
                bytes: secret.to_vec(),
                fold_case: true,
            },
        ];
        for alphabet in [STANDARD, URL_SAFE] {
            for offset in 0..3 {
                let core = base64_core(secret, offset, alphabet);
                if core.len() >= MIN_BASE64_CORE {
                    literals.push(Literal {
                        bytes: core,
                        fold_case: false,
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
            match self.match_at(rest) {
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

    fn match_at(&self, text: &[u8]) -> Found {
        let mut need_more = false;
        for l in &self.literals {
            match literal_at(l, text) {
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
            let escape = unescape(rest);
            let raw = rest.first().is_some_and(|c| c.eq_ignore_ascii_case(&want));
            match escape {
                Escape::Byte(b, len) if b == want => {
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
                _ => {}
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

fn literal_at(l: &Literal, text: &[u8]) -> Found {
    let n = l.bytes.len().min(text.len());
    let (a, b) = (
        l.bytes.get(..n).unwrap_or_default(),
        text.get(..n).unwrap_or_default(),
    );
    let same = if l.fold_case {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    };
    match (same, n == l.bytes.len()) {
        (false, _) => Found::No,
        (true, true) => Found::At(n),
        (true, false) => Found::NeedMore,
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

/// What an escape at the start of a text stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// This byte, written with this many bytes.
    Byte(u8, usize),
    /// The text ends inside what could be an escape.
    Partial,
    None,
}

fn unescape(text: &[u8]) -> Escape {
    let Some(&first) = text.first() else {
        return Escape::None;
    };
    let window = text.get(..MAX_ESCAPE.min(text.len())).unwrap_or_default();
    let complete = text.len() >= MAX_ESCAPE;
    let result = match first {
        b'%' => hex_escape(window, 1, 2),
        b'+' => Escape::Byte(b' ', 1),
        b'\\' => match window.get(1) {
            Some(b'x') => hex_escape(window, 2, 2),
            Some(b'u') => match hex_escape(window, 2, 4) {
                Escape::Byte(..) if window.get(2..4) != Some(b"00") => Escape::None,
                e => e,
            },
            Some(&c) if c.is_ascii_punctuation() => Escape::Byte(c, 2),
            Some(_) => Escape::None,
            None => Escape::Partial,
        },
        b'&' => entity(window),
        _ => Escape::None,
    };
    match result {
        Escape::Partial if complete => Escape::None,
        e => e,
    }
}

/// `digits` hex digits after `skip` bytes.
fn hex_escape(text: &[u8], skip: usize, digits: usize) -> Escape {
    let Some(hexits) = text.get(skip..skip + digits) else {
        let rest = text.get(skip..).unwrap_or_default();
        return if rest.iter().all(u8::is_ascii_hexdigit) {
            Escape::Partial
        } else {
            Escape::None
        };
    };
    let value = hexits.iter().try_fold(0_u32, |acc, &c| {
        char::from(c).to_digit(16).map(|d| acc * 16 + d)
    });
    match value.and_then(|v| u8::try_from(v).ok()) {
        Some(b) => Escape::Byte(b, skip + digits),
        None => Escape::None,
    }
}

/// `&#NN;`, `&#xHH;`, `&amp;` and the other XML entities.
fn entity(text: &[u8]) -> Escape {
    const NAMED: [(&[u8], u8); 5] = [
        (b"&amp;", b'&'),
        (b"&lt;", b'<'),
        (b"&gt;", b'>'),
        (b"&quot;", b'"'),
        (b"&apos;", b'\''),
    ];
    for (name, b) in NAMED {
        if text.starts_with(name) {
            return Escape::Byte(b, name.len());
        }
        if name.starts_with(text) {
            return Escape::Partial;
        }
    }
    let Some(semi) = text.iter().position(|&c| c == b';') else {
        return if text.len() < MAX_ESCAPE && text.starts_with(b"&#") || text == b"&" {
            Escape::Partial
        } else {
            Escape::None
        };
    };
    let body = text.get(2..semi).unwrap_or_default();
    let (digits, radix) = match body.first() {
        Some(b'x' | b'X') => (body.get(1..).unwrap_or_default(), 16),
        _ => (body, 10),
    };
    if !text.starts_with(b"&#") || digits.is_empty() {
        return Escape::None;
    }
    let value = digits.iter().try_fold(0_u32, |acc, &c| {
        char::from(c)
            .to_digit(radix)
            .and_then(|d| acc.checked_mul(radix)?.checked_add(d))
    });
    match value.and_then(|v| u8::try_from(v).ok()) {
        Some(b) => Escape::Byte(b, semi + 1),
        None => Escape::None,
    }
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
