//! The reference evaluator as tables: each `tests/eval_cases/*.yaml` holds a
//! policy and requests with their expected decisions.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly on bad case files"
)]

use policy_bundle::eval::{Evaluator, HttpRequest, Request, RouteKind, Verdict};
use policy_lang::load;
use serde::Deserialize;

#[derive(Deserialize)]
struct CaseFile {
    policy: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    binary: String,
    sha256: Option<String>,
    url: Option<String>,
    method: Option<String>,
    host: Option<String>,
    addr: Option<std::net::IpAddr>,
    port: Option<u16>,
    expect: String,
    #[serde(default, deserialize_with = "some")]
    route: Option<Option<String>>,
    #[serde(default, deserialize_with = "some")]
    credential: Option<Option<String>>,
    rule_line: Option<u32>,
    /// A request body (JSON-RPC, MCP and GraphQL endpoints judge it).
    body: Option<String>,
    /// Text the decision's reason must contain.
    reason: Option<String>,
    /// The code the proxy refuses with (`policy_denied`, `path_alias`,
    /// `override_refused`); `null` when it does not refuse the request.
    #[serde(default, deserialize_with = "some")]
    refusal: Option<Option<String>>,
}

/// Distinguish an absent field (don't check) from `null` (must be null).
fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

fn request(c: &Case) -> Request {
    let mut r = Request {
        binary: c.binary.clone(),
        sha256: c.sha256.clone(),
        host: c.host.clone(),
        addr: c.addr,
        port: c.port.unwrap_or(0),
        http: None,
    };
    if let Some(url) = &c.url {
        let rest = url.split_once("://").unwrap().1;
        let split = rest.find('/').unwrap_or(rest.len());
        let (authority, target) = rest.split_at(split);
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().unwrap()),
            None => (
                authority.to_string(),
                if url.starts_with("https") { 443 } else { 80 },
            ),
        };
        r.host = Some(host);
        r.port = port;
        r.http = Some(HttpRequest {
            method: c.method.clone().unwrap_or_else(|| "GET".into()),
            target: if target.is_empty() {
                "/".into()
            } else {
                target.into()
            },
        });
    }
    r
}

#[test]
fn eval_cases() {
    let mut total = 0;
    for entry in std::fs::read_dir("tests/eval_cases").unwrap() {
        let path = entry.unwrap().path();
        let file: CaseFile =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let tmp = std::env::temp_dir().join(format!(
            "osp-eval-{}-{}.policy",
            std::process::id(),
            path.file_stem().unwrap().to_string_lossy()
        ));
        std::fs::write(&tmp, &file.policy).unwrap();
        let (checked, bundle) = load::compile_file(&tmp, None).unwrap();
        let errors: Vec<_> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| &d.message)
            .collect();
        let bundle = bundle.unwrap_or_else(|| panic!("{}: {errors:?}", path.display()));
        let ev = Evaluator::new(bundle);
        for (i, c) in file.cases.iter().enumerate() {
            total += 1;
            let d = ev.eval_with_body(&request(c), c.body.as_deref().map(str::as_bytes));
            let ctx = format!(
                "{} case {} ({:?}): {d:?}",
                path.display(),
                i + 1,
                c.url.as_ref().or(c.host.as_ref())
            );
            let want = match c.expect.as_str() {
                "allow" => Verdict::Allow,
                "deny" => Verdict::Deny,
                "audit" => Verdict::Audit,
                other => panic!("bad expect {other}"),
            };
            assert_eq!(d.decision, want, "{ctx}");
            if let Some(route) = &c.route {
                let got = d.route.map(|r| match r {
                    RouteKind::L4 => "l4".to_string(),
                    RouteKind::L7 => "l7".to_string(),
                });
                assert_eq!(&got, route, "{ctx}");
            }
            if let Some(cred) = &c.credential {
                assert_eq!(&d.credential, cred, "{ctx}");
            }
            if let Some(want) = &c.reason {
                assert!(d.reason.contains(want.as_str()), "{ctx}");
            }
            if let Some(want) = &c.refusal {
                assert_eq!(d.refusal(), want.as_deref(), "{ctx}");
            }
            if let Some(line) = c.rule_line {
                assert_eq!(d.rule.as_ref().map(|o| o.line), Some(line), "{ctx}");
            }
        }
    }
    assert!(total >= 60, "only {total} cases");
}
