//! The daemon's HTTP listener: `GET /metrics`, and the webhook routes of MCP Events
//! (`POST …/hooks/_mcp/<binding>`, see [`hooks`](crate::events::hooks)).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::events::hooks::{Routes, receive};
use crate::telemetry::metrics::Metrics;

/// How long a request's head may take to arrive.
const HEAD_WITHIN: Duration = Duration::from_secs(30);

/// How long a connection has, once the listener stops, to finish the request it answers.
const GRACE: Duration = Duration::from_secs(5);

/// How many connections the listener serves at once. Past it a connection is answered
/// [`TURNED_AWAY`] as it is accepted, and closed: a flood of connections costs the daemon
/// neither memory nor descriptors past this many.
pub(crate) const CONNECTIONS: usize = 256;

/// The answer of a connection past [`CONNECTIONS`]: 503, to be sent again a second later.
const TURNED_AWAY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\
                             connection: close\r\ncontent-length: 0\r\n\r\n";

/// How much of what a turned-away connection sent is read before it is closed.
const TURNED_AWAY_READ: usize = 64 * 1024;

/// Serves `listener` on the current runtime, each connection a task of `tasks` (at most
/// [`CONNECTIONS`] at once), the webhook routes under `prefix` (see
/// [`route_prefix`](crate::events::hooks::route_prefix)), until `shutdown`: then it accepts
/// no more, a connection whose first request's head has not come whole is closed at once,
/// and each other has [`GRACE`] to finish the request it answers (hyper's graceful
/// shutdown) before it is closed.
pub(crate) fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    routes: Routes,
    prefix: String,
    instance: Arc<str>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let prefix: Arc<str> = prefix.into();
    let open = Arc::new(Semaphore::new(CONNECTIONS));
    tasks.clone().spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
            };
            let Ok((tcp, _)) = accepted else {
                // Out of descriptors, most likely: give the others a moment to close.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let Ok(serving) = open.clone().try_acquire_owned() else {
                turn_away(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (metrics, routes, instance) = (metrics.clone(), routes.clone(), instance.clone());
            let (shutdown, prefix) = (shutdown.clone(), prefix.clone());
            tasks.spawn(async move {
                let _serving = serving;
                // Whether a request's head has come whole: until then the connection has no
                // request being answered.
                let asked = Arc::new(AtomicBool::new(false));
                let heard = asked.clone();
                let service = service_fn(move |req: Request<Incoming>| {
                    heard.store(true, Ordering::Relaxed);
                    let (metrics, routes, instance, prefix) = (
                        metrics.clone(),
                        routes.clone(),
                        instance.clone(),
                        prefix.clone(),
                    );
                    async move {
                        let path = req.uri().path().to_owned();
                        // Routes are matched from the start of the path: `/x/hooks/_mcp/…`
                        // is no route.
                        let response = match path.strip_prefix(&*prefix) {
                            Some(key) => receive(req, key, &routes, &instance, &metrics).await,
                            None => answer(&req, &metrics),
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_WITHIN)
                    .serve_connection(TokioIo::new(tcp), service);
                let mut connection = std::pin::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = shutdown.cancelled() => {
                        // A first head still coming in is not a request being answered:
                        // cut at once. Else hyper closes an idle connection, and one
                        // answering has its grace.
                        if asked.load(Ordering::Relaxed) {
                            connection.as_mut().graceful_shutdown();
                            let _ = tokio::time::timeout(GRACE, connection).await;
                        }
                    }
                }
            });
        }
    });
}

/// Answers `tcp`, a connection past [`CONNECTIONS`], [`TURNED_AWAY`] and closes it, without
/// a task. What it sent already (its request, at most [`TURNED_AWAY_READ`] bytes) is read
/// first and let go: a socket closed with bytes unread is reset, and a reset may reach the
/// client before it has read the answer. A fresh socket's send buffer takes the answer at
/// once; the write side is shut down (FIN) before the socket is closed.
fn turn_away(tcp: tokio::net::TcpStream) {
    read_away(|unread| tcp.try_read(unread));
    let _ = tcp.try_write(TURNED_AWAY);
    if let Ok(tcp) = tcp.into_std() {
        let _ = tcp.shutdown(std::net::Shutdown::Write);
    }
}

/// Reads and lets go what a connection has sent already, by `try_read` (a socket's read
/// that does not wait), until it has no more: at most [`TURNED_AWAY_READ`] bytes, never
/// one past, however short its reads. How many were read.
fn read_away(mut try_read: impl FnMut(&mut [u8]) -> std::io::Result<usize>) -> usize {
    let mut unread = [0; 4096];
    let mut read = 0;
    while read < TURNED_AWAY_READ {
        let room = unread.len().min(TURNED_AWAY_READ - read);
        match try_read(&mut unread[..room]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    read
}

fn answer<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            // OpenMetrics to a scraper that lists it, else the Prometheus text format.
            let openmetrics = req
                .headers()
                .get_all(hyper::header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            let (content_type, text) = metrics.expose(openmetrics);
            (200, content_type, text)
        }
        (_, "/metrics") => (405, "text/plain", "method not allowed\n".to_owned()),
        _ => (404, "text/plain", "not found\n".to_owned()),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::RwLock;

    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::events::hooks::{self, BODY_WITHIN, Route};

    /// A listener serving one binding's route, `/hooks/_mcp/bkey`; its address. The
    /// binding's queue is kept open, and never read.
    async fn listening(shutdown: &CancellationToken) -> (std::net::SocketAddr, hooks::Deliveries) {
        let ((hooks, pressure), deliveries) = hooks::queue();
        let route = Route {
            server: "s".into(),
            event: "t".into(),
            secrets: vec![mcp_events::webhook::Secret::from_bytes(&[7; 32]).unwrap()],
            limits: mcp_events::Limits::default(),
            hooks,
            pressure,
        };
        let routes = Arc::new(RwLock::new(HashMap::from([("bkey".to_owned(), route)])));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let prefix = hooks::route_prefix(None);
        let metrics = Arc::default();
        serve(
            listener,
            metrics,
            routes,
            prefix,
            "t".into(),
            shutdown.clone(),
            TaskTracker::new(),
        );
        (addr, deliveries)
    }

    const METRICS: &[u8] = b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n";

    /// [`CONNECTIONS`] connections to `addr`, each served once and held open.
    async fn held(addr: std::net::SocketAddr) -> Vec<tokio::net::TcpStream> {
        let mut held = Vec::new();
        for _ in 0..CONNECTIONS {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(METRICS).await.unwrap();
            let mut head = [0; 12];
            tcp.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            held.push(tcp);
        }
        held
    }

    /// The listener serves [`CONNECTIONS`] connections at once: the next is answered 503
    /// with `Retry-After` as it is accepted, and closed; once one closes, the next is served.
    #[tokio::test]
    async fn connections_past_the_bound_are_turned_away() {
        let shutdown = CancellationToken::new();
        let (addr, _deliveries) = listening(&shutdown).await;
        let mut held = held(addr).await;
        let mut past = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut answer = Vec::new();
        past.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, TURNED_AWAY);
        drop(held.pop());
        // Served again once the connection's task has seen it closed.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            assert!(tokio::time::Instant::now() < deadline, "not served again");
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(METRICS).await.unwrap();
            let mut head = [0; 12];
            tcp.read_exact(&mut head).await.unwrap();
            if &head == b"HTTP/1.1 200" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        shutdown.cancel();
    }

    /// A connection past the bound whose request (head and body) has all come before it
    /// is accepted reads the 503 whole and then the end of the connection, not a reset: the
    /// listener reads what came before it closes, up to [`TURNED_AWAY_READ`] bytes (the
    /// last request is that long, head and body). Connected and written without an await,
    /// so that the listener (on this thread) accepts only once the bytes are there; the
    /// write has a bound of its own, should the socket's buffers not take it.
    #[tokio::test]
    async fn a_turned_away_request_already_sent_reads_its_503() {
        let shutdown = CancellationToken::new();
        let (addr, _deliveries) = listening(&shutdown).await;
        let _held = held(addr).await;
        let head = |size: usize| {
            format!("POST /hooks/_mcp/bkey HTTP/1.1\r\nhost: x\r\ncontent-length: {size}\r\n\r\n")
        };
        let whole = TURNED_AWAY_READ - head(TURNED_AWAY_READ).len();
        for size in [0, 1024, 16 * 1024, whole] {
            let body = vec![b'x'; size];
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.set_write_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let request = [head(size).into_bytes(), body].concat();
            std::io::Write::write_all(&mut tcp, &request)
                .unwrap_or_else(|e| panic!("{size}: the socket's buffers took no more: {e}"));
            tcp.set_nonblocking(true).unwrap();
            let mut tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
            let mut answer = Vec::new();
            let read = tcp.read_to_end(&mut answer).await;
            assert!(read.is_ok(), "{size}: {read:?}");
            assert_eq!(answer, TURNED_AWAY, "{size}");
        }
        shutdown.cancel();
    }

    /// What a turned-away connection sent is read up to [`TURNED_AWAY_READ`] bytes: all of
    /// them at the bound; one past it, the bound and not the last byte.
    #[tokio::test]
    async fn a_turned_away_connection_is_read_up_to_its_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        for sent in [TURNED_AWAY_READ, TURNED_AWAY_READ + 1] {
            let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            client.write_all(&vec![b'x'; sent]).await.unwrap();
            // Every byte there before it is read.
            let mut peeked = vec![0; sent + 1];
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while tcp.peek(&mut peeked).await.unwrap() < sent {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{sent}: not all came"
                );
                tokio::task::yield_now().await;
            }
            let read = read_away(|unread| tcp.try_read(unread));
            assert_eq!(read, TURNED_AWAY_READ, "{sent}");
            let left = tcp.try_read(&mut peeked);
            match sent - TURNED_AWAY_READ {
                0 => assert!(left.is_err(), "{sent}: {left:?}"),
                _ => assert_eq!(left.ok(), Some(1), "{sent}"),
            }
        }
    }

    /// What a turned-away connection sent, read in pieces of odd sizes (as when its bytes
    /// come in while they are read), is read up to [`TURNED_AWAY_READ`] bytes and never
    /// one past: at the bound all of it, one past it all but the last byte.
    #[test]
    fn a_turned_away_connection_read_in_odd_pieces_stops_at_its_bound() {
        for piece in [1, 1000, 4095] {
            for sent in [TURNED_AWAY_READ, TURNED_AWAY_READ + 1] {
                let mut left = sent;
                let read = read_away(|unread| match unread.len().min(piece).min(left) {
                    0 => Err(std::io::ErrorKind::WouldBlock.into()),
                    n => {
                        left -= n;
                        Ok(n)
                    }
                });
                let past = sent - TURNED_AWAY_READ;
                assert_eq!((read, left), (TURNED_AWAY_READ, past), "{sent} in {piece}s");
            }
        }
    }

    /// In virtual time: a delivery whose body stops coming (a chunked body never ended,
    /// a declared length never reached) is answered 408 once [`BODY_WITHIN`] has passed
    /// since its head, and its connection closed; not before, nor long after.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_coming_is_answered_408() {
        let shutdown = CancellationToken::new();
        let (addr, _deliveries) = listening(&shutdown).await;
        let heads = [
            ("transfer-encoding: chunked", &b"5\r\nhello\r\n"[..]),
            ("content-length: 100", &b"{\"eventId\""[..]),
        ];
        for (framing, start) in heads {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let head = format!("POST /hooks/_mcp/bkey HTTP/1.1\r\nhost: x\r\n{framing}\r\n\r\n");
            tcp.write_all(head.as_bytes()).await.unwrap();
            tcp.write_all(start).await.unwrap();
            let sent = tokio::time::Instant::now();
            let mut answer = String::new();
            let read = tokio::time::timeout(BODY_WITHIN * 2, tcp.read_to_string(&mut answer));
            assert!(read.await.is_ok(), "{framing}: unanswered");
            assert!(answer.starts_with("HTTP/1.1 408 "), "{framing}: {answer}");
            let took = sent.elapsed();
            assert!(took >= BODY_WITHIN, "{framing}: {took:?}");
            assert!(
                took < BODY_WITHIN + Duration::from_secs(1),
                "{framing}: {took:?}"
            );
        }
        shutdown.cancel();
    }

    /// `GET /metrics` with `accept`: the content type, and the text.
    async fn scrape(accept: Option<&str>) -> (String, String) {
        let metrics = Metrics::default();
        metrics.connect_failed("a");
        let mut req = Request::get("/metrics");
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        let response = answer(&req.body(()).unwrap(), &metrics);
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (content_type, String::from_utf8(body.to_vec()).unwrap())
    }

    /// The Prometheus text format unless the scraper lists OpenMetrics, each with its own
    /// content type; the counter's samples are named as the reference names them in both.
    #[tokio::test]
    async fn metrics_are_served_in_the_format_the_scraper_asks_for() {
        let sample = "agent_mcp_connect_failures_total{server=\"a\"} 1\n";
        let (content_type, text) = scrape(None).await;
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(text.contains(sample), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        // What Prometheus asks for by default.
        let accept = "application/openmetrics-text;version=1.0.0;q=0.5,\
                      text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
        let (content_type, text) = scrape(Some(accept)).await;
        assert_eq!(
            content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(text.contains(sample), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
