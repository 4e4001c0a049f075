//! Subagents: child loops of the agent, each working on a goal in a conversation of its own
//! (`subagent:<id>`, kept in the store as every conversation is), with the tools it is
//! given, over connections of its own ([`session`]), in a task of its own ([`child`]).
//!
//! [`Subagents`] is what the own tools act on (`agentd_tools::subagent::Subagents`): the
//! store keeps each subagent, where it stands and its run's deadline
//! ([`crate::store::subagents`]); the tasks run them. A subagent runs in the agent attached
//! ([`Subagents::attach`], at the agent's start): without one, `subagent.run` and
//! `subagent.send` answer `no_agent`. When the agent stops (a reload that changes
//! `[model]`, the drain) its subagents' tasks end, and those running fail ("the agent
//! stopped"); at the daemon's start, those a last run left running fail ("the daemon stopped
//! under it"). Sent to again, a subagent runs in the agent then attached.
//!
//! `run`, `send`, `kill` and `retire` are taken one at a time, so that what the store says
//! and what the tasks do stay one: a kill writes `killed` and cancels the run's token; a
//! message to a settled subagent writes `running` and renews it.
//!
//! The supervisor tells [`Subagents::tools_changed`] each server that said its tools
//! changed: each subagent holding it lists them again at its next turn boundary.

pub(crate) mod child;
pub(crate) mod session;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use agentd_tools::Error;
use agentd_tools::subagent::{Spec, Subagent};

use self::child::{Child, Runs};
use crate::clock::wall_ms;
use crate::store::{self, Store, subagents};

/// Why a subagent left running by the last run of the daemon failed.
const DAEMON_STOPPED: &str = "the daemon stopped under it";

/// Why a subagent running when the agent stopped failed.
const AGENT_STOPPED: &str = "the agent stopped";

/// The daemon's subagents; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Subagents {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// The agent they run in, when one runs.
    host: Mutex<Option<Arc<dyn Runs>>>,
    /// The tasks, by subagent.
    children: Mutex<BTreeMap<String, Arc<Child>>>,
    /// Taken by `run`, `send`, `kill` and `retire`.
    control: tokio::sync::Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Subagents {
    /// The subagents kept in `store`; those a last run of the daemon left running fail.
    pub(crate) async fn start(store: Store) -> Result<Self, store::Error> {
        store.subagents_stopped(DAEMON_STOPPED).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                host: Mutex::default(),
                children: Mutex::default(),
                control: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Subagents run in `host` from now on.
    pub(crate) fn attach(&self, host: Arc<dyn Runs>) {
        *lock(&self.inner.host) = Some(host);
    }

    /// The agent stopped: its subagents' tasks end (as the agent's do), and those running
    /// fail.
    pub(crate) fn detach(&self) {
        lock(&self.inner.host).take();
        for child in std::mem::take(&mut *lock(&self.inner.children)).into_values() {
            child.end();
        }
        // Sent now; nobody waits for the answer.
        drop(self.inner.store.subagents_stopped(AGENT_STOPPED));
    }

    /// `server` said its tools changed: the subagents holding it list them again at their
    /// next turn boundary.
    pub(crate) fn tools_changed(&self, server: &str) {
        for child in lock(&self.inner.children).values() {
            child.changed(server);
        }
    }

    fn host(&self) -> Result<Arc<dyn Runs>, Error> {
        lock(&self.inner.host).clone().ok_or(Error::NoAgent)
    }

    /// Subagent `id`'s task in `host`, started when it has none.
    fn child(&self, host: &Arc<dyn Runs>, id: &str) -> Arc<Child> {
        let mut children = lock(&self.inner.children);
        let child = children.entry(id.to_owned()).or_insert_with(|| {
            let child = Arc::new(Child::default());
            let store = self.inner.store.clone();
            host.clone().start(store, id.to_owned(), child.clone());
            child
        });
        child.clone()
    }
}

impl agentd_tools::subagent::Subagents for Subagents {
    async fn run(&self, parent: &str, spec: Spec) -> Result<String, Error> {
        let host = self.host()?;
        let setup = host.setup();
        for server in spec.servers.iter().flatten() {
            if !setup.servers.contains_key(server) {
                return Err(Error::NotConnected {
                    server: server.clone(),
                });
            }
        }
        let run = spec.deadline.unwrap_or(setup.turn_timeout);
        let kept = subagents::Spec {
            tools: spec.tools,
            servers: spec.servers,
        };
        let _control = self.inner.control.lock().await;
        let ran = self
            .inner
            .store
            .subagent_run(parent, &spec.goal, kept, run, wall_ms());
        let id = ran.await.map_err(|e| e.into_tool("subagent.run", ""))?;
        self.child(&host, &id).wake();
        Ok(id)
    }

    async fn send(&self, id: &str, from: &str, text: &str) -> Result<Subagent, Error> {
        let host = self.host()?;
        let _control = self.inner.control.lock().await;
        let sent = self.inner.store.subagent_send(id, from, text, wall_ms());
        let (record, again) = sent.await.map_err(|e| e.into_tool("subagent.send", id))?;
        let child = self.child(&host, id);
        if again {
            child.renew();
        }
        child.wake();
        Ok(record.status)
    }

    async fn status(&self, id: &str) -> Result<Subagent, Error> {
        let found = self.inner.store.subagent(id).await;
        let found = found.map_err(|e| e.into_tool("subagent.status", id))?;
        Ok(found.status)
    }

    async fn list(&self, parent: Option<&str>) -> Result<Vec<Subagent>, Error> {
        let listed = self.inner.store.subagents(parent).await;
        listed.map_err(|e| e.into_tool("subagent.list", ""))
    }

    async fn kill(&self, id: &str) -> Result<Subagent, Error> {
        let _control = self.inner.control.lock().await;
        let killed = self.inner.store.subagent_kill(id).await;
        let (record, _) = killed.map_err(|e| e.into_tool("subagent.kill", id))?;
        // Its turn under way is dropped, its connections closed, running or not.
        if let Some(child) = lock(&self.inner.children).get(id) {
            child.kill();
        }
        Ok(record.status)
    }

    async fn retire(&self, id: &str) -> Result<Subagent, Error> {
        let _control = self.inner.control.lock().await;
        let retired = self.inner.store.subagent_retire(id).await;
        let record = retired.map_err(|e| e.into_tool("subagent.retire", id))?;
        if let Some(child) = lock(&self.inner.children).remove(id) {
            child.end();
        }
        Ok(record.status)
    }
}
