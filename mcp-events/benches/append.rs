//! Durable append throughput of the embedded store: occurrences per second committed to
//! SQLite (WAL, `synchronous = FULL`), one transaction per batch with its cursor, for
//! batches of 1 (a webhook delivery) and of 50 (a full poll page), 1 KiB records.
//!
//! Run with `cargo bench -p mcp-events --features sqlite --bench append`; criterion prints
//! the time per batch and the throughput in occurrences per second.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mcp_events::binding::{Batch, Record};
use mcp_events::sqlite::Sqlite;
use mcp_events::store::Store;

fn append(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("mcp-events-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut store = Sqlite::open(&dir.join("store.sqlite3")).unwrap();
    let body = vec![b'x'; 1024];
    let mut next = 0u64;
    let mut group = c.benchmark_group("append");
    for size in [1usize, 50] {
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::new("durable", size), &size, |b, &size| {
            b.iter(|| {
                let records = (0..size)
                    .map(|_| {
                        next += 1;
                        Record {
                            id: format!("mcp/s/t/evt-{next}"),
                            event_id: format!("evt-{next}"),
                            bytes: body.clone(),
                        }
                    })
                    .collect();
                let batch = Batch {
                    records,
                    cursor: Some(format!("c{next}")),
                };
                store.commit("b", "in", &batch).unwrap()
            });
        });
    }
    group.finish();
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, append);
criterion_main!(benches);
