//! `agentd demo` as a user runs it: exit 0, a summary on stdout (the agent's turn's
//! transcript with it), NDJSON log lines on stderr.

use std::process::Command;

use serde_json::{Value, json};

#[test]
fn the_demo_connects_in_both_eras_calls_and_sees_a_change() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .arg("demo")
        .output()
        .expect("agentd runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for expected in [
        "weather-2026: reached at 2026-07-28 (5 tools); add(2, 3) = 5",
        "weather-2025: reached at 2025-11-25 (5 tools); add(2, 3) = 5",
        "weather-2026: subscribed to demo://counter; it changed",
        "weather-2025: subscribed to demo://counter; it changed",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in\n{stdout}");
    }
    // The agent's turn against the first server, with the embedded scripted model: the
    // transcript as the store keeps it.
    let turn = [
        "  root: one turn of the embedded scripted model",
        "    user: What is 2 + 3? Keep the sum in memory as \"sum\".",
        "    assistant calls weather-2026__add({\"a\": 2, \"b\": 3})",
        "    tool: 5",
        "    assistant calls memory_set({\"key\": \"sum\", \"value\": 5})",
        "    tool: {\"version\":1}",
        "    assistant: 2 + 3 = 5; I kept it in memory as \"sum\".",
    ]
    .join("\n");
    assert!(stdout.contains(&turn), "{turn}\nin\n{stdout}");
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(
        events,
        [
            "mcp.connect",
            "mcp.unsubscribed",
            "mcp.connect",
            "mcp.unsubscribed"
        ]
    );
    for line in &lines {
        assert_eq!(line["level"], "info");
        assert_eq!(line["instance"], "demo");
        assert!(line["ts"].as_str().is_some_and(|ts| ts.ends_with('Z')));
    }
    for (line, protocol) in [&lines[0], &lines[2]]
        .into_iter()
        .zip(["2026-07-28", "2025-11-25"])
    {
        assert_eq!(line["protocol"], protocol);
        assert_eq!(line["tools"], 5);
    }
    for line in [&lines[1], &lines[3]] {
        assert_eq!(line["uri"], "demo://counter");
        assert_eq!(line["reason"], "unowned");
    }
    // The envelope comes first, in a fixed order.
    assert!(stderr.starts_with(r#"{"ts":"#), "{stderr}");
}

#[test]
fn revisions_lists_both_eras() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .arg("revisions")
        .output()
        .expect("agentd runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("2026-07-28  (modern era)"), "{stdout}");
    assert!(stdout.contains("2025-11-25  (legacy era)"), "{stdout}");
}

#[test]
fn capabilities_list_the_revisions_and_the_internal_tools() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .arg("--capabilities")
        .output()
        .expect("agentd runs");
    assert!(out.status.success());
    let caps: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(caps["revisions"][0], "2026-07-28");
    assert!(
        caps["revisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "2025-11-25")
    );
    let tools = caps["internal_tools"].as_array().unwrap();
    assert_eq!(tools.len(), 58);
    let ask = tools.iter().find(|t| t["name"] == "ask_human").unwrap();
    assert_eq!(
        ask["grants"],
        serde_json::json!(["root", "workflow", "subagent"])
    );
    assert_eq!(
        ask["inputSchema"]["required"],
        serde_json::json!(["question", "schema"])
    );
    assert_eq!(ask["built"], true);
    assert_eq!(ask["outputSchema"]["oneOf"].as_array().unwrap().len(), 2);
    // A contract: built here, its answer the implementing tool's result.
    let run = tools.iter().find(|t| t["name"] == "code.run").unwrap();
    assert_eq!(
        (&run["built"], &run["contract"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(run["outputSchema"]["required"], json!(["content"]));
    assert_eq!(tools.iter().filter(|t| t["contract"] == true).count(), 7);
    let workflow = tools.iter().find(|t| t["name"] == "workflow.run").unwrap();
    assert_eq!(workflow["built"], true);
    let required = workflow["outputSchema"]["required"].as_array().unwrap();
    assert!(required.contains(&Value::from("run")), "{required:?}");
    let think = tools.iter().find(|t| t["name"] == "think").unwrap();
    assert_eq!(think["built"], true);
    for tool in tools {
        assert_eq!(tool["built"], tool.get("outputSchema").is_some(), "{tool}");
    }
    let shift = tools.iter().find(|t| t["name"] == "memory.shift").unwrap();
    assert_eq!(shift["outputSchema"]["oneOf"].as_array().unwrap().len(), 2);
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"));
    let subscribe = tools
        .iter()
        .find(|t| t["name"] == "events.subscribe")
        .unwrap();
    assert_eq!(subscribe["grants"], serde_json::json!(["root", "workflow"]));
    assert_eq!(
        subscribe["inputSchema"]["required"],
        serde_json::json!(["server", "event", "into"])
    );
}
