//! The checks OpenShell makes on `protocol: websocket` endpoints, made
//! errors here: a rule that could never match (a method other than the
//! upgrade and text messages) or that the runtime would ignore (a raw text
//! allowance where GraphQL rules judge every message) would otherwise mean
//! less than it says.

use crate::ast::Protocol;
use crate::diag::{Diagnostic, codes};
use crate::source::{Node, SourceFile, Span};
use policy_bundle::matcher::{MethodSet, WEBSOCKET_TEXT};

use super::super::Resolver;

/// The methods an access preset on a websocket endpoint allows, as
/// OpenShell expands them: `read-only` is the upgrade alone, `read-write`
/// the upgrade and client text messages, `full` both (`*`).
pub(super) fn preset_methods(access: crate::ast::Access) -> MethodSet {
    use crate::ast::Access;
    let words = match access {
        Access::ReadOnly => "GET",
        Access::ReadWrite => "GET WEBSOCKET_TEXT",
        Access::Full => "*",
    };
    MethodSet::parse(words).unwrap_or(MethodSet::Any)
}

/// Refuses methods that do not fit the endpoint's protocol: on a websocket
/// endpoint only `GET`, `WEBSOCKET_TEXT` and `*`; elsewhere no
/// `WEBSOCKET_TEXT`. True when every method fits.
pub(super) fn check_methods(
    r: &mut Resolver,
    file: &SourceFile,
    proto: Protocol,
    methods: &[Node<String>],
) -> bool {
    let mut ok = true;
    for m in methods {
        let upper = m.node.to_ascii_uppercase();
        let words = upper
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty());
        for word in words {
            let fits = if proto == Protocol::Websocket {
                matches!(word, "GET" | WEBSOCKET_TEXT | "*")
            } else {
                word != WEBSOCKET_TEXT
            };
            if fits {
                continue;
            }
            ok = false;
            let diag = if proto == Protocol::Websocket {
                Diagnostic::new(
                    codes::E0306,
                    file,
                    m.span,
                    format!("`{word}` is not a WebSocket action"),
                )
                .label("not `GET`, `WEBSOCKET_TEXT` or `*`")
                .help("a websocket endpoint's rules take `GET` (the upgrade handshake), `WEBSOCKET_TEXT` (client text messages on the upgraded path) or `*` (both); other HTTP requests belong on an `http` endpoint")
            } else {
                Diagnostic::new(
                    codes::E0501,
                    file,
                    m.span,
                    "`WEBSOCKET_TEXT` needs the `websocket` protocol",
                )
                .label("needs `websocket`")
                .help("add `websocket` to the rule's options; client messages are judged only on websocket endpoints")
            };
            r.diags.push(diag);
        }
    }
    ok
}

/// Whether a line's methods name `WEBSOCKET_TEXT` itself (not `*`).
pub(super) fn names_text(methods: &[Node<String>]) -> bool {
    methods.iter().any(|m| {
        m.node
            .split(|c: char| c == ',' || c.is_whitespace())
            .any(|w| w.eq_ignore_ascii_case(WEBSOCKET_TEXT))
    })
}

/// What a websocket endpoint's rules must satisfy together.
#[derive(Default)]
pub(super) struct WebsocketChecks {
    /// Allow lines (or a `read-write` preset) that name `WEBSOCKET_TEXT`.
    pub(super) text_allows: Vec<Span>,
    /// Some REST allow rule or preset exists.
    pub(super) any_allow: bool,
}

impl WebsocketChecks {
    /// `graphql_policy`: the endpoint has GraphQL rules or a registry, so
    /// every client text message is a GraphQL-over-WebSocket message.
    pub(super) fn check(
        &self,
        r: &mut Resolver,
        file: &SourceFile,
        endpoint: Span,
        graphql_policy: bool,
        graphql_allow: bool,
        refused: bool,
    ) {
        if graphql_policy {
            for s in &self.text_allows {
                r.diags.push(
                    Diagnostic::new(
                        codes::E0507,
                        file,
                        *s,
                        "a `WEBSOCKET_TEXT` allowance beside GraphQL rules",
                    )
                    .label("would allow no message")
                    .help("with GraphQL rules every client text message is judged as a GraphQL-over-WebSocket message; allow operations with `allow graphql TYPES...` and keep `allow GET PATH` (or `read-only`) for the upgrade"),
                );
            }
        }
        if !self.any_allow && !graphql_allow && !refused {
            r.diags.push(
                Diagnostic::new(
                    codes::E0503,
                    file,
                    endpoint,
                    "this `websocket` endpoint has no access preset and no allow rule",
                )
                .label("allows no upgrade")
                .help("add an access preset (`read-only` is the upgrade, `read-write` the upgrade and client text messages, `full` both) or `allow GET PATH` and `allow WEBSOCKET_TEXT PATH` lines in a block"),
            );
        }
    }
}
