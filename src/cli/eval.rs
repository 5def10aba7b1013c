use crate::output::outln;
use std::net::IpAddr;
use std::path::PathBuf;

use clap::ValueEnum;
use policy_bundle::Bundle;
use policy_bundle::eval::{
    Decision, Evaluator, HttpRequest, Request, RouteKind, Verdict, WsClientMessage,
};
use policy_lang::load;

use super::{CredentialsArg, EXIT_INPUT, EXIT_OK};
use crate::report::{Failure, FileReport, InputError};

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    Human,
    Json,
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["bundle", "policy"]))]
#[command(group = clap::ArgGroup::new("target").required(true).args(["url", "host"]))]
pub struct Args {
    /// A compiled bundle to evaluate against.
    #[arg(long, value_name = "BUNDLE")]
    bundle: Option<PathBuf>,
    /// A policy to compile and evaluate against.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The executable making the request, as /proc/<pid>/exe shows it.
    #[arg(long, value_name = "PATH")]
    binary: String,
    /// SHA-256 of the executable (default: hashed from PATH when readable).
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// An HTTP(S) request URL.
    #[arg(long, value_name = "URL", conflicts_with_all = ["host", "port"])]
    url: Option<String>,
    /// HTTP method for `--url` (default: GET, or POST when a body is given).
    #[arg(long, requires = "url")]
    method: Option<String>,
    /// A GraphQL document, sent as the JSON body `{"query": ...}` of the
    /// `--url` request and judged by the endpoint's GraphQL rules.
    #[arg(long, value_name = "DOCUMENT", requires = "url")]
    graphql: Option<String>,
    /// The `operationName` sent with `--graphql`.
    #[arg(long, value_name = "NAME", requires = "graphql")]
    graphql_operation_name: Option<String>,
    /// A raw request body for the `--url` request, from a file or `-` for
    /// standard input.
    #[arg(long, value_name = "FILE", requires = "url")]
    body: Option<String>,
    /// The `Content-Type` the body is sent with: a route with
    /// `request_body_credential_rewrite` rewrites placeholders only in
    /// JSON, form and `text/*` bodies.
    #[arg(long, value_name = "TYPE", requires = "url")]
    content_type: Option<String>,
    /// A JSON-RPC call for the `--url` request; given more than once, the
    /// calls are sent as one batch.
    #[arg(long = "jsonrpc-method", value_name = "METHOD", requires = "url")]
    jsonrpc_methods: Vec<String>,
    /// The MCP tool (`params.name`) of the `tools/call` calls of
    /// `--jsonrpc-method`.
    #[arg(long, value_name = "TOOL")]
    tool: Option<String>,
    /// Ask about an RFC 6455 upgrade of the `--url` target (a GET) instead
    /// of a plain request; `ws://` and `wss://` URLs imply it.
    #[arg(long, requires = "url")]
    websocket: bool,
    /// A client text message sent after the upgrade of the `--url` target;
    /// the decision is the message's when the upgrade is allowed.
    #[arg(
        long,
        value_name = "MESSAGE",
        requires = "url",
        conflicts_with_all = ["websocket_binary", "websocket_text_file"]
    )]
    websocket_text: Option<String>,
    /// A client text message from a file or `-` for standard input: one
    /// too long for a command-line argument.
    #[arg(
        long,
        value_name = "FILE",
        requires = "url",
        conflicts_with = "websocket_binary"
    )]
    websocket_text_file: Option<String>,
    /// A client binary message sent after the upgrade, from a file or `-`
    /// for standard input.
    #[arg(long, value_name = "FILE", requires = "url")]
    websocket_binary: Option<String>,
    /// A connection's destination host name or IP address.
    #[arg(long, value_name = "HOST", requires = "port")]
    host: Option<String>,
    /// The connection's destination port (with `--host`; `--url` carries its own).
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    /// The address the destination name resolved to, if known.
    #[arg(long, value_name = "IP")]
    addr: Option<IpAddr>,
    #[command(flatten)]
    credentials: CredentialsArg,
    /// `human` (decision, the proxy's refusal code, rule, reason) or
    /// `json` (one object; on an input error `decision` is `error`).
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
}

pub fn run(args: &Args) -> u8 {
    let bundle = match load_bundle(args) {
        Ok(b) => b,
        Err(f) => return failed(args.format, &f),
    };
    let body = match request_body(args) {
        Ok(b) => b,
        Err(e) => return failed(args.format, &Failure::error(None, e)),
    };
    let ws_message = match websocket_message(args) {
        Ok(m) => m,
        Err(e) => return failed(args.format, &Failure::error(None, e)),
    };
    let ask = Ask {
        binary: &args.binary,
        sha256: args.sha256.clone(),
        hash_binary: true,
        url: args.url.as_deref(),
        method: args.method.as_deref(),
        host: args.host.as_deref(),
        port: args.port,
        addr: args.addr,
        body,
        content_type: args.content_type.as_deref(),
        websocket: args.websocket,
        ws_message,
    };
    let decision = match decide(&Evaluator::new(bundle), &ask) {
        Ok(d) => d,
        Err(AskError::Url(e)) => {
            return failed(
                args.format,
                &Failure::error(None, format!("invalid `--url`: {e}")),
            );
        }
        Err(AskError::WebsocketWithBody) => {
            return failed(
                args.format,
                &Failure::error(
                    None,
                    "a WebSocket upgrade is a GET without a body; drop `--method` and the body flags",
                ),
            );
        }
    };
    match args.format {
        Format::Json => outln!("{}", decision_json(&decision)),
        Format::Human => print_human(&decision),
    }
    EXIT_OK
}

/// One request to decide, as `eval`'s flags or a `test` case describe it:
/// both are answered by [`decide`], so a test passes exactly when `eval`
/// gives the answer it expects.
pub(super) struct Ask<'a> {
    pub binary: &'a str,
    pub sha256: Option<String>,
    /// Without `sha256`, hash `binary` when that file is readable (`eval`
    /// asks about this machine; a test case must not depend on it).
    pub hash_binary: bool,
    pub url: Option<&'a str>,
    pub method: Option<&'a str>,
    pub host: Option<&'a str>,
    pub port: Option<u16>,
    pub addr: Option<IpAddr>,
    pub body: Option<Vec<u8>>,
    /// The body's `Content-Type`, which decides whether its placeholders
    /// are rewritten (`request_body_credential_rewrite`).
    pub content_type: Option<&'a str>,
    /// An upgrade asked for explicitly (a `ws://` URL or a message imply it).
    pub websocket: bool,
    pub ws_message: Option<WsMessageArg>,
}

/// Why an [`Ask`] describes no request.
#[derive(Debug)]
pub(super) enum AskError {
    Url(String),
    WebsocketWithBody,
}

/// The reference evaluator's decision for one request.
pub(super) fn decide(ev: &Evaluator, ask: &Ask<'_>) -> Result<Decision, AskError> {
    let mut req = Request {
        binary: ask.binary.to_owned(),
        sha256: ask
            .sha256
            .clone()
            .or_else(|| ask.hash_binary.then(|| hash_file(ask.binary)).flatten()),
        addr: ask.addr,
        ..Request::default()
    };
    if let Some(url) = ask.url {
        let (host, port, target) = parse_url(url).map_err(AskError::Url)?;
        let default = if ask.body.is_some() { "POST" } else { "GET" };
        req.host = Some(host);
        req.port = port;
        req.http = Some(HttpRequest {
            method: ask.method.unwrap_or(default).to_ascii_uppercase(),
            target,
        });
    } else {
        req.host = ask.host.map(str::to_owned);
        req.port = ask.port.unwrap_or(0);
    }
    let websocket =
        ask.websocket || ask.ws_message.is_some() || ask.url.is_some_and(is_websocket_url);
    if websocket && (ask.body.is_some() || ask.method.is_some()) {
        return Err(AskError::WebsocketWithBody);
    }
    Ok(if websocket {
        let message = match &ask.ws_message {
            Some(WsMessageArg::Text(t)) => Some(WsClientMessage::Text(t)),
            Some(WsMessageArg::Binary(b)) => Some(WsClientMessage::Binary(b)),
            None => None,
        };
        ev.eval_websocket(&req, message)
    } else {
        ev.eval_with_typed_body(&req, ask.body.as_deref(), ask.content_type)
    })
}

/// A client message of `--websocket-text`, `--websocket-text-file` or
/// `--websocket-binary`.
pub(super) enum WsMessageArg {
    Text(String),
    Binary(Vec<u8>),
}

fn websocket_message(args: &Args) -> Result<Option<WsMessageArg>, String> {
    if let Some(t) = &args.websocket_text {
        return Ok(Some(WsMessageArg::Text(t.clone())));
    }
    if let Some(path) = &args.websocket_text_file {
        let bytes = read_file_or_stdin(path)
            .map_err(|e| format!("cannot read the message from `{path}`: {e}"))?;
        return String::from_utf8(bytes)
            .map(|t| Some(WsMessageArg::Text(t)))
            .map_err(|_| format!("the text message in `{path}` is not UTF-8"));
    }
    let Some(path) = &args.websocket_binary else {
        return Ok(None);
    };
    read_file_or_stdin(path)
        .map(|b| Some(WsMessageArg::Binary(b)))
        .map_err(|e| format!("cannot read the message from `{path}`: {e}"))
}

fn read_file_or_stdin(path: &str) -> std::io::Result<Vec<u8>> {
    if path == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map(|_| bytes)
    } else {
        std::fs::read(path)
    }
}

fn is_websocket_url(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(scheme, _)| matches!(scheme.to_ascii_lowercase().as_str(), "ws" | "wss"))
}

/// The request body the flags describe: `--graphql`, `--body` or
/// `--jsonrpc-method`, at most one of them.
fn request_body(args: &Args) -> Result<Option<Vec<u8>>, String> {
    let given: Vec<&str> = [
        ("--graphql", args.graphql.is_some()),
        ("--body", args.body.is_some()),
        ("--jsonrpc-method", !args.jsonrpc_methods.is_empty()),
    ]
    .into_iter()
    .filter_map(|(flag, set)| set.then_some(flag))
    .collect();
    if let (Some(flag), None) = (given.first(), &args.url) {
        return Err(format!(
            "`{flag}` gives the body of an HTTP request; add `--url` (`--host`/`--port` describe a connection only)"
        ));
    }
    if let [first, second, ..] = given.as_slice() {
        return Err(format!(
            "`{first}` and `{second}` both give the request body; give one of them"
        ));
    }
    if args.tool.is_some()
        && !args
            .jsonrpc_methods
            .iter()
            .any(|m| m == policy_bundle::matcher::TOOLS_CALL)
    {
        return Err(
            "`--tool` names the tool of a `tools/call` call; add `--jsonrpc-method tools/call`"
                .to_string(),
        );
    }
    if let Some(document) = &args.graphql {
        return Ok(Some(graphql_body(
            document,
            args.graphql_operation_name.as_deref(),
        )));
    }
    if let Some(path) = &args.body {
        return read_file_or_stdin(path)
            .map(Some)
            .map_err(|e| format!("cannot read the body from `{path}`: {e}"));
    }
    if args.jsonrpc_methods.is_empty() {
        return Ok(None);
    }
    Ok(Some(jsonrpc_body(
        &args.jsonrpc_methods,
        args.tool.as_deref(),
    )))
}

/// The GraphQL JSON body `{"query", "operationName"}` of `--graphql`.
pub(super) fn graphql_body(document: &str, operation_name: Option<&str>) -> Vec<u8> {
    let mut request = serde_json::Map::new();
    request.insert("query".into(), document.into());
    if let Some(name) = operation_name {
        request.insert("operationName".into(), name.into());
    }
    serde_json::Value::Object(request).to_string().into_bytes()
}

/// JSON-RPC 2.0 calls, one per method (a batch when there are several);
/// `tools/call` calls carry `tool` as `params.name`.
pub(super) fn jsonrpc_body(methods: &[String], tool: Option<&str>) -> Vec<u8> {
    let calls: Vec<serde_json::Value> = methods
        .iter()
        .enumerate()
        .map(|(i, method)| {
            let mut call = serde_json::Map::new();
            call.insert("jsonrpc".into(), "2.0".into());
            call.insert("id".into(), (i + 1).into());
            call.insert("method".into(), method.as_str().into());
            if method == policy_bundle::matcher::TOOLS_CALL
                && let Some(tool) = tool
            {
                call.insert(
                    "params".into(),
                    serde_json::json!({ "name": tool, "arguments": {} }),
                );
            }
            serde_json::Value::Object(call)
        })
        .collect();
    let body = match calls.as_slice() {
        [one] => one.to_string(),
        _ => serde_json::Value::Array(calls).to_string(),
    };
    body.into_bytes()
}

/// No decision: the reason in the requested format, exit 2.
fn failed(format: Format, f: &Failure) -> u8 {
    match format {
        Format::Human => f.print_human(),
        Format::Json => failed_json(f),
    }
    EXIT_INPUT
}

/// The JSON answer when there is no decision: `decision` is `error`.
pub(super) fn failed_json(f: &Failure) {
    let (files, errors) = f.json_members();
    outln!(
        "{}",
        serde_json::json!({
            "decision": "error",
            "route": null,
            "rule": null,
            "credential": null,
            "reason": f.headline(),
            "errors": errors,
            "files": files,
        })
    );
}

fn load_bundle(args: &Args) -> Result<Bundle, Failure> {
    if let Some(path) = &args.bundle {
        let shown = Some(path.display().to_string());
        let bytes = std::fs::read(path).map_err(|e| {
            Failure::error(
                shown.clone(),
                format!("cannot read `{}`: {e}", path.display()),
            )
        })?;
        return Bundle::from_slice(&bytes)
            .map_err(|e| Failure::error(shown, format!("`{}`: {e}", path.display())));
    }
    let Some(path) = &args.policy else {
        return Err(Failure::error(None, "give `--bundle` or `--policy`"));
    };
    let shown = path.display().to_string();
    let (checked, bundle) = load::compile_file(path, args.credentials.credentials.as_deref())
        .map_err(|e| Failure::error(Some(shown.clone()), e.to_string()))?;
    match bundle {
        Some(b) => Ok(b),
        None => Err(Failure {
            files: vec![FileReport {
                path: shown.clone(),
                diagnostics: checked.diagnostics,
            }],
            errors: vec![InputError::new(
                Some(shown.clone()),
                format!("`{shown}` has errors; nothing to evaluate"),
            )],
        }),
    }
}

fn hash_file(path: &str) -> Option<String> {
    use sha2::Digest as _;
    let bytes = std::fs::read(path).ok()?;
    let digest = sha2::Sha256::digest(&bytes);
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Split an absolute http(s) URL into host, port and origin-form target.
fn parse_url(url: &str) -> Result<(String, u16, String), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("expected `http://` or `https://`")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        other => return Err(format!("unsupported scheme `{other}`")),
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(split);
    if authority.contains('@') {
        return Err("user information in the URL is not supported".to_string());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("unclosed `[`")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("invalid port `{p}`"))?,
            None => default_port,
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| format!("invalid port `{p}`"))?,
            ),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_string());
    }
    let target = target.split('#').next().unwrap_or("");
    let target = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("/{target}")
    };
    Ok((host, port, target))
}

/// The JSON answer: the decision's members, and `refusal`, the code the
/// proxy's 403 would carry (`null` unless it refuses the request).
pub(super) fn decision_json(d: &Decision) -> serde_json::Value {
    let mut v = serde_json::to_value(d).unwrap_or_default();
    if let Some(members) = v.as_object_mut() {
        members.insert("refusal".into(), d.refusal().into());
    }
    v
}

fn print_human(d: &Decision) {
    let verdict = match d.decision {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Audit => "audit (allowed, logged)",
    };
    let route = match d.route {
        Some(RouteKind::L4) => " via L4",
        Some(RouteKind::L7) => " via the L7 proxy",
        None => "",
    };
    outln!("{verdict}{route}");
    if let Some(code) = d.refusal() {
        // The proxy answers a body too long to rewrite with 413.
        let status = if code == "body_too_large" { 413 } else { 403 };
        outln!("refusal:    {status} {code}");
    }
    match &d.rule {
        Some(rule) => outln!("rule:       {}", rule.blame()),
        None if d.decision == Verdict::Deny => outln!("rule:       none (no rule allowed it)"),
        None => {}
    }
    if let Some(c) = &d.credential {
        outln!("credential: {c}");
    }
    outln!("reason:     {}", d.reason);
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://api.github.com/repos/o/r?x=1").unwrap(),
            ("api.github.com".into(), 443, "/repos/o/r?x=1".into())
        );
        assert_eq!(
            parse_url("http://[::1]:8080").unwrap(),
            ("::1".into(), 8080, "/".into())
        );
        assert!(parse_url("ftp://x").is_err());
    }
}
