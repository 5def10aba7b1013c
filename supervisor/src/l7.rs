//! Where an allowed, inspected (HTTP) connection goes: the seam for the L7
//! proxy.
//!
//! For a connection whose decision names L7 endpoints, the broker does not
//! connect to the destination. It binds its socket to a loopback address,
//! tells the proxy what is coming from that address ([`ProxyHandoff::
//! expect`]: original destination, host, binary, endpoints), then connects
//! to the proxy's listener and installs that socket in the workload. The
//! proxy, on `accept`, looks the peer address up in its
//! [`ConnectionRegistry`] and knows exactly what it is relaying. The
//! listener lives in the supervisor's namespace, where the workload cannot
//! reach it except through the broker.
//!
//! Until the proxy exists, `Broker::proxy` is `None` and such a
//! connection is relayed as L4 to its destination, with a log line saying
//! so (`note`).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Mutex;

use policy_lang::eval::ConnectionDecision;

use crate::broker::decide::Binary;

/// What the proxy needs to know about one brokered connection.
#[derive(Debug, Clone)]
pub struct ProxiedConnection {
    /// Where the workload asked to connect (as it wrote it).
    pub original_dst: SocketAddr,
    /// The name the connection was attributed to (DNS stub or `--resolve`).
    pub host: Option<String>,
    pub binary: Binary,
    /// The calling process and thread.
    pub pid: u32,
    pub tid: u32,
    /// Routes and L7 endpoint indices (`decision.l7`) into the bundle; the
    /// proxy passes it to `Evaluator::decide_request`.
    pub decision: ConnectionDecision,
}

/// The proxy as the broker sees it.
pub trait ProxyHandoff: Send + Sync + fmt::Debug {
    /// The proxy's listener, in the supervisor's network namespace.
    fn listener(&self) -> SocketAddr;
    /// A connection from `from` (the broker's bound local address) is about
    /// to arrive.
    fn expect(&self, from: SocketAddr, conn: ProxiedConnection);
    /// The broker gave up on the connection from `from`.
    fn cancel(&self, from: SocketAddr);
}

/// Pending connections by the broker's local address: what a proxy's
/// accept loop consults.
#[derive(Debug, Default)]
pub struct ConnectionRegistry {
    pending: Mutex<HashMap<SocketAddr, ProxiedConnection>>,
}

impl ConnectionRegistry {
    pub fn insert(&self, from: SocketAddr, conn: ProxiedConnection) {
        if let Ok(mut map) = self.pending.lock() {
            map.insert(from, conn);
        }
    }

    /// The metadata for an accepted connection whose peer is `from`; a
    /// connection nobody announced gets `None` and must be closed.
    pub fn take(&self, from: SocketAddr) -> Option<ProxiedConnection> {
        self.pending.lock().ok()?.remove(&from)
    }

    pub fn remove(&self, from: SocketAddr) {
        if let Ok(mut map) = self.pending.lock() {
            map.remove(&from);
        }
    }
}

/// The note logged for an inspected route while there is no proxy.
pub const RELAYED_AS_L4: &str =
    "HTTP route relayed as L4 without inspection: the L7 proxy is not available yet";
