//! The 2025-11-25 transport against the reference server over loopback: the session and
//! protocol version headers, a lost session, the GET stream, server requests on a stream,
//! resumption with `Last-Event-ID`, priming events, DELETE, and `notifications/cancelled`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{accept_ada, bounded, client, handshake, notification, request, wait_until};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use mcp_transport::Error;
use mcp_transport::driver::{
    ClientFeatures, Config, Delivery, Elicitor, LegacyTransport, Posted, Unserved,
};
use mcp_wire::{
    CallToolParams, CallToolResult, EmptyResult, ListToolsResult, Meta, Outcome, PageParams,
    ReadResourceParams, ReadResourceResult, RequestId, Revision, ServerNotification,
    SubscribeParams, TypedResponse, code,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::Instant;

/// A transport of `server`, before its handshake.
fn legacy(server: &ReferenceServer, elicitor: Option<Arc<dyn Elicitor>>) -> LegacyTransport {
    let features = match elicitor {
        Some(elicitor) => ClientFeatures::none().with_elicitor(elicitor),
        None => ClientFeatures::none(),
    };
    LegacyTransport::new(client(server, Config::default()), features)
}

/// A transport of `server`, after its handshake.
async fn connected(server: &ReferenceServer) -> LegacyTransport {
    let transport = legacy(server, None);
    handshake(&transport).await;
    transport
}

/// Posts a request.
async fn post<T: DeserializeOwned, P: Serialize>(
    transport: &LegacyTransport,
    id: i64,
    method: &str,
    params: &P,
) -> Result<Posted<T>, Error> {
    transport
        .call(
            RequestId::Number(id),
            method,
            request(id, method, params),
            None,
        )
        .await
}

/// Posts a request and reads it to its response.
async fn ask<T: DeserializeOwned, P: Serialize>(
    transport: &LegacyTransport,
    id: i64,
    method: &str,
    params: &P,
) -> Result<TypedResponse<T>, Error> {
    let posted = post(transport, id, method, params).await?;
    bounded(method, posted.call.response(|_| {})).await
}

/// The params of a `tools/call`.
fn tool(name: &str, arguments: Value) -> CallToolParams {
    let mut params = CallToolParams::new(name);
    params.arguments = Some(common::object(arguments));
    params
}

/// The text of a complete tool result.
fn text(response: TypedResponse<Outcome<CallToolResult>>) -> String {
    match response.outcome {
        Ok(Outcome::Complete(result)) => result.content[0]
            .as_text()
            .expect("a text result")
            .to_owned(),
        other => panic!("not a complete result: {other:?}"),
    }
}

/// Rule 10: `initialize` carries neither `MCP-Protocol-Version` nor `Mcp-Session-Id`; every
/// later request carries both; `notifications/initialized` is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_headers_after_initialize_only() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = legacy(&server, None);
    let revision = handshake(&transport).await;
    assert_eq!(revision, Revision::V2025_11_25);
    let session = transport.snapshot();
    let id = session.id().expect("the server gave a session").to_owned();
    assert_eq!(session.revision(), Some(Revision::V2025_11_25));

    let listed: TypedResponse<ListToolsResult> =
        ask(&transport, 1, "tools/list", &PageParams::default())
            .await
            .unwrap();
    assert_eq!(listed.outcome.unwrap().items.len(), 2);
    let added = ask(
        &transport,
        2,
        "tools/call",
        &tool("add", json!({"a": 1, "b": 2})),
    )
    .await
    .unwrap();
    assert_eq!(text(added), "3");

    let log = server.log();
    assert_eq!(
        server.methods(),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    assert_eq!(log[0].header("mcp-protocol-version"), None);
    assert_eq!(log[0].header("mcp-session-id"), None);
    for entry in &log[1..] {
        assert_eq!(
            entry.header("mcp-protocol-version"),
            Some("2025-11-25"),
            "{:?}",
            entry.method
        );
        assert_eq!(
            entry.header("mcp-session-id"),
            Some(id.as_str()),
            "{:?}",
            entry.method
        );
        assert_eq!(
            entry.header("accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(entry.header("content-type"), Some("application/json"));
    }
}

/// Rule 11: a 404 to a request that carried the session is `SessionLost`, and the session is
/// cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_loses_the_session() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    let id = transport.snapshot().id().unwrap().to_owned();

    server.expire_sessions();
    let lost = post::<ListToolsResult, _>(&transport, 1, "tools/list", &PageParams::default())
        .await
        .unwrap_err();
    assert_eq!(lost, Error::SessionLost);
    assert_eq!(transport.snapshot().id(), None);
    assert_eq!(transport.snapshot().revision(), None);
    let sent = server.log().pop().unwrap();
    assert_eq!(sent.method.as_deref(), Some("tools/list"));
    assert_eq!(sent.header("mcp-session-id"), Some(id.as_str()));

    // A fresh handshake gives a new session.
    handshake(&transport).await;
    let renewed = transport.snapshot().id().unwrap().to_owned();
    assert_ne!(renewed, id);
    let listed: TypedResponse<ListToolsResult> =
        ask(&transport, 2, "tools/list", &PageParams::default())
            .await
            .unwrap();
    assert!(listed.outcome.is_ok());
}

/// Rule 12: the GET stream delivers what the session subscribed to; a server without one
/// answers 405 and `server_stream` is `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_delivers_subscribed_updates() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;

    let mut stream = bounded("server_stream", transport.server_stream())
        .await
        .unwrap()
        .expect("the server offers a GET stream");
    let subscribed: TypedResponse<EmptyResult> = ask(
        &transport,
        1,
        "resources/subscribe",
        &SubscribeParams::new("demo://counter"),
    )
    .await
    .unwrap();
    assert!(subscribed.outcome.is_ok());

    server.touch("demo://counter").await;
    let delivered = bounded("the update", stream.next()).await.unwrap();
    let Some(Delivery::Notification(notice)) = delivered else {
        panic!("not a notification: {delivered:?}");
    };
    assert_eq!(notice.method, "notifications/resources/updated");
    let ServerNotification::ResourceUpdated(updated) = notice.decode().unwrap() else {
        panic!("not a resource update");
    };
    assert_eq!(updated.uri, "demo://counter");
    let get = server
        .log()
        .into_iter()
        .find(|l| l.http == http::Method::GET)
        .expect("a GET");
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("mcp-session-id"), transport.snapshot().id());
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-11-25"));

    let mut options = Options::default();
    options.get_stream = false;
    let without = ReferenceServer::start(options).await;
    let transport = connected(&without).await;
    let none = bounded("server_stream", transport.server_stream())
        .await
        .unwrap();
    assert!(none.is_none());
}

/// Rule 13: the `ask` tool's `elicitation/create` on the POST stream is answered through the
/// `Elicitor`, or -32601 without one; the answer carries the session headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_on_a_stream_are_answered() {
    let server = ReferenceServer::start(Options::default()).await;

    // With an elicitor that accepts "Ada".
    let transport = legacy(&server, Some(Arc::new(accept_ada)));
    handshake(&transport).await;
    let session = transport.snapshot().id().unwrap().to_owned();
    let answered = ask(&transport, 1, "tools/call", &tool("ask", json!({})))
        .await
        .unwrap();
    assert_eq!(text(answered), "accept: name='Ada'");
    let answer = server
        .log()
        .into_iter()
        .find(|l| l.method.is_none() && l.body.get("id").is_some())
        .expect("the answer POST");
    assert_eq!(answer.http, http::Method::POST);
    assert_eq!(
        answer.body["result"],
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
    assert_eq!(answer.header("mcp-session-id"), Some(session.as_str()));
    assert_eq!(answer.header("mcp-protocol-version"), Some("2025-11-25"));

    // Without an elicitor: -32601, which the tool reads as an invalid answer.
    let before = server.log().len();
    let transport = legacy(&server, None);
    handshake(&transport).await;
    let session = transport.snapshot().id().unwrap().to_owned();
    let refused = ask(&transport, 2, "tools/call", &tool("ask", json!({})))
        .await
        .unwrap();
    assert_eq!(text(refused), "invalid answer");
    let answer = server.log()[before..]
        .iter()
        .find(|l| l.method.is_none() && l.body.get("id").is_some())
        .cloned()
        .expect("the answer POST");
    assert_eq!(answer.body["error"]["code"], json!(code::METHOD_NOT_FOUND));
    assert!(answer.body["id"].as_str().unwrap().starts_with("e-"));
    assert_eq!(answer.header("mcp-session-id"), Some(session.as_str()));
    assert_eq!(answer.header("mcp-protocol-version"), Some("2025-11-25"));
}

/// A client that drops what it does not serve sends no answer at all: the server, left
/// waiting, says nothing more, and the call meets its silence bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_no_feature_serves_can_be_dropped() {
    let server = ReferenceServer::start(Options::default()).await;
    let mut config = Config::default();
    config.silence = Duration::from_millis(500);
    let features = ClientFeatures::none().with_unserved(Unserved::Drop);
    let transport = LegacyTransport::new(client(&server, config), features);
    handshake(&transport).await;
    let before = server.log().len();
    let unanswered: Result<TypedResponse<Value>, _> =
        ask(&transport, 2, "tools/call", &tool("ask", json!({}))).await;
    assert!(
        matches!(unanswered, Err(Error::Silent { .. })),
        "{unanswered:?}"
    );
    let answers = server.log()[before..]
        .iter()
        .filter(|l| l.method.is_none() && l.body.get("id").is_some())
        .count();
    assert_eq!(answers, 0, "nothing answered the elicitation");
}

/// Rule 14: a stream closed before its response is resumed with GET and `Last-Event-ID`,
/// after the `retry` the server named (virtual time).
#[tokio::test(start_paused = true)]
async fn a_closed_stream_is_resumed_after_retry() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    server.script(
        "tools/call",
        Fault::CloseMidStream { retry_ms: 500 },
        Times::Once,
    );

    let start = Instant::now();
    let response = ask(
        &transport,
        1,
        "tools/call",
        &tool("add", json!({"a": 1, "b": 1})),
    )
    .await
    .expect("the call is resumed");
    let elapsed = start.elapsed();
    assert_eq!(response.id, Some(RequestId::Number(1)));
    assert_eq!(text(response), "resumed");
    assert_eq!(
        elapsed,
        Duration::from_millis(500),
        "resumed after the retry"
    );

    let log = server.log();
    let gets: Vec<_> = log.iter().filter(|l| l.http == http::Method::GET).collect();
    assert_eq!(gets.len(), 1, "one resumption");
    let last = gets[0].header("last-event-id").expect("Last-Event-ID");
    assert!(last.starts_with("st") && last.ends_with("-0"), "{last}");
    assert_eq!(gets[0].header("mcp-session-id"), transport.snapshot().id());
    assert_eq!(gets[0].header("mcp-protocol-version"), Some("2025-11-25"));
}

/// Rule 15: with event-stream answers (a priming event with empty data first), every request
/// still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_answers_with_priming_events_work() {
    let mut options = Options::default();
    options.sse = true;
    let server = ReferenceServer::start(options).await;
    let transport = connected(&server).await;
    assert!(transport.snapshot().id().is_some());

    let pong: TypedResponse<EmptyResult> = ask(&transport, 1, "ping", &json!({})).await.unwrap();
    assert!(pong.outcome.is_ok());
    let listed: TypedResponse<ListToolsResult> =
        ask(&transport, 2, "tools/list", &PageParams::default())
            .await
            .unwrap();
    assert_eq!(listed.outcome.unwrap().items[0].name, "add");
    let added = ask(
        &transport,
        3,
        "tools/call",
        &tool("add", json!({"a": 40, "b": 2})),
    )
    .await
    .unwrap();
    assert_eq!(text(added), "42");
    let read: TypedResponse<Outcome<ReadResourceResult>> = ask(
        &transport,
        4,
        "resources/read",
        &ReadResourceParams::new("demo://greeting"),
    )
    .await
    .unwrap();
    let Ok(Outcome::Complete(read)) = read.outcome else {
        panic!("no contents");
    };
    assert_eq!(read.contents[0].uri(), "demo://greeting");
    let unknown: TypedResponse<Value> = ask(&transport, 5, "nope/nothing", &json!({}))
        .await
        .unwrap();
    assert_eq!(unknown.outcome.unwrap_err().code, code::METHOD_NOT_FOUND);
    transport
        .notify(
            "notifications/roots/list_changed",
            notification::<Value>("notifications/roots/list_changed", None),
        )
        .await
        .unwrap();
}

/// Rule 16, first half: `close` sends DELETE with the session id, and the server ends the
/// session: a request that still carries it is `SessionLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_sends_delete_with_the_session() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    let id = transport.snapshot().id().unwrap().to_owned();

    bounded("close", transport.close()).await.unwrap();
    let delete = server.log().pop().unwrap();
    assert_eq!(delete.http, http::Method::DELETE);
    assert_eq!(delete.header("mcp-session-id"), Some(id.as_str()));
    assert_eq!(delete.header("mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(transport.snapshot().id(), None);

    // Whoever still holds the session gets a 404.
    let holder = legacy(&server, None);
    holder
        .established(Revision::V2025_11_25, Some(id.as_bytes()))
        .unwrap();
    let lost = post::<ListToolsResult, _>(&holder, 1, "tools/list", &PageParams::default())
        .await
        .unwrap_err();
    assert_eq!(lost, Error::SessionLost);
    assert_eq!(holder.snapshot().id(), None);
}

/// Rule 16, second half: after `close`, a request on the same transport is `SessionLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_after_close_is_session_lost() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    bounded("close", transport.close()).await.unwrap();

    let later = post::<ListToolsResult, _>(&transport, 2, "tools/list", &PageParams::default())
        .await
        .map(|posted| posted.session_id);
    assert_eq!(later.unwrap_err(), Error::SessionLost);
}

/// Rule 17: `Call::cancel` on a running call posts `notifications/cancelled` with its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_posts_notifications_cancelled() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    let id = transport.snapshot().id().unwrap().to_owned();

    let mut params = tool("slow", json!({"steps": 50, "delay_ms": 100}));
    let mut meta = Meta::new();
    meta.insert("progressToken".into(), json!("tok"));
    params.meta = Some(meta);
    let mut posted = post::<Outcome<CallToolResult>, _>(&transport, 9, "tools/call", &params)
        .await
        .unwrap();
    let first = bounded("the first progress", posted.call.next())
        .await
        .unwrap();
    assert!(
        matches!(&first, Some(Delivery::Notification(n)) if n.method == "notifications/progress"),
        "{first:?}"
    );

    let sent = posted.call.cancel(Some("no longer needed".into()));
    bounded("cancel", sent.expect("a legacy call is cancelled"))
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(2), || server
            .methods()
            .iter()
            .any(|m| m == "notifications/cancelled"))
        .await
    );
    let cancelled = server
        .log()
        .into_iter()
        .find(|l| l.method.as_deref() == Some("notifications/cancelled"))
        .unwrap();
    assert_eq!(cancelled.body["params"]["requestId"], json!(9));
    assert_eq!(
        cancelled.body["params"]["reason"],
        json!("no longer needed")
    );
    assert_eq!(cancelled.header("mcp-session-id"), Some(id.as_str()));
    assert_eq!(cancelled.header("mcp-protocol-version"), Some("2025-11-25"));
}

/// A server's `ping` on a stream is answered with an empty result, POSTed back with the
/// session's headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_on_a_stream_is_answered() {
    let server = ReferenceServer::start(Options::default()).await;
    let transport = connected(&server).await;
    let response = ask(
        &transport,
        1,
        "tools/call",
        &tool("slow", json!({"steps": 1, "delay_ms": 10})),
    )
    .await
    .expect("the call is answered");
    assert_eq!(text(response), "counted 1");
    let log = server.log();
    let answer = log
        .iter()
        .find(|l| {
            l.body["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("ping-"))
        })
        .expect("the ping was answered");
    assert_eq!(answer.body["result"], json!({}));
    assert_eq!(answer.header("mcp-session-id"), transport.snapshot().id());
}

/// A server that replays every stream of the session on resumption (as `server-everything`
/// does), its stored priming events as `data: {}`: the client passes over the `{}` events and
/// the other requests' responses, and takes its own. In virtual time, so that the other
/// request is recorded while the call waits out its `retry`, before its own result.
#[tokio::test(start_paused = true)]
async fn a_whole_session_replay_is_tolerated() {
    let mut options = Options::default();
    options.sse = true;
    options.replay_whole_session = true;
    let server = ReferenceServer::start(options).await;
    let transport = connected(&server).await;
    server.script(
        "tools/call",
        Fault::CloseMidStream { retry_ms: 400 },
        Times::Once,
    );
    let resumed = {
        let transport = transport.clone();
        tokio::spawn(async move {
            ask(
                &transport,
                1,
                "tools/call",
                &tool("add", json!({"a": 1, "b": 1})),
            )
            .await
        })
    };
    // Once the call's stream was cut (the server has the call), and while the call waits
    // to resume, another request's stream is recorded in the session.
    assert!(
        wait_until(Duration::from_secs(2), || server
            .methods()
            .iter()
            .any(|m| m == "tools/call"))
        .await,
        "the call did not reach the server"
    );
    let pong: TypedResponse<EmptyResult> = ask(&transport, 2, "ping", &json!({})).await.unwrap();
    assert!(pong.outcome.is_ok());
    let response = resumed
        .await
        .expect("the task")
        .expect("the call is resumed");
    assert_eq!(response.id, Some(RequestId::Number(1)));
    assert_eq!(text(response), "resumed");
}
