//! A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, the test peer of a
//! model provider.
//!
//! Each `POST …/chat/completions` takes the next reply of the script, an ordered queue, and
//! is answered with it: as an event stream (`data:` chunks, then `data: [DONE]`) when the
//! request says `"stream": true`, as one `chat.completion` JSON object otherwise. Usage is
//! sent with each reply (in a last chunk of its own when the request asks for it with
//! `stream_options.include_usage`, as the API does). Once the script is spent, a request is
//! answered 500 with a body that says so. Every request is recorded, its headers and its
//! body parsed as JSON ([`ScriptedModel::requests`]). Any other path is answered 404, and
//! recorded too.
//!
//! ```no_run
//! # async fn demo() {
//! use agentd_tests::model::{Call, Reply, ScriptedModel};
//!
//! let server = ScriptedModel::start([
//!     Reply::error(429, "slow down").retry_after("2"),
//!     Reply::tool_calls([Call::new("call_1", "get_weather", r#"{"city":"Paris"}"#)]).chunks(3),
//!     Reply::text("It is sunny.").usage(120, 6),
//! ])
//! .await;
//! let base_url = server.base_url(); // http://127.0.0.1:<port>/v1
//! # }
//! ```
//!
//! # The script as JSON
//!
//! The `scripted-model` binary (`src/bin/scripted_model.rs`) reads a script from a file: an
//! object whose `replies` lists the replies in order, each an object whose `kind` says what
//! it is. Fields shown with their defaults may be left out.
//!
//! ```json
//! {"replies": [
//!   {"kind": "text", "text": "It is sunny.", "chunks": 1, "finish": null,
//!    "usage": {"prompt_tokens": 0, "completion_tokens": 0}},
//!   {"kind": "tool_calls", "text": null, "chunks": 1, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
//!    "calls": [{"id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}]},
//!   {"kind": "error", "status": 503, "retry_after": null, "body": ""},
//!   {"kind": "hang"},
//!   {"kind": "raw", "status": 200, "content_type": "text/event-stream", "body": "data: {\n\n"}
//! ]}
//! ```
//!
//! - `text`: the text, split into `chunks` content deltas (by characters); `finish` is the
//!   `finish_reason` (`"stop"` when null).
//! - `tool_calls`: one or several calls, streamed one after the other, each one's
//!   `arguments` (JSON text, or any JSON value, which is sent as its text) split into
//!   `chunks` deltas after a first delta with its id and name; an optional `text` comes
//!   before them. `finish_reason` is `"tool_calls"`.
//! - `error`: HTTP `status` with `body` (JSON if it parses, else plain text), and a
//!   `Retry-After` header when `retry_after` is set.
//! - `hang`: the request is never answered.
//! - `raw`: exactly this status, content type and body, for malformed or oversized answers.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// A text answer.
    Text {
        /// The text.
        text: String,
        /// How many content deltas it is streamed in (at least 1).
        #[serde(default = "one")]
        chunks: usize,
        /// The `finish_reason`; `"stop"` when not set.
        #[serde(default)]
        finish: Option<String>,
        /// The tokens it reports.
        #[serde(default)]
        usage: Usage,
    },
    /// Tool calls, with an optional text before them.
    ToolCalls {
        /// The calls, in order.
        calls: Vec<Call>,
        /// A text sent before them.
        #[serde(default)]
        text: Option<String>,
        /// How many deltas each call's arguments are streamed in (at least 1).
        #[serde(default = "one")]
        chunks: usize,
        /// The tokens it reports.
        #[serde(default)]
        usage: Usage,
    },
    /// An HTTP error.
    Error {
        /// The status.
        status: u16,
        /// The `Retry-After` header, if any.
        #[serde(default)]
        retry_after: Option<String>,
        /// The body.
        #[serde(default)]
        body: String,
    },
    /// No answer, ever.
    Hang {},
    /// An answer sent as it is.
    Raw {
        /// The status.
        #[serde(default = "ok")]
        status: u16,
        /// The `Content-Type`.
        content_type: String,
        /// The body.
        body: String,
    },
}

fn one() -> usize {
    1
}

fn ok() -> u16 {
    200
}

impl Reply {
    /// A text answer, in one chunk, with no usage.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            chunks: 1,
            finish: None,
            usage: Usage::default(),
        }
    }

    /// Tool calls, each one's arguments in one chunk, with no usage.
    pub fn tool_calls(calls: impl IntoIterator<Item = Call>) -> Self {
        Self::ToolCalls {
            calls: calls.into_iter().collect(),
            text: None,
            chunks: 1,
            usage: Usage::default(),
        }
    }

    /// An HTTP error.
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        Self::Error {
            status,
            retry_after: None,
            body: body.into(),
        }
    }

    /// No answer, ever.
    pub fn hang() -> Self {
        Self::Hang {}
    }

    /// An answer sent as it is.
    pub fn raw(status: u16, content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// The text, or each call's arguments, streamed in `n` chunks (a text or an error: no
    /// change).
    #[must_use]
    pub fn chunks(mut self, n: usize) -> Self {
        if let Self::Text { chunks, .. } | Self::ToolCalls { chunks, .. } = &mut self {
            *chunks = n;
        }
        self
    }

    /// The tokens reported (text and tool calls).
    #[must_use]
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        if let Self::Text { usage, .. } | Self::ToolCalls { usage, .. } = &mut self {
            *usage = Usage {
                prompt_tokens,
                completion_tokens,
            };
        }
        self
    }

    /// The `finish_reason` of a text answer.
    #[must_use]
    pub fn finish(mut self, reason: impl Into<String>) -> Self {
        if let Self::Text { finish, .. } = &mut self {
            *finish = Some(reason.into());
        }
        self
    }

    /// The text before tool calls.
    #[must_use]
    pub fn with_text(mut self, before: impl Into<String>) -> Self {
        if let Self::ToolCalls { text, .. } = &mut self {
            *text = Some(before.into());
        }
        self
    }

    /// The `Retry-After` of an error.
    #[must_use]
    pub fn retry_after(mut self, value: impl Into<String>) -> Self {
        if let Self::Error { retry_after, .. } = &mut self {
            *retry_after = Some(value.into());
        }
        self
    }
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// Its id.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// Its arguments, as JSON text.
    #[serde(deserialize_with = "json_text")]
    pub arguments: String,
}

impl Call {
    /// A call of `name` with `arguments` (JSON text).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A string as it is; any other JSON value as its text.
fn json_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(text) => text,
        other => other.to_string(),
    })
}

/// The tokens a reply reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Tokens read.
    pub prompt_tokens: u64,
    /// Tokens written.
    pub completion_tokens: u64,
}

/// A whole script, as the `scripted-model` binary reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The replies, in order.
    pub replies: Vec<Reply>,
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Received {
    /// The HTTP method.
    pub method: String,
    /// The path.
    pub path: String,
    /// The headers, by lower-case name (repeated ones joined with `, `).
    pub headers: BTreeMap<String, String>,
    /// The body, parsed (`null` when empty or not JSON).
    pub body: Value,
    /// When it came, on tokio's clock (virtual in a test whose clock is paused).
    #[serde(skip)]
    pub at: tokio::time::Instant,
}

impl Received {
    /// A header's value, by name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// What each request is told to, and what is recorded.
struct State {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    observer: Box<dyn Fn(&Received) + Send + Sync>,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("replies", &self.replies)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

/// The running server; it stops when dropped.
#[derive(Debug)]
pub struct ScriptedModel {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: JoinHandle<()>,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl ScriptedModel {
    /// Starts a server on 127.0.0.1 (port 0) answering with `replies`, on the current
    /// runtime.
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self::start_observed(replies, |_| {}).await
    }

    /// [`start`](Self::start), `observer` told of every request as it comes.
    pub async fn start_observed(
        replies: impl IntoIterator<Item = Reply>,
        observer: impl Fn(&Received) + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("a bound address");
        let state = Arc::new(State {
            replies: Mutex::new(replies.into_iter().collect()),
            received: Mutex::default(),
            observer: Box::new(observer),
        });
        let acceptor = tokio::spawn(accept(listener, state.clone()));
        Self {
            addr,
            state,
            acceptor,
        }
    }

    /// The API's base URL: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.state.replies).extend(replies);
    }

    /// The replies not given yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state.replies).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        lock(&self.state.received).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Accepts connections until aborted; each is served by a task that goes with it.
async fn accept(listener: TcpListener, state: Arc<State>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(req, &state).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
        // Finished connections are let go of as others come.
        while connections.try_join_next().is_some() {}
    }
}

/// Records a request, then answers it with the next reply.
async fn answer(req: hyper::Request<Incoming>, state: &State) -> hyper::Response<Chunks> {
    let (head, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut headers = BTreeMap::<String, String>::new();
    for (name, value) in &head.headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let received = Received {
        method: head.method.to_string(),
        path: head.uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: tokio::time::Instant::now(),
    };
    (state.observer)(&received);
    let number = {
        let mut all = lock(&state.received);
        all.push(received.clone());
        all.len()
    };
    if head.method != hyper::Method::POST || !received.path.ends_with("/chat/completions") {
        return respond(404, "text/plain", vec![Bytes::from("not found\n")]);
    }
    let Some(reply) = lock(&state.replies).pop_front() else {
        let error = json!({"error": {
            "message": format!("the script is spent: no reply for request {number}"),
            "type": "scripted_model",
        }});
        return respond(
            500,
            "application/json",
            vec![Bytes::from(error.to_string())],
        );
    };
    let model = received.body["model"].as_str().unwrap_or("scripted");
    let streamed = received.body["stream"] == true;
    let usage = received.body["stream_options"]["include_usage"] == true;
    match reply {
        Reply::Hang {} => std::future::pending().await,
        Reply::Error {
            status,
            retry_after,
            body,
        } => {
            let content_type = match serde_json::from_str::<Value>(&body) {
                Ok(_) => "application/json",
                Err(_) => "text/plain",
            };
            let mut response = respond(status, content_type, vec![Bytes::from(body)]);
            if let Some(value) = retry_after
                && let Ok(value) = hyper::header::HeaderValue::from_str(&value)
            {
                response.headers_mut().insert("retry-after", value);
            }
            response
        }
        Reply::Raw {
            status,
            content_type,
            body,
        } => respond(status, &content_type, vec![Bytes::from(body)]),
        reply if streamed => {
            let mut events: Vec<Bytes> = deltas(&reply, model, number, usage)
                .iter()
                .map(|chunk| Bytes::from(format!("data: {chunk}\n\n")))
                .collect();
            events.push(Bytes::from_static(b"data: [DONE]\n\n"));
            respond(200, "text/event-stream", events)
        }
        reply => {
            let whole = whole(&reply, model, number);
            respond(
                200,
                "application/json",
                vec![Bytes::from(whole.to_string())],
            )
        }
    }
}

fn respond(status: u16, content_type: &str, chunks: Vec<Bytes>) -> hyper::Response<Chunks> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Chunks(chunks.into()))
        .expect("a valid response")
}

/// The parts of a text or tool-call reply.
fn parts(reply: &Reply) -> (Option<&str>, &[Call], usize, &str, Usage) {
    match reply {
        Reply::Text {
            text,
            chunks,
            finish,
            usage,
        } => (
            Some(text),
            &[],
            *chunks,
            finish.as_deref().unwrap_or("stop"),
            *usage,
        ),
        Reply::ToolCalls {
            calls,
            text,
            chunks,
            usage,
        } => (text.as_deref(), calls, *chunks, "tool_calls", *usage),
        _ => (None, &[], 1, "stop", Usage::default()),
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// The `chat.completion.chunk`s of a streamed reply, as the API sends them: the role, the
/// content deltas, each call's first delta (id, name) then its argument deltas, the
/// finish, then the usage alone when asked for.
fn deltas(reply: &Reply, model: &str, number: usize, with_usage: bool) -> Vec<Value> {
    let (text, calls, chunks, finish, usage) = parts(reply);
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": format!("chatcmpl-scripted-{number}"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(text) = text {
        for piece in split(text, chunks) {
            out.push(chunk(json!({"content": piece}), None));
        }
    }
    for (index, call) in calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            None,
        ));
        for piece in split(&call.arguments, chunks) {
            out.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    out.push(chunk(json!({}), Some(finish)));
    if with_usage {
        out.push(json!({
            "id": format!("chatcmpl-scripted-{number}"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage_json(usage),
        }));
    }
    out
}

/// The `chat.completion` of a reply answered whole.
fn whole(reply: &Reply, model: &str, number: usize) -> Value {
    let (text, calls, _, finish, usage) = parts(reply);
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
    }
    json!({
        "id": format!("chatcmpl-scripted-{number}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_json(usage),
    })
}

/// `text` in `n` pieces of about as many characters (at least one piece, none empty
/// unless `text` is).
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.clamp(1, chars.len().max(1));
    let size = chars.len().div_ceil(n).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    if pieces.is_empty() {
        pieces.push(String::new());
    }
    pieces
}

/// A body sent in the pieces it was made of, one frame each.
#[derive(Debug)]
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_split_into_pieces_of_whole_characters() {
        assert_eq!(split("abcdef", 3), ["ab", "cd", "ef"]);
        assert_eq!(split("abcde", 2), ["abc", "de"]);
        assert_eq!(split("été", 3), ["é", "t", "é"]);
        assert_eq!(split("ab", 5), ["a", "b"]);
        assert_eq!(split("", 4), [""]);
        assert_eq!(split("abc", 0), ["abc"]);
    }

    #[test]
    fn the_documented_script_reads() {
        let script: Script = serde_json::from_str(
            r#"{"replies": [
              {"kind": "text", "text": "It is sunny.", "chunks": 1, "finish": null,
               "usage": {"prompt_tokens": 0, "completion_tokens": 0}},
              {"kind": "tool_calls", "text": null, "chunks": 1, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
               "calls": [{"id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}]},
              {"kind": "error", "status": 503, "retry_after": null, "body": ""},
              {"kind": "hang"},
              {"kind": "raw", "status": 200, "content_type": "text/event-stream", "body": "data: {\n\n"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            script.replies,
            [
                Reply::text("It is sunny."),
                Reply::tool_calls([Call::new("call_1", "get_weather", r#"{"city":"Paris"}"#)]),
                Reply::error(503, ""),
                Reply::hang(),
                Reply::raw(200, "text/event-stream", "data: {\n\n"),
            ]
        );
        let short: Script = serde_json::from_str(
            r#"{"replies": [{"kind": "text", "text": "hi", "chunks": 2, "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
                {"kind": "tool_calls", "calls": [{"id": "c", "name": "f", "arguments": {"a": 1}}]},
                {"kind": "error", "status": 429, "retry_after": "2"}]}"#,
        )
        .unwrap();
        assert_eq!(
            short.replies,
            [
                Reply::text("hi").chunks(2).usage(3, 1),
                Reply::tool_calls([Call::new("c", "f", r#"{"a":1}"#)]),
                Reply::error(429, "").retry_after("2"),
            ]
        );
        let unknown = serde_json::from_str::<Script>(r#"{"replies": [{"kind": "txt"}]}"#);
        assert!(unknown.is_err());
        for extra in [
            r#"{"replies": [{"kind": "hang", "seconds": 3}]}"#,
            r#"{"replies": [{"kind": "text", "text": "a", "chunk": 3}]}"#,
            r#"{"replies": [{"kind": "tool_calls", "calls": [{"id": "c", "name": "f", "arguments": "", "x": 1}]}]}"#,
            r#"{"replies": [], "model": "m"}"#,
        ] {
            assert!(serde_json::from_str::<Script>(extra).is_err(), "{extra}");
        }
    }

    #[test]
    fn a_stream_carries_every_delta_and_the_usage_when_asked() {
        let reply = Reply::tool_calls([
            Call::new("call_1", "a", r#"{"x":1}"#),
            Call::new("call_2", "b", "{}"),
        ])
        .chunks(2)
        .with_text("Let me see.")
        .usage(7, 3);
        let chunks = deltas(&reply, "m", 1, true);
        let args: Vec<(u64, String)> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0].as_object())
            .map(|c| {
                let index = c["index"].as_u64().unwrap();
                (
                    index,
                    c["function"]["arguments"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            args,
            [
                (0, String::new()),
                (0, r#"{"x""#.to_owned()),
                (0, ":1}".to_owned()),
                (1, String::new()),
                (1, "{".to_owned()),
                (1, "}".to_owned()),
            ]
        );
        let last = chunks.last().unwrap();
        assert_eq!(last["usage"]["prompt_tokens"], 7);
        assert_eq!(last["choices"], json!([]));
        assert_eq!(
            chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
            "tool_calls"
        );
        assert!(
            deltas(&reply, "m", 1, false)
                .iter()
                .all(|c| c.get("usage").is_none())
        );
    }
}
