//! Changes over a connection, end to end against the reference server: a subscription
//! firing in each era, a listen ended by the server and held again (its URIs read again), a
//! listen refused outright, and a server without a GET stream.

use std::sync::Arc;
use std::time::Duration;

use agentd_tests::reference::{Fault, Options, ReferenceServer, Times};
use mcp_negotiate::listen::ListenEvent;
use mcp_negotiate::{Change, Connection, Dialer, Kind, Watch};
use mcp_transport::driver::Config;

async fn connect(server: &ReferenceServer, legacy: bool) -> Arc<Connection> {
    if legacy {
        server.script("server/discover", Fault::Status(404, None), Times::Once);
    }
    let kind = Kind::Supervisor {
        instance: "watch".into(),
    };
    let dialer = Dialer::new(&server.url(), Config::default(), kind).unwrap();
    Arc::new(Connection::connect(dialer).await.expect("connected"))
}

/// The next change that is not a listen event, within 5 s.
async fn next_change(watch: &mut Watch) -> Option<Change> {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await.expect("the watch stands") {
                Some(Change::Listen(_)) => {}
                other => return other,
            }
        }
    })
    .await
    .expect("a change in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_fires_in_each_era() {
    for legacy in [false, true] {
        let server = Arc::new(ReferenceServer::start(Options::default()).await);
        let connection = connect(&server, legacy).await;
        let mut watch = Watch::new(connection);
        watch.subscribe("demo://counter").await.unwrap();
        let toucher = server.clone();
        let touch = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            toucher.touch("demo://counter").await;
        });
        assert_eq!(
            next_change(&mut watch).await,
            Some(Change::ResourceUpdated {
                uri: "demo://counter".into()
            }),
            "legacy {legacy}"
        );
        touch.await.unwrap();
        let asked = server.methods();
        if legacy {
            assert!(
                asked.contains(&"resources/subscribe".to_owned()),
                "{asked:?}"
            );
        } else {
            assert!(
                asked.contains(&"subscriptions/listen".to_owned()),
                "{asked:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_ended_by_the_server_is_held_again_and_its_uris_read_again() {
    let server = Arc::new(ReferenceServer::start(Options::default()).await);
    let connection = connect(&server, false).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://greeting").await.unwrap();
    let ender = server.clone();
    tokio::spawn(async move {
        // Let the listen be acknowledged, then end it.
        for _ in 0..100 {
            if ender.listens() > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        ender.end_listens().await;
    });
    let mut seen = Vec::new();
    let read_again = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await.expect("the watch stands") {
                Some(Change::ResourceUpdated { uri }) => return uri,
                Some(Change::Listen(event)) => seen.push(event),
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("held again in time");
    assert_eq!(read_again, "demo://greeting");
    assert!(
        seen.iter().any(|e| matches!(
            e,
            ListenEvent::Ended {
                reason: "server",
                ..
            }
        )),
        "{seen:?}"
    );
    assert!(seen.contains(&ListenEvent::Resumed), "{seen:?}");
    let listens = server
        .methods()
        .iter()
        .filter(|m| *m == "subscriptions/listen")
        .count();
    assert_eq!(listens, 2, "opened again once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_refused_outright_is_reported_and_not_asked_for_again() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script(
        "subscriptions/listen",
        Fault::RpcError {
            status: 404,
            code: -32601,
            message: "Method not found".into(),
            data: None,
        },
        Times::Always,
    );
    let connection = connect(&server, false).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://counter").await.unwrap();
    let mut events = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await.expect("the watch stands") {
                Some(Change::Listen(e)) => events.push(e),
                other => return other,
            }
        }
    })
    .await
    .expect("settled in time");
    assert_eq!(end, None, "no pushes from this server");
    assert_eq!(events, [ListenEvent::Refused { code: -32601 }]);
    let listens = server
        .methods()
        .iter()
        .filter(|m| *m == "subscriptions/listen")
        .count();
    assert_eq!(listens, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_without_a_get_stream_pushes_nothing() {
    let mut options = Options::default();
    options.get_stream = false;
    let server = ReferenceServer::start(options).await;
    let connection = connect(&server, true).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://counter").await.unwrap();
    assert_eq!(watch.next().await.unwrap(), None);
}

/// A legacy watch outlives its session: the GET stream closes with the session, the
/// connection is dialed again, the held subscription is asked for again, and changes keep
/// coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_watch_recovers_a_lost_session() {
    let mut options = Options::default();
    options.keepalive = Some(Duration::from_millis(100));
    let server = Arc::new(ReferenceServer::start(options).await);
    let connection = connect(&server, true).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://counter").await.unwrap();
    assert!(watch.open().await.unwrap());
    server.expire_sessions();
    let toucher = server.clone();
    let touch = tokio::spawn(async move {
        // Once the subscription is asked for again on the new session, change the resource.
        for _ in 0..250 {
            let subscribed = toucher
                .methods()
                .iter()
                .filter(|m| *m == "resources/subscribe")
                .count();
            if subscribed == 2 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                toucher.touch("demo://counter").await;
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    });
    assert_eq!(
        next_change(&mut watch).await,
        Some(Change::ResourceUpdated {
            uri: "demo://counter".into()
        })
    );
    assert!(touch.await.unwrap(), "the subscription was asked for again");
    let methods = server.methods();
    let initializes = methods.iter().filter(|m| *m == "initialize").count();
    assert_eq!(initializes, 2, "dialed again: {methods:?}");
}
