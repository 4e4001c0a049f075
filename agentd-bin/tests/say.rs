//! `agentd say` on a daemon whose agent does not run (no model is configured): exit 4,
//! nothing sent; on no daemon: exit 3. Answers come with a model (the agent's tests).

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Daemon, TempFile};

/// `agentd ARGS --config F`, run to its end.
fn agentd(file: &TempFile, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(args)
        .args(["--config", file.to_str().unwrap()])
        .output()
        .expect("agentd runs")
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
    let deadline = Instant::now() + Duration::from_secs(15);
    let said = loop {
        let said = agentd(&file, &["say", "--conversation", "c1", "hello"]);
        if said.status.code() != Some(3) || Instant::now() > deadline {
            break said;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(said.status.code(), Some(4), "{said:?}");
    let stderr = String::from_utf8_lossy(&said.stderr);
    assert!(
        stderr.starts_with("agentd: no_agent: the agent is not running"),
        "{stderr}"
    );
    assert!(said.stdout.is_empty());
    // Nothing was sent.
    let status = agentd(&file, &["tool", "call", "status"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["conversations"], serde_json::json!([]));
    daemon.terminate();
}
