//! The resource subscriptions a held server keeps for its owners: the demo's, the
//! instruction's, workflow starts' and waits'.
//!
//! A URI is subscribed while at least one owner wants it, and released (`mcp.unsubscribed`,
//! reason `unowned`) when the last one lets it go. Each subscribe and unsubscribe is bounded
//! at [`MANAGEMENT`]; one that failed in a way that may pass is tried again 1 s later,
//! doubling to 30 s (a failed release logs `mcp.unsubscribe.fail` each time).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use mcp_negotiate::{Error, Watch};
use tokio::time::{Instant, timeout};

use crate::clock::SUBSCRIBE_RETRY;
use crate::daemon::schedule::{Backoff, MANAGEMENT, unanswered};
use crate::telemetry::catalogue::connections;

/// What a subscribe or release order came to, for its owner.
pub(crate) type Answer = Result<(), SubscriptionError>;

/// Why a subscribe or a release did not go through (yet).
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum SubscriptionError {
    /// Asked for already, and not taken by the server yet: it is asked again on the schedule.
    Pending,
    /// The server answered with an error, or the connection failed.
    Server(Error),
    /// No answer within [`MANAGEMENT`].
    Unanswered,
    /// The server is no longer held.
    Gone,
}

impl fmt::Display for SubscriptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("asked for; the server has not taken it yet"),
            Self::Server(e) => e.fmt(f),
            Self::Unanswered => f.write_str(&unanswered()),
            Self::Gone => f.write_str("the server is no longer held"),
        }
    }
}

impl std::error::Error for SubscriptionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Server(e) => Some(e),
            Self::Pending | Self::Unanswered | Self::Gone => None,
        }
    }
}

/// The subscriptions of one server, by owner.
#[derive(Debug)]
pub(crate) struct Owned {
    /// The instance of its log lines.
    instance: String,
    server: String,
    owners: BTreeMap<String, BTreeSet<String>>,
    /// Wanted, and not subscribed yet: asked for again on the schedule.
    subscribe: BTreeSet<String>,
    /// Wanted by nobody, and not released yet: released again on the schedule.
    release: BTreeSet<String>,
    /// The schedule of subscribes asked for again, and the one of releases: a release
    /// that keeps failing does not hold up a subscribe, nor the other way round.
    subscribes: Schedule,
    releases: Schedule,
}

/// One retry schedule: its backoff, and when the next try is due.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    backoff: Backoff,
    at: Option<Instant>,
}

impl Schedule {
    const NEW: Self = Self {
        backoff: SUBSCRIBE_RETRY,
        at: None,
    };

    /// Due one more step of the backoff from now, unless a try is due already.
    fn fail(&mut self) {
        if self.at.is_none() {
            self.at = Some(Instant::now() + self.backoff.fail());
        }
    }

    /// Nothing to try again: back to the first step.
    fn reset(&mut self) {
        self.backoff.reset();
        self.at = None;
    }

    fn due(&self, now: Instant) -> bool {
        self.at.is_some_and(|at| at <= now)
    }
}

impl Owned {
    /// The subscriptions of `server`, logged as `instance`'s.
    pub(crate) fn new(instance: &str, server: &str) -> Self {
        Self {
            instance: instance.to_owned(),
            server: server.to_owned(),
            owners: BTreeMap::new(),
            subscribe: BTreeSet::new(),
            release: BTreeSet::new(),
            subscribes: Schedule::NEW,
            releases: Schedule::NEW,
        }
    }

    /// When to try again what failed, if anything did.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        match (self.subscribes.at, self.releases.at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `owner` wants `uri`: subscribed now unless it is already. The first try's outcome.
    pub(crate) async fn subscribe(&mut self, watch: &mut Watch, uri: &str, owner: &str) -> Answer {
        let owners = self.owners.entry(uri.to_owned()).or_default();
        let first = owners.is_empty();
        owners.insert(owner.to_owned());
        // Still held when a release of it failed: wanted again, nothing to send.
        let releasing = self.release.remove(uri);
        if !first || releasing {
            return match self.subscribe.contains(uri) {
                true => Err(SubscriptionError::Pending),
                false => Ok(()),
            };
        }
        match subscribe_once(watch, uri).await {
            Ok(()) => Ok(()),
            Err((e, false)) => {
                self.owners.remove(uri);
                Err(e)
            }
            Err((e, true)) => {
                self.subscribe.insert(uri.to_owned());
                self.subscribes.fail();
                Err(e)
            }
        }
    }

    /// `owner` lets `uri` go: released when nobody wants it any more.
    pub(crate) async fn release(&mut self, watch: &mut Watch, uri: &str, owner: &str) -> Answer {
        let Some(owners) = self.owners.get_mut(uri) else {
            return Ok(());
        };
        owners.remove(owner);
        if !owners.is_empty() {
            return Ok(());
        }
        self.owners.remove(uri);
        // Never subscribed: nothing to release.
        if self.subscribe.remove(uri) {
            return Ok(());
        }
        self.release_once(watch, uri).await
    }

    /// After a lost session was dialed again: every subscription an owner wants is asked
    /// for again on the new session (each bounded; one that fails is tried again on the
    /// schedule), and what waits to be released is tried at once.
    pub(crate) async fn restore(&mut self, watch: &mut Watch) {
        let wanted: Vec<String> = self.owners.keys().cloned().collect();
        self.subscribe.extend(wanted);
        self.subscribes.reset();
        self.retry_subscribes(watch).await;
        self.retry_releases(watch).await;
    }

    /// Tries again what failed and is due, each on its own schedule; the next try of each is
    /// scheduled if something still fails.
    pub(crate) async fn retry(&mut self, watch: &mut Watch) {
        let now = Instant::now();
        if self.subscribes.due(now) {
            self.retry_subscribes(watch).await;
        }
        if self.releases.due(now) {
            self.retry_releases(watch).await;
        }
    }

    async fn retry_subscribes(&mut self, watch: &mut Watch) {
        self.subscribes.at = None;
        for uri in std::mem::take(&mut self.subscribe) {
            match subscribe_once(watch, &uri).await {
                Ok(()) => {}
                Err((_, true)) => {
                    self.subscribe.insert(uri);
                }
                Err((_, false)) => {
                    self.owners.remove(&uri);
                }
            }
        }
        match self.subscribe.is_empty() {
            true => self.subscribes.reset(),
            false => self.subscribes.fail(),
        }
    }

    async fn retry_releases(&mut self, watch: &mut Watch) {
        self.releases.at = None;
        for uri in std::mem::take(&mut self.release) {
            // A failure schedules the next try: one step of the schedule per pass.
            let _ = self.release_once(watch, &uri).await;
        }
        if self.release.is_empty() {
            self.releases.reset();
        }
    }

    async fn release_once(&mut self, watch: &mut Watch, uri: &str) -> Answer {
        let released = match timeout(MANAGEMENT, watch.unsubscribe(uri)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SubscriptionError::Server(e)),
            Err(_) => Err(SubscriptionError::Unanswered),
        };
        let (instance, server) = (&self.instance, &self.server);
        match &released {
            Ok(()) => connections::unsubscribed(instance, server, uri),
            Err(e) => {
                connections::unsubscribe_fail(instance, server, uri, &e.to_string());
                self.release.insert(uri.to_owned());
                self.releases.fail();
            }
        }
        released
    }
}

/// One subscribe, bounded at [`MANAGEMENT`]; on failure, the error and whether it may pass
/// (a server that offers no subscriptions never will).
async fn subscribe_once(watch: &mut Watch, uri: &str) -> Result<(), (SubscriptionError, bool)> {
    match timeout(MANAGEMENT, watch.subscribe(uri)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e @ Error::Unanswerable { .. })) => Err((SubscriptionError::Server(e), false)),
        Ok(Err(e)) => Err((SubscriptionError::Server(e), true)),
        Err(_) => Err((SubscriptionError::Unanswered, true)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use mcp_negotiate::Client;
    use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
    use serde_json::Value;

    use super::*;
    use crate::telemetry::log::tests::capture;

    const URI: &str = "demo://counter";

    async fn legacy_watch(server: &ReferenceServer) -> Watch {
        server.script("server/discover", Fault::Status(404, None), Times::Once);
        let client = Client::builder("agentd", "0").title("t");
        Watch::new(Arc::new(client.connect(&server.url()).await.unwrap()))
    }

    /// A refusal that may pass: -32603 with `message`.
    fn busy(message: &str) -> Fault {
        Fault::RpcError {
            status: 200,
            code: -32603,
            message: message.into(),
            data: None,
        }
    }

    fn sent(server: &ReferenceServer, method: &str) -> usize {
        server.methods().iter().filter(|m| *m == method).count()
    }

    /// In virtual time, so that the retry is due exactly one step of the schedule later.
    #[tokio::test(start_paused = true)]
    async fn owners_share_a_subscription_and_the_last_release_ends_it() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        // A test on one thread: agentd's lines of this one (not the libraries'), as JSON.
        let (_guard, written) = capture();
        let lines = || -> Vec<(String, Value)> {
            let written = written.lock().unwrap();
            let lines = written
                .iter()
                .map(|l| serde_json::from_str::<Value>(l).unwrap());
            lines
                .map(|l| (l["event"].as_str().unwrap().to_owned(), l))
                .filter(|(event, _)| event.starts_with("mcp."))
                .collect()
        };
        let mut owned = Owned::new("t", "s");
        assert!(owned.subscribe(&mut watch, URI, "a").await.is_ok());
        assert!(owned.subscribe(&mut watch, URI, "b").await.is_ok());
        assert_eq!(sent(&server, "resources/subscribe"), 1);

        assert!(owned.release(&mut watch, URI, "a").await.is_ok());
        assert_eq!(
            sent(&server, "resources/unsubscribe"),
            0,
            "b still wants it"
        );

        // The release fails once: logged, and tried again on the schedule.
        let refusal = busy("busy\u{7}");
        server.script("resources/unsubscribe", refusal, Times::Once);
        let before = Instant::now();
        assert!(owned.release(&mut watch, URI, "b").await.is_err());
        assert_eq!(owned.retry_at(), Some(before + Duration::from_secs(1)));
        assert_eq!(lines()[0].0, "mcp.unsubscribe.fail");
        let fail = lines()[0].1.clone();
        assert_eq!(fail["reason"], "unowned");
        assert_eq!(fail["uri"], URI);
        assert!(!fail["err"].as_str().unwrap().contains('\u{7}'), "{fail}");
        assert!(watch.held().any(|u| u == URI), "still held until released");

        // Not due yet: nothing is sent.
        owned.retry(&mut watch).await;
        assert_eq!(sent(&server, "resources/unsubscribe"), 1);
        tokio::time::sleep_until(owned.retry_at().unwrap()).await;
        owned.retry(&mut watch).await;
        assert_eq!(owned.retry_at(), None);
        assert_eq!(sent(&server, "resources/unsubscribe"), 2);
        assert_eq!(lines()[1].0, "mcp.unsubscribed");
        assert_eq!(lines()[1].1["reason"], "unowned");
        assert_eq!(watch.held().count(), 0);
    }

    /// A release that keeps failing is tried again 1 s, then 2 s, then 4 s later: one step
    /// of the schedule per try (virtual time).
    #[tokio::test(start_paused = true)]
    async fn a_release_failing_again_waits_the_next_step_of_the_schedule() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let mut owned = Owned::new("t", "s");
        assert!(owned.subscribe(&mut watch, URI, "a").await.is_ok());
        let refusal = busy("busy");
        server.script("resources/unsubscribe", refusal, Times::Always);
        for (i, wait) in [1, 2, 4].map(Duration::from_secs).into_iter().enumerate() {
            if let Some(due) = owned.retry_at() {
                tokio::time::sleep_until(due).await;
            }
            let before = Instant::now();
            match i {
                0 => assert!(owned.release(&mut watch, URI, "a").await.is_err()),
                _ => owned.retry(&mut watch).await,
            }
            let at = owned.retry_at().expect("a retry");
            assert_eq!(at - before, wait, "try {}", i + 1);
        }
    }

    /// Subscribes and releases keep schedules of their own: a release that keeps failing
    /// does not push a failed subscribe's retry further out (virtual time).
    #[tokio::test(start_paused = true)]
    async fn subscribes_and_releases_keep_schedules_of_their_own() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let mut owned = Owned::new("t", "s");
        assert!(owned.subscribe(&mut watch, URI, "a").await.is_ok());
        let refusal = busy("busy");
        server.script("resources/unsubscribe", refusal, Times::Always);
        assert!(owned.release(&mut watch, URI, "a").await.is_err());
        for _ in 0..2 {
            tokio::time::sleep_until(owned.retry_at().unwrap()).await;
            owned.retry(&mut watch).await;
        }
        // The releases' next try is 4 s out; a subscribe failing now is due in 1 s.
        let now = Instant::now();
        assert_eq!(owned.retry_at(), Some(now + Duration::from_secs(4)));
        server.script("resources/subscribe", Fault::Status(503, None), Times::Once);
        assert!(
            owned
                .subscribe(&mut watch, "demo://greeting", "b")
                .await
                .is_err()
        );
        assert_eq!(owned.retry_at(), Some(now + Duration::from_secs(1)));
        tokio::time::sleep_until(now + Duration::from_secs(1)).await;
        let unsubscribes = sent(&server, "resources/unsubscribe");
        owned.retry(&mut watch).await;
        assert!(watch.held().any(|u| u == "demo://greeting"));
        assert_eq!(
            sent(&server, "resources/unsubscribe"),
            unsubscribes,
            "the release is not due yet"
        );
        assert_eq!(owned.retry_at(), Some(now + Duration::from_secs(4)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_subscribe_is_asked_again_and_a_hopeless_one_is_not() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let mut owned = Owned::new("t", "s");
        server.script("resources/subscribe", Fault::Status(503, None), Times::Once);
        assert!(owned.subscribe(&mut watch, URI, "a").await.is_err());
        assert!(owned.retry_at().is_some());
        // A second owner meanwhile: nothing sent, told it is not taken yet.
        assert!(owned.subscribe(&mut watch, URI, "b").await.is_err());
        assert_eq!(sent(&server, "resources/subscribe"), 1);
        tokio::time::sleep_until(owned.retry_at().unwrap()).await;
        owned.retry(&mut watch).await;
        assert_eq!(owned.retry_at(), None);
        assert!(watch.held().any(|u| u == URI));

        // A template can never be subscribed: not asked for again.
        let template = "demo://items/{id}";
        assert!(owned.subscribe(&mut watch, template, "a").await.is_err());
        assert_eq!(owned.retry_at(), None);
        assert!(owned.release(&mut watch, template, "a").await.is_ok());
    }
}
