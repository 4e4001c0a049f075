//! A first round trip through the transport against the reference server, in each era.

use bytes::Bytes;
use mcp_reference_server::{Options, ReferenceServer};
use mcp_transport::driver::{Config, HttpClient, LegacyTransport, ModernTransport, Routing};
use mcp_wire::{
    ClientCapabilities, DiscoverParams, DiscoverResult, Implementation, InitializeParams,
    InitializeResult, Meta, ModernMeta, RequestId, Revision, encode_request,
};

#[tokio::test]
async fn modern_discover_and_legacy_initialize() {
    let server = ReferenceServer::start(Options::default()).await;
    let client = HttpClient::new(&server.url(), Config::default()).unwrap();

    let info = Implementation::new("my-client", "0.1.0");
    let caps = ClientCapabilities::none();
    let mut meta = Meta::new();
    ModernMeta {
        revision: Revision::V2026_07_28,
        client_info: &info,
        client_capabilities: &caps,
    }
    .insert_into(&mut meta);
    let mut body = Vec::new();
    encode_request(
        &mut body,
        &RequestId::Number(0),
        "server/discover",
        Some(&DiscoverParams::new(meta)),
    )
    .unwrap();
    let modern = ModernTransport::new(client.clone(), Revision::V2026_07_28);
    let call = modern
        .call::<DiscoverResult>(
            RequestId::Number(0),
            "server/discover",
            Bytes::from(body),
            &Routing::default(),
        )
        .await
        .unwrap();
    let discovered = call.response(|_| {}).await.unwrap().outcome.unwrap();
    assert_eq!(discovered.supported_versions, ["2026-07-28"]);

    let legacy = LegacyTransport::new(client, mcp_transport::driver::ClientFeatures::none());
    let mut body = Vec::new();
    let params = InitializeParams::new(Revision::V2025_11_25, caps, info);
    encode_request(
        &mut body,
        &RequestId::Number(1),
        "initialize",
        Some(&params),
    )
    .unwrap();
    let posted = legacy
        .call::<InitializeResult>(RequestId::Number(1), "initialize", Bytes::from(body), None)
        .await
        .unwrap();
    let session = posted.session_id.clone();
    let result = posted.call.response(|_| {}).await.unwrap().outcome.unwrap();
    legacy
        .established(result.revision().unwrap(), session.as_deref())
        .unwrap();
    assert!(legacy.snapshot().id().is_some());
    let log = server.log();
    assert_eq!(log[0].header("mcp-method"), Some("server/discover"));
    assert_eq!(log[1].header("mcp-protocol-version"), None);
}
