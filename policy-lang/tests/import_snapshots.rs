//! Snapshots of the importer: the policy text for every file in
//! `tests/shared/fixtures/openshell/`, a synthetic policy that uses every
//! translated construct, and the diagnostics for broken inputs, rendered as
//! `code line:col message` lines.

#![expect(clippy::unwrap_used, reason = "test harness")]

use std::path::{Path, PathBuf};

use policy_lang::diag::{Diagnostics, Severity};
use policy_lang::fmt::format_document;
use policy_lang::source::SourceFile;
use policy_lang::{import, resolve};

fn render(diags: &Diagnostics) -> String {
    let mut lines: Vec<String> = diags
        .iter()
        .map(|d| {
            let (l, c) = d.line_col();
            format!("{} {l}:{c} {}", d.code.id, d.message)
        })
        .collect();
    lines.sort_by_key(|l| {
        let mut parts = l.split(' ');
        let code = parts.next().unwrap_or("").to_string();
        let pos: Vec<u32> = parts
            .next()
            .unwrap_or("0:0")
            .split(':')
            .map(|n| n.parse().unwrap_or(0))
            .collect();
        (pos, code)
    });
    lines.join("\n")
}

/// Import one file: diagnostics, then the formatted policy.
fn import_text(name: &str, text: &str, credentials: bool) -> String {
    let file = SourceFile::new(name, text);
    let (doc, diags) = if credentials {
        import::credentials_to_document(&file)
    } else {
        import::yaml_to_document(&file)
    };
    let mut out = render(&diags);
    if let Some(doc) = doc.filter(|_| !diags.has_errors()) {
        let (_, resolve_diags) = resolve::resolve(std::slice::from_ref(&doc));
        let resolve_errors: Vec<String> = resolve_diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| format!("{} {}", d.code.id, d.message))
            .collect();
        assert!(resolve_errors.is_empty(), "{name}: {resolve_errors:?}");
        out.push_str("\n---\n");
        out.push_str(&format_document(&doc));
    }
    out
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

#[test]
fn openshell_fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shared/fixtures/openshell");
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() >= 15,
        "the shared fixtures are missing at {} (tests/shared/fixtures)",
        root.display()
    );
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let out = import_text(&rel, &text, rel.contains("credentials"));
        let name = format!(
            "openshell__{}",
            rel.trim_end_matches(".yaml").replace('/', "__")
        );
        insta::assert_snapshot!(name, out);
    }
}

const EVERYTHING: &str = r#"# Every construct the importer translates.
version: 1
filesystem_policy:
  include_workdir: true
  read_only: [/usr, "/etc"]
  read_write:
    - /sandbox
landlock: { compatibility: strict }
process: { run_as_user: sandbox, run_as_group: "1001" }
network_policies:
  github.api:
    name: GitHub API
    endpoints:
      - host: API.GitHub.com
        ports: [443, 8443]
        protocol: rest
        enforcement: enforce
        tls: terminate
        path: "/api/**"
        allow_encoded_slash: true
        rules:
          - allow: { method: get, path: "/repos/**", query: { per_page: "{10,100}", state: { any: [open, closed] } } }
          - allow: { method: GET, path: "/search/code", query: { q: "repo:acme/*", v: { any: ["1.*", "2.*"] }, lang: "**" } }
          - allow: { method: POST, path: "/repos/*/*/issues" }
          - allow: { method: "*", path: "**" }
        deny_rules:
          - { method: DELETE, path: "/repos/{a,b}/**" }
      - { host: "*.githubusercontent.com", port: 443, protocol: rest, access: read-only, tls: skip }
      - { host: "10.0.0.5", port: 22 }
      - { host: "2001:db8::1", port: 443 }
      - { port: 6379, allowed_ips: ["10.0.0.0/8", "fd00::/8"] }
      - { host: redis.example.com, port: 6380, protocol: tcp }
      - host: internal.example.com
        port: 80
        allowed_ips: [192.168.0.0/16]
        rules:
          - allow: { method: GET, path: /ignored }
    binaries:
      - { path: /usr/bin/gh }
      - { path: "/opt/**/bin/gh*", harness: true }
      - { path: relative/gh }
  github_api:
    endpoints: [{ host: example.org, port: 443, allow_uninspected_credentials: true }]
    binaries: [{ path: /usr/bin/curl }]
  empty:
    endpoints: [{ host: example.net, port: 443 }]
"#;

#[test]
fn every_construct() {
    insta::assert_snapshot!(
        "everything",
        import_text("everything.yaml", EVERYTHING, false)
    );
}

#[test]
fn broken_inputs() {
    let cases: &[(&str, &str)] = &[
        ("unreadable", "version: 1\nnetwork_policies: [oops\n"),
        ("duplicate_key", "version: 1\nversion: 1\n"),
        ("version_2", "version: 2\nnetwork_policies: {}\n"),
        ("version_string", "version: \"1\"\n"),
        (
            "other_schema",
            "name: ratchet\ntools:\n  - a\nknownSafe: []\n",
        ),
        (
            "template",
            "version: 1\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: \"${HOST}\", port: 443 }\n    binaries: [{ path: /usr/bin/curl }]\n",
        ),
        (
            "bad_endpoint",
            "version: 1\nlandlock: { compatibility: best_effort }\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: a.example.com }\n      - { host: b.example.com, port: 443, protocol: sql }\n      - { host: c.example.com, port: 443, protocol: rest, access: full, rules: [{ allow: { method: GET, path: /x } }] }\n      - { host: d.example.com, port: 443, protocol: rest, enforcement: enforce, websocket_credential_rewrite: true, frobnicate: 1 }\n      - { host: f.example.com, port: 443, credential_binding: { provider: gh } }\n      - { host: \"*\", port: 443 }\n      - { host: e.example.com, port: 443, protocol: rest, enforcement: enforce, rules: [{ allow: { method: GET, path: \"/a[!b]\" } }, { allow: { method: POST, path: api/x } }, { allow: { method: GET, path: /q, query: { v: \"v?\" } } }] }\n    binaries: [{ path: /usr/bin/curl }]\n",
        ),
        (
            "middlewares",
            "version: 1\nnetwork_middlewares:\n  guard: { kind: content }\n",
        ),
        (
            "openshell_refuses_identity",
            "version: 1\nprocess: { run_as_user: \"0\", run_as_group: root }\n",
        ),
        (
            "openshell_refuses_paths",
            "version: 1\nfilesystem_policy:\n  read_only: [/, /usr/../etc, /opt/x/..]\n  read_write: [/, /tmp, ///]\n",
        ),
        (
            "openshell_refuses_endpoints",
            "version: 1\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: rest, enforcement: enforce, rules: [] }\n      - { host: b.example.com, port: 443, protocol: rest, enforcement: enforce, rules: [{ allow: {} }, { name: x }] }\n      - { host: 10.0.0.5, port: 5432, protocol: tcp }\n      - { port: 5432, protocol: tcp, allowed_ips: [10.0.0.0/8] }\n      - { host: db.example.com, port: 5432, protocol: tcp, enforcement: enforce, path: /x, access: full }\n      - { host: c.example.com, port: 443, deny_rules: [{ method: POST, path: /x }] }\n      - { host: d.example.com, port: 443, protocol: rest, enforcement: enforce, deny_rules: [{ method: POST, path: /x }] }\n      - { host: e.example.com, port: 443, allowed_ips: [127.0.0.1, 169.254.169.254/32, \"::1\", 0.0.0.0/0, 10.0.0.0/8] }\n      - { host: f.example.com, port: 443, protocol: json-rpc, enforcement: enforce }\n      - { host: g.example.com, port: 443, protocol: mcp, enforcement: enforce }\n      - { host: h.example.com, port: 443, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true } }\n      - { host: i.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only, deny_rules: [] }\n      - { host: j.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, rules: [] }\n      - { host: k.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, rules: null, deny_rules: ~ }\n    binaries: [{ path: /usr/bin/curl }]\n",
        ),
        (
            "credentials_missing",
            "credentials:\n  - { name: gh, type: github-pat }\n",
        ),
    ];
    for (name, text) in cases {
        let out = import_text(
            &format!("{name}.yaml"),
            text,
            name.starts_with("credentials"),
        );
        insta::assert_snapshot!(format!("broken__{name}"), out);
    }
}

#[test]
fn later_diagnostics_point_into_the_yaml() {
    // The resolver reports an invalid host and a relative Landlock path at
    // the YAML scalars they came from.
    let text = "version: 1\nlandlock: { compatibility: best_effort }\nfilesystem_policy:\n  read_only: [usr/lib]\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: \"bad host.example.com\", port: 443 }\n    binaries: [{ path: /usr/bin/curl }]\n";
    let file = SourceFile::new("spans.yaml", text);
    let (doc, diags) = import::yaml_to_document(&file);
    assert!(!diags.has_errors(), "{}", render(&diags));
    let (_, resolve_diags) = resolve::resolve(&[doc.unwrap()]);
    let found: Vec<(String, (u32, u32))> = resolve_diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.code.id.to_string(), d.line_col()))
        .collect();
    assert!(found.contains(&("E0402".to_string(), (4, 15))), "{found:?}");
    assert!(
        found
            .iter()
            .any(|(c, (l, col))| c == "E0301" && (*l, *col) == (8, 21)),
        "{found:?}"
    );
}

/// The imported query matchers survive formatting: the text parses back to
/// the same bundle, and the bundle stores and reloads the dotted globs.
#[test]
fn imported_dotted_globs_round_trip_through_the_formatter_and_the_bundle() {
    use policy_bundle::Bundle;
    use policy_lang::{compile, parser};
    let file = SourceFile::new("everything.yaml", EVERYTHING);
    let (doc, diags) = import::yaml_to_document(&file);
    assert!(!diags.has_errors());
    let doc = doc.unwrap();
    let (resolved, _) = resolve::resolve(std::slice::from_ref(&doc));
    let bundle = compile::compile(&resolved.policy);
    let text = format_document(&doc);
    assert!(text.contains("?q=dotted:repo:acme/*"), "{text}");
    let (reparsed, parse_diags) = parser::parse(&SourceFile::new("e.policy", text.clone()));
    assert!(!parse_diags.has_errors());
    let reparsed = reparsed.unwrap();
    assert_eq!(format_document(&reparsed), text);
    let (re_resolved, re_diags) = resolve::resolve(std::slice::from_ref(&reparsed));
    assert!(!re_diags.has_errors());
    assert_eq!(compile::compile(&re_resolved.policy).digest, bundle.digest);
    let bytes = bundle.to_bytes();
    let json = String::from_utf8(bytes.clone()).unwrap();
    assert!(json.contains("\"dotted:1.*\""), "{json}");
    let loaded = Bundle::from_slice(&bytes).unwrap();
    assert_eq!(loaded.digest, bundle.digest);
}

const MCP: &str = r#"version: 1
network_policies:
  tools:
    name: tools
    binaries: [{ path: /usr/bin/agent }]
    endpoints:
      - host: mcp.example.com
        port: 443
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp:
          max_body_bytes: 131072
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow:
              method: tools/call
              tool: search_web
          - allow:
              method: tools/call
              tool: { any: ["github.*", read_file] }
          - allow:
              method: tools/call
              params: { name: list_issues }
        deny_rules:
          - { method: tools/call, tool: send_email }
      - host: open.example.com
        port: 443
        protocol: mcp
        enforcement: enforce
        mcp:
          allow_all_known_mcp_methods: true
          strict_tool_names: false
        deny_rules:
          - { tool: delete_repo }
      - host: rpc.example.com
        port: 443
        protocol: json-rpc
        enforcement: enforce
        json_rpc:
          max_body_bytes: 4096
        rules:
          - allow: { method: reports.search }
        deny_rules:
          - { method: "*" }
"#;

/// MCP and JSON-RPC endpoints import with OpenShell's meaning: tool globs
/// stop at a `.` (`dotted:`), a method-less tool rule of the allow-all
/// profile is a `tools/call` rule, and the body limits carry over.
#[test]
fn mcp_and_json_rpc_endpoints() {
    insta::assert_snapshot!("mcp", import_text("mcp.yaml", MCP, false));
}

/// GraphQL endpoints import with OpenShell's meaning: operation rules, the
/// registry (only under `persisted_queries: allow_registered`; otherwise
/// it has no effect and is left out with a warning), the body limit and
/// the GraphQL access presets; the policy written round-trips to the same
/// bundle.
#[test]
fn graphql_endpoints() {
    use policy_lang::{compile, parser};
    let text = std::fs::read_to_string("tests/import/graphql.yaml").unwrap();
    insta::assert_snapshot!("graphql", import_text("graphql.yaml", &text, false));
    let (doc, diags) = import::yaml_to_document(&SourceFile::new("graphql.yaml", text));
    assert!(!diags.has_errors(), "{}", render(&diags));
    let doc = doc.unwrap();
    let (resolved, _) = resolve::resolve(std::slice::from_ref(&doc));
    let bundle = compile::compile(&resolved.policy);
    let gh = bundle
        .enforcement
        .l7
        .iter()
        .find(|e| e.graphql().is_some_and(|g| !g.persisted_queries.is_empty()))
        .unwrap();
    assert_eq!(gh.graphql().unwrap().persisted_queries.len(), 2);
    assert_eq!(gh.body_limit(), Some(131_072));
    assert_eq!(gh.graphql().unwrap().deny.len(), 2);
    let written = format_document(&doc);
    let (reparsed, parse_diags) = parser::parse(&SourceFile::new("g.policy", written));
    assert!(!parse_diags.has_errors());
    let (re_resolved, re_diags) = resolve::resolve(std::slice::from_ref(&reparsed.unwrap()));
    assert!(!re_diags.has_errors());
    assert_eq!(compile::compile(&re_resolved.policy).digest, bundle.digest);
}

/// What OpenShell rejects, or GraphQL settings that would mean nothing.
#[test]
fn graphql_refusals() {
    let text = "version: 1\nnetwork_policies:\n  a:\n    binaries: [{ path: /usr/bin/curl }]\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: graphql, enforcement: enforce, rules: [{ allow: { method: POST, path: /graphql } }] }\n      - { host: b.example.com, port: 443, protocol: graphql, enforcement: enforce, rules: [{ allow: { operation_name: Get } }] }\n      - { host: c.example.com, port: 443, protocol: graphql, enforcement: enforce, access: full, persisted_queries: sometimes }\n      - { host: d.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, graphql_max_body_bytes: 1024 }\n      - { host: e.example.com, port: 443, protocol: graphql, enforcement: enforce, access: full, graphql_max_body_bytes: 0 }\n      - { host: f.example.com, port: 443, protocol: graphql, enforcement: enforce, rules: [{ allow: { operation_type: query, fields: [] } }] }\n      - { host: g.example.com, port: 443, protocol: sql, enforcement: enforce, access: full }\n";
    insta::assert_snapshot!(
        "broken__graphql",
        import_text("graphql-broken.yaml", text, false)
    );
}

/// `protocol: websocket` with OpenShell's meaning: transport rules (GET is
/// the upgrade, WEBSOCKET_TEXT client text messages), deny rules, the
/// presets' WebSocket expansion, and GraphQL over WebSocket; the policy
/// written round-trips to the same bundle.
#[test]
fn websocket_endpoints() {
    use policy_bundle::L7Protocol;
    use policy_lang::{compile, parser};
    let text = std::fs::read_to_string("tests/import/websocket.yaml").unwrap();
    insta::assert_snapshot!("websocket", import_text("websocket.yaml", &text, false));
    let (doc, diags) = import::yaml_to_document(&SourceFile::new("websocket.yaml", text));
    assert!(!diags.has_errors(), "{}", render(&diags));
    let doc = doc.unwrap();
    let (resolved, res_diags) = resolve::resolve(std::slice::from_ref(&doc));
    assert!(!res_diags.has_errors(), "{}", render(&res_diags));
    let bundle = compile::compile(&resolved.policy);
    let l7 = &bundle.enforcement.l7;
    assert_eq!(l7.len(), 6);
    assert!(l7.iter().all(|e| e.protocol() == L7Protocol::Websocket));
    let written = format_document(&doc);
    assert!(
        written.contains("rw.graphql.test:443 websocket read-only"),
        "{written}"
    );
    let gql = l7
        .iter()
        .find(|e| e.graphql_over_websocket() && !e.graphql().unwrap().allow.is_empty())
        .unwrap();
    assert_eq!(gql.graphql().unwrap().allow.len(), 2);
    assert_eq!(gql.graphql().unwrap().deny.len(), 1);
    assert!(gql.persisted_query("abc123").is_some());
    let (reparsed, parse_diags) = parser::parse(&SourceFile::new("w.policy", written));
    assert!(!parse_diags.has_errors());
    let (re_resolved, re_diags) = resolve::resolve(std::slice::from_ref(&reparsed.unwrap()));
    assert!(!re_diags.has_errors());
    assert_eq!(compile::compile(&re_resolved.policy).digest, bundle.digest);
}

/// What OpenShell rejects on WebSocket endpoints, or what would mean
/// nothing there: rewriting credentials inside messages (not supported),
/// a rule mixing transport and GraphQL fields, methods that never match,
/// the GraphQL body limit.
#[test]
fn websocket_refusals() {
    let text = "version: 1\nnetwork_policies:\n  a:\n    binaries: [{ path: /usr/bin/curl }]\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: websocket, enforcement: enforce, access: full, websocket_credential_rewrite: true }\n      - { host: b.example.com, port: 443, protocol: websocket, enforcement: enforce, rules: [{ allow: { method: GET, path: /ws } }, { allow: { method: WEBSOCKET_TEXT, path: /graphql, operation_type: subscription } }] }\n      - { host: c.example.com, port: 443, protocol: websocket, enforcement: enforce, rules: [{ allow: { method: GET, path: /ws } }, { allow: { method: POST, path: /ws } }] }\n      - { host: d.example.com, port: 443, protocol: websocket, enforcement: enforce, access: read-only, graphql_max_body_bytes: 1024 }\n";
    insta::assert_snapshot!(
        "broken__websocket",
        import_text("websocket-broken.yaml", text, false)
    );
}

/// `websocket_credential_rewrite: true` becomes the option of the same
/// name, on `protocol: websocket` and on a `protocol: rest` endpoint (as
/// OpenShell accepts it there); `false` is the default and writes nothing.
#[test]
fn websocket_credential_rewrite_imports() {
    let text = "version: 1\nnetwork_policies:\n  a:\n    binaries: [{ path: /usr/bin/curl }]\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: websocket, enforcement: enforce, access: read-write, websocket_credential_rewrite: true }\n      - { host: b.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only, websocket_credential_rewrite: true }\n      - { host: c.example.com, port: 443, protocol: websocket, enforcement: enforce, access: read-write, websocket_credential_rewrite: false }\n";
    insta::assert_snapshot!(
        "websocket_credential_rewrite",
        import_text("websocket-rewrite.yaml", text, false)
    );
}

/// `request_body_credential_rewrite: true` becomes the option of the same
/// name on a `protocol: rest` endpoint; `false` is the default and writes
/// nothing; with `credential_signing` it is refused as OpenShell refuses
/// the policy.
#[test]
fn request_body_credential_rewrite_imports() {
    let text = "version: 1\nnetwork_policies:\n  a:\n    binaries: [{ path: /usr/bin/curl }]\n    endpoints:\n      - { host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-write, request_body_credential_rewrite: true }\n      - { host: b.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only, request_body_credential_rewrite: false }\n";
    insta::assert_snapshot!(
        "request_body_credential_rewrite",
        import_text("body-rewrite.yaml", text, false)
    );
    let broken = "version: 1\nnetwork_policies:\n  a:\n    binaries: [{ path: /usr/bin/curl }]\n    endpoints:\n      - { host: s3.amazonaws.com, port: 443, protocol: rest, access: full, enforcement: enforce, credential_signing: sigv4, signing_service: s3, request_body_credential_rewrite: true }\n";
    insta::assert_snapshot!(
        "request_body_credential_rewrite_refused",
        import_text("body-rewrite-broken.yaml", broken, false)
    );
}

/// OpenShell accepts a read-only `/` (only a read-write one is refused),
/// and so does the resolver: `/` is absolute and normalized.
#[test]
fn read_only_root_imports() {
    let text = "version: 1\nlandlock: { compatibility: best_effort }\nfilesystem_policy:\n  read_only: [/]\n  read_write: [/tmp/]\n";
    let out = import_text("root.yaml", text, false);
    assert!(out.contains("fs exec /\n"), "{out}");
    assert!(out.contains("fs write /tmp/\n"), "{out}");
}

/// `.` and empty components name what the kernel's path walk names
/// without them: the import writes them normalized (W0702) instead of
/// leaving the resolver to refuse what OpenShell accepts.
#[test]
fn filesystem_paths_in_the_kernels_spelling() {
    let text = "version: 1\nlandlock: { compatibility: best_effort }\nfilesystem_policy:\n  read_only: [\"/usr/./lib\", \"//etc\", \"/opt//app/\", /, \"/a/.\"]\n  read_write: [\"/tmp/./x\", /sandbox/]\n";
    insta::assert_snapshot!(import_text("kernel.yaml", text, false));
}

/// What OpenShell has and the import leaves out on purpose is refused by
/// name, and the help says why (docs/openshell-import.md, "Left out");
/// the same fields left at their defaults are accepted silently.
#[test]
fn left_out_features_are_refused_by_name_with_the_reason() {
    let text = "version: 1\nnetwork_middlewares:\n  guard: { kind: content }\nnetwork_policies:\n  a:\n    endpoints:\n      - { host: s3.amazonaws.com, port: 443, protocol: rest, access: full, enforcement: enforce, credential_signing: sigv4, signing_service: s3, signing_region: us-east-1 }\n      - { host: b.example.com, port: 443, protocol: rest, access: full, enforcement: enforce, request_body_credential_rewrite: true }\n      - { host: c.example.com, port: 443, protocol: websocket, access: full, enforcement: enforce, websocket_credential_rewrite: true }\n      - { host: d.example.com, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: gh } }\n      - { host: e.example.com, port: 443, protocol: rest, access: full, enforcement: enforce, request_body_credential_rewrite: false, websocket_credential_rewrite: false, credential_signing: \"\" }\n    binaries: [{ path: /usr/bin/curl }]\n";
    let file = SourceFile::new("left_out.yaml", text);
    let (_, diags) = import::yaml_to_document(&file);
    let out: Vec<String> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            let (l, c) = d.line_col();
            format!("{} {l}:{c} {}\n  help: {}", d.code.id, d.message, d.help)
        })
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

const BOUND: &str = r#"version: 1
network_policies:
  cloud:
    endpoints:
      - { host: api.cloud.example, ports: [443, 8443], protocol: rest, access: full, enforcement: enforce, path: "/v1/**", credential_binding: { provider: work-cloud } }
      - { host: "*.uploads.cloud.example", port: 443, protocol: rest, access: read-write, enforcement: enforce, path: "/v1/**", credential_binding: { provider: work-cloud } }
      - { host: other.example, port: 443, protocol: rest, access: full, enforcement: enforce }
      - { host: raw.cloud.example, port: 443, allow_uninspected_credentials: true, credential_binding: { provider: raw } }
    binaries: [{ path: /usr/bin/curl }]
"#;

const BOUND_CREDENTIALS: &str = r#"credentials:
  - { name: work-cloud, type: generic, scopes: [read], injected_via: CLOUD_TOKEN }
  - { name: raw, type: generic, injected_via: RAW_TOKEN }
  - { name: github-pat, type: github-pat, injected_via: GITHUB_TOKEN, target_hosts: [api.github.com] }
  - { name: unused, type: generic, injected_via: UNUSED_TOKEN }
"#;

/// `credential_binding` gives an endpointless entry of the credentials file
/// the bound endpoints' hosts and path; an entry nothing binds is left out.
/// The two documents, formatted and read back, compile to the same digest.
#[test]
fn credential_binding_gives_the_credential_its_endpoints() {
    use policy_lang::{compile, parser};
    let policy = SourceFile::new("bound.yaml", BOUND);
    let creds = SourceFile::new("creds.yaml", BOUND_CREDENTIALS);
    let imported = import::yaml_with_credentials(&policy, Some(&creds));
    let mut out = render(&imported.policy_diagnostics);
    out.push_str("\n---\n");
    out.push_str(&render(&imported.credential_diagnostics));
    let docs = vec![imported.policy.unwrap(), imported.credentials.unwrap()];
    for d in &docs {
        out.push_str("\n---\n");
        out.push_str(&format_document(d));
    }
    insta::assert_snapshot!(out);
    let (resolved, diags) = resolve::resolve(&docs);
    assert!(!diags.has_errors(), "{}", render(&diags));
    let reparsed: Vec<_> = docs
        .iter()
        .map(|d| {
            let (doc, diags) = parser::parse(&SourceFile::new("x.policy", format_document(d)));
            assert!(!diags.has_errors());
            doc.unwrap()
        })
        .collect();
    let (re_resolved, re_diags) = resolve::resolve(&reparsed);
    assert!(!re_diags.has_errors(), "{}", render(&re_diags));
    assert_eq!(
        compile::compile(&re_resolved.policy).digest,
        compile::compile(&resolved.policy).digest
    );
}

/// Every refusal of a `credential_binding`, each where OpenShell refuses
/// the policy (quoting its reason) or where our credential cannot say the
/// same thing.
#[test]
fn credential_binding_refusals() {
    let text = r#"version: 1
network_policies:
  a:
    endpoints:
      - { host: a.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: nobody } }
      - { host: b.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: github-pat } }
      - { host: c.example, port: 443, credential_binding: { provider: work-cloud } }
      - { host: d.example, port: 443, protocol: rest, access: full, enforcement: enforce, tls: skip, credential_binding: { provider: work-cloud } }
      - { host: e.example, port: 5432, protocol: tcp, credential_binding: { provider: work-cloud } }
      - { allowed_ips: [10.0.0.0/8], port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: work-cloud } }
      - { host: f.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: " work-cloud" } }
      - { host: g.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: "" } }
      - { host: h.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: work-cloud, name: x } }
      - { host: i.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: {} }
      - { host: j.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: ~ }
      - { host: k.example, port: 443, protocol: rest, access: full, enforcement: enforce, path: "/v*/x", credential_binding: { provider: work-cloud } }
    binaries: [{ path: /usr/bin/curl }]
  b:
    endpoints:
      - { host: l.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: work-cloud } }
      - { host: l.example, port: 8443, protocol: rest, access: full, enforcement: enforce }
      - { host: m.example, port: 443, protocol: rest, access: full, enforcement: enforce, path: "/v1/**", credential_binding: { provider: work-cloud } }
      - { host: n.example, port: 443, protocol: rest, access: full, enforcement: enforce, credential_binding: { provider: other } }
      - { host: n.example, port: 443, protocol: rest, access: full, enforcement: enforce }
    binaries: [{ path: /usr/bin/curl }]
"#;
    let creds = "credentials:\n  - { name: work-cloud, type: generic, injected_via: CLOUD_TOKEN }\n  - { name: other, type: generic, injected_via: OTHER_TOKEN }\n  - { name: github-pat, type: github-pat, injected_via: GITHUB_TOKEN, target_hosts: [api.github.com] }\n";
    let imported = import::yaml_with_credentials(
        &SourceFile::new("refused.yaml", text),
        Some(&SourceFile::new("creds.yaml", creds)),
    );
    let out = format!(
        "{}\n---\n{}",
        render(&imported.policy_diagnostics),
        render(&imported.credential_diagnostics)
    );
    insta::assert_snapshot!(out);
    // Without a credentials file every binding is refused at its key.
    let (_, diags) = import::yaml_to_document(&SourceFile::new("bound.yaml", BOUND));
    let codes: Vec<_> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.code.id, d.line_col()))
        .collect();
    assert_eq!(
        codes,
        [("E0706", (5, 124)), ("E0706", (6, 129)), ("E0706", (8, 84))],
        "{}",
        render(&diags)
    );
}
