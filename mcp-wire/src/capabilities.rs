//! Client and server capabilities, kept whole.
//!
//! Capabilities are open: peers add keys (`experimental`, `extensions`, keys of later
//! revisions). Both types hold the object exactly as received, so it encodes back unchanged,
//! and read the keys a client acts on through accessors.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Capabilities a client declares (`initialize` params or the per-request `_meta`).
///
/// ```
/// use mcp_wire::ClientCapabilities;
///
/// assert_eq!(serde_json::to_string(&ClientCapabilities::none()).unwrap(), "{}");
/// let caps = ClientCapabilities::none().with_elicitation();
/// assert!(caps.elicitation_form());
/// assert!(!caps.elicitation_url());
/// assert_eq!(serde_json::to_string(&caps).unwrap(), r#"{"elicitation":{"form":{}}}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClientCapabilities(Map<String, Value>);

/// Capabilities a server declares (`initialize` result or `server/discover` result).
///
/// ```
/// use mcp_wire::ServerCapabilities;
///
/// let caps: ServerCapabilities = serde_json::from_str(
///     r#"{"resources":{"subscribe":true},"extensions":{"io.modelcontextprotocol/events":{}}}"#,
/// ).unwrap();
/// assert!(caps.resources_subscribe());
/// assert!(!caps.tools_list_changed());
/// assert!(caps.events().is_some());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServerCapabilities(Map<String, Value>);

fn flag(map: &Map<String, Value>, group: &str, key: &str) -> bool {
    map.get(group)
        .and_then(|g| g.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn extension<'a>(map: &'a Map<String, Value>, id: &str) -> Option<&'a Value> {
    map.get("extensions")?.get(id)
}

impl ClientCapabilities {
    /// No capabilities: `{}`.
    pub fn none() -> Self {
        Self::default()
    }

    /// Adds form-mode elicitation (`"elicitation":{"form":{}}`).
    pub fn with_elicitation(mut self) -> Self {
        let mut modes = Map::new();
        modes.insert("form".into(), Value::Object(Map::new()));
        self.0.insert("elicitation".into(), Value::Object(modes));
        self
    }

    /// Adds roots (`"roots":{}`): the client answers `roots/list`. It sends no
    /// `notifications/roots/list_changed`, so `listChanged` is not declared.
    pub fn with_roots(mut self) -> Self {
        self.0.insert("roots".into(), Value::Object(Map::new()));
        self
    }

    /// Whether roots are declared.
    pub fn roots(&self) -> bool {
        matches!(self.0.get("roots"), Some(Value::Object(_)))
    }

    /// Adds an extension under `extensions` with its settings object.
    pub fn with_extension(mut self, id: &str, settings: Map<String, Value>) -> Self {
        let extensions = self
            .0
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = extensions {
            map.insert(id.into(), Value::Object(settings));
        }
        self
    }

    /// Whether form-mode elicitation is declared. An empty `elicitation` object means form
    /// mode, for compatibility with 2025-06-18.
    pub fn elicitation_form(&self) -> bool {
        match self.0.get("elicitation") {
            Some(Value::Object(modes)) => modes.is_empty() || modes.contains_key("form"),
            _ => false,
        }
    }

    /// Whether URL-mode elicitation is declared.
    pub fn elicitation_url(&self) -> bool {
        matches!(self.0.get("elicitation"), Some(Value::Object(m)) if m.contains_key("url"))
    }

    /// The settings of an extension, if declared.
    pub fn extension(&self, id: &str) -> Option<&Value> {
        extension(&self.0, id)
    }

    /// The whole object.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl ServerCapabilities {
    /// Whether the server offers tools.
    pub fn tools(&self) -> bool {
        self.0.contains_key("tools")
    }

    /// Whether the server sends `notifications/tools/list_changed`.
    pub fn tools_list_changed(&self) -> bool {
        flag(&self.0, "tools", "listChanged")
    }

    /// Whether the server offers resources.
    pub fn resources(&self) -> bool {
        self.0.contains_key("resources")
    }

    /// Whether the server supports resource subscriptions (`resources/subscribe` in the
    /// legacy era, `resourceSubscriptions` on a listen in the modern era).
    pub fn resources_subscribe(&self) -> bool {
        flag(&self.0, "resources", "subscribe")
    }

    /// Whether the server sends `notifications/resources/list_changed`.
    pub fn resources_list_changed(&self) -> bool {
        flag(&self.0, "resources", "listChanged")
    }

    /// Whether the server offers prompts.
    pub fn prompts(&self) -> bool {
        self.0.contains_key("prompts")
    }

    /// Whether the server sends `notifications/prompts/list_changed`.
    pub fn prompts_list_changed(&self) -> bool {
        flag(&self.0, "prompts", "listChanged")
    }

    /// Whether the server offers `completion/complete`.
    pub fn completions(&self) -> bool {
        self.0.contains_key("completions")
    }

    /// Whether the server offers logging.
    pub fn logging(&self) -> bool {
        self.0.contains_key("logging")
    }

    /// The settings of an extension, if declared under `extensions`.
    pub fn extension(&self, id: &str) -> Option<&Value> {
        extension(&self.0, id)
    }

    /// The MCP Events settings: `extensions["io.modelcontextprotocol/events"]`, or the
    /// top-level `events` key that servers written before SEP-3415 declare.
    pub fn events(&self) -> Option<&Value> {
        self.extension(crate::events::EXTENSION)
            .or_else(|| self.0.get("events"))
    }

    /// Whether the server says when its event types change (`listChanged` of the events
    /// capability).
    pub fn events_list_changed(&self) -> bool {
        self.events()
            .and_then(|e| e.get("listChanged"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The whole object.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl From<Map<String, Value>> for ClientCapabilities {
    fn from(map: Map<String, Value>) -> Self {
        Self(map)
    }
}

impl From<Map<String, Value>> for ServerCapabilities {
    fn from(map: Map<String, Value>) -> Self {
        Self(map)
    }
}
