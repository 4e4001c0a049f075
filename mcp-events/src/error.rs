//! What can be refused, in this crate's words.

use std::fmt;

/// A size the [`Limits`](crate::Limits) bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bound {
    /// One occurrence, or one webhook body (at most [`crate::Limits::occurrence_max`]).
    Occurrence,
    /// An `eventId` ([`Limits::event_id_max`](crate::Limits::event_id_max)).
    EventId,
    /// A stored cursor ([`Limits::cursor_max`](crate::Limits::cursor_max)).
    Cursor,
}

impl Bound {
    /// Its name in a log line's `cause`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Occurrence => "occurrence",
            Self::EventId => "event_id",
            Self::Cursor => "cursor",
        }
    }
}

/// Why an occurrence, a webhook delivery or a secret is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A Standard Webhooks header is missing, or is not text.
    MissingHeader {
        /// The header.
        name: &'static str,
    },
    /// `webhook-timestamp` is not a Unix time in whole seconds.
    BadTimestamp,
    /// `webhook-timestamp` is further from now than the tolerance
    /// ([`Limits::webhook_tolerance`](crate::Limits::webhook_tolerance)).
    Stale {
        /// How far, in seconds (negative: in the future).
        age_secs: i64,
    },
    /// No signature of `webhook-signature` is the HMAC of the delivery under a current
    /// secret.
    BadSignature,
    /// A secret is not `whsec_` and the base64 of 24 to 64 bytes.
    BadSecret,
    /// The operating system gave no randomness for a secret.
    NoRandomness,
    /// Past a bound.
    TooLarge {
        /// Which.
        bound: Bound,
        /// The size met, in bytes.
        size: usize,
        /// The bound, in bytes.
        limit: usize,
    },
    /// Not an occurrence, or not a delivery body (a JSON object, an occurrence or a control
    /// envelope).
    Malformed {
        /// What is wrong.
        detail: String,
    },
}

impl Error {
    /// Why an occurrence refused with this error is not appended (`mcp.events.rejected`).
    pub fn cause(&self) -> Rejection {
        match self {
            Self::TooLarge { .. } => Rejection::Oversize,
            _ => Rejection::Malformed,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingHeader { name } => write!(f, "the delivery has no {name} header"),
            Self::BadTimestamp => f.write_str("webhook-timestamp is not a Unix time in seconds"),
            Self::Stale { age_secs } => {
                write!(
                    f,
                    "webhook-timestamp is {age_secs} s from now, past the tolerance"
                )
            }
            Self::BadSignature => f.write_str("no signature matches the delivery"),
            Self::BadSecret => f.write_str("a secret is not whsec_ and base64 of 24 to 64 bytes"),
            Self::NoRandomness => f.write_str("the operating system gave no randomness"),
            Self::TooLarge { bound, size, limit } => write!(
                f,
                "{} of {size} bytes is past its bound of {limit}",
                bound.as_str()
            ),
            Self::Malformed { detail } => write!(f, "malformed: {detail}"),
        }
    }
}

impl std::error::Error for Error {}

/// Why an occurrence was rejected (`mcp.events.rejected`, `cause`): it is not appended, and
/// the cursor moves past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// Past a bound of the [`Limits`](crate::Limits): the whole occurrence, or its `eventId`. (A cursor
    /// past its bound is not stored; the occurrence that carried it is appended.)
    Oversize,
    /// Not an occurrence.
    Malformed,
}

impl Rejection {
    /// Its `cause`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oversize => "oversize",
            Self::Malformed => "malformed",
        }
    }
}
