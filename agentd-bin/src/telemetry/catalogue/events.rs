//! The reference's MCP Events table. A binding's lines name its server and event type
//! ([`Of`]) first.

use mcp_events::binding::{Gap, ModeChange, Pause, Refusal, Rejection};
use mcp_wire::events::DeliveryMode;
use mcp_wire::log_text;
use tracing::Level;

use super::line::line;
use crate::telemetry::log::Json;

/// The binding a line is about: its instance, server and event type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Of<'a> {
    pub(crate) instance: &'a str,
    pub(crate) server: &'a str,
    pub(crate) event_type: &'a str,
}

/// Why a runtime subscription was made or released (`reason` of `mcp.events.subscribed` and
/// `mcp.events.unsubscribed`, and of their audit records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subscription {
    /// Its owner asked.
    Requested,
    /// Its lifetime ended.
    Expired,
    /// Its server is no longer configured.
    ServerRemoved,
    /// Its owner's grant is gone.
    GrantRemoved,
    /// A configured binding now is the same one.
    Configured,
    /// Past its owner's or its server's limits.
    Limits,
}

impl Subscription {
    /// The word the log lines and the audit records say.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Expired => "expired",
            Self::ServerRemoved => "server_removed",
            Self::GrantRemoved => "grant_removed",
            Self::Configured => "configured",
            Self::Limits => "limits",
        }
    }
}

/// `mcp.events.listed`: a server's event types were listed (`types`, how many).
pub(crate) fn listed(instance: &str, server: &str, types: usize) {
    line!(
        INFO,
        "mcp.events.listed",
        instance,
        server = server,
        types = types as u64,
    );
}

/// `mcp.events.list.fail`: listing failed; retried in `retry_ms`.
pub(crate) fn list_fail(instance: &str, server: &str, err: &str, retry_ms: u64) {
    line!(
        WARN,
        "mcp.events.list.fail",
        instance,
        server = server,
        err = log_text(err),
        retry_ms = retry_ms,
    );
}

/// `mcp.events.list_changed`: the server said its event types changed.
pub(crate) fn list_changed(instance: &str, server: &str) {
    line!(INFO, "mcp.events.list_changed", instance, server = server);
}

/// `mcp.events.armed`: a binding polls, or its webhook subscription is live.
pub(crate) fn armed(of: Of<'_>, mode: DeliveryMode, cursor_present: bool) {
    line!(
        INFO,
        "mcp.events.armed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        mode = mode.as_str(),
        cursor_present = cursor_present,
    );
}

/// `mcp.events.arm.fail`: arming failed, retried in `retry_ms`; error when the server
/// refused (a JSON-RPC `code`), else warn.
pub(crate) fn arm_fail(of: Of<'_>, code: Option<i64>, err: &str, retry_ms: u64) {
    let level = match code {
        Some(_) => Level::ERROR,
        None => Level::WARN,
    };
    line!(
        dyn level,
        "mcp.events.arm.fail",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        err = log_text(err),
        retry_ms = retry_ms,
    );
}

/// `mcp.events.refused`: the binding cannot work.
pub(crate) fn refused(of: Of<'_>, reason: Refusal, detail: &str) {
    line!(
        ERROR,
        "mcp.events.refused",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        reason = reason.as_str(),
        detail = detail,
    );
}

/// `mcp.events.poll.fail`: a poll failed, retried in `retry_ms`; error for -32020, else
/// warn.
pub(crate) fn poll_fail(of: Of<'_>, code: Option<i64>, err: &str, retry_ms: u64) {
    let level = match code {
        Some(-32020) => Level::ERROR,
        _ => Level::WARN,
    };
    line!(
        dyn level,
        "mcp.events.poll.fail",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        code = tracing::field::debug(Json(code.into())),
        err = err,
        retry_ms = retry_ms,
    );
}

/// `mcp.events.paused`: intake is held for `cause`.
pub(crate) fn paused(of: Of<'_>, cause: Pause, detail: &str) {
    line!(
        WARN,
        "mcp.events.paused",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        cause = cause.as_str(),
        detail = detail,
    );
}

/// `mcp.events.resumed`: a binding paused for `cause` resumed.
pub(crate) fn resumed(of: Of<'_>, cause: Pause) {
    line!(
        INFO,
        "mcp.events.resumed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        cause = cause.as_str(),
    );
}

/// `mcp.events.gap`: a loss the wire shows.
pub(crate) fn gap(of: Of<'_>, cause: Gap) {
    line!(
        WARN,
        "mcp.events.gap",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        cause = cause.as_str(),
    );
}

/// `mcp.events.rejected`: an occurrence was not appended; the cursor moves past it.
pub(crate) fn rejected(of: Of<'_>, event_id: &str, cause: Rejection) {
    line!(
        WARN,
        "mcp.events.rejected",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        event_id = log_text(event_id),
        cause = cause.as_str(),
    );
}

/// `mcp.events.schema_mismatch`: appended with `schema_ok: false`.
pub(crate) fn schema_mismatch(of: Of<'_>, event_id: &str) {
    line!(
        WARN,
        "mcp.events.schema_mismatch",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        event_id = event_id,
    );
}

/// `mcp.events.subscribed`: a runtime subscription was made for `owner`.
pub(crate) fn subscribed(of: Of<'_>, owner: &str, reason: Subscription, subscription: &str) {
    line!(
        INFO,
        "mcp.events.subscribed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        owner = owner,
        reason = reason.as_str(),
        subscription = subscription,
    );
}

/// `mcp.events.unsubscribed`: a runtime subscription of `owner` was released.
pub(crate) fn unsubscribed(of: Of<'_>, owner: &str, reason: Subscription, subscription: &str) {
    line!(
        INFO,
        "mcp.events.unsubscribed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        owner = owner,
        reason = reason.as_str(),
        subscription = subscription,
    );
}

/// `mcp.events.removed` (reason `reload`): a reload dropped the binding; its records are
/// deleted.
pub(crate) fn removed(of: Of<'_>) {
    line!(
        INFO,
        "mcp.events.removed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        reason = "reload",
    );
}

/// `mcp.events.terminated`: the server ended the webhook subscription with `code`.
pub(crate) fn terminated(of: Of<'_>, code: i64) {
    line!(
        ERROR,
        "mcp.events.terminated",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        code = code,
    );
}

/// `mcp.events.delivery_suspended`: the server reported failed deliveries.
pub(crate) fn delivery_suspended(of: Of<'_>, last_error: &str, active: bool) {
    line!(
        WARN,
        "mcp.events.delivery_suspended",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        last_error = last_error,
        active = active,
    );
}

/// `mcp.events.throttled`: the server throttles deliveries (`retry_after_ms`, `null` when it
/// says none).
pub(crate) fn throttled(of: Of<'_>, retry_after_ms: Option<u64>) {
    line!(
        INFO,
        "mcp.events.throttled",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        retry_after_ms = tracing::field::debug(Json(retry_after_ms.into())),
    );
}

/// `mcp.events.mode_changed`: the binding moved to the next delivery mode.
pub(crate) fn mode_changed(of: Of<'_>, from: DeliveryMode, to: DeliveryMode, cause: ModeChange) {
    line!(
        WARN,
        "mcp.events.mode_changed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        from = from.as_str(),
        to = to.as_str(),
        cause = cause.as_str(),
    );
}

/// `mcp.events.callback_failed`: the server could not use the webhook URL.
pub(crate) fn callback_failed(of: Of<'_>, reason: &str, url: &str) {
    line!(
        ERROR,
        "mcp.events.callback_failed",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        reason = reason,
        url = url,
    );
}

/// `mcp.events.hook.denied`: a webhook delivery failed its signature check.
pub(crate) fn hook_denied(of: Of<'_>, reason: &str) {
    line!(
        WARN,
        "mcp.events.hook.denied",
        of.instance,
        server = of.server,
        event_type = of.event_type,
        reason = reason,
    );
}

/// `mcp.events.hook.unsaved`: the stream head was not saved; the delivery is answered 503.
pub(crate) fn hook_unsaved(instance: &str, err: &str) {
    line!(WARN, "mcp.events.hook.unsaved", instance, err = err);
}

/// `mcp.events.index.failed`: the record of the runtime subscriptions (`subscriptions`, how
/// many) could not be saved.
pub(crate) fn index_failed(instance: &str, subscriptions: usize, err: &str) {
    line!(
        WARN,
        "mcp.events.index.failed",
        instance,
        subscriptions = subscriptions as u64,
        err = log_text(err),
    );
}
