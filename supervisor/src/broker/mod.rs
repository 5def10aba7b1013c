//! What the supervisor needs to answer openshell-sandbox's connects
//! ([`crate::relay`]): the decider, the deny log, and the L7 proxy that
//! an inspected route's upstream connection goes through ([`upstream`]).

pub mod aliases;

mod upstream;

pub(crate) use upstream::{Upstream, Who, open_route};

use std::sync::Arc;

use crate::decide::Decider;
use crate::denylog::DenyLog;
use crate::handoff::ProxyHandoff;

/// Decides with the policy in force and connects from this process.
#[derive(Debug)]
pub struct Connector {
    pub decider: Arc<Decider>,
    pub log: Arc<DenyLog>,
    /// The L7 proxy, once there is one.
    pub proxy: Option<Arc<dyn ProxyHandoff>>,
}
