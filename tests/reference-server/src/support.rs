//! Helpers for the tests that drive a client against the server: request bodies, the `_meta`
//! of a 2026-07-28 request, JSON objects, bounded waiting, and a person who answers `Ada`.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use mcp_wire::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, Implementation, Meta, ModernMeta,
    RequestId, Revision, encode_notification, encode_request,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The revision every modern request states.
pub const MODERN: Revision = Revision::V2026_07_28;

/// The `_meta` every 2026-07-28 request carries: revision, client info and capabilities
/// (elicitation declared).
pub fn modern_meta() -> Meta {
    let info = Implementation::new("test-client", "0.1.0");
    let caps = ClientCapabilities::none().with_elicitation();
    let mut meta = Meta::new();
    ModernMeta {
        revision: MODERN,
        client_info: &info,
        client_capabilities: &caps,
    }
    .insert_into(&mut meta);
    meta
}

/// One encoded request.
pub fn request<P: Serialize + ?Sized>(id: i64, method: &str, params: &P) -> Bytes {
    let mut body = Vec::new();
    encode_request(&mut body, &RequestId::Number(id), method, Some(params)).expect("encodes");
    Bytes::from(body)
}

/// One encoded notification.
pub fn notification<P: Serialize + ?Sized>(method: &str, params: Option<&P>) -> Bytes {
    let mut body = Vec::new();
    encode_notification(&mut body, method, params).expect("encodes");
    Bytes::from(body)
}

/// A JSON object's members, for tool arguments and elicitation content.
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The arguments of `add`.
pub fn add_args(a: i64, b: i64) -> Map<String, Value> {
    object(json!({"a": a, "b": b}))
}

/// Bounds a future that must finish in a test: a hang fails the test instead of blocking it.
pub async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 5 s"))
}

/// An elicitation handler that accepts with `{"name": "Ada"}`.
pub async fn accept_ada(_: ElicitRequestParams) -> ElicitResult {
    ElicitResult::accept(object(json!({"name": "Ada"})))
}
