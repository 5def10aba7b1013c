//! The advisor endpoint inside the sandbox: `http://policy.local/`, which
//! the supervisor's proxy answers itself (the sandbox's recent denials, and
//! proposals forwarded to the gateway) for the binaries an `advisor`
//! statement names. Nothing sent there leaves the supervisor except a
//! proposal, and that only to the gateway, under the sandbox's own token.
//!
//! The name, the address the DNS stub gives for it and the port are fixed
//! here, once, so that the evaluator, the stub, the connect broker and the
//! proxy cannot disagree about what "the advisor endpoint" is.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use crate::vocab::BinaryRef;

/// The reserved name the workload asks for.
pub const ADVISOR_HOST: &str = "policy.local";

/// The address the DNS stub answers [`ADVISOR_HOST`] with. It lies in
/// 192.0.0.0/24, which RFC 6890 reserves for IETF protocol assignments and
/// marks neither forwardable nor global, and is not one of the addresses
/// IANA assigned there (192.0.0.0/29, .8, .9, .10, .170, .171): no router
/// forwards it, so a connection to it that escaped the broker would reach
/// nothing. The broker never lets one escape: every connect to it is
/// decided as the advisor endpoint, whatever the policy's address rules say.
pub const ADVISOR_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 100);

/// Plain HTTP only: the proxy answers the endpoint itself, so TLS would
/// protect nothing, and a certificate for a name the sandbox CA mints
/// would be one more thing to trust.
pub const ADVISOR_PORT: u16 = 80;

/// Whether a destination is the advisor endpoint: its reserved name, or
/// its address.
#[must_use]
pub fn is_advisor_dest(host: Option<&str>, addr: Option<IpAddr>) -> bool {
    let is_addr = |a: IpAddr| crate::matcher::canonical_ip(a) == IpAddr::V4(ADVISOR_ADDR);
    let named = host.is_some_and(|h| {
        let h = h.trim_end_matches('.');
        h.eq_ignore_ascii_case(ADVISOR_HOST)
            || h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(is_addr)
    });
    named || addr.is_some_and(is_addr)
}

/// The `advisor` statement as the bundle carries it. Absent from the JSON
/// when the policy has none, so bundles of policies without it read and
/// hash as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvisorTable {
    /// The binaries that may reach the endpoint; sorted, de-duplicated.
    pub binaries: Vec<BinaryRef>,
}

impl AdvisorTable {
    /// Whether the running executable `binary` (with its SHA-256, when
    /// known) is one the statement names; a pinned entry needs the hash.
    #[must_use]
    pub fn admits(&self, binary: &str, sha256: Option<&str>) -> bool {
        self.binaries.iter().any(|b| {
            b.glob.matches(binary)
                && b.sha256
                    .as_deref()
                    .is_none_or(|pin| sha256.is_some_and(|h| h.eq_ignore_ascii_case(pin)))
        })
    }
}
