//! What an HTTP answer to a POST means: one JSON-RPC message, a stream of them, `202
//! Accepted`, or a failure that keeps what matters.
//!
//! Two steps, because a body is read after its head: [`Head::of`] looks at the status and the
//! content type and says how to read the body (and with which bound); [`Head::answer`] turns
//! the body into an [`Answer`]. A 4xx or 5xx whose body is a JSON-RPC error response is an
//! MCP error for the layer above ([`Answer::Message`], with the status kept), not a transport
//! failure.
//!
//! ```
//! use mcp_transport::reply::{Answer, Head, Limits};
//!
//! let limits = Limits::default();
//! let head = Head::of(400, Some("application/json"), &limits).unwrap();
//! let body = br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version"}}"#;
//! let Answer::Message { status, message } = head.answer(body, None) else { panic!() };
//! assert_eq!(status, 400);
//! assert!(matches!(message, mcp_wire::Message::Response(r) if r.outcome.is_err()));
//! ```

use mcp_wire::{Message, decode};

/// The bounds on what a server's answer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// A JSON body of a successful answer (one message).
    pub json_body: usize,
    /// The body of a 4xx or 5xx answer.
    pub error_body: usize,
    /// One event of an event stream.
    pub sse_event: usize,
}

impl Default for Limits {
    /// 16 MiB for a message, whether in a JSON body or an event; 64 KiB for an error body.
    fn default() -> Self {
        Self {
            json_body: 16 << 20,
            error_body: 64 << 10,
            sse_event: 16 << 20,
        }
    }
}

/// How to read the body of an answer, decided from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Head {
    /// 2xx `application/json`: read at most `limit` bytes, then one message.
    Json {
        /// The status.
        status: u16,
        /// The bound on the body.
        limit: usize,
    },
    /// 2xx `text/event-stream`: decode events as they come (bounded per event).
    Stream,
    /// 202, or another 2xx without a body: nothing more comes.
    Accepted,
    /// 4xx or 5xx: read at most `limit` bytes, to see whether it holds a JSON-RPC error.
    Error {
        /// The status.
        status: u16,
        /// The bound on the body.
        limit: usize,
    },
}

/// A failure of the answer itself: nothing in it the layer above can read as MCP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// A 4xx or 5xx whose body is no JSON-RPC error response (or is empty).
    Status {
        /// The status.
        status: u16,
        /// `WWW-Authenticate`, on a 401.
        www_authenticate: Option<String>,
    },
    /// A 2xx with a content type that is neither JSON nor an event stream.
    ContentType {
        /// The status.
        status: u16,
        /// The content type, if any.
        content_type: Option<String>,
    },
    /// A body over its bound.
    TooLarge {
        /// The status.
        status: u16,
        /// The bound it passed.
        limit: usize,
    },
    /// A 2xx JSON body that is not a JSON-RPC message.
    Malformed {
        /// The status.
        status: u16,
        /// What is wrong with it.
        error: mcp_wire::Error,
    },
    /// An informational or redirect status (1xx, 3xx): the client follows no redirects.
    Unexpected {
        /// The status.
        status: u16,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Status { status, .. } => write!(f, "HTTP {status}"),
            Self::ContentType {
                status,
                content_type,
            } => write!(f, "HTTP {status} with content type {content_type:?}"),
            Self::TooLarge { status, limit } => {
                write!(f, "HTTP {status} with a body over {limit} bytes")
            }
            Self::Malformed { status, error } => write!(f, "HTTP {status}: {error}"),
            Self::Unexpected { status } => write!(f, "unexpected HTTP {status}"),
        }
    }
}

/// What an answer means, once its body is read.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Answer<'a> {
    /// One JSON-RPC message: a 2xx JSON body, or a 4xx/5xx body holding an error response.
    Message {
        /// The HTTP status.
        status: u16,
        /// The message.
        message: Message<'a>,
    },
    /// The server accepted a notification or a response.
    Accepted,
    /// The answer failed.
    Failure(Failure),
}

/// Whether a content type is `essence`, ignoring parameters, case and spaces.
fn is(content_type: Option<&str>, essence: &str) -> bool {
    content_type
        .and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case(essence))
}

impl Head {
    /// Looks at the status and the `Content-Type` of an answer to a POST.
    pub fn of(status: u16, content_type: Option<&str>, limits: &Limits) -> Result<Self, Failure> {
        match status {
            202 | 204 => Ok(Self::Accepted),
            200..=299 if is(content_type, "text/event-stream") => Ok(Self::Stream),
            200..=299 if is(content_type, "application/json") => Ok(Self::Json {
                status,
                limit: limits.json_body,
            }),
            200..=299 => Err(Failure::ContentType {
                status,
                content_type: content_type.map(str::to_owned),
            }),
            400..=599 => Ok(Self::Error {
                status,
                limit: limits.error_body,
            }),
            _ => Err(Failure::Unexpected { status }),
        }
    }

    /// The bound on the body, when the body is read whole.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            Self::Json { limit, .. } | Self::Error { limit, .. } => Some(*limit),
            Self::Stream | Self::Accepted => None,
        }
    }

    /// What the answer means, given its whole body and, for a 401, its `WWW-Authenticate`.
    ///
    /// A reader stops after [`Head::body_limit`] + 1 bytes: a body that long is over its
    /// bound, and is answered [`Failure::TooLarge`].
    ///
    /// For [`Head::Stream`] the body is not read this way; the events go through
    /// [`crate::sse::Decoder`] instead, and this returns [`Answer::Accepted`].
    pub fn answer<'a>(&self, body: &'a [u8], www_authenticate: Option<&str>) -> Answer<'a> {
        match *self {
            Self::Json { status, limit } => match decode(body, limit) {
                Ok(message) => Answer::Message { status, message },
                Err(mcp_wire::Error::TooLarge { limit, .. }) => {
                    Answer::Failure(Failure::TooLarge { status, limit })
                }
                Err(error) => Answer::Failure(Failure::Malformed { status, error }),
            },
            Self::Error { status, limit } => match decode(body, limit) {
                Ok(message @ Message::Response(_)) if status != 401 => {
                    Answer::Message { status, message }
                }
                Err(mcp_wire::Error::TooLarge { limit, .. }) => {
                    Answer::Failure(Failure::TooLarge { status, limit })
                }
                _ => Answer::Failure(Failure::Status {
                    status,
                    www_authenticate: www_authenticate.map(str::to_owned),
                }),
            },
            Self::Stream | Self::Accepted => Answer::Accepted,
        }
    }
}
