//! An occurrence on its way into a stream: checked against the bounds, then written once as
//! the reference's Stream event.
//!
//! ```
//! use mcp_events::Limits;
//! use mcp_events::occurrence::{Target, check, stream_event};
//! use mcp_wire::RawJson;
//! use mcp_wire::events::EventOccurrence;
//!
//! let target = Target { server: "tickets", event: "ticket.created", stream: "tickets", subscription: "b1" };
//! let data = RawJson::from_text(r#"{"id":7}"#).unwrap();
//! let o = EventOccurrence::new("e1", "ticket.created", "2026-11-30T06:00:00Z", data);
//! check(&o, &Limits::default()).unwrap();
//! let mut record = Vec::new();
//! stream_event(&target, &o, true, &mut record);
//! let v: serde_json::Value = serde_json::from_slice(&record).unwrap();
//! assert_eq!(v["id"], "mcp/tickets/ticket.created/e1");
//! assert_eq!(v["data"]["payload"]["id"], 7);
//! ```

use std::fmt::Write as _;

use mcp_wire::events::EventOccurrence;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::{Bound, Error, Limits};

/// The longest stream event id kept as it is; a longer one names the `eventId` by its
/// SHA-256.
pub const STREAM_ID_MAX: usize = 200;

/// Where a binding's occurrences go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// The server's name in the configuration.
    pub server: &'a str,
    /// The event type.
    pub event: &'a str,
    /// The stream appended to (the binding's `into`).
    pub stream: &'a str,
    /// The binding's key (`data.subscription`).
    pub subscription: &'a str,
}

/// Checks an occurrence against the bounds of `limits` (its `eventId`
/// [`Limits::event_id_max`], its cursor [`Limits::cursor_max`], the whole of it as JSON
/// [`Limits::occurrence_max`]) and its shape (`data` an object that reads as JSON values:
/// no lone surrogate, no number past `f64`; `timestamp` RFC 3339). The payload it read.
pub fn check(o: &EventOccurrence, limits: &Limits) -> Result<Value, Error> {
    bounded(Bound::EventId, o.event_id.len(), limits.event_id_max)?;
    if let Some(Some(cursor)) = &o.cursor {
        check_cursor(cursor, limits)?;
    }
    if !o.data.is_object() {
        return Err(Error::Malformed {
            detail: "data is not an object".into(),
        });
    }
    if crate::time::unix_millis(&o.timestamp).is_none() {
        return Err(Error::Malformed {
            detail: "timestamp is not an RFC 3339 date-time".into(),
        });
    }
    let mut size = Counter(0);
    // Writing to a counter fails only if serialization does, which it cannot here.
    let _ = serde_json::to_writer(&mut size, o);
    bounded(Bound::Occurrence, size.0, limits.occurrence_max)?;
    // The grammar was checked as the message was read; its values were not.
    serde_json::from_str(o.data.get()).map_err(|e| Error::Malformed {
        detail: format!("data does not read as JSON values: {e}"),
    })
}

/// Checks a cursor before it is stored: [`Limits::cursor_max`] at most.
pub fn check_cursor(cursor: &str, limits: &Limits) -> Result<(), Error> {
    bounded(Bound::Cursor, cursor.len(), limits.cursor_max)
}

fn bounded(bound: Bound, size: usize, limit: usize) -> Result<(), Error> {
    match size <= limit {
        true => Ok(()),
        false => Err(Error::TooLarge { bound, size, limit }),
    }
}

/// The stream event id of an occurrence: `mcp/<server>/<type>/<eventId>`, or
/// `mcp/<server>/<type>/sha256:<hex of the eventId's SHA-256>` when that would be longer than
/// [`STREAM_ID_MAX`] bytes.
pub fn stream_id(server: &str, event: &str, event_id: &str) -> String {
    let plain = format!("mcp/{server}/{event}/{event_id}");
    if plain.len() <= STREAM_ID_MAX {
        return plain;
    }
    let hash = Sha256::digest(event_id.as_bytes());
    format!("mcp/{server}/{event}/sha256:{}", hex(&hash))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Writes the reference's Stream event for `o` into `out`, once: `id`, `source`, `stream`,
/// `subject`, and `data` with the server, the type, the `eventId`, the timestamp, whether the
/// payload passed its schema, the binding's key, and the payload verbatim. Its `id`.
pub fn stream_event(
    target: &Target<'_>,
    o: &EventOccurrence,
    schema_ok: bool,
    out: &mut Vec<u8>,
) -> String {
    #[derive(serde::Serialize)]
    struct Record<'a> {
        id: String,
        source: String,
        stream: &'a str,
        subject: &'a str,
        data: Data<'a>,
    }
    #[derive(serde::Serialize)]
    struct Data<'a> {
        server: &'a str,
        event: &'a str,
        event_id: &'a str,
        occurred_at: &'a str,
        schema_ok: bool,
        subscription: &'a str,
        payload: &'a RawValue,
    }
    let id = stream_id(target.server, target.event, &o.event_id);
    let record = Record {
        id: id.clone(),
        source: format!("mcp:{}", target.server),
        stream: target.stream,
        subject: target.stream,
        data: Data {
            server: target.server,
            event: target.event,
            event_id: &o.event_id,
            occurred_at: &o.timestamp,
            schema_ok,
            subscription: target.subscription,
            payload: o.data.as_raw(),
        },
    };
    // Strings and verbatim JSON always serialize.
    let _ = serde_json::to_writer(out, &record);
    id
}

/// Counts the bytes written.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mcp_wire::RawJson;
    use serde_json::Value;

    use super::*;
    use crate::error::Rejection;

    fn occurrence(event_id: &str, data: &str) -> EventOccurrence {
        EventOccurrence::new(
            event_id,
            "t",
            "2026-11-30T06:00:00Z",
            RawJson::from_text(data).unwrap(),
        )
    }

    /// The default limits, but for the whole occurrence.
    fn within(occurrence_max: usize) -> Limits {
        Limits {
            occurrence_max,
            ..Limits::default()
        }
    }

    /// Text that passes the JSON grammar but holds no JSON value: a lone surrogate (in a
    /// string or a key), a number past `f64`. Its Stream event would not read back.
    #[test]
    fn a_payload_that_does_not_read_as_values_is_malformed() {
        for data in [r#"{"":"\udee1"}"#, r#"{"\uda00":1}"#, r#"{"n":-32E460}"#] {
            let refused = check(&occurrence("e", data), &Limits::default());
            assert!(
                matches!(refused, Err(Error::Malformed { .. })),
                "{data}: {refused:?}"
            );
        }
        assert_eq!(
            check(
                &occurrence("e", r#"{"n":1e308,"s":"\ud83d\ude00"}"#),
                &Limits::default()
            ),
            Ok(serde_json::json!({"n": 1e308, "s": "\u{1F600}"}))
        );
    }

    #[test]
    fn bounds_hold_at_the_limit_and_refuse_one_past() {
        let limits = Limits::default();
        let (event_id_max, cursor_max) = (limits.event_id_max, limits.cursor_max);
        assert_eq!((event_id_max, cursor_max), (1024, 4096));
        assert!(check(&occurrence(&"e".repeat(event_id_max), "{}"), &limits).is_ok());
        assert_eq!(
            check(&occurrence(&"e".repeat(event_id_max + 1), "{}"), &limits),
            Err(Error::TooLarge {
                bound: Bound::EventId,
                size: 1025,
                limit: 1024
            })
        );
        let mut o = occurrence("e", "{}");
        o.cursor = Some(Some("c".repeat(cursor_max)));
        assert!(check(&o, &limits).is_ok());
        o.cursor = Some(Some("c".repeat(cursor_max + 1)));
        assert_eq!(check(&o, &limits).unwrap_err().cause(), Rejection::Oversize);

        // The whole occurrence, as JSON: 256 KiB by default, or what the limits say.
        let base = occurrence("e", r#"{"x":""}"#);
        let overhead = serde_json::to_vec(&base).unwrap().len();
        let sized =
            |n: usize| occurrence("e", &format!(r#"{{"x":"{}"}}"#, "a".repeat(n - overhead)));
        let max = limits.occurrence_max;
        assert_eq!(max, 256 * 1024);
        assert!(check(&sized(max), &limits).is_ok());
        assert_eq!(
            check(&sized(max + 1), &limits),
            Err(Error::TooLarge {
                bound: Bound::Occurrence,
                size: max + 1,
                limit: max
            })
        );
        assert!(check(&sized(1000), &within(1000)).is_ok());
        assert!(check(&sized(1001), &within(1000)).is_err());
    }

    #[test]
    fn other_bounds_are_kept() {
        let limits = Limits {
            event_id_max: 4,
            cursor_max: 2,
            ..Limits::default()
        };
        assert!(check(&occurrence("eeee", "{}"), &limits).is_ok());
        assert_eq!(
            check(&occurrence("eeeee", "{}"), &limits)
                .unwrap_err()
                .cause(),
            Rejection::Oversize
        );
        assert!(check_cursor("cc", &limits).is_ok());
        assert!(check_cursor("ccc", &limits).is_err());
    }

    #[test]
    fn a_payload_that_is_not_an_object_or_a_bad_timestamp_is_malformed() {
        for data in ["[]", "1", "\"x\"", "null"] {
            assert_eq!(
                check(&occurrence("e", data), &Limits::default())
                    .unwrap_err()
                    .cause(),
                Rejection::Malformed
            );
        }
        let mut o = occurrence("e", "{}");
        o.timestamp = "yesterday".into();
        assert_eq!(
            check(&o, &Limits::default()).unwrap_err().cause(),
            Rejection::Malformed
        );
    }

    #[test]
    fn stream_ids_are_hashed_past_200_bytes() {
        let at = |n: usize| stream_id("s", "t", &"x".repeat(n));
        // "mcp/s/t/" is 8 bytes.
        assert_eq!(at(192).len(), 200);
        assert!(at(192).ends_with(&"x".repeat(192)));
        let hashed = at(193);
        assert!(hashed.starts_with("mcp/s/t/sha256:"), "{hashed}");
        assert_eq!(hashed.len(), "mcp/s/t/sha256:".len() + 64);
        assert_eq!(
            stream_id("s", "t", &"x".repeat(193)),
            hashed,
            "the same id hashes the same"
        );
        assert_eq!(stream_id("s", "t", "abc"), "mcp/s/t/abc",);
        // sha256("abc"), the FIPS 180-2 example, past the bound.
        let long = stream_id(&"s".repeat(200), "t", "abc");
        assert!(long.ends_with("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    }

    #[test]
    fn the_stream_event_has_the_reference_shape() {
        let target = Target {
            server: "tickets",
            event: "ticket.created",
            stream: "inbox",
            subscription: "b-1",
        };
        let o = occurrence("e1", r#"{"n": 1, "deep": {"k": [1,2]}}"#);
        let mut out = Vec::new();
        stream_event(&target, &o, false, &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "id": "mcp/tickets/ticket.created/e1",
                "source": "mcp:tickets",
                "stream": "inbox",
                "subject": "inbox",
                "data": {
                    "server": "tickets",
                    "event": "ticket.created",
                    "event_id": "e1",
                    "occurred_at": "2026-11-30T06:00:00Z",
                    "schema_ok": false,
                    "subscription": "b-1",
                    "payload": {"n": 1, "deep": {"k": [1, 2]}}
                }
            })
        );
        // The payload is written verbatim, whitespace and all.
        assert!(
            String::from_utf8(out)
                .unwrap()
                .contains(r#"{"n": 1, "deep": {"k": [1,2]}}"#)
        );
    }
}
