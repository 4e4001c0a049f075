//! Turns against a scripted model, the reference server of both eras (over turn workers) and
//! the in-memory own tools; the agent at work over the store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_tools::in_memory::InMemory;
use agentd_tools::{Caller, Grants, Scope, Tools};
use mcp_negotiate::{Client, Recovery, Start};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::calls::Runner;
use super::context::{Context, Summary};
use super::meta::{Place, TurnIds};
use super::model::{Finish, Message, Reply, ToolCall};
use super::names::Offer;
use super::scripted::{Scene, Scripted, USED, calls, text};
use super::servers::Unheld;
use super::skills::Skills;
use super::turn::{Durable, Ended, History, SYSTEM, Turn, TurnError};
use super::workers::{self, Followed, Workers};
use crate::config::Server;
use crate::human::Gate;
use crate::store::{self, Limits, Store};

/// A turn's deadline, as configured unless set.
const TURN: Duration = Duration::from_secs(600);

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

/// A history held in memory, as a turn under paused time keeps it (the store's thread would
/// let tokio's clock jump while it writes).
#[derive(Debug, Default)]
struct Recorded {
    messages: Mutex<Vec<Message>>,
    tokens: AtomicU64,
    summary: Mutex<Option<Summary>>,
}

impl History for Recorded {
    fn append(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        self.messages.lock().unwrap().push(message.clone());
        async { Ok(()) }
    }

    fn used(&self, tokens: u64) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        self.tokens.fetch_add(tokens, Ordering::Relaxed);
        async { Ok(()) }
    }

    fn compacted(
        &self,
        summary: &Summary,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        *self.summary.lock().unwrap() = Some(summary.clone());
        async { Ok(()) }
    }
}

/// A reference server (`legacy`: of 2025-11-25 alone, else both eras, reached at
/// 2026-07-28) held by a supervisor's connection, its worker, and the in-memory own tools.
struct Bench {
    server: ReferenceServer,
    workers: Workers,
    tools: Tools<InMemory>,
    offer: Offer,
    skills: Skills,
    _supervisor: Client,
}

fn server_config(url: String) -> Server {
    Server {
        name: "s".into(),
        url,
        timeout: Duration::from_secs(5),
        headers: Vec::new(),
        tags: BTreeMap::new(),
    }
}

async fn bench(legacy: bool) -> Bench {
    bench_asking(legacy, workers::cancelling()).await
}

/// As [`bench`], its workers' elicitations answered by `elicitors`.
async fn bench_asking(legacy: bool, elicitors: workers::Elicitors) -> Bench {
    let mut options = Options::default();
    options.modern = !legacy;
    let server = ReferenceServer::start(options).await;
    let config = server_config(server.url());
    let supervisor = crate::dial::connect("t", &config, Recovery::ByOwner)
        .await
        .unwrap();
    let followed = Followed {
        server: config,
        actor: 1,
        start: Start::Like(supervisor.reached_by()),
    };
    let workers = Workers::new(elicitors, TaskTracker::new());
    workers.follow(&BTreeMap::from([("s".to_owned(), followed)]));
    let tools = Tools::new(InMemory::new("t"), Grants::default());
    let catalog = supervisor.catalog();
    let (offer, collisions) = Offer::new(
        tools.offered(Scope::Root),
        catalog.tools().iter().map(|t| ("s", t)),
    );
    assert!(collisions.is_empty());
    let skills = Skills::start(
        "t",
        &[],
        Arc::new(Unheld),
        &TaskTracker::new(),
        CancellationToken::new(),
    );
    Bench {
        server,
        workers,
        tools,
        offer,
        skills,
        _supervisor: supervisor,
    }
}

fn ids() -> TurnIds {
    TurnIds::new(crate::clock::random_bytes(), crate::clock::random_bytes())
}

impl Bench {
    /// Runs turn `turn` of `conversation` over `history` with `model`, kept in `kept`.
    async fn turn(
        &self,
        model: &Arc<Scripted>,
        kept: &impl History,
        at: (&str, u64),
        timeout: Duration,
        history: &mut Vec<Message>,
    ) -> (TurnIds, Result<Ended, TurnError>) {
        let mut context = Context::new(std::mem::take(history));
        let ended = self.turn_in(model, kept, at, timeout, &mut context).await;
        *history = context.history;
        ended
    }

    /// Runs turn `turn` of `conversation` over `context` with `model`, kept in `kept`.
    async fn turn_in(
        &self,
        model: &Arc<Scripted>,
        kept: &impl History,
        (conversation, turn): (&str, u64),
        timeout: Duration,
        context: &mut Context,
    ) -> (TurnIds, Result<Ended, TurnError>) {
        let caller = Caller::root(conversation);
        let turn = Turn {
            model,
            runner: Runner {
                own: &self.tools,
                workers: &self.workers,
                caller: &caller,
                deadline: Instant::now() + timeout,
            },
            offer: &self.offer,
            history: kept,
            system: Message::System {
                text: SYSTEM.into(),
            },
            skills: &self.skills,
            place: Place {
                instance: "t",
                conversation,
                turn,
            },
            ids: ids(),
            spans: crate::clock::random_bytes::<8>,
        };
        let ended = turn.run(context).await;
        (turn.ids, ended)
    }

    /// The `tools/call` requests of `tool` the server received.
    fn calls_of(&self, tool: &str) -> Vec<Value> {
        let log = self.server.log();
        let calls = log.into_iter().filter(|l| {
            l.method.as_deref() == Some("tools/call") && l.body["params"]["name"] == tool
        });
        calls.map(|l| l.body).collect()
    }
}

/// The results each call of `history` got, by call id.
fn results(history: &[Message]) -> BTreeMap<String, String> {
    let results = history.iter().filter_map(|m| match m {
        Message::Tool { call_id, text } => Some((call_id.clone(), text.clone())),
        _ => None,
    });
    results.collect()
}

/// A reply's calls of an MCP tool and of an own tool run, their results go back, the model
/// answers; every call carries the turn's `_meta` on the wire; the worker started the way
/// the supervisor's connection did; the history is there after the store is opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_s_calls_run_and_carry_the_turn_s_meta_in_each_era() {
    for legacy in [false, true] {
        let bench = bench(legacy).await;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Limits::default()).await.unwrap();
        let asked = [user("add 2 and 3, and keep 1 as k")];
        assert_eq!(store.turn_start("root", 0, &asked, 1).await.unwrap(), 1);
        let model = Scripted::new([
            calls(&[
                ("c1", "s__add", r#"{"a": 2, "b": 3}"#),
                ("c2", "memory_set", r#"{"key": "k", "value": 1}"#),
                ("c3", "s__add", r#"{"a": 1, "b": 1}"#),
            ]),
            text("5; k is kept"),
        ]);
        let kept = Durable {
            store: &store,
            conversation: "root",
            turn: 1,
        };
        let mut history = asked.to_vec();
        let (ids, ended) = bench
            .turn(&model, &kept, ("root", 1), TURN, &mut history)
            .await;
        let ended = ended.unwrap();
        assert_eq!(
            (ended.text.as_deref(), ended.finished, ended.rounds),
            (Some("5; k is kept"), false, 2),
            "legacy {legacy}"
        );
        let got = results(&history);
        assert_eq!(got["c1"], "5");
        assert_eq!(got["c2"], r#"{"version":1}"#);
        assert_eq!(got["c3"], "2");
        let asked = model.asked();
        let asked_again = &asked[1];
        assert_eq!(
            asked_again.messages[0],
            Message::System {
                text: SYSTEM.into()
            }
        );
        assert_eq!(results(&asked_again.messages), got, "the results went back");
        assert_eq!(asked_again.tools, bench.offer.functions());
        let caller = Caller::root("root");
        let k = bench.tools.call(&caller, "memory.get", json!({"key": "k"}));
        assert_eq!(k.await.unwrap()["value"], 1);

        // Each MCP call's `_meta`: the turn's, its own span and key.
        let adds = bench.calls_of("add");
        assert_eq!(adds.len(), 2, "legacy {legacy}");
        let metas: Vec<&Value> = adds.iter().map(|b| &b["params"]["_meta"]).collect();
        let trace = |m: &Value| -> (String, String) {
            let parent = m["traceparent"].as_str().unwrap();
            let parts: Vec<&str> = parent.split('-').collect();
            assert_eq!(parts.len(), 4, "{parent}");
            assert_eq!((parts[0], parts[3]), ("00", "01"), "{parent}");
            assert_eq!((parts[1].len(), parts[2].len()), (32, 16), "{parent}");
            let hex = |s: &str| {
                s.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            };
            assert!(hex(parts[1]) && hex(parts[2]), "{parent}");
            (parts[1].to_owned(), parts[2].to_owned())
        };
        let (trace0, span0) = trace(metas[0]);
        let (trace1, span1) = trace(metas[1]);
        assert_eq!(trace0, trace1, "one trace per turn");
        assert_ne!(span0, span1, "a span per call");
        let mut keys = Vec::new();
        for meta in &metas {
            assert_eq!(meta["agent/run_id"], ids.run_id.as_str());
            assert_eq!(meta["agent/instance"], "t");
            assert_eq!(
                meta["agent/ctx"],
                json!({"conversation": "root", "turn": 1})
            );
            keys.push(meta["agent/idempotency_key"].as_str().unwrap().to_owned());
        }
        keys.sort();
        assert_eq!(
            keys,
            [0, 2].map(|index| ids.idempotency_key(1, index)),
            "one key per call of the model"
        );

        // The worker: no title, elicitation declared, started as the supervisor's was.
        let methods = bench.server.methods();
        let count = |m: &str| methods.iter().filter(|x| *x == m).count();
        match legacy {
            true => {
                assert_eq!(count("server/discover"), 1, "the worker did not probe");
                assert_eq!(count("initialize"), 2);
                let log = bench.server.log();
                let inits: Vec<&Value> = log
                    .iter()
                    .filter(|l| l.method.as_deref() == Some("initialize"))
                    .map(|l| &l.body["params"])
                    .collect();
                assert_eq!(inits[0]["clientInfo"]["title"], "t", "the supervisor's");
                assert_eq!(inits[1]["clientInfo"]["title"], Value::Null, "the worker's");
                assert!(inits[1]["capabilities"]["elicitation"].is_object());
            }
            false => {
                assert_eq!(count("server/discover"), 2);
                assert_eq!(count("initialize"), 0);
                let info = &metas[0]["io.modelcontextprotocol/clientInfo"];
                assert_eq!(info["name"], "agentd");
                assert_eq!(info["title"], Value::Null, "the worker's");
                let caps = &metas[0]["io.modelcontextprotocol/clientCapabilities"];
                assert!(caps["elicitation"].is_object(), "{caps}");
            }
        }

        // Every message was kept: there after the store is opened again.
        store.close().await;
        let store = Store::open(dir.path(), Limits::default()).await.unwrap();
        let kept = store
            .conversation_history::<Message>("root", 0, 100)
            .await
            .unwrap();
        let kept: Vec<Message> = kept.into_iter().map(|e| e.message).collect();
        assert_eq!(kept, history, "legacy {legacy}");
        let root = store.conversation("root").await.unwrap().unwrap();
        assert_eq!(root.tokens, 2 * USED.total());
        store.close().await;
    }
}

/// In virtual time: a reply calls a tool that would run for ten minutes with two that answer
/// at once; the two go back as they end, the long one is cut at the turn's deadline and
/// cancelled on the wire, and the turn ends there.
#[tokio::test(start_paused = true)]
async fn a_call_cut_at_the_deadline_is_cancelled_and_holds_up_no_other() {
    for legacy in [false, true] {
        let bench = bench(legacy).await;
        let model = Scripted::new([calls(&[
            ("long", "s__slow", r#"{"steps": 600, "delay_ms": 1000}"#),
            ("sum", "s__add", r#"{"a": 1, "b": 2}"#),
            ("set", "memory_set", r#"{"key": "k", "value": 1}"#),
        ])]);
        let kept = Recorded::default();
        let mut history = vec![user("go")];
        let timeout = Duration::from_secs(10);
        let start = Instant::now();
        let (_, ended) = bench
            .turn(&model, &kept, ("root", 1), timeout, &mut history)
            .await;
        assert!(matches!(ended, Err(TurnError::Deadline)), "{ended:?}");
        assert!(Instant::now() >= start + timeout);
        assert_eq!(model.asked().len(), 1, "no round after the deadline");
        // The calls that answered at once went back first; the long one was cut.
        let kept = kept.messages.lock().unwrap().clone();
        let order: Vec<(&str, &str)> = kept
            .iter()
            .filter_map(|m| match m {
                Message::Tool { call_id, text } => Some((call_id.as_str(), text.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(order.len(), 3, "{order:?}");
        assert_eq!(
            order[2],
            ("long", "error: the call was cut at the turn's deadline"),
            "legacy {legacy}"
        );
        let first: BTreeMap<&str, &str> = order[..2].iter().copied().collect();
        assert_eq!(
            first,
            BTreeMap::from([("sum", "3"), ("set", r#"{"version":1}"#)])
        );
        assert_eq!(kept, history[1..]);

        // On the wire: a legacy server is told, a modern one sees the stream close.
        let slow = bench.calls_of("slow");
        assert_eq!(slow.len(), 1);
        let id = slow[0]["id"].clone();
        match legacy {
            true => {
                // Sent on a task of its own: waited for, within a bound.
                let told = tokio::time::timeout(Duration::from_secs(60), async {
                    loop {
                        let log = bench.server.log();
                        let cancelled = log
                            .into_iter()
                            .find(|l| l.method.as_deref() == Some("notifications/cancelled"));
                        if let Some(cancelled) = cancelled {
                            return cancelled;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                });
                let cancelled = told.await.expect("notifications/cancelled");
                assert_eq!(cancelled.body["params"]["requestId"], id);
                assert!(cancelled.at >= start + timeout, "at the bound, not before");
            }
            false => {
                let seen = tokio::time::timeout(Duration::from_secs(60), async {
                    while !bench.server.abandoned().contains(&id) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                });
                seen.await.expect("the server saw the stream close");
            }
        }
    }
}

/// What cannot be called, and a tool that fails, go back to the model as an error it reads,
/// and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_called_goes_back_as_an_error() {
    let bench = bench(false).await;
    let model = Scripted::new([
        calls(&[
            ("json", "memory_set", r#"{"key": "#),
            ("array", "s__add", "[1, 2]"),
            ("name", "memory.set", "{}"),
            ("schema", "memory_set", r#"{"key": "k"}"#),
            ("fails", "s__fail", ""),
        ]),
        text("I could not"),
    ]);
    let kept = Recorded::default();
    let mut history = vec![user("try")];
    let (_, ended) = bench
        .turn(&model, &kept, ("c", 1), TURN, &mut history)
        .await;
    assert_eq!(ended.unwrap().text.as_deref(), Some("I could not"));
    let got = results(&history);
    assert!(
        got["json"].starts_with("error: the arguments of memory_set are not valid JSON"),
        "{got:?}"
    );
    assert_eq!(
        got["array"],
        "error: the arguments of s__add must be a JSON object"
    );
    assert_eq!(
        got["name"],
        "error: no function is named \"memory.set\": call one of those offered"
    );
    assert!(
        got["schema"]
            .starts_with("error: invalid_arguments: memory.set: arguments at \"\" break required"),
        "{got:?}"
    );
    assert_eq!(got["fails"], "error: the tool failed");
    // Only the one that could be made reached the server.
    assert!(bench.calls_of("add").is_empty());
    assert_eq!(bench.calls_of("fail").len(), 1);
    // A server no longer held.
    bench.workers.follow(&BTreeMap::new());
    let model = Scripted::new([
        calls(&[("gone", "s__add", r#"{"a": 1, "b": 1}"#)]),
        text("ok"),
    ]);
    let (_, ended) = bench
        .turn(&model, &kept, ("c", 2), TURN, &mut history)
        .await;
    assert!(ended.is_ok());
    assert_eq!(
        results(&history)["gone"],
        "error: the server is not connected"
    );
}

/// A round in which the model calls `finish` is the turn's last: it ends with the model's
/// text or the summary; a unit finished before ends it all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_ends_the_turn_after_its_round() {
    let bench = bench(false).await;
    let model = Scripted::new([
        calls(&[
            ("set", "memory_set", r#"{"key": "k", "value": 2}"#),
            (
                "end",
                "finish",
                r#"{"status": "done", "summary": "k is 2"}"#,
            ),
        ]),
        Scene::Reply(Reply {
            text: Some("done again".into()),
            calls: vec![ToolCall {
                id: "again".into(),
                name: "finish".into(),
                arguments: r#"{"status": "done", "summary": "twice"}"#.into(),
            }],
            finish: Finish::ToolCalls,
            usage: USED,
        }),
    ]);
    let kept = Recorded::default();
    let mut history = vec![user("set k to 2")];
    let (_, ended) = bench
        .turn(&model, &kept, ("root", 1), TURN, &mut history)
        .await;
    let ended = ended.unwrap();
    assert_eq!(
        (ended.text.as_deref(), ended.finished, ended.rounds),
        (Some("k is 2"), true, 1)
    );
    assert_eq!(model.asked().len(), 1, "not asked after the round");
    let got = results(&history);
    assert_eq!(got["set"], r#"{"version":1}"#);
    assert_eq!(
        serde_json::from_str::<Value>(&got["end"]).unwrap()["unit"],
        "conversation:root"
    );
    history.push(user("and again"));
    let (_, ended) = bench
        .turn(&model, &kept, ("root", 2), TURN, &mut history)
        .await;
    let ended = ended.unwrap();
    assert_eq!(
        (ended.text.as_deref(), ended.finished),
        (Some("done again"), true)
    );
    assert!(results(&history)["again"].starts_with("error: already_finished"));
}

/// A server's elicitation on a worker is a question to a person (the human gate): answered,
/// its answer is the form's content, and the tool's result goes back to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_on_a_worker_is_a_question_to_a_person() {
    use agentd_tools::human::Humans as _;

    for legacy in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Limits::default()).await.unwrap();
        let tasks = TaskTracker::new();
        let gate = Gate::start(store.clone(), "t", CancellationToken::new(), &tasks);
        let gate = gate.await.unwrap();
        let asking = gate.clone();
        let elicitors: workers::Elicitors = Arc::new(
            move |server: &str| -> Arc<dyn mcp_transport::driver::Elicitor> {
                Arc::new(asking.elicitor(server))
            },
        );
        let bench = bench_asking(legacy, elicitors).await;
        let model = Scripted::new([calls(&[("q", "s__ask", "{}")]), text("greeted")]);
        let kept = Recorded::default();
        let mut history = vec![user("greet someone")];
        let turn = bench.turn(&model, &kept, ("root", 1), TURN, &mut history);
        let answering = async {
            let deadline = Instant::now() + Duration::from_secs(15);
            let question = loop {
                if let Some(question) = gate.open().await.unwrap().pop() {
                    break question;
                }
                assert!(Instant::now() < deadline, "no question was asked");
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            assert_eq!(question.origin.from(), "s", "legacy {legacy}");
            assert_eq!(question.text, "What is your name?");
            gate.answer(question.id, json!({"name": "Ada"}))
                .await
                .unwrap();
        };
        let ((_, ended), ()) = tokio::join!(turn, answering);
        assert_eq!(ended.unwrap().text.as_deref(), Some("greeted"));
        let greeting = &results(&history)["q"];
        assert!(greeting.contains("Ada"), "legacy {legacy}: {greeting}");
        store.close().await;
    }
}

/// In virtual time, in both eras: a server's elicitation during a turn that nobody answers
/// is answered cancel at its 300 s bound (on the wire: POSTed to the legacy server, sent with
/// the modern call made again), its question ends cancelled, and the tool's result goes back
/// to the model, whose turn goes on.
#[tokio::test(start_paused = true)]
async fn an_elicitation_nobody_answers_is_cancelled_at_300_seconds() {
    use agentd_tools::human::Humans as _;

    use crate::dial::ELICITATION_TIMEOUT;
    use crate::store::questions::State;

    for legacy in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Limits::default()).await.unwrap();
        let tasks = TaskTracker::new();
        let gate = Gate::start(store.clone(), "t", CancellationToken::new(), &tasks);
        let gate = gate.await.unwrap();
        let asking = gate.clone();
        let elicitors: workers::Elicitors = Arc::new(
            move |server: &str| -> Arc<dyn mcp_transport::driver::Elicitor> {
                Arc::new(asking.elicitor(server))
            },
        );
        let bench = bench_asking(legacy, elicitors).await;
        // The legacy server waits past the bound for its answer.
        let model = Scripted::new([
            calls(&[("q", "s__ask", r#"{"wait_ms": 400000}"#)]),
            text("nobody answered"),
        ]);
        let kept = Recorded::default();
        let mut history = vec![user("greet someone")];
        let start = Instant::now();
        let (_, ended) = bench
            .turn(&model, &kept, ("root", 1), TURN, &mut history)
            .await;
        assert_eq!(ended.unwrap().text.as_deref(), Some("nobody answered"));
        assert!(Instant::now() >= start + ELICITATION_TIMEOUT, "not before");
        assert_eq!(results(&history)["q"], "cancel", "legacy {legacy}");
        assert_eq!(model.asked().len(), 2, "the turn went on");

        let cancel = json!({"action": "cancel"});
        let log = bench.server.log();
        match legacy {
            true => {
                let posted = log
                    .iter()
                    .find(|l| l.method.is_none() && l.body["result"].is_object())
                    .expect("the answer is POSTed");
                assert_eq!(posted.body["result"], cancel);
                assert!(posted.at >= start + ELICITATION_TIMEOUT);
            }
            false => {
                let asks = bench.calls_of("ask");
                assert_eq!(asks.len(), 2, "asked, then called again with the answer");
                assert_eq!(asks[1]["params"]["inputResponses"]["name"], cancel);
            }
        }
        let question = store.question(1).await.unwrap().expect("asked");
        assert_eq!(question.state, State::Cancelled, "legacy {legacy}");
        assert_eq!(question.text, "What is your name?");
        assert_eq!(gate.open().await.unwrap(), []);
        store.close().await;
    }
}

/// The model-only tools reason over the round they were called in: `think` asks the model
/// with the messages it was shown and no tools; `decide`'s answers are checked, a wrong one
/// going back as a typed error; `context.compact` replaces the older messages by the
/// model's summary from the next request on, kept by the history. Each call's tokens are the
/// turn's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_only_tools_reason_over_their_round() {
    let bench = bench(false).await;
    let decide = r#"{"questions": [{"id": "go", "question": "Deploy?", "type": "choice", "options": ["now", "later"]}]}"#;
    let model = Scripted::new([
        calls(&[("t", "think", r#"{"prompt": "Plan the deploy"}"#)]),
        text("First the tests, then the deploy."),
        calls(&[("d1", "decide", decide)]),
        text(r#"{"answers": [{"id": "go", "answer": "soon", "confidence": 0.6}]}"#),
        calls(&[("d2", "decide", decide)]),
        text(r#"Sure: {"answers": [{"id": "go", "answer": "later", "confidence": 0.75}]}"#),
        calls(&[("c", "context_compact", r#"{"keep": 2}"#)]),
        text("The operator asked for a deploy; the plan is tests first; decided: later."),
        text("Deploying later."),
    ]);
    let kept = Recorded::default();
    let mut context = Context::new(vec![user("deploy?")]);
    let (_, ended) = bench
        .turn_in(&model, &kept, ("root", 1), TURN, &mut context)
        .await;
    assert_eq!(ended.unwrap().text.as_deref(), Some("Deploying later."));
    let asked = model.asked();
    assert_eq!(asked.len(), 9);
    assert_eq!(kept.tokens.load(Ordering::Relaxed), 9 * USED.total());

    // think: the round's messages, then the prompt; no tools.
    let mut shown = asked[0].messages.clone();
    shown.push(user("Plan the deploy"));
    assert_eq!(asked[1].messages, shown);
    assert!(asked[1].tools.is_empty());
    let got = results(&context.history);
    assert_eq!(
        serde_json::from_str::<Value>(&got["t"]).unwrap(),
        json!({"thought": "First the tests, then the deploy."})
    );
    // decide: a wrong answer is a typed error the model reads; a right one comes back.
    assert!(
        got["d1"].starts_with("error: bad_answer: the answer at \"/answers/0/answer\" breaks enum"),
        "{}",
        got["d1"]
    );
    assert_eq!(
        serde_json::from_str::<Value>(&got["d2"]).unwrap(),
        json!({"answers": [{"id": "go", "answer": "later", "confidence": 0.75}]})
    );
    // context.compact: the model summarized the messages before the last two (moved back
    // so that no call is parted from its result), from the next request on.
    let summarizing = &asked[7].messages;
    assert!(asked[7].tools.is_empty());
    assert_eq!(summarizing.len(), 2);
    let Message::User { text: transcript } = &summarizing[1] else {
        panic!("{summarizing:?}")
    };
    assert!(transcript.starts_with("user: deploy?\n"), "{transcript}");
    assert!(
        transcript.contains("assistant: called decide("),
        "{transcript}"
    );
    assert!(!transcript.contains("answer\": \"later"), "{transcript}");
    assert_eq!(
        serde_json::from_str::<Value>(&got["c"]).unwrap(),
        json!({
            "replaced": 5,
            "kept": 2,
            "summary": "The operator asked for a deploy; the plan is tests first; decided: later.",
        })
    );
    let last = &asked[8].messages;
    let Message::System { text: note } = &last[1] else {
        panic!("{last:?}")
    };
    assert!(note.starts_with("The first 5 messages"), "{note}");
    assert_eq!(last[2..], context.history[5..9]);
    // The history keeps every message; the summary is kept with it.
    assert_eq!(context.history.len(), 10);
    assert_eq!(*kept.messages.lock().unwrap(), context.history[1..]);
    let summary = kept.summary.lock().unwrap().clone().unwrap();
    assert_eq!(summary.through(), 5);
    assert_eq!(context.summary, Some(summary));
}

/// Runs a turn whose model calls a tool counting `steps` seconds, in a turn of an hour: what
/// the model read back, and how long the turn took.
async fn long_call(steps: u64) -> (String, Duration) {
    let bench = bench(false).await;
    let arguments = json!({"steps": steps, "delay_ms": 1000}).to_string();
    let model = Scripted::new([calls(&[("long", "s__slow", &arguments)]), text("done")]);
    let kept = Recorded::default();
    let mut history = vec![user("go")];
    let start = Instant::now();
    let hour = Duration::from_secs(3600);
    let (_, ended) = bench
        .turn(&model, &kept, ("root", 1), hour, &mut history)
        .await;
    assert_eq!(ended.unwrap().text.as_deref(), Some("done"));
    (results(&history)["long"].clone(), start.elapsed())
}

/// In virtual time: an MCP call that ends a second before the 600 s bound of one call
/// comes back whole.
#[tokio::test(start_paused = true)]
async fn a_call_within_its_own_bound_completes() {
    let steps = super::calls::CALL_MAX.as_secs() - 1;
    let (result, took) = long_call(steps).await;
    assert!(result.contains(&format!("counted {steps}")), "{result}");
    assert!(took < super::calls::CALL_MAX, "{took:?}");
}

/// In virtual time: an MCP call that would run a second past the 600 s bound of one call is
/// cut there, the turn's deadline still ahead: it says so in its own words, and the turn goes
/// on.
#[tokio::test(start_paused = true)]
async fn a_call_cut_at_its_own_bound_is_not_cut_at_the_deadline() {
    let (result, took) = long_call(super::calls::CALL_MAX.as_secs() + 1).await;
    assert_eq!(
        result,
        "error: the call was cut after 600 s, the longest one call may take; the turn goes on"
    );
    let cap = super::calls::CALL_MAX;
    assert!(
        cap <= took && took < cap + Duration::from_secs(1),
        "{took:?}"
    );
}
