//! Helpers shared by the transport integration tests: the reference server's (request
//! bodies, the `_meta` of a 2026-07-28 request, bounded waiting), the HTTP client, the legacy
//! handshake, and waiting for a state.

// Each test file uses only some of the helpers.
#![allow(dead_code)]

use std::time::Duration;

use mcp_reference_server::ReferenceServer;
pub(crate) use mcp_reference_server::support::*;
use mcp_transport::driver::{Config, HttpClient, LegacyTransport};
use mcp_wire::{
    ClientCapabilities, Implementation, InitializeParams, InitializeResult, RequestId, Revision,
};
use serde_json::Value;
use tokio::time::Instant;

/// The pooled HTTP client of `server`'s endpoint.
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

/// Polls `condition` every 20 ms until it holds or `bound` passes (on tokio's clock, virtual
/// in a paused test); whether it held.
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
