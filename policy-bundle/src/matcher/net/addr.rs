//! IP address sets.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::canonical_ip;
use super::intervals::{self, Interval};
use crate::matcher::error::PatternError;

/// A set of IP networks, kept as the fewest sorted CIDRs (IPv4 first), so
/// equal sets compare and print equal however they were written.
///
/// Sets live in `canonical_ip` space: an IPv4-mapped IPv6 literal is stored
/// as IPv4 and `contains` maps its argument the same way, so
/// `::ffff:10.0.0.1` is in `10.0.0.0/8` and never in an IPv6 net.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AddrSet {
    nets: Vec<IpNet>,
}

/// The set as intervals, one list per family.
#[derive(Default)]
struct Spans {
    v4: Vec<Interval>,
    v6: Vec<Interval>,
}

fn v4_net(start: u128, len: u8) -> IpNet {
    let addr = Ipv4Addr::from(u32::try_from(start).unwrap_or(u32::MAX));
    Ipv4Net::new(addr, len).map_or_else(|_| IpNet::from(IpAddr::V4(addr)), IpNet::V4)
}

fn v6_net(start: u128, len: u8) -> IpNet {
    let addr = Ipv6Addr::from(start);
    Ipv6Net::new(addr, len).map_or_else(|_| IpNet::from(IpAddr::V6(addr)), IpNet::V6)
}

/// A network in `canonical_ip` space: IPv4-mapped nets become IPv4.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => v4_net(u128::from(u32::from(v4)), v6.prefix_len() - 96),
            None => net,
        },
        _ => net,
    }
}

impl Spans {
    fn of(nets: &[IpNet]) -> Self {
        let mut spans = Self::default();
        for net in nets {
            match net.trunc() {
                IpNet::V4(n) => spans.v4.push((
                    u128::from(u32::from(n.network())),
                    u128::from(u32::from(n.broadcast())),
                )),
                IpNet::V6(n) => spans
                    .v6
                    .push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        spans.v4 = intervals::normalize(spans.v4);
        spans.v6 = intervals::normalize(spans.v6);
        spans
    }

    fn into_set(self) -> AddrSet {
        let v4 = intervals::to_blocks(&self.v4, 32)
            .into_iter()
            .map(|(s, l)| v4_net(s, l));
        let v6 = intervals::to_blocks(&self.v6, 128)
            .into_iter()
            .map(|(s, l)| v6_net(s, l));
        AddrSet {
            nets: v4.chain(v6).collect(),
        }
    }
}

fn parse_one(entry: &str, at: usize, whole: &str) -> Result<IpNet, PatternError> {
    let invalid = |help: &str| {
        PatternError::new(
            format!("`{entry}` is not an IP address or CIDR in `{whole}`"),
            help,
            at,
        )
    };
    let net = if let Some((_, len)) = entry.split_once('/') {
        let net: IpNet = entry.parse().map_err(|_| {
            if len.parse::<u8>().is_ok() {
                invalid("IPv4 prefixes are at most /32 and IPv6 prefixes at most /128")
            } else {
                invalid("write a CIDR such as `10.0.0.0/8` or `2001:db8::/32`")
            }
        })?;
        if net.trunc() != net {
            return Err(PatternError::new(
                format!("`{entry}` has host bits set"),
                format!(
                    "write the network `{}`, or `{}` for a single address",
                    Display(&canonical_net(net.trunc())),
                    canonical_ip(net.addr())
                ),
                at,
            ));
        }
        net
    } else {
        let addr: IpAddr = entry
            .parse()
            .map_err(|_| invalid("write an address such as `192.0.2.1` or `2001:db8::1`"))?;
        IpNet::from(addr)
    };
    Ok(canonical_net(net))
}

/// Prints a host route as a bare address.
struct Display<'a>(&'a IpNet);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net = self.0;
        if net.prefix_len() == net.max_prefix_len() {
            write!(f, "{}", net.addr())
        } else {
            write!(f, "{net}")
        }
    }
}

impl AddrSet {
    /// Parses one literal (`192.0.2.1`, `10.0.0.0/8`, `2001:db8::/32`,
    /// `::1`, `::ffff:10.0.0.1`), or several separated by `,` as `Display`
    /// writes them. A CIDR with host bits set is refused: `10.0.0.1/8` is
    /// usually a typo for one address or for `10.0.0.0/8`, and guessing
    /// would widen or narrow the rule silently.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut nets = Vec::new();
        let mut at = 0;
        for entry in text.split(',') {
            let lead = entry.len() - entry.trim_start().len();
            let trimmed = entry.trim();
            if trimmed.is_empty() {
                return Err(PatternError::new(
                    format!("empty entry in address list `{text}`"),
                    "write an address or CIDR such as `10.0.0.0/8`",
                    at + lead,
                ));
            }
            nets.push(parse_one(trimmed, at + lead, text)?);
            at += entry.len() + 1;
        }
        Ok(Self::from_nets(nets))
    }

    /// Builds a set from networks, dropping host bits and mapping IPv4-mapped
    /// networks to IPv4.
    pub fn from_nets(nets: impl IntoIterator<Item = IpNet>) -> Self {
        let nets: Vec<IpNet> = nets.into_iter().map(|n| canonical_net(n.trunc())).collect();
        Spans::of(&nets).into_set()
    }

    /// Whether the set contains `ip`, after `canonical_ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical_ip(ip);
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The fewest sorted CIDRs covering the set, IPv4 first.
    pub fn nets(&self) -> &[IpNet] {
        &self.nets
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Number of IPv4 addresses (at most 2^32).
    pub fn len_v4(&self) -> u64 {
        u64::try_from(intervals::count(&Spans::of(&self.nets).v4)).unwrap_or(u64::MAX)
    }

    /// Number of IPv6 addresses, saturating at `u128::MAX` (the full space
    /// is one more than that).
    pub fn len_v6(&self) -> u128 {
        intervals::count(&Spans::of(&self.nets).v6)
    }

    /// The addresses in either set.
    pub fn union(&self, other: &Self) -> Self {
        self.combine(other, intervals::union)
    }

    /// The addresses in both sets.
    pub fn intersection(&self, other: &Self) -> Self {
        self.combine(other, intervals::intersection)
    }

    /// Addresses in `self` but not in `other`: how much a change widens.
    pub fn difference(&self, other: &Self) -> Self {
        self.combine(other, intervals::difference)
    }

    /// Whether every address of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.difference(other).is_empty()
    }

    fn combine(&self, other: &Self, op: fn(&[Interval], &[Interval]) -> Vec<Interval>) -> Self {
        let (a, b) = (Spans::of(&self.nets), Spans::of(&other.nets));
        Spans {
            v4: op(&a.v4, &b.v4),
            v6: op(&a.v6, &b.v6),
        }
        .into_set()
    }

    /// The canonical text of each network (host routes as bare addresses).
    pub fn to_strings(&self) -> Vec<String> {
        self.nets.iter().map(|n| Display(n).to_string()).collect()
    }
}

impl fmt::Display for AddrSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_strings().join(","))
    }
}

impl std::str::FromStr for AddrSet {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for AddrSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.to_strings())
    }
}

impl<'de> serde::Deserialize<'de> for AddrSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = <Vec<String> as serde::Deserialize>::deserialize(deserializer)?;
        let mut set = Self::default();
        for entry in entries {
            let one = Self::parse(&entry).map_err(serde::de::Error::custom)?;
            set = set.union(&one);
        }
        Ok(set)
    }
}
