//! The wall clock and the randomness the daemon's drivers read; the cores are handed them.

use std::time::SystemTime;

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
