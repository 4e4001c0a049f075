//! The MCP Events binding machine against the reference server over a real connection:
//! the listing, a poll from now, occurrences emitted and polled into stream records, a type
//! without replay, an unknown type, and arguments the type's schema refuses.

use std::time::{Duration, Instant};

use mcp_events::Limits;
use mcp_events::binding::{Action, Batch, Binding, Config, Failure, Gap, Listing, Log, Refusal};
use mcp_events::listing::{Lister, Step};
use mcp_negotiate::{Client, Error};
use mcp_reference_server::{Options, ReferenceServer};
use mcp_transport::driver::Config as TransportConfig;
use mcp_wire::events::EventType;
use serde_json::{Value, json};

async fn connect(server: &ReferenceServer) -> Client {
    let kind = Client::builder("my-client", "0.1.0").title("events");
    let dialer = kind
        .transport(TransportConfig::default())
        .dialer(&server.url())
        .unwrap();
    Client::connect(dialer).await.expect("connected")
}

async fn types(connection: &Client, now: Instant) -> Vec<EventType> {
    let mut lister = Lister::new(now, &Limits::default());
    loop {
        let cursor = lister.poll_request(now).expect("a page is due");
        let page = connection.list_events(cursor).await.expect("listed");
        match lister.on_page(page, now) {
            Step::More => {}
            Step::Done(types) => return types,
            other => panic!("{other:?}"),
        }
    }
}

/// Sends what the binding asks for, as the driver does; the batch it hands over, committed.
async fn turn(connection: &Client, b: &mut Binding, now: Instant) -> Batch {
    let Some(Action::Poll(params)) = b.poll_action(now) else {
        panic!("no poll due")
    };
    let answer = connection.poll_events(&params).await.map_err(|e| match e {
        Error::Rpc(e) => Failure::Rpc(e),
        other => Failure::Transport(other.to_string()),
    });
    let batch = b.on_poll(answer, now, 0, u32::MAX / 2);
    b.on_committed(true, now);
    batch
}

fn options() -> Options {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_polls_what_the_server_emits() {
    let server = ReferenceServer::start(options()).await;
    let connection = connect(&server).await;
    assert!(connection.capabilities().events().is_some());
    let start = Instant::now();
    let types = types(&connection, start).await;
    assert_eq!(types.len(), 2);

    let mut config = Config::new("ref", "ticket.created", "tickets");
    config.arguments = json!({"project": "ops"}).as_object().unwrap().clone();
    let mut b = Binding::new(config, None);
    b.on_connection(true, true);
    b.on_listing(Listing::Types(&types), start);
    server.emit("ticket.created", json!({"id": 0}));
    let first = turn(&connection, &mut b, start).await;
    assert!(
        first.records.is_empty(),
        "from now: the earlier one is not replayed"
    );
    assert_eq!(first.cursor.as_deref(), Some("c1"));

    server.emit("ticket.created", json!({"id": 1}));
    server.emit("build.finished", json!({"ok": true}));
    server.emit("ticket.created", json!({"not_an_id": 2}));
    let now = b.poll_timeout().expect("the next poll");
    assert!(
        now - start >= Duration::from_millis(900),
        "nextPollMs 1000 ±10%"
    );
    let second = turn(&connection, &mut b, now).await;
    let records: Vec<Value> = second
        .records
        .iter()
        .map(|r| serde_json::from_slice(&r.bytes).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["id"], "mcp/ref/ticket.created/evt-2");
    assert_eq!(records[0]["data"]["payload"], json!({"id": 1}));
    assert_eq!(records[0]["data"]["schema_ok"], true);
    assert_eq!(
        records[1]["data"]["schema_ok"], false,
        "no id: fails the payload schema"
    );
    assert_eq!(second.cursor.as_deref(), Some("c4"));
    let logged: Vec<Log> = std::iter::from_fn(|| b.poll_log()).collect();
    assert!(logged.contains(&Log::SchemaMismatch {
        event_id: "evt-4".into()
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replay_the_latest_come_every_time_and_are_passed_over() {
    let server = ReferenceServer::start(options()).await;
    let connection = connect(&server).await;
    let now = Instant::now();
    let types = types(&connection, now).await;
    let mut b = Binding::new(Config::new("ref", "build.finished", "builds"), None);
    b.on_connection(true, true);
    b.on_listing(Listing::Types(&types), now);
    server.emit("build.finished", json!({"n": 1}));
    assert_eq!(turn(&connection, &mut b, now).await.records.len(), 1);
    let now = b.poll_timeout().unwrap();
    server.emit("build.finished", json!({"n": 2}));
    let batch = turn(&connection, &mut b, now).await;
    assert_eq!(batch.records.len(), 1, "the first is a duplicate");
    assert_eq!(batch.cursor, None);
    assert_eq!(b.stats().duplicate, 1);
    let logged: Vec<Log> = std::iter::from_fn(|| b.poll_log()).collect();
    assert_eq!(
        logged
            .iter()
            .filter(|l| **l
                == Log::Gap {
                    cause: Gap::NoReplay
                })
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_from_the_listing_and_from_the_server() {
    let server = ReferenceServer::start(options()).await;
    let connection = connect(&server).await;
    let now = Instant::now();
    let types = types(&connection, now).await;

    let mut unknown = Binding::new(Config::new("ref", "ticket.closed", "t"), None);
    unknown.on_connection(true, true);
    unknown.on_listing(Listing::Types(&types), now);
    assert_eq!(unknown.refusal(), Some(Refusal::UnknownEvent));
    assert!(unknown.poll_action(now).is_none(), "nothing is sent");

    let mut config = Config::new("ref", "ticket.created", "t");
    config.arguments = json!({"team": "ops"}).as_object().unwrap().clone();
    let mut bad = Binding::new(config, None);
    bad.on_connection(true, true);
    bad.on_listing(Listing::Types(&types), now);
    assert_eq!(
        bad.refusal(),
        Some(Refusal::InvalidArguments),
        "refused before sending"
    );
    assert!(bad.poll_action(now).is_none(), "nothing is sent");
    let polls = || {
        server
            .methods()
            .iter()
            .filter(|m| *m == "events/poll")
            .count()
    };
    assert_eq!(polls(), 0);

    // The same arguments against a listing without the schema: sent, and the server's
    // -32602 refuses the binding, which sends nothing more.
    let mut lax = types.clone();
    for ty in &mut lax {
        ty.input_schema = None;
    }
    let mut config = Config::new("ref", "ticket.created", "t");
    config.arguments = json!({"team": "ops"}).as_object().unwrap().clone();
    let mut refused = Binding::new(config, None);
    refused.on_connection(true, true);
    refused.on_listing(Listing::Types(&lax), now);
    let Some(Action::Poll(params)) = refused.poll_action(now) else {
        panic!("a poll is due")
    };
    let answer = connection.poll_events(&params).await.map_err(|e| match e {
        Error::Rpc(e) => Failure::Rpc(e),
        other => Failure::Transport(other.to_string()),
    });
    let _ = refused.on_poll(answer, now, 0, u32::MAX / 2);
    assert_eq!(refused.refusal(), Some(Refusal::InvalidArguments));
    assert_eq!(polls(), 1);
    assert!(
        refused
            .poll_action(now + Duration::from_secs(3600))
            .is_none()
    );

    // A server without the extension answers -32601: the listing says so.
    let plain = ReferenceServer::start(Options::default()).await;
    let connection = connect(&plain).await;
    assert!(connection.capabilities().events().is_none());
    match connection.list_events(None).await {
        Err(Error::Rpc(e)) => assert_eq!(e.code, -32601),
        other => panic!("{other:?}"),
    }
}
