//! The syntax tree of a `.policy` file (or of an imported OpenShell YAML
//! file, which the importer lowers into the same tree).
//!
//! Values are kept as written (unescaped) with their spans; their meaning
//! (is this a valid host pattern?) is decided later by the resolver through
//! the matcher module, which is what lets errors point inside a token.

pub(crate) use policy_bundle::{Enforcement, LandlockMode, TlsMode};

use crate::source::{Node, SourceFile};

/// A line of trivia before a statement: a comment or an empty line. Kept so
/// the formatter can reproduce comments and paragraphing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriviaLine {
    Blank,
    Comment(String),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trivia {
    pub before: Vec<TriviaLine>,
    pub trailing: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Policy,
    Fragment,
}

#[derive(Debug, Clone)]
pub struct Document {
    pub file: SourceFile,
    /// Comments above the `policy`/`fragment` line.
    pub header: Vec<TriviaLine>,
    pub kind: DocKind,
    pub name: Node<String>,
    pub header_trailing: Option<String>,
    pub items: Vec<Item<Stmt>>,
    /// Comments between the last statement and the closing brace.
    pub end: Vec<TriviaLine>,
    /// Comments after the closing brace.
    pub footer: Vec<TriviaLine>,
}

impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.name == other.name && self.items == other.items
    }
}

/// A statement with the comments around it. Equality ignores comments.
#[derive(Debug, Clone)]
pub struct Item<T> {
    pub trivia: Trivia,
    pub stmt: Node<T>,
}

impl<T: PartialEq> PartialEq for Item<T> {
    fn eq(&self, other: &Self) -> bool {
        self.stmt == other.stmt
    }
}

impl<T: Eq> Eq for Item<T> {}

impl<T> Item<T> {
    pub fn new(stmt: Node<T>) -> Self {
        Self {
            trivia: Trivia::default(),
            stmt,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FsKind {
    Read,
    Write,
    Exec,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsTarget {
    /// The workload's working directory, known only when the supervisor runs.
    Workdir,
    Path(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMember {
    pub path: Node<String>,
    pub pin: Option<Node<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stmt {
    Include(Node<String>),
    Landlock {
        mode: Node<LandlockMode>,
        min_abi: Option<Node<u32>>,
    },
    RunAs {
        user: Option<Node<String>>,
        group: Option<Node<String>>,
    },
    Fs {
        kind: Node<FsKind>,
        targets: Vec<Node<FsTarget>>,
    },
    Binaries {
        name: Node<String>,
        members: Vec<BinaryMember>,
    },
    Credential(Credential),
    Secret {
        name: Node<String>,
        source: Node<SecretSource>,
        hosts: Vec<Node<String>>,
    },
    Allow(Allow),
    /// A statement that did not parse; its diagnostic was already reported.
    /// The raw text is kept so the formatter never loses a line.
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub name: Node<String>,
    pub header_trailing: Option<String>,
    pub items: Vec<Item<CredStmt>>,
    pub end: Vec<TriviaLine>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredStmt {
    Secret(Node<SecretSource>),
    Placeholder(Node<String>),
    InjectHeader {
        name: Node<String>,
        template: Node<String>,
    },
    InjectReplace,
    Hosts(Vec<Node<String>>),
    Methods(Vec<Node<String>>),
    Paths(Vec<Node<String>>),
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    L4,
    Tcp,
    Http,
    /// MCP Streamable HTTP: rules judge each call's method and tool.
    Mcp,
    /// Generic JSON-RPC over HTTP: rules judge each call's method.
    JsonRpc,
    /// GraphQL over HTTP: rules judge each operation's type, name and
    /// root fields.
    Graphql,
    /// WebSocket: rules judge the RFC 6455 upgrade (`GET`) and each client
    /// text message (`WEBSOCKET_TEXT`), or its GraphQL operation.
    Websocket,
}

impl Protocol {
    /// Whether the endpoint's rules are `rpc` rules on request bodies.
    pub(crate) fn is_rpc(self) -> bool {
        matches!(self, Protocol::Mcp | Protocol::JsonRpc)
    }

    /// Whether requests pass the L7 proxy (REST, JSON-RPC or GraphQL
    /// rules).
    pub(crate) fn is_l7(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Websocket) || self.reads_body()
    }

    /// Whether `allow|deny graphql` rules and `persisted` entries apply.
    pub(crate) fn takes_graphql(self) -> bool {
        matches!(self, Protocol::Graphql | Protocol::Websocket)
    }

    /// Whether the proxy reads request bodies for the rules.
    pub fn reads_body(self) -> bool {
        self.is_rpc() || self == Protocol::Graphql
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    ReadOnly,
    ReadWrite,
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EndpointOption {
    Protocol(Protocol),
    Enforcement(Enforcement),
    Access(Access),
    Tls(TlsMode),
    /// Accept `%2F` inside a path segment (GitLab-style namespaced paths).
    EncodedSlash,
    /// The author accepts that a credential reaches this endpoint uninspected.
    UninspectedCredentials,
    /// MCP: the allow-all method profile (OpenShell's
    /// `mcp.allow_all_known_mcp_methods`).
    AllMcpMethods,
    /// MCP: tool names need not follow the recommended pattern (OpenShell's
    /// `mcp.strict_tool_names: false`).
    LooseToolNames,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    pub subjects: Vec<Node<String>>,
    pub endpoint: Node<String>,
    pub options: Vec<Node<EndpointOption>>,
    pub body: Option<EndpointBody>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointBody {
    pub header_trailing: Option<String>,
    pub items: Vec<Item<EndpointStmt>>,
    pub end: Vec<TriviaLine>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleAction {
    Allow,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointStmt {
    Rule {
        action: Node<RuleAction>,
        methods: Vec<Node<String>>,
        /// One or more path globs; the rule applies to each.
        paths: Vec<Node<String>>,
        query: Vec<Node<String>>,
    },
    /// `allow|deny rpc METHOD... [tool GLOB...]` on a JSON-RPC or MCP
    /// endpoint; `tools` is empty when the rule names no tool.
    Rpc {
        action: Node<RuleAction>,
        methods: Vec<Node<String>>,
        tools: Vec<Node<String>>,
    },
    /// `allow|deny graphql TYPES... [name GLOB] [field GLOB...]` on a
    /// GraphQL endpoint; `fields` is empty when the rule names none.
    Graphql {
        action: Node<RuleAction>,
        types: Vec<Node<String>>,
        name: Option<Node<String>>,
        fields: Vec<Node<String>>,
    },
    /// `persisted ID TYPE [name NAME] [field NAME...]`: a registered
    /// persisted query of a GraphQL endpoint.
    Persisted {
        id: Node<String>,
        kind: Node<String>,
        name: Option<Node<String>>,
        fields: Vec<Node<String>>,
    },
    Path(Node<String>),
    Addresses(Vec<Node<String>>),
    /// Bytes of request body read for JSON-RPC and MCP inspection.
    BodyLimit(Node<u64>),
    Invalid(String),
}
