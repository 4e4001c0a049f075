//! Wire fixtures: every file under `tests/fixtures/<kind>/` is one JSON-RPC message as it
//! would be on the wire, checked by the rule of its kind.
//!
//! - A typed kind (`call_tool_params`, `list_tools_result`, …) decodes the message, decodes
//!   its params or result into the kind's type, and checks that the typed value and the whole
//!   message encode back to the same JSON (key order aside).
//! - `server_notification`, `client_notification` and `error_response` also check what the
//!   crate makes of the message ([`ServerNotification`], [`ErrorKind`]).
//! - `malformed/<variant>-<name>.json` must fail [`decode`] with the [`Error`] variant its
//!   name starts with.
//!
//! Each kind is one test; a failing test lists every failing file of its kind and why.

use std::fs;
use std::path::{Path, PathBuf};

use mcp_wire::events::{
    EventsError, ListEventsResult, PollParams, PollResult, SubscribeEventsParams,
    SubscribeEventsResult, UnsubscribeEventsParams,
};
use mcp_wire::{
    CallToolParams, CallToolResult, CancelledParams, CompleteParams, CompleteResult,
    DiscoverParams, DiscoverResult, ElicitRequestParams, ElicitResult, EmptyResult, Error,
    ErrorKind, ErrorObject, GetPromptParams, GetPromptResult, InitializeParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    ListenParams, Message, Outcome, PageParams, ReadResourceParams, ReadResourceResult,
    ServerNotification, SubscribeParams, decode,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

/// The size limit fixtures are decoded with.
const LIMIT: usize = 1 << 20;

/// One test per kind directory, and the list of kinds the directory check knows.
macro_rules! kinds {
    ($($kind:ident => $check:ident $(::<$ty:ty>)? ($($arg:expr),*);)*) => {
        /// Every kind directory under `tests/fixtures`.
        const KINDS: &[&str] = &[$(stringify!($kind)),*];
        $(
            #[test]
            fn $kind() {
                $check $(::<$ty>)? (stringify!($kind) $(, $arg)*);
            }
        )*
    };
}

kinds! {
    initialize_params => check_params::<InitializeParams>(&["initialize"]);
    discover_params => check_params::<DiscoverParams>(&["server/discover"]);
    page_params => check_params::<PageParams>(&[
        "tools/list", "resources/list", "resources/templates/list", "prompts/list", "events/list",
    ]);
    call_tool_params => check_params::<CallToolParams>(&["tools/call"]);
    read_resource_params => check_params::<ReadResourceParams>(&["resources/read"]);
    subscribe_params => check_params::<SubscribeParams>(&["resources/subscribe", "resources/unsubscribe"]);
    get_prompt_params => check_params::<GetPromptParams>(&["prompts/get"]);
    complete_params => check_params::<CompleteParams>(&["completion/complete"]);
    listen_params => check_params::<ListenParams>(&["subscriptions/listen"]);
    elicit_request_params => check_params::<ElicitRequestParams>(&["elicitation/create"]);
    initialize_result => check_result::<InitializeResult>();
    discover_result => check_result::<DiscoverResult>();
    list_tools_result => check_result::<ListToolsResult>();
    list_resources_result => check_result::<ListResourcesResult>();
    list_resource_templates_result => check_result::<ListResourceTemplatesResult>();
    list_prompts_result => check_result::<ListPromptsResult>();
    call_tool_outcome => check_result::<Outcome<CallToolResult>>();
    read_resource_outcome => check_result::<Outcome<ReadResourceResult>>();
    get_prompt_outcome => check_result::<Outcome<GetPromptResult>>();
    complete_result => check_result::<CompleteResult>();
    empty_result => check_result::<EmptyResult>();
    elicit_result => check_result::<ElicitResult>();
    list_events_result => check_result::<ListEventsResult>();
    poll_params => check_params::<PollParams>(&["events/poll"]);
    poll_result => check_result::<PollResult>();
    subscribe_events_params => check_params::<SubscribeEventsParams>(&["events/subscribe"]);
    subscribe_events_result => check_result::<SubscribeEventsResult>();
    unsubscribe_events_params => check_params::<UnsubscribeEventsParams>(&["events/unsubscribe"]);
    server_notification => check_server_notifications();
    client_notification => check_client_notifications();
    error_response => check_error_responses();
    malformed => check_malformed();
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs `check` on every file of `kind` (given its name and bytes), and panics listing each
/// file that fails. A kind with no file fails too.
fn each_file(kind: &str, check: impl Fn(&str, &[u8]) -> Result<(), String>) {
    let dir = fixtures().join(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "tests/fixtures/{kind} holds no fixture");
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            let outcome = fs::read(path)
                .map_err(|e| format!("cannot be read: {e}"))
                .and_then(|bytes| check(&name, &bytes));
            outcome.err().map(|why| format!("{kind}/{name}: {why}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} fixtures fail:\n  {}",
        failures.len(),
        files.len(),
        failures.join("\n  ")
    );
}

/// Decodes one message, and checks that [`Message::encode`] writes the same JSON back.
fn decode_round_trip(bytes: &[u8]) -> Result<Message<'_>, String> {
    let message = decode(bytes, LIMIT).map_err(|e| format!("does not decode: {e}"))?;
    let mut out = Vec::new();
    message
        .encode(&mut out)
        .map_err(|e| format!("does not encode: {e}"))?;
    let mut original = parse(bytes)?;
    // An error response to an unreadable request is written without an id (MCP's schema has
    // `id?: RequestId`), where JSON-RPC's `"id": null` may have been read.
    if let Some(map) = original.as_object_mut()
        && map.contains_key("error")
        && map.get("id") == Some(&Value::Null)
    {
        map.remove("id");
    }
    same("message", &original, &parse(&out)?).map_err(|d| format!("re-encoded, {d}"))?;
    Ok(message)
}

fn parse(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("is not JSON: {e}"))
}

/// Checks that `typed` serializes to the JSON of `raw` (absent params count as `{}`).
fn same_as_typed<T: Serialize>(
    what: &str,
    raw: Option<&RawValue>,
    typed: &T,
) -> Result<(), String> {
    let original = raw.map_or(Ok(Value::Object(Default::default())), |r| {
        parse(r.get().as_bytes())
    })?;
    let typed = serde_json::to_value(typed).map_err(|e| format!("{what} does not encode: {e}"))?;
    same(what, &original, &typed).map_err(|d| format!("typed {d}"))
}

/// Names the first place two JSON values differ. Numbers are compared by value, as JSON has
/// one number type: a field held as `f64` writes `50` back as `50.0`, the same number.
fn same(path: &str, want: &Value, got: &Value) -> Result<(), String> {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                match b.get(key) {
                    Some(other) => same(&format!("{path}[{key:?}]"), value, other)?,
                    None => return Err(format!("{path}[{key:?}] is lost (was {value})")),
                }
            }
            match b.iter().find(|(key, _)| !a.contains_key(*key)) {
                Some((key, value)) => Err(format!("{path}[{key:?}] is added ({value})")),
                None => Ok(()),
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .try_for_each(|(i, (x, y))| same(&format!("{path}[{i}]"), x, y)),
        (Value::Number(a), Value::Number(b))
            if a == b || ((a.is_f64() || b.is_f64()) && a.as_f64() == b.as_f64()) =>
        {
            Ok(())
        }
        _ if want == got => Ok(()),
        _ => Err(format!("{path} was {want}, is now {got}")),
    }
}

/// A request with one of `methods`, whose params decode into `T` and encode back unchanged.
fn check_params<T: DeserializeOwned + Serialize>(kind: &str, methods: &[&str]) {
    each_file(kind, |_, bytes| match decode_round_trip(bytes)? {
        Message::Request(request) if methods.contains(&&*request.method) => {
            let typed: T = request
                .params_as()
                .map_err(|e| format!("params do not decode: {e}"))?;
            same_as_typed("params", request.params, &typed)
        }
        other => Err(format!("is not a request for {methods:?}: {other:?}")),
    });
}

/// A successful response whose result decodes into `T` and encodes back unchanged.
fn check_result<T: DeserializeOwned + Serialize>(kind: &str) {
    each_file(kind, |_, bytes| match decode_round_trip(bytes)? {
        Message::Response(response) if response.outcome.is_ok() => {
            let typed: T = response
                .result_as()
                .map_err(|e| format!("result does not decode: {e}"))?
                .map_err(|e| format!("is an error: {e}"))?;
            same_as_typed("result", response.outcome.ok(), &typed)
        }
        other => Err(format!("is not a successful response: {other:?}")),
    });
}

/// A server notification the crate knows: its typed params encode back unchanged, and the
/// listen subscription id in `_meta`, if any, is found.
fn check_server_notifications(kind: &str) {
    each_file(kind, |_, bytes| {
        let Message::Notification(notification) = decode_round_trip(bytes)? else {
            return Err("is not a notification".into());
        };
        let params = notification.params;
        let decoded = ServerNotification::decode(&notification)
            .map_err(|e| format!("params do not decode: {e}"))?;
        match &decoded {
            ServerNotification::Unknown { method } => Err(format!("{method} decodes as Unknown")),
            ServerNotification::Cancelled(p) => same_as_typed("params", params, p),
            ServerNotification::Progress(p) => same_as_typed("params", params, p),
            ServerNotification::Message(p) => same_as_typed("params", params, p),
            ServerNotification::ResourceUpdated(p) => same_as_typed("params", params, p),
            ServerNotification::ElicitationComplete(p) => same_as_typed("params", params, p),
            ServerNotification::SubscriptionsAcknowledged(p) => same_as_typed("params", params, p),
            ServerNotification::TaskStatus(p) => same_as_typed("params", params, p),
            _ => Ok(()), // the list_changed notifications: nothing but `_meta`
        }?;
        let params = params.map_or(Ok(Value::Null), |p| parse(p.get().as_bytes()))?;
        let want = params
            .pointer("/_meta/io.modelcontextprotocol~1subscriptionId")
            .cloned();
        let got = ServerNotification::subscription_id(&notification)
            .map(|id| serde_json::to_value(id).expect("an id encodes"));
        if want == got {
            Ok(())
        } else {
            Err(format!("subscription id {want:?} is read as {got:?}"))
        }
    });
}

/// A notification a client sends.
fn check_client_notifications(kind: &str) {
    each_file(kind, |_, bytes| match decode_round_trip(bytes)? {
        Message::Notification(n) if n.method == "notifications/cancelled" => {
            let typed: CancelledParams = n
                .params_as()
                .map_err(|e| format!("params do not decode: {e}"))?;
            same_as_typed("params", n.params, &typed)
        }
        Message::Notification(n) if n.method == "notifications/initialized" => Ok(()),
        other => Err(format!("is not a client notification: {other:?}")),
    });
}

/// An error response whose code the crate gives its typed [`ErrorKind`], carrying `data`.
fn check_error_responses(kind: &str) {
    each_file(kind, |_, bytes| match decode_round_trip(bytes)? {
        Message::Response(response) => match &response.outcome {
            Err(error) if kind_matches(error) => Ok(()),
            Err(error) => Err(format!("code {} reads as {:?}", error.code, error.kind())),
            Ok(_) => Err("is not an error response".into()),
        },
        other => Err(format!("is not a response: {other:?}")),
    });
}

/// Whether `error.kind()` is the variant its code names, with the fields `data` holds.
fn kind_matches(error: &ErrorObject) -> bool {
    let data = error.data.clone().unwrap_or(Value::Null);
    let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
    match (error.code, error.kind()) {
        (-32700, ErrorKind::ParseError)
        | (-32600, ErrorKind::InvalidRequest)
        | (-32601, ErrorKind::MethodNotFound)
        | (-32602, ErrorKind::InvalidParams)
        | (-32603, ErrorKind::InternalError)
        | (-32020, ErrorKind::HeaderMismatch)
        | (-32024, ErrorKind::Events(EventsError::Forbidden)) => true,
        (-32002, ErrorKind::ResourceNotFound { uri }) => uri.is_some() && uri == text("uri"),
        (-32042, ErrorKind::UrlElicitationRequired { elicitations }) => {
            !elicitations.is_empty()
                && Some(&Value::Array(elicitations)) == data.get("elicitations")
        }
        (-32021, ErrorKind::MissingClientCapability { required }) => {
            Some(&Value::Object(required.as_map().clone())) == data.get("requiredCapabilities")
        }
        (
            -32022,
            ErrorKind::UnsupportedVersion {
                supported,
                requested,
            },
        ) => {
            Some(&Value::from(supported)) == data.get("supported") && requested == text("requested")
        }
        (-32023, ErrorKind::Events(EventsError::NotFound { kind })) => kind == text("kind"),
        (-32025, ErrorKind::Events(EventsError::ResourceExhausted { limit, max })) => {
            limit == text("limit") && max == data.get("max").and_then(Value::as_u64)
        }
        (
            -32026,
            ErrorKind::Events(EventsError::Unsupported {
                feature,
                value,
                reason,
            }),
        ) => (feature, value, reason) == (text("feature"), text("value"), text("reason")),
        (-32027, ErrorKind::Events(EventsError::CallbackEndpoint { reason })) => {
            reason == text("reason")
        }
        _ => false,
    }
}

/// The file-name prefix of each [`Error`] variant a malformed fixture may expect.
fn variant(error: &Error) -> &'static str {
    match error {
        Error::Batch => "batch",
        Error::NotObject => "notobject",
        Error::NotJson { .. } => "notjson",
        Error::Version { .. } => "version",
        Error::NullId => "nullid",
        Error::ResultAndError => "resultanderror",
        Error::NotAMessage => "notamessage",
        Error::Shape { .. } => "shape",
        _ => "another variant",
    }
}

/// Input that must fail to decode with the variant its file name starts with.
fn check_malformed(kind: &str) {
    const VARIANTS: [&str; 8] = [
        "batch",
        "notobject",
        "notjson",
        "version",
        "nullid",
        "resultanderror",
        "notamessage",
        "shape",
    ];
    each_file(kind, |name, bytes| {
        let want = name.split('-').next().unwrap_or_default();
        if !VARIANTS.contains(&want) {
            return Err(format!(
                "the name names no Error variant (one of {VARIANTS:?})"
            ));
        }
        match decode(bytes, LIMIT) {
            Err(e) if variant(&e) == want => Ok(()),
            Err(e) => Err(format!("fails with {e:?}, not as {want}")),
            Ok(message) => Err(format!("decodes, as {message:?}")),
        }
    });
}

#[test]
fn every_directory_is_a_known_kind() {
    let mut strays = Vec::new();
    for entry in fs::read_dir(fixtures()).expect("tests/fixtures is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !path.is_dir() {
            strays.push(format!("{name} is a file outside any kind directory"));
        } else if !KINDS.contains(&&*name) {
            strays.push(format!("{name}/ is no kind this file checks"));
        }
    }
    assert!(
        strays.is_empty(),
        "tests/fixtures:\n  {}",
        strays.join("\n  ")
    );
}

/// The wire examples of the client's reference and of the spec digest.
#[test]
fn named_examples_are_present() {
    let examples = [
        "discover_params/reference-probe.json",
        "discover_result/reference-discover-result.json",
        "initialize_params/reference-initialize.json",
        "initialize_result/reference-initialize-result.json",
        "client_notification/reference-initialized.json",
        "call_tool_params/reference-tools-call.json",
        "call_tool_outcome/reference-tool-ran-and-failed.json",
        "error_response/reference-protocol-fault.json",
        "initialize_params/spec-initialize.json",
        "discover_params/spec-discover.json",
        "discover_result/spec-discover-result.json",
        "error_response/spec-unsupported-protocol-version.json",
        "call_tool_outcome/spec-mrtr-input-required.json",
        "call_tool_params/spec-mrtr-retry.json",
        "server_notification/spec-subscriptions-acknowledged.json",
        "empty_result/spec-listen-final-result.json",
    ];
    let missing: Vec<_> = examples
        .iter()
        .filter(|path| !fixtures().join(path).is_file())
        .collect();
    assert!(missing.is_empty(), "missing fixtures: {missing:?}");
}
