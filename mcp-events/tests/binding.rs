//! The binding machine step by step, in virtual time: every refusal, the poll schedule, the
//! retry schedules, intake (bounds, duplicates, schemas, cursors, gaps) and pauses.

use std::time::{Duration, Instant};

use mcp_events::binding::{Action, Batch, Binding, Config, Failure, Listing, Log, Pause, Refusal};
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
fn the_mode_is_the_first_the_operator_lists_that_the_type_offers() {
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
        b.on_poll(Ok(p), now, WALL, MID);
        b.on_committed(true, now);
        near(b.poll_timeout().unwrap() - now, wait);
    }
    // ±10%.
    let now = b.poll_timeout().unwrap();
    poll(&mut b, now);
    b.on_poll(Ok(page(&[], Some("c1"))), now, WALL, 0);
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
fn failed_polls_retry_doubling_to_five_minutes_or_fifteen_when_exhausted() {
    let (mut b, mut now) = armed(Config::new("s", "ticket.created", "in"), None);
    let mut waits = Vec::new();
    for _ in 0..10 {
        poll(&mut b, now);
        b.on_poll(Err(Failure::Status(503)), now, WALL, MID);
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
    b.on_poll(Ok(page(&[], Some("c"))), now, WALL, MID);
    b.on_committed(true, now);
    now = b.poll_timeout().unwrap();
    let mut waits = Vec::new();
    for _ in 0..12 {
        poll(&mut b, now);
        b.on_poll(Err(rpc(-32025, None)), now, WALL, MID);
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
    assert_eq!(b.stats().requests[&("events/poll", "failed")], 22);
    assert_eq!(b.stats().requests[&("events/poll", "ok")], 1);
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
        b.on_poll(Err(rpc(code, data)), now, WALL, MID);
        assert_eq!(b.refusal(), Some(reason), "{code}");
        assert_eq!(b.poll_action(now + Duration::from_secs(3600)), None);
        assert_eq!(b.poll_timeout(), None);
        let Some(Log::Refused { detail, .. }) = b.poll_log() else {
            panic!()
        };
        assert_eq!(detail, "nope", "control characters stripped");
        assert_eq!(b.cursor(), Some("c"), "the cursor is kept");
        assert_eq!(b.stats().requests[&("events/poll", "refused")], 1);
    }
    let changed = json!({"feature": "payloadSchema", "reason": "schema_changed"});
    for (code, data, gap) in [(-32023, None, false), (-32026, Some(changed), true)] {
        let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), Some("c"));
        poll(&mut b, now);
        b.on_poll(Err(rpc(code, data)), now, WALL, MID);
        assert_eq!(b.poll_action(now), Some(Action::Relist));
        assert_eq!(b.poll_action(now), None, "waits for the listing");
        assert_eq!(
            logs(&mut b).contains(&Log::Gap {
                cause: "schema_changed"
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
    config.max_value_bytes = 300;
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
    assert_eq!(record["data"]["subscription"], "s/ticket.created/in");
    assert_eq!(record["id"], "mcp/s/ticket.created/odd");
    let first: Value = serde_json::from_slice(&batch.records[0].bytes).unwrap();
    assert_eq!(first["data"]["schema_ok"], true);
    let logged = logs(&mut b);
    let rejected: Vec<&str> = logged
        .iter()
        .filter_map(|l| match l {
            Log::Rejected { cause, .. } => Some(*cause),
            _ => None,
        })
        .collect();
    assert_eq!(rejected, ["oversize", "oversize", "malformed"]);
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
        b.on_poll(Ok(page(&[], None)), now, WALL, MID);
        b.on_committed(true, now);
        now = b.poll_timeout().unwrap();
    }
    assert_eq!(b.cursor(), None, "no replay: poll with null");
    poll(&mut b, now);
    let mut p = page(&[], Some(&"c".repeat(4097)));
    p.truncated = true;
    b.on_poll(Ok(p), now, WALL, MID);
    b.on_committed(true, now);
    let gaps: Vec<Log> = logs(&mut b)
        .into_iter()
        .filter(|l| matches!(l, Log::Gap { .. } | Log::Rejected { .. }))
        .collect();
    assert_eq!(
        gaps,
        [
            Log::Gap { cause: "no_replay" },
            Log::Rejected {
                event_id: String::new(),
                cause: "oversize"
            },
            Log::Gap { cause: "truncated" },
        ],
        "no_replay once; a cursor past 4 KiB is not stored"
    );
    assert_eq!(b.cursor(), None);
    assert_eq!(b.stats().gaps[&"no_replay"], 1);
    assert_eq!(b.stats().gaps[&"truncated"], 1);

    // A cursor of exactly 4 KiB is stored.
    now = b.poll_timeout().unwrap();
    poll(&mut b, now);
    b.on_poll(Ok(page(&[], Some(&"c".repeat(4096)))), now, WALL, MID);
    b.on_committed(true, now);
    assert_eq!(b.cursor().map(str::len), Some(4096));
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
    logs(&mut b);
    // Resumed: the same page again, not taken for duplicates.
    assert_eq!(poll(&mut b, resume_at).as_deref(), Some("c0"));
    assert_eq!(
        b.poll_log(),
        Some(Log::Resumed {
            cause: Pause::StoreDegraded
        })
    );
    let again = b.on_poll(Ok(page(&["a", "b"], Some("c1"))), resume_at, WALL, MID);
    assert_eq!(ids(&again), ["a", "b"]);
    b.on_committed(true, resume_at);
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
}

#[test]
fn the_dedup_window_spans_pages_and_expires() {
    let (mut b, now) = armed(Config::new("s", "ticket.created", "in"), None);
    poll(&mut b, now);
    b.on_poll(Ok(page(&["a"], Some("c1"))), now, WALL, MID);
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
