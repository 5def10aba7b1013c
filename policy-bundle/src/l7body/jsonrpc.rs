//! JSON-RPC 2.0 request bodies, as a client sends them to an `mcp` or
//! `json-rpc` endpoint.
//!
//! The rules see only what this parser extracts (each call's method and,
//! for MCP `tools/call`, the tool), so it refuses every body whose calls a
//! server could read differently: malformed JSON, an object that repeats a
//! key (servers disagree on which copy wins; the rules would judge one
//! `method` and the server run the other), anything that is not JSON-RPC
//! 2.0, an empty batch, and a `tools/call` without a string `params.name`.
//! What OpenShell's runtime accepts and refuses is followed message by
//! message; MCP parameter validation beyond `tools/call` is not repeated.

use serde::de::{self, Deserialize, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::matcher::TOOLS_CALL;

/// How many body bytes are read for inspection when the endpoint does not
/// say (OpenShell's default for both protocols).
pub const DEFAULT_BODY_LIMIT: usize = 65536;

/// The longest tool name the strict check accepts.
pub const TOOL_NAME_MAX: usize = 128;

/// One request or notification in a JSON-RPC body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RpcCall {
    /// As sent; rules match it exactly or by glob.
    pub method: String,
    /// `params.name` of an MCP `tools/call`; `None` for every other call.
    pub tool: Option<String>,
    /// The message has no `id`: the server sends no response.
    pub(crate) notification: bool,
}

/// Which protocol reads the body. Generic JSON-RPC looks only at methods;
/// MCP also reads the tool of `tools/call` and requires request ids to be
/// strings or numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RpcDialect {
    /// JSON-RPC 2.0: methods only.
    JsonRpc,
    /// MCP: methods, and the tool of each `tools/call`.
    Mcp,
}

/// Everything the rules need from one body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RpcBody {
    /// Requests and notifications, in body order.
    pub calls: Vec<RpcCall>,
    /// Response frames (messages with `result` or `error`) the client sent,
    /// answering a server-initiated request. MCP relays them; generic
    /// JSON-RPC refuses them.
    pub(crate) responses: usize,
    /// The body was an array.
    pub batch: bool,
}

/// Which message of a body an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item(pub Option<usize>);

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(i) => write!(f, "batch item {}: ", i + 1),
            None => Ok(()),
        }
    }
}

/// Why a body cannot be judged. Every such body is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcBodyError {
    /// Not JSON; serde_json's description.
    #[error("the body is not valid JSON: {0}")]
    Json(String),
    #[error(
        "the body repeats a key inside one object ({0}); servers disagree on which copy counts"
    )]
    /// Refused because servers disagree on which copy counts; the key.
    DuplicateKey(String),
    /// `[]`: nothing to judge, so nothing to allow.
    #[error("the body is an empty batch")]
    EmptyBatch,
    /// A batch member or body that is a JSON scalar or array.
    #[error("{0}the message is not a JSON object")]
    NotObject(Item),
    /// No `"jsonrpc"`: not JSON-RPC 2.0.
    #[error("{0}missing or non-string `jsonrpc` field")]
    MissingVersion(Item),
    /// A `jsonrpc` other than `"2.0"`.
    #[error("{item}unsupported JSON-RPC version `{version}`")]
    Version {
        /// The message.
        item: Item,
        /// As sent.
        version: String,
    },
    /// A request and a response at once: which a server reads is not known.
    #[error("{0}the message has both `method` and `result`/`error`")]
    MethodAndResult(Item),
    /// Neither a request nor a response.
    #[error("{0}missing or non-string `method` field")]
    MissingMethod(Item),
    /// Only MCP, whose server sends requests back, has the client answer them.
    #[error("{0}a response frame sent by the client (only MCP endpoints relay these)")]
    ResponseFrame(Item),
    /// A client response frame that is not a well-formed response.
    #[error("{item}invalid response frame: {why}")]
    BadResponse {
        /// The message.
        item: Item,
        /// What is wrong with it.
        why: &'static str,
    },
    /// MCP: an id that is neither a string nor a number.
    #[error("{0}an MCP request id must be a string or a number")]
    BadId(Item),
    /// MCP: a `tools/call` whose tool cannot be read, so no tool rule can judge it.
    #[error("{0}`tools/call` without a string `params.name`")]
    MissingToolName(Item),
    #[error(
        "{item}tool name `{name}` does not match ^[A-Za-z0-9_.-]{{1,128}}$ (the endpoint checks tool names strictly)"
    )]
    /// A tool name the strict check refuses.
    ToolName {
        /// The message.
        item: Item,
        /// As sent.
        name: String,
    },
}

/// Parses a client-to-server body (a single object or a batch array) as an
/// MCP body, refusing response frames: for callers that must see calls
/// only. [`parse_rpc_body`] is the full reading the evaluator uses.
#[cfg(test)]
pub(crate) fn parse_jsonrpc_body(
    body: &[u8],
    strict_tool_names: bool,
) -> Result<Vec<RpcCall>, RpcBodyError> {
    let parsed = parse_rpc_body(body, RpcDialect::Mcp, strict_tool_names)?;
    if parsed.responses > 0 {
        return Err(RpcBodyError::ResponseFrame(Item(None)));
    }
    Ok(parsed.calls)
}

/// Parses a client-to-server body in the endpoint's dialect.
/// `strict_tool_names` applies to MCP only.
pub fn parse_rpc_body(
    body: &[u8],
    dialect: RpcDialect,
    strict_tool_names: bool,
) -> Result<RpcBody, RpcBodyError> {
    let value = strict_json(body)?;
    let mut out = RpcBody::default();
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(RpcBodyError::EmptyBatch);
            }
            out.batch = true;
            for (i, item) in items.iter().enumerate() {
                read_message(item, Item(Some(i)), dialect, strict_tool_names, &mut out)?;
            }
        }
        single => read_message(&single, Item(None), dialect, strict_tool_names, &mut out)?,
    }
    Ok(out)
}

/// Whether an `Accept` header value asks for `text/event-stream`: with no
/// body, that GET is MCP Streamable HTTP's receive stream.
pub fn accepts_event_stream(accept: &str) -> bool {
    accept.split(',').any(|part| {
        part.split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
    })
}

/// Whether a tool name is in the MCP-recommended form.
pub fn is_strict_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOOL_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn read_message(
    value: &Value,
    item: Item,
    dialect: RpcDialect,
    strict_tool_names: bool,
    out: &mut RpcBody,
) -> Result<(), RpcBodyError> {
    let Value::Object(obj) = value else {
        return Err(match value {
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                RpcBodyError::MissingVersion(item)
            }
            _ => RpcBodyError::NotObject(item),
        });
    };
    let version = obj
        .get("jsonrpc")
        .and_then(Value::as_str)
        .ok_or(RpcBodyError::MissingVersion(item))?;
    if version != "2.0" {
        return Err(RpcBodyError::Version {
            item,
            version: version.to_string(),
        });
    }
    let has_method = obj.contains_key("method");
    let has_result = obj.contains_key("result");
    let has_error = obj.contains_key("error");
    if has_method && (has_result || has_error) {
        return Err(RpcBodyError::MethodAndResult(item));
    }
    if has_result || has_error {
        check_response(obj, item, has_result, has_error)?;
        out.responses += 1;
        return Ok(());
    }
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .ok_or(RpcBodyError::MissingMethod(item))?;
    let notification = !obj.contains_key("id");
    let mut tool = None;
    if dialect == RpcDialect::Mcp {
        if let Some(id) = obj.get("id")
            && !(id.is_string() || id.is_number())
        {
            return Err(RpcBodyError::BadId(item));
        }
        // A notification is a call too: the server runs the tool and only
        // keeps the answer to itself, so its tool is read and judged.
        if method == TOOLS_CALL {
            let name = obj
                .get("params")
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .ok_or(RpcBodyError::MissingToolName(item))?;
            if strict_tool_names && !is_strict_tool_name(name) {
                return Err(RpcBodyError::ToolName {
                    item,
                    name: name.to_string(),
                });
            }
            tool = Some(name.to_string());
        }
    }
    out.calls.push(RpcCall {
        method: method.to_string(),
        tool,
        notification,
    });
    Ok(())
}

fn check_response(
    obj: &Map<String, Value>,
    item: Item,
    has_result: bool,
    has_error: bool,
) -> Result<(), RpcBodyError> {
    let bad = |why| Err(RpcBodyError::BadResponse { item, why });
    if has_result && has_error {
        return bad("it has both `result` and `error`");
    }
    match obj.get("id") {
        None => return bad("it has no `id`"),
        Some(id) if !(id.is_string() || id.is_number() || id.is_null()) => {
            return bad("its `id` is not a string, number or null");
        }
        Some(_) => {}
    }
    if has_error && !obj.get("error").is_some_and(Value::is_object) {
        return bad("its `error` is not an object");
    }
    Ok(())
}

const DUPLICATE: &str = "duplicate key ";

/// JSON with every object's keys unique (compared after unescaping, so
/// `"method"` and `"\u006dethod"` are the same key).
fn strict_json(body: &[u8]) -> Result<Value, RpcBodyError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = StrictValue::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(StrictValue(v)) => Ok(v),
        Err(e) => {
            let text = e.to_string();
            if text.starts_with(DUPLICATE) {
                Err(RpcBodyError::DuplicateKey(text))
            } else {
                Err(RpcBodyError::Json(text))
            }
        }
    }
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE}`{key}`")));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mcp(body: &str) -> Result<RpcBody, RpcBodyError> {
        parse_rpc_body(body.as_bytes(), RpcDialect::Mcp, true)
    }

    fn generic(body: &str) -> Result<RpcBody, RpcBodyError> {
        parse_rpc_body(body.as_bytes(), RpcDialect::JsonRpc, true)
    }

    #[test]
    fn single_request_and_tool() {
        let calls = parse_jsonrpc_body(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_web","arguments":{}}}"#,
            true,
        )
        .unwrap();
        assert_eq!(
            calls,
            vec![RpcCall {
                method: "tools/call".into(),
                tool: Some("search_web".into()),
                notification: false
            }]
        );
    }

    #[test]
    fn notifications_have_no_id() {
        let body = mcp(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(body.calls[0].notification);
        assert!(!body.batch);
    }

    #[test]
    fn a_tools_call_notification_names_its_tool_alone_or_in_a_batch() {
        let alone = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"send_email"}}"#;
        let body = mcp(alone).unwrap();
        assert!(body.calls[0].notification);
        assert_eq!(body.calls[0].tool.as_deref(), Some("send_email"));
        let batch = format!(r#"[{{"jsonrpc":"2.0","id":1,"method":"ping"}},{alone}]"#);
        let body = mcp(&batch).unwrap();
        assert_eq!(body.calls[1].tool.as_deref(), Some("send_email"));
        assert_eq!(
            mcp(r#"[{"jsonrpc":"2.0","method":"tools/call","params":{}}]"#),
            Err(RpcBodyError::MissingToolName(Item(Some(0))))
        );
        assert_eq!(
            mcp(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a b"}}"#),
            Err(RpcBodyError::ToolName {
                item: Item(None),
                name: "a b".into()
            })
        );
    }

    #[test]
    fn batches_keep_order_and_count_responses() {
        let body = mcp(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":9,"result":{}},{"jsonrpc":"2.0","method":"b"}]"#).unwrap();
        assert!(body.batch);
        assert_eq!(body.responses, 1);
        let methods: Vec<_> = body.calls.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(methods, ["a", "b"]);
    }

    #[test]
    fn duplicate_keys_are_refused_even_when_escaped() {
        let err =
            generic(r#"{"jsonrpc":"2.0","id":1,"method":"ok","\u006dethod":"evil"}"#).unwrap_err();
        assert!(matches!(err, RpcBodyError::DuplicateKey(_)), "{err}");
        let nested = mcp(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
        )
        .unwrap_err();
        assert!(matches!(nested, RpcBodyError::DuplicateKey(_)), "{nested}");
    }

    #[test]
    fn malformed_bodies_are_refused() {
        assert!(matches!(generic("{"), Err(RpcBodyError::Json(_))));
        assert!(matches!(generic("{} x"), Err(RpcBodyError::Json(_))));
        assert_eq!(generic("[]"), Err(RpcBodyError::EmptyBatch));
        assert_eq!(
            generic("null"),
            Err(RpcBodyError::MissingVersion(Item(None)))
        );
        assert_eq!(
            generic(r#"{"jsonrpc":"1.0","id":1,"method":"a"}"#),
            Err(RpcBodyError::Version {
                item: Item(None),
                version: "1.0".into()
            })
        );
        assert_eq!(
            generic(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"id":2,"method":"b"}]"#),
            Err(RpcBodyError::MissingVersion(Item(Some(1))))
        );
        assert_eq!(
            generic(r#"{"jsonrpc":"2.0","id":1,"method":"a","result":{}}"#),
            Err(RpcBodyError::MethodAndResult(Item(None)))
        );
        assert!(matches!(
            generic(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#),
            Err(RpcBodyError::BadResponse { .. })
        ));
        assert_eq!(
            generic(r#"{"jsonrpc":"2.0","id":1}"#),
            Err(RpcBodyError::MissingMethod(Item(None)))
        );
    }

    #[test]
    fn mcp_checks_tool_names_and_ids() {
        assert_eq!(
            mcp(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#),
            Err(RpcBodyError::MissingToolName(Item(None)))
        );
        assert!(matches!(
            mcp(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read status"}}"#
            ),
            Err(RpcBodyError::ToolName { .. })
        ));
        let loose = parse_rpc_body(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read status"}}"#,
            RpcDialect::Mcp,
            false,
        )
        .unwrap();
        assert_eq!(loose.calls[0].tool.as_deref(), Some("read status"));
        assert_eq!(
            mcp(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            Err(RpcBodyError::BadId(Item(None)))
        );
        // Generic JSON-RPC reads no params.
        let body =
            generic(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":[1]}"#).unwrap();
        assert_eq!(body.calls[0].tool, None);
    }

    #[test]
    fn response_frames_are_reported() {
        assert_eq!(
            parse_jsonrpc_body(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
            Err(RpcBodyError::ResponseFrame(Item(None)))
        );
        assert_eq!(
            generic(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
                .unwrap()
                .responses,
            1
        );
    }

    #[test]
    fn strict_tool_name_bounds() {
        assert!(is_strict_tool_name("a.b-c_D9"));
        assert!(is_strict_tool_name(&"x".repeat(128)));
        assert!(!is_strict_tool_name(&"x".repeat(129)));
        assert!(!is_strict_tool_name(""));
        assert!(!is_strict_tool_name("é"));
    }

    #[test]
    fn event_stream_accept() {
        assert!(accepts_event_stream("application/json, text/event-stream"));
        assert!(accepts_event_stream("TEXT/EVENT-STREAM;q=0.9"));
        assert!(!accepts_event_stream("application/json"));
    }
}
