//! The reference's Subscriptions table: the workflow starts' rows (`start.subscribe.*`), the
//! instruction's (`instruction.*`) and the workflow waits' (`wait.*`).

use mcp_wire::log_text;

use super::line::line;

/// Which subscribe start of which workflow a `start.subscribe.*` line is of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartOf<'a> {
    /// The instance.
    pub(crate) instance: &'a str,
    /// The workflow.
    pub(crate) workflow: &'a str,
    /// The start's node.
    pub(crate) node: &'a str,
    /// Its server.
    pub(crate) server: &'a str,
    /// Its resource.
    pub(crate) uri: &'a str,
}

/// `start.subscribe.armed` (info): a subscribe start is subscribed (`reason`: `start`,
/// `defined`, `reload`).
pub(crate) fn start_armed(of: StartOf<'_>, reason: &str) {
    line!(
        INFO,
        "start.subscribe.armed",
        of.instance,
        workflow = log_text(of.workflow),
        node = log_text(of.node),
        server = of.server,
        uri = log_text(of.uri),
        reason = reason,
    );
}

/// `start.subscribe.unsupported` (error): the start's server offers no subscriptions
/// (`err`); the start can never fire.
pub(crate) fn start_unsupported(of: StartOf<'_>, err: &str) {
    line!(
        ERROR,
        "start.subscribe.unsupported",
        of.instance,
        workflow = log_text(of.workflow),
        node = log_text(of.node),
        server = of.server,
        uri = log_text(of.uri),
        err = log_text(err),
    );
}

/// `start.subscribe.fail` (warn): subscribing the start failed in a way that may pass
/// (`err`); the server's task asks again on the subscription schedule.
pub(crate) fn start_fail(of: StartOf<'_>, err: &str) {
    line!(
        WARN,
        "start.subscribe.fail",
        of.instance,
        workflow = log_text(of.workflow),
        node = log_text(of.node),
        server = of.server,
        uri = log_text(of.uri),
        err = log_text(err),
    );
}

/// `start.subscribe.no_server` (warn): the start's server is not connected (or not
/// configured); it is armed once the server is.
pub(crate) fn start_no_server(of: StartOf<'_>) {
    line!(
        WARN,
        "start.subscribe.no_server",
        of.instance,
        workflow = log_text(of.workflow),
        node = log_text(of.node),
        server = log_text(of.server),
    );
}

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
