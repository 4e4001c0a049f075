//! The instruction and the skills in `agentd run`, as a process against reference servers:
//! `agentd tool call instruction.read` shows the resource's text, read again when the server
//! says it changed, or on the refresh when the server offers no subscriptions, or at an MCP
//! Events occurrence bound into the instruction; `instruction.subscribe` and a reload switch
//! the URI. The skills of a source are listed (`skills.discovered`) and loaded with their
//! arguments and unloaded through the tools; a source not connected says so. Against the
//! Python SDK's server too: its resource is the instruction, read again when it says the
//! resource changed, and its prompts (none) are listed.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentd_tests::peers;
use common::{Daemon, TempFile, until};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

const COUNTER: &str = "demo://counter";

/// A configuration of `servers`, its store in `dir`, with `tail` after them.
fn config(dir: &Path, servers: &[(&str, String)], tail: &str) -> TempFile {
    let mut text = format!(
        "instance = \"instr\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        dir.display()
    );
    for (name, url) in servers {
        text.push_str(&format!(
            "[[mcp.servers]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        ));
    }
    text.push_str(tail);
    TempFile::new(&text)
}

/// `[instruction]` on `server`, `uri`, with `refresh`.
fn instruction(server: &str, uri: &str, refresh: &str) -> String {
    format!("[instruction]\nserver = \"{server}\"\nuri = \"{uri}\"\nrefresh = \"{refresh}\"\n")
}

/// `agentd tool call NAME ARGUMENTS EXTRA`: its exit status, its result, its stderr.
fn tool(file: &TempFile, name: &str, arguments: Value, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["tool", "call", "--config", file.to_str().unwrap()])
        .args(extra)
        .args([name, &arguments.to_string()])
        .output()
        .expect("agentd runs");
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// The result of a call that succeeded.
fn call(file: &TempFile, name: &str, arguments: Value, extra: &[&str]) -> Value {
    let (code, result, stderr) = tool(file, name, arguments, extra);
    assert_eq!(code, 0, "{name}: {stderr}");
    result
}

/// Waits, at most 20 s, until `instruction.read` reads `text`: its answer.
fn read_until(file: &TempFile, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, read, _) = tool(file, "instruction.read", json!({}), &[]);
        if code == 0 && read["text"] == text {
            return read;
        }
        assert!(Instant::now() < deadline, "not {text:?}: {read}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instruction_is_read_followed_and_switched() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(
        dir.path(),
        &[("docs", server.url())],
        &instruction("docs", COUNTER, "1h"),
    );
    let mut agentd = Daemon::run(&file);
    let read = read_until(&file, "0");
    assert_eq!(read["server"], "docs");
    assert_eq!(read["uri"], COUNTER);
    assert!(read["read_at_ms"].as_i64().unwrap() > 0, "{read}");
    // Subscribed: the server says the resource changed, and it is read again.
    until("subscribed", || server.listening(COUNTER) > 0).await;
    server.touch(COUNTER).await;
    let read = read_until(&file, "1");
    assert_eq!(read["subscribed"], true);
    // Read from every scope; switched by root alone.
    let sub = call(
        &file,
        "instruction.read",
        json!({}),
        &["--scope", "subagent"],
    );
    assert_eq!(sub["text"], "1");
    let greeting = json!({"uri": "demo://greeting"});
    let (code, _, stderr) = tool(
        &file,
        "instruction.subscribe",
        greeting.clone(),
        &["--scope", "subagent"],
    );
    assert_eq!(code, 5, "not granted: {stderr}");
    let nowhere = json!({"uri": "demo://greeting", "server": "nope"});
    let (code, _, stderr) = tool(&file, "instruction.subscribe", nowhere, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: not_found: "), "{stderr}");
    let switched = call(&file, "instruction.subscribe", greeting, &[]);
    assert_eq!(switched["text"], "hello");
    assert_eq!(switched["uri"], "demo://greeting");
    assert_eq!(switched["subscribed"], true);
    // The URI followed before is let go.
    let released = agentd.wait_for("mcp.unsubscribed", Some("docs"));
    assert_eq!(released["uri"], COUNTER);
    let listening = || server.listening(COUNTER) == 0 && server.listening("demo://greeting") > 0;
    until("the listen narrowed to the greeting", listening).await;

    // A reload naming another URI follows it.
    let text = std::fs::read_to_string(file.path()).unwrap();
    file.write(&text.replace(COUNTER, "demo://item/7"));
    agentd.signal("HUP");
    let read = read_until(&file, "item 7");
    assert_eq!(read["uri"], "demo://item/7");
    assert!(
        agentd
            .matching("instruction.subscribe.fail", None)
            .next()
            .is_none()
    );
    assert!(agentd.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_subscriptions_is_followed_by_its_refresh() {
    let mut options = Options::default();
    options.subscribe = false;
    options.modern = false;
    let server = ReferenceServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let file = config(
        dir.path(),
        &[("docs", server.url())],
        &instruction("docs", COUNTER, "500ms"),
    );
    let mut agentd = Daemon::run(&file);
    let unsupported = agentd.wait_for("instruction.subscribe.unsupported", Some("docs"));
    assert_eq!(
        (&unsupported["level"], &unsupported["uri"]),
        (&json!("info"), &json!(COUNTER))
    );
    let read = read_until(&file, "0");
    assert_eq!(read["subscribed"], false);
    // Nothing tells of the change: the refresh reads it.
    server.touch(COUNTER).await;
    read_until(&file, "1");
    assert!(!server.methods().iter().any(|m| m == "resources/subscribe"));
    assert_eq!(
        agentd
            .matching("instruction.subscribe.unsupported", None)
            .count(),
        1
    );
    assert!(agentd.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occurrence_bound_into_the_instruction_reads_it_again() {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options.subscribe = false;
    options.poll_ms = 1000;
    let server = ReferenceServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let tail = format!(
        "{}[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"instruction\"\n",
        instruction("ref", COUNTER, "1h")
    );
    let file = config(dir.path(), &[("ref", server.url())], &tail);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    read_until(&file, "0");
    // Changed, and nothing tells of it (no subscriptions, a refresh an hour away): the
    // occurrence does.
    server.touch(COUNTER).await;
    server.emit("ticket.created", json!({"id": 1}));
    let event = agentd.wait_for("instruction.event", Some("ref"));
    assert_eq!(
        (&event["level"], &event["event_type"]),
        (&json!("info"), &json!("ticket.created"))
    );
    read_until(&file, "1");
    assert!(agentd.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_discovered_loaded_and_unloaded() {
    let server = ReferenceServer::start(Options::default()).await;
    // A port nothing listens on.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", listener.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let file = config(
        dir.path(),
        &[("docs", server.url()), ("gone", gone)],
        "[skills]\nsources = [\"gone\", \"docs\"]\n",
    );
    let mut agentd = Daemon::run(&file);
    let discovered = agentd.wait_for("skills.discovered", Some("docs"));
    assert_eq!(
        (&discovered["count"], &discovered["skills"]),
        (&json!(1), &json!(["docs/greet"]))
    );
    let unavailable = agentd.wait_for("skills.source.unavailable", Some("gone"));
    assert_eq!(unavailable["level"], "warn");

    let c1 = ["--conversation", "c1"];
    let listed = call(&file, "skills.list", json!({}), &c1);
    assert_eq!(
        listed,
        json!({
            "skills": [{
                "name": "docs/greet",
                "server": "docs",
                "prompt": "greet",
                "description": null,
                "arguments": [{"name": "name", "description": null, "required": true}],
            }],
            "loaded": [],
        })
    );
    let bare = json!({"name": "docs/greet"});
    let (code, _, stderr) = tool(&file, "skills.load", bare, &c1);
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("/arguments/name"), "{stderr}");
    let load = json!({"name": "docs/greet", "arguments": {"name": "Ada"}});
    let loaded = call(&file, "skills.load", load, &c1);
    assert_eq!(
        loaded,
        json!({"name": "docs/greet", "server": "docs", "messages": 1, "bytes": 17, "loaded": ["docs/greet"]})
    );
    let got = server
        .log()
        .into_iter()
        .find(|l| l.method.as_deref() == Some("prompts/get"));
    let got = got.expect("prompts/get");
    assert_eq!(got.body["params"]["arguments"], json!({"name": "Ada"}));
    let other = call(&file, "skills.list", json!({}), &["--conversation", "c2"]);
    assert_eq!(other["loaded"], json!([]));
    let unload = json!({"name": "docs/greet"});
    let unloaded = call(&file, "skills.unload", unload, &c1);
    assert_eq!(unloaded, json!({"unloaded": true, "loaded": []}));
    let (code, _, stderr) = tool(&file, "skills.load", json!({"name": "gone/greet"}), &c1);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("agentd: not_found: "), "{stderr}");
    assert!(agentd.terminate().success());
}

/// The Python SDK's server: `demo://greeting` is the instruction, subscribed on its listen
/// and read again when its `touch` tool says the resource changed; its prompts, none, are
/// listed as a source's skills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_server_serves_the_instruction_and_its_prompts() {
    let peer = peers::python(false);
    let dir = tempfile::tempdir().unwrap();
    let tail = format!(
        "{}[skills]\nsources = [\"py\"]\n",
        instruction("py", "demo://greeting", "1h")
    );
    let file = config(dir.path(), &[("py", peer.url.clone())], &tail);
    let mut agentd = Daemon::run(&file);
    let discovered = agentd.wait_for("skills.discovered", Some("py"));
    assert_eq!(
        (&discovered["count"], &discovered["skills"]),
        (&json!(0), &json!([]))
    );
    let read = read_until(&file, "hello");
    assert_eq!(read["subscribed"], true, "{read}");
    let first = read["read_at_ms"].as_i64().unwrap();
    // The server says the resource changed: read again.
    let touched = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["call", "--config", file.to_str().unwrap(), "py", "touch"])
        .output()
        .expect("agentd runs");
    assert!(
        touched.status.success(),
        "{}",
        String::from_utf8_lossy(&touched.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let read = call(&file, "instruction.read", json!({}), &[]);
        if read["read_at_ms"].as_i64().unwrap() > first {
            assert_eq!(read["text"], "hello");
            break;
        }
        assert!(Instant::now() < deadline, "not read again: {read}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(agentd.terminate().success());
    drop(peer);
}
