//! Elicitation: a server asking a person for input, in form or URL mode.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Meta, RawJson};

/// The mode of an elicitation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitMode {
    /// A form described by a flat JSON Schema (the default when `mode` is absent).
    #[default]
    Form,
    /// A URL the person opens.
    Url,
}

/// The params of `elicitation/create`: a legacy server-to-client request, or an input
/// request inside an `input_required` result.
///
/// A form needs `requestedSchema`, a URL elicitation needs `url`; anything else is refused
/// when decoding.
///
/// ```
/// use mcp_wire::{ElicitMode, ElicitRequestParams};
///
/// let p: ElicitRequestParams = serde_json::from_str(
///     r#"{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}"#,
/// ).unwrap();
/// assert_eq!(p.mode(), ElicitMode::Form);
/// assert!(serde_json::from_str::<ElicitRequestParams>(r#"{"mode":"url","message":"Open"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "ElicitWire")]
#[non_exhaustive]
pub struct ElicitRequestParams {
    /// `mode`, as sent (absent means form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ElicitMode>,
    /// What to tell the person.
    pub message: String,
    /// The form's schema, verbatim (form mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<RawJson>,
    /// The URL to open (URL mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The elicitation's id (URL mode, 2025-11-25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ElicitRequestParams {
    /// A form elicitation.
    pub fn form(message: impl Into<String>, requested_schema: RawJson) -> Self {
        Self {
            mode: Some(ElicitMode::Form),
            message: message.into(),
            requested_schema: Some(requested_schema),
            url: None,
            elicitation_id: None,
            meta: None,
        }
    }

    /// The mode, form when absent.
    pub fn mode(&self) -> ElicitMode {
        self.mode.unwrap_or_default()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ElicitWire {
    mode: Option<ElicitMode>,
    message: String,
    requested_schema: Option<RawJson>,
    url: Option<String>,
    elicitation_id: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

impl TryFrom<ElicitWire> for ElicitRequestParams {
    type Error = &'static str;

    fn try_from(w: ElicitWire) -> Result<Self, Self::Error> {
        match w.mode.unwrap_or_default() {
            ElicitMode::Form if w.requested_schema.is_none() => {
                Err("a form elicitation needs `requestedSchema`")
            }
            ElicitMode::Url if w.url.is_none() => Err("a URL elicitation needs `url`"),
            _ => Ok(Self {
                mode: w.mode,
                message: w.message,
                requested_schema: w.requested_schema,
                url: w.url,
                elicitation_id: w.elicitation_id,
                meta: w.meta,
            }),
        }
    }
}

/// What the person did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitAction {
    /// Answered (form) or agreed to open the URL.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it, or did not answer in time.
    Cancel,
}

/// The answer to an elicitation.
///
/// ```
/// use mcp_wire::{ElicitAction, ElicitResult};
///
/// assert_eq!(serde_json::to_string(&ElicitResult::new(ElicitAction::Cancel)).unwrap(),
///     r#"{"action":"cancel"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitResult {
    /// What the person did.
    pub action: ElicitAction,
    /// The form's values (accepted form mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ElicitResult {
    /// An answer with no content.
    pub fn new(action: ElicitAction) -> Self {
        Self {
            action,
            content: None,
            meta: None,
        }
    }

    /// An accepted form with these values.
    pub fn accept(content: Map<String, Value>) -> Self {
        Self {
            action: ElicitAction::Accept,
            content: Some(content),
            meta: None,
        }
    }
}
