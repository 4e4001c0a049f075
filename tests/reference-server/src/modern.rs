//! 2026-07-28: stateless requests, their header checks, listens and `input_required`.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Response};
use mcp_wire::header::decode_value;
use mcp_wire::{ErrorObject, Message, RequestId, ToolHeaders, code, meta};
use serde_json::{Value, json};

use super::body::{self, AnyBody, Events};
use super::{
    Refusal, State, answer, catalog, common, keep_alive, legacy, params, refuse, rpc_error, status,
    stream_response,
};

/// The `requestState` the `ask` tool hands out and expects back.
const ASK_STATE: &str = "ask-state-1";

/// An open `subscriptions/listen`.
#[derive(Debug)]
pub(crate) struct Listen {
    id: RequestId,
    filter: Filter,
    events: Events,
}

/// What a listen asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) events: bool,
    pub(crate) uris: Vec<String>,
}

impl Filter {
    pub(crate) fn wants_uri(&self, uri: &str) -> bool {
        self.uris.iter().any(|u| u == uri)
    }
}

/// Whether a message states a modern revision in `params._meta`.
pub(crate) fn states_revision(message: &Message<'_>) -> bool {
    params(message)["_meta"]
        .get(meta::key::PROTOCOL_VERSION)
        .is_some()
}

pub(crate) fn open(state: &State) -> usize {
    let mut listens = state.listens.lock().expect("listens");
    listens.retain(|l| !l.events.is_closed());
    listens.len()
}

/// How many open listens ask for changes of `uri`.
pub(crate) fn listening(state: &State, uri: &str) -> usize {
    let listens = state.listens.lock().expect("listens");
    listens
        .iter()
        .filter(|l| l.filter.wants_uri(uri) && !l.events.is_closed())
        .count()
}

/// Ends every listen the way a server ends one gracefully: a final result, then the
/// stream is forgotten.
pub(crate) async fn end_all(state: &State) {
    let listens: Vec<Listen> = std::mem::take(&mut *state.listens.lock().expect("listens"));
    for listen in listens {
        let done = json!({"jsonrpc": "2.0", "id": listen.id, "result": {"resultType": "complete",
            "_meta": {meta::key::SUBSCRIPTION_ID: listen.id}}});
        listen.events.send(None, None, &done.to_string()).await;
    }
}

pub(crate) fn close_all(state: &State) {
    state.listens.lock().expect("listens").clear();
}

/// Sends a notification on every listen whose filter `wants` it.
pub(crate) async fn push(
    state: &State,
    wants: impl Fn(&Filter) -> bool,
    method: &str,
    params: Value,
) {
    let targets: Vec<(RequestId, Events)> = state
        .listens
        .lock()
        .expect("listens")
        .iter()
        .filter(|l| wants(&l.filter) && !l.events.is_closed())
        .map(|l| (l.id.clone(), l.events.clone()))
        .collect();
    for (id, events) in targets {
        let mut params = params.clone();
        params["_meta"] = json!({meta::key::SUBSCRIPTION_ID: id});
        let note = json!({"jsonrpc": "2.0", "method": method, "params": params});
        events.send(None, None, &note.to_string()).await;
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn mismatch(id: Option<&RequestId>, what: String) -> Response<AnyBody> {
    rpc_error(
        400,
        id,
        ErrorObject::new(code::HEADER_MISMATCH, format!("Header mismatch: {what}")),
    )
}

/// The checks every modern request passes before it is served.
fn check(
    state: &State,
    headers: &HeaderMap,
    id: Option<&RequestId>,
    method: &str,
    params: &Value,
) -> Result<(), Refusal> {
    let meta = &params["_meta"];
    let Some(revision) = meta[meta::key::PROTOCOL_VERSION].as_str() else {
        return refuse(match header(headers, "mcp-protocol-version") {
            None => mismatch(id, "missing MCP-Protocol-Version header".into()),
            Some(_) => rpc_error(
                400,
                id,
                ErrorObject::new(code::INVALID_PARAMS, "missing _meta protocolVersion"),
            ),
        });
    };
    match header(headers, "mcp-protocol-version") {
        Some(h) if h == revision => {}
        Some(h) => {
            return refuse(mismatch(
                id,
                format!("MCP-Protocol-Version {h:?} is not {revision:?}"),
            ));
        }
        None => return refuse(mismatch(id, "missing MCP-Protocol-Version header".into())),
    }
    if !state.options.modern_versions.iter().any(|v| v == revision) {
        let error = ErrorObject::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": state.options.modern_versions, "requested": revision}));
        return refuse(rpc_error(400, id, error));
    }
    if header(headers, "mcp-method") != Some(method) {
        return refuse(mismatch(
            id,
            format!("Mcp-Method does not match {method:?}"),
        ));
    }
    if meta.get(meta::key::CLIENT_CAPABILITIES).is_none() {
        return refuse(rpc_error(
            400,
            id,
            ErrorObject::new(code::INVALID_PARAMS, "missing _meta clientCapabilities"),
        ));
    }
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let sent = header(headers, "mcp-name").and_then(|h| decode_value(h).ok());
        if sent.as_deref() != Some(name) {
            return refuse(mismatch(id, format!("Mcp-Name does not match {name:?}")));
        }
    }
    if method == "tools/call"
        && let Some(schema) = catalog::input_schema(params["name"].as_str().unwrap_or(""))
    {
        let expected = ToolHeaders::from_value(&schema)
            .map(|h| {
                h.derive(params["arguments"].as_object())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        for (name, value) in expected {
            let sent = header(headers, &name).and_then(|h| decode_value(h).ok());
            let want = decode_value(&value).ok();
            if sent.is_none() || sent != want {
                return refuse(mismatch(id, format!("{name} does not match the arguments")));
            }
        }
    }
    Ok(())
}

fn complete(mut result: Value, cacheable: bool) -> Value {
    if let Some(map) = result.as_object_mut() {
        map.entry("resultType").or_insert(json!("complete"));
        if cacheable {
            map.insert("ttlMs".into(), json!(0));
            map.insert("cacheScope".into(), json!("private"));
        }
        map.insert(
            "_meta".into(),
            json!({meta::key::SERVER_INFO: server_info()}),
        );
    }
    result
}

fn server_info() -> Value {
    json!({"name": "mcp-reference-server", "version": env!("CARGO_PKG_VERSION")})
}

pub(crate) async fn post(
    state: &Arc<State>,
    headers: &HeaderMap,
    message: Message<'_>,
) -> Response<AnyBody> {
    let params = params(&message);
    let (id, method) = match &message {
        Message::Request(r) => (Some(r.id.clone()), r.method.to_string()),
        Message::Notification(n) => (None, n.method.to_string()),
        Message::Response(_) => return status(400),
    };
    if let Err(refusal) = check(state, headers, id.as_ref(), &method, &params) {
        return *refusal;
    }
    let Some(id) = id else {
        return status(202);
    };
    let cacheable = matches!(
        method.as_str(),
        "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "prompts/list"
            | "resources/read"
    );
    let result = match method.as_str() {
        "server/discover" => {
            let mut capabilities = json!({
                "tools": {"listChanged": true},
                "resources": {"subscribe": state.options.subscribe, "listChanged": true},
                "prompts": {"listChanged": false},
                "completions": {},
            });
            if state.options.events {
                capabilities["extensions"] =
                    json!({mcp_wire::events::EXTENSION: {"listChanged": true}});
            }
            Ok(json!({
                "supportedVersions": state.options.modern_versions,
                "capabilities": capabilities,
            }))
        }
        "subscriptions/listen" => return listen(state, id, &params).await,
        "tools/call" if params["name"] == "slow" => return slow(state, id, &params),
        "tools/call" if params["name"] == "ask" => Ok(ask(&params)),
        other if state.options.events && other.starts_with("events/") => {
            match super::events::answer(&state.events, state.options.poll_ms, other, &params).await
            {
                Some(result) => result,
                None => {
                    let error = ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        format!("Method not found: {other}"),
                    );
                    return rpc_error(404, Some(&id), error);
                }
            }
        }
        other => match common(state, other, &params) {
            Some(result) => result,
            None => {
                let error =
                    ErrorObject::new(code::METHOD_NOT_FOUND, format!("Method not found: {other}"));
                return rpc_error(404, Some(&id), error);
            }
        },
    };
    let cacheable = cacheable || method == "server/discover";
    answer(state, &id, result.map(|r| complete(r, cacheable)), None).await
}

/// The `ask` tool: `input_required` until the retry answers the elicitation and echoes the
/// state.
fn ask(params: &Value) -> Value {
    let answered = &params["inputResponses"]["name"];
    if params["requestState"] == ASK_STATE && !answered.is_null() {
        return catalog::text_result(&legacy::greeting(answered), false);
    }
    json!({
        "resultType": "input_required",
        "inputRequests": {"name": {"method": "elicitation/create", "params": {
            "message": "What is your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        }}},
        "requestState": ASK_STATE,
    })
}

/// The `slow` tool on an event stream: progress, then the result. A stream closed by the
/// client before the result is recorded ([`State::abandoned`]).
fn slow(state: &Arc<State>, id: RequestId, params: &Value) -> Response<AnyBody> {
    let state = state.clone();
    let (events, body) = body::stream();
    let steps = params["arguments"]["steps"].as_u64().unwrap_or(3);
    let delay = Duration::from_millis(params["arguments"]["delay_ms"].as_u64().unwrap_or(50));
    let token = params["_meta"]["progressToken"].clone();
    tokio::spawn(async move {
        for step in 1..=steps {
            tokio::time::sleep(delay).await;
            if !token.is_null() {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": steps}});
                if !events.send(None, None, &note.to_string()).await {
                    state.abandoned(&id);
                    return;
                }
            }
        }
        let result = complete(
            catalog::text_result(&format!("counted {steps}"), false),
            false,
        );
        let done = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if !events.send(None, None, &done.to_string()).await {
            state.abandoned(&id);
        }
    });
    stream_response(body, None)
}

/// `subscriptions/listen`: acknowledge what the server honours, then hold the stream.
async fn listen(state: &Arc<State>, id: RequestId, params: &Value) -> Response<AnyBody> {
    let asked = &params["notifications"];
    let filter = Filter {
        tools: asked["toolsListChanged"] == true,
        resources: asked["resourcesListChanged"] == true,
        events: asked["eventsListChanged"] == true && state.options.events,
        uris: asked["resourceSubscriptions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut agreed = json!({});
    if filter.tools {
        agreed["toolsListChanged"] = json!(true);
    }
    if filter.resources {
        agreed["resourcesListChanged"] = json!(true);
    }
    if filter.events {
        agreed["eventsListChanged"] = json!(true);
    }
    if !filter.uris.is_empty() {
        agreed["resourceSubscriptions"] = json!(filter.uris);
    }
    let (events, body) = body::stream();
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": agreed, "_meta": {meta::key::SUBSCRIPTION_ID: id}}});
    events.send(None, None, &ack.to_string()).await;
    state.listens.lock().expect("listens").push(Listen {
        id,
        filter,
        events: events.clone(),
    });
    keep_alive(state, events);
    stream_response(body, None)
}
