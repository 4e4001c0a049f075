//! Argument completion: `completion/complete`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Meta, ResultType};

/// The params of `completion/complete`.
///
/// ```
/// use mcp_wire::{CompleteParams, CompletionReference};
///
/// let p = CompleteParams::new(CompletionReference::Prompt { name: "greet".into(), title: None }, "who", "Ad");
/// assert_eq!(serde_json::to_string(&p).unwrap(),
///     r#"{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"Ad"}}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompleteParams {
    /// What is being completed.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument and its partial value.
    pub argument: CompletionArgument,
    /// Values of arguments already chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompletionContext>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CompleteParams {
    /// Completes `argument` of `reference` from `value`.
    pub fn new(
        reference: CompletionReference,
        argument: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        Self {
            reference,
            argument: CompletionArgument {
                name: argument.into(),
                value: value.into(),
            },
            context: None,
            meta: None,
        }
    }
}

/// What a completion is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum CompletionReference {
    /// A prompt's argument.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
        /// Its title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A resource template's variable.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The URI template.
        uri: String,
    },
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompletionArgument {
    /// Its name.
    pub name: String,
    /// What has been typed so far.
    pub value: String,
}

/// Arguments already chosen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompletionContext {
    /// Their values, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
}

/// The result of `completion/complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CompleteResult {
    /// `resultType`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The suggestions.
    pub completion: Completion,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Completion suggestions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Completion {
    /// The values (at most 100).
    pub values: Vec<String>,
    /// How many there are in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more than `values`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}
