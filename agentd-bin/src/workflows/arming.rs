//! The subscribe starts in force ([`Arming`]): each a resource subscription held as owner
//! `start:<workflow>/<node>`, armed by a task of its own at the engine's start, at each
//! reload or definition that adds one, and again on a server dialed afresh; a change of the
//! resource fires it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::owners::Owners;
use super::parts::{Servers, Unsubscribed};
use super::starts::{self, Key, Resource};
use super::subscribing::until_taken;
use crate::telemetry::catalogue::subscriptions::{self, StartOf};

/// The subscribe starts in force, each with the token that gives up its arming.
#[derive(Debug)]
pub(super) struct Arming {
    instance: String,
    servers: Arc<dyn Servers>,
    armed: BTreeMap<Key, (Resource, CancellationToken)>,
    /// The servers whose starts were said `start.subscribe.no_server` since they were last
    /// connected.
    unreachable: BTreeSet<String>,
    /// The starts' subscribes and releases, in order for each start.
    owners: Owners,
    shutdown: CancellationToken,
}

impl Arming {
    /// No start armed yet; arming on `tasks` until `shutdown`.
    pub(super) fn new(
        instance: &str,
        servers: Arc<dyn Servers>,
        tasks: TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            instance: instance.to_owned(),
            servers,
            armed: BTreeMap::new(),
            unreachable: BTreeSet::new(),
            owners: Owners::new(tasks, shutdown.clone()),
            shutdown,
        }
    }

    /// The subscribe starts in force are made `wanted`: one no longer there is given up
    /// and released, one new is armed (`reason`).
    pub(super) fn arm(&mut self, wanted: BTreeMap<Key, Resource>, reason: &'static str) {
        let gone: Vec<Key> = self
            .armed
            .iter()
            .filter(|(key, (resource, _))| wanted.get(*key) != Some(resource))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some((resource, arming)) = self.armed.remove(&key) {
                arming.cancel();
                let (servers, owner) = (self.servers.clone(), starts::owner(&key));
                let of = owner.clone();
                self.owners.order(&of, async move {
                    let _ = servers
                        .release(&resource.server, &resource.uri, &owner)
                        .await;
                });
            }
        }
        self.owners.prune();
        for (key, resource) in wanted {
            if !self.armed.contains_key(&key) {
                self.arm_one(key, resource, reason);
            }
        }
    }

    /// `server` is connected: its starts are armed again (`reason`) when it was dialed
    /// afresh.
    pub(super) fn connected(&mut self, server: &str, afresh: Option<&'static str>) {
        self.unreachable.remove(server);
        let Some(reason) = afresh else {
            return;
        };
        let on: Vec<(Key, Resource)> = self
            .armed
            .iter()
            .filter(|(_, (r, _))| r.server == server)
            .map(|(key, (r, _))| (key.clone(), r.clone()))
            .collect();
        for (key, resource) in on {
            self.arm_one(key, resource, reason);
        }
    }

    /// A dial of `server` failed: its starts are said not armed, once until it connects.
    pub(super) fn unreachable(&mut self, server: &str) {
        if !self.unreachable.insert(server.to_owned()) {
            return;
        }
        for ((workflow, node), (resource, _)) in &self.armed {
            if resource.server == server {
                subscriptions::start_no_server(StartOf {
                    instance: &self.instance,
                    workflow,
                    node,
                    server,
                    uri: &resource.uri,
                });
            }
        }
    }

    /// The starts a change of `uri` of `server` fires.
    pub(super) fn fired(&self, server: &str, uri: &str) -> Vec<Key> {
        let on = self.armed.iter();
        let on = on.filter(|(_, (r, _))| r.server == server && r.uri == uri);
        on.map(|(key, _)| key.clone()).collect()
    }

    /// Arms subscribe start `key` on a task of its own, once its server is connected: a
    /// server not configured is `start.subscribe.no_server`, one that offers no
    /// subscriptions `start.subscribe.unsupported`; one whose server is known unreachable is
    /// said `start.subscribe.no_server` at once. A subscribe that failed in a way that may
    /// pass (`start.subscribe.fail`) is asked about again until it is taken
    /// (`start.subscribe.armed`).
    fn arm_one(&mut self, key: Key, resource: Resource, reason: &'static str) {
        let arming = self.shutdown.child_token();
        let entry = (resource.clone(), arming.clone());
        if let Some((_, before)) = self.armed.insert(key.clone(), entry) {
            before.cancel();
        }
        if self.unreachable.contains(&resource.server) {
            subscriptions::start_no_server(StartOf {
                instance: &self.instance,
                workflow: &key.0,
                node: &key.1,
                server: &resource.server,
                uri: &resource.uri,
            });
        }
        let (servers, instance) = (self.servers.clone(), self.instance.clone());
        let owner = starts::owner(&key);
        self.owners.order(&owner.clone(), async move {
            let (workflow, node) = &key;
            let Resource { server, uri } = &resource;
            let of = StartOf {
                instance: &instance,
                workflow,
                node,
                server,
                uri,
            };
            let failed = |err: &str| subscriptions::start_fail(of, err);
            let subscribed = tokio::select! {
                subscribed = until_taken(&*servers, server, uri, &owner, failed) => subscribed,
                () = arming.cancelled() => return,
            };
            match subscribed {
                Ok(()) => subscriptions::start_armed(of, reason),
                Err(e @ Unsubscribed::Unsupported) => {
                    subscriptions::start_unsupported(of, &e.to_string());
                }
                Err(Unsubscribed::Unknown) => subscriptions::start_no_server(of),
                // `Gone`, let go by a reload: armed again when the server is held afresh
                // (`until_taken` asks again past the other two).
                Err(Unsubscribed::Gone | Unsubscribed::MayPass(_) | Unsubscribed::Pending) => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::telemetry::log::tests::capture;
    use crate::workflows::tests::{Scripted, events};

    /// A subscribe that failed in a way that may pass (`start.subscribe.fail`), then was not
    /// taken yet, is said armed once it is taken at last.
    #[tokio::test(start_paused = true)]
    async fn a_start_taken_after_a_failure_is_said_armed() {
        let (_guard, lines) = capture();
        let answers = vec![
            Err(Unsubscribed::MayPass("down".into())),
            Err(Unsubscribed::Pending),
            Ok(()),
        ];
        let servers = Arc::new(Scripted::new((true, true), answers));
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let mut arming = Arming::new("t", servers.clone(), tasks.clone(), shutdown);
        let key = ("w".to_owned(), "doc".to_owned());
        let resource = Resource {
            server: "s".into(),
            uri: "demo://x".into(),
        };
        arming.arm(BTreeMap::from([(key, resource)]), "start");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let said: Vec<String> = events(&lines).into_iter().map(|(e, _)| e).collect();
        assert_eq!(said, ["start.subscribe.fail", "start.subscribe.armed"]);
        assert_eq!(servers.calls.lock().unwrap().len(), 3);
        tasks.close();
    }
}
