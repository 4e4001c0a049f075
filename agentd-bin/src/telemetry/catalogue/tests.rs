//! The catalogue against the reference's tables (`tests/data/log-events.tsv`): every line a
//! constructor writes has the name, a level and the fields, in order, of a row; every row is
//! written, or listed below as not yet emitted.

use std::collections::BTreeSet;
use std::time::Duration;

use mcp_events::binding::{Gap, ModeChange, Pause, Refusal, Rejection};
use mcp_negotiate::listen::EndReason;
use mcp_wire::events::DeliveryMode;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::connections::{self, Dial, Disconnect};
use super::events::{self, Of, Subscription};
use super::{listens, own, skills, subscriptions};
use crate::telemetry::log::tests::captured;

/// The rows of the reference's tables that agentd does not write yet.
const NOT_YET_EMITTED: &[&str] = &[];

/// One row: the event, its levels, its fields.
#[derive(Debug)]
struct Row {
    event: String,
    levels: Vec<String>,
    fields: Vec<String>,
}

fn rows() -> Vec<Row> {
    let tsv = include_str!("../../../tests/data/log-events.tsv");
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 4, "a row of four columns: {l}");
            let list = |s: &str| -> Vec<String> {
                s.split(", ")
                    // `reason: idle` names the field and its one value.
                    .map(|f| f.split(':').next().unwrap_or(f).trim().to_owned())
                    .collect()
            };
            Row {
                event: cols[0].to_owned(),
                levels: list(cols[1]),
                fields: list(cols[2]),
            }
        })
        .collect()
}

/// A JSON object's members in the order written.
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Ordered(members))
            }
        }
        d.deserialize_map(Members)
    }
}

/// Every constructor, at each of its levels, with every optional field given.
fn samples() {
    let i = "t";
    let of = Of {
        instance: i,
        server: "s",
        event_type: "e",
    };
    connections::connect(i, "s", "2025-11-25", 3, Some(Dial::Joined));
    connections::connect_fail(i, "s", "refused", Some(Dial::SessionLost));
    connections::disconnect(i, "s", Disconnect::Reload);
    connections::disconnect(i, "s", Disconnect::SessionLost);
    connections::joined(i, "s");
    connections::join_refused(i, "s", "no tools");
    connections::tool_dropped(i, "s", "tool", "bad header");
    connections::tools_changed(i, "s");
    connections::tools_refreshed(i, 6);
    connections::tools_refresh_failed(i, "s", "busy");
    connections::unsubscribed(i, "s", "demo://x");
    connections::unsubscribe_fail(i, "s", "demo://x", "busy");
    listens::idle(i, "s", Duration::from_secs(60), 250);
    listens::ended(i, "s", EndReason::Behind, 250);
    listens::resumed(i, "s");
    listens::narrowed(i, "s", &["demo://x".to_owned()]);
    listens::unavailable(i, "s", "closed", 250);
    listens::refused(i, "s", -32601);
    listens::flags_refused(i, "s", &["toolsListChanged"]);
    events::listed(i, "s", 2);
    events::list_fail(i, "s", "busy", 1000);
    events::list_changed(i, "s");
    events::armed(of, DeliveryMode::Poll, true);
    events::arm_fail(of, None, "busy", 1000);
    events::arm_fail(of, Some(-32024), "forbidden", 1000);
    events::refused(of, Refusal::UnknownEvent, "no such type");
    events::poll_fail(of, None, "busy", 1000);
    events::poll_fail(of, Some(-32020), "cursor", 1000);
    events::paused(of, Pause::Pressure, "full");
    events::resumed(of, Pause::Pressure);
    events::gap(of, Gap::Truncated);
    events::rejected(of, "id", Rejection::Oversize);
    events::schema_mismatch(of, "id");
    events::subscribed(of, "root", Subscription::Requested, "sub");
    events::unsubscribed(of, "root", Subscription::Expired, "sub");
    events::removed(of);
    events::terminated(of, -32024);
    events::delivery_suspended(of, "503", false);
    events::throttled(of, Some(500));
    events::mode_changed(
        of,
        DeliveryMode::Webhook,
        DeliveryMode::Poll,
        ModeChange::CallbackFailed,
    );
    events::callback_failed(of, "unreachable", "https://x");
    events::hook_denied(of, "bad signature");
    events::hook_unsaved(i, "disk full");
    events::index_failed(i, 1, "disk full");
    own::http_listening(i, "127.0.0.1:1".parse().unwrap());
    own::reload_refused(i, "bad file");
    own::tool_call(i, "memory.get", "root", "operator", "ok");
    own::human_asked(i, 1, "ask_human", "conversation:c");
    own::human_answered(i, 1, "ask_human", "conversation:c");
    own::human_withdrawn(i, 2, "elicitation", "tickets");
    own::tool_name_collision(i, Some("s"), "memory.get", "memory_get", "memory_get_2");
    own::turn_failed(i, "root", 1, "the model did not answer before the deadline");
    own::budget_spent(i, 2_000_000, 2_000_000);
    own::instruction_read_fail(i, "s", "demo://x", "too large");
    own::skills_discover_fail(i, "s", "busy");
    let start = subscriptions::StartOf {
        instance: i,
        workflow: "w",
        node: "#0",
        server: "s",
        uri: "demo://x",
    };
    subscriptions::start_armed(start, "start");
    subscriptions::start_unsupported(start, "no subscriptions");
    subscriptions::start_fail(start, "busy");
    subscriptions::start_no_server(start);
    subscriptions::instruction_unsupported(i, "s", "demo://x");
    subscriptions::instruction_fail(i, "s", "demo://x", "busy");
    subscriptions::instruction_event(i, "s", "e");
    subscriptions::wait_resubscribed(i, "s", "demo://x", "restart");
    subscriptions::wait_resubscribe_fail(i, "s", "demo://x", "restart", "busy");
    let failed = subscriptions::Stuck::Failed(1);
    subscriptions::wait_resubscribe_stuck(i, "s", "demo://x", "restart", "unknown", failed);
    let parked = subscriptions::Stuck::Parked(2);
    subscriptions::wait_resubscribe_stuck(i, "s", "demo://x", "restart", "down", parked);
    own::workflow_started(i, "r1", "w", "operator");
    own::workflow_ended(i, "r1", "w", "completed", None);
    own::workflow_ended(i, "r1", "w", "failed", Some("server: down"));
    own::workflow_retry(i, "r1", "fetch", 1, "server: down", 1000);
    own::workflow_unsaved(i, "r1", "disk full");
    own::workflow_prune_fail(i, "disk full");
    own::exec_sweep_fail(i, "Permission denied (os error 13)");
    skills::discovered(i, "s", &["s/greet".to_owned()]);
    skills::source_unavailable(i, "s");
}

/// The event names the catalogue's sources write.
fn names_in_sources() -> BTreeSet<String> {
    let sources = [
        include_str!("connections.rs"),
        include_str!("listens.rs"),
        include_str!("events.rs"),
        include_str!("own.rs"),
        include_str!("subscriptions.rs"),
        include_str!("skills.rs"),
    ];
    let mut names = BTreeSet::new();
    for source in sources {
        let mut lines = source.lines();
        while let Some(l) = lines.next() {
            if !l.trim_start().starts_with("line!(") {
                continue;
            }
            // The name is the first string literal of the call, on its line or after it.
            let call: String = std::iter::once(l)
                .chain(lines.clone().take(3))
                .collect::<Vec<_>>()
                .join(" ");
            let name = call.split('"').nth(1).expect("a name");
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn every_line_of_the_catalogue_is_a_row_of_the_reference() {
    let rows = rows();
    let lines = captured(samples);
    let mut written = BTreeSet::new();
    let mut levels_written = BTreeSet::new();
    for line in &lines {
        let Ordered(members) = serde_json::from_str(line).expect(line);
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys[..4], ["ts", "level", "event", "instance"], "{line}");
        let get = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let event = get("event").and_then(Value::as_str).unwrap().to_owned();
        let level = get("level").and_then(Value::as_str).unwrap().to_owned();
        assert_eq!(get("instance"), Some(&Value::from("t")), "{line}");
        let fields: Vec<&str> = keys[4..].to_vec();
        written.insert(event.clone());
        levels_written.insert((event.clone(), level.clone()));
        if own::NAMES.contains(&event.as_str()) {
            assert!(
                rows.iter().all(|r| r.event != event),
                "{event} is the reference's"
            );
            continue;
        }
        let row = rows
            .iter()
            .find(|r| r.event == event && r.levels.contains(&level))
            .unwrap_or_else(|| panic!("no row of {event} at {level}: {line}"));
        // A field `a or b` of the reference is one of the two.
        let matched = fields.len() == row.fields.len()
            && fields
                .iter()
                .zip(&row.fields)
                .all(|(f, r)| r.split(" or ").any(|alt| alt == *f));
        assert!(matched, "{line}: {:?}", row.fields);
    }
    assert_eq!(
        written,
        names_in_sources(),
        "every event of the catalogue is sampled"
    );
    for row in &rows {
        let not_yet = NOT_YET_EMITTED.contains(&row.event.as_str());
        assert_ne!(
            written.contains(&row.event),
            not_yet,
            "{} is written, or listed as not yet emitted",
            row.event
        );
        for level in row.levels.iter().filter(|_| !not_yet) {
            assert!(
                levels_written.contains(&(row.event.clone(), level.clone())),
                "{} at {level}",
                row.event
            );
        }
    }
}

#[test]
fn values_keep_their_json_types() {
    let lines = captured(|| {
        connections::join_refused("t", "s", "no\u{7} tools");
        listens::refused("t", "s", -32601);
        events::poll_fail(
            Of {
                instance: "t",
                server: "s",
                event_type: "e",
            },
            None,
            "busy",
            1000,
        );
        connections::connect("t", "s", "2025-11-25", 3, None);
    });
    let tail = |line: &str| line.split_once(",\"server\"").unwrap().1.to_owned();
    assert_eq!(tail(&lines[0]), ":\"s\",\"errors\":[\"no tools\"]}");
    assert_eq!(
        tail(&lines[1]),
        ":\"s\",\"reason\":\"refused (-32601); not asked for again\",\"retry_ms\":null}"
    );
    assert_eq!(
        tail(&lines[2]),
        ":\"s\",\"event_type\":\"e\",\"code\":null,\"err\":\"busy\",\"retry_ms\":1000}"
    );
    assert_eq!(
        tail(&lines[3]),
        ":\"s\",\"protocol\":\"2025-11-25\",\"tools\":3}",
        "no reason on a first dial"
    );
}
