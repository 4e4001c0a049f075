//! The engine's bounds on the runs it holds: how many run at once, and how long an ended run
//! is kept.

use std::time::Duration;

use crate::config::{RUN_CONCURRENCY, RUN_RETENTION};

/// How often ended runs past their retention are pruned (and at the engine's start).
pub(super) const PRUNE_EVERY_MS: i64 = 3_600_000;

/// The engine's bounds on its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Runs under way at once (running, paused, or set back to what the store keeps),
    /// [`RUN_CONCURRENCY`] unless configured: `workflow.run` past it is refused
    /// (`too_many_runs`), and a start past it waits for room (an event start's position is
    /// not moved, a subscribe start is held in the store, its change one a start).
    pub(crate) running_max: usize,
    /// How long a run that ended is kept, with its steps, before it is pruned from the store
    /// ([`RUN_RETENTION`] unless configured): a run ended exactly that long ago is kept, one a
    /// millisecond older is pruned.
    pub(crate) retention: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            running_max: RUN_CONCURRENCY,
            retention: RUN_RETENTION,
        }
    }
}

impl Bounds {
    /// The earliest end (Unix ms) of a run kept at `now_ms`: one that ended before it is
    /// pruned.
    pub(super) fn kept_since(&self, now_ms: i64) -> i64 {
        let retention = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        now_ms.saturating_sub(retention)
    }
}
