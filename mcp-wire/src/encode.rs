//! Writing messages: the envelope as ready text, the members through serde_json, each written
//! once, straight into the caller's buffer.
//!
//! Every function appends one message to `out`; when it fails, `out` is left as it was.

use serde::Serialize;

use crate::text::{value as json, whole};
use crate::{Error, ErrorObject, RequestId, RequestMeta};

/// Every message's first member: `{"jsonrpc":"2.0"` (see [`crate::message::JSONRPC_VERSION`]).
const OPEN: &[u8] = br#"{"jsonrpc":"2.0""#;

/// Appends a request to `out`: `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`.
///
/// The params are serialized once, straight into `out`.
///
/// ```
/// use mcp_wire::{encode_request, RequestId};
///
/// let mut out = Vec::new();
/// encode_request(&mut out, &RequestId::Number(1), "ping", None::<&()>).unwrap();
/// assert_eq!(out, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// ```
pub fn encode_request<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: &RequestId,
    method: &str,
    params: Option<&P>,
) -> Result<(), Error> {
    sent(out, Some(id), method, params)
}

/// Appends a request whose params carry `meta` as their `_meta`, written in the same pass:
/// the modern keys as the text [`crate::ModernMeta::render`] made once, then the progress
/// token, then the caller's own keys.
///
/// The params must serialize to a JSON object with no `_meta` of its own (it would be
/// written twice); with an empty `meta` they are written as they are, as [`encode_request`]
/// would.
///
/// ```
/// use mcp_wire::{encode_request_with_meta, CallToolParams, ClientCapabilities,
///     Implementation, Meta, ModernMeta, RequestId, RequestMeta, Revision};
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
/// let mut out = Vec::new();
/// let id = RequestId::Number(7);
/// encode_request_with_meta(&mut out, &id, "tools/call", &CallToolParams::new("add"), &meta)
///     .unwrap();
/// assert_eq!(String::from_utf8(out).unwrap(), concat!(
///     r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add","_meta":{"#,
///     r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
///     r#""io.modelcontextprotocol/clientInfo":{"name":"my-client","version":"0.1.0"},"#,
///     r#""io.modelcontextprotocol/clientCapabilities":{},"#,
///     r#""example.com/run":"run-1"}}}"#));
/// ```
pub fn encode_request_with_meta<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: &RequestId,
    method: &str,
    params: &P,
    meta: &RequestMeta<'_>,
) -> Result<(), Error> {
    if meta.is_empty() {
        return sent(out, Some(id), method, Some(params));
    }
    whole(out, |out| {
        head(out, Some(id), method)?;
        out.extend_from_slice(br#","params":"#);
        let start = out.len();
        json(out, params)?;
        if out.get(start) != Some(&b'{') || out.last() != Some(&b'}') {
            return Err(Error::Encode {
                detail: "params with a _meta must be a JSON object".into(),
            });
        }
        // The object is reopened: its `}` gives way to `_meta` and comes back after it.
        // Raw params may keep whitespace before their `}`; an empty object takes no comma.
        out.pop();
        while out.len() > start + 1 && out.last().is_some_and(u8::is_ascii_whitespace) {
            out.pop();
        }
        if out.len() > start + 1 {
            out.push(b',');
        }
        out.extend_from_slice(br#""_meta":"#);
        meta.write(out)?;
        out.extend_from_slice(b"}}");
        Ok(())
    })
}

/// Appends a notification to `out`.
///
/// ```
/// use mcp_wire::encode_notification;
///
/// let mut out = Vec::new();
/// encode_notification(&mut out, "notifications/initialized", None::<&()>).unwrap();
/// assert_eq!(out, br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
/// ```
pub fn encode_notification<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    method: &str,
    params: Option<&P>,
) -> Result<(), Error> {
    sent(out, None, method, params)
}

/// Appends a successful response to `out`.
///
/// ```
/// use mcp_wire::{encode_result, RequestId};
///
/// let mut out = Vec::new();
/// encode_result(&mut out, &RequestId::Number(1), &serde_json::json!({})).unwrap();
/// assert_eq!(out, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// ```
pub fn encode_result<R: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: &RequestId,
    result: &R,
) -> Result<(), Error> {
    answer(out, Some(id), br#","result":"#, result)
}

/// Appends an error response to `out`; `id` is `None` only when the request could not be
/// read, and is then left out, as MCP's schema has it (`id?: RequestId`), rather than written
/// as JSON-RPC's `null`.
pub fn encode_error(
    out: &mut Vec<u8>,
    id: Option<&RequestId>,
    error: &ErrorObject,
) -> Result<(), Error> {
    answer(out, id, br#","error":"#, error)
}

/// A request or a notification: the version, the id if any, the method, the params if any.
fn sent<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: Option<&RequestId>,
    method: &str,
    params: Option<&P>,
) -> Result<(), Error> {
    whole(out, |out| {
        head(out, id, method)?;
        if let Some(params) = params {
            member(out, br#","params":"#, params)?;
        }
        out.push(b'}');
        Ok(())
    })
}

/// A response: the version, the id if any, and its result or error as `name` (a ready
/// `,"key":`).
fn answer<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: Option<&RequestId>,
    name: &[u8],
    value: &T,
) -> Result<(), Error> {
    whole(out, |out| {
        out.extend_from_slice(OPEN);
        if let Some(id) = id {
            member(out, br#","id":"#, id)?;
        }
        member(out, name, value)?;
        out.push(b'}');
        Ok(())
    })
}

/// A request's or notification's beginning: the version, the id if any, the method.
fn head(out: &mut Vec<u8>, id: Option<&RequestId>, method: &str) -> Result<(), Error> {
    out.extend_from_slice(OPEN);
    if let Some(id) = id {
        member(out, br#","id":"#, id)?;
    }
    member(out, br#","method":"#, method)
}

/// `name` (a ready `,"key":`) and the value.
fn member<T: Serialize + ?Sized>(out: &mut Vec<u8>, name: &[u8], value: &T) -> Result<(), Error> {
    out.extend_from_slice(name);
    json(out, value)
}
