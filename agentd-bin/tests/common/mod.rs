//! What the process tests share: temporary configuration files, and `agentd run` as a child
//! process whose NDJSON log lines are read as they come.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A file removed when dropped.
pub struct TempFile(tempfile::NamedTempFile);

impl TempFile {
    /// Writes `text` to a fresh file.
    pub fn new(text: &str) -> Self {
        let file = tempfile::Builder::new()
            .prefix("agentd-test-")
            .suffix(".toml")
            .tempfile()
            .expect("a temp file");
        std::fs::write(file.path(), text).expect("the temp file");
        Self(file)
    }

    /// Replaces the file's text.
    pub fn write(&self, text: &str) {
        std::fs::write(self.0.path(), text).expect("the temp file");
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn to_str(&self) -> Option<&str> {
        self.0.path().to_str()
    }
}

/// `agentd run --config PATH` as a child process; SIGKILLed if still running when dropped.
/// It runs in a directory of its own, so that a relative `store.path` (the default's) is
/// kept apart from every other test's.
pub struct Daemon {
    child: Child,
    _cwd: tempfile::TempDir,
    lines: mpsc::Receiver<(Instant, Value)>,
    /// Every log line read so far, with when it was read.
    pub seen: Vec<(Instant, Value)>,
}

impl Daemon {
    pub fn run(config: &TempFile) -> Self {
        Self::run_with(config, &[])
    }

    /// `agentd run --config PATH` and `args`, whatever `RUST_LOG` the tests were given.
    pub fn run_with(config: &TempFile, args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
        command
            .args(["run", "--config", config.to_str().unwrap()])
            .args(args);
        Self::spawn(command)
    }

    /// `agentd run --config PATH` exec'd by `bash -c SCRIPT` (`exec "$@"` at its end), so
    /// that what the script sets (a resource limit, an ignored signal) holds in the daemon,
    /// whose process id is the script's.
    pub fn run_after(config: &TempFile, script: &str) -> Self {
        let mut command = Command::new("bash");
        command
            .args(["-c", script, "agentd", env!("CARGO_BIN_EXE_agentd")])
            .args(["run", "--config", config.to_str().unwrap()]);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        let cwd = tempfile::tempdir().expect("a directory");
        let mut child = command
            .current_dir(cwd.path())
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .expect("agentd starts");
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if tx.send((written(&value), value)).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            _cwd: cwd,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line of `event` (for `server`, when given), waiting up to 15 s for it.
    pub fn wait_for(&mut self, event: &str, server: Option<&str>) -> Value {
        self.wait_for_nth(event, server, 1)
    }

    /// The `n`th line of `event` (for `server`, when given), waiting up to 15 s for it.
    pub fn wait_for_nth(&mut self, event: &str, server: Option<&str>, n: usize) -> Value {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some((_, v)) = self.matching(event, server).nth(n - 1) {
                return v.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {event} #{n} for {server:?}: {:#?}",
                self.seen.iter().map(|(_, v)| v).collect::<Vec<_>>()
            );
            let lines = &self.lines;
            if let Ok(line) = blocking(|| lines.recv_timeout(Duration::from_millis(100))) {
                self.seen.push(line);
            }
        }
    }

    /// The lines of `event` (for `server`, when given) read so far.
    pub fn matching<'a>(
        &'a self,
        event: &'a str,
        server: Option<&'a str>,
    ) -> impl Iterator<Item = &'a (Instant, Value)> + 'a {
        self.seen
            .iter()
            .filter(move |(_, v)| v["event"] == event && server.is_none_or(|s| v["server"] == s))
    }

    /// The lines for `server` read so far, of every event.
    pub fn of_server<'a>(&'a self, server: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.seen
            .iter()
            .map(|(_, v)| v)
            .filter(move |v| v["server"] == server)
    }

    /// When the first line of `event` for `server` was written (its `ts`).
    pub fn when(&self, event: &str, server: Option<&str>) -> Instant {
        self.matching(event, server).next().expect("the line").0
    }

    /// The address of the daemon's HTTP listener (`http.listening`).
    pub fn listener(&mut self) -> String {
        let line = self.wait_for("http.listening", None);
        line["addr"].as_str().unwrap().to_owned()
    }

    /// Reads every log line written so far into [`Daemon::seen`], waiting at most `quiet`
    /// for the next one.
    pub fn drain(&mut self, quiet: Duration) {
        let lines = &self.lines;
        while let Ok(line) = blocking(|| lines.recv_timeout(quiet)) {
            self.seen.push(line);
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What `/proc/PID` says of the daemon's resources now (Linux).
    pub fn usage(&self) -> Usage {
        Usage::of(self.child.id())
    }

    /// The ids of the daemon's threads named `name` (Linux: `/proc/PID/task/*/comm`).
    pub fn threads(&self, name: &str) -> std::collections::BTreeSet<u32> {
        let tasks = format!("/proc/{}/task", self.child.id());
        std::fs::read_dir(tasks)
            .expect("the daemon's threads")
            .filter_map(Result::ok)
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .filter_map(|task| task.file_name().to_str()?.parse().ok())
            .collect()
    }

    pub fn signal(&self, name: &str) {
        let mut kill = Command::new("kill");
        kill.args([&format!("-{name}"), &self.child.id().to_string()]);
        let sent = blocking(|| kill.status()).unwrap();
        assert!(sent.success());
    }

    /// SIGKILL: no drain, no goodbye.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = blocking(|| self.child.wait());
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// How the process exited, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Sends SIGTERM and waits up to ten seconds for the process to exit; the lines it
    /// wrote until then are read.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "agentd did not stop"
            );
            blocking(|| std::thread::sleep(Duration::from_millis(50)));
        };
        self.drain(Duration::from_millis(500));
        status
    }
}

/// When a line was written: its `ts`, as an `Instant` of this process (read late on a busy
/// machine, a line still says when agentd wrote it); now, for a line without one.
fn written(line: &Value) -> Instant {
    let now = Instant::now();
    line["ts"]
        .as_str()
        .and_then(|ts| humantime::parse_rfc3339_weak(ts).ok())
        .and_then(|ts| std::time::SystemTime::now().duration_since(ts).ok())
        .and_then(|ago| now.checked_sub(ago))
        .unwrap_or(now)
}

/// A process's resources, as `/proc/PID` says (Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Open file descriptors (`/proc/PID/fd`).
    pub fds: usize,
    /// Of them, sockets.
    pub sockets: usize,
    /// Of the sockets, TCP ones whose peer has closed and the process has not
    /// (`CLOSE_WAIT` in `/proc/PID/net/tcp`): a socket no task reads any more.
    pub close_wait: usize,
    /// Threads (`Threads:` of `/proc/PID/status`).
    pub threads: usize,
    /// Resident memory now and its peak (`VmRSS`, `VmHWM`), in KiB.
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// What the process's descriptors point at (`/proc/PID/fd`).
fn descriptors(proc: &str) -> Vec<String> {
    std::fs::read_dir(format!("{proc}/fd"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .map(|target| target.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The inodes of the sockets among `descriptors`.
fn socket_inodes(descriptors: &[String]) -> Vec<&str> {
    descriptors
        .iter()
        .filter_map(|t| t.strip_prefix("socket:[")?.strip_suffix(']'))
        .collect()
}

/// The process's TCP connections (IPv4) whose local port is `port`, its listening socket
/// left out: a server's accepted connections.
pub fn connections_on(pid: u32, port: u16) -> usize {
    let proc = format!("/proc/{pid}");
    let descriptors = descriptors(&proc);
    let sockets = socket_inodes(&descriptors);
    let table = std::fs::read_to_string(format!("{proc}/net/tcp")).unwrap_or_default();
    let local = format!(":{port:04X}");
    // A table read while it changes may list a socket twice: counted by inode.
    let connections: std::collections::BTreeSet<&str> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // The local address, the state (0A: listening), the inode.
            let ours = cols.get(1).is_some_and(|a| a.ends_with(&local))
                && cols.get(3) != Some(&"0A")
                && cols.get(9).is_some_and(|i| sockets.contains(i));
            ours.then(|| cols[9])
        })
        .collect();
    connections.len()
}

impl Usage {
    pub fn of(pid: u32) -> Self {
        let proc = format!("/proc/{pid}");
        let inodes = descriptors(&proc);
        let sockets = socket_inodes(&inodes);
        // `st` is the fourth column, the inode the tenth; 08 is CLOSE_WAIT.
        let close_wait = ["net/tcp", "net/tcp6"]
            .iter()
            .filter_map(|table| std::fs::read_to_string(format!("{proc}/{table}")).ok())
            .flat_map(|text| {
                text.lines()
                    .skip(1)
                    .filter_map(|line| {
                        let cols: Vec<&str> = line.split_whitespace().collect();
                        (cols.get(3) == Some(&"08")).then(|| cols.get(9).map(|i| i.to_string()))
                    })
                    .flatten()
                    .collect::<Vec<_>>()
            })
            .filter(|inode| sockets.contains(&inode.as_str()))
            .count();
        let status = std::fs::read_to_string(format!("{proc}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Self {
            fds: inodes.len(),
            sockets: sockets.len(),
            close_wait,
            threads: field("Threads:") as usize,
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
        }
    }
}

/// Waits, at most 15 s, until `cond` holds; `what` names it when it does not.
pub async fn until(what: &str, cond: impl Fn() -> bool) {
    let holds = || std::future::ready(if cond() { Ok(()) } else { Err(what) });
    polled(Duration::from_secs(15), holds).await;
}

/// How long a poll waits between two asks.
const POLL: Duration = Duration::from_millis(50);

/// Asks `ask` again until it answers `Ok`, at most `within`: that answer. An `Err` says what
/// was seen instead, told if the time runs out.
pub fn poll<T, E: std::fmt::Display>(within: Duration, mut ask: impl FnMut() -> Result<T, E>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match ask() {
            Ok(answer) => return answer,
            Err(seen) => assert!(Instant::now() < deadline, "not within {within:?}: {seen}"),
        }
        blocking(|| std::thread::sleep(POLL));
    }
}

/// [`poll`], asking with a future and waiting on the runtime.
pub async fn polled<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    within: Duration,
    mut ask: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        match ask().await {
            Ok(answer) => return answer,
            Err(seen) => assert!(Instant::now() < deadline, "not within {within:?}: {seen}"),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `agentd ARGS --config F`, run to its end.
pub fn agentd(file: &TempFile, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.args(args).arg("--config").arg(file.path());
    blocking(|| command.output()).expect("agentd runs")
}

/// Waits, at most 15 s, until the daemon of `file` answers `status`.
pub fn until_up(file: &TempFile) {
    let up = || {
        let out = agentd(file, &["tool", "call", "status"]);
        match out.status.success() {
            true => Ok(()),
            false => Err(format!("the daemon did not answer: {out:?}")),
        }
    };
    poll(Duration::from_secs(15), up);
}

/// [`agentd`], run off the runtime's threads (the future borrows nothing).
pub fn agentd_async(file: &TempFile, args: &[&str]) -> impl Future<Output = Output> + use<> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.args(args).arg("--config").arg(file.path());
    let run = tokio::task::spawn_blocking(move || command.output().expect("agentd runs"));
    async { run.await.expect("agentd ran") }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `head` and `body` to `addr` as they are; the whole answer as text.
pub fn raw(addr: &str, head: &str, body: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).expect("the listener");
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.write_all(body).unwrap();
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    answer
}

/// A plain HTTP/1.1 GET, the whole answer as text.
pub fn get(addr: &str, path: &str) -> String {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        b"",
    )
}

/// A configuration with `head` (TOML before the servers) and one `[[mcp.servers]]` per entry.
pub fn config(head: &str, servers: &[(&str, String)]) -> String {
    let mut text = String::from(head);
    for (name, url) in servers {
        text.push_str(&format!(
            "[[mcp.servers]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        ));
    }
    text
}

/// A store directory of its own, removed when dropped.
pub fn store_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("agentd-{name}-"))
        .tempdir()
        .expect("a temporary directory")
}

/// `agentd events tail`: the stream's records.
pub fn tail(file: &TempFile, stream: &str) -> Vec<Value> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.args(["events", "tail", "--config", file.to_str().unwrap(), stream]);
    let out = blocking(|| command.output()).expect("agentd runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The stream's records once it holds at least `n`, waiting up to 15 s for them.
pub fn wait_for_stream(file: &TempFile, stream: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let records = tail(file, stream);
        if records.len() >= n {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n}: {records:?}",
            records.len()
        );
        blocking(|| std::thread::sleep(Duration::from_millis(200)));
    }
}

/// `wait` run on a worker that hands its other tasks (in-process servers) to another while it
/// blocks: the daemon's log and exit, an `agentd` command, a poll's pause. The waits of this
/// module go through it, but a dropped [`Daemon`]'s and a raw HTTP exchange's, which are
/// short. On a multi-thread runtime, or outside any runtime (a plain `#[test]`, where it just
/// runs `wait`); a current-thread `#[tokio::test]` panics in it.
pub fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(wait)
}
