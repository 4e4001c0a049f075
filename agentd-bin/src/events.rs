//! MCP Events in the daemon: the configured bindings, on a runtime of four worker threads of
//! its own (never the supervisor's): a task per server lists its types over the server's
//! held connection, and a task per binding sends its requests and takes its deliveries. The
//! pure machines are `mcp_events`' (`Lister`, `Binding`); this file sends what they ask for
//! (each `events/*` request bounded at 30 s), commits what they hand over to the store, and
//! turns what they report into log lines and metrics.
//!
//! A binding can take webhook deliveries when `webhooks.url` is set (or, without it, when the
//! listener is on loopback: `http://<its address>`): its callback is
//! `<webhooks.url>/hooks/_mcp/<key>`, its secret made once from the CSPRNG and kept in the
//! store; the receiver ([`hooks`](crate::hooks)) hands each checked delivery to the server's
//! task, which takes it as the binding says and answers once the store has it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use mcp_events::binding::{
    Action, Batch, Binding, Callback, Config as BindingConfig, Delivery, Failure, Listing, Log,
    Rate, Stats, key_of,
};
use mcp_events::limits::{REQUEST_TIMEOUT, WORKER_THREADS};
use mcp_events::listing::{Lister, Step};
use mcp_events::store::Store;
use mcp_events::webhook::Secret;
use mcp_negotiate::{Connection, Error};
use mcp_wire::events::DeliveryMode;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until, timeout};

use crate::config::Config;
use crate::held::Held;
use crate::hooks::{Answer, Hook, PREFIX, Route, Routes};
use crate::log::{Level, event};
use crate::metrics::{Metric, Metrics};
use mcp_events::sqlite::Sqlite;

/// The bindings at work.
#[derive(Debug)]
pub(crate) struct Events {
    runtime: tokio::runtime::Runtime,
    stop: watch::Sender<bool>,
    ctx: Ctx,
}

/// What every server's task shares.
#[derive(Debug, Clone)]
struct Ctx {
    instance: Arc<str>,
    metrics: Arc<Metrics>,
    store: Arc<Mutex<Sqlite>>,
}

impl Events {
    /// Starts the bindings of `config` on the connections of `held`; `None` when there are
    /// none. Fails when the store cannot be opened.
    pub(crate) fn start(
        config: &Config,
        listening: Option<SocketAddr>,
        held: &BTreeMap<String, Held>,
        metrics: Arc<Metrics>,
        routes: &Routes,
    ) -> Result<Option<Self>, String> {
        if config.bindings.is_empty() {
            routes.write().unwrap_or_else(|e| e.into_inner()).clear();
            return Ok(None);
        }
        let mut store = Sqlite::open(&config.store_path).map_err(|e| e.to_string())?;
        // Without `webhooks.url`, a listener on loopback is its own public address: servers
        // on the same host can deliver to it.
        let hooks_base = config.hooks_url.clone().or_else(|| {
            listening
                .filter(|a| a.ip().is_loopback())
                .map(|a| format!("http://{a}"))
        });
        let mut by_server: BTreeMap<&str, Vec<Binding>> = BTreeMap::new();
        for b in &config.bindings {
            let mut c = BindingConfig::new(&b.server, &b.event, &b.into);
            c.key = key_of(&b.server, &b.event, &b.into, &b.arguments);
            c.arguments = b.arguments.clone();
            c.delivery = b.delivery.clone();
            c.max_value_bytes = config.max_value_bytes;
            c.rate = b.max_per_minute.map(|max| Rate {
                max,
                per: std::time::Duration::from_secs(60),
            });
            let stored = store.load(&c.key).map_err(|e| e.to_string())?;
            if let Some(base) = &hooks_base
                && b.delivery.contains(&DeliveryMode::Webhook)
            {
                let secret = match stored.secret.as_deref().map(Secret::parse) {
                    Some(Ok(secret)) => secret,
                    _ => {
                        let fresh = Secret::random(&ring::rand::SystemRandom::new())
                            .map_err(|e| e.to_string())?;
                        store
                            .save_webhook(&c.key, fresh.as_str(), None)
                            .map_err(|e| e.to_string())?;
                        fresh
                    }
                };
                c.callback = Some(Callback {
                    url: format!("{base}{PREFIX}{}", c.key),
                    secret,
                });
            }
            by_server
                .entry(&b.server)
                .or_default()
                .push(Binding::new(c, stored.cursor));
        }
        // Built last: a runtime must not be dropped on an async thread.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("agentd-events")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let ctx = Ctx {
            instance: config.instance.as_str().into(),
            metrics,
            store: Arc::new(Mutex::new(store)),
        };
        let (stop, stopped) = watch::channel(false);
        let mut table = routes.write().unwrap_or_else(|e| e.into_inner());
        table.clear();
        for (server, bindings) in by_server {
            let Some(h) = held.get(server) else { continue };
            let mut with_hooks = Vec::with_capacity(bindings.len());
            for b in bindings {
                // Each binding's deliveries wait in a queue of their own; a full one is
                // answered 429 (pressure).
                let (hooks, delivered) = mpsc::channel(64);
                if let Some(callback) = &b.config().callback {
                    let route = Route {
                        server: server.to_owned(),
                        event: b.config().event.clone(),
                        secrets: vec![callback.secret.clone()],
                        hooks,
                    };
                    table.insert(b.config().key.clone(), route);
                }
                with_hooks.push((b, delivered));
            }
            runtime.spawn(serve(
                ctx.clone(),
                server.to_owned(),
                (h.connections(), h.events_changed()),
                with_hooks,
                stopped.clone(),
            ));
        }
        drop(table);
        // Counted again from zero by the tasks just started.
        ctx.metrics.clear(Metric::SubscriptionsActive);
        Ok(Some(Self { runtime, stop, ctx }))
    }

    /// Stops every binding, then forgets the ones a reload dropped: their cursors, secrets
    /// and records (`mcp.events.removed`, reason `reload`).
    pub(crate) fn stop_removing(self, gone: &[crate::config::Binding]) {
        let ctx = self.ctx.clone();
        self.stop();
        let mut store = ctx.store.lock().unwrap_or_else(|e| e.into_inner());
        for b in gone {
            let key = key_of(&b.server, &b.event, &b.into, &b.arguments);
            if store.remove(&key, &b.into).is_ok() {
                log(
                    &ctx,
                    Level::Info,
                    "mcp.events.removed",
                    &[
                        ("server", json!(b.server)),
                        ("event_type", json!(b.event)),
                        ("reason", json!("reload")),
                    ],
                );
            }
        }
    }

    /// Stops every binding. Subscriptions are not released: the next start goes on from the
    /// stored cursors. A commit under way finishes (it is one transaction either way).
    ///
    /// The routes stay: a delivery that comes meanwhile finds its binding's task gone and is
    /// answered 503, so the server delivers it again; the next start replaces them.
    pub(crate) fn stop(self) {
        let _ = self.stop.send(true);
        self.runtime.shutdown_background();
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

/// One server: its types listed (and listed again when asked), and a task per binding, so
/// that a slow request of one binding holds up no other.
async fn serve(
    ctx: Ctx,
    server: String,
    (mut connections, mut changed): (
        watch::Receiver<Option<Arc<Connection>>>,
        watch::Receiver<u64>,
    ),
    bindings: Vec<(Binding, mpsc::Receiver<Hook>)>,
    mut stop: watch::Receiver<bool>,
) {
    let connection = tokio::select! {
        c = connections.wait_for(Option::is_some) => match c {
            Ok(c) => c.clone().expect("waited for a connection"),
            Err(_) => return,
        },
        () = stopping(&mut stop) => return,
    };
    let modern = connection.revision().era() == mcp_wire::Era::Modern;
    let capability = connection.capabilities().events().is_some();
    let (listed, listings) = watch::channel::<Option<Arc<Listed>>>(None);
    let (relist, mut relists) = mpsc::channel::<()>(16);
    for (b, hooks) in bindings {
        let on = On {
            ctx: ctx.clone(),
            server: server.clone(),
            connection: connection.clone(),
            relist: relist.clone(),
        };
        tokio::spawn(run_binding(
            on,
            b,
            hooks,
            listings.clone(),
            stop.clone(),
            (modern, capability),
        ));
    }
    let usable = modern && capability;
    let mut lister = Lister::new(std::time::Instant::now());
    loop {
        let now = std::time::Instant::now();
        while let Some(cursor) = lister.poll_request(now).filter(|_| usable) {
            let page = request(connection.list_events(cursor)).await;
            count(&ctx, &server, mcp_wire::method::EVENTS_LIST, &page);
            let outcome = match page {
                Ok(page) => match lister.on_page(page, now) {
                    Step::More => continue,
                    Step::Done(types) => {
                        log(
                            &ctx,
                            Level::Info,
                            "mcp.events.listed",
                            &[("server", json!(server)), ("types", json!(types.len()))],
                        );
                        Listed::Types(types)
                    }
                    _ => Listed::TooLarge,
                },
                Err(Failure::Rpc(e)) if e.code == mcp_wire::code::METHOD_NOT_FOUND => {
                    lister.hold(now);
                    Listed::MethodNotFound
                }
                Err(failure) => {
                    let exhausted = matches!(&failure, Failure::Rpc(e)
                        if e.code == mcp_wire::events::code::EVENTS_RESOURCE_EXHAUSTED);
                    let wait = lister.on_failure(now, exhausted, random());
                    log(
                        &ctx,
                        Level::Warn,
                        "mcp.events.list.fail",
                        &[
                            ("server", json!(server)),
                            ("err", json!(mcp_wire::log_text(&failure.to_string()))),
                            (
                                "retry_ms",
                                json!(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
                            ),
                        ],
                    );
                    continue;
                }
            };
            listed.send_replace(Some(Arc::new(outcome)));
        }
        let next = lister.poll_timeout().filter(|_| usable);
        tokio::select! {
            () = sleep_until(next.map_or_else(far, Instant::from_std)) => {}
            // A binding's type went away or changed in place.
            Some(()) = relists.recv() => lister.again(std::time::Instant::now()),
            // The server said its types changed (`mcp.events.list_changed`).
            Ok(()) = changed.changed() => lister.again(std::time::Instant::now()),
            () = stopping(&mut stop) => return,
        }
    }
}

/// What a binding's task works with.
struct On {
    ctx: Ctx,
    server: String,
    connection: Arc<Connection>,
    relist: mpsc::Sender<()>,
}

/// One binding: what its machine asks for, sent; what the server lists, told; its webhook
/// deliveries, taken.
async fn run_binding(
    on: On,
    mut b: Binding,
    mut hooks: mpsc::Receiver<Hook>,
    mut listings: watch::Receiver<Option<Arc<Listed>>>,
    mut stop: watch::Receiver<bool>,
    (modern, capability): (bool, bool),
) {
    let (ctx, server, connection) = (&on.ctx, on.server.as_str(), &on.connection);
    let (mut seen, mut evicted, mut active) = (Stats::default(), 0, None);
    b.on_connection(modern, capability);
    loop {
        while let Some(action) = b.poll_action(std::time::Instant::now()) {
            match action {
                Action::Poll(params) => {
                    let answer = request(connection.poll_events(&params)).await;
                    let batch = b.on_poll(answer, std::time::Instant::now(), wall_ms(), random());
                    // A store that fails pauses the binding (`store_degraded`).
                    let committed = commit(ctx, &b, batch).await;
                    b.on_committed(committed.is_ok(), std::time::Instant::now());
                    b.passed_over(committed.unwrap_or(0));
                }
                Action::Subscribe(params) => {
                    let answer = request(connection.subscribe_events(&params)).await;
                    let now = std::time::Instant::now();
                    let batch = b.on_subscribed(answer, now, wall_ms(), random());
                    let committed = commit(ctx, &b, batch).await.is_ok();
                    b.on_committed(committed, std::time::Instant::now());
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
        let now_active = b.mode().filter(|_| b.refusal().is_none());
        if now_active != active {
            for (mode, delta) in [(active, -1), (now_active, 1)] {
                if let Some(mode) = mode {
                    let labels = [("kind", "event"), ("mode", mode.as_str())];
                    ctx.metrics.add(Metric::SubscriptionsActive, &labels, delta);
                }
            }
            active = now_active;
        }
        let next = b.poll_timeout();
        tokio::select! {
            () = sleep_until(next.map_or_else(far, Instant::from_std)) => {}
            Ok(()) = listings.changed() => {
                let listed = listings.borrow_and_update().clone();
                if let Some(listed) = listed {
                    b.on_listing(listed.as_listing(), std::time::Instant::now());
                }
            }
            Some(hook) = hooks.recv() => {
                let answer = deliver(ctx, &mut b, hook.body, &hook.webhook_id).await;
                let _ = hook.answer.send(answer);
            }
            () = stopping(&mut stop) => return,
        }
    }
}

/// Keeps the webhook subscription's id with its secret.
async fn save_subscription(ctx: &Ctx, b: &Binding) {
    if let (Some(id), Some(callback)) = (b.subscription(), &b.config().callback) {
        let (store, key) = (ctx.store.clone(), b.config().key.clone());
        let (secret, id) = (callback.secret.as_str().to_owned(), id.to_owned());
        let _ = tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
            store.save_webhook(&key, &secret, Some(&id))
        })
        .await;
    }
}

/// Resolves once the bindings are told to stop.
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn far() -> Instant {
    Instant::now() + std::time::Duration::from_secs(86_400)
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
    match b.on_delivery(body, webhook_id, std::time::Instant::now(), wall_ms()) {
        Delivery::Commit(batch) => {
            let committed = commit(ctx, b, batch.clone()).await;
            b.on_delivered(&batch, committed.is_ok(), std::time::Instant::now());
            match committed {
                Ok(passed_over) => {
                    b.passed_over(passed_over);
                    Answer::Taken
                }
                Err(err) => {
                    log(
                        ctx,
                        Level::Warn,
                        "mcp.events.hook.unsaved",
                        &[("err", json!(err))],
                    );
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

/// Commits a batch in one transaction, off the async threads: how many of its records the
/// store passed over (its stream held them already), or why it did not take it.
async fn commit(ctx: &Ctx, b: &Binding, batch: Batch) -> Result<usize, String> {
    let store = ctx.store.clone();
    let (key, into) = (b.config().key.clone(), b.config().into.clone());
    let records = batch.records.len();
    let done = tokio::task::spawn_blocking(move || {
        let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
        store.commit(&key, &into, &batch)
    })
    .await;
    match done {
        Ok(Ok(appended)) => Ok(records.saturating_sub(appended)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn count<T>(ctx: &Ctx, server: &str, method: &str, answer: &Result<T, Failure>) {
    let outcome = match answer {
        Ok(_) => "ok",
        Err(Failure::Rpc(_)) => "refused",
        Err(_) => "failed",
    };
    ctx.metrics.add(
        Metric::EventsRequests,
        &[("server", server), ("method", method), ("outcome", outcome)],
        1,
    );
}

/// The binding's log lines, and what changed in its counters since `seen`.
fn report(ctx: &Ctx, server: &str, b: &mut Binding, seen: &mut Stats, evicted: &mut u64) {
    let event_type = b.config().event.clone();
    while let Some(line) = b.poll_log() {
        let (level, name, fields) = line_of(line);
        let mut all = vec![("server", json!(server)), ("event_type", json!(event_type))];
        all.extend(fields);
        log(ctx, level, name, &all);
    }
    let stats = b.stats().clone();
    let mode = b.mode().map_or("poll", DeliveryMode::as_str);
    let labels = |outcome| {
        [
            ("server", server),
            ("event", event_type.as_str()),
            ("mode", mode),
            ("outcome", outcome),
        ]
    };
    let delta = |now: u64, then: u64| i64::try_from(now.saturating_sub(then)).unwrap_or(i64::MAX);
    for (outcome, now, then) in [
        ("appended", stats.appended, seen.appended),
        ("duplicate", stats.duplicate, seen.duplicate),
        ("rejected", stats.rejected, seen.rejected),
        (
            "schema_mismatch",
            stats.schema_mismatch,
            seen.schema_mismatch,
        ),
        (
            "refused_pressure",
            stats.refused_pressure,
            seen.refused_pressure,
        ),
    ] {
        ctx.metrics
            .add(Metric::Events, &labels(outcome), delta(now, then));
    }
    for ((method, outcome), n) in &stats.requests {
        let then = seen
            .requests
            .get(&(*method, *outcome))
            .copied()
            .unwrap_or(0);
        ctx.metrics.add(
            Metric::EventsRequests,
            &[("server", server), ("method", method), ("outcome", outcome)],
            delta(*n, then),
        );
    }
    for (cause, n) in &stats.gaps {
        let then = seen.gaps.get(cause).copied().unwrap_or(0);
        ctx.metrics.add(
            Metric::EventGaps,
            &[
                ("server", server),
                ("event", event_type.as_str()),
                ("cause", cause),
            ],
            delta(*n, then),
        );
    }
    let now_evicted = b.dedup_evicted();
    ctx.metrics.add(
        Metric::DedupEvicted,
        &[("server", server), ("event", event_type.as_str())],
        delta(now_evicted, *evicted),
    );
    *evicted = now_evicted;
    if let Some(lag) = stats.lag_ms {
        ctx.metrics.set(
            Metric::EventLag,
            &[("server", server), ("event", event_type.as_str())],
            lag,
        );
    }
    *seen = stats;
}

/// The reference's MCP Events log table.
fn line_of(line: Log) -> (Level, &'static str, Vec<(&'static str, Value)>) {
    match line {
        Log::Armed {
            mode,
            cursor_present,
        } => (
            Level::Info,
            "mcp.events.armed",
            vec![
                ("mode", json!(mode.as_str())),
                ("cursor_present", json!(cursor_present)),
            ],
        ),
        Log::Refused { reason, detail } => (
            Level::Error,
            "mcp.events.refused",
            vec![
                ("reason", json!(reason.as_str())),
                ("detail", json!(detail)),
            ],
        ),
        Log::PollFailed {
            code,
            err,
            retry_ms,
        } => {
            let level = match code {
                Some(-32020) => Level::Error,
                _ => Level::Warn,
            };
            (
                level,
                "mcp.events.poll.fail",
                vec![
                    ("code", json!(code)),
                    ("err", json!(err)),
                    ("retry_ms", json!(retry_ms)),
                ],
            )
        }
        Log::Paused { cause, detail } => (
            Level::Warn,
            "mcp.events.paused",
            vec![("cause", json!(cause.as_str())), ("detail", json!(detail))],
        ),
        Log::Resumed { cause } => (
            Level::Info,
            "mcp.events.resumed",
            vec![("cause", json!(cause.as_str()))],
        ),
        Log::Gap { cause } => (Level::Warn, "mcp.events.gap", vec![("cause", json!(cause))]),
        Log::Rejected { event_id, cause } => (
            Level::Warn,
            "mcp.events.rejected",
            vec![("event_id", json!(event_id)), ("cause", json!(cause))],
        ),
        Log::SchemaMismatch { event_id } => (
            Level::Warn,
            "mcp.events.schema_mismatch",
            vec![("event_id", json!(event_id))],
        ),
        Log::ArmFailed {
            code,
            err,
            retry_ms,
        } => {
            let level = match code {
                Some(_) => Level::Error,
                None => Level::Warn,
            };
            (
                level,
                "mcp.events.arm.fail",
                vec![("err", json!(err)), ("retry_ms", json!(retry_ms))],
            )
        }
        Log::CallbackFailed { reason, url } => (
            Level::Error,
            "mcp.events.callback_failed",
            vec![("reason", json!(reason)), ("url", json!(url))],
        ),
        Log::ModeChanged { from, to, cause } => (
            Level::Warn,
            "mcp.events.mode_changed",
            vec![
                ("from", json!(from.as_str())),
                ("to", json!(to.as_str())),
                ("cause", json!(cause)),
            ],
        ),
        Log::DeliverySuspended { last_error, active } => (
            Level::Warn,
            "mcp.events.delivery_suspended",
            vec![("last_error", json!(last_error)), ("active", json!(active))],
        ),
        Log::Throttled { retry_after_ms } => (
            Level::Info,
            "mcp.events.throttled",
            vec![("retry_after_ms", json!(retry_after_ms))],
        ),
        Log::Terminated { code } => (
            Level::Error,
            "mcp.events.terminated",
            vec![("code", json!(code))],
        ),
        _ => (Level::Warn, "mcp.events.unknown", vec![]),
    }
}

fn log(ctx: &Ctx, level: Level, name: &str, fields: &[(&str, Value)]) {
    event(&ctx.instance, level, name, fields);
}

/// The Unix time in milliseconds (the wall clock, read by the drivers only).
pub(crate) fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A random `u32` for jitter, from the operating system's CSPRNG.
fn random() -> u32 {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 4];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    u32::from_le_bytes(bytes)
}

/// `agentd events tail`: every record of `stream`, oldest first, one JSON line each.
pub(crate) fn tail(config: &Config, stream: &str) -> Result<usize, String> {
    let mut store = Sqlite::open(&config.store_path).map_err(|e| e.to_string())?;
    let mut after = 0;
    let mut printed = 0;
    loop {
        let entries = store.read(stream, after, 1000).map_err(|e| e.to_string())?;
        let Some(last) = entries.last() else {
            return Ok(printed);
        };
        after = last.seq;
        for entry in &entries {
            crate::say!("{}", String::from_utf8_lossy(&entry.bytes));
        }
        printed += entries.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `events/*` request is bounded at 30 s: a server that never answers is a
    /// timeout at the bound, and not a moment before.
    #[tokio::test(start_paused = true)]
    async fn a_request_is_bounded_at_30_seconds() {
        let start = Instant::now();
        let never = std::future::pending::<Result<(), Error>>();
        assert_eq!(request(never).await, Err(Failure::Timeout));
        assert_eq!(Instant::now() - start, REQUEST_TIMEOUT);
        let quick = async {
            tokio::time::sleep(REQUEST_TIMEOUT - std::time::Duration::from_millis(1)).await;
            Ok::<_, Error>(7)
        };
        assert_eq!(request(quick).await, Ok(7));
    }
}
