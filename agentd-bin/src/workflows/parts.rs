//! The daemon's parts the steps of runs reach, as traits the daemon implements: the held
//! servers ([`Servers`]), agentd's own tools ([`Tools`]) and an `agent` step's turn
//! ([`Agent`], done by a [`Subagent`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentd_tools::workflow::run::Failure;
use agentd_tools::{Caller, Error};
use mcp_negotiate::Client;
use serde_json::{Value, json};

/// A boxed future, as the traits of the daemon's parts answer.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a wait's resource is not subscribed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsubscribed {
    /// No server of that name is configured.
    Unknown,
    /// The server offers no subscriptions.
    Unsupported,
    /// The server is no longer held (a reload let it go).
    Gone,
    /// It failed in a way that may pass: the server's task asks again on its schedule.
    MayPass(String),
    /// Asked for already by this owner, and not taken by the server yet: the server's task
    /// asks again on its schedule.
    Pending,
}

impl fmt::Display for Unsubscribed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("no server of that name is configured"),
            Self::Unsupported => f.write_str("the server offers no subscriptions"),
            Self::Gone => f.write_str("the server is no longer held"),
            Self::MayPass(err) => f.write_str(err),
            Self::Pending => f.write_str("asked for; the server has not taken it yet"),
        }
    }
}

/// The held servers, as the steps reach them.
pub(crate) trait Servers: fmt::Debug + Send + Sync + 'static {
    /// The connection to `server`, once it is connected; `None` when no server of that name
    /// is configured (or it was let go while waiting).
    fn connection<'a>(&'a self, server: &'a str) -> Boxed<'a, Option<Arc<Client>>>;

    /// Whether `server` is configured, and whether it is connected now.
    fn state(&self, server: &str) -> (bool, bool);

    /// `owner` wants `uri` of `server` subscribed: once the server is connected (a server
    /// that offers no subscriptions is [`Unsubscribed::Unsupported`]).
    fn subscribe<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>>;

    /// `owner` lets `uri` of `server` go.
    fn release<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>>;
}

/// agentd's own tools, as a `tool` step calls them, and the supervisor's tool registry.
pub(crate) trait Tools: fmt::Debug + Send + Sync {
    /// Calls `name` for `caller` with `arguments`: an own tool, or a server's tool named
    /// `server/tool`, cancelled on the wire (the own tool dropped) when `stop` completes.
    fn call<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        stop: Boxed<'a, ()>,
    ) -> Boxed<'a, Result<Value, Error>>;
}

/// An `agent` step's model turn.
pub(crate) trait Agent: fmt::Debug + Send + Sync {
    /// The answer to `prompt` for `caller` (the step of its run), within `within`, through
    /// `tools`: the step's output. Given up when `stop` completes: what it started stops too.
    fn answer<'a>(
        &'a self,
        tools: &'a dyn Tools,
        caller: &'a Caller,
        prompt: &'a str,
        within: Duration,
        stop: Boxed<'a, ()>,
    ) -> Boxed<'a, Result<Value, Failure>>;
}

/// The longest a subagent runs (a `subagent.run` deadline's bound).
const SUBAGENT_MAX: Duration = Duration::from_millis(agentd_tools::DURATION_MAX_MS);

/// An `agent` step as a subagent of its run: `subagent.run` with the prompt as its goal and
/// the step's bound as its deadline (at most 1 h), then `subagent.await` until it settles.
/// Its output is `{"answer", "subagent", "turns", "tokens"}` once it finished; a subagent
/// that failed, timed out or was killed fails the step with that state as the code and its
/// error as the message. A step given up (its timeout, its run cancelled) kills its
/// subagent (`subagent.kill`), so that a retry's subagent is the only one at work. The
/// subagent tools are called as the step calls any own tool: as
/// granted to workflows (`not_granted` when `[tools.grants] workflow` leaves them out, `no_agent`
/// when no model is configured).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Subagent;

impl Agent for Subagent {
    fn answer<'a>(
        &'a self,
        tools: &'a dyn Tools,
        caller: &'a Caller,
        prompt: &'a str,
        within: Duration,
        mut stop: Boxed<'a, ()>,
    ) -> Boxed<'a, Result<Value, Failure>> {
        Box::pin(async move {
            let failure = |e: Error| Failure::new(e.code(), e.to_string());
            let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
            let deadline = millis(within.min(SUBAGENT_MAX));
            let run = json!({"goal": prompt, "deadline": deadline});
            let ran = tools
                .call(
                    caller,
                    "subagent.run",
                    run,
                    Box::pin(std::future::pending()),
                )
                .await
                .map_err(failure)?;
            let id = ran["id"].as_str().unwrap_or_default().to_owned();
            let until = json!({"id": id, "timeout": millis(SUBAGENT_MAX)});
            loop {
                let waiting = Box::pin(std::future::pending());
                let status = tools.call(caller, "subagent.await", until.clone(), waiting);
                let status = tokio::select! {
                    biased;
                    status = status => status.map_err(failure)?,
                    () = &mut stop => {
                        let kill = json!({"id": id});
                        let killed = Box::pin(std::future::pending());
                        // Its answer changes nothing: a subagent that settled meanwhile keeps
                        // its state, and one the kill missed ends at its deadline (the step's).
                        let _ = tools.call(caller, "subagent.kill", kill, killed).await;
                        return Err(Failure::new("cancelled", format!("subagent {id}: given up")));
                    }
                };
                match status["state"].as_str() {
                    Some("running") => continue,
                    Some("finished") => {
                        return Ok(json!({
                            "answer": status["answer"],
                            "subagent": id,
                            "turns": status["turns"],
                            "tokens": status["tokens"],
                        }));
                    }
                    state => {
                        let state = state.unwrap_or("failed");
                        let error = status["error"].as_str().unwrap_or(state);
                        return Err(Failure::new(state, format!("subagent {id}: {error}")));
                    }
                }
            }
        })
    }
}

/// No server at all: every one unknown (the demo's turn, tests).
#[cfg(any(test, feature = "demo"))]
#[derive(Debug)]
pub(crate) struct NoServers;

#[cfg(any(test, feature = "demo"))]
impl Servers for NoServers {
    fn connection<'a>(&'a self, _: &'a str) -> Boxed<'a, Option<Arc<Client>>> {
        Box::pin(async { None })
    }

    fn state(&self, _: &str) -> (bool, bool) {
        (false, false)
    }

    fn subscribe<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Err(Unsubscribed::Unknown) })
    }

    fn release<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Err(Unsubscribed::Unknown) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// The subagent tools: `subagent.run` answers `s1`, `subagent.await` never settles,
    /// every call kept.
    #[derive(Debug, Default)]
    struct Unsettled {
        called: Mutex<Vec<(String, Value)>>,
    }

    impl Tools for Unsettled {
        fn call<'a>(
            &'a self,
            _: &'a Caller,
            name: &'a str,
            arguments: Value,
            _: Boxed<'a, ()>,
        ) -> Boxed<'a, Result<Value, Error>> {
            self.called
                .lock()
                .unwrap()
                .push((name.to_owned(), arguments));
            Box::pin(async move {
                match name {
                    "subagent.run" => Ok(json!({"id": "s1"})),
                    "subagent.await" => std::future::pending().await,
                    _ => Ok(json!({"id": "s1", "state": "killed"})),
                }
            })
        }
    }

    #[tokio::test]
    async fn a_step_given_up_kills_its_subagent() {
        let tools = Unsettled::default();
        let caller = Caller::workflow("r1", "think");
        let (give_up, given_up) = tokio::sync::oneshot::channel::<()>();
        let stop: Boxed<'_, ()> = Box::pin(async move {
            let _ = given_up.await;
        });
        give_up.send(()).unwrap();
        let answered = Subagent.answer(&tools, &caller, "Think.", Duration::from_secs(60), stop);
        let failure = answered.await.unwrap_err();
        assert_eq!(failure.code, "cancelled");
        let called = tools.called.lock().unwrap().clone();
        let names: Vec<&str> = called.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["subagent.run", "subagent.await", "subagent.kill"]);
        assert_eq!(called[2].1, json!({"id": "s1"}));
    }
}
