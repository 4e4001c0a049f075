//! What every webhook delivery and every occurrence costs before it reaches the store:
//!
//! - `verify`: the Standard Webhooks check (timestamp, HMAC-SHA256 over the raw body, one
//!   `v1` signature) of a 1 KiB and a 64 KiB body, and of the 1 KiB body during a rotation
//!   (two secrets, three signatures); `bare_hmac` is the anchor: HMAC-SHA256 of the same
//!   1 KiB body alone, its key prepared beforehand, so that verify / bare HMAC is what the
//!   check adds;
//! - `intake`: decode a 1 KiB delivery body, check it against the bounds, record its id in
//!   the dedup window, and write its Stream event.
//!
//! Run with `cargo bench -p mcp-events --bench intake`; criterion prints time per operation
//! and throughput (deliveries per second follow from the time). At the end of `verify`,
//! interleaved rounds of the 1 KiB check and the bare HMAC give the median of each and their
//! ratio (goal: at most 1.2).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hmac::{Hmac, KeyInit, Mac};
use mcp_events::occurrence::{Target, check, stream_event};
use mcp_events::webhook::{Headers, Secret, verify};
use mcp_events::{Dedup, Limits};
use mcp_wire::events::WebhookBody;
use sha2::Sha256;

const NOW: i64 = 1_764_482_400;

fn body(size: usize) -> String {
    let head = r#"{"eventId":"evt_000001","name":"ticket.created","timestamp":"2026-11-30T06:00:00Z","data":{"text":""#;
    let tail = r#""}}"#;
    format!("{head}{}{tail}", "x".repeat(size - head.len() - tail.len()))
}

fn verification(c: &mut Criterion) {
    let limits = Limits::default();
    let secret = Secret::from_bytes(&[7; 32]).unwrap();
    let old = Secret::from_bytes(&[8; 32]).unwrap();
    let mut group = c.benchmark_group("verify");
    for size in [1024, 64 * 1024] {
        let body = body(size);
        let signature = secret.sign("evt_000001", NOW, body.as_bytes());
        let headers = Headers {
            id: "evt_000001",
            timestamp: "1764482400",
            signature: &signature,
            subscription: "sub_1",
        };
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("one_secret", size), &body, |b, body| {
            b.iter(|| {
                verify(
                    black_box(&headers),
                    body.as_bytes(),
                    &[&secret],
                    NOW,
                    &limits,
                )
                .unwrap()
            });
        });
    }
    let body = body(1024);
    // The anchor: a bare HMAC-SHA256 of the same 1 KiB body, the key prepared beforehand.
    let key = Hmac::<Sha256>::new_from_slice(&[7; 32]).unwrap();
    group.throughput(Throughput::Bytes(1024));
    group.bench_with_input(BenchmarkId::new("bare_hmac", 1024), &body, |b, body| {
        b.iter(|| {
            let mut mac = key.clone();
            mac.update(black_box(body.as_bytes()));
            mac.finalize()
        });
    });
    let rotation = format!(
        "v1a,AAAA {} {}",
        old.sign("evt_000001", NOW, body.as_bytes()),
        secret.sign("evt_000001", NOW, body.as_bytes())
    );
    let headers = Headers {
        id: "evt_000001",
        timestamp: "1764482400",
        signature: &rotation,
        subscription: "sub_1",
    };
    group.throughput(Throughput::Bytes(1024));
    group.bench_function("rotation/1024", |b| {
        b.iter(|| {
            verify(
                black_box(&headers),
                body.as_bytes(),
                &[&secret, &old],
                NOW,
                &limits,
            )
            .unwrap()
        });
    });
    group.finish();

    // Interleaved rounds of the 1 KiB check (one secret) and the bare HMAC of its body.
    let signature = secret.sign("evt_000001", NOW, body.as_bytes());
    let headers = Headers {
        id: "evt_000001",
        timestamp: "1764482400",
        signature: &signature,
        subscription: "sub_1",
    };
    let (mut checked, mut bare) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        checked.push(timed(|| {
            verify(
                black_box(&headers),
                body.as_bytes(),
                &[&secret],
                NOW,
                &limits,
            )
            .unwrap()
        }));
        bare.push(timed(|| {
            let mut mac = key.clone();
            mac.update(black_box(body.as_bytes()));
            mac.finalize()
        }));
    }
    let (checked, bare) = (median(checked), median(bare));
    println!(
        "\nverify 1024 B, {ROUNDS} interleaved rounds of {BATCH}, medians: verify {:.3?}  bare HMAC {:.3?}  ratio (verify / bare) {:.2}",
        checked / BATCH,
        bare / BATCH,
        checked.as_secs_f64() / bare.as_secs_f64()
    );
}

/// Interleaved rounds, and operations timed together in each.
const ROUNDS: usize = 51;
const BATCH: u32 = 2_000;

/// The time of `BATCH` runs of `f`.
fn timed<T>(mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..BATCH {
        black_box(f());
    }
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn intake(c: &mut Criterion) {
    let body = body(1024);
    let target = Target {
        server: "tickets",
        event: "ticket.created",
        stream: "tickets",
        subscription: "b1",
    };
    let start = Instant::now();
    let limits = Limits::default();
    let mut group = c.benchmark_group("intake");
    group.throughput(Throughput::Elements(1));
    group.bench_function("decode_check_dedup_record/1024", |b| {
        let mut seen = Dedup::new(&limits);
        let mut n = 0u64;
        let mut record = Vec::with_capacity(2048);
        b.iter(|| {
            let Ok(WebhookBody::Occurrence(o)) = WebhookBody::decode(body.as_bytes()) else {
                unreachable!()
            };
            check(&o, &limits).unwrap();
            n += 1;
            // A fresh id each time, so the window fills and evicts as in steady state.
            seen.insert(&n.to_string(), start);
            record.clear();
            stream_event(&target, &o, true, &mut record);
            black_box(&record);
        });
    });
    group.finish();
}

criterion_group!(benches, verification, intake);
criterion_main!(benches);
