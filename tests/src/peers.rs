//! Real MCP server peers, installed from the package registries and run on 127.0.0.1.
//!
//! Two peers are available, both speaking Streamable HTTP at `http://127.0.0.1:PORT/mcp`:
//!
//! - [`python`] / [`python_stateless`]: `tests/peers/py_server.py` on the Python SDK
//!   (`mcp` 2.3.0, `MCPServer`), 2025-11-25 sessions and the 2026-07-28 stateless wire on
//!   one endpoint ([`python_legacy`]: the sessions alone). Tools `add`, `slow`, `ask_name`,
//!   `ask_name_rounds`, `touch`, `echo_meta` (the `agent/` keys of its `_meta`); resource
//!   `demo://greeting`.
//! - [`everything`]: npm `@modelcontextprotocol/server-everything` 2026.8.31 (TypeScript SDK),
//!   `streamableHttp` mode, kept on loopback by `tests/peers/loopback.cjs`.
//!
//! Both are installed by `tests/peers/install.sh` into [`peers_dir`]. A test that needs a
//! peer that is not installed panics and names that command: such tests never skip.
//!
//! Ports: every peer listens on port 0 (the OS picks a free port) and prints `READY <port>`
//! on stdout once it accepts connections; the launcher waits for that line (at most 30 s).
//! A [`Peer`] kills its process when dropped, also while a test unwinds from a panic, and the
//! peer also exits by itself when its stdin (a pipe held by the test process) reaches EOF, so
//! even a test process killed outright leaves no server behind.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use std::{env, fs};

/// How long a peer may take from spawn to its `READY` line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many lines of peer output are kept for failure messages.
const TAIL_LINES: usize = 80;
/// The pins `install.sh` copies into its stamp files; a stamp that differs means a re-install.
const PY_PINS: &str = include_str!("../peers/requirements.txt");
const NPM_PACKAGE: &str = include_str!("../peers/everything/package.json");
const NPM_LOCK: &str = include_str!("../peers/everything/package-lock.json");
const STAMP: &str = ".agentd-peer-stamp";

/// The directory the peers are installed in: `$AGENTD_PEERS` if set (a relative path is taken
/// from the workspace root), else `<workspace>/target/peers`, which is also where
/// `tests/peers/install.sh` installs by default.
pub fn peers_dir() -> PathBuf {
    match env::var_os("AGENTD_PEERS") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target").join("peers"),
    }
}

/// The running process of a peer started by [`python`], [`python_stateless`],
/// [`python_legacy`] or [`everything`]. Dropping it kills the process and waits for it.
#[derive(Debug)]
pub struct Peer {
    child: Child,
    /// The peer's MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    name: &'static str,
    port: u16,
    /// Last lines the peer wrote on stdout (`[out]`) and stderr (`[err]`).
    tail: Arc<Mutex<VecDeque<String>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Peer {
    /// The TCP port the peer listens on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The last lines of the peer's stdout and stderr, oldest first, for diagnostics.
    pub fn output_tail(&self) -> String {
        tail_text(&self.tail)
    }

    /// Kills the peer, collects what it printed, and panics with `why` and that output.
    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let status = self
            .child
            .wait()
            .map_or_else(|e| format!("exit status unknown: {e}"), |s| s.to_string());
        // The readers end at EOF, which follows the kill; don't wait forever all the same.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "the {} test peer {why} ({status})\n--- peer output (tail) ---\n{}",
            self.name,
            tail_text(&self.tail)
        );
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // SIGKILL: no graceful shutdown needed, open SSE streams must not delay it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the Python SDK peer (`py_server.py`, stateful: sessions, event store for
/// `Last-Event-ID` resumption, `retry: 1000`) and waits until it is ready.
///
/// With `json` the server answers POSTs with `application/json` bodies instead of SSE
/// (progress and other request-related notifications are then dropped by the SDK).
/// Panics if the peer is not installed (naming the install command) or does not come up.
pub fn python(json: bool) -> Peer {
    python_peer(if json { &["--json"] } else { &[] })
}

/// Like [`python`], but the server runs stateless (`--stateless`): no session ids, no event
/// store, no GET stream.
pub fn python_stateless(json: bool) -> Peer {
    python_peer(if json {
        &["--json", "--stateless"]
    } else {
        &["--stateless"]
    })
}

/// Like [`python(false)`](python), but the server serves 2025-11-25 sessions alone
/// (`--legacy`): a request stating 2026-07-28 is answered -32601, as a server that
/// predates it answers `server/discover`, so a client falls back to `initialize`.
pub fn python_legacy() -> Peer {
    python_peer(&["--legacy"])
}

/// The Python of the peers' venv (with `mcp` and `standardwebhooks`, pinned). Panics if it
/// is not installed, naming the install command.
pub fn python_exe() -> PathBuf {
    let venv = peers_dir().join("venv");
    let exe = venv.join("bin").join("python");
    require_installed("python (mcp 2.3.0)", &venv.join(STAMP), PY_PINS, &exe);
    exe
}

fn python_peer(flags: &[&str]) -> Peer {
    let dir = peers_dir();
    let exe = python_exe();
    let mut cmd = Command::new(&exe);
    cmd.arg("-u")
        .arg(peers_src().join("py_server.py"))
        .args(["--port", "0"])
        .args(flags);
    cmd.current_dir(&dir).env("PYTHONUNBUFFERED", "1");
    spawn("python (mcp 2.3.0)", cmd)
}

/// Starts `@modelcontextprotocol/server-everything` 2026.8.31 in `streamableHttp` mode on
/// 127.0.0.1 and waits until it is ready. Every response of this peer is SSE.
///
/// Needs `node` on `PATH`. Panics if the peer is not installed (naming the install command)
/// or does not come up.
pub fn everything() -> Peer {
    const NAME: &str = "everything (@modelcontextprotocol/server-everything 2026.8.31)";
    let dir = peers_dir().join("everything");
    let main = dir
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("server-everything")
        .join("dist")
        .join("index.js");
    let pins = format!("{NPM_PACKAGE}{NPM_LOCK}");
    require_installed(NAME, &dir.join(STAMP), &pins, &main);
    let mut cmd = Command::new("node");
    cmd.arg("--require")
        .arg(peers_src().join("loopback.cjs"))
        .arg("--require")
        .arg(peers_src().join("peer_hooks.cjs"))
        .arg(&main)
        .arg("streamableHttp")
        .current_dir(&dir)
        .env("PORT", "0");
    spawn(NAME, cmd)
}

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `tests/peers/` in the source tree: the server script and the node preloads.
fn peers_src() -> PathBuf {
    workspace_root().join("tests").join("peers")
}

/// Panics with the install command unless `stamp` holds exactly `pins` and `entry` exists.
fn require_installed(name: &str, stamp: &Path, pins: &str, entry: &Path) {
    let current = fs::read_to_string(stamp).is_ok_and(|s| s == pins) && entry.is_file();
    if current {
        return;
    }
    let command = match env::var_os("AGENTD_PEERS") {
        Some(d) if !d.is_empty() => {
            format!("bash tests/peers/install.sh '{}'", peers_dir().display())
        }
        _ => "bash tests/peers/install.sh".to_owned(),
    };
    panic!(
        "the {name} test peer is not installed, or is out of date, in {}\n\
         install it from the repository root with:\n\n    {command}\n",
        peers_dir().display()
    );
}

fn spawn(name: &'static str, mut cmd: Command) -> Peer {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("AGENTD_PEER_WATCH_STDIN", "1");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the {name} test peer ({cmd:?}): {e}"));
    // stdin stays inside `child`: it closes only when the Peer (or the test process) is gone.
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
    let (ready_tx, ready_rx) = mpsc::channel();

    let out_tail = Arc::clone(&tail);
    let out_reader = thread::spawn(move || {
        let mut ready_tx = Some(ready_tx);
        for_each_line(stdout, |line| match line.strip_prefix("READY ") {
            Some(port) if ready_tx.is_some() => {
                let port = port.trim().parse::<u16>().ok();
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(port);
                }
            }
            _ => push_line(&out_tail, "[out] ", line),
        });
    });
    let err_tail = Arc::clone(&tail);
    let err_reader = thread::spawn(move || {
        for_each_line(stderr, |line| push_line(&err_tail, "[err] ", line));
    });

    let mut peer = Peer {
        child,
        url: String::new(),
        name,
        port: 0,
        tail,
        readers: vec![out_reader, err_reader],
    };
    match ready_rx.recv_timeout(READY_TIMEOUT) {
        Ok(Some(port)) if port != 0 => {
            peer.port = port;
            peer.url = format!("http://127.0.0.1:{port}/mcp");
            peer
        }
        Ok(_) => peer.fail("printed a malformed READY line"),
        Err(RecvTimeoutError::Timeout) => peer.fail(&format!(
            "was not ready within {} s (no `READY <port>` line)",
            READY_TIMEOUT.as_secs()
        )),
        Err(RecvTimeoutError::Disconnected) => peer.fail("exited before it was ready"),
    }
}

/// Calls `f` with each line of `input` (lossy UTF-8, line ending removed) until EOF.
fn for_each_line(input: impl Read, mut f: impl FnMut(&str)) {
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                f(line.trim_end_matches(['\r', '\n']));
            }
        }
    }
}

fn push_line(tail: &Mutex<VecDeque<String>>, prefix: &str, line: &str) {
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.len() == TAIL_LINES {
        tail.pop_front();
    }
    tail.push_back(format!("{prefix}{line}"));
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.is_empty() {
        return "(no output)".to_owned();
    }
    tail.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}
