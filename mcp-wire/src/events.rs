//! MCP Events (SEP-3415, a draft): the identifiers, error codes and message types, kept in
//! one place so that a change of the draft is a small diff.
//!
//! Poll and webhook delivery are here; push (`events/stream`) is not modelled.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{ErrorObject, Meta, Page, PageItem, RawJson, ResultType};

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

/// A delivery mode, as `events/list` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryMode {
    /// `events/poll`.
    Poll,
    /// `events/stream`.
    Push,
    /// `events/subscribe` with a callback URL.
    Webhook,
}

impl DeliveryMode {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Poll => "poll",
            Self::Push => "push",
            Self::Webhook => "webhook",
        }
    }

    /// The mode named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "poll" => Some(Self::Poll),
            "push" => Some(Self::Push),
            "webhook" => Some(Self::Webhook),
            _ => None,
        }
    }
}

/// An event type a server offers (`events/list`). Its schemas are kept verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EventType {
    /// Its name, e.g. `ticket.created`.
    pub name: String,
    /// What it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The delivery modes it offers, as sent (names this crate does not know are kept).
    pub delivery: Vec<String>,
    /// The JSON Schema of subscription arguments, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<RawJson>,
    /// The JSON Schema of an occurrence's `data`, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_schema: Option<RawJson>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl EventType {
    /// A type offering `delivery`, without schemas.
    pub fn new(name: impl Into<String>, delivery: &[DeliveryMode]) -> Self {
        Self {
            name: name.into(),
            description: None,
            delivery: delivery.iter().map(|m| m.as_str().to_owned()).collect(),
            input_schema: None,
            payload_schema: None,
            meta: None,
        }
    }
}

impl PageItem for EventType {
    const KEY: &'static str = "events";
}

/// The result of `events/list`: one page of event types.
pub type ListEventsResult = Page<EventType>;

/// One occurrence of an event.
///
/// ```
/// use mcp_wire::events::EventOccurrence;
///
/// let o: EventOccurrence = serde_json::from_str(
///     r#"{"eventId":"e1","name":"ticket.created","timestamp":"2026-11-30T06:00:00Z",
///         "data":{"id":7},"cursor":null}"#,
/// ).unwrap();
/// assert_eq!(o.data.get(), r#"{"id":7}"#);
/// assert_eq!(o.cursor, Some(None)); // the type has no replay
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EventOccurrence {
    /// The server's id of the occurrence: the deduplication key.
    pub event_id: String,
    /// The event type.
    pub name: String,
    /// When it happened (ISO 8601), as sent.
    pub timestamp: String,
    /// The payload, verbatim.
    pub data: RawJson,
    /// The position after this occurrence (webhook): `Some(None)` when the type has no
    /// replay, `None` when absent.
    #[serde(
        default,
        deserialize_with = "crate::result::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cursor: Option<Option<String>>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl EventOccurrence {
    /// An occurrence of `name` with `data`.
    pub fn new(
        event_id: impl Into<String>,
        name: impl Into<String>,
        timestamp: impl Into<String>,
        data: RawJson,
    ) -> Self {
        Self {
            event_id: event_id.into(),
            name: name.into(),
            timestamp: timestamp.into(),
            data,
            cursor: None,
            meta: None,
        }
    }
}

/// The params of `events/poll`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PollParams {
    /// The event type.
    pub name: String,
    /// The subscription's arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Where to continue; `None` (sent as `null`) starts from now.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Replay nothing older than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
    /// At most this many occurrences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u32>,
}

impl PollParams {
    /// A poll of `name` with `arguments` from `cursor`.
    pub fn new(
        name: impl Into<String>,
        arguments: Map<String, Value>,
        cursor: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            arguments,
            cursor,
            max_age_ms: None,
            max_events: None,
        }
    }
}

/// The result of `events/poll`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PollResult {
    /// The occurrences, in order.
    #[serde(default)]
    pub events: Vec<EventOccurrence>,
    /// The position after them; `None` (`null`) when the type has no replay.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Occurrences were lost between the asked cursor and these.
    #[serde(default)]
    pub truncated: bool,
    /// More are ready: poll again at once.
    #[serde(default)]
    pub has_more: bool,
    /// When to poll next, as the server suggests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_poll_ms: Option<u64>,
    /// `resultType`, when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PollResult {
    /// A page of `events` ending at `cursor`.
    pub fn new(events: Vec<EventOccurrence>, cursor: Option<String>) -> Self {
        Self {
            events,
            cursor,
            truncated: false,
            has_more: false,
            next_poll_ms: None,
            result_type: None,
            meta: None,
        }
    }
}

/// Where a webhook subscription delivers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WebhookDelivery {
    /// Always `"webhook"`.
    pub mode: String,
    /// The callback URL (https).
    pub url: String,
    /// The signing secret, `whsec_` and base64; absent in `events/unsubscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl WebhookDelivery {
    /// Delivery to `url`, signed with `secret` (`None` for `events/unsubscribe`).
    pub fn new(url: impl Into<String>, secret: Option<String>) -> Self {
        Self {
            mode: DeliveryMode::Webhook.as_str().to_owned(),
            url: url.into(),
            secret,
        }
    }
}

/// The params of `events/subscribe` (a webhook subscription, made or refreshed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SubscribeEventsParams {
    /// The event type.
    pub name: String,
    /// The subscription's arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Where to deliver.
    pub delivery: WebhookDelivery,
    /// The stored cursor; `None` (sent as `null`) starts from now.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Replay nothing older than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
    /// The lease asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `true` asks a server that suspended deliveries to make them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

impl SubscribeEventsParams {
    /// A subscription of `name` with `arguments`, delivered as `delivery`, from `cursor`.
    pub fn new(
        name: impl Into<String>,
        arguments: Map<String, Value>,
        delivery: WebhookDelivery,
        cursor: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            arguments,
            delivery,
            cursor,
            max_age_ms: None,
            ttl_ms: None,
            active: None,
        }
    }
}

/// What a server says about its deliveries to a webhook subscription.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeliveryStatus {
    /// Deliveries are being made (`false`: suspended after failures).
    pub active: bool,
    /// The last delivery that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_at: Option<String>,
    /// Why deliveries fail: `connection_refused`, `timeout`, `tls_error`, `http_4xx`,
    /// `http_5xx`, `challenge_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Since when they fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_since: Option<String>,
    /// The server holds deliveries back.
    #[serde(default)]
    pub throttled: bool,
    /// For how long it holds them back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// The result of `events/subscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SubscribeEventsResult {
    /// The server's routing handle (`X-MCP-Subscription-Id` on deliveries).
    pub id: String,
    /// Refresh before this (ISO 8601); `None` when granted without expiry.
    #[serde(default)]
    pub refresh_before: Option<String>,
    /// The safe watermark to store.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Occurrences were lost since the cursor sent.
    #[serde(default)]
    pub truncated: bool,
    /// How deliveries go, on a refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<DeliveryStatus>,
    /// `resultType`, when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `events/unsubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UnsubscribeEventsParams {
    /// The event type.
    pub name: String,
    /// The subscription's arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// The callback URL (no secret).
    pub delivery: WebhookDelivery,
}

impl UnsubscribeEventsParams {
    /// Ends the subscription of `name` with `arguments` delivered to `url`.
    pub fn new(
        name: impl Into<String>,
        arguments: Map<String, Value>,
        url: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            arguments,
            delivery: WebhookDelivery::new(url, None),
        }
    }
}

/// The body of a webhook delivery: an occurrence, or a control envelope (a top-level `type`).
///
/// ```
/// use mcp_wire::events::WebhookBody;
///
/// let body = WebhookBody::decode(br#"{"type":"gap","cursor":"c9"}"#).unwrap();
/// assert_eq!(body, WebhookBody::Gap { cursor: Some("c9".into()) });
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WebhookBody {
    /// An occurrence.
    Occurrence(EventOccurrence),
    /// Occurrences were lost; continue from `cursor`.
    Gap {
        /// The fresh cursor.
        cursor: Option<String>,
    },
    /// The subscription is gone.
    Terminated {
        /// Why.
        error: ErrorObject,
    },
    /// The server checks the endpoint: answer `{"challenge": …}`.
    Verification {
        /// The nonce to echo.
        challenge: String,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Envelope {
    Gap {
        #[serde(default)]
        cursor: Option<String>,
    },
    Terminated {
        error: ErrorObject,
    },
    Verification {
        challenge: String,
    },
}

impl WebhookBody {
    /// Reads a delivery's body: a JSON object with a `type` is a control envelope, any other
    /// object an occurrence.
    pub fn decode(bytes: &[u8]) -> Result<Self, crate::Error> {
        #[derive(Deserialize)]
        struct Probe {
            #[serde(rename = "type")]
            kind: Option<serde::de::IgnoredAny>,
        }
        let json = |e: serde_json::Error| crate::Error::from_json(&e);
        let probe: Probe = serde_json::from_slice(bytes).map_err(json)?;
        if probe.kind.is_none() {
            return serde_json::from_slice(bytes)
                .map(Self::Occurrence)
                .map_err(json);
        }
        Ok(match serde_json::from_slice(bytes).map_err(json)? {
            Envelope::Gap { cursor } => Self::Gap { cursor },
            Envelope::Terminated { error } => Self::Terminated { error },
            Envelope::Verification { challenge } => Self::Verification { challenge },
        })
    }
}
