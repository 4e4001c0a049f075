//! Decode and encode of three messages that dominate a client's traffic: an `initialize`
//! result, a `tools/list` page of 100 tools, and a `tools/call` result carrying 64 KiB of
//! text. Each is measured three ways on the same bytes:
//!
//! - `typed`: [`mcp_wire::decode_as::<T>`], one pass, the result read straight into `T`;
//! - `two_pass`: [`mcp_wire::decode`] (envelope, borrowed) then `result_as::<T>()`;
//! - `value`: `serde_json::from_slice::<serde_json::Value>`, the untyped baseline.
//!
//! Run with `cargo bench -p mcp-wire --bench codec`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mcp_wire::{
    CallToolResult, ContentBlock, InitializeResult, ListToolsResult, Message, Outcome, RequestId,
    TypedMessage, decode, decode_as, decode_response, encode_result,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn initialize_result() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "experimental": {"example.com/feature": {"level": 2}}
        },
        "serverInfo": {
            "name": "mcp-servers/everything",
            "title": "Everything",
            "version": "2026.8.31",
            "websiteUrl": "https://example.com",
            "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}]
        },
        "instructions": "This server exercises every feature of the protocol. ".repeat(8)
    })
}

fn tools_page() -> Value {
    let tools: Vec<Value> = (0..100)
        .map(|i| {
            json!({
                "name": format!("tool_{i}"),
                "title": format!("Tool number {i}"),
                "description": format!("Does thing {i} to the input and returns a summary of what changed."),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
                        "query": {"type": "string", "description": "What to run", "maxLength": 4096},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
                        "verbose": {"type": "boolean"}
                    },
                    "required": ["region", "query"],
                    "additionalProperties": false
                },
                "annotations": {"readOnlyHint": i % 2 == 0, "openWorldHint": false}
            })
        })
        .collect();
    json!({"resultType": "complete", "tools": tools, "nextCursor": "page-2", "ttlMs": 0, "cacheScope": "private"})
}

fn call_result() -> Value {
    let line = "The quick brown fox jumps over the lazy dog; \"quoted\" and tab\there.\n";
    let text: String = line.repeat(64 * 1024 / line.len() + 1)[..64 * 1024].to_owned();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"lines": 910, "ok": true},
        "isError": false
    })
}

fn response_bytes(result: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_result(&mut out, &RequestId::Number(7), result).expect("encodes");
    out
}

fn bench_case<T: DeserializeOwned + Serialize>(c: &mut Criterion, name: &str, result: &Value) {
    let bytes = response_bytes(result);
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(bytes.len() as u64));

    group.bench_function(BenchmarkId::new("decode", "typed"), |b| {
        b.iter(|| {
            let Ok(TypedMessage::Response(r)) = decode_as::<T>(black_box(&bytes), usize::MAX)
            else {
                panic!("not a response")
            };
            black_box(r.outcome.expect("a result"))
        })
    });
    group.bench_function(BenchmarkId::new("decode", "two_pass"), |b| {
        b.iter(|| {
            let Ok(Message::Response(r)) = decode(black_box(&bytes), usize::MAX) else {
                panic!("not a response")
            };
            black_box(r.result_as::<T>().expect("decodes").expect("a result"))
        })
    });
    group.bench_function(BenchmarkId::new("decode", "value"), |b| {
        b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&bytes)).expect("decodes")))
    });

    let typed = decode_response::<T>(&bytes, usize::MAX)
        .expect("decodes")
        .outcome
        .expect("a result");
    let value: Value = serde_json::from_slice(&bytes).expect("decodes");
    let id = RequestId::Number(7);
    let mut out = Vec::with_capacity(bytes.len() * 2);
    group.bench_function(BenchmarkId::new("encode", "typed"), |b| {
        b.iter(|| {
            out.clear();
            encode_result(&mut out, &id, black_box(&typed)).expect("encodes");
            black_box(out.len())
        })
    });
    group.bench_function(BenchmarkId::new("encode", "value"), |b| {
        b.iter(|| {
            out.clear();
            serde_json::to_writer(&mut out, black_box(&value)).expect("encodes");
            black_box(out.len())
        })
    });
    group.finish();
}

fn codec(c: &mut Criterion) {
    // The three payloads really are what they claim to be.
    let call = call_result();
    let ContentBlock::Text(t) = &serde_json::from_value::<Outcome<CallToolResult>>(call.clone())
        .map(|o| match o {
            Outcome::Complete(r) => r.content[0].clone(),
            Outcome::InputRequired(_) => panic!("complete"),
        })
        .expect("decodes")
    else {
        panic!("text")
    };
    assert_eq!(t.text.len(), 64 * 1024);

    bench_case::<InitializeResult>(c, "initialize_result", &initialize_result());
    bench_case::<ListToolsResult>(c, "tools_list_100", &tools_page());
    bench_case::<Outcome<CallToolResult>>(c, "tools_call_64k", &call);
}

criterion_group!(benches, codec);
criterion_main!(benches);
