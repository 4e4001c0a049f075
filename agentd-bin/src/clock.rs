//! The wall clock and the randomness the daemon's drivers read (the cores are handed them),
//! the doubling backoff of their retry schedules ([`Backoff`]), and the clock of agentd's own
//! tools ([`Clock`]).

use std::time::{Duration, SystemTime};

/// The Unix time in milliseconds.
pub(crate) fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A random `u32` for jitter, from the operating system's CSPRNG (0 if it fails: the
/// shortest wait).
pub(crate) fn random() -> u32 {
    getrandom::u32().unwrap_or_default()
}

/// `N` random bytes from the operating system's CSPRNG (ids and trace ids; zeros if it
/// fails).
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0; N];
    let _ = getrandom::fill(&mut bytes);
    bytes
}

/// The drivers' monotonic time, as the cores take it: tokio's clock, so that a test under
/// `tokio::time::pause()` moves it.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Asking again for a resource subscription that failed in a way that may pass, or releasing
/// it again: 1 s, doubling to 30 s. The held server's own schedule, and that of every owner
/// asking after it.
pub(crate) const SUBSCRIBE_RETRY: Backoff =
    Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

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

/// Time as tokio's clock tells it (so that `tokio::time::pause()` moves it), anchored on the
/// wall clock when made; its waits end when `shutdown` is cancelled.
#[derive(Debug)]
pub(crate) struct Clock {
    shutdown: tokio_util::sync::CancellationToken,
    wall_ms: i64,
    start: tokio::time::Instant,
}

impl Clock {
    /// A clock whose waits end at `shutdown`.
    pub(crate) fn new(shutdown: tokio_util::sync::CancellationToken) -> Self {
        Self {
            shutdown,
            wall_ms: wall_ms(),
            start: tokio::time::Instant::now(),
        }
    }

    /// The instant of Unix millisecond `ms` on tokio's clock (now, when it is past).
    pub(crate) fn instant(&self, ms: i64) -> tokio::time::Instant {
        use agentd_tools::wait::Clock as _;
        // Past a year, a year: a timer that far is looked at again long before.
        const YEAR_MS: u64 = 365 * 24 * 3600 * 1000;
        let ahead = u64::try_from(ms.saturating_sub(self.now_ms())).unwrap_or(0);
        tokio::time::Instant::now() + Duration::from_millis(ahead.min(YEAR_MS))
    }
}

impl agentd_tools::wait::Clock for Clock {
    fn now_ms(&self) -> i64 {
        let since = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.wall_ms.saturating_add(since)
    }

    async fn sleep(&self, duration: Duration) -> agentd_tools::wait::Woke {
        tokio::select! {
            () = tokio::time::sleep(duration) => agentd_tools::wait::Woke::Elapsed,
            () = self.shutdown.cancelled() => agentd_tools::wait::Woke::ShuttingDown,
        }
    }
}
