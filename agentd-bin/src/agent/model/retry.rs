//! When a failed completion is asked again, with no IO: which failures are retried, how
//! long to wait (the server's `Retry-After`, else a backoff with jitter, the randomness
//! passed in), and when to give up (tries spent, or the wait would reach the deadline).
//!
//! ```text
//! 429, 5xx, no connection   retried: after Retry-After (seconds or an HTTP date), else
//!                           first · 2^(n-1) (at most max), jittered to half of it up to all
//! any other status          not retried
//! ```

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// The retry policy of the model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Tries at most, the first included (default 6).
    pub(crate) attempts: u32,
    /// The backoff after the first failure, doubled after each one (default 1 s).
    pub(crate) first: Duration,
    /// The longest backoff (default 30 s). A server's `Retry-After` is taken as it is,
    /// within the deadline.
    pub(crate) max: Duration,
}

impl Default for Retry {
    /// 6 tries, waits from 1 s doubling to 30 s.
    fn default() -> Self {
        Self {
            attempts: 6,
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

/// Whether an answer of HTTP `status` is asked again: 429 Too Many Requests and every 5xx.
pub(crate) fn is_retried(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The wait a `Retry-After` value asks for, `now` being the wall clock: whole seconds, or
/// an HTTP date (a date past is no wait). `None` when it is neither.
pub(crate) fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits past u64 ask for longer than any deadline.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// The retries of one completion: how many failures so far.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    policy: Retry,
    failures: u32,
}

impl Backoff {
    /// A completion that has not failed yet.
    pub(crate) fn new(policy: Retry) -> Self {
        Self {
            policy,
            failures: 0,
        }
    }

    /// After one more failure at `now`: when to try again, or `None` to give up — the
    /// tries are spent, or the next would not start before `deadline`. The wait is
    /// `retry_after` when the server named one, else the backoff moved by `random` (any
    /// `u32`: 0 waits half the backoff, `u32::MAX` all of it).
    pub(crate) fn next(
        &mut self,
        now: Instant,
        deadline: Instant,
        retry_after: Option<Duration>,
        random: u32,
    ) -> Option<Instant> {
        self.failures = self.failures.saturating_add(1);
        if self.failures >= self.policy.attempts {
            return None;
        }
        let wait = retry_after.unwrap_or_else(|| jitter(self.backoff(), random));
        let at = now.checked_add(wait)?;
        (at < deadline).then_some(at)
    }

    /// The backoff after the failures so far, before jitter.
    fn backoff(&self) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(31);
        self.policy
            .first
            .saturating_mul(1 << doublings)
            .min(self.policy.max)
    }
}

/// `wait` jittered: from half of it (`random` 0) to all of it (`u32::MAX`), evenly.
fn jitter(wait: Duration, random: u32) -> Duration {
    let half = wait / 2;
    let span = (wait - half).as_nanos() * u128::from(random) / u128::from(u32::MAX);
    half + Duration::from_nanos(u64::try_from(span).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn statuses_retried_are_429_and_5xx() {
        for status in [429, 500, 502, 503, 504, 599] {
            assert!(is_retried(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 408, 413, 422, 600] {
            assert!(!is_retried(status), "{status}");
        }
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = SystemTime::UNIX_EPOCH + secs(784_111_777);
        assert_eq!(retry_after("2", now), Some(secs(2)));
        assert_eq!(retry_after(" 120 ", now), Some(secs(120)));
        assert_eq!(retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            retry_after("99999999999999999999999", now),
            Some(secs(u64::MAX))
        );
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
        let date = "Sun, 06 Nov 1994 08:49:47 GMT";
        assert_eq!(retry_after(date, now), Some(secs(10)));
        assert_eq!(
            retry_after("Sunday, 06-Nov-94 08:49:57 GMT", now),
            Some(secs(20))
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO),
            "a date past"
        );
        for bad in ["", "-1", "1.5", "soon", "2s"] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn backoff_doubles_to_its_max_jittered_from_half_to_all() {
        let now = Instant::now();
        let far = now + secs(3600);
        let policy = Retry {
            attempts: 10,
            ..Retry::default()
        };
        let mut most = Backoff::new(policy);
        let waits: Vec<u64> = (0..9)
            .map(|_| (most.next(now, far, None, u32::MAX).unwrap() - now).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30, 30]);
        let mut least = Backoff::new(policy);
        let waits: Vec<u128> = (0..7)
            .map(|_| (least.next(now, far, None, 0).unwrap() - now).as_millis())
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 15000, 15000]);
        let mid = Backoff::new(policy)
            .next(now, far, None, u32::MAX / 2)
            .unwrap()
            - now;
        assert!(mid > Duration::from_millis(700) && mid < Duration::from_millis(800));
    }

    #[test]
    fn a_retry_after_is_taken_as_it_is() {
        let now = Instant::now();
        let mut backoff = Backoff::new(Retry::default());
        let at = backoff.next(now, now + secs(600), Some(secs(90)), 0);
        assert_eq!(
            at,
            Some(now + secs(90)),
            "past the backoff's max, within the deadline"
        );
        let at = backoff.next(now, now + secs(600), Some(Duration::ZERO), 0);
        assert_eq!(at, Some(now));
    }

    #[test]
    fn it_gives_up_when_the_tries_are_spent_or_the_deadline_is_reached() {
        let now = Instant::now();
        let far = now + secs(3600);
        let mut backoff = Backoff::new(Retry::default());
        let tries = (0..10)
            .take_while(|_| backoff.next(now, far, None, 0).is_some())
            .count();
        assert_eq!(tries, 5, "6 tries: 5 retries");
        let mut backoff = Backoff::new(Retry::default());
        assert_eq!(backoff.next(now, now + secs(2), Some(secs(2)), 0), None);
        let mut backoff = Backoff::new(Retry::default());
        assert_eq!(backoff.next(now, now + secs(1), None, u32::MAX), None);
        assert_eq!(
            Backoff::new(Retry::default()).next(now, far, Some(Duration::MAX), 0),
            None,
            "a wait past what the clock holds"
        );
        let none = Retry {
            attempts: 1,
            ..Retry::default()
        };
        assert_eq!(Backoff::new(none).next(now, far, None, 0), None);
    }
}
