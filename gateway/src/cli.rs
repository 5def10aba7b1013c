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
    /// The gateway, `https://HOST:PORT`.
    #[arg(long, env = "OPENSHELL_GATEWAY", value_name = "URL")]
    pub gateway: String,
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
    /// The audit log; `--verify` checks its hash chain.
    Audit {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        verify: bool,
    },
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
        } => serve(dir, listen, db, approval, prove_timeout_ms, limits.limits()).await,
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

async fn serve(
    dir: PathBuf,
    listen: SocketAddr,
    db: Option<String>,
    approval: ApprovalMode,
    prove_timeout_ms: u64,
    limits: Limits,
) -> u8 {
    let db = db.unwrap_or_else(|| format!("sqlite:{}", dir.join("gateway.db").display()));
    let config = Config {
        dir,
        listen,
        db,
        approval,
        prove_timeout: Duration::from_millis(prove_timeout_ms),
        limits,
    };
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
    running.stop();
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
    Client::new(&conn.gateway, &ca, &token).map_err(|e| fail(EXIT_USAGE, e))
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
        Command::Audit { conn, verify } => {
            let client = connect(&conn)?;
            let path = if verify {
                "/v1/audit/verify"
            } else {
                "/v1/audit"
            };
            let v = call(&client, "GET", path, None, TIMEOUT).await?;
            print_json(&v);
            Ok(if verify && at(&v, "/ok").as_bool() != Some(true) {
                EXIT_REFUSED
            } else {
                0
            })
        }
        Command::Init { .. }
        | Command::RotateKey { .. }
        | Command::Serve { .. }
        | Command::ReplicaDir { .. } => Ok(EXIT_USAGE),
    }
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
