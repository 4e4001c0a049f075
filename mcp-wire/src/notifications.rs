//! Notifications of both eras: their params, and a typed view of what a server sends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::method::notification as n;
use crate::{AcknowledgedParams, Error, Meta, Notification, RequestId};

/// A progress token: an integer or a string, like a request id.
pub type ProgressToken = RequestId;

/// The params of `notifications/cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CancelledParams {
    /// The request cancelled (absent only for 2025-11-25 task cancellations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CancelledParams {
    /// Cancels `request_id`.
    pub fn new(request_id: RequestId, reason: Option<String>) -> Self {
        Self {
            request_id: Some(request_id),
            reason,
            meta: None,
        }
    }
}

/// The params of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ProgressParams {
    /// The token the request gave.
    pub progress_token: ProgressToken,
    /// Progress so far; increases with every notification.
    pub progress: f64,
    /// The total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A log level (RFC 5424).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LoggingLevel {
    /// debug
    Debug,
    /// info
    Info,
    /// notice
    Notice,
    /// warning
    Warning,
    /// error
    Error,
    /// critical
    Critical,
    /// alert
    Alert,
    /// emergency
    Emergency,
}

/// The params of `notifications/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoggingMessageParams {
    /// The level.
    pub level: LoggingLevel,
    /// The logger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The data.
    pub data: Value,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourceUpdatedParams {
    /// The resource that changed.
    pub uri: String,
    /// `_meta` (on a listen: its subscription id).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `notifications/elicitation/complete` (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ElicitationCompleteParams {
    /// The URL elicitation that finished.
    pub elicitation_id: String,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A notification a server sends, decoded by its method.
///
/// ```
/// use mcp_wire::{decode, Message, ServerNotification};
///
/// let bytes = br#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://b"}}"#;
/// let Message::Notification(n) = decode(bytes, 1024).unwrap() else { panic!() };
/// let ServerNotification::ResourceUpdated(p) = ServerNotification::decode(&n).unwrap() else { panic!() };
/// assert_eq!(p.uri, "a://b");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerNotification {
    /// `notifications/cancelled`.
    Cancelled(CancelledParams),
    /// `notifications/progress`.
    Progress(ProgressParams),
    /// `notifications/message`.
    Message(LoggingMessageParams),
    /// `notifications/resources/updated`.
    ResourceUpdated(ResourceUpdatedParams),
    /// `notifications/resources/list_changed`.
    ResourceListChanged,
    /// `notifications/tools/list_changed`.
    ToolListChanged,
    /// `notifications/prompts/list_changed`.
    PromptListChanged,
    /// `notifications/elicitation/complete`.
    ElicitationComplete(ElicitationCompleteParams),
    /// `notifications/tasks/status`, params kept as sent.
    TaskStatus(Option<Value>),
    /// `notifications/subscriptions/acknowledged`.
    SubscriptionsAcknowledged(AcknowledgedParams),
    /// `notifications/events/list_changed`.
    EventsListChanged,
    /// A method this crate does not know.
    Unknown {
        /// The method.
        method: String,
    },
}

impl ServerNotification {
    /// Decodes a notification's params by its method.
    pub fn decode(notification: &Notification<'_>) -> Result<Self, Error> {
        Ok(match notification.method.as_ref() {
            n::CANCELLED => Self::Cancelled(notification.params_as()?),
            n::PROGRESS => Self::Progress(notification.params_as()?),
            n::MESSAGE => Self::Message(notification.params_as()?),
            n::RESOURCES_UPDATED => Self::ResourceUpdated(notification.params_as()?),
            n::RESOURCES_LIST_CHANGED => Self::ResourceListChanged,
            n::TOOLS_LIST_CHANGED => Self::ToolListChanged,
            n::PROMPTS_LIST_CHANGED => Self::PromptListChanged,
            n::ELICITATION_COMPLETE => Self::ElicitationComplete(notification.params_as()?),
            n::TASKS_STATUS => Self::TaskStatus(notification.params_as()?),
            n::SUBSCRIPTIONS_ACKNOWLEDGED => {
                Self::SubscriptionsAcknowledged(notification.params_as()?)
            }
            n::EVENTS_LIST_CHANGED => Self::EventsListChanged,
            other => Self::Unknown {
                method: other.to_owned(),
            },
        })
    }

    /// The `_meta` subscription id, which ties a notification to its listen.
    pub fn subscription_id(notification: &Notification<'_>) -> Option<RequestId> {
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "_meta")]
            meta: Option<Meta>,
        }
        let params: Params = notification.params_as().ok()?;
        let id = params.meta?.remove(crate::meta::key::SUBSCRIPTION_ID)?;
        RequestId::deserialize(id).ok()
    }
}
