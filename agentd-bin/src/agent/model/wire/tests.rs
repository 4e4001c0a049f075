//! The wire's tests: the request body field by field, and answers decoded under every split
//! of their bytes.

use serde_json::{Value, json};

use super::*;
use crate::agent::model::tests::{call, conversation};

#[test]
fn the_body_carries_every_field_as_the_api_names_it() {
    let body: Value = serde_json::from_slice(&body(&conversation(), "gpt-x", Some(512))).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-x",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris and Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": "snow"},
                {"role": "assistant", "content": "Sunny in Paris, snow in Oslo."},
                {"role": "assistant", "content": ""},
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }},
                {"type": "function", "function": {
                    "name": "finish",
                    "description": "Ends the turn.",
                    "parameters": {"type": "object"},
                }},
            ],
            "max_completion_tokens": 512,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn no_tools_and_no_bound_leave_their_fields_out() {
    let request = Request::owned(vec![Message::User { text: "hi".into() }], vec![]);
    let body: Value = serde_json::from_slice(&body(&request, "m", None)).unwrap();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["messages", "model", "stream", "stream_options"]);
}

/// A stream as a provider sends it: a role delta, text in pieces, two tool calls whose
/// arguments come in pieces (the second's id and name in its first delta only), a
/// keep-alive comment, the finish, the usage alone, `[DONE]`; CRLF and LF line ends both.
fn stream() -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let chunks = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Let me "}), Value::Null),
        chunk(json!({"content": "look: é"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "get_weather", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                   "function": {"name": "get_time", "arguments": "{\"tz\""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": ":\"CET\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}}),
    ];
    let mut out = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let end = if i % 2 == 0 { "\n" } else { "\r\n" };
        out.extend_from_slice(format!("data: {chunk}{end}{end}").as_bytes());
        if i == 4 {
            out.extend_from_slice(b": keep-alive\n\n");
        }
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

fn expected() -> Reply {
    Reply {
        text: Some("Let me look: é".into()),
        calls: vec![
            call("call_a", "get_weather", r#"{"city":"Paris"}"#),
            call("call_b", "get_time", r#"{"tz":"CET"}"#),
        ],
        finish: Finish::ToolCalls,
        usage: Usage {
            input: 31,
            output: 12,
        },
    }
}

/// `bytes` pushed in the pieces cut at `cuts`, then finished.
fn decode_in(bytes: &[u8], cuts: &[usize], streamed: bool) -> Result<Reply, ModelError> {
    let mut answer = Answer::new(streamed, ANSWER_LIMIT);
    let mut from = 0;
    for &cut in cuts.iter().chain([&bytes.len()]) {
        if answer.push(&bytes[from..cut])? {
            break;
        }
        from = cut;
    }
    answer.finish()
}

const ANSWER_LIMIT: usize = 1 << 20;

#[test]
fn a_stream_decodes_the_same_under_every_split_of_its_bytes() {
    let bytes = stream();
    let expected = expected();
    assert_eq!(decode_in(&bytes, &[], true), Ok(expected.clone()));
    for cut in 0..=bytes.len() {
        assert_eq!(
            decode_in(&bytes, &[cut], true),
            Ok(expected.clone()),
            "{cut}"
        );
    }
    let every: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(decode_in(&bytes, &every, true), Ok(expected.clone()));
    // Three pieces, both cuts on a grid.
    for a in (0..bytes.len()).step_by(7) {
        for b in (a..bytes.len()).step_by(13) {
            assert_eq!(
                decode_in(&bytes, &[a, b], true),
                Ok(expected.clone()),
                "{a} {b}"
            );
        }
    }
}

#[test]
fn what_follows_done_is_not_read() {
    let mut bytes = stream();
    bytes.extend_from_slice(b"data: {not json\n\n");
    assert_eq!(decode_in(&bytes, &[], true), Ok(expected()));
    let mut answer = Answer::new(true, ANSWER_LIMIT);
    assert_eq!(answer.push(&stream()), Ok(true));
    assert_eq!(answer.push(&vec![b'x'; 2 * ANSWER_LIMIT]), Ok(true));
    assert_eq!(answer.finish(), Ok(expected()));
}

#[test]
fn a_whole_answer_decodes_as_one_delta() {
    let whole = json!({
        "id": "c2", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look: é",
            "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}},
            ]}}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43},
    })
    .to_string();
    let bytes = whole.as_bytes();
    for cut in 0..=bytes.len() {
        assert_eq!(decode_in(bytes, &[cut], false), Ok(expected()), "{cut}");
    }
    let text = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    assert_eq!(
        decode_in(text.as_bytes(), &[], false),
        Ok(Reply {
            text: Some("hi".into()),
            calls: vec![],
            finish: Finish::Stop,
            usage: Usage::default(),
        })
    );
}

#[test]
fn the_bound_takes_an_answer_at_it_and_refuses_one_past_it() {
    let bytes = stream();
    let mut at = Answer::new(true, bytes.len());
    assert_eq!(at.push(&bytes), Ok(true));
    assert_eq!(at.finish(), Ok(expected()));
    let mut past = Answer::new(true, bytes.len() - 1);
    let refused = past
        .push(&bytes[..10])
        .and_then(|_| past.push(&bytes[10..]));
    let detail = format!("the answer is over {} bytes", bytes.len() - 1);
    assert_eq!(refused, Err(ModelError::decode(detail, None)));
    let json = br#"{"choices":[]}"#;
    assert!(decode_in(json, &[], false).is_ok());
    let mut past = Answer::new(false, json.len() - 1);
    assert!(matches!(past.push(json), Err(ModelError::Decode { .. })));
}

fn refused(bytes: &[u8], streamed: bool) -> String {
    match decode_in(bytes, &[], streamed) {
        Err(ModelError::Decode { detail, .. }) => detail,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn malformed_answers_are_refused_with_what_was_wrong() {
    let detail = refused(b"data: {\"choices\": [\n\ndata: [DONE]\n\n", true);
    assert!(
        detail.starts_with("a chunk is not a completion chunk"),
        "{detail}"
    );
    let detail = refused(b"data: {\"choices\": 7}\n\n", true);
    assert!(
        detail.starts_with("a chunk is not a completion chunk"),
        "{detail}"
    );
    let detail = refused(
        b"data: {\"error\": {\"message\": \"overloaded\"}}\n\n",
        true,
    );
    assert!(detail.contains("overloaded"), "{detail}");
    let detail = refused(b"<html>busy</html>", false);
    assert!(
        detail.starts_with("the answer is not a completion"),
        "{detail}"
    );
    let nameless = br#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}}]}

data: [DONE]

"#;
    assert_eq!(refused(nameless, true), "tool call 0 has no name");
    let detail = refused(b"data: {\"choices\": []}\n\n", true);
    assert_eq!(detail, "the stream ended before its answer did");
}

#[test]
fn a_stream_ended_after_its_finish_without_done_is_taken() {
    let bytes = br#"data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

"#;
    let reply = decode_in(bytes, &[], true).unwrap();
    assert_eq!(reply.text.as_deref(), Some("ok"));
    assert_eq!(reply.finish, Finish::Stop);
}

#[test]
fn calls_without_an_index_or_an_id_are_still_told_apart() {
    let bytes = br#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"x","function":{"name":"a","arguments":"{\"n\":"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"y","function":{"name":"b","arguments":"{}"}}]}}]}

data: {"choices":[{"index":1,"delta":{"content":"another choice"}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"function":{"name":"c","arguments":""}}]},"finish_reason":"weird"}]}

data: [DONE]

"#;
    let reply = decode_in(bytes, &[], true).unwrap();
    assert_eq!(
        reply.calls,
        [
            call("x", "a", r#"{"n":1}"#),
            call("y", "b", "{}"),
            call("call_5", "c", ""),
        ]
    );
    assert_eq!(reply.text, None, "another choice is not ours");
    assert_eq!(
        reply.finish,
        Finish::ToolCalls,
        "an unknown reason, with calls"
    );
}

#[test]
fn finish_reasons_are_named() {
    for (reason, finish) in [
        ("stop", Finish::Stop),
        ("length", Finish::Length),
        ("content_filter", Finish::ContentFilter),
        ("tool_calls", Finish::ToolCalls),
        ("function_call", Finish::ToolCalls),
        ("eos", Finish::Stop),
    ] {
        let text = format!(
            r#"{{"choices":[{{"index":0,"message":{{"content":"x"}},"finish_reason":"{reason}"}}]}}"#
        );
        let reply = decode_in(text.as_bytes(), &[], false).unwrap();
        assert_eq!(reply.finish, finish, "{reason}");
    }
    let none = br#"{"choices":[{"index":0,"message":{"content":null},"finish_reason":null}],"usage":null}"#;
    let reply = decode_in(none, &[], false).unwrap();
    assert_eq!((reply.text, reply.finish), (None, Finish::Stop));
}

/// A whole answer of `count` calls, each named and with its id.
fn calling(count: usize) -> Vec<u8> {
    let calls: Vec<Value> = (0..count)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "function",
                        "function": {"name": "f", "arguments": "{}"}})
        })
        .collect();
    let whole = json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                                    "message": {"tool_calls": calls}}]});
    whole.to_string().into_bytes()
}

/// A stream whose calls come each in its own chunk at `index`, one delta each.
fn streamed_calls(indexes: &[Option<usize>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, index) in indexes.iter().enumerate() {
        let mut call = json!({"id": format!("c{i}"), "function": {"name": "f", "arguments": ""}});
        if let Some(index) = index {
            call["index"] = json!(index);
        }
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
        out.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

#[test]
fn a_reply_makes_at_most_calls_max_calls() {
    let at = decode_in(&calling(CALLS_MAX), &[], false).unwrap();
    assert_eq!(at.calls.len(), CALLS_MAX);
    assert_eq!(at.calls[CALLS_MAX - 1].id, format!("c{}", CALLS_MAX - 1));
    let past = decode_in(&calling(CALLS_MAX + 1), &[], false);
    assert_eq!(past, Err(ModelError::TooManyCalls { max: CALLS_MAX }));
    // Streamed, by index: the delta that begins one more is refused; more deltas of the
    // calls begun are not.
    let mut indexes: Vec<Option<usize>> = (0..CALLS_MAX).map(Some).collect();
    indexes.push(Some(0));
    let at = decode_in(&streamed_calls(&indexes), &[], true).unwrap();
    assert_eq!(at.calls.len(), CALLS_MAX);
    indexes.push(Some(1000));
    let past = decode_in(&streamed_calls(&indexes), &[], true);
    assert_eq!(past, Err(ModelError::TooManyCalls { max: CALLS_MAX }));
}

#[test]
fn an_index_past_the_largest_is_refused_not_wrapped() {
    // The largest index is taken; a call after it, without an index, has none to take.
    let last = decode_in(&streamed_calls(&[Some(usize::MAX)]), &[], true).unwrap();
    assert_eq!(last.calls, [call("c0", "f", "")]);
    let after = decode_in(&streamed_calls(&[Some(usize::MAX), None]), &[], true);
    let detail = format!("tool call {} has no index after it", usize::MAX);
    assert_eq!(after, Err(ModelError::decode(detail, None)));
    // Calls given by index in any order come out in the order of their indexes.
    let mixed = decode_in(&streamed_calls(&[Some(7), Some(2), None]), &[], true).unwrap();
    let ids: Vec<&str> = mixed.calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["c1", "c2", "c0"],
        "the third begins after the call begun last"
    );
}

/// `null` reads as absent in every field read: a choice's index is 0, a token count 0, a
/// content, a call list or a piece of a call adds nothing; an `error` of `null` is none.
#[test]
fn null_fields_read_as_absent() {
    let chunks = [
        json!({"choices": [{"index": null, "delta": {"content": null, "tool_calls": null},
                            "finish_reason": null}], "usage": null, "error": null}),
        json!({"choices": [{"index": 0, "delta": {"content": "hi", "tool_calls": [
            {"index": null, "id": "c", "type": "function",
             "function": {"name": "f", "arguments": null}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": null, "function": {"name": null, "arguments": "{}"}}]}}]}),
        json!({"choices": null, "usage": {"prompt_tokens": null, "completion_tokens": 3,
                                          "total_tokens": null}}),
    ];
    let mut bytes = Vec::new();
    for chunk in chunks {
        bytes.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
    }
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    assert_eq!(
        decode_in(&bytes, &[], true),
        Ok(Reply {
            text: Some("hi".into()),
            calls: vec![call("c", "f", "{}")],
            finish: Finish::ToolCalls,
            usage: Usage {
                input: 0,
                output: 3
            },
        })
    );
    // A value of another kind is no completion chunk.
    let detail = refused(b"data: {\"choices\": [{\"index\": \"0\"}]}\n\n", true);
    assert!(
        detail.starts_with("a chunk is not a completion chunk"),
        "{detail}"
    );
}
