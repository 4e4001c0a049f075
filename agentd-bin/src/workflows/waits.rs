//! The resources of parked `wait {on: resource}` steps ([`Waits`]): each subscribed as owner
//! `workflow:<run>` by a task of its own that tells back a failure that will not pass, and
//! released when the wait lets it go; subscribed again after a restart or on a server dialed
//! afresh (`wait.resubscribed`, `wait.resubscribe.fail`).
//!
//! At a restart no server is connected yet: whether a wait stays parked (its server
//! configured but not connected, `wait.resubscribe.fail` at error with `parked`) is decided
//! at its server's first connect or first failed dial, not before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentd_tools::workflow::run::{Failure, Watched};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::orders::Outcome;
use super::owners::Owners;
use super::parts::{Servers, Unsubscribed};
use super::subscribing::until_taken;
use crate::telemetry::catalogue::subscriptions::{self, Stuck};

/// The owner of a run's subscriptions on its servers.
fn owner(run: &str) -> String {
    format!("workflow:{run}")
}

/// The subscriptions of the parked waits.
#[derive(Debug)]
pub(super) struct Waits {
    instance: String,
    servers: Arc<dyn Servers>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    /// The subscribe of each run's wait under way: given up when the wait lets its resource
    /// go first, or the run is set back.
    subscribing: BTreeMap<String, CancellationToken>,
    /// The runs' subscribes and releases, in order for each run.
    owners: Owners,
    /// The servers connected, or whose dial failed, since the engine started.
    heard: BTreeSet<String>,
    /// The waits parked again before their server was heard from, by server and run: the
    /// URI and the reason.
    undecided: BTreeMap<String, BTreeMap<String, (String, &'static str)>>,
    shutdown: CancellationToken,
}

impl Waits {
    /// No wait subscribed yet: subscribing on `tasks` until `shutdown`, failures told to
    /// `outcomes`.
    pub(super) fn new(
        instance: &str,
        servers: Arc<dyn Servers>,
        outcomes: mpsc::UnboundedSender<Outcome>,
        tasks: TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            instance: instance.to_owned(),
            servers,
            outcomes,
            subscribing: BTreeMap::new(),
            owners: Owners::new(tasks, shutdown.clone()),
            heard: BTreeSet::new(),
            undecided: BTreeMap::new(),
            shutdown,
        }
    }

    /// Subscribes `watched` for step `step` of run `id` on a task of its own: a failure that
    /// will not pass fails the wait. `reason` when it is subscribed again (logged).
    pub(super) fn subscribe(
        &mut self,
        id: &str,
        step: usize,
        attempt: u32,
        watched: Watched,
        reason: Option<&'static str>,
    ) {
        let given_up = self.shutdown.child_token();
        if let Some(before) = self.subscribing.insert(id.to_owned(), given_up.clone()) {
            before.cancel();
        }
        if let Some(reason) = reason {
            match self.heard.contains(&watched.server) {
                true => self.parked(&watched.server, &watched.uri, reason),
                false => {
                    let on = self.undecided.entry(watched.server.clone()).or_default();
                    on.insert(id.to_owned(), (watched.uri.clone(), reason));
                }
            }
        }
        let servers = self.servers.clone();
        let (told, run, instance) = (self.outcomes.clone(), id.to_owned(), self.instance.clone());
        self.owners.order(&owner(id), async move {
            let Watched { server, uri, .. } = &watched;
            let owner = owner(&run);
            let failed = |err: &str| {
                if let Some(reason) = reason {
                    subscriptions::wait_resubscribe_fail(&instance, server, uri, reason, err);
                }
            };
            let subscribed = tokio::select! {
                subscribed = until_taken(&*servers, server, uri, &owner, failed) => subscribed,
                () = given_up.cancelled() => return,
            };
            let failure = match subscribed {
                Ok(()) => {
                    if let Some(reason) = reason {
                        subscriptions::wait_resubscribed(&instance, server, uri, reason);
                    }
                    return;
                }
                Err(e @ (Unsubscribed::Unknown | Unsubscribed::Unsupported)) => {
                    if let Some(reason) = reason {
                        let stuck = Stuck::Failed(1);
                        let err = e.to_string();
                        subscriptions::wait_resubscribe_stuck(
                            &instance, server, uri, reason, &err, stuck,
                        );
                    }
                    let code = match e {
                        Unsubscribed::Unknown => "unknown_server",
                        _ => "unsupported",
                    };
                    Failure::new(code, e.to_string())
                }
                // `Gone`, let go by a reload: subscribed again when the server is held afresh
                // (`until_taken` asks again past the other two).
                Err(Unsubscribed::Gone | Unsubscribed::MayPass(_) | Unsubscribed::Pending) => {
                    return;
                }
            };
            let _ = told.send(Outcome {
                run,
                step,
                attempt,
                outcome: Err(failure),
            });
        });
    }

    /// Releases `watched` of run `id` on a task of its own, once its subscribe is done or
    /// given up (a failure is the server task's to log and try again).
    pub(super) fn release(&mut self, id: &str, watched: Watched) {
        self.forget(id, true);
        let servers = self.servers.clone();
        let owner = owner(id);
        self.owners.order(&owner.clone(), async move {
            let _ = servers.release(&watched.server, &watched.uri, &owner).await;
        });
    }

    /// Run `id` left the engine: its wait's subscribe given up when `give_up` (the run is
    /// set back), left to end otherwise (the run ended, its release ordered after it).
    pub(super) fn forget(&mut self, id: &str, give_up: bool) {
        if let Some(subscribing) = self.subscribing.remove(id)
            && give_up
        {
            subscribing.cancel();
        }
        for on in self.undecided.values_mut() {
            on.remove(id);
        }
        self.owners.prune();
    }

    /// `server` is connected: its waits parked at the restart are subscribed as it comes.
    pub(super) fn connected(&mut self, server: &str) {
        self.heard.insert(server.to_owned());
        self.undecided.remove(server);
    }

    /// A dial of `server` failed: its waits parked at the restart stay parked (logged).
    pub(super) fn unreachable(&mut self, server: &str) {
        self.heard.insert(server.to_owned());
        for (uri, reason) in self
            .undecided
            .remove(server)
            .unwrap_or_default()
            .into_values()
        {
            self.parked(server, &uri, reason);
        }
    }

    /// `wait.resubscribe.fail` (error, parked) when a parked wait's server is configured but
    /// not connected: it is subscribed once the server is.
    fn parked(&self, server: &str, uri: &str, reason: &str) {
        let (configured, connected) = self.servers.state(server);
        if configured && !connected {
            let err = "the server is not connected";
            let stuck = Stuck::Parked(1);
            subscriptions::wait_resubscribe_stuck(&self.instance, server, uri, reason, err, stuck);
        }
    }
}

#[cfg(test)]
mod tests {
    use agentd_tools::workflow::run::Watched;

    use super::*;
    use crate::telemetry::log::tests::capture;
    use crate::workflows::tests::{Scripted, events};

    fn watched() -> Watched {
        serde_json::from_value(serde_json::json!({"server": "s", "uri": "demo://x"})).unwrap()
    }

    fn waits(servers: Arc<Scripted>) -> Waits {
        let (outcomes, _) = mpsc::unbounded_channel();
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        Waits::new("t", servers, outcomes, tasks, shutdown)
    }

    /// At a restart, a wait parked on a server not connected yet is not said parked before
    /// the server's first dial: not when it connects, and at error when that dial fails.
    #[tokio::test]
    async fn a_wait_parked_at_a_restart_is_said_parked_only_once_its_server_failed() {
        let (_guard, lines) = capture();
        let servers = Arc::new(Scripted::new((true, false), Vec::new()));
        let mut connecting = waits(servers.clone());
        connecting.subscribe("r1", 0, 1, watched(), Some("restart"));
        assert_eq!(events(&lines), []);
        connecting.connected("s");
        assert_eq!(events(&lines), []);

        let mut failing = waits(servers);
        failing.subscribe("r1", 0, 1, watched(), Some("restart"));
        failing.subscribe("r2", 0, 1, watched(), Some("restart"));
        failing.forget("r2", true);
        assert_eq!(events(&lines), []);
        failing.unreachable("s");
        let parked = ("wait.resubscribe.fail".to_owned(), "error".to_owned());
        assert_eq!(events(&lines), std::slice::from_ref(&parked));
        // Heard from: the next is decided at once.
        failing.subscribe("r3", 0, 1, watched(), Some("reload"));
        assert_eq!(events(&lines), [parked.clone(), parked]);
    }
}
