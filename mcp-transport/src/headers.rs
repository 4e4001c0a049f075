//! The HTTP headers an MCP client sets itself, and the check that keeps configuration from
//! setting them.

use mcp_wire::header::PARAM_PREFIX;
use mcp_wire::method;

use crate::Error;

/// The negotiated revision (legacy, after the handshake) or the request's (modern).
pub const MCP_PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
/// The JSON-RPC method (2026-07-28).
pub const MCP_METHOD: &str = "Mcp-Method";
/// `params.name` or `params.uri` of a call, read or prompt (2026-07-28).
pub const MCP_NAME: &str = "Mcp-Name";
/// The legacy session.
pub const MCP_SESSION_ID: &str = "Mcp-Session-Id";
/// Where a resumed legacy stream continues.
pub const LAST_EVENT_ID: &str = "Last-Event-ID";
/// The `Accept` of every POST: both answers a server may give.
pub const ACCEPT_POST: &str = "application/json, text/event-stream";
/// The `Accept` of a legacy GET stream.
pub const ACCEPT_STREAM: &str = "text/event-stream";

/// Headers the client sets itself; configuration may not name them, in any case.
const RESERVED: [&str; 5] = [
    MCP_PROTOCOL_VERSION,
    MCP_METHOD,
    MCP_NAME,
    MCP_SESSION_ID,
    LAST_EVENT_ID,
];

/// Refuses a configured header that the client sets itself: `MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name`, any `Mcp-Param-*`, `Mcp-Session-Id` and `Last-Event-ID`, in any
/// case. The error names the header as configured.
///
/// ```
/// use mcp_transport::headers::check_configured;
///
/// assert!(check_configured("Authorization").is_ok());
/// assert!(check_configured("mcp-param-region").is_err());
/// assert!(check_configured("LAST-EVENT-ID").is_err());
/// ```
pub fn check_configured(name: &str) -> Result<(), Error> {
    let prefix = name.get(..PARAM_PREFIX.len());
    let reserved = RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name))
        || prefix.is_some_and(|p| p.eq_ignore_ascii_case(PARAM_PREFIX));
    match reserved {
        true => Err(Error::ReservedHeader { name: name.into() }),
        false => Ok(()),
    }
}

/// The method whose `Mcp-Name` comes from the params, and the member it comes from.
pub fn name_source(method: &str) -> Option<&'static str> {
    match method {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ => Some("uri"),
        _ => None,
    }
}
