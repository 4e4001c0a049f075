//! One held server, on a task of its own: dialed at start and again on the join schedule
//! while it is down, its changes watched, its subscriptions asked for (again, on their
//! schedule, when that fails), a lost session dialed again on the session schedule, and
//! closed when told to.
//!
//! Lost sessions take turns: one server is re-dialed at a time, in the order they were lost,
//! so that a server that loses every session at once is not met with every re-dial at once.
//! The re-dial handshake and each subscribe are bounded at [`MANAGEMENT`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcp_negotiate::listen::{self, EndReason, ListenEvent, idle_limit};
use mcp_negotiate::{Catalog, Change, Client, Error, Recovery, Start, Watch};
use tokio::sync::{Mutex, broadcast, mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::task::TaskTracker;

use crate::config::Server;
use crate::daemon::schedule::{Backoff, MANAGEMENT, unanswered};
use crate::daemon::subscriptions::{Answer, Owned, SubscriptionError};
use crate::dial::{self, DialError};
use crate::events::Feed;
use crate::telemetry::catalogue::connections::{self, Dial, Disconnect};
use crate::telemetry::catalogue::{events, listens};
use crate::telemetry::metrics::Metrics;

/// Dialing a server that was down at start: 1 s after the first failure, doubling to 60 s.
const JOIN: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// Re-dialing a server that lost its session: 1 s, doubling to 30 s.
const REDIAL: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// Opening the legacy GET stream again after it failed: the listen schedule, 250 ms
/// doubling to 30 s.
const STREAM: Backoff = Backoff::new(listen::RETRY_FIRST, listen::RETRY_MAX);

/// How many resource updates wait for the slowest owner; a send that fills the channel
/// drops the listen (`mcp.listen.ended`, reason `behind`), whose URIs are read again once it
/// is held again.
const UPDATES: usize = 256;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Why a held server is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Running,
    Shutdown,
    Reload,
}

/// A subscribed resource changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Update {
    pub(crate) server: String,
    pub(crate) uri: String,
}

/// What a server's actor tells the supervisor.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Report {
    /// The server's tools as listed now: at its dial, a re-dial, or a reload's re-list.
    Listed {
        /// The server, by its configured name.
        server: String,
        /// Which actor of that name ([`Handle::id`]): a report of one let go is stale.
        id: u64,
        /// Its catalogue.
        catalog: Arc<Catalog>,
        /// How its connection started: a connection following it starts the same way.
        start: Start,
    },
    /// The server said its tools changed (`notifications/tools/list_changed`): the
    /// supervisor logs it (`mcp.tools_changed`).
    ToolsChanged {
        /// The server, by its configured name.
        server: String,
        /// Which actor of that name ([`Handle::id`]).
        id: u64,
    },
    /// The server could not be dialed: the first failure of its join, at start or after a
    /// reload; it is dialed again on the join schedule, and reports [`Report::Listed`] once
    /// it answers.
    Unreachable {
        /// The server, by its configured name.
        server: String,
        /// Which actor of that name ([`Handle::id`]).
        id: u64,
    },
}

/// What every held server shares.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    instance: Arc<str>,
    metrics: Arc<Metrics>,
    /// Where the actors report; nobody may listen.
    reports: mpsc::UnboundedSender<Report>,
    /// The last actor's id.
    ids: Arc<AtomicU64>,
    /// Whose turn it is to re-dial a lost session (FIFO).
    turn: Arc<Mutex<()>>,
    updates: broadcast::Sender<Update>,
    /// Every server's task, those let go and still closing included.
    tasks: TaskTracker,
}

impl Shared {
    /// Actors whose reports nobody reads.
    #[cfg_attr(not(feature = "demo"), allow(dead_code))]
    pub(crate) fn new(instance: &str, metrics: Arc<Metrics>) -> Self {
        Self::reporting(instance, metrics).0
    }

    /// Actors that report to what this returns.
    pub(crate) fn reporting(
        instance: &str,
        metrics: Arc<Metrics>,
    ) -> (Self, mpsc::UnboundedReceiver<Report>) {
        let (reports, reported) = mpsc::unbounded_channel();
        let shared = Self {
            instance: instance.into(),
            metrics,
            reports,
            ids: Arc::default(),
            turn: Arc::default(),
            updates: broadcast::channel(UPDATES).0,
            tasks: TaskTracker::new(),
        };
        (shared, reported)
    }

    /// The same, but saying it is `instance` from now on: a server started after this is
    /// drained with those started before.
    pub(crate) fn renamed(&self, instance: &str) -> Self {
        Self {
            instance: instance.into(),
            ..self.clone()
        }
    }

    /// Waits for every server's task, those let go before included, to close its
    /// connection, inside `bound` (`lifecycle.drain_timeout`); what is not closed by then
    /// is dropped with the process. Servers are let go first (see [`Handle::stop`]).
    pub(crate) async fn drain(&self, bound: Duration) {
        self.tasks.close();
        let _ = timeout(bound, self.tasks.wait()).await;
    }

    /// Changes of subscribed resources, from every held server, from now on.
    pub(crate) fn updates(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }
}

/// Resolves once the task is told to stop.
async fn stopped(mut stop: watch::Receiver<Stop>) {
    let _ = stop.wait_for(|s| *s != Stop::Running).await;
}

/// An owner's order about a subscription, answered once it was tried.
#[derive(Debug)]
enum Order {
    Subscribe {
        uri: String,
        owner: String,
        answer: oneshot::Sender<Answer>,
    },
    Release {
        uri: String,
        owner: String,
        answer: oneshot::Sender<Answer>,
    },
    /// List the tools again (a reload rebuilds the catalogue).
    Relist,
}

/// What reaches a held server's task from elsewhere: its connection, and the resource
/// subscriptions it keeps by owner. Cloned freely; an order to a task let go is answered
/// [`SubscriptionError::Gone`].
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    orders: mpsc::Sender<Order>,
    connection: watch::Receiver<Option<Arc<Client>>>,
}

impl Reach {
    /// The connection, once the server is connected; `None` when it was let go first.
    pub(crate) async fn connection(&self) -> Option<Arc<Client>> {
        let mut connection = self.connection.clone();
        let held = connection.wait_for(Option::is_some).await.ok()?;
        held.clone()
    }

    /// The connection held now, if the server is connected.
    pub(crate) fn connected(&self) -> Option<Arc<Client>> {
        self.connection.borrow().clone()
    }

    /// `owner` wants `uri`: subscribed once the server is connected, unless another owner
    /// has it subscribed already. The first try's outcome; a try that failed in a way that
    /// may pass is tried again on the subscription schedule, and every subscription is asked
    /// for again on a new session.
    pub(crate) async fn subscribe(&self, uri: &str, owner: &str) -> Answer {
        let (answer, answered) = oneshot::channel();
        let order = Order::Subscribe {
            uri: uri.to_owned(),
            owner: owner.to_owned(),
            answer,
        };
        self.order(order, answered).await
    }

    /// `owner` lets `uri` go: released (`mcp.unsubscribed`) when no owner wants it.
    pub(crate) async fn release(&self, uri: &str, owner: &str) -> Answer {
        let (answer, answered) = oneshot::channel();
        let order = Order::Release {
            uri: uri.to_owned(),
            owner: owner.to_owned(),
            answer,
        };
        self.order(order, answered).await
    }

    async fn order(&self, order: Order, answered: oneshot::Receiver<Answer>) -> Answer {
        self.orders
            .send(order)
            .await
            .map_err(|_| SubscriptionError::Gone)?;
        answered.await.map_err(|_| SubscriptionError::Gone)?
    }
}

/// A held server: its configuration and the task that holds it.
#[derive(Debug)]
pub(crate) struct Handle {
    pub(crate) server: Server,
    stop: watch::Sender<Stop>,
    reach: Reach,
    /// Counts the server's `notifications/events/list_changed`.
    events_changed: watch::Receiver<u64>,
    /// This actor, among every actor of the process.
    pub(crate) id: u64,
}

impl Handle {
    /// Starts holding `server`; `reason` is why it is dialed when it is not the first dial
    /// of the process (`reload`).
    pub(crate) fn start(shared: &Shared, server: Server, reason: Option<Dial>) -> Self {
        let (stop, stopped) = watch::channel(Stop::Running);
        let (connected, connection) = watch::channel(None);
        let (orders, ordered) = mpsc::channel(16);
        let (events_changed_tx, events_changed) = watch::channel(0);
        let id = shared.ids.fetch_add(1, Ordering::Relaxed) + 1;
        shared.tasks.spawn(
            Task {
                shared: shared.clone(),
                id,
                server: server.clone(),
                stop: stopped,
                orders: ordered,
                connected,
                events_changed: events_changed_tx,
            }
            .run(reason),
        );
        Self {
            server,
            stop,
            reach: Reach { orders, connection },
            events_changed,
            id,
        }
    }

    /// What reaches the server's task from elsewhere.
    pub(crate) fn reach(&self) -> Reach {
        self.reach.clone()
    }

    /// What MCP Events reads of this server: its connection and its types' changes.
    pub(crate) fn feed(&self) -> Feed {
        Feed {
            connections: self.reach.connection.clone(),
            changed: self.events_changed.clone(),
        }
    }

    /// Lists the server's tools again once it is connected (a reload rebuilds the
    /// catalogue); an order already waiting is enough.
    pub(crate) fn relist(&self) {
        let _ = self.reach.orders.try_send(Order::Relist);
    }

    /// Lets the server go; its task ends once its connection is closed (see
    /// [`Shared::drain`]).
    pub(crate) fn stop(self, why: Stop) {
        let _ = self.stop.send(why);
    }
}

/// The task holding one server.
struct Task {
    shared: Shared,
    id: u64,
    server: Server,
    stop: watch::Receiver<Stop>,
    orders: mpsc::Receiver<Order>,
    connected: watch::Sender<Option<Arc<Client>>>,
    events_changed: watch::Sender<u64>,
}

impl Task {
    fn running(&self) -> bool {
        *self.stop.borrow() == Stop::Running
    }

    /// Sleeps for `wait`; `false` when told to stop first.
    async fn sleep(&mut self, wait: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            _ = self.stop.changed() => false,
        }
    }

    async fn run(mut self, reason: Option<Dial>) {
        let Some(connection) = self.join(reason).await else {
            return;
        };
        self.connected.send_replace(Some(connection.clone()));
        self.listed(&connection);
        self.watch(&connection).await;
        if *self.stop.borrow() == Stop::Reload {
            let instance = &self.shared.instance;
            connections::disconnect(instance, &self.server.name, Disconnect::Reload);
        }
        let _ = connection.close().await;
    }

    /// Dials until the server answers (on the join schedule after a failure), or until told
    /// to stop.
    async fn join(&mut self, reason: Option<Dial>) -> Option<Arc<Client>> {
        let instance = self.shared.instance.clone();
        let mut backoff = JOIN;
        let mut joining = false;
        loop {
            let why = reason.or(joining.then_some(Dial::Joined));
            let dialed = tokio::select! {
                dialed = dial::connect(&instance, &self.server, Recovery::ByOwner) => dialed,
                _ = self.stop.changed() => return None,
            };
            match dialed {
                Ok(connection) => {
                    dial::connected(&instance, &self.server.name, &connection, why);
                    if joining {
                        connections::joined(&instance, &self.server.name);
                    }
                    return Some(Arc::new(connection));
                }
                // It answered the handshake; its tools could not be listed.
                Err(e @ DialError::Catalogue(_)) if joining => {
                    connections::join_refused(&instance, &self.server.name, &e.to_string());
                }
                Err(e) => dial::failed(
                    &instance,
                    &self.server.name,
                    &e.to_string(),
                    why,
                    Some(&self.shared.metrics),
                ),
            }
            if !joining {
                let _ = self.shared.reports.send(Report::Unreachable {
                    server: self.server.name.clone(),
                    id: self.id,
                });
            }
            joining = true;
            if !self.sleep(backoff.fail()).await {
                return None;
            }
        }
    }

    /// Watches the connection until told to stop: changes logged and passed on,
    /// subscriptions asked for, a lost session dialed again.
    async fn watch(&mut self, connection: &Arc<Client>) {
        let mut watch = Watch::new(connection.clone());
        let mut pushing = true;
        let mut stream = STREAM;
        let mut stream_logged = false;
        // When the failed stream is opened again: meanwhile the task takes orders.
        let mut reopen_at: Option<Instant> = None;
        // The updates channel filled: the listen was dropped, not again until it has room.
        let mut behind = false;
        let mut owned = Owned::new(&self.shared.instance, &self.server.name);
        while self.running() {
            let retry_at = owned.retry_at();
            tokio::select! {
                change = watch.next(), if pushing && reopen_at.is_none() => match change {
                    Ok(Some(change)) => {
                        stream.reset();
                        stream_logged = false;
                        self.on_change(change);
                        // The slowest owner is about to lose updates.
                        match self.shared.updates.len() >= UPDATES {
                            true if !std::mem::replace(&mut behind, true) => watch.fell_behind(),
                            true => {}
                            false => behind = false,
                        }
                    }
                    Ok(None) => pushing = false,
                    // Met by the stream; `session_lost` below takes it.
                    Err(Error::Transport(mcp_transport::Error::SessionLost)) => {}
                    Err(e) => {
                        let wait = stream.fail();
                        if !std::mem::replace(&mut stream_logged, true) {
                            let (instance, name) = (&self.shared.instance, &self.server.name);
                            listens::unavailable(instance, name, &e.to_string(), millis(wait));
                        }
                        reopen_at = Some(Instant::now() + wait);
                    }
                },
                () = sleep_until(reopen_at.unwrap_or_else(Instant::now)), if reopen_at.is_some() => {
                    reopen_at = None;
                }
                Some(order) = self.orders.recv() => match order {
                    Order::Subscribe { uri, owner, answer } => {
                        let _ = answer.send(owned.subscribe(&mut watch, &uri, &owner).await);
                    }
                    Order::Release { uri, owner, answer } => {
                        let _ = answer.send(owned.release(&mut watch, &uri, &owner).await);
                    }
                    Order::Relist => {
                        let stop = self.stop.clone();
                        tokio::select! {
                            () = self.relist(connection) => {}
                            () = stopped(stop) => {}
                        }
                    }
                },
                () = connection.session_lost() => {
                    if !self.redial(connection).await {
                        return;
                    }
                    // A new session: its stream is opened at once, and a failure logged anew.
                    reopen_at = None;
                    stream.reset();
                    stream_logged = false;
                    owned.restore(&mut watch).await;
                }
                () = sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    owned.retry(&mut watch).await;
                }
                _ = self.stop.changed() => {}
            }
        }
    }

    /// The session is lost: `mcp.disconnect`, then dialed again on the session schedule, one
    /// server at a time. `false` when told to stop first.
    async fn redial(&mut self, connection: &Client) -> bool {
        let instance = self.shared.instance.clone();
        let name = self.server.name.clone();
        connections::disconnect(&instance, &name, Disconnect::SessionLost);
        let mut backoff = REDIAL;
        loop {
            if !self.sleep(backoff.fail()).await {
                return false;
            }
            let turn = self.shared.turn.clone();
            let turn = tokio::select! {
                turn = turn.lock() => turn,
                _ = self.stop.changed() => return false,
            };
            let redialed = timeout(MANAGEMENT, connection.redial()).await;
            // One server at a time re-dials; the listing after it holds up no other.
            drop(turn);
            let err = match redialed {
                Ok(Ok(())) => {
                    // The same connection, dialed again: its watchers decide afresh.
                    self.connected.send_modify(|_| {});
                    // The server may have come back with other tools: `mcp.connect` gives the
                    // count listed again (a failed listing keeps the catalogue it had). A
                    // shutdown meanwhile abandons the listing.
                    if connection.capabilities().tools() {
                        let stop = self.stop.clone();
                        tokio::select! {
                            _ = self.refresh(connection) => {}
                            () = stopped(stop) => return false,
                        }
                    }
                    dial::connected(&instance, &name, connection, Some(Dial::SessionLost));
                    self.listed(connection);
                    return true;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => unanswered(),
            };
            dial::failed(
                &instance,
                &name,
                &err,
                Some(Dial::SessionLost),
                Some(&self.shared.metrics),
            );
        }
    }

    /// Lists the tools again: the catalogue as the server has it now, and the tools it left
    /// out (`mcp.tool.dropped`).
    async fn relist(&self, connection: &Client) {
        if let Some(catalog) = self.refresh(connection).await {
            dial::dropped(&self.shared.instance, &self.server.name, &catalog);
            self.listed(connection);
        }
    }

    /// Tells the supervisor the server's tools as listed now.
    fn listed(&self, connection: &Client) {
        let _ = self.shared.reports.send(Report::Listed {
            server: self.server.name.clone(),
            id: self.id,
            catalog: connection.catalog(),
            start: Start::Like(connection.reached_by()),
        });
    }

    /// Lists the tools again, or keeps the current catalogue when that fails
    /// (`mcp.tools_refresh_failed`).
    async fn refresh(&self, connection: &Client) -> Option<Arc<Catalog>> {
        match connection.refresh_tools().await {
            Ok(catalog) => Some(catalog),
            Err(e) => {
                let (instance, name) = (&self.shared.instance, &self.server.name);
                connections::tools_refresh_failed(instance, name, &e.to_string());
                None
            }
        }
    }

    fn on_change(&self, change: Change) {
        let (instance, name) = (&*self.shared.instance, self.server.name.as_str());
        match change {
            // Logged by the supervisor once the subagents are told.
            Change::ToolsChanged => {
                let _ = self.shared.reports.send(Report::ToolsChanged {
                    server: self.server.name.clone(),
                    id: self.id,
                });
            }
            Change::ResourceUpdated { uri } => {
                let _ = self.shared.updates.send(Update {
                    server: self.server.name.clone(),
                    uri,
                });
            }
            Change::Listen(listen) => self.on_listen(listen),
            Change::EventsChanged => {
                events::list_changed(instance, name);
                self.events_changed.send_modify(|n| *n += 1);
            }
            _ => {}
        }
    }

    /// The reference's Listens table.
    fn on_listen(&self, listen: ListenEvent) {
        let (instance, name) = (&*self.shared.instance, self.server.name.as_str());
        match listen {
            ListenEvent::Ended {
                reason: EndReason::Idle,
                retry_ms,
            } => listens::idle(instance, name, idle_limit(self.server.timeout), retry_ms),
            ListenEvent::Ended { reason, retry_ms } => {
                listens::ended(instance, name, reason, retry_ms);
            }
            ListenEvent::Resumed => listens::resumed(instance, name),
            ListenEvent::Narrowed { dropped } => listens::narrowed(instance, name, &dropped),
            ListenEvent::Unavailable { reason, retry_ms } => {
                listens::unavailable(instance, name, &reason, retry_ms);
            }
            ListenEvent::FlagsRefused { flags } => listens::flags_refused(instance, name, &flags),
            // Logged once; never asked for again, so there is no retry.
            ListenEvent::Refused { code } => listens::refused(instance, name, code),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use mcp_reference_server::{Fault, Options, ReferenceServer, Times};

    use super::*;

    fn server_config(url: String) -> Server {
        Server {
            name: "old".into(),
            url,
            timeout: Duration::from_secs(5),
            headers: Vec::new(),
            tags: Default::default(),
        }
    }

    /// A legacy server without a GET stream loses the session: the next request meets the
    /// 404, the session is dialed again on its schedule, and the subscription it failed to
    /// make is asked for on the new session.
    #[tokio::test]
    async fn a_loss_met_by_a_request_is_dialed_again_and_subscriptions_restored() {
        let mut options = Options::default();
        options.modern = false;
        options.get_stream = false;
        let server = ReferenceServer::start(options).await;
        let shared = Shared::new("t", Arc::default());
        let held = Handle::start(&shared, server_config(server.url()), None);
        held.reach().connection().await.expect("connected");
        assert!(held.reach().subscribe("demo://counter", "a").await.is_ok());
        server.expire_sessions();
        assert!(
            held.reach().subscribe("demo://other", "b").await.is_err(),
            "met the 404"
        );
        let sessions = || {
            let log = server.log();
            let subscribed: Vec<(String, String)> = log
                .iter()
                .filter(|l| l.method.as_deref() == Some("resources/subscribe"))
                .map(|l| {
                    let uri = l.body["params"]["uri"].as_str().unwrap_or("").to_owned();
                    (l.header("mcp-session-id").unwrap_or("").to_owned(), uri)
                })
                .collect();
            subscribed
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all = sessions();
            let first = all[0].0.clone();
            let restored: Vec<&str> = all
                .iter()
                .filter(|(s, _)| *s != first)
                .map(|(_, u)| u.as_str())
                .collect();
            if restored.contains(&"demo://counter") && restored.contains(&"demo://other") {
                break;
            }
            assert!(Instant::now() < deadline, "{all:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let initializes = server
            .methods()
            .iter()
            .filter(|m| *m == "initialize")
            .count();
        assert_eq!(initializes, 2);
        held.stop(Stop::Shutdown);
    }

    /// When the server received each request of `method`.
    fn received(server: &ReferenceServer, method: &str) -> Vec<Instant> {
        let log = server.log();
        let of = log.iter().filter(|l| l.method.as_deref() == Some(method));
        of.map(|l| l.at).collect()
    }

    /// In virtual time: a server down at the first dial is dialed again 1 s later, where its
    /// tools cannot be listed (the join refused), and again 2 s after that, when it joins.
    #[tokio::test(start_paused = true)]
    async fn a_late_server_is_dialed_again_on_the_join_schedule() {
        let server = ReferenceServer::start(Options::default()).await;
        server.script("server/discover", Fault::Status(503, None), Times::Once);
        server.script("initialize", Fault::Status(503, None), Times::Once);
        let unlisted = Fault::RpcError {
            status: 200,
            code: -32603,
            message: "catalogue offline".into(),
            data: None,
        };
        server.script("tools/list", unlisted, Times::Once);
        let shared = Shared::new("t", Arc::default());
        let held = Handle::start(&shared, server_config(server.url()), None);
        timeout(Duration::from_secs(60), held.reach().connection())
            .await
            .expect("joined")
            .expect("connected");
        let dials = received(&server, "server/discover");
        assert_eq!(dials.len(), 3, "{dials:?}");
        assert_eq!(
            dials[1] - dials[0],
            Duration::from_secs(1),
            "after the failure"
        );
        assert_eq!(
            dials[2] - dials[1],
            Duration::from_secs(2),
            "after the refusal"
        );
        held.stop(Stop::Shutdown);
    }

    /// In virtual time: a lost session is dialed again 1 s after the loss is met; that
    /// re-dial is left unanswered and cut at its 2 s bound, and the next one is made 2 s
    /// later.
    #[tokio::test(start_paused = true)]
    async fn a_lost_session_is_dialed_again_on_the_session_schedule() {
        let mut options = Options::default();
        options.modern = false;
        options.keepalive = Some(Duration::from_millis(100));
        let server = ReferenceServer::start(options).await;
        let shared = Shared::new("t", Arc::default());
        let held = Handle::start(&shared, server_config(server.url()), None);
        held.reach().connection().await.expect("connected");
        let attached = async {
            while server.get_streams() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        timeout(Duration::from_secs(60), attached)
            .await
            .expect("the GET stream attached");
        let mut connections = held.feed().connections;
        connections.borrow_and_update();
        let unanswered = Fault::Silence(Duration::from_secs(60));
        server.script("initialize", unanswered, Times::Once);
        let ended = Instant::now();
        server.expire_sessions();
        timeout(Duration::from_secs(60), connections.changed())
            .await
            .expect("dialed again")
            .expect("held");
        let dials = received(&server, "initialize");
        assert_eq!(dials.len(), 3, "{dials:?}");
        // The loss is met by the GET stream opened again on the ended session (404).
        let log = server.log();
        let gets = log.iter().filter(|l| l.http == http::Method::GET);
        let met = gets.map(|l| l.at).filter(|at| *at >= ended).min();
        assert_eq!(
            Some(dials[1] - Duration::from_secs(1)),
            met,
            "after the loss"
        );
        assert_eq!(
            dials[2] - dials[1],
            MANAGEMENT + Duration::from_secs(2),
            "cut at the bound, then the next step"
        );
        held.stop(Stop::Shutdown);
    }

    /// Polls `until` on tokio's clock, in 1 ms steps, for at most a (virtual) minute.
    async fn wait_for(what: &str, mut until: impl FnMut() -> bool) {
        let waited = timeout(Duration::from_secs(60), async {
            while !until() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        waited.await.unwrap_or_else(|_| panic!("{what}"));
    }

    /// agentd's `mcp.` lines captured so far, as JSON.
    fn mcp_lines(written: &std::sync::Mutex<Vec<String>>) -> Vec<serde_json::Value> {
        let written = written.lock().unwrap();
        let lines = written.iter().map(|l| serde_json::from_str(l).unwrap());
        lines
            .filter(|l: &serde_json::Value| {
                l["event"].as_str().is_some_and(|e| e.starts_with("mcp."))
            })
            .collect()
    }

    /// In virtual time: resource updates nobody reads fill the channel; the listen is
    /// dropped once (`mcp.listen.ended`, reason `behind`) and opened again.
    #[tokio::test(start_paused = true)]
    async fn an_owner_that_falls_behind_drops_the_listen_once() {
        let server = ReferenceServer::start(Options::default()).await;
        // A test on one thread: the actor's lines are this thread's.
        let (_guard, written) = crate::telemetry::log::tests::capture();
        let shared = Shared::new("t", Arc::default());
        let _unread = shared.updates();
        let held = Handle::start(&shared, server_config(server.url()), None);
        held.reach().connection().await.expect("connected");
        assert!(held.reach().subscribe("demo://counter", "a").await.is_ok());
        wait_for("listening", || server.listening("demo://counter") > 0).await;
        let listens = || received(&server, "subscriptions/listen").len();
        let opened = listens();
        for _ in 0..UPDATES + 8 {
            server.touch("demo://counter").await;
        }
        wait_for("ended", || {
            let lines = mcp_lines(&written);
            lines.iter().any(|l| l["event"] == "mcp.listen.ended")
        })
        .await;
        wait_for("opened again", || {
            listens() > opened && server.listening("demo://counter") > 0
        })
        .await;
        // Held again: the URI read again meets a channel still full, and ends nothing more.
        wait_for("resumed", || {
            let lines = mcp_lines(&written);
            lines.iter().any(|l| l["event"] == "mcp.listen.resumed")
        })
        .await;
        let lines = mcp_lines(&written);
        let ended: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|l| l["event"] == "mcp.listen.ended")
            .collect();
        assert_eq!(ended.len(), 1, "{lines:?}");
        assert_eq!(ended[0]["level"], "warn");
        assert_eq!(ended[0]["reason"], "behind");
        assert_eq!(ended[0]["server"], "old");
        assert_eq!(ended[0]["retry_ms"], 250);
        held.stop(Stop::Shutdown);
    }

    /// In virtual time: while the failed GET stream waits to be opened again, a subscribe is
    /// answered at once.
    #[tokio::test(start_paused = true)]
    async fn a_failed_get_stream_waits_its_reopen_without_holding_orders() {
        let mut options = Options::default();
        options.modern = false;
        let server = ReferenceServer::start(options).await;
        server.script("GET", Fault::Status(503, None), Times::Always);
        let (_guard, written) = crate::telemetry::log::tests::capture();
        let shared = Shared::new("t", Arc::default());
        let held = Handle::start(&shared, server_config(server.url()), None);
        held.reach().connection().await.expect("connected");
        let unavailable = || {
            let lines = mcp_lines(&written);
            lines
                .into_iter()
                .find(|l| l["event"] == "mcp.listen.unavailable")
        };
        wait_for("the stream failed", || unavailable().is_some()).await;
        let gets = || {
            let log = server.log();
            let gets = log.iter().filter(|l| l.http == http::Method::GET);
            gets.map(|l| l.at).collect::<Vec<_>>()
        };
        let failed = gets();
        let retry = Duration::from_millis(unavailable().unwrap()["retry_ms"].as_u64().unwrap());
        assert_eq!(retry, listen::RETRY_FIRST);
        assert!(held.reach().subscribe("demo://counter", "a").await.is_ok());
        let subscribed = received(&server, "resources/subscribe");
        assert_eq!(subscribed.len(), 1);
        assert!(
            subscribed[0] < failed[0] + retry,
            "answered before the reopen"
        );
        assert_eq!(gets(), failed, "the reopen still waits");
        wait_for("opened again", || gets().len() > failed.len()).await;
        assert!(gets()[1] - failed[0] >= retry, "on its schedule");
        held.stop(Stop::Shutdown);
    }

    #[test]
    fn schedules_double_to_their_ceilings() {
        let secs = |b: &mut Backoff, n: usize| -> Vec<u64> {
            (0..n).map(|_| b.fail().as_millis() as u64).collect()
        };
        assert_eq!(
            secs(&mut JOIN.clone(), 8),
            [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]
        );
        assert_eq!(
            secs(&mut REDIAL.clone(), 7),
            [1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        let mut stream = STREAM;
        assert_eq!(
            secs(&mut stream, 9),
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        stream.reset();
        assert_eq!(stream.fail(), Duration::from_millis(250));
    }
}
