//! The control socket, `<store.path>/control/agentd.sock`: a Unix socket in a directory only
//! the daemon's user may enter (mode 0700), where `agentd events call` reaches the running
//! daemon's events tools. It is bound at start when `events.grants` are configured, and
//! removed at exit. A socket left by an earlier run is replaced.
//!
//! One request per connection, one JSON line of at most 64 KiB:
//! `{"tool", "arguments", "owner", "kind"}`; one answer line: `{"ok": true, "result": …}` or
//! `{"ok": false, "error": "…"}`.

use std::fmt;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_tools::Grant;
use agentd_tools::events::Caller;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::events::Control;

/// The socket's directory inside `store.path`, and its name there.
pub(crate) const FILE: [&str; 2] = ["control", "agentd.sock"];

/// The largest request line.
const REQUEST_MAX: u64 = 64 * 1024;

/// How long a client waits for its answer: a subscription lists its server's types first,
/// each page bounded at 30 s.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// A tool call through the socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    pub(crate) tool: String,
    #[serde(default)]
    pub(crate) arguments: Value,
    pub(crate) owner: String,
    pub(crate) kind: String,
}

/// Where the socket of a store in `dir` is.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE[0]).join(FILE[1])
}

/// Binds the socket of the store in `dir`, in its directory of mode 0700 (made so before
/// the socket exists).
pub(crate) fn bind(dir: &Path) -> std::io::Result<UnixListener> {
    let private = dir.join(FILE[0]);
    std::fs::create_dir_all(&private)?;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
    let path = path(dir);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    UnixListener::bind(&path)
}

/// Answers every connection with the events tools of the current start of MCP Events, each
/// a task of `tasks`, until `shutdown`: then it accepts no more, a connection still waiting
/// for its request is closed unanswered, and one whose request was read is answered.
pub(crate) fn serve(
    listener: UnixListener,
    controls: watch::Receiver<Option<Control>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    tasks.clone().spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
            };
            let Ok((stream, _)) = accepted else {
                // Out of descriptors, say: let some close.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let control = controls.borrow().clone();
            tasks.spawn(answer(stream, control, shutdown.clone()));
        }
    });
}

/// Reads one request and answers it; a connection still waiting for its request at
/// `shutdown` is closed unanswered, one whose request was read is answered.
async fn answer(stream: UnixStream, control: Option<Control>, shutdown: CancellationToken) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(read).take(REQUEST_MAX + 1);
    let read = tokio::select! {
        read = reader.read_until(b'\n', &mut line) => read,
        () = shutdown.cancelled() => return,
    };
    let answer = match read {
        Err(e) => Err(Refusal::Read(e)),
        Ok(n) if n as u64 > REQUEST_MAX => Err(Refusal::TooLarge),
        Ok(_) => match serde_json::from_slice::<Request>(&line) {
            Err(e) => Err(Refusal::NotARequest(e)),
            Ok(request) => call_tool(control, request).await,
        },
    };
    let line = match answer {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(refusal) => json!({"ok": false, "error": refusal.to_string()}),
    };
    let _ = write.write_all(format!("{line}\n").as_bytes()).await;
    let _ = write.shutdown().await;
}

async fn call_tool(control: Option<Control>, request: Request) -> Result<Value, Refusal> {
    let control = control.ok_or(Refusal::NotRunning)?;
    let kind = Grant::parse(&request.kind).ok_or(Refusal::Kind(request.kind))?;
    let caller = Caller::new(kind, &request.owner);
    let arguments = match request.arguments {
        Value::Null => json!({}),
        given => given,
    };
    agentd_tools::events::call(&control, caller, &request.tool, arguments)
        .await
        .map_err(Refusal::Tool)
}

/// Why the daemon answered a request with an error (`{"ok": false, "error": …}`, the error
/// rendered from this).
#[derive(Debug)]
#[non_exhaustive]
enum Refusal {
    /// The request line could not be read.
    Read(std::io::Error),
    /// The request line is over [`REQUEST_MAX`].
    TooLarge,
    /// The line is not a [`Request`].
    NotARequest(serde_json::Error),
    /// MCP Events is not running: nothing to call.
    NotRunning,
    /// The caller's kind is none of the grants'.
    Kind(String),
    /// The tool refused, or failed.
    Tool(agentd_tools::Error),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(e) => e.fmt(f),
            Self::TooLarge => f.write_str("a request is at most 64 KiB"),
            Self::NotARequest(e) => write!(f, "not a request: {e}"),
            Self::NotRunning => {
                f.write_str("MCP Events is not running (no bindings or grants configured)")
            }
            Self::Kind(kind) => {
                write!(
                    f,
                    "kind is root, workflow, subagent or everyone, not {kind:?}"
                )
            }
            Self::Tool(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read(e) => Some(e),
            Self::NotARequest(e) => Some(e),
            Self::Tool(e) => Some(e),
            Self::TooLarge | Self::NotRunning | Self::Kind(_) => None,
        }
    }
}

/// Why `agentd events call` has no result.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum CallError {
    /// The socket could not be reached: the daemon is not running, or has no grants.
    Connect(PathBuf, std::io::Error),
    /// The request could not be written as JSON.
    Encode(serde_json::Error),
    /// The exchange broke off.
    Io(std::io::Error),
    /// What came back is not an answer.
    NotAnAnswer(serde_json::Error),
    /// No answer within [`ANSWER_WITHIN`].
    Timeout,
    /// The daemon answered with an error.
    Refused(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connect(path, e) => write!(
                f,
                "{}: {e} (is `agentd run` up, with events.grants?)",
                path.display()
            ),
            Self::Encode(e) => write!(f, "cannot write the request: {e}"),
            Self::Io(e) => e.fmt(f),
            Self::NotAnAnswer(e) => write!(f, "not an answer: {e}"),
            Self::Timeout => write!(f, "no answer within {} s", ANSWER_WITHIN.as_secs()),
            Self::Refused(error) => f.write_str(error),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connect(_, e) | Self::Io(e) => Some(e),
            Self::Encode(e) | Self::NotAnAnswer(e) => Some(e),
            Self::Timeout | Self::Refused(_) => None,
        }
    }
}

/// `agentd events call`: sends `request` to the daemon whose store is in `dir`; the tool's
/// result, or why there is none.
pub(crate) async fn call(dir: &Path, request: &Request) -> Result<Value, CallError> {
    let path = path(dir);
    let exchange = async {
        let mut stream = UnixStream::connect(&path)
            .await
            .map_err(|e| CallError::Connect(path.clone(), e))?;
        let mut line = serde_json::to_vec(request).map_err(CallError::Encode)?;
        line.push(b'\n');
        stream.write_all(&line).await.map_err(CallError::Io)?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(CallError::Io)?;
        serde_json::from_slice::<Value>(&answer).map_err(CallError::NotAnAnswer)
    };
    let answer = tokio::time::timeout(ANSWER_WITHIN, exchange)
        .await
        .map_err(|_| CallError::Timeout)??;
    if answer["ok"] == true {
        Ok(answer["result"].clone())
    } else {
        let error = answer["error"].as_str().unwrap_or("refused");
        Err(CallError::Refused(error.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the daemon answers to `line`, without MCP Events running.
    async fn answered(line: Vec<u8>) -> Value {
        let (client, daemon) = UnixStream::pair().unwrap();
        let answering = tokio::spawn(answer(daemon, None, CancellationToken::new()));
        let (mut read, mut write) = client.into_split();
        // The daemon may answer before it has read all of a line past the bound.
        let _ = write.write_all(&line).await;
        let mut answer = Vec::new();
        read.read_to_end(&mut answer).await.unwrap();
        answering.await.unwrap();
        serde_json::from_slice(&answer).unwrap()
    }

    /// A request line of exactly `len` bytes, newline included.
    fn request_of(len: usize) -> Vec<u8> {
        let mut line = serde_json::to_vec(&json!({
            "tool": "events.subscriptions", "owner": "root", "kind": "root",
        }))
        .unwrap();
        line.resize(len - 1, b' ');
        line.push(b'\n');
        line
    }

    #[tokio::test]
    async fn a_request_is_at_most_64_kib() {
        let at = answered(request_of(64 * 1024)).await;
        assert_eq!(
            at,
            json!({"ok": false, "error": "MCP Events is not running (no bindings or grants configured)"})
        );
        let past = answered(request_of(64 * 1024 + 1)).await;
        assert_eq!(
            past,
            json!({"ok": false, "error": "a request is at most 64 KiB"})
        );
        let garbage = answered(b"{\"tool\": 1}\n".to_vec()).await;
        assert!(
            garbage["error"]
                .as_str()
                .unwrap()
                .starts_with("not a request")
        );
    }
}
