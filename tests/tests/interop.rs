//! The transport against servers nobody here wrote: the Python `mcp` 2.3.0 server in both
//! eras (JSON and event-stream answers), and the TypeScript `server-everything` (event
//! streams only, the GET stream, `resources/subscribe`, elicitation).
//!
//! The peers are installed by `tests/peers/install.sh`; a missing peer fails these tests.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentd_tests::peers;
use common::{MODERN, accept_ada, add_args, handshake, modern_meta, object, request};
use mcp_transport::Error;
use mcp_transport::driver::{
    Call, ClientFeatures, Config, Delivery, Elicitor, HttpClient, LegacyTransport, ModernTransport,
    Routing,
};
use mcp_wire::{
    CallToolParams, CallToolResult, Cursor, DiscoverParams, DiscoverResult, ElicitAction,
    ElicitRequestParams, ElicitResult, ListToolsResult, ListenFilter, ListenParams, Outcome,
    PageParams, RequestId, Revision, ServerNotification, SubscribeParams,
};
use serde::de::DeserializeOwned;
use serde_json::json;

fn client(url: &str) -> HttpClient {
    HttpClient::new(url, Config::default()).expect("a valid client")
}

/// Reads a call to its response, collecting the notifications before it.
async fn finish<T: DeserializeOwned>(call: Call<T>) -> (T, Vec<ServerNotification>) {
    let mut notes = Vec::new();
    let response = tokio::time::timeout(
        Duration::from_secs(20),
        call.response(|n| notes.push(n.decode().expect("a notification"))),
    )
    .await
    .expect("answered in time")
    .expect("a response");
    (response.outcome.expect("a result"), notes)
}

/// The text of a complete tool result.
fn text(outcome: Outcome<CallToolResult>) -> String {
    match outcome {
        Outcome::Complete(r) => r.content[0].as_text().expect("text").to_owned(),
        Outcome::InputRequired(i) => panic!("input required: {i:?}"),
    }
}

/// Every tool name of a legacy server, following `nextCursor` to the end.
async fn legacy_tools(transport: &LegacyTransport) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for id in 100.. {
        let params = PageParams::new(cursor.take(), None);
        let posted = transport
            .call::<ListToolsResult>(
                RequestId::Number(id),
                "tools/list",
                request(id, "tools/list", &params),
                None,
            )
            .await
            .expect("tools/list is answered");
        let (page, _) = finish(posted.call).await;
        names.extend(page.items.into_iter().map(|t| t.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return names,
        }
    }
    unreachable!()
}

async fn legacy_call(
    transport: &LegacyTransport,
    id: i64,
    name: &str,
    args: serde_json::Value,
) -> (String, Vec<ServerNotification>) {
    let mut params = CallToolParams::new(name);
    params.arguments = Some(object(args));
    let mut meta = mcp_wire::Meta::new();
    meta.insert("progressToken".into(), json!(id));
    params.meta = Some(meta);
    let posted = transport
        .call::<Outcome<CallToolResult>>(
            RequestId::Number(id),
            "tools/call",
            request(id, "tools/call", &params),
            None,
        )
        .await
        .expect("tools/call is answered");
    let (outcome, notes) = finish(posted.call).await;
    (text(outcome), notes)
}

/// The Python server, 2025-11-25, in both answer modes: the handshake, tools across pages, a
/// call with progress, an elicitation, the GET stream, and the 404 after DELETE.
#[tokio::test]
async fn python_legacy_in_json_and_stream_modes() {
    for json_mode in [true, false] {
        let peer = peers::python(json_mode);
        let transport = LegacyTransport::new(
            client(&peer.url),
            ClientFeatures::none().with_elicitor(Arc::new(accept_ada)),
        );
        assert_eq!(handshake(&transport).await, Revision::V2025_11_25);
        let tools = legacy_tools(&transport).await;
        for tool in ["add", "slow", "ask_name", "touch"] {
            assert!(tools.iter().any(|t| t == tool), "{tool} in {tools:?}");
        }
        assert_eq!(
            legacy_call(&transport, 1, "add", json!({"a": 2, "b": 3}))
                .await
                .0,
            "5"
        );
        let (done, notes) = legacy_call(&transport, 2, "slow", json!({"steps": 3})).await;
        assert!(!done.is_empty());
        let progress = notes
            .iter()
            .filter(|n| matches!(n, ServerNotification::Progress(_)))
            .count();
        // The JSON mode drops progress; the stream mode delivers each step.
        assert_eq!(
            progress,
            if json_mode { 0 } else { 3 },
            "json mode {json_mode}"
        );
        // An elicitation needs a stream to travel on: in JSON mode the server has none.
        if !json_mode {
            let (asked, _) = legacy_call(&transport, 3, "ask_name", json!({})).await;
            assert_eq!(asked, "accept: name='Ada'");
        }

        let mut push = transport
            .server_stream()
            .await
            .expect("GET")
            .expect("a GET stream");
        legacy_call(&transport, 4, "touch", json!({})).await;
        let pushed = tokio::time::timeout(Duration::from_secs(10), push.next())
            .await
            .expect("a push in time")
            .expect("the stream stands");
        let Some(Delivery::Notification(note)) = pushed else {
            panic!("{pushed:?}")
        };
        assert!(note.method.starts_with("notifications/"), "{note:?}");

        // The same session, held by a second transport, is gone once the first ends it.
        let session = transport.snapshot();
        transport.close().await.expect("DELETE");
        let other = LegacyTransport::new(client(&peer.url), ClientFeatures::none());
        other
            .established(Revision::V2025_11_25, session.id().map(str::as_bytes))
            .unwrap();
        let mut params = CallToolParams::new("add");
        params.arguments = Some(add_args(1, 1));
        let lost = other
            .call::<Outcome<CallToolResult>>(
                RequestId::Number(9),
                "tools/call",
                request(9, "tools/call", &params),
                None,
            )
            .await
            .expect_err("the session is gone");
        assert_eq!(lost, Error::SessionLost, "json mode {json_mode}");
    }
}

/// The Python server, 2026-07-28, in both answer modes: `server/discover`, a call with the
/// routing headers, and a listen that delivers a resource change.
#[tokio::test]
async fn python_modern_in_json_and_stream_modes() {
    for json_mode in [true, false] {
        let peer = peers::python(json_mode);
        let transport = ModernTransport::new(client(&peer.url), MODERN);
        let discover = transport
            .call::<DiscoverResult>(
                RequestId::Number(1),
                "server/discover",
                request(1, "server/discover", &DiscoverParams::new(modern_meta())),
                &Routing::default(),
            )
            .await
            .expect("discover is answered");
        let (found, _) = finish(discover).await;
        assert!(
            found.supported_versions.iter().any(|v| v == "2026-07-28"),
            "{found:?}"
        );
        assert!(found.capabilities.resources_subscribe());

        let mut params = CallToolParams::new("add");
        params.arguments = Some(add_args(20, 22));
        params.meta = Some(modern_meta());
        let call = transport
            .call::<Outcome<CallToolResult>>(
                RequestId::Number(2),
                "tools/call",
                request(2, "tools/call", &params),
                &Routing::named("add").unwrap(),
            )
            .await
            .expect("tools/call is answered");
        assert_eq!(text(finish(call).await.0), "42");

        let mut filter = ListenFilter::default();
        filter.tools_list_changed = Some(true);
        filter.resource_subscriptions = Some(vec!["demo://greeting".into()]);
        let listen = ListenParams::new(filter, Some(modern_meta()));
        let mut silence = Routing::default();
        silence.silence = Some(Duration::from_secs(60));
        let mut stream = transport
            .call::<mcp_wire::EmptyResult>(
                RequestId::from("listen-1"),
                "subscriptions/listen",
                request_str("listen-1", "subscriptions/listen", &listen),
                &silence,
            )
            .await
            .expect("the listen is answered");
        let first = next_note(&mut stream).await;
        let ServerNotification::SubscriptionsAcknowledged(ack) = first else {
            panic!("{first:?}")
        };
        assert_eq!(
            ack.notifications.resource_subscriptions.as_deref(),
            Some(&["demo://greeting".to_owned()][..])
        );

        let mut touch = CallToolParams::new("touch");
        touch.arguments = Some(object(json!({})));
        touch.meta = Some(modern_meta());
        let call = transport
            .call::<Outcome<CallToolResult>>(
                RequestId::Number(3),
                "tools/call",
                request(3, "tools/call", &touch),
                &Routing::named("touch").unwrap(),
            )
            .await
            .expect("touch is answered");
        finish(call).await;
        let mut updated = false;
        for _ in 0..2 {
            if let ServerNotification::ResourceUpdated(p) = next_note(&mut stream).await {
                assert_eq!(p.uri, "demo://greeting");
                updated = true;
            }
        }
        assert!(updated, "json mode {json_mode}");
    }
}

fn request_str<P: serde::Serialize>(id: &str, method: &str, params: &P) -> bytes::Bytes {
    let mut body = Vec::new();
    mcp_wire::encode_request(&mut body, &RequestId::from(id), method, Some(params))
        .expect("encodes");
    bytes::Bytes::from(body)
}

async fn next_note<T: DeserializeOwned + std::fmt::Debug>(
    stream: &mut Call<T>,
) -> ServerNotification {
    let next = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a notification in time")
        .expect("the stream stands");
    match next {
        Some(Delivery::Notification(n)) => n.decode().expect("a known notification"),
        other => panic!("expected a notification, got {other:?}"),
    }
}

/// Declines every elicitation.
#[derive(Debug)]
struct Decline;

impl Elicitor for Decline {
    fn elicit(
        &self,
        _: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(async { ElicitResult::new(ElicitAction::Decline) })
    }
}

/// The TypeScript `server-everything`: event streams with priming events, tools across
/// pages, the GET stream, `resources/subscribe` firing, and an elicitation answered.
#[tokio::test]
async fn everything_legacy() {
    let peer = peers::everything();
    let transport = LegacyTransport::new(
        client(&peer.url),
        ClientFeatures::none().with_elicitor(Arc::new(Decline)),
    );
    assert_eq!(handshake(&transport).await, Revision::V2025_11_25);
    let tools = legacy_tools(&transport).await;
    for tool in [
        "echo",
        "trigger-elicitation-request",
        "toggle-subscriber-updates",
    ] {
        assert!(tools.iter().any(|t| t == tool), "{tool} in {tools:?}");
    }
    assert_eq!(
        legacy_call(&transport, 1, "echo", json!({"message": "hi"}))
            .await
            .0,
        "Echo: hi"
    );

    let (answer, _) = legacy_call(&transport, 2, "trigger-elicitation-request", json!({})).await;
    assert!(answer.to_lowercase().contains("decline"), "{answer}");

    // A call read by hand, to keep the last event id of its stream.
    let mut params = CallToolParams::new("echo");
    params.arguments = Some(object(json!({"message": "first"})));
    let posted = transport
        .call::<Outcome<CallToolResult>>(
            RequestId::Number(10),
            "tools/call",
            request(10, "tools/call", &params),
            None,
        )
        .await
        .expect("echo is answered");
    let mut first = posted.call;
    while let Some(delivery) = first.next().await.expect("the stream stands") {
        if matches!(delivery, Delivery::Response(_)) {
            break;
        }
    }
    let from = first
        .last_event_id()
        .expect("server-everything gives event ids")
        .to_owned();
    legacy_call(&transport, 11, "echo", json!({"message": "second"})).await;
    // Resuming after that id, server-everything replays the session's later events, other
    // streams' included (stored priming events come back as `data: {}`, responses to other
    // requests too): the stream passes over what is not for it and stands.
    let mut replayed = transport
        .server_stream_after(Some(&from))
        .await
        .expect("GET")
        .expect("a stream");
    while let Ok(next) = tokio::time::timeout(Duration::from_millis(700), replayed.next()).await {
        match next {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => panic!("the replay broke the stream: {e}"),
        }
    }
    drop(replayed);

    let mut push = transport
        .server_stream()
        .await
        .expect("GET")
        .expect("a GET stream");
    let uri = "demo://resource/static/document/architecture.md";
    let posted = transport
        .call::<mcp_wire::EmptyResult>(
            RequestId::Number(3),
            "resources/subscribe",
            request(3, "resources/subscribe", &SubscribeParams::new(uri)),
            None,
        )
        .await
        .expect("subscribe is answered");
    finish(posted.call).await;
    legacy_call(&transport, 4, "toggle-subscriber-updates", json!({})).await;
    let mut fired = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !fired && tokio::time::Instant::now() < deadline {
        let next = tokio::time::timeout_at(deadline, push.next()).await;
        let Ok(Ok(Some(Delivery::Notification(note)))) = next else {
            break;
        };
        if let Ok(ServerNotification::ResourceUpdated(p)) = note.decode() {
            assert_eq!(p.uri, uri);
            fired = true;
        }
    }
    assert!(
        fired,
        "no notifications/resources/updated on the GET stream in 15 s"
    );
    transport.close().await.expect("DELETE");
}

/// The revision-neutral connection's watch against both peers: the Python server's listen
/// (2026-07-28) and server-everything's GET stream with `resources/subscribe` (2025-11-25).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_against_both_peers() {
    use mcp_negotiate::{Change, Client, Watch};

    let kind = || Client::builder("agentd", "0.1.0").title("interop");
    for json_mode in [true, false] {
        let peer = peers::python(json_mode);
        let dialer = kind()
            .transport(Config::default())
            .dialer(&peer.url)
            .unwrap();
        let connection = Arc::new(Client::connect(dialer).await.expect("connected"));
        assert_eq!(connection.revision(), MODERN);
        let mut watch = Watch::new(connection.clone());
        watch
            .subscribe("demo://greeting")
            .await
            .expect("subscribable");
        // The listen opens inside `watch.next()`, out of sight: a touch made before it is
        // open reaches nobody. So touch until the change is seen (and at most 10 s).
        let toucher = connection.clone();
        let (seen, mut told) = tokio::sync::watch::channel(false);
        let touch = tokio::spawn(async move {
            loop {
                toucher.call_tool_with("touch", None, None, |_| {}).await?;
                let wait = tokio::time::timeout(Duration::from_millis(500), told.changed());
                if wait.await.is_ok() {
                    return Ok::<_, mcp_negotiate::Error>(());
                }
            }
        });
        let change = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match watch.next().await.expect("the watch stands") {
                    Some(Change::ResourceUpdated { uri }) => return uri,
                    Some(_) => {}
                    None => panic!("no pushes"),
                }
            }
        })
        .await
        .expect("a change in time");
        let _ = seen.send(true);
        assert_eq!(change, "demo://greeting", "json mode {json_mode}");
        touch.await.unwrap().expect("touch ran");
    }

    let peer = peers::everything();
    let dialer = kind()
        .transport(Config::default())
        .dialer(&peer.url)
        .unwrap();
    let connection = Arc::new(Client::connect(dialer).await.expect("connected"));
    assert_eq!(connection.revision(), Revision::V2025_11_25);
    let mut watch = Watch::new(connection.clone());
    let uri = "demo://resource/static/document/architecture.md";
    watch.subscribe(uri).await.expect("subscribable");
    connection
        .call_tool_with("toggle-subscriber-updates", None, None, |_| {})
        .await
        .expect("toggled");
    let change = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            if let Some(Change::ResourceUpdated { uri }) =
                watch.next().await.expect("the watch stands")
            {
                return uri;
            }
        }
    })
    .await
    .expect("a change in time");
    assert_eq!(change, uri);
}

/// The Python server through the revision-neutral connection in both eras: probed, it is
/// reached at 2026-07-28; a connection forced to start with `initialize` (as a re-dial of a
/// legacy connection does) is reached at 2025-11-25; both list and call the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_through_the_connection_in_both_eras() {
    use mcp_negotiate::{Client, Start, Step};

    let peer = peers::python(false);
    for (start, revision) in [
        (Start::Probe, MODERN),
        (
            Start::Like(Step::Initialize {
                revision: Revision::V2025_11_25,
            }),
            Revision::V2025_11_25,
        ),
    ] {
        let kind = Client::builder("agentd", "0.1.0").title("interop");
        let dialer = kind.transport(Config::default()).dialer(&peer.url).unwrap();
        let connection = Client::connect_with(dialer, start)
            .await
            .expect("connected");
        assert_eq!(connection.revision(), revision);
        assert!(connection.catalog().tools().iter().any(|t| t.name == "add"));
        let args = object(json!({"a": 40, "b": 2}));
        let result = connection
            .call_tool_with("add", Some(args), None, |_| {})
            .await
            .unwrap();
        assert_eq!(result.content[0].as_text(), Some("42"), "{revision}");
        connection.close().await.unwrap();
    }
}
