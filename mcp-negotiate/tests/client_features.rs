//! What a client built with `Client::builder` declares and serves: roots answered in an
//! `input_required` round, and tools listed at connect only when the server declares them
//! and the client asks. (Roots on a legacy server's stream: `connection_peers.rs` of the
//! workspace's tests crate, against server-everything.)

use std::future::Future;
use std::time::Duration;

use mcp_negotiate::Client;
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use mcp_wire::{Revision, Root};
use serde_json::json;

async fn within<T>(secs: u64, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {secs} s"))
}

fn roots() -> Vec<Root> {
    vec![
        Root::new("file:///work/src").with_name("src"),
        Root::new("file:///work/docs"),
    ]
}

/// A 2026-07-28 server that declares no tools is connected without a `tools/list`, even
/// though it would refuse one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tools_is_connected_without_a_listing() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script(
        "server/discover",
        Fault::Result(json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"resources": {}},
        })),
        Times::Always,
    );
    server.script(
        "tools/list",
        Fault::RpcError {
            status: 200,
            code: -32601,
            message: "Method not found".into(),
            data: None,
        },
        Times::Always,
    );
    let client = within(
        5,
        "connect",
        Client::builder("my-app", "1.0").connect(&server.url()),
    )
    .await
    .expect("a resources-only server is connected");
    assert_eq!(client.revision(), Revision::V2026_07_28);
    assert!(client.catalog().tools().is_empty());
    assert_eq!(server.methods(), ["server/discover"]);
}

/// A client that asks for no listing sends none, though the server declares tools; it lists
/// them when told to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_asks_for_no_listing_sends_none() {
    let server = ReferenceServer::start(Options::default()).await;
    let client = Client::builder("my-app", "1.0")
        .list_tools(false)
        .connect(&server.url());
    let client = within(5, "connect", client).await.expect("connected");
    assert!(client.capabilities().tools());
    assert!(client.catalog().tools().is_empty());
    assert_eq!(server.methods(), ["server/discover"]);
    let catalog = within(5, "refresh_tools", client.refresh_tools())
        .await
        .unwrap();
    assert_eq!(catalog.tools().len(), 5);
}

/// A 2026-07-28 server asking for the roots in an `input_required` round gets them in the
/// retry's `inputResponses`, under the key it asked with; the client declared `roots`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_answered_in_an_input_required_round() {
    let server = ReferenceServer::start(Options::default()).await;
    let client = Client::builder("my-app", "1.0")
        .roots(roots())
        .connect(&server.url());
    let client = within(5, "connect", client).await.expect("connected");
    server.script(
        "tools/call",
        Fault::Result(json!({
            "resultType": "input_required",
            "inputRequests": {"where": {"method": "roots/list", "params": {}}},
            "requestState": "s-1",
        })),
        Times::Once,
    );
    let result = within(5, "add", client.call_tool("add", json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("3"));
    let log = server.log();
    let calls: Vec<_> = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"))
        .collect();
    assert_eq!(calls.len(), 2);
    let retry = &calls[1].body["params"];
    assert_eq!(retry["requestState"], "s-1");
    assert_eq!(
        retry["inputResponses"],
        json!({"where": {"roots": [
            {"uri": "file:///work/src", "name": "src"},
            {"uri": "file:///work/docs"},
        ]}})
    );
    assert_eq!(
        calls[0].body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({"roots": {}})
    );
}

/// A client that declared no roots does not answer a roots round: the request fails, naming
/// the method, and no retry is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roots_round_without_roots_declared_is_unanswerable() {
    let server = ReferenceServer::start(Options::default()).await;
    let client = within(
        5,
        "connect",
        Client::builder("my-app", "1.0").connect(&server.url()),
    )
    .await
    .expect("connected");
    server.script(
        "tools/call",
        Fault::Result(json!({
            "resultType": "input_required",
            "inputRequests": {"where": {"method": "roots/list", "params": {}}},
        })),
        Times::Once,
    );
    let refused = within(5, "add", client.call_tool("add", json!({"a": 1, "b": 2}))).await;
    assert_eq!(
        refused,
        Err(mcp_negotiate::Error::Unanswerable {
            method: "roots/list".into()
        })
    );
    let calls = server
        .methods()
        .iter()
        .filter(|m| *m == "tools/call")
        .count();
    assert_eq!(calls, 1, "no retry is sent");
}
