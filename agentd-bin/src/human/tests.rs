//! The gate over a store: the tools' conformance checks are in `crate::tools::tests`; here,
//! what a restart leaves, a withdrawal that races an answer, and elicitations of the reference
//! server answered through the gate, or left to their 300 s bound.

use std::time::Duration;

use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;

use super::*;
use crate::config::Server;
use crate::store::Limits;
use crate::store::questions::State;
use crate::telemetry::log::tests::capture;

/// A gate over a store in `dir`.
async fn gate(dir: &std::path::Path) -> Arc<Gate> {
    let store = Store::open(dir, Limits::default()).await.unwrap();
    Gate::start(store, "t", CancellationToken::new(), &TaskTracker::new())
        .await
        .unwrap()
}

/// The open questions, once there are `n`, waiting at most 15 s.
async fn open(gate: &Gate, n: usize) -> Vec<Question> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let open = gate.open().await.unwrap();
        if open.len() == n {
            return open;
        }
        assert!(tokio::time::Instant::now() < deadline, "{open:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How question `id` stands in the store, once it is not open, waiting at most 15 s.
async fn ended(gate: &Gate, id: u64) -> store::questions::Question {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let kept = gate.store.question(id).await.unwrap().expect("asked");
        if kept.state != State::Open {
            return kept;
        }
        assert!(tokio::time::Instant::now() < deadline, "{kept:?}");
        tokio::task::yield_now().await;
    }
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
}

/// Questions left open by a run are cancelled at the next start, which numbers its own past
/// them; the answered ones stay as they were.
#[tokio::test]
async fn a_restart_cancels_the_questions_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let origin = Origin::ask_human("conversation:c");
    store
        .question_open(1, &origin, "One?", &schema(), 1)
        .await
        .unwrap();
    store
        .question_open(2, &origin, "Two?", &schema(), 1)
        .await
        .unwrap();
    store
        .question_answer(2, &json!({"name": "Ada"}), 2)
        .await
        .unwrap();
    store
        .question_open(7, &Origin::elicitation("s"), "Seven?", &schema(), 3)
        .await
        .unwrap();
    store.close().await;

    let gate = gate(dir.path()).await;
    assert_eq!(gate.open().await.unwrap(), []);
    assert_eq!(ended(&gate, 1).await.state, State::Cancelled);
    assert_eq!(ended(&gate, 7).await.state, State::Cancelled);
    let kept = ended(&gate, 2).await;
    assert_eq!(
        (kept.state, kept.answer),
        (State::Answered, Some(json!({"name": "Ada"})))
    );
    let late = gate.answer(1, json!({"name": "Bo"})).await;
    assert!(matches!(late, Err(Error::NotFound { .. })), "{late:?}");

    let asking = {
        let gate = gate.clone();
        tokio::spawn(async move {
            let hour = Duration::from_secs(3600);
            gate.ask(origin, "Eight?", &schema(), hour).await
        })
    };
    let [question] = &open(&gate, 1).await[..] else {
        unreachable!()
    };
    assert_eq!(question.id, 8, "past every id kept");
    gate.answer(8, json!({"name": "Cy"})).await.unwrap();
    assert_eq!(
        asking.await.unwrap(),
        Ok(Reply::new(8, Some(json!({"name": "Cy"}))))
    );
}

/// An asker whose wait ends as an answer is recorded hears that answer, not a cancel.
#[tokio::test(start_paused = true)]
async fn an_answer_recorded_as_the_wait_ends_is_the_askers() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path()).await;
    let origin = Origin::ask_human("operator");
    let schema = schema();
    let mut asking = std::pin::pin!(gate.ask(origin, "Name?", &schema, Duration::from_secs(1)));
    let (_guard, lines) = capture();
    let first = tokio::select! {
        biased;
        reply = &mut asking => Some(reply),
        () = std::future::ready(()) => None,
    };
    assert!(first.is_none(), "it waits");
    // The answer is recorded, but the asker is not told: its wait ends first.
    gate.store
        .question_answer(1, &json!({"name": "Ada"}), 0)
        .await
        .unwrap();
    assert_eq!(
        asking.await,
        Ok(Reply::new(1, Some(json!({"name": "Ada"}))))
    );
    assert_eq!(ended(&gate, 1).await.state, State::Answered);
    assert_eq!(
        withdrawn(&lines),
        [0_u64; 0],
        "not withdrawn: not logged so"
    );
}

/// The ids of the questions `human.withdrawn` names in `lines`.
fn withdrawn(lines: &Mutex<Vec<String>>) -> Vec<u64> {
    let lines = lines.lock().unwrap();
    let lines = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let withdrawn = lines.filter(|l| l["event"] == "human.withdrawn");
    withdrawn.map(|l| l["id"].as_u64().unwrap()).collect()
}

/// In virtual time: a question whose wait ends unanswered is withdrawn, and logged so.
#[tokio::test(start_paused = true)]
async fn a_question_unanswered_in_time_is_withdrawn_and_logged_so() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path()).await;
    let (_guard, lines) = capture();
    let origin = Origin::ask_human("operator");
    let (schema, second) = (schema(), Duration::from_secs(1));
    let unanswered = gate.ask(origin, "One?", &schema, second).await;
    assert_eq!(unanswered, Ok(Reply::new(1, None)));
    assert_eq!(ended(&gate, 1).await.state, State::Cancelled);
    assert_eq!(withdrawn(&lines), [1]);
}

/// A question whose asker is dropped is withdrawn, and logged so once the store says it was.
#[tokio::test]
async fn a_question_whose_asker_is_dropped_is_withdrawn_and_logged_so() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path()).await;
    let (_guard, lines) = capture();
    let asking = {
        let (gate, hour) = (gate.clone(), Duration::from_secs(3600));
        let origin = Origin::ask_human("operator");
        tokio::spawn(async move { gate.ask(origin, "Two?", &schema(), hour).await })
    };
    open(&gate, 1).await;
    asking.abort();
    assert!(asking.await.unwrap_err().is_cancelled());
    gate.tasks.close();
    gate.tasks.wait().await;
    assert_eq!(ended(&gate, 1).await.state, State::Cancelled);
    assert_eq!(withdrawn(&lines), [1]);
}

/// A configured server at `url`.
fn server(url: &str) -> Server {
    Server {
        name: "ref".into(),
        url: url.to_owned(),
        timeout: Duration::from_secs(5),
        headers: vec![],
        tags: Default::default(),
    }
}

/// The reference server speaking one era: 2026-07-28 when `modern`, else 2025-11-25.
async fn reference(modern: bool) -> ReferenceServer {
    let mut options = Options::default();
    options.modern = modern;
    options.legacy = !modern;
    ReferenceServer::start(options).await
}

/// The text of a tool's result.
fn text(result: &mcp_wire::CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"][0]["text"].as_str().unwrap().to_owned()
}

/// In both eras, a worker's elicitation is a question from the server, listed with its
/// message and schema; a refused answer leaves it open, and the answer that fits is the
/// form's content.
#[tokio::test]
async fn an_elicitation_is_answered_through_the_gate() {
    for modern in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let gate = gate(dir.path()).await;
        let reference = reference(modern).await;
        let url = reference.url();
        let client = crate::dial::worker(&server(&url), gate.elicitor("ref"))
            .connect(&url)
            .await
            .expect("connected");
        let calling = tokio::spawn(async move { client.call_tool("ask", json!({})).await });
        let [question] = &open(&gate, 1).await[..] else {
            unreachable!()
        };
        assert_eq!(question.origin, Origin::elicitation("ref"), "{modern}");
        assert_eq!(question.text, "What is your name?");
        assert_eq!(question.schema["required"], json!(["name"]));
        let refused = gate.answer(question.id, json!({"name": 1})).await;
        assert!(
            matches!(&refused, Err(Error::BadAnswer { pointer, rule, .. }) if pointer == "/name" && rule == "type"),
            "{refused:?}"
        );
        assert_eq!(open(&gate, 1).await.len(), 1, "still open");
        gate.answer(question.id, json!({"name": "Ada"}))
            .await
            .unwrap();
        let result = calling.await.unwrap().expect("the call answers");
        assert_eq!(text(&result), "accept: name='Ada'", "{modern}");
        assert_eq!(gate.open().await.unwrap(), []);
        assert_eq!(ended(&gate, question.id).await.state, State::Answered);
    }
}

/// In virtual time, in both eras: an elicitation nobody answers is answered cancel at its
/// 300 s, and its question ends cancelled.
#[tokio::test(start_paused = true)]
async fn an_elicitation_unanswered_for_300_seconds_is_cancelled() {
    for modern in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let gate = gate(dir.path()).await;
        let reference = reference(modern).await;
        let url = reference.url();
        let client = crate::dial::worker(&server(&url), gate.elicitor("ref"))
            .connect(&url)
            .await
            .expect("connected");
        let started = tokio::time::Instant::now();
        // The legacy server waits past the bound for its answer.
        let calling =
            tokio::spawn(async move { client.call_tool("ask", json!({"wait_ms": 400_000})).await });
        if modern {
            let called = calling.await.unwrap();
            assert_eq!(text(&called.expect("the call answers")), "cancel");
            assert!(started.elapsed() >= ELICITATION_TIMEOUT);
        } else {
            // The answer is POSTed back to the server. (The call's stream is silent while the
            // person is asked, so the worker's 60 s silence bound may end the call first.)
            let answered = || {
                let log = reference.log();
                log.into_iter()
                    .find(|l| l.method.is_none() && l.body["result"].is_object())
            };
            let deadline = started + Duration::from_secs(600);
            let answered = loop {
                if let Some(answered) = answered() {
                    break answered;
                }
                assert!(tokio::time::Instant::now() < deadline, "no answer");
                tokio::time::sleep(Duration::from_secs(1)).await;
            };
            assert_eq!(answered.body["result"], json!({"action": "cancel"}));
            assert!(answered.at - started >= ELICITATION_TIMEOUT);
            calling.abort();
        }
        let question = ended(&gate, 1).await;
        assert_eq!(
            (question.state, question.origin),
            (State::Cancelled, Origin::elicitation("ref")),
            "{modern}"
        );
        assert_eq!(gate.open().await.unwrap(), []);
    }
}

/// An elicitation the gate cannot put to a person (a schema that is not an object's, or one
/// that does not compile, a message past the bound) is answered cancel, unasked.
#[tokio::test]
async fn an_elicitation_that_cannot_be_asked_is_cancelled_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path()).await;
    let elicitor = gate.elicitor("ref");
    let form = |message: &str, schema: Value| {
        let schema = mcp_wire::RawJson::from_value(&schema).unwrap();
        ElicitRequestParams::form(message, schema)
    };
    for params in [
        form("Name?", json!({"type": "string"})),
        form("Name?", json!({"type": "object", "minProperties": "two"})),
        form(&"q".repeat(human::QUESTION_MAX + 1), schema()),
    ] {
        let answer = elicitor.elicit(params).await;
        assert_eq!(answer, ElicitResult::new(ElicitAction::Cancel));
    }
    assert_eq!(gate.open().await.unwrap(), []);
    assert_eq!(gate.store.question(1).await.unwrap(), None, "never asked");
}
