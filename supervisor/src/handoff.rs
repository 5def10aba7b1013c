//! What the broker hands the L7 proxy, and the few facts both sides share:
//! the broker connects and decides, the proxy inspects, and neither needs
//! the other's module to do it.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use policy_bundle::eval::ConnectionDecision;

use crate::decide::Binary;

/// How long the broker waits for an upstream connection to be established.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The note logged for an inspected route while there is no proxy.
pub const RELAYED_AS_L4: &str =
    "HTTP route relayed as L4 without inspection: the L7 proxy is not available yet";

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
    /// A connection to the advisor endpoint (`policy.local`): the proxy
    /// answers its requests itself and forwards none.
    pub advisor: bool,
}

/// The proxy as the relay sees it.
pub trait ProxyHandoff: Send + Sync + fmt::Debug {
    /// Serves `conn`, an allowed connection to an inspected route, whose
    /// bytes from and to the workload cross `io`. The proxy has no
    /// listener: this is the only way a connection reaches it.
    fn serve(&self, io: tokio::io::DuplexStream, conn: ProxiedConnection);
}
