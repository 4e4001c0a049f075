//! `_meta`: the open metadata object on params, results and notifications, and its keys.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::{ClientCapabilities, Implementation, Revision};

/// A `_meta` object, kept whole so that keys this crate does not know survive.
pub type Meta = Map<String, Value>;

/// The `_meta` keys MCP defines.
pub mod key {
    /// The revision of a modern request (required on every 2026-07-28 request).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's `Implementation` on a modern request.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The client's capabilities on a modern request (required; `{}` means none).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The log level a modern request opts into.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's `Implementation` on a modern result.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The id of the `subscriptions/listen` (or `events/stream`) request a notification
    /// belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// The task a message relates to (2025-11-25 tasks).
    pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
    /// The token a request gives to opt into progress notifications.
    pub const PROGRESS_TOKEN: &str = "progressToken";
    /// W3C trace context.
    pub const TRACEPARENT: &str = "traceparent";
    /// W3C trace state.
    pub const TRACESTATE: &str = "tracestate";
    /// W3C baggage.
    pub const BAGGAGE: &str = "baggage";
}

/// The `_meta` keys agentd puts on its requests so that a server can correlate and
/// deduplicate (the reference's "Request metadata" table).
pub mod agent {
    /// The run a call belongs to; on every call.
    pub const RUN_ID: &str = "agent/run_id";
    /// The agent instance's name; on every call.
    pub const INSTANCE: &str = "agent/instance";
    /// The conversation context; on calls made during a conversation turn.
    pub const CTX: &str = "agent/ctx";
    /// A key stable across retries of the same work.
    pub const IDEMPOTENCY_KEY: &str = "agent/idempotency_key";
    /// The attempt number of an `mcp.tool` step.
    pub const ATTEMPT: &str = "agent/attempt";
    /// The workflow run of an `mcp.tool` step.
    pub const RUN: &str = "agent/run";
    /// The principal the work is for.
    pub const ACTING_FOR: &str = "agent/acting_for";
    /// Labels of the work.
    pub const LABELS: &str = "agent/labels";
}

/// The three keys every 2026-07-28 request carries in `params._meta`.
///
/// ```
/// use mcp_wire::{ClientCapabilities, Implementation, Meta, ModernMeta, Revision};
///
/// let info = Implementation::new("agentd", "0.1.0");
/// let caps = ClientCapabilities::none();
/// let mut meta = Meta::new();
/// ModernMeta { revision: Revision::V2026_07_28, client_info: &info, client_capabilities: &caps }
///     .insert_into(&mut meta);
/// assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
/// assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], serde_json::json!({}));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ModernMeta<'a> {
    /// The request's revision (also sent as `MCP-Protocol-Version`).
    pub revision: Revision,
    /// Who the client is.
    pub client_info: &'a Implementation,
    /// What the client can do for this request.
    pub client_capabilities: &'a ClientCapabilities,
}

impl ModernMeta<'_> {
    /// Writes the three keys into `meta`, replacing any already there.
    pub fn insert_into(&self, meta: &mut Meta) {
        meta.insert(
            key::PROTOCOL_VERSION.into(),
            Value::String(self.revision.as_str().into()),
        );
        meta.insert(key::CLIENT_INFO.into(), to_value(self.client_info));
        meta.insert(
            key::CLIENT_CAPABILITIES.into(),
            Value::Object(self.client_capabilities.as_map().clone()),
        );
    }
}

/// agentd's request metadata (the keys of [`agent`] plus `traceparent`); each is sent only
/// when set.
///
/// ```
/// use mcp_wire::{AgentMeta, Meta};
///
/// let mut call = AgentMeta::new("run-1", "my-agent");
/// call.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
/// let mut meta = Meta::new();
/// call.insert_into(&mut meta);
/// assert_eq!(meta["agent/run_id"], "run-1");
/// assert!(meta.get("agent/attempt").is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct AgentMeta {
    /// `agent/run_id`.
    pub run_id: String,
    /// `agent/instance`.
    pub instance: String,
    /// `traceparent`, when the call is made with an active trace.
    pub traceparent: Option<String>,
    /// `agent/ctx`, on calls made during a conversation turn.
    pub ctx: Option<Value>,
    /// `agent/idempotency_key`.
    pub idempotency_key: Option<String>,
    /// `agent/attempt`, on calls from an `mcp.tool` step.
    pub attempt: Option<u32>,
    /// `agent/run`, on calls from an `mcp.tool` step.
    pub run: Option<String>,
    /// `agent/acting_for`, on calls from the supervisor's tool registry.
    pub acting_for: Option<Value>,
    /// `agent/labels`, on calls from the supervisor's tool registry.
    pub labels: Option<BTreeMap<String, String>>,
}

impl AgentMeta {
    /// The two keys every call carries.
    pub fn new(run_id: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            instance: instance.into(),
            ..Self::default()
        }
    }

    /// Writes the keys that are set into `meta`, replacing any already there.
    pub fn insert_into(&self, meta: &mut Meta) {
        meta.insert(agent::RUN_ID.into(), Value::String(self.run_id.clone()));
        meta.insert(agent::INSTANCE.into(), Value::String(self.instance.clone()));
        let optional = [
            (key::TRACEPARENT, self.traceparent.as_ref().map(to_value)),
            (agent::CTX, self.ctx.clone()),
            (
                agent::IDEMPOTENCY_KEY,
                self.idempotency_key.as_ref().map(to_value),
            ),
            (agent::ATTEMPT, self.attempt.map(Value::from)),
            (agent::RUN, self.run.as_ref().map(to_value)),
            (agent::ACTING_FOR, self.acting_for.clone()),
            (agent::LABELS, self.labels.as_ref().map(to_value)),
        ];
        for (k, v) in optional {
            if let Some(v) = v {
                meta.insert(k.into(), v);
            }
        }
    }
}

/// Converts a value whose `Serialize` cannot fail (plain structs of strings and maps with
/// string keys) into a `Value`.
fn to_value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
