//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against
//! `conformance-client` (`src/bin/conformance_client.rs`), one test per client scenario:
//!
//! - suite 0.1.16, 2025-11-25: `initialize`, `tools_call`, `elicitation-sep1034-client-defaults`,
//!   `sse-retry`;
//! - suite 0.2.0-alpha.12, the same at `--spec-version 2025-11-25`, and at
//!   `--spec-version 2026-07-28`: `tools_call`, `request-metadata`,
//!   `sep-2322-client-request-state`, `http-standard-headers`, `http-custom-headers`,
//!   `http-invalid-tool-headers`, `json-schema-ref-no-deref`.
//!
//! Each test runs the suite's CLI (`client --command <conformance-client> --scenario …`) on
//! node 22, both installed by `tests/peers/install.sh` under the peers directory; a missing
//! install fails the test with the command to run, it never skips. The CLI starts the
//! scenario's mock server, runs the client with the server's URL, and writes `checks.json`;
//! a test passes when the CLI succeeds and no check is a `FAILURE` or a `WARNING` (the CLI
//! counts warnings as failures too).
//!
//! The mock servers listen on 127.0.0.1 only: node runs with `peers/loopback.cjs` (every
//! `listen()` on 127.0.0.1) and `peers/conformance/sync-listen.cjs` (which keeps that bind
//! synchronous: several mocks read `server.address().port` right after `listen(0)`).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentd_tests::peers::peers_dir;
use serde_json::Value;

/// The client under test.
const CLIENT: &str = env!("CARGO_BIN_EXE_conformance-client");
/// The bound on one run of the CLI (its own client timeout is 30 s).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// The stamp `install.sh` writes: a copy of the pins it installed.
const STAMP: &str = ".agentd-peer-stamp";
const NODE22_PACKAGE: &str = include_str!("../peers/node22/package.json");
const NODE22_LOCK: &str = include_str!("../peers/node22/package-lock.json");
const STABLE_PACKAGE: &str = include_str!("../peers/conformance/package.json");
const STABLE_LOCK: &str = include_str!("../peers/conformance/package-lock.json");
const ALPHA_PACKAGE: &str = include_str!("../peers/conformance-alpha/package.json");
const ALPHA_LOCK: &str = include_str!("../peers/conformance-alpha/package-lock.json");

/// Which release line of the suite runs.
#[derive(Debug, Clone, Copy)]
enum Suite {
    /// 0.1.16: 2025-11-25 only; sets no `MCP_CONFORMANCE_PROTOCOL_VERSION`.
    Stable,
    /// 0.2.0-alpha.12: 2025-11-25 and 2026-07-28.
    Alpha,
}

impl Suite {
    fn dir(self) -> &'static str {
        match self {
            Self::Stable => "conformance",
            Self::Alpha => "conformance-alpha",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Stable => "@modelcontextprotocol/conformance 0.1.16",
            Self::Alpha => "@modelcontextprotocol/conformance 0.2.0-alpha.12",
        }
    }

    fn pins(self) -> String {
        match self {
            Self::Stable => format!("{STABLE_PACKAGE}{STABLE_LOCK}"),
            Self::Alpha => format!("{ALPHA_PACKAGE}{ALPHA_LOCK}"),
        }
    }
}

/// `tests/peers/` in the source tree.
fn peers_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// Panics with the install command unless `stamp` holds exactly `pins` and `entry` exists.
fn require_installed(name: &str, dir: &Path, pins: &str, entry: &Path) {
    let current = fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == pins) && entry.is_file();
    if current {
        return;
    }
    let command = match std::env::var_os("AGENTD_PEERS") {
        Some(d) if !d.is_empty() => {
            format!("bash tests/peers/install.sh '{}'", peers_dir().display())
        }
        _ => "bash tests/peers/install.sh".to_owned(),
    };
    panic!(
        "{name} is not installed, or is out of date, in {}\n\
         install it from the repository root with:\n\n    {command}\n",
        dir.display()
    );
}

/// Kills the CLI (and so its mock server) if the test ends before it does.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A fresh directory for one run's results, kept when the test fails.
fn out_dir(scenario: &str) -> PathBuf {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "agentd-conformance-{}-{}-{scenario}-{nanos}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed),
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The first `checks.json` under `dir` (the CLI writes `<dir>/<scenario>-<time>/checks.json`).
fn find_checks(dir: &Path) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in &entries {
        if path.file_name().is_some_and(|n| n == "checks.json") && path.is_file() {
            return Some(path.clone());
        }
    }
    entries
        .iter()
        .filter(|p| p.is_dir())
        .find_map(|p| find_checks(p))
}

fn read_text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| format!("({} unreadable: {e})", path.display()))
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs one scenario of `suite` against the client and asserts that every check passed.
fn conformance(suite: Suite, scenario: &str, spec_version: Option<&str>) {
    let peers = peers_dir();
    let node_dir = peers.join("node22");
    let node = node_dir
        .join("node_modules")
        .join("node")
        .join("bin")
        .join("node");
    require_installed(
        "node 22 (npm package node 22.23.3)",
        &node_dir,
        &format!("{NODE22_PACKAGE}{NODE22_LOCK}"),
        &node,
    );
    let suite_dir = peers.join(suite.dir());
    let main = suite_dir
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("conformance")
        .join("dist")
        .join("index.js");
    require_installed(suite.name(), &suite_dir, &suite.pins(), &main);
    // The CLI splits the command on spaces and runs it through a shell.
    assert!(
        !CLIENT.contains(char::is_whitespace),
        "the conformance client's path must not contain whitespace: {CLIENT}"
    );

    let out = out_dir(&scenario.replace('/', "_"));
    let harness_out = out.join("harness.stdout.txt");
    let harness_err = out.join("harness.stderr.txt");
    let file = |p: &Path| {
        fs::File::create(p).unwrap_or_else(|e| panic!("cannot create {}: {e}", p.display()))
    };
    let mut cmd = Command::new(&node);
    cmd.arg("--require")
        .arg(peers_src().join("loopback.cjs"))
        .arg("--require")
        .arg(peers_src().join("conformance").join("sync-listen.cjs"))
        .arg(&main)
        .arg("client")
        .args(["--command", CLIENT, "--scenario", scenario])
        .arg("-o")
        .arg(&out);
    if let Some(version) = spec_version {
        cmd.args(["--spec-version", version]);
    }
    cmd.current_dir(&suite_dir)
        .env_remove("MCP_CONFORMANCE_SCENARIO")
        .env_remove("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .env_remove("MCP_CONFORMANCE_CONTEXT")
        .env_remove("NODE_OPTIONS")
        .stdin(Stdio::null())
        .stdout(file(&harness_out))
        .stderr(file(&harness_err));
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the conformance suite ({cmd:?}): {e}"));
    let mut running = Running(child);
    let status = wait(&mut running, RUN_TIMEOUT);

    let checks_file = find_checks(&out);
    let checks: Vec<Value> = checks_file
        .as_deref()
        .and_then(|p| serde_json::from_str(&read_text(p)).ok())
        .unwrap_or_default();
    let status_of = |c: &Value| c["status"].as_str().unwrap_or("").to_owned();
    let failing: Vec<&Value> = checks
        .iter()
        .filter(|c| matches!(status_of(c).as_str(), "FAILURE" | "WARNING"))
        .collect();
    let passed = checks.iter().filter(|c| status_of(c) == "SUCCESS").count();
    let ok = status.is_some_and(|s| s.success()) && failing.is_empty() && passed > 0;
    if ok {
        let _ = fs::remove_dir_all(&out);
        return;
    }

    let mut why = format!(
        "conformance scenario {scenario} ({}{}) failed\nCLI: {}\n",
        suite.name(),
        spec_version.map_or(String::new(), |v| format!(", --spec-version {v}")),
        match status {
            Some(s) => s.to_string(),
            None => format!("did not finish within {} s, killed", RUN_TIMEOUT.as_secs()),
        },
    );
    match &checks_file {
        None => why.push_str("no checks.json was written\n"),
        Some(p) if checks.is_empty() => {
            let _ = writeln!(why, "{} holds no checks", p.display());
        }
        Some(_) => {
            let _ = writeln!(why, "{passed} checks passed; failing checks:");
            for c in &failing {
                let _ = writeln!(
                    why,
                    "  - [{}] {} {}: {}\n    details: {}",
                    c["id"].as_str().unwrap_or("?"),
                    status_of(c),
                    c["name"].as_str().unwrap_or("?"),
                    c["errorMessage"]
                        .as_str()
                        .or(c["description"].as_str())
                        .unwrap_or(""),
                    c.get("details").map_or("-".to_owned(), Value::to_string),
                );
            }
        }
    }
    let client_err = checks_file
        .as_deref()
        .and_then(Path::parent)
        .map(|d| read_text(&d.join("stderr.txt")))
        .unwrap_or_else(|| "(not recorded)".to_owned());
    let _ = write!(
        why,
        "--- client stderr ---\n{}\n--- conformance CLI stderr (tail) ---\n{}\n\
         --- conformance CLI stdout (tail) ---\n{}\n(results kept in {})",
        client_err.trim_end(),
        tail(&read_text(&harness_err), 60),
        tail(&read_text(&harness_out), 20),
        out.display(),
    );
    panic!("{why}");
}

/// Waits for the CLI at most `bound`; `None` when it had to be killed.
fn wait(running: &mut Running, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        match running.0.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = running.0.kill();
                let _ = running.0.wait();
                return None;
            }
            Err(e) => panic!("cannot wait for the conformance suite: {e}"),
        }
    }
}

const V2025: Option<&str> = Some("2025-11-25");
const V2026: Option<&str> = Some("2026-07-28");

// ---- suite 0.1.16 (2025-11-25)

#[test]
fn stable_initialize() {
    conformance(Suite::Stable, "initialize", None);
}

#[test]
fn stable_tools_call() {
    conformance(Suite::Stable, "tools_call", None);
}

#[test]
fn stable_elicitation_sep1034_client_defaults() {
    conformance(Suite::Stable, "elicitation-sep1034-client-defaults", None);
}

#[test]
fn stable_sse_retry() {
    conformance(Suite::Stable, "sse-retry", None);
}

// ---- suite 0.2.0-alpha.12 at 2025-11-25

#[test]
fn alpha_2025_initialize() {
    conformance(Suite::Alpha, "initialize", V2025);
}

#[test]
fn alpha_2025_tools_call() {
    conformance(Suite::Alpha, "tools_call", V2025);
}

#[test]
fn alpha_2025_elicitation_sep1034_client_defaults() {
    conformance(Suite::Alpha, "elicitation-sep1034-client-defaults", V2025);
}

#[test]
fn alpha_2025_sse_retry() {
    conformance(Suite::Alpha, "sse-retry", V2025);
}

// ---- suite 0.2.0-alpha.12 at 2026-07-28

#[test]
fn alpha_2026_tools_call() {
    conformance(Suite::Alpha, "tools_call", V2026);
}

#[test]
fn alpha_2026_request_metadata() {
    conformance(Suite::Alpha, "request-metadata", V2026);
}

#[test]
fn alpha_2026_sep_2322_client_request_state() {
    conformance(Suite::Alpha, "sep-2322-client-request-state", V2026);
}

#[test]
fn alpha_2026_http_standard_headers() {
    conformance(Suite::Alpha, "http-standard-headers", V2026);
}

#[test]
fn alpha_2026_http_custom_headers() {
    conformance(Suite::Alpha, "http-custom-headers", V2026);
}

#[test]
fn alpha_2026_http_invalid_tool_headers() {
    conformance(Suite::Alpha, "http-invalid-tool-headers", V2026);
}

#[test]
fn alpha_2026_json_schema_ref_no_deref() {
    conformance(Suite::Alpha, "json-schema-ref-no-deref", V2026);
}
