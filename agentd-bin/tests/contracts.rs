//! Contract tools and the supervisor's tool registry in `agentd run`, as a process: a
//! contract implemented by `[knowledge] server`, called by an operator and by a workflow
//! `tool` step, and a workflow step naming a server's tool (`ref/add`), each call carrying
//! `agent/acting_for` and `agent/labels` as the reference server received them, in both
//! eras, a run fired by a subscribe start, and at 2026-07-28 one fired by an MCP Events
//! occurrence, acting for the instance on its own, and `exec`
//! mapped to a server's tool; a registry name no server or catalogue has fails its run with
//! a typed error; the contract tools nothing implements are not offered and `agentd tool
//! list` says why; a subagent refused a mapped `code.run`, nothing reaching the server; a
//! silent server ending a registry call at its connection timeout, cancelled on the wire; a
//! registry step sent again after a SIGKILL with its key; a contract mapped to the Python
//! SDK server's tool, whose answer is the `_meta` it received, and a workflow step naming
//! it, in each era; a conversation's model calling a contract, for its conversation, and
//! its call of a silent server's contract cut at the turn's deadline, cancelled on the wire.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentd_tests::model::{Call, Reply, ScriptedModel};
use agentd_tests::peers;
use common::{Daemon, TempFile, blocking, until, until_up};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use serde_json::{Value, json};

/// The resource whose change starts the `watched` workflow.
const COUNTER: &str = "demo://counter";

/// Waits 50 ms between two asks, without holding up the in-process servers.
fn pause() {
    blocking(|| std::thread::sleep(Duration::from_millis(50)));
}

/// `agentd ARGS --config F REST`: its exit status, its stdout as JSON, its stderr.
fn agentd(file: &TempFile, args: &[&str], rest: &[&str]) -> (i32, Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command
        .args(args)
        .args(["--config", file.to_str().unwrap()])
        .args(rest);
    let out = blocking(|| command.output()).expect("agentd runs");
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// `agentd tool call NAME ARGUMENTS`, asked again while the server is not connected yet (at
/// most 20 s): its exit status, result and stderr.
fn call(file: &TempFile, name: &str, arguments: Value) -> (i32, Value, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let called = agentd(file, &["tool", "call"], &[name, &arguments.to_string()]);
        if !called.2.contains("not_connected") || Instant::now() > deadline {
            return called;
        }
        pause();
    }
}

/// `agentd workflow status RUN`, once it ended (at most 20 s).
fn ended(file: &TempFile, run: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, status, stderr) = agentd(file, &["workflow", "status"], &[run]);
        if code == 0 && status["ended_ms"].is_i64() {
            return status;
        }
        assert!(Instant::now() < deadline, "not ended: {status} {stderr}");
        pause();
    }
}

/// `agentd workflow run NAME INPUT`: the run's id.
fn start(file: &TempFile, name: &str, input: Value) -> String {
    let (code, run, stderr) = agentd(file, &["workflow", "run"], &[name, &input.to_string()]);
    assert_eq!(code, 0, "{stderr}");
    run["run"].as_str().expect("a run id").to_owned()
}

/// The `_meta` of every `tools/call` the server received, oldest first.
fn calls(server: &ReferenceServer) -> Vec<Value> {
    let log = server.log();
    let called = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"));
    called.map(|l| l.body["params"]["_meta"].clone()).collect()
}

/// Waits until `server` is sent `notifications/cancelled` for the last `tools/call` it
/// received.
async fn last_call_cancelled(server: &ReferenceServer) {
    let log = server.log();
    let mut sent = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"));
    let hushed = sent.next_back().expect("the call was sent").body["id"].clone();
    let told = || {
        server.log().iter().any(|l| {
            l.method.as_deref() == Some("notifications/cancelled")
                && l.body["params"]["requestId"] == hushed
        })
    };
    until("notifications/cancelled", told).await;
}

/// Whether `id` is 32 lowercase hex digits.
fn is_hex_id(id: &Value) -> bool {
    id.as_str().is_some_and(|id| {
        id.len() == 32
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

const LOOKUP: &str = r#"
[knowledge]
server = "ref"
[contracts.map.exec]
server = "ref"
tool = "run"

[[workflows]]
name = "lookup"
labels = { team = "search", flow = "lookup" }
[[workflows.steps]]
id = "sum"
type = "tool"
name = "ref/add"
arguments = { a = "{{input.a}}", b = 2 }
[[workflows.steps]]
id = "find"
type = "tool"
name = "knowledge.search"
arguments = { query = "{{input.q}}" }

[[workflows]]
name = "watched"
labels = { flow = "watch" }
[[workflows.starts]]
id = "counter"
subscribe = { server = "ref", uri = "demo://counter" }
[[workflows.steps]]
id = "sum"
type = "tool"
name = "ref/add"
arguments = { a = 1, b = 1 }

[[workflows]]
name = "ticketed"
labels = { flow = "ticket" }
[[workflows.starts]]
id = "ticket"
event = { stream = "tickets" }
[[workflows.steps]]
id = "sum"
type = "tool"
name = "ref/add"
arguments = { a = 2, b = 2 }

[[workflows]]
name = "typo"
[[workflows.steps]]
id = "t"
type = "tool"
name = "ref/nope"

[[workflows]]
name = "elsewhere"
[[workflows.steps]]
id = "t"
type = "tool"
name = "other/add"
"#;

/// A configuration of server `ref` at `url` (tagged `team = "ops"`, `tier = "gold"`), its
/// store in `dir`, with `rest` after.
fn config(dir: &Path, url: &str, rest: &str) -> TempFile {
    config_timed(dir, url, "10s", rest)
}

/// [`config`] with the server's connection timeout `timeout`.
fn config_timed(dir: &Path, url: &str, timeout: &str, rest: &str) -> TempFile {
    TempFile::new(&format!(
        "instance = \"kb-agent\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\ntimeout = \"{timeout}\"\n\
         tags = {{ team = \"ops\", tier = \"gold\" }}\n{rest}",
        dir.display()
    ))
}

/// The registry's calls against the reference server of `options`; with MCP Events
/// (`options.events`), a run an occurrence started too.
async fn registry(options: Options) {
    let events = options.events;
    let server = ReferenceServer::start(options).await;
    for name in ["knowledge.search", "knowledge.get", "knowledge.list", "run"] {
        server.add_tool(name).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let binding = "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\n\
                   into = \"tickets\"\narguments = { project = \"ops\" }\n";
    let rest = if events {
        format!("{binding}{LOOKUP}")
    } else {
        LOOKUP.to_owned()
    };
    let file = config(dir.path(), &server.url(), &rest);
    let mut daemon = Daemon::run(&file);
    until_up(&file);

    // An operator's call of the contract: the server's tool of its name, for the operator,
    // labelled with the server's tags.
    let (code, found, stderr) = call(&file, "knowledge.search", json!({"query": "ducks"}));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(found["content"][0]["text"], r#"{"query":"ducks"}"#);
    let metas = calls(&server);
    assert_eq!(metas.len(), 1, "{metas:?}");
    let meta = &metas[0];
    assert_eq!(
        meta["agent/acting_for"],
        json!({"principal": "operator", "autonomous": false})
    );
    assert_eq!(meta["agent/labels"], json!({"team": "ops", "tier": "gold"}));
    assert_eq!(meta["agent/instance"], "kb-agent");
    assert!(is_hex_id(&meta["agent/run_id"]), "{meta}");
    assert_eq!(meta["agent/idempotency_key"], meta["agent/run_id"]);
    let run_id = meta["agent/run_id"].as_str().unwrap();
    let parent = meta["traceparent"].as_str().unwrap();
    assert!(parent.starts_with(&format!("00-{run_id}-")), "{parent}");
    // Its arguments are the contract's: checked before anything is sent.
    let (code, _, stderr) = call(&file, "knowledge.get", json!({"key": "x"}));
    assert_eq!(code, 6, "{stderr}");

    // A run's registry calls, a server's tool and a contract: the run's ids and principal,
    // the server's tags and the workflow's labels (the workflow's winning on `team`).
    let run = start(&file, "lookup", json!({"a": 1, "q": "geese"}));
    let done = ended(&file, &run);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["steps"][0]["output"]["structuredContent"]["result"], 3);
    assert_eq!(done["output"]["content"][0]["text"], r#"{"query":"geese"}"#);
    let metas = calls(&server);
    assert_eq!(metas.len(), 3, "{metas:?}");
    for (meta, step) in metas[1..].iter().zip(["sum", "find"]) {
        assert_eq!(meta["agent/run_id"], run.as_str());
        assert_eq!(meta["agent/idempotency_key"], format!("{run}:{step}"));
        assert_eq!(
            meta["agent/acting_for"],
            json!({"principal": "operator", "autonomous": false})
        );
        assert_eq!(
            meta["agent/labels"],
            json!({"team": "search", "tier": "gold", "flow": "lookup"})
        );
        let parent = meta["traceparent"].as_str().unwrap();
        assert!(parent.starts_with(&format!("00-{run}-")), "{parent}");
    }

    // A registry name the catalogue or the servers do not have fails its run, typed.
    let typo = ended(&file, &start(&file, "typo", json!({})));
    assert_eq!(typo["error"]["code"], "unknown_tool", "{typo}");
    assert!(
        typo["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ref/nope")
    );
    let elsewhere = ended(&file, &start(&file, "elsewhere", json!({})));
    assert_eq!(elsewhere["error"]["code"], "unknown_server", "{elsewhere}");
    assert_eq!(calls(&server).len(), 3, "nothing more was sent");

    // exec mapped to a server's tool: the mapping, not a local runner, runs it.
    let (code, ran, stderr) = call(&file, "exec", json!({"command": ["ls", "-l"]}));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ran["content"][0]["text"], r#"{"command":["ls","-l"]}"#);
    let metas = calls(&server);
    assert_eq!(metas.len(), 4, "{metas:?}");
    assert_eq!(
        metas[3]["agent/labels"],
        json!({"team": "ops", "tier": "gold"})
    );

    // A run fired by a start acts for the instance on its own, with the workflow's labels.
    until("subscribed", || {
        server.reaching(COUNTER) + server.listening(COUNTER) > 0
    })
    .await;
    server.touch(COUNTER).await;
    until("the started run's call", || calls(&server).len() >= 5).await;
    let meta = &calls(&server)[4];
    assert_eq!(
        meta["agent/acting_for"],
        json!({"principal": "agent:kb-agent", "autonomous": true})
    );
    assert_eq!(
        meta["agent/labels"],
        json!({"team": "ops", "tier": "gold", "flow": "watch"})
    );
    let run = meta["agent/run_id"].as_str().unwrap();
    assert!(is_hex_id(&meta["agent/run_id"]), "{meta}");
    assert_eq!(meta["agent/idempotency_key"], format!("{run}:sum"));
    let done = ended(&file, run);
    assert_eq!(done["by"], "start:counter", "{done}");

    // So does a run an MCP Events occurrence appended to its stream started.
    if events {
        daemon.wait_for("mcp.events.armed", Some("ref"));
        server.emit("ticket.created", json!({"id": 1}));
        until("the event's run's call", || calls(&server).len() >= 6).await;
        let meta = &calls(&server)[5];
        assert_eq!(
            meta["agent/acting_for"],
            json!({"principal": "agent:kb-agent", "autonomous": true})
        );
        assert_eq!(
            meta["agent/labels"],
            json!({"team": "ops", "tier": "gold", "flow": "ticket"})
        );
        let run = meta["agent/run_id"].as_str().unwrap();
        assert_eq!(meta["agent/idempotency_key"], format!("{run}:sum"));
        let done = ended(&file, run);
        assert_eq!(done["by"], "start:ticket", "{done}");
    }
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_calls_say_who_and_what_for_at_2026_07_28() {
    let mut options = Options::default();
    options.legacy = false;
    options.events = true;
    registry(options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_calls_say_who_and_what_for_at_2025_11_25() {
    let mut options = Options::default();
    options.modern = false;
    registry(options).await;
}

/// The contract tools nothing implements are not offered: `agentd tool list` says why,
/// a call is refused `not_offered` (exit 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_nothing_implements_is_not_offered_and_says_why() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), "[knowledge]\nserver = \"ref\"\n");
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let (code, listed, stderr) = agentd(&file, &["tool", "list"], &["--json"]);
    assert_eq!(code, 0, "{stderr}");
    let named = |part: &str, name: &str| {
        let tools = listed[part].as_array().unwrap();
        tools.iter().find(|t| t["name"] == name).cloned()
    };
    assert!(named("tools", "knowledge.search").is_some(), "{listed}");
    assert!(named("not_offered", "knowledge.search").is_none());
    for (name, why) in [
        ("search.query", "no search.server"),
        ("code.run", "only a mapping"),
        ("exec", "security.exec.enabled"),
    ] {
        assert!(named("tools", name).is_none(), "{listed}");
        let tool = named("not_offered", name).unwrap();
        assert!(tool["reason"].as_str().unwrap().contains(why), "{tool}");
    }
    let out = common::agentd(&file, &["tool", "list"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("code.run")).unwrap();
    assert!(line.contains("not offered: only a mapping"), "{line}");
    let (code, _, stderr) = call(&file, "code.run", json!({"language": "sh", "code": "ls"}));
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("not_offered"), "{stderr}");
    assert!(calls(&server).is_empty());
    assert!(daemon.terminate().success());
}

/// A contract mapped to the Python SDK server's `echo_meta`, which answers the `agent/`
/// keys it received, and a workflow step naming `py/echo_meta`.
fn python_mapped(peer: &peers::Peer) {
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&format!(
        "instance = \"py-agent\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"py\"\nurl = \"{}\"\ntags = {{ zone = \"eu\" }}\n\
         [contracts.map.\"search.query\"]\nserver = \"py\"\ntool = \"echo_meta\"\n\
         [[workflows]]\nname = \"meta\"\nlabels = {{ flow = \"py\" }}\n\
         [[workflows.steps]]\nid = \"echo\"\ntype = \"tool\"\nname = \"py/echo_meta\"\n\
         arguments = {{ query = \"w\" }}\n",
        dir.path().display(),
        peer.url
    ));
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let (code, answer, stderr) = call(&file, "search.query", json!({"query": "q", "limit": 3}));
    assert_eq!(code, 0, "{stderr} {}", peer.output_tail());
    let text = answer["content"][0]["text"].as_str().unwrap();
    let meta: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        meta["agent/acting_for"],
        json!({"principal": "operator", "autonomous": false})
    );
    assert_eq!(meta["agent/labels"], json!({"zone": "eu"}));
    assert_eq!(meta["agent/instance"], "py-agent");
    assert_eq!(meta["agent/idempotency_key"], meta["agent/run_id"]);
    let run_id = meta["agent/run_id"].as_str().unwrap();
    let parent = meta["traceparent"].as_str().unwrap_or_default();
    assert!(parent.starts_with(&format!("00-{run_id}-")), "{meta}");

    // A workflow's step naming the server's tool: the run's ids, its labels too.
    let run = start(&file, "meta", json!({}));
    let done = ended(&file, &run);
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["output"]["content"][0]["text"].as_str().unwrap();
    let meta: Value = serde_json::from_str(text).unwrap();
    assert_eq!(meta["agent/run_id"], run.as_str());
    assert_eq!(meta["agent/idempotency_key"], format!("{run}:echo"));
    assert_eq!(
        meta["agent/acting_for"],
        json!({"principal": "operator", "autonomous": false})
    );
    assert_eq!(meta["agent/labels"], json!({"zone": "eu", "flow": "py"}));
    let parent = meta["traceparent"].as_str().unwrap_or_default();
    assert!(parent.starts_with(&format!("00-{run}-")), "{meta}");
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_mapped_to_the_python_sdk_server_in_each_era() {
    let (modern, legacy) = (peers::python(false), peers::python_legacy());
    python_mapped(&modern);
    python_mapped(&legacy);
}

/// A conversation's model calls a contract tool (`knowledge_search`, as models read the
/// name): the call carries the turn's ids and context, acts for the conversation, labelled
/// with the server's tags, and the model reads the mapped tool's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_calls_a_contract_for_its_conversation() {
    let server = ReferenceServer::start(Options::default()).await;
    server.add_tool("lookup").await;
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new("c1", "knowledge_search", r#"{"query": "owls"}"#)]),
        Reply::text("found"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let rest = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
         [contracts.map.\"knowledge.search\"]\nserver = \"ref\"\ntool = \"lookup\"\n",
        model.base_url()
    );
    let file = config(dir.path(), &server.url(), &rest);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    // Once the server is connected, the contract reaches it.
    let (code, _, stderr) = call(&file, "knowledge.search", json!({"query": "warm-up"}));
    assert_eq!(code, 0, "{stderr}");
    let (code, said, stderr) = agentd(&file, &["say"], &["--conversation", "c1", "find owls"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(said, Value::Null, "plain text, not JSON");
    let asked = model.requests();
    let shown = asked[1].body["messages"].as_array().unwrap();
    let result = shown.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["content"], r#"{"query":"owls"}"#);
    let metas = calls(&server);
    assert_eq!(metas.len(), 2, "{metas:?}");
    assert_eq!(
        metas[1]["agent/acting_for"],
        json!({"principal": "conversation:c1", "autonomous": false})
    );
    assert_eq!(
        metas[1]["agent/labels"],
        json!({"team": "ops", "tier": "gold"})
    );
    // The turn's ids and context, not fresh ones.
    let run_id = metas[1]["agent/run_id"].as_str().unwrap();
    assert_ne!(metas[0]["agent/run_id"], run_id);
    assert_eq!(metas[1]["agent/ctx"]["conversation"], "c1");
    assert_eq!(metas[1]["agent/idempotency_key"], format!("{run_id}:1:0"));
    assert!(metas[0].get("agent/ctx").is_none());
    assert!(daemon.terminate().success());
}

/// A conversation's call of a contract whose server says nothing is cut at the turn's
/// deadline, well inside the server's connection timeout: the server is sent
/// `notifications/cancelled` with the call's id, the next turn shows the model the cut, and
/// the call is counted as `cut`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_call_cut_at_the_turns_deadline_is_cancelled() {
    let mut options = Options::default();
    options.modern = false;
    let server = ReferenceServer::start(options).await;
    server.add_tool("lookup").await;
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new("c1", "knowledge_search", r#"{"query": "owls"}"#)]),
        Reply::text("cut"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let rest = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
         [contracts.map.\"knowledge.search\"]\nserver = \"ref\"\ntool = \"lookup\"\n\
         [webhooks]\nlisten = \"127.0.0.1:0\"\n[limits]\nturn_timeout = \"3s\"\n",
        model.base_url()
    );
    let file = config_timed(dir.path(), &server.url(), "5m", &rest);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let (code, _, stderr) = call(&file, "knowledge.search", json!({"query": "warm-up"}));
    assert_eq!(code, 0, "{stderr}");

    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let sent = json!({"conversation": "c1", "text": "find owls"}).to_string();
    let (code, _, stderr) = agentd(&file, &["tool", "call"], &["message.send", &sent]);
    assert_eq!(code, 0, "{stderr}");
    until("the turn's call sent", || calls(&server).len() == 2).await;
    last_call_cancelled(&server).await;

    // The next message waits for the first turn's end; its turn shows the model the cut.
    let (code, _, stderr) = agentd(&file, &["say"], &["--conversation", "c1", "and?"]);
    assert_eq!(code, 0, "{stderr}");
    let asked = model.requests();
    let shown = asked[1].body["messages"].as_array().unwrap();
    let result = shown.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        result["content"], "error: the call was cut at the turn's deadline",
        "{shown:?}"
    );
    let metrics = common::get(&daemon.listener(), "/metrics");
    let counted = r#"agent_tool_calls_total{tool="knowledge.search",outcome="cut"} 1"#;
    assert!(metrics.contains(counted), "{metrics}");
    assert!(daemon.terminate().success());
}

const ASKING: &str = r#"
[contracts.map."code.run"]
server = "ref"
tool = "run"
[[workflows]]
name = "asking"
[[workflows.steps]]
id = "ask"
type = "agent"
prompt = "Run the tests."
"#;

/// A subagent (a workflow's `agent` step) is not offered `code.run`, mapped though it is, nor
/// the server's tool it is mapped to (its other tools are): its model's call of it is
/// refused and reaches no server, and an operator's call as a subagent is refused
/// `not_granted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_is_refused_a_mapped_code_run() {
    let server = ReferenceServer::start(Options::default()).await;
    server.add_tool("run").await;
    let model = ScriptedModel::start([
        Reply::tool_calls([Call::new(
            "c1",
            "code_run",
            r#"{"language": "sh", "code": "ls"}"#,
        )]),
        Reply::text("done"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let rest = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n{ASKING}",
        model.base_url()
    );
    let file = config(dir.path(), &server.url(), &rest);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    // Offered to the root scope: mapped, it is implemented.
    let (code, listed, stderr) = agentd(&file, &["tool", "list"], &["--json"]);
    assert_eq!(code, 0, "{stderr}");
    let offered = listed["tools"].as_array().unwrap();
    assert!(offered.iter().any(|t| t["name"] == "code.run"), "{listed}");

    let run = start(&file, "asking", json!({}));
    let done = ended(&file, &run);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"]["answer"], "done", "{done}");
    let asked = model.requests();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let functions = asked[0].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&Value> = functions.iter().map(|t| &t["function"]["name"]).collect();
    assert!(names.contains(&&json!("ref__add")), "{names:?}");
    for withheld in ["code_run", "ref__run"] {
        assert!(!names.contains(&&json!(withheld)), "{names:?}");
    }
    let shown = asked[1].body["messages"].as_array().unwrap();
    let result = shown.iter().find(|m| m["role"] == "tool").unwrap();
    let said = result["content"].as_str().unwrap();
    assert!(
        said.starts_with("error: no function is named \"code_run\""),
        "{said}"
    );

    // The operator acting as a subagent: refused, typed.
    let arguments = json!({"language": "sh", "code": "ls"}).to_string();
    let rest = [
        "--scope",
        "subagent",
        "--subagent",
        "s1",
        "code.run",
        &arguments,
    ];
    let (code, _, stderr) = agentd(&file, &["tool", "call"], &rest);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("not_granted"), "{stderr}");
    assert!(calls(&server).is_empty(), "nothing reached the server");
    assert!(daemon.terminate().success());
}

/// A registry call to a server that says nothing ends at the server's connection timeout,
/// failing `server`; a 2025-11-25 server is sent `notifications/cancelled` with the call's
/// id (a 2026-07-28 one sees its stream close: the transport's tests show it); the next call
/// goes through.
async fn silent(options: Options) {
    let legacy = !options.modern;
    let server = ReferenceServer::start(options).await;
    server.add_tool("knowledge.search").await;
    let dir = tempfile::tempdir().unwrap();
    let knowledge = "[knowledge]\nserver = \"ref\"\n";
    let file = config_timed(dir.path(), &server.url(), "3s", knowledge);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let (code, _, stderr) = call(&file, "knowledge.search", json!({"query": "warm-up"}));
    assert_eq!(code, 0, "{stderr}");

    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let (code, _, stderr) = call(&file, "knowledge.search", json!({"query": "hush"}));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: server: "), "{stderr}");
    assert!(stderr.contains("no answer for 3000 ms"), "{stderr}");
    if legacy {
        last_call_cancelled(&server).await;
    }
    let (code, _, stderr) = call(&file, "knowledge.search", json!({"query": "again"}));
    assert_eq!(code, 0, "{stderr}");
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_ends_a_registry_call_at_its_timeout_at_2025_11_25() {
    let mut options = Options::default();
    options.modern = false;
    silent(options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_ends_a_registry_call_at_its_timeout_at_2026_07_28() {
    let mut options = Options::default();
    options.legacy = false;
    silent(options).await;
}

const KILLED: &str = r#"
[[workflows]]
name = "slow"
[[workflows.steps]]
id = "sum"
type = "tool"
name = "ref/add"
arguments = { a = 20, b = 22 }
"#;

/// A workflow step naming a server's tool, its call unanswered when the daemon is
/// SIGKILLed: sent again after the restart with the same idempotency key, and the run
/// finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_step_sent_again_after_a_kill_keeps_its_key() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let dir = tempfile::tempdir().unwrap();
    // A connection timeout past any wait for the kill: the call is still held when it comes.
    let file = config_timed(dir.path(), &server.url(), "5m", KILLED);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let run = start(&file, "slow", json!({}));
    until("the call sent", || !calls(&server).is_empty()).await;
    daemon.kill();

    let mut again = Daemon::run(&file);
    until_up(&file);
    let done = ended(&file, &run);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"]["structuredContent"]["result"], 42);
    let metas = calls(&server);
    assert_eq!(metas.len(), 2, "{metas:?}");
    for meta in &metas {
        assert_eq!(meta["agent/idempotency_key"], format!("{run}:sum"));
        assert_eq!(meta["agent/run_id"], run.as_str());
        assert_eq!(
            meta["agent/acting_for"],
            json!({"principal": "operator", "autonomous": false})
        );
    }
    assert!(again.terminate().success());
}
