//! Tools: listing and calling.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::page::PageItem;
use crate::{
    ContentBlock, Icon, InputRequest, InputResponses, Meta, Outcome, Page, RawJson, ResultType,
};

/// A tool a server offers. Its schemas are kept verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Tool {
    /// Its name, unique on the server.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments, verbatim (may carry `x-mcp-header` annotations).
    pub input_schema: RawJson,
    /// The JSON Schema of its structured output, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<RawJson>,
    /// Untrusted hints about its behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// `execution` (2025-11-25 tasks), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<RawJson>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Tool {
    /// A tool with a name and an input schema.
    pub fn new(name: impl Into<String>, input_schema: RawJson) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
            icons: None,
            execution: None,
            meta: None,
        }
    }
}

impl PageItem for Tool {
    const KEY: &'static str = "tools";
}

/// The result of `tools/list`.
pub type ListToolsResult = Page<Tool>;

/// Untrusted hints about a tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// It changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// It may destroy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice is like calling it once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It reaches outside the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The params of `tools/call`, and of its retry after `input_required`.
///
/// ```
/// use mcp_wire::CallToolParams;
/// use serde_json::json;
///
/// let mut p = CallToolParams::new("get_weather");
/// p.arguments = Some(json!({"location": "NYC"}).as_object().unwrap().clone());
/// assert_eq!(serde_json::to_string(&p).unwrap(),
///     r#"{"name":"get_weather","arguments":{"location":"NYC"}}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CallToolParams {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
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

impl CallToolParams {
    /// A call of `name` with no arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            arguments: None,
            input_responses: None,
            request_state: None,
            meta: None,
        }
    }
}

/// The final result of `tools/call`. A tool that ran and failed says `isError: true` here; a
/// call the server could not run at all is a JSON-RPC error instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CallToolResult {
    /// `resultType`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The unstructured result.
    pub content: Vec<ContentBlock>,
    /// The structured result, if the tool has one (any JSON value, `null` included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// `isError`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `_meta`.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CallToolResult {
    /// A successful result with this content.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self {
            result_type: None,
            content,
            structured_content: None,
            is_error: None,
            meta: None,
        }
    }

    /// Whether the tool ran and failed.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallToolWire {
    result_type: Option<ResultType>,
    content: Option<Vec<ContentBlock>>,
    #[serde(default, deserialize_with = "crate::result::present")]
    structured_content: Option<Value>,
    is_error: Option<bool>,
    input_requests: Option<BTreeMap<String, InputRequest>>,
    request_state: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

impl<'de> Deserialize<'de> for Outcome<CallToolResult> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = CallToolWire::deserialize(d)?;
        Self::read(
            w.result_type,
            w.input_requests,
            w.request_state,
            w.meta,
            |meta| {
                Ok(CallToolResult {
                    result_type: w.result_type,
                    content: w
                        .content
                        .ok_or_else(|| serde::de::Error::missing_field("content"))?,
                    structured_content: w.structured_content,
                    is_error: w.is_error,
                    meta,
                })
            },
        )
    }
}
