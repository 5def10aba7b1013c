//! A local HTTPS (and plain HTTP) upstream with its own CA, for the proxy
//! tests and benchmark: it records every request it receives and answers
//! with an echo of it, so a test sees both what the upstream got and what
//! the workload got back. Paths under `/git/` serve files from a directory
//! (a bare repository prepared for git's "dumb" HTTP protocol).
//!
//! It behaves like the careless backends an attacker looks for: it honours
//! method and URL override headers (recorded as [`Seen::effective`]), and
//! under `/attack/` it hands back the `Authorization` it received in the
//! places a scrub could miss (see [`attack`]). Plain bytes sent to its TLS
//! port are recorded too ([`Upstream::cleartext`]).
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::convert::Infallible;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub tls: bool,
    /// The body, as received (chunked framing undone); of a body broken
    /// off, what arrived.
    pub body: Vec<u8>,
    /// The method and target the request is acted on as, by a backend
    /// that honours override headers and `_method` parameters.
    pub effective: (String, String),
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Upstream {
    pub tls_port: u16,
    pub plain_port: u16,
    /// The upstream's CA certificate (PEM), for `--upstream-ca`.
    pub ca_file: PathBuf,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// What arrived on the TLS port without a TLS handshake.
    pub cleartext: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn cleartext(&self) -> Vec<Vec<u8>> {
        self.cleartext.lock().unwrap().clone()
    }
}

/// A CA and a leaf for `names`, signed by it: (CA PEM, leaf DER, key DER).
/// Each CA has a name of its own, so that a verifier holding another test
/// CA finds no issuer at all rather than one by the same name.
pub fn certificates(names: &[&str]) -> (String, Vec<u8>, Vec<u8>) {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ca.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("upstream test CA {} {n}", std::process::id()),
    );
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca_cert.pem(), leaf.der().to_vec(), key.serialize_der())
}

/// A TLS server configuration with a leaf for `names` from a new CA, and
/// the CA's PEM.
pub fn tls_server(names: &[&str]) -> (String, ServerConfig) {
    let (ca_pem, leaf, key) = certificates(names);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .unwrap();
    (ca_pem, config)
}

/// PEM text of `der` (for servers that read files: uvicorn).
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// Serves `tls` and `plain` (listeners already bound where the test wants
/// them) until the process ends. `files`: the root served under `/git/`.
pub fn serve(
    tls: TcpListener,
    plain: TcpListener,
    dir: &Path,
    names: &[&str],
    files: Option<PathBuf>,
) -> Upstream {
    let (ca_pem, mut config) = tls_server(names);
    let ca_file = dir.join("upstream-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cleartext = Arc::new(Mutex::new(Vec::new()));
    let up = Upstream {
        cleartext: Arc::clone(&cleartext),
        tls_port: tls.local_addr().unwrap().port(),
        plain_port: plain.local_addr().unwrap().port(),
        ca_file,
        seen: Arc::clone(&seen),
    };
    tls.set_nonblocking(true).unwrap();
    plain.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let tls = tokio::net::TcpListener::from_std(tls).unwrap();
            let plain = tokio::net::TcpListener::from_std(plain).unwrap();
            let files = Arc::new(files);
            let (s1, f1) = (Arc::clone(&seen), Arc::clone(&files));
            tokio::spawn(async move {
                while let Ok((stream, _)) = plain.accept().await {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(http(stream, Arc::clone(&s1), Arc::clone(&f1), false));
                }
            });
            while let Ok((stream, _)) = tls.accept().await {
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let (s, f) = (Arc::clone(&seen), Arc::clone(&files));
                let clear = Arc::clone(&cleartext);
                tokio::spawn(async move {
                    let mut first = [0_u8; 1];
                    if stream.peek(&mut first).await.ok() == Some(1) && first[0] != 0x16 {
                        return record_cleartext(stream, &clear).await;
                    }
                    if let Ok(stream) = acceptor.accept(stream).await {
                        http(stream, s, f, true).await;
                    }
                });
            }
        });
    });
    up
}

async fn http<S>(io: S, seen: Arc<Mutex<Vec<Seen>>>, files: Arc<Option<PathBuf>>, tls: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let seen = Arc::clone(&seen);
        let files = Arc::clone(&files);
        async move { Ok::<_, Infallible>(answer(req, &seen, files.as_ref().as_deref(), tls).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Reads what a client sent in clear to the TLS port (up to a request
/// head), records it and closes.
async fn record_cleartext(mut stream: tokio::net::TcpStream, clear: &Mutex<Vec<Vec<u8>>>) {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0_u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") && got.len() < 65_536 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    clear.lock().unwrap().push(got);
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// The method and target a backend honouring overrides acts on. Like a
/// CGI/WSGI server, it files `X_HTTP_Method_Override` and
/// `X-HTTP-Method-Override` under one name; like PHP, it splits the query
/// on `;` as well as `&` and decodes `%5F` in a key.
pub fn effective(method: &str, target: &str, headers: &[(String, String)]) -> (String, String) {
    let filed = |name: &str| name.to_ascii_lowercase().replace('_', "-");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| filed(n) == name)
            .map(|(_, v)| v.clone())
    };
    let query_method = target
        .split_once('?')
        .and_then(|(_, q)| {
            q.split(['&', ';']).find_map(|p| {
                let (key, value) = p.split_once('=')?;
                let key = key.replace("%5F", "_").replace("%5f", "_");
                (key == "_method").then(|| value.to_owned())
            })
        })
        .filter(|_| method == "POST");
    let method = header("x-http-method-override")
        .or_else(|| header("x-http-method"))
        .or_else(|| header("x-method-override"))
        .or(query_method)
        .unwrap_or_else(|| method.to_owned())
        .to_ascii_uppercase();
    let target = header("x-original-url")
        .or_else(|| header("x-rewrite-url"))
        .unwrap_or_else(|| target.to_owned());
    (method, target)
}

async fn answer(
    req: Request<Incoming>,
    seen: &Mutex<Vec<Seen>>,
    files: Option<&Path>,
    tls: bool,
) -> Response<Body> {
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let method = req.method().to_string();
    // What arrived, even of a body the client (the proxy) broke off.
    let mut body = Vec::new();
    let mut incoming = req.into_body();
    while let Some(Ok(frame)) = incoming.frame().await {
        if let Some(data) = frame.data_ref() {
            body.extend_from_slice(data);
        }
    }
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        target: target.clone(),
        headers: headers.clone(),
        tls,
        body,
        effective: effective(&method, &target, &headers),
    });
    if let (Some(root), Some(rel)) = (files, target.strip_prefix("/git/")) {
        let rel = rel.split('?').next().unwrap_or_default();
        return match std::fs::read(root.join(rel)) {
            Ok(bytes) => Response::new(full(bytes)),
            Err(_) => {
                let mut r = Response::new(full(Bytes::from_static(b"not found")));
                *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                r
            }
        };
    }
    // The body as received, for what the proxy makes of an echo.
    if target.starts_with("/echo-body") {
        let body = seen
            .lock()
            .unwrap()
            .last()
            .map(|s| s.body.clone())
            .unwrap_or_default();
        return Response::new(full(body));
    }
    let echo = serde_json::json!({
        "method": method,
        "target": target,
        "headers": headers.iter().map(|(n, v)| format!("{n}: {v}")).collect::<Vec<_>>(),
    });
    let auth = headers
        .iter()
        .find(|(n, _)| n == "authorization")
        .map(|(_, v)| v.clone());
    if let (Some(kind), Some(auth)) = (target.strip_prefix("/attack/"), &auth) {
        return attack(kind, auth, &headers, echo.to_string());
    }
    let mut resp = Response::new(full(echo.to_string()));
    if let Some(auth) = auth
        && let Ok(v) = hyper::header::HeaderValue::from_str(&auth)
    {
        resp.headers_mut().insert("x-echo-authorization", v);
    }
    resp
}

/// A response that hands `auth` (the `Authorization` value received)
/// back in one of the places a scrub has to cover:
///
/// | `kind` | where |
/// |---|---|
/// | `reason` | the status line's reason phrase |
/// | `header-name` | a header name (`x-` + the token) |
/// | `latin1` | a header value holding a non-ASCII byte |
/// | `encoded` | the body, percent-encoded, upper-cased, JSON-escaped, hex, base64 |
/// | `split` | the body, cut inside the token and inside an escape, sent in pieces with pauses |
/// | `wrapped` | the body: base64 of a longer text holding the value, wrapped as PEM (64, `\n`), MIME (76, `\r\n`), base64url (64, JSON `\\n`), at each byte offset, sections split by `--` lines, sent in pieces |
/// | `hex-laid` | the body: the token as `de:ad`, `DE AD`, `0xde, 0xad`, an `xxd` dump and a `hexdump -C` dump of the value, sections split by `--` lines, sent in pieces |
/// | `escapes` | the body: the token with every byte as `&#000NNN;`, `&#x000HH;`, octal `\NNN`, `\0NNN`, `\u{HH}`, `%uHHHH`, and mixed with `\xHH`, `\u00HH`, `&#NN;`, `%HH`, one line each, sent in pieces |
/// | `range` | the echo, only the byte range asked for (`Range: bytes=A-B`) |
/// | `gzip-if-asked` | the echo, gzip-compressed when `Accept-Encoding` allows it |
/// | `gzip` | the echo, gzip-compressed whatever was asked |
/// | `te-gzip` | the echo, gzip as a transfer coding (`Transfer-Encoding: gzip, chunked`) |
fn attack(kind: &str, auth: &str, headers: &[(String, String)], echo: String) -> Response<Body> {
    use hyper::header::HeaderValue;
    let token = auth.strip_prefix("Bearer ").unwrap_or(auth);
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let mut resp = Response::new(full(echo.clone()));
    match kind.split('?').next().unwrap_or_default() {
        "reason" => {
            let reason = hyper::ext::ReasonPhrase::try_from(format!("OK {auth}").into_bytes());
            resp.extensions_mut().insert(reason.unwrap());
        }
        "header-name" => {
            let name = hyper::header::HeaderName::from_bytes(format!("x-{token}").as_bytes());
            resp.headers_mut()
                .insert(name.unwrap(), HeaderValue::from_static("1"));
        }
        "latin1" => {
            let mut value = b"\xe9\xe8 ".to_vec();
            value.extend_from_slice(auth.as_bytes());
            let value = HeaderValue::from_bytes(&value).unwrap();
            resp.headers_mut().insert("x-echo-latin1", value);
        }
        "encoded" => {
            let percent: String = token.bytes().map(|b| format!("%{b:02X}")).collect();
            let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
            let json = token.replace('-', "\\u002d");
            let body = format!(
                "{percent}\n{}\n{json}\n{hex}\n{}\n",
                token.to_ascii_uppercase(),
                base64(auth.as_bytes())
            );
            *resp.body_mut() = full(body);
        }
        "split" => {
            let (a, b) = token.split_at(token.len() / 2);
            let (c, d) = b.split_at(1);
            let pieces = vec![
                format!("one {a}"),
                format!("{c}{d} two "),
                format!("{a}%"),
                format!("{:02X}", c.as_bytes()[0]),
                format!("{d} end"),
            ];
            *resp.body_mut() = Paced::new(pieces).boxed_unsync();
        }
        "wrapped" => {
            // Long enough that every wrap falls inside the token's run.
            let text = format!("{{\"padding\": \"01234567\", \"echo\": \"{auth}\"}}");
            let url = |s: String| s.replace('+', "-").replace('/', "_");
            let sections = [
                wrap(&base64(text.as_bytes()), 64, "\n"),
                wrap(&base64(format!("x{text}").as_bytes()), 76, "\r\n"),
                wrap(&url(base64(format!("xy{text}").as_bytes())), 64, "\\n"),
            ];
            *resp.body_mut() = Paced::new(pieces(&sections.join("\n--\n"), 13)).boxed_unsync();
        }
        "hex-laid" => {
            let bytes = |sep: &str, upper: bool| {
                let each = token.bytes().map(|b| {
                    if upper {
                        format!("{b:02X}")
                    } else {
                        format!("{b:02x}")
                    }
                });
                each.collect::<Vec<_>>().join(sep)
            };
            let sections = [
                bytes(":", false),
                bytes(" ", true),
                format!("{{0x{}}}", bytes(", 0x", false)),
                xxd(format!("Bearer {token}\n").as_bytes()),
                hexdump_c(format!("Bearer {token}\n").as_bytes()),
            ];
            *resp.body_mut() = Paced::new(pieces(&sections.join("\n--\n"), 13)).boxed_unsync();
        }
        "escapes" => {
            let each = |f: &dyn Fn(usize, u8) -> String| -> String {
                token.bytes().enumerate().map(|(i, b)| f(i, b)).collect()
            };
            let lines = [
                each(&|_, b| format!("&#{b:07};")),
                each(&|_, b| format!("&#x{b:05X};")),
                each(&|_, b| format!("\\{b:03o}")),
                each(&|_, b| format!("\\0{b:03o}")),
                each(&|_, b| format!("\\u{{{b:x}}}")),
                each(&|_, b| format!("%u{b:04X}")),
                each(&|i, b| match i % 4 {
                    0 => format!("\\x{b:02x}"),
                    1 => format!("\\u{b:04x}"),
                    2 => format!("&#{b};"),
                    _ => format!("%{b:02X}"),
                }),
            ];
            *resp.body_mut() = Paced::new(pieces(&lines.join("\n"), 29)).boxed_unsync();
        }
        "range" => {
            if let Some((a, b)) = header("range")
                .and_then(|r| r.strip_prefix("bytes="))
                .and_then(|r| r.split_once('-'))
            {
                let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                let slice = echo.as_bytes()[a.min(echo.len())..(b + 1).min(echo.len())].to_vec();
                *resp.body_mut() = full(slice);
                *resp.status_mut() = hyper::StatusCode::PARTIAL_CONTENT;
            }
        }
        "gzip-if-asked" => {
            if header("accept-encoding").is_some_and(|e| e.contains("gzip")) {
                *resp.body_mut() = full(gzip(echo.as_bytes()));
                resp.headers_mut()
                    .insert("content-encoding", HeaderValue::from_static("gzip"));
            }
        }
        "gzip" => {
            *resp.body_mut() = full(gzip(echo.as_bytes()));
            resp.headers_mut()
                .insert("content-encoding", HeaderValue::from_static("gzip"));
        }
        "te-gzip" => {
            *resp.body_mut() = full(gzip(echo.as_bytes()));
            resp.headers_mut().insert(
                "transfer-encoding",
                HeaderValue::from_static("gzip, chunked"),
            );
        }
        other => panic!("unknown attack `{other}`"),
    }
    resp
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("gzip")
        .arg("-c")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(
        !out.stdout
            .windows(8)
            .any(|w| bytes.windows(8).any(|b| b == w)),
        "compressed text that still shows its input proves nothing"
    );
    out.stdout
}

/// `text` with `brk` after every `width` characters.
fn wrap(text: &str, width: usize, brk: &str) -> String {
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(width)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    lines.join(brk)
}

/// `text` cut into pieces of `n` bytes.
fn pieces(text: &str, n: usize) -> Vec<String> {
    text.as_bytes()
        .chunks(n)
        .map(|p| String::from_utf8(p.to_vec()).unwrap())
        .collect()
}

/// What `xxd` prints: offset, 8 groups of 2 bytes, the ASCII column.
fn xxd(bytes: &[u8]) -> String {
    dump(bytes, |offset, line| {
        let groups: Vec<String> = line
            .chunks(2)
            .map(|g| g.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        format!("{offset:08x}: {:<39}  {}\n", groups.join(" "), ascii(line))
    })
}

/// What `hexdump -C` prints: offset, 2 × 8 bytes, the ASCII column in `|`.
fn hexdump_c(bytes: &[u8]) -> String {
    dump(bytes, |offset, line| {
        let halves: Vec<String> = line
            .chunks(8)
            .map(|h| {
                h.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        format!(
            "{offset:08x}  {:<48}  |{}|\n",
            halves.join("  "),
            ascii(line)
        )
    })
}

fn dump(bytes: &[u8], line: impl Fn(usize, &[u8]) -> String) -> String {
    bytes
        .chunks(16)
        .enumerate()
        .map(|(i, l)| line(i * 16, l))
        .collect()
}

fn ascii(line: &[u8]) -> String {
    line.iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .fold(0_u32, |acc, &b| (acc << 8) | u32::from(b))
            << (8 * (3 - group.len()));
        for k in 0..=group.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize]));
        }
        out.push_str(&"=".repeat(3 - group.len()));
    }
    out
}

/// A body sent a piece at a time, with a pause before each piece, so
/// that each reaches the proxy in a read of its own.
struct Paced {
    pieces: std::collections::VecDeque<Bytes>,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Paced {
    fn new(pieces: Vec<String>) -> Self {
        Self {
            pieces: pieces.into_iter().map(Bytes::from).collect(),
            pause: None,
        }
    }
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        use std::future::Future as _;
        let this = self.get_mut();
        let pause = this.pause.get_or_insert_with(|| {
            Box::pin(tokio::time::sleep(std::time::Duration::from_millis(30)))
        });
        std::task::ready!(pause.as_mut().poll(cx));
        this.pause = None;
        std::task::Poll::Ready(
            this.pieces
                .pop_front()
                .map(|b| Ok(hyper::body::Frame::data(b))),
        )
    }
}

/// A Python TLS server from the test venv, run in a test's network
/// namespace as `python SCRIPT RECORD CERT KEY`: it records what it
/// receives in RECORD and prints its port on its first line. Killed on
/// drop.
pub struct PythonServer {
    child: std::process::Child,
    pub port: u16,
    /// Where the server records what it received.
    pub record: PathBuf,
    /// The server's CA, for `--upstream-ca`.
    pub ca: PathBuf,
    stderr: PathBuf,
}

impl PythonServer {
    /// Files in `dir` are named after `name` (`{name}-ca.pem`,
    /// `{name}-seen.jsonl`, `{name}-server.err`, ...); `hosts` are the
    /// names its certificate holds.
    pub fn start(
        netns: &str,
        python: &Path,
        dir: &Path,
        name: &str,
        hosts: &[&str],
        script: &str,
    ) -> Self {
        use std::io::BufRead as _;
        use std::process::{Command, Stdio};
        let (ca, leaf, key) = certificates(hosts);
        let (cert, key_file) = (
            dir.join(format!("{name}-cert.pem")),
            dir.join(format!("{name}-key.pem")),
        );
        std::fs::write(&cert, pem("CERTIFICATE", &leaf)).unwrap();
        std::fs::write(&key_file, pem("PRIVATE KEY", &key)).unwrap();
        let ca_file = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&ca_file, ca).unwrap();
        let script_file = dir.join(format!("{name}_server.py"));
        std::fs::write(&script_file, script).unwrap();
        let record = dir.join(format!("{name}-seen.jsonl"));
        let stderr = dir.join(format!("{name}-server.err"));
        let mut child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(python)
            .arg(&script_file)
            .arg(&record)
            .arg(&cert)
            .arg(&key_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Ok(port) = line.trim().parse() else {
            let _ = child.kill();
            panic!(
                "the {name} server did not start: {line:?} {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        Self {
            child,
            port,
            record,
            ca: ca_file,
            stderr,
        }
    }

    /// What the server wrote to stderr, for failure messages.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
