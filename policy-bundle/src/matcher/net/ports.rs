//! TCP/UDP port sets.

use std::fmt;

use super::intervals::{self, Interval};
use crate::matcher::error::PatternError;

/// A set of ports as sorted, merged, disjoint inclusive ranges. Port 0 is
/// never a member: it is not a destination anyone can connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortSet {
    ranges: Vec<(u16, u16)>,
}

impl PortSet {
    /// Parses `443`, `443,8443`, `8000-8100` or `80,443,8000-8100`
    /// (whitespace around entries is ignored).
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut ranges = Vec::new();
        let mut at = 0;
        for entry in text.split(',') {
            let lead = entry.len() - entry.trim_start().len();
            ranges.push(parse_entry(entry.trim(), at + lead, text)?);
            at += entry.len() + 1;
        }
        Ok(Self::from_intervals(
            ranges
                .into_iter()
                .map(|(lo, hi)| (u128::from(lo), u128::from(hi))),
        ))
    }

    /// Builds a set from inclusive ranges; port 0 and reversed ranges are
    /// dropped.
    #[cfg(test)]
    pub(crate) fn from_ranges(ranges: impl IntoIterator<Item = (u16, u16)>) -> Self {
        Self::from_intervals(
            ranges
                .into_iter()
                .filter(|&(lo, hi)| lo <= hi && hi != 0)
                .map(|(lo, hi)| (u128::from(lo.max(1)), u128::from(hi))),
        )
    }

    fn from_intervals(v: impl IntoIterator<Item = Interval>) -> Self {
        let ranges = intervals::normalize(v.into_iter().collect())
            .into_iter()
            .map(|(lo, hi)| {
                (
                    u16::try_from(lo).unwrap_or(u16::MAX),
                    u16::try_from(hi).unwrap_or(u16::MAX),
                )
            })
            .collect();
        Self { ranges }
    }

    fn intervals(&self) -> Vec<Interval> {
        self.ranges
            .iter()
            .map(|&(lo, hi)| (u128::from(lo), u128::from(hi)))
            .collect()
    }

    /// Whether the port is in the set.
    pub fn contains(&self, port: u16) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= port && port <= hi)
    }

    /// The ranges, sorted, merged and disjoint.
    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.ranges
    }

    /// Number of ports in the set.
    pub fn len(&self) -> u32 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u32::from(hi) - u32::from(lo) + 1)
            .sum()
    }

    /// Only results of set operations can be empty; `parse` never returns
    /// an empty set.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ports in either set.
    pub fn union(&self, other: &Self) -> Self {
        Self::from_intervals(intervals::union(&self.intervals(), &other.intervals()))
    }

    /// The ports in both sets; may be empty.
    pub fn intersection(&self, other: &Self) -> Self {
        Self::from_intervals(intervals::intersection(
            &self.intervals(),
            &other.intervals(),
        ))
    }

    /// The ports of `self` not in `other`; may be empty.
    pub fn difference(&self, other: &Self) -> Self {
        Self::from_intervals(intervals::difference(&self.intervals(), &other.intervals()))
    }

    /// Whether every port of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        intervals::is_subset(&self.intervals(), &other.intervals())
    }
}

fn parse_port(text: &str, at: usize, whole: &str) -> Result<u16, PatternError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PatternError::new(
            format!("`{text}` is not a port number in `{whole}`"),
            "write ports as numbers, ranges as `8000-8100`, separated by `,`",
            at,
        ));
    }
    match text.parse::<u32>() {
        Ok(0) => Err(PatternError::new(
            "port 0 is not a valid destination port",
            "ports range from 1 to 65535",
            at,
        )),
        Ok(n) => u16::try_from(n).map_err(|_| too_large(text, at)),
        Err(_) => Err(too_large(text, at)),
    }
}

fn too_large(text: &str, at: usize) -> PatternError {
    PatternError::new(
        format!("port `{text}` is larger than 65535"),
        "ports range from 1 to 65535",
        at,
    )
}

fn parse_entry(entry: &str, at: usize, whole: &str) -> Result<(u16, u16), PatternError> {
    if entry.is_empty() {
        return Err(PatternError::new(
            format!("empty entry in port list `{whole}`"),
            "write ports such as `443` or `80,443,8000-8100`",
            at,
        ));
    }
    let Some((lo_text, hi_text)) = entry.split_once('-') else {
        let port = parse_port(entry, at, whole)?;
        return Ok((port, port));
    };
    let hi_at = at + lo_text.len() + 1;
    let lo = parse_port(lo_text.trim_end(), at, whole)?;
    let lead = hi_text.len() - hi_text.trim_start().len();
    let hi = parse_port(hi_text.trim_start(), hi_at + lead, whole)?;
    if hi < lo {
        return Err(PatternError::new(
            format!("reversed port range `{entry}`"),
            format!("write the smaller port first: `{hi}-{lo}`"),
            at,
        ));
    }
    Ok((lo, hi))
}

impl fmt::Display for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for PortSet {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for PortSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Accepts the canonical string and, for hand-written bundles, a bare port
/// number.
impl<'de> serde::Deserialize<'de> for PortSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = PortSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port set such as `80,443,8000-8100` or a port number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PortSet, E> {
                // The empty set prints as the empty string (no rule, no port).
                if v.is_empty() {
                    return Ok(PortSet::default());
                }
                PortSet::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PortSet, E> {
                PortSet::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PortSet, E> {
                PortSet::parse(&v.to_string()).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}
