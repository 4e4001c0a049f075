//! The resource subscriptions a held server keeps for its owners (the demo today; workflow
//! starts, waits and instructions with the next layers).
//!
//! A URI is subscribed while at least one owner wants it, and released (`mcp.unsubscribed`,
//! reason `unowned`) when the last one lets it go. Each subscribe and unsubscribe is bounded
//! at [`MANAGEMENT`]; one that failed in a way that may pass is tried again 1 s later,
//! doubling to 30 s (a failed release logs `mcp.unsubscribe.fail` each time).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mcp_negotiate::{Error, Watch};
use serde_json::json;
use tokio::time::{Instant, timeout};

use crate::log::Level;
use crate::schedule::{Backoff, MANAGEMENT, unanswered};

/// Asking again for a failed subscription, or releasing it again: 1 s, doubling to 30 s.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// What a subscribe or release order came to, for its owner.
pub(crate) type Answer = Result<(), String>;

/// The subscriptions of one server, by owner.
#[derive(Debug)]
pub(crate) struct Owned {
    server: String,
    owners: BTreeMap<String, BTreeSet<String>>,
    /// Wanted, and not subscribed yet: asked for again on the schedule.
    subscribe: BTreeSet<String>,
    /// Wanted by nobody, and not released yet: released again on the schedule.
    release: BTreeSet<String>,
    backoff: Backoff,
    retry_at: Option<Instant>,
}

impl Owned {
    pub(crate) fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            owners: BTreeMap::new(),
            subscribe: BTreeSet::new(),
            release: BTreeSet::new(),
            backoff: RETRY,
            retry_at: None,
        }
    }

    /// When to try again what failed, if anything did.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
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
                true => Err("asked for; the server has not taken it yet".into()),
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
                self.schedule();
                Err(e)
            }
        }
    }

    /// `owner` lets `uri` go: released when nobody wants it any more.
    pub(crate) async fn release(
        &mut self,
        watch: &mut Watch,
        uri: &str,
        owner: &str,
        log: &impl Fn(Level, &str, &[(&str, serde_json::Value)]),
    ) -> Answer {
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
        self.release_once(watch, uri, log).await
    }

    /// After a lost session was dialed again: every subscription an owner wants is asked
    /// for again on the new session (each bounded; one that fails is tried again on the
    /// schedule).
    pub(crate) async fn restore(
        &mut self,
        watch: &mut Watch,
        log: &impl Fn(Level, &str, &[(&str, serde_json::Value)]),
    ) {
        let wanted: Vec<String> = self.owners.keys().cloned().collect();
        self.subscribe.extend(wanted);
        self.backoff = RETRY;
        self.retry(watch, log).await;
    }

    /// Tries again what failed; the next try is scheduled if something still does.
    pub(crate) async fn retry(
        &mut self,
        watch: &mut Watch,
        log: &impl Fn(Level, &str, &[(&str, serde_json::Value)]),
    ) {
        self.retry_at = None;
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
        for uri in std::mem::take(&mut self.release) {
            let _ = self.release_once(watch, &uri, log).await;
        }
        // A failed release scheduled itself already: one step of the schedule per pass.
        match self.subscribe.is_empty() && self.release.is_empty() {
            true => self.backoff = RETRY,
            false => self.schedule(),
        }
    }

    async fn release_once(
        &mut self,
        watch: &mut Watch,
        uri: &str,
        log: &impl Fn(Level, &str, &[(&str, serde_json::Value)]),
    ) -> Answer {
        let released = match timeout(MANAGEMENT, watch.unsubscribe(uri)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(unanswered()),
        };
        let server = json!(self.server);
        let uri_text = json!(mcp_wire::log_text(uri));
        match &released {
            Ok(()) => log(
                Level::Info,
                "mcp.unsubscribed",
                &[
                    ("server", server),
                    ("uri", uri_text),
                    ("reason", json!("unowned")),
                ],
            ),
            Err(e) => {
                log(
                    Level::Warn,
                    "mcp.unsubscribe.fail",
                    &[
                        ("server", server),
                        ("uri", uri_text),
                        ("reason", json!("unowned")),
                        ("err", json!(mcp_wire::log_text(e))),
                    ],
                );
                self.release.insert(uri.to_owned());
                self.schedule();
            }
        }
        released
    }

    fn schedule(&mut self) {
        if self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + self.backoff.fail());
        }
    }
}

/// One subscribe, bounded at [`MANAGEMENT`]; on failure, the error and whether it may pass
/// (a server that offers no subscriptions never will).
async fn subscribe_once(watch: &mut Watch, uri: &str) -> Result<(), (String, bool)> {
    match timeout(MANAGEMENT, watch.subscribe(uri)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e @ Error::Unanswerable { .. })) => Err((e.to_string(), false)),
        Ok(Err(e)) => Err((e.to_string(), true)),
        Err(_) => Err((unanswered(), true)),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::Arc;

    use mcp_negotiate::Client;
    use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
    use serde_json::Value;

    use super::*;

    const URI: &str = "demo://counter";

    async fn legacy_watch(server: &ReferenceServer) -> Watch {
        server.script("server/discover", Fault::Status(404, None), Times::Once);
        let client = Client::builder("agentd", "0").title("t");
        Watch::new(Arc::new(client.connect(&server.url()).await.unwrap()))
    }

    fn sent(server: &ReferenceServer, method: &str) -> usize {
        server.methods().iter().filter(|m| *m == method).count()
    }

    /// In virtual time, so that the retry is due exactly one step of the schedule later.
    #[tokio::test(start_paused = true)]
    async fn owners_share_a_subscription_and_the_last_release_ends_it() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let lines = RefCell::new(Vec::<(String, Value)>::new());
        let log = |_: Level, name: &str, fields: &[(&str, Value)]| {
            let fields = fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone()));
            lines
                .borrow_mut()
                .push((name.to_owned(), Value::Object(fields.collect())));
        };
        let mut owned = Owned::new("s");
        assert_eq!(owned.subscribe(&mut watch, URI, "a").await, Ok(()));
        assert_eq!(owned.subscribe(&mut watch, URI, "b").await, Ok(()));
        assert_eq!(sent(&server, "resources/subscribe"), 1);

        assert_eq!(owned.release(&mut watch, URI, "a", &log).await, Ok(()));
        assert_eq!(
            sent(&server, "resources/unsubscribe"),
            0,
            "b still wants it"
        );

        // The release fails once: logged, and tried again on the schedule.
        let refusal = Fault::RpcError {
            status: 200,
            code: -32603,
            message: "busy\u{7}".into(),
            data: None,
        };
        server.script("resources/unsubscribe", refusal, Times::Once);
        let before = Instant::now();
        assert!(owned.release(&mut watch, URI, "b", &log).await.is_err());
        assert_eq!(owned.retry_at(), Some(before + Duration::from_secs(1)));
        assert_eq!(lines.borrow()[0].0, "mcp.unsubscribe.fail");
        let fail = lines.borrow()[0].1.clone();
        assert_eq!(fail["reason"], "unowned");
        assert_eq!(fail["uri"], URI);
        assert!(!fail["err"].as_str().unwrap().contains('\u{7}'), "{fail}");
        assert!(watch.held().any(|u| u == URI), "still held until released");

        owned.retry(&mut watch, &log).await;
        assert_eq!(owned.retry_at(), None);
        assert_eq!(sent(&server, "resources/unsubscribe"), 2);
        assert_eq!(lines.borrow()[1].0, "mcp.unsubscribed");
        assert_eq!(lines.borrow()[1].1["reason"], "unowned");
        assert_eq!(watch.held().count(), 0);
    }

    /// A release that keeps failing is tried again 1 s, then 2 s, then 4 s later: one step
    /// of the schedule per try (virtual time).
    #[tokio::test(start_paused = true)]
    async fn a_release_failing_again_waits_the_next_step_of_the_schedule() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let log = |_: Level, _: &str, _: &[(&str, Value)]| {};
        let mut owned = Owned::new("s");
        assert_eq!(owned.subscribe(&mut watch, URI, "a").await, Ok(()));
        let refusal = Fault::RpcError {
            status: 200,
            code: -32603,
            message: "busy".into(),
            data: None,
        };
        server.script("resources/unsubscribe", refusal, Times::Always);
        for (i, wait) in [1, 2, 4].map(Duration::from_secs).into_iter().enumerate() {
            let before = Instant::now();
            match i {
                0 => assert!(owned.release(&mut watch, URI, "a", &log).await.is_err()),
                _ => owned.retry(&mut watch, &log).await,
            }
            let at = owned.retry_at().expect("a retry");
            assert_eq!(at - before, wait, "try {}", i + 1);
        }
    }

    #[tokio::test]
    async fn a_failed_subscribe_is_asked_again_and_a_hopeless_one_is_not() {
        let server = ReferenceServer::start(Options::default()).await;
        let mut watch = legacy_watch(&server).await;
        let log = |_: Level, _: &str, _: &[(&str, Value)]| {};
        let mut owned = Owned::new("s");
        server.script("resources/subscribe", Fault::Status(503, None), Times::Once);
        assert!(owned.subscribe(&mut watch, URI, "a").await.is_err());
        assert!(owned.retry_at().is_some());
        // A second owner meanwhile: nothing sent, told it is not taken yet.
        assert!(owned.subscribe(&mut watch, URI, "b").await.is_err());
        assert_eq!(sent(&server, "resources/subscribe"), 1);
        owned.retry(&mut watch, &log).await;
        assert_eq!(owned.retry_at(), None);
        assert!(watch.held().any(|u| u == URI));

        // A template can never be subscribed: not asked for again.
        let template = "demo://items/{id}";
        assert!(owned.subscribe(&mut watch, template, "a").await.is_err());
        assert_eq!(owned.retry_at(), None);
        assert_eq!(owned.release(&mut watch, template, "a", &log).await, Ok(()));
    }
}
