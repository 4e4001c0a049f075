//! agentd's own events: the reference's tables have none for them.

use std::net::SocketAddr;

use super::line::line;

/// The events of this module, for the check against the reference's tables.
#[cfg(test)]
pub(super) const NAMES: &[&str] = &["http.listening", "reload.refused", "tool.call"];

/// `http.listening` (info): the daemon's HTTP listener is bound at `addr`.
pub(crate) fn http_listening(instance: &str, addr: SocketAddr) {
    line!(INFO, "http.listening", instance, addr = addr.to_string());
}

/// `reload.refused` (warn): the configuration read at SIGHUP was not taken (`err`, why); the
/// daemon goes on as it was.
pub(crate) fn reload_refused(instance: &str, err: &str) {
    line!(WARN, "reload.refused", instance, err = err);
}

/// `tool.call` (debug): one of agentd's own tools was called by `scope` in `unit`, and came
/// to `outcome` (`ok`, or the error's code). Neither the arguments nor the values are
/// written.
pub(crate) fn tool_call(instance: &str, tool: &str, scope: &str, unit: &str, outcome: &str) {
    line!(
        DEBUG,
        "tool.call",
        instance,
        tool = tool,
        scope = scope,
        unit = unit,
        outcome = outcome
    );
}
