//! JSON-RPC and MCP endpoints in the language: the formatter's canonical
//! form, and that formatting never changes the bundle.

mod support;

use policy_bundle::{L7Protocol, WireEndpoint};
use support::{assert_formats_to, compile};

const MESSY: &str = "policy \"rpc\" {
  allow   /usr/bin/agent ->  mcp.example.com:443 loose_tool_names   mcp all_mcp_methods {
        deny   rpc tools/call   tool delete_now \"tool\"
     body_limit   131072
  }
  allow /usr/bin/agent -> rpc.example.com:443   json-rpc {
    allow rpc   reports.search \"tool\"   reports.get # both read
  }
}
";

const CANONICAL: &str = "policy \"rpc\" {
  allow /usr/bin/agent -> mcp.example.com:443 mcp all_mcp_methods loose_tool_names {
    deny rpc tools/call tool delete_now tool
    body_limit 131072
  }
  allow /usr/bin/agent -> rpc.example.com:443 json-rpc {
    allow rpc reports.search \"tool\" reports.get  # both read
  }
}
";

#[test]
fn formatting_is_canonical_and_keeps_the_digest() {
    assert_formats_to(MESSY, CANONICAL, "rpc");
}

#[test]
fn endpoint_settings_reach_the_bundle() {
    let b = compile("settings", CANONICAL);
    // The flat view: each protocol's settings as the bundle writes them.
    let l7: Vec<WireEndpoint> = b.enforcement.l7.iter().map(WireEndpoint::from).collect();
    let mcp = l7.iter().find(|e| e.protocol == L7Protocol::Mcp).unwrap();
    assert!(mcp.all_mcp_methods);
    assert!(!mcp.strict_tool_names);
    assert_eq!(mcp.body_limit, Some(131_072));
    assert!(mcp.rpc_allow.is_empty());
    let deny = mcp.rpc_deny.first().unwrap();
    assert!(deny.matches("tools/call", Some("tool")));
    assert!(deny.matches("tools/call", Some("delete_now")));
    assert!(!deny.matches("tools/call", Some("delete_later")));
    let rpc = l7
        .iter()
        .find(|e| e.protocol == L7Protocol::JsonRpc)
        .unwrap();
    let methods: Vec<String> = rpc
        .rpc_allow
        .iter()
        .map(|r| r.methods.to_string())
        .collect();
    assert_eq!(methods, ["reports.get", "reports.search", "tool"]);
    assert_eq!(rpc.body_limit, None);
}
