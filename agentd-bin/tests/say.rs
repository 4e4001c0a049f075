//! `agentd say` on the running daemon: answered by the configured model (the scripted
//! OpenAI-compatible server) after a tool call made over a worker of a held server; without
//! `[model]`, the agent is not running (exit 4, nothing sent); without a daemon, exit 3.

mod common;

use std::process::Output;
use std::time::Duration;

use agentd_tests::model::{Call, Reply, ScriptedModel};
use common::{Daemon, TempFile, agentd, agentd_async, poll, polled};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

/// `agentd ARGS` again while the daemon is not up yet (exit 3), at most 15 s.
fn once_up(file: &TempFile, args: &[&str]) -> Output {
    let up = || {
        let out = agentd(file, args);
        match out.status.code() {
            Some(3) => Err(format!("the daemon not up: {out:?}")),
            _ => Ok(out),
        }
    };
    poll(Duration::from_secs(15), up)
}

#[test]
fn say_without_an_agent_or_a_daemon_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&format!(
        "instance = \"quiet\"\n[store]\npath = \"{}\"\n",
        dir.path().display()
    ));
    let said = agentd(&file, &["say", "hello"]);
    assert_eq!(said.status.code(), Some(3), "{said:?}");

    let mut daemon = Daemon::run(&file);
    let said = once_up(&file, &["say", "--conversation", "c1", "hello"]);
    assert_eq!(said.status.code(), Some(4), "{said:?}");
    let stderr = String::from_utf8_lossy(&said.stderr);
    assert!(
        stderr.starts_with("agentd: no_agent: the agent is not running"),
        "{stderr}"
    );
    assert!(said.stdout.is_empty());
    // Nothing was sent.
    let status = agentd(&file, &["tool", "call", "status"]);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["conversations"], json!([]));
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn say_is_answered_by_the_model_after_a_call_over_a_worker() {
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new("call_1", "s__add", r#"{"a": 2, "b": 3}"#)]).usage(30, 8),
        Reply::text("2 + 3 = 5").chunks(3).usage(50, 6),
    ])
    .await;
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&common::config(
        &format!(
            "instance = \"talk\"\n[store]\npath = \"{}\"\n[model]\nbase_url = \"{}\"\n\
             model = \"scripted\"\n",
            dir.path().display(),
            model.base_url()
        ),
        &[("s", server.url())],
    ));
    let mut daemon = Daemon::run(&file);
    // Once the supervisor has listed the server, its tools are offered.
    let listed = || async {
        let out = agentd_async(&file, &["tools", "--running"]).await;
        let held = String::from_utf8_lossy(&out.stdout).into_owned();
        match held.contains("add") {
            true => Ok(()),
            false => Err(format!("the server not listed: {held}")),
        }
    };
    polled(Duration::from_secs(15), listed).await;
    let said = agentd_async(&file, &["say", "what is 2 + 3?"]).await;
    assert_eq!(said.status.code(), Some(0), "{said:?}");
    assert_eq!(String::from_utf8_lossy(&said.stdout), "2 + 3 = 5\n");

    // The model was offered the server's tool and agentd's own, and got the result back.
    let asked = model.requests();
    assert_eq!(asked.len(), 2);
    let tools: Vec<&str> = asked[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"s__add") && tools.contains(&"memory_get"),
        "{tools:?}"
    );
    let messages = asked[1].body["messages"].as_array().unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        (&result["tool_call_id"], &result["content"]),
        (&json!("call_1"), &json!("5"))
    );
    // The call went over a worker, with the turn's metadata.
    let log = server.log();
    let add = log
        .iter()
        .find(|l| l.body["params"]["name"] == "add")
        .unwrap();
    let meta = &add.body["params"]["_meta"];
    assert_eq!(meta["agent/instance"], "talk");
    assert_eq!(
        meta["agent/ctx"],
        json!({"conversation": "root", "turn": 1})
    );
    assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object());
    assert_eq!(daemon.terminate().code(), Some(0));
}
