//! The agent at work over the store, with a scripted model: how much of an inbox a turn
//! takes, when a conversation's task ends, and what a turn that cannot start comes to.

use std::sync::Mutex;
use std::time::Duration;

use agentd_tools::Tool;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::*;
use crate::agent::calls::{Called, Turn};
use crate::agent::instruction::Instruction;
use crate::agent::model::ModelError;
use crate::agent::scripted::{Asked, Scene, Scripted, USED, said, text};
use crate::agent::servers::Unheld;
use crate::agent::skills::Skills;
use crate::agent::workers;
use crate::store::Limits;

/// A turn's deadline.
const TURN: Duration = Duration::from_secs(600);

/// How long a test waits for a state, at most.
const WITHIN: Duration = Duration::from_secs(60);

/// The own tools as these tests need them: `message.send` into the store's inboxes, and
/// nothing offered to the model.
#[derive(Debug)]
struct Inboxes(Store);

impl OwnTools for Inboxes {
    fn call_in<'a>(
        &'a self,
        _: &'a Caller,
        name: &'a str,
        arguments: Value,
        _: Option<Turn<'a>>,
    ) -> Called<'a> {
        assert_eq!(name, "message.send");
        let conversation = arguments["conversation"].as_str().unwrap_or_default();
        if conversation == UNNUMBERED {
            return Box::pin(async { Ok(json!({"sent": true})) });
        }
        let text = arguments["text"].as_str().unwrap_or_default();
        let sent = self.0.message_send(conversation, "operator", text, 1);
        Box::pin(async move {
            let id = sent.await.map_err(|e| e.into_tool("message.send", ""))?;
            Ok(json!({"id": id}))
        })
    }

    fn granted(&self, _: Scope) -> Vec<&'static Tool> {
        Vec::new()
    }
}

/// The conversation whose `message.send` answers without an id.
const UNNUMBERED: &str = "unnumbered";

/// A store in a directory of its own, the tasks the agent runs on, and those of the
/// instruction and the skills.
struct Bench {
    dir: tempfile::TempDir,
    store: Store,
    tasks: TaskTracker,
    parts: TaskTracker,
    shutdown: CancellationToken,
}

async fn bench() -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    Bench {
        dir,
        store,
        tasks: TaskTracker::new(),
        parts: TaskTracker::new(),
        shutdown: CancellationToken::new(),
    }
}

impl Bench {
    /// The agent over `model`, started.
    fn start(&self, model: Arc<Scripted>) -> Agent {
        self.start_with(model, None)
    }

    /// The agent over `model` with a budget of `budget_tokens`, started.
    fn start_with(&self, model: Arc<Scripted>, budget_tokens: Option<u64>) -> Agent {
        let setup = Setup {
            instance: "t".into(),
            own: Arc::new(Inboxes(self.store.clone())),
            servers: BTreeMap::new(),
            turn_timeout: TURN,
            budget_tokens,
            instruction: Instruction::start(
                "t",
                None,
                Arc::new(Unheld),
                &self.parts,
                self.shutdown.clone(),
            ),
            skills: Skills::start(
                "t",
                &[],
                Arc::new(Unheld),
                &self.parts,
                self.shutdown.clone(),
            ),
        };
        let (store, shutdown) = (self.store.clone(), self.shutdown.clone());
        Agent::start(
            model,
            setup,
            store,
            workers::cancelling(),
            &self.tasks,
            shutdown,
        )
    }

    /// Appends `count` messages to `conversation`'s inbox.
    async fn send(&self, conversation: &str, count: usize) {
        for n in 1..=count {
            let sent = self
                .store
                .message_send(conversation, "operator", &n.to_string(), 1);
            sent.await.unwrap();
        }
    }

    /// Counts `tokens` as used by a conversation of their own.
    async fn spend(&self, tokens: u64) {
        let spender = "spender";
        let started = self.store.turn_start::<Message>(spender, 0, &[], 1);
        started.await.unwrap();
        self.store
            .conversation_tokens(spender, tokens)
            .await
            .unwrap();
    }

    /// Waits until `holds` says the store is as wanted, at most [`WITHIN`].
    async fn until<F: Future<Output = bool>>(&self, what: &str, holds: impl Fn() -> F) {
        let deadline = Instant::now() + WITHIN;
        while !holds().await {
            assert!(Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `conversation`'s turns, and how far its inbox was taken.
    async fn turns(&self, conversation: &str) -> (u64, u64) {
        let kept = self.store.conversation(conversation).await.unwrap();
        kept.map_or((0, 0), |c| (c.turns, c.taken))
    }

    /// The turn of each message of `conversation`'s history.
    async fn kept(&self, conversation: &str) -> Vec<u64> {
        let kept = self
            .store
            .conversation_history::<Message>(conversation, 0, 1000);
        kept.await.unwrap().iter().map(|e| e.turn).collect()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for tasks in [&self.tasks, &self.parts] {
            tasks.close();
            tasks.wait().await;
        }
        self.store.close().await;
    }
}

/// The texts of the user messages the model was shown.
fn users(request: &Asked) -> Vec<String> {
    let users = request.messages.iter().filter_map(|m| match m {
        Message::User { text } => Some(text.clone()),
        _ => None,
    });
    users.collect()
}

/// An inbox of one page is taken by one turn; one of a page and one more message by two, the
/// second taking the one left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_takes_one_page_of_the_inbox_at_most() {
    let bench = bench().await;
    bench.send("at", INBOX_PAGE).await;
    bench.send("past", INBOX_PAGE + 1).await;
    let model = Scripted::new([text("ok"), text("ok"), text("ok")]);
    let _agent = bench.start(model.clone());
    // Each turn ends with the model's answer.
    bench
        .until("both inboxes taken and answered", || async {
            bench.kept("at").await.len() == INBOX_PAGE + 1
                && bench.kept("past").await.len() == INBOX_PAGE + 3
        })
        .await;
    assert_eq!(bench.turns("at").await, (1, INBOX_PAGE as u64));
    assert_eq!(bench.turns("past").await, (2, INBOX_PAGE as u64 + 1));
    let turns = bench.kept("past").await;
    let mut expected = vec![1; INBOX_PAGE + 1];
    expected.extend([2, 2]);
    assert_eq!(turns, expected, "a page and the answer, then the one left");
    // The second turn of `past` is shown the first's and the message left.
    let mut shown: Vec<usize> = model.asked().iter().map(|r| users(r).len()).collect();
    shown.sort_unstable();
    assert_eq!(shown, [INBOX_PAGE, INBOX_PAGE, INBOX_PAGE + 1]);
    bench.stop().await;
}

/// A conversation's task ends once its inbox holds nothing new; the next message starts
/// another, whose turn reads the history from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_conversation_s_task_ends_and_the_next_message_starts_another() {
    let bench = bench().await;
    let model = Scripted::new([text("one"), text("two")]);
    let agent = bench.start(model.clone());
    let idle = || async { bench.tasks.len() == 1 && agent.shared.awake().is_empty() };
    assert_eq!(agent.say("c", "hi").await.unwrap().as_deref(), Some("one"));
    bench.until("the dispatch alone runs", idle).await;
    assert_eq!(
        agent.say("c", "again").await.unwrap().as_deref(),
        Some("two")
    );
    bench.until("the dispatch alone runs again", idle).await;
    let asked = model.asked();
    assert_eq!(users(&asked[1]), ["hi", "again"]);
    assert_eq!(
        asked[1].messages.len(),
        4,
        "the system prompt, hi, one, again"
    );
    bench.stop().await;
}

/// Yields until `holds`, at most [`WITHIN`] of the wall clock: the runtime never idles
/// meanwhile, so that paused time stands still while the store's thread works.
async fn spin_until(what: &str, holds: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + WITHIN;
    while !holds() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::task::yield_now().await;
    }
}

/// In virtual time: a turn that cannot start (its history does not read) is said to fail, and
/// tried again after the backoff with no other message; once the history reads, it takes the
/// message.
#[tokio::test(start_paused = true)]
async fn a_turn_that_cannot_start_is_tried_again_after_a_backoff() {
    let bench = bench().await;
    let unreadable = bench
        .store
        .turn_start("odd", 0, &[json!({"role": "nobody"})], 1);
    unreadable.await.unwrap();
    let (asked, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let model = Scripted::new([Scene::Held {
        asked: asked.clone(),
        release: release.clone(),
        reply: said("at last"),
    }]);
    // Sent before the agent starts: only its first look at the inboxes wakes the conversation.
    bench.send("odd", 1).await;
    let agent = bench.start(model.clone());
    let mut answers = agent.shared.answers.subscribe();
    let failed = answers.recv().await.unwrap();
    let failed_at = Instant::now();
    assert_eq!(failed.conversation, "odd");
    assert!(
        matches!(&failed.answer, Err(SayError::NotStarted(e)) if matches!(**e, store::Error::Corrupt(_))),
        "{failed:?}"
    );
    // The history is mended behind the agent's back; nothing more is sent.
    let db = rusqlite::Connection::open(bench.dir.path().join(store::FILE)).unwrap();
    db.busy_timeout(WITHIN).unwrap();
    let mended = r#"{"role": "user", "text": "mended"}"#;
    db.execute("UPDATE conversation_messages SET message = ?1", [mended])
        .unwrap();
    let mut restart = RESTART;
    let first = restart.fail();
    tokio::time::advance(first).await;
    spin_until("tried again", || !model.asked().is_empty()).await;
    assert!(Instant::now() >= failed_at + first);
    assert_eq!(users(&model.asked()[0]), ["mended", "1"]);
    release.notify_one();
    bench
        .until("the message taken", || async {
            bench.turns("odd").await == (2, 1)
        })
        .await;
    bench.stop().await;
}

/// A turn that fails is told as its error; a `message.send` that answers without an id is
/// said so at once (no answer could be told to be its turn's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn say_tells_why_it_has_no_answer() {
    let bench = bench().await;
    let agent = bench.start(Scripted::new([]));
    let failed = agent.say("c", "hi").await.unwrap_err();
    assert!(
        matches!(&failed, SayError::Failed(e) if matches!(**e, TurnError::Model(ModelError::Decode { .. }))),
        "{failed:?}"
    );
    assert_eq!(failed.code(), "turn_failed");
    let error: &dyn std::error::Error = &failed;
    assert!(
        error
            .source()
            .is_some_and(|e| e.to_string().contains("the script is over"))
    );
    let unnumbered = tokio::time::timeout(WITHIN, agent.say(UNNUMBERED, "hi")).await;
    let unnumbered = unnumbered.expect("said at once").unwrap_err();
    assert!(
        matches!(&unnumbered, SayError::NoId(answer) if *answer == json!({"sent": true})),
        "{unnumbered:?}"
    );
    assert_eq!(unnumbered.code(), "internal");
    bench.stop().await;
}

/// The `budget.spent` lines written, as `(used, limit)`.
fn spent_lines(written: &Mutex<Vec<String>>) -> Vec<(u64, u64)> {
    let lines = written.lock().unwrap();
    let lines = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let spent = lines.filter(|l| l["event"] == "budget.spent");
    spent
        .map(|l| (l["used"].as_u64().unwrap(), l["limit"].as_u64().unwrap()))
        .collect()
}

/// Used up to its limit, the budget is spent: no turn starts, `say` hears so, and
/// `budget.spent` is logged once. Another budget, once published, wakes the messages that
/// wait: one turn takes them with no other message sent, and a budget spent again is logged
/// again, for that budget.
#[tokio::test]
async fn a_budget_used_to_its_limit_is_spent_until_another_is_published() {
    let (_guard, written) = crate::telemetry::log::tests::capture();
    let bench = bench().await;
    bench.spend(10).await;
    let model = Scripted::new([text("ok")]);
    let agent = bench.start_with(model.clone(), Some(10));
    for text in ["one", "two"] {
        let spent = agent.say("c", text).await.unwrap_err();
        assert!(
            matches!(
                spent,
                SayError::BudgetSpent {
                    used: 10,
                    limit: 10
                }
            ),
            "{spent:?}"
        );
    }
    assert!(model.asked().is_empty(), "no turn started");
    assert_eq!(bench.turns("c").await, (0, 0));
    assert_eq!(spent_lines(&written), [(10, 10)], "logged once");

    let mut raised = agent.setup();
    raised.budget_tokens = Some(11);
    agent.set(raised);
    bench
        .until("the waiting messages taken and answered", || async {
            bench.kept("c").await.len() == 3
        })
        .await;
    assert_eq!(users(&model.asked()[0]), ["one", "two"]);
    let used = 10 + USED.total();
    let spent = agent.say("c", "three").await.unwrap_err();
    assert!(
        matches!(spent, SayError::BudgetSpent { used: u, limit: 11 } if u == used),
        "{spent:?}"
    );
    assert_eq!(spent_lines(&written), [(10, 10), (used, 11)]);
    bench.stop().await;
}

/// One token short of its limit, the budget lets a turn start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_one_token_short_of_its_limit_starts_a_turn() {
    let bench = bench().await;
    bench.spend(9).await;
    let model = Scripted::new([text("ok")]);
    let agent = bench.start_with(model, Some(10));
    assert_eq!(agent.say("c", "hi").await.unwrap().as_deref(), Some("ok"));
    bench.stop().await;
}
