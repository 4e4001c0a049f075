//! Runtime subscriptions in the daemon: the library calls of the `events.*` tools
//! ([`agentd_tools::events::Subscriptions`]), and each binding's start.
//!
//! A subscription is checked the way a binding checks itself (the server connected at
//! 2026-07-28 with the events capability, the type listed, a common mode, the arguments
//! against the type's input schema) before it is made, so the caller hears of a refusal at
//! once. A made one is a binding like a configured one: armed on its server's task, with a
//! webhook route when it may take deliveries. The registry is kept in the store as its index
//! (the document [`INDEX`]), written together with the audit records of its changes (stream
//! [`AUDIT_STREAM`]); when that
//! write fails (`mcp.events.index.failed`), the subscription lives on and the write is tried
//! again every minute until it is kept. Lifetimes end by the wall clock (checked at least
//! once a minute); at start, the subscriptions kept are armed again, except those whose
//! lifetime ended, whose server or grant is gone, or which a configured binding now is.
//!
//! Everything here runs on the events runtime; a call from another runtime waits for it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use agentd_tools::events::Subscriptions;
use agentd_tools::runtime::{AUDIT_STREAM, Grant, Refused, Registry, Subscription, Wanted};
use mcp_events::binding::{
    Binding, Callback, Config as BindingConfig, Listing, Log, Rate, Refusal,
};
use mcp_events::listing::Lister;
use mcp_events::webhook::Secret;
use mcp_negotiate::Client;
use mcp_wire::events::{DeliveryMode, EventType};
use serde_json::json;
use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use super::server::{list_pages, serve};
use super::shared::{
    Armed, Connections, Ends, Error, Feed, Listed, REQUEST_TIMEOUT, Shared, facts, limits,
};
use crate::clock::{now, wall_ms};
use crate::config::{self, Config};
use crate::events::hooks::{self, PREFIX, Routes};
use crate::telemetry::catalogue::events::{self as logs, Of, Subscription as Reason};

/// How often, at least, lifetimes are checked and an unsaved index written again.
const TICK: Duration = Duration::from_secs(60);

/// The store's document that holds the index of runtime subscriptions.
const INDEX: &str = "subscriptions";

/// The bindings at work, configured and made at run time, on the events runtime.
#[derive(Debug, Clone)]
pub(crate) struct Control(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    handle: Handle,
    routes: Routes,
    /// What the configuration in force makes of MCP Events; replaced whole at a reload.
    setup: RwLock<Arc<Setup>>,
    state: Mutex<State>,
    changed: Notify,
    /// Stops every task of MCP Events (at exit); each server's is a child of it.
    stop: CancellationToken,
}

/// What the configuration in force makes of MCP Events.
#[derive(Debug)]
struct Setup {
    ctx: Shared,
    /// Each owner's grant, and whether it offers the tools.
    grants: BTreeMap<String, (Grant, bool)>,
    /// Each held server's task.
    servers: BTreeMap<String, Server>,
    /// The configured bindings, by key, and how many each server has.
    configured: BTreeMap<String, config::Binding>,
    configured_on: BTreeMap<String, usize>,
    hooks_base: Option<String>,
}

/// A held server's task, as the bindings see it: the server's connection, the task's intake
/// of bindings, and what stops it (and them) when the server is let go.
#[derive(Debug, Clone)]
pub(super) struct Server {
    connections: Connections,
    arm: mpsc::UnboundedSender<Armed>,
    /// Bumped at a reload: the server's types are listed again, and its bindings decide
    /// afresh.
    reload: watch::Sender<u64>,
    stop: CancellationToken,
}

/// A binding's task, as it is ended or stopped.
#[derive(Debug)]
struct Task {
    /// Ends it: the task releases its webhook subscription and forgets its cursor, then
    /// answers.
    end: mpsc::Sender<oneshot::Sender<()>>,
    /// Stops it where it is, its cursor kept.
    stop: CancellationToken,
    /// Resolves once the task is gone.
    gone: oneshot::Receiver<()>,
}

/// How long a reload waits for a stopped binding's task to be gone before it starts the
/// binding again or forgets it: a request under way is abandoned at once, a commit under way
/// finishes.
const STOPPED_WITHIN: Duration = Duration::from_secs(5);

/// Whether a stopped binding's route stays: a binding started again keeps it (a delivery
/// meanwhile is answered 503, to come again), one removed or ended loses it (410).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Keep,
    Drop,
}

#[derive(Debug, Default)]
struct State {
    registry: Registry,
    /// Each binding's task, by key.
    tasks: HashMap<String, Task>,
    /// Audit records not yet written with the index.
    unsaved: Vec<Vec<u8>>,
    /// The index kept is not the registry's.
    dirty: bool,
    /// The index kept could not be read at start: it is not overwritten.
    unreadable: bool,
    /// Bindings not armed yet (the store failed); tried every minute.
    unarmed: Vec<config::Binding>,
    /// MCP Events is stopping: nothing more is written.
    closed: bool,
}

impl Control {
    /// Nothing configured yet: see [`Control::start`].
    pub(super) fn new(ctx: Shared, handle: Handle, routes: Routes) -> Self {
        let setup = Setup {
            ctx,
            grants: BTreeMap::new(),
            servers: BTreeMap::new(),
            configured: BTreeMap::new(),
            configured_on: BTreeMap::new(),
            hooks_base: None,
        };
        Self(Arc::new(Inner {
            handle,
            routes,
            setup: RwLock::new(Arc::new(setup)),
            state: Mutex::default(),
            changed: Notify::new(),
            stop: CancellationToken::new(),
        }))
    }

    /// The setup in force.
    fn setup(&self) -> Arc<Setup> {
        self.0
            .setup
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn ctx(&self) -> Shared {
        self.setup().ctx.clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A task for server `name`, listing its types and running its bindings.
    fn spawn_server(&self, ctx: &Shared, name: &str, feed: &Feed) -> Server {
        let (arm, armed) = mpsc::unbounded_channel();
        let (reload, reloads) = watch::channel(0);
        let stop = self.0.stop.child_token();
        self.0.handle.spawn(serve(
            ctx.clone(),
            name.to_owned(),
            feed.clone(),
            armed,
            reloads,
            stop.clone(),
        ));
        Server {
            connections: feed.connections.clone(),
            arm,
            reload,
            stop,
        }
    }

    /// What `config` makes of MCP Events, on the server tasks `servers`.
    fn setup_of(
        config: &Config,
        listening: Option<SocketAddr>,
        ctx: Shared,
        servers: BTreeMap<String, Server>,
    ) -> Setup {
        let grants = config
            .grants
            .iter()
            .filter_map(|g| {
                let grant = Grant::new(&g.owner, g.live).ok()?;
                Some((g.owner.clone(), (grant, g.tools)))
            })
            .collect();
        let mut configured_on = BTreeMap::new();
        for b in &config.bindings {
            *configured_on.entry(b.server.clone()).or_default() += 1;
        }
        // Without `webhooks.url`, a listener on loopback is its own public address: servers
        // on the same host can deliver to it.
        let hooks_base = config.hooks_url.clone().or_else(|| {
            listening
                .filter(|a| a.ip().is_loopback())
                .map(|a| format!("http://{a}"))
        });
        Setup {
            ctx,
            grants,
            servers,
            configured: config
                .bindings
                .iter()
                .map(|b| (b.key(), b.clone()))
                .collect(),
            configured_on,
            hooks_base,
        }
    }

    /// Starts a task per server, the bindings of `config`, and the runtime subscriptions
    /// kept in the store. Fails when a binding cannot be read from the store.
    pub(super) async fn start(
        &self,
        config: &Config,
        listening: Option<SocketAddr>,
        feeds: &BTreeMap<String, Feed>,
    ) -> Result<(), Error> {
        let ctx = self.ctx();
        let servers = feeds
            .iter()
            .map(|(name, feed)| (name.clone(), self.spawn_server(&ctx, name, feed)))
            .collect();
        let setup = Self::setup_of(config, listening, ctx, servers);
        *self.0.setup.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(setup);
        for b in &config.bindings {
            self.arm_or_later(b).await;
        }
        self.restore().await;
        Ok(())
    }

    /// Takes a new configuration as a diff (see [`Events::reload`](super::Events::reload)).
    pub(super) async fn reload(
        &self,
        config: &Config,
        listening: Option<SocketAddr>,
        feeds: &BTreeMap<String, Feed>,
    ) {
        let old = self.setup();
        let ctx = Shared {
            instance: config.instance.as_str().into(),
            limits: limits(config),
            ..old.ctx.clone()
        };
        // A server kept is the same connection under the same name; any other is a new task.
        let mut servers = BTreeMap::new();
        let mut fresh = BTreeSet::new();
        for (name, feed) in feeds {
            let server = match old.servers.get(name) {
                Some(s)
                    if s.connections.same_channel(&feed.connections)
                        && ctx.instance == old.ctx.instance =>
                {
                    s.clone()
                }
                _ => {
                    fresh.insert(name.clone());
                    self.spawn_server(&ctx, name, feed)
                }
            };
            servers.insert(name.clone(), server);
        }
        for (name, s) in &old.servers {
            if fresh.contains(name) || !servers.contains_key(name) {
                s.stop.cancel();
            }
        }
        let new = Arc::new(Self::setup_of(config, listening, ctx, servers));
        // A binding kept runs on unless its server's task is new or it would be built
        // otherwise (its spec, its bounds, its callback URL).
        let rebuilt = new.ctx.limits != old.ctx.limits || new.hooks_base != old.hooks_base;
        let restart = |spec: &config::Binding| {
            rebuilt
                || fresh.contains(&spec.server)
                || old.configured.get(&spec.key()).is_some_and(|b| b != spec)
        };
        // The setup is swapped under the lock the tools take: a subscription made meanwhile
        // is checked against one setup or the other, and ended here when the new one ends it.
        let now = wall_ms();
        let (ended, again) = {
            let mut state = self.state();
            *self.0.setup.write().unwrap_or_else(PoisonError::into_inner) = new.clone();
            let ended = lapse(&mut state.registry, &new, now);
            for (s, reason) in &ended {
                let record = s.audit("unsubscribed", reason.as_str(), now);
                state.unsaved.push(record);
            }
            let again: Vec<config::Binding> = state
                .registry
                .all()
                .map(spec_of)
                .filter(|spec| restart(spec))
                .collect();
            (ended, again)
        };
        // Removed: its key is no longer configured. Its task is gone before its records are.
        let removed: Vec<&config::Binding> = old
            .configured
            .values()
            .filter(|b| !new.configured.contains_key(&b.key()))
            .collect();
        let mut gone = Vec::new();
        for b in &removed {
            gone.extend(self.stop(&b.key(), Route::Drop));
        }
        // Those ended are released and forgotten by their tasks; one whose task is gone
        // (its server let go) is forgotten here. The key of one a configured binding now
        // is names that binding's cursor: it is only stopped.
        let mut released = Vec::new();
        for (s, reason) in &ended {
            match reason {
                Reason::Configured => gone.extend(self.stop(&s.id, Route::Keep)),
                Reason::ServerRemoved => {
                    gone.extend(self.stop(&s.id, Route::Drop));
                    released.push(s.id.clone());
                }
                _ => match self.end(&s.id) {
                    Some(ended) => gone.push(ended),
                    None => released.push(s.id.clone()),
                },
            }
        }
        // Started again: configured bindings new, changed or on a new server task, and
        // runtime subscriptions on a new server task.
        let starts: Vec<config::Binding> = new
            .configured
            .values()
            .filter(|b| !old.configured.contains_key(&b.key()) || restart(b))
            .chain(&again)
            .cloned()
            .collect();
        for spec in &starts {
            gone.extend(self.stop(&spec.key(), Route::Keep));
        }
        let all_gone = async {
            for task in gone {
                let _ = task.await;
            }
        };
        let _ = timeout(STOPPED_WITHIN, all_gone).await;
        for b in removed {
            let store = &new.ctx.store;
            if store.remove(&b.key(), &b.into).await.is_ok() {
                logs::removed(Of {
                    instance: &new.ctx.instance,
                    server: &b.server,
                    event_type: &b.event,
                });
            }
        }
        for spec in &starts {
            self.arm_or_later(spec).await;
        }
        if !ended.is_empty() || self.state().dirty {
            self.save(released).await;
            for (s, reason) in &ended {
                logs::unsubscribed(of(&new, s), &s.owner, *reason, &s.id);
            }
        }
        // The servers kept list their types again; their bindings kept decide afresh.
        for (name, s) in &new.servers {
            if !fresh.contains(name) {
                s.reload.send_modify(|n| *n += 1);
            }
        }
        self.0.changed.notify_one();
    }

    /// What binding `spec` is, with its callback when it may take webhook deliveries.
    fn binding_config(&self, spec: &config::Binding, secret: Secret) -> BindingConfig {
        let setup = self.setup();
        let mut c = BindingConfig::new(&spec.server, &spec.event, &spec.into);
        c.key = spec.key();
        c.arguments = spec.arguments.clone();
        c.delivery = spec.delivery.clone();
        c.limits = setup.ctx.limits;
        c.rate = spec.max_per_minute.map(|max| Rate {
            max,
            per: Duration::from_secs(60),
        });
        if let Some(base) = &setup.hooks_base
            && spec.delivery.contains(&DeliveryMode::Webhook)
        {
            c.callback = Some(Callback {
                url: format!("{base}{PREFIX}{}", c.key),
                secret,
            });
        }
        c
    }

    /// Starts binding `spec` from its stored cursor, with the webhook secret kept for it (or
    /// a fresh one, kept); a runtime subscription only while the registry holds it.
    pub(super) async fn arm(&self, spec: &config::Binding) -> Result<(), Error> {
        let fresh = || Secret::random().map_err(Error::Secret);
        let store = &self.setup().ctx.store;
        let stored = store.load(&spec.key()).await?;
        let mut c = self.binding_config(spec, fresh()?);
        if let Some(callback) = &mut c.callback {
            match stored.secret.as_deref().map(Secret::parse) {
                Some(Ok(kept)) => callback.secret = kept,
                _ => {
                    store
                        .save_webhook(&c.key, callback.secret.as_str(), None)
                        .await?
                }
            }
        }
        self.launch(Binding::new(c, stored.cursor));
        Ok(())
    }

    /// Arms `spec`, or logs why not (`mcp.events.arm.fail`) and tries again within a
    /// minute.
    async fn arm_or_later(&self, spec: &config::Binding) {
        if let Err(e) = self.arm(spec).await {
            let mut state = self.state();
            if !state.unarmed.contains(spec) {
                state.unarmed.push(spec.clone());
            }
            drop(state);
            self.arm_failed(spec, &e.to_string());
        }
    }

    /// Hands `b` to its server's task, with its route when it takes deliveries (or without
    /// one when it does not); a task the same binding had is stopped. A runtime subscription
    /// ended meanwhile is not started: the check and the route are made under the lock its
    /// end takes.
    fn launch(&self, b: Binding) {
        let c = b.config();
        let mut state = self.state();
        let setup = self.setup();
        if !setup.configured.contains_key(&c.key) && state.registry.get(&c.key).is_none() {
            return;
        }
        let Some(server) = setup.servers.get(&c.server) else {
            return;
        };
        // Each binding's deliveries wait in a queue of their own; a full one is answered
        // 429 (pressure).
        let ((hooks, pressure), delivered) = hooks::queue();
        let mut routes = self
            .0
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        match &c.callback {
            Some(callback) => {
                let route = hooks::Route {
                    server: c.server.clone(),
                    event: c.event.clone(),
                    secrets: vec![callback.secret.clone()],
                    limits: c.limits,
                    hooks,
                    pressure,
                };
                routes.insert(c.key.clone(), route);
            }
            None => drop(routes.remove(&c.key)),
        }
        drop(routes);
        let (end, ended) = mpsc::channel(1);
        let (gone, gone_rx) = oneshot::channel();
        let stop = server.stop.child_token();
        let task = Task {
            end,
            stop: stop.clone(),
            gone: gone_rx,
        };
        if let Some(before) = state.tasks.insert(c.key.clone(), task) {
            before.stop.cancel();
        }
        drop(state);
        let ends = Ends {
            end: ended,
            stop,
            gone,
        };
        let _ = server.arm.send((b, delivered, ends));
    }

    /// Takes binding `key`'s task out, and its route unless `route` keeps it.
    fn take(&self, key: &str, route: Route) -> Option<Task> {
        let mut state = self.state();
        if route == Route::Drop {
            let mut routes = self
                .0
                .routes
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            routes.remove(key);
        }
        state.tasks.remove(key)
    }

    /// Ends binding `key`'s task and its route: the task releases its webhook subscription
    /// and forgets its cursor and secret, then answers on what this returns. `None` when
    /// there is no task to do it (none, or one stopped already): the caller forgets.
    fn end(&self, key: &str) -> Option<oneshot::Receiver<()>> {
        let task = self.take(key, Route::Drop)?;
        if task.stop.is_cancelled() {
            return None;
        }
        let (done, finished) = oneshot::channel();
        task.end.try_send(done).ok()?;
        Some(finished)
    }

    /// Stops binding `key`'s task where it is, its cursor and secret kept; what resolves
    /// once it is gone.
    fn stop(&self, key: &str, route: Route) -> Option<oneshot::Receiver<()>> {
        let task = self.take(key, route)?;
        task.stop.cancel();
        Some(task.gone)
    }

    /// Arms the subscriptions kept in the store again, but those whose lifetime ended, whose
    /// server or grant is gone, which a configured binding now is, or which a limit lowered
    /// since leaves no room for. Those ended were never armed: their webhook subscriptions
    /// are left to the 410 their routes answer.
    pub(super) async fn restore(&self) {
        let kept = self.setup().ctx.store.load_document(INDEX).await;
        let now = wall_ms();
        let mut registry = Registry::default();
        match kept {
            Ok(None) => {}
            Ok(Some(index)) => match Registry::from_index(&index) {
                Some(kept) => registry = kept,
                None => {
                    // Kept where it can be read, and replaced.
                    let record = json!({"at_ms": now, "action": "index_replaced", "index": index});
                    let mut state = self.state();
                    state.unsaved.push(record.to_string().into_bytes());
                    state.dirty = true;
                    drop(state);
                    self.index_failed(0, "the index kept is not one: it is in agentd.audit");
                }
            },
            Err(e) => {
                self.state().unreadable = true;
                self.index_failed(0, &format!("the index kept cannot be read: {e}"));
            }
        }
        let ended = lapse(&mut registry, &self.setup(), now);
        let live: Vec<Subscription> = registry.all().cloned().collect();
        {
            let mut state = self.state();
            state.registry = registry;
            for (s, reason) in &ended {
                state
                    .unsaved
                    .push(s.audit("unsubscribed", reason.as_str(), now));
            }
        }
        for s in &live {
            self.arm_or_later(&spec_of(s)).await;
        }
        if !ended.is_empty() || self.state().dirty {
            // The key of one a configured binding now is names that binding's cursor.
            let released = ended
                .iter()
                .filter(|(_, reason)| *reason != Reason::Configured)
                .map(|(s, _)| s.id.clone())
                .collect();
            self.save(released).await;
            for (s, reason) in &ended {
                logs::unsubscribed(of(&self.setup(), s), &s.owner, *reason, &s.id);
            }
        }
    }

    fn arm_failed(&self, spec: &config::Binding, err: &str) {
        let retry_ms = u64::try_from(TICK.as_millis()).unwrap_or(u64::MAX);
        let setup = self.setup();
        let of = Of {
            instance: &setup.ctx.instance,
            server: &spec.server,
            event_type: &spec.event,
        };
        logs::arm_fail(of, None, err, retry_ms);
    }

    /// Arms again the bindings the store failed, those still wanted.
    async fn rearm(&self) {
        let unarmed = std::mem::take(&mut self.state().unarmed);
        for spec in unarmed {
            let key = spec.key();
            let wanted = self.setup().configured.get(&key) == Some(&spec)
                || self.state().registry.get(&key).is_some();
            if wanted {
                self.arm_or_later(&spec).await;
            }
        }
    }

    /// Ends subscriptions as their lifetimes end, and writes an index not kept yet again,
    /// until the runtime stops.
    pub(super) async fn expire(self) {
        loop {
            let now = wall_ms();
            let (ended, dirty, next) = {
                let mut state = self.state();
                let ended = state.registry.expire(now);
                for s in &ended {
                    let reason = Reason::Expired.as_str();
                    state.unsaved.push(s.audit("unsubscribed", reason, now));
                }
                let dirty = state.dirty || !state.unsaved.is_empty();
                (ended, dirty, state.registry.next_expiry())
            };
            // Its task releases it, and forgets its cursor, on its own time; one without a
            // task is forgotten here.
            let released: Vec<String> = ended
                .iter()
                .filter(|s| self.end(&s.id).is_none())
                .map(|s| s.id.clone())
                .collect();
            if !ended.is_empty() || dirty {
                self.save(released).await;
            }
            self.rearm().await;
            for s in &ended {
                logs::unsubscribed(of(&self.setup(), s), &s.owner, Reason::Expired, &s.id);
            }
            let wait = next.map_or(TICK, |at| {
                Duration::from_millis(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
            });
            tokio::select! {
                () = tokio::time::sleep(wait.min(TICK)) => {}
                () = self.0.changed.notified() => {}
                () = self.0.stop.cancelled() => return,
            }
        }
    }

    /// Writes the index with the audit records not yet kept.
    async fn flush(&self) {
        self.save(Vec::new()).await;
    }

    /// Forgets the cursors and secrets of `released` (never armed), and writes the index
    /// with the audit records not yet kept. The index is read and its write sent under the
    /// state's lock, and the store takes requests in the order they are sent, so that of two
    /// writes the later one keeps the later index; once this start is closed, nothing is
    /// written (the next start has the store).
    async fn save(&self, released: Vec<String>) {
        self.write(released, false).await;
    }

    /// [`save`](Self::save), or the last write when `closing`: the state is closed in the
    /// same locked section that reads the index, so nothing changes after it.
    async fn write(&self, released: Vec<String>, closing: bool) {
        let setup = self.setup();
        let store = &setup.ctx.store;
        let (forgotten, saved, audit, live) = {
            let mut state = self.state();
            if state.closed {
                return;
            }
            state.closed = closing;
            if closing && !state.dirty && state.unsaved.is_empty() && released.is_empty() {
                return;
            }
            let live = state.registry.all().count();
            if state.unreadable {
                state.dirty = true;
                drop(state);
                self.index_failed(
                    live,
                    "the index kept could not be read: it is not overwritten",
                );
                return;
            }
            let audit = std::mem::take(&mut state.unsaved);
            let forgotten: Vec<_> = released.iter().map(|key| store.forget(key)).collect();
            let saved =
                store.save_document(INDEX, &state.registry.index(), AUDIT_STREAM, audit.clone());
            (forgotten, saved, audit, live)
        };
        for forgot in forgotten {
            let _ = forgot.await;
        }
        let saved = saved.await;
        let mut state = self.state();
        match saved {
            Ok(()) => state.dirty = false,
            Err(e) => {
                state.dirty = true;
                let newer = std::mem::replace(&mut state.unsaved, audit);
                state.unsaved.extend(newer);
                drop(state);
                self.index_failed(live, &e.to_string());
            }
        }
    }

    /// Stops MCP Events: an index not kept yet is written, and nothing after it (a write
    /// sent before is answered before the store closes); every task is stopped.
    pub(super) async fn close(&self) {
        self.cancel();
        self.write(Vec::new(), true).await;
    }

    /// Stops every task of MCP Events.
    pub(super) fn cancel(&self) {
        self.0.stop.cancel();
    }

    fn index_failed(&self, subscriptions: usize, err: &str) {
        logs::index_failed(&self.setup().ctx.instance, subscriptions, err);
    }

    /// The held connection of `server`, if it is connected.
    fn connection(&self, server: &str) -> Result<Arc<Client>, Refused> {
        let setup = self.setup();
        let held = setup
            .servers
            .get(server)
            .ok_or_else(|| Refused::UnknownServer {
                server: server.to_owned(),
            })?;
        let current = held.connections.borrow().clone();
        current.ok_or_else(|| Refused::NotConnected {
            server: server.to_owned(),
        })
    }

    /// Whether binding `spec` could work on a server listing `types`, as the binding itself
    /// would decide.
    fn check(&self, spec: &config::Binding, types: &[EventType]) -> Result<(), Refused> {
        // A dry run: the secret only says that a callback exists; it is never used.
        let secret =
            Secret::from_bytes(&[0; 32]).map_err(|e| Refused::Failed { err: e.to_string() })?;
        let mut b = Binding::new(self.binding_config(spec, secret), None);
        b.on_connection(true, true);
        b.on_listing(Listing::Types(types), now());
        let Some(reason) = b.refusal() else {
            return Ok(());
        };
        let detail = std::iter::from_fn(|| b.poll_log())
            .find_map(|line| match line {
                Log::Refused { detail, .. } => Some(detail),
                _ => None,
            })
            .unwrap_or_default();
        Err(Refused::Unusable { reason, detail })
    }

    async fn subscribe_here(self, owner: String, wanted: Wanted) -> Result<Subscription, Refused> {
        if !self.setup().grants.contains_key(&owner) {
            return Err(Refused::NoGrant { owner });
        }
        let types = self.list_here(wanted.server.clone()).await?;
        let spec = config::Binding {
            server: wanted.server.clone(),
            event: wanted.event.clone(),
            into: wanted.into.clone(),
            arguments: wanted.arguments.clone(),
            delivery: wanted.delivery.clone(),
            max_per_minute: None,
        };
        self.check(&spec, &types)?;
        // Checked again under the lock a reload swaps the setup under: the grant, the
        // configured bindings and the bounds are the ones in force when it is made.
        let (made, record) = {
            let mut state = self.state();
            let setup = self.setup();
            if state.closed {
                return Err(Refused::Failed {
                    err: "MCP Events is stopping".to_owned(),
                });
            }
            let Some((grant, _)) = setup.grants.get(&owner) else {
                return Err(Refused::NoGrant { owner });
            };
            if setup.configured.contains_key(&spec.key()) {
                return Err(Refused::Exists);
            }
            let on_server = setup.configured_on.get(&spec.server).copied();
            let made = state.registry.subscribe(
                grant,
                wanted,
                on_server.unwrap_or(0),
                setup.configured.len(),
                wall_ms(),
            )?;
            let record = made.audit("subscribed", Reason::Requested.as_str(), wall_ms());
            state.unsaved.push(record.clone());
            (made, record)
        };
        if let Err(e) = self.arm(&spec).await {
            // Nothing was started: the subscription is not made. Its record goes with it,
            // or, when an index holding it was written meanwhile, is answered by another.
            let mut state = self.state();
            let _ = state.registry.unsubscribe(&owner, &made.id);
            match state.unsaved.iter().position(|r| *r == record) {
                Some(at) => drop(state.unsaved.remove(at)),
                None => state
                    .unsaved
                    .push(made.audit("unsubscribed", "arm_failed", wall_ms())),
            }
            state.dirty = true;
            return Err(Refused::Failed { err: e.to_string() });
        }
        self.flush().await;
        logs::subscribed(
            of(&self.setup(), &made),
            &made.owner,
            Reason::Requested,
            &made.id,
        );
        self.0.changed.notify_one();
        Ok(made)
    }

    async fn unsubscribe_here(self, owner: String, id: String) -> Result<Subscription, Refused> {
        let ended = {
            let mut state = self.state();
            let ended = state.registry.unsubscribe(&owner, &id)?;
            state
                .unsaved
                .push(ended.audit("unsubscribed", Reason::Requested.as_str(), wall_ms()));
            ended
        };
        // Released on the server before the call returns, so that the same subscription
        // made again is not undone by it. (A server not connected now releases nothing: its
        // task, waiting for the connection, forgets the cursor and ends.) Without a task, it
        // is forgotten here.
        let mut released = Vec::new();
        match self.end(&ended.id) {
            Some(done) if self.connection(&ended.server).is_ok() => {
                // Its release is bounded at the same 30 s; the forget after it is quick.
                let _ = timeout(REQUEST_TIMEOUT + Duration::from_secs(5), done).await;
            }
            Some(_) => {}
            None => released.push(ended.id.clone()),
        }
        self.save(released).await;
        logs::unsubscribed(
            of(&self.setup(), &ended),
            &ended.owner,
            Reason::Requested,
            &ended.id,
        );
        Ok(ended)
    }

    /// Lists `server`'s event types once, every page (no retry: the caller hears of a
    /// failure).
    async fn list_here(&self, server: String) -> Result<Vec<EventType>, Refused> {
        let connection = self.connection(&server)?;
        match facts(&connection) {
            (false, _) => return Err(unusable(Refusal::Revision)),
            (true, false) => return Err(unusable(Refusal::NoCapability)),
            (true, true) => {}
        }
        let ctx = self.ctx();
        let mut lister = Lister::new(now(), &ctx.limits);
        let first = lister.poll_request(now()).flatten();
        match list_pages(&ctx, &server, &connection, &mut lister, first).await {
            Ok(Listed::Types(types)) => Ok(types),
            Ok(Listed::MethodNotFound) => Err(unusable(Refusal::MethodNotFound)),
            Ok(Listed::TooLarge) => Err(unusable(Refusal::ListTooLarge)),
            Err(failure) => Err(Refused::Failed {
                err: mcp_wire::log_text(&failure.to_string()),
            }),
        }
    }

    /// Runs `work` on the events runtime, whatever runtime the caller is on.
    async fn on_runtime<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, Refused>> + Send + 'static,
    ) -> Result<T, Refused> {
        self.0
            .handle
            .spawn(work)
            .await
            .unwrap_or_else(|e| Err(Refused::Failed { err: e.to_string() }))
    }
}

fn unusable(reason: Refusal) -> Refused {
    Refused::Unusable {
        reason,
        detail: String::new(),
    }
}

/// What the log lines of subscription `s` are about.
fn of<'a>(setup: &'a Setup, s: &'a Subscription) -> Of<'a> {
    Of {
        instance: &setup.ctx.instance,
        server: &s.server,
        event_type: &s.event,
    }
}

/// The runtime subscriptions `setup` ends: those which a configured binding now is (first:
/// their key names that binding's cursor, which nothing may forget), whose lifetime ended,
/// whose server or grant is gone, or which a limit lowered since leaves no room for; each
/// with its reason.
fn lapse(registry: &mut Registry, setup: &Setup, now: i64) -> Vec<(Subscription, Reason)> {
    let mut ended = Vec::new();
    for (reason, gone) in [
        (
            Reason::Configured,
            registry.end_where(|s| setup.configured.contains_key(&s.id)),
        ),
        (Reason::Expired, registry.expire(now)),
        (
            Reason::ServerRemoved,
            registry.end_where(|s| !setup.servers.contains_key(&s.server)),
        ),
        (
            Reason::GrantRemoved,
            registry.end_where(|s| !setup.grants.contains_key(&s.owner)),
        ),
        (
            Reason::Limits,
            registry.end_excess(
                |owner| setup.grants.get(owner).map_or(0, |(g, _)| g.live()),
                |server| setup.configured_on.get(server).copied().unwrap_or(0),
                setup.configured.len(),
            ),
        ),
    ] {
        ended.extend(gone.into_iter().map(|s| (s, reason)));
    }
    ended
}

/// The binding a kept subscription is.
fn spec_of(s: &Subscription) -> config::Binding {
    config::Binding {
        server: s.server.clone(),
        event: s.event.clone(),
        into: s.into.clone(),
        arguments: s.arguments.clone(),
        delivery: s.modes(),
        max_per_minute: None,
    }
}

impl Subscriptions for Control {
    fn offers_tools(&self, owner: &str) -> bool {
        self.setup()
            .grants
            .get(owner)
            .is_some_and(|(_, tools)| *tools)
    }

    async fn list(&self, server: &str) -> Result<Vec<EventType>, Refused> {
        let (this, server) = (self.clone(), server.to_owned());
        self.on_runtime(async move { this.list_here(server).await })
            .await
    }

    async fn subscribe(&self, owner: &str, wanted: Wanted) -> Result<Subscription, Refused> {
        let (this, owner) = (self.clone(), owner.to_owned());
        self.on_runtime(this.subscribe_here(owner, wanted)).await
    }

    async fn unsubscribe(&self, owner: &str, id: &str) -> Result<Subscription, Refused> {
        let this = self.clone();
        self.on_runtime(this.unsubscribe_here(owner.to_owned(), id.to_owned()))
            .await
    }

    fn subscriptions(&self, owner: &str) -> Vec<Subscription> {
        let state = self.state();
        state
            .registry
            .subscriptions(owner)
            .into_iter()
            .cloned()
            .collect()
    }
}
