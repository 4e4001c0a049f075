//! Subagents in `agentd run`, as a process against the scripted model and the reference
//! server: one is run through `agentd tool call subagent.run`, reads a resource of its
//! server (its first model request carrying the note of them) and is awaited to its answer;
//! its server's tools change (`mcp.tools_changed`), and its next turn lists them again
//! (`mcp.tools_refreshed`) and offers the new one. Another is killed in the middle of a
//! slow call, which is cancelled on the wire, then retired. A subagent's turns are shown the
//! instruction as their system prompt and call `think` over their own context; its tokens are
//! the instance's, and once they spent the budget its next turn does not start.

mod common;

use std::time::Duration;

use agentd_tests::model::{Call, Received, Reply, ScriptedModel};
use common::{Daemon, TempFile, agentd, poll, until};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

/// `agentd tool call NAME ARGUMENTS`: its exit status, its result, its stderr.
fn tool(file: &TempFile, name: &str, arguments: Value) -> (i32, Value, String) {
    let out = agentd(file, &["tool", "call", name, &arguments.to_string()]);
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// The result of a call that succeeded.
fn call(file: &TempFile, name: &str, arguments: Value) -> Value {
    let (code, result, stderr) = tool(file, name, arguments);
    assert_eq!(code, 0, "{name}: {stderr}");
    result
}

/// The names of the functions a model request offers.
fn offered(request: &Received) -> Vec<String> {
    let tools = request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let name = |t: &Value| {
        t["function"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    tools.iter().map(name).collect()
}

/// Subagent `id`'s status once it is `state`, asked at most for 20 s.
fn status_until(file: &TempFile, id: &str, state: &str) -> Value {
    let settled = || {
        let status = call(file, "subagent.status", json!({"id": id}));
        match status["state"] == state {
            true => Ok(status),
            false => Err(format!("not {state}: {status}")),
        }
    };
    poll(Duration::from_secs(20), settled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_runs_reads_lists_again_and_is_killed_and_retired() {
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new(
            "call_1",
            "resource_read",
            r#"{"uri": "demo://greeting"}"#,
        )])
        .usage(40, 9),
        Reply::text("The greeting is hello.").usage(60, 5),
        Reply::text("echo is offered now."),
        Reply::tool_calls([Call::new(
            "call_2",
            "s__slow",
            r#"{"steps": 1000, "delay_ms": 100}"#,
        )]),
    ])
    .await;
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&common::config(
        &format!(
            "instance = \"kids\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
             [lifecycle]\ndrain_timeout = \"5s\"\n\
             [model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n",
            dir.path().display(),
            model.base_url()
        ),
        &[("s", server.url())],
    ));
    let mut agentd = Daemon::run(&file);
    // Once the supervisor has listed the server, the agent holds it.
    let listed = || {
        let out = common::agentd(&file, &["tools", "--running"]);
        String::from_utf8_lossy(&out.stdout).contains("add")
    };
    until("the server listed", listed).await;

    // Run, and awaited to its answer.
    let run = json!({"goal": "Read the greeting.", "servers": ["s"], "tools": ["memory.*"]});
    let ran = tokio::task::spawn_blocking({
        let file = TempFile::new(&std::fs::read_to_string(file.path()).unwrap());
        move || {
            let ran = call(&file, "subagent.run", run);
            let waited = json!({"id": ran["id"], "timeout": "30s"});
            (ran, call(&file, "subagent.await", waited))
        }
    });
    let (ran, status) = ran.await.unwrap();
    assert_eq!(ran, json!({"id": "s1"}));
    assert_eq!(
        (&status["state"], &status["answer"], &status["parent"]),
        (
            &json!("finished"),
            &json!("The greeting is hello."),
            &json!("operator")
        )
    );
    assert_eq!(
        (&status["turns"], &status["tokens"]),
        (&json!(1), &json!(114))
    );

    // Its first request: the system prompt, the note of its server's resources, its goal;
    // offered resource.read, its server's tools and the own tools its run named.
    let asked = model.requests();
    let messages = asked[0].body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "system");
    let note = messages[1]["content"].as_str().unwrap();
    assert!(
        note.contains("- demo://greeting (s): greeting, text/plain"),
        "{note}"
    );
    assert!(note.contains("- demo://counter (s)"), "{note}");
    assert_eq!(
        (&messages[2]["role"], &messages[2]["content"]),
        (&json!("user"), &json!("Read the greeting."))
    );
    let tools = offered(&asked[0]);
    for name in ["resource_read", "s__add", "memory_get"] {
        assert!(tools.contains(&name.to_owned()), "{name}: {tools:?}");
    }
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("subagent_") || t == "plan_get")
    );
    // resource.read answered with the resource, read over the subagent's own connection.
    let messages = asked[1].body["messages"].as_array().unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    let read: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        (&read["server"], &read["contents"][0]["text"]),
        (&json!("s"), &json!("hello"))
    );
    let log = server.log();
    let read = log
        .iter()
        .find(|l| l.method.as_deref() == Some("resources/read"))
        .unwrap();
    let capabilities = &read.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(capabilities["elicitation"].is_object(), "{}", read.body);
    // Counted as agentd's own tools are.
    let metrics = common::get(&agentd.listener(), "/metrics");
    assert!(
        metrics.contains(r#"agent_tool_calls_total{tool="resource.read",outcome="ok"} 1"#),
        "{metrics}"
    );

    // Its server's tools change: its next turn lists them again and offers the new one.
    server.add_tool("echo").await;
    agentd.wait_for("mcp.tools_changed", Some("s"));
    let again = call(
        &file,
        "subagent.send",
        json!({"id": "s1", "text": "And now?"}),
    );
    assert_eq!(again["state"], "running");
    let refreshed = agentd.wait_for("mcp.tools_refreshed", None);
    assert_eq!(
        (&refreshed["level"], &refreshed["tools"]),
        (&json!("info"), &json!(6))
    );
    let status = status_until(&file, "s1", "finished");
    assert_eq!(status["answer"], "echo is offered now.");
    let asked = model.requests();
    assert!(offered(&asked[2]).contains(&"s__echo".to_owned()));
    assert!(!offered(&asked[1]).contains(&"s__echo".to_owned()));

    // Another, killed in the middle of a slow call: the call is cancelled on the wire.
    let ran = call(&file, "subagent.run", json!({"goal": "Count slowly."}));
    assert_eq!(ran["id"], "s2");
    let slow = || {
        let log = server.log();
        log.iter().any(|l| l.body["params"]["name"] == "slow")
    };
    until("the slow call", slow).await;
    let killed = call(&file, "subagent.kill", json!({"id": "s2"}));
    assert_eq!(killed["state"], "killed");
    until("the slow call abandoned", || !server.abandoned().is_empty()).await;
    // Listed, in `status` too, until it is retired.
    let listed = call(&file, "subagent.list", json!({}));
    let ids: Vec<&Value> = listed["subagents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&json!("s1"), &json!("s2")]);
    let report = call(&file, "status", json!({}));
    assert_eq!(report["subagents"][1]["state"], "killed");
    let retired = call(&file, "subagent.retire", json!({"id": "s2"}));
    assert_eq!(retired["state"], "retired");
    let listed = call(&file, "subagent.list", json!({}));
    assert_eq!(listed["subagents"].as_array().unwrap().len(), 1);
    let (code, _, stderr) = tool(&file, "subagent.send", json!({"id": "s2", "text": "?"}));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: unknown_subagent: "), "{stderr}");
    // A subagent's conversation is not reached with message.send.
    let into = json!({"conversation": "subagent:s1", "text": "hi"});
    let (code, _, stderr) = tool(&file, "message.send", into);
    assert_eq!(code, 6, "{stderr}");
    assert!(agentd.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_is_shown_the_instruction_thinks_and_spends_the_budget() {
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new("call_1", "think", r#"{"prompt": "Plan it"}"#)]).usage(30, 10),
        Reply::text("Step one, then step two.").usage(20, 5),
        Reply::text("Planned.").usage(30, 10),
    ])
    .await;
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&common::config(
        &format!(
            "instance = \"kids\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
             [model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n[limits]\nbudget_tokens = 100\n\
             [instruction]\nserver = \"s\"\nuri = \"demo://counter\"\nrefresh = \"1h\"\n",
            dir.path().display(),
            model.base_url()
        ),
        &[("s", server.url())],
    ));
    let mut agentd = Daemon::run(&file);
    let read = || {
        let (code, read, _) = tool(&file, "instruction.read", json!({}));
        code == 0 && read["text"] == "0"
    };
    until("the instruction read", read).await;

    let ran = tokio::task::spawn_blocking({
        let file = TempFile::new(&std::fs::read_to_string(file.path()).unwrap());
        move || {
            let ran = call(&file, "subagent.run", json!({"goal": "Plan."}));
            let waited = json!({"id": ran["id"], "timeout": "30s"});
            call(&file, "subagent.await", waited)
        }
    });
    let status = ran.await.unwrap();
    assert_eq!(
        (&status["state"], &status["answer"], &status["tokens"]),
        (&json!("finished"), &json!("Planned."), &json!(105))
    );
    // Every request of its turn carries the instruction as the system prompt; think asks
    // the model over the round's messages and the prompt, offering no tools.
    let asked = model.requests();
    assert_eq!(asked.len(), 3);
    for request in &asked {
        let system = &request.body["messages"][0];
        assert_eq!(
            (&system["role"], &system["content"]),
            (&json!("system"), &json!("0"))
        );
    }
    assert!(offered(&asked[0]).contains(&"think".to_owned()));
    assert!(offered(&asked[1]).is_empty());
    let messages = asked[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "Plan it");
    let messages = asked[2].body["messages"].as_array().unwrap();
    let thought = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        thought["content"],
        json!({"thought": "Step one, then step two."}).to_string()
    );

    // Its tokens spent the budget: its next turn does not start, it fails saying so.
    let again = call(
        &file,
        "subagent.send",
        json!({"id": "s1", "text": "Again."}),
    );
    assert_eq!(again["state"], "running");
    let status = status_until(&file, "s1", "failed");
    let error = status["error"].as_str().unwrap();
    assert!(
        error.starts_with("the token budget is spent (105 of limits.budget_tokens = 100 used)"),
        "{error}"
    );
    let spent = agentd.wait_for("budget.spent", None);
    assert_eq!(
        (&spent["used"], &spent["limit"]),
        (&json!(105), &json!(100))
    );
    let report = call(&file, "status", json!({}));
    assert_eq!(
        report["budget"],
        json!({"tokens_used": 105, "tokens_limit": 100, "spent": true})
    );
    assert_eq!(
        report["conversations"],
        json!([{"id": "subagent:s1", "inbox": 2, "tokens": 105}])
    );
    assert_eq!(model.requests().len(), 3, "no turn started");
    assert!(agentd.terminate().success());
}
