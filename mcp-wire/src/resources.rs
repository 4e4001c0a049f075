//! Resources: listing, templates, reading and (legacy) subscribing.

use serde::{Deserialize, Serialize};

use crate::page::PageItem;
use crate::{Annotations, Icon, InputResponses, Meta, Outcome, Page, ResultType};

/// A resource the server offers (also the body of a `resource_link` content block).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its programmatic name.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PageItem for Resource {
    const KEY: &'static str = "resources";
}

/// A family of resources named by an RFC 6570 URI template. Not subscribable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The URI template.
    pub uri_template: String,
    /// Its programmatic name.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The media type of its resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PageItem for ResourceTemplate {
    const KEY: &'static str = "resourceTemplates";
}

/// The result of `resources/list`.
pub type ListResourcesResult = Page<Resource>;

/// The result of `resources/templates/list`.
pub type ListResourceTemplatesResult = Page<ResourceTemplate>;

/// The params of `resources/read`, and of its retry after `input_required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadResourceParams {
    /// The URI to read.
    pub uri: String,
    /// Answers to the server's input requests (retry only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// The state echoed from the interim result (retry only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ReadResourceParams {
    /// Reads `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            input_responses: None,
            request_state: None,
            meta: None,
        }
    }
}

/// The final result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadResourceResult {
    /// `resultType`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The contents (possibly several; empty does not mean "not found").
    pub contents: Vec<ResourceContents>,
    /// `ttlMs`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// `cacheScope`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<crate::CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadResourceWire {
    result_type: Option<ResultType>,
    contents: Option<Vec<ResourceContents>>,
    ttl_ms: Option<i64>,
    cache_scope: Option<crate::CacheScope>,
    input_requests: Option<std::collections::BTreeMap<String, crate::InputRequest>>,
    request_state: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

impl<'de> Deserialize<'de> for Outcome<ReadResourceResult> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ReadResourceWire::deserialize(d)?;
        Self::read(
            w.result_type,
            w.input_requests,
            w.request_state,
            w.meta,
            |meta| {
                Ok(ReadResourceResult {
                    result_type: w.result_type,
                    contents: w
                        .contents
                        .ok_or_else(|| serde::de::Error::missing_field("contents"))?,
                    ttl_ms: w.ttl_ms,
                    cache_scope: w.cache_scope,
                    meta,
                })
            },
        )
    }
}

/// The contents of a resource: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ContentsWire", into = "ContentsWire")]
#[non_exhaustive]
pub enum ResourceContents {
    /// Text contents.
    Text {
        /// The resource's URI.
        uri: String,
        /// Its media type.
        mime_type: Option<String>,
        /// The text.
        text: String,
        /// `_meta`.
        meta: Option<Meta>,
    },
    /// Binary contents.
    Blob {
        /// The resource's URI.
        uri: String,
        /// Its media type.
        mime_type: Option<String>,
        /// The data, base64-encoded.
        blob: String,
        /// `_meta`.
        meta: Option<Meta>,
    },
}

impl ResourceContents {
    /// The resource's URI.
    pub fn uri(&self) -> &str {
        match self {
            Self::Text { uri, .. } | Self::Blob { uri, .. } => uri,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContentsWire {
    uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blob: Option<String>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    meta: Option<Meta>,
}

impl TryFrom<ContentsWire> for ResourceContents {
    type Error = &'static str;

    fn try_from(w: ContentsWire) -> Result<Self, Self::Error> {
        match (w.text, w.blob) {
            (Some(text), None) => Ok(Self::Text {
                uri: w.uri,
                mime_type: w.mime_type,
                text,
                meta: w.meta,
            }),
            (None, Some(blob)) => Ok(Self::Blob {
                uri: w.uri,
                mime_type: w.mime_type,
                blob,
                meta: w.meta,
            }),
            (Some(_), Some(_)) => Err("resource contents with both `text` and `blob`"),
            (None, None) => Err("resource contents without `text` or `blob`"),
        }
    }
}

impl From<ResourceContents> for ContentsWire {
    fn from(c: ResourceContents) -> Self {
        match c {
            ResourceContents::Text {
                uri,
                mime_type,
                text,
                meta,
            } => Self {
                uri,
                mime_type,
                text: Some(text),
                blob: None,
                meta,
            },
            ResourceContents::Blob {
                uri,
                mime_type,
                blob,
                meta,
            } => Self {
                uri,
                mime_type,
                text: None,
                blob: Some(blob),
                meta,
            },
        }
    }
}

/// The params of `resources/subscribe` and `resources/unsubscribe` (legacy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubscribeParams {
    /// The resource's URI.
    pub uri: String,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SubscribeParams {
    /// (Un)subscribes `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            meta: None,
        }
    }
}
