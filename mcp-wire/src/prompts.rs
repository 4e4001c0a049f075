//! Prompts: listing and getting.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::page::PageItem;
use crate::{
    ContentBlock, Icon, InputRequest, InputResponses, Meta, Outcome, Page, ResultType, Role,
};

/// A prompt template the server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Prompt {
    /// Its name.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgument>>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PageItem for Prompt {
    const KEY: &'static str = "prompts";
}

/// The result of `prompts/list`.
pub type ListPromptsResult = Page<Prompt>;

/// An argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// The params of `prompts/get`, and of its retry after `input_required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
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

impl GetPromptParams {
    /// Gets `name` with no arguments.
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

/// The final result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GetPromptResult {
    /// `resultType`, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// A description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
    /// `_meta`.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: ContentBlock,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetPromptWire {
    result_type: Option<ResultType>,
    description: Option<String>,
    messages: Option<Vec<PromptMessage>>,
    input_requests: Option<BTreeMap<String, InputRequest>>,
    request_state: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

impl<'de> Deserialize<'de> for Outcome<GetPromptResult> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = GetPromptWire::deserialize(d)?;
        Self::read(
            w.result_type,
            w.input_requests,
            w.request_state,
            w.meta,
            |meta| {
                Ok(GetPromptResult {
                    result_type: w.result_type,
                    description: w.description,
                    messages: w
                        .messages
                        .ok_or_else(|| serde::de::Error::missing_field("messages"))?,
                    meta,
                })
            },
        )
    }
}
