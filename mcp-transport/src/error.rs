//! The crate's error type.

use std::fmt;

/// What can go wrong in the transport.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An event-stream event grew past its bound; the stream cannot be read further.
    EventTooLarge {
        /// The bound, in bytes.
        limit: usize,
    },
    /// The server's `Mcp-Session-Id` holds a byte outside visible ASCII (0x21 to 0x7E), or is
    /// empty.
    InvalidSessionId,
    /// A configured header names a header the client sets itself.
    ReservedHeader {
        /// The header, as configured.
        name: String,
    },
    /// A configured header name or value is not valid in HTTP.
    InvalidHeader {
        /// The header, as configured.
        name: String,
    },
    /// A configured root certificate is not a usable DER certificate.
    InvalidRoot {
        /// Why.
        detail: String,
    },
    /// The endpoint is not an `http` or `https` URL.
    InvalidUrl {
        /// The URL, as given.
        url: String,
    },
    /// The server could not be reached (connection refused, DNS, TLS handshake).
    Unreachable {
        /// What failed.
        detail: String,
    },
    /// The server said nothing for the whole silence bound.
    Silent {
        /// The bound, in milliseconds.
        after_ms: u64,
    },
    /// The connection broke while an answer was being read.
    Broken {
        /// What failed.
        detail: String,
    },
    /// The answer failed as a whole (a status without a JSON-RPC error, a content type, a
    /// body over its bound, a malformed body).
    Reply(crate::reply::Failure),
    /// A message on a stream is malformed.
    Malformed(mcp_wire::Error),
    /// A stream ended before the response to its request, and could not be resumed.
    Ended,
    /// A 404 to a request that carried the legacy session: the session is gone, and the
    /// request was not served. The connection must send `initialize` again.
    SessionLost,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EventTooLarge { limit } => {
                write!(f, "an event-stream event is over {limit} bytes")
            }
            Self::InvalidSessionId => {
                f.write_str("the server's Mcp-Session-Id is not visible ASCII")
            }
            Self::ReservedHeader { name } => write!(
                f,
                "header {name:?} is set by the MCP client itself and cannot be configured"
            ),
            Self::InvalidHeader { name } => write!(f, "header {name:?} is not a valid HTTP header"),
            Self::InvalidRoot { detail } => write!(f, "invalid root certificate: {detail}"),
            Self::InvalidUrl { url } => write!(f, "{url:?} is not an http(s) URL"),
            Self::Unreachable { detail } => write!(f, "server unreachable: {detail}"),
            Self::Silent { after_ms } => write!(f, "no answer for {after_ms} ms"),
            Self::Broken { detail } => write!(f, "connection broke: {detail}"),
            Self::Reply(failure) => write!(f, "{failure}"),
            Self::Malformed(e) => write!(f, "malformed message: {e}"),
            Self::Ended => f.write_str("the stream ended before the response"),
            Self::SessionLost => f.write_str("the server lost the session (404)"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Malformed(e) => Some(e),
            _ => None,
        }
    }
}
