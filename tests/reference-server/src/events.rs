//! MCP Events (SEP-3415) on the reference server, 2026-07-28 only: `events/list` with two
//! types, `events/poll` over a log of occurrences the test emits, `events/subscribe` and
//! `events/unsubscribe` with signed webhook deliveries (a `verification` challenge first,
//! then every occurrence of the type, replayed from the cursor given), the -32023, -32027
//! and -32602 errors.
//!
//! Cursors are `c<n>`: the position after the `n`th occurrence. `ticket.created` replays;
//! `build.finished` does not (its polls answer a `null` cursor).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_wire::{ErrorObject, code, events};
use serde_json::{Value, json};
use sha2::Sha256;

/// A subscription's signing secret (Standard Webhooks): the bytes of its text, `whsec_`
/// and the base64 of 24 to 64 bytes.
#[derive(Clone)]
struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(whsec_…)")
    }
}

impl Secret {
    /// The secret of `text`, if it is `whsec_` and the base64 of 24 to 64 bytes.
    fn parse(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text.strip_prefix("whsec_")?).ok()?;
        (24..=64).contains(&bytes.len()).then_some(Self(bytes))
    }

    /// The `webhook-signature` of a delivery: `v1,` and the base64 of
    /// HMAC-SHA256(key, "{id}.{timestamp}.{body}").
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).ok()?;
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        let tag = mac.finalize().into_bytes();
        Some(format!("v1,{}", STANDARD.encode(tag)))
    }
}

/// A webhook subscription the server holds.
#[derive(Debug, Clone)]
struct Subscription {
    id: String,
    name: String,
    url: String,
    secret: Secret,
}

/// The occurrences emitted so far, and the webhook subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Log {
    occurrences: Mutex<Vec<Value>>,
    subscriptions: Mutex<Vec<Subscription>>,
    /// The `deliveryStatus` the next `events/subscribe` answers carry, if any.
    status: Mutex<Option<Value>>,
    /// Every delivery made: the `webhook-id` and the receiver's status (0: unreachable).
    delivered: Arc<Mutex<Vec<(String, u16)>>>,
}

impl Log {
    /// Appends an occurrence of `name` with `data`, and delivers it to the type's webhook
    /// subscriptions (naming `subscription` instead of each one's id, when given); its
    /// `eventId`.
    pub(crate) fn emit(&self, name: &str, data: Value, subscription: Option<&str>) -> String {
        let mut all = self.occurrences.lock().expect("events lock");
        let id = format!("evt-{}", all.len() + 1);
        let mut occurrence = json!({
            "eventId": id,
            "name": name,
            "timestamp": now_rfc3339(),
            "data": data,
        });
        all.push(occurrence.clone());
        occurrence["cursor"] = json!(format!("c{}", all.len()));
        drop(all);
        for mut s in self.subscribed(name) {
            if let Some(named) = subscription {
                named.clone_into(&mut s.id);
            }
            self.deliver(&s, &id, &occurrence);
        }
        id
    }

    /// Sends a control envelope (`gap`, `terminated`) to every webhook subscription of
    /// `name`; a `terminated` one also ends them here.
    pub(crate) fn envelope(&self, name: &str, body: &Value) {
        let n = self.delivered.lock().expect("events lock").len();
        for s in self.subscribed(name) {
            self.deliver(
                &s,
                &format!("msg_{}_{n}", body["type"].as_str().unwrap_or("x")),
                body,
            );
        }
        if body["type"] == "terminated" {
            let mut all = self.subscriptions.lock().expect("events lock");
            all.retain(|s| s.name != name);
        }
    }

    /// Sets the `deliveryStatus` the next `events/subscribe` answers carry.
    pub(crate) fn set_status(&self, status: Option<Value>) {
        *self.status.lock().expect("events lock") = status;
    }

    /// The deliveries made so far: `webhook-id` and status.
    pub(crate) fn delivered(&self) -> Vec<(String, u16)> {
        self.delivered.lock().expect("events lock").clone()
    }

    fn subscribed(&self, name: &str) -> Vec<Subscription> {
        let all = self.subscriptions.lock().expect("events lock");
        all.iter().filter(|s| s.name == name).cloned().collect()
    }

    /// Posts `body`, signed, to the subscription's URL, on a task of its own, again a few
    /// times while the receiver answers anything but 2xx or 410.
    fn deliver(&self, s: &Subscription, id: &str, body: &Value) {
        let (s, id, body) = (s.clone(), id.to_owned(), body.to_string());
        let delivered = self.delivered.clone();
        tokio::spawn(async move {
            for _ in 0..5 {
                let status = post(&s, &id, &body).await.map_or(0, |(status, _)| status);
                delivered
                    .lock()
                    .expect("events lock")
                    .push((id.clone(), status));
                if (200..300).contains(&status) || status == 410 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
    }
}

/// One signed POST: the status and the body of the answer.
async fn post(s: &Subscription, id: &str, body: &str) -> Option<(u16, Bytes)> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
    let signature = s.secret.sign(id, now, body.as_bytes())?;
    let request = hyper::Request::post(&s.url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .header(events::SUBSCRIPTION_HEADER, &s.id)
        .body(Full::new(Bytes::from(body.to_owned())))
        .ok()?;
    let answer = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .ok()?
        .ok()?;
    let status = answer.status().as_u16();
    let body = answer.into_body().collect().await.ok()?.to_bytes();
    Some((status, body))
}

/// The types the server offers.
fn types() -> Value {
    json!([
        {
            "name": "ticket.created",
            "description": "A ticket was opened",
            "delivery": ["poll", "webhook"],
            "inputSchema": {
                "type": "object",
                "properties": {"project": {"type": "string"}},
                "additionalProperties": false
            },
            "payloadSchema": {
                "type": "object",
                "required": ["id"],
                "properties": {"id": {"type": "integer"}}
            }
        },
        {
            "name": "build.finished",
            "delivery": ["poll"]
        }
    ])
}

/// The answer to an Events method, or `None` when `method` is not one.
pub(crate) async fn answer(
    log: &Log,
    poll_ms: u64,
    method: &str,
    params: &Value,
) -> Option<Result<Value, ErrorObject>> {
    Some(match method {
        "events/list" => Ok(json!({"resultType": "complete", "events": types()})),
        "events/poll" => poll(log, poll_ms, params),
        "events/subscribe" => subscribe(log, params).await,
        "events/unsubscribe" => {
            let (name, url) = (&params["name"], &params["delivery"]["url"]);
            let mut all = log.subscriptions.lock().expect("events lock");
            all.retain(|s| !(s.name == *name && s.url == *url));
            Ok(json!({}))
        }
        _ => return None,
    })
}

/// A webhook subscription made or refreshed. A new one is verified first: the endpoint
/// must echo a `verification` challenge, else -32027 (`challenge_failed`).
async fn subscribe(log: &Log, params: &Value) -> Result<Value, ErrorObject> {
    let invalid = |m: &str| ErrorObject::new(code::INVALID_PARAMS, m);
    let name = params["name"].as_str().unwrap_or("").to_owned();
    if name != "ticket.created" {
        let mut e = ErrorObject::new(events::code::EVENTS_NOT_FOUND, "no such event");
        e.data = Some(json!({"kind": "event"}));
        return Err(e);
    }
    let url = params["delivery"]["url"].as_str().unwrap_or("").to_owned();
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(invalid("delivery.url is not a URL"));
    }
    let secret = params["delivery"]["secret"]
        .as_str()
        .and_then(Secret::parse)
        .ok_or_else(|| invalid("delivery.secret is not whsec_ and base64 of 24 to 64 bytes"))?;
    let known = log
        .subscriptions
        .lock()
        .expect("events lock")
        .iter()
        .position(|s| s.name == name && s.url == url);
    let id = match known {
        Some(i) => {
            let mut all = log.subscriptions.lock().expect("events lock");
            all[i].secret = secret;
            all[i].id.clone()
        }
        None => {
            let id = format!(
                "sub_{}",
                log.subscriptions.lock().expect("events lock").len() + 1
            );
            let s = Subscription {
                id: id.clone(),
                name: name.clone(),
                url,
                secret,
            };
            let challenge = format!("nonce-{id}");
            let body = json!({"type": "verification", "challenge": challenge}).to_string();
            let verify_id = format!("msg_verify_{id}");
            let answered = post(&s, &verify_id, &body).await;
            let status = answered.as_ref().map_or(0, |(status, _)| *status);
            log.delivered
                .lock()
                .expect("events lock")
                .push((verify_id, status));
            let echoed = answered.and_then(|(status, body)| {
                let v: Value = serde_json::from_slice(&body).ok()?;
                ((200..300).contains(&status) && v["challenge"] == challenge).then_some(())
            });
            if echoed.is_none() {
                let mut e = ErrorObject::new(
                    events::code::EVENTS_CALLBACK_ENDPOINT,
                    "the endpoint did not answer the challenge",
                );
                e.data = Some(json!({"reason": "challenge_failed"}));
                return Err(e);
            }
            log.subscriptions.lock().expect("events lock").push(s);
            id
        }
    };
    // Replay what followed the cursor given.
    let all = log.occurrences.lock().expect("events lock").clone();
    let after: usize = params["cursor"]
        .as_str()
        .and_then(|c| c.strip_prefix('c'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(all.len());
    if let Some(s) = log.subscribed(&name).into_iter().find(|s| s.id == id) {
        for (i, o) in all.iter().enumerate().skip(after) {
            if o["name"] == name.as_str() {
                let mut o = o.clone();
                o["cursor"] = json!(format!("c{}", i + 1));
                let event_id = o["eventId"].as_str().unwrap_or("").to_owned();
                log.deliver(&s, &event_id, &o);
            }
        }
    }
    let ttl = params["ttlMs"].as_u64().unwrap_or(3_600_000);
    let mut result = json!({
        "resultType": "complete",
        "id": id,
        "refreshBefore": rfc3339_at(SystemTime::now() + Duration::from_millis(ttl)),
        "cursor": format!("c{}", all.len().max(after)),
        "truncated": false,
    });
    if let Some(status) = log.status.lock().expect("events lock").clone() {
        result["deliveryStatus"] = status;
    }
    Ok(result)
}

fn poll(log: &Log, poll_ms: u64, params: &Value) -> Result<Value, ErrorObject> {
    let name = params["name"].as_str().unwrap_or("");
    let replays = match name {
        "ticket.created" => true,
        "build.finished" => false,
        _ => {
            let mut e = ErrorObject::new(events::code::EVENTS_NOT_FOUND, "no such event");
            e.data = Some(json!({"kind": "event"}));
            return Err(e);
        }
    };
    if params["arguments"]
        .as_object()
        .is_some_and(|a| a.keys().any(|k| k != "project"))
    {
        return Err(ErrorObject::new(code::INVALID_PARAMS, "unknown argument"));
    }
    let all = log.occurrences.lock().expect("events lock");
    let max = params["maxEvents"].as_u64().unwrap_or(50) as usize;
    let mine: Vec<(usize, &Value)> = all
        .iter()
        .enumerate()
        .filter(|(_, o)| o["name"] == name)
        .map(|(i, o)| (i + 1, o))
        .collect();
    let (page, cursor, has_more): (Vec<Value>, Value, bool) = if !replays {
        // No replay: the latest occurrences, every time; the client passes over what it saw.
        let start = mine.len().saturating_sub(max);
        (
            mine[start..].iter().map(|(_, o)| (*o).clone()).collect(),
            Value::Null,
            false,
        )
    } else if let Some(c) = params["cursor"].as_str() {
        let after: usize = c
            .strip_prefix('c')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| ErrorObject::new(code::INVALID_PARAMS, "bad cursor"))?;
        let fresh: Vec<&(usize, &Value)> = mine.iter().filter(|(n, _)| *n > after).collect();
        let more = fresh.len() > max;
        let page: Vec<&(usize, &Value)> = fresh.into_iter().take(max).collect();
        let to = match (more, page.last()) {
            (true, Some((n, _))) => *n,
            _ => all.len().max(after),
        };
        let page = page.into_iter().map(|(_, o)| (*o).clone()).collect();
        (page, Value::from(format!("c{to}")), more)
    } else {
        // From now: nothing, and where now is.
        (Vec::new(), Value::from(format!("c{}", all.len())), false)
    };
    Ok(json!({
        "resultType": "complete",
        "events": page,
        "cursor": cursor,
        "truncated": false,
        "hasMore": has_more,
        "nextPollMs": poll_ms,
    }))
}

/// Now, as RFC 3339 in UTC with milliseconds.
fn now_rfc3339() -> String {
    rfc3339_at(SystemTime::now())
}

/// `at`, as RFC 3339 in UTC with milliseconds.
fn rfc3339_at(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}
