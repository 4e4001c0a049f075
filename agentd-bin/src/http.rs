//! The daemon's HTTP listener: `GET /metrics`, and the webhook routes of MCP Events
//! (`POST …/hooks/_mcp/<binding>`, see [`hooks`](crate::hooks)).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::hooks::{PREFIX, Routes, receive};
use crate::metrics::Metrics;

/// Serves `listener` on the current runtime, each connection a task of `tasks`, until
/// `shutdown`: then it accepts no more, and each connection finishes the request it is
/// answering and closes (hyper's graceful shutdown).
pub(crate) fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    routes: Routes,
    instance: Arc<str>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    tasks.clone().spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
            };
            let Ok((tcp, _)) = accepted else {
                // Out of descriptors, most likely: give the others a moment to close.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (metrics, routes, instance) = (metrics.clone(), routes.clone(), instance.clone());
            let shutdown = shutdown.clone();
            tasks.spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let (metrics, routes, instance) =
                        (metrics.clone(), routes.clone(), instance.clone());
                    async move {
                        let path = req.uri().path().to_owned();
                        // Routes are matched from the start of the path: `/x/hooks/_mcp/…`
                        // is no route.
                        let response = match path.strip_prefix(PREFIX) {
                            Some(key) => receive(req, key, &routes, &instance, &metrics).await,
                            None => answer(&req, &metrics),
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service);
                let mut connection = std::pin::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                    }
                }
            });
        }
    });
}

fn answer<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (200, "text/plain; version=0.0.4", metrics.render()),
        (_, "/metrics") => (405, "text/plain", "method not allowed\n".to_owned()),
        _ => (404, "text/plain", "not found\n".to_owned()),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}
