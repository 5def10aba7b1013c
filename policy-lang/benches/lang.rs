//! Benchmarks for the language figures: compile of a large generated
//! policy, loading its bundle (digest check + indexes), and one `eval`
//! decision in process. Run: `cargo bench -p policy-lang --bench lang`.
//! It also writes the generated policy to `target/bench/large.policy` for
//! the whole-process timings in `bench/lang.sh`.
#![expect(clippy::expect_used, reason = "a benchmark stops at the first failure")]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use policy_bundle::eval::{Evaluator, HttpRequest, Request};
use policy_lang::load;

const ENDPOINTS: usize = 2_000;
const BINARIES: usize = 200;
const SETS: usize = 40;

/// A policy with 2,000 endpoint rules over 200 binaries: exact hosts, some
/// wildcards and address ranges, a third inspected with L7 rules.
pub fn large_policy() -> String {
    let mut p = String::from(
        "policy \"large\" {\n  landlock hard min_abi 4\n  fs read /usr /lib /etc\n  fs write /sandbox workdir\n",
    );
    for s in 0..SETS {
        let members: Vec<String> = (0..BINARIES / SETS)
            .map(|b| format!("/opt/tool{s}/bin/cmd{b}"))
            .collect();
        let _ = writeln!(p, "  binaries set{s} = {}", members.join(" "));
    }
    for e in 0..ENDPOINTS {
        let set = e % SETS;
        match e % 10 {
            0 => {
                let _ = writeln!(p, "  allow set{set} -> *.cdn{e}.example.net:443");
            }
            1 => {
                let _ = writeln!(
                    p,
                    "  allow set{set} -> 10.{}.{}.0/24:8000-8100",
                    e / 250,
                    e % 250
                );
            }
            2..=4 => {
                let _ = writeln!(p, "  allow set{set} -> api{e}.example.com:443 http {{");
                let _ = writeln!(p, "    allow GET HEAD /v1/items/** /v1/users/*/profile");
                let _ = writeln!(p, "    allow POST /v1/items ?dry_run=true|false");
                let _ = writeln!(p, "    deny * /v1/items/*/admin/**");
                let _ = writeln!(p, "  }}");
            }
            _ => {
                let _ = writeln!(p, "  allow set{set} -> host{e}.example.org:443,8443");
            }
        }
    }
    p.push_str("}\n");
    p
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    let path = dir.join("large.policy");
    let text = large_policy();
    std::fs::write(&path, &text).expect("write policy");
    println!(
        "generated {} ({} lines, {ENDPOINTS} endpoints, {BINARIES} binaries)",
        path.display(),
        text.lines().count()
    );

    {
        use policy_lang::source::SourceFile;
        let f = SourceFile::new("large.policy", text.clone());
        let t = Instant::now();
        let (doc, _) = policy_lang::parser::parse(&f);
        let parse = t.elapsed();
        let docs = vec![doc.expect("parses")];
        let t = Instant::now();
        let (resolved, _) = policy_lang::resolve::resolve(&docs);
        let resolve = t.elapsed();
        let t = Instant::now();
        let _ = policy_lang::lint::lint(&resolved);
        let lint = t.elapsed();
        let t = Instant::now();
        let b = policy_lang::compile::compile(&resolved.policy);
        let compile = t.elapsed();
        let t = Instant::now();
        let _ = b.to_bytes();
        let ser = t.elapsed();
        println!(
            "phases: parse {parse:?}, resolve {resolve:?}, lint {lint:?}, compile {compile:?}, serialize {ser:?}"
        );
    }
    let runs = 20;
    let mut compile = Vec::new();
    let mut bundle = None;
    for _ in 0..runs {
        let t = Instant::now();
        let (checked, b) = load::compile_file(&path, None).expect("readable");
        compile.push(t.elapsed());
        assert!(!checked.has_errors(), "generated policy has errors");
        bundle = b;
    }
    let bundle = bundle.expect("compiled");
    let bytes = bundle.to_bytes();
    std::fs::write(dir.join("large.bundle"), &bytes).expect("write bundle");
    println!(
        "check + compile (in process): median {:?} over {runs} runs",
        median(compile)
    );

    let mut load_times = Vec::new();
    let mut evaluator = None;
    for _ in 0..runs {
        let t = Instant::now();
        let b = Bundle::from_slice(&bytes).expect("loads");
        let ev = Evaluator::new(b);
        load_times.push(t.elapsed());
        evaluator = Some(ev);
    }
    let ev = evaluator.expect("built");
    println!(
        "bundle load (parse, verify digest, build indexes), {} KiB: median {:?}",
        bytes.len() / 1024,
        median(load_times)
    );

    // A mix of requests: allowed L7, denied by a rule, unknown binary,
    // wildcard host, address range, L4.
    let reqs: Vec<Request> = (0..1000)
        .map(|i| {
            let e = (i * 7) % ENDPOINTS;
            let set = e % SETS;
            let binary = format!("/opt/tool{set}/bin/cmd{}", i % (BINARIES / SETS));
            match e % 10 {
                0 => Request {
                    binary,
                    host: Some(format!("a.cdn{e}.example.net")),
                    port: 443,
                    ..Request::default()
                },
                1 => Request {
                    binary,
                    addr: Some(format!("10.{}.{}.7", e / 250, e % 250).parse().expect("ip")),
                    port: 8080,
                    ..Request::default()
                },
                2..=4 => Request {
                    binary,
                    host: Some(format!("api{e}.example.com")),
                    port: 443,
                    http: Some(HttpRequest {
                        method: if i % 3 == 0 {
                            "DELETE".into()
                        } else {
                            "GET".into()
                        },
                        target: format!("/v1/items/{i}/detail?x=1"),
                    }),
                    ..Request::default()
                },
                _ => Request {
                    binary: if i % 5 == 0 {
                        "/usr/bin/unknown".into()
                    } else {
                        binary
                    },
                    host: Some(format!("host{e}.example.org")),
                    port: 8443,
                    ..Request::default()
                },
            }
        })
        .collect();
    let rounds = 200;
    let mut per_req = Vec::with_capacity(reqs.len() * rounds / 10);
    let mut allowed = 0;
    for round in 0..rounds {
        for r in &reqs {
            let t = Instant::now();
            let d = std::hint::black_box(ev.eval(std::hint::black_box(r)));
            let el = t.elapsed();
            if round % 10 == 0 {
                per_req.push(el);
            }
            if round == 0 && d.decision != policy_bundle::eval::Verdict::Deny {
                allowed += 1;
            }
        }
    }
    let n = per_req.len();
    per_req.sort();
    let p = |q: f64| {
        per_req
            .get(((n as f64) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "eval (in process, {} requests, {allowed}/1000 allowed): median {:?}, p90 {:?}, p99 {:?}",
        n,
        p(0.5),
        p(0.9),
        p(0.99)
    );
}
