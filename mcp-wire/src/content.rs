//! Content blocks: what tool results and prompt messages are made of.

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{Meta, Resource, ResourceContents};

/// One block of content, tagged by `type`.
///
/// ```
/// use mcp_wire::ContentBlock;
///
/// let b: ContentBlock = serde_json::from_str(r#"{"type":"text","text":"5"}"#).unwrap();
/// assert_eq!(b, ContentBlock::text("5"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Text.
    Text(TextContent),
    /// An image, base64-encoded.
    Image(BinaryContent),
    /// Audio, base64-encoded.
    Audio(BinaryContent),
    /// A link to a resource the client may read.
    ResourceLink(Resource),
    /// A resource's contents, embedded.
    Resource(EmbeddedResource),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
        })
    }

    /// The text, if this is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// The `type` of a content block.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Text,
    Image,
    Audio,
    ResourceLink,
    Resource,
}

impl Kind {
    /// Reads the block's other members into the variant's type.
    fn read<'de, D: Deserializer<'de>>(self, d: D) -> Result<ContentBlock, D::Error> {
        Ok(match self {
            Self::Text => ContentBlock::Text(Deserialize::deserialize(d)?),
            Self::Image => ContentBlock::Image(Deserialize::deserialize(d)?),
            Self::Audio => ContentBlock::Audio(Deserialize::deserialize(d)?),
            Self::ResourceLink => ContentBlock::ResourceLink(Deserialize::deserialize(d)?),
            Self::Resource => ContentBlock::Resource(Deserialize::deserialize(d)?),
        })
    }
}

/// A member name: `type`, or any other (kept, for the slow path).
enum Key {
    Type,
    Other(String),
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_identifier(self)
    }
}

struct KeySeed;

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(if key == "type" {
            Key::Type
        } else {
            Key::Other(key.to_owned())
        })
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        match map.next_key_seed(KeySeed)? {
            // The common case: `type` first. The rest of the members go straight to the
            // variant's type, with nothing buffered.
            Some(Key::Type) => {
                let kind: Kind = map.next_value()?;
                kind.read(MapAccessDeserializer::new(map))
            }
            // `type` later, or not at all: gather the members, then read them.
            Some(Key::Other(first)) => {
                let mut members = Map::new();
                members.insert(first, map.next_value()?);
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value()?;
                    if members.insert(key, value).is_some() {
                        return Err(de::Error::custom("duplicate member in a content block"));
                    }
                }
                let kind = members
                    .remove("type")
                    .ok_or_else(|| de::Error::missing_field("type"))?;
                let kind = Kind::deserialize(kind).map_err(de::Error::custom)?;
                kind.read(Value::Object(members)).map_err(de::Error::custom)
            }
            None => Err(de::Error::missing_field("type")),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(BlockVisitor)
    }
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Hints for the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// An image or audio block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BinaryContent {
    /// The data, base64-encoded.
    pub data: String,
    /// Its media type.
    pub mime_type: String,
    /// Hints for the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A resource embedded in content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddedResource {
    /// The contents.
    pub resource: ResourceContents,
    /// Hints for the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Hints on content or a resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Annotations {
    /// Who the content is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// How important it is, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// When it last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

/// A party of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str) -> Result<ContentBlock, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn type_first_and_type_later_read_the_same() {
        let first = block(r#"{"type":"text","text":"hi","annotations":{"priority":0.5}}"#).unwrap();
        let later = block(r#"{"text":"hi","annotations":{"priority":0.5},"type":"text"}"#).unwrap();
        assert_eq!(first, later);
        let link = block(r#"{"uri":"a://b","name":"b","type":"resource_link"}"#).unwrap();
        assert!(matches!(link, ContentBlock::ResourceLink(r) if r.uri == "a://b"));
    }

    #[test]
    fn a_block_without_a_known_type_is_refused() {
        for bad in [
            r#"{"text":"hi"}"#,
            r#"{}"#,
            r#"{"type":"video","data":"x"}"#,
            r#"{"data":"x","type":"video"}"#,
            r#"{"text":"a","text":"b","type":"text"}"#,
            r#"{"type":"image","data":"x"}"#,
            r#"[]"#,
        ] {
            assert!(block(bad).is_err(), "{bad}");
        }
    }
}
