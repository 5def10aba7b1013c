//! JSON-RPC and MCP endpoints: their rules judge the calls in request
//! bodies, which the prover does not model. It must never certify a network
//! change to a policy that has one, and must still find the widenings it
//! can see at the connection level.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failure should stop the test"
)]

mod support;

use policy_lang::bundle::{Bundle, L7Protocol, RpcMatcher};
use policy_lang::matcher::rpc_method::RpcMethod;
use policy_lang::matcher::tool::ToolSet;
use prover::{Options, Verdict};
use support::*;

const CREDS: &str = "credentials:\n  - name: mcp-token\n    type: api-key\n    injected_via: MCP_TOKEN\n    target_hosts: [mcp.example.com]\n";

fn compile(binaries: &[&str]) -> Bundle {
    let bins: String = binaries
        .iter()
        .map(|b| format!("      - {{ path: \"{b}\" }}\n"))
        .collect();
    let text = format!(
        "version: 1\nfilesystem_policy:\n  read_only: [/usr]\nnetwork_policies:\n  mcp:\n    name: mcp\n    endpoints:\n      - host: mcp.example.com\n        port: 443\n        protocol: rest\n        enforcement: enforce\n        access: read-only\n    binaries:\n{bins}"
    );
    compile_yaml_with_credentials(&text, CREDS)
}

/// The bundle with its one L7 endpoint turned into an MCP endpoint that
/// allows `tools/call` of `tools`.
fn as_mcp(mut b: Bundle, tools: &str) -> Bundle {
    let ep = b.enforcement.l7.first_mut().expect("one L7 endpoint");
    ep.allow.clear();
    ep.deny.clear();
    ep.protocol = L7Protocol::Mcp;
    ep.rpc_allow = vec![RpcMatcher {
        methods: RpcMethod::parse_mcp("tools/call").unwrap(),
        tools: Some(ToolSet::new([ToolSet::parse_one(tools).unwrap()]).unwrap()),
    }];
    b.digest = format!("{}-mcp-{tools}", b.digest);
    b
}

#[test]
fn a_new_mcp_tool_is_not_certified_as_no_new_access() {
    let old = as_mcp(compile(&["/usr/bin/agent"]), "search");
    let new = as_mcp(compile(&["/usr/bin/agent"]), "send_email");
    let r = prover::diff(&old, &new, &Options::default()).unwrap();
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:#?}");
    assert!(
        r.inconclusive.as_deref().is_some_and(|w| w.contains("MCP")),
        "{r:#?}"
    );
}

#[test]
fn a_rest_endpoint_turned_into_mcp_is_not_certified() {
    let old = compile(&["/usr/bin/agent"]);
    let new = as_mcp(compile(&["/usr/bin/agent"]), "search");
    let r = prover::diff(&old, &new, &Options::default()).unwrap();
    assert_ne!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}

#[test]
fn a_new_binary_on_an_mcp_endpoint_is_a_widening() {
    let old = as_mcp(compile(&["/usr/bin/agent"]), "search");
    let new = as_mcp(compile(&["/usr/bin/agent", "/usr/bin/intruder"]), "search");
    let r = prover::diff(&old, &new, &Options::default()).unwrap();
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    assert!(
        r.findings
            .iter()
            .any(|f| f.witness.binary == "/usr/bin/intruder"),
        "{:#?}",
        r.findings
    );
}

#[test]
fn a_filesystem_only_change_beside_an_mcp_endpoint_is_certified() {
    let old = as_mcp(compile(&["/usr/bin/agent"]), "search");
    let mut new = old.clone();
    new.enforcement
        .landlock
        .paths
        .retain(|p| !p.path.starts_with("/usr"));
    new.digest = format!("{}-narrowed", new.digest);
    let r = prover::diff(&old, &new, &Options::default()).unwrap();
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}
