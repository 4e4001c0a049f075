//! The client under test of the official MCP conformance suite
//! (npm `@modelcontextprotocol/conformance`), built on agentd's crates.
//!
//! The suite's runner starts a mock server for a scenario and runs this binary with the
//! server's URL as the last argument and the scenario in the environment:
//!
//! - `MCP_CONFORMANCE_SCENARIO`: which scenario to play;
//! - `MCP_CONFORMANCE_PROTOCOL_VERSION`: the revision to speak (the 0.2 line sets it; the
//!   0.1 line leaves it unset). A legacy revision, or none, opens the connection with
//!   `initialize`; 2026-07-28 with `server/discover`. Either way no message is sent that the
//!   revision's schema does not know (the suite validates every message sent);
//! - `MCP_CONFORMANCE_CONTEXT`: JSON data some scenarios hand over (`toolCalls` of
//!   `http-custom-headers`).
//!
//! The connection is the library's [`Client`], opened with
//! [`Client::connect_with`] at the start the version names.
//!
//! `elicitation-sep1034-client-defaults` also needs the legacy session's GET stream: its mock
//! sends `elicitation/create` there (without a related request), and drops it when no GET
//! stream is open. The scenario opens it with [`Watch::open`] before its call, and a task keeps
//! reading it. Other scenarios open no GET stream: `sse-retry`'s mock
//! answers a pending call on whatever GET stream comes next, so a watch racing the call would
//! take the answer away from it.
//!
//! The binary says what it does on stderr, and exits non-zero when the scenario could not be
//! played to its end. It gives up after `DEADLINE` (25 s), before the runner's own timeout.

use std::collections::BTreeMap;
use std::env;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcp_negotiate::{Client, Start, Step, Watch};
use mcp_wire::{
    CallToolResult, ElicitAction, ElicitMode, ElicitRequestParams, ElicitResult, Era, Revision,
    Tool,
};
use serde_json::{Map, Value, json};

/// How long the whole scenario may take (the runner kills the client after 30 s).
const DEADLINE: Duration = Duration::from_secs(25);

type Res<T> = Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().collect();
    let Some(url) = args.get(1..).and_then(<[String]>::last).cloned() else {
        eprintln!("usage: conformance-client [ARGS...] SERVER_URL (and MCP_CONFORMANCE_* set)");
        return ExitCode::from(2);
    };
    let scenario = env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version = env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    let context = match env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) if !text.trim().is_empty() => match serde_json::from_str::<Value>(&text) {
            Ok(value) => value,
            Err(e) => {
                eprintln!("MCP_CONFORMANCE_CONTEXT is not JSON: {e}");
                return ExitCode::from(2);
            }
        },
        _ => Value::Null,
    };
    eprintln!(
        "conformance-client: scenario {scenario:?}, protocol version {version:?}, server {url}"
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let played = runtime.block_on(async {
        tokio::time::timeout(DEADLINE, play(&url, &scenario, &version, &context))
            .await
            .unwrap_or_else(|_| Err(format!("gave up after {} s", DEADLINE.as_secs())))
    });
    match played {
        Ok(()) => {
            eprintln!("conformance-client: done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("conformance-client: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How the connection opens, from `MCP_CONFORMANCE_PROTOCOL_VERSION`.
fn start_of(version: &str) -> Res<Start> {
    let revision = match version.trim() {
        // The 0.1 line of the suite sets no version: its mocks speak 2025-11-25.
        "" => Revision::LATEST_LEGACY,
        v => v
            .parse::<Revision>()
            .map_err(|e| format!("MCP_CONFORMANCE_PROTOCOL_VERSION: {e}"))?,
    };
    Ok(Start::Like(match revision.era() {
        Era::Modern => Step::Discover { revision },
        _ => Step::Initialize { revision },
    }))
}

async fn play(url: &str, scenario: &str, version: &str, context: &Value) -> Res<()> {
    let start = start_of(version)?;
    let client = Peer::open(url, start).await?;
    let played = scenario_steps(&client, scenario, context).await;
    client.close();
    played
}

async fn scenario_steps(client: &Peer, scenario: &str, context: &Value) -> Res<()> {
    match scenario {
        // The handshake and a listing are the whole scenario.
        "initialize" | "request-metadata" | "json-schema-ref-no-deref" => Ok(()),
        "tools_call" => {
            let result = client
                .call_tool("add_numbers", Some(object(json!({"a": 2, "b": 3}))))
                .await?;
            expect_text(&result, "The sum of 2 and 3 is 5")
        }
        "elicitation-sep1034-client-defaults" => {
            client.watch().await?;
            client
                .call_tool("test_client_elicitation_defaults", Some(Map::new()))
                .await
                .map(drop)
        }
        "sse-retry" => {
            let result = client
                .call_tool("test_reconnection", Some(Map::new()))
                .await?;
            expect_text(&result, "Reconnection test completed successfully")
        }
        "sep-2322-client-request-state" => request_state(client).await,
        "http-standard-headers" => standard_headers(client).await,
        "http-custom-headers" => custom_headers(client, context).await,
        "http-invalid-tool-headers" => call_every_tool(client).await,
        other => Err(format!("unknown scenario {other:?}")),
    }
}

/// SEP-2322: `input_required` rounds, `requestState` echoed, and a call made while another
/// is between rounds keeps to itself.
async fn request_state(client: &Peer) -> Res<()> {
    let (echo, unrelated) = tokio::join!(
        client.call_tool("test_mrtr_echo_state", Some(Map::new())),
        client.call_tool("test_mrtr_unrelated", Some(Map::new())),
    );
    expect_text(&echo?, "echo-state-ok")?;
    expect_text(&unrelated?, "unrelated-ok")?;
    let no_state = client
        .call_tool("test_mrtr_no_state", Some(Map::new()))
        .await?;
    expect_text(&no_state, "no-state-ok")?;
    let untyped = client
        .call_tool("test_mrtr_no_result_type", Some(Map::new()))
        .await?;
    expect_text(&untyped, "no-result-type-test-ok")
}

/// SEP-2243: `Mcp-Method` on everything, `Mcp-Name` on calls, reads and prompts.
async fn standard_headers(client: &Peer) -> Res<()> {
    let connection = &client.connection;
    for tool in client.tools() {
        client.call_tool(&tool.name, Some(Map::new())).await?;
    }
    let resources = connection
        .list_resources()
        .await
        .map_err(|e| format!("resources/list: {e}"))?;
    for resource in resources {
        connection
            .read_resource(&resource.uri)
            .await
            .map_err(|e| format!("resources/read {}: {e}", resource.uri))?;
        eprintln!("read {}", resource.uri);
    }
    let prompts = connection
        .list_prompts()
        .await
        .map_err(|e| format!("prompts/list: {e}"))?;
    for prompt in prompts {
        connection
            .get_prompt(&prompt.name, None)
            .await
            .map_err(|e| format!("prompts/get {}: {e}", prompt.name))?;
        eprintln!("got prompt {}", prompt.name);
    }
    Ok(())
}

/// SEP-2243: the calls the scenario's context lists, with their arguments.
async fn custom_headers(client: &Peer, context: &Value) -> Res<()> {
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .ok_or("MCP_CONFORMANCE_CONTEXT has no toolCalls")?;
    for call in calls {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a toolCalls entry without a name")?;
        let arguments = call.get("arguments").and_then(Value::as_object).cloned();
        client.call_tool(name, arguments).await?;
    }
    Ok(())
}

/// Calls every tool the listing kept, with a placeholder for each required argument.
async fn call_every_tool(client: &Peer) -> Res<()> {
    for tool in client.tools() {
        let arguments = placeholders(&tool);
        client.call_tool(&tool.name, Some(arguments)).await?;
    }
    Ok(())
}

/// A value of the declared type for each required property of a tool's input schema.
fn placeholders(tool: &Tool) -> Map<String, Value> {
    let schema: Value = tool.input_schema.parse().unwrap_or(Value::Null);
    let mut arguments = Map::new();
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let kind = schema
            .pointer(&format!(
                "/properties/{}/type",
                name.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str);
        let value = match kind {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            Some("null") => Value::Null,
            _ => json!("conformance"),
        };
        arguments.insert(name.to_owned(), value);
    }
    arguments
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn expect_text(result: &CallToolResult, expected: &str) -> Res<()> {
    let text = result.content.first().and_then(|c| c.as_text());
    match text {
        Some(t) if t == expected && !result.is_error() => Ok(()),
        _ => Err(format!(
            "unexpected tool result {:?} (wanted the text {expected:?})",
            result.content
        )),
    }
}

/// The library's connection, in either era, and the task that keeps a legacy session's GET
/// stream open, once started.
struct Peer {
    connection: Arc<Client>,
    watch: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Peer {
    async fn open(url: &str, start: Start) -> Res<Self> {
        let connection = Client::builder("conformance-client", env!("CARGO_PKG_VERSION"))
            .elicitation(defaults_accepted)
            .connect_with(url, start)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        eprintln!(
            "connected at {} (capabilities {:?})",
            connection.revision(),
            connection.capabilities()
        );
        eprintln!("tools: {:?}", names(connection.catalog().tools()));
        for dropped in connection.catalog().dropped() {
            eprintln!("listing dropped {}: {}", dropped.tool, dropped.reason);
        }
        Ok(Self {
            connection: Arc::new(connection),
            watch: std::sync::Mutex::new(None),
        })
    }

    /// Starts keeping the GET stream of a legacy session open: a server sends there what
    /// belongs to no call. Server requests on it are answered by the transport, elicitation
    /// through the elicitor. A server without one (405, or a refusal) is no error.
    async fn watch(&self) -> Res<()> {
        let mut watch = Watch::new(Arc::clone(&self.connection));
        let offered = watch.open().await.map_err(|e| format!("GET stream: {e}"))?;
        eprintln!("GET stream offered: {offered}");
        let task = tokio::spawn(async move {
            loop {
                match watch.next().await {
                    Ok(Some(change)) => eprintln!("GET stream: {change:?}"),
                    Ok(None) => {
                        eprintln!("no GET stream");
                        return;
                    }
                    Err(e) => {
                        eprintln!("GET stream: {e}");
                        return;
                    }
                }
            }
        });
        let old = self
            .watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(task);
        if let Some(old) = old {
            old.abort();
        }
        Ok(())
    }

    /// The tools the listing kept.
    fn tools(&self) -> Vec<Tool> {
        self.connection.catalog().tools().to_vec()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Res<CallToolResult> {
        let result = self
            .connection
            .call_tool_with(name, arguments, None, |n| {
                eprintln!("notification {}", n.method);
            })
            .await
            .map_err(|e| format!("tools/call {name}: {e}"))?;
        eprintln!(
            "called {name}: {:?}{}",
            result.content.first().and_then(|c| c.as_text()),
            if result.is_error() { " (isError)" } else { "" }
        );
        Ok(result)
    }

    fn close(&self) {
        let watch = self
            .watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(watch) = watch {
            watch.abort();
        }
    }
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// Answers every form elicitation with `accept` and the schema's `default`s (SEP-1034), and
/// declines URL elicitations.
async fn defaults_accepted(params: ElicitRequestParams) -> ElicitResult {
    eprintln!("elicitation: {:?}", params.message);
    if params.mode() != ElicitMode::Form {
        return ElicitResult::new(ElicitAction::Decline);
    }
    let schema: Value = params
        .requested_schema
        .as_ref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(Value::Null);
    let content = defaults(&schema);
    eprintln!("elicitation answer: accept {content:?}");
    ElicitResult::accept(content)
}

/// The `default` of each property of a flat form schema.
fn defaults(schema: &Value) -> Map<String, Value> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let ordered: BTreeMap<&String, &Value> = properties
        .into_iter()
        .flatten()
        .filter_map(|(name, property)| property.get("default").map(|d| (name, d)))
        .collect();
    ordered
        .into_iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
