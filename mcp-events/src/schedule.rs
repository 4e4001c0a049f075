//! The waits of MCP Events: a failed request's retry, and the wait between polls. Each is
//! moved by up to ±10% ([`jitter`]), with the randomness passed in.
//!
//! ```
//! use std::time::Duration;
//! use mcp_events::schedule::{Retry, poll_wait};
//!
//! let mut retry = Retry::new();
//! assert_eq!(retry.next_failure(false), Duration::from_secs(1));
//! assert_eq!(retry.next_failure(false), Duration::from_secs(2));
//! assert_eq!(poll_wait(None), Duration::from_secs(30));
//! assert_eq!(poll_wait(Some(10)), Duration::from_secs(1));
//! ```

use std::time::Duration;

use crate::limits::{
    JITTER_PERCENT, POLL_DEFAULT, POLL_MAX, POLL_MIN, RETRY_EXHAUSTED_MAX, RETRY_FIRST, RETRY_MAX,
};

/// A failed `events/*` request's retry: 1 s after the first failure, doubling to 5 min, or
/// to 15 min while the server answers -32025 ResourceExhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    next: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self::new()
    }
}

impl Retry {
    /// A schedule that has not failed yet.
    pub fn new() -> Self {
        Self { next: RETRY_FIRST }
    }

    /// The wait after one more failure (before jitter); `exhausted` when the server answered
    /// -32025.
    pub fn next_failure(&mut self, exhausted: bool) -> Duration {
        let max = match exhausted {
            true => RETRY_EXHAUSTED_MAX,
            false => RETRY_MAX,
        };
        let wait = self.next.min(max);
        self.next = (wait * 2).min(max);
        wait
    }

    /// Back to 1 s, after a success.
    pub fn reset(&mut self) {
        self.next = RETRY_FIRST;
    }
}

/// The wait before the next poll: the server's `nextPollMs`, at least 1 s, 30 s when it
/// names none, at most 15 min (before jitter).
pub fn poll_wait(next_poll_ms: Option<u64>) -> Duration {
    next_poll_ms.map_or(POLL_DEFAULT, |ms| {
        Duration::from_millis(ms).clamp(POLL_MIN, POLL_MAX)
    })
}

/// `wait` moved by up to ±10%: `random` spread evenly over that range (any `u32` will do:
/// 0 is −10%, `u32::MAX` +10%).
pub fn jitter(wait: Duration, random: u32) -> Duration {
    let span = wait.as_nanos() * u128::from(JITTER_PERCENT) / 100;
    // random / u32::MAX of 2·span, minus span.
    let offset = span * 2 * u128::from(random) / u128::from(u32::MAX);
    let nanos = (wait.as_nanos() + offset).saturating_sub(span);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn retries_double_to_five_minutes_or_fifteen_when_exhausted() {
        let mut r = Retry::new();
        let plain: Vec<u64> = (0..11).map(|_| r.next_failure(false).as_secs()).collect();
        assert_eq!(plain, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        let mut r = Retry::new();
        let exhausted: Vec<u64> = (0..12).map(|_| r.next_failure(true).as_secs()).collect();
        assert_eq!(exhausted, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
        // From the longer ceiling back to an ordinary failure: the 5 min bound again.
        assert_eq!(r.next_failure(false).as_secs(), 300);
        r.reset();
        assert_eq!(r.next_failure(false).as_secs(), 1);
    }

    #[test]
    fn polls_wait_what_the_server_says_within_one_second_and_fifteen_minutes() {
        assert_eq!(poll_wait(None), POLL_DEFAULT);
        assert_eq!(poll_wait(Some(0)), POLL_MIN);
        assert_eq!(poll_wait(Some(999)), POLL_MIN);
        assert_eq!(poll_wait(Some(1000)), POLL_MIN);
        assert_eq!(poll_wait(Some(1001)), Duration::from_millis(1001));
        assert_eq!(poll_wait(Some(900_000)), POLL_MAX);
        assert_eq!(poll_wait(Some(900_001)), POLL_MAX);
        assert_eq!(poll_wait(Some(u64::MAX)), POLL_MAX);
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let base = Duration::from_secs(30);
        assert_eq!(secs(jitter(base, 0)), 27.0);
        assert_eq!(secs(jitter(base, u32::MAX)), 33.0);
        let mid = secs(jitter(base, u32::MAX / 2));
        assert!((mid - 30.0).abs() < 1e-6, "{mid}");
        for r in [1, 7, 1 << 20, u32::MAX - 1] {
            let j = secs(jitter(base, r));
            assert!((27.0..=33.0).contains(&j), "{j}");
        }
        assert_eq!(jitter(Duration::ZERO, 123), Duration::ZERO);
        assert!(jitter(Duration::MAX, u32::MAX) <= Duration::MAX);
    }
}
