//! Sorted, disjoint, inclusive integer intervals: the one set algebra behind
//! port sets and address sets (addresses as `u128`).

pub(crate) type Interval = (u128, u128);

/// Sorts and merges overlapping or adjacent intervals.
pub(crate) fn normalize(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_unstable();
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        if let Some(last) = out.last_mut()
            && lo <= last.1.saturating_add(1)
        {
            last.1 = last.1.max(hi);
            continue;
        }
        out.push((lo, hi));
    }
    out
}

pub(crate) fn union(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    normalize(a.iter().chain(b).copied().collect())
}

pub(crate) fn intersection(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    let (mut i, mut j) = (a.iter().peekable(), b.iter().peekable());
    while let (Some(&&(alo, ahi)), Some(&&(blo, bhi))) = (i.peek(), j.peek()) {
        let (lo, hi) = (alo.max(blo), ahi.min(bhi));
        if lo <= hi {
            out.push((lo, hi));
        }
        if ahi < bhi {
            i.next();
        } else {
            j.next();
        }
    }
    out
}

pub(crate) fn difference(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for &(lo, hi) in a {
        let mut start = Some(lo);
        for &(blo, bhi) in b {
            let Some(s) = start else { break };
            if bhi < s || blo > hi {
                continue;
            }
            if blo > s {
                out.push((s, blo - 1));
            }
            start = if bhi >= hi { None } else { Some(bhi + 1) };
        }
        if let Some(s) = start {
            out.push((s, hi));
        }
    }
    out
}

pub(crate) fn is_subset(a: &[Interval], b: &[Interval]) -> bool {
    difference(a, b).is_empty()
}

/// Number of integers covered, saturating at `u128::MAX`.
pub(crate) fn count(v: &[Interval]) -> u128 {
    v.iter().fold(0u128, |acc, &(lo, hi)| {
        acc.saturating_add((hi - lo).saturating_add(1))
    })
}

/// The fewest aligned power-of-two blocks covering an interval of a
/// `bits`-wide space, as (start, prefix length): CIDRs.
pub fn to_blocks(v: &[Interval], bits: u32) -> Vec<(u128, u8)> {
    let mut out = Vec::new();
    for &(lo, hi) in v {
        let mut lo = lo;
        loop {
            let align = if lo == 0 {
                bits
            } else {
                lo.trailing_zeros().min(bits)
            };
            let span = hi - lo;
            let fit = if span == u128::MAX {
                128
            } else {
                127 - (span + 1).leading_zeros()
            };
            let k = align.min(fit);
            out.push((lo, u8::try_from(bits - k).unwrap_or(0)));
            let step = 1u128.checked_shl(k).unwrap_or(0);
            match lo.checked_add(step) {
                Some(next) if step != 0 && next <= hi => lo = next,
                _ => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_algebra() {
        let a = normalize(vec![(1, 5), (4, 9), (11, 12), (13, 13)]);
        assert_eq!(a, vec![(1, 9), (11, 13)]);
        assert_eq!(
            difference(&a, &[(3, 4), (12, 20)]),
            vec![(1, 2), (5, 9), (11, 11)]
        );
        assert_eq!(
            intersection(&a, &[(0, 1), (9, 11)]),
            vec![(1, 1), (9, 9), (11, 11)]
        );
        assert_eq!(count(&[(0, u128::MAX)]), u128::MAX);
    }

    #[test]
    fn blocks_are_minimal_cidrs() {
        assert_eq!(to_blocks(&[(0, 255)], 32), vec![(0, 24)]);
        assert_eq!(to_blocks(&[(1, 2)], 32), vec![(1, 32), (2, 32)]);
        assert_eq!(to_blocks(&[(0, u128::MAX)], 128), vec![(0, 0)]);
        assert_eq!(to_blocks(&[(0, u128::from(u32::MAX))], 32), vec![(0, 0)]);
    }
}
