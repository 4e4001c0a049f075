//! The subscription orders of each owner, done in the order they were made: a release never
//! overtakes the subscribe it undoes, though each runs on a task of its own (a subscribe
//! waits for its server to connect; a release does not).

use std::collections::BTreeMap;
use std::future::Future;

use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Each owner's last order, as the end its next order waits for.
#[derive(Debug)]
pub(super) struct Owners {
    last: BTreeMap<String, oneshot::Receiver<()>>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
}

impl Owners {
    /// Orders run on `tasks`, given up at `shutdown`.
    pub(super) fn new(tasks: TaskTracker, shutdown: CancellationToken) -> Self {
        Self {
            last: BTreeMap::new(),
            tasks,
            shutdown,
        }
    }

    /// Runs `order` of `owner` on a task of its own, once the orders `owner` made before it
    /// are done.
    pub(super) fn order(&mut self, owner: &str, order: impl Future<Output = ()> + Send + 'static) {
        let (done, ended) = oneshot::channel::<()>();
        let before = self.last.insert(owner.to_owned(), ended);
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move {
            // Dropped once this order is done: the next one goes.
            let _done = done;
            if let Some(before) = before {
                let _ = before.await;
            }
            tokio::select! {
                () = order => {}
                () = shutdown.cancelled() => {}
            }
        });
    }

    /// The owners whose orders are all done are forgotten (an owner that orders again
    /// starts a queue afresh).
    pub(super) fn prune(&mut self) {
        self.last
            .retain(|_, ended| !matches!(ended.try_recv(), Err(TryRecvError::Closed)));
    }

    /// How many owners have orders under way.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.last.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::Notify;

    use super::*;

    /// A subscribe held up (its server not connected yet) and the release made after it: the
    /// release waits for it, while another owner's order does not.
    #[tokio::test]
    async fn a_release_waits_for_the_subscribe_made_before_it() {
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let mut owners = Owners::new(tasks.clone(), shutdown);
        let done = Arc::new(Mutex::new(Vec::new()));
        let connected = Arc::new(Notify::new());
        let (d, c) = (done.clone(), connected.clone());
        owners.order("workflow:r1", async move {
            c.notified().await;
            d.lock().unwrap().push("subscribe r1");
        });
        let d = done.clone();
        owners.order("workflow:r1", async move {
            d.lock().unwrap().push("release r1");
        });
        let d = done.clone();
        owners.order("workflow:r2", async move {
            d.lock().unwrap().push("release r2");
        });
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*done.lock().unwrap(), ["release r2"]);
        connected.notify_one();
        tasks.close();
        tasks.wait().await;
        assert_eq!(
            *done.lock().unwrap(),
            ["release r2", "subscribe r1", "release r1"]
        );
        owners.prune();
        assert_eq!(owners.len(), 0);
    }
}
