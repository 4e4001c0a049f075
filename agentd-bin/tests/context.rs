//! What `agentd run` shows its model, as a process against the reference server and the
//! scripted OpenAI-compatible model: the instruction is the system prompt of every request
//! of a turn, the text read again after the server says it changed at the next turn; a skill
//! loaded in the conversation is in the next request, and gone after it is unloaded. A spent
//! token budget starts no turn: `agentd say` exits 5 and the daemon logs `budget.spent`.

mod common;

use std::process::Output;
use std::time::Duration;

use agentd_tests::model::{Call, Reply, ScriptedModel};
use common::{Daemon, TempFile, agentd_async, polled, until};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

const COUNTER: &str = "demo://counter";

/// `agentd say TEXT`, once the daemon and its agent are up (exit 3, the daemon not yet
/// running, and 4, its agent not started yet, asked again, at most 15 s).
async fn say(file: &TempFile, text: &str) -> Output {
    let said = || async {
        let out = agentd_async(file, &["say", text]).await;
        match out.status.code() {
            Some(3 | 4) => Err(format!("the daemon or its agent not up: {out:?}")),
            _ => Ok(out),
        }
    };
    polled(Duration::from_secs(15), said).await
}

/// The answer of `agentd tool call NAME {}`.
async fn tool(file: &TempFile, name: &str) -> Value {
    let out = agentd_async(file, &["tool", "call", name, "{}"]).await;
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A configuration of the server `docs`, the model `model` and `tail`, its store in `dir`.
fn config(
    dir: &std::path::Path,
    docs: &ReferenceServer,
    model: &ScriptedModel,
    tail: &str,
) -> TempFile {
    TempFile::new(&common::config(
        &format!(
            "instance = \"ctx\"\n[store]\npath = \"{}\"\n[model]\nbase_url = \"{}\"\n\
             model = \"scripted\"\n{tail}",
            dir.display(),
            model.base_url()
        ),
        &[("docs", docs.url())],
    ))
}

/// The messages of each request the model received: `(role, content)`.
fn shown(model: &ScriptedModel) -> Vec<Vec<(String, String)>> {
    let requests = model.requests();
    let shown = requests.iter().map(|r| {
        let messages = r.body["messages"].as_array().unwrap().iter();
        let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
        messages
            .map(|m| (m["role"].as_str().unwrap().to_owned(), text(m)))
            .collect()
    });
    shown.collect()
}

fn message(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instruction_and_the_skills_loaded_are_the_model_s_context() {
    let model = ScriptedModel::start([
        Reply::text("one"),
        Reply::tool_calls([Call::new(
            "load",
            "skills_load",
            r#"{"name": "docs/greet", "arguments": {"name": "Ada"}}"#,
        )]),
        Reply::text("loaded"),
        Reply::tool_calls([Call::new(
            "unload",
            "skills_unload",
            r#"{"name": "docs/greet"}"#,
        )]),
        Reply::text("unloaded"),
    ])
    .await;
    let docs = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let tail = format!(
        "[instruction]\nserver = \"docs\"\nuri = \"{COUNTER}\"\nrefresh = \"1h\"\n\
         [skills]\nsources = [\"docs\"]\n"
    );
    let file = config(dir.path(), &docs, &model, &tail);
    let mut daemon = Daemon::run(&file);
    daemon.wait_for("skills.discovered", Some("docs"));
    until("the instruction is subscribed", || {
        docs.listening(COUNTER) > 0
    })
    .await;
    let read = tool(&file, "instruction.read").await;
    assert_eq!(read["text"], "0", "{read}");

    let out = say(&file, "first").await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\n", "{out:?}");
    // The server says the instruction changed: it is read again, and the next turn's
    // requests carry the new text.
    docs.touch(COUNTER).await;
    let read_again = || async {
        let read = tool(&file, "instruction.read").await;
        match read["text"] == "1" {
            true => Ok(()),
            false => Err(format!("the instruction was not read again: {read}")),
        }
    };
    polled(Duration::from_secs(15), read_again).await;
    let out = say(&file, "load the greeting").await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "loaded\n", "{out:?}");
    let out = say(&file, "unload it").await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "unloaded\n",
        "{out:?}"
    );

    let shown = shown(&model);
    assert_eq!(shown.len(), 5);
    let greeting = message("user", "Say hello to Ada.");
    assert_eq!(
        shown[0][..2],
        [message("system", "0"), message("user", "first")]
    );
    // Every request of the turn carries the instruction as it was at its start.
    for request in &shown[1..] {
        assert_eq!(request[0], message("system", "1"), "{request:?}");
    }
    assert!(!shown[1].contains(&greeting));
    // Loaded in the second turn: in its next request, and in the third turn's first, right
    // after the system prompt; gone once unloaded.
    assert_eq!(shown[2][1], greeting, "{:?}", shown[2]);
    assert_eq!(shown[3][1], greeting, "{:?}", shown[3]);
    assert!(!shown[4].contains(&greeting), "{:?}", shown[4]);
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_refuses_the_next_turn_with_its_own_status() {
    let model = ScriptedModel::start([Reply::text("spent").usage(40, 20)]).await;
    let docs = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &docs, &model, "[limits]\nbudget_tokens = 50\n");
    let mut daemon = Daemon::run(&file);
    let out = say(&file, "hello").await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = say(&file, "again").await;
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("agentd: budget_spent: the token budget is spent (60 of"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let spent = daemon.wait_for("budget.spent", None);
    assert_eq!((&spent["used"], &spent["limit"]), (&json!(60), &json!(50)));
    let status = tool(&file, "status").await;
    assert_eq!(
        status["budget"],
        json!({"tokens_used": 60, "tokens_limit": 50, "spent": true})
    );
    assert_eq!(
        status["conversations"],
        json!([{"id": "root", "inbox": 2, "tokens": 60}])
    );
    assert_eq!(model.requests().len(), 1, "no second turn");
    assert!(daemon.terminate().success());
}
