//! The HTTPS server: TLS (rustls, ring), HTTP/1.1 (hyper), bounds on
//! what a client may hold (connections in all and per address, time to
//! send a head and a body, body size), bearer-token authentication, JSON
//! errors, the health and metrics endpoints, the access log, and a
//! graceful stop.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as _, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::connections::{Connections, Slot};
use crate::dir;
use crate::metrics::{Gauges, route_template};
use crate::store::{AuditEntry, Role, SqlStore, Store, TokenRow};
use crate::wire;

pub use crate::app::{ApprovalMode, Config, SandboxSettings, token_hash};

pub(crate) use crate::app::{ApiError, App, BODY_LIMIT, Caller, Reply, Req, ServeError, now};
use crate::app::{RefusalWindow, parse_query};

async fn authenticate(app: &App, req: &Request<Incoming>) -> Result<Option<Caller>, ApiError> {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let Some(token) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
        return Ok(None);
    };
    let hash = token_hash(token);
    let Some(row): Option<TokenRow> = app.store.token(&hash).await? else {
        return Ok(None);
    };
    if row.expires_at.is_some_and(|t| t <= now()) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "token_expired",
            format!("the token `{}` has expired", row.name),
        ));
    }
    Ok(Some(Caller {
        name: row.name,
        role: row.role,
        sandbox: row.sandbox,
        session: row.generation.map(|g| (g, hash)),
    }))
}

fn error_body(e: &ApiError) -> wire::ErrorBody {
    wire::ErrorBody {
        error: wire::ErrorDetail {
            status: e.status.as_u16(),
            code: e.code.to_owned(),
            message: e.message.clone(),
        },
    }
}

type Answer = Response<Full<Bytes>>;

fn respond(reply: Reply) -> Answer {
    let body = reply
        .body
        .map(|b| {
            let mut v = serde_json::to_vec_pretty(&b).unwrap_or_default();
            v.push(b'\n');
            Bytes::from(v)
        })
        .unwrap_or_default();
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = reply.status;
    let headers = resp.headers_mut();
    if reply.status != StatusCode::NOT_MODIFIED {
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
    }
    for (k, v) in reply.headers {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    }
    resp
}

/// Past the limit, a body is still read (and dropped) up to this size, so
/// that the client reads the `413` instead of a broken connection. A body
/// announced larger than this is not read at all: the `413` goes out at
/// once and the connection is closed.
const DRAIN_LIMIT: usize = 16 * BODY_LIMIT;

/// The longest path kept in an audit row or an access-log line.
const PATH_SHOWN: usize = 256;
/// The longest error message kept in an audit row.
const MESSAGE_SHOWN: usize = 512;

/// At most `max` bytes of `text`, cut at a character boundary, with `…`
/// when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text.get(..end).unwrap_or(""))
}

enum BodyError {
    TooLarge,
    TimedOut,
    Broken,
}

/// The body, within [`BODY_LIMIT`] and the body timeout.
async fn read_body(mut body: Incoming, timeout: Duration) -> Result<Bytes, BodyError> {
    let read = async {
        let mut kept = Vec::new();
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(BodyError::Broken);
            };
            if let Ok(data) = frame.into_data() {
                seen = seen.saturating_add(data.len());
                if seen > DRAIN_LIMIT {
                    return Err(BodyError::TooLarge);
                }
                if seen <= BODY_LIMIT {
                    kept.extend_from_slice(&data);
                }
            }
        }
        if seen > BODY_LIMIT {
            Err(BodyError::TooLarge)
        } else {
            Ok(Bytes::from(kept))
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the request body is larger than {BODY_LIMIT} bytes"),
    )
}

/// What one request did, for the access log and the metrics.
struct Done {
    status: StatusCode,
    actor: Option<String>,
}

/// One request, from bytes to an answer. Never panics into hyper: every
/// failure is a JSON error.
async fn handle(app: Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Answer {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let route = route_template(&path);
    let (mut resp, done) = answer(&app, req).await;
    if app.is_stopping() {
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    let took = started.elapsed();
    app.metrics
        .request(&method, route, done.status.as_u16(), took);
    if app.clients.access_log {
        let line = json!({
            "at": now(),
            "peer": peer.to_string(),
            "method": method.as_str(),
            "route": route,
            "path": clip(&path, PATH_SHOWN),
            "status": done.status.as_u16(),
            "ms": took.as_secs_f64() * 1000.0,
            "actor": done.actor,
        });
        eprintln!("{line}");
    }
    resp
}

async fn answer(app: &Arc<App>, req: Request<Incoming>) -> (Answer, Done) {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if method == hyper::Method::GET {
        match path.as_str() {
            "/healthz" => {
                let ok = wire::Health {
                    status: wire::HealthStatus::Ok,
                };
                return plain_json(StatusCode::OK, &ok);
            }
            "/readyz" => return ready(app).await,
            _ => {}
        }
    }
    let caller = match authenticate(app, &req).await {
        Ok(c) => c,
        Err(e) => return refuse(app, None, &method, &path, e, true).await,
    };
    let declared = req.body().size_hint().exact();
    let has_body = declared.is_none_or(|n| n > 0);
    // Without a token nothing is answered but a refusal: the body is not
    // read, so a client without a token cannot hold the connection by
    // sending it slowly.
    if caller.is_none() && has_body {
        let e = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is needed (`Authorization: Bearer <token>`)",
        );
        return refuse(app, None, &method, &path, e, true).await;
    }
    if declared.is_some_and(|n| n > DRAIN_LIMIT as u64) {
        return refuse(app, caller.as_ref(), &method, &path, too_large(), true).await;
    }
    if method == hyper::Method::GET && path == "/metrics" {
        return metrics(app, caller.as_ref()).await;
    }
    let query = parse_query(req.uri().query());
    let if_none_match = req
        .headers()
        .get(hyper::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_matches('"').to_owned());
    let body = match read_body(req.into_body(), app.clients.body_timeout).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return refuse(app, caller.as_ref(), &method, &path, too_large(), true).await;
        }
        Err(BodyError::TimedOut) => {
            let e = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body did not arrive within {} s",
                    app.clients.body_timeout.as_secs()
                ),
            );
            return refuse(app, caller.as_ref(), &method, &path, e, true).await;
        }
        Err(BodyError::Broken) => {
            let e = ApiError::bad_request(
                "the request body could not be read (the connection broke or its framing is invalid)",
            );
            return refuse(app, caller.as_ref(), &method, &path, e, true).await;
        }
    };
    let r = Req {
        method: method.clone(),
        path: path.clone(),
        query,
        if_none_match,
        body,
        caller: caller.clone(),
    };
    match crate::api::route(app, &r).await {
        Ok(reply) => {
            let status = reply.status;
            (
                respond(reply),
                Done {
                    status,
                    actor: caller.map(|c| c.name),
                },
            )
        }
        Err(e) => refuse(app, caller.as_ref(), &method, &path, e, false).await,
    }
}

fn plain_json<T: serde::Serialize>(status: StatusCode, body: &T) -> (Answer, Done) {
    (
        respond(Reply::json(status, body)),
        Done {
            status,
            actor: None,
        },
    )
}

/// `GET /readyz`: `200` when the database answers (the signing key and
/// the certificate were loaded at start, or the process would not be
/// serving), `503` otherwise. A load balancer sends traffic only to a
/// replica that can serve it.
async fn ready(app: &Arc<App>) -> (Answer, Done) {
    let db = tokio::time::timeout(Duration::from_secs(5), app.store.audit_head()).await;
    let (status, db) = match db {
        Ok(Ok(_)) => (StatusCode::OK, "ok".to_owned()),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the database did not answer within 5 s".to_owned(),
        ),
    };
    let stopping = app.is_stopping();
    let status = if stopping {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        status
    };
    let body = wire::Readiness {
        status: if status == StatusCode::OK {
            wire::ReadyStatus::Ready
        } else {
            wire::ReadyStatus::NotReady
        },
        database: db,
        signing_key: app.key.id().to_owned(),
        stopping,
    };
    plain_json(status, &body)
}

/// `GET /metrics`, for any person's token (a sandbox's may not read it).
async fn metrics(app: &Arc<App>, caller: Option<&Caller>) -> (Answer, Done) {
    let allowed = caller.is_some_and(|c| c.role != Role::Sandbox);
    if !allowed {
        let e = if caller.is_some() {
            ApiError::forbidden("a sandbox token may not read the metrics")
        } else {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is needed (`Authorization: Bearer <token>`)",
            )
        };
        return refuse(app, caller, &hyper::Method::GET, "/metrics", e, false).await;
    }
    let text = app.metrics.render(&Gauges {
        waiting: app.wakeups.waiting(),
        topics: app.wakeups.topics(),
        connections: app.connections.open(),
        proofs_running: app
            .limits
            .proof_slots
            .max(1)
            .saturating_sub(app.proving.available_permits())
            + 1usize.saturating_sub(app.proving_small.available_permits()),
    });
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    (
        resp,
        Done {
            status: StatusCode::OK,
            actor: caller.map(|c| c.name.clone()),
        },
    )
}

/// Answers with an error; requests refused for who asked or for a lost
/// race go to the audit log, bounded: the path and the message are cut
/// short, and refusals of requests without a valid token are written at
/// most `audited_refusals_per_minute` times a minute (the rest are
/// counted, and summed up in one row when the minute ends). `close` ends
/// the connection after the answer, for a body left unread.
async fn refuse(
    app: &App,
    caller: Option<&Caller>,
    method: &hyper::Method,
    path: &str,
    e: ApiError,
    close: bool,
) -> (Answer, Done) {
    if e.code == "store_unavailable" {
        app.metrics.store_errors.fetch_add(1, Ordering::Relaxed);
    }
    let audited = matches!(
        e.status,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::CONFLICT
    );
    if audited && admit_refusal(app, caller).await {
        app.audit(AuditEntry {
            at: now(),
            actor: caller.map_or_else(|| "anonymous".to_owned(), |c| c.name.clone()),
            action: "refused".into(),
            subject: format!("{method} {}", clip(path, PATH_SHOWN)),
            detail: json!({
                "status": e.status.as_u16(),
                "code": e.code,
                "message": clip(&e.message, MESSAGE_SHOWN),
            }),
        })
        .await;
    }
    let mut resp = respond(Reply::json(e.status, &error_body(&e)));
    if close {
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    (
        resp,
        Done {
            status: e.status,
            actor: caller.map(|c| c.name.clone()),
        },
    )
}

/// Whether this refusal is written to the audit log. A caller with a
/// valid token always is (it is accountable, and its rows name it); one
/// without is within the minute's budget.
async fn admit_refusal(app: &App, caller: Option<&Caller>) -> bool {
    if caller.is_some() {
        return true;
    }
    let minute = now().div_euclid(60) * 60;
    let (admit, summary) = {
        let mut w = app.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        let summary = if w.started != minute {
            let done = std::mem::replace(
                &mut *w,
                RefusalWindow {
                    started: minute,
                    audited: 0,
                    skipped: 0,
                },
            );
            (done.skipped > 0).then_some(done)
        } else {
            None
        };
        let admit = w.audited < app.clients.audited_refusals_per_minute;
        if admit {
            w.audited += 1;
        } else {
            w.skipped += 1;
            app.metrics
                .refusals_unaudited
                .fetch_add(1, Ordering::Relaxed);
        }
        (admit, summary)
    };
    if let Some(done) = summary {
        app.audit(AuditEntry {
            at: now(),
            actor: "anonymous".into(),
            action: "refused-unaudited".into(),
            subject: "requests without a valid token".into(),
            detail: json!({
                "count": done.skipped,
                "from": done.started,
                "to": done.started + 60,
                "why": "over the audit rate of refusals (--audited-refusals-per-minute)",
            }),
        })
        .await;
    }
    admit
}

/// The process's limit of open files (`/proc/self/limits`), when it can be
/// read: connections beyond it would fail `accept` for everyone.
fn open_files_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Room kept for the database pool, the `LISTEN` connection, files and
/// the listener itself.
const FILES_KEPT: usize = 128;

/// The connection limit in force: the configured one, within the open-files
/// limit.
fn connection_limit(configured: usize) -> usize {
    match open_files_limit() {
        Some(files) => configured.min(files.saturating_sub(FILES_KEPT).max(1)),
        None => configured,
    }
}

/// A running gateway.
pub struct Running {
    /// Where it listens, with a configured port 0 resolved.
    pub addr: SocketAddr,
    /// The state the requests share, for tests that look past the API.
    pub app: Arc<App>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting connections and drops the open ones at once.
    pub fn stop(self) {
        self.app.lifecycle.abort_all();
        self.task.abort();
    }

    /// The graceful stop of `SIGTERM`: no new connections; waiting
    /// long-polls answer now (their clients reconnect, to another replica);
    /// requests in flight finish within the grace period; then the rest
    /// are dropped. Returns how many connections were still open then.
    pub async fn shutdown(self) -> usize {
        self.app.stopping.send_replace(true);
        self.app.wakeups.wake_all();
        let deadline = tokio::time::Instant::now() + self.app.clients.shutdown_grace;
        let c = &self.app.connections;
        loop {
            let notified = c.changed();
            if c.open() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let left = c.open();
        self.app.lifecycle.abort_all();
        self.task.abort();
        left
    }
}

/// Opens the store, binds `config.listen`, and serves until the runtime
/// ends.
pub async fn start(config: Config) -> Result<Running, ServeError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.listen,
            source,
        })?;
    start_on(config, listener).await
}

/// As [`start`], on a listener bound already (in another network
/// namespace, say).
pub async fn start_on(config: Config, listener: TcpListener) -> Result<Running, ServeError> {
    let tls = dir::server_tls(&config.dir)?;
    let key = dir::signing_key(&config.dir)?;
    let store = SqlStore::open_with(&config.db, config.limits.db_pool_size).await?;
    store.migrate().await?;
    let admin = dir::read_text(&dir::admin_token_path(&config.dir))?;
    store
        .ensure_admin_token(TokenRow {
            hash: token_hash(&admin),
            name: "admin".into(),
            role: Role::Admin,
            sandbox: None,
            expires_at: None,
            generation: None,
        })
        .await?;
    let listen_url = store.listen_url();
    let store: Arc<dyn crate::store::Store> = Arc::new(store);
    let wakeups: Arc<crate::wake::Wakeups> = Arc::default();
    let lifecycle = crate::lifecycle::Lifecycle::new(
        Arc::clone(&store),
        config.sandboxes.clone(),
        Arc::clone(&wakeups),
    );
    let app = Arc::new(App {
        store,
        lifecycle: Arc::clone(&lifecycle),
        key,
        approval: config.approval,
        prove_timeout: config.prove_timeout,
        wakeups,
        metrics: crate::metrics::Metrics::default(),
        clients: config.clients.clone(),
        stopping: watch::channel(false).0,
        refusals: Mutex::default(),
        connections: Arc::default(),
        registry: prover::Registry::embedded(),
        revisions: std::sync::Mutex::default(),
        proving: Arc::new(tokio::sync::Semaphore::new(
            config.limits.proof_slots.max(1),
        )),
        proving_small: Arc::new(tokio::sync::Semaphore::new(1)),
        limits: config.limits.clone(),
    });
    if let Some(url) = listen_url {
        crate::notify::listen(Arc::clone(&app), url).await?;
    }
    lifecycle.resume();
    let addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: config.listen,
        source,
    })?;
    let acceptor = TlsAcceptor::from(tls);
    let max = connection_limit(config.clients.max_connections);
    let served = Arc::clone(&app);
    let task = tokio::spawn(async move {
        let mut stopping = served.stopping.subscribe();
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stopping.wait_for(|s| *s) => return,
            };
            let Ok((tcp, peer)) = accepted else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Over a limit the connection is closed at once: its file
            // descriptor is back before the next `accept`.
            let Some(slot) = Connections::take(
                &served.connections,
                peer.ip(),
                max,
                served.clients.max_connections_per_peer,
            ) else {
                served
                    .metrics
                    .connections_refused
                    .fetch_add(1, Ordering::Relaxed);
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let app = Arc::clone(&served);
            tokio::spawn(serve_connection(app, acceptor, tcp, peer, slot));
        }
    });
    Ok(Running { addr, app, task })
}

async fn serve_connection(
    app: Arc<App>,
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    slot: Slot,
) {
    let limits = app.clients.clone();
    let Ok(Ok(tls)) = tokio::time::timeout(limits.header_timeout, acceptor.accept(tcp)).await
    else {
        return;
    };
    let mut stopping = app.stopping.subscribe();
    let served = Arc::clone(&app);
    let service = hyper::service::service_fn(move |req| {
        let app = Arc::clone(&served);
        async move { Ok::<_, std::convert::Infallible>(handle(app, peer, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(limits.header_timeout)
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(
            hyper_util::rt::TokioIo::new(crate::http_errors::JsonErrors::new(
                tls,
                Arc::clone(&app),
            )),
            service,
        );
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = async { drop(stopping.wait_for(|s| *s).await) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    drop(slot);
}
