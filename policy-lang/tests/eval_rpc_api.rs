//! The evaluator's body API on hand-built JSON-RPC and MCP endpoints: the
//! bundle shape the proxy enforces, independent of the policy language.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly on bad fixtures"
)]

use policy_bundle::eval::{Evaluator, Verdict};
use policy_bundle::matcher::{RpcMethod, ToolSet};
use policy_bundle::{Bundle, L7Endpoint, L7Protocol, RpcMatcher, WireEndpoint};
use policy_lang::load;

fn bundle() -> Bundle {
    let tmp = std::env::temp_dir().join(format!("osp-rpc-api-{}.policy", std::process::id()));
    std::fs::write(
        &tmp,
        "policy \"rpc\" {\n  allow /usr/bin/agent -> mcp.example.com:443 http {\n    allow POST /mcp\n  }\n}\n",
    )
    .unwrap();
    let (_, bundle) = load::compile_file(&tmp, None).unwrap();
    bundle.unwrap()
}

fn rule(method: &str, tools: Option<&str>) -> RpcMatcher {
    RpcMatcher {
        methods: RpcMethod::parse(method).unwrap(),
        tools: tools.map(|t| ToolSet::parse(t).unwrap()),
    }
}

fn evaluator(edit: impl FnOnce(&mut WireEndpoint)) -> Evaluator {
    let mut b = bundle();
    let ep = b.enforcement.l7.first_mut().unwrap();
    // Edited in the flat form a bundle is written in, and read back as a
    // loaded bundle is; the endpoint keeps its origins, the new rules have
    // none.
    let mut wire = WireEndpoint::from(&*ep);
    wire.allow.clear();
    wire.protocol = L7Protocol::Mcp;
    edit(&mut wire);
    let origins = std::mem::take(&mut ep.origins);
    *ep = L7Endpoint::try_from(wire).unwrap();
    ep.origins = origins;
    let b = Bundle::new(b.enforcement, b.provenance);
    Evaluator::new(Bundle::from_slice(&b.to_bytes()).unwrap())
}

fn decide(ev: &Evaluator, method: &str, body: &str) -> policy_bundle::eval::Decision {
    let conn = ev.decide_connection("/usr/bin/agent", None, Some("mcp.example.com"), None, 443);
    assert!(conn.allowed(), "{}", conn.reason);
    assert!(ev.body_limit(&conn, "/mcp").is_some());
    ev.decide_body(
        &conn,
        Some("mcp.example.com"),
        method,
        "/mcp",
        body.as_bytes(),
    )
}

fn call(method: &str, tool: Option<&str>) -> String {
    match tool {
        Some(t) => {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"name":"{t}"}}}}"#)
        }
        None => format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}"}}"#),
    }
}

#[test]
fn mcp_rules_allow_deny_and_batches() {
    let ev = evaluator(|ep| {
        ep.rpc_allow = vec![
            rule("initialize", None),
            rule("tools/call", Some("search_* read_file")),
        ];
        ep.rpc_deny = vec![rule("tools/call", Some("search_secret"))];
    });
    assert_eq!(
        decide(&ev, "POST", &call("initialize", None)).decision,
        Verdict::Allow
    );
    assert_eq!(
        decide(&ev, "POST", &call("tools/call", Some("search_web"))).decision,
        Verdict::Allow
    );
    let denied = decide(&ev, "POST", &call("tools/call", Some("search_secret")));
    assert_eq!(denied.decision, Verdict::Deny);
    assert!(denied.reason.contains("search_secret"), "{}", denied.reason);
    assert_eq!(denied.rpc.as_ref().and_then(|n| n.call), Some(0));
    let batch = format!(
        "[{},{}]",
        call("initialize", None),
        call("tools/call", Some("delete_all"))
    );
    let d = decide(&ev, "POST", &batch);
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("batch call 2 of 2"), "{}", d.reason);
    // MCP relays response frames; GET with no body is the receive stream.
    assert_eq!(
        decide(&ev, "POST", r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).decision,
        Verdict::Allow
    );
    assert_eq!(decide(&ev, "GET", "").decision, Verdict::Allow);
    // Notifications are judged like requests.
    let note = decide(
        &ev,
        "POST",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(note.decision, Verdict::Deny);
    assert!(
        note.reason
            .contains("notification `notifications/initialized`"),
        "{}",
        note.reason
    );
    // Strict tool names are checked before any rule.
    let loose = decide(&ev, "POST", &call("tools/call", Some("search web")));
    assert_eq!(loose.decision, Verdict::Deny);
    assert!(loose.reason.contains("does not match"), "{}", loose.reason);
    assert_eq!(decide(&ev, "DELETE", "").decision, Verdict::Deny);
    assert_eq!(
        decide(&ev, "GET", &call("initialize", None)).decision,
        Verdict::Deny
    );
}

#[test]
fn refusals_ignore_audit_mode() {
    let ev = evaluator(|ep| {
        ep.enforcement = policy_bundle::Enforcement::Audit;
        ep.protocol = L7Protocol::JsonRpc;
        ep.body_limit = Some(64);
        ep.rpc_allow = vec![rule("*", None)];
    });
    let ok = call("reports.search", None);
    assert_eq!(decide(&ev, "POST", &ok).decision, Verdict::Allow);
    let response = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
    assert_eq!(decide(&ev, "POST", response).decision, Verdict::Deny);
    assert_eq!(decide(&ev, "POST", "{").decision, Verdict::Deny);
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
        "x".repeat(80)
    );
    let d = decide(&ev, "POST", &long);
    assert_eq!(d.decision, Verdict::Deny);
    assert!(d.reason.contains("limit of 64"), "{}", d.reason);
    // A call no rule allows is only audited.
    let ev = evaluator(|ep| {
        ep.enforcement = policy_bundle::Enforcement::Audit;
        ep.protocol = L7Protocol::JsonRpc;
        ep.rpc_allow = vec![rule("reports.get", None)];
    });
    assert_eq!(decide(&ev, "POST", &ok).decision, Verdict::Audit);
}

#[test]
fn method_profile_leaves_tools_call_to_tool_rules() {
    let open = evaluator(|ep| ep.all_mcp_methods = true);
    assert_eq!(
        decide(&open, "POST", &call("anything/else", None)).decision,
        Verdict::Allow
    );
    assert_eq!(
        decide(&open, "POST", &call("tools/call", Some("x"))).decision,
        Verdict::Allow
    );
    let narrowed = evaluator(|ep| {
        ep.all_mcp_methods = true;
        ep.rpc_allow = vec![rule("tools/call", Some("read_file"))];
    });
    assert_eq!(
        decide(&narrowed, "POST", &call("tools/call", Some("x"))).decision,
        Verdict::Deny
    );
    assert_eq!(
        decide(&narrowed, "POST", &call("tools/call", Some("read_file"))).decision,
        Verdict::Allow
    );
    assert_eq!(
        decide(&narrowed, "POST", &call("resources/list", None)).decision,
        Verdict::Allow
    );
}

#[test]
fn rest_endpoints_read_no_body() {
    let ev = Evaluator::new(bundle());
    let conn = ev.decide_connection("/usr/bin/agent", None, Some("mcp.example.com"), None, 443);
    assert_eq!(ev.body_limit(&conn, "/mcp"), None);
}
