//! A local HTTPS (and plain HTTP) upstream with its own CA, for the proxy
//! tests and benchmark: it records every request it receives and answers
//! with an echo of it, so a test sees both what the upstream got and what
//! the workload got back. Paths under `/git/` serve files from a directory
//! (a bare repository prepared for git's "dumb" HTTP protocol).
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
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// A CA and a leaf for `names`, signed by it: (CA PEM, leaf DER, key DER).
pub fn certificates(names: &[&str]) -> (String, Vec<u8>, Vec<u8>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "upstream test CA");
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

/// Serves `tls` and `plain` (listeners already bound where the test wants
/// them) until the process ends. `files`: the root served under `/git/`.
pub fn serve(
    tls: TcpListener,
    plain: TcpListener,
    dir: &Path,
    names: &[&str],
    files: Option<PathBuf>,
) -> Upstream {
    let (ca_pem, leaf, key) = certificates(names);
    let ca_file = dir.join("upstream-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let up = Upstream {
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
                tokio::spawn(async move {
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

async fn answer(
    req: Request<Incoming>,
    seen: &Mutex<Vec<Seen>>,
    files: Option<&Path>,
    tls: bool,
) -> Response<Full<Bytes>> {
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
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        target: target.clone(),
        headers: headers.clone(),
        tls,
    });
    let _ = req.into_body().collect().await;
    if let (Some(root), Some(rel)) = (files, target.strip_prefix("/git/")) {
        let rel = rel.split('?').next().unwrap_or_default();
        return match std::fs::read(root.join(rel)) {
            Ok(bytes) => Response::new(Full::new(Bytes::from(bytes))),
            Err(_) => {
                let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
                *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                r
            }
        };
    }
    let echo = serde_json::json!({
        "method": method,
        "target": target,
        "headers": headers.iter().map(|(n, v)| format!("{n}: {v}")).collect::<Vec<_>>(),
    });
    let mut resp = Response::new(Full::new(Bytes::from(echo.to_string())));
    if let Some((_, auth)) = headers.iter().find(|(n, _)| n == "authorization")
        && let Ok(v) = hyper::header::HeaderValue::from_str(auth)
    {
        resp.headers_mut().insert("x-echo-authorization", v);
    }
    resp
}
