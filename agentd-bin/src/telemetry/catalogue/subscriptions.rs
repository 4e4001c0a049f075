//! The reference's Subscriptions table: the instruction's rows (`instruction.*`).

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
