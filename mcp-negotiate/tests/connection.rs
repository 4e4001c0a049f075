//! `Client`, the revision-neutral connection, end to end against the reference server in
//! both eras (the legacy era forced by a 404 to `server/discover`). The same connection
//! against real peers is tested in the workspace's tests crate (`tests/tests/connection_peers.rs`).
//!
//! The reference's sections exercised: Capabilities (listing to the end, calls, reads,
//! prompts, completions, elicitation), Request metadata (`_meta` of `tools/call`), the
//! routing headers of 2026-07-28, Timeouts (silence bounds), and Known limits (dropped tools,
//! interactive reads).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcp_negotiate::{Client, ClientBuilder, Error, MAX_INPUT_ROUNDS, Reply, Start};
use mcp_reference_server::support::{accept_ada, add_args, bounded, object};
use mcp_reference_server::{Fault, Logged, Options, ReferenceServer, Times};
use mcp_transport::driver::{Config, Notice};
use mcp_wire::{
    CallToolResult, CompleteParams, CompletionReference, InvalidAnnotation, Meta, ResourceContents,
    Revision, ServerNotification,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The era a test forces the reference server into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// 2026-07-28, reached by the probe.
    Modern,
    /// 2025-11-25, reached through `initialize` after the probe got a 404.
    Legacy,
}

const ERAS: [Era; 2] = [Era::Modern, Era::Legacy];

impl Era {
    fn revision(self) -> Revision {
        match self {
            Self::Modern => Revision::V2026_07_28,
            Self::Legacy => Revision::V2025_11_25,
        }
    }
}

const INSTANCE: &str = "my-agent";

/// A client named and titled, declaring no features.
fn supervisor_kind() -> ClientBuilder {
    Client::builder("my-client", "0.1.0").title(INSTANCE)
}

/// A client that declares elicitation, answered by `elicitor`, and waits 60 s.
fn worker_with(elicitor: impl mcp_transport::driver::Elicitor + 'static) -> ClientBuilder {
    Client::builder("my-client", "0.1.0")
        .elicitation(elicitor)
        .timeout(Duration::from_secs(60))
}

/// A worker whose person answers `Ada`.
fn worker_kind() -> ClientBuilder {
    worker_with(accept_ada)
}

/// A reference server with default options, answering the probe with a 404 once when
/// `era` is legacy.
async fn server_in(era: Era) -> ReferenceServer {
    let server = ReferenceServer::start(Options::default()).await;
    if era == Era::Legacy {
        server.script("server/discover", Fault::Status(404, None), Times::Once);
    }
    server
}

async fn connect_with(url: &str, config: Config, kind: ClientBuilder) -> Result<Client, Error> {
    let dialer = kind.transport(config).dialer(url).expect("a dialer");
    bounded("connect", Client::connect(dialer)).await
}

/// Connects to `server` as `kind`, and checks the era reached.
async fn connect(server: &ReferenceServer, era: Era, kind: ClientBuilder) -> Client {
    let connection = connect_with(&server.url(), Config::default(), kind)
        .await
        .unwrap_or_else(|e| panic!("{era:?}: connect failed: {e}"));
    assert_eq!(connection.revision(), era.revision(), "{era:?}");
    connection
}

/// A reference server in `era` and a supervisor connection to it.
async fn setup(era: Era) -> (ReferenceServer, Client) {
    let server = server_in(era).await;
    let connection = connect(&server, era, supervisor_kind()).await;
    (server, connection)
}

/// The requests of `method` the server received, in order.
fn requests(server: &ReferenceServer, method: &str) -> Vec<Logged> {
    server
        .log()
        .into_iter()
        .filter(|l| l.method.as_deref() == Some(method))
        .collect()
}

/// The `tools/call` requests of the tool `name`.
fn calls_of(server: &ReferenceServer, name: &str) -> Vec<Logged> {
    requests(server, "tools/call")
        .into_iter()
        .filter(|l| l.body["params"]["name"] == name)
        .collect()
}

/// The cursor each request of `method` carried (`None`: no cursor).
fn cursors(server: &ReferenceServer, method: &str) -> Vec<Option<String>> {
    requests(server, method)
        .iter()
        .map(|l| l.body["params"]["cursor"].as_str().map(str::to_owned))
        .collect()
}

/// The text of a tool result's first block.
fn text(result: &CallToolResult) -> &str {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .unwrap_or_else(|| panic!("no text block in {result:?}"))
}

fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    Some(object(value))
}

/// Calls a tool with no `_meta` and no interest in notices, within 5 s.
async fn call(
    connection: &Client,
    name: &str,
    arguments: Option<serde_json::Map<String, Value>>,
) -> Result<CallToolResult, Error> {
    bounded(
        name,
        connection.call_tool_with(name, arguments, None, |_: Notice| {}),
    )
    .await
}

/// The JSON-RPC error of a failed request.
fn rpc_code(result: Result<impl std::fmt::Debug, Error>) -> i64 {
    match result {
        Err(Error::Rpc(e)) => e.code,
        other => panic!("expected Error::Rpc, got {other:?}"),
    }
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

const MODERN_KEYS: [&str; 3] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
];

// ---------------------------------------------------------------------------------------------
// 1. Listing follows nextCursor to the end
// ---------------------------------------------------------------------------------------------

/// A result that asks for one input (`key`: a request of `method` with `params`) before the
/// request is sent again with `state`.
fn asking(key: &str, method: &str, params: Value, state: &str) -> Fault {
    Fault::Result(json!({
        "resultType": "input_required",
        "inputRequests": {key: {"method": method, "params": params}},
        "requestState": state,
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_lists_every_tool_page_following_next_cursor() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let catalog = connection.catalog();
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["add", "slow", "ask", "region", "fail"], "{era:?}");
        assert!(catalog.dropped().is_empty(), "{era:?}");
        // Pages of two: no cursor, then p2, then p4 (which has no nextCursor).
        assert_eq!(
            cursors(&server, "tools/list"),
            [None, Some("p2".into()), Some("p4".into())],
            "{era:?}"
        );
        let methods = server.methods();
        let expected: &[&str] = match era {
            Era::Modern => &["server/discover", "tools/list", "tools/list", "tools/list"],
            Era::Legacy => &[
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/list",
                "tools/list",
            ],
        };
        assert_eq!(methods, expected, "{era:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_templates_and_prompts_are_listed_to_the_end() {
    for era in ERAS {
        let (server, connection) = setup(era).await;

        let resources = bounded("resources/list", connection.list_resources())
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["demo://greeting", "demo://counter"], "{era:?}");
        assert_eq!(cursors(&server, "resources/list"), [None], "{era:?}");

        let templates = bounded(
            "resources/templates/list",
            connection.list_resource_templates(),
        )
        .await
        .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(templates.len(), 1, "{era:?}");
        assert_eq!(templates[0].uri_template, "demo://item/{id}", "{era:?}");
        assert_eq!(templates[0].name, "item", "{era:?}");
        assert_eq!(
            cursors(&server, "resources/templates/list"),
            [None],
            "{era:?}"
        );

        let prompts = bounded("prompts/list", connection.list_prompts())
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(prompts.len(), 1, "{era:?}");
        assert_eq!(prompts[0].name, "greet", "{era:?}");
        let arguments = prompts[0].arguments.as_deref().unwrap_or_default();
        assert_eq!(arguments.len(), 1, "{era:?}");
        assert_eq!(arguments[0].name, "name", "{era:?}");
        assert_eq!(arguments[0].required, Some(true), "{era:?}");
        assert_eq!(cursors(&server, "prompts/list"), [None], "{era:?}");
    }
}

/// The reference server pages by two: the two resources fill exactly one page. Scripted
/// pages make every listing take several, with opaque cursors passed back verbatim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_follows_opaque_cursors_verbatim() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let cursor = "opaque/cursor==?&é";

        server.script(
            "resources/list",
            Fault::Result(json!({
                "resources": [{"uri": "demo://a", "name": "a"}],
                "nextCursor": cursor,
            })),
            Times::Once,
        );
        server.script(
            "resources/list",
            Fault::Result(json!({"resources": [{"uri": "demo://b", "name": "b"}]})),
            Times::Once,
        );
        let resources = bounded("resources/list", connection.list_resources())
            .await
            .unwrap();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["demo://a", "demo://b"], "{era:?}");
        assert_eq!(
            cursors(&server, "resources/list"),
            [None, Some(cursor.into())],
            "{era:?}"
        );

        server.script(
            "resources/templates/list",
            Fault::Result(json!({
                "resourceTemplates": [{"uriTemplate": "demo://x/{id}", "name": "x"}],
                "nextCursor": "t-1",
            })),
            Times::Once,
        );
        // "t-1" is no cursor of the reference server's: every page is scripted.
        server.script(
            "resources/templates/list",
            Fault::Result(json!({
                "resourceTemplates": [{"uriTemplate": "demo://y/{id}", "name": "y"}],
                "nextCursor": "t-2",
            })),
            Times::Once,
        );
        server.script(
            "resources/templates/list",
            Fault::Result(json!({"resourceTemplates": []})),
            Times::Once,
        );
        let templates = bounded("templates", connection.list_resource_templates())
            .await
            .unwrap();
        let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["x", "y"], "{era:?}");
        assert_eq!(
            cursors(&server, "resources/templates/list"),
            [None, Some("t-1".into()), Some("t-2".into())],
            "{era:?}"
        );

        server.script(
            "prompts/list",
            Fault::Result(json!({"prompts": [{"name": "one"}], "nextCursor": "q"})),
            Times::Once,
        );
        server.script(
            "prompts/list",
            Fault::Result(json!({"prompts": [{"name": "two"}]})),
            Times::Once,
        );
        let prompts = bounded("prompts", connection.list_prompts()).await.unwrap();
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["one", "two"], "{era:?}");
        assert_eq!(
            cursors(&server, "prompts/list"),
            [None, Some("q".into())],
            "{era:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tools_lists_every_page_again_and_replaces_the_catalogue() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        assert_eq!(requests(&server, "tools/list").len(), 3, "{era:?}");
        server.script(
            "tools/list",
            Fault::Result(json!({
                "tools": [{"name": "only", "inputSchema": {"type": "object"}}],
                "nextCursor": "p2",
            })),
            Times::Once,
        );
        let refreshed = bounded("refresh", connection.refresh_tools())
            .await
            .unwrap();
        let names: Vec<&str> = refreshed.tools().iter().map(|t| t.name.as_str()).collect();
        // The scripted first page, then the server's own pages from p2.
        assert_eq!(names, ["only", "ask", "region", "fail"], "{era:?}");
        let kept = connection.catalog();
        let names: Vec<&str> = kept.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["only", "ask", "region", "fail"], "{era:?}");
        assert_eq!(
            cursors(&server, "tools/list"),
            [
                None,
                Some("p2".into()),
                Some("p4".into()),
                None,
                Some("p2".into()),
                Some("p4".into())
            ],
            "{era:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_refused_mid_way_fails_the_connect_and_the_list() {
    for era in ERAS {
        let server = server_in(era).await;
        // The second page of the tools is refused: connect fails with the server's error.
        server.script(
            "tools/list",
            Fault::Result(json!({"tools": [], "nextCursor": "p2"})),
            Times::Once,
        );
        server.script(
            "tools/list",
            Fault::RpcError {
                status: 200,
                code: -32603,
                message: "listing broke".into(),
                data: None,
            },
            Times::Once,
        );
        let failed = connect_with(&server.url(), Config::default(), supervisor_kind()).await;
        assert_eq!(rpc_code(failed), -32603, "{era:?}");

        let server = server_in(era).await;
        let connection = connect(&server, era, supervisor_kind()).await;
        server.script(
            "prompts/list",
            Fault::RpcError {
                status: 200,
                code: -32602,
                message: "invalid cursor".into(),
                data: None,
            },
            Times::Once,
        );
        let failed = bounded("prompts", connection.list_prompts()).await;
        assert_eq!(rpc_code(failed), -32602, "{era:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Tools with an invalid x-mcp-header annotation
// ---------------------------------------------------------------------------------------------

/// One valid annotated tool, and three invalid ones: an annotation under `items`, one on a
/// `number` property, and a schema that is not an object.
fn page_with_invalid_tools() -> Value {
    json!({"tools": [
        {"name": "routed", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}}},
        {"name": "nested", "inputSchema": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}}}},
        {"name": "numeric", "inputSchema": {"type": "object", "properties": {
            "ratio": {"type": "number", "x-mcp-header": "Ratio"}}}},
        {"name": "plain", "inputSchema": {"type": "object"}},
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_header_annotations_drop_tools_at_2026_07_28_only() {
    for era in ERAS {
        let server = server_in(era).await;
        server.script(
            "tools/list",
            Fault::Result(page_with_invalid_tools()),
            Times::Once,
        );
        let connection = connect(&server, era, supervisor_kind()).await;
        let catalog = connection.catalog();
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        let dropped: Vec<(&str, &InvalidAnnotation)> = catalog
            .dropped()
            .iter()
            .map(|d| (d.tool.as_str(), &d.reason))
            .collect();
        match era {
            Era::Modern => {
                assert_eq!(names, ["routed", "plain"]);
                assert_eq!(
                    dropped,
                    [
                        (
                            "nested",
                            &InvalidAnnotation::NotStaticallyReachable {
                                path: "tags.items".into()
                            }
                        ),
                        (
                            "numeric",
                            &InvalidAnnotation::UnsupportedType {
                                name: "Ratio".into()
                            }
                        ),
                    ]
                );
            }
            Era::Legacy => {
                assert_eq!(names, ["routed", "nested", "numeric", "plain"]);
                assert!(dropped.is_empty(), "{dropped:?}");
            }
        }
    }
}

/// A schema that is not a JSON object is dropped at 2026-07-28 with the `Schema` reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_schema_is_not_an_object_is_dropped_at_2026_07_28() {
    for era in ERAS {
        let server = server_in(era).await;
        server.script(
            "tools/list",
            Fault::Result(json!({"tools": [
                {"name": "weird", "inputSchema": true},
                {"name": "fine", "inputSchema": {"type": "object"}},
            ]})),
            Times::Once,
        );
        let connection = connect(&server, era, supervisor_kind()).await;
        let catalog = connection.catalog();
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        match era {
            Era::Modern => {
                assert_eq!(names, ["fine"]);
                assert_eq!(catalog.dropped().len(), 1);
                assert_eq!(catalog.dropped()[0].tool, "weird");
                assert_eq!(catalog.dropped()[0].reason, InvalidAnnotation::Schema);
            }
            Era::Legacy => {
                assert_eq!(names, ["weird", "fine"]);
                assert!(catalog.dropped().is_empty());
            }
        }
    }
}

/// The headers of the scripted valid tool reach the call (the listing at connect is what
/// calls derive their `Mcp-Param-*` headers from).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_annotated_tool_from_a_scripted_listing_gets_its_param_header() {
    let server = server_in(Era::Modern).await;
    server.script(
        "tools/list",
        Fault::Result(page_with_invalid_tools()),
        Times::Once,
    );
    let connection = connect(&server, Era::Modern, supervisor_kind()).await;
    server.script(
        "tools/call",
        Fault::Result(json!({"content": [{"type": "text", "text": "ok"}]})),
        Times::Once,
    );
    let result = call(&connection, "routed", args(json!({"region": "eu-west"})))
        .await
        .unwrap();
    assert_eq!(text(&result), "ok");
    let sent = calls_of(&server, "routed");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("mcp-param-region"), Some("eu-west"));
    assert_eq!(sent[0].header("mcp-name"), Some("routed"));
}

// ---------------------------------------------------------------------------------------------
// 3. Request metadata and routing headers of tools/call
// ---------------------------------------------------------------------------------------------

/// The caller's own `_meta` keys: a table of correlation keys, every JSON type among them.
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

/// The two correlation keys of a minimal call.
fn minimal_meta(run_id: &str) -> Meta {
    object(json!({"agent/run_id": run_id, "agent/instance": INSTANCE}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_carries_every_agent_meta_key_in_both_eras() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let agent = full_agent_meta();
        let result = bounded(
            "add",
            connection.call_tool_with("add", Some(add_args(2, 3)), Some(&agent), |_| {}),
        )
        .await
        .unwrap();
        assert_eq!(text(&result), "5", "{era:?}");
        assert_eq!(
            result.structured_content,
            Some(json!({"result": 5})),
            "{era:?}"
        );

        let sent = calls_of(&server, "add");
        assert_eq!(sent.len(), 1, "{era:?}");
        let params = &sent[0].body["params"];
        assert_eq!(params["arguments"], json!({"a": 2, "b": 3}), "{era:?}");
        let meta = params["_meta"].as_object().expect("a _meta object");
        assert_eq!(meta["agent/run_id"], "run-42", "{era:?}");
        assert_eq!(meta["agent/instance"], INSTANCE, "{era:?}");
        assert_eq!(
            meta["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "{era:?}"
        );
        assert_eq!(
            meta["agent/ctx"],
            json!({"turn": 3, "conversation": "c-1"}),
            "{era:?}"
        );
        assert_eq!(meta["agent/idempotency_key"], "idem-7", "{era:?}");
        assert_eq!(meta["agent/attempt"], 2, "{era:?}");
        assert_eq!(meta["agent/run"], "wf-run-9", "{era:?}");
        assert_eq!(
            meta["agent/acting_for"],
            json!({"principal": "user:ada"}),
            "{era:?}"
        );
        assert_eq!(
            meta["agent/labels"],
            json!({"env": "prod", "team": "infra"}),
            "{era:?}"
        );
        assert_eq!(meta["progressToken"], sent[0].body["id"], "{era:?}");
        let modern_keys: Vec<&str> = MODERN_KEYS
            .into_iter()
            .filter(|k| meta.contains_key(*k))
            .collect();
        match era {
            Era::Modern => {
                assert_eq!(modern_keys, MODERN_KEYS);
                assert_eq!(
                    meta["io.modelcontextprotocol/protocolVersion"],
                    "2026-07-28"
                );
                assert_eq!(
                    meta["io.modelcontextprotocol/clientInfo"],
                    json!({"name": "my-client", "version": "0.1.0", "title": INSTANCE})
                );
                assert_eq!(
                    meta["io.modelcontextprotocol/clientCapabilities"],
                    json!({})
                );
                assert_eq!(meta.len(), 9 + 3 + 1, "{meta:?}");
            }
            Era::Legacy => {
                assert!(modern_keys.is_empty(), "{meta:?}");
                assert_eq!(meta.len(), 9 + 1, "{meta:?}");
            }
        }
    }
}

/// Only the keys that are set are sent: without its own keys a legacy call carries only its
/// progress token, a modern one the three protocol keys besides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_agent_keys_are_left_out() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let minimal = minimal_meta("run-1");
        bounded(
            "add",
            connection.call_tool_with("add", Some(add_args(1, 1)), Some(&minimal), |_| {}),
        )
        .await
        .unwrap();
        call(&connection, "add", Some(add_args(2, 2)))
            .await
            .unwrap();
        let sent = calls_of(&server, "add");
        assert_eq!(sent.len(), 2, "{era:?}");
        let mut protocol: Vec<&str> = vec!["progressToken"];
        if era == Era::Modern {
            protocol.extend(MODERN_KEYS);
        }
        let mut with_agent = protocol.clone();
        with_agent.extend(["agent/run_id", "agent/instance"]);
        assert_eq!(
            sorted_keys(&sent[0].body["params"]["_meta"]),
            sorted(with_agent),
            "{era:?}"
        );
        assert_eq!(
            sorted_keys(&sent[1].body["params"]["_meta"]),
            sorted(protocol),
            "{era:?}"
        );
    }
}

fn sorted(mut keys: Vec<&str>) -> Vec<String> {
    keys.sort_unstable();
    keys.into_iter().map(str::to_owned).collect()
}

fn sorted_keys(object: &Value) -> Vec<String> {
    let mut keys: Vec<String> = object
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {object}"))
        .keys()
        .cloned()
        .collect();
    keys.sort_unstable();
    keys
}

/// `Mcp-Name` and `Mcp-Param-Region` (base64 for non-ASCII) at 2026-07-28; none of the
/// modern routing headers on a legacy session, which carries its session id instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_headers_at_2026_07_28_and_none_on_legacy() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        for region in ["us-west1", "Zürich"] {
            let result = call(&connection, "region", args(json!({"region": region})))
                .await
                .unwrap_or_else(|e| panic!("{era:?} {region}: {e}"));
            assert_eq!(text(&result), region, "{era:?}");
        }
        // A call whose annotated argument is absent: no Mcp-Param header, still routed by name.
        let result = call(&connection, "add", Some(add_args(1, 2)))
            .await
            .unwrap();
        assert_eq!(text(&result), "3");

        let sent = calls_of(&server, "region");
        assert_eq!(sent.len(), 2, "{era:?}");
        let add = &calls_of(&server, "add")[0];
        match era {
            Era::Modern => {
                for l in sent.iter().chain([add]) {
                    assert_eq!(l.header("mcp-protocol-version"), Some("2026-07-28"));
                    assert_eq!(l.header("mcp-method"), Some("tools/call"));
                    assert_eq!(l.header("mcp-session-id"), None);
                }
                assert_eq!(sent[0].header("mcp-name"), Some("region"));
                assert_eq!(sent[0].header("mcp-param-region"), Some("us-west1"));
                assert_eq!(sent[1].header("mcp-name"), Some("region"));
                assert_eq!(
                    sent[1].header("mcp-param-region"),
                    Some("=?base64?WsO8cmljaA==?=")
                );
                assert_eq!(add.header("mcp-name"), Some("add"));
                assert!(
                    !add.headers
                        .keys()
                        .any(|k| k.as_str().starts_with("mcp-param-")),
                    "{:?}",
                    add.headers
                );
            }
            Era::Legacy => {
                for l in sent.iter().chain([add]) {
                    assert_eq!(l.header("mcp-protocol-version"), Some("2025-11-25"));
                    assert!(l.header("mcp-session-id").is_some());
                    assert_eq!(l.header("mcp-name"), None);
                    assert_eq!(l.header("mcp-method"), None);
                    assert!(
                        !l.headers
                            .keys()
                            .any(|k| k.as_str().starts_with("mcp-param-")),
                        "{:?}",
                        l.headers
                    );
                }
            }
        }
    }
}

/// Every request of the connection has its own JSON-RPC id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_has_a_fresh_id() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        call(&connection, "add", Some(add_args(1, 1)))
            .await
            .unwrap();
        call(&connection, "add", Some(add_args(1, 1)))
            .await
            .unwrap();
        bounded("read", connection.read_resource("demo://greeting"))
            .await
            .unwrap();
        let ids: Vec<Value> = server
            .log()
            .into_iter()
            .filter_map(|l| l.body.get("id").cloned())
            .collect();
        let mut unique = ids.clone();
        unique.sort_by_key(Value::to_string);
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "{era:?}: {ids:?}");
    }
}

/// The worker says what it is on every 2026-07-28 request (no title, the elicitation
/// capability) and in the legacy handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_states_elicitation_and_no_title() {
    for era in ERAS {
        let server = server_in(era).await;
        let connection = connect(&server, era, worker_kind()).await;
        call(&connection, "add", Some(add_args(1, 1)))
            .await
            .unwrap();
        let info = json!({"name": "my-client", "version": "0.1.0"});
        let caps = json!({"elicitation": {"form": {}}});
        match era {
            Era::Modern => {
                for l in requests(&server, "tools/list")
                    .iter()
                    .chain(&calls_of(&server, "add"))
                {
                    let meta = &l.body["params"]["_meta"];
                    assert_eq!(meta["io.modelcontextprotocol/clientInfo"], info);
                    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], caps);
                }
            }
            Era::Legacy => {
                let init = &requests(&server, "initialize")[0];
                assert_eq!(init.body["params"]["clientInfo"], info);
                assert_eq!(init.body["params"]["capabilities"], caps);
            }
        }
    }
}

/// A worker's connection that follows the supervisor's starts the way it got there (no probe
/// for a legacy server), lists the tools itself, and so carries `Mcp-Param-*` headers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_following_the_supervisor_starts_like_it_and_routes_its_calls() {
    for era in ERAS {
        let server = server_in(era).await;
        let supervisor = supervisor_kind().dialer(&server.url()).unwrap();
        let reached_by = bounded("dial", supervisor.dial(Start::Probe))
            .await
            .unwrap()
            .connected
            .reached_by;
        let before = server.log().len();
        let dialer = worker_kind().dialer(&server.url()).unwrap();
        let worker = bounded(
            "connect_with",
            Client::connect_with(dialer, Start::Like(reached_by)),
        )
        .await
        .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(worker.revision(), era.revision(), "{era:?}");
        assert_eq!(
            worker.reached_by(),
            reached_by,
            "{era:?}: a follower of it starts alike"
        );
        let first = server.log()[before].method.clone();
        let expected = match era {
            Era::Modern => "server/discover",
            Era::Legacy => "initialize",
        };
        assert_eq!(first.as_deref(), Some(expected), "{era:?}");
        assert_eq!(
            requests(&server, "server/discover").len(),
            match era {
                Era::Modern => 2,
                Era::Legacy => 1,
            },
            "{era:?}: a legacy follower does not probe"
        );
        assert_eq!(worker.catalog().tools().len(), 5, "{era:?}");
        let routed = call(&worker, "region", args(json!({"region": "Zürich"})))
            .await
            .unwrap();
        assert_eq!(text(&routed), "Zürich", "{era:?}");
        let sent = calls_of(&server, "region").pop().unwrap();
        let header = sent.header("mcp-param-region");
        match era {
            Era::Modern => assert_eq!(header, Some("=?base64?WsO8cmljaA==?=")),
            Era::Legacy => assert_eq!(header, None),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. A tool that failed, and a protocol fault
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_ran_and_failed_is_ok_with_is_error() {
    for era in ERAS {
        let (_server, connection) = setup(era).await;
        let failed = call(&connection, "fail", None).await.unwrap();
        assert!(failed.is_error(), "{era:?}");
        assert_eq!(text(&failed), "the tool failed", "{era:?}");
        let fine = call(&connection, "add", Some(add_args(1, 1)))
            .await
            .unwrap();
        assert!(!fine.is_error(), "{era:?}");
        // Wrong arguments: the reference tool runs and reports it as a tool error.
        let bad = call(&connection, "add", args(json!({"a": "x", "b": 1})))
            .await
            .unwrap();
        assert!(bad.is_error(), "{era:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_fault_is_an_rpc_error_with_its_code() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        server.script(
            "tools/call",
            Fault::RpcError {
                status: 200,
                code: -32602,
                message: "unknown tool: get_weather".into(),
                data: Some(json!({"tool": "get_weather"})),
            },
            Times::Once,
        );
        match call(&connection, "add", Some(add_args(1, 2))).await {
            Err(Error::Rpc(e)) => {
                assert_eq!(e.code, -32602, "{era:?}");
                assert_eq!(e.message, "unknown tool: get_weather", "{era:?}");
                assert_eq!(e.data, Some(json!({"tool": "get_weather"})), "{era:?}");
            }
            other => panic!("{era:?}: expected Error::Rpc, got {other:?}"),
        }
        // The connection stays usable.
        let ok = call(&connection, "add", Some(add_args(1, 2)))
            .await
            .unwrap();
        assert_eq!(text(&ok), "3", "{era:?}");
        // The server's own protocol fault: an unknown tool.
        let unknown = call(&connection, "no-such-tool", None).await;
        assert_eq!(rpc_code(unknown), -32602, "{era:?}");
        // Exactly one request per call: a fault is not retried.
        assert_eq!(requests(&server, "tools/call").len(), 3, "{era:?}");
    }
}

/// A JSON-RPC error is a protocol fault whatever the HTTP status that carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_error_on_a_4xx_is_still_an_rpc_error() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        server.script(
            "tools/call",
            Fault::RpcError {
                status: 400,
                code: -32602,
                message: "bad arguments".into(),
                data: None,
            },
            Times::Once,
        );
        let failed = call(&connection, "add", Some(add_args(1, 2))).await;
        assert_eq!(rpc_code(failed), -32602, "{era:?}");
    }
}

/// A 2026-07-28 404 is no lost session: nothing is re-dialed and nothing re-sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_404_without_a_body_fails_the_call_without_a_redial() {
    let (server, connection) = setup(Era::Modern).await;
    server.script("tools/call", Fault::Status(404, None), Times::Once);
    let failed = call(&connection, "add", Some(add_args(1, 2))).await;
    assert!(
        matches!(failed, Err(Error::Transport(_))),
        "expected a transport error, got {failed:?}"
    );
    assert_eq!(requests(&server, "tools/call").len(), 1);
    assert_eq!(requests(&server, "server/discover").len(), 1);
    let ok = call(&connection, "add", Some(add_args(1, 2)))
        .await
        .unwrap();
    assert_eq!(text(&ok), "3");
}

// ---------------------------------------------------------------------------------------------
// 5. Reads, prompts, completions
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_resource_in_both_eras() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let read = bounded("read", connection.read_resource("demo://greeting"))
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(read.contents.len(), 1, "{era:?}");
        assert_eq!(read.contents[0].uri(), "demo://greeting", "{era:?}");
        assert_eq!(contents_text(&read.contents), "hello", "{era:?}");

        // A URI from the template.
        let item = bounded("read item", connection.read_resource("demo://item/42"))
            .await
            .unwrap();
        assert_eq!(contents_text(&item.contents), "item 42", "{era:?}");

        // Every read goes to the server: the counter changes between two reads.
        let before = bounded("read counter", connection.read_resource("demo://counter"))
            .await
            .unwrap();
        server.touch("demo://counter").await;
        let after = bounded("read counter", connection.read_resource("demo://counter"))
            .await
            .unwrap();
        assert_eq!(contents_text(&before.contents), "0", "{era:?}");
        assert_eq!(contents_text(&after.contents), "1", "{era:?}");

        let reads = requests(&server, "resources/read");
        assert_eq!(reads.len(), 4, "{era:?}");
        assert_eq!(reads[0].body["params"]["uri"], "demo://greeting");
        match era {
            Era::Modern => {
                assert_eq!(reads[0].header("mcp-name"), Some("demo://greeting"));
                assert_eq!(reads[0].header("mcp-method"), Some("resources/read"));
                assert_eq!(
                    reads[0].body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                    "2026-07-28"
                );
            }
            Era::Legacy => {
                assert_eq!(reads[0].header("mcp-name"), None);
                assert!(reads[0].body["params"]["_meta"].is_null());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_an_unknown_uri_is_an_rpc_error() {
    for era in ERAS {
        let (_server, connection) = setup(era).await;
        let missing = bounded("read", connection.read_resource("demo://nope")).await;
        match missing {
            Err(Error::Rpc(e)) => {
                assert_eq!(e.code, -32602, "{era:?}");
                assert!(e.message.contains("demo://nope"), "{era:?}: {e:?}");
            }
            other => panic!("{era:?}: expected Error::Rpc, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prompt_with_arguments_in_both_eras() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let arguments = BTreeMap::from([("name".to_owned(), "Ada".to_owned())]);
        let prompt = bounded("prompt", connection.get_prompt("greet", Some(arguments)))
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(prompt.messages.len(), 1, "{era:?}");
        assert_eq!(
            prompt.messages[0].content.as_text(),
            Some("Say hello to Ada."),
            "{era:?}"
        );
        let sent = &requests(&server, "prompts/get")[0];
        assert_eq!(sent.body["params"]["name"], "greet");
        assert_eq!(sent.body["params"]["arguments"], json!({"name": "Ada"}));
        match era {
            Era::Modern => assert_eq!(sent.header("mcp-name"), Some("greet")),
            Era::Legacy => assert_eq!(sent.header("mcp-name"), None),
        }

        // Without arguments, and an unknown prompt.
        let bare = bounded("prompt", connection.get_prompt("greet", None))
            .await
            .unwrap();
        assert_eq!(
            bare.messages[0].content.as_text(),
            Some("Say hello to you.")
        );
        let unknown = bounded("prompt", connection.get_prompt("nope", None)).await;
        assert_eq!(rpc_code(unknown), -32602, "{era:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_in_both_eras() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let reference = CompletionReference::Prompt {
            name: "greet".into(),
            title: None,
        };
        let params = CompleteParams::new(reference, "name", "A");
        let completed = bounded("complete", connection.complete(&params))
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(completed.completion.values, ["Ada", "Alan"], "{era:?}");
        assert_eq!(completed.completion.total, Some(2), "{era:?}");
        assert_eq!(completed.completion.has_more, Some(false), "{era:?}");

        let template = CompletionReference::Resource {
            uri: "demo://item/{id}".into(),
        };
        let none = bounded(
            "complete",
            connection.complete(&CompleteParams::new(template, "id", "zzz")),
        )
        .await
        .unwrap();
        assert!(none.completion.values.is_empty(), "{era:?}");

        let sent = &requests(&server, "completion/complete")[0];
        assert_eq!(
            sent.body["params"]["ref"],
            json!({"type": "ref/prompt", "name": "greet"})
        );
        assert_eq!(
            sent.body["params"]["argument"],
            json!({"name": "name", "value": "A"})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_the_servers_in_both_eras() {
    for era in ERAS {
        let (_server, connection) = setup(era).await;
        let caps = connection.capabilities();
        assert!(caps.tools_list_changed(), "{era:?}");
        assert!(caps.resources_subscribe(), "{era:?}");
        assert!(caps.resources_list_changed(), "{era:?}");
        assert!(caps.prompts(), "{era:?}");
        assert!(!caps.prompts_list_changed(), "{era:?}");
        assert!(caps.completions(), "{era:?}");
        assert!(!caps.logging(), "{era:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 6. input_required and elicitation
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_is_answered_by_the_workers_elicitor_at_2026_07_28() {
    let server = server_in(Era::Modern).await;
    let connection = connect(&server, Era::Modern, worker_kind()).await;
    let result = call(&connection, "ask", None).await.unwrap();
    assert_eq!(text(&result), "accept: name='Ada'");

    let rounds = calls_of(&server, "ask");
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    let (first, retry) = (&rounds[0].body, &rounds[1].body);
    assert!(first["params"].get("inputResponses").is_none(), "{first}");
    assert!(first["params"].get("requestState").is_none(), "{first}");
    assert_eq!(
        retry["params"]["inputResponses"],
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}})
    );
    assert_eq!(retry["params"]["requestState"], "ask-state-1");
    assert_ne!(
        first["id"], retry["id"],
        "the retry needs a new JSON-RPC id"
    );
    // The retry is still the same call: same name, same headers, same _meta keys.
    assert_eq!(rounds[1].header("mcp-name"), Some("ask"));
    for key in MODERN_KEYS {
        assert!(retry["params"]["_meta"].get(key).is_some(), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_answers_input_required_with_cancel() {
    let (server, connection) = setup(Era::Modern).await;
    let result = call(&connection, "ask", None).await.unwrap();
    assert_eq!(text(&result), "cancel");
    let rounds = calls_of(&server, "ask");
    assert_eq!(rounds.len(), 2);
    assert_eq!(
        rounds[1].body["params"]["inputResponses"],
        json!({"name": {"action": "cancel"}})
    );
    assert_eq!(rounds[1].body["params"]["requestState"], "ask-state-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_elicitation_on_the_stream_is_answered_by_the_same_handler() {
    let server = server_in(Era::Legacy).await;
    let connection = connect(&server, Era::Legacy, worker_kind()).await;
    let result = call(&connection, "ask", None).await.unwrap();
    assert_eq!(text(&result), "accept: name='Ada'");
    // One tools/call; the answer went back as a JSON-RPC response on its own POST.
    assert_eq!(calls_of(&server, "ask").len(), 1);
    let answers: Vec<Logged> = server
        .log()
        .into_iter()
        .filter(|l| l.method.is_none() && l.body.get("result").is_some())
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0].body["result"],
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
    assert!(answers[0].header("mcp-session-id").is_some());
}

/// A person slower than the connection's silence bound: while the client answers the
/// server's elicitation, the server waits on it and its silence is not counted, so the call
/// ends with the server's result, not `Silent` (virtual time: 2 minutes to answer, 60 s bound).
#[tokio::test(start_paused = true)]
async fn a_legacy_call_waits_for_its_slow_elicitation_past_the_silence_bound() {
    let server = server_in(Era::Legacy).await;
    let slow = |params: mcp_wire::ElicitRequestParams| async move {
        tokio::time::sleep(Duration::from_secs(120)).await;
        accept_ada(params).await
    };
    let connection = connect(&server, Era::Legacy, worker_with(slow)).await;
    let start = tokio::time::Instant::now();
    let wait = object(json!({"wait_ms": 600_000}));
    let asked = connection.call_tool_with("ask", Some(wait), None, |_: Notice| {});
    let result = tokio::time::timeout(Duration::from_secs(300), asked)
        .await
        .expect("the call ends")
        .unwrap();
    assert_eq!(text(&result), "accept: name='Ada'");
    assert!(start.elapsed() >= Duration::from_secs(120));

    // A silent server is still cut at the bound once nothing is asked of the client.
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let start = tokio::time::Instant::now();
    let silent = connection.call_tool("add", json!({"a": 1, "b": 2})).await;
    assert!(
        matches!(
            silent,
            Err(Error::Transport(mcp_transport::Error::Silent {
                after_ms: 60_000
            }))
        ),
        "{silent:?}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(60));
}

/// A supervisor declares no elicitation: a legacy server that asks all the same gets -32601
/// on the stream (the reference's `ask` then says it got no valid answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_supervisor_refuses_an_elicitation_with_method_not_found() {
    let (server, connection) = setup(Era::Legacy).await;
    let result = call(&connection, "ask", None).await.unwrap();
    assert_eq!(text(&result), "invalid answer");
    let answers: Vec<Logged> = server
        .log()
        .into_iter()
        .filter(|l| l.method.is_none() && l.body.get("error").is_some())
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].body["error"]["code"], -32601);
}

/// An `input_required` result to `prompts/get` is answered like a call's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prompt_answers_input_required() {
    let server = server_in(Era::Modern).await;
    let connection = connect(&server, Era::Modern, worker_kind()).await;
    server.script(
        "prompts/get",
        asking(
            "who",
            "elicitation/create",
            json!({
                "message": "Who?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }),
            "prompt-state",
        ),
        Times::Once,
    );
    let prompt = bounded("prompt", connection.get_prompt("greet", None))
        .await
        .unwrap();
    assert_eq!(
        prompt.messages[0].content.as_text(),
        Some("Say hello to you.")
    );
    let rounds = requests(&server, "prompts/get");
    assert_eq!(rounds.len(), 2);
    assert_eq!(
        rounds[1].body["params"]["inputResponses"],
        json!({"who": {"action": "accept", "content": {"name": "Ada"}}})
    );
    assert_eq!(rounds[1].body["params"]["requestState"], "prompt-state");
    assert_ne!(rounds[0].body["id"], rounds[1].body["id"]);
}

/// Known limits, "Interactive reads": a `resources/read` answered with `input_required` fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answered_with_input_required_fails_as_unanswerable() {
    let server = server_in(Era::Modern).await;
    let connection = connect(&server, Era::Modern, worker_kind()).await;
    server.script(
        "resources/read",
        asking(
            "q",
            "elicitation/create",
            json!({"message": "Why?", "requestedSchema": {"type": "object"}}),
            "s",
        ),
        Times::Once,
    );
    let read = bounded("read", connection.read_resource("demo://greeting")).await;
    match read {
        Err(Error::Unanswerable { method }) => assert_eq!(method, "resources/read"),
        other => panic!("expected Unanswerable, got {other:?}"),
    }
    // Not retried.
    assert_eq!(requests(&server, "resources/read").len(), 1);
}

/// An input request of a kind the client cannot give (sampling) fails the call, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_request_for_sampling_is_unanswerable() {
    let server = server_in(Era::Modern).await;
    let connection = connect(&server, Era::Modern, worker_kind()).await;
    server.script(
        "tools/call",
        asking(
            "s",
            "sampling/createMessage",
            json!({"messages": [], "maxTokens": 10}),
            "s",
        ),
        Times::Once,
    );
    let failed = call(&connection, "add", Some(add_args(1, 1))).await;
    match failed {
        Err(Error::Unanswerable { method }) => assert_eq!(method, "sampling/createMessage"),
        other => panic!("expected Unanswerable, got {other:?}"),
    }
    assert_eq!(requests(&server, "tools/call").len(), 1);
}

/// Scripts `tools/call` to ask for a name again, `times` times, before it answers.
fn ask_again(server: &ReferenceServer, times: Times) {
    let again = json!({"message": "Again?", "requestedSchema": {"type": "object"}});
    let asked = asking("name", "elicitation/create", again, "again");
    server.script("tools/call", asked, times);
}

/// A server that asks in every round but the last that `MAX_INPUT_ROUNDS` allows is answered
/// each time, and the call ends with its result: the bound is on rounds, and the last is
/// still taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_takes_every_round_allowed_succeeds() {
    let server = server_in(Era::Modern).await;
    let connection = connect(&server, Era::Modern, worker_kind()).await;
    let asked = u32::try_from(MAX_INPUT_ROUNDS - 1).expect("a small bound");
    ask_again(&server, Times::N(asked));
    let added = call(&connection, "add", Some(add_args(2, 3))).await;
    let added = added.expect("the last round answers");
    assert_eq!(added.is_error, Some(false), "{added:?}");
    assert_eq!(requests(&server, "tools/call").len(), MAX_INPUT_ROUNDS);
}

/// A server that keeps asking is given up on after `MAX_INPUT_ROUNDS` rounds; the last
/// round's question is put to nobody, as its answer would never be sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_asking_is_given_up_on() {
    let server = server_in(Era::Modern).await;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    // Counts the elicitations it answers, as `accept_ada` does.
    let counting = move |_: mcp_wire::ElicitRequestParams| {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { mcp_wire::ElicitResult::accept(object(json!({"name": "Ada"}))) }
    };
    let connection = connect(&server, Era::Modern, worker_with(counting)).await;
    ask_again(&server, Times::Always);
    let failed = call(&connection, "add", Some(add_args(1, 1))).await;
    assert!(
        matches!(failed, Err(Error::TooManyRounds)),
        "expected TooManyRounds, got {failed:?}"
    );
    assert_eq!(requests(&server, "tools/call").len(), MAX_INPUT_ROUNDS);
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::Relaxed),
        MAX_INPUT_ROUNDS - 1
    );
}

/// A round with a `requestState` but no input requests is retried with that state and no
/// responses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_required_without_requests_echoes_the_state() {
    let (server, connection) = setup(Era::Modern).await;
    server.script(
        "tools/call",
        Fault::Result(json!({"resultType": "input_required", "requestState": "bare"})),
        Times::Once,
    );
    let result = call(&connection, "add", Some(add_args(4, 5)))
        .await
        .unwrap();
    assert_eq!(text(&result), "9");
    let rounds = calls_of(&server, "add");
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[1].body["params"]["requestState"], "bare");
    assert!(rounds[1].body["params"].get("inputResponses").is_none());
    assert_eq!(
        rounds[1].body["params"]["arguments"],
        json!({"a": 4, "b": 5})
    );
}

// ---------------------------------------------------------------------------------------------
// 7. A lost legacy session
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_legacy_session_is_redialed_with_initialize_and_the_call_sent_again_once() {
    let (server, connection) = setup(Era::Legacy).await;
    let old = requests(&server, "tools/list")[0]
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let before = server.log().len();
    server.expire_sessions();

    let result = call(&connection, "add", Some(add_args(20, 22)))
        .await
        .unwrap();
    assert_eq!(text(&result), "42");
    assert_eq!(connection.revision(), Revision::V2025_11_25);

    let after: Vec<String> = server.log()[before..]
        .iter()
        .filter_map(|l| l.method.clone())
        .collect();
    assert_eq!(
        after,
        [
            "tools/call",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    let calls = requests(&server, "tools/call");
    assert_eq!(calls.len(), 2, "the 404'd call is sent again exactly once");
    assert_eq!(calls[0].header("mcp-session-id"), Some(old.as_str()));
    let new = calls[1].header("mcp-session-id").expect("a session");
    assert_ne!(new, old);
    // The same call, under a new id (and so a new progress token).
    assert_eq!(
        calls[0].body["params"]["name"],
        calls[1].body["params"]["name"]
    );
    assert_eq!(
        calls[0].body["params"]["arguments"],
        calls[1].body["params"]["arguments"]
    );
    assert_ne!(calls[0].body["id"], calls[1].body["id"]);
    // Only the first dial probed.
    assert_eq!(requests(&server, "server/discover").len(), 1);
    // The re-dial says the same about the client.
    let inits = requests(&server, "initialize");
    assert_eq!(inits.len(), 2);
    assert_eq!(inits[0].body["params"], inits[1].body["params"]);

    // The new session serves later requests; the catalogue survives.
    let read = bounded("read", connection.read_resource("demo://greeting"))
        .await
        .unwrap();
    assert_eq!(contents_text(&read.contents), "hello");
    assert_eq!(requests(&server, "initialize").len(), 2);
    assert_eq!(connection.catalog().tools().len(), 5);
}

/// A list meets the lost session too: the page is asked for again on the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_meets_a_lost_session_is_redialed() {
    let (server, connection) = setup(Era::Legacy).await;
    server.expire_sessions();
    let prompts = bounded("prompts", connection.list_prompts()).await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(requests(&server, "prompts/list").len(), 2);
    assert_eq!(requests(&server, "initialize").len(), 2);
}

/// The call re-sent on the new session meets a 404 again: it is not sent a third time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_404_after_the_redial_fails_the_call() {
    let (server, connection) = setup(Era::Legacy).await;
    server.script("tools/call", Fault::Status(404, None), Times::N(2));
    let failed = call(&connection, "add", Some(add_args(1, 1))).await;
    assert!(
        matches!(
            failed,
            Err(Error::Transport(mcp_transport::Error::SessionLost))
        ),
        "expected SessionLost, got {failed:?}"
    );
    assert_eq!(requests(&server, "tools/call").len(), 2);
    assert_eq!(requests(&server, "initialize").len(), 2);
}

/// After the second 404 the session is known lost: the next request must dial again, not go
/// out on the lost link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_second_404_the_next_call_dials_again() {
    let (server, connection) = setup(Era::Legacy).await;
    server.script("tools/call", Fault::Status(404, None), Times::N(2));
    let _ = call(&connection, "add", Some(add_args(1, 1))).await;
    let ok = call(&connection, "add", Some(add_args(1, 1)))
        .await
        .unwrap_or_else(|e| panic!("the call after the second 404: {e:?}"));
    assert_eq!(text(&ok), "2");
    assert_eq!(requests(&server, "initialize").len(), 3);
    let last = requests(&server, "tools/call").pop().unwrap();
    assert!(last.header("mcp-session-id").is_some());
}

/// A re-dial that is refused fails the call with the negotiation's refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_redial_fails_the_call_with_the_refusal() {
    let (server, connection) = setup(Era::Legacy).await;
    server.expire_sessions();
    server.script("initialize", Fault::Status(503, None), Times::Once);
    let failed = call(&connection, "add", Some(add_args(1, 1))).await;
    match failed {
        Err(Error::Negotiation(f)) => {
            assert_eq!(f.refusals.len(), 1, "{f:?}");
            assert_eq!(
                f.refusals[0].reply,
                Reply::Status {
                    status: 503,
                    www_authenticate: None
                }
            );
        }
        other => panic!("expected a negotiation failure, got {other:?}"),
    }
    // A 5xx to initialize is not re-probed.
    assert_eq!(requests(&server, "server/discover").len(), 1);
    assert_eq!(requests(&server, "tools/call").len(), 1);
}

/// A server down for a moment when the session is lost: the next request dials again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_refused_redial_the_next_call_dials_again() {
    let (server, connection) = setup(Era::Legacy).await;
    server.expire_sessions();
    server.script("initialize", Fault::Status(503, None), Times::Once);
    let _ = call(&connection, "add", Some(add_args(1, 1))).await;
    let ok = call(&connection, "add", Some(add_args(1, 1)))
        .await
        .unwrap_or_else(|e| panic!("the call after the refused re-dial: {e:?}"));
    assert_eq!(text(&ok), "2");
    assert_eq!(requests(&server, "initialize").len(), 3);
}

/// Two calls that meet the same lost session share one re-dial, and each is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_a_lost_session_share_one_redial() {
    let (server, connection) = setup(Era::Legacy).await;
    server.expire_sessions();
    let (a, b) = bounded("two calls", async {
        tokio::join!(
            connection.call_tool_with("add", Some(add_args(1, 1)), None, |_| {}),
            connection.call_tool_with("add", Some(add_args(2, 2)), None, |_| {}),
        )
    })
    .await;
    let a = a.unwrap_or_else(|e| panic!("first call: {e:?}"));
    let b = b.unwrap_or_else(|e| panic!("second call: {e:?}"));
    assert_eq!(text(&a), "2");
    assert_eq!(text(&b), "4");
    assert_eq!(
        requests(&server, "initialize").len(),
        2,
        "{:?}",
        server.methods()
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Progress and other notices; silence bounds
// ---------------------------------------------------------------------------------------------

/// Progress notifications reach `on_notice`, in both eras: a call asks for progress with its
/// request id as the token (the reference's `slow` only reports progress to a request that
/// gave one). On a legacy stream the server's `ping` is answered on the way, not handed over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_on_notice() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        let mut notices = Vec::new();
        let result = bounded(
            "slow",
            connection.call_tool_with(
                "slow",
                args(json!({"steps": 3, "delay_ms": 20})),
                None,
                |n| notices.push(n),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(text(&result), "counted 3", "{era:?}");

        let sent = &calls_of(&server, "slow")[0];
        let token = &sent.body["params"]["_meta"]["progressToken"];
        assert_eq!(
            token, &sent.body["id"],
            "{era:?}: the token is the request id"
        );

        let methods: Vec<&str> = notices.iter().map(|n| n.method.as_str()).collect();
        assert_eq!(methods, ["notifications/progress"; 3], "{era:?}");
        let progress: Vec<(f64, Option<f64>)> = notices
            .iter()
            .map(|n| match n.decode() {
                Ok(ServerNotification::Progress(p)) => {
                    assert_eq!(json!(p.progress_token), *token, "{era:?}");
                    (p.progress, p.total)
                }
                other => panic!("{era:?}: {other:?}"),
            })
            .collect();
        assert_eq!(
            progress,
            [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))],
            "{era:?}"
        );
    }
}

/// Only calls ask for progress: lists, reads, prompts and completions carry no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_calls_carry_a_progress_token() {
    for era in ERAS {
        let (server, connection) = setup(era).await;
        bounded("read", connection.read_resource("demo://greeting"))
            .await
            .unwrap();
        bounded("prompt", connection.get_prompt("greet", None))
            .await
            .unwrap();
        call(&connection, "add", Some(add_args(1, 1)))
            .await
            .unwrap();
        for l in server.log() {
            let Some(method) = l.method.as_deref() else {
                continue;
            };
            let token = l.body["params"]["_meta"].get("progressToken");
            if method == "tools/call" {
                assert_eq!(token, Some(&l.body["id"]), "{era:?}");
            } else {
                assert!(token.is_none(), "{era:?}: {method} carries {token:?}");
            }
        }
    }
}

/// Timeouts: "A timeout bounds silence: a call that streams progress is not cut off by the
/// connection timeout." Each step is well inside the bound; the whole call is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_streams_progress_outlives_the_silence_bound() {
    for era in ERAS {
        let server = server_in(era).await;
        let mut config = Config::default();
        config.silence = Duration::from_millis(400);
        let connection = connect_with(&server.url(), config, supervisor_kind())
            .await
            .unwrap();
        let mut steps = 0;
        let result = bounded(
            "slow",
            connection.call_tool_with(
                "slow",
                args(json!({"steps": 6, "delay_ms": 150})),
                None,
                |_| steps += 1,
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(text(&result), "counted 6", "{era:?}");
        assert_eq!(steps, 6, "{era:?}");
    }
}

/// Timeouts: each page of a listing is bounded by the connection's timeout; a page that
/// does not come fails the listing (and so the connect) at the bound (virtual time).
#[tokio::test(start_paused = true)]
async fn a_silent_page_fails_the_listing_at_the_silence_bound() {
    for era in ERAS {
        let server = server_in(era).await;
        server.script(
            "tools/list",
            Fault::Result(json!({"tools": [], "nextCursor": "p2"})),
            Times::Once,
        );
        server.script(
            "tools/list",
            Fault::Silence(Duration::from_secs(3)),
            Times::Once,
        );
        let silence = Duration::from_millis(300);
        let mut config = Config::default();
        config.silence = silence;
        let started = tokio::time::Instant::now();
        let failed = connect_with(&server.url(), config, supervisor_kind()).await;
        assert!(
            matches!(
                failed,
                Err(Error::Transport(mcp_transport::Error::Silent { .. }))
            ),
            "{era:?}: expected Silent, got {failed:?}"
        );
        assert_eq!(started.elapsed(), silence, "{era:?}");
    }
}

/// Timeouts: a supervisor's silence bound is its configured timeout; a call abandoned at its
/// bound holds up no other call (virtual time).
#[tokio::test(start_paused = true)]
async fn a_silent_call_fails_at_the_silence_bound_and_holds_up_nothing() {
    for era in ERAS {
        let server = server_in(era).await;
        let mut config = Config::default();
        config.silence = Duration::from_millis(300);
        let connection = connect_with(&server.url(), config, supervisor_kind())
            .await
            .unwrap();
        server.script(
            "tools/call",
            Fault::Silence(Duration::from_secs(3)),
            Times::Once,
        );
        let started = tokio::time::Instant::now();
        let ((silent, silent_at), (other, other_at)) = within(3, "two calls", async {
            tokio::join!(
                async {
                    let r = connection
                        .call_tool_with("add", Some(add_args(1, 1)), None, |_| {})
                        .await;
                    (r, tokio::time::Instant::now())
                },
                async {
                    // Once the first call has reached the server and taken the silence.
                    while calls_of(&server, "add").is_empty() {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    let r = connection
                        .call_tool_with("add", Some(add_args(2, 2)), None, |_| {})
                        .await;
                    (r, tokio::time::Instant::now())
                },
            )
        })
        .await;
        // Failed at the bound; the other call was not held up until then.
        assert_eq!(silent_at - started, Duration::from_millis(300), "{era:?}");
        assert!(other_at < silent_at, "{era:?}: the other call waited");
        assert!(
            matches!(
                silent,
                Err(Error::Transport(mcp_transport::Error::Silent { .. }))
            ),
            "{era:?}: expected Silent, got {silent:?}"
        );
        assert_eq!(text(&other.unwrap()), "4", "{era:?}");
    }
}

/// A person asked who never answers; each question dropped (withdrawn) is counted on
/// `withdrawn`.
fn never_answered(withdrawn: Arc<tokio::sync::Notify>) -> ClientBuilder {
    /// Lives as long as the question does.
    struct Asked(Arc<tokio::sync::Notify>);
    impl Drop for Asked {
        fn drop(&mut self) {
            self.0.notify_one();
        }
    }
    worker_with(move |_: mcp_wire::ElicitRequestParams| {
        let asked = Asked(withdrawn.clone());
        async move {
            let _asked = asked;
            std::future::pending::<mcp_wire::ElicitResult>().await
        }
    })
}

/// A 2026-07-28 call whose server asks a person: the call's cancel ends the wait for the
/// answer, withdraws the question, and sends no further round.
#[tokio::test(start_paused = true)]
async fn a_cancel_withdraws_the_question_of_an_input_required_call() {
    let server = server_in(Era::Modern).await;
    let withdrawn = Arc::new(tokio::sync::Notify::new());
    let connection = connect(&server, Era::Modern, never_answered(withdrawn.clone())).await;
    let start = tokio::time::Instant::now();
    let cancel = tokio::time::sleep(Duration::from_secs(5));
    let asked = connection.call_tool_until("ask", None, None, |_: Notice| {}, cancel);
    let asked = tokio::time::timeout(Duration::from_secs(300), asked)
        .await
        .expect("the call ends");
    assert!(matches!(asked, Err(Error::Cancelled)), "{asked:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    bounded("the question withdrawn", withdrawn.notified()).await;
    assert_eq!(calls_of(&server, "ask").len(), 1, "no further round");
}

/// A legacy call cancelled before its answer's head arrives: the server is told, with the
/// call's id, and the call ends at the cancel.
#[tokio::test(start_paused = true)]
async fn a_legacy_call_cancelled_before_its_answer_notifies_the_server() {
    let (server, _connection) = cancelled_before_its_answer(Era::Legacy).await;
    let call = calls_of(&server, "add").pop().expect("the call was sent");
    let cancelled = told(&server).await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0].body["params"]["requestId"], call.body["id"]);
}

/// A 2026-07-28 call cancelled before its answer's head arrives ends at the cancel, and
/// nothing is sent for it: the server sees the call's stream close.
#[tokio::test(start_paused = true)]
async fn a_modern_call_cancelled_before_its_answer_sends_nothing() {
    let (server, connection) = cancelled_before_its_answer(Era::Modern).await;
    assert_eq!(calls_of(&server, "add").len(), 1, "the call was sent");
    // The next call is answered: the cancelled one left the connection as it was.
    let added = call(&connection, "add", Some(add_args(2, 3))).await;
    assert!(added.is_ok(), "{added:?}");
    assert!(requests(&server, "notifications/cancelled").is_empty());
}

/// A call of `era` to a server that stays silent, cancelled at 5 s: it ends then, cancelled.
async fn cancelled_before_its_answer(era: Era) -> (ReferenceServer, Client) {
    let server = server_in(era).await;
    let connection = connect(&server, era, supervisor_kind()).await;
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let start = tokio::time::Instant::now();
    let cancel = tokio::time::sleep(Duration::from_secs(5));
    let added =
        connection.call_tool_until("add", Some(add_args(1, 2)), None, |_: Notice| {}, cancel);
    let added = tokio::time::timeout(Duration::from_secs(300), added)
        .await
        .expect("the call ends");
    assert!(matches!(added, Err(Error::Cancelled)), "{era:?}: {added:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(5), "{era:?}");
    (server, connection)
}

/// A legacy call given up at the connection's silence bound before its answer began: the
/// server is told, with the call's id, as of a cancel.
#[tokio::test(start_paused = true)]
async fn a_legacy_call_given_up_silent_notifies_the_server() {
    let server = server_in(Era::Legacy).await;
    let connection = connect(&server, Era::Legacy, supervisor_kind()).await;
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let added = connection.call_tool_with("add", Some(add_args(1, 2)), None, |_: Notice| {});
    given_up_silent_and_told(&server, "add", added).await;
}

/// `called`, a legacy call of `tool`, ends within 300 s given up at the silence bound, and
/// the server is told once, with the call's id.
async fn given_up_silent_and_told<T: std::fmt::Debug>(
    server: &ReferenceServer,
    tool: &str,
    called: impl std::future::Future<Output = Result<T, Error>>,
) {
    let called = tokio::time::timeout(Duration::from_secs(300), called)
        .await
        .expect("the call ends");
    assert!(
        matches!(
            called,
            Err(Error::Transport(mcp_transport::Error::Silent { .. }))
        ),
        "{called:?}"
    );
    let call = calls_of(server, tool).pop().expect("the call was sent");
    let cancelled = told(server).await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0].body["params"]["requestId"], call.body["id"]);
}

/// A 2026-07-28 call given up at the connection's silence bound while its answer streams:
/// its stream is closed, which the server sees when it next writes to it (the reference's
/// `slow` records it), and nothing is sent to tell it.
#[tokio::test(start_paused = true)]
async fn a_modern_call_given_up_silent_closes_its_stream() {
    let server = server_in(Era::Modern).await;
    let mut config = Config::default();
    config.silence = Duration::from_millis(300);
    let connection = connect_with(&server.url(), config, supervisor_kind())
        .await
        .unwrap();
    // Its answer's head comes at once; its first progress a second later, past the bound.
    let slow = connection.call_tool_with(
        "slow",
        args(json!({"steps": 3, "delay_ms": 1000})),
        None,
        |_| {},
    );
    let slow = within(300, "the call", slow).await;
    assert!(
        matches!(
            slow,
            Err(Error::Transport(mcp_transport::Error::Silent { .. }))
        ),
        "{slow:?}"
    );
    let sent = calls_of(&server, "slow").pop().expect("the call was sent");
    bounded("the stream seen closed", async {
        while !server.abandoned().contains(&sent.body["id"]) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(requests(&server, "notifications/cancelled").is_empty());
}

/// A legacy call given up at the silence bound after its answer's stream began (the
/// priming event and a ping came, then nothing): the server is told, with the call's id.
#[tokio::test(start_paused = true)]
async fn a_legacy_call_silent_mid_answer_notifies_the_server() {
    let server = server_in(Era::Legacy).await;
    let connection = connect(&server, Era::Legacy, supervisor_kind()).await;
    let quiet = args(json!({"steps": 1, "delay_ms": 600_000}));
    let counted = connection.call_tool_with("slow", quiet, None, |_: Notice| {});
    given_up_silent_and_told(&server, "slow", counted).await;
}

/// A legacy call abandoned while the client answers its server's elicitation: the answer's
/// task ends with the call, and the person is asked no more.
#[tokio::test(start_paused = true)]
async fn a_legacy_call_abandoned_mid_elicitation_withdraws_the_question() {
    let server = server_in(Era::Legacy).await;
    let withdrawn = Arc::new(tokio::sync::Notify::new());
    let connection = connect(&server, Era::Legacy, never_answered(withdrawn.clone())).await;
    let cancel = tokio::time::sleep(Duration::from_secs(5));
    let wait = object(json!({"wait_ms": 600_000}));
    let asked = connection.call_tool_until("ask", Some(wait), None, |_: Notice| {}, cancel);
    let asked = tokio::time::timeout(Duration::from_secs(300), asked)
        .await
        .expect("the call ends");
    assert!(matches!(asked, Err(Error::Cancelled)), "{asked:?}");
    bounded("the question withdrawn", withdrawn.notified()).await;
    let cancelled = told(&server).await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
}

/// The `notifications/cancelled` the server got, once it got one (they are sent on a task
/// of their own).
async fn told(server: &ReferenceServer) -> Vec<Logged> {
    bounded("notifications/cancelled", async {
        loop {
            let cancelled = requests(server, "notifications/cancelled");
            if !cancelled.is_empty() {
                return cancelled;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// A 2026-07-28 round asking for more inputs than the client answers at once is refused
/// whole, nobody asked; at the bound every input is answered.
#[tokio::test(start_paused = true)]
async fn an_input_round_past_its_bound_asks_nobody() {
    let server = server_in(Era::Modern).await;
    let withdrawn = Arc::new(tokio::sync::Notify::new());
    let connection = connect(&server, Era::Modern, never_answered(withdrawn.clone())).await;
    let round = |n: usize| {
        let requests: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                let key = if i == 0 {
                    "name".to_owned()
                } else {
                    format!("q{i}")
                };
                let params = json!({"message": "Who?", "requestedSchema": {"type": "object"}});
                (
                    key,
                    json!({"method": "elicitation/create", "params": params}),
                )
            })
            .collect();
        Fault::Result(json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": "ask-state-1",
        }))
    };
    server.script("tools/call", round(5), Times::Once);
    let asked = bounded("the call", connection.call_tool("ask", json!({}))).await;
    assert_eq!(asked, Err(Error::TooManyInputs { asked: 5, max: 4 }));
    assert_eq!(calls_of(&server, "ask").len(), 1, "no further round");

    // At the bound, the person is asked (and, never answering, the call is cut).
    server.script("tools/call", round(4), Times::Once);
    let cancel = tokio::time::sleep(Duration::from_secs(5));
    let asked = connection.call_tool_until("ask", None, None, |_: Notice| {}, cancel);
    let asked = bounded("the call", asked).await;
    assert!(matches!(asked, Err(Error::Cancelled)), "{asked:?}");
    bounded("the question withdrawn", withdrawn.notified()).await;
}

/// A legacy server asking more questions on one call's stream than the client answers at
/// once: the one past the bound is refused at once with -32603, the others stay asked.
#[tokio::test(start_paused = true)]
async fn a_legacy_call_refuses_the_question_past_its_answering_bound() {
    let server = server_in(Era::Legacy).await;
    let withdrawn = Arc::new(tokio::sync::Notify::new());
    let connection = connect(&server, Era::Legacy, never_answered(withdrawn)).await;
    // The client answers at most 4 of a stream's requests at once.
    let asks = object(json!({"asks": 5, "wait_ms": 10_000}));
    let asked = connection.call_tool_with("ask", Some(asks), None, |_: Notice| {});
    let result = tokio::time::timeout(Duration::from_secs(300), asked)
        .await
        .expect("the call ends")
        .unwrap();
    assert_eq!(
        text(&result),
        "no answer, no answer, no answer, no answer, invalid answer"
    );
    let refused: Vec<Logged> = server
        .log()
        .into_iter()
        .filter(|l| l.method.is_none() && l.body.get("error").is_some())
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].body["error"]["code"], -32603);

    // At the bound, every question is asked.
    let asks = object(json!({"asks": 4, "wait_ms": 10_000}));
    let asked = connection.call_tool_with("ask", Some(asks), None, |_: Notice| {});
    let result = tokio::time::timeout(Duration::from_secs(300), asked)
        .await
        .expect("the call ends")
        .unwrap();
    assert_eq!(text(&result), "no answer, no answer, no answer, no answer");
}
