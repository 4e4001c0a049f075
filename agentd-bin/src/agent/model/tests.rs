//! The provider against the scripted OpenAI-compatible server, on loopback, in virtual time:
//! answers streamed and whole, tool calls, usage, retries, the deadline, the size bound, and
//! the request as sent.

use std::time::Duration;

use agentd_tests::model::{Call, Reply as Scripted, ScriptedModel};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::chat::{ANSWER_MAX, Chat};
use super::retry::Retry;
use super::*;
use crate::config;

pub(super) fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// A conversation with every kind of message, and two tools.
pub(super) fn conversation() -> Request<'static> {
    Request::owned(
        vec![
            Message::System {
                text: "You are terse.".into(),
            },
            Message::User {
                text: "Weather in Paris and Oslo?".into(),
            },
            Message::Assistant {
                text: None,
                calls: vec![
                    call("call_1", "get_weather", r#"{"city":"Paris"}"#),
                    call("call_2", "get_weather", r#"{"city":"Oslo"}"#),
                ],
            },
            Message::Tool {
                call_id: "call_1".into(),
                text: "sunny".into(),
            },
            Message::Tool {
                call_id: "call_2".into(),
                text: "snow".into(),
            },
            Message::Assistant {
                text: Some("Sunny in Paris, snow in Oslo.".into()),
                calls: vec![],
            },
            Message::Assistant {
                text: None,
                calls: vec![],
            },
        ],
        vec![
            Function {
                name: "get_weather".into(),
                description: "The weather in a city.".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            },
            Function {
                name: "finish".into(),
                description: "Ends the turn.".into(),
                parameters: json!({"type": "object"}),
            },
        ],
    )
}

fn settings(base_url: String) -> config::Model {
    config::Model {
        base_url,
        model: "gpt-test".into(),
        api_key: Some("sk-t3st".into()),
        max_output_tokens: Some(256),
    }
}

/// The provider of `server`, its backoffs at their longest.
fn chat(server: &ScriptedModel) -> Chat {
    Chat::new(&settings(server.base_url()), Retry::default(), || u32::MAX).unwrap()
}

fn hello() -> Request<'static> {
    let hello = Message::User {
        text: "Hello?".into(),
    };
    Request::owned(vec![hello], vec![])
}

fn within(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

/// The virtual time between each request the server received and the next.
fn gaps(server: &ScriptedModel) -> Vec<Duration> {
    let requests = server.requests();
    requests.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn a_text_answer_streamed_in_pieces() {
    let server = ScriptedModel::start([Scripted::text("Hello there, friend.")
        .chunks(4)
        .usage(12, 5)])
    .await;
    let reply = chat(&server).complete(&hello(), within(60)).await.unwrap();
    assert_eq!(
        reply,
        Reply {
            text: Some("Hello there, friend.".into()),
            calls: vec![],
            finish: Finish::Stop,
            usage: Usage {
                input: 12,
                output: 5
            },
        }
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn several_tool_calls_with_their_arguments_split_over_chunks() {
    let server = ScriptedModel::start([Scripted::tool_calls([
        Call::new("call_a", "get_weather", r#"{"city":"Paris","unit":"C"}"#),
        Call::new("call_b", "get_weather", r#"{"city":"Oslo","unit":"C"}"#),
        Call::new("call_c", "finish", "{}"),
    ])
    .with_text("Checking both.")
    .chunks(5)
    .usage(210, 48)])
    .await;
    let reply = chat(&server)
        .complete(&conversation(), within(60))
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("Checking both."));
    assert_eq!(
        reply.calls,
        [
            call("call_a", "get_weather", r#"{"city":"Paris","unit":"C"}"#),
            call("call_b", "get_weather", r#"{"city":"Oslo","unit":"C"}"#),
            call("call_c", "finish", "{}"),
        ]
    );
    assert_eq!(reply.finish, Finish::ToolCalls);
    assert_eq!(reply.usage.total(), 258);
}

#[tokio::test(start_paused = true)]
async fn usage_is_counted_per_reply() {
    let server = ScriptedModel::start([
        Scripted::text("one").usage(100, 1),
        Scripted::tool_calls([Call::new("c", "f", "{}")]).usage(140, 9),
        Scripted::text("three"),
    ])
    .await;
    let chat = chat(&server);
    let mut usages = Vec::new();
    for _ in 0..3 {
        usages.push(chat.complete(&hello(), within(60)).await.unwrap().usage);
    }
    let usage = |input, output| Usage { input, output };
    assert_eq!(usages, [usage(100, 1), usage(140, 9), usage(0, 0)]);
    let asked = server.requests();
    assert!(
        asked
            .iter()
            .all(|r| r.body["stream_options"] == json!({"include_usage": true}))
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_not_streamed_is_read_whole() {
    let whole = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "length", "message": {
            "role": "assistant", "content": "It was a dark and",
        }}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 256, "total_tokens": 265},
    });
    let server = ScriptedModel::start([Scripted::raw(
        200,
        "application/json; charset=utf-8",
        whole.to_string(),
    )])
    .await;
    let reply = chat(&server).complete(&hello(), within(60)).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("It was a dark and"));
    assert_eq!(reply.finish, Finish::Length);
    assert_eq!(
        reply.usage,
        Usage {
            input: 9,
            output: 256
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_429_is_asked_again_after_its_retry_after() {
    let server = ScriptedModel::start([
        Scripted::error(429, r#"{"error":{"message":"slow down"}}"#).retry_after("2"),
        Scripted::text("ok"),
    ])
    .await;
    let reply = chat(&server).complete(&hello(), within(60)).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("ok"));
    assert_eq!(gaps(&server), [Duration::from_secs(2)]);
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies[0], bodies[1], "the same request again");
}

#[tokio::test(start_paused = true)]
async fn a_503_is_asked_again_after_a_growing_backoff() {
    let server = ScriptedModel::start([
        Scripted::error(503, "overloaded"),
        Scripted::error(502, "bad gateway"),
        Scripted::error(500, "oops"),
        Scripted::text("ok"),
    ])
    .await;
    let reply = chat(&server).complete(&hello(), within(60)).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("ok"));
    let secs = |s| Duration::from_secs(s);
    assert_eq!(gaps(&server), [secs(1), secs(2), secs(4)]);
    // The least jitter: half the backoff.
    let server = ScriptedModel::start([Scripted::error(503, ""), Scripted::text("ok")]).await;
    let least = Chat::new(&settings(server.base_url()), Retry::default(), || 0).unwrap();
    least.complete(&hello(), within(60)).await.unwrap();
    assert_eq!(gaps(&server), [Duration::from_millis(500)]);
}

#[tokio::test(start_paused = true)]
async fn a_400_is_not_asked_again() {
    let body = r#"{"error":{"message":"Invalid schema for function 'get_weather'","type":"invalid_request_error"}}"#;
    let server = ScriptedModel::start([Scripted::error(400, body), Scripted::text("never")]).await;
    let outcome = chat(&server).complete(&hello(), within(60)).await;
    assert_eq!(
        outcome,
        Err(ModelError::Status {
            status: 400,
            detail: body.into(),
        })
    );
    assert_eq!((server.requests().len(), server.remaining()), (1, 1));
    // A long body: its start, at most 200 bytes, cut between characters.
    let long = format!("{}{}", "x".repeat(199), "é".repeat(100));
    let server = ScriptedModel::start([Scripted::error(401, long)]).await;
    let outcome = chat(&server).complete(&hello(), within(60)).await;
    let detail = "x".repeat(199);
    assert_eq!(
        outcome,
        Err(ModelError::Status {
            status: 401,
            detail
        })
    );
}

#[tokio::test(start_paused = true)]
async fn retries_stop_before_the_deadline() {
    let server = ScriptedModel::start(vec![Scripted::error(503, "busy"); 10]).await;
    let start = Instant::now();
    let outcome = chat(&server)
        .complete(&hello(), start + Duration::from_secs(10))
        .await;
    assert_eq!(
        outcome,
        Err(ModelError::Status {
            status: 503,
            detail: "busy".into()
        })
    );
    // Tries at 0, 1, 3 and 7 s: the next, at 15 s, would be past the deadline.
    assert_eq!(server.requests().len(), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(7));

    // A Retry-After past the deadline: no wait at all.
    let server = ScriptedModel::start([
        Scripted::error(429, "later").retry_after("120"),
        Scripted::text("too late"),
    ])
    .await;
    let start = Instant::now();
    let outcome = chat(&server)
        .complete(&hello(), start + Duration::from_secs(60))
        .await;
    assert!(matches!(
        outcome,
        Err(ModelError::Status { status: 429, .. })
    ));
    assert_eq!(
        (server.requests().len(), start.elapsed()),
        (1, Duration::ZERO)
    );

    // The tries spent: the last failure.
    let server = ScriptedModel::start(vec![Scripted::error(500, "down"); 10]).await;
    let outcome = chat(&server).complete(&hello(), within(3600)).await;
    assert!(matches!(
        outcome,
        Err(ModelError::Status { status: 500, .. })
    ));
    assert_eq!(server.requests().len(), Retry::default().attempts as usize);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_hangs_is_cut_at_the_deadline() {
    let server = ScriptedModel::start([Scripted::hang(), Scripted::text("next")]).await;
    let chat = chat(&server);
    let start = Instant::now();
    let outcome = chat
        .complete(&hello(), start + Duration::from_secs(30))
        .await;
    assert_eq!(outcome, Err(ModelError::Deadline));
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    // The provider goes on: the next completion is answered.
    let reply = chat.complete(&hello(), within(30)).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("next"));
    // A deadline already past.
    let outcome = chat.complete(&hello(), Instant::now()).await;
    assert_eq!(outcome, Err(ModelError::Deadline));
}

#[tokio::test(start_paused = true)]
async fn a_model_out_of_reach_is_tried_again_then_given_up() {
    // A port nothing listens on: bound, then let go.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let chat = Chat::new(&settings(url), Retry::default(), || u32::MAX).unwrap();
    let start = Instant::now();
    let outcome = chat.complete(&hello(), within(600)).await;
    let Err(error @ ModelError::Transport { detail, .. }) = &outcome else {
        panic!("{outcome:?}");
    };
    // hyper's own words, and under them why: the error is kept as the source.
    let source = std::error::Error::source(error).expect("the cause is kept");
    assert!(detail.starts_with(&source.to_string()), "{detail}");
    assert!(detail.len() > source.to_string().len(), "{detail}");
    // Six tries, five waits between them: 1 + 2 + 4 + 8 + 16 s.
    assert_eq!(start.elapsed(), Duration::from_secs(31));
}

#[tokio::test(start_paused = true)]
async fn a_malformed_chunk_is_a_decode_error() {
    let server = ScriptedModel::start([
        Scripted::raw(
            200,
            "text/event-stream",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {oops\n\n",
        ),
        Scripted::raw(200, "application/json", "not json"),
    ])
    .await;
    let chat = chat(&server);
    for _ in 0..2 {
        let outcome = chat.complete(&hello(), within(60)).await;
        assert!(
            matches!(
                outcome,
                Err(ModelError::Decode {
                    source: Some(_),
                    ..
                })
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(server.requests().len(), 2, "not asked again");
}

/// A JSON answer of exactly `size` bytes, padded with spaces.
fn json_of(size: usize) -> String {
    let mut text = json!({"choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"content": "big"}}]})
    .to_string();
    text.push_str(&" ".repeat(size - text.len()));
    text
}

/// An event stream of exactly `size` bytes, padded with a comment.
fn stream_of(size: usize) -> String {
    let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"big\"},\"finish_reason\":\"stop\"}]}\n\n";
    let tail = "data: [DONE]\n\n";
    let pad = size - head.len() - tail.len() - ":\n\n".len();
    format!("{head}:{}\n\n{tail}", " ".repeat(pad))
}

#[tokio::test(start_paused = true)]
async fn an_answer_at_the_bound_is_read_and_one_past_it_is_refused() {
    assert_eq!(json_of(ANSWER_MAX).len(), ANSWER_MAX);
    assert_eq!(stream_of(ANSWER_MAX).len(), ANSWER_MAX);
    let server = ScriptedModel::start([
        Scripted::raw(200, "application/json", json_of(ANSWER_MAX)),
        Scripted::raw(200, "application/json", json_of(ANSWER_MAX + 1)),
        Scripted::raw(200, "text/event-stream", stream_of(ANSWER_MAX)),
        Scripted::raw(200, "text/event-stream", stream_of(ANSWER_MAX + 1)),
    ])
    .await;
    let chat = chat(&server);
    let over = ModelError::decode(format!("the answer is over {ANSWER_MAX} bytes"), None);
    for _ in 0..2 {
        let at = chat.complete(&hello(), within(60)).await.unwrap();
        assert_eq!(at.text.as_deref(), Some("big"));
        let past = chat.complete(&hello(), within(60)).await;
        assert_eq!(past, Err(over.clone()));
    }
}

#[tokio::test(start_paused = true)]
async fn the_request_is_sent_field_by_field() {
    let server = ScriptedModel::start([Scripted::text("ok")]).await;
    chat(&server)
        .complete(&conversation(), within(60))
        .await
        .unwrap();
    let [sent] = &server.requests()[..] else {
        panic!("one request");
    };
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-t3st"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert!(sent.header("accept").unwrap().contains("text/event-stream"));
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "assistant"
        ]
    );
    let messages = &body["messages"];
    assert_eq!(messages[0]["content"], "You are terse.");
    assert_eq!(messages[2]["content"], Value::Null);
    assert_eq!(
        messages[2]["tool_calls"][1],
        json!({"id": "call_2", "type": "function",
               "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}})
    );
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert_eq!(messages[4]["tool_call_id"], "call_2");
    assert_eq!(messages[4]["content"], "snow");
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }})
    );
    assert_eq!(body["tools"][1]["function"]["name"], "finish");

    // No key, no bound: neither is sent.
    let server = ScriptedModel::start([Scripted::text("ok")]).await;
    let bare = config::Model {
        api_key: None,
        max_output_tokens: None,
        ..settings(server.base_url())
    };
    let chat = Chat::new(&bare, Retry::default(), || 0).unwrap();
    chat.complete(&hello(), within(60)).await.unwrap();
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), None);
    assert!(sent.body.get("max_completion_tokens").is_none());
    assert!(sent.body.get("tools").is_none());
}

#[test]
fn the_key_is_never_shown() {
    let model = settings("https://api.example/v1".into());
    let chat = Chat::new(&model, Retry::default(), || 0).unwrap();
    for shown in [format!("{chat:?}"), format!("{model:?}")] {
        assert!(!shown.contains("sk-t3st"), "{shown}");
    }
}
