//! The schedules and bounds the supervisor's server tasks keep: a doubling backoff, and the
//! bound on a management call.

use std::time::Duration;

/// The bound on a subscribe, an unsubscribe or a re-dial handshake made by the supervisor.
pub(crate) const MANAGEMENT: Duration = Duration::from_secs(2);

/// A wait that doubles after each failure, up to a ceiling.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The wait after one more failure.
    pub(crate) fn fail(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// Back to the first wait, after a success.
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

/// The error of a management call cut at its bound.
pub(crate) fn unanswered() -> String {
    format!(
        "no answer within {}",
        humantime::format_duration(MANAGEMENT)
    )
}
