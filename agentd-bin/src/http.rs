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
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::events::hooks::{Routes, receive};
use crate::telemetry::metrics::Metrics;

/// How long a request's head may take to arrive.
const HEAD_WITHIN: Duration = Duration::from_secs(30);

/// How long a connection has, once the listener stops, to finish the request it answers.
const GRACE: Duration = Duration::from_secs(5);

/// Serves `listener` on the current runtime, each connection a task of `tasks`, the
/// webhook routes under `prefix` (see [`route_prefix`](crate::events::hooks::route_prefix)),
/// until `shutdown`: then it accepts no more, a connection whose first request's head has
/// not come whole is closed at once, and each other has [`GRACE`] to finish the request it
/// answers (hyper's graceful shutdown) before it is closed.
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
            let _ = tcp.set_nodelay(true);
            let (metrics, routes, instance) = (metrics.clone(), routes.clone(), instance.clone());
            let (shutdown, prefix) = (shutdown.clone(), prefix.clone());
            tasks.spawn(async move {
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
    use http_body_util::BodyExt;

    use super::*;

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
