//! Parse `.policy` text into the syntax tree with pest.
//!
//! Unparseable statements do not stop the parse: the grammar catches each
//! bad line (or bad block) as a `bad_*` node, the parser re-parses that text
//! with the strict rules to learn exactly what was expected where, reports
//! it, and continues, so one run reports every syntax error of a file.

use pest::Parser as _;
use pest::iterators::Pair;

use crate::ast::*;
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::source::{Node, SourceFile, Span};

/// The pest grammar, in a module of its own so the `Rule` enum pest
/// generates stays private to the parser.
mod grammar {
    #[derive(pest_derive::Parser)]
    #[grammar = "../../grammar/policy.pest"]
    pub(super) struct PolicyParser;
}

use grammar::{PolicyParser, Rule};

/// Parse one file. Returns the document when the file's outer structure
/// parsed (statement-level errors are reported and skipped) and the
/// diagnostics found.
pub fn parse(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    let mut p = Walker {
        file: file.clone(),
        diags: Diagnostics::default(),
    };
    let doc = match PolicyParser::parse(Rule::file, file.text()) {
        Ok(mut pairs) => pairs.next().and_then(|pair| p.file_pair(pair)),
        Err(err) => {
            p.pest_error(&err, 0, "");
            None
        }
    };
    // An empty or comment-only file is a mistake (a wrong path, a file cut
    // short), not a deny-all policy: that is written `policy "name" {}`.
    if doc.is_none() && !p.diags.has_errors() {
        p.diags.push(
            Diagnostic::new(
                codes::E0106,
                file,
                Span::new(0, 0),
                "this file holds no policy or fragment",
            )
            .label("expected `policy \"NAME\" {` here")
            .help("start with `policy \"NAME\" {` and end with `}`; a policy with nothing between them is valid and allows nothing beyond starting the workload"),
        );
    }
    (doc, p.diags)
}

struct Walker {
    file: SourceFile,
    diags: Diagnostics,
}

fn span_of(pair: &Pair<'_, Rule>) -> Span {
    let s = pair.as_span();
    Span::new(s.start(), s.end())
}

fn comment_text(pair: &Pair<'_, Rule>) -> String {
    pair.as_str()
        .trim_start_matches('#')
        .trim_end()
        .strip_prefix(' ')
        .map_or_else(
            || pair.as_str().trim_start_matches('#').trim_end().to_string(),
            str::to_string,
        )
}

/// Collects leading trivia while walking a block body.
#[derive(Default)]
struct TriviaCollector {
    pending: Vec<TriviaLine>,
    after_comment: bool,
}

impl TriviaCollector {
    fn comment(&mut self, text: String) {
        self.pending.push(TriviaLine::Comment(text));
        self.after_comment = true;
    }

    /// A `blank` pair: either the end of a comment-only line or an empty line.
    fn newline(&mut self) {
        if self.after_comment {
            self.after_comment = false;
        } else {
            self.pending.push(TriviaLine::Blank);
        }
    }

    fn take(&mut self) -> Vec<TriviaLine> {
        self.after_comment = false;
        std::mem::take(&mut self.pending)
    }
}

impl Walker {
    fn file_pair(&mut self, pair: Pair<'_, Rule>) -> Option<Document> {
        let mut header = TriviaCollector::default();
        let mut doc = None;
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::COMMENT => header.comment(comment_text(&inner)),
                Rule::blank => header.newline(),
                Rule::document => {
                    let lead = header.take();
                    doc = self.document(inner, lead);
                }
                _ => {}
            }
        }
        let mut doc = doc?;
        doc.footer = trim_blanks(header.take());
        Some(doc)
    }

    fn document(&mut self, pair: Pair<'_, Rule>, header: Vec<TriviaLine>) -> Option<Document> {
        let mut kind = DocKind::Policy;
        let mut name = None;
        let mut header_trailing = None;
        let mut leading = Vec::new();
        let mut items = Vec::new();
        let mut end = Vec::new();
        let open_line = self.file.line_col(pair.as_span().start()).0;
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::doc_kind => {
                    kind = if inner.as_str() == "fragment" {
                        DocKind::Fragment
                    } else {
                        DocKind::Policy
                    }
                }
                Rule::string => name = Some(self.string(inner)),
                Rule::COMMENT => {
                    self.header_comment(&inner, open_line, &mut header_trailing, &mut leading)
                }
                Rule::body => {
                    let (i, e) = self.body(inner, std::mem::take(&mut leading), Self::statement);
                    items = i;
                    end = e;
                }
                _ => {}
            }
        }
        Some(Document {
            file: self.file.clone(),
            header: trim_blanks(header),
            kind,
            name: name?,
            header_trailing,
            items,
            end: trim_blanks(end),
            footer: Vec::new(),
        })
    }

    /// Walk a block body of `blank`, `*_line` and `COMMENT` pairs, building
    /// items with their trivia. `stmt` turns the statement pair into a node.
    fn body<T>(
        &mut self,
        pair: Pair<'_, Rule>,
        leading: Vec<String>,
        stmt: fn(&mut Self, Pair<'_, Rule>) -> Node<T>,
    ) -> (Vec<Item<T>>, Vec<TriviaLine>) {
        let mut trivia = TriviaCollector::default();
        // A comment the header rule consumed; its line break opens the body.
        for c in leading {
            trivia.comment(c);
        }
        let mut items: Vec<Item<T>> = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::COMMENT => trivia.comment(comment_text(&inner)),
                Rule::blank => trivia.newline(),
                _ => {
                    let mut trailing = None;
                    let mut node = None;
                    for part in inner.into_inner() {
                        if part.as_rule() == Rule::COMMENT {
                            trailing = Some(comment_text(&part));
                            continue;
                        }
                        // pest's implicit comment skipping can leave an end-of-line
                        // comment inside a statement that ends in a repetition;
                        // block statements place their own comments.
                        let is_block = part
                            .clone()
                            .into_inner()
                            .any(|c| matches!(c.as_rule(), Rule::endpoint_body | Rule::cred_body));
                        if !is_block
                            && let Some(c) = part
                                .clone()
                                .into_inner()
                                .flatten()
                                .filter(|c| c.as_rule() == Rule::COMMENT)
                                .last()
                        {
                            trailing = Some(comment_text(&c));
                        }
                        node = Some(stmt(self, part));
                    }
                    if let Some(node) = node {
                        let before = trivia.take();
                        items.push(Item {
                            trivia: Trivia {
                                before: trim_leading_blanks(before, items.is_empty()),
                                trailing,
                            },
                            stmt: node,
                        });
                    }
                }
            }
        }
        (items, trivia.take())
    }

    /// A comment inside a block header's rule: on the opening line it
    /// trails the header; on a later line it leads the block's first item.
    fn header_comment(
        &self,
        pair: &Pair<'_, Rule>,
        open_line: u32,
        trailing: &mut Option<String>,
        leading: &mut Vec<String>,
    ) {
        if self.file.line_col(pair.as_span().start()).0 == open_line {
            *trailing = Some(comment_text(pair));
        } else {
            leading.push(comment_text(pair));
        }
    }

    fn statement(&mut self, pair: Pair<'_, Rule>) -> Node<Stmt> {
        let span = span_of(&pair);
        let rule = pair.as_rule();
        let stmt = match rule {
            Rule::include_stmt => {
                let s = pair.into_inner().find(|p| p.as_rule() == Rule::string);
                match s {
                    Some(s) => Stmt::Include(self.string(s)),
                    None => Stmt::Invalid(String::new()),
                }
            }
            Rule::landlock_stmt => self.landlock(pair),
            Rule::run_as_stmt => self.run_as(pair),
            Rule::fs_stmt => self.fs(pair),
            Rule::binaries_stmt => self.binaries(pair),
            Rule::secret_stmt => self.secret(pair),
            Rule::credential_stmt => Stmt::Credential(self.credential(pair)),
            Rule::allow_stmt => Stmt::Allow(self.allow(pair)),
            Rule::advisor_stmt => Stmt::Advisor {
                subjects: pair
                    .into_inner()
                    .filter(|p| p.as_rule() == Rule::advisor_subject)
                    .filter_map(|p| p.into_inner().next())
                    .map(|v| self.value(v))
                    .collect(),
            },
            Rule::bad_stmt => {
                let text = pair.as_str().to_string();
                self.reparse(Rule::strict_statement, &text, span.start);
                Stmt::Invalid(text)
            }
            _ => Stmt::Invalid(pair.as_str().to_string()),
        };
        Node::new(stmt, span)
    }

    fn landlock(&mut self, pair: Pair<'_, Rule>) -> Stmt {
        let mut mode = None;
        let mut min_abi = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::landlock_mode => {
                    let m = if p.as_str() == "hard" {
                        LandlockMode::Hard
                    } else {
                        LandlockMode::BestEffort
                    };
                    mode = Some(Node::new(m, span_of(&p)));
                }
                Rule::int => min_abi = self.int(&p),
                _ => {}
            }
        }
        match mode {
            Some(mode) => Stmt::Landlock { mode, min_abi },
            None => Stmt::Invalid(String::new()),
        }
    }

    fn run_as(&mut self, pair: Pair<'_, Rule>) -> Stmt {
        let mut user = None;
        let mut group = None;
        let mut next_is_group = false;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::k_user => next_is_group = false,
                Rule::k_group => next_is_group = true,
                Rule::string | Rule::word => {
                    let v = self.value(p);
                    if next_is_group {
                        group = Some(v);
                    } else {
                        user = Some(v);
                    }
                }
                _ => {}
            }
        }
        Stmt::RunAs { user, group }
    }

    fn fs(&mut self, pair: Pair<'_, Rule>) -> Stmt {
        let mut kind = None;
        let mut targets = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::fs_kind => {
                    let k = match p.as_str() {
                        "read" => FsKind::Read,
                        "write" => FsKind::Write,
                        "exec" => FsKind::Exec,
                        _ => FsKind::Deny,
                    };
                    kind = Some(Node::new(k, span_of(&p)));
                }
                Rule::k_workdir => targets.push(Node::new(FsTarget::Workdir, span_of(&p))),
                Rule::string | Rule::word => {
                    let v = self.value(p);
                    targets.push(Node::new(FsTarget::Path(v.node), v.span));
                }
                _ => {}
            }
        }
        match kind {
            Some(kind) => Stmt::Fs { kind, targets },
            None => Stmt::Invalid(String::new()),
        }
    }

    fn binaries(&mut self, pair: Pair<'_, Rule>) -> Stmt {
        let mut name = None;
        let mut members: Vec<BinaryMember> = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident => name = Some(Node::new(p.as_str().to_string(), span_of(&p))),
                Rule::pin => {
                    let pin = Node::new(p.as_str().to_string(), span_of(&p));
                    match members.last_mut() {
                        Some(last) if last.pin.is_none() => last.pin = Some(pin),
                        _ => self.diags.push(
                            Diagnostic::new(
                                codes::E0308,
                                &self.file,
                                pin.span,
                                "a `sha256:` pin must follow the binary path it pins",
                            )
                            .label("this pin has no path before it")
                            .help("write the pin right after one path: `/usr/bin/git sha256:<64 hex digits>`"),
                        ),
                    }
                }
                Rule::string | Rule::word => members.push(BinaryMember {
                    path: self.value(p),
                    pin: None,
                }),
                _ => {}
            }
        }
        match name {
            Some(name) => Stmt::Binaries { name, members },
            None => Stmt::Invalid(String::new()),
        }
    }

    fn secret_source(&mut self, pair: Pair<'_, Rule>) -> Node<SecretSource> {
        let span = span_of(&pair);
        let mut is_env = true;
        let mut value = String::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::k_env => is_env = true,
                Rule::k_file => is_env = false,
                Rule::string | Rule::word => value = self.value(p).node,
                _ => {}
            }
        }
        let source = if is_env {
            SecretSource::Env(value)
        } else {
            SecretSource::File(value)
        };
        Node::new(source, span)
    }

    fn secret(&mut self, pair: Pair<'_, Rule>) -> Stmt {
        let mut name = None;
        let mut source = None;
        let mut hosts = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident => name = Some(Node::new(p.as_str().to_string(), span_of(&p))),
                Rule::secret_source => source = Some(self.secret_source(p)),
                Rule::string | Rule::word => hosts.push(self.value(p)),
                _ => {}
            }
        }
        match (name, source) {
            (Some(name), Some(source)) => Stmt::Secret {
                name,
                source,
                hosts,
            },
            _ => Stmt::Invalid(String::new()),
        }
    }

    fn credential(&mut self, pair: Pair<'_, Rule>) -> Credential {
        let mut name = Node::new(String::new(), span_of(&pair));
        let mut header_trailing = None;
        let mut leading = Vec::new();
        let mut items = Vec::new();
        let mut end = Vec::new();
        let open_line = self.file.line_col(pair.as_span().start()).0;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident => name = Node::new(p.as_str().to_string(), span_of(&p)),
                Rule::COMMENT => {
                    self.header_comment(&p, open_line, &mut header_trailing, &mut leading)
                }
                Rule::cred_body => {
                    let (i, e) = self.body(p, std::mem::take(&mut leading), Self::cred_statement);
                    items = i;
                    end = trim_blanks(e);
                }
                _ => {}
            }
        }
        Credential {
            name,
            header_trailing,
            items,
            end,
        }
    }

    fn cred_statement(&mut self, pair: Pair<'_, Rule>) -> Node<CredStmt> {
        let span = span_of(&pair);
        let rule = pair.as_rule();
        let text = pair.as_str().to_string();
        let values = |w: &mut Self, pair: Pair<'_, Rule>| -> Vec<Node<String>> {
            pair.into_inner()
                .filter(|p| matches!(p.as_rule(), Rule::string | Rule::word | Rule::method))
                .map(|p| w.value(p))
                .collect()
        };
        let stmt = match rule {
            Rule::cred_secret => match pair
                .into_inner()
                .find(|p| p.as_rule() == Rule::secret_source)
            {
                Some(src) => CredStmt::Secret(self.secret_source(src)),
                None => CredStmt::Invalid(text),
            },
            Rule::cred_placeholder => match values(self, pair).into_iter().next() {
                Some(v) => CredStmt::Placeholder(v),
                None => CredStmt::Invalid(text),
            },
            Rule::cred_inject => {
                let is_replace = pair
                    .clone()
                    .into_inner()
                    .any(|p| p.as_rule() == Rule::k_replace);
                if is_replace {
                    CredStmt::InjectReplace
                } else {
                    let mut v = values(self, pair).into_iter();
                    match (v.next(), v.next()) {
                        (Some(name), Some(template)) => CredStmt::InjectHeader { name, template },
                        _ => CredStmt::Invalid(text),
                    }
                }
            }
            Rule::cred_hosts => CredStmt::Hosts(values(self, pair)),
            Rule::cred_methods => CredStmt::Methods(values(self, pair)),
            Rule::cred_paths => CredStmt::Paths(values(self, pair)),
            _ => {
                self.reparse(Rule::strict_cred_statement, &text, span.start);
                CredStmt::Invalid(text)
            }
        };
        Node::new(stmt, span)
    }

    fn allow(&mut self, pair: Pair<'_, Rule>) -> Allow {
        let mut subjects = Vec::new();
        let mut endpoint = Node::new(String::new(), span_of(&pair));
        let mut options = Vec::new();
        let mut body: Option<EndpointBody> = None;
        let mut header_trailing = None;
        let mut leading = Vec::new();
        let open_line = self.file.line_col(pair.as_span().start()).0;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::subject => {
                    if let Some(v) = p.into_inner().next() {
                        subjects.push(self.value(v));
                    }
                }
                Rule::endpoint => {
                    if let Some(v) = p.into_inner().next() {
                        endpoint = self.value(v);
                    }
                }
                Rule::protocol_opt
                | Rule::enforcement_opt
                | Rule::access_opt
                | Rule::tls_opt
                | Rule::flag_opt => {
                    if let Some(opt) = endpoint_option(&p) {
                        options.push(Node::new(opt, span_of(&p)));
                    }
                }
                Rule::COMMENT => {
                    self.header_comment(&p, open_line, &mut header_trailing, &mut leading)
                }
                Rule::endpoint_body => {
                    let (items, end) =
                        self.body(p, std::mem::take(&mut leading), Self::endpoint_statement);
                    body = Some(EndpointBody {
                        header_trailing: header_trailing.take(),
                        items,
                        end: trim_blanks(end),
                    });
                }
                _ => {}
            }
        }
        Allow {
            subjects,
            endpoint,
            options,
            body,
        }
    }

    fn endpoint_statement(&mut self, pair: Pair<'_, Rule>) -> Node<EndpointStmt> {
        let span = span_of(&pair);
        let text = pair.as_str().to_string();
        let stmt = match pair.as_rule() {
            Rule::l7_rule => {
                let mut action = None;
                let mut methods = Vec::new();
                let mut paths = Vec::new();
                let mut query = Vec::new();
                for p in pair.into_inner() {
                    match p.as_rule() {
                        Rule::l7_action => action = Some(rule_action(&p)),
                        Rule::method => methods.push(self.value(p)),
                        Rule::string | Rule::path_word => paths.push(self.value(p)),
                        Rule::query => query.push(self.value(p)),
                        _ => {}
                    }
                }
                match action {
                    Some(action) if !paths.is_empty() => EndpointStmt::Rule {
                        action,
                        methods,
                        paths,
                        query,
                    },
                    _ => EndpointStmt::Invalid(text),
                }
            }
            Rule::rpc_rule => {
                let mut action = None;
                let mut methods = Vec::new();
                let mut tools = Vec::new();
                for p in pair.into_inner() {
                    match p.as_rule() {
                        Rule::l7_action => action = Some(rule_action(&p)),
                        Rule::rpc_method | Rule::rpc_tool => {
                            let into = if p.as_rule() == Rule::rpc_method {
                                &mut methods
                            } else {
                                &mut tools
                            };
                            if let Some(v) = p.into_inner().next() {
                                into.push(self.value(v));
                            }
                        }
                        _ => {}
                    }
                }
                match action {
                    Some(action) if !methods.is_empty() => EndpointStmt::Rpc {
                        action,
                        methods,
                        tools,
                    },
                    _ => EndpointStmt::Invalid(text),
                }
            }
            Rule::graphql_rule | Rule::persisted_stmt => {
                let persisted = pair.as_rule() == Rule::persisted_stmt;
                let whole = pair.clone();
                let mut action = None;
                let mut id = None;
                let mut types = Vec::new();
                let mut name = None;
                let mut fields = Vec::new();
                for p in pair.into_inner() {
                    match p.as_rule() {
                        Rule::l7_action => action = Some(rule_action(&p)),
                        Rule::gql_id => id = p.into_inner().next().map(|v| self.value(v)),
                        Rule::gql_type => {
                            if let Some(v) = p.into_inner().next() {
                                types.push(self.value(v));
                            }
                        }
                        Rule::gql_name => {
                            name = p
                                .into_inner()
                                .find(|v| matches!(v.as_rule(), Rule::string | Rule::word))
                                .map(|v| self.value(v));
                        }
                        Rule::gql_fields => {
                            for f in p.into_inner().filter(|f| f.as_rule() == Rule::gql_field) {
                                if let Some(v) = f.into_inner().next() {
                                    fields.push(self.value(v));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                if !persisted && types.is_empty() {
                    self.diags.push(
                        Diagnostic::new(
                            codes::E0312,
                            &self.file,
                            span_of(&whole),
                            "a graphql rule needs an operation type",
                        )
                        .label("no operation type")
                        .help("write `query`, `mutation`, `subscription` or `*` after `graphql`"),
                    );
                }
                match (persisted, action, id, types.len()) {
                    (false, Some(action), _, 1..) => EndpointStmt::Graphql {
                        action,
                        types,
                        name,
                        fields,
                    },
                    (true, _, Some(id), 1) => match types.pop() {
                        Some(kind) => EndpointStmt::Persisted {
                            id,
                            kind,
                            name,
                            fields,
                        },
                        None => EndpointStmt::Invalid(text),
                    },
                    _ => EndpointStmt::Invalid(text),
                }
            }
            Rule::body_limit_stmt => match pair.into_inner().find(|p| p.as_rule() == Rule::int) {
                Some(p) => match p.as_str().parse::<u64>() {
                    Ok(v) => EndpointStmt::BodyLimit(Node::new(v, span_of(&p))),
                    Err(_) => {
                        self.diags.push(
                            Diagnostic::new(
                                codes::E0104,
                                &self.file,
                                span_of(&p),
                                "number is too large",
                            )
                            .help("write the body limit in bytes, at most 16777216 (16 MiB)"),
                        );
                        EndpointStmt::Invalid(text)
                    }
                },
                None => EndpointStmt::Invalid(text),
            },
            Rule::path_stmt => match pair
                .into_inner()
                .find(|p| matches!(p.as_rule(), Rule::string | Rule::word))
            {
                Some(v) => EndpointStmt::Path(self.value(v)),
                None => EndpointStmt::Invalid(text),
            },
            Rule::addresses_stmt => EndpointStmt::Addresses(
                pair.into_inner()
                    .filter(|p| matches!(p.as_rule(), Rule::string | Rule::word))
                    .map(|p| self.value(p))
                    .collect(),
            ),
            _ => {
                self.reparse(Rule::strict_endpoint_statement, &text, span.start);
                EndpointStmt::Invalid(text)
            }
        };
        Node::new(stmt, span)
    }

    /// A token's value: quoted strings are unescaped, words taken as written.
    fn value(&mut self, pair: Pair<'_, Rule>) -> Node<String> {
        if pair.as_rule() == Rule::string {
            return self.string(pair);
        }
        Node::new(pair.as_str().to_string(), span_of(&pair))
    }

    fn string(&mut self, pair: Pair<'_, Rule>) -> Node<String> {
        let span = span_of(&pair);
        let raw = pair
            .into_inner()
            .next()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        Node::new(unescape(&raw), span)
    }

    fn int(&mut self, pair: &Pair<'_, Rule>) -> Option<Node<u32>> {
        match pair.as_str().parse::<u32>() {
            Ok(v) => Some(Node::new(v, span_of(pair))),
            Err(_) => {
                self.diags.push(
                    Diagnostic::new(
                        codes::E0104,
                        &self.file,
                        span_of(pair),
                        "number is too large",
                    )
                    .help("use a small whole number, such as `4`"),
                );
                None
            }
        }
    }

    /// Re-parse the text of a bad statement with a strict rule and report
    /// pest's error at its real position in the file.
    fn reparse(&mut self, rule: Rule, text: &str, offset: usize) {
        match PolicyParser::parse(rule, text) {
            Err(err) => self.pest_error(&err, offset, text),
            Ok(_) => {
                // The strict rule accepts what the lenient parse rejected only
                // when context (such as a block's closing brace) was the
                // problem; report it at the statement.
                let end = offset + text.len();
                self.diags.push(
                    Diagnostic::new(
                        codes::E0100,
                        &self.file,
                        Span::new(offset, end),
                        "statement is not valid here",
                    )
                    .help("check that the statement is inside the right block"),
                );
            }
        }
    }

    fn pest_error(&mut self, err: &pest::error::Error<Rule>, offset: usize, text: &str) {
        use pest::error::{ErrorVariant, InputLocation};
        let pos = match err.location {
            InputLocation::Pos(p) => p,
            InputLocation::Span((s, _)) => s,
        };
        let at = offset + pos;
        let full = if text.is_empty() {
            self.file.text()
        } else {
            text
        };
        let found = found_token(full, pos);
        let (message, help) = match &err.variant {
            ErrorVariant::ParsingError { positives, .. } => {
                let expected = describe_expected(positives);
                let message = if found.is_empty() {
                    format!("expected {expected}")
                } else if found == "end of line" {
                    format!("expected {expected}, found the end of the line")
                } else {
                    format!("expected {expected}, found `{found}`")
                };
                let help = help_for(positives);
                let help = match closest_option(positives, &found)
                    .or_else(|| closest_keyword(positives, &found))
                {
                    Some(k) => format!("did you mean `{k}`? {help}"),
                    None => help,
                };
                (message, help)
            }
            ErrorVariant::CustomError { message } => (message.clone(), String::new()),
        };
        // A bad statement whose first word is already wrong is an unknown
        // statement; anything else is a syntax error inside a statement.
        let code = if !text.is_empty() && pos == 0 {
            codes::E0101
        } else {
            codes::E0100
        };
        let message = if code == codes::E0101 {
            format!("unknown statement `{}`", first_word(full))
        } else {
            message
        };
        let help = if code == codes::E0101 {
            let all = "statements are: include, landlock, run_as, fs, binaries, credential, secret, allow, advisor (inside an endpoint block: allow, deny, path, addresses, body_limit, persisted; inside a credential block: secret, placeholder, inject, hosts, methods, paths)";
            match closest_statement(first_word(full)) {
                Some(k) => format!("did you mean `{k}`? {all}"),
                None => all.to_string(),
            }
        } else {
            help
        };
        let len = if found == "end of line" {
            1
        } else {
            found.len().max(1)
        };
        let mut span = Span::new(at, (at + len).min(self.file.text().len().max(at)));
        // `agent->host:443` is one word to the grammar, a binary named
        // all of it; say what was meant rather than "expected `->`".
        let (message, help) = match glued_arrow(full).filter(|_| code == codes::E0100) {
            Some((start, word)) if matches!(&err.variant, ErrorVariant::ParsingError { positives, .. } if positives.contains(&Rule::arrow) || positives.contains(&Rule::subject)) =>
            {
                span = Span::new(offset + start, offset + start + word.len());
                let spaced = word.replacen("->", " -> ", 1);
                (
                    format!("`{word}` reads as one binary name: `->` needs a space on each side"),
                    format!("write `{}`", spaced.trim()),
                )
            }
            _ => (message, help),
        };
        self.diags.push(
            Diagnostic::new(code, &self.file, span, message)
                .label("here")
                .help(help),
        );
    }
}

fn endpoint_option(pair: &Pair<'_, Rule>) -> Option<EndpointOption> {
    let text = pair.as_str();
    Some(match pair.as_rule() {
        Rule::protocol_opt => EndpointOption::Protocol(match text {
            "http" => Protocol::Http,
            "tcp" => Protocol::Tcp,
            "mcp" => Protocol::Mcp,
            "json-rpc" => Protocol::JsonRpc,
            "graphql" => Protocol::Graphql,
            "websocket" => Protocol::Websocket,
            _ => Protocol::L4,
        }),
        Rule::enforcement_opt => EndpointOption::Enforcement(if text == "audit" {
            Enforcement::Audit
        } else {
            Enforcement::Enforce
        }),
        Rule::access_opt => EndpointOption::Access(match text {
            "read-only" => Access::ReadOnly,
            "read-write" => Access::ReadWrite,
            _ => Access::Full,
        }),
        Rule::tls_opt => EndpointOption::Tls(if text.ends_with("skip") {
            TlsMode::Skip
        } else {
            TlsMode::Auto
        }),
        Rule::flag_opt => match text {
            "encoded_slash" => EndpointOption::EncodedSlash,
            "fold_paths" => EndpointOption::FoldPaths,
            "all_mcp_methods" => EndpointOption::AllMcpMethods,
            "loose_tool_names" => EndpointOption::LooseToolNames,
            "websocket_credential_rewrite" => EndpointOption::WebsocketCredentialRewrite,
            "request_body_credential_rewrite" => EndpointOption::RequestBodyCredentialRewrite,
            _ => EndpointOption::UninspectedCredentials,
        },
        _ => return None,
    })
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Drop leading and trailing blank lines and collapse runs of blanks.
fn trim_blanks(lines: Vec<TriviaLine>) -> Vec<TriviaLine> {
    let mut out: Vec<TriviaLine> = Vec::new();
    for l in lines {
        if l == TriviaLine::Blank && (out.is_empty() || out.last() == Some(&TriviaLine::Blank)) {
            continue;
        }
        out.push(l);
    }
    while out.last() == Some(&TriviaLine::Blank) {
        out.pop();
    }
    out
}

fn trim_leading_blanks(lines: Vec<TriviaLine>, first_in_block: bool) -> Vec<TriviaLine> {
    let mut out: Vec<TriviaLine> = Vec::new();
    for l in lines {
        if l == TriviaLine::Blank
            && ((first_in_block && out.is_empty()) || out.last() == Some(&TriviaLine::Blank))
        {
            continue;
        }
        out.push(l);
    }
    out
}

/// Every statement keyword, for "did you mean".
const STATEMENTS: &[&str] = &[
    "include",
    "landlock",
    "run_as",
    "fs",
    "binaries",
    "credential",
    "secret",
    "allow",
    "advisor",
    "deny",
    "path",
    "addresses",
    "placeholder",
    "inject",
    "hosts",
    "methods",
    "paths",
];

/// The statement keyword a misspelt word most likely meant: within two
/// edits, and closer than to any other keyword.
fn closest_statement(word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for k in STATEMENTS {
        let d = edit_distance(&word, k);
        if d <= 2 && d < k.len() && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Every one-word endpoint option, for "did you mean".
const OPTIONS: &[&str] = &[
    "http",
    "mcp",
    "json-rpc",
    "graphql",
    "websocket",
    "tcp",
    "l4",
    "enforce",
    "audit",
    "read-only",
    "read-write",
    "full",
    "tls",
    "encoded_slash",
    "fold_paths",
    "uninspected_credentials",
    "websocket_credential_rewrite",
    "request_body_credential_rewrite",
    "all_mcp_methods",
    "loose_tool_names",
];

/// The endpoint option a misspelt word most likely meant, where the
/// parser expected an option: within two edits, and closer than to any
/// other option.
fn closest_option(expected: &[Rule], found: &str) -> Option<&'static str> {
    let wants_option = expected.iter().any(|r| {
        matches!(
            r,
            Rule::protocol_opt
                | Rule::enforcement_opt
                | Rule::access_opt
                | Rule::tls_opt
                | Rule::flag_opt
        )
    });
    if !wants_option || found.is_empty() || found == "end of line" {
        return None;
    }
    let word = found.to_ascii_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for k in OPTIONS {
        let d = edit_distance(&word, k);
        if d <= 2 && d < k.len() && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// The words a keyword rule of the grammar stands for.
fn keywords(rule: Rule) -> &'static [&'static str] {
    match rule {
        Rule::k_include => &["include"],
        Rule::k_landlock => &["landlock"],
        Rule::k_min_abi => &["min_abi"],
        Rule::k_run_as => &["run_as"],
        Rule::k_user => &["user"],
        Rule::k_group => &["group"],
        Rule::k_fs => &["fs"],
        Rule::k_workdir => &["workdir"],
        Rule::k_binaries => &["binaries"],
        Rule::k_credential => &["credential"],
        Rule::k_secret => &["secret"],
        Rule::k_env => &["env"],
        Rule::k_file => &["file"],
        Rule::k_placeholder => &["placeholder"],
        Rule::k_inject => &["inject"],
        Rule::k_header => &["header"],
        Rule::k_replace => &["replace"],
        Rule::k_hosts => &["hosts"],
        Rule::k_methods => &["methods"],
        Rule::k_paths => &["paths"],
        Rule::k_allow => &["allow"],
        Rule::k_deny => &["deny"],
        Rule::k_path => &["path"],
        Rule::k_addresses => &["addresses"],
        Rule::k_rpc => &["rpc"],
        Rule::k_tool => &["tool"],
        Rule::k_body_limit => &["body_limit"],
        Rule::k_graphql => &["graphql"],
        Rule::k_name => &["name"],
        Rule::k_field => &["field"],
        Rule::k_persisted => &["persisted"],
        Rule::landlock_mode => &["best_effort", "hard"],
        Rule::fs_kind => &["read", "write", "exec", "deny"],
        Rule::tls_mode => &["auto", "skip"],
        Rule::l7_action => &["allow", "deny"],
        Rule::doc_kind => &["policy", "fragment"],
        _ => &[],
    }
}

/// The keyword a misspelt word most likely meant, among those the parser
/// expected there (`inject replce` → `replace`): within two edits, and
/// closer than to any other. Where the parser expected a name, a value or
/// a path, any word is fine there and nothing is suggested.
fn closest_keyword(expected: &[Rule], found: &str) -> Option<&'static str> {
    if found.is_empty() || found == "end of line" {
        return None;
    }
    let open = expected
        .iter()
        .any(|r| matches!(r, Rule::ident | Rule::word | Rule::string | Rule::path_word));
    if open {
        return None;
    }
    let word = found.to_ascii_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for k in expected.iter().flat_map(|r| keywords(*r)) {
        let d = edit_distance(&word, k);
        if d <= 2 && d < k.len() && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev
                .get(j)
                .map_or(usize::MAX, |p| p + usize::from(ca != *cb));
            let delete = prev.get(j + 1).map_or(usize::MAX, |p| p + 1);
            let insert = cur.last().map_or(usize::MAX, |c| c + 1);
            cur.push(substitute.min(delete).min(insert));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// The first word holding `->` with something glued to it, and where it
/// starts in `text`.
fn glued_arrow(text: &str) -> Option<(usize, &str)> {
    let mut at = 0;
    for word in text.split_inclusive(char::is_whitespace) {
        let w = word.trim_end();
        if w.len() > 2 && w.contains("->") && !w.starts_with('"') {
            return Some((at, w));
        }
        at += word.len();
    }
    None
}

fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

fn found_token(text: &str, pos: usize) -> String {
    let rest = text.get(pos..).unwrap_or("");
    if rest.is_empty() || rest.starts_with('\n') || rest.starts_with("\r\n") {
        return "end of line".to_string();
    }
    let tok: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(40)
        .collect();
    tok
}

fn describe_expected(rules: &[Rule]) -> String {
    // A comment may start almost anywhere; listing it says nothing useful.
    let mut names: Vec<&str> = rules
        .iter()
        .filter(|r| **r != Rule::COMMENT)
        .map(|r| describe_rule(*r))
        .collect();
    names.sort_unstable();
    names.dedup();
    match names.as_slice() {
        [] => "something else".to_string(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

fn describe_rule(rule: Rule) -> &'static str {
    match rule {
        Rule::ident => "a name",
        Rule::int => "a number",
        Rule::string => "a quoted string",
        Rule::word => "a value",
        Rule::pin => "a `sha256:` pin",
        Rule::query => "a query matcher `?key=glob`",
        Rule::method => "an HTTP method",
        Rule::path_word => "a path starting with `/`",
        Rule::arrow | Rule::subject => "`->` or a binary",
        Rule::endpoint => "an endpoint `host:port`",
        Rule::k_include => "`include`",
        Rule::k_landlock => "`landlock`",
        Rule::k_min_abi => "`min_abi`",
        Rule::k_run_as => "`run_as`",
        Rule::k_user => "`user`",
        Rule::k_group => "`group`",
        Rule::k_fs => "`fs`",
        Rule::k_workdir => "`workdir`",
        Rule::k_binaries => "`binaries`",
        Rule::k_credential => "`credential`",
        Rule::k_secret => "`secret`",
        Rule::k_env | Rule::k_file => "`env` or `file`",
        Rule::k_placeholder => "`placeholder`",
        Rule::k_inject => "`inject`",
        Rule::k_header | Rule::k_replace => "`header` or `replace`",
        Rule::k_hosts => "`hosts`",
        Rule::k_methods => "`methods`",
        Rule::k_paths => "`paths`",
        Rule::k_allow => "`allow`",
        Rule::k_deny => "`deny`",
        Rule::k_path => "`path`",
        Rule::k_addresses => "`addresses`",
        Rule::k_rpc => "`rpc`",
        Rule::k_tool => "`tool`",
        Rule::k_body_limit => "`body_limit`",
        Rule::k_graphql => "`graphql`",
        Rule::k_name => "`name`",
        Rule::k_field => "`field`",
        Rule::k_persisted => "`persisted`",
        Rule::k_advisor => "`advisor`",
        Rule::advisor_subject => "a binary set or path",
        Rule::gql_type => "a GraphQL operation type (`query`, `mutation`, `subscription` or `*`)",
        Rule::gql_name => "`name` and an operation-name glob",
        Rule::gql_fields => "`field` and root-field globs",
        Rule::gql_field => "a root-field glob",
        Rule::gql_id => "a persisted-query hash or id",
        Rule::rpc_method => "a JSON-RPC method",
        Rule::rpc_tool => "a tool name or glob",
        Rule::landlock_mode => "`best_effort` or `hard`",
        Rule::fs_kind => "`read`, `write`, `exec` or `deny`",
        Rule::protocol_opt
        | Rule::enforcement_opt
        | Rule::access_opt
        | Rule::tls_opt
        | Rule::flag_opt => "an endpoint option",
        Rule::tls_mode => "`auto` or `skip`",
        Rule::l7_action => "`allow` or `deny`",
        Rule::doc_kind => "`policy` or `fragment`",
        Rule::close => "`}`",
        Rule::EOI => "end of line",
        _ => "end of line",
    }
}

fn help_for(rules: &[Rule]) -> String {
    if rules.contains(&Rule::arrow) || rules.contains(&Rule::subject) {
        return "an endpoint rule reads `allow BINARIES -> HOST:PORT [OPTIONS] [{ ... }]`"
            .to_string();
    }
    if rules.iter().any(|r| {
        matches!(
            r,
            Rule::protocol_opt
                | Rule::enforcement_opt
                | Rule::access_opt
                | Rule::tls_opt
                | Rule::flag_opt
        )
    }) {
        return "endpoint options are: http, mcp, json-rpc, graphql, websocket, tcp, l4, enforce, audit, read-only, read-write, full, tls auto, tls skip, encoded_slash, fold_paths, uninspected_credentials, websocket_credential_rewrite, request_body_credential_rewrite, all_mcp_methods, loose_tool_names; a block starts with `{` at the end of the line".to_string();
    }
    if rules.contains(&Rule::doc_kind) {
        return "a file holds one `policy \"name\" { ... }` or `fragment \"name\" { ... }`"
            .to_string();
    }
    if rules.contains(&Rule::rpc_method)
        || rules.contains(&Rule::rpc_tool)
        || rules.contains(&Rule::k_tool)
    {
        return "an rpc rule reads `allow|deny rpc METHOD... [tool GLOB...]`".to_string();
    }
    if [
        Rule::gql_type,
        Rule::gql_name,
        Rule::gql_fields,
        Rule::gql_field,
        Rule::gql_id,
    ]
    .iter()
    .any(|g| rules.contains(g))
    {
        return "a graphql rule reads `allow|deny graphql TYPES... [name GLOB] [field GLOB...]`; a registry entry `persisted ID TYPE [name NAME] [field NAME...]`".to_string();
    }
    if rules.contains(&Rule::method)
        || rules.contains(&Rule::query)
        || rules.contains(&Rule::path_word)
    {
        return "an L7 rule reads `allow|deny METHOD... /path/glob... [?key=glob]...`".to_string();
    }
    if rules.contains(&Rule::close) {
        return "close the block with `}` on a line of its own".to_string();
    }
    "see docs/language.md for the statement forms".to_string()
}

/// `allow` or `deny` at the head of an endpoint rule.
fn rule_action(p: &Pair<'_, Rule>) -> Node<RuleAction> {
    let a = if p.as_str() == "deny" {
        RuleAction::Deny
    } else {
        RuleAction::Allow
    };
    Node::new(a, span_of(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Document {
        let f = SourceFile::new("t.policy", text);
        let (doc, diags) = parse(&f);
        let msgs: Vec<_> = diags.iter().map(|d| d.message.clone()).collect();
        assert!(msgs.is_empty(), "{msgs:?}");
        doc.unwrap()
    }

    #[test]
    fn parses_the_design_example() {
        let doc = parse_ok(
            r#"# header
policy "github-readonly" {
  landlock hard min_abi 4
  run_as user sandbox group sandbox

  fs read  /usr /lib /etc /proc
  fs write /sandbox /tmp workdir
  fs exec  /usr/bin /usr/local/bin

  credential github_pat {
    secret env GITHUB_TOKEN            # read by the supervisor
    inject header Authorization "Bearer {secret}"
    hosts api.github.com
  }

  binaries agent = /usr/local/bin/claude /usr/bin/git sha256:abcd /usr/bin/curl

  allow agent -> api.github.com:443 http {
    allow GET HEAD /repos/** ?per_page=1*
    deny  *        /repos/*/*/rulesets
  }
  allow /usr/bin/git -> github.com:443 http audit read-only
}
"#,
        );
        assert_eq!(doc.name.node, "github-readonly");
        assert_eq!(doc.items.len(), 9);
        assert_eq!(doc.header, vec![TriviaLine::Comment("header".into())]);
        let Stmt::Allow(a) = &doc.items[7].stmt.node else {
            panic!()
        };
        assert_eq!(a.endpoint.node, "api.github.com:443");
        assert_eq!(a.body.as_ref().unwrap().items.len(), 2);
        let Stmt::Binaries { members, .. } = &doc.items[6].stmt.node else {
            panic!()
        };
        assert_eq!(members[1].pin.as_ref().unwrap().node, "sha256:abcd");
    }

    #[test]
    fn reports_every_bad_line_with_position() {
        let text = "policy \"p\" {\n  fs reed /usr\n  allow x -> h:1 bogus\n  frobnicate\n  fs read /ok\n}\n";
        let f = SourceFile::new("t.policy", text);
        let (doc, diags) = parse(&f);
        for d in diags.iter() {
            eprintln!("{:?} {} {:?}", d.line_col(), d.message, d.code.id);
        }
        let doc = doc.unwrap();
        let found: Vec<_> = diags.iter().map(|d| (d.code.id, d.line_col())).collect();
        assert_eq!(
            found,
            vec![("E0100", (2, 6)), ("E0100", (3, 18)), ("E0101", (4, 3))]
        );
        assert!(matches!(doc.items[3].stmt.node, Stmt::Fs { .. }));
    }

    #[test]
    fn a_misspelt_statement_gets_a_suggestion() {
        assert_eq!(closest_statement("alow"), Some("allow"));
        assert_eq!(closest_statement("binarys"), Some("binaries"));
        assert_eq!(closest_statement("Fs"), Some("fs"));
        assert_eq!(closest_statement("frobnicate"), None);
        let file = SourceFile::new(
            "t.policy",
            "policy \"p\" {\n  alow /usr/bin/x -> a.example.com:443\n}\n",
        );
        let (_, diags) = parse(&file);
        let d = diags.iter().find(|d| d.code.id == "E0101").unwrap();
        assert!(d.help.starts_with("did you mean `allow`?"), "{}", d.help);
    }

    #[test]
    fn a_misspelt_endpoint_option_gets_a_suggestion() {
        let file = SourceFile::new(
            "t.policy",
            "policy \"p\" {\n  allow /usr/bin/x -> a.example.com:443 https read-only\n}\n",
        );
        let (_, diags) = parse(&file);
        let d = diags.iter().find(|d| d.code.id == "E0100").unwrap();
        assert!(d.help.starts_with("did you mean `http`?"), "{}", d.help);
        assert!(d.help.contains("endpoint options are:"), "{}", d.help);
        let far = SourceFile::new(
            "t.policy",
            "policy \"p\" {\n  allow /usr/bin/x -> a.example.com:443 frobnicate\n}\n",
        );
        let (_, diags) = parse(&far);
        let d = diags.iter().find(|d| d.code.id == "E0100").unwrap();
        assert!(!d.help.contains("did you mean"), "{}", d.help);
    }

    #[test]
    fn an_empty_or_comment_only_file_is_an_error() {
        for text in ["", "# nothing here\n\n"] {
            let (doc, diags) = parse(&SourceFile::new("e.policy", text));
            assert!(doc.is_none());
            let codes: Vec<_> = diags.iter().map(|d| d.code.id).collect();
            assert_eq!(codes, ["E0106"], "{text:?}");
        }
    }

    #[test]
    fn comments_after_an_opening_brace_lead_the_first_item() {
        let text = "policy \"p\" {  # on the header\n  # first\n  fs read /usr\n  allow /usr/bin/x -> h.example.com:443 http {\n    # rule note\n    allow GET /a\n  }\n}\n";
        let doc = parse_ok(text);
        assert_eq!(doc.header_trailing.as_deref(), Some("on the header"));
        assert_eq!(
            doc.items[0].trivia.before,
            vec![TriviaLine::Comment("first".into())]
        );
        let Stmt::Allow(a) = &doc.items[1].stmt.node else {
            panic!()
        };
        let body = a.body.as_ref().unwrap();
        assert_eq!(body.header_trailing, None);
        assert_eq!(
            body.items[0].trivia.before,
            vec![TriviaLine::Comment("rule note".into())]
        );
        let formatted = crate::fmt::format_document(&doc);
        assert_eq!(formatted, text);
    }

    #[test]
    fn end_of_line_comments_stay_with_their_statement() {
        let text = "policy \"p\" {\n  fs read /usr  # system\n  binaries b = /usr/bin/x /usr/bin/y  # tools\n  allow b -> h.example.com:443 http read-only  # api\n  allow b -> g.example.com:443 http {\n    allow GET /a /b ?x=1  # rule\n    addresses 10.0.0.0/8  # net\n  }  # end\n  credential c {\n    hosts a.example.com b.example.com  # hosts\n  }\n}\n";
        let (doc, _) = parse(&SourceFile::new("t.policy", text));
        let doc = doc.unwrap();
        let trailing: Vec<_> = doc
            .items
            .iter()
            .map(|i| i.trivia.trailing.clone())
            .collect();
        assert_eq!(
            trailing[..4],
            [
                Some("system".into()),
                Some("tools".into()),
                Some("api".into()),
                Some("end".into())
            ]
        );
        assert_eq!(crate::fmt::format_document(&doc), text);
    }

    #[test]
    fn control_characters_are_a_syntax_error() {
        let text =
            "policy \"p\" {\n  allow /usr/bin/x -> a\u{b}b.example.com:443\n  fs read /usr\n}\n";
        let (doc, diags) = parse(&SourceFile::new("t.policy", text));
        assert_eq!(diags.len(), 1);
        assert_eq!(doc.unwrap().items.len(), 2);
    }

    #[test]
    fn bad_block_header_skips_its_block() {
        let text = "policy \"p\" {\n  allow x -> h:1 http wat {\n    allow GET /a\n  }\n  fs read /ok\n}\n";
        let f = SourceFile::new("t.policy", text);
        let (doc, diags) = parse(&f);
        assert_eq!(diags.len(), 1);
        assert_eq!(doc.unwrap().items.len(), 2);
    }
}
