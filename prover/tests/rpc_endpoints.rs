//! JSON-RPC and MCP endpoints: the prover models the call a request body
//! carries (method, and the tool of an MCP `tools/call`), so a new method
//! or tool is a widening with a witness that replays through the
//! evaluator, and an unchanged or narrowed set of calls is certified.

#![expect(clippy::panic, reason = "tests: a failure should stop the test")]

mod support;

use policy_bundle::Bundle;
use prover::{Finding, Report, Verdict};
use support::*;

const CREDENTIAL: &str = r#"
  credential mcp_key {
    secret env MCP_API_KEY
    placeholder env MCP_API_KEY
    inject header Authorization "Bearer {secret}"
    hosts mcp.example.com
  }
"#;

/// A policy with one endpoint on `mcp.example.com` of this kind (`mcp
/// ...`, `json-rpc`, `http`) and these rule lines.
fn endpoint(kind: &str, rules: &str) -> Bundle {
    compile(&policy(&format!(
        "{CREDENTIAL}\n  allow /usr/bin/agent -> mcp.example.com:443 {kind} {{\n{rules}\n  }}"
    )))
}

fn mcp(rules: &str) -> Bundle {
    endpoint("mcp", rules)
}

/// The one finding whose witness names this call.
fn finding_with<'a>(r: &'a Report, method: &str, tool: Option<&str>) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| {
            f.witness.rpc_method.as_deref() == Some(method) && f.witness.tool.as_deref() == tool
        })
        .unwrap_or_else(|| panic!("no finding for {method} {tool:?}: {:#?}", r.findings))
}

#[test]
fn a_new_mcp_tool_is_a_widening_with_a_witness_that_replays() {
    let old = mcp("    allow rpc tools/call tool search");
    let new = mcp("    allow rpc tools/call tool search send_email");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = finding_with(&r, "tools/call", Some("send_email"));
    assert_eq!(f.witness.method.as_deref(), Some("POST"));
    assert_eq!(
        f.witness.call_flags().as_deref(),
        Some("--jsonrpc-method tools/call --tool send_email")
    );
    assert!(
        f.witness
            .request_text()
            .ends_with("--jsonrpc-method tools/call --tool send_email"),
        "{}",
        f.witness.request_text()
    );
    assert_replays(f, &old, &new);
    // Only the new tool: `search` was allowed before.
    assert!(
        r.findings
            .iter()
            .all(|f| f.witness.tool.as_deref() != Some("search")),
        "{:#?}",
        r.findings
    );
    let json = serde_json::to_value(f).unwrap();
    assert_eq!(json["witness"]["rpc_method"], "tools/call");
    assert_eq!(json["witness"]["tool"], "send_email");
}

#[test]
fn a_new_json_rpc_method_is_a_widening() {
    let old = endpoint("json-rpc", "    allow rpc reports.search");
    let new = endpoint("json-rpc", "    allow rpc reports.search reports.delete");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = finding_with(&r, "reports.delete", None);
    assert_eq!(
        f.witness.call_flags().as_deref(),
        Some("--jsonrpc-method reports.delete")
    );
    assert_replays(f, &old, &new);
}

#[test]
fn a_tool_moved_from_allow_to_deny_is_no_new_access() {
    let old = mcp("    allow rpc tools/call tool search send_email");
    let new = mcp("    allow rpc tools/call tool search\n    deny rpc tools/call tool send_email");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.inconclusive.is_none(), "{r:#?}");
}

#[test]
fn an_identical_policy_is_no_new_access() {
    let old = mcp(
        "    allow rpc initialize tools/list\n    allow rpc tools/call tool search read_*\n    deny rpc tools/call tool read_secret",
    );
    let r = diff_bundles(&old, &old.clone());
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    // The same tables under another digest go through the whole model.
    let mut same = old.clone();
    same.digest = format!("{}-again", same.digest);
    let r = diff_bundles(&old, &same);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    assert!(r.findings.is_empty() && r.inconclusive.is_none(), "{r:#?}");
}

#[test]
fn loose_tool_names_let_names_outside_the_strict_pattern_through() {
    let old = mcp("    allow rpc tools/call tool search");
    let new = endpoint(
        "mcp loose_tool_names",
        "    allow rpc tools/call tool search",
    );
    assert!(old.enforcement.l7[0].strict_tool_names());
    assert!(!new.enforcement.l7[0].strict_tool_names());
    // The allowed tool is the same: what is new is names the strict
    // pattern refuses, through a rule that matches them. With a literal
    // tool there is none; with all methods allowed there is.
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
    let old = endpoint(
        "mcp all_mcp_methods",
        "    deny rpc tools/call tool send_email",
    );
    let new = endpoint(
        "mcp all_mcp_methods loose_tool_names",
        "    deny rpc tools/call tool send_email",
    );
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = r
        .findings
        .iter()
        .find(|f| f.witness.tool.is_some())
        .expect("a finding naming a tool");
    let tool = f.witness.tool.as_deref().unwrap();
    assert!(
        !policy_bundle::l7body::jsonrpc::is_strict_tool_name(tool),
        "`{tool}` passes the strict pattern"
    );
    assert_replays(f, &old, &new);
}

#[test]
fn all_mcp_methods_is_a_widening() {
    let old = mcp("    allow rpc initialize tools/list");
    let new = endpoint("mcp all_mcp_methods", "    allow rpc initialize tools/list");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert!(f.witness.rpc_method.is_some(), "{f:#?}");
        assert_replays(f, &old, &new);
    }
}

#[test]
fn a_larger_body_limit_is_a_widening_with_a_padded_witness() {
    let old = mcp("    body_limit 100\n    allow rpc tools/call tool search");
    let new = mcp("    body_limit 200\n    allow rpc tools/call tool search");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = &r.findings[0];
    let body = f.witness.body_bytes().unwrap();
    assert!(body.len() > 100 && body.len() <= 200, "{f:#?}");
    assert_replays(f, &old, &new);
    // And the other way round nothing is new.
    let r = diff_bundles(&new, &old);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}

#[test]
fn rest_to_mcp_on_the_same_host() {
    // REST allowed reading only; the MCP endpoint's calls travel in POST
    // requests, which the REST rules refused: new, and shown as a call.
    let old = endpoint("http", "    allow GET /**");
    let new = mcp("    allow rpc tools/call tool search");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
    }
    let f = finding_with(&r, "tools/call", Some("search"));
    assert_eq!(f.witness.method.as_deref(), Some("POST"));
    // The other way: REST rules that allow every POST let any body
    // through, including calls the MCP rules refused.
    let old = mcp("    allow rpc tools/call tool search");
    let new = endpoint("http", "    allow POST /**");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
    }
    // An MCP endpoint that refuses every call beside a REST one that only
    // reads: the receive stream (a GET without a body) was allowed before.
    let old = endpoint("http", "    allow GET /**");
    let new = mcp("    allow rpc initialize");
    let r = diff_bundles(&old, &new);
    assert!(
        r.findings
            .iter()
            .all(|f| f.witness.method.as_deref() == Some("POST")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn a_new_binary_on_an_mcp_endpoint_is_a_widening() {
    let old = mcp("    allow rpc tools/call tool search");
    let text = policy(&format!(
        "{CREDENTIAL}\n  allow /usr/bin/agent /usr/bin/intruder -> mcp.example.com:443 mcp {{\n    allow rpc tools/call tool search\n  }}"
    ));
    let new = compile(&text);
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    let f = r
        .findings
        .iter()
        .find(|f| f.witness.binary == "/usr/bin/intruder")
        .expect("a finding for the new binary");
    if !f.witness.is_connection() {
        assert_replays(f, &old, &new);
    }
}

#[test]
fn a_filesystem_only_change_beside_an_mcp_endpoint_is_certified() {
    let old = mcp("    allow rpc tools/call tool search");
    let mut new = old.clone();
    new.enforcement
        .landlock
        .paths
        .retain(|p| !p.path.starts_with("/usr"));
    new.digest = format!("{}-narrowed", new.digest);
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::NoNewAccess, "{r:#?}");
}

#[test]
fn the_policy_shipped_for_mcp_is_certified_against_itself_and_a_new_tool_is_found() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../policies/mcp-tools.policy"
    ))
    .unwrap();
    let dir = scratch();
    std::fs::create_dir_all(dir.join("fragments")).unwrap();
    for f in std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../policies/fragments"
    ))
    .unwrap()
    {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.join("fragments").join(f.file_name())).unwrap();
    }
    let load = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        policy_lang::load::compile_file(&path, None)
            .unwrap()
            .1
            .unwrap()
    };
    let old = load("old.policy", &text);
    let new = load(
        "new.policy",
        &text.replace("tool search read_*", "tool search read_* send_*"),
    );
    let mut same = old.clone();
    same.digest = format!("{}-again", same.digest);
    assert_eq!(diff_bundles(&old, &same).verdict, Verdict::NoNewAccess);
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    for f in &r.findings {
        let tool = f.witness.tool.as_deref().unwrap_or_default();
        assert!(tool.starts_with("send_") && tool != "send_email", "{f:#?}");
        assert_replays(f, &old, &new);
    }
}

/// GraphQL operations are not modelled yet: a new mutation must not be
/// certified (the answer says why), while an unchanged policy still is.
#[test]
fn graphql_endpoints_are_modelled_not_assumed_open() {
    let gql = |rules: &str| endpoint("graphql", &format!("    path /graphql\n{rules}"));
    let old = gql("    allow graphql query");
    let new = gql("    allow graphql query mutation");
    let r = diff_bundles(&old, &new);
    assert_eq!(r.verdict, Verdict::Widened, "{r:#?}");
    assert!(r.inconclusive.is_none(), "{r:#?}");
    for f in &r.findings {
        assert_replays(f, &old, &new);
        assert!(
            f.witness
                .graphql
                .as_deref()
                .is_some_and(|d| d.starts_with("mutation")),
            "{f:#?}"
        );
    }
    let same = diff_bundles(&old, &gql("    allow graphql query"));
    assert_eq!(same.verdict, Verdict::NoNewAccess, "{same:#?}");
    // A change to the rules that lets nothing new through is certified.
    let narrower = diff_bundles(&new, &old);
    assert_eq!(narrower.verdict, Verdict::NoNewAccess, "{narrower:#?}");
}
