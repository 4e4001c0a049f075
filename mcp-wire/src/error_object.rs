//! JSON-RPC error objects, MCP's error codes, and a typed view of the codes a client acts on.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ClientCapabilities;

/// Error codes, as named constants.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Resource not found (legacy; 2026-07-28 uses -32602).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// URL elicitation required (legacy, 2025-11-25).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// HTTP headers do not match the body, or are missing or malformed (2026-07-28).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request did not declare a client capability the server needs (2026-07-28).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The server does not implement the request's revision (2026-07-28).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    pub use crate::events::code::*;
}

/// A JSON-RPC error object: `{"code", "message", "data"?}`.
///
/// ```
/// use mcp_wire::{ErrorKind, ErrorObject};
///
/// let e: ErrorObject = serde_json::from_str(
///     r#"{"code":-32022,"message":"Unsupported protocol version",
///         "data":{"supported":["2026-07-28","2025-11-25"],"requested":"1900-01-01"}}"#,
/// ).unwrap();
/// let ErrorKind::UnsupportedVersion { supported, requested } = e.kind() else { panic!() };
/// assert_eq!(supported, ["2026-07-28", "2025-11-25"]);
/// assert_eq!(requested.as_deref(), Some("1900-01-01"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Whatever the sender adds (an explicit `null` is kept).
    #[serde(
        default,
        deserialize_with = "crate::result::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// What the code means, with the parts of `data` a client acts on.
    pub fn kind(&self) -> ErrorKind {
        let data = self.data.as_ref();
        let field = |name: &str| data.and_then(|d| d.get(name));
        let text = |name: &str| field(name).and_then(Value::as_str).map(str::to_owned);
        match self.code {
            code::PARSE_ERROR => ErrorKind::ParseError,
            code::INVALID_REQUEST => ErrorKind::InvalidRequest,
            code::METHOD_NOT_FOUND => ErrorKind::MethodNotFound,
            code::INVALID_PARAMS => ErrorKind::InvalidParams,
            code::INTERNAL_ERROR => ErrorKind::InternalError,
            code::RESOURCE_NOT_FOUND => ErrorKind::ResourceNotFound { uri: text("uri") },
            code::URL_ELICITATION_REQUIRED => ErrorKind::UrlElicitationRequired {
                elicitations: field("elicitations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            },
            code::HEADER_MISMATCH => ErrorKind::HeaderMismatch,
            code::MISSING_REQUIRED_CLIENT_CAPABILITY => ErrorKind::MissingClientCapability {
                required: field("requiredCapabilities")
                    .and_then(Value::as_object)
                    .cloned()
                    .map(ClientCapabilities::from)
                    .unwrap_or_default(),
            },
            code::UNSUPPORTED_PROTOCOL_VERSION => ErrorKind::UnsupportedVersion {
                supported: field("supported")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                requested: text("requested"),
            },
            other => crate::events::EventsError::from_code(other, data)
                .map_or(ErrorKind::Other, ErrorKind::Events),
        }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

/// The meaning of an error code, for the codes a client acts on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// -32700.
    ParseError,
    /// -32600.
    InvalidRequest,
    /// -32601.
    MethodNotFound,
    /// -32602: also an unknown tool or prompt, a bad cursor, and (2026-07-28) a resource not
    /// found.
    InvalidParams,
    /// -32603.
    InternalError,
    /// -32002 (legacy): the resource does not exist.
    ResourceNotFound {
        /// `data.uri`, when given.
        uri: Option<String>,
    },
    /// -32042 (2025-11-25): URL elicitations must complete before a retry.
    UrlElicitationRequired {
        /// `data.elicitations`, as sent.
        elicitations: Vec<Value>,
    },
    /// -32020: the HTTP headers do not match the body.
    HeaderMismatch,
    /// -32021: the request lacks a capability the server needs.
    MissingClientCapability {
        /// `data.requiredCapabilities`.
        required: ClientCapabilities,
    },
    /// -32022: the server does not implement the requested revision.
    UnsupportedVersion {
        /// `data.supported`: the revisions the server offers (strings, possibly unknown).
        supported: Vec<String>,
        /// `data.requested`.
        requested: Option<String>,
    },
    /// -32023 to -32027: MCP Events errors (SEP-3415, draft).
    Events(crate::events::EventsError),
    /// Any other code.
    Other,
}
