//! The L7 proxy's figures, measured in one run inside a network namespace
//! this program creates (only loopback), against a local HTTPS upstream
//! with its own CA (`tests/upstream`), HTTP/1.1 keep-alive:
//!
//! 1. added latency per request: median of 2,000 sequential GETs on one
//!    keep-alive connection, through the proxy (the client runs in the
//!    sandbox) and direct (the same client, same namespace, no sandbox);
//!    also the median of a request the proxy refuses (403);
//! 2. throughput with 8 concurrent keep-alive clients for 5 s, through the
//!    proxy vs direct;
//! 3. the supervisor's RSS with 1,000 open proxied connections (each has
//!    made one request, so each also holds its upstream connection);
//! 4. added latency of a POST whose body the proxy reads and judges
//!    (JSON-RPC, MCP `tools/call`) against a REST POST of the same size,
//!    whose body streams through unread: median of 2,000 on one keep-alive
//!    connection each, at two body sizes;
//! 5. the same for a GraphQL query (a document of that size, its
//!    operation judged against the endpoint's rules) against a REST POST
//!    of the same bytes, at three sizes;
//! 6. added latency of a 256-byte WebSocket text message, judged by the
//!    endpoint's `WEBSOCKET_TEXT` rules, against a REST POST of 256 bytes:
//!    median of 2,000 echoed messages on one upgraded connection (a
//!    minimal echo server, `ws_echo`); and the same message on a
//!    connection whose upgrade carried a credential, so that every echo is
//!    read whole and scrubbed of the secret.
//!
//! The client is this program itself (`proxy client ...`), a tokio +
//! hyper + rustls client, so both paths pay the same client costs.
//! Run as root: `cargo bench -p supervisor --bench proxy` (or
//! `bench/proxy.sh`). Results go to stdout, as Markdown rows.
//! `BENCH_ONLY=websocket` measures figure 6 alone, `BENCH_ONLY=graphql`
//! figure 5, `BENCH_ONLY=credential` the credentialed request of figure 1
//! (its echo scrubbed of the secret) against a plain one, over
//! `LATENCY_ROUNDS` alternating rounds: the figure that moves when the
//! scrub's matcher changes. `BENCH_ONLY=request` measures figures 1 and 2
//! alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    dead_code,
    reason = "a benchmark stops at the first failure; it shares the tests' helpers"
)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/upstream/mod.rs"]
mod upstream;
#[path = "support/ws_echo.rs"]
mod ws_echo;

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject as _;

use common::{Dir, SYSTEM, TestNet, exe};

const REQUESTS: usize = 2_000;
const WARMUP: usize = 200;
const CLIENTS: usize = 8;
const SECONDS: u64 = 3;
/// Throughput rounds, direct and proxied alternately (the machine may be
/// shared: alternating spreads any load over both).
const ROUNDS: usize = 3;
/// Rounds of the POST latency figures, whose ratios divide one small
/// difference by another: a round's medians move with where the scheduler
/// puts client, proxy and upstream on the two cores. Over four runs of
/// three rounds, the 32 KiB GraphQL ratio took values from 1.34 to 2.05.
const LATENCY_ROUNDS: usize = 7;
const HELD: usize = 1_000;
const HOST: &str = "api.test";
/// The size of the WebSocket figure's messages.
const WS_BYTES: usize = 256;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("client") {
        return client(&args[2..]);
    }
    bench();
}

// ---------------------------------------------------------------- client

/// `client MODE PORT ARG [CAFILE]`: MODE `latency PATH`, `throughput`,
/// `hold N`, `post HOST,PATH,BYTES,rpc|graphql`. Connects to HOST:PORT (see [`address`]) with SNI
/// `api.test` (`post`: HOST), trusting the system roots (`SSL_CERT_FILE`
/// in the sandbox) and CAFILE.
fn client(args: &[String]) {
    let mode = args[0].clone();
    let port: u16 = args[1].parse().unwrap();
    let arg = args[2].clone();
    let ca = args.get(3).cloned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config = client_config(ca.as_deref());
        match mode.as_str() {
            "post" => {
                let mut parts = arg.split(',');
                let (host, path) = (parts.next().unwrap(), parts.next().unwrap());
                let bytes: usize = parts.next().unwrap().parse().unwrap();
                let body = Bytes::from(match parts.next() {
                    Some("graphql") => graphql_body(bytes),
                    _ => rpc_body(bytes),
                });
                let mut s = connect_to(&config, port, host).await;
                let mut ts = Vec::with_capacity(REQUESTS);
                for i in 0..WARMUP + REQUESTS {
                    let t = Instant::now();
                    let status = post(&mut s, host, path, body.clone()).await;
                    assert_eq!(status, 200, "POST {host}{path}");
                    if i >= WARMUP {
                        ts.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
                println!("{}", median(ts));
            }
            "ws" => {
                let (host, bytes) = arg.split_once(',').unwrap();
                let bytes: usize = bytes.parse().unwrap();
                println!("{}", ws_latency(&config, port, host, bytes).await);
            }
            "latency" => {
                let mut s = connect(&config, port).await;
                let mut ts = Vec::with_capacity(REQUESTS);
                for i in 0..WARMUP + REQUESTS {
                    let t = Instant::now();
                    get(&mut s, &arg).await;
                    if i >= WARMUP {
                        ts.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
                println!("{}", median(ts));
            }
            "throughput" => {
                let done = Arc::new(AtomicU64::new(0));
                let end = Instant::now() + Duration::from_secs(SECONDS);
                let mut tasks = Vec::new();
                for _ in 0..CLIENTS {
                    let (config, done) = (Arc::clone(&config), Arc::clone(&done));
                    tasks.push(tokio::spawn(async move {
                        let mut s = connect(&config, port).await;
                        while Instant::now() < end {
                            get(&mut s, "/t").await;
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
                println!("{}", done.load(Ordering::Relaxed) as f64 / SECONDS as f64);
            }
            "hold" => {
                let n: usize = arg.parse().unwrap();
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut s = connect(&config, port).await;
                    get(&mut s, "/h").await;
                    held.push(s);
                }
                println!("ready");
                // Until the benchmark has measured: it closes our stdin.
                let _ = tokio::task::spawn_blocking(|| {
                    let mut line = String::new();
                    let _ = std::io::stdin().read_line(&mut line);
                })
                .await;
                drop(held);
            }
            other => panic!("unknown mode {other}"),
        }
    });
}

fn client_config(ca: Option<&str>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(ca) = ca {
        for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// `host`'s address as the sandbox's DNS stub names it, else 127.0.0.1
/// (run directly, where no resolver knows the test names). In the
/// sandbox, a connection to a loopback address no answer named stays on
/// the workload's own loopback: the client must ask by name.
async fn address(host: &str, port: u16) -> std::net::SocketAddr {
    let named = tokio::net::lookup_host((host, port)).await.ok();
    named
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| (IpAddr::from([127, 0, 0, 1]), port).into())
}

async fn connect(config: &Arc<rustls::ClientConfig>, port: u16) -> SendRequest<Full<Bytes>> {
    connect_to(config, port, HOST).await
}

async fn connect_to(
    config: &Arc<rustls::ClientConfig>,
    port: u16,
    host: &str,
) -> SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(address(host, port).await)
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(ServerName::try_from(host.to_owned()).unwrap(), tcp)
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

/// Median round trip, µs, of a `bytes`-byte text message on one
/// upgraded connection to `host`.
async fn ws_latency(
    config: &Arc<rustls::ClientConfig>,
    port: u16,
    host: &str,
    bytes: usize,
) -> f64 {
    use tokio::io::AsyncWriteExt as _;
    let tcp = tokio::net::TcpStream::connect(address(host, port).await)
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(ServerName::try_from(host.to_owned()).unwrap(), tcp)
        .await
        .unwrap();
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let req = format!(
        "GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let head = ws_echo::read_head(&mut tls).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let message = "m".repeat(bytes);
    let mut ts = Vec::with_capacity(REQUESTS);
    for i in 0..WARMUP + REQUESTS {
        let t = Instant::now();
        let f = ws_echo::frame(0x1, message.as_bytes(), Some([1, 2, 3, (i % 251) as u8]));
        tls.write_all(&f).await.unwrap();
        let (op, payload) = ws_echo::read_frame(&mut tls).await.unwrap();
        assert_eq!((op, payload.len()), (0x1, bytes));
        if i >= WARMUP {
            ts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    median(ts)
}

/// A GET; under `/cred` it carries the workload's `TOKEN` (the
/// credential's placeholder in the sandbox) as a bearer token.
async fn get(s: &mut SendRequest<Full<Bytes>>, path: &str) -> u16 {
    s.ready().await.unwrap();
    let mut req = hyper::Request::get(path).header(hyper::header::HOST, HOST);
    if path.starts_with("/cred")
        && let Ok(token) = std::env::var("TOKEN")
    {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let req = req.body(Full::new(Bytes::new())).unwrap();
    let resp = s.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    resp.into_body().collect().await.unwrap();
    status
}

/// A POST of `body` as `application/json`.
async fn post(s: &mut SendRequest<Full<Bytes>>, host: &str, path: &str, body: Bytes) -> u16 {
    s.ready().await.unwrap();
    let req = hyper::Request::post(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::CONTENT_LENGTH, body.len())
        .body(Full::new(body))
        .unwrap();
    let resp = s.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    resp.into_body().collect().await.unwrap();
    status
}

/// An MCP `tools/call` of the `search` tool, its argument padded so the
/// body is exactly `bytes` long: what every endpoint of the POST figures
/// is sent (REST ignores its shape, JSON-RPC and MCP judge it).
fn rpc_body(bytes: usize) -> Vec<u8> {
    let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":""#;
    let tail = r#""}}}"#;
    let pad = bytes - head.len() - tail.len();
    format!("{head}{}{tail}", "a".repeat(pad)).into_bytes()
}

/// A GraphQL POST body of exactly `bytes` bytes whose document is most of
/// it: a named query selecting aliased root fields until the size is
/// nearly reached, the rest a comment. What the GraphQL figure parses is a
/// document of that size, not a short one with padding in its variables.
fn graphql_body(bytes: usize) -> Vec<u8> {
    let head = r#"{"query":"query Search($q: String!) { "#;
    let tail = r#"}","variables":{"q":"x"}}"#;
    let mut doc = String::new();
    let mut i = 0;
    loop {
        let field = format!("r{i}: repository(name: $q) {{ name issues(first: 10) {{ title }} }} ");
        if head.len() + doc.len() + field.len() + tail.len() + 4 > bytes {
            break;
        }
        doc.push_str(&field);
        i += 1;
    }
    let pad = bytes - head.len() - doc.len() - tail.len();
    if pad > 0 {
        // `\n` in the JSON string: the comment ends before the `}`.
        doc.push('#');
        doc.push_str(&"a".repeat(pad.saturating_sub(3)));
        doc.push_str(r"\n");
    }
    let body = format!("{head}{doc}{tail}");
    assert_eq!(body.len(), bytes, "{body}");
    body.into_bytes()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// ------------------------------------------------------------- benchmark

struct Setup {
    net: TestNet,
    dir: Dir,
    up: upstream::Upstream,
    bundle: std::path::PathBuf,
    me: String,
}

fn bench() {
    let net = TestNet::new();
    let dir = Dir::new();
    let up = upstream::serve(
        net.tcp("127.0.0.1:0"),
        net.tcp("127.0.0.1:0"),
        dir.path(),
        &[HOST, "rest.test", "rpc.test", "mcp.test", "gql.test"],
        None,
    );
    let ws_listener = net.tcp("127.0.0.1:0");
    let ws_port = ws_listener.local_addr().unwrap().port();
    // One trust file for both servers: the benchmark's client and the
    // proxy read the first upstream's CA file.
    let ws_ca = ws_echo::serve(ws_listener, &["ws.test", "wscred.test"]);
    let mut cas = std::fs::read_to_string(&up.ca_file).unwrap();
    cas.push_str(&ws_ca);
    std::fs::write(&up.ca_file, cas).unwrap();
    let me = exe(std::env::current_exe().unwrap().to_str().unwrap());
    let me_dir = std::path::Path::new(&me)
        .parent()
        .unwrap()
        .display()
        .to_string();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user root\n  fs exec {me_dir}\n  credential tok {{\n    secret env BENCH_SECRET\n    placeholder env TOKEN\n    inject replace\n    hosts {HOST}\n    paths /cred/**\n  }}\n  allow {me} -> {HOST}:{port} http read-only {{\n    deny GET /denied\n  }}\n  allow {me} -> rest.test:{port} http {{\n    allow POST /rest\n  }}\n  allow {me} -> rpc.test:{port} json-rpc {{\n    allow rpc tools/call\n  }}\n  allow {me} -> mcp.test:{port} mcp {{\n    path /mcp\n    allow rpc tools/call tool search\n  }}\n  allow {me} -> gql.test:{port} graphql {{\n    path /graphql\n    allow graphql query field repository viewer\n    deny graphql mutation\n  }}\n  allow {me} -> ws.test:{ws_port} websocket {{\n    allow GET /ws\n    allow WEBSOCKET_TEXT /ws\n  }}\n  credential wstok {{\n    secret env BENCH_SECRET\n    inject header Authorization \"Bearer {{secret}}\"\n    hosts wscred.test\n  }}\n  allow {me} -> wscred.test:{ws_port} websocket {{\n    allow GET /ws\n    allow WEBSOCKET_TEXT /ws\n  }}\n",
        port = up.tls_port
    );
    let bundle = common::bundle(&dir, "proxy", &body);
    let s = Setup {
        net,
        dir,
        up,
        bundle,
        me,
    };
    let port_of = |mode: &str| {
        if mode == "ws" {
            ws_port.to_string()
        } else {
            s.up.tls_port.to_string()
        }
    };
    // The upstream keeps every request it answers (tests read them back):
    // one run of 2,200 POSTs of 32 KiB leaves 70 MB behind, and a run
    // late in a round answered more slowly than the first. Every
    // measurement starts with none kept.
    let forget = || s.up.seen.lock().unwrap().clear();
    let direct = |mode: &str, arg: &str| -> f64 {
        forget();
        let out = Command::new("ip")
            .args(["netns", "exec", &s.net.name, &s.me, "client", mode])
            .arg(port_of(mode))
            .arg(arg)
            .arg(&s.up.ca_file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    // Also the supervisor's CPU time (user + system) over the run.
    let proxied_cpu = |mode: &str, arg: &str| -> (f64, f64) {
        forget();
        let mut child = supervised(&s, &["client", mode, &port_of(mode), arg])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut cpu = 0.0;
        while child.try_wait().unwrap().is_none() {
            cpu = cpu_seconds(pid).unwrap_or(cpu);
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        (common::stdout(&out).trim().parse().unwrap(), cpu)
    };
    let proxied = |mode: &str, arg: &str| -> f64 { proxied_cpu(mode, arg).0 };
    if std::env::var("BENCH_ONLY").as_deref() == Ok("credential") {
        println!("| figure | target | measured |");
        println!("|---|---|---|");
        return credential_row(&direct, &proxied);
    }
    let ws = ws_latencies(&direct, &proxied);
    let ws_row = || {
        let [
            direct_ws,
            proxied_ws,
            direct_rest,
            proxied_rest,
            proxied_cred,
        ] = ws;
        let (added_ws, added_rest) = (proxied_ws - direct_ws, proxied_rest - direct_rest);
        println!(
            "| added median latency of a {WS_BYTES}-byte WebSocket text message, judged, vs a {WS_BYTES}-byte REST POST (direct: message {direct_ws:.1} µs, POST {direct_rest:.1} µs; added: message {added_ws:.1} µs, POST {added_rest:.1} µs) | — | **{:.2} ×** |",
            added_ws / added_rest
        );
        println!(
            "| added median latency of the same message on a connection whose upgrade carried a credential: the echo read whole and scrubbed of the secret (through the proxy {proxied_cred:.1} µs) | — | **{:.1} µs** |",
            proxied_cred - direct_ws
        );
    };
    let graphql_rows = || {
        for bytes in GRAPHQL_SIZES {
            let [direct, rest, gql] = graphql_latencies(bytes, &direct, &proxied);
            let (rest, gql) = (rest - direct, gql - direct);
            println!(
                "| added median latency of a {bytes}-byte GraphQL query POST, operation judged vs the same bytes streamed to REST (direct {direct:.1} µs; added: REST {rest:.1} µs, GraphQL {gql:.1} µs) | GraphQL ≤ 1.5 × REST | **{:.2} ×** |",
                gql / rest
            );
        }
    };
    println!("| figure | target | measured |");
    println!("|---|---|---|");
    match std::env::var("BENCH_ONLY").as_deref() {
        Ok("websocket") => return ws_row(),
        Ok("graphql") => return graphql_rows(),
        _ => {}
    }
    let lat_direct = direct("latency", "/r");
    let lat_proxy = proxied("latency", "/r");
    let lat_denied = proxied("latency", "/denied");
    let lat_cred = proxied("latency", "/cred/r");
    let (mut tps_direct, mut tps_proxy, mut cpus) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        tps_direct.push(direct("throughput", "-"));
        let (tp, cpu) = proxied_cpu("throughput", "-");
        tps_proxy.push(tp);
        cpus.push(cpu * 1e6 / (tp * SECONDS as f64));
    }
    let (tp_direct, tp_proxy) = (median(tps_direct.clone()), median(tps_proxy.clone()));
    println!(
        "| added median latency per request, one keep-alive connection (direct {lat_direct:.1} µs, through the proxy {lat_proxy:.1} µs; a refused request answered by the proxy: {lat_denied:.1} µs) | < 300 µs | **{:.1} µs** |",
        lat_proxy - lat_direct
    );
    println!(
        "| added median latency of a request carrying a credential: placeholder swapped for the secret, the echo (which holds the secret) scrubbed of every form of it (through the proxy {lat_cred:.1} µs) | — | **{:.1} µs** |",
        lat_cred - lat_direct
    );
    println!(
        "| throughput, {CLIENTS} concurrent keep-alive clients, median of {ROUNDS} alternating {SECONDS} s rounds (direct {tp_direct:.0} req/s, through the proxy {tp_proxy:.0} req/s; supervisor CPU per proxied request {:.1} µs) | ≥ 50 % of direct | **{:.0} %** |",
        median(cpus),
        100.0 * tp_proxy / tp_direct
    );
    eprintln!("rounds: direct {tps_direct:?}, proxied {tps_proxy:?}");
    if std::env::var("BENCH_ONLY").as_deref() == Ok("request") {
        return;
    }
    let ((rss_idle, rss_held), (sandbox_idle, sandbox_held)) = memory(&s);
    let posts: Vec<(usize, [f64; 4])> = POST_SIZES
        .iter()
        .map(|&bytes| (bytes, post_latencies(bytes, &direct, &proxied)))
        .collect();
    println!(
        "| supervisor RSS with {HELD} open proxied connections (idle: {:.1} MiB; openshell-sandbox, which relays them: {:.1} MiB idle, {:.1} MiB holding) | < 64 MiB | **{:.1} MiB** |",
        rss_idle as f64 / 1024.0,
        sandbox_idle as f64 / 1024.0,
        sandbox_held as f64 / 1024.0,
        rss_held as f64 / 1024.0
    );
    for (bytes, [direct, rest, rpc, mcp]) in posts {
        let (rest, rpc, mcp) = (rest - direct, rpc - direct, mcp - direct);
        println!(
            "| added median latency of a {bytes}-byte POST, body read and judged vs streamed (direct {direct:.1} µs; added: REST {rest:.1} µs, JSON-RPC {rpc:.1} µs, MCP `tools/call` {mcp:.1} µs) | JSON-RPC, MCP ≤ 1.5 × REST | **{:.2} ×, {:.2} ×** |",
            rpc / rest,
            mcp / rest
        );
    }
    ws_row();
    graphql_rows();
}

/// The added latency of a request whose echo is scrubbed, as the median
/// of `LATENCY_ROUNDS` rounds of (credentialed through the proxy − direct),
/// beside the plain proxied request's, so that load shows in both; and
/// the same for an echo of 4 KiB dense with bytes that could begin a form
/// of the secret (hex digits, base64, separators, escapes), which is what
/// makes the scrub's matcher work.
fn credential_row(direct: &dyn Fn(&str, &str) -> f64, proxied: &dyn Fn(&str, &str) -> f64) {
    let dense = format!("/cred/r?q={}", "62:65%6E-63:68+YmVuY2g,0x62".repeat(150));
    let (mut plain, mut cred, mut big) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..LATENCY_ROUNDS {
        let d = direct("latency", "/r");
        plain.push(proxied("latency", "/r") - d);
        cred.push(proxied("latency", "/cred/r") - d);
        let d = direct("latency", &dense.replacen("/cred", "", 1));
        big.push(proxied("latency", &dense) - d);
    }
    eprintln!("rounds: plain {plain:?}, credential {cred:?}, dense {big:?}");
    println!(
        "| added median latency of a request carrying a credential, echo scrubbed, median of {LATENCY_ROUNDS} rounds (a plain proxied request: {:.1} µs) | — | **{:.1} µs** |",
        median(plain),
        median(cred)
    );
    println!(
        "| the same, the echo 4 KiB longer and dense with bytes that could begin a form of the secret | — | **{:.1} µs** |",
        median(big)
    );
}

/// Median latency, µs, of a WebSocket message round trip (direct, through
/// the proxy, through the proxy on a credentialed connection) and of a
/// REST POST of the same size (direct, through the proxy). Medians of
/// `ROUNDS` rounds, the five alternating.
fn ws_latencies(
    direct: &dyn Fn(&str, &str) -> f64,
    proxied: &dyn Fn(&str, &str) -> f64,
) -> [f64; 5] {
    let mut runs: [Vec<f64>; 5] = Default::default();
    for _ in 0..ROUNDS {
        runs[0].push(direct("ws", &format!("ws.test,{WS_BYTES}")));
        runs[1].push(proxied("ws", &format!("ws.test,{WS_BYTES}")));
        runs[2].push(direct("post", &format!("rest.test,/rest,{WS_BYTES}")));
        runs[3].push(proxied("post", &format!("rest.test,/rest,{WS_BYTES}")));
        runs[4].push(proxied("ws", &format!("wscred.test,{WS_BYTES}")));
    }
    runs.map(median)
}

/// Body sizes of the POST figures: a typical `tools/call`, and half the
/// default body limit.
const POST_SIZES: [usize; 2] = [256, 32_768];

/// Median POST latency, µs, of a `bytes`-byte body: direct, and through
/// the proxy to a REST, a JSON-RPC and an MCP endpoint. Medians of
/// `LATENCY_ROUNDS` rounds, the four alternating, the proxied ones in
/// another order each round.
fn post_latencies(
    bytes: usize,
    direct: &dyn Fn(&str, &str) -> f64,
    proxied: &dyn Fn(&str, &str) -> f64,
) -> [f64; 4] {
    let targets = [
        ("rest.test", "/rest"),
        ("rpc.test", "/rpc"),
        ("mcp.test", "/mcp"),
    ];
    let mut runs: [Vec<f64>; 4] = Default::default();
    for round in 0..LATENCY_ROUNDS {
        runs[0].push(direct("post", &format!("rest.test,/rest,{bytes}")));
        for k in rotated(targets.len(), round) {
            let (host, path) = targets[k];
            runs[k + 1].push(proxied("post", &format!("{host},{path},{bytes}")));
        }
    }
    runs.map(median)
}

/// `0..n` started at `round % n`: each target in turn measured first, so
/// none is always the one that runs after the others.
fn rotated(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + round) % n)
}

/// Body sizes of the GraphQL figure: a short query, a typical one of a
/// client like `gh`, and half the default body limit.
const GRAPHQL_SIZES: [usize; 3] = [256, 2_048, 32_768];

/// Median POST latency, µs, of a `bytes`-byte GraphQL query: direct, and
/// through the proxy to a REST and a GraphQL endpoint. Medians of
/// `LATENCY_ROUNDS` rounds, the three alternating, the proxied ones in
/// another order each round.
fn graphql_latencies(
    bytes: usize,
    direct: &dyn Fn(&str, &str) -> f64,
    proxied: &dyn Fn(&str, &str) -> f64,
) -> [f64; 3] {
    let targets = ["rest.test,/rest", "gql.test,/graphql"];
    let mut runs: [Vec<f64>; 3] = Default::default();
    for round in 0..LATENCY_ROUNDS {
        runs[0].push(direct("post", &format!("rest.test,/rest,{bytes},graphql")));
        for k in rotated(targets.len(), round) {
            runs[k + 1].push(proxied("post", &format!("{},{bytes},graphql", targets[k])));
        }
    }
    runs.map(median)
}

fn supervised(s: &Setup, cmd: &[&str]) -> Command {
    // Where the workload cannot write, as the supervisor insists.
    let log = s.dir.log().display().to_string();
    let mut args = vec!["run"];
    args.extend([
        "--bundle",
        s.bundle.to_str().unwrap(),
        "--workdir",
        s.dir.path().to_str().unwrap(),
        "--resolve",
        "api.test=127.0.0.1",
        "--resolve",
        "rest.test=127.0.0.1",
        "--resolve",
        "rpc.test=127.0.0.1",
        "--resolve",
        "mcp.test=127.0.0.1",
        "--resolve",
        "gql.test=127.0.0.1",
        "--resolve",
        "ws.test=127.0.0.1",
        "--resolve",
        "wscred.test=127.0.0.1",
        "--upstream-ca",
        s.up.ca_file.to_str().unwrap(),
        "--log",
        &log,
        "--",
        &s.me,
    ]);
    args.extend_from_slice(cmd);
    let mut c = s.net.supervisor(&args, None);
    c.env("BENCH_SECRET", "bench-secret-0123456789abcdef");
    c
}

/// (idle, holding) RSS of the supervisor and of openshell-sandbox, KiB.
fn memory(s: &Setup) -> ((u64, u64), (u64, u64)) {
    let held = HELD.to_string();
    let port = s.up.tls_port.to_string();
    let mut child = supervised(s, &["client", "hold", &port, &held])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    let sandbox = sandbox_of(pid);
    let idle = (rss(pid), sandbox.map_or(0, rss));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    std::thread::sleep(Duration::from_millis(500));
    let holding = (rss(pid), sandbox.map_or(0, rss));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    ((idle.0, holding.0), (idle.1, holding.1))
}

/// openshell-sandbox, the supervisor `pid`'s child.
fn sandbox_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find(|c: &u32| {
            std::fs::read_link(format!("/proc/{c}/exe"))
                .is_ok_and(|e| e.ends_with("openshell-sandbox"))
        })
}

/// utime + stime of process `pid`, seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}
