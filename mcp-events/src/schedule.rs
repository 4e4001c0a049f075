//! The waits of MCP Events: a failed request's retry, and the wait between polls, within
//! the [`Limits`]. Each is moved by up to ±[`Limits::jitter_percent`] ([`Limits::jitter`]),
//! with the randomness passed in.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcp_events::Limits;
//! use mcp_events::schedule::Retry;
//!
//! let limits = Limits::default();
//! let mut retry = Retry::new(&limits);
//! assert_eq!(retry.next_failure(false), Duration::from_secs(1));
//! assert_eq!(retry.next_failure(false), Duration::from_secs(2));
//! assert_eq!(limits.poll_wait(None), Duration::from_secs(30));
//! assert_eq!(limits.poll_wait(Some(10)), Duration::from_secs(1));
//! ```

use std::time::{Duration, Instant};

use crate::Limits;

/// A failed `events/*` request's retry: [`Limits::retry_first`] after the first failure,
/// doubling to [`Limits::retry_max`], or to [`Limits::retry_exhausted_max`] while the server
/// answers -32025 ResourceExhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    next: Duration,
    first: Duration,
    max: Duration,
    exhausted_max: Duration,
}

impl Default for Retry {
    /// The schedule of [`Limits::default`].
    fn default() -> Self {
        Self::new(&Limits::default())
    }
}

impl Retry {
    /// A schedule within `limits` that has not failed yet.
    pub fn new(limits: &Limits) -> Self {
        Self {
            next: limits.retry_first,
            first: limits.retry_first,
            max: limits.retry_max,
            exhausted_max: limits.retry_exhausted_max,
        }
    }

    /// The wait after one more failure (before jitter); `exhausted` when the server answered
    /// -32025.
    #[must_use]
    pub fn next_failure(&mut self, exhausted: bool) -> Duration {
        let max = match exhausted {
            true => self.exhausted_max,
            false => self.max,
        };
        let wait = self.next.min(max);
        self.next = wait.saturating_mul(2).min(max);
        wait
    }

    /// Back to the first wait, after a success.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

impl Limits {
    /// The wait before the next poll: the server's `nextPollMs` within [`Limits::poll_min`]
    /// and [`Limits::poll_max`], [`Limits::poll_default`] when it names none (before
    /// jitter).
    pub fn poll_wait(&self, next_poll_ms: Option<u64>) -> Duration {
        next_poll_ms.map_or(self.poll_default, |ms| {
            Duration::from_millis(ms).clamp(self.poll_min, self.poll_max.max(self.poll_min))
        })
    }

    /// The wait before the next poll: [`Limits::poll_wait`] moved by its jitter, and kept
    /// within [`Limits::poll_min`] and [`Limits::poll_max`] after it.
    pub fn poll_after(&self, next_poll_ms: Option<u64>, random: u32) -> Duration {
        let max = self.poll_max.max(self.poll_min);
        self.jitter(self.poll_wait(next_poll_ms), random)
            .clamp(self.poll_min, max)
    }

    /// `wait` moved by up to ±[`Limits::jitter_percent`]: `random` spread evenly over that
    /// range (any `u32` will do: 0 is the least, `u32::MAX` the most).
    pub fn jitter(&self, wait: Duration, random: u32) -> Duration {
        let span = wait.as_nanos() * u128::from(self.jitter_percent.min(100)) / 100;
        // random / u32::MAX of 2·span, minus span.
        let offset = span * 2 * u128::from(random) / u128::from(u32::MAX);
        let nanos = (wait.as_nanos() + offset).saturating_sub(span);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// `now` moved by `wait`, or as far as a clock reading can be moved (about 136 years) when
/// `wait` is past that: a bound set absurdly large never panics a machine.
pub(crate) fn later(now: Instant, wait: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(u32::MAX as u64);
    now.checked_add(wait.min(FAR))
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn retries_double_to_five_minutes_or_fifteen_when_exhausted() {
        let mut r = Retry::default();
        let plain: Vec<u64> = (0..11).map(|_| r.next_failure(false).as_secs()).collect();
        assert_eq!(plain, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        let mut r = Retry::new(&Limits::default());
        let exhausted: Vec<u64> = (0..12).map(|_| r.next_failure(true).as_secs()).collect();
        assert_eq!(exhausted, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
        // From the longer ceiling back to an ordinary failure: the 5 min bound again.
        assert_eq!(r.next_failure(false).as_secs(), 300);
        r.reset();
        assert_eq!(r.next_failure(false).as_secs(), 1);
    }

    #[test]
    fn other_limits_are_kept_and_none_panics() {
        let mut limits = Limits {
            retry_first: Duration::from_millis(250),
            retry_max: Duration::from_secs(1),
            retry_exhausted_max: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut r = Retry::new(&limits);
        let plain: Vec<u128> = (0..4).map(|_| r.next_failure(false).as_millis()).collect();
        assert_eq!(plain, [250, 500, 1000, 1000]);
        assert_eq!(r.next_failure(true).as_millis(), 1000);
        assert_eq!(r.next_failure(true).as_millis(), 2000);
        assert_eq!(r.next_failure(true).as_millis(), 2000);
        r.reset();
        assert_eq!(r.next_failure(true).as_millis(), 250);
        limits.jitter_percent = 50;
        let base = Duration::from_secs(30);
        assert_eq!(limits.jitter(base, 0), Duration::from_secs(15));
        assert_eq!(limits.jitter(base, u32::MAX), Duration::from_secs(45));
        limits.jitter_percent = u32::MAX;
        assert!(limits.jitter(Duration::MAX, u32::MAX) <= Duration::MAX);
        limits.poll_min = Duration::from_secs(60);
        limits.poll_max = Duration::from_secs(10);
        assert_eq!(limits.poll_wait(Some(1)), Duration::from_secs(60));
    }

    #[test]
    fn polls_wait_what_the_server_says_within_one_second_and_fifteen_minutes() {
        let limits = Limits::default();
        let (min, max) = (limits.poll_min, limits.poll_max);
        let poll_wait = |ms| limits.poll_wait(ms);
        assert_eq!(poll_wait(None), limits.poll_default);
        assert_eq!(poll_wait(Some(0)), min);
        assert_eq!(poll_wait(Some(999)), min);
        assert_eq!(poll_wait(Some(1000)), min);
        assert_eq!(poll_wait(Some(1001)), Duration::from_millis(1001));
        assert_eq!(poll_wait(Some(900_000)), max);
        assert_eq!(poll_wait(Some(900_001)), max);
        assert_eq!(poll_wait(Some(u64::MAX)), max);
    }

    #[test]
    fn a_poll_waits_1_second_to_15_minutes_after_its_jitter() {
        let limits = Limits::default();
        for ms in [
            None,
            Some(0),
            Some(1000),
            Some(1050),
            Some(899_000),
            Some(900_000),
        ] {
            for random in [0, u32::MAX / 2, u32::MAX] {
                let wait = limits.poll_after(ms, random);
                assert!(
                    (Duration::from_secs(1)..=Duration::from_secs(900)).contains(&wait),
                    "{ms:?} {random}: {wait:?}"
                );
            }
        }
        assert_eq!(limits.poll_after(Some(1000), 0), Duration::from_secs(1));
        assert_eq!(
            limits.poll_after(Some(900_000), u32::MAX),
            Duration::from_secs(900)
        );
        assert_eq!(limits.poll_after(None, 0), Duration::from_secs(27));
    }

    #[test]
    fn an_absurd_wait_saturates_instead_of_panicking() {
        let now = Instant::now();
        let far = later(now, Duration::MAX);
        assert!(far > now + Duration::from_secs(100 * 365 * 24 * 3600));
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let limits = Limits::default();
        let jitter = |wait, random| limits.jitter(wait, random);
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
