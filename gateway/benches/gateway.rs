//! The gateway's figures, against the real `openshell-gateway` process
//! over HTTPS on loopback (run by `bench/gateway.sh`, which names the
//! databases):
//!
//! - propose → stored verdict, for a typical policy (github-readwrite
//!   minus a deny rule: widened) and for the 1,000-endpoint pair of
//!   `bench/prover.sh`;
//! - a bundle fetch that `If-None-Match` answers (`304`), p50 and p90,
//!   one new TLS connection each (as a supervisor's poll);
//! - approval → every waiting long-poll answered, with 100 waiting;
//! - 1,000 long-polls parked: the gateway's RSS, and its CPU time over
//!   10 s while nothing changes; with PostgreSQL, the database
//!   transactions of 20 status reports of one sandbox while they wait;
//!   then one approval wakes all 1,000;
//! - 1,006 clients without a token sending a body one byte every 2 s
//!   (and connecting again when cut off), from four other loopback
//!   addresses, for 30 s: the latency of a legitimate request meanwhile.
//!
//! `cargo bench -p gateway --bench gateway -- sqlite postgres://...`
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a benchmark fails loudly"
)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bundle_trust::client::Client;
use serde_json::{Value, json};

const GATEWAY: &str = env!("CARGO_BIN_EXE_openshell-gateway");
const T: Duration = Duration::from_secs(600);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// github-readwrite with its fragment pasted in (the gateway takes one
/// self-contained file).
fn typical() -> String {
    let policy = std::fs::read_to_string(root().join("policies/github-readwrite.policy")).unwrap();
    let fragment =
        std::fs::read_to_string(root().join("policies/fragments/system.policy")).unwrap();
    let body: String = fragment
        .lines()
        .skip_while(|l| !l.starts_with("fragment"))
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .map(|l| format!("{l}\n"))
        .collect();
    policy.replace("  include \"fragments/system.policy\"\n", &body)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(v: &mut [Duration], p: usize) -> f64 {
    v.sort_unstable();
    ms(v[(v.len() - 1) * p / 100])
}

struct Proc {
    child: Child,
    client: Client,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, db: &str) -> Proc {
    let mut child = Command::new(GATEWAY)
        .args([
            "serve",
            "--dir",
            dir.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--db",
            db,
            "--no-access-log",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let token = std::fs::read_to_string(dir.join("admin.token")).unwrap();
    Proc {
        child,
        client: Client::new(&url, &ca, &token).unwrap(),
    }
}

/// RSS (KiB) and CPU time (clock ticks) of a process.
fn usage(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(") ").unwrap().1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    (rss, ticks)
}

async fn send(c: &Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let r = c.send(method, path, body.as_ref(), &[], T).await.unwrap();
    assert!(
        r.status < 300,
        "{method} {path}: {} {:?}",
        r.status,
        r.json()
    );
    r.json()
}

async fn person(admin: &Client, name: &str) -> Client {
    let v = send(
        admin,
        "POST",
        "/v1/tokens",
        Some(json!({"name": name, "role": "author"})),
    )
    .await;
    admin.with_token(v["token"].as_str().unwrap())
}

async fn propose(c: &Client, policy: &str, source: &str) -> (Value, Duration) {
    let t0 = Instant::now();
    let v = send(
        c,
        "POST",
        &format!("/v1/policies/{policy}/proposals"),
        Some(json!({"source": source})),
    )
    .await;
    (v, t0.elapsed())
}

async fn approve(c: &Client, p: &Value) -> Value {
    send(
        c,
        "POST",
        &format!("/v1/proposals/{}/approve", p["id"]),
        Some(json!({"review_token": p["review_token"]})),
    )
    .await
}

async fn fresh_postgres(base: &str) -> String {
    use sqlx::Connection as _;
    let name = format!("osp_gw_bench_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    format!("{}/{name}", base.rsplit_once('/').unwrap().0)
}

/// Sandboxes `prefix0..n` of `policy`, with a client for each.
async fn sandboxes(admin: &Client, policy: &str, prefix: &str, n: usize) -> Vec<Client> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let v = send(
            admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": format!("{prefix}{i}"), "policy": policy})),
        )
        .await;
        out.push(admin.with_token(v["token"].as_str().unwrap()));
    }
    out
}

/// Parks a long-poll per sandbox; each task returns when it was answered.
fn park(
    clients: &[Client],
    prefix: &str,
    digest: &str,
    wait: u64,
) -> Vec<tokio::task::JoinHandle<(u16, Instant)>> {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.clone();
            let path = format!("/v1/sandboxes/{prefix}{i}/bundle?wait={wait}");
            let inm = format!("\"{digest}\"");
            tokio::spawn(async move {
                let r = c
                    .send("GET", &path, None, &[("if-none-match", &inm)], T)
                    .await
                    .unwrap();
                (r.status, Instant::now())
            })
        })
        .collect()
}

async fn bench(label: &str, db_arg: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new(GATEWAY)
        .args(["init", "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(ok.status.success());
    let db = if db_arg == "sqlite" {
        format!("sqlite:{}", dir.path().join("gateway.db").display())
    } else {
        fresh_postgres(db_arg).await
    };
    let gw = start(dir.path(), &db);
    let admin = gw.client.clone();
    let alice = person(&admin, "alice").await;
    let bob = person(&admin, "bob").await;
    println!("## {label}");

    // Propose → stored verdict, typical.
    let base = typical();
    let (first, _) = propose(&alice, "typical", &base).await;
    approve(&bob, &first).await;
    let widened: String = base
        .lines()
        .filter(|l| !l.contains("deny * /repos/*/*/rulesets/**"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut times = Vec::new();
    for _ in 0..21 {
        let (p, t) = propose(&alice, "typical", &widened).await;
        assert_eq!(p["verdict"], "widened", "{p}");
        times.push(t);
    }
    println!(
        "propose → stored verdict, typical (github-readwrite minus a deny rule, widened): median {:.1} ms of 21",
        pct(&mut times, 50)
    );

    // The 1,000-endpoint pair.
    let large = dir.path().join("large");
    let host = Command::new("python3")
        .arg(root().join("bench/prover_gen.py"))
        .args([large.to_str().unwrap(), "1000", "50"])
        .output()
        .unwrap();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_owned();
    let old = std::fs::read_to_string(large.join("old.policy")).unwrap();
    let new = std::fs::read_to_string(large.join("new.policy")).unwrap();
    let (p, t_first) = propose(&alice, "large", &old).await;
    approve(&bob, &p).await;
    let mut times = Vec::new();
    for _ in 0..3 {
        let (p, t) = propose(&alice, "large", &new).await;
        assert_eq!(p["verdict"], "widened");
        assert!(
            p["proof"]["findings"].to_string().contains(&host),
            "the buried widening at {host} was found"
        );
        times.push(t);
    }
    println!(
        "propose → stored verdict, 1,000 endpoints × 50 binaries (bench/prover.sh pair, widening at {host} found): median {:.0} ms of 3 (first revision, compile only: {:.0} ms)",
        pct(&mut times, 50),
        ms(t_first)
    );

    // A poll that If-None-Match answers.
    let one = sandboxes(&admin, "typical", "f", 1).await;
    let env = send(&one[0], "GET", "/v1/sandboxes/f0/bundle", None).await;
    let digest = env["claims"]["digest"].as_str().unwrap().to_owned();
    let inm = format!("\"{digest}\"");
    let mut times = Vec::new();
    for _ in 0..300 {
        let t0 = Instant::now();
        let r = one[0]
            .send(
                "GET",
                "/v1/sandboxes/f0/bundle",
                None,
                &[("if-none-match", &inm)],
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.status, 304);
        times.push(t0.elapsed());
    }
    let p90 = pct(&mut times, 90);
    println!(
        "bundle fetch, If-None-Match hit (304, new TLS connection each): p50 {:.2} ms, p90 {p90:.2} ms of 300",
        pct(&mut times, 50)
    );

    // Approval → 100 waiting polls answered.
    let hundred = sandboxes(&admin, "typical", "w", 100).await;
    let waiting = park(&hundred, "w", &digest, 120);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // One more deny rule: nothing new (as in bench/prover.sh).
    let narrowed = base.replace(
        "    deny DELETE /repos/*/*\n",
        "    deny DELETE /repos/*/*\n    deny * /repos/*/*/keys/**\n",
    );
    assert_ne!(narrowed, base);
    let (p, _) = propose(&alice, "typical", &narrowed).await;
    let t0 = Instant::now();
    approve(&bob, &p).await;
    let approved = Instant::now();
    let mut last = approved;
    for w in waiting {
        let (status, at) = w.await.unwrap();
        assert_eq!(status, 200);
        last = last.max(at);
    }
    println!(
        "approval → 100 waiting polls answered with the new bundle: {:.1} ms after the approval's answer ({:.1} ms from sending it)",
        ms(last - approved),
        ms(last - t0)
    );

    // 1,000 parked polls: memory, idle CPU, and one wake-up for all, in a
    // gateway process started again on the same database (the one above
    // keeps the allocator's memory of the 1,000-endpoint proofs).
    let proved = usage(gw.child.id()).0;
    drop(gw);
    let gw = start(dir.path(), &db);
    let admin = gw.client.clone();
    let alice = person(&admin, "alice2").await;
    let bob = person(&admin, "bob2").await;
    let before = usage(gw.child.id());
    let thousand = sandboxes(&admin, "typical", "k", 1000).await;
    let env = send(&thousand[0], "GET", "/v1/sandboxes/k0/bundle", None).await;
    let digest = env["claims"]["digest"].as_str().unwrap().to_owned();
    let waiting = park(&thousand, "k", &digest, 300);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss, t_start) = usage(gw.child.id());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (rss_after, t_end) = usage(gw.child.id());
    let hz = 100.0; // USER_HZ on Linux
    println!(
        "1,000 polls parked: gateway RSS {:.1} MiB (restarted, before them {:.1} MiB; 10 s later {:.1} MiB; the process that ran the proofs above had {:.1} MiB); CPU over 10 idle s: {:.0} ms",
        rss as f64 / 1024.0,
        before.0 as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        proved as f64 / 1024.0,
        (t_end - t_start) as f64 / hz * 1000.0
    );
    if db.starts_with("postgres") {
        let revision = env["claims"]["revision"].clone();
        let before = transactions(&db).await;
        for _ in 0..20 {
            send(
                &thousand[1],
                "POST",
                "/v1/sandboxes/k1/status",
                Some(json!({"revision": revision, "digest": digest, "result": "applied"})),
            )
            .await;
        }
        let after = transactions(&db).await;
        println!(
            "20 status reports of one sandbox, 1,000 polls parked: {} database transactions (the measurement's own included)",
            after - before
        );
    }
    let (p, _) = propose(&alice, "typical", &base).await;
    let t0 = Instant::now();
    approve(&bob, &p).await;
    let approved = Instant::now();
    let mut last = approved;
    for w in waiting {
        let (status, at) = w.await.unwrap();
        assert_eq!(status, 200);
        last = last.max(at);
    }
    println!(
        "approval → 1,000 waiting polls answered: {:.0} ms after the approval's answer ({:.0} ms from sending it)",
        ms(last - approved),
        ms(last - t0)
    );
    drop(gw);
    slow_clients(dir.path(), &db).await;
    println!();
}

/// Transactions committed in `db` so far. A backend reports its counts
/// when it has been idle for 10 s at the latest, so the count is read
/// after that long.
async fn transactions(db: &str) -> i64 {
    use sqlx::Connection as _;
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut conn = sqlx::PgConnection::connect(db).await.unwrap();
    let n: i64 = sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    n
}

/// A TLS connection from `from` to the gateway at `url`.
async fn tls_from(
    url: &str,
    ca: &[u8],
    from: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls::pki_types::pem::PemObject as _;
    let addr: std::net::SocketAddr = url.trim_start_matches("https://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse().unwrap())?;
    let tcp = socket.connect(addr).await?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
}

async fn slow_clients(dir: &Path, db: &str) {
    use tokio::io::AsyncWriteExt as _;
    let gw = start(dir, db);
    let url = gw.client.url().to_owned();
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let stop = Instant::now() + Duration::from_secs(30);
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut attackers = Vec::new();
    for i in 0..1006 {
        let (url, ca, connections) = (url.clone(), ca.clone(), connections.clone());
        let from = format!("127.0.0.{}", 2 + i % 4);
        attackers.push(tokio::spawn(async move {
            while Instant::now() < stop {
                connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Ok(mut s) = tls_from(&url, &ca, &from).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let head = b"POST /v1/policies/p/proposals HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1000000\r\n\r\n";
                if s.write_all(head).await.is_err() {
                    continue;
                }
                while Instant::now() < stop {
                    if s.write_all(b"x").await.is_err() || s.flush().await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut times = Vec::new();
    let mut failed = 0;
    while Instant::now() < stop {
        let t0 = Instant::now();
        match gw
            .client
            .send("GET", "/v1/proposals", None, &[], Duration::from_secs(30))
            .await
        {
            Ok(r) if r.status == 200 => times.push(t0.elapsed()),
            _ => failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for a in attackers {
        a.await.unwrap();
    }
    let n = times.len();
    let max = times.iter().max().copied().unwrap_or_default();
    println!(
        "1,006 slow clients without a token for 30 s ({} connections made): legitimate requests {n} answered, {failed} failed, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        connections.load(std::sync::atomic::Ordering::Relaxed),
        pct(&mut times.clone(), 50),
        pct(&mut times, 99),
        ms(max)
    );
}

fn main() {
    let dbs: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for db in &dbs {
            let label = if db == "sqlite" {
                "SQLite".to_owned()
            } else {
                "PostgreSQL".to_owned()
            };
            bench(&label, db).await;
        }
    });
}
