//! `agentd check`, `tools` and `call` with a configuration file, against reference servers.

mod common;

use std::process::{Command, Output};

use common::TempFile;
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use serde_json::Value;

/// Writes `text` to a fresh file, removed when the returned guard is dropped.
fn config_file(text: &str) -> TempFile {
    TempFile::new(text)
}

async fn agentd(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(&args)
            .env("DEMO_TOKEN", "t0ken")
            .output()
            .expect("agentd runs")
    })
    .await
    .expect("the command finished")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn servers(entries: &[(&str, String)]) -> String {
    let mut text = String::from("instance = \"cli\"\n[mcp]\ndefault_timeout = \"5s\"\n");
    for (name, url) in entries {
        text.push_str(&format!(
            "[[mcp.servers]]\nname = \"{name}\"\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{DEMO_TOKEN}}\" }}\n"
        ));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_json_reports_each_server_and_names_both_refusals() {
    let modern = ReferenceServer::start(Options::default()).await;
    let refusing = ReferenceServer::start(Options::default()).await;
    refusing.script("server/discover", Fault::Status(404, None), Times::Once);
    refusing.script(
        "initialize",
        Fault::RpcError {
            status: 400,
            code: -32602,
            message: "Unsupported protocol version".into(),
            data: None,
        },
        Times::Once,
    );
    let path = config_file(&servers(&[("good", modern.url()), ("bad", refusing.url())]));
    let out = agentd(args(&[
        "check",
        "--json",
        "--config",
        path.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(out.status.code(), Some(1), "one server failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0]["server"], "good");
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[0]["protocol"], "2026-07-28");
    assert_eq!(lines[0]["tools"], 5);
    assert_eq!(lines[0]["error"], Value::Null);
    assert_eq!(lines[1]["ok"], false);
    let error = lines[1]["error"].as_str().unwrap();
    assert!(
        error.contains("server/discover refused") && error.contains("initialize refused"),
        "{error}"
    );
    // The configured header went out, its variable read from the environment.
    assert_eq!(
        modern.log()[0].header("authorization"),
        Some("Bearer t0ken")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#""event":"mcp.connect.fail""#), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exits_0_when_all_connect_in_either_era() {
    let modern = ReferenceServer::start(Options::default()).await;
    let mut legacy_options = Options::default();
    legacy_options.modern = false;
    let legacy = ReferenceServer::start(legacy_options).await;
    let path = config_file(&servers(&[("a", modern.url()), ("b", legacy.url())]));
    let out = agentd(args(&["check", "--config", path.to_str().unwrap()])).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("a: ok, 2026-07-28 (5 tools)"), "{stdout}");
    assert!(stdout.contains("b: ok, 2025-11-25 (5 tools)"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_header_is_refused_at_load_naming_it() {
    let text = "[[mcp.servers]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Mcp-Session-Id = \"x\" }\n";
    let path = config_file(text);
    let out = agentd(args(&["check", "--config", path.to_str().unwrap()])).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":4:") && stderr.contains("Mcp-Session-Id"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_lists_and_call_prints_the_result() {
    let server = ReferenceServer::start(Options::default()).await;
    let path = config_file(&servers(&[("demo", server.url())]));
    let config = path.to_str().unwrap();
    let out = agentd(args(&["tools", "--config", config])).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("demo/add\t")),
        "{stdout}"
    );

    let out = agentd(args(&[
        "call",
        "--config",
        config,
        "demo",
        "add",
        r#"{"a":20,"b":22}"#,
    ]))
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["content"][0]["text"], "42");
    let call = server
        .log()
        .into_iter()
        .find(|l| l.body["method"] == "tools/call")
        .unwrap();
    assert_eq!(call.body["params"]["_meta"]["agent/instance"], "cli");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_with_an_invalid_header_annotation_is_dropped_and_logged() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script(
        "tools/list",
        Fault::Result(serde_json::json!({"tools": [
            {"name": "ok", "inputSchema": {"type": "object"}},
            {"name": "bad\u{1b}[1m", "inputSchema": {"type": "object", "properties": {
                "n": {"type": "number", "x-mcp-header": "N"}}}},
        ]})),
        Times::Once,
    );
    let path = config_file(&servers(&[("s", server.url())]));
    let out = agentd(args(&["tools", "--config", path.to_str().unwrap()])).await;
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l == "s/ok\t"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dropped: Value = stderr
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["event"] == "mcp.tool.dropped")
        .expect("mcp.tool.dropped");
    assert_eq!(dropped["level"], "warn");
    assert_eq!(dropped["server"], "s");
    assert_eq!(dropped["tool"], "bad[1m", "control characters stripped");
    assert!(
        dropped["reason"].as_str().unwrap().contains("\"N\""),
        "{dropped}"
    );
}

/// A tool that ran and failed: its result printed, exit 1, so a script can tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_exits_1_when_the_tool_ran_and_failed() {
    let server = ReferenceServer::start(Options::default()).await;
    let path = config_file(&servers(&[("demo", server.url())]));
    let config = path.to_str().unwrap();
    let out = agentd(args(&["call", "--config", config, "demo", "fail"])).await;
    assert_eq!(out.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["isError"], true);
    let out = agentd(args(&["call", "--config", config, "nope", "fail"])).await;
    assert_eq!(out.status.code(), Some(2), "no such server");
    let out = agentd(args(&["call", "--config", config, "demo", "add", "[1]"])).await;
    assert_eq!(out.status.code(), Some(2), "arguments that are no object");
}

/// What an operator diagnosing a server asks, in both eras: its resources and templates,
/// one resource read, its prompts, and one prompt got with its arguments; each plain and
/// as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_read_prompts_and_prompt_in_both_eras() {
    let modern = ReferenceServer::start(Options::default()).await;
    let legacy = ReferenceServer::start(Options::default()).await;
    legacy.script("server/discover", Fault::Status(404, None), Times::Once);
    let path = config_file(&servers(&[("new", modern.url()), ("old", legacy.url())]));
    let config = path.to_str().unwrap();
    let run = |list: &[&str]| {
        let mut all = args(list);
        all.splice(1..1, ["--config".to_owned(), config.to_owned()]);
        agentd(all)
    };
    let stdout = |out: &Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    let listed = stdout(&run(&["resources"]).await);
    for server in ["new", "old"] {
        assert!(
            listed.contains(&format!("{server}\tdemo://counter\tcounter\ttext/plain")),
            "{listed}"
        );
        assert!(
            listed.contains(&format!("{server}\tdemo://item/{{id}}\titem\t")),
            "{listed}"
        );
    }
    let listed = stdout(&run(&["resources", "--json"]).await);
    let lines: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["server"] == "old" && l["resource"]["uri"] == "demo://greeting")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["server"] == "new" && l["template"]["uriTemplate"] == "demo://item/{id}")
    );

    for server in ["new", "old"] {
        let read = stdout(&run(&["read", server, "demo://counter"]).await);
        assert_eq!(read.trim(), "0", "{server}");
        let read = stdout(&run(&["read", server, "demo://counter", "--json"]).await);
        let read: Value = serde_json::from_str(&read).unwrap();
        assert_eq!(read["contents"][0]["uri"], "demo://counter");
    }

    let listed = stdout(&run(&["prompts"]).await);
    assert!(
        listed.lines().any(|l| l.starts_with("new/greet\tname*\t")),
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.starts_with("old/greet\tname*\t")),
        "{listed}"
    );
    let listed = stdout(&run(&["prompts", "--json"]).await);
    assert!(listed.contains(r#""name":"greet""#), "{listed}");

    for server in ["new", "old"] {
        let got = stdout(&run(&["prompt", server, "greet", r#"{"name":"Ada"}"#]).await);
        assert!(got.starts_with("user: "), "{got}");
        assert!(got.contains("Ada"), "{got}");
        let got = stdout(&run(&["prompt", server, "greet", r#"{"name":"Ada"}"#, "--json"]).await);
        let got: Value = serde_json::from_str(&got).unwrap();
        assert_eq!(got["messages"][0]["role"], "user");
    }
    let refused = run(&["prompt", "new", "greet", r#"{"name":1}"#]).await;
    assert_eq!(refused.status.code(), Some(2), "arguments are strings");
    let missing = run(&["read", "new", "demo://nope"]).await;
    assert_eq!(missing.status.code(), Some(1));
}
