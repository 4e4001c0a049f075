//! Helpers shared by the transport integration tests: request bodies, the `_meta` keys of a
//! 2026-07-28 request, the legacy handshake, and bounded waiting.

// Each test file uses only some of the helpers.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_reference_server::ReferenceServer;
use mcp_transport::driver::{Config, HttpClient, LegacyTransport};
use mcp_wire::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, Implementation, InitializeParams,
    InitializeResult, Meta, ModernMeta, RequestId, Revision, encode_notification, encode_request,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The revision every modern request states.
pub(crate) const MODERN: Revision = Revision::V2026_07_28;

/// The `_meta` every 2026-07-28 request carries: revision, client info and capabilities.
pub(crate) fn modern_meta() -> Meta {
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
pub(crate) fn request<P: Serialize + ?Sized>(id: i64, method: &str, params: &P) -> Bytes {
    let mut body = Vec::new();
    encode_request(&mut body, &RequestId::Number(id), method, Some(params)).expect("encodes");
    Bytes::from(body)
}

/// One encoded notification.
pub(crate) fn notification<P: Serialize + ?Sized>(method: &str, params: Option<&P>) -> Bytes {
    let mut body = Vec::new();
    encode_notification(&mut body, method, params).expect("encodes");
    Bytes::from(body)
}

/// A JSON object's members, for tool arguments and elicitation content.
pub(crate) fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The arguments of `add`.
pub(crate) fn add_args(a: i64, b: i64) -> Map<String, Value> {
    object(json!({"a": a, "b": b}))
}

/// A client of the server with `config`.
pub(crate) fn client(server: &ReferenceServer, config: Config) -> HttpClient {
    HttpClient::new(&server.url(), config).expect("a valid client")
}

/// Runs the legacy handshake on `transport`: `initialize`, `established`, then
/// `notifications/initialized`. Returns the revision agreed.
pub(crate) async fn handshake(transport: &LegacyTransport) -> Revision {
    let info = Implementation::new("test-client", "0.1.0");
    let caps = ClientCapabilities::none().with_elicitation();
    let params = InitializeParams::new(Revision::V2025_11_25, caps, info);
    let posted = transport
        .call::<InitializeResult>(
            RequestId::Number(0),
            "initialize",
            request(0, "initialize", &params),
            None,
        )
        .await
        .expect("initialize is answered");
    let session = posted.session_id.clone();
    let result = posted
        .call
        .response(|_| {})
        .await
        .expect("initialize has a response")
        .outcome
        .expect("initialize succeeds");
    let revision = result.revision().expect("a known revision");
    transport
        .established(revision, session.as_deref())
        .expect("a valid session id");
    transport
        .notify(
            "notifications/initialized",
            notification::<Value>("notifications/initialized", None),
        )
        .await
        .expect("notifications/initialized is accepted");
    revision
}

/// Polls `condition` every 20 ms until it holds or `bound` passes; whether it held.
pub(crate) async fn wait_until(bound: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if condition() {
            return true;
        }
        if start.elapsed() > bound {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bounds a future that must finish in a test: a hang fails the test instead of blocking it.
pub(crate) async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 5 s"))
}

/// An elicitation handler that accepts with `{"name": "Ada"}`.
#[derive(Debug)]
pub(crate) struct AcceptAda;

impl mcp_transport::driver::Elicitor for AcceptAda {
    fn elicit(
        &self,
        _params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(async { ElicitResult::accept(object(json!({"name": "Ada"}))) })
    }
}
