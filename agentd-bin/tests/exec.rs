//! `exec` in the running daemon, through `agentd tool`: refused at load when enabled in a
//! build without the `exec` feature, not offered when not enabled, and, built with the
//! feature (`cargo test -p agentd-bin --features exec --test exec`) and enabled, a command
//! run in a folder under the store with a cleared environment, its output kept to the bound
//! and cut past it, its timeout, and the calls running at once.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Daemon, TempFile, agentd, poll, until_up};
use serde_json::Value;

/// A workflow whose one step calls `exec`.
const SHELL: &str = r#"
[[workflows]]
name = "shell"
[[workflows.steps]]
id = "echo"
type = "tool"
name = "exec"
arguments = { command = ["echo", "from a workflow"] }
"#;

/// A daemon's configuration: its store in `dir`, `exec` (TOML of `[security.exec]`), and
/// the workflow `shell`.
fn config(dir: &Path, exec: &str) -> TempFile {
    TempFile::new(&format!(
        "instance = \"exec\"\n[store]\npath = \"{}\"\n{exec}{SHELL}",
        dir.display()
    ))
}

/// Runs the workflow `shell`: the run, once it has ended.
fn shell(file: &TempFile) -> Value {
    let out = agentd(file, &["workflow", "run", "shell"]);
    assert!(out.status.success(), "{out:?}");
    let started: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = started["run"].as_str().unwrap().to_owned();
    poll(Duration::from_secs(20), || {
        let out = agentd(file, &["workflow", "status", &run]);
        let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        match status["status"].as_str() {
            Some("completed" | "failed") => Ok(status),
            _ => Err(format!("not ended: {status}")),
        }
    })
}

/// What `agentd tool ARGS` came to: its exit status, its stdout as JSON (null when it is
/// not) and its stderr.
fn tool(file: &TempFile, args: &[&str]) -> (i32, Value, String) {
    let out = agentd(file, &[&["tool"], args].concat());
    let result = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("an exit status"), result, stderr)
}

/// The names of the tools offered to `scope`.
fn offered(file: &TempFile, scope: &str) -> Vec<String> {
    let (code, list, stderr) = tool(file, &["list", "--scope", scope, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A daemon of `file`, answering.
fn daemon(file: &TempFile) -> Daemon {
    let daemon = Daemon::run(file);
    until_up(file);
    daemon
}

/// `exec` is neither listed for any scope nor run: `not_offered`, naming what would offer it.
fn assert_not_offered(file: &TempFile) {
    for scope in ["root", "workflow", "subagent"] {
        let names = offered(file, scope);
        assert!(names.iter().any(|n| n == "status"), "{names:?}");
        assert!(!names.iter().any(|n| n == "exec"), "{scope}: {names:?}");
    }
    let (code, _, stderr) = tool(file, &["call", "exec", r#"{"command": ["true"]}"#]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.starts_with("agentd: not_offered: "), "{stderr}");
    assert!(stderr.contains("security.exec.enabled"), "{stderr}");
    let run = shell(file);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "not_offered", "{run}");
}

#[test]
fn exec_is_not_offered_unless_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "");
    let _agentd = daemon(&file);
    assert_not_offered(&file);
    assert!(!dir.path().join("exec").exists());
}

#[test]
fn exec_disabled_with_a_policy_is_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(
        dir.path(),
        "[security.exec]\nenabled = false\ntimeout = \"5s\"\n",
    );
    let _agentd = daemon(&file);
    assert_not_offered(&file);
}

#[cfg(not(feature = "exec"))]
#[test]
fn exec_enabled_without_the_feature_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "[security.exec]\nenabled = true\n");
    for args in [&["run"][..], &["tool", "list"]] {
        let out = agentd(&file, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("security.exec.enabled"), "{stderr}");
        assert!(stderr.contains("without the exec feature"), "{stderr}");
    }
    assert!(!dir.path().join("control").exists(), "nothing started");
}

#[cfg(feature = "exec")]
mod enabled {
    use serde_json::json;

    use super::*;

    /// `[security.exec]` enabled, 256 bytes kept of each stream, at most 10 minutes a call,
    /// one call at a time.
    const ENABLED: &str = "[security.exec]\nenabled = true\noutput_max = 256\nconcurrency = 1\n";

    /// The answer of `exec` called with `arguments` as `scope`, which succeeded.
    fn exec(file: &TempFile, scope: &str, arguments: Value) -> Value {
        let arguments = arguments.to_string();
        let (code, answer, stderr) = tool(file, &["call", "exec", &arguments, "--scope", scope]);
        assert_eq!(code, 0, "{arguments}: {stderr}");
        answer
    }

    #[test]
    fn exec_runs_commands_bounded_when_built_and_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(dir.path(), ENABLED);
        let _agentd = daemon(&file);
        for scope in ["root", "workflow", "subagent"] {
            assert!(offered(&file, scope).iter().any(|n| n == "exec"), "{scope}");
        }

        // Argv as it is, no shell; the answer whole.
        let echo = exec(&file, "root", json!({"command": ["echo", "a  b", "$HOME"]}));
        assert_eq!(echo["stdout"], "a  b $HOME\n");
        assert_eq!(echo["exit_code"], 0);
        assert_eq!(echo["signal"], Value::Null);
        assert_eq!(echo["timed_out"], false);
        assert_eq!(echo["truncated"], json!({"stdout": false, "stderr": false}));
        assert!(echo["duration_ms"].is_u64(), "{echo}");

        // The environment cleared, the folder under the store, and gone after the call.
        let env = exec(&file, "workflow", json!({"command": ["env"]}));
        let mut lines: Vec<&str> = env["stdout"].as_str().unwrap().lines().collect();
        lines.sort_unstable();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let home = lines[0].strip_prefix("HOME=").unwrap();
        assert_eq!(
            Path::new(home).parent(),
            Some(dir.path().join("exec").as_path())
        );
        assert_eq!(lines[1], "PATH=/usr/local/bin:/usr/bin:/bin");
        assert_eq!(lines[2], format!("TMPDIR={home}"));
        assert!(!Path::new(home).exists());

        // Input given, and 256 bytes of each stream kept: at the bound, and past it.
        let args = json!({"command": ["sh", "-c", "cat; printf %0257d 0 >&2"],
                          "stdin": "i".repeat(256)});
        let at = exec(&file, "subagent", args);
        assert_eq!(at["stdout"], "i".repeat(256));
        assert_eq!(at["stderr"], "0".repeat(256));
        assert_eq!(at["truncated"], json!({"stdout": false, "stderr": true}));
        let args = json!({"command": ["head", "-c", "1000000", "/dev/zero"]});
        let past = exec(&file, "root", args);
        assert_eq!(past["stdout"].as_str().unwrap().len(), 256);
        assert_eq!(past["truncated"]["stdout"], true);
        assert_eq!(past["exit_code"], 0);

        // Its timeout kills it; one past the maximum is refused.
        let slow = json!({"command": ["sh", "-c", "sleep 1000 & sleep 1000"], "timeout": "1s"});
        let cut = exec(&file, "root", slow);
        assert_eq!(cut["timed_out"], true);
        assert_eq!(cut["signal"], 9);
        assert_eq!(cut["exit_code"], Value::Null);
        let args = r#"{"command": ["true"], "timeout": "11m"}"#;
        let (code, _, stderr) = tool(&file, &["call", "exec", args]);
        assert_eq!(code, 6, "{stderr}");
        assert!(stderr.contains("timeout_max"), "{stderr}");

        // Odd commands are typed refusals.
        let refusals = [
            (r#"{"command": []}"#, 6, "invalid_arguments"),
            (r#"{"command": ["a\u0000b"]}"#, 6, "invalid_arguments"),
            (r#"{"command": ["surely-no-such-program"]}"#, 1, "not_found"),
            (r#"{"command": ["/"]}"#, 1, "cannot_start"),
        ];
        for (args, status, word) in refusals {
            let (code, _, stderr) = tool(&file, &["call", "exec", args]);
            assert_eq!(code, status, "{args}: {stderr}");
            assert!(stderr.contains(word), "{args}: {stderr}");
        }
        // One call at a time: a second one while the first runs is refused.
        let marks = tempfile::tempdir().unwrap();
        let (started, go) = (marks.path().join("started"), marks.path().join("go"));
        let script = format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
            started.display(),
            go.display()
        );
        std::thread::scope(|scope| {
            let first =
                scope.spawn(|| exec(&file, "root", json!({"command": ["sh", "-c", script]})));
            poll(Duration::from_secs(20), || {
                started.exists().then_some(()).ok_or("not started")
            });
            let (code, _, stderr) = tool(&file, &["call", "exec", r#"{"command": ["true"]}"#]);
            assert_eq!(code, 1, "{stderr}");
            assert!(stderr.contains("cannot_start"), "{stderr}");
            assert!(stderr.contains("security.exec.concurrency (1)"), "{stderr}");
            std::fs::write(&go, "").unwrap();
            assert_eq!(first.join().unwrap()["exit_code"], 0);
        });
        assert_eq!(
            exec(&file, "root", json!({"command": ["true"]}))["exit_code"],
            0
        );

        // A workflow's tool step runs it as the workflow scope.
        let run = shell(&file);
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["output"]["stdout"], "from a workflow\n", "{run}");
        let leftovers = std::fs::read_dir(dir.path().join("exec")).unwrap().count();
        assert_eq!(leftovers, 0, "every call's folder removed");
    }

    /// The daemon raises its soft `RLIMIT_NOFILE` past the 66 it was started with (its
    /// budget here is 68); its commands are given back 66.
    #[test]
    fn exec_commands_get_the_descriptor_limit_the_daemon_started_with() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(dir.path(), ENABLED);
        let _agentd = Daemon::run_after(&file, "ulimit -Sn 66 && exec \"$@\"");
        until_up(&file);
        let got = exec(
            &file,
            "root",
            json!({"command": ["sh", "-c", "ulimit -Sn"]}),
        );
        assert_eq!(got["stdout"], "66\n", "{got}");
    }

    /// A file of `file_max` bytes is written; one byte past it ends the writer with
    /// `SIGXFSZ`, which the answer says.
    #[test]
    fn exec_commands_write_files_up_to_file_max() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(dir.path(), &format!("{ENABLED}file_max = 4096\n"));
        let _agentd = daemon(&file);
        let dd = |bs: &str| json!({"command": ["dd", "if=/dev/zero", "of=f", "count=1", bs]});
        let at = exec(&file, "root", dd("bs=4096"));
        assert_eq!(
            (&at["exit_code"], &at["signal"]),
            (&json!(0), &Value::Null),
            "{at}"
        );
        let past = exec(&file, "root", dd("bs=4097"));
        assert_eq!(
            (&past["exit_code"], &past["signal"]),
            (&Value::Null, &json!(25)),
            "{past}"
        );
    }
}
