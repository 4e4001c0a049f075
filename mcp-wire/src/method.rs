//! Method names of both eras, as constants.

/// `initialize` (legacy).
pub const INITIALIZE: &str = "initialize";
/// `ping` (legacy, either direction).
pub const PING: &str = "ping";
/// `server/discover` (2026-07-28).
pub const SERVER_DISCOVER: &str = "server/discover";
/// `tools/list`.
pub const TOOLS_LIST: &str = "tools/list";
/// `tools/call`.
pub const TOOLS_CALL: &str = "tools/call";
/// `resources/list`.
pub const RESOURCES_LIST: &str = "resources/list";
/// `resources/templates/list`.
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
/// `resources/read`.
pub const RESOURCES_READ: &str = "resources/read";
/// `resources/subscribe` (legacy).
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
/// `resources/unsubscribe` (legacy).
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
/// `prompts/list`.
pub const PROMPTS_LIST: &str = "prompts/list";
/// `prompts/get`.
pub const PROMPTS_GET: &str = "prompts/get";
/// `completion/complete`.
pub const COMPLETION_COMPLETE: &str = "completion/complete";
/// `logging/setLevel` (legacy).
pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
/// `subscriptions/listen` (2026-07-28).
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// `elicitation/create`: a legacy server-to-client request, and a kind of input request.
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// `sampling/createMessage`: a server-to-client request (sampling).
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
/// `roots/list`: a server-to-client request for the client's roots.
pub const ROOTS_LIST: &str = "roots/list";
/// `events/list` (MCP Events).
pub const EVENTS_LIST: &str = "events/list";
/// `events/poll` (MCP Events).
pub const EVENTS_POLL: &str = "events/poll";
/// `events/subscribe` (MCP Events).
pub const EVENTS_SUBSCRIBE: &str = "events/subscribe";
/// `events/unsubscribe` (MCP Events).
pub const EVENTS_UNSUBSCRIBE: &str = "events/unsubscribe";

/// Notification method names.
pub mod notification {
    /// `notifications/initialized` (legacy, client to server).
    pub const INITIALIZED: &str = "notifications/initialized";
    /// `notifications/cancelled`.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// `notifications/progress`.
    pub const PROGRESS: &str = "notifications/progress";
    /// `notifications/message`.
    pub const MESSAGE: &str = "notifications/message";
    /// `notifications/resources/updated`.
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/resources/list_changed`.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/tools/list_changed`.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/roots/list_changed` (legacy, client to server).
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// `notifications/elicitation/complete` (2025-11-25).
    pub const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
    /// `notifications/tasks/status` (2025-11-25 tasks).
    pub const TASKS_STATUS: &str = "notifications/tasks/status";
    /// `notifications/subscriptions/acknowledged` (2026-07-28, first on a listen).
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    /// `notifications/events/list_changed` (MCP Events, on a listen).
    pub const EVENTS_LIST_CHANGED: &str = "notifications/events/list_changed";
}
