//! The reference's Connections table.

use mcp_wire::log_text;
use tracing::Level;

use super::line::line;
use crate::telemetry::log::Json;

/// Why a server is dialed when it is not the first dial of the process (`reason` of
/// `mcp.connect` and `mcp.connect.fail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dial {
    /// A server that was down at start answered.
    Joined,
    /// A reload added or changed it.
    Reload,
    /// It lost its session.
    SessionLost,
}

impl Dial {
    fn as_str(self) -> &'static str {
        match self {
            Self::Joined => "joined",
            Self::Reload => "reload",
            Self::SessionLost => "session_lost",
        }
    }
}

/// Why a connection was closed (`reason` of `mcp.disconnect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disconnect {
    /// A reload removed or changed the server (info).
    Reload,
    /// The server lost the session (warn).
    SessionLost,
}

/// `mcp.connect`: a connection is made, with the protocol revision and the count of tools;
/// `reason` when it is not the first dial.
pub(crate) fn connect(
    instance: &str,
    server: &str,
    protocol: &str,
    tools: usize,
    reason: Option<Dial>,
) {
    line!(
        INFO,
        "mcp.connect",
        instance,
        server = server,
        protocol = protocol,
        tools = tools as u64,
        reason = reason.map(Dial::as_str),
    );
}

/// `mcp.connect.fail`: a dial failed; `reason` when it is not the first dial.
pub(crate) fn connect_fail(instance: &str, server: &str, err: &str, reason: Option<Dial>) {
    line!(
        WARN,
        "mcp.connect.fail",
        instance,
        server = server,
        err = log_text(err),
        reason = reason.map(Dial::as_str),
    );
}

/// `mcp.disconnect`: a connection was closed; info for a reload, warn for a lost session.
pub(crate) fn disconnect(instance: &str, server: &str, reason: Disconnect) {
    let (level, reason) = match reason {
        Disconnect::Reload => (Level::INFO, "reload"),
        Disconnect::SessionLost => (Level::WARN, "session_lost"),
    };
    line!(
        dyn level,
        "mcp.disconnect",
        instance,
        server = server,
        reason = reason
    );
}

/// `mcp.joined`: a server that was down at start joined.
pub(crate) fn joined(instance: &str, server: &str) {
    line!(INFO, "mcp.joined", instance, server = server);
}

/// `mcp.join.refused`: a joining server answered, but its tools could not be listed (`err`,
/// the one entry of `errors`).
pub(crate) fn join_refused(instance: &str, server: &str, err: &str) {
    let errors = Json(serde_json::Value::from(vec![log_text(err)]));
    line!(
        WARN,
        "mcp.join.refused",
        instance,
        server = server,
        errors = tracing::field::debug(errors),
    );
}

/// `mcp.tool.dropped`: the listing left a tool out, and why.
pub(crate) fn tool_dropped(instance: &str, server: &str, tool: &str, reason: &str) {
    line!(
        WARN,
        "mcp.tool.dropped",
        instance,
        server = server,
        tool = log_text(tool),
        reason = log_text(reason),
    );
}

/// `mcp.tools_changed`: the server said its tool list changed; it takes effect at the next
/// reload (`note`).
pub(crate) fn tools_changed(instance: &str, server: &str) {
    line!(
        INFO,
        "mcp.tools_changed",
        instance,
        server = server,
        note = "takes effect at the next reload",
    );
}

/// `mcp.tools_refresh_failed`: listing the tools again failed (`err` names the server); the
/// current catalogue stays.
pub(crate) fn tools_refresh_failed(instance: &str, server: &str, err: &str) {
    line!(
        WARN,
        "mcp.tools_refresh_failed",
        instance,
        err = log_text(&format!("{server}: {err}")),
    );
}

/// `mcp.tools_refreshed`: a subagent session listed its servers' tools again; `tools` is
/// the size of its catalogue now.
pub(crate) fn tools_refreshed(instance: &str, tools: usize) {
    line!(INFO, "mcp.tools_refreshed", instance, tools = tools);
}

/// `mcp.unsubscribed`: a subscription nothing wants any more was released (reason
/// `unowned`).
pub(crate) fn unsubscribed(instance: &str, server: &str, uri: &str) {
    line!(
        INFO,
        "mcp.unsubscribed",
        instance,
        server = server,
        uri = log_text(uri),
        reason = "unowned",
    );
}

/// `mcp.unsubscribe.fail`: releasing a subscription nothing wants failed; it is tried again.
pub(crate) fn unsubscribe_fail(instance: &str, server: &str, uri: &str, err: &str) {
    line!(
        WARN,
        "mcp.unsubscribe.fail",
        instance,
        server = server,
        uri = log_text(uri),
        reason = "unowned",
        err = log_text(err),
    );
}
