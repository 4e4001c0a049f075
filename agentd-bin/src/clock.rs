//! The wall clock and the randomness the daemon's drivers read; the cores are handed them.
//! [`Clock`] is the own tools' and the human gate's: tokio's clock, anchored on the wall
//! clock, its waits ending at shutdown.

use std::time::{Duration, SystemTime};

use agentd_tools::wait::{Clock as WaitClock, Woke};
use tokio_util::sync::CancellationToken;

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

/// Time as tokio's clock tells it (so that `tokio::time::pause()` moves it), anchored on the
/// wall clock when made; its waits end when `shutdown` is cancelled.
#[derive(Debug)]
pub(crate) struct Clock {
    shutdown: CancellationToken,
    wall_ms: i64,
    start: tokio::time::Instant,
}

impl Clock {
    /// A clock whose waits end at `shutdown`.
    pub(crate) fn new(shutdown: CancellationToken) -> Self {
        Self {
            shutdown,
            wall_ms: wall_ms(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl WaitClock for Clock {
    fn now_ms(&self) -> i64 {
        let since = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.wall_ms.saturating_add(since)
    }

    async fn sleep(&self, duration: Duration) -> Woke {
        tokio::select! {
            () = tokio::time::sleep(duration) => Woke::Elapsed,
            () = self.shutdown.cancelled() => Woke::ShuttingDown,
        }
    }
}
