//! The binding machine step by step, in virtual time: every refusal, the poll schedule, the
//! retry schedules, intake (bounds, duplicates, schemas, cursors, gaps) and pauses.

use std::time::{Duration, Instant};

use mcp_events::binding::{
    Action, Batch, Binding, Config, Failure, Gap, Listing, Log, ModeChange, Outcome, Pause,
    Refusal, Rejection,
};
use mcp_wire::events::{DeliveryMode, EventOccurrence, EventType, PollResult};
use mcp_wire::{ErrorObject, RawJson};
use serde_json::{Value, json};

/// `random` that moves a wait by (almost) nothing.
const MID: u32 = u32::MAX / 2;
/// 1.5 s after the occurrences' timestamp, 2026-11-30T06:00:00Z.
const WALL: i64 = 1_796_018_400_000 + 1500;

fn ty(delivery: &[DeliveryMode]) -> EventType {
    EventType::new("ticket.created", delivery)
}

fn armed(config: Config, cursor: Option<&str>) -> (Binding, Instant) {
    let now = Instant::now();
    let mut b = Binding::new(config, cursor.map(str::to_owned));
    b.on_connection(true, true);
    b.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), now);
    (b, now)
}

fn logs(b: &mut Binding) -> Vec<Log> {
    std::iter::from_fn(|| b.poll_log()).collect()
}

fn poll(b: &mut Binding, now: Instant) -> Option<String> {
    match b.poll_action(now) {
        Some(Action::Poll(p)) => {
            assert_eq!(p.max_events, Some(50));
            Some(p.cursor.unwrap_or_else(|| "<null>".into()))
        }
        other => panic!("not a poll: {other:?}"),
    }
}

fn occurrence(id: &str, data: Value) -> EventOccurrence {
    EventOccurrence::new(
        id,
        "ticket.created",
        "2026-11-30T06:00:00Z",
        RawJson::from_value(&data).unwrap(),
    )
}

fn page(ids: &[&str], cursor: Option<&str>) -> PollResult {
    PollResult::new(
        ids.iter()
            .map(|id| occurrence(id, json!({"id": id})))
            .collect(),
        cursor.map(str::to_owned),
    )
}

fn rpc(code: i64, data: Option<Value>) -> Failure {
    let mut e = ErrorObject::new(code, "no\u{7}pe");
    e.data = data;
    Failure::Rpc(e)
}

fn ids(batch: &Batch) -> Vec<&str> {
    batch.records.iter().map(|r| r.event_id.as_str()).collect()
}

fn near(d: Duration, expected: Duration) {
    let diff = d.abs_diff(expected);
    assert!(diff < Duration::from_millis(1), "{d:?} is not {expected:?}");
}

#[test]
fn refusals_send_nothing_are_logged_once_and_a_listing_lifts_them() {
    let now = Instant::now();
    let mut b = Binding::new(Config::new("s", "ticket.created", "in"), None);
    b.on_connection(false, true);
    assert_eq!(b.refusal(), Some(Refusal::Revision));
    b.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), now);
    assert_eq!(b.poll_action(now), None, "no events/* at 2025-11-25");
    b.on_connection(true, false);
    assert_eq!(b.refusal(), Some(Refusal::NoCapability));
    assert_eq!(b.poll_action(now), None);

    b.on_connection(true, true);
    let cases: [(Listing<'_>, Refusal); 5] = [
        (Listing::MethodNotFound, Refusal::MethodNotFound),
        (Listing::TooLarge, Refusal::ListTooLarge),
        (Listing::Types(&[]), Refusal::UnknownEvent),
        (
            Listing::Types(&[ty(&[DeliveryMode::Push, DeliveryMode::Webhook])]),
            Refusal::NoCommonMode,
        ),
        (
            Listing::Types(&[ty(&[DeliveryMode::Poll])]),
            Refusal::Revision,
        ),
    ];
    for (listing, reason) in &cases[..4] {
        b.on_listing(*listing, now);
        assert_eq!(b.refusal(), Some(*reason));
        assert_eq!(b.poll_action(now), None);
        b.on_listing(*listing, now);
    }
    let reasons: Vec<&str> = logs(&mut b)
        .into_iter()
        .map(|l| match l {
            Log::Refused { reason, .. } => reason.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "revision",
            "no_capability",
            "method_not_found",
            "list_too_large",
            "unknown_event",
            "no_common_mode"
        ],
        "each once, though each listing came twice"
    );
    b.on_listing(cases[4].0, now);
    assert_eq!(b.refusal(), None);
    assert_eq!(poll(&mut b, now).as_deref(), Some("<null>"));
}

#[test]
fn arguments_are_checked_against_the_input_schema_before_anything_is_sent() {
    let now = Instant::now();
    let mut config = Config::new("s", "ticket.created", "in");
    config.arguments = json!({"project": 7}).as_object().unwrap().clone();
    let mut b = Binding::new(config, None);
    b.on_connection(true, true);
    let mut t = ty(&[DeliveryMode::Poll]);
    t.input_schema = Some(
        RawJson::from_value(&json!({
            "type": "object",
            "required": ["project"],
            "properties": {"project": {"type": "string"}}
        }))
        .unwrap(),
    );
    b.on_listing(Listing::Types(std::slice::from_ref(&t)), now);
    assert_eq!(b.refusal(), Some(Refusal::InvalidArguments));
    assert_eq!(b.poll_action(now), None);
    let Some(Log::Refused { detail, .. }) = b.poll_log() else {
        panic!()
    };
    assert!(detail.contains("string"), "{detail}");

    // The server's schema changes to one they pass: the next listing lifts the refusal.
    t.input_schema = Some(RawJson::from_value(&json!({"type": "object"})).unwrap());
    b.on_listing(Listing::Types(&[t]), now);
    let Some(Action::Poll(p)) = b.poll_action(now) else {
        panic!()
    };
    assert_eq!(p.arguments["project"], 7);
}

#[test]
fn the_mode_is_the_first_listed_that_the_type_offers_and_the_client_can_use() {
    let now = Instant::now();
    let mut config = Config::new("s", "ticket.created", "in");
    config.delivery = vec![DeliveryMode::Webhook, DeliveryMode::Poll];
    let mut b = Binding::new(config, None);
    b.on_connection(true, true);
    b.on_listing(
        Listing::Types(&[ty(&[DeliveryMode::Webhook, DeliveryMode::Poll])]),
        now,
    );
    assert_eq!(b.mode(), Some(DeliveryMode::Poll));

    // With a callback, webhook is usable; push, listed first, is not one the crate speaks.
    let mut config = Config::new("s", "ticket.created", "in");
    config.delivery = vec![
        DeliveryMode::Push,
        DeliveryMode::Webhook,
        DeliveryMode::Poll,
    ];
    config.callback = Some(mcp_events::binding::Callback {
        url: "https://agent.example.com/hooks/_mcp/b1".into(),
        secret: mcp_events::webhook::Secret::from_bytes(&[9; 32]).unwrap(),
    });
    let mut b = Binding::new(config, None);
    b.on_connection(true, true);
    let all = [
        DeliveryMode::Push,
        DeliveryMode::Webhook,
        DeliveryMode::Poll,
    ];
    b.on_listing(Listing::Types(&[ty(&all)]), now);
    assert_eq!(b.mode(), Some(DeliveryMode::Webhook));
    // The type's own list decides too: a type that offers only poll is polled.
    let mut b2 = Binding::new(b.config().clone(), None);
    b2.on_connection(true, true);
    b2.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), now);
    assert_eq!(b2.mode(), Some(DeliveryMode::Poll));
}

#[test]
fn polls_wait_what_the_server_says_and_burst_while_it_has_more() {
    let (mut b, t0) = armed(Config::new("s", "ticket.created", "in"), Some("c0"));
    assert_eq!(poll(&mut b, t0).as_deref(), Some("c0"));
    assert_eq!(b.poll_action(t0), None, "one request at a time");
    let batch = b.on_poll(Ok(page(&[], Some("c1"))), t0, WALL, MID);
    assert_eq!(batch.cursor.as_deref(), Some("c1"));
    assert_eq!(b.poll_action(t0), None, "nothing before the commit");
    b.on_committed(true, t0);
    assert_eq!(
        logs(&mut b),
        [Log::Armed {
            mode: DeliveryMode::Poll,
            cursor_present: true
        }]
    );
    near(b.poll_timeout().unwrap() - t0, Duration::from_secs(30));

    for (next_poll_ms, wait) in [
        (Some(10), Duration::from_secs(1)),
        (Some(5000), Duration::from_secs(5)),
        (Some(20 * 60 * 1000), Duration::from_secs(15 * 60)),
    ] {
        let now = b.poll_timeout().unwrap();
        assert_eq!(b.poll_action(now - Duration::from_millis(1)), None);
        assert_eq!(poll(&mut b, now).as_deref(), Some("c1"));
        let mut p = page(&[], Some("c1"));
        p.next_poll_ms = next_poll_ms;
        let _ = b.on_poll(Ok(p), now, WALL, MID);
        b.on_committed(true, now);
        near(b.poll_timeout().unwrap() - now, wait);
    }
    // ±10%.
    let now = b.poll_timeout().unwrap();
    poll(&mut b, now);
    let _ = b.on_poll(Ok(page(&[], Some("c1"))), now, WALL, 0);
    b.on_committed(true, now);
    near(b.poll_timeout().unwrap() - now, Duration::from_secs(27));

    // hasMore with something new: at once, ten times in a row, then the wait.
    let mut now = b.poll_timeout().unwrap();
    for i in 0..11 {
        poll(&mut b, now);
        let id = format!("e{i}");
        let mut p = page(&[&id], Some(&format!("c{}", i + 2)));
        p.has_more = true;
        let batch = b.on_poll(Ok(p), now, WALL, MID);
        assert_eq!(ids(&batch), [id.as_str()]);
        b.on_committed(true, now);
        let wait = b.poll_timeout().unwrap() - now;
        match i {
            0..10 => assert_eq!(wait, Duration::ZERO, "poll {i}"),
            _ => near(wait, Duration::from_secs(30)),
        }
        now += wait;
    }
    // hasMore, but only what was seen: no burst.
    poll(&mut b, now);
    let mut p = page(&["e3"], Some("c99"));
    p.has_more = true;
    assert!(b.on_poll(Ok(p), now, WALL, MID).records.is_empty());
    b.on_committed(true, now);
    near(b.poll_timeout().unwrap() - now, Duration::from_secs(30));
    assert_eq!(b.cursor(), Some("c99"));
    assert_eq!(b.stats().appended, 11);
    assert_eq!(b.stats().duplicate, 1);
}

#[test]
fn a_binding_keeps_the_limits_it_is_given() {
    let mut config = Config::new("s", "ticket.created", "in");
    let limits = &mut config.limits;
    limits.poll_max_events = 5;
    limits.poll_burst_max = 2;
    limits.poll_default = Duration::from_secs(7);
    limits.jitter_percent = 0;
    limits.retry_first = Duration::from_secs(3);
    limits.event_id_max = 4;
    let (mut b, mut now) = armed(config, None);
    let Some(Action::Poll(p)) = b.poll_action(now) else {
        panic!("not a poll")
    };
    assert_eq!(p.max_events, Some(5));
    // hasMore with something new: at once, twice in a row, then the wait.
    for (i, id) in ["e1", "e2", "e3"].into_iter().enumerate() {
        let mut p = page(&[id, "long_id"], Some("c"));
        p.has_more = true;
        let batch = b.on_poll(Ok(p), now, WALL, 0);
        assert_eq!(ids(&batch), [id], "an eventId past 4 bytes is rejected");
        b.on_committed(true, now);
        let wait = b.poll_timeout().unwrap() - now;
        match i {
            0..2 => assert_eq!(wait, Duration::ZERO, "poll {i}"),
            _ => assert_eq!(wait, Duration::from_secs(7)),
        }
        now += wait;
        assert!(b.poll_action(now).is_some());
    }
    let _ = b.on_poll(Err(Failure::Status(503)), now, WALL, 0);
    assert_eq!(b.poll_timeout().unwrap() - now, Duration::from_secs(3));
}

#[test]
fn failed_polls_retry_doubling_to_five_minutes_or_fifteen_when_exhausted() {
    let (mut b, mut now) = armed(Config::new("s", "ticket.created", "in"), None);
    let mut waits = Vec::new();
    for _ in 0..10 {
        poll(&mut b, now);
        let _ = b.on_poll(Err(Failure::Status(503)), now, WALL, MID);
        let wait = b.poll_timeout().unwrap() - now;
        waits.push(wait.as_secs_f64().round() as u64);
        now += wait;
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
    let Some(Log::PollFailed {
        code,
        err,
        retry_ms,
    }) = b.poll_log()
    else {
        panic!()
    };
    assert_eq!((code, err.as_str()), (None, "HTTP 503"));
    assert!((999..=1000).contains(&retry_ms), "{retry_ms}");

    // A success starts the schedule again; then -32025 goes on to 15 minutes.
    poll(&mut b, now);
    let _ = b.on_poll(Ok(page(&[], Some("c"))), now, WALL, MID);
    b.on_committed(true, now);
    now = b.poll_timeout().unwrap();
    let mut waits = Vec::new();
    for _ in 0..12 {
        poll(&mut b, now);
        let _ = b.on_poll(Err(rpc(-32025, None)), now, WALL, MID);
        let wait = b.poll_timeout().unwrap() - now;
        waits.push(wait.as_secs_f64().round() as u64);
        now += wait;
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
    let failures = logs(&mut b)
        .into_iter()
        .filter(|l| {
            matches!(
                l,
                Log::PollFailed {
                    code: Some(-32025),
                    ..
                }
            )
        })
        .count();
    assert_eq!(failures, 12);
    // Unanswered (HTTP 503) are failed; answered with -32025, refused.
    assert_eq!(b.stats().requests[&("events/poll", Outcome::Failed)], 10);
    assert_eq!(b.stats().requests[&("events/poll", Outcome::Refused)], 12);
    assert_eq!(b.stats().requests[&("events/poll", Outcome::Ok)], 1);
}

#[test]
fn errors_that_will_not_pass_refuse_and_a_changed_type_is_listed_again() {
    for (code, data, reason) in [
        (-32024, None, Refusal::Forbidden),
        (-32602, None, Refusal::InvalidArguments),
        (-32601, None, Refusal::MethodNotFound),
        (
            -32026,
            Some(json!({"feature": "deliveryMode", "value": "poll"})),
            Refusal::NotSupported,
        ),
    ] {
        let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), Some("c"));
        poll(&mut b, now);
        let _ = b.on_poll(Err(rpc(code, data)), now, WALL, MID);
        assert_eq!(b.refusal(), Some(reason), "{code}");
        assert_eq!(b.poll_action(now + Duration::from_secs(3600)), None);
        assert_eq!(b.poll_timeout(), None);
        let Some(Log::Refused { detail, .. }) = b.poll_log() else {
            panic!()
        };
        assert_eq!(detail, "nope", "control characters stripped");
        assert_eq!(b.cursor(), Some("c"), "the cursor is kept");
        assert_eq!(b.stats().requests[&("events/poll", Outcome::Refused)], 1);
    }
    let changed = json!({"feature": "payloadSchema", "reason": "schema_changed"});
    for (code, data, gap) in [(-32023, None, false), (-32026, Some(changed), true)] {
        let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), Some("c"));
        poll(&mut b, now);
        let _ = b.on_poll(Err(rpc(code, data)), now, WALL, MID);
        assert_eq!(b.poll_action(now), Some(Action::Relist));
        assert_eq!(b.poll_action(now), None, "waits for the listing");
        assert_eq!(
            logs(&mut b).contains(&Log::Gap {
                cause: Gap::SchemaChanged
            }),
            gap
        );
        b.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), now);
        assert_eq!(poll(&mut b, now).as_deref(), Some("c"));
    }
}

#[test]
fn intake_rejects_past_the_bounds_passes_duplicates_over_and_marks_schema_mismatches() {
    let mut config = Config::new("s", "ticket.created", "in");
    config.limits.occurrence_max = 300;
    let (mut b, now) = armed(config, None);
    let mut t = ty(&[DeliveryMode::Poll]);
    t.payload_schema =
        Some(RawJson::from_value(&json!({"type": "object", "required": ["id"]})).unwrap());
    b.on_listing(Listing::Types(&[t]), now);
    poll(&mut b, now);
    let big = occurrence("big", json!({"id": "x".repeat(300)}));
    let long_id = occurrence(&"i".repeat(1025), json!({"id": 1}));
    let mut not_object = occurrence("arr", json!({}));
    not_object.data = RawJson::from_text("[1]").unwrap();
    let mismatch = occurrence("odd", json!({"other": 1}));
    let events = vec![
        occurrence("a", json!({"id": "a"})),
        big,
        long_id,
        not_object,
        occurrence("a", json!({"id": "a"})),
        mismatch,
    ];
    let batch = b.on_poll(
        Ok(PollResult::new(events, Some("c1".into()))),
        now,
        WALL,
        MID,
    );
    assert_eq!(ids(&batch), ["a", "odd"]);
    let record: Value = serde_json::from_slice(&batch.records[1].bytes).unwrap();
    assert_eq!(record["data"]["schema_ok"], false);
    let key = mcp_events::binding::key_of("s", "ticket.created", "in", &Default::default());
    assert_eq!(record["data"]["subscription"], key.as_str());
    assert!(key.starts_with('b') && key.len() == 17, "{key}");
    assert_eq!(record["id"], "mcp/s/ticket.created/odd");
    let first: Value = serde_json::from_slice(&batch.records[0].bytes).unwrap();
    assert_eq!(first["data"]["schema_ok"], true);
    let logged = logs(&mut b);
    let rejected: Vec<Rejection> = logged
        .iter()
        .filter_map(|l| match l {
            Log::Rejected { cause, .. } => Some(*cause),
            _ => None,
        })
        .collect();
    assert_eq!(
        rejected,
        [
            Rejection::Oversize,
            Rejection::Oversize,
            Rejection::Malformed
        ]
    );
    assert!(logged.contains(&Log::SchemaMismatch {
        event_id: "odd".into()
    }));
    b.on_committed(true, now);
    let s = b.stats();
    assert_eq!(
        (s.appended, s.duplicate, s.rejected, s.schema_mismatch),
        (2, 1, 3, 1)
    );
    assert_eq!(b.cursor(), Some("c1"), "the cursor moves past the rejected");
    assert_eq!(s.lag_ms, Some(1500));
}

#[test]
fn gaps_are_reported_by_their_cause() {
    let (mut b, mut now) = armed(Config::new("s", "ticket.created", "in"), Some("c"));
    for _ in 0..3 {
        poll(&mut b, now);
        let _ = b.on_poll(Ok(page(&[], None)), now, WALL, MID);
        b.on_committed(true, now);
        now = b.poll_timeout().unwrap();
    }
    assert_eq!(b.cursor(), None, "no replay: poll with null");
    poll(&mut b, now);
    let mut p = page(&[], Some(&"c".repeat(4097)));
    p.truncated = true;
    let _ = b.on_poll(Ok(p), now, WALL, MID);
    b.on_committed(true, now);
    let gaps: Vec<Log> = logs(&mut b)
        .into_iter()
        .filter(|l| matches!(l, Log::Gap { .. } | Log::Rejected { .. }))
        .collect();
    assert_eq!(
        gaps,
        [
            Log::Gap {
                cause: Gap::NoReplay
            },
            Log::Gap {
                cause: Gap::Truncated
            },
        ],
        "no_replay once; a cursor past 4 KiB is not stored, and no occurrence is rejected"
    );
    assert_eq!(b.cursor(), None);
    assert_eq!(b.stats().gaps[&Gap::NoReplay], 1);
    assert_eq!(b.stats().gaps[&Gap::Truncated], 1);

    // A cursor of exactly 4 KiB is stored.
    now = b.poll_timeout().unwrap();
    poll(&mut b, now);
    let _ = b.on_poll(Ok(page(&[], Some(&"c".repeat(4096)))), now, WALL, MID);
    b.on_committed(true, now);
    assert_eq!(b.cursor().map(str::len), Some(4096));

    // An occurrence that came with a cursor past 4 KiB is appended; only the cursor is not
    // kept.
    now = b.poll_timeout().unwrap();
    poll(&mut b, now);
    let batch = b.on_poll(Ok(page(&["a"], Some(&"c".repeat(4097)))), now, WALL, MID);
    assert_eq!(ids(&batch), ["a"]);
    assert_eq!(batch.cursor, None);
    b.on_committed(true, now);
    assert_eq!((b.stats().appended, b.stats().rejected), (1, 0));
}

#[test]
fn a_store_that_fails_pauses_intake_with_the_cursor_kept() {
    let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), Some("c0"));
    poll(&mut b, now);
    let batch = b.on_poll(Ok(page(&["a", "b"], Some("c1"))), now, WALL, MID);
    assert_eq!(batch.records.len(), 2);
    b.on_committed(false, now);
    assert_eq!(b.cursor(), Some("c0"));
    assert_eq!(b.poll_action(now), None);
    let resume_at = b.poll_timeout().unwrap();
    assert_eq!(resume_at - now, Duration::from_secs(1));
    assert_eq!(
        logs(&mut b).last(),
        Some(&Log::Paused {
            cause: Pause::StoreDegraded,
            detail: "the store did not take the batch".into()
        })
    );
    // Tried again: the same page, not taken for duplicates; a store failing still is not
    // logged again.
    assert_eq!(poll(&mut b, resume_at).as_deref(), Some("c0"));
    let _ = b.on_poll(Ok(page(&["a", "b"], Some("c1"))), resume_at, WALL, MID);
    b.on_committed(false, resume_at);
    assert_eq!(logs(&mut b), []);
    let resume_at = b.poll_timeout().unwrap();
    assert_eq!(poll(&mut b, resume_at).as_deref(), Some("c0"));
    assert_eq!(b.poll_log(), None, "resumed once the store takes a commit");
    let again = b.on_poll(Ok(page(&["a", "b"], Some("c1"))), resume_at, WALL, MID);
    assert_eq!(ids(&again), ["a", "b"]);
    b.on_committed(true, resume_at);
    assert_eq!(
        b.poll_log(),
        Some(Log::Resumed {
            cause: Pause::StoreDegraded
        })
    );
    assert_eq!(b.cursor(), Some("c1"));

    // Pressure holds intake until lifted.
    b.pause(Pause::Pressure, "the queue is full");
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.poll_action(resume_at + Duration::from_secs(3600)), None);
    let later = resume_at + Duration::from_secs(5);
    b.resume(Pause::Pressure, later);
    assert_eq!(poll(&mut b, later).as_deref(), Some("c1"));
    let paused: Vec<Log> = logs(&mut b);
    assert_eq!(
        paused,
        [
            Log::Paused {
                cause: Pause::Pressure,
                detail: "the queue is full".into()
            },
            Log::Resumed {
                cause: Pause::Pressure
            }
        ]
    );

    // A pause asked for while a batch is being committed lets the commit finish.
    let batch = b.on_poll(Ok(page(&["c"], Some("c2"))), later, WALL, MID);
    assert_eq!(ids(&batch), ["c"]);
    b.pause(Pause::Pressure, "the queue is full");
    b.on_committed(true, later);
    assert_eq!(b.cursor(), Some("c2"));
}

#[test]
fn the_dedup_window_spans_pages_and_expires() {
    let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), None);
    poll(&mut b, now);
    let _ = b.on_poll(Ok(page(&["a"], Some("c1"))), now, WALL, MID);
    b.on_committed(true, now);
    let later = now + Duration::from_secs(34 * 60);
    poll(&mut b, later);
    assert!(
        b.on_poll(Ok(page(&["a"], Some("c2"))), later, WALL, MID)
            .records
            .is_empty()
    );
    b.on_committed(true, later);
    let expired = now + Duration::from_secs(35 * 60);
    poll(&mut b, expired);
    let batch = b.on_poll(Ok(page(&["a"], Some("c3"))), expired, WALL, MID);
    assert_eq!(ids(&batch), ["a"], "seen 35 minutes ago: out of the window");
}

/// A fresh `webhook-id` for a delivery.
fn next_id() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!(
        "msg_{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

mod webhook {
    use mcp_events::binding::{Callback, Delivery};
    use mcp_events::webhook::Secret;
    use mcp_wire::events::{DeliveryStatus, SubscribeEventsResult, WebhookBody};

    use super::*;

    const URL: &str = "https://agent.example.com/hooks/_mcp/b1";

    fn config(delivery: &[DeliveryMode]) -> Config {
        let mut c = Config::new("s", "ticket.created", "in");
        c.delivery = delivery.to_vec();
        c.callback = Some(Callback {
            url: URL.into(),
            secret: Secret::from_bytes(&[9; 32]).unwrap(),
        });
        c
    }

    fn both() -> EventType {
        ty(&[DeliveryMode::Webhook, DeliveryMode::Poll])
    }

    fn arming(delivery: &[DeliveryMode], cursor: Option<&str>) -> (Binding, Instant) {
        let now = Instant::now();
        let mut b = Binding::new(config(delivery), cursor.map(str::to_owned));
        b.on_connection(true, true);
        b.on_listing(Listing::Types(&[both()]), now);
        (b, now)
    }

    fn subscribe(b: &mut Binding, now: Instant) -> mcp_wire::events::SubscribeEventsParams {
        match b.poll_action(now) {
            Some(Action::Subscribe(p)) => p,
            other => panic!("not a subscribe: {other:?}"),
        }
    }

    fn granted(
        id: &str,
        refresh_in_ms: Option<i64>,
        cursor: Option<&str>,
    ) -> SubscribeEventsResult {
        let mut r: SubscribeEventsResult = serde_json::from_value(json!({
            "id": id,
            "refreshBefore": null,
            "cursor": cursor,
        }))
        .unwrap();
        r.refresh_before = refresh_in_ms.map(|ms| rfc3339(WALL + ms));
        r
    }

    fn rfc3339(ms: i64) -> String {
        // WALL is 2026-11-30T06:00:01.500Z.
        let from = ms - (WALL - 1500);
        assert!((0..86_400_000).contains(&from));
        let secs = from / 1000;
        format!(
            "2026-11-30T{:02}:{:02}:{:02}.{:03}Z",
            6 + secs / 3600,
            secs / 60 % 60,
            secs % 60,
            from % 1000
        )
    }

    fn armed_webhook(cursor: Option<&str>) -> (Binding, Instant) {
        let (mut b, now) = arming(&[DeliveryMode::Webhook, DeliveryMode::Poll], cursor);
        subscribe(&mut b, now);
        let _ = b.on_subscribed(
            Ok(granted("sub_1", Some(3_600_000), cursor)),
            now,
            WALL,
            MID,
        );
        b.on_committed(true, now);
        logs(&mut b);
        (b, now)
    }

    /// A delivery the store does not take pauses intake (`store_degraded`), logged once
    /// however many fail, and the first one it takes after them resumes it, as for polls.
    #[test]
    fn a_store_that_fails_deliveries_is_logged_paused_then_resumed_once() {
        let (mut b, now) = armed_webhook(Some("c0"));
        let deliver = |b: &mut Binding, id: &str, committed: bool| {
            let Delivery::Commit(batch) = b.on_delivery(
                occurrence_body(id, None),
                &format!("m_{id}"),
                now,
                WALL,
                MID,
            ) else {
                panic!("{id} is new")
            };
            b.on_delivered(&batch, committed, now);
        };
        deliver(&mut b, "e1", false);
        deliver(&mut b, "e1", false);
        assert_eq!(
            logs(&mut b),
            [Log::Paused {
                cause: Pause::StoreDegraded,
                detail: "the store did not take the batch".into()
            }]
        );
        deliver(&mut b, "e1", true);
        deliver(&mut b, "e2", true);
        assert_eq!(
            logs(&mut b),
            [Log::Resumed {
                cause: Pause::StoreDegraded
            }]
        );
        assert_eq!(b.stats().appended, 2);
    }

    /// A full queue of deliveries pauses intake for pressure, logged once however often it
    /// is full, and its room again resumes it, once; the lease's schedule is not touched.
    #[test]
    fn pressure_is_logged_paused_then_resumed_once_each_way() {
        let (mut b, now) = armed_webhook(Some("c0"));
        let refresh = b.poll_timeout();
        b.on_pressure(true);
        b.on_pressure(true);
        assert_eq!(
            logs(&mut b),
            [Log::Paused {
                cause: Pause::Pressure,
                detail: "the queue of deliveries is full".into()
            }]
        );
        assert_eq!(b.poll_timeout(), refresh, "the lease is refreshed on time");
        assert!(matches!(
            b.on_delivery(occurrence_body("e1", None), "msg_1", now, WALL, MID),
            Delivery::Commit(_)
        ));
        b.on_pressure(false);
        b.on_pressure(false);
        assert_eq!(
            logs(&mut b),
            [Log::Resumed {
                cause: Pause::Pressure
            }]
        );
    }

    fn occurrence_body(id: &str, cursor: Option<&str>) -> WebhookBody {
        let mut o = occurrence(id, json!({"id": id}));
        o.cursor = cursor.map(|c| Some(c.to_owned()));
        WebhookBody::Occurrence(o)
    }

    #[test]
    fn a_subscription_is_armed_with_the_callback_and_refreshed_at_80_percent_of_its_lease() {
        let (mut b, now) = arming(&[DeliveryMode::Webhook, DeliveryMode::Poll], Some("c0"));
        assert_eq!(b.mode(), Some(DeliveryMode::Webhook));
        let p = subscribe(&mut b, now);
        assert_eq!(p.delivery.url, URL);
        assert!(p.delivery.secret.as_deref().unwrap().starts_with("whsec_"));
        assert_eq!(
            (p.cursor.as_deref(), p.ttl_ms),
            (Some("c0"), Some(3_600_000))
        );
        let batch = b.on_subscribed(
            Ok(granted("sub_1", Some(600_000), Some("c1"))),
            now,
            WALL,
            MID,
        );
        assert_eq!(batch.cursor.as_deref(), Some("c1"));
        b.on_committed(true, now);
        assert_eq!(b.subscription(), Some("sub_1"));
        assert_eq!(b.cursor(), Some("c1"));
        assert_eq!(b.poll_timeout(), Some(now + Duration::from_secs(480)));
        assert_eq!(
            logs(&mut b),
            [Log::Armed {
                mode: DeliveryMode::Webhook,
                cursor_present: true
            }]
        );
        // The refresh: the same subscription from the stored cursor; no expiry granted → 80%
        // of the hour asked for.
        let at = now + Duration::from_secs(480);
        assert_eq!(subscribe(&mut b, at).cursor.as_deref(), Some("c1"));
        let _ = b.on_subscribed(Ok(granted("sub_1", None, Some("c1"))), at, WALL, MID);
        b.on_committed(true, at);
        assert_eq!(b.poll_timeout(), Some(at + Duration::from_secs(2880)));
        assert!(logs(&mut b).is_empty(), "armed is logged once");
        assert_eq!(b.stats().requests[&("events/subscribe", Outcome::Ok)], 2);
    }

    #[test]
    fn without_a_callback_webhook_is_not_a_mode_the_client_can_use() {
        let now = Instant::now();
        let mut c = config(&[DeliveryMode::Webhook, DeliveryMode::Poll]);
        c.callback = None;
        let mut b = Binding::new(c.clone(), None);
        b.on_connection(true, true);
        b.on_listing(Listing::Types(&[both()]), now);
        assert_eq!(b.mode(), Some(DeliveryMode::Poll));
        c.delivery = vec![DeliveryMode::Webhook];
        let mut b = Binding::new(c, None);
        b.on_connection(true, true);
        b.on_listing(Listing::Types(&[both()]), now);
        assert_eq!(b.refusal(), Some(Refusal::NoCommonMode));
    }

    #[test]
    fn deliveries_are_taken_once_and_answered_by_what_became_of_them() {
        let now = Instant::now();
        let mut unarmed = Binding::new(config(&[DeliveryMode::Webhook]), None);
        assert_eq!(
            unarmed.on_delivery(occurrence_body("e1", None), &next_id(), now, WALL, MID),
            Delivery::NotNow
        );

        let (mut b, now) = armed_webhook(Some("c0"));
        let Delivery::Commit(batch) = b.on_delivery(
            occurrence_body("e1", Some("c5")),
            &next_id(),
            now,
            WALL,
            MID,
        ) else {
            panic!()
        };
        assert_eq!(ids(&batch), ["e1"]);
        assert_eq!(batch.cursor.as_deref(), Some("c5"));
        // The same occurrence again while the first is being committed: not now.
        assert_eq!(
            b.on_delivery(
                occurrence_body("e1", Some("c5")),
                &next_id(),
                now,
                WALL,
                MID
            ),
            Delivery::NotNow
        );
        b.on_delivered(&batch, true, now);
        assert_eq!(b.cursor(), Some("c5"));
        assert_eq!(
            b.on_delivery(
                occurrence_body("e1", Some("c5")),
                &next_id(),
                now,
                WALL,
                MID
            ),
            Delivery::Taken,
            "a duplicate"
        );
        // The store did not take one: the server delivers it again, and it is new again.
        let Delivery::Commit(batch) =
            b.on_delivery(occurrence_body("e2", None), &next_id(), now, WALL, MID)
        else {
            panic!()
        };
        assert_eq!(
            batch.cursor.as_deref(),
            Some("c5"),
            "no cursor: the stored one"
        );
        b.on_delivered(&batch, false, now);
        assert!(matches!(
            b.on_delivery(occurrence_body("e2", None), &next_id(), now, WALL, MID),
            Delivery::Commit(_)
        ));
        let mut bad = occurrence("e3", json!({}));
        bad.data = RawJson::from_text("[]").unwrap();
        assert_eq!(
            b.on_delivery(WebhookBody::Occurrence(bad), &next_id(), now, WALL, MID),
            Delivery::Gone
        );
        let Delivery::Commit(gap) = b.on_delivery(
            WebhookBody::Gap {
                cursor: Some("c9".into()),
            },
            &next_id(),
            now,
            WALL,
            MID,
        ) else {
            panic!()
        };
        assert_eq!((gap.records.len(), gap.cursor.as_deref()), (0, Some("c9")));
        let logged = logs(&mut b);
        assert!(
            logged.contains(&Log::Gap {
                cause: Gap::Truncated
            }),
            "{logged:?}"
        );
        assert!(logged.contains(&Log::Rejected {
            event_id: "e3".into(),
            cause: Rejection::Malformed
        }));
    }

    #[test]
    fn a_terminated_subscription_is_refused_listed_again_or_armed_again() {
        let terminated = |code: i64, data: Option<Value>| {
            let mut error = ErrorObject::new(code, "ended");
            error.data = data;
            WebhookBody::Terminated { error }
        };
        let (mut b, now) = armed_webhook(None);
        assert_eq!(
            b.on_delivery(terminated(-32024, None), &next_id(), now, WALL, MID),
            Delivery::Taken
        );
        assert_eq!(b.refusal(), Some(Refusal::Forbidden));
        assert_eq!(b.poll_action(now + Duration::from_secs(3600)), None);

        let (mut b, now) = armed_webhook(None);
        let changed = json!({"feature": "payloadSchema", "reason": "schema_changed"});
        let _ = b.on_delivery(
            terminated(-32026, Some(changed)),
            &next_id(),
            now,
            WALL,
            MID,
        );
        assert_eq!(b.poll_action(now), Some(Action::Relist));
        assert!(logs(&mut b).contains(&Log::Gap {
            cause: Gap::SchemaChanged
        }));

        let (mut b, now) = armed_webhook(Some("c3"));
        let _ = b.on_delivery(terminated(-32603, None), &next_id(), now, WALL, MID);
        assert_eq!(logs(&mut b), [Log::Terminated { code: -32603 }]);
        assert_eq!(b.poll_action(now), None);
        let at = b.poll_timeout().expect("armed again later");
        let wait = at - now;
        assert!(
            wait >= Duration::from_millis(900) && wait <= Duration::from_millis(1100),
            "1 s ±10%: {wait:?}"
        );
        assert_eq!(subscribe(&mut b, at).cursor.as_deref(), Some("c3"));
    }

    #[test]
    fn five_callback_failures_in_a_row_move_to_the_next_mode() {
        let (mut b, mut now) = arming(&[DeliveryMode::Webhook, DeliveryMode::Poll], None);
        let failed = || rpc(-32027, Some(json!({"reason": "connection_refused"})));
        for i in 0..5 {
            subscribe(&mut b, now);
            let _ = b.on_subscribed(Err(failed()), now, WALL, MID);
            if i < 4 {
                assert_eq!(b.mode(), Some(DeliveryMode::Webhook), "{} in a row", i + 1);
                now = b.poll_timeout().unwrap();
            }
        }
        let logged = logs(&mut b);
        let callback_failed = logged
            .iter()
            .filter(|l| {
                **l == Log::CallbackFailed {
                    reason: "connection_refused".into(),
                    url: URL.into(),
                }
            })
            .count();
        assert_eq!(callback_failed, 5);
        assert_eq!(
            logged.last(),
            Some(&Log::ModeChanged {
                from: DeliveryMode::Webhook,
                to: DeliveryMode::Poll,
                cause: ModeChange::CallbackFailed
            })
        );
        assert_eq!(b.mode(), Some(DeliveryMode::Poll));
        assert!(matches!(b.poll_action(now), Some(Action::Poll(_))));
        // A periodic listing keeps the choice; a re-dial decides afresh.
        b.on_committed(true, now);
        b.on_listing(Listing::Types(&[both()]), now);
        assert_eq!(b.mode(), Some(DeliveryMode::Poll));
        b.on_connection(true, true);
        b.on_listing(Listing::Types(&[both()]), now);
        assert_eq!(b.mode(), Some(DeliveryMode::Webhook));
    }

    #[test]
    fn callback_failures_broken_by_another_failure_start_again() {
        let (mut b, mut now) = arming(&[DeliveryMode::Webhook, DeliveryMode::Poll], None);
        let failed = || rpc(-32027, Some(json!({"reason": "connection_refused"})));
        for i in 0..9 {
            subscribe(&mut b, now);
            // The fifth answer is a 503, not a callback failure: the count starts again.
            let answer = match i {
                4 => Err(Failure::Status(503)),
                _ => Err(failed()),
            };
            let _ = b.on_subscribed(answer, now, WALL, MID);
            assert_eq!(b.mode(), Some(DeliveryMode::Webhook), "answer {}", i + 1);
            now = b.poll_timeout().unwrap();
        }
        subscribe(&mut b, now);
        let _ = b.on_subscribed(Err(failed()), now, WALL, MID);
        assert_eq!(b.mode(), Some(DeliveryMode::Poll), "five in a row at last");
    }

    #[test]
    fn a_refusal_outstanding_for_five_minutes_pauses_until_a_listing() {
        let (mut b, mut now) = arming(&[DeliveryMode::Webhook], Some("c0"));
        let start = now;
        let mut attempts = 0;
        while b.poll_timeout().is_some() || attempts == 0 {
            subscribe(&mut b, now);
            let _ = b.on_subscribed(Err(rpc(-32025, None)), now, WALL, MID);
            attempts += 1;
            // Paused at the first failure 5 minutes or more after the first, not before.
            assert_eq!(
                b.poll_timeout().is_none(),
                now - start >= Duration::from_secs(300),
                "attempt {attempts} at {:?}",
                now - start
            );
            match b.poll_timeout() {
                Some(at) => now = at,
                None => break,
            }
        }
        assert!(now - start >= Duration::from_secs(300), "{:?}", now - start);
        assert_eq!(attempts, 10, "1+2+4+…+256 s passes 5 minutes at the tenth");
        let logged = logs(&mut b);
        // The pause is the last arm failure's, retried at the next listing: no
        // `mcp.events.paused` (its causes are pressure, rate and store_degraded).
        assert!(
            matches!(
                logged.last(),
                Some(Log::ArmFailed {
                    code: Some(_),
                    retry_ms: 900_000,
                    ..
                })
            ),
            "{logged:?}"
        );
        assert!(!logged.iter().any(|l| matches!(l, Log::Paused { .. })));
        assert_eq!(b.cursor(), Some("c0"));
        assert_eq!(b.paused(), Some(Pause::Refusal));
        assert_eq!(b.refusal(), None);
        assert_eq!(b.poll_action(now + Duration::from_secs(3600)), None);
        b.on_listing(Listing::Types(&[both()]), now);
        assert_eq!(b.paused(), None);
        assert_eq!(subscribe(&mut b, now).cursor.as_deref(), Some("c0"));
    }

    #[test]
    fn a_spent_rate_answers_busy_until_the_window_ends() {
        let now = Instant::now();
        let mut c = config(&[DeliveryMode::Webhook]);
        c.rate = Some(mcp_events::binding::Rate {
            max: 1,
            per: Duration::from_secs(60),
        });
        let mut b = Binding::new(c, None);
        b.on_connection(true, true);
        b.on_listing(Listing::Types(&[both()]), now);
        subscribe(&mut b, now);
        let _ = b.on_subscribed(Ok(granted("sub_1", Some(3_600_000), None)), now, WALL, MID);
        b.on_committed(true, now);
        logs(&mut b);
        let Delivery::Commit(batch) =
            b.on_delivery(occurrence_body("e1", None), &next_id(), now, WALL, MID)
        else {
            panic!()
        };
        b.on_delivered(&batch, true, now);
        let later = now + Duration::from_secs(10);
        for id in ["e2", "e3"] {
            assert_eq!(
                b.on_delivery(occurrence_body(id, None), &next_id(), later, WALL, MID),
                Delivery::Busy {
                    retry_after: Duration::from_secs(50)
                }
            );
        }
        let paused = logs(&mut b);
        assert_eq!(paused.len(), 1, "logged once: {paused:?}");
        assert!(matches!(
            paused[0],
            Log::Paused {
                cause: Pause::Rate,
                ..
            }
        ));
        assert_eq!(b.stats().refused_pressure, 2);
        let end = now + Duration::from_secs(60);
        assert!(matches!(
            b.on_delivery(occurrence_body("e2", None), &next_id(), end, WALL, MID),
            Delivery::Commit(_)
        ));
        assert_eq!(logs(&mut b), [Log::Resumed { cause: Pause::Rate }]);
    }

    #[test]
    fn a_lease_in_the_past_or_a_suspension_is_asked_again_on_the_retry_schedule() {
        let (mut b, mut now) = arming(&[DeliveryMode::Webhook], None);
        let mut waits = Vec::new();
        for _ in 0..4 {
            assert!(subscribe(&mut b, now).active.is_none());
            let _ = b.on_subscribed(Ok(granted("sub_1", Some(-1000), None)), now, WALL, MID);
            b.on_committed(true, now);
            let at = b.poll_timeout().unwrap();
            waits.push((at - now).as_secs_f64().round() as u64);
            now = at;
        }
        assert_eq!(waits, [1, 2, 4, 8], "not a loop");

        let (mut b, mut now) = arming(&[DeliveryMode::Webhook], None);
        let mut suspended = granted("sub_1", Some(3_600_000), None);
        let mut status = DeliveryStatus::default();
        status.active = false;
        suspended.delivery_status = Some(status);
        let mut waits = Vec::new();
        for i in 0..4 {
            let p = subscribe(&mut b, now);
            assert_eq!(
                p.active,
                (i > 0).then_some(true),
                "asks for deliveries again"
            );
            let _ = b.on_subscribed(Ok(suspended.clone()), now, WALL, MID);
            b.on_committed(true, now);
            let at = b.poll_timeout().unwrap();
            waits.push((at - now).as_secs_f64().round() as u64);
            now = at;
        }
        assert_eq!(waits, [1, 2, 4, 8]);
        // Active again: the lease's own schedule.
        subscribe(&mut b, now);
        let _ = b.on_subscribed(Ok(granted("sub_1", Some(3_600_000), None)), now, WALL, MID);
        b.on_committed(true, now);
        assert_eq!(b.poll_timeout(), Some(now + Duration::from_secs(2880)));
    }

    #[test]
    fn envelopes_are_taken_once_and_a_refused_binding_takes_nothing() {
        let (mut b, now) = armed_webhook(Some("c1"));
        let gap = || WebhookBody::Gap {
            cursor: Some("c0".into()),
        };
        assert!(matches!(
            b.on_delivery(gap(), "msg_gap_7", now, WALL, MID),
            Delivery::Commit(_)
        ));
        assert_eq!(
            b.on_delivery(gap(), "msg_gap_7", now, WALL, MID),
            Delivery::Taken,
            "a replay of the same webhook-id"
        );
        // An occurrence whose eventId is that envelope's webhook-id is a new one.
        assert!(matches!(
            b.on_delivery(occurrence_body("msg_gap_7", None), "m8", now, WALL, MID),
            Delivery::Commit(_)
        ));
        assert_eq!(
            logs(&mut b)
                .iter()
                .filter(|l| matches!(l, Log::Gap { .. }))
                .count(),
            1
        );
        let mut error = ErrorObject::new(-32024, "revoked");
        error.data = None;
        let _ = b.on_delivery(WebhookBody::Terminated { error }, "msg_t_1", now, WALL, MID);
        assert_eq!(b.refusal(), Some(Refusal::Forbidden));
        let other = ErrorObject::new(-32603, "again");
        assert_eq!(
            b.on_delivery(
                WebhookBody::Terminated { error: other },
                "msg_t_2",
                now,
                WALL,
                MID
            ),
            Delivery::Gone
        );
        assert_eq!(b.refusal(), Some(Refusal::Forbidden), "still refused");
        assert_eq!(
            b.on_delivery(occurrence_body("e9", None), "e9", now, WALL, MID),
            Delivery::Gone
        );
        assert_eq!(b.poll_action(now + Duration::from_secs(3600)), None);
    }

    #[test]
    fn a_suspended_delivery_is_armed_again_and_throttling_is_logged_once() {
        let (mut b, now) = arming(&[DeliveryMode::Webhook], Some("c0"));
        subscribe(&mut b, now);
        let mut r = granted("sub_1", Some(3_600_000), Some("c1"));
        let mut status = DeliveryStatus::default();
        status.active = false;
        status.last_error = Some("http_5xx\u{1b}".into());
        status.throttled = true;
        status.retry_after_ms = Some(60_000);
        r.delivery_status = Some(status.clone());
        let _ = b.on_subscribed(Ok(r.clone()), now, WALL, MID);
        b.on_committed(true, now);
        let logged = logs(&mut b);
        assert!(logged.contains(&Log::DeliverySuspended {
            last_error: "http_5xx".into(),
            active: false
        }));
        assert!(logged.contains(&Log::Throttled {
            retry_after_ms: Some(60_000)
        }));
        let again = b.poll_timeout().unwrap();
        assert!(
            again - now < Duration::from_secs(2),
            "re-armed soon, not at 48 min"
        );
        assert_eq!(subscribe(&mut b, again).cursor.as_deref(), Some("c1"));
        let _ = b.on_subscribed(Ok(r), again, WALL, MID);
        let logged = logs(&mut b);
        assert!(
            !logged.iter().any(|l| matches!(l, Log::Throttled { .. })),
            "once"
        );
    }
}

#[test]
fn a_spent_rate_pauses_polls_until_the_window_ends() {
    let mut config = Config::new("s", "ticket.created", "in");
    config.rate = Some(mcp_events::binding::Rate {
        max: 3,
        per: Duration::from_secs(60),
    });
    let (mut b, now) = armed(config, None);
    poll(&mut b, now);
    let mut p = page(&["a", "b", "c"], Some("c3"));
    p.has_more = true;
    let _ = b.on_poll(Ok(p), now, WALL, MID);
    b.on_committed(true, now);
    assert_eq!(b.cursor(), Some("c3"), "the cursor is kept");
    assert_eq!(
        b.poll_timeout(),
        Some(now + Duration::from_secs(60)),
        "not at once"
    );
    assert_eq!(b.poll_action(now + Duration::from_secs(59)), None);
    assert!(logs(&mut b).contains(&Log::Paused {
        cause: Pause::Rate,
        detail: "3 occurrences in 60 s".into()
    }));
    let end = now + Duration::from_secs(60);
    assert_eq!(poll(&mut b, end).as_deref(), Some("c3"));
    assert_eq!(b.poll_log(), Some(Log::Resumed { cause: Pause::Rate }));
}

#[test]
fn a_refusal_the_server_answered_holds_through_listings_until_a_redial() {
    let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), Some("c"));
    poll(&mut b, now);
    let _ = b.on_poll(Err(rpc(-32024, None)), now, WALL, MID);
    assert_eq!(b.refusal(), Some(Refusal::Forbidden));
    for minutes in [15, 30, 45] {
        let later = now + Duration::from_secs(minutes * 60);
        b.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), later);
        assert_eq!(
            b.poll_action(later),
            None,
            "nothing sent after listing {minutes}"
        );
    }
    let refused = logs(&mut b)
        .into_iter()
        .filter(|l| matches!(l, Log::Refused { .. }))
        .count();
    assert_eq!(refused, 1, "logged once");
    b.on_connection(true, true);
    b.on_listing(Listing::Types(&[ty(&[DeliveryMode::Poll])]), now);
    assert_eq!(
        poll(&mut b, now).as_deref(),
        Some("c"),
        "a re-dial decides afresh"
    );
}

#[test]
fn what_the_store_passed_over_counts_as_duplicate() {
    let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), None);
    poll(&mut b, now);
    let _ = b.on_poll(Ok(page(&["a", "b", "c"], Some("c3"))), now, WALL, MID);
    b.on_committed(true, now);
    b.passed_over(2);
    assert_eq!((b.stats().appended, b.stats().duplicate), (1, 2));
    b.passed_over(5);
    assert_eq!(
        (b.stats().appended, b.stats().duplicate),
        (0, 3),
        "never below zero"
    );
}

/// A binding decided afresh (a re-dial, a reload) while its intake is paused says the pause
/// ended: every `paused` line has its `resumed`.
#[test]
fn a_pause_ends_with_a_resumed_when_the_binding_decides_afresh() {
    let (mut b, _) = armed(Config::new("s", "ticket.created", "in"), Some("c0"));
    b.pause(Pause::StoreDegraded, "disk full");
    let _ = logs(&mut b);
    b.on_connection(true, true);
    assert_eq!(
        logs(&mut b),
        [Log::Resumed {
            cause: Pause::StoreDegraded
        }]
    );
}
