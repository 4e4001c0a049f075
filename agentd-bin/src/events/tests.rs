//! The drivers of MCP Events, against the reference server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mcp_events::Limits;
use mcp_events::binding::{Action, Binding, Config as BindingConfig, Failure, Listing, Log, Pause};
use mcp_negotiate::Error;
use mcp_reference_server::{Options, ReferenceServer};
use mcp_wire::events::DeliveryMode;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::binding::{commit, live, pressure};
use super::server::serve;
use super::shared::{Ends, REQUEST_TIMEOUT, Report, Reports, Shared, request};
use super::*;
use crate::clock::{now, wall_ms};
use crate::store::Store;

/// A context of instance `t` with default limits and a store in a directory of its own
/// (kept while the directory is).
async fn test_shared() -> (tempfile::TempDir, Shared) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = Shared {
        instance: "t".into(),
        metrics: Arc::default(),
        store: Store::open(dir.path(), crate::store::Limits::default())
            .await
            .unwrap(),
        limits: Limits::default(),
        reports: Reports::default(),
    };
    (dir, ctx)
}

/// A delivery that met the queue full pauses intake for pressure; it resumes once the
/// queue has drained, and not before.
#[test]
fn pressure_is_logged_until_the_queue_drains() {
    let ((sender, route), deliveries) = hooks::queue();
    let mut b = Binding::new(BindingConfig::new("ref", "ticket.created", "t"), None);
    let body = mcp_wire::events::WebhookBody::decode(
        br#"{"eventId":"e","name":"t","timestamp":"2026-11-30T06:00:00Z","data":{}}"#,
    )
    .unwrap();
    let (answer, _answered) = oneshot::channel();
    let hook = hooks::Hook {
        webhook_id: "msg_1".into(),
        subscription: "sub".into(),
        body,
        answer,
    };
    sender.try_send(hook).unwrap();
    route.met();
    pressure(&mut b, &deliveries);
    let paused = |log: Option<Log>| {
        matches!(
            log,
            Some(Log::Paused {
                cause: Pause::Pressure,
                ..
            })
        )
    };
    assert!(paused(b.poll_log()), "paused while deliveries wait");
    assert_eq!(b.poll_log(), None);
    let mut deliveries = deliveries;
    drop(deliveries.hooks.try_recv().unwrap());
    pressure(&mut b, &deliveries);
    assert_eq!(
        b.poll_log(),
        Some(Log::Resumed {
            cause: Pause::Pressure
        })
    );
    assert!(!deliveries.pressure.is_set());
    pressure(&mut b, &deliveries);
    assert_eq!(b.poll_log(), None, "logged once each way");
}

/// Waits, at most 10 s, for `what`.
async fn until(what: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !what() {
        assert!(Instant::now() < deadline, "not within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A connection dialed again (its watch marked changed, as a server's actor does after a re-dial)
/// is decided afresh: the server's types are listed again, and the binding goes on
/// polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dialed_again_is_listed_again_and_the_binding_goes_on() {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options.poll_ms = 1000;
    let server = ReferenceServer::start(options).await;
    let config = crate::config::Server {
        name: "ref".into(),
        url: server.url(),
        timeout: Duration::from_secs(5),
        headers: Vec::new(),
        tags: BTreeMap::new(),
    };
    let connection = crate::dial::connect("t", &config, mcp_negotiate::Recovery::ByOwner)
        .await
        .expect("connected");
    let (_dir, ctx) = test_shared().await;
    let (connected, connections) = watch::channel(Some(Arc::new(connection)));
    let (_changed, changes) = watch::channel(0);
    let (arm, armed) = mpsc::unbounded_channel();
    let stopped = CancellationToken::new();
    tokio::spawn(serve(
        ctx,
        "ref".into(),
        Feed {
            connections,
            changed: changes,
        },
        armed,
        watch::channel(0).1,
        stopped.clone(),
    ));
    let b = Binding::new(BindingConfig::new("ref", "ticket.created", "t"), None);
    let (_queue, deliveries) = hooks::queue();
    let (_end, end) = mpsc::channel(1);
    let (gone, _gone) = oneshot::channel();
    let ends = Ends {
        end,
        stop: stopped.child_token(),
        gone,
    };
    arm.send((b, deliveries, ends)).unwrap();
    let count = |method: &str| server.methods().iter().filter(|m| *m == method).count();
    until(|| count("events/poll") >= 1).await;
    assert_eq!(count("events/list"), 1);
    connected.send_modify(|_| {});
    until(|| count("events/list") == 2).await;
    let polled = count("events/poll");
    until(|| count("events/poll") > polled).await;
}

/// A binding counts as live (`agent_subscriptions_active`) in its mode once armed, and
/// not while it is refused, nor while it is paused for a refusal.
#[test]
fn only_an_armed_binding_neither_refused_nor_paused_for_a_refusal_is_live() {
    use mcp_events::binding::Callback;
    use mcp_wire::events::EventType;

    let mut now = now();
    let poll = [EventType::new("ticket.created", &[DeliveryMode::Poll])];
    let mut b = Binding::new(BindingConfig::new("ref", "ticket.created", "t"), None);
    b.on_connection(true, true);
    assert_eq!(live(&b), None, "not armed yet");
    b.on_listing(Listing::Types(&[]), now);
    assert!(b.refusal().is_some());
    assert_eq!(live(&b), None, "refused: the server has no such type");
    b.on_listing(Listing::Types(&poll), now);
    assert_eq!(live(&b), Some(DeliveryMode::Poll));

    let mut config = BindingConfig::new("ref", "ticket.created", "t");
    config.delivery = vec![DeliveryMode::Webhook];
    config.callback = Some(Callback {
        url: "https://agentd.example/hooks/_mcp/b1".into(),
        secret: mcp_events::webhook::Secret::from_bytes(&[9; 32]).unwrap(),
    });
    let webhook = [EventType::new("ticket.created", &[DeliveryMode::Webhook])];
    let mut b = Binding::new(config, None);
    b.on_connection(true, true);
    b.on_listing(Listing::Types(&webhook), now);
    assert_eq!(live(&b), Some(DeliveryMode::Webhook));
    // A refusal that may pass, answered to every subscribe for 5 minutes.
    while b.paused().is_none() {
        assert!(matches!(b.poll_action(now), Some(Action::Subscribe(_))));
        let busy = mcp_wire::ErrorObject::new(-32603, "busy");
        let _ = b.on_subscribed(Err(Failure::Rpc(busy)), now, wall_ms(), 0);
        assert_eq!(b.refusal(), None);
        if let Some(next) = b.poll_timeout() {
            assert_eq!(live(&b), Some(DeliveryMode::Webhook), "retried, still live");
            now = next;
        }
    }
    assert_eq!(b.paused(), Some(Pause::Refusal));
    assert_eq!(live(&b), None, "paused for a refusal");
    b.on_listing(Listing::Types(&webhook), now);
    assert_eq!(
        live(&b),
        Some(DeliveryMode::Webhook),
        "listed again: armed again"
    );
}

/// `agent_mcp_event_lag_ms` is set once the store has the batch, to the time of the
/// commit minus the server's timestamp: not when the occurrence was received.
#[tokio::test]
async fn the_lag_is_the_commit_time_minus_the_servers_timestamp() {
    use mcp_wire::events::{EventOccurrence, EventType, PollResult};

    let (_dir, ctx) = test_shared().await;
    let lag = || {
        let text = ctx.metrics.render();
        let series = "agent_mcp_event_lag_ms{server=\"ref\",event=\"ticket.created\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .map(|v| v.parse::<i64>().unwrap())
    };
    let now = now();
    let mut b = Binding::new(BindingConfig::new("ref", "ticket.created", "t"), None);
    b.on_connection(true, true);
    let types = [EventType::new("ticket.created", &[DeliveryMode::Poll])];
    b.on_listing(Listing::Types(&types), now);
    assert!(matches!(b.poll_action(now), Some(Action::Poll(_))));
    // 2020-01-01T00:00:00Z, received (as the binding is told) 1.5 s later.
    let stamped = 1_577_836_800_000;
    let data = mcp_wire::RawJson::from_value(&serde_json::json!({"id": 1})).unwrap();
    let o = EventOccurrence::new("evt-1", "ticket.created", "2020-01-01T00:00:00Z", data);
    let page = PollResult::new(vec![o], Some("c1".into()));
    let batch = b.on_poll(Ok(page), now, stamped + 1500, 0);
    assert_eq!(batch.records.len(), 1);
    assert_eq!(lag(), None, "received, not committed yet");
    let before = wall_ms();
    assert_eq!(commit(&ctx, &b, Arc::new(batch)).await.ok(), Some(0));
    let after = wall_ms();
    let lag = lag().expect("set at commit");
    assert!(
        (before - stamped..=after - stamped).contains(&lag),
        "{lag} is not the commit time minus the timestamp"
    );
}

/// Every `events/*` request is bounded at 30 s: a server that never answers is a
/// timeout at the bound, and not a moment before.
#[tokio::test(start_paused = true)]
async fn a_request_is_bounded_at_30_seconds() {
    let start = Instant::now();
    let never = std::future::pending::<Result<(), Error>>();
    assert_eq!(request(never).await, Err(Failure::Timeout));
    assert_eq!(Instant::now() - start, REQUEST_TIMEOUT);
    let quick = async {
        tokio::time::sleep(REQUEST_TIMEOUT - Duration::from_millis(1)).await;
        Ok::<_, Error>(7)
    };
    assert_eq!(request(quick).await, Ok(7));
}

/// MCP Events tells the supervisor each change of the store's health once: a failed commit,
/// then the next that is taken.
#[test]
fn the_store_s_health_is_reported_once_per_change() {
    let (to, mut reported) = mpsc::unbounded_channel();
    let reports = Reports::new(to);
    for ok in [true, false, false, true, true] {
        reports.committed(ok);
    }
    let got: Vec<Report> = std::iter::from_fn(|| reported.try_recv().ok()).collect();
    assert_eq!(
        got,
        [
            Report::Store { degraded: true },
            Report::Store { degraded: false }
        ]
    );
}
