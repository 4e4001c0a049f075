//! One task per binding: what its machine asks for, sent; what the server lists, told; its
//! webhook deliveries, taken; what it hands over, committed.

use std::sync::Arc;

use mcp_events::binding::{Action, Batch, Binding, Delivery, Pause, Record, Stats};
use mcp_negotiate::Client;
use mcp_wire::events::{DeliveryMode, UnsubscribeEventsParams};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};

use super::hooks::{Answer, Deliveries};
use super::report::{count, report};
use super::shared::{Connections, Ends, Listings, Shared, facts, far, request, unless};
use crate::clock::{now, random, wall_ms};
use crate::store;
use crate::telemetry::catalogue::events as logs;

/// What a binding's task works with.
pub(super) struct On {
    pub(super) ctx: Shared,
    pub(super) server: String,
    pub(super) connection: Arc<Client>,
    pub(super) relist: mpsc::Sender<()>,
}

/// One binding: what its machine asks for, sent; what the server lists, told; its webhook
/// deliveries, taken; until it is ended (its webhook subscription released) or stopped.
pub(super) async fn run_binding(
    on: On,
    mut b: Binding,
    mut deliveries: Deliveries,
    Ends {
        mut end,
        stop,
        gone: _gone,
    }: Ends,
    (mut connections, mut listings, mut reloads): (Connections, Listings, watch::Receiver<u64>),
) {
    let (ctx, server, connection) = (&on.ctx, on.server.as_str(), &on.connection);
    // Ended before it started (while its server was not connected): nothing to release.
    if let Ok(done) = end.try_recv() {
        forget(ctx, &b.config().key).await;
        let _ = done.send(());
        return;
    }
    let (mut seen, mut evicted) = (Stats::default(), 0);
    // Given back when the task ends, however it ends (stopped tasks are dropped).
    let mut active = ctx.metrics.live();
    let (modern, capability) = facts(connection);
    b.on_connection(modern, capability);
    loop {
        while let Some(action) = b.poll_action(now()) {
            match action {
                Action::Poll(params) => {
                    let Some(answer) =
                        unless(&stop, request(connection.poll_events(&params))).await
                    else {
                        return;
                    };
                    count(ctx, server, mcp_wire::method::EVENTS_POLL, &answer);
                    let batch = b.on_poll(answer, now(), wall_ms(), random());
                    // A store that fails pauses the binding (`store_degraded`).
                    let committed = commit(ctx, &b, Arc::new(batch)).await;
                    b.on_committed(committed.is_ok(), now());
                    b.passed_over(committed.unwrap_or(0));
                }
                Action::Subscribe(params) => {
                    let subscribed = request(connection.subscribe_events(&params));
                    let Some(answer) = unless(&stop, subscribed).await else {
                        return;
                    };
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
            if stop.is_cancelled() {
                return;
            }
        }
        report(ctx, server, &mut b, &mut seen, &mut evicted);
        active.set(live(&b));
        let next = b.poll_timeout();
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            Some(done) = end.recv() => {
                active.set(None);
                release(&on, &b).await;
                forget(ctx, &b.config().key).await;
                let _ = done.send(());
                return;
            }
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
pub(super) fn pressure(b: &mut Binding, deliveries: &Deliveries) {
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
pub(super) fn live(b: &Binding) -> Option<DeliveryMode> {
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
async fn forget(ctx: &Shared, key: &str) {
    let _ = ctx.store.forget(key).await;
}

/// Keeps the webhook subscription's id with its secret.
async fn save_subscription(ctx: &Shared, b: &Binding) {
    if let (Some(id), Some(callback)) = (b.subscription(), &b.config().callback) {
        let key = &b.config().key;
        let _ = ctx
            .store
            .save_webhook(key, callback.secret.as_str(), Some(id))
            .await;
    }
}

/// Takes one checked delivery: committed when it is new, and answered by what became of it.
async fn deliver(
    ctx: &Shared,
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
                    logs::hook_unsaved(&ctx.instance, &err.to_string());
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
/// timestamp of the last; appended into the instruction's stream, they have the instruction
/// read again; appended to any stream, they are reported for the workflows' event starts.
pub(super) async fn commit(
    ctx: &Shared,
    b: &Binding,
    batch: Arc<Batch>,
) -> Result<usize, store::Error> {
    let records = batch.records.len();
    let occurred = batch.records.last().and_then(occurred_ms);
    let c = b.config();
    let committed = ctx.store.commit(&c.key, &c.into, batch.clone()).await;
    ctx.reports.committed(committed.is_ok());
    match committed {
        Ok(appended) => {
            if appended > 0 && c.into == agentd_tools::instruction::STREAM {
                ctx.reports.instruction(&c.server, &c.event);
            }
            if appended > 0 {
                ctx.reports.appended(&c.into);
            }
            if let Some(occurred) = occurred.filter(|_| appended > 0) {
                let lag = wall_ms().saturating_sub(occurred);
                ctx.metrics.lag((&c.server, &c.event), lag);
            }
            Ok(records.saturating_sub(appended))
        }
        Err(e) => Err(e),
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
