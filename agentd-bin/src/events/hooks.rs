//! The webhook receiver of MCP Events: `POST …/hooks/_mcp/<binding>` on the daemon's
//! listener. The Standard Webhooks check runs before the body is used; then the body goes to
//! its binding's task, and the answer says what became of it:
//!
//! | status | when |
//! |---|---|
//! | 200 | durably appended, a duplicate, or a `gap` / `terminated` envelope taken (a `verification` challenge is answered with its `challenge`) |
//! | 401 | the signature check failed (`mcp.events.hook.denied`) |
//! | 405 | not a POST |
//! | 410 | no binding at this path, a delivery naming a subscription that is not the binding's, a body that is not a JSON object, or a malformed occurrence |
//! | 408 | a body that has not all come within 30 s of its head ([`BODY_WITHIN`]); the connection is closed |
//! | 413 | a body over 256 KiB (or `store.max_value_bytes` when smaller), answered before it is read |
//! | 429 | pressure (the binding's queue is full), or the binding's rate is spent (`Retry-After`) |
//! | 503 | not armed yet, shutting down, or the append was not saved (`Retry-After`) |
//!
//! The listener answers two statuses of its own before a request reaches a route: 408 above,
//! and 503 with `Retry-After: 1` for a connection past the 256 it serves at once
//! ([`crate::http`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use mcp_events::Limits;
use mcp_events::binding::Rejection;
use mcp_events::webhook::{Headers, Secret, verify};
use mcp_wire::events::{DeliveryMode, WebhookBody};
use serde_json::json;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::clock::wall_ms;
use crate::telemetry::catalogue::events::{self as logs, Of};
use crate::telemetry::metrics::{Metrics, Outcome};

/// The path segment before a binding's key.
pub(crate) const PREFIX: &str = "/hooks/_mcp/";

/// The path the routes begin with on the listener: `webhooks.url`'s own path, if it has one
/// (`https://host/agentd` serves `/agentd/hooks/_mcp/…`), then [`PREFIX`].
pub(crate) fn route_prefix(hooks_url: Option<&str>) -> String {
    let path = hooks_url
        .and_then(|url| url.split_once("://"))
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    format!("{}{PREFIX}", path.trim_end_matches('/'))
}

/// How many deliveries may wait for one binding's task.
pub(crate) const QUEUE: usize = 64;

/// How long a delivery waits for its binding's task.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// How long a delivery's body may take to come, once its head has (the listener bounds the
/// head at as much): past it the delivery is answered 408 and its connection closed, so
/// that a body that stops coming holds no task and no connection.
pub(crate) const BODY_WITHIN: Duration = Duration::from_secs(30);

/// Every binding that takes webhook deliveries, by key.
pub(crate) type Routes = Arc<RwLock<HashMap<String, Route>>>;

/// Where a binding's deliveries go.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) server: String,
    pub(crate) event: String,
    /// The secrets deliveries may be signed with (several while one is rotated).
    pub(crate) secrets: Vec<Secret>,
    /// The binding's bounds: its body's, and the signature's timestamp tolerance.
    pub(crate) limits: Limits,
    pub(crate) hooks: mpsc::Sender<Hook>,
    /// Set when a delivery met a full queue; the binding's task logs the pause and clears
    /// it once the queue has drained.
    pub(crate) pressure: Pressure,
}

/// A binding's pressure: set (and its task woken) when a delivery meets its queue full.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pressure {
    full: Arc<AtomicBool>,
    woken: Arc<Notify>,
}

impl Pressure {
    /// A delivery met the queue full.
    pub(crate) fn met(&self) {
        self.full.store(true, Ordering::Relaxed);
        self.woken.notify_one();
    }

    /// Whether a delivery met the queue full since the last [`Pressure::clear`].
    pub(crate) fn is_set(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// The queue has drained.
    pub(crate) fn clear(&self) {
        self.full.store(false, Ordering::Relaxed);
    }

    /// Resolves once a delivery meets the queue full.
    pub(crate) async fn woken(&self) {
        self.woken.notified().await;
    }
}

/// A binding's side of its queue: the deliveries, and whether one met the queue full.
#[derive(Debug)]
pub(crate) struct Deliveries {
    pub(crate) hooks: mpsc::Receiver<Hook>,
    pub(crate) pressure: Pressure,
}

/// A binding's queue of deliveries: the sending half and the pressure for its route, and the
/// binding's side.
pub(crate) fn queue() -> ((mpsc::Sender<Hook>, Pressure), Deliveries) {
    let (sender, hooks) = mpsc::channel(QUEUE);
    let pressure = Pressure::default();
    ((sender, pressure.clone()), Deliveries { hooks, pressure })
}

/// A delivery that passed the check, on its way to its binding.
#[derive(Debug)]
pub(crate) struct Hook {
    /// The delivery's `webhook-id`.
    pub(crate) webhook_id: String,
    /// The subscription it names (`X-MCP-Subscription-Id`): its binding's, or it is gone.
    pub(crate) subscription: String,
    pub(crate) body: WebhookBody,
    pub(crate) answer: oneshot::Sender<Answer>,
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// 200.
    Taken,
    /// 410.
    Gone,
    /// 503 with `Retry-After`.
    NotNow,
    /// 429 with `Retry-After` of this.
    Busy(Duration),
}

/// Answers a request to `…/hooks/_mcp/<key>`.
pub(crate) async fn receive(
    req: Request<Incoming>,
    key: &str,
    routes: &Routes,
    instance: &str,
    metrics: &Metrics,
) -> Response<Full<Bytes>> {
    if req.method() != Method::POST {
        return status(405, "");
    }
    let route = routes
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned();
    let Some(route) = route else {
        return status(410, "no binding at this path\n");
    };
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body_max = route.limits.occurrence_max;
    if declared.is_some_and(|n| n > body_max as u64) {
        return status(413, "");
    }
    let (parts, body) = req.into_parts();
    let body = match tokio::time::timeout(BODY_WITHIN, Limited::new(body, body_max).collect()).await
    {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return status(413, ""),
        Err(_) => return timed_out(),
    };
    let body = body.to_bytes();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let checked = Headers::read(header).and_then(|headers| {
        let secrets: Vec<&Secret> = route.secrets.iter().collect();
        let now = wall_ms() / 1000;
        verify(&headers, &body, &secrets, now, &route.limits)
            .map(|()| (headers.id.to_owned(), headers.subscription.to_owned()))
    });
    let of = Of {
        instance,
        server: &route.server,
        event_type: &route.event,
    };
    let (webhook_id, subscription) = match checked {
        Ok(named) => named,
        Err(e) => {
            logs::hook_denied(of, &e.to_string());
            return status(401, "");
        }
    };
    let body = match WebhookBody::decode(&body) {
        Ok(WebhookBody::Verification { challenge }) => {
            let answer = json!({ "challenge": challenge }).to_string();
            return Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(answer)))
                .unwrap_or_default();
        }
        Ok(body) => body,
        Err(_) => {
            logs::rejected(of, &webhook_id, Rejection::Malformed);
            let series = (route.server.as_str(), route.event.as_str());
            metrics.occurrences(series, DeliveryMode::Webhook, Outcome::Rejected, 1);
            return status(410, "malformed\n");
        }
    };
    hand_over(&route, webhook_id, subscription, body, metrics).await
}

/// Hands a checked delivery to its binding's task, and answers by what became of it: 429
/// when [`QUEUE`] deliveries wait already (pressure).
async fn hand_over(
    route: &Route,
    webhook_id: String,
    subscription: String,
    body: WebhookBody,
    metrics: &Metrics,
) -> Response<Full<Bytes>> {
    let (answer, answered) = oneshot::channel();
    let hook = Hook {
        webhook_id,
        subscription,
        body,
        answer,
    };
    match route.hooks.try_send(hook) {
        Ok(()) => {}
        // Pressure: the binding's task has deliveries enough waiting.
        Err(mpsc::error::TrySendError::Full(_)) => {
            route.pressure.met();
            let series = (route.server.as_str(), route.event.as_str());
            metrics.occurrences(series, DeliveryMode::Webhook, Outcome::RefusedPressure, 1);
            return too_many(Duration::from_secs(1));
        }
        Err(mpsc::error::TrySendError::Closed(_)) => return retry_later(),
    }
    match tokio::time::timeout(ANSWER_WITHIN, answered).await {
        Ok(Ok(Answer::Taken)) => status(200, ""),
        Ok(Ok(Answer::Gone)) => status(410, ""),
        Ok(Ok(Answer::Busy(wait))) => too_many(wait),
        _ => retry_later(),
    }
}

fn status(code: u16, text: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .unwrap_or_default()
}

/// 408: the body did not come in time; the connection is not kept.
fn timed_out() -> Response<Full<Bytes>> {
    Response::builder()
        .status(408)
        .header("connection", "close")
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

fn too_many(wait: Duration) -> Response<Full<Bytes>> {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Response::builder()
        .status(429)
        .header("retry-after", secs.max(1).to_string())
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

fn retry_later() -> Response<Full<Bytes>> {
    Response::builder()
        .status(503)
        .header("retry-after", "1")
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_begin_with_the_path_of_the_base_url() {
        assert_eq!(route_prefix(None), "/hooks/_mcp/");
        assert_eq!(route_prefix(Some("https://h.example")), "/hooks/_mcp/");
        assert_eq!(route_prefix(Some("https://h.example/")), "/hooks/_mcp/");
        assert_eq!(
            route_prefix(Some("https://h.example/agentd/")),
            "/agentd/hooks/_mcp/"
        );
    }

    fn occurrence(n: usize) -> WebhookBody {
        let body = format!(
            r#"{{"eventId":"evt-{n}","name":"t","timestamp":"2026-11-30T06:00:00Z","data":{{}}}}"#
        );
        WebhookBody::decode(body.as_bytes()).expect("an occurrence")
    }

    /// 64 deliveries wait for a binding's task; the 65th is answered 429 at once, and the
    /// binding's side is told it met the queue full.
    #[tokio::test]
    async fn a_binding_s_queue_holds_64_and_the_next_is_pressure() {
        let ((hooks, pressure), mut delivered) = queue();
        let route = Arc::new(Route {
            server: "s".into(),
            event: "t".into(),
            secrets: Vec::new(),
            limits: Limits::default(),
            hooks,
            pressure,
        });
        let metrics = Arc::new(Metrics::default());
        let mut waiting = Vec::new();
        for n in 0..QUEUE {
            let (route, metrics) = (route.clone(), metrics.clone());
            waiting.push(tokio::spawn(async move {
                hand_over(
                    &route,
                    format!("msg_{n}"),
                    "sub".into(),
                    occurrence(n),
                    &metrics,
                )
                .await
            }));
        }
        // Every one of them is in the queue before the next comes.
        while route.hooks.capacity() > 0 {
            tokio::task::yield_now().await;
        }
        let past = hand_over(
            &route,
            "msg_past".into(),
            "sub".into(),
            occurrence(QUEUE),
            &metrics,
        )
        .await;
        assert_eq!(past.status(), 429);
        assert_eq!(past.headers()["retry-after"], "1");
        assert!(delivered.pressure.is_set());
        assert!(metrics.render().contains("outcome=\"refused_pressure\"} 1"));
        // The task takes them all: each is answered 200.
        for _ in 0..QUEUE {
            let hook = delivered.hooks.recv().await.expect("a delivery");
            let _ = hook.answer.send(Answer::Taken);
        }
        for answer in waiting {
            assert_eq!(answer.await.unwrap().status(), 200);
        }
    }
}
