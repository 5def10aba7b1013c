//! Which GraphQL operation a request asks the server to run, for
//! `protocol graphql` endpoints and GraphQL-over-WebSocket.
//!
//! The answer is what GraphQL allow and deny rules match: the operation
//! type, the operation name, and the root fields (field names, never
//! aliases, after expanding fragment spreads and inline fragments at the
//! root), or only a persisted-query hash when no document was sent.
//!
//! It follows OpenShell's runtime (its `l7/graphql.rs` and the WebSocket
//! classifier), which parses documents with `apollo-parser` too (here a
//! purpose-built reader answers first wherever it reads exactly as
//! `apollo-parser` does; see `reader.rs`), and is
//! stricter wherever OpenShell is lax, because a request whose reading is
//! ambiguous must not pass on the milder reading:
//!
//! - duplicate JSON members anywhere in the request are refused (OpenShell's
//!   JSON reader keeps the last one; a server may keep the first);
//! - unknown request members and GET parameters are refused, since a server
//!   may take the document from a member the analysis never read;
//! - a document sent with a saved-query id, or with both a hash and an id,
//!   is refused: which one a server runs is up to the server;
//! - an APQ request (document and `sha256Hash`) must carry the document's
//!   own hash, so a server that trusts the hash runs the analysed document;
//! - two operations with one name, an anonymous operation beside others,
//!   two fragments with one name, an undefined fragment and a fragment cycle
//!   on the root selection are refused (OpenShell picks one, or skips);
//! - type-system definitions in a request document are refused;
//! - an invalid `extensions` parameter in a GET is refused, not ignored.
//!
//! Directives are not evaluated: a root field under `@skip(if: true)`
//! still counts, which can only report more than the server runs.

mod cache;
mod document;
mod envelope;
mod expand;
mod json;
mod lexer;
mod reader;
#[cfg(test)]
mod reader_tests;
#[cfg(test)]
mod tests;
mod ws;

pub(crate) use crate::matcher::OperationType;
use crate::matcher::PatternError;
pub(crate) use cache::DocumentCache;
pub use envelope::check_content_type;
pub use ws::{WsMessage, classify_ws_text};

// Shared by the two parsers (`document`, `reader`), which must agree on them.

/// Selection sets nested this deep are refused (OpenShell allows 128; real
/// queries stay far below 32).
const RECURSION_LIMIT: usize = 64;

/// Lexer tokens per document, whitespace runs included. A document within
/// the default body limit cannot reach it (a token is at least a byte), so
/// it only bounds the parse time on endpoints with a larger limit. OpenShell
/// stops at 20,000, which a pretty-printed query near 64 KiB can reach.
const TOKEN_LIMIT: usize = 65_536;

/// The selected operation of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Selected {
    kind: OperationType,
    name: Option<String>,
    root_fields: Vec<String>,
}

/// Body bytes buffered for inspection unless the endpoint says otherwise;
/// OpenShell's `graphql_max_body_bytes` default.
pub const DEFAULT_BODY_LIMIT: usize = 65536;

/// What one GraphQL request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum GraphqlOp {
    /// A document was sent: the selected operation, with root fields after
    /// fragment expansion (field names, not aliases), deduplicated, sorted.
    Parsed {
        /// `query`, `mutation` or `subscription`.
        kind: OperationType,
        /// `None` for an anonymous operation.
        name: Option<String>,
        /// What the rules' `field` globs are matched against.
        root_fields: Vec<String>,
        /// The APQ hash sent along, checked to be the document's own.
        persisted_hash: Option<String>,
    },
    /// Only a persisted-query hash (or saved-query id) was sent: what runs
    /// is whatever the server stored under it, so only a trusted registry
    /// can say what it is.
    Persisted {
        /// The hash or id exactly as sent, looked up in the endpoint's registry.
        hash: String,
        /// The `operationName` sent, unchecked: nothing ties it to the stored document.
        name: Option<String>,
    },
}

impl GraphqlOp {
    /// The operation type, when a document says it.
    pub fn kind(&self) -> Option<OperationType> {
        match self {
            Self::Parsed { kind, .. } => Some(*kind),
            Self::Persisted { .. } => None,
        }
    }

    /// The operation name: the selected operation's own name for a document,
    /// the request's `operationName` for a hash-only request.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Parsed { name, .. } | Self::Persisted { name, .. } => name.as_deref(),
        }
    }

    /// The root fields; none for a hash-only request.
    pub fn root_fields(&self) -> &[String] {
        match self {
            Self::Parsed { root_fields, .. } => root_fields,
            Self::Persisted { .. } => &[],
        }
    }
}

/// Why a request cannot be read exactly. The proxy denies every one of
/// them; the messages go to the deny log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphqlError {
    /// Read no further than the limit, so it is never parsed at all.
    #[error("GraphQL request of {len} bytes is over the {limit}-byte inspection limit")]
    TooLarge {
        /// Bytes sent, or at least the limit plus one.
        len: usize,
        /// The endpoint's `body_limit`, in bytes.
        limit: usize,
    },
    /// A POST without a body.
    #[error("GraphQL request body is empty")]
    EmptyBody,
    /// Refused rather than skipped: parsers disagree on it.
    #[error("GraphQL request starts with a byte order mark")]
    ByteOrderMark,
    /// Refused: lossy decoding would let two readings differ.
    #[error("GraphQL request is not UTF-8 (byte {offset})")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The body is not JSON.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    MalformedJson {
        /// serde_json's description.
        message: String,
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
    },
    /// Refused because parsers differ on which of the two wins.
    #[error("duplicate JSON member `{key}` at line {line}, column {column}")]
    DuplicateKey {
        /// The member named twice.
        key: String,
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
    },
    /// Nesting bounded so that reading cannot exhaust the stack.
    #[error("JSON nested deeper than {limit} levels at line {line}, column {column}")]
    TooDeep {
        /// Levels; fixed, not a policy setting.
        limit: usize,
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
    },
    /// A JSON scalar, or an array holding one.
    #[error("GraphQL request must be a JSON object or a batch (array) of objects")]
    NotAnObject,
    /// `[]`: nothing to judge, so nothing to allow.
    #[error("GraphQL batch is empty")]
    EmptyBatch,
    /// A member the GraphQL-over-HTTP spec does not define; it could carry what the server runs.
    #[error("unknown GraphQL request member `{key}`")]
    UnknownMember {
        /// As sent.
        key: String,
    },
    /// A known member of the wrong JSON type.
    #[error("GraphQL request member `{member}` must be {expected}")]
    WrongType {
        /// `query`, `operationName`, `variables` or `extensions`.
        member: &'static str,
        /// The type the spec requires, in words.
        expected: &'static str,
    },
    /// A GET whose query string does not decode.
    #[error("malformed query string: {0}")]
    QueryString(PatternError),
    /// Parsers differ on which repeated parameter wins.
    #[error("GraphQL GET parameter `{key}` appears more than once")]
    DuplicateParam {
        /// The parameter named twice.
        key: String,
    },
    /// Only JSON and `application/graphql` bodies are read; anything else would be guessed.
    #[error("unsupported GraphQL request Content-Type `{content_type}`")]
    UnsupportedContentType {
        /// As sent, parameters included.
        content_type: String,
    },
    /// Nothing says what would run.
    #[error("GraphQL request has neither a document nor a persisted-query hash or id")]
    NoQuery,
    /// Two ways to name a stored query: which one the server uses is not known.
    #[error("GraphQL request names a persisted query twice: `{first}` and `{second}`")]
    SeveralPersistedIds {
        /// The member read first.
        first: &'static str,
        /// The other member.
        second: &'static str,
    },
    /// The server could run either.
    #[error("GraphQL request sends both a document and a saved-query id `{member}`")]
    DocumentAndSavedId {
        /// The saved-query member sent.
        member: &'static str,
    },
    /// APQ lets a client send a hash with a document; one that is not the document's own would register a different query under it.
    #[error("persisted-query hash `{hash}` is not the SHA-256 of the document sent")]
    HashMismatch {
        /// As sent.
        hash: String,
    },
    /// The document does not parse.
    #[error("malformed GraphQL document at line {line}, column {column}: {message}")]
    MalformedDocument {
        /// The parser's description.
        message: String,
        /// 1-based, within the document.
        line: usize,
        /// 1-based.
        column: usize,
    },
    /// A schema or type definition: not a request a server executes.
    #[error("GraphQL request document holds a type-system definition")]
    NotExecutable,
    /// Only fragments.
    #[error("GraphQL document has no operation")]
    NoOperation,
    /// Which operation the server runs depends on a name the request did not send.
    #[error("GraphQL document has {count} operations and no `operationName` picks one")]
    AmbiguousOperation {
        /// Operations in the document.
        count: usize,
    },
    /// The server would run nothing, or guess.
    #[error("`operationName` `{name}` names no operation in the document")]
    UnknownOperationName {
        /// As sent.
        name: String,
    },
    /// Invalid GraphQL: which one a server runs is not known.
    #[error("GraphQL document has two operations named `{name}`")]
    DuplicateOperationName {
        /// The repeated name.
        name: String,
    },
    /// Invalid GraphQL that servers treat differently.
    #[error("an anonymous GraphQL operation must be the only operation in its document")]
    AnonymousNotAlone,
    /// Invalid GraphQL: which definition a server expands is not known.
    #[error("GraphQL document defines fragment `{name}` twice")]
    DuplicateFragment {
        /// The repeated fragment.
        name: String,
    },
    /// Its root fields cannot be known.
    #[error("GraphQL fragment `{name}` is not defined")]
    UnknownFragment {
        /// The fragment spread.
        name: String,
    },
    /// Expansion would not end.
    #[error("GraphQL fragment `{name}` spreads itself")]
    FragmentCycle {
        /// A fragment on the cycle.
        name: String,
    },
    /// Not a graphql-transport-ws or graphql-ws message.
    #[error("GraphQL-over-WebSocket message has no string `type`")]
    WsMissingType,
    /// An operation message without an id.
    #[error("GraphQL-over-WebSocket `{message_type}` message needs a non-empty string `id`")]
    WsMissingId {
        /// The message's `type`.
        message_type: String,
    },
    /// An operation message without a document.
    #[error("GraphQL-over-WebSocket `{message_type}` message needs an object `payload`")]
    WsMissingPayload {
        /// The message's `type`.
        message_type: String,
    },
}

/// Reads a GraphQL-over-HTTP POST body, a JSON request object or a batch
/// of them, within [`DEFAULT_BODY_LIMIT`]. A batch gives one operation per
/// item, in order; one bad item fails the whole batch.
pub fn ops_from_post(body: &[u8]) -> Result<Vec<GraphqlOp>, GraphqlError> {
    post(body, DEFAULT_BODY_LIMIT, None)
}

/// Reads a GraphQL-over-HTTP GET query string (without `?`, still
/// percent-encoded): `query`, `operationName`, `variables`, `extensions`,
/// or a saved-query id.
pub fn ops_from_query_string(query: &str) -> Result<GraphqlOp, GraphqlError> {
    query_string(query, DEFAULT_BODY_LIMIT, None)
}

/// Reads one document and selects its operation as a server does:
/// `operation_name` when given (an empty name counts as none), else the
/// only operation.
pub fn op_from_document(
    document: &str,
    operation_name: Option<&str>,
) -> Result<GraphqlOp, GraphqlError> {
    check_len(document.len(), DEFAULT_BODY_LIMIT)?;
    let selected = document::analyze(document, operation_name.filter(|n| !n.is_empty()))?;
    Ok(GraphqlOp::Parsed {
        kind: selected.kind,
        name: selected.name,
        root_fields: selected.root_fields,
        persisted_hash: None,
    })
}

/// Both readings of a document: the purpose-built reader's (`None` where it
/// leaves the document to apollo-parser) and apollo-parser's. Only for the
/// fuzz target that checks they agree; not part of the API.
#[doc(hidden)]
pub fn readings_for_fuzzing(
    document: &str,
    operation_name: Option<&str>,
) -> (Option<GraphqlOp>, Result<GraphqlOp, GraphqlError>) {
    let op = |selected: Selected| GraphqlOp::Parsed {
        kind: selected.kind,
        name: selected.name,
        root_fields: selected.root_fields,
        persisted_hash: None,
    };
    (
        reader::read(document, operation_name).ok().map(op),
        document::analyze_with_apollo(document, operation_name).map(op),
    )
}

/// The reader a proxy keeps per endpoint: the endpoint's body limit
/// (`graphql_max_body_bytes`) and a cache of analysed documents. It
/// answers exactly what the free functions answer.
pub struct GraphqlReader {
    limit: usize,
    cache: DocumentCache,
}

impl GraphqlReader {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            cache: DocumentCache::default(),
        }
    }

    /// [`ops_from_post`] within this reader's limit.
    pub fn ops_from_post(&self, body: &[u8]) -> Result<Vec<GraphqlOp>, GraphqlError> {
        post(body, self.limit, Some(&self.cache))
    }

    /// [`ops_from_query_string`] within this reader's limit.
    #[cfg(test)]
    pub(crate) fn ops_from_query_string(&self, query: &str) -> Result<GraphqlOp, GraphqlError> {
        query_string(query, self.limit, Some(&self.cache))
    }

    /// [`classify_ws_text`] within this reader's limit.
    #[cfg(test)]
    pub(crate) fn classify_ws_text(&self, text: &str) -> Result<WsMessage, GraphqlError> {
        ws::classify(text, self.limit, Some(&self.cache))
    }

    #[cfg(test)]
    pub(crate) fn cache(&self) -> &DocumentCache {
        &self.cache
    }
}

impl Default for GraphqlReader {
    fn default() -> Self {
        Self::new(DEFAULT_BODY_LIMIT)
    }
}

pub(crate) fn post(
    body: &[u8],
    limit: usize,
    cache: Option<&DocumentCache>,
) -> Result<Vec<GraphqlOp>, GraphqlError> {
    check_len(body.len(), limit)?;
    if body.is_empty() {
        return Err(GraphqlError::EmptyBody);
    }
    match json::parse_strict(body)? {
        serde_json::Value::Array(items) => {
            if items.is_empty() {
                return Err(GraphqlError::EmptyBatch);
            }
            items
                .iter()
                .map(|item| envelope::op_from_object(item, cache))
                .collect()
        }
        value => Ok(vec![envelope::op_from_object(&value, cache)?]),
    }
}

pub(crate) fn ws_text(
    text: &str,
    limit: usize,
    cache: Option<&DocumentCache>,
) -> Result<WsMessage, GraphqlError> {
    ws::classify(text, limit, cache)
}

pub(crate) fn query_string(
    query: &str,
    limit: usize,
    cache: Option<&DocumentCache>,
) -> Result<GraphqlOp, GraphqlError> {
    check_len(query.len(), limit)?;
    envelope::op_from_query_string(query, cache)
}

fn analyze(
    cache: Option<&DocumentCache>,
    document: &str,
    operation_name: Option<&str>,
) -> Result<Selected, GraphqlError> {
    match cache {
        Some(cache) => cache.analyze(document, operation_name),
        None => document::analyze(document, operation_name),
    }
}

fn check_len(len: usize, limit: usize) -> Result<(), GraphqlError> {
    if len > limit {
        return Err(GraphqlError::TooLarge { len, limit });
    }
    Ok(())
}
