//! Helpers shared by the prover's integration tests.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the shared helpers"
)]
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test helpers: a failure should stop the test"
)]

pub mod generate;
pub mod graphql;
pub mod pairs;
pub mod rpc;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use policy_bundle::Bundle;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the target dir for this test process.
pub fn scratch() -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("prover-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles policy text (`.policy` unless `ext` says otherwise).
pub fn compile_as(text: &str, ext: &str) -> Bundle {
    let dir = scratch();
    let path = dir.join(format!("p.{ext}"));
    std::fs::write(&path, text).unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
    match bundle {
        Some(b) => b,
        None => panic!(
            "policy does not compile: {:#?}\n{text}",
            checked
                .diagnostics
                .iter()
                .map(|d| &d.message)
                .collect::<Vec<_>>()
        ),
    }
}

pub fn compile(text: &str) -> Bundle {
    compile_as(text, "policy")
}

/// Compiles OpenShell YAML with an OpenShell credentials file.
pub fn compile_yaml_with_credentials(text: &str, credentials: &str) -> Bundle {
    let dir = scratch();
    let (p, c) = (dir.join("p.yaml"), dir.join("creds.yaml"));
    std::fs::write(&p, text).unwrap();
    std::fs::write(&c, credentials).unwrap();
    let (_, bundle) = policy_lang::load::compile_file(&p, Some(&c)).unwrap();
    bundle.unwrap_or_else(|| panic!("policy does not compile:\n{text}"))
}

/// Wraps statements into a policy with a standard filesystem.
pub fn policy(body: &str) -> String {
    format!(
        "policy \"t\" {{\n  fs read /usr /etc\n  fs exec /usr/bin\n  fs write /tmp\n{body}\n}}\n"
    )
}

pub fn opts() -> prover::Options {
    prover::Options {
        timeout_ms: 30_000,
        ..with_z3()
    }
}

/// The default options, with Z3 as the solver (as the programs that ship
/// prove).
pub fn with_z3() -> prover::Options {
    prover::Options {
        solver: Some(&prover_z3::Z3),
        ..prover::Options::default()
    }
}

pub fn diff(old: &str, new: &str) -> prover::Report {
    prover::diff(&compile(&policy(old)), &compile(&policy(new)), &opts()).unwrap()
}

/// Containment of `candidate` in `boundary`, both wrapped by [`policy`].
pub fn within(boundary: &str, candidate: &str) -> prover::Report {
    prover::within(
        &compile(&policy(boundary)),
        &compile(&policy(candidate)),
        &opts(),
    )
    .unwrap()
}

pub fn categories(r: &prover::Report) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = r.findings.iter().map(|f| f.category.name()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every finding's witness replays through the reference evaluator.
pub fn assert_verified(r: &prover::Report) {
    for f in &r.findings {
        assert!(f.verified, "witness does not replay: {f:#?}");
    }
}

/// Whether the evaluator lets the request through (allowed or audited).
pub fn let_through(d: &policy_bundle::eval::Decision) -> bool {
    matches!(
        d.decision,
        policy_bundle::eval::Verdict::Allow | policy_bundle::eval::Verdict::Audit
    )
}

/// The witness, replayed with its body: NEW lets it through with the
/// credential, OLD does not.
pub fn assert_replays(f: &prover::Finding, old: &Bundle, new: &Bundle) {
    use policy_bundle::eval::Evaluator;
    let req = replay(&f.witness);
    let (n, n_cred) = replay_decision(&Evaluator::new(new.clone()), &f.witness, &req);
    let (o, _) = replay_decision(&Evaluator::new(old.clone()), &f.witness, &req);
    assert!(
        let_through(&n) && n_cred,
        "NEW does not let the witness through with the credential: {n:#?}\n{f:#?}"
    );
    assert!(
        !let_through(&o),
        "OLD lets the witness through: {o:#?}\n{f:#?}"
    );
    assert!(f.verified, "{f:#?}");
}

/// `diff --prove` of two compiled bundles, default options.
pub fn diff_bundles(old: &Bundle, new: &Bundle) -> prover::Report {
    prover::diff(old, new, &with_z3()).unwrap()
}

/// The request a witness stands for, exactly as printed: a connection
/// witness (no method) replays as a connection without a request.
pub fn replay(w: &prover::Witness) -> policy_bundle::eval::Request {
    let addr = w
        .address
        .as_deref()
        .or_else(|| {
            w.host
                .parse::<std::net::IpAddr>()
                .is_ok()
                .then_some(w.host.as_str())
        })
        .map(|a| a.parse().unwrap());
    let host = (w.host.parse::<std::net::IpAddr>().is_err()).then(|| w.host.clone());
    policy_bundle::eval::Request {
        binary: w.binary.clone(),
        sha256: w.sha256.clone(),
        host,
        addr,
        port: w.port,
        http: w.method.as_ref().map(|m| policy_bundle::eval::HttpRequest {
            method: m.clone(),
            target: format!(
                "{}{}",
                w.path.as_deref().unwrap_or("/"),
                w.query
                    .as_ref()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default()
            ),
        }),
    }
}

/// The evaluator's decision on a witness (with `eval --websocket`,
/// `--websocket-text` or `--websocket-binary` when it is a WebSocket one),
/// and whether a credential rides on it.
pub fn replay_decision(
    ev: &policy_bundle::eval::Evaluator,
    w: &prover::Witness,
    req: &policy_bundle::eval::Request,
) -> (policy_bundle::eval::Decision, bool) {
    decide(ev, req, w.body_bytes().as_deref(), w.probe().as_ref())
}

/// The evaluator's decision on a request with this body, or on the
/// WebSocket upgrade or message `probe` says (`req` is then the upgrade),
/// and whether a credential rides on it: a message rides on the
/// connection its upgrade credentialed.
pub fn decide(
    ev: &policy_bundle::eval::Evaluator,
    req: &policy_bundle::eval::Request,
    body: Option<&[u8]>,
    probe: Option<&prover::websocket::Probe>,
) -> (policy_bundle::eval::Decision, bool) {
    match probe {
        None => {
            let d = ev.eval_with_body(req, body);
            let c = d.credential.is_some();
            (d, c)
        }
        Some(pr) => {
            let d = pr.decide(ev, req);
            let c = if pr.is_message() {
                let_through(&d) && ev.eval_websocket(req, None).credential.is_some()
            } else {
                d.credential.is_some()
            };
            (d, c)
        }
    }
}

/// The versions of each community policy in `tests/shared/fixtures` that
/// compile, each history in name order.
pub fn community_histories() -> Vec<Vec<(String, Bundle)>> {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shared/fixtures");
    let in_order = |dir: &std::path::Path, keep: &dyn Fn(&std::path::Path) -> bool| {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| keep(p))
            .collect();
        paths.sort();
        paths
    };
    let mut histories = Vec::new();
    for group in ["community", "community-more"] {
        for dir in in_order(&fixtures.join(group), &|p| p.is_dir()) {
            let files = in_order(&dir, &|p| p.extension().is_some_and(|x| x == "yaml"));
            histories.push(
                files
                    .into_iter()
                    .filter_map(|p| {
                        let (_, b) = policy_lang::load::compile_file(&p, None).ok()?;
                        Some((p.display().to_string(), b?))
                    })
                    .collect(),
            );
        }
    }
    histories
}
