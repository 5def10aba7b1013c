//! Tokens of a GraphQL document for the purpose-built reader.
//!
//! The lexical grammar is the spec's (October 2021), with the Unicode text
//! of its later edition that apollo-parser 0.8 implements: any scalar value
//! in strings and comments, `\u{…}` escapes, and `\uXXXX` surrogate pairs.
//! Wherever apollo-parser and the spec differ, or a character is unusual
//! enough not to be worth modelling (control characters in strings and
//! comments), the lexer gives up with [`Unsure`] and the caller falls back
//! to apollo-parser, so every token sequence produced here is one apollo-
//! parser produces too.
//!
//! Ignored tokens are skipped but counted as apollo-parser counts them (a
//! run of whitespace is one token, each comma and comment one), so the
//! reader can stay clear of apollo-parser's token limit.

/// The reader does not decide this document; apollo-parser does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unsure;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bang,
    Dollar,
    LParen,
    RParen,
    Spread,
    Colon,
    Equals,
    At,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Name,
    /// Int, float, string or block string: values the reader only skips.
    Scalar,
    Eof,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token<'a> {
    pub(super) kind: Kind,
    pub(super) text: &'a str,
    /// A comma came since the previous significant token. apollo-parser's
    /// two-token lookahead (alias `:`, the token after `...`) does not skip
    /// commas, so there a comma changes its reading.
    pub(super) comma_before: bool,
}

pub(super) struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    tokens: usize,
    max_tokens: usize,
}

const BOM: &[u8] = "\u{FEFF}".as_bytes();

impl<'a> Lexer<'a> {
    /// A lexer that gives up once it has produced `max_tokens` tokens,
    /// ignored ones included.
    pub(super) fn new(text: &'a str, max_tokens: usize) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            tokens: 0,
            max_tokens,
        }
    }

    /// How many bytes from here `keep` holds for.
    fn run_of(&self, keep: impl Fn(u8) -> bool) -> usize {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        rest.iter().position(|&b| !keep(b)).unwrap_or(rest.len())
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn count(&mut self) -> Result<(), Unsure> {
        self.tokens += 1;
        if self.tokens >= self.max_tokens {
            return Err(Unsure);
        }
        Ok(())
    }

    /// The next significant token.
    pub(super) fn next_token(&mut self) -> Result<Token<'a>, Unsure> {
        let comma_before = self.skip_ignored()?;
        self.count()?;
        let start = self.pos;
        let Some(byte) = self.peek() else {
            return Ok(Token {
                kind: Kind::Eof,
                text: "",
                comma_before,
            });
        };
        let kind = match byte {
            b'!' => self.punctuator(Kind::Bang),
            b'$' => self.punctuator(Kind::Dollar),
            b'(' => self.punctuator(Kind::LParen),
            b')' => self.punctuator(Kind::RParen),
            b':' => self.punctuator(Kind::Colon),
            b'=' => self.punctuator(Kind::Equals),
            b'@' => self.punctuator(Kind::At),
            b'[' => self.punctuator(Kind::LBracket),
            b']' => self.punctuator(Kind::RBracket),
            b'{' => self.punctuator(Kind::LBrace),
            b'}' => self.punctuator(Kind::RBrace),
            b'.' => {
                if self.peek_at(1) != Some(b'.') || self.peek_at(2) != Some(b'.') {
                    return Err(Unsure);
                }
                self.pos += 3;
                Kind::Spread
            }
            b'"' => {
                self.string()?;
                Kind::Scalar
            }
            b'-' | b'0'..=b'9' => {
                self.number()?;
                Kind::Scalar
            }
            b if is_name_start(b) => {
                self.pos += 1;
                self.pos += self.run_of(is_name_continue);
                Kind::Name
            }
            // `&` and `|` only occur in type-system definitions; anything
            // else is not a token at all.
            _ => return Err(Unsure),
        };
        Ok(Token {
            kind,
            text: self.text.get(start..self.pos).ok_or(Unsure)?,
            comma_before,
        })
    }

    fn punctuator(&mut self, kind: Kind) -> Kind {
        self.pos += 1;
        kind
    }

    /// Skips whitespace runs, commas and comments; says whether a comma
    /// was among them.
    fn skip_ignored(&mut self) -> Result<bool, Unsure> {
        let mut comma = false;
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r' | 0xEF) if self.at_whitespace() => {
                    self.count()?;
                    while self.at_whitespace() {
                        self.pos += if self.peek() == Some(0xEF) { 3 } else { 1 };
                        self.pos += self.run_of(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
                    }
                }
                Some(b',') => {
                    self.count()?;
                    comma = true;
                    self.pos += 1;
                }
                Some(b'#') => {
                    self.count()?;
                    self.pos += 1;
                    while let Some(b) = self.peek() {
                        if b == b'\n' || b == b'\r' {
                            break;
                        }
                        if is_control(b) {
                            return Err(Unsure);
                        }
                        self.pos += 1;
                    }
                }
                _ => return Ok(comma),
            }
        }
    }

    fn at_whitespace(&self) -> bool {
        match self.peek() {
            Some(b' ' | b'\t' | b'\n' | b'\r') => true,
            Some(0xEF) => self.bytes.get(self.pos..self.pos + 3) == Some(BOM),
            _ => false,
        }
    }

    /// IntValue or FloatValue, with the spec's lookahead: no digit after a
    /// leading zero, and neither `.` nor a name start right after.
    fn number(&mut self) -> Result<(), Unsure> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(Unsure);
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Unsure),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.required_digits()?;
        }
        if self.peek().is_some_and(|b| b == b'.' || is_name_start(b)) {
            return Err(Unsure);
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn required_digits(&mut self) -> Result<(), Unsure> {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(Unsure);
        }
        self.digits();
        Ok(())
    }

    fn string(&mut self) -> Result<(), Unsure> {
        if self.peek_at(1) == Some(b'"') && self.peek_at(2) == Some(b'"') {
            self.pos += 3;
            return self.block_string();
        }
        self.pos += 1;
        loop {
            let b = self.peek().ok_or(Unsure)?;
            self.pos += 1;
            match b {
                b'"' => return Ok(()),
                b'\\' => self.escape()?,
                // Line terminators end nothing here: they are an error.
                b if is_control(b) || b == b'\n' || b == b'\r' => return Err(Unsure),
                _ => {}
            }
        }
    }

    /// After a `\` in a string: one of `" \ / b f n r t`, or a Unicode
    /// escape naming a scalar value (a surrogate only as the first half of
    /// a pair written as two `\uXXXX`).
    fn escape(&mut self) -> Result<(), Unsure> {
        let b = self.peek().ok_or(Unsure)?;
        self.pos += 1;
        match b {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(()),
            b'u' if self.peek() == Some(b'{') => {
                self.pos += 1;
                let mut value: u32 = 0;
                let mut digits = 0usize;
                while let Some(d) = self.peek().and_then(|b| char::from(b).to_digit(16)) {
                    value = value.saturating_mul(16).saturating_add(d);
                    digits += 1;
                    self.pos += 1;
                }
                if digits == 0 || self.peek() != Some(b'}') || char::from_u32(value).is_none() {
                    return Err(Unsure);
                }
                self.pos += 1;
                Ok(())
            }
            b'u' => match self.hex4()? {
                0xD800..=0xDBFF => {
                    if self.peek() != Some(b'\\') || self.peek_at(1) != Some(b'u') {
                        return Err(Unsure);
                    }
                    self.pos += 2;
                    match self.hex4()? {
                        0xDC00..=0xDFFF => Ok(()),
                        _ => Err(Unsure),
                    }
                }
                0xDC00..=0xDFFF => Err(Unsure),
                _ => Ok(()),
            },
            _ => Err(Unsure),
        }
    }

    fn hex4(&mut self) -> Result<u32, Unsure> {
        let mut value = 0;
        for _ in 0..4 {
            let d = self
                .peek()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or(Unsure)?;
            value = value * 16 + d;
            self.pos += 1;
        }
        Ok(value)
    }

    /// After the opening `"""`: up to the first `"""` not escaped as
    /// `\"""`. A backslash escapes nothing else, but a run of backslashes
    /// before `"""` still escapes it (`\\"""` is `\` and `\"""`), as both
    /// the spec and apollo-parser read it.
    fn block_string(&mut self) -> Result<(), Unsure> {
        loop {
            let b = self.peek().ok_or(Unsure)?;
            match b {
                b'"' if self.peek_at(1) == Some(b'"') && self.peek_at(2) == Some(b'"') => {
                    self.pos += 3;
                    return Ok(());
                }
                b'\\' => {
                    while self.peek() == Some(b'\\') {
                        self.pos += 1;
                    }
                    if self.peek() == Some(b'"')
                        && self.peek_at(1) == Some(b'"')
                        && self.peek_at(2) == Some(b'"')
                    {
                        self.pos += 3;
                    }
                }
                b if is_control(b) => return Err(Unsure),
                _ => self.pos += 1,
            }
        }
    }
}

/// Control characters other than tab and the line terminators: apollo-
/// parser takes them inside strings and comments, the October 2021 spec
/// does not; the reader leaves such documents to apollo-parser.
fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t' && b != b'\n' && b != b'\r') || b == 0x7F
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
