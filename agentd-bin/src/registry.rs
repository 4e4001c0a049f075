//! The supervisor's tool registry: a server's tool called over the supervisor's connection
//! to it (the one the daemon holds, as `mcp.tool` steps reach it), for a workflow `tool`
//! step naming `server/tool` and for a contract tool mapped to a server's tool.
//!
//! A call waits for its server's connection at most the connection timeout
//! (`mcp.servers[].timeout`, else `mcp.default_timeout`), and the call itself is bounded by
//! the same timeout, each silence (the connection's own bound, at which the call is
//! cancelled on the wire). It carries `_meta` built in one place ([`Registry::meta`]):
//! - `agent/run_id`: the workflow run of the caller, the turn of a call made in a model's
//!   turn, else a fresh id of 32 hex digits;
//! - `agent/instance`;
//! - `traceparent`: the run's trace (its id) and a fresh span, the turn's call's, else a
//!   fresh trace;
//! - `agent/ctx`: in a turn, the turn's (its conversation and number);
//! - `agent/idempotency_key`: `<run>:<step>` for a step of a run (stable across the step's
//!   attempts), the turn's call's, else the fresh run id;
//! - `agent/acting_for` ([`ActingFor`]): `{"principal": ID, "autonomous": false}` for the
//!   principal who started the work, else the instance's autonomous identity,
//!   `{"principal": "agent:<instance>", "autonomous": true}`;
//! - `agent/labels`: an object of strings, the server's `tags` and the workflow's `labels`
//!   merged (a key in both takes the workflow's value).
//!
//! The principal of a caller: the operator (`agentd tool call`, `agentd workflow run`:
//! `operator`), a conversation (`conversation:<id>`, whoever speaks in it). A run's principal
//! is the one of whoever started it (its `by`), followed through the runs that started runs
//! (at most [`RUNS_FOLLOWED`]); a subagent acts for whoever ran it (its parent, followed the
//! same way), with the labels of the first run on the way; a run started by a start
//! (`start:…`) and anything else act for the instance's autonomous identity, named after
//! `instance`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentd_tools::workflow::Workflows as _;
use agentd_tools::{AgentMeta, Caller, Error};
use serde_json::{Value, json};

use crate::agent::meta::{hex, run_traceparent, traceparent};
use crate::config::Config;
use crate::store::Store;
use crate::workflows::{Servers, Workflows};

/// The most runs followed back to the principal who started the first.
pub(crate) const RUNS_FOLLOWED: usize = 8;

/// Who a registry call acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ActingFor {
    /// The principal who started the work: `operator` or `conversation:<id>`.
    Principal(String),
    /// The instance on its own: `agent:<instance>`.
    Autonomous(String),
}

impl ActingFor {
    /// `agent/acting_for`: `{"principal", "autonomous"}`.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Self::Principal(id) => json!({"principal": id, "autonomous": false}),
            Self::Autonomous(id) => json!({"principal": id, "autonomous": true}),
        }
    }
}

/// What a registry call is part of: the keys of its `_meta` but the server's tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Work {
    /// `agent/run_id`.
    pub(crate) run_id: String,
    /// `traceparent`.
    pub(crate) traceparent: String,
    /// `agent/idempotency_key`.
    pub(crate) idempotency_key: String,
    /// `agent/acting_for`.
    pub(crate) acting_for: ActingFor,
    /// The workflow's labels (none outside a run).
    pub(crate) labels: BTreeMap<String, String>,
    /// `agent/ctx`, in a conversation's turn.
    pub(crate) ctx: Option<Value>,
}

/// A configured server as the registry calls it.
#[derive(Debug, Clone)]
struct Reached {
    /// The connection timeout.
    timeout: Duration,
    /// Its `tags`.
    tags: BTreeMap<String, String>,
}

/// The supervisor's tool registry. Random ids come from `random`.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    instance: String,
    servers: Arc<dyn Servers>,
    reached: BTreeMap<String, Reached>,
    runs: Workflows,
    /// Where the subagents' records are read.
    store: Store,
    random: fn() -> [u8; 16],
}

impl Registry {
    /// The registry of `config`'s servers, reached through `servers`; the runs of calls made
    /// in workflow runs read in `runs`, the subagents' in `store`.
    pub(crate) fn new(
        config: &Config,
        servers: Arc<dyn Servers>,
        runs: Workflows,
        store: Store,
        random: fn() -> [u8; 16],
    ) -> Self {
        let reached = config
            .servers
            .iter()
            .map(|s| {
                let reached = Reached {
                    timeout: s.timeout,
                    tags: s.tags.clone(),
                };
                (s.name.clone(), reached)
            })
            .collect();
        Self {
            instance: config.instance.clone(),
            servers,
            reached,
            runs,
            store,
            random,
        }
    }

    /// Calls `tool` of `server` for `caller` with `arguments`, in the turn whose call's
    /// `_meta` is `turn` when given: the tool's `CallToolResult`.
    /// Refused `invalid_arguments` when `arguments` is not an object, `unknown_server`
    /// when no server of that name is configured, `not_connected` when it is not held or
    /// not connected within its timeout, `unknown_tool` (named `server/tool`) when its
    /// catalogue has no such tool; `server` when the call fails (its server silent for
    /// the connection timeout among the ways), `tool_error` when the result has `isError`
    /// (its text the detail). `stop` ends it wherever it is (`cut`): the waits for the
    /// connection and the caller's run, or the call, then cancelled on the wire as it is
    /// when its server stays silent.
    pub(crate) async fn call(
        &self,
        caller: &Caller,
        turn: Option<&AgentMeta>,
        server: &str,
        tool: &str,
        arguments: Value,
        stop: impl Future<Output = ()> + Send,
    ) -> Result<Value, Error> {
        let arguments = match arguments {
            Value::Object(arguments) => arguments,
            other => {
                return Err(Error::InvalidArguments {
                    tool: format!("{server}/{tool}"),
                    pointer: String::new(),
                    message: format!("the arguments are not an object: {other}"),
                    rule: "type".to_owned(),
                });
            }
        };
        let reached = self
            .reached
            .get(server)
            .ok_or_else(|| Error::UnknownServer {
                server: server.to_owned(),
            })?;
        let not_connected = || Error::NotConnected {
            server: server.to_owned(),
        };
        let cut = || Error::Cut {
            tool: format!("{server}/{tool}"),
        };
        let held = async {
            let connection = tokio::time::timeout(reached.timeout, self.servers.connection(server));
            let client = connection.await.map_err(|_| not_connected())?;
            // Configured, yet not held (its connection was never made): not connected.
            let client = client.ok_or_else(not_connected)?;
            if !client.catalog().tools().iter().any(|t| t.name == tool) {
                return Err(Error::UnknownTool {
                    tool: format!("{server}/{tool}"),
                });
            }
            let work = match turn {
                Some(turn) => self.in_turn(caller, turn).await?,
                None => self.work(caller).await?,
            };
            Ok((client, work))
        };
        // Cut before the request is sent, there is nothing to cancel.
        let mut stop = std::pin::pin!(stop);
        let (client, work) = tokio::select! {
            biased;
            held = held => held?,
            () = stop.as_mut() => return Err(cut()),
        };
        let meta = self.meta(server, &work).to_meta();
        let failed = |detail: String| Error::Server {
            server: server.to_owned(),
            detail,
        };
        let result = client
            .call_tool_until(tool, Some(arguments), Some(&meta), |_| {}, stop)
            .await
            .map_err(|e| match e {
                mcp_negotiate::Error::Cancelled => cut(),
                e => failed(e.to_string()),
            })?;
        if result.is_error() {
            return Err(Error::ToolError {
                tool: format!("{server}/{tool}"),
                detail: crate::content::said(&result),
            });
        }
        serde_json::to_value(&result).map_err(|e| failed(format!("an unreadable result: {e}")))
    }

    /// The `_meta` of a call of `server`'s tool for `work`: the one builder of every
    /// registry call's keys, on the keys every unit of work's calls share
    /// ([`AgentMeta::for_work`]).
    pub(crate) fn meta(&self, server: &str, work: &Work) -> AgentMeta {
        let mut labels = self
            .reached
            .get(server)
            .map(|r| r.tags.clone())
            .unwrap_or_default();
        labels.extend(work.labels.clone());
        let traceparent = Some(work.traceparent.clone());
        let key = work.idempotency_key.clone();
        let mut meta = AgentMeta::for_work(&work.run_id, &self.instance, traceparent, key);
        meta.ctx.clone_from(&work.ctx);
        meta.acting_for = Some(work.acting_for.to_value());
        meta.labels = Some(labels);
        meta
    }

    /// What a call by `caller` is part of: its run (read from the store's runs) when it is
    /// a step of one, else fresh ids. An operator's call acts for `operator` with a fresh
    /// key, whatever unit it names. [`Error::Store`] (or the runs' error) when a run or
    /// subagent of the chain cannot be read.
    pub(crate) async fn work(&self, caller: &Caller) -> Result<Work, Error> {
        let span: [u8; 8] = {
            let random = (self.random)();
            let mut span = [0; 8];
            span.copy_from_slice(&random[..8]);
            span
        };
        let fresh = hex(&(self.random)());
        let (mut acting_for, labels) = self.principal(&caller.unit()).await?;
        let idempotency_key = match (&caller.ids.run, &caller.ids.step) {
            _ if caller.operator => fresh.clone(),
            (Some(run), Some(step)) => format!("{run}:{step}"),
            (Some(run), None) => run.clone(),
            (None, _) => fresh.clone(),
        };
        if caller.operator {
            acting_for = ActingFor::Principal("operator".to_owned());
        }
        let run_id = caller.ids.run.clone().unwrap_or_else(|| fresh.clone());
        // A run's id is its trace's; an id that is not one makes a trace.
        let traceparent =
            run_traceparent(&run_id, span).unwrap_or_else(|| traceparent(&fresh, span));
        Ok(Work {
            run_id,
            traceparent,
            idempotency_key,
            acting_for,
            labels,
            ctx: None,
        })
    }

    /// What a call by `caller` in a model's turn is part of: the turn, whose call's `_meta`
    /// is `turn` (its run id, trace, context and the call's idempotency key).
    async fn in_turn(&self, caller: &Caller, turn: &AgentMeta) -> Result<Work, Error> {
        let fresh = self.work(caller).await?;
        Ok(Work {
            run_id: turn.run_id.clone(),
            traceparent: turn.traceparent.clone().unwrap_or(fresh.traceparent),
            idempotency_key: turn
                .idempotency_key
                .clone()
                .unwrap_or(fresh.idempotency_key),
            ctx: turn.ctx.clone(),
            ..fresh
        })
    }

    /// Who the work of `unit` acts for and the labels of the first run on its way: the
    /// subagents and runs that started it followed back to their parents, the unit and at
    /// most [`RUNS_FOLLOWED`] more read. Only a unit the store does not hold ends the chain
    /// for the instance; any other failure to read one is the call's error.
    async fn principal(&self, unit: &str) -> Result<(ActingFor, BTreeMap<String, String>), Error> {
        let mut by = unit.to_owned();
        let mut labels = None;
        for _ in 0..=RUNS_FOLLOWED + 1 {
            if by == "operator" || by.starts_with("conversation:") {
                return Ok((ActingFor::Principal(by), labels.unwrap_or_default()));
            }
            if let Some(run) = by.strip_prefix("run:") {
                match self.runs.status(run).await {
                    Ok(record) => {
                        labels.get_or_insert_with(|| {
                            serde_json::from_value(record.definition["labels"].clone())
                                .unwrap_or_default()
                        });
                        by = record.by;
                    }
                    Err(Error::UnknownRun { .. }) => break,
                    Err(e) => return Err(e),
                }
            } else if let Some(subagent) = by.strip_prefix("subagent:") {
                match self.store.subagent(subagent).await {
                    Ok(record) => by = record.status.parent,
                    Err(crate::store::Error::UnknownSubagent) => break,
                    Err(e) => return Err(e.into_tool("subagent.status", subagent)),
                }
            } else {
                break;
            }
        }
        let autonomous = ActingFor::Autonomous(format!("agent:{}", self.instance));
        Ok((autonomous, labels.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use agentd_tools::Scope;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::store::{Limits, Store};
    use crate::workflows::{Boxed, NoServers, Subagent, Unsubscribed};

    /// Servers that are configured and never connect.
    #[derive(Debug)]
    struct NeverConnected;

    impl Servers for NeverConnected {
        fn connection<'a>(&'a self, _: &'a str) -> Boxed<'a, Option<Arc<mcp_negotiate::Client>>> {
            Box::pin(std::future::pending())
        }

        fn state(&self, _: &str) -> (bool, bool) {
            (true, false)
        }

        fn subscribe<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
        ) -> Boxed<'a, Result<(), Unsubscribed>> {
            Box::pin(std::future::pending())
        }

        fn release<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
        ) -> Boxed<'a, Result<(), Unsubscribed>> {
            Box::pin(std::future::pending())
        }
    }

    /// A registry of server `kb` (tagged `team = "ops"`, `env = "prod"`, timeout 1 s) over
    /// no connection, its random ids all `0xab`; its runs have workflow `w` (labelled
    /// `team = "search"`), whose run waits for a signal.
    async fn registry(dir: &std::path::Path) -> Registry {
        let text = "instance = \"t\"\n[[mcp.servers]]\nname = \"kb\"\n\
                    url = \"http://127.0.0.1:1/mcp\"\ntimeout = \"1s\"\n\
                    tags = { team = \"ops\", env = \"prod\" }\n";
        let config = crate::config::parse("t.toml", text, &|_| None).unwrap();
        let limits = Limits {
            max_value_bytes: 1024,
        };
        let store = Store::open(dir, limits).await.unwrap();
        let setup = crate::workflows::Setup {
            instance: "t".into(),
            store: store.clone(),
            servers: Arc::new(NoServers),
            agent: Arc::new(Subagent),
            limits: agentd_tools::workflow::run::Limits::default(),
            bounds: crate::workflows::Bounds::default(),
            configured: Vec::new(),
        };
        let tasks = tokio_util::task::TaskTracker::new();
        let runs = Workflows::start(setup, &tasks, CancellationToken::new());
        let body = json!({"labels": {"team": "search"},
                          "steps": [{"id": "s", "type": "wait", "on": {"signal": {"name": "go"}}}]});
        let w = agentd_tools::workflow::Definition::parse("w", &body).unwrap();
        runs.configure(
            vec![w],
            agentd_tools::workflow::run::Limits::default(),
            crate::workflows::Bounds::default(),
        );
        Registry::new(&config, Arc::new(NoServers), runs, store, || [0xab; 16])
    }

    #[tokio::test]
    async fn the_meta_says_who_the_work_is_for_and_its_labels() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let work = Work {
            run_id: "r".into(),
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            idempotency_key: "r:s".into(),
            acting_for: ActingFor::Principal("operator".into()),
            labels: BTreeMap::from([("team".to_owned(), "search".to_owned())]),
            ctx: None,
        };
        assert_eq!(
            Value::Object(registry.meta("kb", &work).to_meta()),
            json!({
                "agent/run_id": "r",
                "agent/instance": "t",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "agent/idempotency_key": "r:s",
                "agent/acting_for": {"principal": "operator", "autonomous": false},
                // Every tag of the server, a label of the workflow winning on its key.
                "agent/labels": {"env": "prod", "team": "search"},
            })
        );
        let mut autonomous = work.clone();
        autonomous.acting_for = ActingFor::Autonomous("agent:t".into());
        autonomous.labels.clear();
        let meta = registry.meta("kb", &autonomous).to_meta();
        assert_eq!(
            meta["agent/acting_for"],
            json!({"principal": "agent:t", "autonomous": true})
        );
        assert_eq!(meta["agent/labels"], json!({"env": "prod", "team": "ops"}));
    }

    #[tokio::test]
    async fn work_outside_a_run_has_fresh_ids_and_its_principal() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let operator = registry.work(&Caller::operator(Scope::Root)).await.unwrap();
        let fresh = "ab".repeat(16);
        assert_eq!(operator.run_id, fresh);
        assert_eq!(operator.idempotency_key, fresh);
        assert_eq!(
            operator.traceparent,
            format!("00-{fresh}-{}-01", "ab".repeat(8))
        );
        assert_eq!(operator.acting_for, ActingFor::Principal("operator".into()));
        assert!(operator.labels.is_empty());
        let root = registry.work(&Caller::root("root")).await.unwrap();
        let principal = ActingFor::Principal("conversation:root".into());
        assert_eq!(root.acting_for, principal);
        let subagent = registry.work(&Caller::subagent("s1")).await.unwrap();
        assert_eq!(subagent.acting_for, ActingFor::Autonomous("agent:t".into()));
        // A run the store does not hold: its key still the step's, for the instance.
        let unknown = registry
            .work(&Caller::workflow("gone", "add"))
            .await
            .unwrap();
        assert_eq!(unknown.idempotency_key, "gone:add");
        assert_eq!(unknown.acting_for, ActingFor::Autonomous("agent:t".into()));

        // In a turn: the turn's ids and context, for the conversation.
        let mut turn = AgentMeta::new("turn-run", "t");
        turn.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        turn.idempotency_key = Some("turn-run:1:0".into());
        turn.ctx = Some(json!({"conversation": "c1", "turn": 2}));
        let work = registry.in_turn(&Caller::root("c1"), &turn).await.unwrap();
        let meta = registry.meta("kb", &work).to_meta();
        assert_eq!(
            Value::Object(meta),
            json!({
                "agent/run_id": "turn-run",
                "agent/instance": "t",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "agent/ctx": {"conversation": "c1", "turn": 2},
                "agent/idempotency_key": "turn-run:1:0",
                "agent/acting_for": {"principal": "conversation:c1", "autonomous": false},
                "agent/labels": {"env": "prod", "team": "ops"},
            })
        );
    }

    #[tokio::test]
    async fn a_server_not_configured_or_not_held_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let caller = Caller::operator(Scope::Root);
        let unknown = registry
            .call(
                &caller,
                None,
                "nope",
                "t",
                json!({}),
                std::future::pending(),
            )
            .await;
        assert_eq!(unknown.unwrap_err().code(), "unknown_server");
        // Arguments that are not an object, refused before the server is looked for.
        for arguments in [json!(null), json!([1]), json!("x")] {
            let bad = registry
                .call(&caller, None, "kb", "t", arguments, std::future::pending())
                .await;
            assert_eq!(bad.unwrap_err().code(), "invalid_arguments");
        }
        // Configured, but the servers hold none of that name: not connected.
        let unheld = registry
            .call(&caller, None, "kb", "t", json!({}), std::future::pending())
            .await;
        let e = unheld.unwrap_err();
        assert_eq!(e.code(), "not_connected");
        assert_eq!(e.to_string(), "server \"kb\" is not connected");

        // Held, never connected: given up at its connection timeout (virtual time).
        let mut waiting = registry.clone();
        waiting.servers = Arc::new(NeverConnected);
        tokio::time::pause();
        let waited = waiting.call(&caller, None, "kb", "t", json!({}), std::future::pending());
        let waited = waited.await;
        let e = waited.unwrap_err();
        assert_eq!(e.code(), "not_connected");
        assert_eq!(e.to_string(), "server \"kb\" is not connected");
    }

    #[tokio::test]
    async fn a_run_acts_for_whoever_started_the_runs_before_it_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        // Run 0 started by the operator; run i by run i - 1.
        let mut runs = Vec::new();
        let mut by = "operator".to_owned();
        for _ in 0..=RUNS_FOLLOWED + 1 {
            let run = registry.runs.run("w", json!({}), &by).await.unwrap();
            by = format!("run:{}", run.id);
            runs.push(run.id);
        }
        let work = async |i: usize| {
            registry
                .work(&Caller::workflow(&runs[i], "s"))
                .await
                .unwrap()
        };
        let operator = ActingFor::Principal("operator".into());
        let first = work(0).await;
        assert_eq!(first.acting_for, operator);
        assert_eq!(first.run_id, runs[0]);
        assert_eq!(first.idempotency_key, format!("{}:s", runs[0]));
        assert!(first.traceparent.starts_with(&format!("00-{}-", runs[0])));
        let labels = BTreeMap::from([("team".to_owned(), "search".to_owned())]);
        assert_eq!(first.labels, labels);
        // At the bound, RUNS_FOLLOWED runs followed back; one past it, the instance's own.
        assert_eq!(work(RUNS_FOLLOWED).await.acting_for, operator);
        assert_eq!(
            work(RUNS_FOLLOWED + 1).await.acting_for,
            ActingFor::Autonomous("agent:t".into())
        );
    }

    /// Runs subagent `parent`'s child in `registry`'s store: its id.
    async fn subagent_of(registry: &Registry, parent: &str) -> String {
        let spec = crate::store::subagents::Spec::default();
        let run = Duration::from_secs(60);
        registry
            .store
            .subagent_run(parent, "g", spec, run, 1)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_subagent_acts_for_whoever_ran_it_with_its_runs_labels() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let run = registry.runs.run("w", json!({}), "operator").await.unwrap();
        // A workflow's `agent` step: a subagent of the run.
        let step = subagent_of(&registry, &format!("run:{}", run.id)).await;
        let work = registry.work(&Caller::subagent(&step)).await.unwrap();
        assert_eq!(work.acting_for, ActingFor::Principal("operator".into()));
        let labels = BTreeMap::from([("team".to_owned(), "search".to_owned())]);
        assert_eq!(work.labels, labels);
        // A subagent of a subagent of a conversation.
        let child = subagent_of(&registry, "conversation:c1").await;
        let grandchild = subagent_of(&registry, &format!("subagent:{child}")).await;
        let work = registry.work(&Caller::subagent(&grandchild)).await.unwrap();
        let principal = ActingFor::Principal("conversation:c1".into());
        assert_eq!(work.acting_for, principal);
        assert!(work.labels.is_empty());
        // One the store does not hold: the instance's own.
        let gone = registry.work(&Caller::subagent("gone")).await.unwrap();
        assert_eq!(gone.acting_for, ActingFor::Autonomous("agent:t".into()));
    }

    #[tokio::test]
    async fn a_store_that_fails_fails_the_call_rather_than_its_principal() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let child = subagent_of(&registry, "conversation:c1").await;
        registry.store.close().await;
        let e = registry.work(&Caller::subagent(&child)).await.unwrap_err();
        assert_eq!(e.code(), "shutting_down");
    }

    #[tokio::test]
    async fn an_operator_acts_as_itself_with_a_fresh_key_whatever_unit_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let run = registry
            .runs
            .run("w", json!({}), "start:nightly")
            .await
            .unwrap();
        let mut caller = Caller::workflow(&run.id, "s");
        caller.operator = true;
        let work = registry.work(&caller).await.unwrap();
        assert_eq!(work.acting_for, ActingFor::Principal("operator".into()));
        assert_eq!(work.idempotency_key, "ab".repeat(16));
        assert_eq!(work.run_id, run.id);
        // The same step, not the operator's: the run's start, the step's key.
        let step = registry
            .work(&Caller::workflow(&run.id, "s"))
            .await
            .unwrap();
        assert_eq!(step.acting_for, ActingFor::Autonomous("agent:t".into()));
        assert_eq!(step.idempotency_key, format!("{}:s", run.id));
        let mut caller = Caller::subagent("s1");
        caller.operator = true;
        let work = registry.work(&caller).await.unwrap();
        assert_eq!(work.acting_for, ActingFor::Principal("operator".into()));
    }
}
