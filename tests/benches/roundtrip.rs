//! The performance harness: agentd's client against a bare hyper loop (the anchor), side by
//! side in one run, each measure printed with its ratio to the anchor.
//!
//! Run with `cargo bench -p agentd-tests --bench roundtrip`
//! (`ROUNDTRIP_QUICK=1` for a short check: 2 rounds, few calls).
//!
//! The server is `bench-server` (`src/bin/bench_server.rs`), a plain hyper http1 MCP server
//! answering JSON, in its own process: the bench's `getrusage(RUSAGE_SELF)` is the client's
//! CPU alone. Four clients call `tools/call` on it:
//!
//! - `Client`: what a user of the library calls, `mcp_negotiate::Client` connected with
//!   `Client::builder(..).connect(url)` (2026-07-28: `server/discover`, then `tools/list`),
//!   then `client.call_tool("add", json!({"a": 2, "b": 3}))`;
//! - `ModernTransport`: the transport alone, as the negotiate layer drives it (the request
//!   encoded with its `_meta`, the answer decoded into `CallToolResult`): the difference to
//!   `Client` is what the negotiate layer costs;
//! - the anchor: hyper-util's pooled legacy client (`TCP_NODELAY`), the same request body
//!   pre-serialized once with the same headers, the answer parsed as `serde_json::Value`.
//!
//! - `bare, bounded`: the anchor doing what every MCP call must besides: the request
//!   encoded for its call (its id and progress token are the call's) and one silence bound
//!   (a timer pushed back at each wait). No goal is set against it; the summary's rows
//!   `Client vs bare, bounded` show how much of the client's cost over the anchor is that
//!   work.
//!
//! The rounds interleave, 16 of each side, each round running the four sides one after the
//! other in one of four orders (a Williams square: over four rounds each side runs first once
//! and follows each other side once, so what one run leaves to the next falls on all alike).
//! At concurrency 1 every call's latency is kept and p50/p99 are over all the calls of the
//! rounds; at concurrency 64 the throughput and the CPU time (user + sys) per call, medians
//! over rounds. A ratio to the anchor is the median over rounds of each round's ratio to the
//! anchor's run in the same round (its p50, its throughput, its CPU per call): a shared
//! machine's speed drifts from second to second, and a side measured beside the anchor
//! drifts with it. Then the typed decode of a 100-tool `tools/list` answer (the one the
//! server sends) with `mcp_wire::decode_response::<ListToolsResult>`, against
//! `serde_json::from_slice::<Value>` of the same bytes. A summary table closes the run, then
//! the process's peak RSS.
//!
//! `ROUNDTRIP_PROFILE=client|transport|bare|bound` runs only that side at concurrency 64 for a
//! profiler (`perf record -g`), 256 000 calls or `ROUNDTRIP_CALLS`, and prints its CPU per
//! call, user and system apart (`ROUNDTRIP_SERIAL=1`: one call at a time).

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_negotiate::Client;
use mcp_transport::driver::{Config, HttpClient, ModernTransport, Routing};
use mcp_wire::{
    CallToolParams, CallToolResult, ClientCapabilities, Implementation, ListToolsResult,
    ModernMeta, Outcome, RenderedMeta, RequestId, RequestMeta, Revision, encode_request_with_meta,
};
use nix::sys::resource::{UsageWho, getrusage};
use serde_json::{Value, json};

/// Rounds of each side, calls a round, and decode iterations.
struct Plan {
    rounds: usize,
    latency_calls: usize,
    throughput_calls: usize,
    decode_batches: usize,
    decode_batch: usize,
}

impl Plan {
    fn from_env() -> Self {
        if std::env::var_os("ROUNDTRIP_QUICK").is_some() {
            Self {
                rounds: 2,
                latency_calls: 500,
                throughput_calls: 6_400,
                decode_batches: 5,
                decode_batch: 20,
            }
        } else {
            Self {
                rounds: 16,
                latency_calls: 4_000,
                throughput_calls: 25_600,
                decode_batches: 31,
                decode_batch: 200,
            }
        }
    }
}

const CONCURRENCY: usize = 64;

/// The orders of the four sides (0 `Client`, 1 the anchor, 2 `ModernTransport`, 3 `bare,
/// bounded`) in rounds 0, 1, 2, 3 (mod 4): a Williams square, each side first once and right
/// after each other side once.
const ORDERS: [[usize; 4]; 4] = [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]];

/// The bench server's process; it ends when its stdin closes, with this value.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bench-server"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("bench-server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its port");
        let port: u16 = line.trim().parse().expect("a port");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// This process's user and system CPU time so far.
fn cpu_split() -> (Duration, Duration) {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().unsigned_abs())
            + Duration::from_micros(t.tv_usec().unsigned_abs())
    };
    (time(usage.user_time()), time(usage.system_time()))
}

/// This process's user + system CPU time so far.
fn cpu() -> Duration {
    let (user, system) = cpu_split();
    user + system
}

/// This process's peak RSS, in KiB.
fn peak_rss() -> i64 {
    getrusage(UsageWho::RUSAGE_SELF)
        .expect("getrusage")
        .max_rss()
}

trait Caller: Send + Sync + 'static {
    fn call(&self, n: i64) -> impl Future<Output = ()> + Send;
}

/// The anchor: a bare hyper POST loop.
struct Bare {
    client: HyperClient<HttpConnector, Full<Bytes>>,
    url: http::Uri,
    body: Bytes,
}

impl Bare {
    /// POSTs `body` as `method`; the answer's bytes.
    async fn post(&self, method: &str, name: Option<&str>, body: Bytes) -> Bytes {
        let mut request = http::Request::post(self.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let request = request.body(Full::new(body)).expect("a request");
        let response = self.client.request(request).await.expect("an answer");
        response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes()
    }
}

impl Caller for Bare {
    async fn call(&self, _n: i64) {
        let body = self
            .post("tools/call", Some("add"), self.body.clone())
            .await;
        let answer: Value = serde_json::from_slice(&body).expect("JSON");
        assert!(answer["result"].is_object());
    }
}

/// The anchor doing what every MCP call must: the request encoded for this call (its id and
/// progress token differ from call to call) and one silence bound, a single timer pushed
/// back at each wait, over the head and the body. Not a goal: it shows how much of the
/// client's cost is that work, which no client can leave out.
struct BareBound {
    bare: Arc<Bare>,
    transport: Arc<Transport>,
}

/// The silence bound `BareBound` keeps (the client's default).
const SILENCE: Duration = Duration::from_secs(60);

impl Caller for BareBound {
    async fn call(&self, n: i64) {
        let body = Bytes::from(self.transport.request(n));
        let request = http::Request::post(self.bare.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "add")
            .body(Full::new(body))
            .expect("a request");
        let mut timer = std::pin::pin!(tokio::time::sleep(SILENCE));
        let response = tokio::select! {
            response = self.bare.client.request(request) => response.expect("an answer"),
            () = timer.as_mut() => panic!("silent"),
        };
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        loop {
            timer.as_mut().reset(tokio::time::Instant::now() + SILENCE);
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = timer.as_mut() => panic!("silent"),
            };
            match frame {
                Some(frame) => {
                    if let Ok(data) = frame.expect("a frame").into_data() {
                        bytes.extend_from_slice(&data);
                    }
                }
                None => break,
            }
        }
        let answer: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert!(answer["result"].is_object());
    }
}

/// The transport alone.
struct Transport {
    transport: ModernTransport,
    meta: RenderedMeta,
    /// `Mcp-Name: add`, built once as the client's catalogue holds it.
    routing: Routing,
}

impl Transport {
    /// The request of call `n`, encoded as the client does (`_meta` with the progress token).
    fn request(&self, n: i64) -> Vec<u8> {
        let mut params = CallToolParams::new("add");
        params.arguments = json!({"a": 2, "b": 3}).as_object().cloned();
        let id = RequestId::Number(n);
        let mut meta = RequestMeta::default();
        meta.modern = Some(&self.meta);
        meta.progress_token = Some(&id);
        let mut body = Vec::with_capacity(512);
        encode_request_with_meta(&mut body, &id, "tools/call", &params, &meta).expect("encodes");
        body
    }
}

impl Caller for Transport {
    async fn call(&self, n: i64) {
        let id = RequestId::Number(n);
        let body = self.request(n);
        let call = self
            .transport
            .call::<Outcome<CallToolResult>>(id, "tools/call", Bytes::from(body), &self.routing)
            .await
            .expect("a call");
        let response = call.response(|_| {}).await.expect("a response");
        assert!(matches!(response.outcome, Ok(Outcome::Complete(_))));
    }
}

/// The library's client, as a user calls it.
struct Negotiated {
    client: Client,
}

impl Caller for Negotiated {
    async fn call(&self, _n: i64) {
        let result = self
            .client
            .call_tool("add", json!({"a": 2, "b": 3}))
            .await
            .expect("a call");
        assert_eq!(result.is_error, Some(false));
    }
}

/// One throughput round: its wall time and the process's CPU time.
#[derive(Clone, Copy)]
struct Round {
    wall: Duration,
    cpu: Duration,
    calls: usize,
}

impl Round {
    fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64()
    }

    fn cpu_per_call(&self) -> Duration {
        self.cpu / u32::try_from(self.calls).expect("fits")
    }
}

/// `calls` calls one after the other on one task; each call's latency, and the round.
async fn latencies<C: Caller>(caller: Arc<C>, calls: usize) -> (Vec<Duration>, Round) {
    let (started, cpu_before) = (Instant::now(), cpu());
    let latencies = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(calls);
        for n in 0..calls {
            let sent = Instant::now();
            caller.call(n as i64).await;
            latencies.push(sent.elapsed());
        }
        latencies
    })
    .await
    .expect("a task");
    let round = Round {
        wall: started.elapsed(),
        cpu: cpu() - cpu_before,
        calls,
    };
    (latencies, round)
}

/// `total` calls over `CONCURRENCY` tasks.
async fn throughput<C: Caller>(caller: Arc<C>, total: usize) -> Round {
    let (started, cpu_before) = (Instant::now(), cpu());
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|t| {
            let caller = caller.clone();
            tokio::spawn(async move {
                for i in 0..total / CONCURRENCY {
                    caller.call((t * total + i) as i64).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a task");
    }
    Round {
        wall: started.elapsed(),
        cpu: cpu() - cpu_before,
        calls: total / CONCURRENCY * CONCURRENCY,
    }
}

/// The median over rounds of `measure(ours) / measure(anchor)`, round by round.
fn paired<T>(ours: &[T], anchor: &[T], measure: impl Fn(&T) -> f64) -> f64 {
    median(
        ours.iter()
            .zip(anchor)
            .map(|(o, a)| measure(o) / measure(a))
            .collect(),
    )
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v[v.len() / 2]
}

/// The median of `v`.
fn p50(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What one side measured.
#[derive(Default)]
struct Side {
    latencies: Vec<Duration>,
    /// Each latency round's p50.
    p50s: Vec<Duration>,
    serial: Vec<Round>,
    parallel: Vec<Round>,
}

impl Side {
    /// Keeps a latency round.
    fn add_serial(&mut self, (mut latencies, round): (Vec<Duration>, Round)) {
        self.p50s.push(p50(&mut latencies));
        self.latencies.extend(latencies);
        self.serial.push(round);
    }

    /// The `q` quantile (0..=1) of the latencies, once they are sorted.
    fn p(&self, q: f64) -> Duration {
        let at = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[at]
    }

    /// The median over rounds of this side's p50 latency over the anchor's, round by round.
    fn p50_ratio(&self, anchor: &Self) -> f64 {
        paired(&self.p50s, &anchor.p50s, |d| d.as_secs_f64())
    }

    /// The same of the throughput at concurrency 64.
    fn throughput_ratio(&self, anchor: &Self) -> f64 {
        paired(&self.parallel, &anchor.parallel, Round::calls_per_second)
    }

    /// The same of the CPU per call at concurrency 64.
    fn cpu_ratio(&self, anchor: &Self) -> f64 {
        paired(&self.parallel, &anchor.parallel, |r| {
            r.cpu_per_call().as_secs_f64()
        })
    }

    fn serial_cpu(&self) -> Duration {
        median(self.serial.iter().map(Round::cpu_per_call).collect())
    }

    fn calls_per_second(&self) -> f64 {
        median(self.parallel.iter().map(Round::calls_per_second).collect())
    }

    fn parallel_cpu(&self) -> Duration {
        median(self.parallel.iter().map(Round::cpu_per_call).collect())
    }
}

/// Median time of one decode of `bytes`, typed and as a `Value`, batches interleaved.
fn decode_row(bytes: &[u8], plan: &Plan) -> (Duration, Duration) {
    let (mut typed, mut tree) = (Vec::new(), Vec::new());
    let batch = u32::try_from(plan.decode_batch).expect("fits");
    for _ in 0..plan.decode_batches {
        let started = Instant::now();
        for _ in 0..plan.decode_batch {
            let page = mcp_wire::decode_response::<ListToolsResult>(black_box(bytes), usize::MAX)
                .expect("a tools/list answer");
            black_box(page);
        }
        typed.push(started.elapsed() / batch);
        let started = Instant::now();
        for _ in 0..plan.decode_batch {
            let value: Value = serde_json::from_slice(black_box(bytes)).expect("JSON");
            black_box(value);
        }
        tree.push(started.elapsed() / batch);
    }
    (median(typed), median(tree))
}

/// One side alone at concurrency 64 (one at a time with `ROUNDTRIP_SERIAL=1`), warmed first: its throughput and CPU per call, user and
/// system apart.
async fn profile<C: Caller>(side: &str, caller: Arc<C>, calls: usize) {
    // `ROUNDTRIP_SERIAL=1`: one call at a time, as the latency rounds.
    let serial = std::env::var("ROUNDTRIP_SERIAL").is_ok_and(|v| v == "1");
    throughput(caller.clone(), 6_400).await;
    let before = cpu_split();
    let round = if serial {
        latencies(caller, calls).await.1
    } else {
        throughput(caller, calls).await
    };
    let after = cpu_split();
    let per_call = |d: Duration| micros(d) / round.calls as f64;
    println!(
        "{side}: {} calls{}, {:.0} calls/s, CPU {:.2} µs/call (user {:.2}, system {:.2})",
        round.calls,
        if serial { " one at a time" } else { "" },
        round.calls_per_second(),
        micros(round.cpu_per_call()),
        per_call(after.0 - before.0),
        per_call(after.1 - before.1),
    );
}

/// What a ratio to the anchor must be.
#[derive(Clone, Copy)]
enum Goal {
    AtMost(f64),
    AtLeast(f64),
    /// No goal: the row explains another.
    Shown,
}

/// A line of the summary: the measure, ours, the anchor, the ratio, the goal and whether it
/// was met.
fn summary_row(measure: &str, (ours, anchor, ratio): (f64, f64, f64), unit: &str, goal: Goal) {
    let (goal, met) = match goal {
        Goal::AtMost(max) => (format!("≤ {max:.2}×"), ratio <= max),
        Goal::AtLeast(min) => (format!("≥ {min:.2}×"), ratio >= min),
        Goal::Shown => (String::from("—"), true),
    };
    let value = |v: f64| match unit {
        "/s" => format!("{v:.0} {unit}"),
        _ => format!("{v:.2} {unit}"),
    };
    println!(
        "| {measure:<54} | {:>12} | {:>12} | {ratio:>6.3}× | {goal:<7} | {:<7} |",
        value(ours),
        value(anchor),
        match (goal.as_str(), met) {
            ("—", _) => "—",
            (_, true) => "met",
            (_, false) => "not met",
        },
    );
}

fn main() {
    let plan = Plan::from_env();
    let server = Server::start();
    let url = server.url.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = Client::builder("agentd-bench", "0.1.0")
            .connect(&url)
            .await
            .expect("the client connects");
        assert_eq!(client.revision(), Revision::V2026_07_28);
        let client = Arc::new(Negotiated { client });
        let transport = Arc::new(Transport {
            transport: ModernTransport::new(
                HttpClient::new(&url, Config::default()).expect("a transport"),
                Revision::V2026_07_28,
            ),
            meta: ModernMeta {
                revision: Revision::V2026_07_28,
                client_info: &Implementation::new("agentd-bench", "0.1.0"),
                client_capabilities: &ClientCapabilities::none(),
            }
            .render()
            .expect("renders"),
            routing: Routing::named("add").expect("a plain name"),
        });
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let bare = Arc::new(Bare {
            client: HyperClient::builder(TokioExecutor::new()).build(http),
            url: url.parse().expect("a URL"),
            body: Bytes::from(transport.request(1)),
        });
        let bound = Arc::new(BareBound {
            bare: bare.clone(),
            transport: transport.clone(),
        });
        // `ROUNDTRIP_PROFILE=client|transport|bare|bound` runs only that side, for a profiler.
        if let Ok(side) = std::env::var("ROUNDTRIP_PROFILE") {
            let calls = std::env::var("ROUNDTRIP_CALLS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(256_000)
                // A round at concurrency 64 makes whole sets of 64 calls.
                .max(CONCURRENCY);
            match side.as_str() {
                "bare" => profile(&side, bare, calls).await,
                "bound" => profile(&side, bound, calls).await,
                "transport" => profile(&side, transport, calls).await,
                _ => profile(&side, client, calls).await,
            }
            return;
        }
        // Warm the pools.
        throughput(client.clone(), 6_400).await;
        throughput(bare.clone(), 6_400).await;
        throughput(transport.clone(), 6_400).await;
        throughput(bound.clone(), 6_400).await;

        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "tools/call on loopback, bench-server in its own process; {} cores, load {}",
            std::thread::available_parallelism().map_or(0, usize::from),
            load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        );
        println!(
            "{} interleaved rounds a side: {} calls at concurrency 1, {} at concurrency {CONCURRENCY}",
            plan.rounds, plan.latency_calls, plan.throughput_calls,
        );

        let (mut ours, mut layer, mut anchor) = (Side::default(), Side::default(), Side::default());
        let mut floor = Side::default();
        let calls = plan.latency_calls;
        for round in 0..plan.rounds {
            for side in ORDERS[round % 4] {
                match side {
                    0 => ours.add_serial(latencies(client.clone(), calls).await),
                    1 => anchor.add_serial(latencies(bare.clone(), calls).await),
                    2 => layer.add_serial(latencies(transport.clone(), calls).await),
                    _ => floor.add_serial(latencies(bound.clone(), calls).await),
                }
            }
        }
        let calls = plan.throughput_calls;
        for round in 0..plan.rounds {
            for side in ORDERS[round % 4] {
                match side {
                    0 => ours.parallel.push(throughput(client.clone(), calls).await),
                    1 => anchor.parallel.push(throughput(bare.clone(), calls).await),
                    2 => layer.parallel.push(throughput(transport.clone(), calls).await),
                    _ => floor.parallel.push(throughput(bound.clone(), calls).await),
                }
            }
        }

        println!("\nconcurrency 1 (latency over every call; CPU/call median of rounds; ratio: median of rounds' p50 ratios)");
        println!("  {:<16} {:>9} {:>9} {:>12} {:>10}", "side", "p50 µs", "p99 µs", "CPU µs/call", "p50 ratio");
        for side in [&mut ours, &mut layer, &mut anchor, &mut floor] {
            side.latencies.sort_unstable();
        }
        let anchor_p50 = anchor.p(0.5);
        for (name, side) in [("Client", &ours), ("ModernTransport", &layer), ("bare hyper", &anchor), ("bare, bounded", &floor)] {
            let p50 = side.p(0.5);
            println!(
                "  {name:<16} {:>9.2} {:>9.2} {:>12.2} {:>9.3}×",
                micros(p50),
                micros(side.p(0.99)),
                micros(side.serial_cpu()),
                side.p50_ratio(&anchor),
            );
        }
        println!("\nconcurrency {CONCURRENCY} (medians of rounds; ratios: medians of rounds' ratios)");
        println!("  {:<16} {:>10} {:>12} {:>12} {:>10}", "side", "calls/s", "CPU µs/call", "calls/s ratio", "CPU ratio");
        for (name, side) in [("Client", &ours), ("ModernTransport", &layer), ("bare hyper", &anchor), ("bare, bounded", &floor)] {
            println!(
                "  {name:<16} {:>10.0} {:>12.2} {:>12.3}× {:>9.3}×",
                side.calls_per_second(),
                micros(side.parallel_cpu()),
                side.throughput_ratio(&anchor),
                side.cpu_ratio(&anchor),
            );
        }

        let listing = bare
            .post(
                "tools/list",
                None,
                Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#),
            )
            .await;
        let page = mcp_wire::decode_response::<ListToolsResult>(&listing, usize::MAX)
            .expect("a tools/list answer");
        assert_eq!(page.outcome.expect("a result").items.len(), 100);
        let (typed, tree) = decode_row(&listing, &plan);
        println!(
            "\ntools/list of 100 tools ({} bytes): decode_response::<ListToolsResult> {:.2} µs, from_slice::<Value> {:.2} µs, ratio {:.3}×",
            listing.len(),
            micros(typed),
            micros(tree),
            typed.as_secs_f64() / tree.as_secs_f64(),
        );

        println!("\nours and anchor: medians; ratio: the median of the rounds' ratios, not ours / anchor");
        println!("\n| {:<54} | {:>12} | {:>12} | {:>7} | {:<7} | {:<7} |", "measure", "ours", "anchor", "ratio", "goal", "met");
        println!("|{:-<56}|{:-<14}|{:-<14}|{:-<9}|{:-<9}|{:-<9}|", "", "", "", "", "", "");
        for (name, side) in [("Client", &mut ours), ("ModernTransport", &mut layer)] {
            summary_row(
                &format!("{name}: tools/call p50 latency, concurrency 1"),
                (micros(side.p(0.5)), micros(anchor_p50), side.p50_ratio(&anchor)),
                "µs",
                Goal::AtMost(1.05),
            );
            summary_row(
                &format!("{name}: tools/call throughput, concurrency {CONCURRENCY}"),
                (
                    side.calls_per_second(),
                    anchor.calls_per_second(),
                    side.throughput_ratio(&anchor),
                ),
                "/s",
                Goal::AtLeast(0.95),
            );
            summary_row(
                &format!("{name}: CPU per call, concurrency {CONCURRENCY}"),
                (
                    micros(side.parallel_cpu()),
                    micros(anchor.parallel_cpu()),
                    side.cpu_ratio(&anchor),
                ),
                "µs",
                Goal::AtMost(1.15),
            );
        }
        // What the client costs over the work every call must do (`BareBound`).
        summary_row(
            "Client vs bare, bounded: p50 latency, concurrency 1",
            (micros(ours.p(0.5)), micros(floor.p(0.5)), ours.p50_ratio(&floor)),
            "µs",
            Goal::Shown,
        );
        summary_row(
            &format!("Client vs bare, bounded: throughput, concurrency {CONCURRENCY}"),
            (
                ours.calls_per_second(),
                floor.calls_per_second(),
                ours.throughput_ratio(&floor),
            ),
            "/s",
            Goal::Shown,
        );
        summary_row(
            &format!("Client vs bare, bounded: CPU per call, concurrency {CONCURRENCY}"),
            (
                micros(ours.parallel_cpu()),
                micros(floor.parallel_cpu()),
                ours.cpu_ratio(&floor),
            ),
            "µs",
            Goal::Shown,
        );
        summary_row(
            "typed decode of a 100-tool tools/list (time)",
            (micros(typed), micros(tree), typed.as_secs_f64() / tree.as_secs_f64()),
            "µs",
            Goal::AtMost(1.0),
        );
    });
    drop(runtime);
    drop(server);
    println!("\npeak RSS of the bench process: {} KiB", peak_rss());
}
