//! The reference's Subscriptions table: the instruction's rows (`instruction.*`) and the
//! workflow waits' (`wait.*`).

use mcp_wire::log_text;

use super::line::line;

/// `instruction.subscribe.unsupported` (info): the instruction's server offers no
/// subscriptions; the instruction `uri` is followed by its refresh alone.
pub(crate) fn instruction_unsupported(instance: &str, server: &str, uri: &str) {
    line!(
        INFO,
        "instruction.subscribe.unsupported",
        instance,
        server = server,
        uri = log_text(uri),
    );
}

/// `instruction.subscribe.fail` (warn): subscribing the instruction `uri` failed (`err`);
/// it is asked for again on the subscription schedule.
pub(crate) fn instruction_fail(instance: &str, server: &str, uri: &str, err: &str) {
    line!(
        WARN,
        "instruction.subscribe.fail",
        instance,
        server = server,
        uri = log_text(uri),
        err = log_text(err),
    );
}

/// `instruction.event` (info): an MCP Events occurrence of `event_type` from `server` was
/// appended into the instruction's stream, and the instruction is read again.
pub(crate) fn instruction_event(instance: &str, server: &str, event_type: &str) {
    line!(
        INFO,
        "instruction.event",
        instance,
        server = server,
        event_type = log_text(event_type),
    );
}

/// `wait.resubscribed` (info): a parked `wait {on: resource}` is subscribed again, after a
/// restart (`reason`: `restart`) or on a server dialed afresh (`reload`).
pub(crate) fn wait_resubscribed(instance: &str, server: &str, uri: &str, reason: &str) {
    line!(
        INFO,
        "wait.resubscribed",
        instance,
        server = server,
        uri = log_text(uri),
        reason = reason,
    );
}

/// `wait.resubscribe.fail` (warn): subscribing a parked wait's `uri` again failed in a way
/// that may pass (`err`); the server's task asks again on the subscription schedule.
pub(crate) fn wait_resubscribe_fail(
    instance: &str,
    server: &str,
    uri: &str,
    reason: &str,
    err: &str,
) {
    line!(
        WARN,
        "wait.resubscribe.fail",
        instance,
        server = server,
        uri = log_text(uri),
        reason = reason,
        err = log_text(err),
    );
}

/// What became of the waits a resubscribe could not serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stuck {
    /// This many waits failed: their server is not configured, or offers no subscriptions.
    Failed(usize),
    /// This many waits stay parked: their server is configured but not connected; they are
    /// subscribed once it is.
    Parked(usize),
}

/// `wait.resubscribe.fail` (error): the waits on `uri` failed, or stay parked (`stuck`).
pub(crate) fn wait_resubscribe_stuck(
    instance: &str,
    server: &str,
    uri: &str,
    reason: &str,
    err: &str,
    stuck: Stuck,
) {
    match stuck {
        Stuck::Failed(n) => line!(
            ERROR,
            "wait.resubscribe.fail",
            instance,
            server = server,
            uri = log_text(uri),
            reason = reason,
            err = log_text(err),
            failed = n,
        ),
        Stuck::Parked(n) => line!(
            ERROR,
            "wait.resubscribe.fail",
            instance,
            server = server,
            uri = log_text(uri),
            reason = reason,
            err = log_text(err),
            parked = n,
        ),
    }
}
