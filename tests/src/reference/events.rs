//! MCP Events (SEP-3415) on the reference server, 2026-07-28 only: `events/list` with two
//! types, `events/poll` over a log of occurrences the test emits, the -32023 and -32602
//! errors.
//!
//! Cursors are `c<n>`: the position after the `n`th occurrence. `ticket.created` replays;
//! `build.finished` does not (its polls answer a `null` cursor).

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_wire::{ErrorObject, code, events};
use serde_json::{Value, json};

/// The occurrences emitted so far.
#[derive(Debug, Default)]
pub(crate) struct Log {
    occurrences: Mutex<Vec<Value>>,
}

impl Log {
    /// Appends an occurrence of `name` with `data`; its `eventId`.
    pub(crate) fn emit(&self, name: &str, data: Value) -> String {
        let mut all = self.occurrences.lock().expect("events lock");
        let id = format!("evt-{}", all.len() + 1);
        all.push(json!({
            "eventId": id,
            "name": name,
            "timestamp": now_rfc3339(),
            "data": data,
        }));
        id
    }
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
pub(crate) fn answer(
    log: &Log,
    poll_ms: u64,
    method: &str,
    params: &Value,
) -> Option<Result<Value, ErrorObject>> {
    Some(match method {
        "events/list" => Ok(json!({"resultType": "complete", "events": types()})),
        "events/poll" => poll(log, poll_ms, params),
        _ => return None,
    })
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
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}
