//! The runtime over the in-memory services: schemas, grants, bounds and behaviour.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::in_memory::InMemory;
use crate::schema::assert_answer;
use crate::skills::{Argument, LOADED_MAX, Role, Said, Skill};
use crate::{Caller, Error, Grants, Scope, Tools, catalogue, testing};

fn tools() -> Tools<InMemory> {
    Tools::new(seeded(InMemory::new("agent-1")), Grants::default())
}

/// `services` with an instruction resource on server `docs` and its skill `docs/greet`.
fn seeded(services: InMemory) -> InMemory {
    services.resource("docs", "docs://instruction", "Be brief.");
    let who = Argument::new("who", Some("whom to greet"), true);
    let greet = Skill::new("docs", "greet", Some("Greets"), vec![who]);
    services.skill(greet, vec![Said::new(Role::User, "Say hello to {who}.")]);
    services
}

/// Calls `name` for `caller`; every answer must fit the tool's output schema.
async fn call(
    tools: &Tools<InMemory>,
    caller: &Caller,
    name: &str,
    args: Value,
) -> Result<Value, Error> {
    let got = tools.call(caller, name, args).await;
    if let Ok(answer) = &got {
        assert_answer(name, answer);
    }
    got
}

/// Calls as root in conversation `c`.
async fn root(tools: &Tools<InMemory>, name: &str, args: Value) -> Result<Value, Error> {
    call(tools, &Caller::root("c"), name, args).await
}

fn code(got: Result<Value, Error>) -> &'static str {
    got.map_or_else(|e| e.code(), |v| panic!("an error, not {v}"))
}

#[tokio::test]
async fn the_in_memory_services_conform() {
    let services = InMemory::new("i").with_max_value_bytes(1024);
    testing::check_memory(&services).await;
    testing::check_artifacts(&services).await;
    testing::check_plans(&services).await;
    testing::check_messages(&services).await;
    testing::check_units(&services).await;
    testing::check_humans(&services, &services).await;
    let services = seeded(services);
    testing::check_instruction(&services, "docs", "docs://instruction", "Be brief.").await;
    let who = std::collections::BTreeMap::from([("who".to_owned(), "Ada".to_owned())]);
    testing::check_skills(&services, "docs/greet", who).await;
    testing::check_subagents(&services).await;
    testing::check_workflows(&services).await;
    // And at the default bound.
    testing::check_memory(&InMemory::new("i")).await;
}

#[tokio::test]
async fn each_built_tool_checks_its_arguments_first() {
    let t = tools();
    // (tool, valid arguments, invalid arguments, pointer, rule)
    let cases = [
        (
            "memory.get",
            json!({"key": "k"}),
            json!({"key": 1}),
            "/key",
            "type",
        ),
        (
            "memory.set",
            json!({"key": "k", "value": [1]}),
            json!({"key": "k"}),
            "",
            "required",
        ),
        (
            "memory.list",
            json!({"prefix": "a", "limit": 1}),
            json!({"limit": 0}),
            "/limit",
            "minimum",
        ),
        (
            "memory.push",
            json!({"key": "q", "value": 1}),
            json!({"key": "", "value": 1}),
            "/key",
            "minLength",
        ),
        (
            "memory.shift",
            json!({"key": "q"}),
            json!({}),
            "",
            "required",
        ),
        (
            "memory.pop",
            json!({"key": "q"}),
            json!({"key": "q", "end": 1}),
            "",
            "additionalProperties",
        ),
        (
            "memory.delete",
            json!({"key": "k"}),
            json!({"key": null}),
            "/key",
            "type",
        ),
        (
            "artifact.create",
            json!({"name": "a", "media_type": "text/plain", "text": "x"}),
            json!({"name": "a", "media_type": "text/plain", "text": "x", "base64": "eA=="}),
            "",
            "oneOf",
        ),
        (
            "artifact.get",
            json!({"name": "a"}),
            json!({"name": ""}),
            "/name",
            "minLength",
        ),
        (
            "artifact.list",
            json!({}),
            json!({"unit": "u"}),
            "",
            "additionalProperties",
        ),
        (
            "artifact.delete",
            json!({"name": "a"}),
            json!([]),
            "",
            "type",
        ),
        (
            "plan.create",
            json!({"steps": [{"title": "t"}]}),
            json!({"steps": []}),
            "/steps",
            "minItems",
        ),
        (
            "plan.get",
            json!({}),
            json!({"x": 1}),
            "",
            "additionalProperties",
        ),
        (
            "plan.update",
            json!({"step": 0, "status": "done"}),
            json!({"step": 0, "status": "finished"}),
            "/status",
            "enum",
        ),
        (
            "plan.clear",
            json!({}),
            json!({"all": true}),
            "",
            "additionalProperties",
        ),
        (
            "message.send",
            json!({"conversation": "c2", "text": "hi"}),
            json!({"conversation": "c2", "text": ""}),
            "/text",
            "minLength",
        ),
        (
            "status",
            json!({}),
            json!({"verbose": true}),
            "",
            "additionalProperties",
        ),
        (
            "sleep",
            json!({"duration": "5s"}),
            json!({"duration": 0}),
            "/duration",
            "minimum",
        ),
        (
            "await",
            json!({"until": {"memory": {"key": "k"}}, "timeout": 10}),
            json!({"until": {}}),
            "/until",
            "minProperties",
        ),
        (
            "finish",
            json!({"status": "done", "summary": "ok"}),
            json!({"status": "over", "summary": "ok"}),
            "/status",
            "enum",
        ),
        (
            "instruction.read",
            json!({}),
            json!({"verbose": true}),
            "",
            "additionalProperties",
        ),
        (
            "instruction.subscribe",
            json!({"uri": "docs://instruction", "server": "docs"}),
            json!({"server": "docs"}),
            "",
            "required",
        ),
        (
            "skills.list",
            json!({}),
            json!({"all": true}),
            "",
            "additionalProperties",
        ),
        (
            "skills.load",
            json!({"name": "docs/greet", "arguments": {"who": "Ada"}}),
            json!({"name": "docs/greet", "arguments": {"who": 1}}),
            "/arguments/who",
            "type",
        ),
        (
            "skills.unload",
            json!({"name": "docs/greet"}),
            json!({"name": ""}),
            "/name",
            "minLength",
        ),
        (
            "subagent.run",
            json!({"goal": "Count the files.", "tools": ["memory.*"], "deadline": "5m"}),
            json!({"goal": ""}),
            "/goal",
            "minLength",
        ),
        (
            "subagent.send",
            json!({"id": "s1", "text": "And the folders."}),
            json!({"id": "s1"}),
            "",
            "required",
        ),
        (
            "subagent.status",
            json!({"id": "s1"}),
            json!({"id": 1}),
            "/id",
            "type",
        ),
        (
            "subagent.await",
            json!({"id": "s1", "timeout": 1}),
            json!({"id": "s1", "timeout": 0}),
            "/timeout",
            "minimum",
        ),
        (
            "subagent.list",
            json!({}),
            json!({"all": true}),
            "",
            "additionalProperties",
        ),
        (
            "subagent.kill",
            json!({"id": "s1"}),
            json!({}),
            "",
            "required",
        ),
        (
            "subagent.retire",
            json!({"id": "s1"}),
            json!({"id": ""}),
            "/id",
            "minLength",
        ),
        // The model-only tools check their arguments, then answer that they run in a turn.
        (
            "think",
            json!({"prompt": "Plan it"}),
            json!({"prompt": "Plan it", "schema": []}),
            "/schema",
            "type",
        ),
        (
            "decide",
            json!({"questions": [{"id": "go", "question": "Go?", "type": "boolean"}]}),
            json!({"questions": [{"id": "go", "question": "Go?", "type": "maybe"}]}),
            "/questions/0/type",
            "enum",
        ),
        (
            "context.compact",
            json!({"keep": 4}),
            json!({"keep": -1}),
            "/keep",
            "minimum",
        ),
        (
            "workflow.create",
            json!({"name": "w", "definition": {"steps": [
                {"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}},
            ]}}),
            json!({"name": "w"}),
            "",
            "required",
        ),
        (
            "workflow.update",
            json!({"name": "w", "definition": {"steps": [
                {"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}},
            ]}}),
            json!({"name": "w", "definition": []}),
            "/definition",
            "type",
        ),
        (
            "workflow.run",
            json!({"workflow": "w", "input": {}}),
            json!({"workflow": ""}),
            "/workflow",
            "minLength",
        ),
        (
            "workflow.status",
            json!({"run": "run-1"}),
            json!({}),
            "",
            "required",
        ),
        (
            "workflow.list",
            json!({"workflow": "w", "limit": 100}),
            json!({"limit": 101}),
            "/limit",
            "maximum",
        ),
        (
            "workflow.signal",
            json!({"run": "run-1", "signal": "later", "payload": 1}),
            json!({"run": "run-1"}),
            "",
            "required",
        ),
        (
            "workflow.pause",
            json!({"run": "run-1"}),
            json!({"run": 1}),
            "/run",
            "type",
        ),
        (
            "workflow.resume",
            json!({"run": "run-1"}),
            json!({"run": "run-1", "now": true}),
            "",
            "additionalProperties",
        ),
        (
            "workflow.wait",
            json!({"run": "run-1", "timeout": 1}),
            json!({"run": "run-1", "timeout": 0}),
            "/timeout",
            "minimum",
        ),
        (
            "workflow.cancel",
            json!({"run": "run-1"}),
            json!({"run": ""}),
            "/run",
            "minLength",
        ),
        (
            "workflow.delete",
            json!({"name": "w"}),
            json!({"name": null}),
            "/name",
            "type",
        ),
        // Last: nobody answers here, so its valid call is made once the services shut down,
        // and is answered cancelled at once.
        (
            "ask_human",
            json!({"question": "Go?", "schema": {"type": "boolean"}, "timeout": "1m"}),
            json!({"question": "Go?", "schema": {"type": "boolean"}, "timeout": "soon"}),
            "/timeout",
            "duration",
        ),
    ];
    // Every tool run here answers at least once, so each output schema is met.
    for offered in t.offered(Scope::Root) {
        assert!(
            cases.iter().any(|c| c.0 == offered.name),
            "{}",
            offered.name
        );
    }
    for (tool, valid, invalid, pointer, rule) in cases {
        let got = root(&t, tool, invalid.clone()).await;
        let Err(Error::InvalidArguments {
            tool: t_name,
            pointer: p,
            rule: r,
            ..
        }) = &got
        else {
            panic!("{tool} {invalid}: {got:?}")
        };
        assert_eq!(
            (t_name.as_str(), p.as_str(), r.as_str()),
            (tool, pointer, rule),
            "{invalid}"
        );
        if tool == "ask_human" {
            t.services().shut_down();
        }
        let got = root(&t, tool, valid.clone()).await;
        match crate::reasoning::is_reasoning(tool) {
            true => assert_eq!(code(got), "model_only", "{tool}"),
            false => assert!(got.is_ok(), "{tool} {valid}: {got:?}"),
        }
    }
}

#[tokio::test]
async fn grants_refuse_and_narrow() {
    let t = tools();
    let sub = Caller::subagent("s1");
    let wf = Caller::workflow("r1", "step");
    // finish: root and subagent, never workflow; status: everyone.
    assert!(
        call(&t, &sub, "finish", json!({"status": "done", "summary": ""}))
            .await
            .is_ok()
    );
    let refused = call(&t, &wf, "finish", json!({"status": "done", "summary": ""})).await;
    assert_eq!(
        refused,
        Err(Error::NotGranted {
            tool: "finish".into(),
            scope: Some(Scope::Workflow)
        })
    );
    assert!(call(&t, &wf, "status", json!({})).await.is_ok());
    // Refused before the arguments are looked at.
    assert_eq!(
        code(call(&t, &sub, "subagent.run", json!(null)).await),
        "not_granted"
    );
    assert_eq!(
        code(root(&t, "memory.fetch", json!({})).await),
        "unknown_tool"
    );
    // The model-only tools run in a turn alone.
    assert_eq!(
        code(root(&t, "think", json!({"prompt": "?"})).await),
        "model_only"
    );
    // Not built: every tool of the catalogue still answers in a typed way.
    assert_eq!(
        code(root(&t, "code.run", json!({"language": "py", "code": "1"})).await),
        "not_built"
    );
    for tool in catalogue().iter().filter(|t| !t.built) {
        let scope = Scope::ALL
            .into_iter()
            .find(|s| tool.granted_to(*s))
            .unwrap();
        let got = call(&t, &Caller::new(scope), tool.name, json!({})).await;
        assert_eq!(code(got), "not_built", "{}", tool.name);
    }
    // Built, but without a runner `exec` is not offered: refused before its arguments.
    for args in [json!({"command": ["true"]}), json!(null)] {
        let got = call(&t, &sub, "exec", args).await;
        assert_eq!(
            got,
            Err(Error::NotOffered {
                tool: "exec".into(),
                reason: crate::exec::NOT_OFFERED.to_owned()
            })
        );
    }
    // The events tools are offered per owner, through `events::call`.
    assert_eq!(
        code(root(&t, "events.subscriptions", json!({})).await),
        "not_granted"
    );

    let offered = |t: &Tools<InMemory>, scope| t.offered(scope).map(|t| t.name).collect::<Vec<_>>();
    let names = offered(&t, Scope::Workflow);
    assert!(names.contains(&"memory.shift") && names.contains(&"status"));
    assert!(!names.contains(&"finish") && !names.contains(&"events.list"));
    assert!(!names.contains(&"code.run"), "not built: not offered");
    assert!(!names.contains(&"exec"), "no runner: not offered");
    assert_eq!(offered(&t, Scope::Root).len(), 47);

    let grants = Grants::new([(Scope::Subagent, ["memory.*", "plan.*"])]).unwrap();
    let narrow = Tools::new(InMemory::new("i"), grants);
    let names = offered(&narrow, Scope::Subagent);
    assert_eq!(names.len(), 11, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("memory.") || n.starts_with("plan."))
    );
    assert_eq!(
        code(call(&narrow, &sub, "status", json!({})).await),
        "not_granted"
    );
    assert!(call(&narrow, &sub, "plan.get", json!({})).await.is_ok());
    // Other scopes keep their defaults.
    assert!(call(&narrow, &wf, "status", json!({})).await.is_ok());
}

#[tokio::test]
async fn memory_through_the_tools() {
    let t = tools();
    assert_eq!(
        root(&t, "memory.get", json!({"key": "k"})).await,
        Ok(json!({"value": null, "version": 0}))
    );
    assert_eq!(
        root(&t, "memory.set", json!({"key": "k", "value": {"a": 1}})).await,
        Ok(json!({"version": 1}))
    );
    // Memory is shared by every unit.
    let got = call(
        &t,
        &Caller::subagent("s"),
        "memory.get",
        json!({"key": "k"}),
    )
    .await;
    assert_eq!(got, Ok(json!({"value": {"a": 1}, "version": 1})));
    // Compare-and-set with a stale version fails and changes nothing.
    let stale = root(
        &t,
        "memory.set",
        json!({"key": "k", "value": 2, "expected_version": 0}),
    )
    .await;
    let err = stale.unwrap_err();
    assert_eq!(err.to_value()["current"], 1);
    assert_eq!(err.code(), "version_mismatch");
    assert_eq!(
        root(&t, "memory.get", json!({"key": "k"})).await,
        Ok(json!({"value": {"a": 1}, "version": 1}))
    );
    let set = json!({"key": "k", "value": 2, "expected_version": 1});
    assert_eq!(root(&t, "memory.set", set).await, Ok(json!({"version": 2})));

    assert_eq!(
        root(&t, "memory.push", json!({"key": "q", "value": "a"})).await,
        Ok(json!({"length": 1, "version": 1}))
    );
    assert_eq!(
        root(&t, "memory.push", json!({"key": "q", "value": "b"})).await,
        Ok(json!({"length": 2, "version": 2}))
    );
    assert_eq!(
        root(&t, "memory.pop", json!({"key": "q"})).await,
        Ok(json!({"value": "b", "version": 3}))
    );
    assert_eq!(
        root(&t, "memory.shift", json!({"key": "q"})).await,
        Ok(json!({"value": "a", "version": 4}))
    );
    assert_eq!(
        root(&t, "memory.shift", json!({"key": "q"})).await,
        Ok(json!({"value": null, "empty": true, "version": 4}))
    );
    assert_eq!(
        root(&t, "memory.pop", json!({"key": "none"})).await,
        Ok(json!({"value": null, "empty": true, "version": 0}))
    );
    assert_eq!(
        code(root(&t, "memory.push", json!({"key": "k", "value": 1})).await),
        "not_an_array"
    );

    let list = root(&t, "memory.list", json!({"limit": 1})).await.unwrap();
    assert_eq!(
        list,
        json!({"keys": [{"key": "k", "version": 2, "bytes": 1}], "next": "k"})
    );
    let list = root(&t, "memory.list", json!({"after": "k"}))
        .await
        .unwrap();
    assert_eq!(
        list,
        json!({"keys": [{"key": "q", "version": 4, "bytes": 2}], "next": null})
    );
    assert_eq!(
        root(&t, "memory.delete", json!({"key": "k"})).await,
        Ok(json!({"deleted": true}))
    );
    assert_eq!(
        root(&t, "memory.delete", json!({"key": "k"})).await,
        Ok(json!({"deleted": false}))
    );
}

#[tokio::test]
async fn bounds_hold_at_the_bound_and_refuse_one_past() {
    let t = Tools::new(
        InMemory::new("i").with_max_value_bytes(1024),
        Grants::default(),
    );
    // Keys: 256 bytes, no control characters.
    let key = "é".repeat(128);
    assert!(
        root(&t, "memory.set", json!({"key": key, "value": 1}))
            .await
            .is_ok()
    );
    let long = format!("{key}k");
    assert_eq!(
        code(root(&t, "memory.set", json!({"key": long, "value": 1})).await),
        "bad_key"
    );
    assert_eq!(
        code(root(&t, "memory.get", json!({"key": "a\nb"})).await),
        "bad_key"
    );
    // Values: the configured maximum, serialized (a string of n bytes is n + 2).
    let at = json!({"key": "v", "value": "x".repeat(1022)});
    assert!(root(&t, "memory.set", at).await.is_ok());
    let past = json!({"key": "v", "value": "x".repeat(1023)});
    assert_eq!(code(root(&t, "memory.set", past).await), "too_large");
    assert_eq!(
        root(&t, "memory.get", json!({"key": "v"})).await.unwrap()["version"],
        1
    );
    // A list page: 100 at most.
    assert!(root(&t, "memory.list", json!({"limit": 100})).await.is_ok());
    assert_eq!(
        code(root(&t, "memory.list", json!({"limit": 101})).await),
        "too_large"
    );
    // Messages: a conversation id of 128 bytes, a text of the value bound.
    let c = "c".repeat(128);
    assert_eq!(
        root(
            &t,
            "message.send",
            json!({"conversation": c, "text": "x".repeat(1024)})
        )
        .await,
        Ok(json!({"id": 1}))
    );
    let past = json!({"conversation": c, "text": "x".repeat(1025)});
    assert_eq!(code(root(&t, "message.send", past).await), "too_large");
    let past = json!({"conversation": format!("{c}c"), "text": "x"});
    assert_eq!(
        code(root(&t, "message.send", past).await),
        "invalid_arguments"
    );
    // Artifacts: a name of 128 bytes, 8 MiB of content, decoded.
    let name = "n".repeat(128);
    let text = json!({"name": name, "media_type": "text/plain", "text": "x"});
    assert!(root(&t, "artifact.create", text).await.is_ok());
    let past = json!({"name": format!("{name}n"), "media_type": "text/plain", "text": "x"});
    assert_eq!(
        code(root(&t, "artifact.create", past).await),
        "invalid_arguments"
    );
    let slash = json!({"name": "a/b", "media_type": "text/plain", "text": "x"});
    assert_eq!(
        code(root(&t, "artifact.create", slash).await),
        "invalid_arguments"
    );
    let max = crate::artifact::CONTENT_MAX;
    let full = base64::engine::general_purpose::STANDARD.encode(vec![7u8; max]);
    let at = json!({"name": "big", "media_type": "application/octet-stream", "base64": full});
    assert_eq!(root(&t, "artifact.create", at).await.unwrap()["bytes"], max);
    let past = json!({"name": "big", "media_type": "text/plain", "text": "x".repeat(max + 1)});
    assert_eq!(code(root(&t, "artifact.create", past).await), "too_large");
    let over = base64::engine::general_purpose::STANDARD.encode(vec![7u8; max + 1]);
    let past = json!({"name": "big", "media_type": "text/plain", "base64": over});
    assert_eq!(code(root(&t, "artifact.create", past).await), "too_large");
    // Plans: 100 steps, titles of 500 bytes.
    let steps = |n: usize, title: &str| json!({"steps": vec![json!({"title": title}); n]});
    let at = steps(100, &"t".repeat(500));
    assert!(root(&t, "plan.create", at.clone()).await.is_ok());
    assert_eq!(
        code(root(&t, "plan.update", steps(101, "t")).await),
        "too_large"
    );
    assert_eq!(
        code(root(&t, "plan.update", steps(1, &"t".repeat(501))).await),
        "too_large"
    );
    let one = json!({"step": 99, "title": "t".repeat(501)});
    assert_eq!(code(root(&t, "plan.update", one).await), "too_large");
    assert_eq!(
        root(&t, "plan.get", json!({})).await.unwrap()["plan"]["version"],
        1
    );
    // A summary: 4096 bytes.
    let past = json!({"status": "done", "summary": "s".repeat(4097)});
    assert_eq!(code(root(&t, "finish", past).await), "too_large");
    let at = json!({"status": "done", "summary": "s".repeat(4096)});
    assert!(root(&t, "finish", at).await.is_ok());
    // Durations: 1 ms ..= 1 h.
    for (duration, ok) in [
        (json!(1), true),
        (json!(3_600_000), true),
        (json!("1h"), true),
        (json!(3_600_001), false),
        (json!("1h 1ms"), false),
        (json!("0s"), false),
        (json!("soon"), false),
    ] {
        let got = root(&t, "sleep", json!({"duration": duration})).await;
        assert_eq!(got.is_ok(), ok, "{duration}: {got:?}");
        let got = root(
            &t,
            "await",
            json!({"until": {"stream": {"name": "s"}}, "timeout": duration}),
        )
        .await;
        assert_eq!(got.is_ok(), ok, "{duration}: {got:?}");
    }
}

#[test]
fn concurrent_shifts_take_each_item_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    runtime.block_on(async {
        let t = Arc::new(tools());
        const ITEMS: u64 = 2000;
        for n in 0..ITEMS {
            root(&t, "memory.push", json!({"key": "q", "value": n}))
                .await
                .unwrap();
        }
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let t = Arc::clone(&t);
                tokio::spawn(async move {
                    let mut taken = Vec::new();
                    loop {
                        let got = root(&t, "memory.shift", json!({"key": "q"})).await.unwrap();
                        if got.get("empty").is_some() {
                            return taken;
                        }
                        taken.push(got["value"].clone());
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let mut taken = Vec::new();
        for task in tasks {
            taken.extend(task.await.unwrap());
        }
        testing::check_taken_once(&taken, ITEMS);
        let left = root(&t, "memory.get", json!({"key": "q"})).await.unwrap();
        assert_eq!(left, json!({"value": [], "version": 2 * ITEMS}));
    });
}

#[tokio::test]
async fn artifacts_plans_and_finish_belong_to_the_unit() {
    let t = tools();
    let sub = Caller::subagent("s1");
    let made = call(
        &t,
        &sub,
        "artifact.create",
        json!({"name": "r.json", "media_type": "application/json", "text": "{}"}),
    )
    .await;
    assert_eq!(
        made,
        Ok(json!({"name": "r.json", "media_type": "application/json", "bytes": 2}))
    );
    let bin = json!({"name": "b", "media_type": "text/plain", "base64": "/w=="});
    assert!(call(&t, &sub, "artifact.create", bin).await.is_ok());
    let got = call(&t, &sub, "artifact.get", json!({"name": "r.json"})).await;
    assert_eq!(
        got,
        Ok(json!({"name": "r.json", "media_type": "application/json", "bytes": 2, "text": "{}"}))
    );
    // Not UTF-8: base64, whatever the media type.
    let got = call(&t, &sub, "artifact.get", json!({"name": "b"})).await;
    assert_eq!(
        got,
        Ok(json!({"name": "b", "media_type": "text/plain", "bytes": 1, "base64": "/w=="}))
    );
    assert_eq!(
        code(root(&t, "artifact.get", json!({"name": "b"})).await),
        "not_found"
    );
    assert_eq!(
        root(&t, "artifact.list", json!({})).await,
        Ok(json!({"artifacts": []}))
    );
    let bad = json!({"name": "x", "media_type": "text/plain", "base64": "!!"});
    assert_eq!(
        code(call(&t, &sub, "artifact.create", bad).await),
        "invalid_arguments"
    );

    let plan = call(
        &t,
        &sub,
        "plan.create",
        json!({"steps": [{"title": "a"}, {"title": "b", "status": "done"}]}),
    )
    .await;
    let want = json!({"plan": {"steps": [{"title": "a", "status": "pending"}, {"title": "b", "status": "done"}], "version": 1}});
    assert_eq!(plan, Ok(want));
    assert_eq!(
        code(call(&t, &sub, "plan.create", json!({"steps": [{"title": "a"}]})).await),
        "exists"
    );
    let one = call(
        &t,
        &sub,
        "plan.update",
        json!({"step": 0, "status": "in_progress"}),
    )
    .await
    .unwrap();
    assert_eq!(one["plan"]["steps"][0]["status"], "in_progress");
    assert_eq!(one["plan"]["version"], 2);
    assert_eq!(
        code(
            call(
                &t,
                &sub,
                "plan.update",
                json!({"step": 2, "status": "done"})
            )
            .await
        ),
        "not_found"
    );
    assert_eq!(
        code(
            call(
                &t,
                &sub,
                "plan.update",
                json!({"steps": [{"title": "a"}], "step": 0})
            )
            .await
        ),
        "invalid_arguments"
    );
    assert_eq!(
        root(&t, "plan.get", json!({})).await,
        Ok(json!({"plan": null}))
    );
    assert_eq!(
        call(&t, &sub, "plan.clear", json!({})).await,
        Ok(json!({"cleared": true}))
    );
    assert_eq!(
        call(&t, &sub, "plan.clear", json!({})).await,
        Ok(json!({"cleared": false}))
    );

    let done = call(
        &t,
        &sub,
        "finish",
        json!({"status": "done", "summary": "ok"}),
    )
    .await;
    assert_eq!(
        done,
        Ok(json!({"unit": "subagent:s1", "status": "done", "artifacts": ["b", "r.json"]}))
    );
    let again = call(
        &t,
        &sub,
        "finish",
        json!({"status": "failed", "summary": ""}),
    )
    .await;
    assert_eq!(code(again), "already_finished");
}

#[tokio::test]
async fn messages_and_status() {
    let t = Tools::new(InMemory::new("agent-1").at(1_000), Grants::default());
    let wf = Caller::workflow("r1", "s");
    let sent = call(
        &t,
        &wf,
        "message.send",
        json!({"conversation": "main", "text": "done"}),
    )
    .await;
    assert_eq!(sent, Ok(json!({"id": 1})));
    let msg = t.services().messages_after("main").await;
    assert_eq!((msg.from.as_str(), msg.at_ms), ("run:r1", 1_000));
    assert!(
        call(
            &t,
            &Caller::subagent("a"),
            "finish",
            json!({"status": "cancelled", "summary": ""})
        )
        .await
        .is_ok()
    );
    let status = call(&t, &Caller::operator(Scope::Subagent), "status", json!({}))
        .await
        .unwrap();
    assert_eq!(
        status,
        json!({
            "instance": "agent-1",
            "conversations": [{"id": "main", "inbox": 1, "tokens": 0}],
            "runs": [],
            "subagents": [],
            "units_finished": 1,
            "budget": {"tokens_used": 0, "tokens_limit": null, "spent": false},
            "store": {"bytes": 4, "degraded": false},
        })
    );
}

impl InMemory {
    async fn messages_after(&self, conversation: &str) -> crate::message::Message {
        crate::message::Messages::after(self, conversation, 0)
            .await
            .unwrap()
            .unwrap()
    }
}

#[tokio::test]
async fn sleep_and_await_in_virtual_time() {
    let t = tools();
    let slept = root(&t, "sleep", json!({"duration": "1m 30s"})).await;
    assert_eq!(slept, Ok(json!({"slept_ms": 90_000, "cancelled": false})));
    assert_eq!(crate::wait::Clock::now_ms(t.services()), 90_000);

    // Met at once.
    root(&t, "memory.set", json!({"key": "flag", "value": "up"}))
        .await
        .unwrap();
    let got = root(&t, "await", json!({"until": {"memory": {"key": "flag"}}})).await;
    assert_eq!(
        got,
        Ok(json!({"met": true, "memory": {"key": "flag", "value": "up", "version": 1}}))
    );
    // Not met: the timeout passes, in virtual time.
    let until = json!({"until": {"memory": {"key": "flag", "equals": "down"}}, "timeout": "2s"});
    assert_eq!(root(&t, "await", until).await, Ok(json!({"met": false})));
    assert_eq!(crate::wait::Clock::now_ms(t.services()), 92_000);
    let until = json!({"until": {"memory": {"key": "flag", "equals": "up"}}});
    assert_eq!(root(&t, "await", until).await.unwrap()["met"], true);

    root(
        &t,
        "message.send",
        json!({"conversation": "c", "text": "one"}),
    )
    .await
    .unwrap();
    let until = json!({"until": {"message": {"conversation": "c"}}});
    let got = root(&t, "await", until).await.unwrap();
    assert_eq!(got["message"]["id"], 1);
    assert_eq!(got["message"]["from"], "conversation:c");
    let until = json!({"until": {"message": {"conversation": "c", "after": 1}}, "timeout": 1});
    assert_eq!(root(&t, "await", until).await, Ok(json!({"met": false})));

    assert_eq!(t.services().append("ticks", json!({"n": 1})), 1);
    let until = json!({"until": {"stream": {"name": "ticks", "after": 0}}});
    let got = root(&t, "await", until).await;
    assert_eq!(
        got,
        Ok(json!({"met": true, "stream": {"name": "ticks", "seq": 1, "data": {"n": 1}}}))
    );

    assert_eq!(
        code(root(&t, "await", json!({"until": {"run": "r9"}})).await),
        "unknown_run"
    );
    assert_eq!(
        code(root(&t, "await", json!({"until": {"subagent": "a9"}})).await),
        "unknown_subagent"
    );
    let two = json!({"until": {"run": "r", "subagent": "s"}});
    assert_eq!(code(root(&t, "await", two).await), "invalid_arguments");

    // At shutdown a sleep is cancelled and an await that would wait ends.
    t.services().shut_down();
    let slept = root(&t, "sleep", json!({"duration": 5_000})).await;
    assert_eq!(slept, Ok(json!({"slept_ms": 0, "cancelled": true})));
    let until = json!({"until": {"stream": {"name": "ticks", "after": 1}}});
    assert_eq!(code(root(&t, "await", until).await), "shutting_down");
}

#[tokio::test]
async fn subagents_run_steer_settle_and_retire() {
    use crate::subagent::State;
    let t = Tools::new(InMemory::new("agent-1").at(1_000), Grants::default());
    let run = json!({"goal": "Sum the column.", "deadline": "10s"});
    let ran = root(&t, "subagent.run", run).await.unwrap();
    assert_eq!(ran, json!({"id": "s1"}));
    let status = root(&t, "subagent.status", json!({"id": "s1"}))
        .await
        .unwrap();
    assert_eq!(
        (&status["state"], &status["parent"], &status["deadline_ms"]),
        (&json!("running"), &json!("conversation:c"), &json!(11_000))
    );
    // Listed for its parent alone, and in `status`.
    let mine = root(&t, "subagent.list", json!({})).await.unwrap();
    assert_eq!(mine["subagents"][0]["id"], "s1");
    let other = call(&t, &Caller::root("d"), "subagent.list", json!({})).await;
    assert_eq!(other.unwrap(), json!({"subagents": []}));
    let report = root(&t, "status", json!({})).await.unwrap();
    assert_eq!(report["subagents"][0]["state"], "running");
    // Awaited while it runs: the timeout passes, in virtual time, and its status answers.
    let waited = root(&t, "subagent.await", json!({"id": "s1", "timeout": "2s"})).await;
    assert_eq!(waited.unwrap()["state"], "running");
    assert_eq!(crate::wait::Clock::now_ms(t.services()), 3_000);
    // Settled: awaited at once, by either tool.
    let said = t.services().settle("s1", State::Finished, Some("42"));
    assert_eq!(said, ["Sum the column."]);
    let waited = root(&t, "subagent.await", json!({"id": "s1"}))
        .await
        .unwrap();
    assert_eq!(
        (&waited["state"], &waited["answer"]),
        (&json!("finished"), &json!("42"))
    );
    let met = root(&t, "await", json!({"until": {"subagent": "s1"}}))
        .await
        .unwrap();
    assert_eq!(met["subagent"]["answer"], "42");
    // Sent to once settled: it runs again, its deadline afresh.
    let sent = json!({"id": "s1", "text": "Now the row."});
    let again = root(&t, "subagent.send", sent).await.unwrap();
    assert_eq!(
        (&again["state"], &again["deadline_ms"]),
        (&json!("running"), &json!(13_000))
    );
    assert_eq!(
        code(root(&t, "subagent.retire", json!({"id": "s1"})).await),
        "running"
    );
    assert_eq!(
        root(&t, "subagent.kill", json!({"id": "s1"}))
            .await
            .unwrap()["state"],
        "killed"
    );
    let retired = root(&t, "subagent.retire", json!({"id": "s1"}))
        .await
        .unwrap();
    assert_eq!(retired["state"], "retired");
    assert_eq!(
        root(&t, "subagent.list", json!({})).await.unwrap(),
        json!({"subagents": []})
    );
    let gone = root(&t, "subagent.send", json!({"id": "s1", "text": "?"})).await;
    assert_eq!(code(gone), "unknown_subagent");

    // A subagent's conversation is not reached with message.send.
    let into = json!({"conversation": "subagent:s1", "text": "hi"});
    let refused = root(&t, "message.send", into).await.unwrap_err();
    assert_eq!(
        (refused.code(), refused.to_value()["rule"].clone()),
        ("invalid_arguments", json!("subagent"))
    );
    // A subagent runs none, and its tools are checked against the scope's grants.
    let sub = Caller::subagent("s2");
    let nested = call(&t, &sub, "subagent.run", json!({"goal": "g"})).await;
    assert_eq!(code(nested), "not_granted");
    let no_such = json!({"goal": "g", "tools": ["subagent.run"]});
    let refused = root(&t, "subagent.run", no_such).await.unwrap_err();
    assert_eq!(refused.to_value()["pointer"], "/tools");
}

#[tokio::test]
async fn subagent_bounds_hold_at_the_bound_and_refuse_one_past() {
    use crate::subagent::RUNNING_MAX;
    let t = Tools::new(
        InMemory::new("agent-1").with_max_value_bytes(64),
        Grants::default(),
    );
    let goal = |n: usize| json!({"goal": "g".repeat(n)});
    let past = root(&t, "subagent.run", goal(65)).await.unwrap_err();
    assert_eq!(
        (past.code(), past.to_value()["max"].clone()),
        ("too_large", json!(64))
    );
    for _ in 0..RUNNING_MAX {
        root(&t, "subagent.run", goal(64)).await.unwrap();
    }
    let one_more = root(&t, "subagent.run", goal(1)).await.unwrap_err();
    assert_eq!(one_more.to_value()["max"], json!(RUNNING_MAX));
    assert_eq!(one_more.code(), "too_large");
    // One settled: room for one more.
    t.services()
        .settle("s1", crate::subagent::State::Failed, None);
    root(&t, "subagent.run", goal(1)).await.unwrap();
    let text = |n: usize| json!({"id": "s2", "text": "t".repeat(n)});
    assert!(root(&t, "subagent.send", text(64)).await.is_ok());
    assert_eq!(code(root(&t, "subagent.send", text(65)).await), "too_large");
    // Durations: 1 ms to 1 h.
    let hour = json!({"id": "s2", "timeout": crate::DURATION_MAX_MS});
    assert!(root(&t, "subagent.await", hour).await.is_ok());
    let past = json!({"id": "s2", "timeout": crate::DURATION_MAX_MS + 1});
    assert_eq!(
        code(root(&t, "subagent.await", past).await),
        "invalid_arguments"
    );
    let deadline = |d: &str| json!({"goal": "g", "deadline": d});
    t.services()
        .settle("s2", crate::subagent::State::Failed, None);
    assert!(root(&t, "subagent.run", deadline("1h")).await.is_ok());
    t.services()
        .settle("s3", crate::subagent::State::Failed, None);
    let past = root(&t, "subagent.run", deadline("1h 1ms"))
        .await
        .unwrap_err();
    assert_eq!(past.to_value()["pointer"], "/deadline");
}

/// Polls `future` once, waking nothing: whether it is done already.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    let waker = std::task::Waker::noop();
    future.poll(&mut std::task::Context::from_waker(waker))
}

#[tokio::test]
async fn a_question_is_answered_refused_or_withdrawn_in_virtual_time() {
    use crate::human::{Humans, Origin};
    let t = tools();
    let humans = t.services();
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    });
    let args = json!({"question": "Name?", "schema": schema, "timeout": "1m"});

    // Answered, after a refusal that leaves it open.
    let mut asking = std::pin::pin!(root(&t, "ask_human", args.clone()));
    assert!(poll_once(asking.as_mut()).is_pending());
    let open = humans.open().await.unwrap();
    assert_eq!(open.len(), 1);
    let question = &open[0];
    assert_eq!(question.origin, Origin::ask_human("conversation:c"));
    assert_eq!(
        (question.text.as_str(), &question.schema),
        ("Name?", &schema)
    );
    let refused = humans.answer(question.id, json!({"name": 1})).await;
    assert!(
        matches!(&refused, Err(Error::BadAnswer { pointer, rule, .. }) if pointer == "/name" && rule == "type"),
        "{refused:?}"
    );
    assert!(poll_once(asking.as_mut()).is_pending(), "still asked");
    humans
        .answer(question.id, json!({"name": "Ada"}))
        .await
        .unwrap();
    let id = question.id;
    assert_eq!(
        asking.await,
        Ok(json!({"id": id, "answer": {"name": "Ada"}}))
    );
    assert_eq!(humans.open().await, Ok(vec![]));

    // Unanswered: the timeout passes in virtual time, and the question is withdrawn.
    let mut asking = std::pin::pin!(root(&t, "ask_human", args.clone()));
    assert!(poll_once(asking.as_mut()).is_pending());
    humans.advance(Duration::from_secs(59));
    assert!(poll_once(asking.as_mut()).is_pending(), "59 s: still asked");
    humans.advance(Duration::from_secs(1));
    assert_eq!(asking.await, Ok(json!({"id": id + 1, "cancelled": true})));
    assert_eq!(humans.open().await, Ok(vec![]));
    assert_eq!(
        code(
            humans
                .answer(id + 1, json!({"name": "Ada"}))
                .await
                .map(|()| json!(null))
        ),
        "not_found"
    );

    // 300 s unless told.
    let untimed = json!({"question": "Name?", "schema": schema});
    let mut asking = std::pin::pin!(root(&t, "ask_human", untimed.clone()));
    assert!(poll_once(asking.as_mut()).is_pending());
    humans.advance(Duration::from_secs(299));
    assert!(
        poll_once(asking.as_mut()).is_pending(),
        "299 s: still asked"
    );
    humans.advance(Duration::from_secs(1));
    assert_eq!(asking.await.unwrap()["cancelled"], true);

    // Shutdown withdraws it.
    let mut asking = std::pin::pin!(root(&t, "ask_human", untimed));
    assert!(poll_once(asking.as_mut()).is_pending());
    humans.shut_down();
    assert_eq!(asking.await.unwrap()["cancelled"], true);
    assert_eq!(humans.open().await, Ok(vec![]));
}

#[tokio::test]
async fn a_question_s_bounds_hold_at_the_bound_and_refuse_one_past() {
    use crate::human::{QUESTION_MAX, SCHEMA_MAX};
    let t = tools();
    // Asked (and waiting) at the bound; refused one past it.
    let asked = |args: Value| {
        let t = &t;
        async move {
            let mut asking = std::pin::pin!(root(t, "ask_human", args));
            match poll_once(asking.as_mut()) {
                std::task::Poll::Pending => "asked",
                std::task::Poll::Ready(got) => code(got),
            }
        }
    };
    let question = |n: usize| json!({"question": "q".repeat(n), "schema": {}});
    assert_eq!(asked(question(QUESTION_MAX)).await, "asked");
    assert_eq!(asked(question(QUESTION_MAX + 1)).await, "too_large");
    // {"description":"…"} is 18 bytes around the text.
    let schema = |n: usize| json!({"question": "?", "schema": {"description": "d".repeat(n - 18)}});
    assert_eq!(asked(schema(SCHEMA_MAX)).await, "asked");
    assert_eq!(asked(schema(SCHEMA_MAX + 1)).await, "too_large");
    let timeout = |ms: u64| json!({"question": "?", "schema": {}, "timeout": ms});
    assert_eq!(asked(timeout(crate::DURATION_MAX_MS)).await, "asked");
    assert_eq!(
        asked(timeout(crate::DURATION_MAX_MS + 1)).await,
        "invalid_arguments"
    );
    assert_eq!(
        asked(json!({"question": "?", "schema": {"type": "nope"}})).await,
        "invalid_arguments"
    );
    assert_eq!(asked(json!({"question": "?"})).await, "invalid_arguments");
    // Every question asked at the bound was withdrawn when its asker went.
    assert_eq!(crate::human::Humans::open(t.services()).await, Ok(vec![]));
}

#[tokio::test]
async fn instruction_and_skills_through_the_tools() {
    let t = Tools::new(seeded(InMemory::new("agent-1").at(7)), Grants::default());
    let sub = Caller::subagent("s1");
    // Nothing followed yet.
    let read = call(&t, &sub, "instruction.read", json!({})).await;
    assert_eq!(
        read,
        Ok(
            json!({"server": null, "uri": null, "text": null, "read_at_ms": null, "subscribed": false})
        )
    );
    // Only root switches; a template, no server at all, and an unknown one are refused.
    let switch = json!({"uri": "docs://instruction", "server": "docs"});
    let refused = call(&t, &sub, "instruction.subscribe", switch.clone()).await;
    assert_eq!(code(refused), "not_granted");
    let template = json!({"uri": "docs://{name}", "server": "docs"});
    let got = root(&t, "instruction.subscribe", template).await;
    assert!(
        matches!(&got, Err(Error::InvalidArguments { pointer, rule, .. }) if pointer == "/uri" && rule == "concrete"),
        "{got:?}"
    );
    let unnamed = root(
        &t,
        "instruction.subscribe",
        json!({"uri": "docs://instruction"}),
    )
    .await;
    assert_eq!(code(unnamed), "not_found");
    let unknown = json!({"uri": "docs://instruction", "server": "nope"});
    assert_eq!(
        code(root(&t, "instruction.subscribe", unknown).await),
        "not_found"
    );
    let followed = root(&t, "instruction.subscribe", switch).await.unwrap();
    let want = json!({
        "server": "docs",
        "uri": "docs://instruction",
        "text": "Be brief.",
        "read_at_ms": 7,
        "subscribed": true,
    });
    assert_eq!(followed, want);
    assert_eq!(
        call(&t, &sub, "instruction.read", json!({})).await,
        Ok(want)
    );

    // Skills: listed, loaded per unit, unloaded.
    let listed = call(&t, &sub, "skills.list", json!({})).await.unwrap();
    assert_eq!(
        listed,
        json!({
            "skills": [{
                "name": "docs/greet",
                "server": "docs",
                "prompt": "greet",
                "description": "Greets",
                "arguments": [{"name": "who", "description": "whom to greet", "required": true}],
            }],
            "loaded": [],
        })
    );
    let load = json!({"name": "docs/greet", "arguments": {"who": "Ada"}});
    let loaded = call(&t, &sub, "skills.load", load.clone()).await;
    assert_eq!(
        loaded,
        Ok(json!({
            "name": "docs/greet",
            "server": "docs",
            "messages": 1,
            "bytes": 17,
            "loaded": ["docs/greet"],
        }))
    );
    let listed = root(&t, "skills.list", json!({})).await.unwrap();
    assert_eq!(listed["loaded"], json!([]), "another unit's set");
    let bare = root(&t, "skills.load", json!({"name": "docs/greet"})).await;
    assert_eq!(code(bare), "invalid_arguments");
    let unknown = root(&t, "skills.load", json!({"name": "greet"})).await;
    assert_eq!(code(unknown), "not_found");
    let unload = json!({"name": "docs/greet"});
    let unloaded = call(&t, &sub, "skills.unload", unload.clone()).await;
    assert_eq!(unloaded, Ok(json!({"unloaded": true, "loaded": []})));
    let again = call(&t, &sub, "skills.unload", unload).await;
    assert_eq!(again, Ok(json!({"unloaded": false, "loaded": []})));

    // The set's bound on skills, through the tools: one past is refused.
    for i in 0..LOADED_MAX {
        let skill = Skill::new("docs", &format!("p{i}"), None, vec![]);
        t.services()
            .skill(skill, vec![Said::new(Role::Assistant, "ok")]);
        let name = format!("docs/p{i}");
        root(&t, "skills.load", json!({"name": name}))
            .await
            .unwrap();
    }
    let past = root(&t, "skills.load", load).await;
    assert_eq!(code(past), "too_large");
}

#[test]
fn errors_have_stable_codes() {
    let err = Error::TooLarge {
        what: "value",
        size: 2,
        max: 1,
    };
    assert_eq!(
        err.to_value(),
        json!({"code": "too_large", "message": "value of 2 is past 1", "max": 1})
    );
    assert_eq!(Error::ShuttingDown.code(), "shutting_down");
    assert_eq!(
        Error::Store {
            detail: "disk".into()
        }
        .code(),
        "store"
    );
}

#[tokio::test]
async fn workflows_through_the_tools() {
    let t = tools();
    let body = json!({"steps": [
        {"id": "fetch", "type": "mcp.tool", "server": "s", "tool": "add",
         "arguments": {"a": "{{input.a}}"}, "retries": {"max": 1}},
        {"id": "note", "type": "tool", "name": "memory.set",
         "arguments": {"key": "sum", "value": "{{steps.fetch.output.structuredContent}}"}},
    ]});
    let create = json!({"name": "sum", "definition": body});
    assert_eq!(
        root(&t, "workflow.create", create.clone()).await,
        Ok(json!({"workflow": "sum", "version": 1, "steps": 2}))
    );
    assert_eq!(code(root(&t, "workflow.create", create).await), "exists");
    // A bad template: refused at definition, naming the step and the path.
    let bad = json!({"name": "bad", "definition": {"steps": [
        {"id": "a", "type": "agent", "prompt": "{{steps.a.output}}"},
    ]}});
    let err = root(&t, "workflow.create", bad).await.unwrap_err();
    let answer = err.to_value();
    assert_eq!(answer["code"], "invalid_arguments");
    assert_eq!(answer["pointer"], "/definition/steps/0/prompt");
    assert_eq!(answer["rule"], "template");
    assert!(
        answer["message"].as_str().unwrap().contains("step \"a\""),
        "{answer}"
    );
    let bad_name = json!({"name": "a b", "definition": {"steps": []}});
    let err = root(&t, "workflow.create", bad_name).await.unwrap_err();
    assert_eq!(err.to_value()["pointer"], "/name");

    // A run, its attempts told by the test: a failure, then the answer.
    let run = root(
        &t,
        "workflow.run",
        json!({"workflow": "sum", "input": {"a": 2}}),
    )
    .await
    .unwrap();
    assert_eq!(run["status"], "running");
    assert_eq!(run["step"], "fetch");
    assert_eq!(run["by"], "conversation:c");
    let id = run["run"].as_str().unwrap().to_owned();
    let runs = t.services().runs();
    let (_, first) = runs.executions().pop().unwrap();
    assert_eq!(first.attempt, 1);
    let failure = crate::workflow::run::Failure::retryable("server", "down");
    runs.complete(&id, 0, 1, Err(failure), 0);
    t.services().advance(Duration::from_secs(1));
    let (_, second) = runs.executions().pop().unwrap();
    assert_eq!(second.attempt, 2);
    assert_eq!(second.call.idempotency_key(), first.call.idempotency_key());
    let added = json!({"content": [], "structuredContent": {"result": 3}});
    runs.complete(&id, 0, 2, Ok(added), 1000);
    let (_, note) = runs.executions().pop().unwrap();
    assert_eq!(
        note.call,
        crate::workflow::run::Call::Tool {
            name: "memory.set".into(),
            arguments: json!({"key": "sum", "value": {"result": 3}}),
        }
    );
    runs.complete(&id, 1, 1, Ok(json!({"version": 1})), 1001);
    let waited = root(&t, "workflow.wait", json!({"run": id, "timeout": "1s"}))
        .await
        .unwrap();
    assert_eq!(waited["status"], "completed");
    assert_eq!(waited["output"], json!({"version": 1}));
    assert_eq!(waited["steps"][0]["attempt"], 2);
    // `await` holds once the run ended.
    let awaited = root(&t, "await", json!({"until": {"run": id}}))
        .await
        .unwrap();
    assert_eq!(awaited["met"], true);
    assert_eq!(awaited["run"]["status"], "completed");

    // workflow.wait gives the run as it is once its timeout passed.
    let wait_body =
        json!({"steps": [{"id": "w", "type": "wait", "on": {"signal": {"name": "go"}}}]});
    root(
        &t,
        "workflow.create",
        json!({"name": "gate", "definition": wait_body}),
    )
    .await
    .unwrap();
    let gate = root(&t, "workflow.run", json!({"workflow": "gate"}))
        .await
        .unwrap();
    let gate_id = gate["run"].as_str().unwrap();
    let waited = root(&t, "workflow.wait", json!({"run": gate_id, "timeout": 500}))
        .await
        .unwrap();
    assert_eq!(waited["status"], "running");
    let until = json!({"until": {"run": gate_id}, "timeout": 500});
    assert_eq!(root(&t, "await", until).await, Ok(json!({"met": false})));
    // `status` names the runs under way.
    let status = root(&t, "status", json!({})).await.unwrap();
    let under_way: Vec<&Value> = status["runs"].as_array().unwrap().iter().collect();
    assert_eq!(under_way.len(), 1, "{status}");
    assert_eq!(under_way[0]["run"], gate_id);
    assert_eq!(under_way[0]["step"], "w");
    // A subagent reads runs and signals them; it starts none.
    let sub = Caller::subagent("s1");
    let signal = json!({"run": gate_id, "signal": "go", "payload": [1]});
    let signalled = call(&t, &sub, "workflow.signal", signal).await.unwrap();
    assert_eq!(signalled["status"], "completed");
    assert_eq!(
        code(call(&t, &sub, "workflow.run", json!({"workflow": "gate"})).await),
        "not_granted"
    );
    let listed = call(&t, &sub, "workflow.list", json!({"limit": 1}))
        .await
        .unwrap();
    assert_eq!(listed["runs"][0]["run"], id.as_str());
    assert_eq!(listed["next"], id.as_str());
    let listed = root(
        &t,
        "workflow.list",
        json!({"status": "completed", "after": id}),
    )
    .await
    .unwrap();
    assert_eq!(listed["runs"][0]["run"], gate_id);
    assert_eq!(listed["next"], Value::Null);
    let bad = root(&t, "workflow.list", json!({"status": "done"})).await;
    assert_eq!(code(bad), "invalid_arguments");
    assert_eq!(
        code(root(&t, "workflow.status", json!({"run": "nope"})).await),
        "unknown_run"
    );
    assert_eq!(
        code(root(&t, "workflow.cancel", json!({"run": gate_id})).await),
        "already_finished"
    );
    assert_eq!(
        root(&t, "workflow.delete", json!({"name": "gate"})).await,
        Ok(json!({"deleted": true}))
    );
    // A configured workflow is changed in the configuration only.
    let configured = crate::workflow::Definition::parse(
        "conf",
        &json!({"steps": [
            {"id": "w", "type": "wait", "on": {"duration": 1}}
        ]}),
    )
    .unwrap();
    t.services().runs().configure(configured);
    let err = root(&t, "workflow.delete", json!({"name": "conf"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_value()["rule"], "configured");
    let update = json!({"name": "conf", "definition": {"steps": [
        {"id": "w", "type": "wait", "on": {"duration": 2}}
    ]}});
    let err = root(&t, "workflow.update", update.clone())
        .await
        .unwrap_err();
    assert_eq!(err.to_value()["rule"], "configured");
    assert_eq!(code(root(&t, "workflow.create", update).await), "exists");
}
