//! The 2026-07-28 transport against the reference server over loopback: the headers of every
//! POST (`Host` among them), `Mcp-Name` and `Mcp-Param-*`, JSON and event-stream answers, configured headers, the
//! silence bound, cancellation by closing a listen, errors, and `input_required`.

mod common;

use std::time::Duration;

use common::{MODERN, add_args, bounded, client, modern_meta, object, request, wait_until};
use http::{HeaderName, HeaderValue};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use mcp_transport::Error;
use mcp_transport::driver::{
    Call, Config, Delivery, HttpClient, ModernTransport, Routing, ToolRoute,
};
use mcp_transport::reply::{Failure, Limits};
use mcp_wire::header::PARAM_PREFIX;
use mcp_wire::{
    CallToolParams, CallToolResult, Cursor, DiscoverParams, DiscoverResult, ElicitResult,
    ErrorKind, GetPromptParams, ListToolsResult, ListenFilter, ListenParams, Outcome, PageParams,
    ReadResourceParams, ReadResourceResult, RequestId, ServerNotification, Tool, ToolHeaders,
    TypedResponse, code, meta,
};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

type ToolResponse = TypedResponse<Outcome<CallToolResult>>;

fn modern(server: &ReferenceServer) -> ModernTransport {
    ModernTransport::new(client(server, Config::default()), MODERN)
}

/// `server/discover`, answered.
async fn discover(transport: &ModernTransport, id: i64) -> Result<Call<DiscoverResult>, Error> {
    let params = DiscoverParams::new(modern_meta());
    transport
        .call(
            RequestId::Number(id),
            "server/discover",
            request(id, "server/discover", &params),
            &Routing::default(),
        )
        .await
}

/// `server/discover` (id 1) sent and its answer read, both expected to succeed.
async fn discovered(transport: &ModernTransport) -> TypedResponse<DiscoverResult> {
    let call = discover(transport, 1).await.unwrap();
    call.response(|_| {}).await.unwrap()
}

/// The params of a `tools/call` with the modern `_meta`.
fn tool_params(name: &str, arguments: Map<String, Value>) -> CallToolParams {
    let mut params = CallToolParams::new(name);
    params.arguments = Some(arguments);
    params.meta = Some(modern_meta());
    params
}

/// Sends `tools/call` with `params`, routed by `routing`, and reads it to its response.
async fn call_tool(
    transport: &ModernTransport,
    id: i64,
    params: &CallToolParams,
    routing: Routing,
) -> Result<ToolResponse, Error> {
    let call = transport
        .call::<Outcome<CallToolResult>>(
            RequestId::Number(id),
            "tools/call",
            request(id, "tools/call", params),
            &routing,
        )
        .await?;
    call.response(|_| {}).await
}

/// `add(a, b)` through the transport, as the text of its result.
async fn add(transport: &ModernTransport, id: i64, a: i64, b: i64) -> Result<String, Error> {
    let params = tool_params("add", add_args(a, b));
    let response = call_tool(transport, id, &params, Routing::named("add").unwrap()).await?;
    Ok(text(response))
}

/// The text of a complete tool result.
fn text(response: ToolResponse) -> String {
    match response.outcome {
        Ok(Outcome::Complete(result)) => result.content[0]
            .as_text()
            .expect("a text result")
            .to_owned(),
        other => panic!("not a complete result: {other:?}"),
    }
}

/// Every tool, following `nextCursor` from page to page.
async fn list_tools(transport: &ModernTransport, first_id: i64) -> (Vec<Tool>, usize) {
    let mut tools = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let id = first_id + pages as i64;
        let params = PageParams::new(cursor.take(), Some(modern_meta()));
        let call = transport
            .call::<ListToolsResult>(
                RequestId::Number(id),
                "tools/list",
                request(id, "tools/list", &params),
                &Routing::default(),
            )
            .await
            .expect("tools/list is answered");
        let page = call
            .response(|_| {})
            .await
            .expect("a response")
            .outcome
            .expect("a page");
        pages += 1;
        tools.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return (tools, pages),
        }
        assert!(pages < 10, "tools/list does not end");
    }
}

/// The JSON-RPC error of a response that must be one.
fn error_of<T: std::fmt::Debug>(response: TypedResponse<T>) -> mcp_wire::ErrorObject {
    match response.outcome {
        Err(error) => error,
        Ok(result) => panic!("a result where an error was expected: {result:?}"),
    }
}

/// Rule 1: every POST carries both `Accept` types, `Content-Type: application/json`,
/// `MCP-Protocol-Version` equal to the `_meta` revision and `Mcp-Method` (and `Mcp-Name` on a
/// call, read or prompt); its body is exactly one message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_post_carries_the_standard_headers_and_one_message() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    discovered(&transport).await.outcome.unwrap();
    list_tools(&transport, 2).await;
    assert_eq!(add(&transport, 10, 2, 3).await.unwrap(), "5");
    let mut read = ReadResourceParams::new("demo://greeting");
    read.meta = Some(modern_meta());
    let call = transport
        .call::<Outcome<ReadResourceResult>>(
            RequestId::Number(11),
            "resources/read",
            request(11, "resources/read", &read),
            &Routing::named("demo://greeting").unwrap(),
        )
        .await
        .unwrap();
    call.response(|_| {}).await.unwrap().outcome.unwrap();
    let mut prompt = GetPromptParams::new("greet");
    prompt.meta = Some(modern_meta());
    let call = transport
        .call::<Value>(
            RequestId::Number(12),
            "prompts/get",
            request(12, "prompts/get", &prompt),
            &Routing::named("greet").unwrap(),
        )
        .await
        .unwrap();
    call.response(|_| {}).await.unwrap().outcome.unwrap();

    let log = server.log();
    // discover, 3 pages of tools, add, read, prompt.
    assert_eq!(log.len(), 7, "{:?}", server.methods());
    // `http://127.0.0.1:<port>/mcp`: its `Host`, made once by the client.
    let authority = server.url()["http://".len()..]
        .trim_end_matches("/mcp")
        .to_owned();
    for entry in &log {
        let method = entry.method.as_deref().expect("a JSON-RPC method");
        assert_eq!(entry.http, http::Method::POST, "{method}");
        let hosts: Vec<_> = entry.headers.get_all("host").iter().collect();
        assert_eq!(
            hosts,
            [authority.as_str()],
            "{method}: one Host, the endpoint's"
        );
        assert_eq!(
            entry.header("accept"),
            Some("application/json, text/event-stream"),
            "{method}"
        );
        assert_eq!(
            entry.header("content-type"),
            Some("application/json"),
            "{method}"
        );
        let stated = entry.body["params"]["_meta"][meta::key::PROTOCOL_VERSION]
            .as_str()
            .expect("the _meta revision");
        assert_eq!(stated, "2026-07-28");
        assert_eq!(
            entry.header("mcp-protocol-version"),
            Some(stated),
            "{method}"
        );
        assert_eq!(entry.header("mcp-method"), Some(method));
        // Exactly one message: a JSON-RPC object, not a batch.
        let body = entry.body.as_object().expect("one JSON object");
        assert_eq!(body["jsonrpc"], "2.0");
        assert!(body["id"].is_i64(), "{method}: a request with an id");
        assert_eq!(body["method"], method);
        let name = match method {
            "tools/call" => Some("add"),
            "resources/read" => Some("demo://greeting"),
            "prompts/get" => Some("greet"),
            _ => None,
        };
        assert_eq!(entry.header("mcp-name"), name, "{method}");
        assert!(entry.headers.get("mcp-session-id").is_none());
    }
}

/// Rule 2: `tools/call` carries `Mcp-Name` and the `Mcp-Param-Region` header derived from the
/// `region` tool's listed schema; a non-ASCII value goes base64-encoded; a wrong value is a
/// -32020 error in the call's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_carries_name_and_param_headers_from_the_listed_schema() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    let (tools, pages) = list_tools(&transport, 1).await;
    assert_eq!(pages, 3, "the server pages by 2");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "slow", "ask", "region", "fail"]);
    let region = tools.iter().find(|t| t.name == "region").unwrap();
    let headers = ToolHeaders::from_schema(&region.input_schema).unwrap();
    assert_eq!(headers.headers().len(), 1);

    // Plain ASCII.
    let args = object(json!({"region": "us-west1", "query": "weather"}));
    let derived = headers.derive(Some(&args)).unwrap();
    assert_eq!(
        derived,
        [("Mcp-Param-Region".to_owned(), "us-west1".to_owned())]
    );
    let route = ToolRoute::new("region", headers.clone()).unwrap();
    let routing = route.routing(Some(&args)).unwrap();
    let response = call_tool(&transport, 10, &tool_params("region", args), routing)
        .await
        .unwrap();
    assert_eq!(text(response), "us-west1");
    let sent = server.log().pop().unwrap();
    assert_eq!(sent.header("mcp-name"), Some("region"));
    assert_eq!(sent.header("mcp-param-region"), Some("us-west1"));

    // Not ASCII: base64 between the sentinels, and the server decodes it.
    let args = object(json!({"region": "Zürich"}));
    let routing = route.routing(Some(&args)).unwrap();
    let response = call_tool(&transport, 11, &tool_params("region", args), routing)
        .await
        .unwrap();
    assert_eq!(text(response), "Zürich");
    let sent = server.log().pop().unwrap();
    let value = sent.header("mcp-param-region").unwrap();
    assert_eq!(value, "=?base64?WsO8cmljaA==?=");
    assert!(value.starts_with("=?base64?") && value.ends_with("?="));

    // A header that does not match the arguments: -32020 in the response.
    let args = object(json!({"region": "us-west1"}));
    let wrong = format!("{PARAM_PREFIX}Region");
    let mut routing = Routing::named("region").unwrap();
    routing.params = vec![(
        HeaderName::from_bytes(wrong.as_bytes()).unwrap(),
        HeaderValue::from_static("eu-central1"),
    )];
    let response = call_tool(&transport, 12, &tool_params("region", args), routing)
        .await
        .expect("a header mismatch is an MCP error, not a transport error");
    assert_eq!(response.id, Some(RequestId::Number(12)));
    let error = error_of(response);
    assert_eq!(error.code, code::HEADER_MISMATCH);
    assert_eq!(error.kind(), ErrorKind::HeaderMismatch);
}

/// Rule 3: a server answering with JSON bodies and one answering with event streams both work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_event_stream_answers_both_work() {
    for sse in [false, true] {
        let mut options = Options::default();
        options.sse = sse;
        let server = ReferenceServer::start(options).await;
        let transport = modern(&server);

        let found = discovered(&transport).await;
        assert_eq!(found.id, Some(RequestId::Number(1)), "sse: {sse}");
        assert_eq!(found.outcome.unwrap().supported_versions, ["2026-07-28"]);
        let (tools, _) = list_tools(&transport, 2).await;
        assert_eq!(tools.len(), 5, "sse: {sse}");
        assert_eq!(
            add(&transport, 10, 20, 22).await.unwrap(),
            "42",
            "sse: {sse}"
        );
        // An error answer comes the same way.
        let params = tool_params("nope", Map::new());
        let response = call_tool(&transport, 11, &params, Routing::named("nope").unwrap())
            .await
            .unwrap();
        assert_eq!(error_of(response).code, code::INVALID_PARAMS, "sse: {sse}");
    }
}

/// Rule 4: a configured header the client sets itself is refused when the client is built,
/// in any case, naming it; `Authorization` is accepted and sent on every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_headers_are_refused_and_authorization_is_sent() {
    let server = ReferenceServer::start(Options::default()).await;
    for name in [
        "MCP-Protocol-Version",
        "mcp-method",
        "MCP-NAME",
        "Mcp-Param-X",
        "mcp-session-id",
        "last-event-id",
    ] {
        let mut config = Config::default();
        config.headers = vec![
            ("Authorization".into(), "Bearer t0k3n".into()),
            (name.into(), "x".into()),
        ];
        let refused = HttpClient::new(&server.url(), config).unwrap_err();
        assert_eq!(refused, Error::ReservedHeader { name: name.into() });
    }

    let mut config = Config::default();
    config.headers = vec![("Authorization".into(), "Bearer t0k3n".into())];
    let transport = ModernTransport::new(HttpClient::new(&server.url(), config).unwrap(), MODERN);
    discovered(&transport).await;
    list_tools(&transport, 2).await;
    assert_eq!(add(&transport, 10, 1, 1).await.unwrap(), "2");
    let log = server.log();
    assert_eq!(log.len(), 5);
    for entry in log {
        assert_eq!(
            entry.header("authorization"),
            Some("Bearer t0k3n"),
            "{:?}",
            entry.method
        );
    }
}

/// A configured `Host` is the one sent, once, in place of the endpoint's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_host_is_sent_in_place_of_the_endpoints() {
    let server = ReferenceServer::start(Options::default()).await;
    let mut config = Config::default();
    config.headers = vec![("Host".into(), "mcp.example.test".into())];
    let transport = ModernTransport::new(HttpClient::new(&server.url(), config).unwrap(), MODERN);
    discovered(&transport).await;
    let log = server.log();
    assert_eq!(log.len(), 1);
    let hosts: Vec<_> = log[0].headers.get_all("host").iter().collect();
    assert_eq!(hosts, ["mcp.example.test"]);
}

/// Rule 5: the silence bound bounds silence, not duration: a call that talks every 150 ms
/// outlives a 400 ms bound; a call that says nothing fails `Silent` at the bound. In virtual
/// time: the server's pauses and the bound are the only clocks that run.
#[tokio::test(start_paused = true)]
async fn silence_bounds_silence_not_duration() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    let mut params = tool_params("slow", object(json!({"steps": 6, "delay_ms": 150})));
    params
        .meta
        .as_mut()
        .unwrap()
        .insert(meta::key::PROGRESS_TOKEN.into(), json!("p-1"));
    let mut routing = Routing::named("slow").unwrap();
    routing.silence = Some(Duration::from_millis(400));
    let start = Instant::now();
    let mut call = transport
        .call::<Outcome<CallToolResult>>(
            RequestId::Number(1),
            "tools/call",
            request(1, "tools/call", &params),
            &routing,
        )
        .await
        .unwrap();
    let mut progress = Vec::new();
    let response = loop {
        match bounded("the slow call", call.next()).await.unwrap() {
            Some(Delivery::Notification(notice)) => match notice.decode().unwrap() {
                ServerNotification::Progress(p) => {
                    assert_eq!(p.progress_token, RequestId::from("p-1"));
                    progress.push(p.progress);
                }
                other => panic!("unexpected notification {other:?}"),
            },
            Some(Delivery::Response(response)) => break response,
            None => panic!("the call ended without its response"),
        }
    };
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(text(response), "counted 6");
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(900),
        "six steps of 150 ms, more than twice the silence bound"
    );
    assert!(call.next().await.unwrap().is_none());

    // A silent server: Silent at the bound.
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(3)),
        Times::Once,
    );
    let mut routing = Routing::named("add").unwrap();
    routing.silence = Some(Duration::from_millis(300));
    let start = Instant::now();
    let outcome = transport
        .call::<Outcome<CallToolResult>>(
            RequestId::Number(2),
            "tools/call",
            request(2, "tools/call", &tool_params("add", add_args(1, 2))),
            &routing,
        )
        .await;
    assert_eq!(outcome.unwrap_err(), Error::Silent { after_ms: 300 });
    assert_eq!(start.elapsed(), Duration::from_millis(300));

    // The bound from the configuration, when the routing names none.
    let mut config = Config::default();
    config.silence = Duration::from_millis(300);
    let configured = ModernTransport::new(client(&server, config), MODERN);
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(3)),
        Times::Once,
    );
    let start = Instant::now();
    let outcome = add(&configured, 3, 1, 2).await;
    assert_eq!(outcome.unwrap_err(), Error::Silent { after_ms: 300 });
    assert_eq!(start.elapsed(), Duration::from_millis(300));
}

/// Rule 6: a call abandoned at its bound holds up no other call on the same client: the
/// others are answered while it is pending, and it fails at its bound (virtual time).
#[tokio::test(start_paused = true)]
async fn a_silent_call_holds_up_no_other_call() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(3)),
        Times::Once,
    );

    let silent_transport = transport.clone();
    let silent = tokio::spawn(async move {
        let mut routing = Routing::named("add").unwrap();
        routing.silence = Some(Duration::from_millis(1500));
        let start = Instant::now();
        let outcome = silent_transport
            .call::<Outcome<CallToolResult>>(
                RequestId::Number(1),
                "tools/call",
                request(1, "tools/call", &tool_params("add", add_args(0, 0))),
                &routing,
            )
            .await;
        (outcome.map(drop), start.elapsed())
    });
    // The silent call has reached the server (and taken the fault) before the others go.
    assert!(
        wait_until(Duration::from_secs(2), || server.methods().len() == 1).await,
        "the silent call did not reach the server"
    );

    let mut adds = Vec::new();
    for i in 0..5 {
        let transport = transport.clone();
        adds.push(tokio::spawn(async move {
            add(&transport, 10 + i, i, 100).await
        }));
    }
    for (i, add) in adds.into_iter().enumerate() {
        let text = bounded("a concurrent add", add).await.unwrap().unwrap();
        assert_eq!(text, (i as i64 + 100).to_string());
    }
    assert!(
        !silent.is_finished(),
        "the adds were answered while the silent call is still pending"
    );

    let (outcome, elapsed) = bounded("the silent call", silent).await.unwrap();
    assert_eq!(outcome.unwrap_err(), Error::Silent { after_ms: 1500 });
    assert_eq!(elapsed, Duration::from_millis(1500));

    for i in 0..3 {
        assert_eq!(
            add(&transport, 20 + i, i, 1).await.unwrap(),
            (i + 1).to_string()
        );
    }
}

/// Rule 7: a listen is acknowledged, receives the updates it asked for with its
/// subscription id, and is cancelled by dropping it (closing its stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_listen_closes_it_on_the_server() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    let mut filter = ListenFilter::default();
    filter.resource_subscriptions = Some(vec!["demo://greeting".into()]);
    filter.tools_list_changed = Some(true);
    let params = ListenParams::new(filter, Some(modern_meta()));
    let listen_id = RequestId::Number(7);
    let mut call = transport
        .call::<Value>(
            listen_id.clone(),
            "subscriptions/listen",
            request(7, "subscriptions/listen", &params),
            &Routing::default(),
        )
        .await
        .unwrap();

    let Some(Delivery::Notification(first)) = bounded("the ack", call.next()).await.unwrap() else {
        panic!("the first message is not a notification");
    };
    assert_eq!(first.method, "notifications/subscriptions/acknowledged");
    let ServerNotification::SubscriptionsAcknowledged(ack) = first.decode().unwrap() else {
        panic!("not an acknowledgment");
    };
    assert_eq!(
        ack.notifications.resource_subscriptions,
        Some(vec!["demo://greeting".to_owned()])
    );
    assert_eq!(ack.notifications.tools_list_changed, Some(true));
    assert_eq!(ack.notifications.resources_list_changed, None);
    assert_eq!(
        ack.meta.as_ref().unwrap()[meta::key::SUBSCRIPTION_ID],
        json!(7)
    );
    assert_eq!(server.listens(), 1);

    server.touch("demo://greeting").await;
    let Some(Delivery::Notification(update)) = bounded("the update", call.next()).await.unwrap()
    else {
        panic!("no update");
    };
    assert_eq!(update.method, "notifications/resources/updated");
    let ServerNotification::ResourceUpdated(updated) = update.decode().unwrap() else {
        panic!("not a resource update");
    };
    assert_eq!(updated.uri, "demo://greeting");
    assert_eq!(
        updated.meta.as_ref().unwrap()[meta::key::SUBSCRIPTION_ID],
        json!(7)
    );

    drop(call);
    assert!(
        wait_until(Duration::from_secs(3), || server.listens() == 0).await,
        "the server still holds the listen after the client closed it"
    );
}

/// Rule 8: errors keep what matters: a JSON-RPC error body is an MCP error in the response,
/// statuses without one are `Status`, a body over its bound is `TooLarge`, a closed port is
/// `Unreachable`, an unknown method is its -32601 response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_what_matters() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    // 400 with -32022 and the supported list: an Ok call whose response is the error.
    server.script(
        "server/discover",
        Fault::RpcError {
            status: 400,
            code: code::UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": ["2026-07-28"], "requested": "2026-07-28"})),
        },
        Times::Once,
    );
    let response = discover(&transport, 1)
        .await
        .expect("an error body is no transport error")
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(response.id, Some(RequestId::Number(1)));
    let error = error_of(response);
    assert_eq!(error.code, code::UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(
        error.kind(),
        ErrorKind::UnsupportedVersion {
            supported: vec!["2026-07-28".into()],
            requested: Some("2026-07-28".into()),
        }
    );

    // Statuses without a JSON-RPC error body.
    for status in [401, 403, 500] {
        server.script("server/discover", Fault::Status(status, None), Times::Once);
        let failure = discover(&transport, 2).await.unwrap_err();
        assert_eq!(
            failure,
            Error::Reply(Failure::Status {
                status,
                www_authenticate: None
            }),
            "{status}"
        );
    }

    // A JSON body over its bound.
    let mut limits = Limits::default();
    limits.json_body = 64;
    let mut config = Config::default();
    config.limits = limits;
    let small = ModernTransport::new(client(&server, config), MODERN);
    let params = PageParams::new(None, Some(modern_meta()));
    let failure = small
        .call::<ListToolsResult>(
            RequestId::Number(3),
            "tools/list",
            request(3, "tools/list", &params),
            &Routing::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        failure,
        Error::Reply(Failure::TooLarge {
            status: 200,
            limit: 64
        })
    );

    // Nobody listening.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let nowhere = ModernTransport::new(
        HttpClient::new(&format!("http://127.0.0.1:{port}/mcp"), Config::default()).unwrap(),
        MODERN,
    );
    let failure = bounded("the unreachable call", discover(&nowhere, 4))
        .await
        .unwrap_err();
    assert!(matches!(failure, Error::Unreachable { .. }), "{failure:?}");

    // An unknown method: 404 with -32601, an Ok call whose response is the error.
    let params = json!({"_meta": modern_meta()});
    let response = transport
        .call::<Value>(
            RequestId::Number(5),
            "nope/nothing",
            request(5, "nope/nothing", &params),
            &Routing::default(),
        )
        .await
        .expect("a 404 with an error body is no transport error")
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(response.id, Some(RequestId::Number(5)));
    let error = error_of(response);
    assert_eq!(error.code, code::METHOD_NOT_FOUND);
    assert_eq!(error.kind(), ErrorKind::MethodNotFound);
}

/// Rule 9: `ask` answers `input_required` with an elicitation and a `requestState`; the
/// retry with `inputResponses`, the same state and a new id completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_then_retry_with_input_responses() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = modern(&server);

    let first = tool_params("ask", Map::new());
    let response = call_tool(&transport, 1, &first, Routing::named("ask").unwrap())
        .await
        .unwrap();
    let Ok(Outcome::InputRequired(required)) = response.outcome else {
        panic!("not input_required: {:?}", response.outcome);
    };
    let requests = required.input_requests.as_ref().expect("input requests");
    let elicitation = requests["name"]
        .elicitation()
        .expect("an elicitation")
        .unwrap();
    assert_eq!(elicitation.message, "What is your name?");
    let state = required.request_state.clone().expect("a request state");

    let mut retry = first.clone();
    let mut responses = mcp_wire::InputResponses::new();
    responses.insert(
        "name".into(),
        ElicitResult::accept(object(json!({"name": "Ada"}))).into(),
    );
    retry.input_responses = Some(responses);
    retry.request_state = Some(state.clone());
    let response = call_tool(&transport, 2, &retry, Routing::named("ask").unwrap())
        .await
        .unwrap();
    assert_eq!(response.id, Some(RequestId::Number(2)));
    assert_eq!(text(response), "accept: name='Ada'");

    let log = server.log();
    assert_eq!(log.len(), 2);
    assert_ne!(log[0].body["id"], log[1].body["id"], "a new JSON-RPC id");
    assert_eq!(log[1].body["params"]["requestState"], json!(state));
    assert_eq!(
        log[1].body["params"]["inputResponses"]["name"],
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
}

/// Over TLS the client negotiates HTTP/2 by ALPN and trusts a configured CA besides the
/// bundled roots; without that CA the server is unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_negotiates_http2_and_trusts_configured_roots() {
    let mut options = Options::default();
    options.tls = true;
    let server = ReferenceServer::start(options).await;
    assert!(server.url().starts_with("https://127.0.0.1:"));

    let mut config = Config::default();
    config.extra_roots = vec![server.ca_der().expect("a CA").to_vec()];
    let transport = ModernTransport::new(HttpClient::new(&server.url(), config).unwrap(), MODERN);
    let found = discovered(&transport).await;
    assert_eq!(found.outcome.unwrap().supported_versions, ["2026-07-28"]);
    // Concurrent calls share the one HTTP/2 connection.
    let (a, b) = tokio::join!(add(&transport, 2, 1, 2), add(&transport, 3, 3, 4));
    assert_eq!((a.unwrap(), b.unwrap()), ("3".to_owned(), "7".to_owned()));
    assert!(
        server
            .log()
            .iter()
            .all(|l| l.version == http::Version::HTTP_2),
        "every request went over HTTP/2"
    );

    let untrusting = ModernTransport::new(client(&server, Config::default()), MODERN);
    let refused = discover(&untrusting, 4).await.expect_err("an unknown CA");
    assert!(matches!(refused, Error::Unreachable { .. }), "{refused:?}");
}

/// A quiet listen lives on keep-alive comments: with a silence bound shorter than the quiet
/// spell, the comments keep it open, and a change still arrives after it. In virtual time:
/// the comments every 100 ms and the bound of 400 ms are the only clocks that run.
#[tokio::test(start_paused = true)]
async fn keep_alive_comments_hold_a_quiet_listen() {
    let mut options = Options::default();
    options.keepalive = Some(Duration::from_millis(100));
    let server = ReferenceServer::start(options).await;
    let transport = modern(&server);
    let mut filter = ListenFilter::default();
    filter.resource_subscriptions = Some(vec!["demo://counter".into()]);
    let params = ListenParams::new(filter, Some(modern_meta()));
    let mut routing = Routing::default();
    routing.silence = Some(Duration::from_millis(400));
    let mut call = transport
        .call::<Value>(
            RequestId::Number(1),
            "subscriptions/listen",
            request(1, "subscriptions/listen", &params),
            &routing,
        )
        .await
        .unwrap();
    let ack = bounded("the ack", call.next()).await.unwrap();
    assert!(
        matches!(ack, Some(Delivery::Notification(n)) if n.method == "notifications/subscriptions/acknowledged")
    );

    // Three times the silence bound with nothing but keep-alives: no delivery, no error.
    let quiet = tokio::time::timeout(Duration::from_millis(1200), call.next()).await;
    assert!(
        quiet.is_err(),
        "nothing arrives, and the listen does not fail: {quiet:?}"
    );

    server.touch("demo://counter").await;
    let Some(Delivery::Notification(update)) = bounded("the update", call.next()).await.unwrap()
    else {
        panic!("no update");
    };
    assert_eq!(update.method, "notifications/resources/updated");
}
