//! The crate's error type.

use std::fmt;

/// What can go wrong in the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}

impl std::error::Error for Error {}
