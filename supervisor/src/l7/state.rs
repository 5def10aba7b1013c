//! A proxied connection's state: the decision it was made under (decided
//! again when the policy changed, [`ConnState::revalidate`]), the upstream
//! hop, and what the request path reads from it. Shared by the serving
//! loop and every request step, and depending on none of them.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::client::conn::http1::SendRequest;
use policy_bundle::eval::ConnectionDecision;

use super::body::UpstreamBody;
use super::{ProxiedConnection, Proxy, dst_ip};
use crate::decide::Decision;
use crate::policy::Active;

/// The connection-level decision requests are checked against.
#[derive(Debug, Clone)]
pub(super) struct Current {
    pub decision: ConnectionDecision,
    /// The name it was decided for (`None`: an address rule).
    pub host: Option<String>,
    pub rule: Option<String>,
    pub generation: u64,
    /// Set when the policy in force no longer allows the connection.
    pub revoked: Option<String>,
}

/// How the proxy reaches the destination for this connection. The proxy
/// re-originates TLS exactly when it terminated TLS from the workload:
/// the first byte the workload sent decides, not the port number. A
/// plain-HTTP request to port 443 goes upstream in plain HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UpstreamHop {
    /// TLS, the server verified.
    Tls,
    /// Plain TCP to this address.
    Plain(std::net::SocketAddr),
}

/// What every request on one connection shares.
pub(super) struct ConnState {
    pub proxy: Arc<Proxy>,
    pub meta: ProxiedConnection,
    /// The destination address, IPv4-mapped IPv6 as IPv4.
    pub ip: IpAddr,
    /// The TLS server name the client sent (normalized), if any.
    pub sni: Option<String>,
    pub tls: bool,
    pub current: Mutex<Current>,
    /// The upstream connection, made for the first forwarded request and
    /// kept alive for the next ones.
    pub upstream: Mutex<Option<SendRequest<UpstreamBody>>>,
}

impl ConnState {
    /// The connection as the broker decided it; over TLS, decided again
    /// for the SNI when that is another name the sandbox was given for the
    /// address (one address serving several names), so that the
    /// connection's host is the one its requests name.
    pub(super) fn new(
        proxy: Arc<Proxy>,
        meta: ProxiedConnection,
        sni: Option<String>,
        tls: bool,
    ) -> Self {
        let active = proxy.policy().current();
        let ip = dst_ip(&meta);
        let mut current = Current {
            decision: meta.decision.clone(),
            host: meta.host.clone(),
            rule: crate::decide::rule_of(&active.eval, &meta.decision),
            generation: active.generation,
            revoked: None,
        };
        if let Some(name) = sni
            .as_deref()
            .filter(|n| !meta.advisor && meta.host.as_deref() != Some(*n))
        {
            let d = proxy.decider.decide_as(
                &active,
                &meta.binary,
                ip,
                meta.original_dst.port(),
                Some(name),
            );
            if d.allowed() && !d.conn.l7.is_empty() {
                current.decision = d.conn;
                current.host = d.host;
                current.rule = d.rule;
            }
        }
        Self {
            ip,
            proxy,
            meta,
            sni,
            tls,
            current: Mutex::new(current),
            upstream: Mutex::new(None),
        }
    }

    /// Decides the connection again if `active` is newer than its
    /// decision. `Err(reason)` when it is no longer allowed (or no longer
    /// inspected): it must be closed.
    pub fn revalidate(&self, active: &Active) -> Result<Current, String> {
        let mut cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if cur.generation != active.generation && cur.revoked.is_none() {
            let d = self.proxy.decider.decide_as(
                active,
                &self.meta.binary,
                self.ip,
                self.meta.original_dst.port(),
                cur.host.as_deref(),
            );
            cur.generation = active.generation;
            if !d.allowed() {
                cur.revoked = Some(d.conn.reason.to_string());
            } else if d.advisor != self.meta.advisor {
                cur.revoked = Some(
                    "the reloaded policy decides this destination otherwise; reconnect".into(),
                );
            } else if d.conn.l7.is_empty() && !d.advisor {
                cur.revoked = Some(
                    "the reloaded policy relays this destination without inspection; reconnect"
                        .into(),
                );
            } else {
                cur.decision = d.conn;
                cur.rule = d.rule;
            }
        }
        match &cur.revoked {
            Some(why) => Err(why.clone()),
            None => Ok(cur.clone()),
        }
    }

    /// The decision for a request naming `host` (another name the
    /// sandbox was given for this address), if the policy allows it.
    pub fn decide_for(&self, active: &Active, host: &str) -> Option<Decision> {
        let d = self.proxy.decider.decide_as(
            active,
            &self.meta.binary,
            self.ip,
            self.meta.original_dst.port(),
            Some(host),
        );
        (d.allowed() && !d.conn.l7.is_empty()).then_some(d)
    }

    /// The hop requests on this connection take upstream.
    pub fn upstream_hop(&self) -> UpstreamHop {
        if self.tls {
            UpstreamHop::Tls
        } else {
            UpstreamHop::Plain(std::net::SocketAddr::new(
                self.ip,
                self.meta.original_dst.port(),
            ))
        }
    }

    /// The upstream connection, if one is open and usable.
    pub fn take_upstream(&self) -> Option<SendRequest<UpstreamBody>> {
        self.upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|s| !s.is_closed())
    }

    pub fn put_upstream(&self, sender: SendRequest<UpstreamBody>) {
        *self.upstream.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
    }
}
