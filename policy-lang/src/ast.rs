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
    /// An empty line (runs of them are kept as one).
    Blank,
    /// A `#` comment, its text after the `#`.
    Comment(String),
}

/// The comments around one statement; the formatter writes them back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trivia {
    /// Lines above the statement.
    pub before: Vec<TriviaLine>,
    /// The comment at the end of the statement's line.
    pub trailing: Option<String>,
}

/// Only a `policy` compiles on its own; a `fragment` is included by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// `policy NAME { ... }`.
    Policy,
    /// `fragment NAME { ... }`.
    Fragment,
}

/// One parsed file: the unit `include` pulls in and the formatter
/// rewrites. Equality ignores comments and the file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The source it was parsed from, for diagnostics.
    pub file: SourceFile,
    /// Comments above the `policy`/`fragment` line.
    pub header: Vec<TriviaLine>,
    /// `policy` or `fragment`.
    pub kind: DocKind,
    /// The name after `policy` or `fragment`.
    pub name: Node<String>,
    /// The comment after the opening brace.
    pub header_trailing: Option<String>,
    /// The statements in source order.
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
    /// Comments, ignored by equality.
    pub trivia: Trivia,
    /// The statement with its span.
    pub stmt: Node<T>,
}

impl<T: PartialEq> PartialEq for Item<T> {
    fn eq(&self, other: &Self) -> bool {
        self.stmt == other.stmt
    }
}

impl<T: Eq> Eq for Item<T> {}

impl<T> Item<T> {
    /// A statement without comments, as the importer builds them.
    pub fn new(stmt: Node<T>) -> Self {
        Self {
            trivia: Trivia::default(),
            stmt,
        }
    }
}

/// The verb of an `fs` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FsKind {
    /// `fs read`: read files and list directories.
    Read,
    /// `fs write`: read and write.
    Write,
    /// `fs exec`: read and execute.
    Exec,
    /// `fs deny`: the path must stay inaccessible. Landlock cannot carve it
    /// out of a granted tree, so under a grant it is an error.
    Deny,
}

/// What an `fs` rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsTarget {
    /// The workload's working directory, known only when the supervisor runs.
    Workdir,
    /// An absolute path as written.
    Path(String),
}

/// One entry of a `binaries` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMember {
    /// An exact path or a glob.
    pub path: Node<String>,
    /// `sha256:<hex>`, allowed after an exact path only.
    pub pin: Option<Node<String>>,
}

/// Where a secret's value lives: the supervisor reads a credential's, the
/// workload can read a `secret`'s. The value never enters the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// `env NAME`: an environment variable.
    Env(String),
    /// `file PATH`: a file.
    File(String),
}

/// A statement of a policy or fragment body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stmt {
    /// `include "PATH"`, relative to the including file.
    Include(Node<String>),
    /// `landlock hard|best_effort [min_abi N]`.
    Landlock {
        /// Whether an unsupported right fails the launch.
        mode: Node<LandlockMode>,
        /// The oldest Landlock ABI the sandbox accepts.
        min_abi: Option<Node<u32>>,
    },
    /// `run_as [user U] [group G]`.
    RunAs {
        /// A user name or numeric id.
        user: Option<Node<String>>,
        /// A group name or numeric id.
        group: Option<Node<String>>,
    },
    /// `fs read|write|exec|deny TARGET...`.
    Fs {
        /// The verb.
        kind: Node<FsKind>,
        /// One or more paths or `workdir`.
        targets: Vec<Node<FsTarget>>,
    },
    /// `binaries NAME = PATH...`.
    Binaries {
        /// The set's name, used by `allow` rules.
        name: Node<String>,
        /// The paths and globs, in order.
        members: Vec<BinaryMember>,
    },
    /// `credential NAME { ... }`.
    Credential(Credential),
    /// `secret NAME env|file X hosts HOST...`: a secret the workload itself
    /// can read.
    Secret {
        /// The secret's name.
        name: Node<String>,
        /// Where the workload finds it.
        source: Node<SecretSource>,
        /// The hosts it unlocks: the prover treats them as credentialed.
        hosts: Vec<Node<String>>,
    },
    /// `allow BINARIES -> DEST:PORTS ...`.
    Allow(Allow),
    /// `advisor BINARIES...`: the binaries that may reach the advisor
    /// endpoint (`policy.local`) the supervisor answers inside the sandbox.
    Advisor {
        /// Binary set names and paths, as in `allow`; may be empty (an
        /// error the resolver reports).
        subjects: Vec<Node<String>>,
    },
    /// A statement that did not parse; its diagnostic was already reported.
    /// The raw text is kept so the formatter never loses a line.
    Invalid(String),
}

/// A credential the proxy injects on matching requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Its name, unique in the policy.
    pub name: Node<String>,
    /// The comment after the opening brace.
    pub header_trailing: Option<String>,
    /// The settings in source order.
    pub items: Vec<Item<CredStmt>>,
    /// Comments before the closing brace.
    pub end: Vec<TriviaLine>,
}

/// A setting inside `credential NAME { ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredStmt {
    /// `secret env|file X`: where the real value comes from.
    Secret(Node<SecretSource>),
    /// `placeholder env NAME`: the variable the workload sees instead.
    Placeholder(Node<String>),
    /// `inject header NAME "TEMPLATE"`.
    InjectHeader {
        /// The header name.
        name: Node<String>,
        /// The header value; `{secret}` stands for the secret.
        template: Node<String>,
    },
    /// `inject replace`: the placeholder is replaced wherever it appears in
    /// request headers.
    InjectReplace,
    /// `hosts HOST...`: the destinations it is injected for.
    Hosts(Vec<Node<String>>),
    /// `methods METHOD...`: only these methods.
    Methods(Vec<Node<String>>),
    /// `paths GLOB...`: only these paths.
    Paths(Vec<Node<String>>),
    /// A setting that did not parse, kept as written.
    Invalid(String),
}

/// How an endpoint's connections are handled (the protocol option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// The default: the supervisor connects and hands the socket over.
    L4,
    /// Transparent TCP: the workload resolves the name through the DNS stub.
    Tcp,
    /// Through the L7 proxy, which judges every request.
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

/// The `read-only` / `read-write` / `full` presets, read by protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// `read-only`.
    ReadOnly,
    /// `read-write`.
    ReadWrite,
    /// `full`.
    Full,
}

/// A word after the destination of an `allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EndpointOption {
    /// `l4`, `tcp`, `http`, `mcp`, `json-rpc`, `graphql`, `websocket`.
    Protocol(Protocol),
    /// `enforce` or `audit`.
    Enforcement(Enforcement),
    /// `read-only`, `read-write` or `full`.
    Access(Access),
    /// `tls auto` or `tls skip`.
    Tls(TlsMode),
    /// Accept `%2F` inside a path segment (GitLab-style namespaced paths).
    EncodedSlash,
    /// The server reads paths ignoring ASCII case and a trailing slash: path
    /// rules match the folded path.
    FoldPaths,
    /// The author accepts that a credential reaches this endpoint uninspected.
    UninspectedCredentials,
    /// Credential placeholders in client WebSocket text messages are
    /// replaced by their secrets (OpenShell's `websocket_credential_rewrite`).
    WebsocketCredentialRewrite,
    /// Credential placeholders in REST request bodies are replaced by
    /// their secrets (OpenShell's `request_body_credential_rewrite`).
    RequestBodyCredentialRewrite,
    /// MCP: the allow-all method profile (OpenShell's
    /// `mcp.allow_all_known_mcp_methods`).
    AllMcpMethods,
    /// MCP: tool names need not follow the recommended pattern (OpenShell's
    /// `mcp.strict_tool_names: false`).
    LooseToolNames,
}

/// `allow BINARIES -> DEST:PORTS [OPTIONS] [{ ... }]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    /// Binary set names and paths.
    pub subjects: Vec<Node<String>>,
    /// `DEST:PORTS` as written, parsed by the resolver.
    pub endpoint: Node<String>,
    /// In written order (the formatter sorts them unless two conflict).
    pub options: Vec<Node<EndpointOption>>,
    /// The `{ ... }` block, when written.
    pub body: Option<EndpointBody>,
}

/// The `{ ... }` block of an `allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointBody {
    /// The comment after the opening brace.
    pub header_trailing: Option<String>,
    /// The rules in source order.
    pub items: Vec<Item<EndpointStmt>>,
    /// Comments before the closing brace.
    pub end: Vec<TriviaLine>,
}

/// Whether a rule allows or denies; deny wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleAction {
    /// `allow`.
    Allow,
    /// `deny`.
    Deny,
}

/// A rule inside an endpoint block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointStmt {
    /// `allow|deny METHODS PATHS [?KEY=GLOB...]`.
    Rule {
        /// Allow or deny.
        action: Node<RuleAction>,
        /// Method names or `*`, as written.
        methods: Vec<Node<String>>,
        /// One or more path globs; the rule applies to each.
        paths: Vec<Node<String>>,
        /// Query matchers, `?key=glob`, as written.
        query: Vec<Node<String>>,
    },
    /// `allow|deny rpc METHOD... [tool GLOB...]` on a JSON-RPC or MCP
    /// endpoint; `tools` is empty when the rule names no tool.
    Rpc {
        /// Allow or deny.
        action: Node<RuleAction>,
        /// JSON-RPC method names or globs.
        methods: Vec<Node<String>>,
        /// MCP tool names or globs.
        tools: Vec<Node<String>>,
    },
    /// `allow|deny graphql TYPES... [name GLOB] [field GLOB...]` on a
    /// GraphQL endpoint; `fields` is empty when the rule names none.
    Graphql {
        /// Allow or deny.
        action: Node<RuleAction>,
        /// `query`, `mutation`, `subscription` or `*`.
        types: Vec<Node<String>>,
        /// The operation-name glob.
        name: Option<Node<String>>,
        /// Root-field globs.
        fields: Vec<Node<String>>,
    },
    /// `persisted ID TYPE [name NAME] [field NAME...]`: a registered
    /// persisted query of a GraphQL endpoint.
    Persisted {
        /// The persisted-query hash or id.
        id: Node<String>,
        /// Its operation type.
        kind: Node<String>,
        /// Its operation name.
        name: Option<Node<String>>,
        /// Its root fields.
        fields: Vec<Node<String>>,
    },
    /// `path GLOB`: the endpoint takes part only for these paths.
    Path(Node<String>),
    /// `addresses CIDR...`: what the host may resolve to.
    Addresses(Vec<Node<String>>),
    /// Bytes of request body read for JSON-RPC and MCP inspection.
    BodyLimit(Node<u64>),
    /// A rule that did not parse, kept as written.
    Invalid(String),
}
