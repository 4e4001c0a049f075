//! 2025-11-25 and older: sessions, the GET stream, resumption, subscriptions, and requests
//! sent to the client.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, Response};
use mcp_wire::{ErrorObject, Message, RequestId, Revision, code};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::body::{self, AnyBody, Events};
use super::{
    Refusal, State, answer, catalog, common, keep_alive, params, refuse, rpc_error, status,
    stream_response,
};

/// The legacy sessions.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
    /// Answers the server awaits from clients (to `elicitation/create`), by request id.
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<Value>>>,
}

#[derive(Debug, Default)]
pub(crate) struct Session {
    revision: String,
    alive: bool,
    subscriptions: HashSet<String>,
    get_streams: Vec<Events>,
    /// Each stream's events after its priming event, for replay: stream id → (event id, data).
    streams: HashMap<String, Vec<(String, String)>>,
    /// Every stream's events in the order they were recorded, for a whole-session replay.
    all: Vec<(String, String)>,
}

impl Session {
    pub(crate) fn subscribed(&self, uri: &str) -> bool {
        self.subscriptions.contains(uri)
    }
}

impl Sessions {
    pub(crate) fn expire_all(&self) {
        for session in self.sessions.lock().expect("sessions").values_mut() {
            session.alive = false;
            for stream in session.get_streams.drain(..) {
                stream.close();
            }
        }
    }

    /// How many live sessions have a GET stream attached, and of those, how many are
    /// subscribed to `uri`: who a change would reach now.
    pub(crate) fn reached(&self, uri: &str) -> (usize, usize) {
        let sessions = self.sessions.lock().expect("sessions");
        let attached: Vec<&Session> = sessions
            .values()
            .filter(|s| s.alive && s.get_streams.iter().any(|e| !e.is_closed()))
            .collect();
        let subscribed = attached.iter().filter(|s| s.subscribed(uri)).count();
        (attached.len(), subscribed)
    }

    /// Keeps an event of a stream for replay.
    pub(crate) fn record(&self, session: &str, stream: &str, id: &str, data: &str) {
        if let Some(s) = self.sessions.lock().expect("sessions").get_mut(session) {
            let event = (id.to_owned(), data.to_owned());
            s.all.push(event.clone());
            s.streams.entry(stream.to_owned()).or_default().push(event);
        }
    }
}

/// Sends `note` on the GET streams of every live session that `wants` it.
pub(crate) async fn push(state: &State, wants: impl Fn(&Session) -> bool, note: &Value) {
    let streams: Vec<(String, Events)> = {
        let mut sessions = state.legacy.sessions.lock().expect("sessions");
        sessions
            .iter_mut()
            .filter(|(_, s)| s.alive && wants(s))
            .flat_map(|(id, s)| {
                s.get_streams.retain(|e| !e.is_closed());
                s.get_streams
                    .iter()
                    .map(|e| (id.clone(), e.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let text = note.to_string();
    for (session, events) in streams {
        let stream = format!("get{}", state.next());
        let id = format!("{stream}-1");
        state.legacy.record(&session, &stream, &id, &text);
        events.send(Some(&id), None, &text).await;
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks the session and protocol version headers of a request after `initialize`.
fn check(state: &State, headers: &HeaderMap) -> Result<String, Refusal> {
    let Some(id) = header(headers, "mcp-session-id") else {
        return refuse(rpc_error(
            400,
            None,
            ErrorObject::new(-32000, "Bad Request: missing session id"),
        ));
    };
    let sessions = state.legacy.sessions.lock().expect("sessions");
    let Some(session) = sessions.get(id).filter(|s| s.alive) else {
        return refuse(rpc_error(
            404,
            None,
            ErrorObject::new(code::INVALID_REQUEST, "Session not found"),
        ));
    };
    if header(headers, "mcp-protocol-version") != Some(session.revision.as_str()) {
        return refuse(rpc_error(
            400,
            None,
            ErrorObject::new(code::INVALID_REQUEST, "Bad MCP-Protocol-Version header"),
        ));
    }
    Ok(id.to_owned())
}

pub(crate) async fn post(
    state: &Arc<State>,
    headers: &HeaderMap,
    message: Message<'_>,
) -> Response<AnyBody> {
    let params = params(&message);
    match message {
        Message::Request(r) if r.method == "initialize" => initialize(state, &r.id, &params).await,
        Message::Request(r) => {
            let session = match check(state, headers) {
                Ok(session) => session,
                Err(refusal) => return *refusal,
            };
            request(state, &session, &r.id, &r.method, &params).await
        }
        Message::Notification(_) => match check(state, headers) {
            Ok(_) => status(202),
            Err(refusal) => *refusal,
        },
        Message::Response(r) => {
            if let Err(refusal) = check(state, headers) {
                return *refusal;
            }
            let waiting =
                r.id.as_ref()
                    .and_then(|id| state.legacy.waiting.lock().expect("waiting").remove(id));
            if let Some(waiting) = waiting {
                let answer = match r.outcome {
                    Ok(result) => serde_json::from_str(result.get()).unwrap_or(Value::Null),
                    Err(e) => json!({"error": e}),
                };
                let _ = waiting.send(answer);
            }
            status(202)
        }
    }
}

async fn initialize(state: &Arc<State>, id: &RequestId, params: &Value) -> Response<AnyBody> {
    let offered = params["protocolVersion"].as_str().unwrap_or("");
    let revision = match offered.parse::<Revision>() {
        Ok(r) if r.era() == mcp_wire::Era::Legacy => offered.to_owned(),
        _ => Revision::LATEST_LEGACY.as_str().to_owned(),
    };
    let session = format!("s-{}", state.next());
    state.legacy.sessions.lock().expect("sessions").insert(
        session.clone(),
        Session {
            revision: revision.clone(),
            alive: true,
            ..Session::default()
        },
    );
    let result = json!({
        "protocolVersion": revision,
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": state.options.subscribe, "listChanged": true},
            "prompts": {"listChanged": false},
            "completions": {},
        },
        "serverInfo": {"name": "mcp-reference-server", "version": env!("CARGO_PKG_VERSION")},
    });
    answer(state, id, Ok(result), Some(&session)).await
}

async fn request(
    state: &Arc<State>,
    session: &str,
    id: &RequestId,
    method: &str,
    params: &Value,
) -> Response<AnyBody> {
    let result = match method {
        "ping" | "logging/setLevel" => Ok(json!({})),
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = params["uri"].as_str().unwrap_or("").to_owned();
            let mut sessions = state.legacy.sessions.lock().expect("sessions");
            if let Some(s) = sessions.get_mut(session) {
                if method == "resources/subscribe" {
                    s.subscriptions.insert(uri);
                } else {
                    s.subscriptions.remove(&uri);
                }
            }
            Ok(json!({}))
        }
        "tools/call" if params["name"] == "slow" => return slow(state, session, id, params).await,
        "tools/call" if params["name"] == "ask" => {
            return ask(state, id, &params["arguments"]).await;
        }
        other => match common(state, other, params) {
            Some(result) => result,
            None => Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            )),
        },
    };
    answer(state, id, result, Some(session)).await
}

/// The `slow` tool: progress every `delay_ms` (when the request gave a progress token), then
/// the result, on an event stream.
async fn slow(
    state: &Arc<State>,
    session: &str,
    id: &RequestId,
    params: &Value,
) -> Response<AnyBody> {
    let (events, body) = body::stream();
    let steps = params["arguments"]["steps"].as_u64().unwrap_or(3);
    let delay = Duration::from_millis(params["arguments"]["delay_ms"].as_u64().unwrap_or(50));
    let token = params["_meta"]["progressToken"].clone();
    let id = id.clone();
    let state = state.clone();
    let session = session.to_owned();
    tokio::spawn(async move {
        let stream = format!("st{}", state.next());
        events.send(Some(&format!("{stream}-0")), None, "").await;
        // A server may ping its client on any stream; the client answers `{}`.
        let ping =
            json!({"jsonrpc": "2.0", "id": format!("ping-{}", state.next()), "method": "ping"});
        events.send(None, None, &ping.to_string()).await;
        for step in 1..=steps {
            tokio::time::sleep(delay).await;
            if !token.is_null() {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": steps}});
                let event = format!("{stream}-{step}");
                state
                    .legacy
                    .record(&session, &stream, &event, &note.to_string());
                if !events.send(Some(&event), None, &note.to_string()).await {
                    return;
                }
            }
        }
        let done = json!({"jsonrpc": "2.0", "id": id, "result": catalog::text_result(&format!("counted {steps}"), false)});
        let event = format!("{stream}-{}", steps + 1);
        state
            .legacy
            .record(&session, &stream, &event, &done.to_string());
        events.send(Some(&event), None, &done.to_string()).await;
    });
    stream_response(body, None)
}

/// The `ask` tool: `elicitation/create` on the request's stream, then a greeting. The
/// arguments `method` and `params` send another request instead, and `wait_ms` bounds the
/// wait for the answer (30 s); the result then says `no answer`, or the greeting (`invalid
/// answer` to anything but an elicitation's answer).
async fn ask(state: &Arc<State>, id: &RequestId, arguments: &Value) -> Response<AnyBody> {
    let (events, body) = body::stream();
    let method = arguments["method"].as_str().unwrap_or("elicitation/create");
    let params = match &arguments["params"] {
        Value::Null => json!({
            "message": "What is your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        }),
        params => params.clone(),
    };
    // `asks` questions at once (1 unless told), each awaited for `wait_ms`.
    let asks = arguments["asks"].as_u64().unwrap_or(1).clamp(1, 64);
    let mut questions = Vec::new();
    for _ in 0..asks {
        let ask_id = RequestId::String(format!("e-{}", state.next()));
        let (tx, rx) = oneshot::channel();
        state
            .legacy
            .waiting
            .lock()
            .expect("waiting")
            .insert(ask_id.clone(), tx);
        let request = json!({"jsonrpc": "2.0", "id": ask_id, "method": method, "params": params});
        questions.push((request, rx));
    }
    let id = id.clone();
    let wait = Duration::from_millis(arguments["wait_ms"].as_u64().unwrap_or(30_000));
    tokio::spawn(async move {
        let mut answers = Vec::new();
        for (request, rx) in questions {
            events.send(None, None, &request.to_string()).await;
            answers.push(rx);
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut texts = Vec::new();
        for rx in answers {
            texts.push(match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(answer)) => greeting(&answer),
                _ => "no answer".to_owned(),
            });
        }
        let text = texts.join(", ");
        let done =
            json!({"jsonrpc": "2.0", "id": id, "result": catalog::text_result(&text, false)});
        events.send(None, None, &done.to_string()).await;
    });
    stream_response(body, None)
}

/// What the `ask` tool says to an elicitation answer.
pub(crate) fn greeting(answer: &Value) -> String {
    match answer["action"].as_str() {
        Some("accept") => format!(
            "accept: name='{}'",
            answer["content"]["name"].as_str().unwrap_or("")
        ),
        Some(action) => action.to_owned(),
        None => "invalid answer".to_owned(),
    }
}

/// The GET stream: replays a stream after `Last-Event-ID`, or opens the session's push
/// stream.
pub(crate) async fn get(state: &Arc<State>, headers: &HeaderMap) -> Response<AnyBody> {
    if !state.options.legacy || !state.options.get_stream {
        return status(405);
    }
    let session = match check(state, headers) {
        Ok(session) => session,
        Err(refusal) => return *refusal,
    };
    let (events, body) = body::stream();
    let replay: Vec<(String, String)> = match header(headers, "last-event-id") {
        Some(last) => {
            let sessions = state.legacy.sessions.lock().expect("sessions");
            let stream = last.rsplit_once('-').map_or(last, |(s, _)| s);
            let whole = state.options.replay_whole_session;
            sessions
                .get(&session)
                .and_then(|s| {
                    if whole {
                        Some(&s.all)
                    } else {
                        s.streams.get(stream)
                    }
                })
                .map(|events| {
                    events
                        .iter()
                        .skip_while(|(id, _)| id != last)
                        .skip(1)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        }
        None => Vec::new(),
    };
    if let Some(s) = state
        .legacy
        .sessions
        .lock()
        .expect("sessions")
        .get_mut(&session)
    {
        s.get_streams.push(events.clone());
    }
    let sending = events.clone();
    let whole = state.options.replay_whole_session;
    let priming = format!("get{}-0", state.next());
    tokio::spawn(async move {
        sending.send(Some(&priming), None, "").await;
        for (id, data) in replay {
            // A whole-session replay sends stored priming events back as `{}`.
            let data = if data.is_empty() && whole {
                "{}".to_owned()
            } else {
                data
            };
            sending.send(Some(&id), None, &data).await;
        }
    });
    keep_alive(state, events);
    stream_response(body, None)
}

/// DELETE ends the session.
pub(crate) fn delete(state: &State, headers: &HeaderMap) -> Response<AnyBody> {
    let Some(id) = header(headers, "mcp-session-id") else {
        return status(400);
    };
    match state.legacy.sessions.lock().expect("sessions").get_mut(id) {
        Some(session) if session.alive => {
            session.alive = false;
            session.get_streams.clear();
            status(200)
        }
        _ => status(404),
    }
}

/// The `CloseMidStream` fault: a priming event with `retry`, then the stream closes; the
/// response is kept for a client that resumes with `Last-Event-ID`.
pub(crate) async fn close_mid_stream(
    state: &Arc<State>,
    id: RequestId,
    retry_ms: u64,
) -> Response<AnyBody> {
    let (events, body) = body::stream();
    let stream = format!("st{}", state.next());
    let priming = format!("{stream}-0");
    let result =
        json!({"jsonrpc": "2.0", "id": id, "result": catalog::text_result("resumed", false)});
    let sessions: Vec<String> = state
        .legacy
        .sessions
        .lock()
        .expect("sessions")
        .keys()
        .cloned()
        .collect();
    for session in &sessions {
        state.legacy.record(session, &stream, &priming, "");
    }
    // The result is kept a little later, as work finishing after the stream closed: what
    // other streams record meanwhile comes before it in a whole-session replay.
    let state = state.clone();
    tokio::spawn(async move {
        events.send(Some(&priming), Some(retry_ms), "").await;
        drop(events);
        tokio::time::sleep(Duration::from_millis(retry_ms / 4)).await;
        for session in &sessions {
            let id = format!("{stream}-1");
            state
                .legacy
                .record(session, &stream, &id, &result.to_string());
        }
    });
    stream_response(body, None)
}
