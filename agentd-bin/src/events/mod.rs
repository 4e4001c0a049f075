//! MCP Events in the daemon: the configured bindings and the runtime subscriptions, on a
//! runtime of four worker threads of its own (never the supervisor's): a task per server
//! lists its types over the server's held connection, and a task per binding sends its
//! requests and takes its deliveries. The pure machines are `mcp_events`' (`Lister`,
//! `Binding`, within the [`limits`] of the reference) and `agentd_tools`' (`Registry`); this
//! module sends what they ask for (each `events/*` request bounded at 30 s), commits what
//! they hand over to the store ([`crate::store`], `<store.path>/agentd.sqlite3`), and turns
//! what they report into log lines and metrics ([`report`]). The library calls of runtime
//! subscriptions are [`subscriptions`]'s.
//!
//! A binding can take webhook deliveries when `webhooks.url` is set (or, without it, when the
//! listener is on loopback: `http://<its address>`): its callback is
//! `<webhooks.url>/hooks/_mcp/<key>`, its secret made once from the CSPRNG and kept in the
//! store; the receiver ([`hooks`](crate::events::hooks)) hands each checked delivery to the binding's
//! task, which takes it as the binding says and answers once the store has it.

pub(crate) mod hooks;
mod report;
mod subscriptions;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcp_events::Limits;
use mcp_events::binding::{
    Action, Batch, Binding, Delivery, Failure, Listing, Pause, Record, Stats,
};
use mcp_events::listing::{Lister, Step};
use mcp_negotiate::{Client, Error};
use mcp_wire::events::{DeliveryMode, UnsubscribeEventsParams};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use self::report::{count, report};
pub(crate) use self::subscriptions::Control;
use crate::clock::{now, random, wall_ms};
use crate::config::Config;
use crate::store::Store;
use crate::telemetry::catalogue::events as logs;
use crate::telemetry::metrics::Metrics;
use hooks::{Answer, Deliveries, Routes};

/// Each `events/*` request is bounded at this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `events/*` requests run on this many worker threads of their own.
const WORKER_THREADS: usize = 4;

/// The bounds and schedules of MCP Events: the reference's, an occurrence (or a webhook
/// body) of 256 KiB and at most `store.max_value_bytes`.
fn limits(config: &Config) -> Limits {
    let mut limits = Limits::default();
    limits.occurrence_max = limits.occurrence_max.min(config.max_value_bytes);
    limits
}

/// MCP Events at work: its runtime (built once, kept until exit), its store, and the
/// bindings and runtime subscriptions of the configuration in force.
#[derive(Debug)]
pub(crate) struct Events {
    runtime: tokio::runtime::Runtime,
    control: Control,
}

/// What every task shares.
#[derive(Debug, Clone)]
struct Ctx {
    instance: Arc<str>,
    metrics: Arc<Metrics>,
    store: Store,
    limits: Limits,
}

/// A binding handed to its server's task: the machine, its deliveries, the signal that ends
/// it (a runtime subscription released), and the one that stops it (a reload, the exit).
type Armed = (
    Binding,
    Deliveries,
    mpsc::Receiver<oneshot::Sender<()>>,
    CancellationToken,
);

/// A server's connection, as its holder hands it on: `None` until the first dial answers,
/// marked changed at every re-dial.
type Connections = watch::Receiver<Option<Arc<Client>>>;

/// What MCP Events reads of a held server.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    /// Its connection: `None` until the first dial answers, marked changed at every re-dial.
    pub(crate) connections: Connections,
    /// Bumped at each `notifications/events/list_changed` the server sends.
    pub(crate) changed: watch::Receiver<u64>,
}

/// What the server's latest listing came to, once there is one.
type Listings = watch::Receiver<Option<Arc<Listed>>>;

impl Events {
    /// Whether `config` gives MCP Events anything to do: bindings or grants.
    pub(crate) fn wanted(config: &Config) -> bool {
        !config.bindings.is_empty() || !config.grants.is_empty()
    }

    /// Opens the store, builds the runtime, and starts the bindings of `config` and the
    /// runtime subscriptions kept in the store, on the connections of `servers`. Fails when
    /// the store cannot be opened or a binding cannot be read from it.
    ///
    /// Not to be dropped before it resolves: the runtime it builds must not be dropped on an
    /// async thread.
    pub(crate) async fn start(
        config: &Config,
        listening: Option<SocketAddr>,
        servers: &BTreeMap<String, Feed>,
        metrics: Arc<Metrics>,
        routes: &Routes,
    ) -> Result<Self, String> {
        routes.write().unwrap_or_else(|e| e.into_inner()).clear();
        let store = Store::open(&config.store_path)
            .await
            .map_err(|e| e.to_string())?;
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("agentd-events")
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                store.close().await;
                return Err(e.to_string());
            }
        };
        let ctx = Ctx {
            instance: config.instance.as_str().into(),
            metrics,
            store: store.clone(),
            limits: limits(config),
        };
        let control = Control::new(ctx, runtime.handle().clone(), routes.clone());
        if let Err(e) = control.start(config, listening, servers).await {
            control.close().await;
            // Not dropped here: the caller may be on an async thread.
            runtime.shutdown_background();
            store.close().await;
            return Err(e);
        }
        runtime.spawn(control.clone().expire());
        Ok(Self { runtime, control })
    }

    /// Takes a new configuration: the bindings kept run on, the ones removed stop and are
    /// forgotten with their records (`mcp.events.removed`, reason `reload`), the new ones
    /// start; a server dialed afresh has its bindings started again on its new connection;
    /// runtime subscriptions whose server or grant is gone, or that a configured binding now
    /// is, end. `store.path` stays the one MCP Events started with.
    pub(crate) async fn reload(
        &self,
        config: &Config,
        listening: Option<SocketAddr>,
        servers: &BTreeMap<String, Feed>,
    ) {
        self.control.reload(config, listening, servers).await;
    }

    /// The library calls of runtime subscriptions, for the tools.
    pub(crate) fn control(&self) -> Control {
        self.control.clone()
    }

    /// Stops every binding (an index not kept yet is written first) and the runtime, then
    /// closes the store. Subscriptions are not released: the next start goes on from the
    /// stored cursors. A commit under way finishes (it is one transaction either way).
    pub(crate) async fn stop(self) {
        let store = self.control.ctx().store;
        self.control.close().await;
        self.runtime.shutdown_background();
        store.close().await;
    }
}

/// What listing a server's types last came to, shared with its bindings.
#[derive(Debug)]
enum Listed {
    Types(Vec<mcp_wire::events::EventType>),
    MethodNotFound,
    TooLarge,
}

impl Listed {
    fn as_listing(&self) -> Listing<'_> {
        match self {
            Self::Types(types) => Listing::Types(types),
            Self::MethodNotFound => Listing::MethodNotFound,
            Self::TooLarge => Listing::TooLarge,
        }
    }
}

/// One server: a task per binding handed to it, so that a slow request of one binding holds
/// up no other, and its types listed (and listed again when asked) once it has one.
async fn serve(
    ctx: Ctx,
    server: String,
    Feed {
        mut connections,
        mut changed,
    }: Feed,
    mut armed: mpsc::UnboundedReceiver<Armed>,
    mut reloads: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    let connection = tokio::select! {
        c = connections.wait_for(Option::is_some) => match c {
            Ok(c) => c.clone().expect("waited for a connection"),
            Err(_) => return,
        },
        () = stop.cancelled() => return,
    };
    let (mut modern, mut capability) = facts(&connection);
    let (listed, listings) = watch::channel::<Option<Arc<Listed>>>(None);
    let (relist, mut relists) = mpsc::channel::<()>(16);
    // Listed from the first binding on.
    let mut lister: Option<Lister> = None;
    loop {
        let due = lister
            .as_mut()
            .filter(|_| modern && capability)
            .and_then(|l| Some((l.poll_request(now())?, l)));
        if let Some((cursor, lister)) = due {
            match list_pages(&ctx, &server, &connection, lister, cursor).await {
                Ok(outcome) => {
                    if let Listed::Types(types) = &outcome {
                        logs::listed(&ctx.instance, &server, types.len());
                    }
                    listed.send_replace(Some(Arc::new(outcome)));
                }
                Err(failure) => {
                    let exhausted = matches!(&failure, Failure::Rpc(e)
                        if e.code == mcp_wire::events::code::EVENTS_RESOURCE_EXHAUSTED);
                    let wait = lister.on_failure(now(), exhausted, random());
                    let retry_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                    logs::list_fail(&ctx.instance, &server, &failure.to_string(), retry_ms);
                }
            }
            continue;
        }
        let next = lister
            .as_ref()
            .and_then(Lister::poll_timeout)
            .filter(|_| modern && capability);
        tokio::select! {
            () = sleep_until(next.map_or_else(far, Instant::from_std)) => {}
            Some((b, hooks, end, stopped)) = armed.recv() => {
                let on = On {
                    ctx: ctx.clone(),
                    server: server.clone(),
                    connection: connection.clone(),
                    relist: relist.clone(),
                };
                tokio::spawn(run_binding(
                    on,
                    b,
                    (hooks, end),
                    (connections.clone(), listings.clone(), reloads.clone()),
                    stopped,
                ));
                lister.get_or_insert_with(|| Lister::new(now(), &ctx.limits));
            }
            // A binding's type went away or changed in place.
            Some(()) = relists.recv() => again(&mut lister),
            // The server said its types changed (`mcp.events.list_changed`).
            Ok(()) = changed.changed() => again(&mut lister),
            // The session was lost and dialed again: what it reached is asked afresh.
            Ok(()) = connections.changed() => {
                (modern, capability) = facts(&connection);
                again(&mut lister);
            }
            // A reload lists again.
            Ok(()) = reloads.changed() => again(&mut lister),
            () = stop.cancelled() => return,
        }
    }
}

/// Lists `server`'s types over `connection` from page `cursor` to the end, each request
/// counted and the clock read after each answer: what the listing came to, or the failure
/// that cut it short (for the caller to tell `lister`).
async fn list_pages(
    ctx: &Ctx,
    server: &str,
    connection: &Client,
    lister: &mut Lister,
    mut cursor: Option<mcp_wire::Cursor>,
) -> Result<Listed, Failure> {
    loop {
        let page = request(connection.list_events(cursor)).await;
        count(ctx, server, mcp_wire::method::EVENTS_LIST, &page);
        let now = now();
        match page {
            Ok(page) => match lister.on_page(page, now) {
                Step::More => {}
                Step::Done(types) => return Ok(Listed::Types(types)),
                _ => return Ok(Listed::TooLarge),
            },
            Err(Failure::Rpc(e)) if e.code == mcp_wire::code::METHOD_NOT_FOUND => {
                lister.hold(now);
                return Ok(Listed::MethodNotFound);
            }
            Err(failure) => return Err(failure),
        }
        cursor = lister
            .poll_request(now)
            .ok_or_else(|| Failure::Transport("the listing stopped short".to_owned()))?;
    }
}

/// Whether `connection` reached 2026-07-28, and whether its server declares the events
/// extension.
fn facts(connection: &Client) -> (bool, bool) {
    (
        connection.revision().era() == mcp_wire::Era::Modern,
        connection.capabilities().events().is_some(),
    )
}

fn again(lister: &mut Option<Lister>) {
    if let Some(lister) = lister {
        lister.again(now());
    }
}

/// What a binding's task works with.
struct On {
    ctx: Ctx,
    server: String,
    connection: Arc<Client>,
    relist: mpsc::Sender<()>,
}

/// One binding: what its machine asks for, sent; what the server lists, told; its webhook
/// deliveries, taken; until it is ended (its webhook subscription released) or stopped.
async fn run_binding(
    on: On,
    mut b: Binding,
    (mut deliveries, mut end): (Deliveries, mpsc::Receiver<oneshot::Sender<()>>),
    (mut connections, mut listings, mut reloads): (Connections, Listings, watch::Receiver<u64>),
    stop: CancellationToken,
) {
    let (ctx, server, connection) = (&on.ctx, on.server.as_str(), &on.connection);
    let (mut seen, mut evicted) = (Stats::default(), 0);
    // Given back when the task ends, however it ends (stopped tasks are dropped).
    let mut active = ctx.metrics.live();
    let (modern, capability) = facts(connection);
    b.on_connection(modern, capability);
    loop {
        while let Some(action) = b.poll_action(now()) {
            match action {
                Action::Poll(params) => {
                    let answer = request(connection.poll_events(&params)).await;
                    count(ctx, server, mcp_wire::method::EVENTS_POLL, &answer);
                    let batch = b.on_poll(answer, now(), wall_ms(), random());
                    // A store that fails pauses the binding (`store_degraded`).
                    let committed = commit(ctx, &b, Arc::new(batch)).await;
                    b.on_committed(committed.is_ok(), now());
                    b.passed_over(committed.unwrap_or(0));
                }
                Action::Subscribe(params) => {
                    let answer = request(connection.subscribe_events(&params)).await;
                    count(ctx, server, mcp_wire::method::EVENTS_SUBSCRIBE, &answer);
                    let batch = b.on_subscribed(answer, now(), wall_ms(), random());
                    let committed = commit(ctx, &b, Arc::new(batch)).await.is_ok();
                    b.on_committed(committed, now());
                    save_subscription(ctx, &b).await;
                }
                Action::Relist => {
                    let _ = on.relist.try_send(());
                }
                _ => {}
            }
            report(ctx, server, &mut b, &mut seen, &mut evicted);
        }
        report(ctx, server, &mut b, &mut seen, &mut evicted);
        active.set(live(&b));
        let next = b.poll_timeout();
        tokio::select! {
            () = sleep_until(next.map_or_else(far, Instant::from_std)) => {}
            Ok(()) = listings.changed() => {
                let listed = listings.borrow_and_update().clone();
                if let Some(listed) = listed {
                    b.on_listing(listed.as_listing(), now());
                }
            }
            // Dialed again, or reloaded: decided afresh (the listing that follows arms it).
            Ok(()) = connections.changed() => afresh(&mut b, connection, &mut listings),
            Ok(()) = reloads.changed() => afresh(&mut b, connection, &mut listings),
            Some(hook) = deliveries.hooks.recv() => {
                // A delivery for another subscription (an old one, still delivering) is
                // gone: the server stops sending it.
                let answer = match b.subscription() {
                    Some(ours) if ours != hook.subscription => Answer::Gone,
                    _ => deliver(ctx, &mut b, hook.body, &hook.webhook_id).await,
                };
                let _ = hook.answer.send(answer);
                pressure(&mut b, &deliveries);
            }
            () = deliveries.pressure.woken() => pressure(&mut b, &deliveries),
            Some(done) = end.recv() => {
                active.set(None);
                release(&on, &b).await;
                forget(ctx, &b.config().key).await;
                let _ = done.send(());
                return;
            }
            () = stop.cancelled() => return,
        }
    }
}

/// The connection was dialed again, or the configuration reloaded: `b` decides afresh (a
/// refusal or a mode left is lifted) on the listing at hand, which may have come first; the
/// server's task lists again, and that listing follows.
fn afresh(b: &mut Binding, connection: &Client, listings: &mut Listings) {
    let (modern, capability) = facts(connection);
    b.on_connection(modern, capability);
    let listed = listings.borrow_and_update().clone();
    if let Some(listed) = listed {
        b.on_listing(listed.as_listing(), now());
    }
}

/// A delivery met the binding's queue full: paused for pressure until the queue has drained.
fn pressure(b: &mut Binding, deliveries: &Deliveries) {
    if deliveries.pressure.is_set() {
        b.on_pressure(true);
        if deliveries.hooks.is_empty() {
            deliveries.pressure.clear();
            b.on_pressure(false);
        }
    }
}

/// The mode `b` is live in (`agent_subscriptions_active`), if it is: armed, and neither
/// refused nor paused for a refusal.
fn live(b: &Binding) -> Option<DeliveryMode> {
    b.mode()
        .filter(|_| b.refusal().is_none() && b.paused() != Some(Pause::Refusal))
}

/// Ends the server's webhook subscription of an ended binding, if it has one (its route is
/// gone already: a delivery meanwhile is answered 410).
async fn release(on: &On, b: &Binding) {
    let (Some(_), Some(callback)) = (b.subscription(), &b.config().callback) else {
        return;
    };
    let c = b.config();
    let params = UnsubscribeEventsParams::new(&c.event, c.arguments.clone(), &callback.url);
    let answer = request(on.connection.unsubscribe_events(&params)).await;
    count(
        &on.ctx,
        &on.server,
        mcp_wire::method::EVENTS_UNSUBSCRIBE,
        &answer,
    );
}

/// Forgets an ended binding's cursor, secret and subscription id; its records stay.
async fn forget(ctx: &Ctx, key: &str) {
    let _ = ctx.store.forget(key).await;
}

/// Keeps the webhook subscription's id with its secret.
async fn save_subscription(ctx: &Ctx, b: &Binding) {
    if let (Some(id), Some(callback)) = (b.subscription(), &b.config().callback) {
        let key = &b.config().key;
        let _ = ctx
            .store
            .save_webhook(key, callback.secret.as_str(), Some(id))
            .await;
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// A request bounded at 30 s, its failure in the machine's words.
async fn request<T>(call: impl Future<Output = Result<T, Error>>) -> Result<T, Failure> {
    match timeout(REQUEST_TIMEOUT, call).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(Error::Rpc(e))) => Err(Failure::Rpc(e)),
        Ok(Err(Error::Transport(mcp_transport::Error::Reply(
            mcp_transport::reply::Failure::Status { status, .. },
        )))) => Err(Failure::Status(status)),
        Ok(Err(e)) => Err(Failure::Transport(e.to_string())),
    }
}

/// Takes one checked delivery: committed when it is new, and answered by what became of it.
async fn deliver(
    ctx: &Ctx,
    b: &mut Binding,
    body: mcp_wire::events::WebhookBody,
    webhook_id: &str,
) -> Answer {
    match b.on_delivery(body, webhook_id, now(), wall_ms(), random()) {
        Delivery::Commit(batch) => {
            // Shared with the store's thread: the batch is not copied.
            let batch = Arc::new(batch);
            let committed = commit(ctx, b, batch.clone()).await;
            b.on_delivered(&batch, committed.is_ok(), now());
            match committed {
                Ok(passed_over) => {
                    b.passed_over(passed_over);
                    Answer::Taken
                }
                Err(err) => {
                    logs::hook_unsaved(&ctx.instance, &err);
                    Answer::NotNow
                }
            }
        }
        Delivery::Taken => Answer::Taken,
        Delivery::Gone => Answer::Gone,
        Delivery::Busy { retry_after } => Answer::Busy(retry_after),
        _ => Answer::NotNow,
    }
}

/// Commits a batch in one transaction, on the store's thread: how many of its records the
/// store passed over (its stream held them already), or why it did not take it. Once the
/// store has appended some, `agent_mcp_event_lag_ms` is the time now minus the server's
/// timestamp of the last.
async fn commit(ctx: &Ctx, b: &Binding, batch: Arc<Batch>) -> Result<usize, String> {
    let records = batch.records.len();
    let occurred = batch.records.last().and_then(occurred_ms);
    let c = b.config();
    match ctx.store.commit(&c.key, &c.into, batch).await {
        Ok(appended) => {
            if let Some(occurred) = occurred.filter(|_| appended > 0) {
                let lag = wall_ms().saturating_sub(occurred);
                ctx.metrics.lag((&c.server, &c.event), lag);
            }
            Ok(records.saturating_sub(appended))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The server's timestamp of a record's occurrence (its Stream event's `data.occurred_at`),
/// in Unix milliseconds.
fn occurred_ms(record: &Record) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Event {
        data: Data,
    }
    #[derive(serde::Deserialize)]
    struct Data {
        occurred_at: String,
    }
    let event: Event = serde_json::from_slice(&record.bytes).ok()?;
    mcp_events::time::unix_millis(&event.data.occurred_at)
}

/// `agentd events tail`: every record of `stream`, oldest first, one JSON line each.
pub(crate) fn tail(config: &Config, stream: &str) -> Result<usize, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let store = Store::open(&config.store_path)
            .await
            .map_err(|e| e.to_string())?;
        let mut after = 0;
        let mut printed = 0;
        loop {
            let entries = store
                .read(stream, after, 1000)
                .await
                .map_err(|e| e.to_string())?;
            let Some(last) = entries.last() else {
                store.close().await;
                return Ok(printed);
            };
            after = last.seq;
            for entry in &entries {
                crate::say!("{}", String::from_utf8_lossy(&entry.bytes));
            }
            printed += entries.len();
        }
    })
}

#[cfg(test)]
mod tests {
    use mcp_events::binding::{Config as BindingConfig, Log};
    use mcp_reference_server::{Options, ReferenceServer};

    use super::*;

    /// A context of instance `t` with default limits and a store in a directory of its own
    /// (kept while the directory is).
    async fn test_ctx() -> (tempfile::TempDir, Ctx) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx {
            instance: "t".into(),
            metrics: Arc::default(),
            store: Store::open(dir.path()).await.unwrap(),
            limits: Limits::default(),
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
        let (_dir, ctx) = test_ctx().await;
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
        arm.send((b, deliveries, end, stopped.child_token()))
            .unwrap();
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

        let (_dir, ctx) = test_ctx().await;
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
        assert_eq!(commit(&ctx, &b, Arc::new(batch)).await, Ok(0));
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
}
