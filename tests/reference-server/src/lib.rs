//! The reference MCP server: a hyper server on 127.0.0.1 that speaks 2026-07-28 and
//! 2025-11-25 on one endpoint, with a few real tools and resources, and faults a test can
//! script per method.
//!
//! ```no_run
//! # async fn demo() {
//! use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
//!
//! let server = ReferenceServer::start(Options::default()).await;
//! server.script("server/discover", Fault::Status(403, None), Times::Once);
//! let url = server.url(); // http://127.0.0.1:<port>/mcp
//! # }
//! ```
//!
//! What it speaks:
//! - 2026-07-28 (a request whose `params._meta` states a revision): `server/discover`, the
//!   header checks (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`: a
//!   mismatch is 400 with -32020; an unsupported revision 400 with -32022; an unknown method
//!   404 with -32601), `subscriptions/listen` with its acknowledgment, and `input_required`
//!   for the `ask` tool.
//! - 2025-11-25 and older (anything else): `initialize` and sessions (404 once expired or
//!   deleted), the GET stream, event ids and resumption with `Last-Event-ID`,
//!   `resources/subscribe`, and `elicitation/create` sent to the client by the `ask` tool.
//!
//! The server stops when it is dropped.

mod body;
mod catalog;
mod events;
mod legacy;
mod modern;
mod script;
pub mod support;
mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use mcp_wire::{ErrorObject, Message, RequestId, code, decode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use script::{Fault, Times};

use body::{AnyBody, Events, empty, full};

/// How the server behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Serve 2025-11-25 and older (`initialize`, sessions).
    pub legacy: bool,
    /// Serve 2026-07-28 (`server/discover`, stateless requests).
    pub modern: bool,
    /// The modern revisions it lists and accepts.
    pub modern_versions: Vec<String>,
    /// Answer requests with an event stream (priming event first) instead of a JSON body.
    pub sse: bool,
    /// Offer the legacy GET stream (else GET is 405).
    pub get_stream: bool,
    /// Send a keep-alive comment this often on long-lived streams.
    pub keepalive: Option<Duration>,
    /// Answer a GET with `Last-Event-ID` by replaying every stream of the session after that
    /// id, stored priming events as `data: {}` (what `server-everything` does), instead of
    /// only the stream the id belongs to.
    pub replay_whole_session: bool,
    /// Serve HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with a certificate for 127.0.0.1 signed by a
    /// CA made at start ([`ReferenceServer::ca_der`]).
    pub tls: bool,
    /// Declare and serve MCP Events at 2026-07-28 (`events/list`, `events/poll`; see
    /// [`ReferenceServer::emit`]).
    pub events: bool,
    /// The `nextPollMs` its polls answer.
    pub poll_ms: u64,
    /// Declare `resources.subscribe` (else a client sees that it offers no subscriptions).
    pub subscribe: bool,
}

impl Default for Options {
    /// Both eras, JSON answers, a GET stream, keep-alives every 15 s, subscriptions
    /// declared.
    fn default() -> Self {
        Self {
            legacy: true,
            modern: true,
            modern_versions: vec!["2026-07-28".into()],
            sse: false,
            get_stream: true,
            keepalive: Some(Duration::from_secs(15)),
            replay_whole_session: false,
            tls: false,
            events: false,
            poll_ms: 1000,
            subscribe: true,
        }
    }
}

/// One request the server received, for assertions.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Logged {
    /// The HTTP method.
    pub http: Method,
    /// The HTTP version.
    pub version: http::Version,
    /// The JSON-RPC method, if the body was a request or notification.
    pub method: Option<String>,
    /// The request's headers.
    pub headers: HeaderMap,
    /// The body, parsed (`Null` when empty or not JSON).
    pub body: Value,
    /// When it was received, on tokio's clock (virtual in a test whose clock is paused).
    pub at: tokio::time::Instant,
}

impl Logged {
    /// A header's value, as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The server's shared state.
#[derive(Debug, Default)]
pub(crate) struct State {
    options: Options,
    script: script::Script,
    log: Mutex<Vec<Logged>>,
    next: AtomicU64,
    counter: AtomicU64,
    /// Tools added since start ([`ReferenceServer::add_tool`]), listed after the others.
    added: Mutex<Vec<String>>,
    legacy: legacy::Sessions,
    listens: Mutex<Vec<modern::Listen>>,
    events: events::Log,
    /// The ids of the `slow` calls whose stream the client closed before their result.
    abandoned: Mutex<Vec<Value>>,
}

impl State {
    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records that the client closed the stream of call `id` before its result.
    fn abandoned(&self, id: &RequestId) {
        let id = serde_json::to_value(id).unwrap_or(Value::Null);
        self.abandoned.lock().expect("abandoned").push(id);
    }
}

/// A running reference server; dropping it stops it.
#[derive(Debug)]
pub struct ReferenceServer {
    addr: SocketAddr,
    ca: Option<Vec<u8>>,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
}

impl ReferenceServer {
    /// Starts a server on 127.0.0.1 with an OS-chosen port, on the current tokio runtime.
    pub async fn start(options: Options) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("a bound address");
        let state = Arc::new(State {
            options,
            ..State::default()
        });
        let (stop, mut stopped) = oneshot::channel::<()>();
        let serving = state.clone();
        let tls = state.options.tls.then(tls::tls);
        let ca = tls.as_ref().map(|t| t.ca.clone());
        let acceptor = tls.map(|t| t.acceptor);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let state = serving.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, std::convert::Infallible>(serve(state, req).await) }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    match acceptor {
                        Some(acceptor) => {
                            let Ok(tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                        }
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            ca,
            state,
            stop: Some(stop),
        }
    }

    /// The MCP endpoint: `http://127.0.0.1:<port>/mcp` (`https` with [`Options::tls`]).
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/mcp", self.addr)
    }

    /// The CA certificate (DER) a client must trust to reach a TLS server.
    pub fn ca_der(&self) -> Option<&[u8]> {
        self.ca.as_deref()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Emits an MCP Events occurrence of `name` (`ticket.created` or `build.finished`) with
    /// `data`; its `eventId`.
    pub fn emit(&self, name: &str, data: Value) -> String {
        self.state.events.emit(name, data, None)
    }

    /// As [`ReferenceServer::emit`], its webhook deliveries signed as usual but naming the
    /// subscription `subscription` in `X-MCP-Subscription-Id` (a stale or foreign one).
    pub fn emit_as(&self, name: &str, data: Value, subscription: &str) -> String {
        self.state.events.emit(name, data, Some(subscription))
    }

    /// Sends a signed control envelope (`{"type":"gap",…}` or `{"type":"terminated",…}`)
    /// to every webhook subscription of the type `name`; a `terminated` one ends them.
    pub fn envelope(&self, name: &str, body: Value) {
        self.state.events.envelope(name, &body);
    }

    /// Sets the `deliveryStatus` every later `events/subscribe` answer carries (`None`:
    /// none).
    pub fn delivery_status(&self, status: Option<Value>) {
        self.state.events.set_status(status);
    }

    /// The webhook deliveries made so far: each `webhook-id` and the status the receiver
    /// answered (0 when it could not be reached).
    pub fn delivered(&self) -> Vec<(String, u16)> {
        self.state.events.delivered()
    }

    /// Makes `method` answer with `fault`, `times` times. `"GET"` and `"DELETE"` script the
    /// legacy GET stream and the session's DELETE (`Silence` and `Status` apply).
    pub fn script(&self, method: &str, fault: Fault, times: Times) {
        self.state.script.add(method, fault, times);
    }

    /// Every request received so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.log.lock().expect("log lock").clone()
    }

    /// The ids of the `slow` calls whose event stream the client closed before their result
    /// (seen at the next progress the call sends): how a 2026-07-28 client cancels.
    pub fn abandoned(&self) -> Vec<Value> {
        self.state.abandoned.lock().expect("abandoned").clone()
    }

    /// The JSON-RPC methods received so far, in order (notifications included).
    pub fn methods(&self) -> Vec<String> {
        self.log().into_iter().filter_map(|l| l.method).collect()
    }

    /// Ends every legacy session: later requests carrying one get 404.
    pub fn expire_sessions(&self) {
        self.state.legacy.expire_all();
    }

    /// Changes `uri` (the counter resource counts up) and tells every subscriber: a legacy
    /// session subscribed to it on its GET stream, a modern listen that asked for it.
    pub async fn touch(&self, uri: &str) {
        self.state.counter.fetch_add(1, Ordering::Relaxed);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
        legacy::push(&self.state, |s| s.subscribed(uri), &note).await;
        modern::push(
            &self.state,
            |f| f.wants_uri(uri),
            "notifications/resources/updated",
            json!({"uri": uri}),
        )
        .await;
    }

    /// Says the tool list changed, to every GET stream and every listen that asked.
    pub async fn change_tools(&self) {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        legacy::push(&self.state, |_| true, &note).await;
        modern::push(
            &self.state,
            |f| f.tools,
            "notifications/tools/list_changed",
            json!({}),
        )
        .await;
    }

    /// Adds tool `name` to the listing (after the others; it answers its arguments as
    /// text), then says the tool list changed, as [`ReferenceServer::change_tools`].
    pub async fn add_tool(&self, name: &str) {
        self.state
            .added
            .lock()
            .expect("added tools")
            .push(name.to_owned());
        self.change_tools().await;
    }

    /// Tells every listen that asked for it that the MCP Events types changed.
    pub async fn change_events(&self) {
        modern::push(
            &self.state,
            |f| f.events,
            "notifications/events/list_changed",
            json!({}),
        )
        .await;
    }

    /// Ends every modern listen with a final result, as a server does when it lets one go.
    pub async fn end_listens(&self) {
        modern::end_all(&self.state).await;
    }

    /// How many legacy sessions a change of `uri` would reach now: subscribed to it, with a
    /// GET stream attached (a GET in the log may not be attached yet).
    pub fn reaching(&self, uri: &str) -> usize {
        self.state.legacy.reached(uri).1
    }

    /// How many legacy sessions have a GET stream attached.
    pub fn get_streams(&self) -> usize {
        self.state.legacy.reached("").0
    }

    /// How many modern listens open now ask for changes of `uri`.
    pub fn listening(&self, uri: &str) -> usize {
        modern::listening(&self.state, uri)
    }

    /// How many modern listens are open.
    pub fn listens(&self) -> usize {
        modern::open(&self.state)
    }
}

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.state.legacy.expire_all();
        modern::close_all(&self.state);
    }
}

/// An answer that refuses a request, boxed: it is the error side of the checks.
pub(crate) type Refusal = Box<Response<AnyBody>>;

/// Refuses with `response`.
pub(crate) fn refuse<T>(response: Response<AnyBody>) -> Result<T, Refusal> {
    Err(Box::new(response))
}

/// A JSON answer.
pub(crate) fn json_response(status: u16, value: &Value) -> Response<AnyBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(full(serde_json::to_vec(value).unwrap_or_default()))
        .expect("a valid response")
}

/// A JSON-RPC error answer.
pub(crate) fn rpc_error(
    status: u16,
    id: Option<&RequestId>,
    error: ErrorObject,
) -> Response<AnyBody> {
    let mut body = json!({"jsonrpc": "2.0", "error": error});
    if let Some(id) = id {
        body["id"] = json!(id);
    }
    json_response(status, &body)
}

/// A status with no body.
pub(crate) fn status(status: u16) -> Response<AnyBody> {
    Response::builder()
        .status(status)
        .body(empty())
        .expect("a valid response")
}

/// An event-stream answer, fed through `events`.
pub(crate) fn stream_response(body: AnyBody, session: Option<&str>) -> Response<AnyBody> {
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("x-accel-buffering", "no");
    if let Some(session) = session {
        response = response.header("mcp-session-id", session);
    }
    response.body(body).expect("a valid response")
}

/// Sends keep-alive comments on `events` until the client goes.
pub(crate) fn keep_alive(state: &State, events: Events) {
    let Some(every) = state.options.keepalive else {
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if !events.comment().await {
                break;
            }
        }
    });
}

async fn serve(state: Arc<State>, request: http::Request<Incoming>) -> Response<AnyBody> {
    let (parts, body) = request.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let parsed = decode(&bytes, 4 << 20);
    let method = match &parsed {
        Ok(Message::Request(r)) => Some(r.method.to_string()),
        Ok(Message::Notification(n)) => Some(n.method.to_string()),
        _ => None,
    };
    state.log.lock().expect("log lock").push(Logged {
        http: parts.method.clone(),
        version: parts.version,
        method: method.clone(),
        headers: parts.headers.clone(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        at: tokio::time::Instant::now(),
    });
    // `GET` and `DELETE` can be scripted like a method: held back, or answered a status.
    if parts.method == Method::GET || parts.method == Method::DELETE {
        match state.script.take(parts.method.as_str()) {
            Some(Fault::Silence(d)) => {
                tokio::time::sleep(d).await;
                return status(504);
            }
            Some(Fault::Status(code, _)) => return status(code),
            _ => {}
        }
    }
    match parts.method {
        Method::GET => return legacy::get(&state, &parts.headers).await,
        Method::DELETE => return legacy::delete(&state, &parts.headers),
        Method::POST => {}
        _ => return status(405),
    }
    let message = match parsed {
        Ok(message) => message,
        Err(e) => {
            return rpc_error(
                400,
                None,
                ErrorObject::new(code::PARSE_ERROR, e.to_string()),
            );
        }
    };
    if let (Message::Request(r), Some(name)) = (&message, &method)
        && let Some(fault) = state.script.take(name)
    {
        return apply(&state, fault, r.id.clone()).await;
    }
    let modern =
        state.options.modern && (!state.options.legacy || modern::states_revision(&message));
    if modern {
        modern::post(&state, &parts.headers, message).await
    } else {
        legacy::post(&state, &parts.headers, message).await
    }
}

/// Answers with a scripted fault.
async fn apply(state: &Arc<State>, fault: Fault, id: RequestId) -> Response<AnyBody> {
    match fault {
        Fault::Status(code, body) => match body {
            Some(body) => json_response(code, &body),
            None => status(code),
        },
        Fault::RpcError {
            status,
            code,
            message,
            data,
        } => {
            let mut error = ErrorObject::new(code, message);
            error.data = data;
            rpc_error(status, Some(&id), error)
        }
        Fault::Result(result) => {
            json_response(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Fault::Accepted => status(202),
        Fault::Silence(d) => {
            tokio::time::sleep(d).await;
            status(504)
        }
        Fault::CloseMidStream { retry_ms } => legacy::close_mid_stream(state, id, retry_ms).await,
    }
}

/// Extracts `_meta`-free params as a JSON value.
pub(crate) fn params(message: &Message<'_>) -> Value {
    let raw = match message {
        Message::Request(r) => r.params,
        Message::Notification(n) => n.params,
        Message::Response(_) => None,
    };
    raw.and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_else(|| json!({}))
}

/// The result of a method both eras serve the same way, or `None` for a method that needs
/// the era's own handling.
pub(crate) fn common(
    state: &State,
    method: &str,
    params: &Value,
) -> Option<Result<Value, ErrorObject>> {
    let invalid = |m: String| ErrorObject::new(code::INVALID_PARAMS, m);
    let cursor = params["cursor"].as_str();
    Some(match method {
        "tools/list" => {
            let mut tools = catalog::tools();
            let added = state.added.lock().expect("added tools").clone();
            tools.extend(added.iter().map(|name| catalog::echo(name)));
            catalog::page("tools", tools, cursor).map_err(invalid)
        }
        "resources/list" => {
            catalog::page("resources", catalog::resources(), cursor).map_err(invalid)
        }
        "resources/templates/list" => {
            catalog::page("resourceTemplates", catalog::templates(), cursor).map_err(invalid)
        }
        "prompts/list" => catalog::page("prompts", catalog::prompts(), cursor).map_err(invalid),
        "resources/read" => {
            let uri = params["uri"].as_str().unwrap_or("");
            catalog::read(uri, state.counter.load(Ordering::Relaxed))
                .ok_or_else(|| invalid(format!("unknown resource: {uri}")))
        }
        "prompts/get" => {
            let name = params["name"].as_str().unwrap_or("");
            catalog::prompt(name, &params["arguments"])
                .ok_or_else(|| invalid(format!("unknown prompt: {name}")))
        }
        "completion/complete" => Ok(catalog::complete(
            params["argument"]["value"].as_str().unwrap_or(""),
        )),
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or("");
            if state
                .added
                .lock()
                .expect("added tools")
                .iter()
                .any(|a| a == name)
            {
                return Some(Ok(catalog::text_result(
                    &params["arguments"].to_string(),
                    false,
                )));
            }
            catalog::instant(name, &params["arguments"])?.map_err(invalid)
        }
        _ => return None,
    })
}

/// Answers a request with a JSON body, or a stream of one event (after a priming event)
/// when the server answers with streams.
pub(crate) async fn answer(
    state: &State,
    id: &RequestId,
    result: Result<Value, ErrorObject>,
    session: Option<&str>,
) -> Response<AnyBody> {
    let mut message = json!({"jsonrpc": "2.0", "id": id});
    match result {
        Ok(r) => message["result"] = r,
        Err(e) => message["error"] = json!(e),
    }
    if !state.options.sse {
        let mut response = json_response(200, &message);
        if let Some(session) = session {
            response
                .headers_mut()
                .insert("mcp-session-id", session.parse().expect("a header value"));
        }
        return response;
    }
    let (events, body) = body::stream();
    let text = message.to_string();
    let stream = format!("st{}", state.next());
    let record = session.map(str::to_owned);
    let ids = (format!("{stream}-0"), format!("{stream}-1"));
    if let Some(s) = &record {
        state.legacy.record(s, &stream, &ids.0, "");
        state.legacy.record(s, &stream, &ids.1, &text);
    }
    tokio::spawn(async move {
        let _ = events.send(Some(&ids.0), None, "").await;
        let _ = events.send(Some(&ids.1), None, &text).await;
    });
    stream_response(body, session)
}
