//! Escapes of one byte, read with the byte they should stand for in hand.
//!
//! Asking "does this escape stand for `want`?" rather than "what does this
//! escape stand for?" lets one spelling have several readings (`\101` and
//! `\0101` are both `A` in some language, `&#65` needs no `;` in HTML)
//! without choosing one: the secret decides. Spellings:
//!
//! - `%HH`, `%uHHHH` (JavaScript's `escape()`, IIS);
//! - `\xHH`, `\uHHHH`, `\u{H…}` (ES6, Rust), `\UHHHHHHHH` (Python), octal
//!   `\O`, `\OO`, `\OOO` and `\0OOO` (C, `echo -e`), `\` before a
//!   punctuation character;
//! - `&#N…;` and `&#xH…;` with any leading zeros, the `;` optional as HTML
//!   parsers allow, and the five named XML entities;
//! - `+` for a space.
//!
//! Leading zeros are accepted up to [`MAX_DIGITS`] digits only: an
//! unbounded run would let a server make the stream scanner hold (and
//! re-scan) everything it sends after `&#0`.

/// The most digits read in one escape. Beyond this an escape is not
/// recognised; see `docs/threat-model.md`.
pub(super) const MAX_DIGITS: usize = 32;

/// Whether an escape at the start of a text stands for the wanted byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Escape {
    /// It does, written with this many bytes.
    Byte(usize),
    /// The text ends inside what could still be such an escape.
    Partial,
    No,
}

impl Escape {
    /// The better of two readings: a match (the longer one) over a text
    /// that ended too soon, over none.
    fn or(self, other: Escape) -> Escape {
        match (self, other) {
            (Escape::Byte(a), Escape::Byte(b)) => Escape::Byte(a.max(b)),
            (Escape::Byte(a), _) | (_, Escape::Byte(a)) => Escape::Byte(a),
            (Escape::Partial, _) | (_, Escape::Partial) => Escape::Partial,
            (Escape::No, Escape::No) => Escape::No,
        }
    }

    fn shifted(self, by: usize) -> Escape {
        match self {
            Escape::Byte(n) => Escape::Byte(n + by),
            e => e,
        }
    }
}

/// Whether an escape at the start of `text` stands for `want`.
pub(super) fn escape_of(text: &[u8], want: u8) -> Escape {
    match text.first() {
        Some(b'%') => percent(text, want),
        Some(b'+') if want == b' ' => Escape::Byte(1),
        Some(b'\\') => backslash(text, want),
        Some(b'&') => entity(text, want),
        _ => Escape::No,
    }
}

fn percent(text: &[u8], want: u8) -> Escape {
    match text.get(1) {
        None => Escape::Partial,
        Some(b'u' | b'U') => fixed(text.get(2..).unwrap_or_default(), 4, 16, want).shifted(2),
        Some(_) => fixed(text.get(1..).unwrap_or_default(), 2, 16, want).shifted(1),
    }
}

fn backslash(text: &[u8], want: u8) -> Escape {
    let rest = text.get(2..).unwrap_or_default();
    match text.get(1) {
        None => Escape::Partial,
        Some(b'x') => fixed(rest, 2, 16, want).shifted(2),
        Some(b'u') => match rest.first() {
            None => Escape::Partial,
            Some(b'{') => braced(rest.get(1..).unwrap_or_default(), want).shifted(3),
            Some(_) => fixed(rest, 4, 16, want).shifted(2),
        },
        Some(b'U') => fixed(rest, 8, 16, want).shifted(2),
        Some(b'0'..=b'7') => octal(text.get(1..).unwrap_or_default(), want).shifted(1),
        Some(&c) if c.is_ascii_punctuation() && c == want => Escape::Byte(2),
        Some(_) => Escape::No,
    }
}

/// `\O` to `\OOO`, or `\0OOO`: every length whose value is `want`.
fn octal(digits: &[u8], want: u8) -> Escape {
    let longest = if digits.first() == Some(&b'0') { 4 } else { 3 };
    (1..=longest).fold(Escape::No, |best, n| {
        best.or(match digits.get(..n) {
            Some(d) => match value(d, 8) {
                Some(v) if v == u32::from(want) => Escape::Byte(n),
                _ => Escape::No,
            },
            None if is_digits(digits, 8) => Escape::Partial,
            None => Escape::No,
        })
    })
}

/// Exactly `n` digits of `radix`.
fn fixed(text: &[u8], n: usize, radix: u32, want: u8) -> Escape {
    match text.get(..n) {
        Some(d) => match value(d, radix) {
            Some(v) if v == u32::from(want) => Escape::Byte(n),
            _ => Escape::No,
        },
        None if is_digits(text, radix) => Escape::Partial,
        None => Escape::No,
    }
}

/// Hex digits then `}` (after `\u{`).
fn braced(text: &[u8], want: u8) -> Escape {
    let n = run(text, 16);
    match (n, text.get(n)) {
        (_, None) if n < MAX_DIGITS => Escape::Partial,
        (1.., Some(b'}')) => match text.get(..n).and_then(|d| value(d, 16)) {
            Some(v) if v == u32::from(want) => Escape::Byte(n + 1),
            _ => Escape::No,
        },
        _ => Escape::No,
    }
}

/// `&#N…;`, `&#xH…;` (`;` optional) and the named XML entities.
fn entity(text: &[u8], want: u8) -> Escape {
    const NAMED: [(&[u8], u8); 5] = [
        (b"&amp;", b'&'),
        (b"&lt;", b'<'),
        (b"&gt;", b'>'),
        (b"&quot;", b'"'),
        (b"&apos;", b'\''),
    ];
    if text.get(1) != Some(&b'#') {
        return NAMED.iter().fold(Escape::No, |best, &(name, b)| {
            best.or(if text.starts_with(name) && b == want {
                Escape::Byte(name.len())
            } else if name.starts_with(text) {
                Escape::Partial
            } else {
                Escape::No
            })
        });
    }
    let (skip, radix) = match text.get(2) {
        None => return Escape::Partial,
        Some(b'x' | b'X') => (3, 16),
        Some(_) => (2, 10),
    };
    let digits = text.get(skip..).unwrap_or_default();
    let n = run(digits, radix);
    if n == 0 || n >= MAX_DIGITS {
        return if n == 0 && digits.is_empty() {
            Escape::Partial
        } else {
            Escape::No
        };
    }
    let Some(v) = digits.get(..n).and_then(|d| value(d, radix)) else {
        return Escape::No;
    };
    match digits.get(n) {
        // More digits may follow; if none do, HTML reads it as it stands.
        None if v != u32::from(want) => Escape::Partial,
        _ if v != u32::from(want) => Escape::No,
        Some(b';') => Escape::Byte(skip + n + 1),
        _ => Escape::Byte(skip + n),
    }
}

/// How many digits of `radix` `text` starts with (at most one past
/// [`MAX_DIGITS`], enough to tell that it is too long).
fn run(text: &[u8], radix: u32) -> usize {
    text.iter()
        .take(MAX_DIGITS + 1)
        .take_while(|&&c| char::from(c).is_digit(radix))
        .count()
}

fn is_digits(text: &[u8], radix: u32) -> bool {
    text.iter().all(|&c| char::from(c).is_digit(radix))
}

/// The value of digits of `radix`, `None` past `u32` or on a non-digit.
fn value(digits: &[u8], radix: u32) -> Option<u32> {
    digits.iter().try_fold(0_u32, |acc, &c| {
        char::from(c)
            .to_digit(radix)
            .and_then(|d| acc.checked_mul(radix)?.checked_add(d))
    })
}
