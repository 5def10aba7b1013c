//! How often the workload may propose: a token bucket, three at once and
//! one more each minute. The gateway proves every proposal (a compile and
//! a proof, seconds of work) and a person reads each one, so an agent
//! asking in a loop is stopped here, before either.

use std::time::{Duration, Instant};

/// Proposals that may go at once.
const BURST: u32 = 3;
/// One more may go after each of these.
const REFILL: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub(in crate::l7) struct Bucket {
    tokens: u32,
    /// When the last token was added (or the bucket started full).
    since: Option<Instant>,
}

impl Default for Bucket {
    fn default() -> Self {
        Self {
            tokens: BURST,
            since: None,
        }
    }
}

impl Bucket {
    /// Takes one token at `now`; `Err(seconds)` until the next one comes.
    pub(in crate::l7) fn take(&mut self, now: Instant) -> Result<(), u64> {
        let mut since = self.since.unwrap_or(now);
        while self.tokens < BURST && now >= since + REFILL {
            self.tokens += 1;
            since += REFILL;
        }
        // Full, the clock waits for the next token taken.
        if self.tokens == BURST {
            since = now;
        }
        self.since = Some(since);
        if self.tokens == 0 {
            let next = (since + REFILL).saturating_duration_since(now);
            return Err(next.as_secs().max(1));
        }
        self.tokens -= 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_at_once_then_one_a_minute() {
        let t0 = Instant::now();
        let mut b = Bucket::default();
        for _ in 0..3 {
            assert_eq!(b.take(t0), Ok(()));
        }
        assert_eq!(b.take(t0 + Duration::from_secs(1)), Err(59));
        assert_eq!(b.take(t0 + Duration::from_secs(60)), Ok(()));
        assert!(b.take(t0 + Duration::from_secs(61)).is_err());
        // A long pause refills to three, never more.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(b.take(later), Ok(()));
        }
        assert_eq!(b.take(later), Err(60));
    }
}
