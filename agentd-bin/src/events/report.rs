//! What a binding reports, in the reference's words: its log lines (the MCP Events log
//! table) and its metrics.

use mcp_events::binding::{Binding, Failure, Log, Stats};
use mcp_wire::events::DeliveryMode;

use super::shared::Shared;
use crate::telemetry::catalogue::events::{self, Of};
use crate::telemetry::metrics::Outcome;

/// Counts an `events/*` request (`method`) to `server` by what it came to: every request
/// the daemon sends, of every method, is counted here.
pub(super) fn count<T>(
    ctx: &Shared,
    server: &str,
    method: &'static str,
    answer: &Result<T, Failure>,
) {
    ctx.metrics
        .request(server, method, mcp_events::binding::Outcome::of(answer));
}

/// The binding's log lines, and what changed in its counters since `seen`.
pub(super) fn report(
    ctx: &Shared,
    server: &str,
    b: &mut Binding,
    seen: &mut Stats,
    evicted: &mut u64,
) {
    let event_type = b.config().event.clone();
    let of = Of {
        instance: &ctx.instance,
        server,
        event_type: &event_type,
    };
    while let Some(line) = b.poll_log() {
        logged(of, line);
    }
    let stats = b.stats().clone();
    let series = (server, event_type.as_str());
    let mode = b.mode().unwrap_or(DeliveryMode::Poll);
    for (outcome, now, then) in [
        (Outcome::Appended, stats.appended, seen.appended),
        (Outcome::Duplicate, stats.duplicate, seen.duplicate),
        (Outcome::Rejected, stats.rejected, seen.rejected),
        (
            Outcome::SchemaMismatch,
            stats.schema_mismatch,
            seen.schema_mismatch,
        ),
        (
            Outcome::RefusedPressure,
            stats.refused_pressure,
            seen.refused_pressure,
        ),
    ] {
        ctx.metrics
            .occurrences(series, mode, outcome, now.saturating_sub(then));
    }
    for (cause, n) in &stats.gaps {
        let then = seen.gaps.get(cause).copied().unwrap_or(0);
        ctx.metrics.gaps(series, *cause, n.saturating_sub(then));
    }
    let now_evicted = b.dedup_evicted();
    ctx.metrics
        .dedup_evicted(series, now_evicted.saturating_sub(*evicted));
    *evicted = now_evicted;
    *seen = stats;
}

/// The reference's MCP Events table: a line this build does not know (`Log` is
/// non-exhaustive) is not one of the reference's, and is left out.
fn logged(of: Of<'_>, line: Log) {
    match line {
        Log::Armed {
            mode,
            cursor_present,
        } => events::armed(of, mode, cursor_present),
        Log::Refused { reason, detail } => events::refused(of, reason, &detail),
        Log::PollFailed {
            code,
            err,
            retry_ms,
        } => events::poll_fail(of, code, &err, retry_ms),
        Log::Paused { cause, detail } => events::paused(of, cause, &detail),
        Log::Resumed { cause } => events::resumed(of, cause),
        Log::Gap { cause } => events::gap(of, cause),
        Log::Rejected { event_id, cause } => events::rejected(of, &event_id, cause),
        Log::SchemaMismatch { event_id } => events::schema_mismatch(of, &event_id),
        Log::ArmFailed {
            code,
            err,
            retry_ms,
        } => events::arm_fail(of, code, &err, retry_ms),
        Log::CallbackFailed { reason, url } => events::callback_failed(of, &reason, &url),
        Log::ModeChanged { from, to, cause } => events::mode_changed(of, from, to, cause),
        Log::DeliverySuspended { last_error, active } => {
            events::delivery_suspended(of, &last_error, active);
        }
        Log::Throttled { retry_after_ms } => events::throttled(of, retry_after_ms),
        Log::Terminated { code } => events::terminated(of, code),
        _ => {}
    }
}
