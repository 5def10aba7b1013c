//! Shared pieces of the gateway's tests: a real gateway on 127.0.0.1:0
//! over HTTPS, on SQLite (a temp dir) or PostgreSQL (a database of its own
//! on the server `scripts/postgres-test-server` starts), and a real HTTPS
//! client.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod process;
pub mod scripted;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bundle_trust::client::{Client, Response};
use gateway::server::{self, ApprovalMode, Config, Running};
use serde_json::{Value, json};

pub const T: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The test server's URL; the tests fail (never skip) without it.
pub fn postgres_base() -> String {
    std::env::var("OPENSHELL_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "OPENSHELL_TEST_POSTGRES_URL is not set: start the test server with `export OPENSHELL_TEST_POSTGRES_URL=$(scripts/postgres-test-server)`"
        )
    })
}

/// A fresh database on the test server, for one test.
pub async fn fresh_postgres() -> String {
    use sqlx::Connection as _;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = postgres_base();
    let name = format!(
        "osp_gw_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("the PostgreSQL test server at `{base}` is not reachable: {e}"));
    drop_stale_databases(&mut conn).await;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

/// Drops, once per test process, the databases earlier test processes
/// made (gateway and supervisor tests alike) whose process is gone: each
/// test's database outlives it for inspection, and a developer's server
/// would otherwise fill up run after run. A live process's are left alone.
async fn drop_stale_databases(conn: &mut sqlx::PgConnection) {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT datname FROM pg_database WHERE datname LIKE 'osp\\_gw\\_%' OR datname LIKE 'osp\\_sup\\_%'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (name,) in names {
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut *conn)
                .await;
        }
    }
}

/// A gateway directory made by `init`, and a database of its own.
pub async fn fresh_dir(backend: Backend) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    gateway::dir::init(dir.path(), &[]).unwrap();
    let db = match backend {
        Backend::Sqlite => format!("sqlite:{}", dir.path().join("gateway.db").display()),
        Backend::Postgres => fresh_postgres().await,
    };
    (dir, db)
}

pub struct Gw {
    pub dir: tempfile::TempDir,
    pub db: String,
    pub running: Running,
    pub url: String,
    pub ca: Vec<u8>,
    pub admin: Client,
}

/// A config for a gateway on `dir` and `db` that runs sandboxes with
/// `driver`, holding a sandbox in transition `lease` seconds at a time.
pub fn driven(
    dir: &tempfile::TempDir,
    db: &str,
    driver: &std::sync::Arc<scripted::Scripted>,
    lease: u64,
) -> Config {
    let d: std::sync::Arc<dyn gateway::driver::Driver> = driver.clone();
    Config {
        dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        db: db.to_owned(),
        approval: ApprovalMode::Manual,
        prove_timeout: Duration::from_secs(20),
        limits: gateway::app::Limits::default(),
        clients: quiet(),
        sandboxes: gateway::app::SandboxSettings {
            drivers: gateway::driver::Drivers::new(vec![d]),
            lease: Duration::from_secs(lease),
            ..gateway::app::SandboxSettings::default()
        },
    }
}

impl Gw {
    /// A gateway on a fresh directory that runs sandboxes with `driver`.
    pub async fn start_driven(
        backend: Backend,
        driver: &std::sync::Arc<scripted::Scripted>,
        lease: u64,
    ) -> Gw {
        let (dir, db) = fresh_dir(backend).await;
        let config = driven(&dir, &db, driver, lease);
        Self::serve(dir, config).await
    }

    pub async fn start(backend: Backend, approval: ApprovalMode) -> Gw {
        Self::start_with(backend, approval, Duration::from_secs(20)).await
    }

    pub async fn start_with(backend: Backend, approval: ApprovalMode, prove: Duration) -> Gw {
        Self::start_full(backend, approval, prove, quiet()).await
    }

    /// A gateway with these client limits.
    pub async fn start_limited(backend: Backend, clients: gateway::app::ClientLimits) -> Gw {
        Self::start_full(
            backend,
            ApprovalMode::Manual,
            Duration::from_secs(20),
            clients,
        )
        .await
    }

    pub async fn start_full(
        backend: Backend,
        approval: ApprovalMode,
        prove: Duration,
        clients: gateway::app::ClientLimits,
    ) -> Gw {
        let (dir, db) = fresh_dir(backend).await;
        let limits = gateway::app::Limits::default();
        Self::start_on_dir_with(dir, db, approval, prove, limits, clients).await
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn trust(&self) -> bundle_trust::TrustedKeys {
        bundle_trust::TrustedKeys::parse(&std::fs::read_to_string(self.path("trust.keys")).unwrap())
            .unwrap()
    }

    /// A token of `role` named `name`.
    pub async fn person(&self, name: &str, role: &str) -> Client {
        let r = send(
            &self.admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": name, "role": role})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        self.admin.with_token(r.json()["token"].as_str().unwrap())
    }

    /// A sandbox running `policy`, and a client with its token.
    pub async fn sandbox(&self, id: &str, policy: &str) -> Client {
        let r = send(
            &self.admin,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": id, "policy": policy})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        self.admin.with_token(r.json()["token"].as_str().unwrap())
    }
}

/// The default client limits without the access log, which would only
/// add noise to a failing test's output.
pub fn quiet() -> gateway::app::ClientLimits {
    gateway::app::ClientLimits {
        access_log: false,
        ..gateway::app::ClientLimits::default()
    }
}

pub async fn send(c: &Client, method: &str, path: &str, body: Option<Value>) -> Response {
    c.send(method, path, body.as_ref(), &[], T).await.unwrap()
}

/// Proposes `source` for `policy`; the proposal as stored.
pub async fn propose(c: &Client, policy: &str, source: &str) -> Value {
    let r = send(
        c,
        "POST",
        &format!("/v1/policies/{policy}/proposals"),
        Some(json!({"source": source})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()
}

pub async fn approve(c: &Client, proposal: &Value) -> Response {
    send(
        c,
        "POST",
        &format!("/v1/proposals/{}/approve", proposal["id"]),
        Some(json!({"review_token": proposal["review_token"]})),
    )
    .await
}

/// A policy with a credential: `curl` may read api.github.com with it and
/// reach example.com.
pub const BASE: &str = r#"policy "agent" {
  credential github_pat {
    secret env GITHUB_TOKEN
    placeholder env GITHUB_TOKEN
    inject replace
    hosts api.github.com
    methods GET HEAD
  }
  binaries agent = /usr/bin/curl
  allow agent -> api.github.com:443 http read-only
  allow agent -> example.com:443
}
"#;

/// BASE where the credential may also write: a widening.
pub fn wide() -> String {
    BASE.replace("http read-only", "http read-write")
}

/// BASE without example.com: no new access.
pub fn narrow() -> String {
    BASE.lines()
        .filter(|l| !l.contains("example.com"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs one test body on each backend.
#[macro_export]
macro_rules! both {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                ($body)(Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                ($body)(Backend::Postgres).await;
            }
        }
    };
}

impl Gw {
    /// A gateway on a fresh directory with `limits`.
    pub async fn start_limits(
        backend: Backend,
        approval: ApprovalMode,
        prove: Duration,
        limits: gateway::app::Limits,
    ) -> Gw {
        let (dir, db) = fresh_dir(backend).await;
        Self::start_on_dir(dir, db, approval, prove, limits).await
    }

    /// A gateway serving `dir` as it is (made by `init` or `replica-dir`)
    /// on the database `db`.
    pub async fn start_on_dir(
        dir: tempfile::TempDir,
        db: String,
        approval: ApprovalMode,
        prove: Duration,
        limits: gateway::app::Limits,
    ) -> Gw {
        Self::start_on_dir_with(dir, db, approval, prove, limits, quiet()).await
    }

    pub async fn start_on_dir_with(
        dir: tempfile::TempDir,
        db: String,
        approval: ApprovalMode,
        prove: Duration,
        limits: gateway::app::Limits,
        clients: gateway::app::ClientLimits,
    ) -> Gw {
        let config = Config {
            dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            db: db.clone(),
            approval,
            prove_timeout: prove,
            limits,
            clients,
            sandboxes: gateway::app::SandboxSettings::default(),
        };
        Self::serve(dir, config).await
    }

    /// A gateway serving `dir` with `config` (whose `dir` it must be).
    pub async fn serve(dir: tempfile::TempDir, config: Config) -> Gw {
        let db = config.db.clone();
        Self::from_running(dir, db, server::start(config).await.unwrap())
    }

    /// The gateway `running` serves, on `dir` and `db`.
    pub fn from_running(dir: tempfile::TempDir, db: String, running: Running) -> Gw {
        let url = format!("https://127.0.0.1:{}", running.addr.port());
        let ca = std::fs::read(dir.path().join("ca.pem")).unwrap();
        let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
        let admin = Client::new(&url, &ca, &token).unwrap();
        Gw {
            dir,
            db,
            running,
            url,
            ca,
            admin,
        }
    }

    /// A token of `role` named `name`, written to a file for the command
    /// line client.
    pub async fn person_file(&self, name: &str, role: &str) -> (Client, PathBuf) {
        let r = send(
            &self.admin,
            "POST",
            "/v1/tokens",
            Some(json!({"name": name, "role": role})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let token = r.json()["token"].as_str().unwrap().to_owned();
        let path = self.path(&format!("{name}.token"));
        std::fs::write(&path, &token).unwrap();
        (self.admin.with_token(&token), path)
    }
}

/// A TLS connection to the gateway at `addr` from `from` (another loopback
/// address is another peer), for writing bytes no client would.
pub async fn connect_raw(
    addr: std::net::SocketAddr,
    ca: &[u8],
    from: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls::pki_types::pem::PemObject as _;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse().unwrap())?;
    let tcp = socket.connect(addr).await?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
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

/// One answer off a raw connection: status, head (lower case), body (by
/// `content-length`).
pub async fn read_raw_answer(
    s: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> (u16, String, Vec<u8>) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < end + len {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed inside the body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[end..end + len].to_vec();
    (status, head, body)
}
