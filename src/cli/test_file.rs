//! The policy test file (`*.test.yaml`): which policy or bundle, and the
//! requests it must allow or deny. Read with the located YAML reader of
//! the OpenShell importer, so every mistake is reported at its line and
//! column, and every unknown key with the key it was probably meant to be.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use policy_lang::diag::{Code, Diagnostic, Severity};
use policy_lang::import::yaml::{self, YNode};
use policy_lang::source::{SourceFile, Span};

/// The test file is not YAML.
pub const T0001: Code = Code {
    id: "T0001",
    severity: Severity::Error,
    summary: "unreadable test file",
};
/// A key the format does not have.
pub const T0002: Code = Code {
    id: "T0002",
    severity: Severity::Error,
    summary: "unknown key in a test file",
};
/// A value of the wrong kind or out of range.
pub const T0003: Code = Code {
    id: "T0003",
    severity: Severity::Error,
    summary: "invalid value in a test file",
};
/// A key missing, or two keys that cannot go together.
pub const T0004: Code = Code {
    id: "T0004",
    severity: Severity::Error,
    summary: "incomplete or conflicting test case",
};

const FILE_KEYS: &[&str] = &["policy", "bundle", "credentials", "cases"];
const CASE_KEYS: &[&str] = &[
    "name",
    "binary",
    "sha256",
    "url",
    "method",
    "host",
    "port",
    "addr",
    "graphql",
    "graphql_operation_name",
    "jsonrpc",
    "tool",
    "body",
    "content_type",
    "websocket",
    "websocket_text",
    "expect",
    "rule",
    "credential",
    "refusal",
];

/// The codes the proxy refuses a request with, as `refusal` names them.
pub const REFUSALS: [&str; 3] = ["policy_denied", "path_alias", "override_refused"];

/// What the test file runs against. Paths are resolved against the test
/// file's directory (the working directory for standard input).
#[derive(Debug, Clone)]
pub enum Target {
    Policy {
        path: PathBuf,
        credentials: Option<PathBuf>,
    },
    Bundle(PathBuf),
}

#[derive(Debug, Clone)]
pub struct TestFile {
    pub target: Target,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Allow,
    Deny,
    Audit,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Allow => "allow",
            Expect::Deny => "deny",
            Expect::Audit => "audit",
        }
    }
}

/// The rule a case expects to be blamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectRule {
    /// `none`: no rule allowed the connection.
    None,
    /// The rule's text, as written on its first line (whitespace runs
    /// count as one space; indentation, a trailing `{` and a comment are
    /// not part of it).
    Text(String),
    /// `FILE:LINE`, FILE relative to the test file.
    At { file: PathBuf, line: u32 },
}

impl std::fmt::Display for ExpectRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectRule::None => f.write_str("none"),
            ExpectRule::Text(t) => write!(f, "`{t}`"),
            ExpectRule::At { file, line } => write!(f, "{}:{line}", file.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// 1-based line of the case in the test file.
    pub line: u32,
    pub binary: String,
    pub sha256: Option<String>,
    pub url: Option<String>,
    pub method: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub addr: Option<IpAddr>,
    pub body: Option<Vec<u8>>,
    /// The body's `Content-Type`.
    pub content_type: Option<String>,
    pub websocket: bool,
    pub websocket_text: Option<String>,
    pub expect: Expect,
    /// `None`: the rule is not checked.
    pub rule: Option<ExpectRule>,
    /// `None`: not checked; `Some(None)`: no credential may be injected.
    pub credential: Option<Option<String>>,
    /// `None`: not checked; `Some(None)`: the proxy must not refuse the
    /// request; else the code of its 403 (one of [`REFUSALS`]).
    pub refusal: Option<Option<String>>,
}

impl Case {
    /// The request in one line, for reports.
    pub fn request(&self) -> String {
        let what = match (&self.url, &self.host) {
            (Some(url), _) => {
                let method = match (
                    &self.method,
                    self.websocket || self.websocket_text.is_some(),
                ) {
                    (Some(m), _) => m.to_ascii_uppercase(),
                    (None, true) => "upgrade".to_owned(),
                    (None, false) if self.body.is_some() => "POST".to_owned(),
                    (None, false) => "GET".to_owned(),
                };
                format!("{method} {url}")
            }
            (None, Some(host)) => format!("connect {host}:{}", self.port.unwrap_or(0)),
            (None, None) => "connect".to_owned(),
        };
        format!("{what} from `{}`", self.binary)
    }
}

/// Reads a test file; every problem is a located diagnostic.
pub fn parse(file: &SourceFile, base: &Path) -> Result<TestFile, Vec<Diagnostic>> {
    let mut r = Reader {
        file,
        base,
        diags: Vec::new(),
    };
    let root = match yaml::parse(file.text()) {
        Ok(Some(root)) => root,
        Ok(None) => {
            r.error(
                T0004,
                Span::new(0, 0),
                "the test file is empty",
                "start with `policy: FILE` and a list of `cases:`",
            );
            return Err(r.diags);
        }
        Err(e) => {
            r.error(
                T0001,
                e.span,
                format!("cannot read the YAML: {}", e.message),
                "fix the YAML syntax at this place",
            );
            return Err(r.diags);
        }
    };
    let Some(entries) = root.entries() else {
        r.error(
            T0003,
            root.span,
            format!("a test file is a mapping, not {}", root.kind()),
            "start with `policy: FILE` and a list of `cases:`",
        );
        return Err(r.diags);
    };
    let mut policy = None;
    let mut bundle = None;
    let mut credentials = None;
    let mut cases_node = None;
    for (k, v) in entries {
        let Some(key) = r.key(k, FILE_KEYS, "a test file") else {
            continue;
        };
        match key {
            "policy" => policy = r.string(v, "policy").map(|s| (base.join(s), v.span)),
            "bundle" => bundle = r.string(v, "bundle").map(|s| (base.join(s), v.span)),
            "credentials" => {
                credentials = r.string(v, "credentials").map(|s| (base.join(s), v.span))
            }
            _ => cases_node = Some(v),
        }
    }
    let target = match (policy, bundle) {
        (Some((p, _)), None) => Some(Target::Policy {
            path: crate::cli::inputs::normalize(&p),
            credentials: credentials.map(|(c, _)| crate::cli::inputs::normalize(&c)),
        }),
        (None, Some((b, _))) => {
            if let Some((_, span)) = credentials {
                r.error(
                    T0004,
                    span,
                    "`credentials` goes with `policy`; a bundle has its credentials compiled in",
                    "remove `credentials`, or test the policy instead of the bundle",
                );
            }
            Some(Target::Bundle(crate::cli::inputs::normalize(&b)))
        }
        (Some(_), Some((_, span))) => {
            r.error(
                T0004,
                span,
                "both `policy` and `bundle` are given",
                "a test file runs against one of them; keep one",
            );
            None
        }
        (None, None) => {
            r.error(
                T0004,
                Span::new(root.span.start, root.span.start),
                "the test file names no `policy` (or `bundle`)",
                "add `policy: FILE`, the path relative to this test file",
            );
            None
        }
    };
    let mut cases = Vec::new();
    match cases_node {
        None => r.error(
            T0004,
            Span::new(root.span.start, root.span.start),
            "the test file has no `cases`",
            "add `cases:` with a list of requests and the decision each expects",
        ),
        Some(node) => match node.items() {
            Some([]) => r.error(
                T0004,
                node.span,
                "`cases` is empty",
                "add at least one case: `- binary: ...`, `url: ...`, `expect: allow`",
            ),
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(c) = r.case(item, i) {
                        cases.push(c);
                    }
                }
            }
            None => r.error(
                T0003,
                node.span,
                format!("`cases` is a list, not {}", node.kind()),
                "write each case as a list item starting with `- `",
            ),
        },
    }
    match target {
        Some(target) if r.diags.is_empty() => Ok(TestFile { target, cases }),
        _ => {
            r.diags.sort_by_key(|d| d.span.start);
            Err(r.diags)
        }
    }
}

struct Reader<'a> {
    file: &'a SourceFile,
    /// What the file's paths are relative to.
    base: &'a Path,
    diags: Vec<Diagnostic>,
}

impl Reader<'_> {
    fn error(
        &mut self,
        code: Code,
        span: Span,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags
            .push(Diagnostic::new(code, self.file, span, message).help(help));
    }

    /// A key of `known`, or an error with a suggestion.
    fn key<'k>(&mut self, k: &'k YNode, known: &[&str], within: &str) -> Option<&'k str> {
        let Some(key) = k.scalar() else {
            self.error(
                T0003,
                k.span,
                "a key must be a plain name",
                "write `name: value`",
            );
            return None;
        };
        if known.contains(&key) {
            return Some(key);
        }
        let list = known.join(", ");
        let help = match closest(key, known) {
            Some(s) => format!("did you mean `{s}`? {within} takes: {list}"),
            None => format!("{within} takes: {list}"),
        };
        self.diags.push(
            Diagnostic::new(
                T0002,
                self.file,
                k.span,
                format!("unknown key `{key}` in {within}"),
            )
            .help(help)
            .label("unknown key"),
        );
        None
    }

    fn string(&mut self, v: &YNode, what: &str) -> Option<String> {
        match v.scalar() {
            Some(s) if !v.is_null() => Some(s.to_owned()),
            _ => {
                self.error(
                    T0003,
                    v.span,
                    format!("`{what}` is a string, not {}", v.kind()),
                    format!("write `{what}: VALUE`"),
                );
                None
            }
        }
    }

    fn case(&mut self, node: &YNode, index: usize) -> Option<Case> {
        let (line, _) = self.file.line_col(node.span.start);
        let Some(entries) = node.entries() else {
            self.error(
                T0003,
                node.span,
                format!("a case is a mapping, not {}", node.kind()),
                "write `- binary: PATH` and the request's keys under it",
            );
            return None;
        };
        let before = self.diags.len();
        let mut c = Case {
            name: format!("case {}", index + 1),
            line,
            binary: String::new(),
            sha256: None,
            url: None,
            method: None,
            host: None,
            port: None,
            addr: None,
            body: None,
            content_type: None,
            websocket: false,
            websocket_text: None,
            expect: Expect::Deny,
            rule: None,
            credential: None,
            refusal: None,
        };
        let mut spans: Vec<(&str, Span)> = Vec::new();
        let mut graphql = None;
        let mut operation = None;
        let mut jsonrpc: Vec<String> = Vec::new();
        let mut tool = None;
        for (k, v) in entries {
            let Some(key) = self.key(k, CASE_KEYS, "a case") else {
                continue;
            };
            spans.push((key, k.span));
            match key {
                "name" => c.name = self.string(v, key).unwrap_or_default(),
                "binary" => c.binary = self.string(v, key).unwrap_or_default(),
                "sha256" => c.sha256 = self.string(v, key),
                "url" => c.url = self.string(v, key),
                "method" => c.method = self.string(v, key),
                "host" => c.host = self.string(v, key),
                "port" => match v.as_u64().and_then(|p| u16::try_from(p).ok()) {
                    Some(p) => c.port = Some(p),
                    None => self.error(
                        T0003,
                        v.span,
                        "`port` is a number from 0 to 65535",
                        "write `port: 443`",
                    ),
                },
                "addr" => match self.string(v, key).map(|s| s.parse::<IpAddr>()) {
                    Some(Ok(a)) => c.addr = Some(a),
                    Some(Err(_)) => self.error(
                        T0003,
                        v.span,
                        "`addr` is an IP address",
                        "write the address the name resolved to, `addr: 10.0.0.1`",
                    ),
                    None => {}
                },
                "graphql" => graphql = self.string(v, key),
                "graphql_operation_name" => operation = self.string(v, key),
                "jsonrpc" => match v.items() {
                    Some(items) => {
                        jsonrpc = items.iter().filter_map(|i| self.string(i, key)).collect();
                    }
                    None => jsonrpc.extend(self.string(v, key)),
                },
                "tool" => tool = self.string(v, key),
                "body" => c.body = self.string(v, key).map(String::into_bytes),
                "content_type" => c.content_type = self.string(v, key),
                "websocket" => match v.as_bool() {
                    Some(b) => c.websocket = b,
                    None => self.error(
                        T0003,
                        v.span,
                        "`websocket` is `true` or `false`",
                        "write `websocket: true` to ask about the upgrade",
                    ),
                },
                "websocket_text" => c.websocket_text = self.string(v, key),
                "expect" => match v.scalar().map(str::to_ascii_lowercase).as_deref() {
                    Some("allow") => c.expect = Expect::Allow,
                    Some("deny") => c.expect = Expect::Deny,
                    Some("audit") => c.expect = Expect::Audit,
                    _ => self.error(
                        T0003,
                        v.span,
                        "`expect` is `allow`, `deny` or `audit`",
                        "write the decision the request must get",
                    ),
                },
                "rule" => {
                    c.rule = if v.is_null() {
                        Some(ExpectRule::None)
                    } else if v.as_u64().is_some() {
                        // A bare line number would match no rule's text.
                        self.error(
                            T0003,
                            v.span,
                            "`rule` is the rule's text, `FILE:LINE` or `none`, not a line number",
                            "write the policy file too, relative to this test file: `rule: ../NAME.policy:LINE`",
                        );
                        None
                    } else {
                        self.string(v, key).map(|s| expect_rule(&s, self.base))
                    }
                }
                "refusal" => match v.scalar().filter(|_| !v.is_null()) {
                    None if v.is_null() => c.refusal = Some(None),
                    Some("none") => c.refusal = Some(None),
                    Some(code) if REFUSALS.contains(&code) => {
                        c.refusal = Some(Some(code.to_owned()));
                    }
                    _ => self.error(
                        T0003,
                        v.span,
                        "`refusal` is `policy_denied`, `path_alias`, `override_refused` or `none`",
                        "write the code of the proxy's 403, or `none` when it lets the request through",
                    ),
                },
                _ => {
                    c.credential = if v.is_null() {
                        Some(None)
                    } else {
                        self.string(v, key).map(|s| (s != "none").then_some(s))
                    }
                }
            }
        }
        let has = |k: &str| spans.iter().any(|(n, _)| *n == k);
        let span_of = |k: &str| {
            spans
                .iter()
                .find(|(n, _)| *n == k)
                .map_or(node.span, |(_, s)| *s)
        };
        let at = Span::new(node.span.start, node.span.start);
        if !has("binary") {
            self.error(
                T0004,
                at,
                format!("`{}` names no `binary`", c.name),
                "add `binary: PATH`, the executable making the request",
            );
        }
        if !has("expect") {
            self.error(
                T0004,
                at,
                format!("`{}` has no `expect`", c.name),
                "add `expect: allow` or `expect: deny`",
            );
        }
        match (has("url"), has("host")) {
            (true, true) => self.error(
                T0004,
                span_of("host"),
                "`url` and `host` both give the destination",
                "keep `url` for a request, or `host` and `port` for a connection",
            ),
            (false, false) => self.error(
                T0004,
                at,
                format!("`{}` has no destination", c.name),
                "add `url: https://HOST/PATH`, or `host` and `port` for a connection",
            ),
            (false, true) if !has("port") => self.error(
                T0004,
                span_of("host"),
                "`host` needs a `port`",
                "add `port: 443`",
            ),
            (true, false) if has("port") => self.error(
                T0004,
                span_of("port"),
                "`port` goes with `host`; a `url` carries its own port",
                "write the port in the URL (`https://HOST:PORT/...`)",
            ),
            _ => {}
        }
        if !has("url") {
            for k in [
                "method",
                "graphql",
                "jsonrpc",
                "body",
                "websocket",
                "websocket_text",
            ] {
                if has(k) {
                    self.error(
                        T0004,
                        span_of(k),
                        format!("`{k}` describes an HTTP request; a connection has none"),
                        "give the request's `url` instead of `host` and `port`",
                    );
                }
            }
        }
        let bodies: Vec<&str> = ["graphql", "jsonrpc", "body"]
            .into_iter()
            .filter(|k| has(k))
            .collect();
        if let [first, second, ..] = bodies.as_slice() {
            self.error(
                T0004,
                span_of(second),
                format!("`{first}` and `{second}` both give the request body"),
                "give one of them",
            );
        }
        if has("graphql_operation_name") && !has("graphql") {
            self.error(
                T0004,
                span_of("graphql_operation_name"),
                "`graphql_operation_name` goes with `graphql`",
                "add the `graphql` document, or remove the operation name",
            );
        }
        if has("tool")
            && !jsonrpc
                .iter()
                .any(|m| m == policy_bundle::matcher::TOOLS_CALL)
        {
            self.error(
                T0004,
                span_of("tool"),
                "`tool` names the tool of a `tools/call` call",
                "add `jsonrpc: tools/call`",
            );
        }
        if (c.websocket || has("websocket_text")) && (has("method") || !bodies.is_empty()) {
            self.error(
                T0004,
                span_of("websocket"),
                "a WebSocket upgrade is a GET without a body",
                "remove `method` and the body keys",
            );
        }
        if let Some(doc) = graphql {
            c.body = Some(super::eval::graphql_body(&doc, operation.as_deref()));
        } else if !jsonrpc.is_empty() {
            c.body = Some(super::eval::jsonrpc_body(&jsonrpc, tool.as_deref()));
        }
        (self.diags.len() == before).then_some(c)
    }
}

/// `none`, `FILE:LINE` (FILE a `.policy`/`.yaml`/`.yml` path relative to
/// `base`) or the rule's text.
fn expect_rule(s: &str, base: &Path) -> ExpectRule {
    let s = s.trim();
    if s == "none" {
        return ExpectRule::None;
    }
    if let Some((file, line)) = s.rsplit_once(':')
        && let Ok(line) = line.parse::<u32>()
        && [".policy", ".yaml", ".yml"]
            .iter()
            .any(|e| file.ends_with(e))
        && !file.contains(char::is_whitespace)
    {
        return ExpectRule::At {
            file: crate::cli::inputs::normalize(&base.join(file)),
            line,
        };
    }
    ExpectRule::Text(rule_text(s))
}

/// A rule's first line as a case names it: whitespace runs as one space,
/// without a trailing comment or `{`.
pub fn rule_text(line: &str) -> String {
    let code = match line.find(" #") {
        Some(i) => line.get(..i).unwrap_or(line),
        None => line,
    };
    let code = code.trim();
    let code = code.strip_suffix('{').unwrap_or(code);
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The known key nearest to `key`, when it is near enough to be a typo.
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let left = row.get(j).copied().unwrap_or(usize::MAX);
            let value = (prev + usize::from(ca != *cb))
                .min(up.saturating_add(1))
                .min(left.saturating_add(1));
            prev = up;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = value;
            }
        }
    }
    row.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(closest("expcet", CASE_KEYS), Some("expect"));
        assert_eq!(closest("credentails", CASE_KEYS), Some("credential"));
        assert_eq!(closest("zzzzzz", CASE_KEYS), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn rule_forms() {
        assert_eq!(
            expect_rule("a.policy:12", Path::new("p/tests")),
            ExpectRule::At {
                file: PathBuf::from("p/tests/a.policy"),
                line: 12
            }
        );
        assert_eq!(
            expect_rule("allow a -> x.com:443  http {", Path::new("")),
            ExpectRule::Text("allow a -> x.com:443 http".into())
        );
        assert_eq!(rule_text("  deny * /x/** # no"), "deny * /x/**");
    }
}
