//! Drives the MCP Events binding machine with arbitrary steps: connections, listings, poll
//! pages and failures, subscribe answers, deliveries and envelopes, commits that succeed or
//! fail, pauses, and time passing. Oracles: nothing panics; the stored cursor is never past
//! 4 KiB; every record handed over is valid JSON with the binding's key; a refused binding
//! asks for nothing.

use std::time::{Duration, Instant};

use mcp_events::binding::{
    Action, Batch, Binding, Callback, Config, Delivery, Failure, Listing, Pause, Rate,
};
use mcp_events::webhook::Secret;
use mcp_wire::events::{
    DeliveryMode, EventOccurrence, EventType, PollResult, SubscribeEventsResult, WebhookBody,
};
use mcp_wire::{ErrorObject, RawJson};

fn occurrence(id: u8, data: u8) -> EventOccurrence {
    let text = match data % 4 {
        0 => "{}".to_owned(),
        1 => format!(r#"{{"id":{id}}}"#),
        2 => "[1]".to_owned(),
        _ => format!(r#"{{"x":"{}"}}"#, "y".repeat(usize::from(data) * 40)),
    };
    let mut o = EventOccurrence::new(
        "e".repeat(usize::from(id % 3) * 600 + 1) + &id.to_string(),
        "t",
        if data.is_multiple_of(7) {
            "nope"
        } else {
            "2026-11-30T06:00:00Z"
        },
        RawJson::from_text(&text).expect("JSON"),
    );
    o.cursor = match data % 5 {
        0 => None,
        1 => Some(None),
        2 => Some(Some("c".repeat(4097))),
        _ => Some(Some(format!("c{id}"))),
    };
    o
}

fn check(batch: &Batch, b: &Binding) {
    for r in &batch.records {
        let v: serde_json::Value = serde_json::from_slice(&r.bytes).expect("a record is JSON");
        assert_eq!(v["data"]["subscription"], b.config().key.as_str());
    }
    assert!(b.cursor().is_none_or(|c| c.len() <= 4096));
}

/// The `binding` target: see the module docs.
pub fn binding(data: &[u8]) {
    let start = Instant::now();
    let mut now = start;
    let mut config = Config::new("s", "t", "in");
    config.delivery = vec![DeliveryMode::Webhook, DeliveryMode::Poll];
    config.callback = Some(Callback {
        url: "https://a/hooks/_mcp/b".into(),
        secret: Secret::from_bytes(&[1; 32]).expect("a secret"),
    });
    config.limits.occurrence_max = 2048;
    config.rate = Some(Rate {
        max: 5,
        per: Duration::from_secs(10),
    });
    let mut b = Binding::new(config, None);
    let types = [EventType::new(
        "t",
        &[DeliveryMode::Webhook, DeliveryMode::Poll],
    )];
    for step in data.chunks(3) {
        let [op, x, y] = [
            step[0],
            *step.get(1).unwrap_or(&0),
            *step.get(2).unwrap_or(&0),
        ];
        match op % 12 {
            0 => b.on_connection(!x.is_multiple_of(4), !y.is_multiple_of(4)),
            1 => b.on_listing(
                match x % 4 {
                    0 => Listing::MethodNotFound,
                    1 => Listing::TooLarge,
                    2 => Listing::Types(&[]),
                    _ => Listing::Types(&types),
                },
                now,
            ),
            2 => {
                let refused = b.refusal().is_some();
                let action = b.poll_action(now);
                assert!(
                    !(refused && action.is_some()),
                    "a refused binding sends nothing"
                );
                if let Some(Action::Poll(_)) = action {
                    let mut page = PollResult::new(
                        (0..x % 6)
                            .map(|i| occurrence(y.wrapping_add(i), x ^ i))
                            .collect(),
                        (!y.is_multiple_of(3)).then(|| format!("p{y}")),
                    );
                    page.has_more = x.is_multiple_of(2);
                    page.truncated = y.is_multiple_of(5);
                    page.next_poll_ms = Some(u64::from(y) * 100);
                    let batch = b.on_poll(Ok(page), now, 0, u32::from(x) << 24);
                    check(&batch, &b);
                    b.on_committed(!y.is_multiple_of(9), now);
                }
                if let Some(Action::Subscribe(_)) = action {
                    let answer: Result<SubscribeEventsResult, Failure> = if x.is_multiple_of(3) {
                        let mut e = ErrorObject::new(-32020 - i64::from(y % 8), "no");
                        e.data = Some(serde_json::json!({"reason": "schema_changed"}));
                        Err(Failure::Rpc(e))
                    } else {
                        Ok(serde_json::from_value(serde_json::json!({
                            "id": "sub", "refreshBefore": if y.is_multiple_of(2) { serde_json::Value::Null } else { "2026-11-30T07:00:00Z".into() },
                            "cursor": format!("c{x}"), "truncated": y.is_multiple_of(4),
                            "deliveryStatus": {"active": !x.is_multiple_of(5), "throttled": y.is_multiple_of(3)}
                        })).expect("a result"))
                    };
                    let batch = b.on_subscribed(answer, now, 1_796_018_400_000, u32::from(y));
                    check(&batch, &b);
                    b.on_committed(!x.is_multiple_of(7), now);
                }
            }
            3 => {
                let failure = match x % 4 {
                    0 => Failure::Timeout,
                    1 => Failure::Status(503),
                    2 => Failure::Transport("broken".into()),
                    _ => Failure::Rpc(ErrorObject::new(-32000 - i64::from(y % 30), "e")),
                };
                match b.poll_action(now) {
                    Some(Action::Poll(_)) => {
                        let batch = b.on_poll(Err(failure), now, 0, u32::from(y));
                        assert!(batch.records.is_empty(), "a failed poll hands nothing over");
                    }
                    Some(Action::Subscribe(_)) => {
                        let _ = b.on_subscribed(Err(failure), now, 0, u32::from(y));
                    }
                    _ => {}
                }
            }
            4 | 5 => {
                let body = match y % 4 {
                    0 => WebhookBody::Gap {
                        cursor: Some(format!("g{x}")),
                    },
                    1 => WebhookBody::Terminated {
                        error: ErrorObject::new(-32020 - i64::from(x % 8), "t"),
                    },
                    _ => WebhookBody::Occurrence(occurrence(x, y)),
                };
                if let Delivery::Commit(batch) =
                    b.on_delivery(body, &format!("msg_{y}"), now, 0, u32::from(x))
                {
                    check(&batch, &b);
                    b.on_delivered(&batch, !x.is_multiple_of(5), now);
                }
            }
            6 => b.pause(
                if x.is_multiple_of(2) {
                    Pause::Pressure
                } else {
                    Pause::Rate
                },
                "p",
            ),
            7 => b.resume(
                if x.is_multiple_of(2) {
                    Pause::Pressure
                } else {
                    Pause::Rate
                },
                now,
            ),
            8 => b.on_committed(x.is_multiple_of(2), now),
            _ => {
                now += match b.poll_timeout() {
                    Some(at) if x.is_multiple_of(2) => at.saturating_duration_since(now),
                    _ => Duration::from_millis(u64::from(x) * u64::from(y) * 10),
                };
            }
        }
        while b.poll_log().is_some() {}
        assert!(b.cursor().is_none_or(|c| c.len() <= 4096));
    }
}
