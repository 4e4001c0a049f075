//! What a binding reports, in the reference's words: its log lines (the MCP Events log
//! table) and its metrics.

use mcp_events::binding::{Binding, Failure, Log, Stats};
use mcp_wire::events::DeliveryMode;
use serde_json::{Value, json};

use super::{Ctx, log};
use crate::telemetry::log::Level;
use crate::telemetry::metrics::{Answered, Outcome};

/// Counts an `events/*` request (`method`) to `server` by what it came to: every request
/// the daemon sends, of every method, is counted here.
pub(super) fn count<T>(ctx: &Ctx, server: &str, method: &'static str, answer: &Result<T, Failure>) {
    let outcome = match answer {
        Ok(_) => Answered::Ok,
        // A JSON-RPC error, whatever the HTTP status that carried it.
        Err(Failure::Rpc(_)) => Answered::Refused,
        // No answer: the transport, the bound, or a status without a JSON-RPC error.
        Err(_) => Answered::Failed,
    };
    ctx.metrics.request(server, method, outcome);
}

/// The binding's log lines, and what changed in its counters since `seen`.
pub(super) fn report(
    ctx: &Ctx,
    server: &str,
    b: &mut Binding,
    seen: &mut Stats,
    evicted: &mut u64,
) {
    let event_type = b.config().event.clone();
    while let Some(line) = b.poll_log() {
        // A line this build does not know (`Log` is non-exhaustive) is not one of the
        // reference's: left out.
        let Some((level, name, fields)) = line_of(line) else {
            continue;
        };
        let mut all = vec![("server", json!(server)), ("event_type", json!(event_type))];
        all.extend(fields);
        log(ctx, level, name, &all);
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
        ctx.metrics.gaps(series, cause, n.saturating_sub(then));
    }
    let now_evicted = b.dedup_evicted();
    ctx.metrics
        .dedup_evicted(series, now_evicted.saturating_sub(*evicted));
    *evicted = now_evicted;
    *seen = stats;
}

/// A log line: its level, its event name, and its fields after `server` and `event_type`.
type Line = (Level, &'static str, Vec<(&'static str, Value)>);

/// The reference's MCP Events log table.
fn line_of(line: Log) -> Option<Line> {
    Some(match line {
        Log::Armed {
            mode,
            cursor_present,
        } => (
            Level::Info,
            "mcp.events.armed",
            vec![
                ("mode", json!(mode.as_str())),
                ("cursor_present", json!(cursor_present)),
            ],
        ),
        Log::Refused { reason, detail } => (
            Level::Error,
            "mcp.events.refused",
            vec![
                ("reason", json!(reason.as_str())),
                ("detail", json!(detail)),
            ],
        ),
        Log::PollFailed {
            code,
            err,
            retry_ms,
        } => {
            let level = match code {
                Some(-32020) => Level::Error,
                _ => Level::Warn,
            };
            (
                level,
                "mcp.events.poll.fail",
                vec![
                    ("code", json!(code)),
                    ("err", json!(err)),
                    ("retry_ms", json!(retry_ms)),
                ],
            )
        }
        Log::Paused { cause, detail } => (
            Level::Warn,
            "mcp.events.paused",
            vec![("cause", json!(cause.as_str())), ("detail", json!(detail))],
        ),
        Log::Resumed { cause } => (
            Level::Info,
            "mcp.events.resumed",
            vec![("cause", json!(cause.as_str()))],
        ),
        Log::Gap { cause } => (Level::Warn, "mcp.events.gap", vec![("cause", json!(cause))]),
        Log::Rejected { event_id, cause } => (
            Level::Warn,
            "mcp.events.rejected",
            vec![("event_id", json!(event_id)), ("cause", json!(cause))],
        ),
        Log::SchemaMismatch { event_id } => (
            Level::Warn,
            "mcp.events.schema_mismatch",
            vec![("event_id", json!(event_id))],
        ),
        Log::ArmFailed {
            code,
            err,
            retry_ms,
        } => {
            let level = match code {
                Some(_) => Level::Error,
                None => Level::Warn,
            };
            (
                level,
                "mcp.events.arm.fail",
                vec![("err", json!(err)), ("retry_ms", json!(retry_ms))],
            )
        }
        Log::CallbackFailed { reason, url } => (
            Level::Error,
            "mcp.events.callback_failed",
            vec![("reason", json!(reason)), ("url", json!(url))],
        ),
        Log::ModeChanged { from, to, cause } => (
            Level::Warn,
            "mcp.events.mode_changed",
            vec![
                ("from", json!(from.as_str())),
                ("to", json!(to.as_str())),
                ("cause", json!(cause)),
            ],
        ),
        Log::DeliverySuspended { last_error, active } => (
            Level::Warn,
            "mcp.events.delivery_suspended",
            vec![("last_error", json!(last_error)), ("active", json!(active))],
        ),
        Log::Throttled { retry_after_ms } => (
            Level::Info,
            "mcp.events.throttled",
            vec![("retry_after_ms", json!(retry_after_ms))],
        ),
        Log::Terminated { code } => (
            Level::Error,
            "mcp.events.terminated",
            vec![("code", json!(code))],
        ),
        _ => return None,
    })
}
