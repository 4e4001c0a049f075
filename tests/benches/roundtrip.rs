//! `tools/call` round trips on loopback: agentd's transport against a bare hyper client (the
//! floor), at concurrency 1 and 64, against the same minimal server.
//!
//! The bare client POSTs the same request (the same bytes, with the same 2026-07-28 headers),
//! pre-encoded once, through hyper-util's pooled client (TCP_NODELAY set), and collects the
//! body. The transport does what a real call does: encodes the request
//! with its `_meta`, sets the 2026-07-28 headers, reads the answer and decodes the result
//! into `CallToolResult`. Both run three rounds, alternating; the medians are printed with
//! their ratio.
//!
//! Run with `cargo bench -p agentd-tests --bench roundtrip`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_transport::driver::{Config, HttpClient, ModernTransport, Routing};
use mcp_wire::{
    CallToolParams, CallToolResult, ClientCapabilities, Implementation, ModernMeta, Outcome,
    RenderedMeta, RequestId, RequestMeta, Revision, WithMeta, encode_request,
};
use tokio::net::TcpListener;

const RESULT: &str = r#"{"resultType":"complete","content":[{"type":"text","text":"5"}],"structuredContent":{"result":5},"isError":false}"#;

/// The answer to the request in `body`, with its id.
fn answer(body: &[u8]) -> Bytes {
    let id = match mcp_wire::decode(body, usize::MAX) {
        Ok(mcp_wire::Message::Request(r)) => r.id,
        _ => RequestId::Number(0),
    };
    let raw = serde_json::value::RawValue::from_string(RESULT.to_owned()).expect("JSON");
    let mut out = Vec::with_capacity(192);
    mcp_wire::encode_result(&mut out, &id, &raw).expect("encodes");
    Bytes::from(out)
}

/// Connections the server accepted: a pooled client opens few.
static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A server that answers every POST with one `tools/call` result, on its own thread.
fn serve() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send");
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tcp.set_nodelay(true).expect("nodelay");
                tokio::spawn(async move {
                    let service =
                        service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                            let body = req.into_body().collect().await.expect("a body").to_bytes();
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(answer(&body)))
                                    .expect("a response"),
                            )
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
    });
    rx.recv().expect("the server's address")
}

trait Caller: Send + Sync + 'static {
    fn call(&self, n: i64) -> impl Future<Output = ()> + Send;
}

struct Bare {
    client: Client<HttpConnector, Full<Bytes>>,
    url: http::Uri,
    body: Bytes,
}

impl Caller for Bare {
    async fn call(&self, _n: i64) {
        let request = http::Request::post(self.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "add")
            .body(Full::new(self.body.clone()))
            .expect("a request");
        let response = self.client.request(request).await.expect("an answer");
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        assert!(body.ends_with(b"}}"));
    }
}

struct Transport {
    transport: ModernTransport,
    meta: RenderedMeta,
}

impl Transport {
    /// The request of call `n`, encoded.
    fn request(&self, n: i64) -> Vec<u8> {
        let mut params = CallToolParams::new("add");
        params.arguments = serde_json::json!({"a": 2, "b": 3}).as_object().cloned();
        let mut meta = RequestMeta::default();
        meta.modern = Some(&self.meta);
        let mut body = Vec::with_capacity(256);
        let id = RequestId::Number(n);
        let params = WithMeta {
            params: &params,
            meta,
        };
        encode_request(&mut body, &id, "tools/call", Some(&params)).expect("encodes");
        body
    }
}

impl Caller for Transport {
    async fn call(&self, n: i64) {
        let id = RequestId::Number(n);
        let body = self.request(n);
        let call = self
            .transport
            .call::<Outcome<CallToolResult>>(
                id,
                "tools/call",
                Bytes::from(body),
                Routing::named("add"),
            )
            .await
            .expect("a call");
        let response = call.response(|_| {}).await.expect("a response");
        assert!(matches!(response.outcome, Ok(Outcome::Complete(_))));
    }
}

/// Runs `total` calls over `concurrency` tasks; the time per call.
async fn run<C: Caller>(caller: Arc<C>, total: usize, concurrency: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let caller = caller.clone();
            tokio::spawn(async move {
                for i in 0..total / concurrency {
                    caller.call((t * total + i) as i64).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a task");
    }
    started.elapsed() / u32::try_from(total).expect("fits")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let addr = serve();
    let url = format!("http://{addr}/mcp");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let ours = Arc::new(Transport {
            transport: ModernTransport::new(
                HttpClient::new(&url, Config::default()).expect("a client"),
                Revision::V2026_07_28,
            ),
            meta: ModernMeta {
                revision: Revision::V2026_07_28,
                client_info: &Implementation::new("agentd", "0.1.0"),
                client_capabilities: &ClientCapabilities::none(),
            }
            .render()
            .expect("renders"),
        });
        let bare = Arc::new(Bare {
            client: Client::builder(TokioExecutor::new()).build(http),
            url: url.parse().expect("a URL"),
            body: Bytes::from(ours.request(1)),
        });
        // Warm both pools.
        run(bare.clone(), 2_000, 64).await;
        run(ours.clone(), 2_000, 64).await;
        // `ROUNDTRIP_PROFILE=bare|transport` runs only that side, at concurrency 64, for a
        // profiler.
        if let Ok(side) = std::env::var("ROUNDTRIP_PROFILE") {
            let per_call = match side.as_str() {
                "bare" => run(bare.clone(), 256_000, 64).await,
                _ => run(ours.clone(), 256_000, 64).await,
            };
            println!("{side}: {:.2} µs/call", per_call.as_secs_f64() * 1e6);
            return;
        }
        println!("tools/call round trips on loopback (median of 3 rounds)");
        for (concurrency, total) in [(1, 20_000), (64, 64_000)] {
            let (mut b, mut o) = (Vec::new(), Vec::new());
            for _ in 0..3 {
                b.push(run(bare.clone(), total, concurrency).await);
                o.push(run(ours.clone(), total, concurrency).await);
            }
            let (b, o) = (median(b), median(o));
            let accepted = ACCEPTED.load(std::sync::atomic::Ordering::Relaxed);
            println!(
                "concurrency {concurrency:>2}: bare hyper {:>7.2} µs/call ({:>6.0} calls/s), transport {:>7.2} µs/call ({:>6.0} calls/s), transport/bare time ratio {:.3}; connections so far {accepted}",
                b.as_secs_f64() * 1e6,
                1.0 / b.as_secs_f64(),
                o.as_secs_f64() * 1e6,
                1.0 / o.as_secs_f64(),
                o.as_secs_f64() / b.as_secs_f64(),
            );
        }
    });
}
