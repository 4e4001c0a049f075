//! The schedules and bounds the supervisor's server tasks keep: a doubling backoff
//! ([`Backoff`], the clock's), and the bound on a management call.

use std::time::Duration;

pub(crate) use crate::clock::Backoff;

/// The bound on a subscribe, an unsubscribe or a re-dial handshake made by the supervisor.
pub(crate) const MANAGEMENT: Duration = Duration::from_secs(2);

/// The error of a management call cut at its bound.
pub(crate) fn unanswered() -> String {
    format!(
        "no answer within {}",
        humantime::format_duration(MANAGEMENT)
    )
}
