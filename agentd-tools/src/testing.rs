//! Conformance checks of the service traits (feature `testing`): the semantics every
//! implementation keeps, the in-memory one and the daemon's durable one alike. Each check
//! panics at the first difference; each uses its own keys, units and conversations
//! (under `check/`, `check:`), which must not exist when it starts.
//!
//! ```
//! # run_now(async {
//! let services = agentd_tools::in_memory::InMemory::new("i").with_max_value_bytes(1024);
//! agentd_tools::testing::check_memory(&services).await;
//! # });
//! # fn run_now(f: impl Future<Output = ()>) {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     assert!(f.as_mut().poll(&mut cx).is_ready());
//! # }
//! ```

use std::collections::BTreeMap;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Error;
use crate::artifact::{Artifact, Artifacts, Listed};
use crate::finish::{Outcome, Units};
use crate::human::{ANSWER_MAX, Humans, Origin, Question, Reply};
use crate::instruction::{Instruction, Source};
use crate::memory::{End, Memory, Taken, Versioned};
use crate::message::Messages;
use crate::plan::{Plan, Plans, Status, Step, Update};
use crate::skills::Skills;
use crate::subagent::{Spec, State, Subagents};
use crate::wait::Clock;
use crate::workflow::run::StepStatus;
use crate::workflow::{Command, Definition, Filter, Status as RunStatus, Workflows};

/// Checks [`Memory`]: versions, compare-and-set, listing pages, queues, the value bound
/// (at `max_value_bytes` and one past) and deletion.
pub async fn check_memory(service: &impl Memory) {
    let max = service.max_value_bytes();
    assert_eq!(service.get("check/a").await, Ok(None));
    assert_eq!(service.set("check/a", json!(1), None).await, Ok(1));
    assert_eq!(service.set("check/a", json!(2), None).await, Ok(2));
    // Compare-and-set: a stale version fails and changes nothing.
    let stale = service.set("check/a", json!(3), Some(1)).await;
    assert!(
        matches!(stale, Err(Error::VersionMismatch { current: 2, .. })),
        "{stale:?}"
    );
    assert_eq!(
        service.get("check/a").await,
        Ok(Some(Versioned::new(json!(2), 2)))
    );
    assert_eq!(service.set("check/a", json!(3), Some(2)).await, Ok(3));
    let absent = service.set("check/b", json!("b"), Some(1)).await;
    assert!(
        matches!(absent, Err(Error::VersionMismatch { current: 0, .. })),
        "{absent:?}"
    );
    assert_eq!(service.set("check/b", json!("b"), Some(0)).await, Ok(1));
    assert!(matches!(
        service.set("check/b", json!("b"), Some(0)).await,
        Err(Error::VersionMismatch { current: 1, .. })
    ));

    // The value bound: a string of n bytes serializes to n + 2.
    let at_bound = json!("x".repeat(max - 2));
    assert_eq!(service.set("check/big", at_bound, None).await, Ok(1));
    let past = service
        .set("check/big", json!("x".repeat(max - 1)), None)
        .await;
    assert!(matches!(past, Err(Error::TooLarge { .. })), "{past:?}");
    assert_eq!(service.get("check/big").await.unwrap().unwrap().version, 1);
    assert_eq!(service.delete("check/big").await, Ok(true));
    assert_eq!(service.delete("check/big").await, Ok(false));

    // Listing: byte order, prefix, strictly after, pages.
    for key in ["check/l/c", "check/l/a", "check/l/b", "check/m"] {
        service.set(key, json!(null), None).await.unwrap();
    }
    let page = service.list("check/l/", None, 2).await.unwrap();
    let keys: Vec<&str> = page.keys.iter().map(|e| e.key.as_str()).collect();
    assert_eq!((keys, page.more), (vec!["check/l/a", "check/l/b"], true));
    assert_eq!(page.keys[0].bytes, 4);
    assert_eq!(page.keys[0].version, 1);
    let page = service
        .list("check/l/", Some("check/l/b"), 2)
        .await
        .unwrap();
    let keys: Vec<&str> = page.keys.iter().map(|e| e.key.as_str()).collect();
    assert_eq!((keys, page.more), (vec!["check/l/c"], false));
    let page = service
        .list("check/l/", Some("check/l/c"), 2)
        .await
        .unwrap();
    assert!(page.keys.is_empty() && !page.more);
    let page = service
        .list("check/", Some("check/l/zz"), 10)
        .await
        .unwrap();
    let keys: Vec<&str> = page.keys.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["check/m"]);

    // Queues.
    let q = "check/q";
    assert_eq!(
        service.take(q, End::First).await,
        Ok(Taken::Empty { version: 0 })
    );
    assert_eq!(service.push(q, json!(1)).await, Ok((1, 1)));
    assert_eq!(service.push(q, json!(2)).await, Ok((2, 2)));
    assert_eq!(service.push(q, json!(3)).await, Ok((3, 3)));
    assert_eq!(
        service.take(q, End::First).await,
        Ok(Taken::Item(Versioned::new(json!(1), 4)))
    );
    assert_eq!(
        service.take(q, End::Last).await,
        Ok(Taken::Item(Versioned::new(json!(3), 5)))
    );
    assert_eq!(
        service.take(q, End::Last).await,
        Ok(Taken::Item(Versioned::new(json!(2), 6)))
    );
    assert_eq!(
        service.take(q, End::First).await,
        Ok(Taken::Empty { version: 6 })
    );
    assert_eq!(service.get(q).await, Ok(Some(Versioned::new(json!([]), 6))));
    // Not an array: nothing changed.
    assert!(matches!(
        service.push("check/a", json!(1)).await,
        Err(Error::NotAnArray { .. })
    ));
    assert!(matches!(
        service.take("check/a", End::First).await,
        Err(Error::NotAnArray { .. })
    ));
    assert_eq!(service.get("check/a").await.unwrap().unwrap().version, 3);
    // The array after a push fits the bound: `["x…x"]` is n + 4.
    let item = json!("x".repeat(max - 4));
    assert_eq!(service.push("check/full", item).await, Ok((1, 1)));
    let past = service.push("check/full", json!(0)).await;
    assert!(matches!(past, Err(Error::TooLarge { .. })), "{past:?}");
    assert_eq!(service.get("check/full").await.unwrap().unwrap().version, 1);
}

/// Checks [`Artifacts`]: creation, replacement, per-unit separation, listing, deletion.
pub async fn check_artifacts(service: &impl Artifacts) {
    let (unit, other) = ("check:artifacts", "check:other");
    let a = Artifact::new("a.txt", "text/plain", b"one".to_vec());
    service.create(unit, a.clone()).await.unwrap();
    assert_eq!(service.get(unit, "a.txt").await, Ok(Some(a)));
    assert_eq!(service.get(other, "a.txt").await, Ok(None));
    let b = Artifact::new("a.txt", "application/octet-stream", vec![0, 255]);
    service.create(unit, b.clone()).await.unwrap();
    assert_eq!(service.get(unit, "a.txt").await, Ok(Some(b)));
    let c = Artifact::new("0.json", "application/json", b"{}".to_vec());
    service.create(unit, c).await.unwrap();
    assert_eq!(
        service.list(unit).await,
        Ok(vec![
            Listed::new("0.json", "application/json", 2),
            Listed::new("a.txt", "application/octet-stream", 2),
        ])
    );
    assert_eq!(service.list(other).await, Ok(vec![]));
    assert_eq!(service.delete(other, "a.txt").await, Ok(false));
    assert_eq!(service.delete(unit, "a.txt").await, Ok(true));
    assert_eq!(service.delete(unit, "a.txt").await, Ok(false));
    assert_eq!(service.list(unit).await.unwrap().len(), 1);
}

/// Checks [`Plans`]: one plan per unit, versions, updates of all steps or one, clearing.
pub async fn check_plans(service: &impl Plans) {
    let unit = "check:plans";
    assert_eq!(service.get(unit).await, Ok(None));
    let missing = service.update(unit, Update::Steps(vec![])).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    let steps = vec![
        Step::new("one", Status::Pending),
        Step::new("two", Status::Pending),
    ];
    let made = service.create(unit, steps.clone()).await.unwrap();
    assert_eq!(made, Plan::new(steps.clone(), 1));
    let again = service.create(unit, steps).await;
    assert!(matches!(again, Err(Error::Exists { .. })), "{again:?}");
    let one = Update::Step {
        index: 1,
        status: Some(Status::Done),
        title: None,
    };
    let plan = service.update(unit, one).await.unwrap();
    assert_eq!(plan.version, 2);
    assert_eq!(plan.steps[1], Step::new("two", Status::Done));
    let past = Update::Step {
        index: 2,
        status: Some(Status::Done),
        title: None,
    };
    assert!(matches!(
        service.update(unit, past).await,
        Err(Error::NotFound { .. })
    ));
    let all = Update::Steps(vec![Step::new("three", Status::InProgress)]);
    let plan = service.update(unit, all).await.unwrap();
    assert_eq!(plan.version, 3);
    assert_eq!(service.get(unit).await, Ok(Some(plan)));
    assert_eq!(service.clear(unit).await, Ok(true));
    assert_eq!(service.clear(unit).await, Ok(false));
    assert_eq!(service.get(unit).await, Ok(None));
}

/// Checks [`Messages`]: ids from 1 per conversation, sender and time kept, reading after.
pub async fn check_messages(service: &impl Messages) {
    let (c, d) = ("check:inbox", "check:other");
    assert_eq!(service.after(c, 0).await, Ok(None));
    assert_eq!(service.send(c, "run:r", "hello", 5).await, Ok(1));
    assert_eq!(service.send(c, "operator", "again", 6).await, Ok(2));
    assert_eq!(service.send(d, "operator", "elsewhere", 7).await, Ok(1));
    let first = service.after(c, 0).await.unwrap().unwrap();
    assert_eq!(
        (
            first.id,
            first.from.as_str(),
            first.text.as_str(),
            first.at_ms
        ),
        (1, "run:r", "hello", 5)
    );
    assert_eq!(service.after(c, 1).await.unwrap().map(|m| m.id), Some(2));
    assert_eq!(service.after(c, 2).await, Ok(None));
}

/// Checks [`Units`]: a unit finishes once.
pub async fn check_units(service: &impl Units) {
    let unit = "check:units";
    assert_eq!(service.finish(unit, Outcome::Done, "ok", 1).await, Ok(()));
    let again = service.finish(unit, Outcome::Failed, "no", 2).await;
    assert!(
        matches!(again, Err(Error::AlreadyFinished { .. })),
        "{again:?}"
    );
}

/// The open questions asked by the unit `check:humans`.
async fn asked_by_check(service: &impl Humans) -> Vec<Question> {
    let open = service.open().await.unwrap();
    let mine = open
        .into_iter()
        .filter(|q| q.origin.from() == "check:humans");
    mine.collect()
}

/// Polls `future` once, waking nothing: whether it is done already.
fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Checks [`Humans`] (with the `clock` its waits are timed by): a question is listed while
/// its asker waits; an answer that does not fit its schema is refused naming the pointer and
/// the rule, and one past [`ANSWER_MAX`] is `too_large`, the question open all along; an
/// answer of [`ANSWER_MAX`] bytes is the asker's; a question answered, unanswered within its
/// timeout, or whose asker stopped waiting is no longer listed, and answering it is
/// `not_found`. The questions it asks are the unit `check:humans`'s.
pub async fn check_humans(service: &impl Humans, clock: &impl Clock) {
    let origin = Origin::ask_human("check:humans");
    let schema = json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    });
    let hour = Duration::from_secs(3600);

    // Answered: listed while asked, refused answers leave it open.
    let mut asking = pin!(service.ask(origin.clone(), "Go on?", &schema, hour));
    assert!(poll_once(asking.as_mut()).is_pending(), "it waits");
    let listed = asked_by_check(service).await;
    let [question] = &listed[..] else {
        panic!("one question: {listed:?}")
    };
    assert_eq!(
        (&question.origin, question.text.as_str(), &question.schema),
        (&origin, "Go on?", &schema)
    );
    let id = question.id;
    let wrong = service.answer(id, json!({"ok": "yes"})).await;
    assert!(
        matches!(&wrong, Err(Error::BadAnswer { pointer, rule, .. }) if pointer == "/ok" && rule == "type"),
        "{wrong:?}"
    );
    let missing = service.answer(id, json!({})).await;
    assert!(
        matches!(&missing, Err(Error::BadAnswer { pointer, rule, .. }) if pointer.is_empty() && rule == "required"),
        "{missing:?}"
    );
    // {"ok":true,"pad":"…"} is 20 bytes around the padding.
    let padded = |n: usize| json!({"ok": true, "pad": "x".repeat(n - 20)});
    let past = service.answer(id, padded(ANSWER_MAX + 1)).await;
    assert!(
        matches!(past, Err(Error::TooLarge { what: "answer", .. })),
        "{past:?}"
    );
    assert_eq!(asked_by_check(service).await.len(), 1, "still open");
    service.answer(id, padded(ANSWER_MAX)).await.unwrap();
    assert_eq!(asking.await, Ok(Reply::new(id, Some(padded(ANSWER_MAX)))));
    assert_eq!(asked_by_check(service).await, []);
    let again = service.answer(id, json!({"ok": true})).await;
    assert!(matches!(again, Err(Error::NotFound { .. })), "{again:?}");
    let unknown = service.answer(u64::MAX, json!({"ok": true})).await;
    assert!(
        matches!(unknown, Err(Error::NotFound { .. })),
        "{unknown:?}"
    );

    // Unanswered within its timeout: withdrawn.
    let short = Duration::from_millis(10);
    let mut asking = pin!(service.ask(origin.clone(), "Still there?", &schema, short));
    assert!(poll_once(asking.as_mut()).is_pending(), "it waits");
    let listed = asked_by_check(service).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let late = listed[0].id;
    assert_ne!(late, id, "ids are not reused");
    clock.sleep(short * 2).await;
    assert_eq!(asking.await, Ok(Reply::new(late, None)));
    assert_eq!(asked_by_check(service).await, []);
    let after = service.answer(late, json!({"ok": true})).await;
    assert!(matches!(after, Err(Error::NotFound { .. })), "{after:?}");

    // Its asker gone: withdrawn.
    {
        let mut asking = pin!(service.ask(origin.clone(), "Anyone?", &schema, hour));
        assert!(poll_once(asking.as_mut()).is_pending(), "it waits");
        assert_eq!(asked_by_check(service).await.len(), 1);
    }
    assert_eq!(asked_by_check(service).await, []);
}

/// Checks [`Instruction`]: a server not configured is refused and nothing changes; resource
/// `uri` of `server` (holding `text`) is followed once read, and followed again when no
/// server is named.
pub async fn check_instruction(service: &impl Instruction, server: &str, uri: &str, text: &str) {
    let before = service.current().await.unwrap();
    let unknown = service.follow(Some("check-no-such-server"), uri).await;
    assert!(
        matches!(unknown, Err(Error::NotFound { .. })),
        "{unknown:?}"
    );
    assert_eq!(service.current().await.unwrap(), before);
    let followed = service.follow(Some(server), uri).await.unwrap();
    assert_eq!(followed.source, Some(Source::new(server, uri)));
    assert_eq!(followed.text.as_deref(), Some(text));
    assert!(followed.read_at_ms.is_some());
    assert_eq!(service.current().await.unwrap(), followed);
    let again = service.follow(None, uri).await.unwrap();
    assert_eq!(again.source, followed.source);
    assert_eq!(again.text, followed.text);
}

/// Checks [`Skills`]: skill `name` (in the catalogue, loaded with `arguments`, which give
/// every argument it requires) is loaded into one unit's set only, once however often it is
/// loaded, and unloaded; a skill not in the catalogue, and missing arguments, are refused.
pub async fn check_skills(service: &impl Skills, name: &str, arguments: BTreeMap<String, String>) {
    let (unit, other) = ("check:skills", "check:other");
    let listed = service.list().await.unwrap();
    let skill = listed.iter().find(|s| s.name == name).expect("the skill");
    assert_eq!(service.loaded(unit).await, Ok(vec![]));
    let missing = service
        .load(unit, "check/no-such-skill", BTreeMap::new())
        .await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    if skill.arguments.iter().any(|a| a.required) {
        let bare = service.load(unit, name, BTreeMap::new()).await;
        assert!(
            matches!(bare, Err(Error::InvalidArguments { .. })),
            "{bare:?}"
        );
    }
    let loaded = service.load(unit, name, arguments.clone()).await.unwrap();
    assert_eq!(loaded.name, name);
    assert!(!loaded.messages.is_empty());
    assert_eq!(service.loaded(unit).await, Ok(vec![name.to_owned()]));
    service.load(unit, name, arguments).await.unwrap();
    assert_eq!(service.loaded(unit).await, Ok(vec![name.to_owned()]));
    assert_eq!(service.loaded(other).await, Ok(vec![]));
    assert_eq!(service.unload(other, name).await, Ok(false));
    assert_eq!(service.unload(unit, name).await, Ok(true));
    assert_eq!(service.unload(unit, name).await, Ok(false));
    assert_eq!(service.loaded(unit).await, Ok(vec![]));
}

/// Checks [`Workflows`] with workflows named `check.*`: definitions created, updated and
/// deleted; a run's input checked; runs of two signal waits signalled to their end, paused
/// and resumed, cancelled, listed in pages; unknown workflows and runs.
pub async fn check_workflows(service: &impl Workflows) {
    let body = json!({
        "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "steps": [
            {"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}},
            {"id": "more", "type": "wait", "on": {"signal": {"name": "more"}}},
        ],
    });
    let parsed = |name: &str| Definition::parse(name, &body).unwrap();
    let made = service.create(parsed("check.signals")).await.unwrap();
    assert_eq!((made.version, made.steps), (1, 2));
    let again = service.create(parsed("check.signals")).await;
    assert!(matches!(again, Err(Error::Exists { .. })), "{again:?}");
    let updated = service.update(parsed("check.signals")).await.unwrap();
    assert_eq!(updated.version, 2);
    let missing = service.update(parsed("check.none")).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    service.create(parsed("check.gone")).await.unwrap();
    assert_eq!(service.delete("check.gone").await, Ok(true));
    assert_eq!(service.delete("check.gone").await, Ok(false));
    let gone = service.run("check.gone", json!({}), "check:unit").await;
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");

    let bad = service
        .run("check.signals", json!({"n": "one"}), "check:unit")
        .await;
    assert!(
        matches!(&bad, Err(Error::InvalidArguments { pointer, .. }) if pointer == "/input/n"),
        "{bad:?}"
    );
    let run = service
        .run("check.signals", json!({"n": 1}), "check:unit")
        .await
        .unwrap();
    assert_eq!(
        (run.workflow.as_str(), run.by.as_str()),
        ("check.signals", "check:unit")
    );
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.steps[0].status, StepStatus::Waiting);
    assert_eq!(service.status(&run.id).await.unwrap().id, run.id);
    let unknown = service.status("check:nope").await;
    assert!(
        matches!(unknown, Err(Error::UnknownRun { .. })),
        "{unknown:?}"
    );

    // Paused: the signal ends the wait under way, and the next one waits for the resume.
    let signal = |name: &str, payload: Value| Command::Signal {
        name: name.to_owned(),
        payload,
    };
    let paused = service.command(&run.id, Command::Pause).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused);
    let signalled = service
        .command(&run.id, signal("go", json!(1)))
        .await
        .unwrap();
    assert_eq!(signalled.steps[0].status, StepStatus::Done);
    assert_eq!(signalled.steps[1].status, StepStatus::Pending);
    let resumed = service.command(&run.id, Command::Resume).await.unwrap();
    assert_eq!(resumed.status, RunStatus::Running);
    assert_eq!(resumed.steps[1].status, StepStatus::Waiting);
    let done = service
        .command(&run.id, signal("more", json!({"k": 2})))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(
        done.output,
        Some(json!({"signal": "more", "payload": {"k": 2}}))
    );
    assert_eq!(service.status(&run.id).await.unwrap(), done);

    let second = service
        .run("check.signals", json!({}), "check:unit")
        .await
        .unwrap();
    let cancelled = service.command(&second.id, Command::Cancel).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    for command in [Command::Cancel, Command::Resume, signal("go", json!(null))] {
        let ended = service.command(&second.id, command).await;
        assert!(
            matches!(ended, Err(Error::AlreadyFinished { .. })),
            "{ended:?}"
        );
    }
    let unknown = service.command("check:nope", Command::Pause).await;
    assert!(
        matches!(unknown, Err(Error::UnknownRun { .. })),
        "{unknown:?}"
    );

    // Listed oldest first, in pages.
    let mut filter = Filter::new(1);
    filter.workflow = Some("check.signals".into());
    let page = service.list(filter.clone()).await.unwrap();
    assert_eq!(page.runs.len(), 1);
    assert_eq!(page.runs[0].id, run.id);
    assert!(page.more);
    filter.after = Some(run.id.clone());
    let page = service.list(filter.clone()).await.unwrap();
    assert_eq!(page.runs[0].id, second.id);
    assert!(!page.more);
    filter.after = None;
    filter.status = Some(RunStatus::Cancelled);
    filter.limit = 10;
    let page = service.list(filter).await.unwrap();
    let ids: Vec<&str> = page.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [second.id.as_str()]);
}

/// Every item of `taken`, each a shift's answer, once: what concurrent shifts of a queue
/// holding `0..n` must give back together (none twice, none lost).
pub fn check_taken_once(taken: &[Value], n: u64) {
    let mut items: Vec<u64> = taken.iter().filter_map(Value::as_u64).collect();
    items.sort_unstable();
    assert_eq!(items, (0..n).collect::<Vec<_>>());
}

/// Checks [`Subagents`]: a subagent run is listed for its parent alone while it runs; a
/// running one is not retired; killed, it is retired, and then no longer listed, sent to,
/// killed or retired, its status still answered; an unknown id is `unknown_subagent`. A
/// subagent it runs (for the parent `check:subagents`) must keep running until it is killed.
pub async fn check_subagents(service: &impl Subagents) {
    let (parent, other) = ("check:subagents", "check:other");
    let code = |e: Error| e.code();
    let unknown = "check-no-such-subagent";
    assert_eq!(
        service.status(unknown).await.map_err(code),
        Err("unknown_subagent")
    );
    assert_eq!(
        service.send(unknown, parent, "hi").await.map_err(code),
        Err("unknown_subagent")
    );
    assert_eq!(
        service.kill(unknown).await.map_err(code),
        Err("unknown_subagent")
    );
    assert_eq!(
        service.retire(unknown).await.map_err(code),
        Err("unknown_subagent")
    );

    let id = service
        .run(parent, Spec::new("Check the contract."))
        .await
        .unwrap();
    let status = service.status(&id).await.unwrap();
    assert_eq!(
        (status.id.as_str(), status.parent.as_str(), status.state),
        (id.as_str(), parent, State::Running)
    );
    let ids = |listed: Vec<crate::subagent::Subagent>| -> Vec<String> {
        listed.into_iter().map(|s| s.id).collect()
    };
    assert_eq!(
        ids(service.list(Some(parent)).await.unwrap()),
        std::slice::from_ref(&id)
    );
    assert!(!ids(service.list(Some(other)).await.unwrap()).contains(&id));
    assert!(ids(service.list(None).await.unwrap()).contains(&id));
    let running = service.retire(&id).await.map_err(code);
    assert_eq!(running.map(|s| s.state), Err("running"));
    assert_eq!(service.status(&id).await.unwrap().state, State::Running);

    let killed = service.kill(&id).await.unwrap();
    assert_eq!(killed.state, State::Killed);
    assert_eq!(service.status(&id).await.unwrap().state, State::Killed);
    // Killed again: it stays as it is.
    assert_eq!(service.kill(&id).await.unwrap().state, State::Killed);
    let retired = service.retire(&id).await.unwrap();
    assert_eq!(retired.state, State::Retired);
    assert_eq!(service.status(&id).await.unwrap().state, State::Retired);
    assert!(ids(service.list(Some(parent)).await.unwrap()).is_empty());
    assert!(!ids(service.list(None).await.unwrap()).contains(&id));
    assert_eq!(
        service.send(&id, parent, "again").await.map_err(code),
        Err("unknown_subagent")
    );
    assert_eq!(
        service.kill(&id).await.map_err(code),
        Err("unknown_subagent")
    );
    assert_eq!(
        service.retire(&id).await.map_err(code),
        Err("unknown_subagent")
    );
}
