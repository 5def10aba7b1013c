//! The command line: `init`, `rotate-key`, `serve`, and the client
//! commands that talk to a running gateway.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use bundle_trust::client::{Client, Response};
use clap::{Parser, Subcommand};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::app::Limits;
use crate::server::{self, ApprovalMode, Config};
use crate::show::ShowFormat;
use crate::wire;

mod boundary;
mod exec;
mod lifecycle;

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_UNREACHABLE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "openshell-gateway",
    version,
    about = "The policy control plane: propose, prove, approve, sign and deliver bundles"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the gateway is and who is asking.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Conn {
    /// The gateway, `https://HOST:PORT`; several replicas as a comma
    /// list or a repeated flag, tried in order (the next on a connection
    /// error, a time-out or a `5xx`).
    #[arg(
        long,
        env = "OPENSHELL_GATEWAY",
        value_name = "URL",
        value_delimiter = ',',
        required = true
    )]
    pub(crate) gateway: Vec<String>,
    /// The gateway's CA certificate (`D/ca.pem`).
    #[arg(long, env = "OPENSHELL_GATEWAY_CA", value_name = "FILE")]
    pub(crate) ca: PathBuf,
    /// A file holding the bearer token.
    #[arg(long, env = "OPENSHELL_GATEWAY_TOKEN_FILE", value_name = "FILE")]
    pub(crate) token_file: PathBuf,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Create a gateway directory: CA, server certificate, signing key,
    /// admin token (secrets mode 0600).
    Init {
        #[arg(long, value_name = "D")]
        dir: PathBuf,
        /// Another name or address for the server certificate.
        #[arg(long = "host", value_name = "NAME")]
        hosts: Vec<String>,
    },
    /// Add a signing key, make it active and add it to `D/trust.keys`.
    RotateKey {
        #[arg(long, value_name = "D")]
        dir: PathBuf,
    },
    /// Serve the API.
    Serve {
        #[arg(long, value_name = "D")]
        dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8443", value_name = "ADDR")]
        listen: SocketAddr,
        /// `sqlite:PATH` (default `sqlite:D/gateway.db`) or `postgres://...`.
        #[arg(long, value_name = "URL")]
        db: Option<String>,
        #[arg(long, value_enum, default_value = "manual")]
        approval: ApprovalMode,
        /// The prover's time budget per proposal; past it the verdict is
        /// `inconclusive` and a person decides.
        #[arg(long, default_value_t = 10_000, value_name = "N")]
        prove_timeout_ms: u64,
        /// A gateway acting on a sandbox (starting, stopping, deleting it)
        /// holds it for S seconds at a time, renewed while it acts; one
        /// that died is taken over by another when S seconds have passed.
        #[arg(long, default_value_t = 30, value_name = "S")]
        sandbox_lease: u64,
        /// A session token of a sandbox the gateway runs lives S seconds;
        /// its supervisor refreshes it before then.
        #[arg(long, default_value_t = 600, value_name = "S")]
        session_ttl: u64,
        /// Boxed: the drivers' flags are most of the command's size.
        #[command(flatten)]
        local: Box<DriverArgs>,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        clients: ClientArgs,
    },
    /// Write, in OUT, only what another `serve` of the same database needs:
    /// the server certificate and key, the active signing key, `trust.keys`,
    /// `ca.pem` and `admin.token`; never the CA's key.
    ReplicaDir {
        #[arg(long, value_name = "D")]
        dir: PathBuf,
        #[arg(long, value_name = "R")]
        out: PathBuf,
    },
    /// Propose FILE as the next revision of policy NAME; with
    /// `--from-denials LOG`, the gateway writes the narrowest change to
    /// the active revision that admits LOG's denials (as `openshell-policy
    /// suggest`), which only a person approves.
    Propose {
        #[command(flatten)]
        conn: Conn,
        name: String,
        #[arg(required_unless_present = "from_denials")]
        file: Option<PathBuf>,
        /// An OpenShell credentials file.
        #[arg(long, value_name = "F", conflicts_with = "from_denials")]
        credentials: Option<PathBuf>,
        /// A supervisor deny log (OCSF JSON lines), `-` for standard input.
        #[arg(long, value_name = "LOG", conflicts_with = "file")]
        from_denials: Option<PathBuf>,
        /// With `--from-denials`: widen deliberately (`paths`, `hosts`).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            value_name = "WHAT",
            requires = "from_denials"
        )]
        generalize: Vec<wire::Generalization>,
    },
    /// List proposals (of NAME).
    Proposals {
        #[command(flatten)]
        conn: Conn,
        name: Option<String>,
    },
    /// One proposal with its verdict, findings and review token.
    Show {
        #[command(flatten)]
        conn: Conn,
        id: i64,
        #[arg(long, value_enum, default_value = "human")]
        format: ShowFormat,
    },
    /// Approve a proposal (not your own).
    Approve {
        #[command(flatten)]
        conn: Conn,
        id: i64,
        /// The review token you reviewed (`show`); default: the proposal's
        /// current one.
        #[arg(long, value_name = "T")]
        review_token: Option<String>,
    },
    /// Reject a proposal.
    Reject {
        #[command(flatten)]
        conn: Conn,
        id: i64,
        #[arg(long, value_name = "R")]
        reason: String,
    },
    /// The revisions of a policy.
    Revisions {
        #[command(flatten)]
        conn: Conn,
        name: String,
    },
    /// Propose an old revision's source again (proved like any change).
    Rollback {
        #[command(flatten)]
        conn: Conn,
        name: String,
        rev: i64,
    },
    /// The boundary every proposal to a policy is proved within (admin).
    Boundary {
        #[command(subcommand)]
        command: boundary::BoundaryCommand,
    },
    /// Sandboxes.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Bearer tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// What a sandbox runs; with `--wait REV`, wait until it applied REV.
    Status {
        #[command(flatten)]
        conn: Conn,
        sandbox: String,
        #[arg(long, value_name = "REV")]
        wait: Option<i64>,
        #[arg(long, default_value_t = 60, value_name = "S")]
        timeout: u64,
    },
    /// Print the API's OpenAPI 3.1 document (`docs/openapi.yaml` is its
    /// output, checked in).
    Openapi,
    /// The audit log, a page at a time (oldest first); `--verify` checks
    /// its hash chain.
    Audit {
        #[command(flatten)]
        conn: Conn,
        #[arg(long, conflicts_with_all = ["after", "limit", "all"])]
        verify: bool,
        /// Rows after sequence number N (the previous page's `next`).
        #[arg(long, value_name = "N")]
        after: Option<i64>,
        /// At most N rows (the gateway answers at most 1000).
        #[arg(long, value_name = "N")]
        limit: Option<i64>,
        /// Every row from `--after` on, page after page.
        #[arg(long)]
        all: bool,
    },
}

/// What a client may hold, and how `serve` stops.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ClientArgs {
    /// Seconds a client has for a TLS handshake and for each request's
    /// head.
    #[arg(long, default_value_t = 10, value_name = "S")]
    pub(crate) header_timeout: u64,
    /// Seconds a client has to send a request's body.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub(crate) body_timeout: u64,
    /// Connections open at once (lowered to fit the open-files limit).
    #[arg(long, default_value_t = 8192, value_name = "N")]
    pub(crate) max_connections: usize,
    /// Connections open at once from one address (behind a proxy or NAT
    /// every supervisor has the same one: raise it there).
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub(crate) max_connections_per_peer: usize,
    /// Refusals of requests without a valid token written to the audit
    /// log per minute; the rest are counted and summed up in one row.
    #[arg(long, default_value_t = 60, value_name = "N")]
    pub(crate) audited_refusals_per_minute: u32,
    /// Seconds `SIGTERM` waits for requests in flight.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub(crate) shutdown_grace: u64,
    /// No access log (one JSON line per request on standard error).
    #[arg(long)]
    pub(crate) no_access_log: bool,
}

impl ClientArgs {
    #[must_use]
    pub(crate) fn limits(&self) -> crate::app::ClientLimits {
        crate::app::ClientLimits {
            header_timeout: Duration::from_secs(self.header_timeout.max(1)),
            body_timeout: Duration::from_secs(self.body_timeout.max(1)),
            max_connections: self.max_connections.max(1),
            max_connections_per_peer: self.max_connections_per_peer.max(1),
            audited_refusals_per_minute: self.audited_refusals_per_minute,
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
            access_log: !self.no_access_log,
        }
    }
}

/// `serve`'s limits on proposals and its use of the machine and database.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct LimitArgs {
    /// Bytes of a proposal's source, fragments and credentials together
    /// (at most 1 MiB, the request body limit).
    #[arg(long, default_value_t = Limits::default().max_source_bytes, value_name = "N")]
    pub(crate) max_source_bytes: usize,
    /// Rules of a compiled candidate (routes, L7 rules, filesystem paths).
    #[arg(long, default_value_t = Limits::default().max_rules, value_name = "N")]
    pub(crate) max_rules: usize,
    /// Network endpoints (routes) of a compiled candidate.
    #[arg(long, default_value_t = Limits::default().max_endpoints, value_name = "N")]
    pub(crate) max_endpoints: usize,
    /// Bytes of a compiled candidate's bundle.
    #[arg(long, default_value_t = Limits::default().max_bundle_bytes, value_name = "N")]
    pub(crate) max_bundle_bytes: usize,
    /// Proofs at once (default: one per CPU); one more slot is kept for
    /// small proofs.
    #[arg(long, value_name = "N")]
    pub(crate) proof_slots: Option<usize>,
    /// A proof whose two bundles together are at most N bytes may take the
    /// slot kept for small proofs.
    #[arg(long, default_value_t = Limits::default().small_proof_bytes, value_name = "N")]
    pub(crate) small_proof_bytes: usize,
    /// Bytes of revisions kept in memory for delivery.
    #[arg(long, default_value_t = Limits::default().revision_cache_bytes, value_name = "N")]
    pub(crate) revision_cache_bytes: usize,
    /// Database connections of this process (default 4 for SQLite, 16 for
    /// PostgreSQL); replicas share the server's `max_connections`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) db_pool_size: Option<u32>,
    /// A secret source a proposal's credentials may read: `env:NAME` or
    /// `file:PATH`, a final `*` matching any rest (`file:/run/secrets/*`);
    /// repeat it for more. Without it every source is allowed.
    #[arg(long = "allow-secret-source", value_name = "SOURCE")]
    pub(crate) allow_secret_source: Vec<crate::secret_sources::SourcePattern>,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            max_source_bytes: self.max_source_bytes,
            max_rules: self.max_rules,
            max_endpoints: self.max_endpoints,
            max_bundle_bytes: self.max_bundle_bytes,
            proof_slots: self.proof_slots.unwrap_or(d.proof_slots).max(1),
            small_proof_bytes: self.small_proof_bytes,
            revision_cache_bytes: self.revision_cache_bytes,
            db_pool_size: self.db_pool_size,
            secret_sources: crate::secret_sources::SecretSources::new(
                self.allow_secret_source.clone(),
            ),
        }
    }
}

/// `serve --driver local|podman|kubernetes`: the gateway runs sandboxes on
/// its own host, as processes or as Podman containers, or as Pods of a
/// cluster.
#[derive(clap::Args, Debug)]
pub(crate) struct DriverArgs {
    /// Run sandboxes with this driver (`local`, `podman` or `kubernetes`;
    /// repeat for several).
    #[arg(long = "driver", value_name = "D")]
    drivers: Vec<String>,
    /// Where the local driver keeps its sandboxes (default: DIR/local).
    #[arg(long, value_name = "DIR")]
    local_dir: Option<PathBuf>,
    /// How the drivers' supervisors reach this gateway (default:
    /// `https://127.0.0.1:PORT` of `--listen`).
    #[arg(long, value_name = "URL")]
    local_gateway_url: Vec<String>,
    /// `openshell-supervisor` (default: beside this program).
    #[arg(long, value_name = "FILE")]
    supervisor_bin: Option<PathBuf>,
    /// `openshell-sandbox` (default: beside this program).
    #[arg(long, value_name = "FILE")]
    sandbox_bin: Option<PathBuf>,
    /// Where the Podman driver keeps its sandboxes (default: DIR/podman).
    #[arg(long, value_name = "DIR")]
    podman_dir: Option<PathBuf>,
    /// The statically linked `openshell-sandbox` the Podman driver runs
    /// in any image (default: `--sandbox-bin`).
    #[arg(long, value_name = "FILE")]
    podman_sandbox_bin: Option<PathBuf>,
    /// The user both of a sandbox's containers run as; never 0.
    #[arg(long, value_name = "UID:GID", default_value = "65534:65534", value_parser = user_ids)]
    podman_user: (u32, u32),
    /// A volume (`SRC:DST[:OPTIONS]`) every workload container gets.
    #[arg(long, value_name = "VOLUME")]
    podman_volume: Vec<String>,
    #[command(flatten)]
    kubernetes: KubernetesArgs,
}

/// The Kubernetes driver's settings (`docs/kubernetes.md`).
#[derive(clap::Args, Debug)]
pub(crate) struct KubernetesArgs {
    /// The cluster's kubeconfig (default: `KUBECONFIG`, `~/.kube/config`,
    /// or the Pod's service account when the gateway runs in the cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The namespace every sandbox's Pods and Secrets go in; it gets the
    /// driver's fence.
    #[arg(long, value_name = "NS", default_value = "openshell-sandboxes")]
    k8s_namespace: String,
    /// The supervisor's image: `openshell-supervisor` and a statically
    /// linked `openshell-sandbox` in `/usr/local/bin`, `cp` and `test`.
    #[arg(long, value_name = "IMAGE")]
    k8s_supervisor_image: Option<String>,
    /// How supervisor Pods reach this gateway (repeat for replicas).
    #[arg(long, value_name = "URL")]
    k8s_gateway_url: Vec<String>,
    /// The user both of a sandbox's Pods run as; never 0.
    #[arg(long, value_name = "UID:GID", default_value = "65534:65534", value_parser = user_ids)]
    k8s_user: (u32, u32),
    /// The cluster's Pod network is IPv6: the sandbox listens on `[::]`.
    #[arg(long)]
    k8s_ipv6: bool,
    /// How long a start may take until the supervisor confirms the
    /// sandbox's enforcement.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    k8s_ready_within: u64,
}

impl KubernetesArgs {
    async fn driver(
        &self,
        dir: &std::path::Path,
    ) -> Result<crate::driver::kubernetes::Kubernetes, String> {
        let image = self.k8s_supervisor_image.clone().ok_or(
            "`--driver kubernetes` needs `--k8s-supervisor-image`, the image its supervisor Pods run",
        )?;
        if self.k8s_gateway_url.is_empty() {
            return Err(
                "`--driver kubernetes` needs `--k8s-gateway-url`, how its supervisor Pods reach this gateway".into(),
            );
        }
        let config = match &self.kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
                kube::Config::from_custom_kubeconfig(
                    file,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| format!("`{}`: {e}", path.display()))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| format!("no cluster to run sandboxes in: {e}; give `--kubeconfig`"))?,
        };
        let client = kube::Client::try_from(config)
            .map_err(|e| format!("cannot make the cluster's client: {e}"))?;
        Ok(crate::driver::kubernetes::Kubernetes::new(
            client,
            crate::driver::kubernetes::Settings {
                namespace: self.k8s_namespace.clone(),
                supervisor_image: image,
                user: i64::from(self.k8s_user.0),
                group: i64::from(self.k8s_user.1),
                gateway_urls: self.k8s_gateway_url.clone(),
                gateway_ca: dir.join("ca.pem"),
                trust_keys: dir.join("trust.keys"),
                ipv6: self.k8s_ipv6,
                ready_within: Duration::from_secs(self.k8s_ready_within),
                poll: Duration::from_millis(500),
                labels: std::collections::BTreeMap::new(),
            },
        ))
    }
}

fn user_ids(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)));
    match parsed {
        Some((0, _) | (_, 0)) => Err("the containers never run as root (uid or gid 0)".into()),
        Some(ids) => Ok(ids),
        None => Err(format!("`{text}` is not UID:GID")),
    }
}

impl DriverArgs {
    async fn driver(
        &self,
        dir: &std::path::Path,
        listen: std::net::SocketAddr,
    ) -> Result<crate::driver::Drivers, String> {
        let mut drivers: Vec<std::sync::Arc<dyn crate::driver::Driver>> = Vec::new();
        let beside = |bin: &str| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|p| p.join(bin)))
                .unwrap_or_else(|| PathBuf::from(bin))
        };
        let supervisor = self
            .supervisor_bin
            .clone()
            .unwrap_or_else(|| beside("openshell-supervisor"));
        let sandbox = self
            .sandbox_bin
            .clone()
            .unwrap_or_else(|| beside("openshell-sandbox"));
        let made = |root: PathBuf| {
            std::fs::create_dir_all(&root)
                .map(|()| root.clone())
                .map_err(|e| format!("cannot make `{}`: {e}", root.display()))
        };
        for name in &self.drivers {
            if name == "kubernetes" {
                drivers.push(std::sync::Arc::new(self.kubernetes.driver(dir).await?));
                continue;
            }
            let urls = if self.local_gateway_url.is_empty() {
                if listen.port() == 0 {
                    return Err(format!(
                        "`--driver {name}` with `--listen` port 0: give `--local-gateway-url`, the URL its supervisors reach this gateway at"
                    ));
                }
                vec![format!("https://127.0.0.1:{}", listen.port())]
            } else {
                self.local_gateway_url.clone()
            };
            match name.as_str() {
                "local" => drivers.push(std::sync::Arc::new(crate::driver::local::Local {
                    root: made(self.local_dir.clone().unwrap_or_else(|| dir.join("local")))?,
                    supervisor: supervisor.clone(),
                    sandbox: sandbox.clone(),
                    gateway_urls: urls,
                    gateway_ca: dir.join("ca.pem"),
                    trust_keys: dir.join("trust.keys"),
                })),
                "podman" => drivers.push(std::sync::Arc::new(crate::driver::podman::Podman {
                    root: made(
                        self.podman_dir
                            .clone()
                            .unwrap_or_else(|| dir.join("podman")),
                    )?,
                    supervisor: supervisor.clone(),
                    sandbox: self
                        .podman_sandbox_bin
                        .clone()
                        .unwrap_or_else(|| sandbox.clone()),
                    gateway_urls: urls,
                    gateway_ca: dir.join("ca.pem"),
                    trust_keys: dir.join("trust.keys"),
                    user: self.podman_user,
                    volumes: self.podman_volume.clone(),
                })),
                other => {
                    return Err(format!(
                        "`--driver {other}`: this gateway has the `local`, `podman` and `kubernetes` drivers"
                    ));
                }
            }
        }
        Ok(crate::driver::Drivers::new(drivers))
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum SandboxCommand {
    /// Create a sandbox that runs policy P. With `--driver`, the gateway
    /// runs it and prints it once it is ready; without, it is registered
    /// to run elsewhere and its token is printed once.
    Create {
        #[command(flatten)]
        conn: Conn,
        name: String,
        #[arg(long, value_name = "P")]
        policy: String,
        /// The sandbox token expires after S seconds (registered only).
        #[arg(long, value_name = "S")]
        ttl: Option<u64>,
        #[command(flatten)]
        run: lifecycle::RunArgs,
    },
    /// Stop sandbox ID; its workspace stays, its tokens stop working.
    Stop {
        #[command(flatten)]
        conn: Conn,
        id: String,
    },
    /// Start a new generation of sandbox ID (new tokens, the same
    /// workspace).
    Start {
        #[command(flatten)]
        conn: Conn,
        id: String,
    },
    /// Sandbox ID: its phase, why, its generation and what it runs.
    Show {
        #[command(flatten)]
        conn: Conn,
        id: String,
    },
    /// Every sandbox and what it runs.
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// A new token for sandbox ID (its old ones stop working); printed once.
    Token {
        #[command(flatten)]
        conn: Conn,
        id: String,
        /// The new token expires after S seconds.
        #[arg(long, value_name = "S")]
        ttl: Option<u64>,
    },
    /// Remove sandbox ID and revoke its tokens.
    Delete {
        #[command(flatten)]
        conn: Conn,
        id: String,
    },
    /// Run a command in ready sandbox ID and follow its output; exits
    /// with the command's exit status (125 when it could not run).
    Exec {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        args: exec::ExecArgs,
    },
    /// The commands run in sandbox ID, newest first.
    Execs {
        #[command(flatten)]
        conn: Conn,
        id: String,
        #[arg(long, value_name = "N")]
        limit: Option<i64>,
    },
    /// The stored output of command EXEC of sandbox ID, raw; its status on
    /// stderr.
    Transcript {
        #[command(flatten)]
        conn: Conn,
        id: String,
        exec: String,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum TokenCommand {
    /// A token for a person or a program; printed once.
    Create {
        #[command(flatten)]
        conn: Conn,
        name: String,
        #[arg(long, value_name = "admin|author|reader")]
        role: String,
        #[arg(long, value_name = "S")]
        ttl: Option<u64>,
    },
    /// Every token: name, role, sandbox, expiry, creation (never the token).
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Revoke the token named NAME (`sandbox:ID` for a sandbox's); refused
    /// at once on every replica.
    Revoke {
        #[command(flatten)]
        conn: Conn,
        name: String,
    },
}

/// The entry point.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("openshell-gateway: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    ExitCode::from(runtime.block_on(run(cli.command)))
}

fn fail(code: u8, e: impl std::fmt::Display) -> u8 {
    eprintln!("openshell-gateway: {e}");
    code
}

async fn run(command: Command) -> u8 {
    match command {
        Command::Init { dir, hosts } => match crate::dir::init(&dir, &hosts) {
            Ok(()) => {
                println!(
                    "gateway directory `{}` ready: CA `ca.pem`, trust file `trust.keys`, admin token `admin.token`",
                    dir.display()
                );
                0
            }
            Err(e) => fail(EXIT_USAGE, e),
        },
        Command::RotateKey { dir } => match crate::dir::rotate_key(&dir) {
            Ok(id) => {
                println!(
                    "signing key `{id}` is active; it is in `trust.keys` with the old ones. Restart `serve` to sign with it"
                );
                0
            }
            Err(e) => fail(EXIT_USAGE, e),
        },
        Command::Serve {
            dir,
            listen,
            db,
            approval,
            prove_timeout_ms,
            sandbox_lease,
            session_ttl,
            local,
            limits,
            clients,
        } => {
            let db = db.unwrap_or_else(|| format!("sqlite:{}", dir.join("gateway.db").display()));
            let drivers = match local.driver(&dir, listen).await {
                Ok(d) => d,
                Err(e) => return fail(EXIT_USAGE, e),
            };
            serve(Config {
                dir,
                listen,
                db,
                approval,
                prove_timeout: Duration::from_millis(prove_timeout_ms),
                limits: limits.limits(),
                clients: clients.limits(),
                sandboxes: crate::app::SandboxSettings {
                    drivers,
                    lease: Duration::from_secs(sandbox_lease),
                    session_ttl: Duration::from_secs(session_ttl),
                },
            })
            .await
        }
        Command::ReplicaDir { dir, out } => match crate::dir::replica(&dir, &out) {
            Ok(written) => {
                println!(
                    "replica directory `{}` ready ({}); it holds no CA key. Start `serve --dir {} --db postgres://...` with the same database",
                    out.display(),
                    written.join(", "),
                    out.display()
                );
                0
            }
            Err(e) => fail(EXIT_USAGE, e),
        },
        Command::Openapi => match crate::openapi::yaml() {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => fail(EXIT_USAGE, e),
        },
        other => client_command(other).await,
    }
}

async fn serve(config: Config) -> u8 {
    let running = match server::start(config).await {
        Ok(r) => r,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    println!("openshell-gateway: listening on https://{}", running.addr);
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    eprintln!(
        "openshell-gateway: stopping: no new connections, waking long-polls, finishing requests in flight"
    );
    let left = running.shutdown().await;
    if left > 0 {
        eprintln!(
            "openshell-gateway: {left} connections still open after the grace period were closed"
        );
    }
    eprintln!("openshell-gateway: stopped");
    0
}

fn connect(conn: &Conn) -> Result<Client, u8> {
    let ca = std::fs::read(&conn.ca).map_err(|e| {
        fail(
            EXIT_USAGE,
            format!("cannot read `{}`: {e}", conn.ca.display()),
        )
    })?;
    let token = std::fs::read_to_string(&conn.token_file).map_err(|e| {
        fail(
            EXIT_USAGE,
            format!("cannot read `{}`: {e}", conn.token_file.display()),
        )
    })?;
    Client::with_urls(&conn.gateway, &ca, &token).map_err(|e| fail(EXIT_USAGE, e))
}

fn read_file(path: &Path) -> Result<String, u8> {
    std::fs::read_to_string(path)
        .map_err(|e| fail(EXIT_USAGE, format!("cannot read `{}`: {e}", path.display())))
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// A policy file as a proposal (or a boundary) sends it: its source, its
/// format, and every fragment it includes.
fn policy_request(file: &Path, credentials: Option<&Path>) -> Result<wire::ProposalRequest, u8> {
    let format = if policy_lang::load::is_yaml(file) {
        "yaml"
    } else {
        "policy"
    };
    let source = read_file(file)?;
    // Included fragments travel with the policy: the gateway reads none
    // from its own disk.
    let files = if format == "policy" {
        policy_lang::load::include_closure(file).map_err(|e| fail(EXIT_USAGE, e))?
    } else {
        std::collections::BTreeMap::new()
    };
    Ok(wire::ProposalRequest {
        source,
        format: format.to_owned(),
        credentials: credentials.map(read_file).transpose()?,
        files,
    })
}

fn denials_request(
    log: &Path,
    generalize: Vec<wire::Generalization>,
) -> Result<wire::DenialsRequest, u8> {
    let (denials, log_name) = if log.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot read standard input: {e}")))?;
        (text, None)
    } else {
        let name = log.file_name().map(|n| n.to_string_lossy().into_owned());
        (read_file(log)?, name)
    };
    Ok(wire::DenialsRequest {
        denials,
        log_name,
        generalize,
    })
}

/// Sends `body` (a [`wire`] request) and reads the answer as `T` (the
/// [`wire`] type the server answers with); a refusal's message is read
/// from its [`wire::ErrorBody`].
async fn call<T: DeserializeOwned>(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<&impl Serialize>,
    timeout: Duration,
) -> Result<T, u8> {
    let body = body
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| fail(EXIT_USAGE, format!("cannot write the request: {e}")))?;
    let resp: Response = client
        .send(method, path, body.as_ref(), &[], timeout)
        .await
        .map_err(|e| fail(EXIT_UNREACHABLE, e))?;
    read_answer(&resp, method, path)
}

/// An answer as `T`, or its refusal's message on stderr.
fn read_answer<T: DeserializeOwned>(resp: &Response, method: &str, path: &str) -> Result<T, u8> {
    if resp.status >= 400 {
        let msg = serde_json::from_slice::<wire::ErrorBody>(&resp.body).map_or_else(
            |_| format!("the gateway answered {}", resp.status),
            |e| e.error.message,
        );
        return Err(fail(EXIT_REFUSED, format!("{} ({})", msg, resp.status)));
    }
    serde_json::from_slice(&resp.body).map_err(|e| {
        fail(
            EXIT_REFUSED,
            format!("the gateway's answer to `{method} {path}` is not one this client reads: {e}"),
        )
    })
}

/// `call` without a body.
async fn get<T: DeserializeOwned>(client: &Client, path: &str, timeout: Duration) -> Result<T, u8> {
    call(client, "GET", path, None::<&()>, timeout).await
}

/// An answer as the API sent it: through a `Value`, so keys are sorted
/// as on the wire.
fn print_json(v: &impl Serialize) {
    let text = serde_json::to_value(v).and_then(|v| serde_json::to_string_pretty(&v));
    println!("{}", text.unwrap_or_default());
}

async fn client_command(command: Command) -> u8 {
    match client_inner(command).await {
        Ok(code) | Err(code) => code,
    }
}

async fn client_inner(command: Command) -> Result<u8, u8> {
    match command {
        Command::Propose {
            conn,
            name,
            file,
            credentials,
            from_denials,
            generalize,
        } => {
            let client = connect(&conn)?;
            let v: wire::Proposal = match (file, from_denials) {
                (_, Some(log)) => {
                    let body = denials_request(&log, generalize)?;
                    let path = format!("/v1/policies/{name}/proposals/from-denials");
                    call(&client, "POST", &path, Some(&body), TIMEOUT).await?
                }
                (Some(file), None) => {
                    let body = policy_request(&file, credentials.as_deref())?;
                    let path = format!("/v1/policies/{name}/proposals");
                    call(&client, "POST", &path, Some(&body), TIMEOUT).await?
                }
                (None, None) => return Err(fail(EXIT_USAGE, "give FILE or --from-denials LOG")),
            };
            print!("{}", crate::show::render(&v, ShowFormat::Human));
            Ok(
                if matches!(
                    v.state,
                    wire::ProposalState::Invalid | wire::ProposalState::Refused
                ) {
                    EXIT_REFUSED
                } else {
                    0
                },
            )
        }
        Command::Proposals { conn, name } => {
            let client = connect(&conn)?;
            let path = name.map_or_else(
                || "/v1/proposals".to_owned(),
                |n| format!("/v1/proposals?policy={n}"),
            );
            print_json(&get::<wire::ProposalList>(&client, &path, TIMEOUT).await?);
            Ok(0)
        }
        Command::Show { conn, id, format } => {
            let client = connect(&conn)?;
            let v: wire::Proposal = get(&client, &format!("/v1/proposals/{id}"), TIMEOUT).await?;
            print!("{}", crate::show::render(&v, format));
            Ok(0)
        }
        Command::Approve {
            conn,
            id,
            review_token,
        } => {
            let client = connect(&conn)?;
            let token = match review_token {
                Some(t) => t,
                None => {
                    let v: wire::Proposal =
                        get(&client, &format!("/v1/proposals/{id}"), TIMEOUT).await?;
                    v.review_token.unwrap_or_default()
                }
            };
            let v: wire::Proposal = call(
                &client,
                "POST",
                &format!("/v1/proposals/{id}/approve"),
                Some(&wire::ApproveRequest {
                    review_token: token,
                }),
                TIMEOUT,
            )
            .await?;
            println!(
                "proposal {id} approved: `{}` revision {}",
                v.policy,
                shown(v.revision)
            );
            Ok(0)
        }
        Command::Reject { conn, id, reason } => {
            let client = connect(&conn)?;
            let _: wire::Proposal = call(
                &client,
                "POST",
                &format!("/v1/proposals/{id}/reject"),
                Some(&wire::RejectRequest { reason }),
                TIMEOUT,
            )
            .await?;
            println!("proposal {id} rejected");
            Ok(0)
        }
        Command::Revisions { conn, name } => {
            let client = connect(&conn)?;
            let path = format!("/v1/policies/{name}/revisions");
            print_json(&get::<wire::RevisionList>(&client, &path, TIMEOUT).await?);
            Ok(0)
        }
        Command::Rollback { conn, name, rev } => {
            let client = connect(&conn)?;
            let v: wire::Proposal = call(
                &client,
                "POST",
                &format!("/v1/policies/{name}/rollback"),
                Some(&wire::RollbackRequest { revision: rev }),
                TIMEOUT,
            )
            .await?;
            print!("{}", crate::show::render(&v, ShowFormat::Human));
            Ok(0)
        }
        Command::Boundary { command } => boundary::run(command).await,
        Command::Sandbox {
            command:
                SandboxCommand::Create {
                    conn,
                    name,
                    policy,
                    ttl,
                    run,
                },
        } => {
            let client = connect(&conn)?;
            let body = wire::CreateSandboxRequest {
                id: name,
                policy,
                ttl_seconds: ttl,
                run: run.spec()?,
            };
            let v: serde_json::Value =
                call(&client, "POST", "/v1/sandboxes", Some(&body), TIMEOUT).await?;
            print_json(&v);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::Exec { conn, args },
        } => exec::run(&conn, args).await,
        Command::Sandbox {
            command: SandboxCommand::Execs { conn, id, limit },
        } => exec::list(&conn, &id, limit).await,
        Command::Sandbox {
            command: SandboxCommand::Transcript { conn, id, exec },
        } => exec::transcript(&conn, &id, &exec).await,
        Command::Sandbox {
            command: SandboxCommand::Stop { conn, id },
        } => lifecycle::act(&conn, &id, "stop").await,
        Command::Sandbox {
            command: SandboxCommand::Start { conn, id },
        } => lifecycle::act(&conn, &id, "start").await,
        Command::Sandbox {
            command: SandboxCommand::Show { conn, id },
        } => {
            let client = connect(&conn)?;
            let path = format!("/v1/sandboxes/{id}");
            print_json(&get::<wire::Sandbox>(&client, &path, TIMEOUT).await?);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::List { conn },
        } => {
            let client = connect(&conn)?;
            print_json(&get::<wire::SandboxList>(&client, "/v1/sandboxes", TIMEOUT).await?);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::Token { conn, id, ttl },
        } => {
            let client = connect(&conn)?;
            let body = wire::RenewTokenRequest { ttl_seconds: ttl };
            let path = format!("/v1/sandboxes/{id}/token");
            let v: wire::SandboxToken = call(&client, "POST", &path, Some(&body), TIMEOUT).await?;
            print_json(&v);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::Delete { conn, id },
        } => {
            let client = connect(&conn)?;
            let path = format!("/v1/sandboxes/{id}");
            let v: serde_json::Value = call(&client, "DELETE", &path, None::<&()>, TIMEOUT).await?;
            if v.get("deleted").is_some() {
                println!("sandbox `{id}` deleted; its tokens are revoked");
            } else {
                print_json(&v);
            }
            Ok(0)
        }
        Command::Token {
            command: TokenCommand::List { conn },
        } => {
            let client = connect(&conn)?;
            print_json(&get::<wire::TokenList>(&client, "/v1/tokens", TIMEOUT).await?);
            Ok(0)
        }
        Command::Token {
            command: TokenCommand::Revoke { conn, name },
        } => {
            let client = connect(&conn)?;
            let path = format!("/v1/tokens/{name}");
            let _: wire::RevokedToken =
                call(&client, "DELETE", &path, None::<&()>, TIMEOUT).await?;
            println!("token `{name}` revoked");
            Ok(0)
        }
        Command::Token {
            command:
                TokenCommand::Create {
                    conn,
                    name,
                    role,
                    ttl,
                },
        } => {
            let client = connect(&conn)?;
            let Some(role) = wire::Role::parse(&role) else {
                return Err(fail(
                    EXIT_USAGE,
                    format!("`{role}` is not a role (`admin`, `author`, `reader`)"),
                ));
            };
            let body = wire::CreateTokenRequest {
                name,
                role,
                ttl_seconds: ttl,
            };
            let v: wire::TokenCreated =
                call(&client, "POST", "/v1/tokens", Some(&body), TIMEOUT).await?;
            print_json(&v);
            Ok(0)
        }
        Command::Status {
            conn,
            sandbox,
            wait,
            timeout,
        } => {
            let client = connect(&conn)?;
            let path = match wait {
                Some(rev) => format!("/v1/sandboxes/{sandbox}?revision={rev}&wait={timeout}"),
                None => format!("/v1/sandboxes/{sandbox}"),
            };
            let v: wire::Sandbox = get(&client, &path, Duration::from_secs(timeout + 30)).await?;
            print_json(&v);
            match wait {
                Some(rev) if v.applied_revision != Some(rev) => {
                    eprintln!(
                        "openshell-gateway: sandbox `{sandbox}` has not applied revision {rev} within {timeout}s"
                    );
                    Ok(EXIT_REFUSED)
                }
                _ => Ok(0),
            }
        }
        Command::Audit {
            conn, verify: true, ..
        } => {
            let client = connect(&conn)?;
            let v: wire::AuditVerification = get(&client, "/v1/audit/verify", TIMEOUT).await?;
            print_json(&v);
            Ok(if v.ok { 0 } else { EXIT_REFUSED })
        }
        Command::Audit {
            conn,
            after,
            limit,
            all,
            ..
        } => {
            let client = connect(&conn)?;
            if all {
                audit_all(&client, after.unwrap_or(0), limit).await
            } else {
                let v: wire::AuditPage = get(&client, &audit_path(after, limit), TIMEOUT).await?;
                print_json(&v);
                Ok(0)
            }
        }
        Command::Init { .. }
        | Command::RotateKey { .. }
        | Command::Serve { .. }
        | Command::ReplicaDir { .. }
        | Command::Openapi => Ok(EXIT_USAGE),
    }
}

fn audit_path(after: Option<i64>, limit: Option<i64>) -> String {
    let mut q = Vec::new();
    if let Some(a) = after {
        q.push(format!("after={a}"));
    }
    if let Some(l) = limit {
        q.push(format!("limit={l}"));
    }
    if q.is_empty() {
        "/v1/audit".to_owned()
    } else {
        format!("/v1/audit?{}", q.join("&"))
    }
}

/// Every row from `after` on, printed as one document `{"rows": [...],
/// "next": null}` while the pages arrive, so that the log is never held
/// whole here either.
async fn audit_all(client: &Client, mut after: i64, limit: Option<i64>) -> Result<u8, u8> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let mut first = true;
    let broken = |e: std::io::Error| fail(EXIT_USAGE, format!("cannot write the output: {e}"));
    write!(out, "{{\n  \"rows\": [").map_err(broken)?;
    loop {
        let path = audit_path(Some(after), Some(limit.unwrap_or(1000)));
        let page: wire::AuditPage = get(client, &path, TIMEOUT).await?;
        for row in &page.rows {
            let sep = if first { "\n    " } else { ",\n    " };
            first = false;
            // Compact, keys sorted: each row as the API sent it.
            let row = serde_json::to_value(row).unwrap_or_default();
            write!(out, "{sep}{row}").map_err(broken)?;
        }
        match page.next {
            Some(next) if next > after => after = next,
            _ => break,
        }
    }
    writeln!(
        out,
        "{}],\n  \"next\": null\n}}",
        if first { "" } else { "\n  " }
    )
    .map_err(broken)?;
    Ok(0)
}

/// `Some(n)` as `n`, `None` as `null`: how the API writes it.
fn shown<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}
