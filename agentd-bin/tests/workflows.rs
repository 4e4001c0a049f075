//! Workflows in `agentd run`, as a process against the reference server of either era: a
//! workflow of `mcp.tool`, `mcp.resource`, `tool` and `wait` steps run to its end through
//! `agentd workflow run` and `agentd workflow status`; an `mcp.tool` step retried with one
//! idempotency key and rising attempts, as the server received them; runs SIGKILLed mid-step
//! and mid-wait, finished after the restart; a workflow made at runtime, and one a reload
//! brings; an `agent` step answered by a subagent of its run (the scripted model's), and one
//! failed without a model.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentd_tests::model::{Reply, ScriptedModel};
use common::{Daemon, TempFile, until};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use serde_json::{Value, json};

const COUNTER: &str = "demo://counter";

/// A configuration of server `ref` at `url`, its store in `dir`, with `workflows` after.
fn config(dir: &Path, url: &str, workflows: &str) -> TempFile {
    TempFile::new(&format!(
        "instance = \"flows\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\n{workflows}",
        dir.display()
    ))
}

/// `agentd ARGS --config F REST`: its exit status, its stdout as JSON, its stderr.
fn agentd(file: &TempFile, args: &[&str], rest: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(args)
        .args(["--config", file.to_str().unwrap()])
        .args(rest)
        .output()
        .expect("agentd runs");
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// Waits, at most 15 s, until the daemon answers.
fn until_up(file: &TempFile) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while agentd(file, &["tool", "call"], &["status"]).0 != 0 {
        assert!(Instant::now() < deadline, "the daemon did not answer");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `agentd workflow run NAME INPUT`: the run's id.
fn start(file: &TempFile, name: &str, input: Value) -> String {
    let (code, run, stderr) = agentd(file, &["workflow", "run"], &[name, &input.to_string()]);
    assert_eq!(code, 0, "{stderr}");
    run["run"].as_str().expect("a run id").to_owned()
}

/// `agentd workflow status RUN`, once `holds` holds of it (at most 20 s).
fn status_until(file: &TempFile, run: &str, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, status, stderr) = agentd(file, &["workflow", "status"], &[run]);
        if code == 0 && holds(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "not {what}: {status} {stderr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether step `id` of `run` is waiting.
fn waiting_at(run: &Value, id: &str) -> bool {
    run["step"] == id
        && run["steps"].as_array().is_some_and(|steps| {
            steps
                .iter()
                .any(|s| s["id"] == id && s["status"] == "waiting")
        })
}

/// The `_meta` of every `tools/call` the server received, oldest first.
fn calls(server: &ReferenceServer) -> Vec<Value> {
    let log = server.log();
    let called = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"));
    called.map(|l| l.body["params"]["_meta"].clone()).collect()
}

/// Whether a change of `uri` reaches a subscriber now, in either era.
fn reached(server: &ReferenceServer, uri: &str) -> bool {
    server.reaching(uri) + server.listening(uri) > 0
}

const TOUR: &str = r#"
[[workflows]]
name = "tour"
input = { type = "object", properties = { a = { type = "integer" } }, required = ["a"] }
labels = { team = "ops" }
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = "{{input.a}}", b = 2 }
[[workflows.steps]]
id = "greeting"
type = "mcp.resource"
server = "ref"
read = "demo://greeting"
[[workflows.steps]]
id = "note"
type = "tool"
name = "memory.set"
arguments = { key = "sum", value = "{{steps.add.output.structuredContent.result}}" }
[[workflows.steps]]
id = "go"
type = "wait"
on = { signal = { name = "go" } }
[[workflows.steps]]
id = "changed"
type = "wait"
on = { resource = { server = "ref", uri = "demo://counter" } }
"#;

/// Every kind of step but `agent`, to the end: the tool's answer feeds the own tool's
/// arguments, the signal and the resource's change end the waits.
async fn tour(options: Options) {
    let server = ReferenceServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), TOUR);
    let mut daemon = Daemon::run(&file);
    until_up(&file);

    // The input is checked against the workflow's schema; an unknown workflow is exit 4.
    let (code, _, stderr) = agentd(&file, &["workflow", "run"], &["tour", r#"{"a": "x"}"#]);
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("/input/a"), "{stderr}");
    let (code, _, _) = agentd(&file, &["workflow", "run"], &["nope"]);
    assert_eq!(code, 4);
    let (code, _, _) = agentd(&file, &["workflow", "run"], &["tour", "{"]);
    assert_eq!(code, 2);
    let (code, _, _) = agentd(&file, &["workflow", "status"], &["nope"]);
    assert_eq!(code, 4);

    let run = start(&file, "tour", json!({"a": 3}));
    assert_eq!(
        daemon.wait_for("workflow.started", None)["run"],
        run.as_str()
    );
    let at_go = status_until(&file, &run, "waiting for go", |r| waiting_at(r, "go"));
    let steps = &at_go["steps"];
    assert_eq!(steps[0]["output"]["structuredContent"]["result"], 5);
    assert_eq!(steps[1]["output"]["contents"][0]["uri"], "demo://greeting");
    assert_eq!(steps[2]["output"], json!({"version": 1}));
    let (code, sum, _) = agentd(
        &file,
        &["tool", "call"],
        &["memory.get", r#"{"key": "sum"}"#],
    );
    assert_eq!((code, &sum["value"]), (0, &json!(5)));

    let signal = json!({"run": run, "signal": "go", "payload": {"by": "test"}});
    let (code, _, stderr) = agentd(
        &file,
        &["tool", "call"],
        &["workflow.signal", &signal.to_string()],
    );
    assert_eq!(code, 0, "{stderr}");
    status_until(&file, &run, "waiting for the change", |r| {
        waiting_at(r, "changed")
    });
    until("subscribed", || reached(&server, COUNTER)).await;
    server.touch(COUNTER).await;
    let done = status_until(&file, &run, "completed", |r| r["status"] == "completed");
    assert_eq!(
        done["steps"][3]["output"],
        json!({"signal": "go", "payload": {"by": "test"}})
    );
    assert_eq!(done["output"], json!({"server": "ref", "uri": COUNTER}));
    assert_eq!(done["by"], "operator");
    let ended = daemon.wait_for("workflow.ended", None);
    assert_eq!(
        (&ended["run"], &ended["status"]),
        (&json!(run), &json!("completed"))
    );
    // Let go once the wait ended.
    until("released", || !reached(&server, COUNTER)).await;

    // The step's call carries the run, its attempt and its one key.
    let metas = calls(&server);
    assert_eq!(metas.len(), 1, "{metas:?}");
    let meta = &metas[0];
    assert_eq!(meta["agent/run_id"], run.as_str());
    assert_eq!(meta["agent/run"], run.as_str());
    assert_eq!(meta["agent/instance"], "flows");
    assert_eq!(meta["agent/attempt"], 1);
    assert_eq!(meta["agent/idempotency_key"], format!("{run}:add"));
    let parent = meta["traceparent"].as_str().unwrap();
    assert!(parent.starts_with(&format!("00-{run}-")), "{parent}");
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_of_every_step_runs_to_its_end_at_2026_07_28() {
    let mut options = Options::default();
    options.legacy = false;
    tour(options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_of_every_step_runs_to_its_end_at_2025_11_25() {
    let mut options = Options::default();
    options.modern = false;
    tour(options).await;
}

const FLAKY: &str = r#"
[[workflows]]
name = "flaky"
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = 1, b = 2 }
retries = { max = 3, delay = "100ms", max_delay = "200ms" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_is_retried_with_one_key_and_rising_attempts() {
    let server = ReferenceServer::start(Options::default()).await;
    let busy = Fault::RpcError {
        status: 200,
        code: -32603,
        message: "busy".into(),
        data: None,
    };
    server.script("tools/call", busy, Times::Once);
    server.script("tools/call", Fault::Status(503, None), Times::Once);
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), FLAKY);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let run = start(&file, "flaky", json!({}));
    let done = status_until(&file, &run, "completed", |r| r["status"] == "completed");
    assert_eq!(done["steps"][0]["attempt"], 3);
    assert_eq!(done["output"]["structuredContent"]["result"], 3);
    let metas = calls(&server);
    let attempts: Vec<&Value> = metas.iter().map(|m| &m["agent/attempt"]).collect();
    assert_eq!(attempts, [&json!(1), &json!(2), &json!(3)], "{metas:?}");
    let key = format!("{run}:add");
    assert!(
        metas
            .iter()
            .all(|m| m["agent/idempotency_key"] == key.as_str()),
        "{metas:?}"
    );
    assert!(metas.iter().all(|m| m["agent/run"] == run.as_str()));
    let retry = daemon.wait_for("workflow.retry", None);
    assert_eq!(
        (&retry["step"], &retry["attempt"]),
        (&json!("add"), &json!(1))
    );
    assert_eq!(retry["retry_ms"], 100);
    let second = daemon.wait_for_nth("workflow.retry", None, 2);
    assert_eq!(
        (&second["attempt"], &second["retry_ms"]),
        (&json!(2), &json!(200))
    );
    assert!(daemon.terminate().success());
}

const SURVIVORS: &str = r#"
[[workflows]]
name = "slow"
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = 20, b = 22 }
timeout = "10m"
[[workflows]]
name = "parked"
[[workflows.steps]]
id = "changed"
type = "wait"
on = { resource = { server = "ref", uri = "demo://counter" } }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_killed_mid_step_finish_after_the_restart() {
    let server = ReferenceServer::start(Options::default()).await;
    // The first call is never answered.
    server.script(
        "tools/call",
        Fault::Silence(Duration::from_secs(600)),
        Times::Once,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), SURVIVORS);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let slow = start(&file, "slow", json!({}));
    let parked = start(&file, "parked", json!({}));
    until("the call sent", || !calls(&server).is_empty()).await;
    status_until(&file, &parked, "waiting", |r| waiting_at(r, "changed"));
    until("subscribed", || reached(&server, COUNTER)).await;
    daemon.kill();

    let mut again = Daemon::run(&file);
    let resubscribed = again.wait_for("wait.resubscribed", Some("ref"));
    assert_eq!(
        (&resubscribed["uri"], &resubscribed["reason"]),
        (&json!(COUNTER), &json!("restart"))
    );
    // Not said parked while its server was still being dialed.
    let parked_lines: Vec<_> = again.matching("wait.resubscribe.fail", None).collect();
    assert!(parked_lines.is_empty(), "{parked_lines:?}");
    let done = status_until(&file, &slow, "completed", |r| r["status"] == "completed");
    assert_eq!(done["output"]["structuredContent"]["result"], 42);
    assert_eq!(done["steps"][0]["attempt"], 2);
    let metas = calls(&server);
    let attempts: Vec<&Value> = metas.iter().map(|m| &m["agent/attempt"]).collect();
    assert_eq!(attempts, [&json!(1), &json!(2)], "{metas:?}");
    assert_eq!(
        metas[0]["agent/idempotency_key"],
        metas[1]["agent/idempotency_key"]
    );
    assert_eq!(metas[1]["agent/idempotency_key"], format!("{slow}:add"));

    until("subscribed again", || reached(&server, COUNTER)).await;
    server.touch(COUNTER).await;
    let done = status_until(&file, &parked, "completed", |r| r["status"] == "completed");
    assert_eq!(done["output"], json!({"server": "ref", "uri": COUNTER}));
    assert!(again.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_are_made_at_runtime_and_taken_at_a_reload() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), "");
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let body = json!({"steps": [{"id": "nap", "type": "wait", "on": {"duration": "10ms"}}]});
    let create = json!({"name": "nap", "definition": body});
    let (code, made, stderr) = agentd(
        &file,
        &["tool", "call"],
        &["workflow.create", &create.to_string()],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(made, json!({"workflow": "nap", "version": 1, "steps": 1}));
    let bad = json!({"name": "bad", "definition": {"steps": [
        {"id": "a", "type": "mcp.tool", "server": "ref", "tool": "add",
         "arguments": {"a": "{{steps.b.output}}"}},
    ]}});
    let (code, _, stderr) = agentd(
        &file,
        &["tool", "call"],
        &["workflow.create", &bad.to_string()],
    );
    assert_eq!(code, 6, "{stderr}");
    assert!(
        stderr.contains("/definition/steps/0/arguments/a"),
        "{stderr}"
    );
    let run = start(&file, "nap", json!({}));
    let done = status_until(&file, &run, "completed", |r| r["status"] == "completed");
    assert!(
        done["output"]["waited_ms"].as_u64().unwrap() >= 10,
        "{done}"
    );

    // A reload brings a workflow of the configuration, which the tools do not change.
    let later = "[[workflows]]\nname = \"later\"\n[[workflows.steps]]\nid = \"a\"\n\
                 type = \"wait\"\non = { duration = 1 }\n";
    let text = format!("{}{later}", std::fs::read_to_string(file.path()).unwrap());
    file.write(&text);
    daemon.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        let (code, run, _) = agentd(&file, &["workflow", "run"], &["later"]);
        if code == 0 {
            break run["run"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the reload was not taken");
        std::thread::sleep(Duration::from_millis(50));
    };
    status_until(&file, &run, "completed", |r| r["status"] == "completed");
    let delete = json!({"name": "later"});
    let (code, _, stderr) = agentd(
        &file,
        &["tool", "call"],
        &["workflow.delete", &delete.to_string()],
    );
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("configuration"), "{stderr}");
    assert!(daemon.terminate().success());
}

const ASKING: &str = r#"
[[workflows]]
name = "asking"
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = 2, b = 3 }
[[workflows.steps]]
id = "ask"
type = "agent"
prompt = "Say what {{steps.add.output.structuredContent.result}} is."
[[workflows.steps]]
id = "note"
type = "tool"
name = "memory.set"
arguments = { key = "said", value = "{{steps.ask.output.answer}}" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_step_answers_as_a_subagent_of_its_run() {
    let model = ScriptedModel::start([Reply::text("Five.").usage(30, 2)]).await;
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let head = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n{ASKING}",
        model.base_url()
    );
    let file = config(dir.path(), &server.url(), &head);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let run = start(&file, "asking", json!({}));
    let done = status_until(&file, &run, "completed", |r| r["status"] == "completed");
    let asked = &done["steps"][1]["output"];
    assert_eq!(asked["answer"], "Five.", "{done}");
    assert_eq!(asked["subagent"], "s1");
    let (_, said, _) = agentd(
        &file,
        &["tool", "call"],
        &["memory.get", r#"{"key": "said"}"#],
    );
    assert_eq!(said["value"], "Five.");
    // The subagent's goal is the prompt, rendered; it is the run's.
    let requests = model.requests();
    let body = requests[0].body.to_string();
    assert!(body.contains("Say what 5 is."), "{body}");
    let (_, status, _) = agentd(
        &file,
        &["tool", "call"],
        &["subagent.status", r#"{"id": "s1"}"#],
    );
    assert_eq!(status["parent"], format!("run:{run}"));
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_step_without_a_model_fails_its_run() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), &server.url(), ASKING);
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let run = start(&file, "asking", json!({}));
    let failed = status_until(&file, &run, "failed", |r| r["status"] == "failed");
    assert_eq!(failed["step"], "ask");
    assert_eq!(failed["error"]["code"], "no_agent", "{failed}");
    assert!(daemon.terminate().success());
}
