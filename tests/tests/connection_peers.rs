//! `Client`, the revision-neutral connection, against the real peers: the Python `mcp` 2.3.0
//! server and the TypeScript `server-everything` (mcp-negotiate's own tests drive it against
//! the reference server).
//!
//! The peers are installed by `tests/peers/install.sh`; a missing peer fails these tests.

mod common;

use std::future::Future;
use std::time::Duration;

use agentd_tests::peers;
use common::{accept_ada, add_args, object};
use mcp_negotiate::{Client, ClientBuilder, Error, Watch};
use mcp_wire::{CallToolResult, Meta, ResourceContents, Revision, Root};
use serde_json::{Value, json};

const INSTANCE: &str = "my-agent";

/// A client as agentd's supervisor makes it: named, titled with the instance, no features.
fn supervisor_kind() -> ClientBuilder {
    Client::builder("agentd", "0.1.0").title(INSTANCE)
}

/// A client that declares elicitation, answered with `Ada`, and waits 60 s.
fn worker_kind() -> ClientBuilder {
    Client::builder("agentd", "0.1.0")
        .elicitation(accept_ada)
        .timeout(Duration::from_secs(60))
}

/// The text of a tool result's first block.
fn text(result: &CallToolResult) -> &str {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .unwrap_or_else(|| panic!("no text block in {result:?}"))
}

/// Every text block of a tool result, joined.
fn all_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    Some(object(value))
}

/// The text of a resource read's first contents.
fn contents_text(contents: &[ResourceContents]) -> &str {
    match contents.first() {
        Some(ResourceContents::Text { text, .. }) => text,
        other => panic!("expected text contents, got {other:?}"),
    }
}

/// Bounds a future at `secs` seconds.
async fn within<T>(secs: u64, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {secs} s"))
}

/// The caller's own `_meta` keys: those of agentd's "Request metadata" table.
fn full_agent_meta() -> Meta {
    object(json!({
        "agent/run_id": "run-42",
        "agent/instance": INSTANCE,
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "agent/ctx": {"turn": 3, "conversation": "c-1"},
        "agent/idempotency_key": "idem-7",
        "agent/attempt": 2,
        "agent/run": "wf-run-9",
        "agent/acting_for": {"principal": "user:ada"},
        "agent/labels": {"team": "infra", "env": "prod"},
    }))
}

/// The two keys every agentd call carries.
fn minimal_meta(run_id: &str) -> Meta {
    object(json!({"agent/run_id": run_id, "agent/instance": INSTANCE}))
}

// ---------------------------------------------------------------------------------------------
// 1. The Python peer (mcp 2.3.0)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_peer_is_reached_at_2026_07_28_listed_and_called() {
    for json_mode in [true, false] {
        let peer = peers::python(json_mode);
        let connection = within(
            20,
            "connect",
            Client::connect(supervisor_kind().dialer(&peer.url).unwrap()),
        )
        .await
        .unwrap_or_else(|e| panic!("json {json_mode}: {e}\n{}", peer.output_tail()));
        assert_eq!(
            connection.revision(),
            Revision::V2026_07_28,
            "json {json_mode}"
        );
        let catalog = connection.catalog();
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        for tool in ["add", "slow", "ask_name", "touch"] {
            assert!(
                names.contains(&tool),
                "json {json_mode}: {tool} in {names:?}"
            );
        }
        assert!(catalog.dropped().is_empty(), "{:?}", catalog.dropped());

        let agent = full_agent_meta();
        let sum = within(
            10,
            "add",
            connection.call_tool_with("add", Some(add_args(20, 22)), Some(&agent), |_| {}),
        )
        .await
        .unwrap_or_else(|e| panic!("json {json_mode}: {e}\n{}", peer.output_tail()));
        assert_eq!(text(&sum), "42", "json {json_mode}");
        assert!(!sum.is_error());

        let read = within(10, "read", connection.read_resource("demo://greeting"))
            .await
            .unwrap_or_else(|e| panic!("json {json_mode}: {e}\n{}", peer.output_tail()));
        assert_eq!(contents_text(&read.contents), "hello", "json {json_mode}");

        let resources = within(10, "resources", connection.list_resources())
            .await
            .unwrap();
        assert!(
            resources.iter().any(|r| r.uri == "demo://greeting"),
            "{resources:?}"
        );

        let mut notices: Vec<String> = Vec::new();
        let slow = within(
            10,
            "slow",
            connection.call_tool_with("slow", args(json!({"steps": 2})), None, |n| {
                notices.push(n.method)
            }),
        )
        .await
        .unwrap();
        assert_eq!(text(&slow), "done 2", "json {json_mode}");
        // Progress at 2026-07-28 travels on the call's event stream: the JSON mode has none
        // and the SDK drops it there.
        let expected: &[&str] = if json_mode {
            &[]
        } else {
            &["notifications/progress"; 2]
        };
        assert_eq!(notices, expected, "json {json_mode}");

        let unknown = within(
            10,
            "unknown",
            connection.call_tool_with("nope", None, None, |_| {}),
        )
        .await;
        // The Python SDK reports an unknown tool as a tool error, not a protocol fault.
        let unknown = unknown.unwrap_or_else(|e| panic!("json {json_mode}: {e:?}"));
        assert!(unknown.is_error(), "json {json_mode}: {unknown:?}");
        assert_eq!(text(&unknown), "Unknown tool: nope", "json {json_mode}");
    }
}

/// On 2026-07-28 the Python server has no back-channel for a server-to-client request: its
/// `ask_name` cannot elicit. What the worker's connection sees is pinned here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_peer_ask_name_at_2026_07_28_cannot_elicit() {
    for json_mode in [true, false] {
        let peer = peers::python(json_mode);
        let connection = within(
            20,
            "connect",
            Client::connect(worker_kind().dialer(&peer.url).unwrap()),
        )
        .await
        .unwrap_or_else(|e| panic!("json {json_mode}: {e}\n{}", peer.output_tail()));
        assert_eq!(connection.revision(), Revision::V2026_07_28);
        let asked = within(
            15,
            "ask_name",
            connection.call_tool_with("ask_name", args(json!({})), None, |_| {}),
        )
        .await;
        // mcp 2.3.0 answers the call with a JSON-RPC error: it cannot send
        // `elicitation/create` on the stateless wire and does not turn it into an
        // `input_required` result, so the worker's elicitor is never asked.
        match asked {
            Err(Error::Rpc(e)) => {
                assert_eq!(e.code, -32600, "json {json_mode}: {e:?}");
                assert!(
                    e.message.contains("no back-channel"),
                    "json {json_mode}: {e:?}"
                );
            }
            other => panic!("json {json_mode}: {other:?}\n{}", peer.output_tail()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The TypeScript server-everything
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_falls_back_to_2025_11_25_lists_and_calls_echo() {
    let peer = peers::everything();
    let connection = within(
        20,
        "connect",
        Client::connect(supervisor_kind().dialer(&peer.url).unwrap()),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    assert_eq!(connection.revision(), Revision::V2025_11_25);
    let catalog = connection.catalog();
    let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"get-sum"), "{names:?}");
    // The tool is registered only for a client that declares elicitation.
    assert!(!names.contains(&"trigger-elicitation-request"), "{names:?}");
    assert!(catalog.dropped().is_empty());

    let agent = minimal_meta("run-1");
    let echoed = within(
        10,
        "echo",
        connection.call_tool_with("echo", args(json!({"message": "hi"})), Some(&agent), |_| {}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    assert_eq!(text(&echoed), "Echo: hi");

    let resources = within(10, "resources", connection.list_resources())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    assert!(!resources.is_empty());
    let first = &resources[0].uri;
    let read = within(10, "read", connection.read_resource(first))
        .await
        .unwrap_or_else(|e| panic!("{first}: {e}\n{}", peer.output_tail()));
    assert_eq!(read.contents[0].uri(), first);
    let prompts = within(10, "prompts", connection.list_prompts())
        .await
        .unwrap();
    assert!(!prompts.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_elicitation_is_answered_by_the_workers_elicitor() {
    let peer = peers::everything();
    let connection = within(
        20,
        "connect",
        Client::connect(worker_kind().dialer(&peer.url).unwrap()),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    assert_eq!(connection.revision(), Revision::V2025_11_25);
    let names: Vec<String> = connection
        .catalog()
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        names.iter().any(|n| n == "trigger-elicitation-request"),
        "{names:?}"
    );
    let answered = within(
        10,
        "trigger-elicitation-request",
        connection.call_tool_with("trigger-elicitation-request", args(json!({})), None, |_| {}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    let said = all_text(&answered);
    assert!(!answered.is_error(), "{said}");
    assert!(
        said.contains("User provided the requested information"),
        "{said}"
    );
    assert!(said.contains("- Name: Ada"), "{said}");
}

/// The TypeScript `server-everything` (2025-11-25) asks a client that declares roots for
/// them on its GET stream, and its `get-roots-list` tool reports what it got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_lists_the_roots_the_client_declared() {
    let peer = peers::everything();
    let client = Client::builder("my-app", "1.0")
        .roots(vec![
            Root::new("file:///work/src").with_name("src"),
            Root::new("file:///work/docs"),
        ])
        .connect(&peer.url);
    let client = std::sync::Arc::new(
        within(20, "connect", client)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail())),
    );
    assert_eq!(client.revision(), Revision::V2025_11_25);
    let names: Vec<String> = client
        .catalog()
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.iter().any(|n| n == "get-roots-list"), "{names:?}");
    // The server asks on the GET stream, which a watch holds open.
    let mut watch = Watch::new(client.clone());
    assert!(within(10, "open", watch.open()).await.unwrap());
    let listen = tokio::spawn(async move { while let Ok(Some(_)) = watch.next().await {} });
    let listed = within(
        15,
        "get-roots-list",
        client.call_tool("get-roots-list", json!({})),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", peer.output_tail()));
    listen.abort();
    let said: String = listed.content.iter().filter_map(|c| c.as_text()).collect();
    assert!(said.contains("file:///work/src"), "{said}");
    assert!(said.contains("file:///work/docs"), "{said}");
}
