//! The daemon with its agent: `agentd say` through the control socket, answered by a turn
//! whose call goes over a worker of a held server.

use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

use super::*;
use agentd_tests::model::{Reply, ScriptedModel};

use crate::agent::conversations::SayError;
use crate::agent::model::Message;
use crate::agent::scripted::{Scene, Scripted, USED, calls, said, text};
use crate::agent::workers;
use agentd_tools::{Caller, Scope};
use std::time::Duration;
use tokio::sync::Notify;

const TURN: Duration = Duration::from_secs(600);

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}
use crate::control::{CallError, Request, Say, ToolCall};

/// The configuration file in `dir` of a daemon holding `server`, its store in `dir`, with
/// `model` as its `[model]` TOML.
fn write(dir: &std::path::Path, server: &ReferenceServer, model: &str) -> PathBuf {
    let path = dir.join("agentd.toml");
    let store = dir.join("store");
    let toml = format!(
        "instance = \"d\"\n[[mcp.servers]]\nname = \"s\"\nurl = \"{}\"\n[store]\npath = \"{}\"\n{model}",
        server.url(),
        store.display()
    );
    std::fs::write(&path, toml).unwrap();
    path
}

/// A daemon holding `server`, its store in `dir`, without a model, every server listed.
async fn daemon(dir: &std::path::Path, server: &ReferenceServer) -> Daemon {
    let path = write(dir, server, "");
    let config = config::load(&path, &|_| None).unwrap();
    let mut daemon = Daemon::start(config, path).await.unwrap();
    while daemon.catalogue.is_empty() {
        let report = daemon.reports.recv().await.unwrap();
        daemon.on_report(report);
    }
    daemon
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn say_is_answered_by_the_agent_over_a_worker() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = daemon(dir.path(), &server).await;
    let config = daemon.config.clone();
    let say = Request::Say(Say {
        say: "what is 2 + 2?".into(),
        conversation: None,
    });
    let refused = crate::control::call(&config, &say).await.unwrap_err();
    assert!(
        matches!(&refused, CallError::Refused(e) if e["code"] == "no_agent"),
        "{refused:?}"
    );

    let model = Scripted::new([calls(&[("c1", "s__add", r#"{"a": 2, "b": 2}"#)]), text("4")]);
    daemon.start_agent(model.clone());
    let answer = crate::control::call(&config, &say).await.unwrap();
    assert_eq!(answer, json!({"conversation": "root", "text": "4"}));
    let log = server.log();
    let add = log
        .iter()
        .find(|l| l.body["params"]["name"] == "add")
        .expect("the call reached the server");
    let meta = &add.body["params"]["_meta"];
    assert_eq!(meta["agent/instance"], "d");
    assert_eq!(
        meta["agent/ctx"],
        json!({"conversation": "root", "turn": 1})
    );
    // Over the worker, which declares elicitation; the supervisor's does not.
    let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps["elicitation"].is_object(), "{meta}");
    let asked = model.asked();
    assert_eq!(asked.len(), 2);
    let offered: Vec<&str> = asked[0].tools.iter().map(|f| f.name.as_str()).collect();
    assert!(
        offered.contains(&"s__add") && offered.contains(&"memory_get"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|n| n.starts_with("events_")),
        "{offered:?}"
    );
    daemon.drain().await;
}

/// A reload that adds `[model]` starts the agent over it; one that changes it starts it
/// afresh; one that removes it stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_starts_and_stops_the_agent_with_model() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = daemon(dir.path(), &server).await;
    let config = daemon.config.clone();
    let say = |text: &str| {
        Request::Say(Say {
            say: text.into(),
            conversation: Some("c".into()),
        })
    };
    let first = ScriptedModel::start([Reply::text("from the first")]).await;
    let second = ScriptedModel::start([Reply::text("from the second")]).await;
    let model =
        |m: &ScriptedModel| format!("[model]\nbase_url = \"{}\"\nmodel = \"m\"\n", m.base_url());
    for (with, answer) in [(&first, "from the first"), (&second, "from the second")] {
        write(dir.path(), &server, &model(with));
        daemon.reload().await;
        let answered = crate::control::call(&config, &say("hi")).await.unwrap();
        assert_eq!(answered["text"], answer);
    }
    assert_eq!((first.requests().len(), second.requests().len()), (1, 1));
    write(dir.path(), &server, "");
    daemon.reload().await;
    let refused = crate::control::call(&config, &say("hi")).await.unwrap_err();
    assert!(
        matches!(&refused, CallError::Refused(e) if e["code"] == "no_agent"),
        "{refused:?}"
    );
    // A message sent while no agent runs is taken by the next one's first turn.
    let sent = Request::Tool(ToolCall {
        tool: "message.send".into(),
        arguments: json!({"conversation": "w", "text": "waiting"}),
        ..ToolCall::default()
    });
    crate::control::call(&config, &sent).await.unwrap();
    write(dir.path(), &server, &model(&first));
    first.push([Reply::text("and again"), Reply::text("and again")]);
    daemon.reload().await;
    let now = Request::Say(Say {
        say: "now?".into(),
        conversation: Some("w".into()),
    });
    let answered = crate::control::call(&config, &now).await.unwrap();
    assert_eq!(answered["text"], "and again");
    let asked = first.requests();
    let users: Vec<&Value> = asked[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| &m["content"])
        .collect();
    assert_eq!(users[0], "waiting", "{users:?}");
    daemon.drain().await;
}

/// The own tools over `store`, and the agent's setup with them (no server, a budget of
/// `budget_tokens`).
async fn own_setup(
    store: &Store,
    shutdown: &CancellationToken,
    budget_tokens: Option<u64>,
) -> (Arc<Own>, Setup) {
    let mut config = config::parse("t.toml", "instance = \"t\"", &|_| None).unwrap();
    config.max_value_bytes = 1024;
    config.budget_tokens = budget_tokens;
    let parts = crate::tools::tests::parts(store, shutdown).await;
    let (instruction, skills) = (parts.instruction.clone(), parts.skills.clone());
    let own = Arc::new(Own::new(
        store.clone(),
        &config,
        shutdown.clone(),
        Arc::default(),
        Arc::default(),
        parts,
    ));
    let setup = Setup {
        instance: "t".into(),
        own: own.clone(),
        servers: BTreeMap::new(),
        turn_timeout: TURN,
        budget_tokens,
        instruction,
        skills,
    };
    (own, setup)
}

/// The agent at work over the store: `say` is answered by the turn that takes the message;
/// messages sent during a turn wait and the next turn takes them all, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_during_a_turn_are_taken_together_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let shutdown = CancellationToken::new();
    let (own, setup) = own_setup(&store, &shutdown, None).await;
    let (asked, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (asked_again, release_again) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let model = Scripted::new([
        Scene::Held {
            asked: asked.clone(),
            release: release.clone(),
            reply: said("first"),
        },
        Scene::Held {
            asked: asked_again.clone(),
            release: release_again.clone(),
            reply: said("second"),
        },
        text("third"),
    ]);
    let tasks = TaskTracker::new();
    let agent = Agent::start(
        model.clone(),
        setup,
        store.clone(),
        workers::cancelling(),
        &tasks,
        shutdown.clone(),
    );
    let saying = tokio::spawn({
        let agent = agent.clone();
        async move { agent.say("root", "one").await }
    });
    asked.notified().await;
    let operator = Caller::operator(Scope::Root);
    for text in ["two", "three"] {
        let sent = json!({"conversation": "root", "text": text});
        own.call(&operator, "message.send", sent, None)
            .await
            .unwrap();
    }
    release.notify_one();
    assert_eq!(saying.await.unwrap().unwrap().as_deref(), Some("first"));
    // The next turn takes both; `say` waits for the turn that takes its own.
    asked_again.notified().await;
    release_again.notify_one();
    assert_eq!(
        agent.say("root", "four").await.unwrap().as_deref(),
        Some("third")
    );
    let asked = model.asked();
    assert_eq!(asked.len(), 3);
    let users = |r: &crate::agent::scripted::Asked| -> Vec<String> {
        let users = r.messages.iter().filter_map(|m| match m {
            Message::User { text } => Some(text.clone()),
            _ => None,
        });
        users.collect()
    };
    assert_eq!(users(&asked[0]), ["one"]);
    assert_eq!(users(&asked[1]), ["one", "two", "three"]);
    assert_eq!(users(&asked[2]), ["one", "two", "three", "four"]);
    let last = asked[2].messages.last().unwrap().clone();
    assert_eq!(last, user("four"));
    // Turn by turn, in the store.
    let root = store.conversation("root").await.unwrap().unwrap();
    assert_eq!(
        (root.turns, root.taken, root.tokens),
        (3, 4, 3 * USED.total())
    );
    let kept = store
        .conversation_history::<Message>("root", 0, 100)
        .await
        .unwrap();
    let turns: Vec<u64> = kept.iter().map(|e| e.turn).collect();
    assert_eq!(turns, [1, 1, 2, 2, 2, 3, 3]);
    // A message the inbox refuses is said so.
    let refused = agent.say("", "x").await.unwrap_err();
    assert!(
        matches!(&refused, SayError::Refused(e) if e.code() == "invalid_arguments"),
        "{refused:?}"
    );
    // A history the store cannot read: no turn starts, and `say` hears why.
    let unreadable = store.turn_start("odd", 0, &[json!({"role": "nobody"})], 1);
    unreadable.await.unwrap();
    let failed = agent.say("odd", "hello").await.unwrap_err();
    assert!(
        matches!(&failed, SayError::NotStarted(e) if matches!(**e, store::Error::Corrupt(_))),
        "{failed:?}"
    );
    // A turn that fails says why: the script is over.
    let failed = agent.say("other", "hello").await.unwrap_err();
    assert!(
        matches!(&failed, SayError::Failed(e) if e.to_string().contains("the script is over")),
        "{failed:?}"
    );
    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    store.close().await;
}

/// A spent budget starts no turn: `say` hears it, `budget.spent` is logged once, the
/// messages wait in the inbox; a budget raised by the setup wakes them, and one turn takes
/// them all. `status` shows each conversation's tokens and the budget.
#[tokio::test]
async fn a_spent_budget_starts_no_turn_until_it_is_raised() {
    let (_guard, written) = crate::telemetry::log::tests::capture();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let shutdown = CancellationToken::new();
    // One turn spends USED (15 tokens): a budget of 20 lets two start.
    let (own, setup) = own_setup(&store, &shutdown, Some(20)).await;
    let (asked, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let model = Scripted::new([
        text("first"),
        text("second"),
        Scene::Held {
            asked: asked.clone(),
            release: release.clone(),
            reply: said("third"),
        },
        text("fourth"),
    ]);
    let tasks = TaskTracker::new();
    let agent = Agent::start(
        model.clone(),
        setup.clone(),
        store.clone(),
        workers::cancelling(),
        &tasks,
        shutdown.clone(),
    );
    // The conversation told next is the one that spent last: its task, still looking at
    // its inbox, has read the budget after its own tokens were kept (another conversation's
    // task may have read it before, and take a message under it).
    assert_eq!(
        agent.say("c", "one").await.unwrap().as_deref(),
        Some("first")
    );
    assert_eq!(
        agent.say("root", "two").await.unwrap().as_deref(),
        Some("second")
    );
    for text in ["three", "four"] {
        let spent = agent.say("root", text).await.unwrap_err();
        assert!(
            matches!(
                spent,
                SayError::BudgetSpent {
                    used: 30,
                    limit: 20
                }
            ),
            "{spent:?}"
        );
        assert_eq!(spent.code(), "budget_spent");
    }
    let lines: Vec<Value> = written
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["event"] == "budget.spent")
        .collect();
    assert_eq!(lines.len(), 1, "logged once: {lines:?}");
    assert_eq!(
        (&lines[0]["level"], &lines[0]["used"], &lines[0]["limit"]),
        (&json!("warn"), &json!(30), &json!(20))
    );
    let operator = Caller::operator(Scope::Root);
    let status = own
        .call(&operator, "status", json!({}), None)
        .await
        .unwrap();
    assert_eq!(
        status["budget"],
        json!({"tokens_used": 30, "tokens_limit": 20, "spent": true})
    );
    assert_eq!(
        status["conversations"],
        json!([{"id": "c", "inbox": 1, "tokens": 15}, {"id": "root", "inbox": 3, "tokens": 15}])
    );
    assert_eq!(model.asked().len(), 2, "no turn started");

    // Raised: the waiting messages are taken together.
    let mut raised = setup;
    raised.budget_tokens = Some(100);
    agent.set(raised);
    asked.notified().await;
    release.notify_one();
    assert_eq!(
        agent.say("root", "five").await.unwrap().as_deref(),
        Some("fourth")
    );
    let users = |r: &crate::agent::scripted::Asked| -> Vec<String> {
        let users = r.messages.iter().filter_map(|m| match m {
            Message::User { text } => Some(text.clone()),
            _ => None,
        });
        users.collect()
    };
    let asked = model.asked();
    assert_eq!(users(&asked[2]), ["two", "three", "four"]);
    assert_eq!(users(&asked[3]), ["two", "three", "four", "five"]);
    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    store.close().await;
}

/// A compaction's summary is kept: the agent started again over the store shows it in
/// place of the messages it replaced, the history keeping them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_outlives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let shutdown = CancellationToken::new();
    let (_own, setup) = own_setup(&store, &shutdown, None).await;
    let model = Scripted::new([
        text("hello"),
        calls(&[("c", "context_compact", r#"{"keep": 1}"#)]),
        text("greeted, then asked to compact"),
        text("compacted"),
    ]);
    let tasks = TaskTracker::new();
    let start = |model| {
        let stop = shutdown.child_token();
        let agent = Agent::start(
            model,
            setup.clone(),
            store.clone(),
            workers::cancelling(),
            &tasks,
            stop.clone(),
        );
        (agent, stop)
    };
    let (agent, stop) = start(model.clone());
    agent.say("root", "hi").await.unwrap();
    let done = agent.say("root", "compact").await.unwrap();
    assert_eq!(done.as_deref(), Some("compacted"));
    stop.cancel();
    let again = Scripted::new([text("still here")]);
    let (agent, _) = start(again.clone());
    agent.say("root", "and now?").await.unwrap();
    let shown = &again.asked()[0].messages;
    let Message::System { text } = &shown[1] else {
        panic!("{shown:?}")
    };
    assert!(text.starts_with("The first 2 messages"), "{text}");
    assert!(text.ends_with("greeted, then asked to compact"), "{text}");
    assert_eq!(shown[2], user("compact"));
    let root = store.conversation("root").await.unwrap().unwrap();
    assert_eq!(root.summarized, 2);
    let kept = store.conversation_history::<Message>("root", 0, 100).await;
    assert_eq!(kept.unwrap().len(), 8, "every message kept");
    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    store.close().await;
}

/// The servers are dialed before the store opens: a start that then fails at its store (held
/// locked by another process past the wait for a lock) stops the servers it connected to,
/// unbinds its control socket and releases its lock, so that a start once the lock is gone
/// holds the same servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_failing_at_its_store_stops_the_servers_it_dialed() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &server, "");
    let store = dir.path().join("store");
    // A first start makes the store.
    daemon(dir.path(), &server).await.drain().await;
    let bound = tokio::time::Instant::now() + Duration::from_secs(30);
    let until = |state: &'static str, reached: &dyn Fn() -> bool| {
        assert!(tokio::time::Instant::now() < bound, "not {state} in time");
        !reached()
    };
    while until("closed", &|| server.listens() == 0) {
        tokio::task::yield_now().await;
    }
    let lock = rusqlite::Connection::open(store.join("agentd.sqlite3")).unwrap();
    lock.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    let config = config::load(&path, &|_| None).unwrap();
    let start = Daemon::start(config, path.clone());
    // The server is connected (its listen open) while the store waits for its lock.
    let connected = async {
        while until("listened to", &|| server.listens() == 1) {
            tokio::task::yield_now().await;
        }
    };
    let (started, ()) = tokio::join!(start, connected);
    match started {
        Err(StartError::Store(_)) => {}
        Err(e) => panic!("failed otherwise: {e}"),
        Ok(_) => panic!("started on a store held locked"),
    }
    assert!(
        !crate::control::path(&store).exists(),
        "the socket is unbound"
    );
    while until("closed after the failed start", &|| server.listens() == 0) {
        tokio::task::yield_now().await;
    }
    drop(lock);
    let daemon = daemon(dir.path(), &server).await;
    assert!(daemon.servers.contains_key("s"));
    daemon.drain().await;
}
