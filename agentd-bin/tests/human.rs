//! Human gates in the running daemon: `ask_human` called through `agentd tool call` waits for
//! a person; `agentd human list` shows the question, `agentd human answer` answers it (a
//! refused answer leaves it open, with its exit status); the answer is the tool's result.
//! A question left open by a killed daemon is cancelled at the next start.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Daemon, TempFile, agentd, poll, until_up};
use serde_json::{Value, json};

/// A daemon's configuration: its store in `dir`.
fn config(dir: &Path) -> TempFile {
    TempFile::new(&format!(
        "instance = \"humans\"\n[store]\npath = \"{}\"\n",
        dir.display()
    ))
}

/// `agentd human ARGS`: its exit status, stdout and stderr.
fn human(file: &TempFile, args: &[&str]) -> (i32, String, String) {
    let out = agentd(file, &[&["human"], args].concat());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), stdout, stderr)
}

/// The open questions, as `agentd human list --json` prints them.
fn listed(file: &TempFile) -> Vec<Value> {
    let (code, stdout, stderr) = human(file, &["list", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str::<Vec<Value>>(&stdout).expect(&stdout)
}

/// The open questions once there are `n`, waiting at most 15 s.
fn until_listed(file: &TempFile, n: usize) -> Vec<Value> {
    let listed = || {
        let open = listed(file);
        match open.len() == n {
            true => Ok(open),
            false => Err(format!("not {n} open: {open:?}")),
        }
    };
    poll(Duration::from_secs(15), listed)
}

/// `agentd tool call ask_human ARGUMENTS` in conversation c1, in the background.
fn ask(file: &TempFile, arguments: &Value) -> Child {
    Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["tool", "call", "--config", file.to_str().unwrap()])
        .args(["--conversation", "c1", "ask_human", &arguments.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentd runs")
}

/// Whether `child` is still running.
fn running(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

#[test]
fn a_question_is_listed_refused_and_answered() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    assert_eq!(listed(&file), Vec::<Value>::new());

    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    });
    let arguments = json!({"question": "What is your name?", "schema": schema, "timeout": "10m"});
    let mut asking = ask(&file, &arguments);
    let open = until_listed(&file, 1);
    let question = &open[0];
    let id = question["id"].as_u64().expect("an id");
    assert_eq!(question["origin"], "ask_human");
    assert_eq!(question["from"], "conversation:c1");
    assert_eq!(question["question"], "What is your name?");
    assert_eq!(question["schema"], schema);
    let (code, stdout, _) = human(&file, &["list"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with(&format!(
            "{id}  ask_human  conversation:c1  \"What is your name?\"  {{"
        )),
        "{stdout}"
    );

    // Refused: the answer does not fit, is not JSON, or names no open question.
    let id_arg = id.to_string();
    let (code, _, stderr) = human(&file, &["answer", &id_arg, r#"{"name": 1}"#]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.starts_with("agentd: bad_answer: "), "{stderr}");
    assert!(
        stderr.contains("\"/name\"") && stderr.contains("type"),
        "{stderr}"
    );
    let (code, _, stderr) = human(&file, &["answer", &id_arg, "{name: Ada}"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = human(&file, &["answer", &(id + 1).to_string(), "{}"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.starts_with("agentd: not_found: "), "{stderr}");
    let (code, _, _) = human(&file, &["answer", "one", "{}"]);
    assert_eq!(code, 2);
    assert!(running(&mut asking), "still asked");
    assert_eq!(listed(&file).len(), 1, "still open");

    // Answered: the tool call prints the answer.
    let (code, stdout, stderr) = human(&file, &["answer", &id_arg, r#"{"name": "Ada"}"#]);
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result, json!({"id": id, "answered": true}));
    let out = asking.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply, json!({"id": id, "answer": {"name": "Ada"}}));
    assert_eq!(listed(&file), Vec::<Value>::new());
    let (code, _, _) = human(&file, &["answer", &id_arg, r#"{"name": "Bo"}"#]);
    assert_eq!(code, 4, "answered once");

    let asked = daemon.wait_for("human.asked", None);
    assert_eq!(
        (&asked["id"], &asked["origin"], &asked["from"]),
        (&json!(id), &json!("ask_human"), &json!("conversation:c1"))
    );
    daemon.wait_for("human.answered", None);

    // Unanswered within its timeout: the call answers cancelled, the question withdrawn.
    let short = json!({"question": "Quick?", "schema": {"type": "boolean"}, "timeout": 200});
    let out = ask(&file, &short).wait_with_output().unwrap();
    assert!(out.status.success());
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["cancelled"], true, "{reply}");
    assert_eq!(listed(&file), Vec::<Value>::new());
    daemon.wait_for("human.withdrawn", None);

    assert!(daemon.terminate().success());
    let (code, _, stderr) = human(&file, &["list"]);
    assert_eq!(code, 3, "{stderr}");
}

/// A question open when the daemon is killed is cancelled at the next start: nobody waits on
/// it any more.
#[test]
fn a_question_left_open_by_a_kill_is_cancelled_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let arguments = json!({"question": "Still there?", "schema": {"type": "boolean"}});
    let asking = ask(&file, &arguments);
    let id = until_listed(&file, 1)[0]["id"].as_u64().unwrap();
    daemon.kill();
    let out = asking.wait_with_output().unwrap();
    assert!(!out.status.success(), "the call has no answer");

    let _daemon = Daemon::run(&file);
    until_up(&file);
    assert_eq!(listed(&file), Vec::<Value>::new());
    let (code, _, stderr) = human(&file, &["answer", &id.to_string(), "true"]);
    assert_eq!(code, 4, "{stderr}");
}
