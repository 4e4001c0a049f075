//! The crate's error type.

use std::fmt;

/// Everything that can go wrong when reading or writing MCP messages.
///
/// Each variant names one way a peer's bytes or a caller's value can be wrong, so the layer
/// above can log it, answer it or refuse it without parsing a message string.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The input is longer than the limit the caller set; nothing was parsed.
    TooLarge {
        /// The input's length in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The input is not JSON (bad syntax, truncated, or not UTF-8).
    NotJson {
        /// What the JSON parser said.
        detail: String,
    },
    /// The input is JSON but not an object (a string, number, boolean or `null`).
    NotObject,
    /// The input is a JSON-RPC batch (an array). MCP removed batches in 2025-06-18 and this
    /// crate never accepts one; see the crate docs.
    Batch,
    /// The `jsonrpc` member is missing or is not `"2.0"`.
    Version {
        /// The value found, as JSON text, if any.
        found: Option<String>,
    },
    /// A request (it has a `method`) carries `"id": null`. MCP forbids null ids.
    NullId,
    /// A response carries both `result` and `error`.
    ResultAndError,
    /// The object has no `method`, no `result` and no `error`: it is no message at all.
    NotAMessage,
    /// A member has the wrong type or shape (an id that is a float, `params` that is not an
    /// object, a result missing a required field, an unknown `resultType`, …).
    Shape {
        /// What is wrong, in the parser's words.
        detail: String,
    },
    /// A protocol revision string this crate does not know.
    UnknownRevision(String),
    /// A tool's `x-mcp-header` annotation breaks the spec's rules; the tool must be dropped.
    InvalidHeaderAnnotation(crate::header::InvalidAnnotation),
    /// A tool argument that is mirrored into an `Mcp-Param-*` header has a value that cannot
    /// be carried (a number that is not an integer, an integer outside ±(2^53−1), an object…).
    HeaderValue {
        /// The `Mcp-Param-*` header's name part.
        name: String,
        /// Why the value cannot be carried.
        detail: String,
    },
    /// A header value in the `=?base64?…?=` form that does not decode to UTF-8 text.
    EncodedHeader,
    /// A value could not be serialized (a map with non-string keys, or a failing `Serialize`).
    Encode {
        /// What the serializer said.
        detail: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len, limit } => {
                write!(
                    f,
                    "message of {len} bytes is over the limit of {limit} bytes"
                )
            }
            Self::NotJson { detail } => write!(f, "not JSON: {detail}"),
            Self::NotObject => f.write_str("a JSON-RPC message must be a JSON object"),
            Self::Batch => f.write_str("JSON-RPC batches are not part of MCP since 2025-06-18"),
            Self::Version { found: Some(v) } => write!(f, "jsonrpc must be \"2.0\", found {v}"),
            Self::Version { found: None } => f.write_str("the jsonrpc member is missing"),
            Self::NullId => f.write_str("a request's id must not be null"),
            Self::ResultAndError => f.write_str("a response has both result and error"),
            Self::NotAMessage => f.write_str("no method, result or error: not a JSON-RPC message"),
            Self::Shape { detail } => write!(f, "malformed message: {detail}"),
            Self::UnknownRevision(r) => write!(f, "unknown MCP revision {r:?}"),
            Self::InvalidHeaderAnnotation(why) => write!(f, "invalid x-mcp-header: {why}"),
            Self::HeaderValue { name, detail } => {
                write!(f, "argument for Mcp-Param-{name} cannot be sent: {detail}")
            }
            Self::EncodedHeader => f.write_str("a =?base64?…?= header value is not valid"),
            Self::Encode { detail } => write!(f, "cannot encode: {detail}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Maps a serde_json error met while reading a message: syntax and truncation become
    /// [`Error::NotJson`], everything else [`Error::Shape`].
    pub(crate) fn from_json(e: &serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => Self::Shape {
                detail: e.to_string(),
            },
            _ => Self::NotJson {
                detail: e.to_string(),
            },
        }
    }

    /// Maps a serde_json error met while writing a value.
    pub(crate) fn encoding(e: &serde_json::Error) -> Self {
        Self::Encode {
            detail: e.to_string(),
        }
    }

    pub(crate) fn shape(detail: impl Into<String>) -> Self {
        Self::Shape {
            detail: detail.into(),
        }
    }
}
