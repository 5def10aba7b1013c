//! A gateway in this process running sandboxes with a driver, for the
//! drivers' suite and the lifecycle benchmark. Included by path where it
//! is used (`#[path = "common/driven.rs"] mod driven;`), beside `common`:
//! the other test binaries need not link the gateway.
#![allow(dead_code, reason = "each binary that includes it uses a part")]

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bundle_trust::client::{Client, Response};
use gateway::driver::{Driver, Drivers};
use gateway::server::{self, ApprovalMode, Config};
use serde_json::{Value, json};

use crate::common::{SUPERVISOR, SYSTEM, clients, standalone};

const T: Duration = Duration::from_secs(90);

/// A gateway in this process, on loopback, running sandboxes with one
/// driver; its runtime lives as long as it does.
pub struct Gw {
    pub rt: tokio::runtime::Runtime,
    /// Kept for as long as the gateway serves it.
    _dir: tempfile::TempDir,
    pub url: String,
    pub admin: Client,
}

impl Gw {
    /// The gateway's directory (`ca.pem`, `trust.keys`).
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Policy `name` proposed as `source` by `author`, approved by admin.
    pub fn approve(&self, author: &Client, name: &str, source: &str) {
        let p = self
            .call_as(
                author,
                "POST",
                &format!("/v1/policies/{name}/proposals"),
                Some(json!({"source": source})),
            )
            .json();
        let r = self.call(
            "POST",
            &format!("/v1/proposals/{}/approve", p["id"]),
            Some(json!({"review_token": p["review_token"]})),
        );
        assert_eq!(r.status, 200, "{:?}", r.json());
    }

    /// A token of role `author`.
    pub fn author(&self, name: &str) -> Client {
        let r = self.call(
            "POST",
            "/v1/tokens",
            Some(json!({"name": name, "role": "author"})),
        );
        self.admin.with_token(r.json()["token"].as_str().unwrap())
    }

    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Response {
        self.call_as(&self.admin, method, path, body)
    }

    pub fn call_as(&self, c: &Client, method: &str, path: &str, body: Option<Value>) -> Response {
        self.rt
            .block_on(c.send(method, path, body.as_ref(), &[], T))
            .unwrap()
    }
}

/// What a driver under test is made from: the gateway's directory and
/// URL.
pub type MakeDriver = dyn Fn(&Path, &str) -> Arc<dyn Driver>;

/// A gateway with the driver `make` makes, holding leases `lease`
/// seconds, and policy `agent` approved as `policy`.
pub fn gateway(make: &MakeDriver, policy: &str, lease: u64) -> Gw {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    gateway_on(listener, &[], make, policy, lease)
}

/// [`gateway`] serving on `listener`, its certificate naming `hosts` too.
pub fn gateway_on(
    listener: TcpListener,
    hosts: &[String],
    make: &MakeDriver,
    policy: &str,
    lease: u64,
) -> Gw {
    let dir = tempfile::tempdir().unwrap();
    gateway::dir::init(dir.path(), hosts).unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let driver = make(dir.path(), &url);
    let config = Config {
        dir: dir.path().to_path_buf(),
        listen: listener.local_addr().unwrap(),
        db: format!("sqlite:{}", dir.path().join("gateway.db").display()),
        approval: ApprovalMode::Manual,
        prove_timeout: Duration::from_secs(20),
        limits: gateway::app::Limits::default(),
        clients: gateway::app::ClientLimits::default(),
        sandboxes: gateway::app::SandboxSettings {
            drivers: Drivers::new(vec![driver]),
            lease: Duration::from_secs(lease),
            ..gateway::app::SandboxSettings::default()
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::from_std(listener).unwrap();
        // Kept alive by the runtime's tasks.
        let _running = server::start_on(config, l).await.unwrap();
    });
    let ca = std::fs::read(dir.path().join("ca.pem")).unwrap();
    let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    let admin = Client::new(&url, &ca, &token).unwrap();
    let gw = Gw {
        rt,
        _dir: dir,
        url,
        admin,
    };
    let alice = gw.author("alice");
    gw.approve(&alice, "agent", policy);
    gw
}

/// The policy: the workspace writable, the allowed upstream reachable.
pub fn policy(workspace: &Path, allowed: u16) -> String {
    format!(
        "policy \"agent\" {{\n  landlock hard min_abi 4\n{SYSTEM}  fs write {}\n  run_as user nobody group nogroup\n  binaries clients = {}\n  allow clients -> 127.0.0.1:{allowed}\n}}\n",
        workspace.display(),
        clients()
    )
}

/// A directory every user may write.
pub fn workspace() -> tempfile::TempDir {
    let w = tempfile::Builder::new()
        .prefix("osp-workspace-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    w
}

/// The local driver, keeping its sandboxes under `root`.
pub fn local_driver(root: &Path) -> impl Fn(&Path, &str) -> Arc<dyn Driver> + use<> {
    let root = root.to_path_buf();
    move |dir: &Path, url: &str| -> Arc<dyn Driver> {
        Arc::new(gateway::driver::local::Local {
            root: root.clone(),
            supervisor: PathBuf::from(SUPERVISOR),
            sandbox: standalone::sandbox_exe(),
            gateway_urls: vec![url.to_owned()],
            gateway_ca: dir.join("ca.pem"),
            trust_keys: dir.join("trust.keys"),
        })
    }
}

/// The Podman driver, keeping its sandboxes under `root`, running the
/// static `sandbox` as `nobody`, every workload container given
/// `volumes`.
pub fn podman_driver(
    root: &Path,
    sandbox: &Path,
    volumes: &[String],
) -> impl Fn(&Path, &str) -> Arc<dyn Driver> + use<> {
    let (root, sandbox, volumes) = (root.to_path_buf(), sandbox.to_path_buf(), volumes.to_vec());
    move |dir: &Path, url: &str| -> Arc<dyn Driver> {
        Arc::new(gateway::driver::podman::Podman {
            root: root.clone(),
            supervisor: PathBuf::from(SUPERVISOR),
            sandbox: sandbox.clone(),
            gateway_urls: vec![url.to_owned()],
            gateway_ca: dir.join("ca.pem"),
            trust_keys: dir.join("trust.keys"),
            user: (65534, 65534),
            volumes: volumes.clone(),
        })
    }
}

/// The Kubernetes driver over `client`, in namespace `namespace`, its
/// supervisor Pods of `supervisor_image`, waiting up to `ready_within`
/// for a start and reading Pods every `poll`.
pub fn kubernetes_driver(
    client: kube::Client,
    namespace: &str,
    supervisor_image: &str,
    ready_within: Duration,
    poll: Duration,
) -> impl Fn(&Path, &str) -> Arc<dyn Driver> + use<> {
    let (namespace, supervisor_image) = (namespace.to_owned(), supervisor_image.to_owned());
    move |dir: &Path, url: &str| -> Arc<dyn Driver> {
        Arc::new(gateway::driver::kubernetes::Kubernetes::new(
            client.clone(),
            gateway::driver::kubernetes::Settings {
                namespace: namespace.clone(),
                supervisor_image: supervisor_image.clone(),
                user: 65534,
                group: 65534,
                gateway_urls: vec![url.to_owned()],
                gateway_ca: dir.join("ca.pem"),
                trust_keys: dir.join("trust.keys"),
                ipv6: false,
                ready_within,
                poll,
                labels: Default::default(),
            },
        ))
    }
}

/// What a further command did: its record, its standard output and error.
pub struct Ran {
    pub record: Value,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `body` (`command`, `env`, `timeout_seconds`...) in sandbox `id`
/// through the gateway and follows its output until it has ended.
pub fn exec(gw: &Gw, id: &str, body: Value) -> Ran {
    use base64::Engine as _;
    let r = gw.call("POST", &format!("/v1/sandboxes/{id}/execs"), Some(body));
    assert_eq!(r.status, 201, "{:?}", r.json());
    let exec = r.json()["id"].as_str().unwrap().to_owned();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + T;
    loop {
        let path = format!(
            "/v1/sandboxes/{id}/execs/{exec}/output?stdout={}&stderr={}&wait=30",
            stdout.len(),
            stderr.len()
        );
        let r = gw.call("GET", &path, None);
        assert_eq!(r.status, 200, "{:?}", r.json());
        let v = r.json();
        let chunks = v["chunks"].as_array().unwrap();
        for c in chunks {
            let data = base64::engine::general_purpose::STANDARD
                .decode(c["data"].as_str().unwrap())
                .unwrap();
            match c["stream"].as_str().unwrap() {
                "stdout" => stdout.extend(data),
                _ => stderr.extend(data),
            }
        }
        let state = v["exec"]["state"].as_str().unwrap_or_default();
        if chunks.is_empty() && matches!(state, "exited" | "failed") {
            return Ran {
                record: v["exec"].clone(),
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            };
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{exec} did not end: {v}"
        );
    }
}
