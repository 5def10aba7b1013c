//! Ports, addresses and address classes: the L4 half of a destination.

mod addr;
mod class;
mod endpoint;
mod intervals;
mod ports;

use std::net::IpAddr;

pub use addr::AddrSet;
pub use class::{METADATA_HOSTS, classify_addr, internal_ranges, is_metadata_host};
pub use endpoint::{EndpointText, EndpointTextError, split_endpoint};
pub use intervals::to_blocks as cidr_blocks;
pub use ports::PortSet;

pub(crate) use class::AddrClass;

/// Maps an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) to its IPv4 address;
/// everything else is unchanged. The kernel connects a dual-stack socket to
/// `::ffff:10.0.0.1` as `10.0.0.1`, so every decision must see it as IPv4 or
/// an IPv4 deny could be bypassed.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}
