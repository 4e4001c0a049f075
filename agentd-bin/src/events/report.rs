//! What a binding reports, in the reference's words: its log lines (the MCP Events log
//! table) and its metrics.

use mcp_events::binding::{Binding, Failure, Log, Stats};
use mcp_wire::events::DeliveryMode;
use serde_json::{Value, json};

use super::{Ctx, log};
use crate::log::Level;
use crate::metrics::Metric;

pub(super) fn count<T>(ctx: &Ctx, server: &str, method: &str, answer: &Result<T, Failure>) {
    let outcome = match answer {
        Ok(_) => "ok",
        Err(Failure::Rpc(_)) => "refused",
        Err(_) => "failed",
    };
    ctx.metrics.add(
        Metric::EventsRequests,
        &[("server", server), ("method", method), ("outcome", outcome)],
        1,
    );
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
    let mode = b.mode().map_or("poll", DeliveryMode::as_str);
    let labels = |outcome| {
        [
            ("server", server),
            ("event", event_type.as_str()),
            ("mode", mode),
            ("outcome", outcome),
        ]
    };
    let delta = |now: u64, then: u64| i64::try_from(now.saturating_sub(then)).unwrap_or(i64::MAX);
    for (outcome, now, then) in [
        ("appended", stats.appended, seen.appended),
        ("duplicate", stats.duplicate, seen.duplicate),
        ("rejected", stats.rejected, seen.rejected),
        (
            "schema_mismatch",
            stats.schema_mismatch,
            seen.schema_mismatch,
        ),
        (
            "refused_pressure",
            stats.refused_pressure,
            seen.refused_pressure,
        ),
    ] {
        ctx.metrics
            .add(Metric::Events, &labels(outcome), delta(now, then));
    }
    for ((method, outcome), n) in &stats.requests {
        let then = seen
            .requests
            .get(&(*method, *outcome))
            .copied()
            .unwrap_or(0);
        ctx.metrics.add(
            Metric::EventsRequests,
            &[("server", server), ("method", method), ("outcome", outcome)],
            delta(*n, then),
        );
    }
    for (cause, n) in &stats.gaps {
        let then = seen.gaps.get(cause).copied().unwrap_or(0);
        ctx.metrics.add(
            Metric::EventGaps,
            &[
                ("server", server),
                ("event", event_type.as_str()),
                ("cause", cause),
            ],
            delta(*n, then),
        );
    }
    let now_evicted = b.dedup_evicted();
    ctx.metrics.add(
        Metric::DedupEvicted,
        &[("server", server), ("event", event_type.as_str())],
        delta(now_evicted, *evicted),
    );
    *evicted = now_evicted;
    if let Some(lag) = stats.lag_ms {
        ctx.metrics.set(
            Metric::EventLag,
            &[("server", server), ("event", event_type.as_str())],
            lag,
        );
    }
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
