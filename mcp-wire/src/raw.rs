//! JSON kept as the peer wrote it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value kept verbatim: the bytes the peer sent, not a parsed tree.
///
/// Used where a peer may extend a value and the client only passes it on (tool schemas,
/// elicitation schemas): decoding is a copy, and encoding writes the same text back.
/// Two `RawJson`s are equal when their text is equal.
///
/// ```
/// use mcp_wire::RawJson;
///
/// let raw: RawJson = serde_json::from_str(r#"{"type":"object","x-extra":[1,2]}"#).unwrap();
/// assert_eq!(raw.get(), r#"{"type":"object","x-extra":[1,2]}"#);
/// assert_eq!(serde_json::to_string(&raw).unwrap(), raw.get());
/// ```
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// Parses `text` as JSON and keeps it verbatim.
    pub fn from_text(text: &str) -> Result<Self, crate::Error> {
        serde_json::from_str(text).map_err(|e| crate::Error::from_json(&e))
    }

    /// Serializes `value` and keeps the text.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, crate::Error> {
        serde_json::value::to_raw_value(value)
            .map(Self)
            .map_err(|e| crate::Error::encoding(&e))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The value as serde_json's raw value, e.g. to build a [`crate::Notification`].
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// Parses the text into `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, crate::Error> {
        serde_json::from_str(self.0.get()).map_err(|e| crate::Error::from_json(&e))
    }

    /// Whether the value is a JSON object.
    pub fn is_object(&self) -> bool {
        self.0.get().starts_with('{')
    }
}

impl From<&RawValue> for RawJson {
    fn from(raw: &RawValue) -> Self {
        Self(raw.to_owned())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self)
    }
}
