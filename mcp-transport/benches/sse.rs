//! Event-stream decoding throughput against an anchor, `sse-stream` 0.2 decoding the same
//! bytes fed as the same chunks: 10,000 small events (~200 B each, a progress notification)
//! and 100 large ones (~1 MiB of data each), fed in 8 KiB chunks as a socket would deliver
//! them.
//!
//! Criterion measures each decoder on each workload; at the end, rounds of both decoders,
//! interleaved (ours, anchor, ours, anchor…), give the median of each and their ratio.
//!
//! Run with `cargo bench -p mcp-transport --bench sse`.

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::Stream;
use mcp_transport::sse::Decoder;
use sse_stream::SseStream;

const CHUNK: usize = 8 * 1024;
const LIMIT: usize = 16 << 20;
const ROUNDS: usize = 21;

struct Workload {
    name: &'static str,
    bytes: Bytes,
    events: usize,
}

fn stream(events: usize, data: &str) -> Bytes {
    let mut out = Vec::new();
    for i in 0..events {
        out.extend_from_slice(
            format!("id: st1-{i:05}\nevent: message\ndata: {data}\n\n").as_bytes(),
        );
    }
    out.into()
}

fn workloads() -> [Workload; 2] {
    // 160 B of data: with its id and event lines, ~200 B an event.
    let progress = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":7,"progress":3,"total":10,"message":"{}"}}}}"#,
        "m".repeat(55)
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat((1 << 20) - 70)
    );
    [
        Workload {
            name: "small_events",
            bytes: stream(10_000, &progress),
            events: 10_000,
        },
        Workload {
            name: "large_events",
            bytes: stream(100, &big),
            events: 100,
        },
    ]
}

/// The events and the bytes of data the project's decoder gives.
fn ours(bytes: &[u8]) -> (usize, usize) {
    let mut decoder = Decoder::new(LIMIT);
    let (mut events, mut data) = (0, 0);
    for chunk in bytes.chunks(CHUNK) {
        decoder.push(chunk);
        while let Some(event) = decoder.next_event() {
            events += 1;
            data += black_box(event.expect("within the bound")).data.len();
        }
    }
    (events, data)
}

/// The same from `sse-stream`, fed the same chunks as a stream of `Bytes`. The chunks are
/// always ready, so polling with a waker that does nothing is the whole executor.
fn anchor(bytes: &Bytes) -> (usize, usize) {
    let chunks = (0..bytes.len().div_ceil(CHUNK))
        .map(|i| Ok::<_, Infallible>(bytes.slice(i * CHUNK..bytes.len().min((i + 1) * CHUNK))));
    let mut sse = pin!(SseStream::from_bytes_stream(futures_util::stream::iter(
        chunks
    )));
    let mut cx = Context::from_waker(Waker::noop());
    let (mut events, mut data) = (0, 0);
    loop {
        match sse.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(event)) => {
                let event = black_box(event.expect("a well-formed stream"));
                events += 1;
                data += event.data.map_or(0, |d| d.len());
            }
            Poll::Ready(None) => return (events, data),
            Poll::Pending => unreachable!("the chunks are always ready"),
        }
    }
}

fn sse(c: &mut Criterion) {
    let workloads = workloads();
    for w in &workloads {
        let ours = ours(&w.bytes);
        assert_eq!(ours.0, w.events, "{}: every event", w.name);
        assert_eq!(ours, anchor(&w.bytes), "{}: both decoders agree", w.name);
    }
    let mut group = c.benchmark_group("sse_decode");
    for w in &workloads {
        group.throughput(Throughput::Bytes(w.bytes.len() as u64));
        if w.events < 1000 {
            group.sample_size(10);
        }
        group.bench_function(format!("{}/ours", w.name), |b| {
            b.iter(|| ours(black_box(&w.bytes)))
        });
        group.bench_function(format!("{}/sse-stream", w.name), |b| {
            b.iter(|| anchor(black_box(&w.bytes)))
        });
    }
    group.finish();
    println!("\ninterleaved rounds ({ROUNDS} each), medians:");
    for w in &workloads {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(timed(|| ours(black_box(&w.bytes))));
            b.push(timed(|| anchor(black_box(&w.bytes))));
        }
        let (ours, anchor) = (median(a), median(b));
        println!(
            "{:<13} ours {:>10.3?}  sse-stream {:>10.3?}  ratio (sse-stream / ours) {:.2}",
            w.name,
            ours,
            anchor,
            anchor.as_secs_f64() / ours.as_secs_f64()
        );
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    black_box(f());
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

criterion_group!(benches, sse);
criterion_main!(benches);
