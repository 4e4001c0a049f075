//! `subscriptions/listen` (2026-07-28): one long-lived stream of change notifications.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Meta;

/// Which notifications a listen asks for, or (in the acknowledgment) which the server
/// agreed to send. Omitted members are not wanted. Members added by extensions are kept in
/// `other`.
///
/// ```
/// use mcp_wire::ListenFilter;
///
/// let mut f = ListenFilter::default();
/// f.tools_list_changed = Some(true);
/// f.resource_subscriptions = Some(vec!["demo://greeting".into()]);
/// assert_eq!(serde_json::to_string(&f).unwrap(),
///     r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://greeting"]}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListenFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// `notifications/events/list_changed` (MCP Events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_list_changed: Option<bool>,
    /// Members this crate does not know (extensions'), kept as sent.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The params of `subscriptions/listen`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListenParams {
    /// What to listen for.
    pub notifications: ListenFilter,
    /// `_meta`, with the keys every modern request carries.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ListenParams {
    /// A listen for `notifications`.
    pub fn new(notifications: ListenFilter, meta: Option<Meta>) -> Self {
        Self {
            notifications,
            meta,
        }
    }
}

/// The params of `notifications/subscriptions/acknowledged`, the first message of a listen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AcknowledgedParams {
    /// What the server agreed to send: compare with what was asked.
    pub notifications: ListenFilter,
    /// `_meta`, with the listen's subscription id.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
