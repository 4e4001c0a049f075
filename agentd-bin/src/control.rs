//! The control socket, `<store.path>/control/agentd.sock`: a Unix socket in a directory only
//! the daemon's user may enter (mode 0700), where an operator reaches the running daemon's
//! own tools, the events tools among them (`agentd tool`, and `agentd events call` for the
//! events tools), and its agent (`agentd say`). It is bound at every start of `agentd run`, and removed at exit. A socket
//! left by an earlier run is replaced.
//!
//! One request per connection, one JSON line of at most 64 KiB, one of:
//! - `{"tool", "arguments"?, "scope"?, "owner"?, "conversation"?, "run"?, "step"?,
//!   "subagent"?}`: an own tool called by an operator acting as `scope` (default `root`) in
//!   the unit those ids name. An events tool (`events.*`) is called for `owner` (needed for
//!   them, unused by the others), a caller of the grant of `scope`, over the events tools of
//!   the running MCP Events; every call is logged and counted the same way
//!   ([`Own::call`]);
//! - `{"list": SCOPE}`: `{"tools": […], "not_offered": […]}`, the own tools offered to that
//!   scope, and apart the contract tools granted to it that nothing implements, each with
//!   its `reason`;
//! - `{"catalogue": true}`: the supervisor's tool catalogue, each held server's tools as last
//!   listed (at its dial, a re-dial or a reload);
//! - `{"questions": true}`: the open questions put to people (`ask_human`'s and servers'
//!   elicitations), oldest first, as [`Question::to_value`] says each;
//! - `{"question": ID, "answer": JSON}`: answers an open question: `{"id", "answered":
//!   true}`, or `not_found` (no such open question), `bad_answer` (with `pointer` and
//!   `rule`) or `too_large`, the question left open;
//! - `{"say", "conversation"?}`: a message into a conversation (default `root`), sent by the
//!   operator (`message.send`), answered once the turn that takes it ends: `{"conversation",
//!   "text"}`, the model's answer (`null` when it said nothing). Refused `no_agent` when the
//!   agent is not running, `turn_failed` when the turn failed, and with `message.send`'s
//!   error when the message is refused.
//!
//! One answer line: `{"ok": true, "result": …}` or `{"ok": false, "error": {"code",
//! "message", …}}` (a tool's error as [`agentd_tools::Error::to_value`] says it).

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentd_tools::Scope;
use agentd_tools::human::{Humans as _, Question};
use mcp_negotiate::Catalog;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::conversations::{Agent, ROOT, SayError};
use crate::config::Config;
use crate::events::Control;
use crate::human::Gate;
use crate::tools::{Events, Own};

/// The socket's directory inside `store.path`, and its name there.
pub(crate) const FILE: [&str; 2] = ["control", "agentd.sock"];

/// The lock file beside the socket, held by the daemon of the store while it runs.
const LOCK: &str = "agentd.lock";

/// The largest request line.
const REQUEST_MAX: u64 = 64 * 1024;

/// How long a client waits for the answer to a tool call, or any request but `say`: a
/// subscription lists its server's types first, each page bounded at 30 s; `sleep`, `await`
/// and `ask_human` wait up to an hour.
const ANSWER_WITHIN: Duration = Duration::from_secs(3700);

/// What a client waits for the answer to `say` past two turns' deadlines.
const SAY_MARGIN: Duration = Duration::from_secs(100);

/// How long a client of a daemon configured by `config` waits for the answer to `request`:
/// [`ANSWER_WITHIN`]; for `say`, the turn under way and the turn that takes the message,
/// each at most `limits.turn_timeout`, and [`SAY_MARGIN`], and never less than
/// [`ANSWER_WITHIN`]. A message behind more than a page of others, or whose turn cannot
/// start, may be answered later: its client says so (`no answer within …`), and the message
/// stays in the inbox, to be taken.
pub(crate) fn answer_within(config: &Config, request: &Request) -> Duration {
    match request {
        Request::Say(_) => {
            let turns = config
                .turn_timeout
                .saturating_mul(2)
                .saturating_add(SAY_MARGIN);
            turns.max(ANSWER_WITHIN)
        }
        _ => ANSWER_WITHIN,
    }
}

/// What the socket serves: the daemon's own tools, and the events tools of the current
/// start of MCP Events (none when it is not running).
#[derive(Debug, Clone, Default)]
pub(crate) struct Served {
    /// The own tools.
    pub(crate) tools: Option<Arc<Own>>,
    /// The events tools.
    pub(crate) events: Option<Control>,
    /// The supervisor's tool catalogue: each held server's tools as last listed.
    pub(crate) catalogue: Arc<BTreeMap<String, Arc<Catalog>>>,
    /// The questions put to people.
    pub(crate) humans: Option<Arc<Gate>>,
    /// The agent, when it runs.
    pub(crate) agent: Option<Agent>,
}

/// A request through the socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Request {
    /// An own tool, or an events tool.
    Tool(ToolCall),
    /// The own tools offered to a scope.
    List(List),
    /// The supervisor's tool catalogue.
    Catalogue(Catalogue),
    /// The open questions.
    Questions(Questions),
    /// An answer to an open question.
    Answer(Answer),
    /// A message into a conversation, answered by the model.
    Say(Say),
}

/// The open questions, asked for as `{"questions": true}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Questions {
    pub(crate) questions: bool,
}

/// `answer` to open question `question`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    pub(crate) question: u64,
    pub(crate) answer: Value,
}

/// A message into `conversation` (`root` when not given), asked as `{"say": TEXT}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Say {
    pub(crate) say: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conversation: Option<String>,
}

/// The supervisor's tool catalogue, asked for as `{"catalogue": true}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Catalogue {
    pub(crate) catalogue: bool,
}

/// An own tool called by an operator acting as `scope` (`root` when not given), in the unit
/// the ids name; an events tool called for `owner`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCall {
    pub(crate) tool: String,
    #[serde(default)]
    pub(crate) arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conversation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subagent: Option<String>,
}

/// The own tools offered to scope `list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct List {
    pub(crate) list: String,
}

/// Where the socket of a store in `dir` is.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE[0]).join(FILE[1])
}

/// Takes the lock of the store in `dir` (an exclusive `flock` on `control/agentd.lock`,
/// in the socket's directory of mode 0700, made so first), held until the file is dropped:
/// `None` when another process holds it (another `agentd run` on the same store), which is
/// asked once, not waited for.
pub(crate) fn hold(dir: &Path) -> std::io::Result<Option<Flock<std::fs::File>>> {
    let private = dir.join(FILE[0]);
    std::fs::create_dir_all(&private)?;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(private.join(LOCK))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(errno.into()),
    }
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

/// Answers every connection with what is [`Served`] when it is accepted, each a task of
/// `tasks`, until `shutdown`: then it accepts no more, a connection still waiting for its
/// request is closed unanswered, and one whose request was read is answered.
pub(crate) fn serve(
    listener: UnixListener,
    served: watch::Receiver<Served>,
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
            let now = served.borrow().clone();
            tasks.spawn(answer(stream, now, shutdown.clone()));
        }
    });
}

/// Reads one request and answers it; a connection still waiting for its request at
/// `shutdown` is closed unanswered, one whose request was read is answered.
async fn answer(stream: UnixStream, served: Served, shutdown: CancellationToken) {
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
            Ok(request) => served.answer(request).await,
        },
    };
    let line = match answer {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(refusal) => json!({"ok": false, "error": refusal.to_value()}),
    };
    let _ = write.write_all(format!("{line}\n").as_bytes()).await;
    let _ = write.shutdown().await;
}

impl Served {
    /// The answer to `request`.
    async fn answer(&self, request: Request) -> Result<Value, Refusal> {
        match request {
            Request::Tool(call) => {
                let tools = self.tools.as_ref().ok_or(Refusal::ShuttingDown)?;
                let mut caller = agentd_tools::Caller::operator(scope(call.scope.as_deref())?);
                caller.ids.conversation = call.conversation;
                caller.ids.run = call.run;
                caller.ids.step = call.step;
                caller.ids.subagent = call.subagent;
                let events = if agentd_tools::events::TOOLS.contains(&call.tool.as_str()) {
                    let owner = call.owner.as_deref().ok_or(Refusal::NoOwner)?;
                    let control = self.events.as_ref().ok_or(Refusal::NotRunning)?;
                    Some(Events { control, owner })
                } else {
                    None
                };
                tools
                    .call(&caller, &call.tool, object(call.arguments), events)
                    .await
                    .map_err(Refusal::Tool)
            }
            Request::List(List { list }) => {
                let tools = self.tools.as_ref().ok_or(Refusal::ShuttingDown)?;
                Ok(tools.listed(scope(Some(&list))?))
            }
            Request::Catalogue(_) => Ok(self.catalogue_value()),
            Request::Questions(_) => {
                let humans = self.humans.as_ref().ok_or(Refusal::ShuttingDown)?;
                let open = humans.open().await.map_err(Refusal::Tool)?;
                Ok(open.iter().map(Question::to_value).collect())
            }
            Request::Answer(Answer { question, answer }) => {
                let humans = self.humans.as_ref().ok_or(Refusal::ShuttingDown)?;
                humans
                    .answer(question, answer)
                    .await
                    .map_err(Refusal::Tool)?;
                Ok(json!({"id": question, "answered": true}))
            }
            Request::Say(Say { say, conversation }) => {
                let agent = self.agent.as_ref().ok_or(Refusal::NoAgent)?;
                let conversation = conversation.as_deref().unwrap_or(ROOT);
                let text = agent.say(conversation, &say).await.map_err(Refusal::Say)?;
                Ok(json!({"conversation": conversation, "text": text}))
            }
        }
    }

    /// The catalogue as `[{"server", "tools": [{"name", "description"}], "dropped":
    /// [{"tool", "reason"}]}]`, by server name.
    fn catalogue_value(&self) -> Value {
        let servers = self.catalogue.iter().map(|(server, catalog)| {
            let tools: Vec<Value> = catalog
                .tools()
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description}))
                .collect();
            let dropped: Vec<Value> = catalog
                .dropped()
                .iter()
                .map(|d| json!({"tool": d.tool, "reason": d.reason.to_string()}))
                .collect();
            json!({"server": server, "tools": tools, "dropped": dropped})
        });
        Value::Array(servers.collect())
    }
}

/// Arguments not given are `{}`.
fn object(arguments: Value) -> Value {
    match arguments {
        Value::Null => json!({}),
        given => given,
    }
}

/// The scope named `name` (`root` when none).
fn scope(name: Option<&str>) -> Result<Scope, Refusal> {
    let name = name.unwrap_or("root");
    Scope::parse(name).ok_or_else(|| Refusal::Scope(name.to_owned()))
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
    /// An events tool called for no owner.
    NoOwner,
    /// The scope is none of root, workflow, subagent.
    Scope(String),
    /// The daemon is shutting down: its tools take no more calls.
    ShuttingDown,
    /// The tool refused, or failed.
    Tool(agentd_tools::Error),
    /// The agent does not run: no model is configured.
    NoAgent,
    /// A message said has no answer.
    Say(SayError),
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
            Self::NoOwner => {
                f.write_str("an events tool is called for an owner (`owner`, `--owner`)")
            }
            Self::Scope(scope) => {
                write!(f, "scope is root, workflow or subagent, not {scope:?}")
            }
            Self::ShuttingDown => f.write_str("shutting down"),
            Self::Tool(e) => e.fmt(f),
            Self::NoAgent => f.write_str("the agent is not running: no model is configured"),
            Self::Say(e) => e.fmt(f),
        }
    }
}

impl Refusal {
    /// The refusal as the answer says it: `{"code", "message", …}`.
    fn to_value(&self) -> Value {
        let code = match self {
            Self::Tool(e) | Self::Say(SayError::Refused(e)) => return e.to_value(),
            Self::Say(e) => e.code(),
            Self::NoAgent => "no_agent",
            Self::Read(_) | Self::NotARequest(_) | Self::NoOwner | Self::Scope(_) => "bad_request",
            Self::TooLarge => "too_large",
            Self::NotRunning => "not_running",
            Self::ShuttingDown => "shutting_down",
        };
        json!({"code": code, "message": self.to_string()})
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read(e) => Some(e),
            Self::NotARequest(e) => Some(e),
            Self::Tool(e) => Some(e),
            Self::Say(e) => Some(e),
            Self::TooLarge
            | Self::NoAgent
            | Self::NotRunning
            | Self::NoOwner
            | Self::Scope(_)
            | Self::ShuttingDown => None,
        }
    }
}

/// Why `agentd tool` or `agentd events call` has no result.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum CallError {
    /// The socket could not be reached: the daemon is not running.
    Connect(PathBuf, std::io::Error),
    /// The request could not be written as JSON.
    Encode(serde_json::Error),
    /// The exchange broke off.
    Io(std::io::Error),
    /// What came back is not an answer.
    NotAnAnswer(serde_json::Error),
    /// No answer within this ([`answer_within`]).
    Timeout(Duration),
    /// The daemon answered with an error: `{"code", "message", …}`.
    Refused(Value),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connect(path, e) => write!(f, "{}: {e} (is `agentd run` up?)", path.display()),
            Self::Encode(e) => write!(f, "cannot write the request: {e}"),
            Self::Io(e) => e.fmt(f),
            Self::NotAnAnswer(e) => write!(f, "not an answer: {e}"),
            Self::Timeout(within) => write!(f, "no answer within {} s", within.as_secs()),
            Self::Refused(error) => {
                let code = error["code"].as_str().unwrap_or("refused");
                let message = error["message"].as_str().unwrap_or_default();
                write!(f, "{code}: {message}")
            }
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connect(_, e) | Self::Io(e) => Some(e),
            Self::Encode(e) | Self::NotAnAnswer(e) => Some(e),
            Self::Timeout(_) | Self::Refused(_) => None,
        }
    }
}

/// Sends `request` to the daemon `config` configures (its store's directory, its turns'
/// deadline); the result, or why there is none within [`answer_within`].
pub(crate) async fn call(config: &Config, request: &Request) -> Result<Value, CallError> {
    let path = path(&config.store_path);
    let within = answer_within(config, request);
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
    let answer = tokio::time::timeout(within, exchange)
        .await
        .map_err(|_| CallError::Timeout(within))??;
    if answer["ok"] == true {
        Ok(answer["result"].clone())
    } else {
        Err(CallError::Refused(answer["error"].clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Limits, Store};
    use crate::telemetry::metrics::Metrics;

    /// What a daemon serving `served` answers to `line`.
    async fn answered_by(served: Served, line: Vec<u8>) -> Value {
        let (client, daemon) = UnixStream::pair().unwrap();
        let answering = tokio::spawn(answer(daemon, served, CancellationToken::new()));
        let (mut read, mut write) = client.into_split();
        // The daemon may answer before it has read all of a line past the bound.
        let _ = write.write_all(&line).await;
        let mut answer = Vec::new();
        read.read_to_end(&mut answer).await.unwrap();
        answering.await.unwrap();
        serde_json::from_slice(&answer).unwrap()
    }

    /// What a daemon shutting down (its tools gone) answers to `line`.
    async fn answered(line: Vec<u8>) -> Value {
        answered_by(Served::default(), line).await
    }

    /// `request` as a line.
    fn line(request: Value) -> Vec<u8> {
        format!("{request}\n").into_bytes()
    }

    /// A request line of exactly `len` bytes, newline included.
    fn request_of(len: usize) -> Vec<u8> {
        let mut line = serde_json::to_vec(&json!({"list": "root"})).unwrap();
        line.resize(len - 1, b' ');
        line.push(b'\n');
        line
    }

    #[test]
    fn say_waits_for_two_turns_and_a_margin() {
        let mut config = crate::config::parse("t.toml", "instance = \"t\"", &|_| None).unwrap();
        let say = Request::Say(Say {
            say: "hi".into(),
            conversation: None,
        });
        let list = Request::List(List {
            list: "root".into(),
        });
        // The default turn (600 s) fits in the hour a tool may wait.
        assert_eq!(answer_within(&config, &say), ANSWER_WITHIN);
        config.turn_timeout = Duration::from_secs(7200);
        assert_eq!(answer_within(&config, &say), Duration::from_secs(14_500));
        assert_eq!(answer_within(&config, &list), ANSWER_WITHIN);
        config.turn_timeout = Duration::MAX;
        assert_eq!(answer_within(&config, &say), Duration::MAX);
    }

    #[tokio::test]
    async fn a_request_is_at_most_64_kib() {
        let at = answered(request_of(64 * 1024)).await;
        assert_eq!(
            at,
            json!({"ok": false, "error": {
                "code": "shutting_down", "message": "shutting down",
            }})
        );
        let past = answered(request_of(64 * 1024 + 1)).await;
        assert_eq!(
            past,
            json!({"ok": false, "error": {
                "code": "too_large", "message": "a request is at most 64 KiB",
            }})
        );
        let garbage = answered(b"{\"tool\": 1}\n".to_vec()).await;
        assert_eq!(garbage["error"]["code"], "bad_request");
        assert!(
            garbage["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("not a request")
        );
        let scope = answered(b"{\"list\": \"operator\"}\n".to_vec()).await;
        assert_eq!(scope["error"]["code"], "shutting_down");
    }

    #[tokio::test]
    async fn an_events_tool_is_called_for_an_owner_on_mcp_events() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_value_bytes: 1024,
        };
        let store = Store::open(dir.path(), limits).await.unwrap();
        let metrics = Arc::new(Metrics::default());
        let shutdown = CancellationToken::new();
        let config = crate::config::parse("t.toml", "instance = \"t\"", &|_| None).unwrap();
        let agent = crate::tools::tests::parts(&store, &shutdown).await;
        let own = Own::new(store, &config, shutdown, metrics, Arc::default(), agent);
        let served = Served {
            tools: Some(Arc::new(own)),
            ..Served::default()
        };
        let ask = |request: Value| answered_by(served.clone(), line(request));

        let unowned = ask(json!({"tool": "events.subscriptions"})).await;
        assert_eq!(
            unowned["error"],
            json!({
                "code": "bad_request",
                "message": "an events tool is called for an owner (`owner`, `--owner`)",
            })
        );
        let off = ask(json!({"tool": "events.subscriptions", "owner": "root"})).await;
        assert_eq!(off["error"]["code"], "not_running", "{off}");
        let kind = json!({"tool": "events.subscriptions", "owner": "root", "kind": "root"});
        assert_eq!(ask(kind).await["error"]["code"], "bad_request");
        // The other tools take no owner into account.
        let got = json!({"tool": "memory.get", "arguments": {"key": "k"}, "owner": "x"});
        assert_eq!(
            ask(got).await,
            json!({"ok": true, "result": {"value": null, "version": 0}})
        );
    }

    #[tokio::test]
    async fn questions_are_listed_and_answered_as_their_schemas_say() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Limits::default()).await.unwrap();
        let gate = Gate::start(store, "t", CancellationToken::new(), &TaskTracker::new())
            .await
            .unwrap();
        let served = Served {
            humans: Some(gate.clone()),
            ..Served::default()
        };
        let ask = |request: Value| answered_by(served.clone(), line(request));
        assert_eq!(
            ask(json!({"questions": true})).await,
            json!({"ok": true, "result": []})
        );
        let schema = json!({"type": "object", "required": ["go"]});
        let asking = {
            let (gate, schema) = (gate.clone(), schema.clone());
            tokio::spawn(async move {
                let origin = agentd_tools::human::Origin::ask_human("operator");
                let hour = Duration::from_secs(3600);
                gate.ask(origin, "Go?", &schema, hour).await
            })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        let listed = loop {
            let listed = ask(json!({"questions": true})).await;
            if listed["result"].as_array().is_some_and(|l| !l.is_empty()) {
                break listed;
            }
            assert!(tokio::time::Instant::now() < deadline, "{listed}");
            tokio::task::yield_now().await;
        };
        let question = &listed["result"][0];
        assert_eq!(question["origin"], "ask_human");
        assert_eq!(question["from"], "operator");
        assert_eq!(question["question"], "Go?");
        assert_eq!(question["schema"], schema);
        let id = question["id"].as_u64().unwrap();

        let bad = ask(json!({"question": id, "answer": {"stop": 1}})).await;
        assert_eq!(bad["ok"], false);
        assert_eq!(bad["error"]["code"], "bad_answer");
        assert_eq!(bad["error"]["rule"], "required");
        assert_eq!(bad["error"]["pointer"], "");
        let missing = ask(json!({"question": id + 1, "answer": {"go": 1}})).await;
        assert_eq!(missing["error"]["code"], "not_found", "{missing}");
        let answered = ask(json!({"question": id, "answer": {"go": true}})).await;
        assert_eq!(
            answered,
            json!({"ok": true, "result": {"id": id, "answered": true}})
        );
        let reply = asking.await.unwrap().unwrap();
        assert_eq!(reply.answer, Some(json!({"go": true})));
        assert_eq!(
            ask(json!({"questions": true})).await,
            json!({"ok": true, "result": []})
        );
        let gone = answered_by(Served::default(), line(json!({"questions": true}))).await;
        assert_eq!(gone["error"]["code"], "shutting_down");
    }
}
