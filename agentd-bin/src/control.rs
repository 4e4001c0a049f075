//! The control socket, `<store.path>/control/agentd.sock`: a Unix socket in a directory only
//! the daemon's user may enter (mode 0700), where `agentd events call` reaches the running
//! daemon's events tools. It is bound at start when `events.grants` are configured, and
//! removed at exit. A socket left by an earlier run is replaced.
//!
//! One request per connection, one JSON line of at most 64 KiB:
//! `{"tool", "arguments", "owner", "kind"}`; one answer line: `{"ok": true, "result": …}` or
//! `{"ok": false, "error": "…"}`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_tools::{Caller, Grant};
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
        Err(e) => Err(e.to_string()),
        Ok(n) if n as u64 > REQUEST_MAX => Err("a request is at most 64 KiB".to_owned()),
        Ok(_) => match serde_json::from_slice::<Request>(&line) {
            Err(e) => Err(format!("not a request: {e}")),
            Ok(request) => call_tool(control, request).await,
        },
    };
    let line = match answer {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(error) => json!({"ok": false, "error": error}),
    };
    let _ = write.write_all(format!("{line}\n").as_bytes()).await;
    let _ = write.shutdown().await;
}

async fn call_tool(control: Option<Control>, request: Request) -> Result<Value, String> {
    let control = control.ok_or("MCP Events is not running (no bindings or grants configured)")?;
    let kind = Grant::parse(&request.kind).ok_or_else(|| {
        format!(
            "kind is root, workflow, subagent or everyone, not {:?}",
            request.kind
        )
    })?;
    let caller = Caller::new(kind, &request.owner);
    let arguments = match request.arguments {
        Value::Null => json!({}),
        given => given,
    };
    agentd_tools::events::call(&control, caller, &request.tool, arguments)
        .await
        .map_err(|e| e.to_string())
}

/// `agentd events call`: sends `request` to the daemon whose store is in `dir`; the tool's
/// result, or why there is none.
pub(crate) async fn call(dir: &Path, request: &Request) -> Result<Value, String> {
    let path = path(dir);
    let exchange = async {
        let mut stream = UnixStream::connect(&path).await.map_err(|e| {
            format!(
                "{}: {e} (is `agentd run` up, with events.grants?)",
                path.display()
            )
        })?;
        let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        stream.write_all(&line).await.map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::from_slice::<Value>(&answer).map_err(|e| format!("not an answer: {e}"))
    };
    let answer = tokio::time::timeout(ANSWER_WITHIN, exchange)
        .await
        .map_err(|_| "no answer within 120 s".to_owned())??;
    if answer["ok"] == true {
        Ok(answer["result"].clone())
    } else {
        Err(answer["error"].as_str().unwrap_or("refused").to_owned())
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
