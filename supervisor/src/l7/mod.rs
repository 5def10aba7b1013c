//! The L7 proxy: every connection the broker routes to an inspected HTTP
//! endpoint ends here, and every request on it is decided before anything
//! reaches the destination.
//!
//! ```text
//!  relay ── serve(pipe, ProxiedConnection) ──▶ the proxy's thread
//!    │ the relay stream's bytes pumped through the pipe
//!    ▼
//!  first byte: 0x16 (TLS ClientHello)? ─┬─ yes: leaf for the SNI (ca), TLS
//!                                       └─ no:  plain HTTP
//!           hyper HTTP/1.1, keep-alive ─▶ request::handle, per request:
//!             CONNECT / h2c refused · Host vs SNI vs destination ·
//!             WebSocket upgrade: websocket::upgrade (GET rules, no
//!             extension), then websocket::relay judges every client message ·
//!             Evaluator::decide_request (canonical path, deny wins, audit),
//!             or for JSON-RPC / MCP: body read up to its limit (413), then
//!             Evaluator::decide_body, the bytes judged forwarded ·
//!             placeholders (credential_not_bound; in any body, scanned as
//!             it streams, when the sandbox has credentials) · override
//!             headers dropped ·
//!             injection (TLS hops only) ·
//!             forward the canonical target ─▶ upstream (TLS verified, or plain)
//!             response: hop-by-hop headers dropped, canonical reason phrase;
//!             after an injection every form of the secret scrubbed, a coded
//!             body refused
//! ```
//!
//! **The seam.** For a connection whose decision names L7 endpoints, the
//! relay does not connect to the destination: it hands the proxy one end
//! of an in-memory pipe together with what it decided
//! ([`ProxyHandoff::serve`]: original destination, host, binary,
//! endpoints), and pumps the relay stream through the other end. The
//! proxy has no listening socket: nothing reaches it but a connection the
//! relay allowed, and each arrives with its own decision.
//!
//! Modules: [`ca`] (the sandbox CA and leaf cache), [`trust`] (the
//! workload's trust file, the upstream roots), `conn` (one client
//! connection), `request` (the checks), `body` (bodies read to be
//! judged), `placeholder` (streamed bodies scanned for the placeholder
//! marker), `forward` (upstream and
//! responses), `respond` (what the proxy itself answers), `forms` (the
//! shapes an echoed secret takes), `scrub` (secrets out of responses),
//! `overrides` (headers that would make a server act on another request),
//! `websocket` (the upgrade, frames, and the relay that judges each client
//! message), `advisor` (the endpoint `policy.local`, answered here and
//! never forwarded). `docs/proxy.md` is the operator's view.

pub mod ca;
pub mod trust;

mod advisor;
mod body;
mod conn;
mod forms;
mod forward;
mod guarded;
mod overrides;
mod placeholder;
mod request;
mod respond;
mod rewrite;
mod scrub;
mod setup;
mod state;
mod websocket;

pub use setup::SetupError;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use policy_bundle::matcher::canonical_ip;
use rustls::ClientConfig;
use tokio::sync::oneshot;

use crate::decide::Decider;
use crate::denylog::{DenyLog, NetEvent};
use crate::handoff::{ProxiedConnection, ProxyHandoff};
use crate::policy::Policy;

/// The crypto provider of every TLS configuration here: ring, explicitly,
/// so no process-wide default is ever consulted.
#[must_use]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What the proxy is built from, prepared before the workload is forked
/// so that a bad `--upstream-ca` or a machine without roots stops the
/// launch before anything runs.
#[derive(Debug)]
pub struct Prepared {
    pub ca: ca::SandboxCa,
    upstream_ca: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl Prepared {
    /// A new sandbox CA and the upstream trust.
    pub fn new(upstream_ca: Option<&std::path::Path>) -> Result<Self, SetupError> {
        let ca = ca::SandboxCa::new(provider())?;
        let upstream_ca = match upstream_ca {
            Some(path) => trust::read_upstream_ca(path)?,
            None => Vec::new(),
        };
        Ok(Self { ca, upstream_ca })
    }
}

/// A connection being served, as a reload sees it.
struct Live {
    state: Arc<state::ConnState>,
    close: Option<oneshot::Sender<()>>,
}

/// The running proxy.
pub struct Proxy {
    /// Where connections are served: the proxy's own thread.
    runtime: tokio::runtime::Handle,
    /// This proxy, for the connections it serves.
    me: Weak<Self>,
    ca: ca::SandboxCa,
    /// Set by the proxy's thread before it accepts anything.
    client: OnceLock<Arc<ClientConfig>>,
    decider: Arc<Decider>,
    log: Arc<DenyLog>,
    live: Mutex<HashMap<u64, Live>>,
    next_id: AtomicU64,
    /// The advisor endpoint's gateway and rate limit.
    advisor: advisor::Desk,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy").finish_non_exhaustive()
    }
}

impl Proxy {
    /// Starts the proxy's thread, with a single-threaded runtime: every
    /// task of a connection (client side, upstream side) runs there, so a
    /// request never crosses threads.
    pub fn start(
        prepared: Prepared,
        decider: Arc<Decider>,
        log: Arc<DenyLog>,
    ) -> Result<Arc<Self>, SetupError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(SetupError::Runtime)?;
        let proxy = Arc::new_cyclic(|me| Self {
            runtime: runtime.handle().clone(),
            me: me.clone(),
            ca: prepared.ca,
            client: OnceLock::new(),
            decider,
            log,
            live: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            advisor: advisor::Desk::default(),
        });
        let serving = Arc::clone(&proxy);
        let extra = prepared.upstream_ca;
        std::thread::Builder::new()
            .name("l7-proxy".into())
            .spawn(move || {
                match trust::client_config(provider(), &extra) {
                    Ok(config) => {
                        let _ = serving.client.set(config);
                    }
                    Err(e) => crate::notes::note(&format!(
                        "{e}: every inspected HTTPS request will fail with 502"
                    )),
                }
                drop(serving);
                runtime.block_on(std::future::pending::<()>());
            })
            .map_err(SetupError::Runtime)?;
        Ok(proxy)
    }

    /// The advisor endpoint sends proposals to this gateway, for
    /// `sandbox`, with the session's token; without it (a local `run`)
    /// it answers that proposals need a gateway.
    pub fn forward_proposals(&self, session: Arc<crate::session::Session>, sandbox: &str) {
        self.advisor.forward_to(session, sandbox);
    }

    fn policy(&self) -> &Arc<Policy> {
        self.decider.policy()
    }

    fn register(&self, state: Arc<state::ConnState>) -> (u64, oneshot::Receiver<()>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Live {
                    state,
                    close: Some(tx),
                },
            );
        (id, rx)
    }

    fn unregister(&self, id: u64) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// After a reload: decides every open connection again and closes
    /// those the policy in force no longer allows. Returns how many were
    /// closed.
    pub fn revalidate(&self) -> usize {
        let active = self.policy().current();
        let mut closed = 0;
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        for entry in live.values_mut() {
            let Err(reason) = entry.state.revalidate(&active) else {
                continue;
            };
            if let Some(close) = entry.close.take() {
                let _ = close.send(());
                closed += 1;
                let st = &entry.state;
                self.log.network(&NetEvent {
                    denied: true,
                    tid: st.meta.tid,
                    pid: st.meta.pid,
                    binary: Some(&st.meta.binary.path),
                    syscall: "connect",
                    protocol: "tcp",
                    host: st.meta.host.as_deref(),
                    ip: Some(st.ip),
                    port: Some(st.meta.original_dst.port()),
                    reason: &reason,
                    note: Some("an open proxied connection was closed: the reloaded policy does not allow it"),
                    ..NetEvent::default()
                });
            }
        }
        closed
    }
}

impl ProxyHandoff for Proxy {
    fn serve(&self, io: tokio::io::DuplexStream, conn: ProxiedConnection) {
        if let Some(me) = self.me.upgrade() {
            self.runtime.spawn(conn::serve(me, io, conn));
        }
    }
}

/// The destination address as decisions see it.
fn dst_ip(meta: &ProxiedConnection) -> IpAddr {
    canonical_ip(meta.original_dst.ip())
}
