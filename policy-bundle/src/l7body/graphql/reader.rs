//! A purpose-built reader of the one thing the analysis needs from a
//! document: the selected operation's type, name and root fields.
//!
//! apollo-parser builds a lossless syntax tree, which is most of the cost
//! of judging a request whose document is new. This reader makes one pass
//! over the tokens instead, checking the executable-document grammar as it
//! goes but keeping only the operation headers and the root-level fields
//! and spreads of operations and fragments.
//!
//! It never decides alone where it could differ: any error, any construct
//! it does not model (type-system definitions, descriptions, experimental
//! syntax), any place where apollo-parser reads differently from the spec,
//! and any document nearing apollo-parser's recursion or token limit give
//! [`Unsure`], and the caller reads the document with apollo-parser
//! instead. So every answer given here is the answer apollo-parser's path
//! gives, and every refusal keeps apollo-parser's message and position.

use super::expand::{Fragment, Item, Operation, root_fields, select};
use super::lexer::{Kind, Lexer, Token, Unsure};
use super::{OperationType, RECURSION_LIMIT, Selected, TOKEN_LIMIT};

/// Nesting this deep gives up, well before apollo-parser's limit. The
/// reader counts every `{` and `[`, apollo-parser every selection set,
/// list type, list element and object field value, so the reader's depth
/// is never below apollo-parser's.
const MAX_DEPTH: usize = RECURSION_LIMIT * 3 / 4;

/// Tokens (ignored ones included, counted as apollo-parser counts them)
/// after which the reader gives up, short of apollo-parser's limit.
const MAX_TOKENS: usize = TOKEN_LIMIT - TOKEN_LIMIT / 16;

/// The selected operation of `document` for `operation_name`, or
/// [`Unsure`] when apollo-parser's path should answer.
pub(super) fn read(document: &str, operation_name: Option<&str>) -> Result<Selected, Unsure> {
    let mut reader = Reader {
        lexer: Lexer::new(document, MAX_TOKENS),
        token: Token {
            kind: Kind::Eof,
            text: "",
            comma_before: false,
        },
        depth: 0,
        items: Vec::new(),
    };
    reader.bump()?;
    let mut operations = Vec::new();
    let mut fragments = Vec::new();
    loop {
        let token = reader.token;
        match (token.kind, token.text) {
            (Kind::Eof, _) => break,
            (Kind::LBrace, _) => {
                let start = reader.items.len();
                reader.selection_set(true)?;
                operations.push(Operation {
                    kind: OperationType::Query,
                    name: None,
                    items: start..reader.items.len(),
                });
            }
            (Kind::Name, "query") => operations.push(reader.operation(OperationType::Query)?),
            (Kind::Name, "mutation") => operations.push(reader.operation(OperationType::Mutation)?),
            (Kind::Name, "subscription") => {
                operations.push(reader.operation(OperationType::Subscription)?);
            }
            (Kind::Name, "fragment") => fragments.push(reader.fragment()?),
            // Type-system definitions, descriptions, stray tokens.
            _ => return Err(Unsure),
        }
    }
    let operation = select(operations, operation_name)?;
    let root_fields = root_fields(&reader.items, operation.items, &fragments)?;
    Ok(Selected {
        kind: operation.kind,
        name: operation.name.map(str::to_owned),
        root_fields,
    })
}

struct Reader<'a> {
    lexer: Lexer<'a>,
    /// The current significant token.
    token: Token<'a>,
    depth: usize,
    /// Root-level items of every operation and fragment, each definition a
    /// range of it.
    items: Vec<Item<'a>>,
}

impl<'a> Reader<'a> {
    fn bump(&mut self) -> Result<(), Unsure> {
        self.token = self.lexer.next_token()?;
        Ok(())
    }

    fn at(&self, kind: Kind) -> bool {
        self.token.kind == kind
    }

    fn expect(&mut self, kind: Kind) -> Result<&'a str, Unsure> {
        if !self.at(kind) {
            return Err(Unsure);
        }
        let text = self.token.text;
        self.bump()?;
        Ok(text)
    }

    fn enter(&mut self) -> Result<(), Unsure> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unsure);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `query`, `mutation` or `subscription`, then Name? VariableDefinitions?
    /// Directives? SelectionSet.
    fn operation(&mut self, kind: OperationType) -> Result<Operation<'a>, Unsure> {
        self.bump()?;
        let name = if self.at(Kind::Name) {
            Some(self.expect(Kind::Name)?)
        } else {
            None
        };
        if self.at(Kind::LParen) {
            self.variable_definitions()?;
        }
        self.directives(false)?;
        let start = self.items.len();
        self.selection_set(true)?;
        Ok(Operation {
            kind,
            name,
            items: start..self.items.len(),
        })
    }

    /// `fragment` FragmentName TypeCondition Directives? SelectionSet, the
    /// name not `on` (fragment variables are experimental: not handled).
    fn fragment(&mut self) -> Result<Fragment<'a>, Unsure> {
        self.bump()?;
        let name = self.expect(Kind::Name)?;
        if name == "on" {
            return Err(Unsure);
        }
        self.type_condition()?;
        self.directives(false)?;
        let start = self.items.len();
        self.selection_set(true)?;
        Ok(Fragment {
            name,
            items: start..self.items.len(),
        })
    }

    fn type_condition(&mut self) -> Result<(), Unsure> {
        if self.expect(Kind::Name)? != "on" {
            return Err(Unsure);
        }
        self.expect(Kind::Name)?;
        Ok(())
    }

    /// `(` ( `$` Name `:` Type DefaultValue? Directives[Const]? )+ `)`
    fn variable_definitions(&mut self) -> Result<(), Unsure> {
        self.expect(Kind::LParen)?;
        if !self.at(Kind::Dollar) {
            return Err(Unsure);
        }
        while self.at(Kind::Dollar) {
            self.bump()?;
            self.expect(Kind::Name)?;
            self.expect(Kind::Colon)?;
            self.type_()?;
            if self.at(Kind::Equals) {
                self.bump()?;
                self.value(true)?;
            }
            self.directives(true)?;
        }
        self.expect(Kind::RParen)?;
        Ok(())
    }

    /// NamedType or `[` Type `]`, either followed by an optional `!`.
    fn type_(&mut self) -> Result<(), Unsure> {
        if self.at(Kind::LBracket) {
            self.enter()?;
            self.bump()?;
            self.type_()?;
            self.expect(Kind::RBracket)?;
            self.leave();
        } else {
            self.expect(Kind::Name)?;
        }
        if self.at(Kind::Bang) {
            self.bump()?;
        }
        Ok(())
    }

    /// ( `@` Name Arguments? )*
    fn directives(&mut self, constant: bool) -> Result<(), Unsure> {
        while self.at(Kind::At) {
            self.bump()?;
            self.expect(Kind::Name)?;
            if self.at(Kind::LParen) {
                self.arguments(constant)?;
            }
        }
        Ok(())
    }

    /// `(` ( Name `:` Value )+ `)`. apollo-parser also takes an argument
    /// without `:` and value; the spec does not, nor does the reader.
    fn arguments(&mut self, constant: bool) -> Result<(), Unsure> {
        self.expect(Kind::LParen)?;
        if !self.at(Kind::Name) {
            return Err(Unsure);
        }
        while self.at(Kind::Name) {
            self.bump()?;
            self.expect(Kind::Colon)?;
            self.value(constant)?;
        }
        self.expect(Kind::RParen)?;
        Ok(())
    }

    /// Any value; a variable only where the grammar is not constant.
    fn value(&mut self, constant: bool) -> Result<(), Unsure> {
        match self.token.kind {
            Kind::Dollar if !constant => {
                self.bump()?;
                self.expect(Kind::Name)?;
            }
            Kind::Scalar | Kind::Name => self.bump()?,
            Kind::LBracket => {
                self.enter()?;
                self.bump()?;
                while !self.at(Kind::RBracket) {
                    self.value(constant)?;
                }
                self.bump()?;
                self.leave();
            }
            Kind::LBrace => {
                self.enter()?;
                self.bump()?;
                while self.at(Kind::Name) {
                    self.bump()?;
                    self.expect(Kind::Colon)?;
                    self.value(constant)?;
                }
                self.expect(Kind::RBrace)?;
                self.leave();
            }
            _ => return Err(Unsure),
        }
        Ok(())
    }

    /// `{` Selection+ `}`; at the root, fields and spreads are kept.
    fn selection_set(&mut self, root: bool) -> Result<(), Unsure> {
        self.enter()?;
        self.expect(Kind::LBrace)?;
        if self.at(Kind::RBrace) {
            return Err(Unsure);
        }
        while !self.at(Kind::RBrace) {
            match self.token.kind {
                Kind::Name => self.field(root)?,
                Kind::Spread => self.fragment_selection(root)?,
                _ => return Err(Unsure),
            }
        }
        self.bump()?;
        self.leave();
        Ok(())
    }

    /// (Alias `:`)? Name Arguments? Directives? SelectionSet?
    fn field(&mut self, root: bool) -> Result<(), Unsure> {
        let mut name = self.expect(Kind::Name)?;
        if self.at(Kind::Colon) {
            // apollo-parser looks for the alias's `:` without skipping
            // commas: `a, : b` is an error there, an alias in the spec.
            if self.token.comma_before {
                return Err(Unsure);
            }
            self.bump()?;
            name = self.expect(Kind::Name)?;
        }
        if self.at(Kind::LParen) {
            self.arguments(false)?;
        }
        self.directives(false)?;
        if self.at(Kind::LBrace) {
            self.selection_set(false)?;
        }
        if root {
            self.items.push(Item::Field(name));
        }
        Ok(())
    }

    /// `...` FragmentName Directives?, or `...` TypeCondition? Directives?
    /// SelectionSet.
    fn fragment_selection(&mut self, root: bool) -> Result<(), Unsure> {
        self.bump()?;
        // apollo-parser decides between a spread and an inline fragment
        // on the token after `...` without skipping commas.
        if self.token.comma_before {
            return Err(Unsure);
        }
        match (self.token.kind, self.token.text) {
            (Kind::Name, "on") => {
                self.type_condition()?;
                self.directives(false)?;
                self.selection_set(root)
            }
            (Kind::Name, name) => {
                self.bump()?;
                self.directives(false)?;
                if root {
                    self.items.push(Item::Spread(name));
                }
                Ok(())
            }
            (Kind::At | Kind::LBrace, _) => {
                self.directives(false)?;
                self.selection_set(root)
            }
            _ => Err(Unsure),
        }
    }
}
