//! JSON-RPC request ids.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The id of a JSON-RPC request: an integer or a string, never `null`.
///
/// MCP narrows JSON-RPC's ids: a number must be an integer, and `null` is not an id. An id
/// that does not fit in an `i64` is refused rather than rounded.
///
/// ```
/// use mcp_wire::RequestId;
///
/// let id: RequestId = serde_json::from_str("7").unwrap();
/// assert_eq!(id, RequestId::Number(7));
/// assert_eq!(serde_json::to_string(&RequestId::from("sub-1")).unwrap(), r#""sub-1""#);
/// assert!(serde_json::from_str::<RequestId>("null").is_err());
/// assert!(serde_json::from_str::<RequestId>("1.5").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => serializer.serialize_i64(*n),
            Self::String(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = RequestId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer or a string")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<RequestId, E> {
        Ok(RequestId::Number(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<RequestId, E> {
        i64::try_from(n)
            .map(RequestId::Number)
            .map_err(|_| E::custom("integer id out of range"))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<RequestId, E> {
        Ok(RequestId::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<RequestId, E> {
        Ok(RequestId::String(s))
    }
}
