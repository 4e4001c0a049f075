//! The run core in virtual time, and definitions at their bounds.

use std::time::Duration;

use serde_json::{Value, json};

use super::definition::{
    DEFINITION_MAX, Definition, DefinitionError, Kind, LABEL_MAX, LABELS_MAX, NAME_MAX, PROMPT_MAX,
    RETRIES_MAX, STEPS_MAX,
};
use super::run::{Action, Call, Execute, Failure, Limits, Record, Run, SIGNALS_MAX, Status};
use super::template::EXPRESSION_MAX;

fn definition(steps: Value) -> Definition {
    Definition::parse("wf", &json!({"steps": steps})).unwrap()
}

fn refused(body: Value) -> DefinitionError {
    Definition::parse("wf", &body).unwrap_err()
}

fn start(steps: Value, input: Value) -> Run {
    Run::start(
        "r1",
        definition(steps),
        input,
        "operator",
        Limits::default(),
        0,
    )
    .unwrap()
}

/// Every action the run has at `now`, its record kept first when it changed.
fn actions(run: &mut Run, now: i64) -> Vec<Action> {
    let mut all = Vec::new();
    while let Some(action) = run.poll_action(now) {
        all.push(action);
    }
    all
}

fn executed(run: &mut Run, now: i64) -> Execute {
    match actions(run, now).as_slice() {
        [Action::Execute(e)] => e.clone(),
        other => panic!("one execution, not {other:?}"),
    }
}

fn step_status(run: &Run, i: usize) -> &'static str {
    run.record().steps[i].status.as_str()
}

fn flaky() -> Value {
    json!([{
        "id": "call", "type": "mcp.tool", "server": "s", "tool": "t",
        "arguments": {"city": "{{input.city}}"}, "timeout": "10s",
        "retries": {"max": 3, "delay": "1s", "max_delay": "3s"},
    }])
}

#[test]
fn retries_rise_in_attempts_with_one_idempotency_key_on_their_schedule() {
    let mut run = start(flaky(), json!({"city": "Oslo"}));
    let first = executed(&mut run, 0);
    assert!(run.take_changed(), "the attempt is kept before it is sent");
    assert_eq!(first.attempt, 1);
    assert_eq!(first.deadline_ms, 10_000);
    let Call::McpTool {
        arguments,
        idempotency_key,
        ..
    } = &first.call
    else {
        panic!("{first:?}")
    };
    assert_eq!(arguments["city"], "Oslo");
    assert_eq!(idempotency_key, "r1:call");
    let mut keys = vec![idempotency_key.clone()];
    let mut attempts = vec![first.attempt];
    let mut now = 0;
    // Three failures: retried 1 s, 2 s, then 3 s (the ceiling) later.
    for (delay, attempt) in [(1000, 2), (2000, 3), (3000, 4)] {
        now += 5;
        let failed = Failure::retryable("server", "unavailable");
        run.handle_outcome(0, attempt - 1, Err(failed), now);
        assert_eq!(step_status(&run, 0), "retrying");
        assert_eq!(run.poll_timeout(), Some(now + delay));
        assert!(
            actions(&mut run, now).is_empty(),
            "nothing before the retry is due"
        );
        run.handle_timeout(now + delay - 1);
        assert!(actions(&mut run, now + delay - 1).is_empty());
        now += delay;
        run.handle_timeout(now);
        let again = executed(&mut run, now);
        keys.push(again.call.idempotency_key().unwrap().to_owned());
        attempts.push(again.attempt);
    }
    assert_eq!(attempts, [1, 2, 3, 4]);
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    // The retries are spent: the fourth failure fails the run.
    run.handle_outcome(0, 4, Err(Failure::retryable("server", "down")), now + 1);
    assert_eq!(run.record().status, Status::Failed);
    let error = run.record().error.clone().unwrap();
    assert_eq!(error.code, "server");
    assert_eq!(error.message, "step \"call\": down");
    assert_eq!(run.record().steps[0].failures, 4);
    assert_eq!(run.poll_timeout(), None);
}

#[test]
fn a_failure_that_will_not_pass_is_not_retried_and_stale_outcomes_are_dropped() {
    let mut run = start(flaky(), json!({"city": "Oslo"}));
    let first = executed(&mut run, 0);
    // An outcome of another attempt or step changes nothing.
    run.handle_outcome(0, 2, Ok(json!({})), 1);
    run.handle_outcome(1, 1, Ok(json!({})), 1);
    assert_eq!(step_status(&run, 0), "running");
    run.handle_outcome(0, first.attempt, Err(Failure::new("template", "bad")), 2);
    assert_eq!(run.record().status, Status::Failed);
    assert_eq!(run.record().steps[0].failures, 1);
}

#[test]
fn an_idempotency_value_is_rendered_once() {
    let mut steps = flaky();
    steps[0]["idempotency"] = json!({"value": "order-{{input.id}}"});
    let mut run = start(steps, json!({"id": 7, "city": "x"}));
    let first = executed(&mut run, 0);
    assert_eq!(first.call.idempotency_key(), Some("order-7"));
    run.handle_outcome(0, 1, Err(Failure::retryable("server", "x")), 0);
    run.handle_timeout(1000);
    let second = executed(&mut run, 1000);
    assert_eq!(second.call.idempotency_key(), Some("order-7"));
}

#[test]
fn an_attempt_past_its_bound_is_abandoned_and_retried() {
    let mut run = start(flaky(), json!({"city": "Oslo"}));
    let first = executed(&mut run, 0);
    assert_eq!(run.poll_timeout(), Some(10_000));
    run.handle_timeout(9_999);
    assert_eq!(step_status(&run, 0), "running");
    run.handle_timeout(10_000);
    assert_eq!(
        actions(&mut run, 10_000),
        [Action::Abandon {
            step: 0,
            attempt: first.attempt
        }]
    );
    let error = run.record().steps[0].error.clone().unwrap();
    assert_eq!(
        (error.code.as_str(), error.message.as_str()),
        ("timed_out", "no outcome within 10s")
    );
    // The abandoned attempt's late outcome is not taken.
    run.handle_outcome(0, 1, Ok(json!({"late": true})), 10_500);
    assert_eq!(step_status(&run, 0), "retrying");
    run.handle_timeout(11_000);
    let second = executed(&mut run, 11_000);
    assert_eq!((second.attempt, second.deadline_ms), (2, 21_000));
    run.handle_outcome(0, 2, Ok(json!({"content": []})), 11_001);
    assert_eq!(run.record().status, Status::Completed);
    assert_eq!(run.record().output, Some(json!({"content": []})));
}

#[test]
fn the_step_timeout_is_the_limit_unless_the_step_gives_one() {
    let steps =
        json!([{"id": "t", "type": "tool", "name": "memory.get", "arguments": {"key": "k"}}]);
    let limits = Limits::new(Duration::from_secs(42), 1024);
    let mut run = Run::start("r", definition(steps), json!({}), "u", limits, 100).unwrap();
    let e = executed(&mut run, 100);
    assert_eq!(e.deadline_ms, 42_100);
    assert_eq!(
        e.call,
        Call::Tool {
            name: "memory.get".into(),
            arguments: json!({"key": "k"})
        }
    );
}

#[test]
fn outputs_feed_later_steps_and_the_last_is_the_run_s() {
    let steps = json!([
        {"id": "fetch", "type": "mcp.tool", "server": "s", "tool": "t"},
        {"id": "doc", "type": "mcp.resource", "server": "s",
         "read": "docs://{{steps.fetch.output.content[0].text}}"},
        {"id": "say", "type": "agent", "prompt": "About {{steps.doc.output.contents}}"},
    ]);
    let mut run = start(steps, json!({}));
    executed(&mut run, 0);
    let out = json!({"content": [{"type": "text", "text": "oslo"}]});
    run.handle_outcome(0, 1, Ok(out), 1);
    let read = executed(&mut run, 1);
    assert_eq!(
        read.call,
        Call::Resource {
            server: "s".into(),
            op: super::run::Resolved::Read {
                uri: "docs://oslo".into()
            }
        }
    );
    run.handle_outcome(1, 1, Ok(json!({"contents": [1]})), 2);
    let said = executed(&mut run, 2);
    assert_eq!(
        said.call,
        Call::Agent {
            prompt: "About [1]".into()
        }
    );
    run.handle_outcome(2, 1, Ok(json!({"text": "done"})), 3);
    let record = run.record();
    assert_eq!(record.status, Status::Completed);
    assert_eq!(record.output, Some(json!({"text": "done"})));
    assert_eq!(record.ended_ms, Some(3));
    assert_eq!(record.current(), None);
}

#[test]
fn a_path_with_nothing_at_it_fails_the_step_naming_it() {
    let steps = json!([{"id": "t", "type": "mcp.tool", "server": "s", "tool": "t",
                        "arguments": {"a": ["{{input.missing}}"]}}]);
    let mut run = start(steps, json!({}));
    assert!(actions(&mut run, 0).is_empty());
    let record = run.record();
    assert_eq!(record.status, Status::Failed);
    let error = record.error.clone().unwrap();
    assert_eq!(error.code, "template");
    assert_eq!(
        error.message,
        "step \"t\": /steps/0/arguments/a/0: {{input.missing}} holds nothing in this run"
    );
}

#[test]
fn a_wait_on_a_signal_takes_it_or_one_sent_before() {
    let steps = json!([
        {"id": "first", "type": "wait", "on": {"signal": {"name": "go"}}},
        {"id": "second", "type": "wait", "on": {"signal": {"name": "again"}}, "timeout": "5s"},
        {"id": "third", "type": "wait", "on": {"signal": {"name": "never"}}, "timeout": "5s"},
    ]);
    let mut run = start(steps, json!({}));
    assert!(actions(&mut run, 0).is_empty());
    assert_eq!(step_status(&run, 0), "waiting");
    assert_eq!(run.poll_timeout(), None, "no timeout given: it waits");
    // A signal for a later wait is kept.
    run.signal("again", json!({"n": 2}), 5).unwrap();
    assert_eq!(run.record().signals.len(), 1);
    run.signal("go", json!(1), 10).unwrap();
    assert_eq!(
        run.record().steps[0].output,
        Some(json!({"signal": "go", "payload": 1}))
    );
    // The second takes the one kept as it starts.
    assert!(actions(&mut run, 10).is_empty());
    let record = run.record();
    assert_eq!(
        record.steps[1].output,
        Some(json!({"signal": "again", "payload": {"n": 2}}))
    );
    assert!(record.signals.is_empty());
    assert_eq!(step_status(&run, 2), "waiting");
    assert_eq!(run.poll_timeout(), Some(5010));
    run.handle_timeout(5010);
    assert_eq!(run.record().status, Status::Failed);
    assert_eq!(run.record().error.as_ref().unwrap().code, "timed_out");
    assert_eq!(
        run.signal("never", json!(null), 6000).unwrap_err().code(),
        "already_finished"
    );
}

#[test]
fn signals_kept_are_bounded() {
    let steps = json!([{"id": "w", "type": "wait", "on": {"signal": {"name": "go"}}}]);
    let limits = Limits::new(Duration::from_secs(1), 1024);
    let mut run = Run::start("r", definition(steps), json!({}), "u", limits, 0).unwrap();
    assert!(actions(&mut run, 0).is_empty());
    for n in 0..SIGNALS_MAX {
        run.signal(&format!("s{n}"), json!(n), 0).unwrap();
    }
    let past = run.signal("one-more", json!(null), 0).unwrap_err();
    assert!(
        matches!(
            past,
            crate::Error::TooLarge {
                what: "signals",
                ..
            }
        ),
        "{past:?}"
    );
    // The wait takes its signal, the kept ones full or not.
    run.signal("go", json!(1), 0).unwrap();
    assert_eq!(run.record().status, Status::Completed);
    // A payload at the bound is kept, one past it refused (a string of n bytes is n + 2).
    let steps = json!([{"id": "w", "type": "wait", "on": {"signal": {"name": "go"}}}]);
    let mut run = Run::start("r", definition(steps), json!({}), "u", limits, 0).unwrap();
    run.signal("later", json!("x".repeat(1022)), 0).unwrap();
    let past = run.signal("later", json!("x".repeat(1023)), 0).unwrap_err();
    assert!(
        matches!(
            past,
            crate::Error::TooLarge {
                what: "payload",
                ..
            }
        ),
        "{past:?}"
    );
    assert_eq!(run.record().signals.len(), 1);
}

#[test]
fn a_wait_for_a_duration_ends_at_its_time() {
    let steps = json!([{"id": "nap", "type": "wait", "on": {"duration": "90s"}}]);
    let mut run = start(steps, json!({}));
    assert!(actions(&mut run, 1000).is_empty());
    assert_eq!(run.poll_timeout(), Some(91_000));
    run.handle_timeout(90_999);
    assert_eq!(run.record().status, Status::Running);
    run.handle_timeout(91_000);
    assert_eq!(run.record().status, Status::Completed);
    assert_eq!(run.record().output, Some(json!({"waited_ms": 90_000})));
}

#[test]
fn a_wait_on_a_resource_subscribes_and_releases_it() {
    let steps = json!([
        {"id": "change", "type": "wait", "on": {"resource": {"server": "s", "uri": "demo://{{input.r}}"}}},
    ]);
    let mut run = start(steps, json!({"r": "counter"}));
    let subscribed: [Action; 1] = actions(&mut run, 0).try_into().unwrap();
    let [
        Action::Subscribe {
            step: 0,
            attempt: 1,
            watched,
            again: false,
        },
    ] = subscribed
    else {
        panic!("{subscribed:?}")
    };
    assert_eq!(
        (watched.server.as_str(), watched.uri.as_str()),
        ("s", "demo://counter")
    );
    assert!(!run.updated("s", "demo://other", 1));
    assert!(run.updated("s", "demo://counter", 2));
    assert_eq!(actions(&mut run, 2), [Action::Release { watched }]);
    assert_eq!(
        run.record().output,
        Some(json!({"server": "s", "uri": "demo://counter"}))
    );
    // A subscribe that will not pass fails the wait.
    let mut run = start(
        json!([{"id": "w", "type": "wait", "on": {"resource": {"server": "s", "uri": "demo://x"}}}]),
        json!({}),
    );
    actions(&mut run, 0);
    run.handle_outcome(
        0,
        1,
        Err(Failure::retryable("unsupported", "no subscriptions")),
        1,
    );
    assert!(matches!(
        actions(&mut run, 1).as_slice(),
        [Action::Release { .. }]
    ));
    assert_eq!(run.record().error.as_ref().unwrap().code, "unsupported");
    // A URI template is not subscribable.
    let mut run = start(
        json!([{"id": "w", "type": "wait", "on": {"resource": {"server": "s", "uri": "demo://item/{id}"}}}]),
        json!({}),
    );
    assert!(actions(&mut run, 0).is_empty());
    assert_eq!(run.record().error.as_ref().unwrap().code, "not_concrete");
}

#[test]
fn cancel_gives_up_what_is_under_way() {
    let mut run = start(flaky(), json!({"city": "x"}));
    let first = executed(&mut run, 0);
    run.cancel(5).unwrap();
    assert_eq!(
        actions(&mut run, 5),
        [Action::Abandon {
            step: 0,
            attempt: first.attempt
        }]
    );
    let record = run.record();
    assert_eq!(record.status, Status::Cancelled);
    assert_eq!(record.steps[0].status.as_str(), "cancelled");
    assert_eq!(record.ended_ms, Some(5));
    assert_eq!(run.poll_timeout(), None);
    run.handle_outcome(0, 1, Ok(json!({})), 6);
    assert_eq!(run.record().status, Status::Cancelled);
    for refused in [run.cancel(7), run.pause(7), run.resume(7)] {
        assert_eq!(refused.unwrap_err().code(), "already_finished");
    }
    // A waiting resource is released.
    let mut run = start(
        json!([{"id": "w", "type": "wait", "on": {"resource": {"server": "s", "uri": "u://x"}}}]),
        json!({}),
    );
    actions(&mut run, 0);
    run.cancel(1).unwrap();
    assert!(matches!(
        actions(&mut run, 1).as_slice(),
        [Action::Release { .. }]
    ));
}

#[test]
fn a_paused_run_starts_nothing_until_resumed() {
    let steps = json!([
        {"id": "a", "type": "mcp.tool", "server": "s", "tool": "t"},
        {"id": "b", "type": "mcp.tool", "server": "s", "tool": "t"},
    ]);
    let mut run = start(steps, json!({}));
    executed(&mut run, 0);
    run.pause(1).unwrap();
    run.pause(2).unwrap();
    assert_eq!(run.record().status, Status::Paused);
    // What was under way ends; the next step waits.
    run.handle_outcome(0, 1, Ok(json!(1)), 3);
    assert_eq!(step_status(&run, 0), "done");
    assert!(actions(&mut run, 4).is_empty());
    assert_eq!(step_status(&run, 1), "pending");
    run.resume(5).unwrap();
    run.resume(6).unwrap();
    let b = executed(&mut run, 6);
    assert_eq!((b.step, b.id.as_str()), (1, "b"));
}

#[test]
fn a_restored_run_sends_its_attempt_again_with_the_next_number() {
    let mut run = start(flaky(), json!({"city": "x"}));
    let first = executed(&mut run, 0);
    // Killed with attempt 1 under way: the record says so.
    let kept: Record = serde_json::from_value(serde_json::to_value(run.record()).unwrap()).unwrap();
    let mut restored = Run::restore(kept, 1024).unwrap();
    assert!(restored.take_changed());
    let again = executed(&mut restored, 50_000);
    assert_eq!(again.attempt, first.attempt + 1);
    assert_eq!(again.call.idempotency_key(), first.call.idempotency_key());
    assert_eq!(
        restored.record().steps[0].failures,
        0,
        "an interruption is no failure"
    );
    // A parked wait on a resource is subscribed again.
    let mut run = start(
        json!([{"id": "w", "type": "wait", "on": {"resource": {"server": "s", "uri": "u://x"}}}]),
        json!({}),
    );
    actions(&mut run, 0);
    let mut restored = Run::restore(run.record().clone(), 1024).unwrap();
    assert!(matches!(
        actions(&mut restored, 1).as_slice(),
        [Action::Subscribe { again: true, .. }]
    ));
    // A retry keeps its time; a duration wait its end.
    let mut run = start(
        json!([{"id": "n", "type": "wait", "on": {"duration": "1m"}}]),
        json!({}),
    );
    actions(&mut run, 0);
    let restored = Run::restore(run.record().clone(), 1024).unwrap();
    assert_eq!(restored.poll_timeout(), Some(60_000));
}

/// A record of a run under way that stands past its last step is failed at restore, not
/// followed (it would index no step).
#[test]
fn a_restored_record_past_its_last_step_fails() {
    let mut run = start(flaky(), json!({"city": "x"}));
    executed(&mut run, 0);
    let mut kept = run.record().clone();
    kept.step = kept.steps.len();
    let restored = Run::restore(kept, 1024).unwrap();
    assert_eq!(restored.record().status, Status::Failed);
    // At its last step, it goes on.
    let mut kept = run.record().clone();
    kept.step = kept.steps.len() - 1;
    let restored = Run::restore(kept, 1024).unwrap();
    assert!(!restored.record().status.settled());
}

#[test]
fn an_output_past_the_bound_fails_its_step() {
    let steps = json!([{"id": "a", "type": "mcp.tool", "server": "s", "tool": "t"}]);
    let limits = Limits::new(Duration::from_secs(1), 1024);
    let at = |n: usize| {
        let mut run =
            Run::start("r", definition(steps.clone()), json!({}), "u", limits, 0).unwrap();
        executed(&mut run, 0);
        run.handle_outcome(0, 1, Ok(json!("x".repeat(n - 2))), 1);
        run.record().clone()
    };
    assert_eq!(at(1024).status, Status::Completed);
    let past = at(1025);
    assert_eq!(past.status, Status::Failed);
    assert_eq!(past.error.unwrap().code, "too_large");
    let input = json!("x".repeat(1023));
    let refused = Run::start("r", definition(steps), input, "u", limits, 0).unwrap_err();
    assert!(matches!(
        refused,
        crate::Error::TooLarge { what: "input", .. }
    ));
}

#[test]
fn the_input_is_checked_against_its_schema() {
    let body = json!({
        "input": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}],
    });
    let d = Definition::parse("wf", &body).unwrap();
    let e = Run::start(
        "r",
        d.clone(),
        json!({"city": 1}),
        "u",
        Limits::default(),
        0,
    )
    .unwrap_err();
    let crate::Error::InvalidArguments { pointer, rule, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((pointer.as_str(), rule.as_str()), ("/input/city", "type"));
    assert!(Run::start("r", d, json!({"city": "Oslo"}), "u", Limits::default(), 0).is_ok());
}

#[test]
fn bad_templates_are_refused_at_definition_naming_the_step_and_the_path() {
    let e = refused(json!({"steps": [
        {"id": "fetch", "type": "mcp.tool", "server": "s", "tool": "t"},
        {"id": "use", "type": "mcp.tool", "server": "s", "tool": "t",
         "arguments": {"q": {"deep": ["{{steps.fecth.output}}"]}}},
    ]}));
    assert_eq!(e.step.as_deref(), Some("use"));
    assert_eq!(
        (e.pointer.as_str(), e.rule),
        ("/steps/1/arguments/q/deep/0", "template")
    );
    assert_eq!(
        e.to_string(),
        "step \"use\": /steps/1/arguments/q/deep/0: {{steps.fecth.output}}: no step is named \"fecth\""
    );
    let tool = e.to_tool_error("workflow.create");
    assert_eq!(
        tool.to_value()["pointer"],
        "/definition/steps/1/arguments/q/deep/0"
    );
    assert_eq!(tool.to_value()["rule"], "template");
    // A later step, the step itself, and the other templated places.
    for (step, pointer) in [
        (
            json!({"id": "a", "type": "agent", "prompt": "{{steps.a.output}}"}),
            "/steps/0/prompt",
        ),
        (
            json!({"id": "a", "type": "mcp.resource", "server": "s", "read": "{{input"}),
            "/steps/0/read",
        ),
        (
            json!({"id": "a", "type": "mcp.tool", "server": "s", "tool": "t",
                   "idempotency": {"value": "{{run.nope}}"}}),
            "/steps/0/idempotency/value",
        ),
        (
            json!({"id": "a", "type": "wait", "on": {"resource": {"server": "s", "uri": "{{x}}"}}}),
            "/steps/0/on/resource/uri",
        ),
        (
            json!({"id": "a", "type": "tool", "name": "memory.get", "arguments": {"key": "{{}}"}}),
            "/steps/0/arguments/key",
        ),
    ] {
        let e = refused(json!({"steps": [step]}));
        assert_eq!((e.pointer.as_str(), e.rule), (pointer, "template"), "{e}");
        assert_eq!(e.step.as_deref(), Some("a"));
    }
    // An expression at its bound is taken, one past it refused.
    let key = |n: usize| format!("{{{{input.{}}}}}", "k".repeat(n - 6));
    let at = json!({"steps": [{"id": "a", "type": "agent", "prompt": key(EXPRESSION_MAX)}]});
    assert!(Definition::parse("wf", &at).is_ok());
    let past = json!({"steps": [{"id": "a", "type": "agent", "prompt": key(EXPRESSION_MAX + 1)}]});
    let e = refused(past);
    assert_eq!(e.rule, "template");
    assert!(e.message.contains("257 bytes is past 256"), "{e}");
}

#[test]
fn definitions_are_bounded() {
    let wait = |id: String| json!({"id": id, "type": "wait", "on": {"duration": "1s"}});
    let steps = |n: usize| Value::Array((0..n).map(|i| wait(format!("s{i}"))).collect());
    assert!(Definition::parse("wf", &json!({"steps": steps(STEPS_MAX)})).is_ok());
    let e = refused(json!({"steps": steps(STEPS_MAX + 1)}));
    assert_eq!((e.pointer.as_str(), e.rule), ("/steps", "bound"));
    assert_eq!(refused(json!({"steps": []})).rule, "bound");
    // Names and ids: 64 bytes, not 65.
    assert!(Definition::parse(&"w".repeat(NAME_MAX), &json!({"steps": steps(1)})).is_ok());
    let e = Definition::parse(&"w".repeat(NAME_MAX + 1), &json!({"steps": steps(1)})).unwrap_err();
    assert_eq!(e.rule, "name");
    assert!(Definition::parse("wf", &json!({"steps": [wait("i".repeat(NAME_MAX))]})).is_ok());
    let e = refused(json!({"steps": [wait("i".repeat(NAME_MAX + 1))]}));
    assert_eq!((e.pointer.as_str(), e.rule), ("/steps/0/id", "name"));
    let e = refused(json!({"steps": [wait("a.b".into())]}));
    assert_eq!(e.rule, "name");
    let e = refused(json!({"steps": [wait("a".into()), wait("a".into())]}));
    assert_eq!(
        (e.pointer.as_str(), e.rule, e.step.as_deref()),
        ("/steps/1/id", "unique", Some("a"))
    );
    // Retries: 10, not 11.
    let retried = |max: u32| {
        json!({"steps": [{"id": "a", "type": "mcp.tool", "server": "s",
        "tool": "t", "retries": {"max": max}}]})
    };
    assert!(Definition::parse("wf", &retried(RETRIES_MAX)).is_ok());
    let e = refused(retried(RETRIES_MAX + 1));
    assert_eq!(
        (e.pointer.as_str(), e.rule),
        ("/steps/0/retries/max", "bound")
    );
    // Labels: 16, not 17.
    let labels = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    assert!(
        Definition::parse(
            "wf",
            &json!({"labels": labels(LABELS_MAX), "steps": steps(1)})
        )
        .is_ok()
    );
    let e = refused(json!({"labels": labels(LABELS_MAX + 1), "steps": steps(1)}));
    assert_eq!((e.pointer.as_str(), e.rule), ("/labels", "bound"));
    // The whole body: 64 KiB.
    let sized = |n: usize| {
        let mut body = json!({"labels": {"pad": ""}, "steps": steps(1)});
        let len = body.to_string().len();
        body["labels"]["pad"] = json!("x".repeat(n - len));
        body
    };
    // A label's value is bounded too: past it, the definition's bound is what is met.
    let e = refused(sized(DEFINITION_MAX + 1));
    assert_eq!((e.pointer.as_str(), e.rule), ("", "bound"));
    // At the bound, padded where no other bound is met: taken.
    let padded = |n: usize| {
        let step = json!({"id": "a", "type": "mcp.tool", "server": "s", "tool": "t",
            "arguments": {"pad": ""}});
        let mut body = json!({"steps": [step]});
        let len = body.to_string().len();
        body["steps"][0]["arguments"]["pad"] = json!("x".repeat(n - len));
        body
    };
    assert!(Definition::parse("wf", &padded(DEFINITION_MAX)).is_ok());
    assert_eq!(refused(padded(DEFINITION_MAX + 1)).rule, "bound");
    // A label's value: 256 bytes, not 257.
    let label = |n: usize| json!({"labels": {"team": "x".repeat(n)}, "steps": steps(1)});
    assert!(Definition::parse("wf", &label(LABEL_MAX)).is_ok());
    let e = refused(label(LABEL_MAX + 1));
    assert_eq!((e.pointer.as_str(), e.rule), ("/labels/team", "bound"));
    // An agent step's prompt: 16 KiB, not more.
    let prompt =
        |n: usize| json!({"steps": [{"id": "a", "type": "agent", "prompt": "x".repeat(n)}]});
    assert!(Definition::parse("wf", &prompt(PROMPT_MAX)).is_ok());
    let e = refused(prompt(PROMPT_MAX + 1));
    assert_eq!((e.pointer.as_str(), e.rule), ("/steps/0/prompt", "bound"));
    // Durations: 30 days, not more; not zero.
    let napping = |d: Value| json!({"steps": [{"id": "a", "type": "wait", "on": {"duration": d}}]});
    assert!(Definition::parse("wf", &napping(json!("30d"))).is_ok());
    assert_eq!(refused(napping(json!("30d 1s"))).rule, "duration");
    assert_eq!(refused(napping(json!(0))).rule, "duration");
    assert_eq!(
        refused(napping(json!("soon"))).pointer,
        "/steps/0/on/duration"
    );
}

#[test]
fn steps_are_checked_for_their_shape() {
    for (body, pointer, rule) in [
        (
            json!({"steps": [{"id": "a", "type": "mcp.nope"}]}),
            "/steps/0/type",
            "shape",
        ),
        (json!({"steps": [{"type": "wait"}]}), "/steps/0/id", "shape"),
        (
            json!({"steps": [{"id": "a", "type": "mcp.tool", "server": "s"}]}),
            "/steps/0",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "mcp.tool", "server": "s", "tool": "t", "retry": 1}]}),
            "/steps/0",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "mcp.resource", "server": "s", "list": true, "templates": true}]}),
            "/steps/0",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "mcp.resource", "server": "s"}]}),
            "/steps/0",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "mcp.resource", "server": "s", "complete": {"ref": {}}}]}),
            "/steps/0/complete",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "tool", "name": "no.such"}]}),
            "/steps/0/name",
            "tool",
        ),
        (
            json!({"steps": [{"id": "a", "type": "tool", "name": "finish"}]}),
            "/steps/0/name",
            "tool",
        ),
        (
            json!({"steps": [{"id": "a", "type": "tool", "name": "events.list"}]}),
            "/steps/0/name",
            "tool",
        ),
        (
            json!({"steps": [{"id": "a", "type": "tool", "name": "/add"}]}),
            "/steps/0/name",
            "tool",
        ),
        (
            json!({"steps": [{"id": "a", "type": "tool", "name": "ref/add", "arguments": {"a": "{{steps.b.output}}"}}]}),
            "/steps/0/arguments/a",
            "template",
        ),
        (
            json!({"steps": [{"id": "a", "type": "agent", "prompt": ""}]}),
            "/steps/0/prompt",
            "bound",
        ),
        (
            json!({"steps": [{"id": "a", "type": "wait", "on": {}}]}),
            "/steps/0/on",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "wait", "on": {"signal": {"name": "x"}, "duration": 1}}]}),
            "/steps/0/on",
            "shape",
        ),
        (
            json!({"steps": [{"id": "a", "type": "mcp.tool", "server": "{{input.s}}", "tool": "t"}]}),
            "/steps/0/server",
            "shape",
        ),
        (json!({"input": [], "steps": []}), "/input", "schema"),
        (
            json!({"input": {"type": 7}, "steps": []}),
            "/input",
            "schema",
        ),
        (
            json!({"starts": [{"subscribe": {}}], "steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}]}),
            "/starts/0",
            "shape",
        ),
        (json!({"step": []}), "", "shape"),
    ] {
        let e = refused(body.clone());
        assert_eq!((e.pointer.as_str(), e.rule), (pointer, rule), "{body}: {e}");
    }
}

/// A start is one of subscribe, event and manual; its node is its id or its index; a
/// subscribe start names a concrete URI; at most `STARTS_MAX` starts.
#[test]
fn starts_are_read_and_checked() {
    use super::definition::STARTS_MAX;
    use super::{Start, StartOn};

    let steps = json!([{"id": "a", "type": "wait", "on": {"duration": 1}}]);
    let body = |starts: Value| json!({"starts": starts, "steps": steps});
    let read = Definition::parse(
        "w",
        &body(json!([
            {"id": "doc", "subscribe": {"server": "s", "uri": "demo://x"}},
            {"event": {"stream": "alerts"}},
            {"manual": {}}
        ])),
    )
    .unwrap();
    let subscribe = StartOn::Subscribe {
        server: "s".into(),
        uri: "demo://x".into(),
    };
    let event = StartOn::Event {
        stream: "alerts".into(),
    };
    let nodes: Vec<(&str, &StartOn)> = read
        .starts
        .iter()
        .map(|Start { node, on }| (node.as_str(), on))
        .collect();
    assert_eq!(
        nodes,
        [
            ("doc", &subscribe),
            ("#1", &event),
            ("#2", &StartOn::Manual)
        ]
    );

    let refused = |starts: Value| Definition::parse("w", &body(starts)).unwrap_err();
    for (starts, pointer, rule) in [
        (
            json!([{"subscribe": {"server": "s", "uri": "demo://{id}"}}]),
            "/starts/0/subscribe",
            "shape",
        ),
        (
            json!([{"event": {"stream": ""}}]),
            "/starts/0/event",
            "shape",
        ),
        (
            json!([{"manual": {}, "event": {"stream": "x"}}]),
            "/starts/0",
            "shape",
        ),
        (json!([{}]), "/starts/0", "shape"),
        (json!([{"manual": {"x": 1}}]), "/starts/0", "shape"),
        (
            json!([{"id": "a", "manual": {}}, {"id": "a", "manual": {}}]),
            "/starts/1/id",
            "unique",
        ),
        (json!([{"id": "a b", "manual": {}}]), "/starts/0/id", "name"),
    ] {
        let e = refused(starts.clone());
        assert_eq!(
            (e.pointer.as_str(), e.rule),
            (pointer, rule),
            "{starts}: {e}"
        );
    }
    let at_bound = vec![json!({"manual": {}}); STARTS_MAX];
    assert_eq!(
        Definition::parse("w", &body(Value::from(at_bound.clone())))
            .unwrap()
            .starts
            .len(),
        STARTS_MAX
    );
    let mut past = at_bound;
    past.push(json!({"manual": {}}));
    assert_eq!(refused(Value::from(past)).rule, "bound");
}

#[test]
fn a_tool_step_names_an_own_tool_a_contract_or_a_registry_tool() {
    for name in [
        "memory.get",
        "knowledge.search",
        "code.run",
        "exec",
        "ref/add",
        "a/b/c",
    ] {
        let body = json!({"steps": [{"id": "a", "type": "tool", "name": name, "arguments": {"x": "{{input.x}}"}}]});
        let definition = Definition::parse("wf", &body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(matches!(&definition.steps[0].kind, Kind::Tool { name: n, .. } if n == name));
    }
}
