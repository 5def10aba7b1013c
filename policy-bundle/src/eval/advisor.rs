//! Requests to the advisor endpoint (`policy.local`): decided by the
//! `advisor` statement alone. No route reaches the endpoint and no L7 rule
//! judges its requests: the supervisor answers them itself, so the only
//! questions are whether the binary is one the statement names and
//! whether it asked for plain HTTP on port 80.

use super::{Decision, Evaluator, Reason, RouteKind, Verdict};
use crate::bundle::ADVISOR_PORT;

impl Evaluator {
    /// The decision for `binary` (with its SHA-256, when known) reaching
    /// the advisor endpoint on `port`: allowed through the proxy, blamed on
    /// the `advisor` statement, or refused with why.
    #[must_use]
    pub fn decide_advisor(&self, binary: &str, sha256: Option<&str>, port: u16) -> Decision {
        let refuse = |reason: Reason| Decision {
            decision: Verdict::Deny,
            route: None,
            rule: None,
            credential: None,
            reason,
            target: None,
            rpc: None,
            graphql: None,
        };
        let Some(table) = &self.bundle.enforcement.advisor else {
            return refuse(Reason::AdvisorOff);
        };
        if !table.admits(binary, sha256) {
            return refuse(Reason::AdvisorNotNamed {
                binary: binary.to_owned(),
            });
        }
        if port != ADVISOR_PORT {
            return refuse(Reason::AdvisorPort { port });
        }
        Decision {
            decision: Verdict::Allow,
            route: Some(RouteKind::L7),
            rule: self.bundle.provenance.advisor.clone(),
            credential: None,
            reason: Reason::Advisor {
                binary: binary.to_owned(),
            },
            target: None,
            rpc: None,
            graphql: None,
        }
    }
}
