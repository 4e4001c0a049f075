//! The reference's Listens table (2026-07-28).

use std::time::Duration;

use mcp_negotiate::listen::EndReason;
use mcp_wire::log_text;

use super::line::line;
use crate::telemetry::log::Json;

/// `mcp.listen.ended` (info, reason `idle`): a quiet listen reached its idle limit, `idle`,
/// and is opened again.
pub(crate) fn idle(instance: &str, server: &str, idle: Duration, retry_ms: u64) {
    let detail = format!("nothing heard for {}", humantime::format_duration(idle));
    line!(
        INFO,
        "mcp.listen.ended",
        instance,
        server = server,
        reason = EndReason::Idle.as_str(),
        detail = detail,
        retry_ms = retry_ms,
    );
}

/// `mcp.listen.ended` (warn): a listen ended for another reason (the server closed it, or
/// the client fell behind).
pub(crate) fn ended(instance: &str, server: &str, reason: EndReason, retry_ms: u64) {
    line!(
        WARN,
        "mcp.listen.ended",
        instance,
        server = server,
        reason = reason.as_str(),
        retry_ms = retry_ms,
    );
}

/// `mcp.listen.resumed`: a listen is held again.
pub(crate) fn resumed(instance: &str, server: &str) {
    line!(INFO, "mcp.listen.resumed", instance, server = server);
}

/// `mcp.listen.narrowed`: the server acknowledged a listen without the URIs `dropped`.
pub(crate) fn narrowed(instance: &str, server: &str, dropped: &[String]) {
    let dropped: Vec<String> = dropped.iter().map(|u| log_text(u)).collect();
    line!(
        WARN,
        "mcp.listen.narrowed",
        instance,
        server = server,
        dropped = tracing::field::debug(Json(dropped.into())),
    );
}

/// `mcp.listen.unavailable`: a listen failed, retried in `retry_ms`.
pub(crate) fn unavailable(instance: &str, server: &str, reason: &str, retry_ms: u64) {
    unavailable_line(instance, server, reason, Some(retry_ms));
}

/// `mcp.listen.unavailable` of a listen the server refused outright (`code`): never asked
/// for again, so there is no retry.
pub(crate) fn refused(instance: &str, server: &str, code: i64) {
    let reason = format!("refused ({code}); not asked for again");
    unavailable_line(instance, server, &reason, None);
}

fn unavailable_line(instance: &str, server: &str, reason: &str, retry_ms: Option<u64>) {
    let retry_ms = Json(retry_ms.into());
    line!(
        WARN,
        "mcp.listen.unavailable",
        instance,
        server = server,
        reason = log_text(reason),
        retry_ms = tracing::field::debug(retry_ms),
    );
}

/// `mcp.listen.flags_refused`: the server did not acknowledge the list_changed `flags`.
pub(crate) fn flags_refused(instance: &str, server: &str, flags: &[&str]) {
    line!(
        WARN,
        "mcp.listen.flags_refused",
        instance,
        server = server,
        reason = format!("not acknowledged: {}", flags.join(", ")),
    );
}
