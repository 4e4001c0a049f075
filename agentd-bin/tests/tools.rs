//! agentd's own tools in the running daemon, through `agentd tool`: every built tool called
//! and its effect read back, every exit status, grants narrowing, concurrent shifts of one
//! queue, the state kept across a SIGKILL, each call's `tool.call` line and count, and the
//! events tools called for an owner.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Daemon, TempFile, agentd, get, poll, until_up};
use serde_json::{Value, json};

/// A daemon's configuration: its store in `dir`, subagents narrowed to memory and status.
fn config(dir: &Path) -> TempFile {
    TempFile::new(&format!(
        "instance = \"tools\"\n[store]\npath = \"{}\"\n\
         [tools.grants]\nsubagent = [\"memory.*\", \"status\"]\n",
        dir.display()
    ))
}

/// What `agentd tool ARGS` came to: its exit status, its result (JSON, or null) and stderr.
fn tool(file: &TempFile, args: &[&str]) -> (i32, Value, String) {
    let out = agentd(file, &[&["tool"], args].concat());
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// `agentd tool call NAME ARGUMENTS` and `extra` options: the result of a call that
/// succeeded.
fn call(file: &TempFile, name: &str, arguments: Value, extra: &[&str]) -> Value {
    let arguments = arguments.to_string();
    let mut args = vec!["call", name, &arguments];
    args.extend_from_slice(extra);
    let (code, result, stderr) = tool(file, &args);
    assert_eq!(code, 0, "{name}: {stderr}");
    result
}

/// The exit status and stderr of a call that failed.
fn refused(file: &TempFile, name: &str, arguments: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["call", name, arguments];
    args.extend_from_slice(extra);
    let (code, _, stderr) = tool(file, &args);
    (code, stderr)
}

const C1: &[&str] = &["--conversation", "c1"];

#[test]
fn every_tool_is_called_and_its_state_outlives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    let mut agentd = Daemon::run(&file);
    until_up(&file);

    // Memory, with a stale compare-and-set refused and nothing changed.
    let set = call(
        &file,
        "memory.set",
        json!({"key": "k1", "value": {"a": 1}}),
        &[],
    );
    assert_eq!(set, json!({"version": 1}));
    let (code, stderr) = refused(
        &file,
        "memory.set",
        r#"{"key": "k1", "value": 2, "expected_version": 0}"#,
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: version_mismatch: "), "{stderr}");
    let got = call(&file, "memory.get", json!({"key": "k1"}), &[]);
    assert_eq!(got, json!({"value": {"a": 1}, "version": 1}));
    for item in [1, 2, 3] {
        call(
            &file,
            "memory.push",
            json!({"key": "q", "value": item}),
            &[],
        );
    }
    let shifted = call(&file, "memory.shift", json!({"key": "q"}), &[]);
    assert_eq!(shifted, json!({"value": 1, "version": 4}));
    let popped = call(&file, "memory.pop", json!({"key": "q"}), &[]);
    assert_eq!(popped, json!({"value": 3, "version": 5}));
    call(&file, "memory.set", json!({"key": "gone", "value": 0}), &[]);
    let deleted = call(&file, "memory.delete", json!({"key": "gone"}), &[]);
    assert_eq!(deleted, json!({"deleted": true}));
    let listed = call(&file, "memory.list", json!({}), &[]);
    let keys: Vec<&Value> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["key"])
        .collect();
    assert_eq!(keys, [&json!("k1"), &json!("q")]);

    // Artifacts of conversation c1.
    let text = json!({"name": "a.txt", "media_type": "text/plain", "text": "hello"});
    call(&file, "artifact.create", text, C1);
    let bin = json!({"name": "b.bin", "media_type": "application/octet-stream", "base64": "AP8="});
    call(&file, "artifact.create", bin, C1);
    let listed = call(&file, "artifact.list", json!({}), C1);
    assert_eq!(listed["artifacts"].as_array().unwrap().len(), 2);
    let got = call(&file, "artifact.get", json!({"name": "b.bin"}), C1);
    assert_eq!(got["base64"], "AP8=");
    let deleted = call(&file, "artifact.delete", json!({"name": "b.bin"}), C1);
    assert_eq!(deleted, json!({"deleted": true}));
    let other = call(&file, "artifact.list", json!({}), &["--run", "r1"]);
    assert_eq!(other, json!({"artifacts": []}));

    // Plans.
    let steps = json!({"steps": [{"title": "one"}, {"title": "two"}]});
    let made = call(&file, "plan.create", steps.clone(), C1);
    assert_eq!(made["plan"]["version"], 1);
    let step = json!({"step": 0, "status": "done"});
    call(&file, "plan.update", step, C1);
    let plan = call(&file, "plan.get", json!({}), C1);
    assert_eq!(plan["plan"]["steps"][0]["status"], "done");
    call(&file, "plan.create", steps, &["--run", "r1"]);
    let cleared = call(&file, "plan.clear", json!({}), &["--run", "r1"]);
    assert_eq!(cleared, json!({"cleared": true}));

    // A message, then the inbox in status.
    let sent = call(
        &file,
        "message.send",
        json!({"conversation": "inbox1", "text": "hi"}),
        &[],
    );
    assert_eq!(sent, json!({"id": 1}));
    let status = call(&file, "status", json!({}), &[]);
    assert_eq!(status["instance"], "tools");
    assert_eq!(
        status["conversations"],
        json!([{"id": "inbox1", "inbox": 1, "tokens": 0}])
    );
    assert_eq!(
        status["budget"],
        json!({"tokens_used": 0, "tokens_limit": null, "spent": false})
    );
    // The model-only tools run in a model's turn alone.
    let (code, _, stderr) = tool(&file, &["call", "think", r#"{"prompt": "?"}"#]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: model_only: think"), "{stderr}");

    // Waiting.
    let slept = call(&file, "sleep", json!({"duration": "10ms"}), &[]);
    assert_eq!(slept["cancelled"], false);
    let never = json!({"until": {"memory": {"key": "never"}}, "timeout": "50ms"});
    assert_eq!(call(&file, "await", never, &[]), json!({"met": false}));
    let waiter = {
        let path = file.path().to_owned();
        std::thread::spawn(move || {
            let until =
                json!({"until": {"memory": {"key": "signal", "equals": "go"}}, "timeout": "15s"});
            let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
                .args(["tool", "call", "--config", path.to_str().unwrap()])
                .args(["await", &until.to_string()])
                .output()
                .expect("agentd runs");
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
        })
    };
    call(
        &file,
        "memory.set",
        json!({"key": "signal", "value": "go"}),
        &[],
    );
    let met = waiter.join().unwrap();
    assert_eq!(met["met"], true, "{met}");
    assert_eq!(met["memory"]["value"], "go");

    // Finishing, once.
    let finished = call(
        &file,
        "finish",
        json!({"status": "done", "summary": "ok"}),
        C1,
    );
    assert_eq!(
        finished,
        json!({"unit": "conversation:c1", "status": "done", "artifacts": ["a.txt"]})
    );
    let again = r#"{"status": "failed", "summary": "no"}"#;
    let (code, stderr) = refused(&file, "finish", again, C1);
    assert_eq!(code, 1);
    assert!(stderr.starts_with("agentd: already_finished: "), "{stderr}");

    // Every exit status of a refusal.
    assert_eq!(refused(&file, "memory.get", "[1]", &[]).0, 2);
    assert_eq!(
        refused(&file, "status", "{}", &["--scope", "operator"]).0,
        2
    );
    let (code, stderr) = refused(&file, "no.such", "{}", &[]);
    assert_eq!(code, 4, "{stderr}");
    let (code, stderr) = refused(&file, "plan.get", "{}", &["--scope", "subagent"]);
    assert_eq!(code, 5, "{stderr}");
    let (code, stderr) = refused(&file, "memory.set", r#"{"key": "k"}"#, &[]);
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("required"), "{stderr}");

    // Subagents are offered what [tools.grants] narrows them to.
    let (code, listed, _) = tool(&file, &["list", "--scope", "subagent", "--json"]);
    assert_eq!(code, 0);
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "memory.delete",
            "memory.get",
            "memory.list",
            "memory.pop",
            "memory.push",
            "memory.set",
            "memory.shift",
            "status"
        ]
    );
    assert!(listed["tools"][0]["inputSchema"].is_object());
    assert_eq!(listed["not_offered"], json!([]));

    // Killed: not running; started again on the same store: everything is there.
    agentd.kill();
    let (code, stderr) = refused(&file, "status", "{}", &[]);
    assert_eq!(code, 3, "{stderr}");
    let _agentd = Daemon::run(&file);
    until_up(&file);
    let got = call(&file, "memory.get", json!({"key": "k1"}), &[]);
    assert_eq!(got, json!({"value": {"a": 1}, "version": 1}));
    let q = call(&file, "memory.get", json!({"key": "q"}), &[]);
    assert_eq!(q, json!({"value": [2], "version": 5}));
    let got = call(&file, "artifact.get", json!({"name": "a.txt"}), C1);
    assert_eq!(got["text"], "hello");
    let plan = call(&file, "plan.get", json!({}), C1);
    assert_eq!(plan["plan"]["steps"][0]["status"], "done");
    let status = call(&file, "status", json!({}), &[]);
    assert_eq!(
        status["conversations"],
        json!([{"id": "inbox1", "inbox": 1, "tokens": 0}])
    );
    assert_eq!(status["units_finished"], 1);
    let (code, _) = refused(&file, "finish", again, C1);
    assert_eq!(code, 1);
    // What was deleted, listed and cleared before the kill, as it was left.
    let gone = call(&file, "memory.get", json!({"key": "gone"}), &[]);
    assert_eq!(gone, json!({"value": null, "version": 0}));
    let page = call(&file, "memory.list", json!({"limit": 2}), &[]);
    assert_eq!(
        page,
        json!({"keys": [
            {"key": "k1", "version": 1, "bytes": 7},
            {"key": "q", "version": 5, "bytes": 3},
        ], "next": "q"})
    );
    let rest = call(&file, "memory.list", json!({"after": "q"}), &[]);
    assert_eq!(
        rest,
        json!({"keys": [{"key": "signal", "version": 1, "bytes": 4}], "next": null})
    );
    let listed = call(&file, "artifact.list", json!({}), C1);
    assert_eq!(
        listed,
        json!({"artifacts": [{"name": "a.txt", "media_type": "text/plain", "bytes": 5}]})
    );
    let plan = call(&file, "plan.get", json!({}), &["--run", "r1"]);
    assert_eq!(plan, json!({"plan": null}));
}

/// `agentd run --config F --log-level debug`, its stderr written to a file; SIGKILLed when
/// dropped.
struct Logged {
    child: Child,
    stderr: PathBuf,
}

impl Logged {
    fn run(file: &TempFile, stderr: &Path) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args([
                "run",
                "--config",
                file.to_str().unwrap(),
                "--log-level",
                "debug",
            ])
            .env_remove("RUST_LOG")
            .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
            .spawn()
            .expect("agentd starts");
        Self {
            child,
            stderr: stderr.to_owned(),
        }
    }

    /// Everything written on stderr so far.
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap()
    }

    /// The first line of stderr that has every one of `parts`, waiting up to 15 s for it.
    fn line(&self, parts: &[&str]) -> String {
        let written = || {
            let stderr = self.stderr();
            let line = stderr.lines().find(|l| parts.iter().all(|p| l.contains(p)));
            line.map(str::to_owned)
                .ok_or_else(|| format!("no line {parts:?} in\n{stderr}"))
        };
        poll(Duration::from_secs(15), written)
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_call_is_logged_without_its_values_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = TempFile::new(&format!(
        "instance = \"tools\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n\
         [store]\npath = \"{}\"\n[[events.grants]]\nowner = \"ops\"\ntools = true\n",
        dir.path().join("store").display()
    ));
    let daemon = Logged::run(&file, &dir.path().join("stderr"));
    until_up(&file);

    // Neither what was given nor what came back is written.
    let (key, value) = ("key-7c1e0a", "value-5e7a93");
    let set = call(
        &file,
        "memory.set",
        json!({"key": key, "value": value}),
        &[],
    );
    assert_eq!(set, json!({"version": 1}));
    let got = call(&file, "memory.get", json!({"key": key}), &[]);
    assert_eq!(got["value"], value);
    let line = daemon.line(&["\"tool.call\"", "\"memory.set\""]);
    let parsed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(parsed["level"], "debug", "{line}");
    assert_eq!(
        [&parsed["scope"], &parsed["unit"], &parsed["outcome"]],
        ["root", "operator", "ok"],
        "{line}"
    );
    let at = |field: &str| line.find(&format!("\"{field}\":")).expect(field);
    let fields = ["event", "tool", "scope", "unit", "outcome"].map(at);
    assert!(fields.is_sorted(), "{line}");
    daemon.line(&["\"tool.call\"", "\"memory.get\""]);
    let stderr = daemon.stderr();
    assert!(!stderr.contains(key) && !stderr.contains(value), "{stderr}");

    // The events tools, for an owner: through `agentd tool call` and `agentd events call`.
    let ops = ["--owner", "ops"];
    let none = call(&file, "events.subscriptions", json!({}), &ops);
    assert_eq!(none, json!({"subscriptions": []}));
    let out = agentd(
        &file,
        &["events", "call", "--owner", "ops", "events.subscriptions"],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), none);
    let (code, stderr) = refused(&file, "events.subscriptions", "{}", &["--owner", "nobody"]);
    assert_eq!(code, 5, "{stderr}");
    let (code, stderr) = refused(&file, "events.subscriptions", "{}", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--owner"), "{stderr}");
    daemon.line(&[
        "\"tool.call\"",
        "\"events.subscriptions\"",
        "\"not_granted\"",
    ]);

    // Counted by tool and outcome, on /metrics.
    let addr = daemon.line(&["\"http.listening\""]);
    let addr: Value = serde_json::from_str(&addr).unwrap();
    let metrics = get(addr["addr"].as_str().unwrap(), "/metrics");
    for series in [
        "agent_tool_calls_total{tool=\"memory.set\",outcome=\"ok\"} 1",
        "agent_tool_calls_total{tool=\"events.subscriptions\",outcome=\"ok\"} 2",
        "agent_tool_calls_total{tool=\"events.subscriptions\",outcome=\"not_granted\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }

    // Arguments that are not JSON: bad usage.
    let (code, stderr) = refused(&file, "memory.get", r#"{"key": "#, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("JSON object"), "{stderr}");

    // The plain list: a line per tool offered, its name then its description; then a line
    // per contract tool not offered, its name then why.
    let (_, listed, _) = tool(&file, &["list", "--json"]);
    let not_offered = listed["not_offered"].as_array().unwrap();
    assert!(!not_offered.is_empty(), "{listed}");
    let offered = listed["tools"].as_array().unwrap().iter();
    let rows: Vec<&Value> = offered.chain(not_offered).collect();
    let out = agentd(&file, &["tool", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), rows.len(), "{text}");
    for (line, tool) in lines.iter().zip(rows) {
        let name = tool["name"].as_str().unwrap();
        let description = match tool["reason"].as_str() {
            Some(reason) => format!("not offered: {reason}"),
            None => tool["description"].as_str().unwrap().to_owned(),
        };
        let description = description.as_str();
        let between = line
            .strip_prefix(name)
            .and_then(|rest| rest.strip_suffix(description));
        assert!(
            between.is_some_and(|b| !b.is_empty() && b.trim().is_empty()),
            "{line}"
        );
    }
}

#[test]
fn concurrent_shifts_never_take_an_item_twice_nor_lose_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    let _agentd = Daemon::run(&file);
    until_up(&file);
    let n = 100;
    for item in 0..n {
        call(
            &file,
            "memory.push",
            json!({"key": "jobs", "value": item}),
            &[],
        );
    }
    let shifters: Vec<_> = (0..2)
        .map(|_| {
            let path = file.path().to_owned();
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                loop {
                    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
                        .args(["tool", "call", "--config", path.to_str().unwrap()])
                        .args(["memory.shift", r#"{"key": "jobs"}"#])
                        .output()
                        .expect("agentd runs");
                    assert!(out.status.success());
                    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
                    if answer["empty"] == true {
                        return taken;
                    }
                    taken.push(answer["value"].clone());
                }
            })
        })
        .collect();
    let taken: Vec<Value> = shifters
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    agentd_tools::testing::check_taken_once(&taken, n);
}
