//! Address classes: which destinations are internal to the host, the cloud
//! or the local network, whatever a policy allows.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::{AddrSet, canonical_ip};

/// What kind of destination an address is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AddrClass {
    Public,
    Loopback,
    LinkLocal,
    /// Cloud instance-metadata endpoints: credentials live there.
    Metadata,
    Private,
    Unspecified,
    Multicast,
    Reserved,
}

/// IPv4 ranges by class, first match wins (metadata before link-local).
const V4: &[(AddrClass, [u8; 4], u8)] = &[
    (AddrClass::Metadata, [169, 254, 169, 254], 32), // AWS, GCP, Azure, OCI, ...
    (AddrClass::Metadata, [169, 254, 170, 2], 32),   // AWS ECS task credentials
    (AddrClass::Metadata, [100, 100, 100, 200], 32), // Alibaba Cloud
    (AddrClass::Unspecified, [0, 0, 0, 0], 8),
    (AddrClass::Loopback, [127, 0, 0, 0], 8),
    (AddrClass::LinkLocal, [169, 254, 0, 0], 16),
    (AddrClass::Private, [10, 0, 0, 0], 8),
    (AddrClass::Private, [172, 16, 0, 0], 12),
    (AddrClass::Private, [192, 168, 0, 0], 16),
    (AddrClass::Private, [100, 64, 0, 0], 10), // CGNAT
    (AddrClass::Multicast, [224, 0, 0, 0], 4),
    (AddrClass::Reserved, [240, 0, 0, 0], 4), // includes 255.255.255.255
    (AddrClass::Reserved, [192, 0, 0, 0], 24),
    (AddrClass::Reserved, [192, 0, 2, 0], 24),
    (AddrClass::Reserved, [192, 88, 99, 0], 24), // 6to4 relay anycast
    (AddrClass::Reserved, [198, 18, 0, 0], 15),
    (AddrClass::Reserved, [198, 51, 100, 0], 24),
    (AddrClass::Reserved, [203, 0, 113, 0], 24),
];

/// IPv6 ranges by class, first match wins.
const V6: &[(AddrClass, [u16; 8], u8)] = &[
    (
        AddrClass::Metadata,
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
        128,
    ), // AWS IMDS
    (AddrClass::Unspecified, [0; 8], 128),
    (AddrClass::Loopback, [0, 0, 0, 0, 0, 0, 0, 1], 128),
    (AddrClass::Reserved, [0; 8], 96), // IPv4-compatible, deprecated
    (AddrClass::LinkLocal, [0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
    (AddrClass::Private, [0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
    (AddrClass::Private, [0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), // site-local, deprecated
    (AddrClass::Multicast, [0xff00, 0, 0, 0, 0, 0, 0, 0], 8),
    (AddrClass::Reserved, [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
    (AddrClass::Reserved, [0x100, 0, 0, 0, 0, 0, 0, 0], 64), // discard-only
    (AddrClass::Reserved, [0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), // local-use NAT64
];

/// Prefixes that carry an IPv4 address at a fixed position: an address there
/// is classified by the IPv4 address it reaches, so `64:ff9b::a9fe:a9fe` is
/// metadata. (start of the prefix, prefix length, bit offset of the IPv4
/// address from the left)
const EMBEDDING: &[([u16; 8], u8, u32)] = &[
    ([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, 96), // NAT64 well-known prefix
    ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, 16),    // 6to4
];

fn v4_in(ip: Ipv4Addr, base: [u8; 4], len: u8) -> bool {
    Ipv4Net::new(Ipv4Addr::from(base), len).is_ok_and(|n| n.contains(&ip))
}

fn v6_in(ip: Ipv6Addr, base: [u16; 8], len: u8) -> bool {
    Ipv6Net::new(Ipv6Addr::from(base), len).is_ok_and(|n| n.contains(&ip))
}

fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    EMBEDDING.iter().find_map(|&(base, len, offset)| {
        v6_in(ip, base, len).then(|| {
            let bits = u128::from(ip) >> (96 - offset);
            Ipv4Addr::from(u32::try_from(bits & u128::from(u32::MAX)).unwrap_or(0))
        })
    })
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    V4.iter()
        .find(|&&(_, base, len)| v4_in(ip, base, len))
        .map_or(AddrClass::Public, |&(class, _, _)| class)
}

/// The class of a destination, after `canonical_ip`, and by the embedded
/// IPv4 address for NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`).
pub fn classify_addr(ip: IpAddr) -> AddrClass {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return classify_v4(v4);
            }
            V6.iter()
                .find(|&&(_, base, len)| v6_in(v6, base, len))
                .map_or(AddrClass::Public, |&(class, _, _)| class)
        }
    }
}

/// Every address whose class is not `Public`, including the NAT64 and 6to4
/// images of internal IPv4 ranges: what the prover treats as internal.
pub fn internal_ranges() -> AddrSet {
    let mut nets: Vec<IpNet> = Vec::new();
    for &(_, base, len) in V4 {
        let v4 = Ipv4Addr::from(base);
        nets.extend(Ipv4Net::new(v4, len).ok().map(IpNet::V4));
        for &(prefix, _, offset) in EMBEDDING {
            let start =
                u128::from(Ipv6Addr::from(prefix)) | (u128::from(u32::from(v4)) << (96 - offset));
            let plen = u8::try_from(offset).unwrap_or(0) + len;
            nets.extend(
                Ipv6Net::new(Ipv6Addr::from(start), plen)
                    .ok()
                    .map(IpNet::V6),
            );
        }
    }
    for &(_, base, len) in V6 {
        nets.extend(Ipv6Net::new(Ipv6Addr::from(base), len).ok().map(IpNet::V6));
    }
    AddrSet::from_nets(nets)
}

/// Host names that resolve to an instance-metadata endpoint from inside a
/// cloud VM. Conservative on purpose: names that are public (such as
/// `metadata.azure.com`) are not listed.
pub const METADATA_HOSTS: &[&str] = &[
    "metadata",                   // GCP short name
    "metadata.google.internal",   // GCP
    "metadata.goog",              // GCP
    "instance-data",              // AWS short name
    "instance-data.ec2.internal", // AWS
];

/// Whether a host name is a well-known instance-metadata name (case and a
/// trailing dot ignored).
pub fn is_metadata_host(host: &str) -> bool {
    super::super::host::normalize_host(host).is_ok_and(|h| METADATA_HOSTS.contains(&h.as_str()))
}
