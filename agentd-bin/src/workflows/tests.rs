//! The engine over the store and the reference server.

use std::sync::Arc;

use mcp_negotiate::Client;

use super::parts::{Boxed, Servers, Unsubscribed};

/// Servers of this test: each name a connection made already.
#[derive(Debug, Default)]
struct Direct(std::collections::BTreeMap<String, Arc<Client>>);

impl Servers for Direct {
    fn connection<'a>(&'a self, server: &'a str) -> Boxed<'a, Option<Arc<Client>>> {
        Box::pin(async move { self.0.get(server).cloned() })
    }

    fn state(&self, server: &str) -> (bool, bool) {
        let held = self.0.contains_key(server);
        (held, held)
    }

    fn subscribe<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Err(Unsubscribed::Unsupported) })
    }

    fn release<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Ok(()) })
    }
}

/// Servers of a unit test: one, `s`, configured and connected as `state` says, whose
/// subscribes answer `answers` in turn (then never), each call kept.
#[derive(Debug)]
pub(super) struct Scripted {
    pub(super) state: (bool, bool),
    pub(super) answers: std::sync::Mutex<std::collections::VecDeque<Result<(), Unsubscribed>>>,
    pub(super) calls: std::sync::Mutex<Vec<String>>,
}

impl Scripted {
    pub(super) fn new(state: (bool, bool), answers: Vec<Result<(), Unsubscribed>>) -> Self {
        Self {
            state,
            answers: std::sync::Mutex::new(answers.into()),
            calls: std::sync::Mutex::default(),
        }
    }
}

impl Servers for Scripted {
    fn connection<'a>(&'a self, _: &'a str) -> Boxed<'a, Option<Arc<Client>>> {
        Box::pin(std::future::pending())
    }

    fn state(&self, _: &str) -> (bool, bool) {
        self.state
    }

    fn subscribe<'a>(
        &'a self,
        _: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("subscribe {owner} {uri}"));
        let answer = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            match answer {
                Some(answer) => answer,
                None => std::future::pending().await,
            }
        })
    }

    fn release<'a>(
        &'a self,
        _: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("release {owner} {uri}"));
        Box::pin(async { Ok(()) })
    }
}

/// The `event` of each line of `lines`, with its level.
pub(super) fn events(lines: &std::sync::Mutex<Vec<String>>) -> Vec<(String, String)> {
    let lines = lines.lock().unwrap();
    let parsed = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
    parsed
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            (field("event"), field("level"))
        })
        .collect()
}

mod engine {
    use std::time::Duration;

    use agentd_tools::workflow::run::Limits;
    use agentd_tools::workflow::{Definition, Filter, Record, Workflows as _};
    use mcp_reference_server::{Options, ReferenceServer};
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;
    use tokio_util::task::TaskTracker;

    use super::*;
    use crate::store::{Limits as StoreLimits, Store};
    use crate::workflows::{Bounds, Setup, Subagent, Workflows};

    /// A reference server, a fresh store and its folder.
    async fn fresh() -> (ReferenceServer, tempfile::TempDir, Store) {
        let server = ReferenceServer::start(Options::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreLimits::default())
            .await
            .unwrap();
        (server, dir, store)
    }

    /// Workflow `held`, whose run waits for signal `go` and which a change of `demo://x`
    /// on `ref` starts, and bounds that let one run at a time.
    fn held_for_room() -> (Definition, Bounds) {
        let body = json!({
            "steps": [{"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}}],
            "starts": [{"id": "doc", "subscribe": {"server": "ref", "uri": "demo://x"}}],
        });
        let held = Definition::parse("held", &body).unwrap();
        let bounds = Bounds {
            running_max: 1,
            ..Bounds::default()
        };
        (held, bounds)
    }

    /// The engine over a store in `dir` and `server`, as `ref`.
    async fn engine(dir: &std::path::Path, server: &ReferenceServer) -> Workflows {
        let store = Store::open(dir, StoreLimits::default()).await.unwrap();
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        engine_on(store, server, Vec::new(), &tasks, shutdown).await
    }

    /// The engine over `store` and `server`, as `ref`, with the `configured` workflows, on
    /// `tasks` until `shutdown`.
    async fn engine_on(
        store: Store,
        server: &ReferenceServer,
        configured: Vec<Definition>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Workflows {
        let bounds = Bounds::default();
        engine_bounded(store, server, configured, bounds, tasks, shutdown).await
    }

    /// [`engine_on`] within `bounds`.
    async fn engine_bounded(
        store: Store,
        server: &ReferenceServer,
        configured: Vec<Definition>,
        bounds: Bounds,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Workflows {
        let client = Client::builder("agentd", "0")
            .connect(&server.url())
            .await
            .unwrap();
        let servers = Direct([("ref".to_owned(), Arc::new(client))].into());
        let setup = Setup {
            instance: "t".into(),
            store,
            servers: Arc::new(servers),
            agent: Arc::new(Subagent),
            limits: Limits::default(),
            bounds,
            configured,
        };
        Workflows::start(setup, tasks, shutdown)
    }

    /// Appends Stream events of `ids` to `stream`, as MCP Events' commits do.
    async fn append(store: &Store, stream: &str, ids: &[&str]) {
        let records = ids
            .iter()
            .map(|id| json!({"id": id}).to_string().into_bytes());
        let records = records.collect();
        let document = format!("doc-{}", ids.join("-"));
        store
            .save_document(&document, "{}", stream, records)
            .await
            .unwrap();
    }

    /// Run `run` once it ended (20 s at most).
    async fn settled(workflows: &Workflows, run: &str) -> Record {
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let record = workflows.status(run).await.unwrap();
                if record.status.settled() {
                    return record;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        match waited.await {
            Ok(record) => record,
            Err(_) => panic!("not ended: {:?}", workflows.status(run).await),
        }
    }

    /// The `_meta` of each `tools/call` the server received.
    fn called(server: &ReferenceServer) -> Vec<Value> {
        let log = server.log();
        let calls = log
            .iter()
            .filter(|l| l.method.as_deref() == Some("tools/call"));
        calls.map(|l| l.body["params"]["_meta"].clone()).collect()
    }

    /// An attempt still running at the step's timeout is cut and cancelled on the wire, and
    /// retried with the same key; the run fails once the retries are spent. In real time:
    /// the store answers from a thread of its own, which a paused clock would jump past.
    async fn cut_at_the_timeout(options: Options) -> (ReferenceServer, Record) {
        let server = ReferenceServer::start(options).await;
        let dir = tempfile::tempdir().unwrap();
        let workflows = engine(dir.path(), &server).await;
        let body = json!({"steps": [{
            "id": "count", "type": "mcp.tool", "server": "ref", "tool": "slow",
            "arguments": {"steps": 1000, "delay_ms": 50},
            "timeout": "300ms", "retries": {"max": 1, "delay": "50ms"},
        }]});
        workflows
            .create(Definition::parse("counting", &body).unwrap())
            .await
            .unwrap();
        let run = workflows
            .run("counting", json!({}), "operator")
            .await
            .unwrap();
        let record = settled(&workflows, &run.id).await;
        let metas = called(&server);
        let attempts: Vec<&Value> = metas.iter().map(|m| &m["agent/attempt"]).collect();
        assert_eq!(attempts, [&json!(1), &json!(2)], "{metas:?}");
        let key = &metas[0]["agent/idempotency_key"];
        assert_eq!(&metas[1]["agent/idempotency_key"], key);
        assert_eq!(
            record.error.as_ref().unwrap().code,
            "timed_out",
            "{record:?}"
        );
        assert_eq!(record.steps[0].attempt, 2);
        (server, record)
    }

    #[tokio::test]
    async fn an_attempt_past_its_timeout_is_cancelled_on_the_wire_at_2026_07_28() {
        let mut options = Options::default();
        options.legacy = false;
        let (server, _) = cut_at_the_timeout(options).await;
        // The server saw each call's stream closed.
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            while server.abandoned().len() < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("both calls abandoned");
    }

    #[tokio::test]
    async fn an_attempt_past_its_timeout_is_cancelled_on_the_wire_at_2025_11_25() {
        let mut options = Options::default();
        options.modern = false;
        let (server, _) = cut_at_the_timeout(options).await;
        let cancelled = || {
            let log = server.log();
            let notes = log.iter();
            notes
                .filter(|l| l.method.as_deref() == Some("notifications/cancelled"))
                .count()
        };
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            while cancelled() < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("both calls cancelled");
    }

    /// Runs of `workflow`, as the store lists them, once there are `n` (20 s at most).
    async fn runs_of(workflows: &Workflows, workflow: &str, n: usize) -> Vec<Record> {
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let mut filter = Filter::new(10);
                filter.workflow = Some(workflow.to_owned());
                let page = workflows.list(filter).await.unwrap();
                if page.runs.len() >= n {
                    return page.runs;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("the runs started")
    }

    /// A change of a subscribe start's resource starts a run with input {server, uri}; an
    /// occurrence appended to an event start's stream starts one with the Stream event; a
    /// change of another resource, or an occurrence on another stream, starts nothing.
    #[tokio::test]
    async fn starts_start_runs() {
        let (server, _dir, store) = fresh().await;
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows = engine_on(store.clone(), &server, Vec::new(), &tasks, shutdown).await;
        let steps = json!([{"id": "a", "type": "wait", "on": {"duration": 1}}]);
        let on_change = json!({"steps": steps, "starts": [
            {"id": "doc", "subscribe": {"server": "ref", "uri": "demo://x"}}
        ]});
        let on_event = json!({"steps": steps, "starts": [{"event": {"stream": "alerts"}}]});
        for (name, body) in [("changed", on_change), ("alerted", on_event)] {
            let definition = Definition::parse(name, &body).unwrap();
            workflows.create(definition).await.unwrap();
        }
        workflows.updated("ref", "demo://other");
        append(&store, "other", &["e0"]).await;
        workflows.appended("other");
        workflows.updated("ref", "demo://x");
        append(&store, "alerts", &["e1", "e2"]).await;
        workflows.appended("alerts");

        let changed = runs_of(&workflows, "changed", 1).await;
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(
            changed[0].input,
            json!({"server": "ref", "uri": "demo://x"})
        );
        assert_eq!(changed[0].by, "start:doc");
        let alerted = runs_of(&workflows, "alerted", 2).await;
        let mut inputs: Vec<&Value> = alerted.iter().map(|r| &r.input).collect();
        inputs.sort_by_key(|v| v["id"].as_str().map(str::to_owned));
        assert_eq!(inputs, [&json!({"id": "e1"}), &json!({"id": "e2"})]);
        assert!(alerted.iter().all(|r| r.by == "start:#0"));
    }

    /// The event-started runs of `workflow`, by the occurrence that started each.
    async fn started_by(workflows: &Workflows, workflow: &str) -> Vec<Value> {
        let mut filter = Filter::new(10);
        filter.workflow = Some(workflow.to_owned());
        let page = workflows.list(filter).await.unwrap();
        page.runs.iter().map(|r| r.input["id"].clone()).collect()
    }

    /// An occurrence committed, and the engine gone before it was told (a crash between the
    /// commit and the run's save), starts its run when the engine starts again, and only
    /// then: a third start starts none. A start that comes into force later takes only what
    /// is appended after it.
    #[tokio::test]
    async fn an_occurrence_committed_before_a_crash_starts_its_run_after_it_once() {
        let (server, _dir, store) = fresh().await;
        let steps = json!([{"id": "a", "type": "wait", "on": {"duration": 1}}]);
        let on_event = json!({"steps": steps, "starts": [{"event": {"stream": "alerts"}}]});
        let configured = vec![Definition::parse("alerted", &on_event).unwrap()];
        let mut lives = Vec::new();
        for life in 0..3 {
            let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
            let workflows = engine_on(
                store.clone(),
                &server,
                configured.clone(),
                &tasks,
                shutdown.clone(),
            )
            .await;
            workflows.restored().await;
            if life == 0 {
                // Committed, never told: the engine is gone first.
                append(&store, "alerts", &["e1"]).await;
            }
            lives.push(started_by(&workflows, "alerted").await);
            shutdown.cancel();
            tasks.close();
            tasks.wait().await;
        }
        assert_eq!(lives, [vec![], vec![json!("e1")], vec![json!("e1")]]);

        // Defined after e1: it takes e2, not e1.
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows = engine_on(store.clone(), &server, configured, &tasks, shutdown).await;
        let later = Definition::parse("later", &on_event).unwrap();
        workflows.create(later).await.unwrap();
        append(&store, "alerts", &["e2"]).await;
        workflows.appended("alerts");
        runs_of(&workflows, "later", 1).await;
        assert_eq!(started_by(&workflows, "later").await, [json!("e2")]);
        let alerted = runs_of(&workflows, "alerted", 2).await;
        assert_eq!(alerted.len(), 2, "{alerted:?}");
    }

    /// A run whose change the store does not take is set back to what the store keeps: the
    /// command that changed it is refused (`store`), as is the next while it is set back; it
    /// is read back once the store takes writes again and goes on from its kept record.
    #[tokio::test]
    async fn a_run_the_store_does_not_take_is_set_back_and_read_back() {
        use agentd_tools::Error;
        use agentd_tools::workflow::{Command, Status};

        let server = ReferenceServer::start(Options::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let workflows = engine(dir.path(), &server).await;
        let body =
            json!({"steps": [{"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}}]});
        let definition = Definition::parse("held", &body).unwrap();
        workflows.create(definition).await.unwrap();
        let run = workflows.run("held", json!({}), "operator").await.unwrap();
        let go = || Command::Signal {
            name: "go".to_owned(),
            payload: json!({}),
        };

        let db = rusqlite::Connection::open(dir.path().join(crate::store::FILE)).unwrap();
        db.execute_batch(
            "CREATE TRIGGER refuse BEFORE UPDATE ON workflow_runs
             BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
        )
        .unwrap();
        let refused = workflows.command(&run.id, go()).await;
        assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
        let again = workflows.command(&run.id, go()).await;
        assert!(matches!(again, Err(Error::Store { .. })), "{again:?}");
        let kept = workflows.status(&run.id).await.unwrap();
        assert_eq!(kept.status, Status::Running);
        assert!(kept.signals.is_empty(), "{kept:?}");

        db.execute_batch("DROP TRIGGER refuse").unwrap();
        let taken = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if workflows.command(&run.id, go()).await.is_ok() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        taken.await.expect("read back and signalled");
        let done = settled(&workflows, &run.id).await;
        assert_eq!(done.status, Status::Completed, "{done:?}");
    }

    /// Every run, oldest first, as the store lists them.
    async fn every_run(workflows: &Workflows) -> Vec<Record> {
        let mut filter = Filter::new(100);
        let mut runs = Vec::new();
        loop {
            let page = workflows.list(filter.clone()).await.unwrap();
            runs.extend(page.runs.iter().cloned());
            match (page.more, page.runs.last()) {
                (true, Some(last)) => filter.after = Some(last.id.clone()),
                _ => return runs,
            }
        }
    }

    /// The inputs' ids of the runs of `workflow`, once there are `n` (60 s at most: a burst
    /// of hundreds of runs on a loaded machine).
    async fn started_of(workflows: &Workflows, workflow: &str, n: usize) -> Vec<Value> {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let runs = every_run(workflows).await;
                let of = runs.iter().filter(|r| r.workflow == workflow);
                let ids: Vec<Value> = of.map(|r| r.input["id"].clone()).collect();
                if ids.len() >= n {
                    return ids;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("the runs started")
    }

    /// A burst of occurrences is taken up a page at a time, between other orders: a
    /// `workflow.run` sent behind it is started after the burst's first page, not its last,
    /// and the burst still starts one run an occurrence. A workflow deleted and made again
    /// stands at its stream's end: what was appended meanwhile starts nothing.
    #[tokio::test]
    async fn a_burst_of_occurrences_holds_up_no_run_behind_it() {
        let (server, _dir, store) = fresh().await;
        let steps = json!([{"id": "a", "type": "wait", "on": {"duration": 1}}]);
        let on_event = json!({"steps": steps, "starts": [{"event": {"stream": "alerts"}}]});
        let manual = Definition::parse("manual", &json!({"steps": steps})).unwrap();
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows = engine_on(store.clone(), &server, vec![manual], &tasks, shutdown).await;
        let alerted = Definition::parse("alerted", &on_event).unwrap();
        workflows.create(alerted).await.unwrap();
        let burst: Vec<String> = (0..300).map(|n| format!("e{n}")).collect();
        append(
            &store,
            "alerts",
            &burst.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .await;
        for _ in 0..300 {
            workflows.appended("alerts");
        }
        let run = workflows
            .run("manual", json!({}), "operator")
            .await
            .unwrap();
        let started = started_of(&workflows, "alerted", 300).await;
        let distinct: std::collections::BTreeSet<String> =
            started.iter().map(Value::to_string).collect();
        assert_eq!((started.len(), distinct.len()), (300, 300));
        let runs = every_run(&workflows).await;
        let before = runs.iter().position(|r| r.id == run.id).unwrap();
        assert_eq!(before, 100, "one page of the burst before it");

        workflows.delete("alerted").await.unwrap();
        append(&store, "alerts", &["meanwhile"]).await;
        workflows.appended("alerts");
        let again = Definition::parse("alerted", &on_event).unwrap();
        workflows.create(again).await.unwrap();
        append(&store, "alerts", &["late"]).await;
        workflows.appended("alerts");
        let started = started_of(&workflows, "alerted", 301).await;
        assert_eq!(started.len(), 301, "{:?}", &started[300..]);
        assert_eq!(started[300], json!("late"));
    }

    /// Past the bound on runs under way, `workflow.run` is refused `too_many_runs`; an
    /// occurrence appended meanwhile and then changes of a subscribe start's resource start
    /// their runs once runs end, in the order they came (the event start's position not
    /// moved before); the two changes are one run.
    #[tokio::test]
    async fn past_the_bound_on_runs_a_run_is_refused_and_starts_wait_for_room() {
        use agentd_tools::Error;
        use agentd_tools::workflow::Command;

        let (server, _dir, store) = fresh().await;
        let body = json!({
            "steps": [{"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}}],
            "starts": [
                {"id": "doc", "subscribe": {"server": "ref", "uri": "demo://x"}},
                {"id": "alert", "event": {"stream": "alerts"}},
            ],
        });
        let held = Definition::parse("held", &body).unwrap();
        let bounds = Bounds {
            running_max: 2,
            ..Bounds::default()
        };
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows =
            engine_bounded(store.clone(), &server, vec![held], bounds, &tasks, shutdown).await;
        workflows.restored().await;
        let first = workflows.run("held", json!({"n": 1}), "op").await.unwrap();
        let second = workflows.run("held", json!({"n": 2}), "op").await.unwrap();
        let past = workflows.run("held", json!({"n": 3}), "op").await;
        assert_eq!(past, Err(Error::TooManyRuns { max: 2 }));

        append(&store, "alerts", &["e1"]).await;
        workflows.appended("alerts");
        workflows.updated("ref", "demo://x");
        workflows.updated("ref", "demo://x");
        // Orders are taken in turn: all were taken before this one is answered.
        workflows.status(&first.id).await.unwrap();
        assert_eq!(every_run(&workflows).await.len(), 2);

        let go = || Command::Signal {
            name: "go".to_owned(),
            payload: json!({}),
        };
        workflows.command(&first.id, go()).await.unwrap();
        let alerted = runs_of(&workflows, "held", 3).await;
        assert_eq!(alerted.len(), 3, "{alerted:?}");
        assert_eq!(alerted[2].input, json!({"id": "e1"}));
        assert_eq!(alerted[2].by, "start:alert");
        workflows.command(&second.id, go()).await.unwrap();
        let changed = runs_of(&workflows, "held", 4).await;
        assert_eq!(changed.len(), 4, "{changed:?}");
        assert_eq!(
            changed[3].input,
            json!({"server": "ref", "uri": "demo://x"})
        );
        // The room freed is taken by nothing: the two changes were one run.
        workflows.command(&alerted[2].id, go()).await.unwrap();
        assert_eq!(every_run(&workflows).await.len(), 4);
    }

    /// Room freed by a run set back that the store no longer holds lets the starts waiting
    /// for it start theirs, as a run that ends does.
    #[tokio::test]
    async fn room_freed_by_a_run_set_back_serves_the_starts_waiting() {
        use agentd_tools::workflow::Command;

        let (server, dir, store) = fresh().await;
        let (held, bounds) = held_for_room();
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows =
            engine_bounded(store.clone(), &server, vec![held], bounds, &tasks, shutdown).await;
        workflows.restored().await;
        let run = workflows.run("held", json!({}), "op").await.unwrap();

        let db = rusqlite::Connection::open(dir.path().join(crate::store::FILE)).unwrap();
        db.execute_batch(
            "CREATE TRIGGER refuse BEFORE UPDATE ON workflow_runs
             BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
        )
        .unwrap();
        let go = Command::Signal {
            name: "go".to_owned(),
            payload: json!({}),
        };
        assert!(workflows.command(&run.id, go).await.is_err());
        db.execute_batch("DELETE FROM workflow_steps; DELETE FROM workflow_runs;")
            .unwrap();
        workflows.updated("ref", "demo://x");
        let changed = runs_of(&workflows, "held", 1).await;
        assert_eq!(
            changed[0].input,
            json!({"server": "ref", "uri": "demo://x"})
        );
    }

    /// A subscribe start's change held for room outlives a restart: its run starts once the
    /// run restored with the engine ends, and once only.
    #[tokio::test]
    async fn a_change_held_for_room_starts_its_run_after_a_restart() {
        use agentd_tools::workflow::Command;

        let (server, _dir, store) = fresh().await;
        let (held, bounds) = held_for_room();
        let first = {
            let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
            let configured = vec![held.clone()];
            let workflows = engine_bounded(
                store.clone(),
                &server,
                configured,
                bounds,
                &tasks,
                shutdown.clone(),
            )
            .await;
            workflows.restored().await;
            let first = workflows.run("held", json!({}), "op").await.unwrap();
            workflows.updated("ref", "demo://x");
            workflows.status(&first.id).await.unwrap();
            shutdown.cancel();
            tasks.close();
            tasks.wait().await;
            first
        };
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows =
            engine_bounded(store.clone(), &server, vec![held], bounds, &tasks, shutdown).await;
        workflows.restored().await;
        assert_eq!(every_run(&workflows).await.len(), 1);
        let go = || Command::Signal {
            name: "go".to_owned(),
            payload: json!({}),
        };
        workflows.command(&first.id, go()).await.unwrap();
        let changed = runs_of(&workflows, "held", 2).await;
        assert_eq!(
            changed[1].input,
            json!({"server": "ref", "uri": "demo://x"})
        );
        workflows.command(&changed[1].id, go()).await.unwrap();
        assert_eq!(every_run(&workflows).await.len(), 2);
        assert_eq!(store.starts_held().await.unwrap(), []);
    }

    /// Room that runs out partway through a page of occurrences: the start stands at the
    /// last it took, and the rest start their runs, in order, as runs end.
    #[tokio::test]
    async fn occurrences_past_the_bound_wait_where_their_start_stands() {
        use agentd_tools::workflow::Command;

        use crate::store::starts::Start;

        let (server, _dir, store) = fresh().await;
        let body = json!({
            "steps": [{"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}}],
            "starts": [{"id": "alert", "event": {"stream": "alerts"}}],
        });
        let held = Definition::parse("held", &body).unwrap();
        let bounds = Bounds {
            running_max: 2,
            ..Bounds::default()
        };
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let workflows =
            engine_bounded(store.clone(), &server, vec![held], bounds, &tasks, shutdown).await;
        workflows.restored().await;
        let start = Start {
            workflow: "held".into(),
            node: "alert".into(),
            stream: "alerts".into(),
        };
        let before = store.start_position(&start).await.unwrap();
        let first = workflows.run("held", json!({}), "op").await.unwrap();
        append(&store, "alerts", &["e1", "e2", "e3"]).await;
        workflows.appended("alerts");
        workflows.status(&first.id).await.unwrap();
        let runs = every_run(&workflows).await;
        let inputs: Vec<&Value> = runs.iter().map(|r| &r.input).collect();
        assert_eq!(inputs, [&json!({}), &json!({"id": "e1"})]);
        assert_eq!(store.start_position(&start).await.unwrap(), before + 1);

        let go = || Command::Signal {
            name: "go".to_owned(),
            payload: json!({}),
        };
        workflows.command(&first.id, go()).await.unwrap();
        let e2 = runs_of(&workflows, "held", 3).await;
        assert_eq!(e2[2].input, json!({"id": "e2"}));
        workflows.command(&runs[1].id, go()).await.unwrap();
        let e3 = runs_of(&workflows, "held", 4).await;
        assert_eq!(e3[3].input, json!({"id": "e3"}));
        assert_eq!(store.start_position(&start).await.unwrap(), before + 3);
    }

    /// At its start the engine prunes the runs that ended longer than the configured
    /// retention ago, more than one batch of them, and keeps the others.
    #[tokio::test]
    async fn runs_ended_past_the_retention_are_pruned_at_the_start() {
        use agentd_tools::Error;
        use agentd_tools::workflow::run::Run;

        let (server, _dir, store) = fresh().await;
        let body =
            json!({"steps": [{"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}}]});
        let definition = Definition::parse("held", &body).unwrap();
        let now = crate::clock::wall_ms();
        let day = 24 * 3600 * 1000;
        let old = (0..501).map(|n| (format!("old{n}"), now - 3 * day - n));
        for (id, ended) in old.chain([("recent".to_owned(), now - day)]) {
            let mut run = Run::start(
                &id,
                definition.clone(),
                json!({}),
                "op",
                Limits::default(),
                0,
            )
            .unwrap();
            run.cancel(ended).unwrap();
            store.run_save(run.record().clone()).await.unwrap();
        }
        let (tasks, shutdown) = (TaskTracker::new(), CancellationToken::new());
        let bounds = Bounds {
            retention: Duration::from_secs(2 * 24 * 3600),
            ..Bounds::default()
        };
        let workflows = engine_bounded(store, &server, Vec::new(), bounds, &tasks, shutdown).await;
        // The oldest go first: the last of them goes in the second batch.
        let pruned = tokio::time::timeout(Duration::from_secs(20), async {
            while workflows.status("old0").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        pruned.await.expect("pruned");
        assert_eq!(every_run(&workflows).await.len(), 1);
        let old = workflows.status("old0").await;
        assert_eq!(old, Err(Error::UnknownRun { run: "old0".into() }));
        assert!(workflows.status("recent").await.is_ok());
    }
}
