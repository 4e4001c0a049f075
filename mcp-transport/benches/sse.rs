//! Event-stream decoding throughput: many small events (a progress notification each) and a
//! few large ones (64 KiB of data each), fed in 16 KiB chunks as a socket would deliver them.
//!
//! Run with `cargo bench -p mcp-transport --bench sse`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcp_transport::sse::Decoder;

fn stream(events: usize, data: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        out.extend_from_slice(format!("id: st1-{i}\nevent: message\ndata: {data}\n\n").as_bytes());
    }
    out
}

fn decode_all(bytes: &[u8]) -> usize {
    let mut decoder = Decoder::new(1 << 20);
    let mut n = 0;
    for chunk in bytes.chunks(16 * 1024) {
        decoder.push(chunk);
        while let Some(event) = decoder.next_event() {
            n += event.expect("within the bound").data.len();
        }
    }
    n
}

fn sse(c: &mut Criterion) {
    let small = stream(
        4096,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":3,"total":10}}"#,
    );
    let big_data = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(64 * 1024)
    );
    let large = stream(16, &big_data);
    let mut group = c.benchmark_group("sse_decode");
    for (name, bytes) in [("small_events", &small), ("large_events", &large)] {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |b| b.iter(|| black_box(decode_all(black_box(bytes)))));
    }
    group.finish();
}

criterion_group!(benches, sse);
criterion_main!(benches);
