//! Changes over a connection, end to end against the reference server: a subscription
//! firing in each era, a listen ended by the server and held again (its URIs read again), a
//! listen refused outright, and a server without a GET stream.

use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use mcp_negotiate::listen::{EndReason, ListenEvent};
use mcp_negotiate::{Change, Client, Error, Recovery, Watch};
use mcp_reference_server::{Fault, Logged, Options, ReferenceServer, Times};

async fn connect(server: &ReferenceServer, legacy: bool) -> Arc<Client> {
    connect_with(server, legacy, Recovery::AtOnce).await
}

async fn connect_with(server: &ReferenceServer, legacy: bool, recovery: Recovery) -> Arc<Client> {
    if legacy {
        server.script("server/discover", Fault::Status(404, None), Times::Once);
    }
    let client = Client::builder("my-client", "0.1.0")
        .title("watch")
        .recovery(recovery)
        .connect(&server.url());
    Arc::new(client.await.expect("connected"))
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
            // Once the change would reach the client: a listen open, or a GET stream attached.
            while toucher.listens() + toucher.reaching("demo://counter") == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
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
        // Once the listen is open, end it: the server sent its acknowledgment first, on the
        // same stream, so the client reads the end after it.
        for _ in 0..100 {
            if ender.listens() > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
                reason: EndReason::Server,
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

/// An owner that fell behind drops the listen: it is ended (`behind`), opened again on the
/// listen schedule, and its URIs are read again. On a legacy connection it changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_the_owner_fell_behind_on_is_held_again_and_its_uris_read_again() {
    let server = Arc::new(ReferenceServer::start(Options::default()).await);
    let connection = connect(&server, false).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://greeting").await.unwrap();
    // Turn the watch until the server holds the listen.
    tokio::time::timeout(Duration::from_secs(5), async {
        while server.listening("demo://greeting") == 0 {
            let _ = tokio::time::timeout(Duration::from_millis(20), watch.next()).await;
        }
    })
    .await
    .expect("a listen open in time");
    watch.fell_behind();
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
    assert_eq!(
        seen.first(),
        Some(&ListenEvent::Ended {
            reason: EndReason::Behind,
            retry_ms: 250,
        }),
        "{seen:?}"
    );
    assert!(seen.contains(&ListenEvent::Resumed), "{seen:?}");
    let listens = server
        .methods()
        .iter()
        .filter(|m| *m == "subscriptions/listen")
        .count();
    assert_eq!(listens, 2, "opened again once");

    let server = Arc::new(ReferenceServer::start(Options::default()).await);
    let connection = connect(&server, true).await;
    let mut watch = Watch::new(connection);
    watch.subscribe("demo://counter").await.unwrap();
    assert!(watch.open().await.unwrap());
    let gets = || {
        let log = server.log();
        log.iter().filter(|l| l.http == http::Method::GET).count()
    };
    assert_eq!(gets(), 1);
    watch.fell_behind();
    let toucher = server.clone();
    let touch = tokio::spawn(async move {
        while toucher.reaching("demo://counter") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        toucher.touch("demo://counter").await;
    });
    assert_eq!(
        next_change(&mut watch).await,
        Some(Change::ResourceUpdated {
            uri: "demo://counter".into()
        }),
        "the GET stream kept"
    );
    touch.await.unwrap();
    assert_eq!(gets(), 1, "not opened again");
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
        for _ in 0..250 {
            // Subscribed on the new session, with its GET stream attached.
            if toucher.reaching("demo://counter") > 0 {
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

/// With [`Recovery::ByOwner`] a lost session is reported, not dialed again: the watch and
/// every request fail with `SessionLost` (nothing sent) and `session_lost` resolves, until
/// the owner re-dials and asks again for its subscription; then changes keep coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_redials_a_lost_session_when_it_chooses() {
    let mut options = Options::default();
    options.keepalive = Some(Duration::from_millis(100));
    let server = Arc::new(ReferenceServer::start(options).await);
    let connection = connect_with(&server, true, Recovery::ByOwner).await;
    let mut watch = Watch::new(connection.clone());
    watch.subscribe("demo://counter").await.unwrap();
    assert!(watch.open().await.unwrap());
    server.expire_sessions();
    let lost = Err(Error::Transport(mcp_transport::Error::SessionLost));
    let next = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await {
                Ok(Some(Change::Listen(_))) => {}
                other => return other,
            }
        }
    });
    assert_eq!(next.await.expect("in time"), lost);
    let posts = server.log().len();
    let call = connection.call_tool_with("echo", None, None, |_| {}).await;
    assert_eq!(
        call.map(|_| ()),
        Err(Error::Transport(mcp_transport::Error::SessionLost))
    );
    assert_eq!(watch.next().await, lost, "no session to subscribe on");
    assert_eq!(
        server.log().len(),
        posts,
        "nothing sent on the lost session: {:?}",
        &server.log()[posts..]
    );
    assert_eq!(
        server
            .methods()
            .iter()
            .filter(|m| *m == "initialize")
            .count(),
        1
    );

    tokio::time::timeout(Duration::from_secs(15), connection.session_lost())
        .await
        .expect("the loss is signalled");
    connection.redial().await.expect("dialed again");
    // The owner asks again for what it holds.
    let held: Vec<String> = watch.held().map(str::to_owned).collect();
    for uri in held {
        watch.subscribe(&uri).await.expect("subscribed again");
    }
    let mut lost = std::pin::pin!(connection.session_lost());
    let now = lost.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(now.is_pending(), "no longer lost");
    let toucher = tokio::spawn({
        let server = server.clone();
        async move {
            // Subscribed on the new session, with its GET stream attached.
            while server.reaching("demo://counter") == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            server.touch("demo://counter").await;
        }
    });
    assert_eq!(
        next_change(&mut watch).await,
        Some(Change::ResourceUpdated {
            uri: "demo://counter".into()
        })
    );
    toucher.await.unwrap();
}

/// `Watch::next` is cancel-safe: calls dropped at every point (a listen being opened, the
/// GET stream being opened, a subscription asked for again) lose nothing, and changes keep
/// coming in each era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_can_be_dropped_at_any_point() {
    for legacy in [false, true] {
        let mut options = Options::default();
        options.keepalive = Some(Duration::from_millis(50));
        let server = Arc::new(ReferenceServer::start(options).await);
        let connection = connect(&server, legacy).await;
        let mut watch = Watch::new(connection);
        watch.subscribe("demo://counter").await.unwrap();
        for round in 0..3 {
            if round == 2 && legacy {
                // A lost session: dialed again and the subscription asked for again, while
                // the calls keep being dropped.
                server.expire_sessions();
            }
            for micros in (0..3000).step_by(37) {
                let _ = tokio::time::timeout(Duration::from_micros(micros), watch.next()).await;
            }
            // Held: a listen open, or a live session subscribed (again, after a loss) with
            // its GET stream attached, so that a change reaches the client.
            let held = || match legacy {
                false => server.listens() > 0,
                true => server.reaching("demo://counter") > 0,
            };
            // The listens and GET streams the server was asked for: a dropped call may have
            // left one half open, which the next call opens again.
            let opens = || {
                let log = server.log();
                let listen = |l: &&Logged| l.method.as_deref() == Some("subscriptions/listen");
                let get = |l: &&Logged| l.http == http::Method::GET;
                log.iter().filter(|l| listen(l) || get(l)).count()
            };
            let touched = tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    // Keep the watch turning until the server holds the subscription, on a
                    // stream the client reads: a whole turn that opened nothing.
                    let before = opens();
                    let _ = tokio::time::timeout(Duration::from_millis(20), watch.next()).await;
                    if held() && opens() == before {
                        break;
                    }
                }
            })
            .await;
            assert!(
                touched.is_ok(),
                "legacy {legacy}, round {round}: not held again"
            );
            server.touch("demo://counter").await;
            let mut seen = Vec::new();
            let got = tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    match watch.next().await.expect("the watch stands") {
                        Some(Change::Listen(e)) => seen.push(e),
                        other => return other,
                    }
                }
            })
            .await;
            assert_eq!(
                got,
                Ok(Some(Change::ResourceUpdated {
                    uri: "demo://counter".into()
                })),
                "legacy {legacy}, round {round}: {seen:?} {:?} listens {}",
                server.methods(),
                server.listens()
            );
        }
    }
}
