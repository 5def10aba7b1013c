//! The command line: `init`, `rotate-key`, `serve`, and the client
//! commands that talk to a running gateway.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use bundle_trust::client::{Client, Response};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::app::Limits;
use crate::server::{self, ApprovalMode, Config};

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_UNREACHABLE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "openshell-gateway",
    version,
    about = "The policy control plane: propose, prove, approve, sign and deliver bundles"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where the gateway is and who is asking.
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
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
    pub gateway: Vec<String>,
    /// The gateway's CA certificate (`D/ca.pem`).
    #[arg(long, env = "OPENSHELL_GATEWAY_CA", value_name = "FILE")]
    pub ca: PathBuf,
    /// A file holding the bearer token.
    #[arg(long, env = "OPENSHELL_GATEWAY_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowFormat {
    Human,
    Json,
    Markdown,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    /// Propose FILE as the next revision of policy NAME.
    Propose {
        #[command(flatten)]
        conn: Conn,
        name: String,
        file: PathBuf,
        /// An OpenShell credentials file.
        #[arg(long, value_name = "F")]
        credentials: Option<PathBuf>,
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
pub struct ClientArgs {
    /// Seconds a client has for a TLS handshake and for each request's
    /// head.
    #[arg(long, default_value_t = 10, value_name = "S")]
    pub header_timeout: u64,
    /// Seconds a client has to send a request's body.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub body_timeout: u64,
    /// Connections open at once (lowered to fit the open-files limit).
    #[arg(long, default_value_t = 8192, value_name = "N")]
    pub max_connections: usize,
    /// Connections open at once from one address (behind a proxy or NAT
    /// every supervisor has the same one: raise it there).
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections_per_peer: usize,
    /// Refusals of requests without a valid token written to the audit
    /// log per minute; the rest are counted and summed up in one row.
    #[arg(long, default_value_t = 60, value_name = "N")]
    pub audited_refusals_per_minute: u32,
    /// Seconds `SIGTERM` waits for requests in flight.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub shutdown_grace: u64,
    /// No access log (one JSON line per request on standard error).
    #[arg(long)]
    pub no_access_log: bool,
}

impl ClientArgs {
    #[must_use]
    pub fn limits(&self) -> crate::app::ClientLimits {
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
pub struct LimitArgs {
    /// Bytes of a proposal's source, fragments and credentials together
    /// (at most 1 MiB, the request body limit).
    #[arg(long, default_value_t = Limits::default().max_source_bytes, value_name = "N")]
    pub max_source_bytes: usize,
    /// Rules of a compiled candidate (routes, L7 rules, filesystem paths).
    #[arg(long, default_value_t = Limits::default().max_rules, value_name = "N")]
    pub max_rules: usize,
    /// Network endpoints (routes) of a compiled candidate.
    #[arg(long, default_value_t = Limits::default().max_endpoints, value_name = "N")]
    pub max_endpoints: usize,
    /// Bytes of a compiled candidate's bundle.
    #[arg(long, default_value_t = Limits::default().max_bundle_bytes, value_name = "N")]
    pub max_bundle_bytes: usize,
    /// Proofs at once (default: one per CPU); one more slot is kept for
    /// small proofs.
    #[arg(long, value_name = "N")]
    pub proof_slots: Option<usize>,
    /// A proof whose two bundles together are at most N bytes may take the
    /// slot kept for small proofs.
    #[arg(long, default_value_t = Limits::default().small_proof_bytes, value_name = "N")]
    pub small_proof_bytes: usize,
    /// Bytes of revisions kept in memory for delivery.
    #[arg(long, default_value_t = Limits::default().revision_cache_bytes, value_name = "N")]
    pub revision_cache_bytes: usize,
    /// Database connections of this process (default 4 for SQLite, 16 for
    /// PostgreSQL); replicas share the server's `max_connections`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub db_pool_size: Option<u32>,
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
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum SandboxCommand {
    /// Register a sandbox that runs policy P; prints its token once.
    Create {
        #[command(flatten)]
        conn: Conn,
        name: String,
        #[arg(long, value_name = "P")]
        policy: String,
        /// The sandbox token expires after S seconds.
        #[arg(long, value_name = "S")]
        ttl: Option<u64>,
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
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
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
            limits,
            clients,
        } => {
            let db = db.unwrap_or_else(|| format!("sqlite:{}", dir.join("gateway.db").display()));
            serve(Config {
                dir,
                listen,
                db,
                approval,
                prove_timeout: Duration::from_millis(prove_timeout_ms),
                limits: limits.limits(),
                clients: clients.limits(),
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

async fn call(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Value, u8> {
    let resp: Response = client
        .send(method, path, body, &[], timeout)
        .await
        .map_err(|e| fail(EXIT_UNREACHABLE, e))?;
    let json = resp.json();
    if resp.status >= 400 {
        let msg = json
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("the gateway answered {}", resp.status),
                str::to_owned,
            );
        return Err(fail(EXIT_REFUSED, format!("{} ({})", msg, resp.status)));
    }
    Ok(json)
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
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
        } => {
            let client = connect(&conn)?;
            let format = if policy_lang::load::is_yaml(&file) {
                "yaml"
            } else {
                "policy"
            };
            let source = read_file(&file)?;
            // Included fragments travel with the policy: the gateway reads
            // none from its own disk.
            let files = if format == "policy" {
                policy_lang::load::include_closure(&file).map_err(|e| fail(EXIT_USAGE, e))?
            } else {
                std::collections::BTreeMap::new()
            };
            let mut body = json!({ "source": source, "format": format });
            if !files.is_empty()
                && let Some(obj) = body.as_object_mut()
            {
                obj.insert("files".into(), json!(files));
            }
            if let Some(c) = credentials
                && let Some(obj) = body.as_object_mut()
            {
                obj.insert("credentials".into(), read_file(&c)?.into());
            }
            let v = call(
                &client,
                "POST",
                &format!("/v1/policies/{name}/proposals"),
                Some(&body),
                TIMEOUT,
            )
            .await?;
            print!("{}", render(&v, ShowFormat::Human));
            Ok(if at(&v, "/state") == "invalid" {
                EXIT_REFUSED
            } else {
                0
            })
        }
        Command::Proposals { conn, name } => {
            let client = connect(&conn)?;
            let path = name.map_or_else(
                || "/v1/proposals".to_owned(),
                |n| format!("/v1/proposals?policy={n}"),
            );
            print_json(&call(&client, "GET", &path, None, TIMEOUT).await?);
            Ok(0)
        }
        Command::Show { conn, id, format } => {
            let client = connect(&conn)?;
            let v = call(
                &client,
                "GET",
                &format!("/v1/proposals/{id}"),
                None,
                TIMEOUT,
            )
            .await?;
            print!("{}", render(&v, format));
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
                    let v = call(
                        &client,
                        "GET",
                        &format!("/v1/proposals/{id}"),
                        None,
                        TIMEOUT,
                    )
                    .await?;
                    at(&v, "/review_token")
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                }
            };
            let v = call(
                &client,
                "POST",
                &format!("/v1/proposals/{id}/approve"),
                Some(&json!({ "review_token": token })),
                TIMEOUT,
            )
            .await?;
            println!(
                "proposal {id} approved: `{}` revision {}",
                at(&v, "/policy").as_str().unwrap_or(""),
                at(&v, "/revision")
            );
            Ok(0)
        }
        Command::Reject { conn, id, reason } => {
            let client = connect(&conn)?;
            call(
                &client,
                "POST",
                &format!("/v1/proposals/{id}/reject"),
                Some(&json!({ "reason": reason })),
                TIMEOUT,
            )
            .await?;
            println!("proposal {id} rejected");
            Ok(0)
        }
        Command::Revisions { conn, name } => {
            let client = connect(&conn)?;
            print_json(
                &call(
                    &client,
                    "GET",
                    &format!("/v1/policies/{name}/revisions"),
                    None,
                    TIMEOUT,
                )
                .await?,
            );
            Ok(0)
        }
        Command::Rollback { conn, name, rev } => {
            let client = connect(&conn)?;
            let v = call(
                &client,
                "POST",
                &format!("/v1/policies/{name}/rollback"),
                Some(&json!({ "revision": rev })),
                TIMEOUT,
            )
            .await?;
            print!("{}", render(&v, ShowFormat::Human));
            Ok(0)
        }
        Command::Sandbox {
            command:
                SandboxCommand::Create {
                    conn,
                    name,
                    policy,
                    ttl,
                },
        } => {
            let client = connect(&conn)?;
            let body = with_ttl(json!({ "id": name, "policy": policy }), ttl);
            print_json(&call(&client, "POST", "/v1/sandboxes", Some(&body), TIMEOUT).await?);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::List { conn },
        } => {
            let client = connect(&conn)?;
            print_json(&call(&client, "GET", "/v1/sandboxes", None, TIMEOUT).await?);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::Token { conn, id, ttl },
        } => {
            let client = connect(&conn)?;
            let body = with_ttl(json!({}), ttl);
            let path = format!("/v1/sandboxes/{id}/token");
            print_json(&call(&client, "POST", &path, Some(&body), TIMEOUT).await?);
            Ok(0)
        }
        Command::Sandbox {
            command: SandboxCommand::Delete { conn, id },
        } => {
            let client = connect(&conn)?;
            let path = format!("/v1/sandboxes/{id}");
            call(&client, "DELETE", &path, None, TIMEOUT).await?;
            println!("sandbox `{id}` deleted; its tokens are revoked");
            Ok(0)
        }
        Command::Token {
            command: TokenCommand::List { conn },
        } => {
            let client = connect(&conn)?;
            print_json(&call(&client, "GET", "/v1/tokens", None, TIMEOUT).await?);
            Ok(0)
        }
        Command::Token {
            command: TokenCommand::Revoke { conn, name },
        } => {
            let client = connect(&conn)?;
            let path = format!("/v1/tokens/{name}");
            call(&client, "DELETE", &path, None, TIMEOUT).await?;
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
            let body = with_ttl(json!({ "name": name, "role": role }), ttl);
            print_json(&call(&client, "POST", "/v1/tokens", Some(&body), TIMEOUT).await?);
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
            let v = call(
                &client,
                "GET",
                &path,
                None,
                Duration::from_secs(timeout + 30),
            )
            .await?;
            print_json(&v);
            match wait {
                Some(rev) if at(&v, "/applied_revision").as_i64() != Some(rev) => {
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
            let v = call(&client, "GET", "/v1/audit/verify", None, TIMEOUT).await?;
            print_json(&v);
            Ok(if at(&v, "/ok").as_bool() == Some(true) {
                0
            } else {
                EXIT_REFUSED
            })
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
                let v = call(&client, "GET", &audit_path(after, limit), None, TIMEOUT).await?;
                print_json(&v);
                Ok(0)
            }
        }
        Command::Init { .. }
        | Command::RotateKey { .. }
        | Command::Serve { .. }
        | Command::ReplicaDir { .. } => Ok(EXIT_USAGE),
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
        let page = call(
            client,
            "GET",
            &audit_path(Some(after), Some(limit.unwrap_or(1000))),
            None,
            TIMEOUT,
        )
        .await?;
        for row in at(&page, "/rows").as_array().into_iter().flatten() {
            let sep = if first { "\n    " } else { ",\n    " };
            first = false;
            write!(out, "{sep}{row}").map_err(broken)?;
        }
        match at(&page, "/next").as_i64() {
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

/// The value at a JSON pointer, `null` when absent.
fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    v.pointer(pointer).unwrap_or(&NULL)
}

/// A proposal for people (`human`), for a pull-request comment
/// (`markdown`), or as the API returns it (`json`).
#[must_use]
pub fn render(p: &Value, format: ShowFormat) -> String {
    if format == ShowFormat::Json {
        return format!("{}\n", serde_json::to_string_pretty(p).unwrap_or_default());
    }
    let md = format == ShowFormat::Markdown;
    let s = |k: &str| p[k].as_str().unwrap_or("").to_owned();
    let verdict = at(p, "/verdict")
        .as_str()
        .unwrap_or(match at(p, "/base_revision") {
            Value::Null => "first revision (a person approves)",
            _ => "none",
        });
    let mut out = if md {
        format!(
            "### Proposal {} for `{}`: {} — {}\n\n",
            at(p, "/id"),
            s("policy"),
            s("state"),
            verdict
        )
    } else {
        format!(
            "proposal {} for `{}`: {} ({verdict})\n",
            at(p, "/id"),
            s("policy"),
            s("state")
        )
    };
    let line = |out: &mut String, text: String| {
        out.push_str(if md { "- " } else { "  " });
        out.push_str(&text);
        out.push('\n');
    };
    line(
        &mut out,
        format!(
            "proposed by `{}`, base revision {}",
            s("proposer"),
            at(p, "/base_revision")
        ),
    );
    if let Some(d) = at(p, "/digest").as_str() {
        line(&mut out, format!("candidate digest `{d}`"));
    }
    for f in at(p, "/proof/findings").as_array().into_iter().flatten() {
        let w = at(f, "/witness");
        line(
            &mut out,
            format!(
                "{} `{}` {}: {} (witness: `{}` → {}:{}{})",
                if at(f, "/suppressed").as_bool() == Some(true) {
                    "accepted"
                } else {
                    "✗"
                },
                at(f, "/category").as_str().unwrap_or(""),
                at(f, "/code").as_str().unwrap_or(""),
                at(f, "/message").as_str().unwrap_or(""),
                at(w, "/binary").as_str().unwrap_or(""),
                at(w, "/host").as_str().unwrap_or(""),
                at(w, "/port"),
                at(w, "/path").as_str().unwrap_or(""),
            ),
        );
    }
    if let Some(why) = at(p, "/proof/inconclusive").as_str() {
        line(&mut out, format!("inconclusive: {why}"));
    }
    for file in at(p, "/diagnostics/files").as_array().into_iter().flatten() {
        for d in file["diagnostics"].as_array().into_iter().flatten() {
            line(
                &mut out,
                format!(
                    "{} {} {}:{}:{}: {}",
                    at(d, "/severity").as_str().unwrap_or(""),
                    at(d, "/code").as_str().unwrap_or(""),
                    at(d, "/file").as_str().unwrap_or(""),
                    at(d, "/line"),
                    at(d, "/column"),
                    at(d, "/message").as_str().unwrap_or("")
                ),
            );
        }
    }
    if let Some(t) = at(p, "/review_token")
        .as_str()
        .filter(|_| s("state") == "pending")
    {
        line(
            &mut out,
            format!(
                "review token `{t}` (approve with `approve {} --review-token {t}`)",
                at(p, "/id")
            ),
        );
    }
    if let Some(rev) = at(p, "/revision").as_i64() {
        line(
            &mut out,
            format!(
                "approved as revision {rev} by `{}` ({})",
                s("decided_by"),
                s("decision")
            ),
        );
    }
    if s("state") == "rejected" {
        line(
            &mut out,
            format!("rejected by `{}`: {}", s("decided_by"), s("reason")),
        );
    }
    out
}

/// A creation request, with the token's lifetime when one was given.
fn with_ttl(mut body: serde_json::Value, ttl: Option<u64>) -> serde_json::Value {
    if let (Some(t), Some(obj)) = (ttl, body.as_object_mut()) {
        obj.insert("ttl_seconds".into(), t.into());
    }
    body
}
