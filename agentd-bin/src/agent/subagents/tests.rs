//! Subagents in an agent over the store, a scripted model and the reference server: run to
//! their answer (the note of their servers' resources first, `resource.read` offered and
//! answered), sent to again after their server's tools changed (listed again, the new tool
//! offered), killed in the middle of a turn, timed out, retired; reasoning and compacting
//! over their own context, their tokens counted in the instance's budget, which once spent
//! stops them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd_tools::in_memory::InMemory;
use agentd_tools::subagent::{Spec, State, Subagent, Subagents as _, conversation};
use agentd_tools::{Caller, Error, Grants, Scope, Tools};
use mcp_negotiate::{Client, Recovery, Start};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Subagents;
use super::child::{Host, SESSION_IDLE};
use crate::agent::calls::OwnTools;
use crate::agent::conversations::{Agent, Held, SayError, Setup};
use crate::agent::instruction::Instruction;
use crate::agent::model::Message;
use crate::agent::scripted::{Asked, Scene, Scripted, USED, calls, said, text};
use crate::agent::servers::Unheld;
use crate::agent::skills::Skills;
use crate::agent::turn::SYSTEM;
use crate::agent::workers::{self, Followed};
use crate::config::Server;
use crate::store::{Limits, Store};
use crate::telemetry::log::tests::capture;

/// What a test works with: a reference server held as `s`, the store, the subagents, the
/// (in-memory) own tools their turns call, an agent they run in.
struct Bench {
    server: ReferenceServer,
    store: Store,
    own: Arc<Tools<InMemory>>,
    subagents: Subagents,
    model: Arc<Scripted>,
    agent: Agent,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    _supervisor: Client,
    _dir: tempfile::TempDir,
}

async fn bench(scenes: Vec<Scene>, budget_tokens: Option<u64>) -> Bench {
    let server = ReferenceServer::start(Options::default()).await;
    let config = Server {
        name: "s".into(),
        url: server.url(),
        timeout: Duration::from_secs(5),
        headers: Vec::new(),
        tags: BTreeMap::new(),
    };
    let supervisor = crate::dial::connect("t", &config, Recovery::ByOwner);
    let supervisor = supervisor.await.unwrap();
    let held = Held {
        followed: Followed {
            server: config,
            actor: 1,
            start: Start::Like(supervisor.reached_by()),
        },
        catalog: supervisor.catalog(),
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let shutdown = CancellationToken::new();
    let subagents = Subagents::start(store.clone()).await.unwrap();
    let own = Arc::new(Tools::new(InMemory::new("t"), Grants::default()));
    let tasks = TaskTracker::new();
    let setup = Setup {
        instance: "t".into(),
        own: own.clone(),
        servers: BTreeMap::from([("s".to_owned(), held)]),
        turn_timeout: Duration::from_secs(600),
        budget_tokens,
        instruction: Instruction::start("t", None, Arc::new(Unheld), &tasks, shutdown.clone()),
        skills: Skills::start("t", &[], Arc::new(Unheld), &tasks, shutdown.clone()),
    };
    let model = Scripted::new(scenes);
    let elicitors = workers::cancelling();
    let agent = Agent::start(
        model.clone(),
        setup,
        store.clone(),
        elicitors.clone(),
        &tasks,
        shutdown.clone(),
    );
    subagents.attach(Arc::new(Host {
        model: model.clone(),
        agent: agent.clone(),
        elicitors,
        tasks: tasks.clone(),
        stop: shutdown.clone(),
        session_idle: SESSION_IDLE,
    }));
    Bench {
        server,
        store,
        own,
        subagents,
        model,
        agent,
        shutdown,
        tasks,
        _supervisor: supervisor,
        _dir: dir,
    }
}

impl Bench {
    /// How many connections were opened to the server (each starts with `server/discover`).
    fn dials(&self) -> usize {
        let log = self.server.log().into_iter();
        log.filter(|l| l.method.as_deref() == Some("server/discover"))
            .count()
    }

    /// Subagent `id`'s status once `state`, waiting at most 20 s.
    async fn until(&self, id: &str, state: State) -> Subagent {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = self.subagents.status(id).await.unwrap();
            if status.state == state {
                return status;
            }
            assert!(Instant::now() < deadline, "not {state:?}: {status:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn end(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        self.store.close().await;
    }
}

/// The names of the functions a request offers.
fn offered(request: &Asked) -> Vec<String> {
    request.tools.iter().map(|f| f.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_runs_to_its_answer_and_lists_its_tools_again_when_they_change() {
    let bench = bench(
        vec![
            calls(&[("c1", "resource_read", r#"{"uri": "demo://greeting"}"#)]),
            text("it says hello"),
            text("echo is there"),
        ],
        None,
    )
    .await;
    let mut spec = Spec::new("Read the greeting.");
    spec.tools = Some(vec!["memory.*".into()]);
    spec.servers = Some(vec!["s".into()]);
    let id = bench
        .subagents
        .run("conversation:main", spec)
        .await
        .unwrap();
    assert_eq!(id, "s1");
    let status = bench.until("s1", State::Finished).await;
    assert_eq!(
        (status.answer.as_deref(), status.parent.as_str()),
        (Some("it says hello"), "conversation:main")
    );
    assert_eq!((status.turns, status.tokens), (1, 2 * USED.total()));

    // Its first context: the system prompt, the note of its servers' resources, its goal.
    let asked = bench.model.asked();
    let first = &asked[0].messages;
    assert_eq!(
        first[0],
        Message::System {
            text: SYSTEM.into()
        }
    );
    let Message::System { text: note } = &first[1] else {
        panic!("a note: {first:?}")
    };
    assert!(
        note.contains("- demo://greeting (s): greeting, text/plain"),
        "{note}"
    );
    assert_eq!(
        first[2],
        Message::User {
            text: "Read the greeting.".into()
        }
    );
    // Offered: the own tools its run named, resource.read, its server's tools.
    let tools = offered(&asked[0]);
    for name in ["memory_get", "resource_read", "s__add"] {
        assert!(tools.contains(&name.to_owned()), "{name}: {tools:?}");
    }
    for name in ["plan_get", "subagent_run", "finish"] {
        assert!(!tools.contains(&name.to_owned()), "{name}: {tools:?}");
    }
    let read = asked[1].messages.iter().find_map(|m| match m {
        Message::Tool { text, .. } => Some(text.clone()),
        _ => None,
    });
    let read: Value = serde_json::from_str(&read.unwrap()).unwrap();
    assert_eq!(
        (&read["server"], &read["contents"][0]["text"]),
        (&json!("s"), &json!("hello"))
    );
    // Read over its own connection, not the supervisor's.
    let reads = bench.server.log().into_iter();
    let mut reads = reads.filter(|l| l.method.as_deref() == Some("resources/read"));
    let read = reads.next().unwrap();
    let client = &read.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(client["elicitation"].is_object(), "{}", read.body);

    // Its server's tools change: its next turn lists them again, and offers the new one.
    bench.server.add_tool("echo").await;
    bench.subagents.tools_changed("s");
    let again = bench
        .subagents
        .send("s1", "operator", "Is echo there?")
        .await;
    assert_eq!(again.unwrap().state, State::Running);
    let status = bench.until("s1", State::Finished).await;
    assert_eq!(
        (status.answer.as_deref(), status.turns),
        (Some("echo is there"), 2)
    );
    let asked = bench.model.asked();
    assert!(offered(&asked[2]).contains(&"s__echo".to_owned()));
    // Run on over the session it kept: the supervisor's dial and its own.
    assert_eq!(bench.dials(), 2);
    assert!(!offered(&asked[1]).contains(&"s__echo".to_owned()));
    let notes = asked[2].messages.iter();
    let notes = notes
        .filter(|m| matches!(m, Message::System { .. }))
        .count();
    assert_eq!(notes, 2, "the prompt and one note");
    // Listed for its parent alone.
    let listed = bench
        .subagents
        .list(Some("conversation:main"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        bench
            .subagents
            .list(Some("operator"))
            .await
            .unwrap()
            .is_empty()
    );
    bench.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_is_killed_mid_turn_runs_again_times_out_and_is_retired() {
    let (asked, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let bench = bench(
        vec![
            Scene::Held {
                asked: asked.clone(),
                release: release.clone(),
                reply: said("never heard"),
            },
            text("resumed"),
            Scene::Hang,
        ],
        None,
    )
    .await;
    let subagents = &bench.subagents;
    let code = |e: Error| e.code();
    let id = subagents.run("operator", Spec::new("Wait.")).await.unwrap();
    asked.notified().await;
    assert_eq!(
        subagents.retire(&id).await.map_err(code).err(),
        Some("running")
    );
    let killed = subagents.kill(&id).await.unwrap();
    assert_eq!(killed.state, State::Killed);
    release.notify_one();
    // Its turn was dropped: what the model said then is not its answer.
    let status = subagents.status(&id).await.unwrap();
    assert_eq!((status.state, status.answer), (State::Killed, None));
    // Sent to: it runs again, over both messages.
    subagents.send(&id, "operator", "Go on.").await.unwrap();
    let status = bench.until(&id, State::Finished).await;
    assert_eq!(status.answer.as_deref(), Some("resumed"));
    let users = |r: &Asked| {
        let users = r
            .messages
            .iter()
            .filter(|m| matches!(m, Message::User { .. }));
        users.count()
    };
    assert_eq!(users(&bench.model.asked()[1]), 2);

    // Its deadline passes in the middle of a turn: it timed out.
    let mut hang = Spec::new("Hang.");
    hang.deadline = Some(Duration::from_millis(200));
    let hung = subagents.run("operator", hang).await.unwrap();
    let status = bench.until(&hung, State::TimedOut).await;
    assert_eq!(status.error.as_deref(), Some("its deadline passed"));

    // Retired: no longer listed or reached; its status still answers.
    assert_eq!(subagents.retire(&id).await.unwrap().state, State::Retired);
    let listed = subagents.list(None).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [hung.as_str()]
    );
    let gone = subagents.send(&id, "operator", "?").await.map_err(code);
    assert_eq!(gone.err(), Some("unknown_subagent"));
    assert_eq!(subagents.status(&id).await.unwrap().state, State::Retired);
    bench.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_agent_or_a_server_a_subagent_does_not_run() {
    let bench = bench(Vec::new(), None).await;
    let subagents = &bench.subagents;
    let mut nowhere = Spec::new("g");
    nowhere.servers = Some(vec!["elsewhere".into()]);
    let refused = subagents.run("operator", nowhere).await.unwrap_err();
    assert_eq!(refused.code(), "not_connected");
    let unknown = subagents.status("s9").await.unwrap_err();
    assert_eq!(unknown.code(), "unknown_subagent");
    // Its turns call the own tools as a subagent, which runs none.
    let caller = Caller::subagent("s1");
    let nested = bench
        .own
        .call(&caller, "subagent.run", json!({"goal": "g"}));
    assert_eq!(nested.await.unwrap_err().code(), "not_granted");
    let scoped = bench.own.granted(Scope::Subagent);
    assert!(scoped.into_iter().all(|t| !t.name.starts_with("subagent.")));
    // The agent stopped: nothing runs them.
    subagents.detach();
    let refused = subagents.run("operator", Spec::new("g")).await.unwrap_err();
    assert_eq!(refused.code(), "no_agent");
    bench.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_reasons_compacts_and_stops_with_the_budget() {
    // Each reply uses USED (15 tokens): six replies spend 90 of 100, the seventh 105.
    let bench = bench(
        vec![
            calls(&[("c1", "think", r#"{"prompt": "Plan it"}"#)]),
            text("step one, then step two"),
            text("planned"),
            calls(&[("c2", "context_compact", r#"{"keep": 1}"#)]),
            text("it planned the work"),
            text("compacted"),
            text("more"),
        ],
        Some(100),
    )
    .await;
    let subagents = &bench.subagents;
    let id = subagents.run("operator", Spec::new("Plan.")).await.unwrap();
    let status = bench.until(&id, State::Finished).await;
    assert_eq!(
        (status.answer.as_deref(), status.tokens),
        (Some("planned"), 3 * USED.total())
    );
    // think: the round's messages, then the prompt, no tools offered; its thought goes back.
    let asked = bench.model.asked();
    assert!(offered(&asked[0]).contains(&"think".to_owned()));
    assert!(asked[1].tools.is_empty());
    assert_eq!(
        asked[1].messages.last(),
        Some(&Message::User {
            text: "Plan it".into()
        })
    );
    let thought = asked[2].messages.iter().find_map(|m| match m {
        Message::Tool { text, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(
        thought.as_deref(),
        Some(r#"{"thought":"step one, then step two"}"#)
    );

    // context.compact: the summary is kept for its conversation, and shown from then on.
    subagents.send(&id, "operator", "Compact.").await.unwrap();
    let status = bench.until(&id, State::Finished).await;
    assert_eq!(status.answer.as_deref(), Some("compacted"));
    let kept = bench.store.conversation(&conversation(&id)).await.unwrap();
    let kept = kept.unwrap();
    assert_eq!(
        (kept.summarized, kept.summary.as_deref()),
        (5, Some("it planned the work"))
    );
    subagents.send(&id, "operator", "More.").await.unwrap();
    let status = bench.until(&id, State::Finished).await;
    assert_eq!(
        (status.answer.as_deref(), status.tokens),
        (Some("more"), 7 * USED.total())
    );
    let last = bench.model.asked().pop().unwrap();
    let Message::System { text: summary } = &last.messages[1] else {
        panic!("the summary: {:?}", last.messages)
    };
    assert!(
        summary.starts_with("The first 5 messages") && summary.ends_with("it planned the work"),
        "{summary}"
    );

    // Its tokens are the instance's: the budget is spent, and its next turn does not start.
    let setup = bench.agent.setup();
    let spent = bench.agent.spent(&setup).await.unwrap();
    assert!(
        matches!(
            spent,
            Some(SayError::BudgetSpent {
                used: 105,
                limit: 100
            })
        ),
        "{spent:?}"
    );
    subagents.send(&id, "operator", "Again.").await.unwrap();
    let status = bench.until(&id, State::Failed).await;
    let error = status.error.unwrap();
    assert!(
        error.starts_with("the token budget is spent (105 of limits.budget_tokens = 100 used)"),
        "{error}"
    );
    assert_eq!(bench.model.asked().len(), 7, "no turn started");
    bench.end().await;
}

/// In virtual time (the idle bound passes at once), on one thread (its log captured).
#[tokio::test(start_paused = true)]
async fn a_settled_subagent_closes_its_session_once_idle_and_opens_another() {
    let (_guard, lines) = capture();
    let bench = bench(vec![text("first"), text("second")], None).await;
    // Two tools that come to one name in its offer.
    bench.server.add_tool("ec.ho").await;
    bench.server.add_tool("ec_ho").await;
    let mut spec = Spec::new("Answer twice.");
    spec.servers = Some(vec!["s".into()]);
    let id = bench.subagents.run("conversation:main", spec).await;
    let id = id.unwrap();
    bench.until(&id, State::Finished).await;
    // The supervisor's dial and the subagent's.
    assert_eq!(bench.dials(), 2);
    let offer = offered(&bench.model.asked()[0]);
    assert!(offer.contains(&"s__ec_ho_2".to_owned()), "{offer:?}");
    let collisions: Vec<Value> = lines
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["event"] == "tool.name.collision")
        .collect();
    assert_eq!(collisions.len(), 1, "{collisions:?}");
    assert_eq!(
        (
            &collisions[0]["server"],
            &collisions[0]["tool"],
            &collisions[0]["name"]
        ),
        (&json!("s"), &json!("ec_ho"), &json!("s__ec_ho_2"))
    );
    tokio::time::sleep(SESSION_IDLE + Duration::from_secs(1)).await;
    let sent = bench.subagents.send(&id, "operator", "Again.").await;
    assert_eq!(sent.unwrap().state, State::Running);
    let status = bench.until(&id, State::Finished).await;
    assert_eq!(
        (status.answer.as_deref(), status.turns),
        (Some("second"), 2)
    );
    // Its session closed once idle: the second run dialed afresh.
    assert_eq!(bench.dials(), 3);
    bench.end().await;
}
