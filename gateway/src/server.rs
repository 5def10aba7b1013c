//! The HTTPS server: TLS (rustls, ring), HTTP/1.1 (hyper), a body-size
//! limit, bearer-token authentication, JSON errors, and the change
//! notifications that wake long-polls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::dir;
use crate::store::{AuditEntry, Role, SqlStore, Store, TokenRow};

use crate::app::parse_query;
pub use crate::app::{
    ApiError, App, ApprovalMode, BODY_LIMIT, Caller, Config, MAX_WAIT_SECS, Reply, Req, ServeError,
    now, token_hash,
};

async fn authenticate(app: &App, req: &Request<Incoming>) -> Result<Option<Caller>, ApiError> {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let Some(token) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
        return Ok(None);
    };
    let Some(row): Option<TokenRow> = app.store.token(&token_hash(token)).await? else {
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
    }))
}

fn error_body(e: &ApiError) -> serde_json::Value {
    json!({ "error": { "status": e.status.as_u16(), "code": e.code, "message": e.message } })
}

fn respond(reply: Reply) -> Response<Full<Bytes>> {
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
/// that the client reads the `413` instead of a broken connection.
const DRAIN_LIMIT: usize = 16 * BODY_LIMIT;

/// The body, or `Err` when it is larger than [`BODY_LIMIT`].
async fn read_body(mut body: Incoming) -> Result<Bytes, ()> {
    let mut kept = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return Err(()) };
        if let Ok(data) = frame.into_data() {
            seen = seen.saturating_add(data.len());
            if seen > DRAIN_LIMIT {
                return Err(());
            }
            if seen <= BODY_LIMIT {
                kept.extend_from_slice(&data);
            }
        }
    }
    if seen > BODY_LIMIT {
        Err(())
    } else {
        Ok(Bytes::from(kept))
    }
}

/// One request, from bytes to an answer. Never panics into hyper: every
/// failure is a JSON error.
async fn handle(app: Arc<App>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let caller = match authenticate(&app, &req).await {
        Ok(c) => c,
        Err(e) => return refuse(&app, None, &method, &path, e).await,
    };
    let query = parse_query(req.uri().query());
    let if_none_match = req
        .headers()
        .get(hyper::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_matches('"').to_owned());
    let body = read_body(req.into_body()).await;
    let Ok(body) = body else {
        let e = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than {BODY_LIMIT} bytes"),
        );
        return refuse(&app, caller.as_ref(), &method, &path, e).await;
    };
    let r = Req {
        method: method.clone(),
        path: path.clone(),
        query,
        if_none_match,
        body,
        caller: caller.clone(),
    };
    match crate::api::route(&app, &r).await {
        Ok(reply) => respond(reply),
        Err(e) => refuse(&app, caller.as_ref(), &method, &path, e).await,
    }
}

/// Answers with an error; requests refused for who asked or for a lost
/// race go to the audit log.
async fn refuse(
    app: &App,
    caller: Option<&Caller>,
    method: &hyper::Method,
    path: &str,
    e: ApiError,
) -> Response<Full<Bytes>> {
    let audited = matches!(
        e.status,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::CONFLICT
    );
    if audited {
        app.audit(AuditEntry {
            at: now(),
            actor: caller.map_or_else(|| "anonymous".to_owned(), |c| c.name.clone()),
            action: "refused".into(),
            subject: format!("{method} {path}"),
            detail: json!({ "status": e.status.as_u16(), "code": e.code, "message": e.message }),
        })
        .await;
    }
    respond(Reply::json(e.status, error_body(&e)))
}

/// A running gateway.
pub struct Running {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting connections.
    pub fn stop(self) {
        self.task.abort();
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
        .ensure_token(TokenRow {
            hash: token_hash(&admin),
            name: "admin".into(),
            role: Role::Admin,
            sandbox: None,
            expires_at: None,
        })
        .await?;
    let listen_url = store.listen_url();
    let (changes, _) = watch::channel(0u64);
    let app = Arc::new(App {
        store: Arc::new(store),
        key,
        approval: config.approval,
        prove_timeout: config.prove_timeout,
        changes,
        registry: prover::Registry::embedded(),
        revisions: std::sync::Mutex::default(),
        proving: Arc::new(tokio::sync::Semaphore::new(
            config.limits.proof_slots.max(1),
        )),
        proving_small: Arc::new(tokio::sync::Semaphore::new(1)),
        limits: config.limits,
    });
    if let Some(url) = listen_url {
        crate::notify::listen(Arc::clone(&app), url).await?;
    }
    let addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: config.listen,
        source,
    })?;
    let acceptor = TlsAcceptor::from(tls);
    let served = Arc::clone(&app);
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let app = Arc::clone(&served);
            tokio::spawn(async move {
                let Ok(Ok(tls)) =
                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let app = Arc::clone(&app);
                    async move { Ok::<_, std::convert::Infallible>(handle(app, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .header_read_timeout(Duration::from_secs(10))
                    .timer(hyper_util::rt::TokioTimer::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(Running { addr, app, task })
}
