//! Any bytes through the GraphQL request analysis, as a POST body, a
//! WebSocket message and a bare document: nothing may panic, every answer
//! is well formed (root fields sorted, distinct, GraphQL names), and a
//! document reads the same whether it arrives bare, in a POST body, in a
//! GET query string or in a WebSocket `subscribe` message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_bundle::l7body::graphql::{
    self, DEFAULT_BODY_LIMIT, GraphqlOp, WsMessage, classify_ws_text, op_from_document,
    ops_from_post, ops_from_query_string,
};
use policy_bundle::matcher::graphql::is_name_char;

fn is_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| !c.is_ascii_digit()) && s.chars().all(is_name_char)
}

fn check(op: &GraphqlOp) {
    match op {
        GraphqlOp::Parsed {
            name, root_fields, ..
        } => {
            assert!(!root_fields.is_empty(), "{op:?}");
            assert!(root_fields.windows(2).all(|w| w[0] < w[1]), "{op:?}");
            assert!(root_fields.iter().all(|f| is_name(f)), "{op:?}");
            assert!(name.as_deref().is_none_or(is_name), "{op:?}");
        }
        GraphqlOp::Persisted { hash, name } => {
            assert!(!hash.is_empty(), "{op:?}");
            assert!(name.as_deref().is_none_or(|n| !n.is_empty()), "{op:?}");
        }
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    if let Ok(ops) = ops_from_post(data) {
        ops.iter().for_each(check);
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(WsMessage::Operation(op)) = classify_ws_text(text) {
        check(&op);
    }
    let _ = graphql::check_content_type(Some(text));
    let Ok(op) = op_from_document(text, None) else {
        return;
    };
    check(&op);
    // NUL never reaches a query string, and a blank document is no document.
    if text.contains('\0') || text.trim().is_empty() {
        return;
    }
    let body = serde_json::json!({ "query": text }).to_string();
    if body.len() <= DEFAULT_BODY_LIMIT {
        assert_eq!(
            ops_from_post(body.as_bytes()),
            Ok(vec![op.clone()]),
            "POST of {text:?}"
        );
    }
    let get = format!("query={}", percent_encode(text));
    if get.len() <= DEFAULT_BODY_LIMIT {
        assert_eq!(
            ops_from_query_string(&get),
            Ok(op.clone()),
            "GET of {text:?}"
        );
    }
    let ws =
        serde_json::json!({"id": "1", "type": "subscribe", "payload": {"query": text}}).to_string();
    if ws.len() <= DEFAULT_BODY_LIMIT {
        assert_eq!(
            classify_ws_text(&ws),
            Ok(WsMessage::Operation(op)),
            "WebSocket of {text:?}"
        );
    }
});
