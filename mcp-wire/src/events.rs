//! MCP Events (SEP-3415, a draft): the identifiers and error codes, kept in one place so that
//! a change of the draft is a small diff.

use serde_json::Value;

/// The extension identifier a server declares under `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/events";

/// The `subscriptions/listen` filter field that asks for `notifications/events/list_changed`.
pub const LIST_CHANGED_FILTER: &str = "eventsListChanged";

/// The header a webhook delivery names its subscription in.
pub const SUBSCRIPTION_HEADER: &str = "X-MCP-Subscription-Id";

/// The error codes SEP-3415 allocates, provisionally.
pub mod code {
    /// `NotFound`: an unknown event name, or no such subscription (`data.kind`).
    pub const EVENTS_NOT_FOUND: i64 = -32023;
    /// `Forbidden`: the principal may not subscribe, or lost access.
    pub const EVENTS_FORBIDDEN: i64 = -32024;
    /// `ResourceExhausted`: a quota is spent (`data.limit`, `data.max`).
    pub const EVENTS_RESOURCE_EXHAUSTED: i64 = -32025;
    /// `Unsupported`: a valid but unsupported option (`data.feature`, `data.value`,
    /// `data.reason`).
    pub const EVENTS_UNSUPPORTED: i64 = -32026;
    /// `CallbackEndpointError`: the webhook endpoint failed (`data.reason`).
    pub const EVENTS_CALLBACK_ENDPOINT: i64 = -32027;
}

/// The typed view of an MCP Events error code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventsError {
    /// -32023.
    NotFound {
        /// `data.kind`: `"event"` or `"subscription"`.
        kind: Option<String>,
    },
    /// -32024.
    Forbidden,
    /// -32025.
    ResourceExhausted {
        /// `data.limit`, e.g. `"subscriptions"`.
        limit: Option<String>,
        /// `data.max`.
        max: Option<u64>,
    },
    /// -32026.
    Unsupported {
        /// `data.feature`, e.g. `"deliveryMode"` or `"payloadSchema"`.
        feature: Option<String>,
        /// `data.value`.
        value: Option<String>,
        /// `data.reason`, e.g. `"schema_changed"`.
        reason: Option<String>,
    },
    /// -32027.
    CallbackEndpoint {
        /// `data.reason`: one of the `deliveryStatus.lastError` categories.
        reason: Option<String>,
    },
}

impl EventsError {
    /// The typed view of `code`, if it is an Events code.
    pub fn from_code(code: i64, data: Option<&Value>) -> Option<Self> {
        let text = |name: &str| {
            data.and_then(|d| d.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(match code {
            code::EVENTS_NOT_FOUND => Self::NotFound { kind: text("kind") },
            code::EVENTS_FORBIDDEN => Self::Forbidden,
            code::EVENTS_RESOURCE_EXHAUSTED => Self::ResourceExhausted {
                limit: text("limit"),
                max: data.and_then(|d| d.get("max")).and_then(Value::as_u64),
            },
            code::EVENTS_UNSUPPORTED => Self::Unsupported {
                feature: text("feature"),
                value: text("value"),
                reason: text("reason"),
            },
            code::EVENTS_CALLBACK_ENDPOINT => Self::CallbackEndpoint {
                reason: text("reason"),
            },
            _ => return None,
        })
    }
}
