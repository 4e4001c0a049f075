//! `_meta`: the open metadata object on params, results and notifications, and its keys.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::text::{self, whole};
use crate::{ClientCapabilities, Error, Implementation, Revision};

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

/// The three keys every 2026-07-28 request carries in `params._meta`.
///
/// ```
/// use mcp_wire::{ClientCapabilities, Implementation, Meta, ModernMeta, Revision};
///
/// let info = Implementation::new("my-client", "0.1.0");
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
    /// Renders the three keys once, for a connection to write on every request as text.
    pub fn render(&self) -> Result<RenderedMeta, Error> {
        let mut members = Vec::with_capacity(256);
        member(&mut members, key::PROTOCOL_VERSION, self.revision.as_str())?;
        members.push(b',');
        member(&mut members, key::CLIENT_INFO, self.client_info)?;
        members.push(b',');
        member(
            &mut members,
            key::CLIENT_CAPABILITIES,
            self.client_capabilities,
        )?;
        Ok(RenderedMeta {
            revision: self.revision,
            members: members.into_boxed_slice(),
        })
    }

    /// Writes the three keys into `meta`, replacing any already there.
    pub fn insert_into(&self, meta: &mut Meta) {
        if let Ok(rendered) = self.render() {
            RequestMeta {
                modern: Some(&rendered),
                ..RequestMeta::default()
            }
            .insert_into(meta);
        }
    }
}

/// The three keys of a modern request, rendered to JSON once (see [`ModernMeta::render`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedMeta {
    revision: Revision,
    /// `"…protocolVersion":…,"…clientInfo":…,"…clientCapabilities":…`, an object's members.
    members: Box<[u8]>,
}

impl RenderedMeta {
    /// The revision the requests state (also their `MCP-Protocol-Version`).
    pub fn revision(&self) -> Revision {
        self.revision
    }
}

/// A request's `_meta`, written in one pass from its parts: the modern keys rendered once per
/// connection, a progress token, and the caller's own keys. [`crate::encode_request_with_meta`]
/// writes it into a request's params.
///
/// ```
/// use mcp_wire::{ClientCapabilities, Implementation, Meta, ModernMeta, RequestMeta, Revision};
///
/// let info = Implementation::new("my-client", "0.1.0");
/// let caps = ClientCapabilities::none();
/// let rendered = ModernMeta { revision: Revision::V2026_07_28, client_info: &info,
///     client_capabilities: &caps }.render().unwrap();
/// let mut mine = Meta::new();
/// mine.insert("example.com/run".into(), "run-1".into());
/// let mut meta = RequestMeta::default();
/// meta.modern = Some(&rendered);
/// meta.extra = Some(&mine);
/// let mut text = Vec::new();
/// meta.write(&mut text).unwrap();
/// assert_eq!(String::from_utf8(text).unwrap(), concat!("{",
///     r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
///     r#""io.modelcontextprotocol/clientInfo":{"name":"my-client","version":"0.1.0"},"#,
///     r#""io.modelcontextprotocol/clientCapabilities":{},"#,
///     r#""example.com/run":"run-1"}"#));
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RequestMeta<'a> {
    /// The modern keys (2026-07-28 requests).
    pub modern: Option<&'a RenderedMeta>,
    /// `progressToken`, to ask for progress notifications.
    pub progress_token: Option<&'a crate::ProgressToken>,
    /// Any other keys; a key written by the parts above is not written twice.
    pub extra: Option<&'a Meta>,
}

impl RequestMeta<'_> {
    /// Whether nothing would be written.
    pub fn is_empty(&self) -> bool {
        self.modern.is_none()
            && self.progress_token.is_none()
            && self.extra.is_none_or(Map::is_empty)
    }

    /// Appends the `_meta` object to `out`; when it fails (a key of `extra` whose value does
    /// not serialize), `out` is left as it was.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        whole(out, |out| self.write_members(out))
    }

    fn write_members(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'{');
        let open = out.len();
        let comma = |out: &mut Vec<u8>| {
            if out.len() > open {
                out.push(b',');
            }
        };
        if let Some(m) = self.modern {
            out.extend_from_slice(&m.members);
        }
        if let Some(token) = self.progress_token {
            comma(out);
            member(out, key::PROGRESS_TOKEN, token)?;
        }
        for (k, v) in self.extra.into_iter().flatten() {
            if !self.writes(k) {
                comma(out);
                member(out, k, v)?;
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// Writes the keys into `meta`, replacing any already there.
    pub fn insert_into(&self, meta: &mut Meta) {
        let mut text = Vec::with_capacity(256);
        if self.write(&mut text).is_ok()
            && let Ok(map) = serde_json::from_slice::<Meta>(&text)
        {
            meta.extend(map);
        }
    }

    fn writes(&self, k: &str) -> bool {
        let modern = [
            key::PROTOCOL_VERSION,
            key::CLIENT_INFO,
            key::CLIENT_CAPABILITIES,
        ];
        (self.modern.is_some() && modern.contains(&k))
            || (self.progress_token.is_some() && k == key::PROGRESS_TOKEN)
    }
}

/// An object's member: `"key":value`.
fn member<T: Serialize + ?Sized>(out: &mut Vec<u8>, key: &str, value: &T) -> Result<(), Error> {
    text::value(out, key)?;
    out.push(b':');
    text::value(out, value)
}
