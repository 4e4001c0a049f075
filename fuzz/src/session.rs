//! Drives a legacy session and the resumption of its streams with arbitrary operations:
//! `initialize` answers with any revision and any session id, statuses to requests that
//! carried the current session, another one or none, closes, and streams (arbitrary bytes
//! through the event-stream decoder, and events made by hand) that close at any time.
//!
//! Oracles, from the docs of `mcp_transport::session`: an id that is empty or holds a byte
//! outside visible ASCII is refused and changes nothing, any other answer is recorded; a
//! request carries no session header on `initialize`, else the revision and the id the
//! handshake gave; a 404 to a request that carried the current session always loses it (no
//! id, no revision, nothing but `initialize` allowed), one that carried another session is
//! stale and changes nothing, and any other status changes nothing; a close gives the id to
//! send the DELETE with, and after closing a session that had one nothing but `initialize`
//! is allowed (a session lost or ended stays so through a close); `initialize` is always
//! allowed. A stream's `Last-Event-ID` is the last id it saw; an event that sets
//! neither id nor retry (an empty or data-only block) changes nothing; the wait before
//! resuming is the last retry, within 100 ms and 60 s, else 1 s; a stream without an id
//! cannot be resumed.

use std::time::{Duration, Instant};

use mcp_transport::Error;
use mcp_transport::session::{Loss, Resume, Resumption, Session};
use mcp_transport::sse::{Decoder, Event};
use mcp_wire::Revision;

use crate::Input;

/// What the docs say the session holds.
#[derive(Debug, Default)]
struct Model {
    revision: Option<Revision>,
    id: Option<String>,
    /// Ended by the client or lost by the server: nothing but `initialize` may be sent.
    ended: bool,
}

/// What the docs say the stream's resumption holds.
#[derive(Debug, Default)]
struct Stream {
    last_event_id: Option<String>,
    retry: Option<u64>,
}

const IDS: [&[u8]; 6] = [b"a", b"b", b"e53cba3a", b"", b"a b", b"\xff"];

fn session_id<'a>(input: &mut Input<'a>) -> Option<&'a [u8]> {
    match input.byte() % 8 {
        0 => None,
        n @ 1..=6 => Some(IDS[usize::from(n - 1)]),
        _ => Some(input.bytes(12)),
    }
}

fn observe(resumption: &mut Resumption, stream: &mut Stream, event: &Event) {
    let before = resumption.clone();
    resumption.observe(event);
    if event.id.is_none() && event.retry.is_none() {
        assert_eq!(*resumption, before, "{event:?} changes nothing");
    }
    if let Some(id) = &event.id {
        stream.last_event_id = Some(id.clone());
    }
    if let Some(retry) = event.retry {
        stream.retry = Some(retry);
    }
}

fn check(session: &Session, model: &Model, resumption: &Resumption, stream: &Stream, now: Instant) {
    assert_eq!(session.revision(), model.revision);
    assert_eq!(session.id(), model.id.as_deref());
    assert!(session.headers("initialize").is_empty());
    let mut expected = Vec::new();
    if let Some(revision) = model.revision {
        expected.push(("MCP-Protocol-Version", revision.as_str()));
    }
    if let Some(id) = &model.id {
        expected.push(("Mcp-Session-Id", id.as_str()));
    }
    assert_eq!(session.headers("tools/list"), expected);
    for (_, value) in session.headers("ping") {
        assert!(
            value.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "{value:?}"
        );
    }
    assert!(session.allows("initialize"));
    assert_eq!(session.allows("tools/list"), !model.ended, "{model:?}");

    assert_eq!(resumption.last_event_id(), stream.last_event_id.as_deref());
    let retry = stream.retry.map_or(Duration::from_secs(1), |ms| {
        Duration::from_millis(ms).clamp(Duration::from_millis(100), Duration::from_secs(60))
    });
    assert_eq!(resumption.retry(), retry);
    let resume = resumption.on_close(now);
    match &stream.last_event_id {
        Some(id) => assert_eq!(
            resume,
            Resume::At {
                at: now + retry,
                last_event_id: id.clone()
            }
        ),
        None => assert_eq!(resume, Resume::Impossible),
    }
}

/// The `session` target: see the module docs.
pub fn session(data: &[u8]) {
    let mut input = Input(data);
    let start = Instant::now();
    let mut now = start;
    let mut session = Session::new();
    let mut model = Model::default();
    let mut resumption = Resumption::new();
    let mut stream = Stream::default();
    check(&session, &model, &resumption, &stream, now);
    while !input.is_empty() {
        match input.byte() % 9 {
            0 | 1 => {
                let revision = input.pick(&Revision::ALL);
                let id = session_id(&mut input);
                let valid = id.is_none_or(|id| {
                    !id.is_empty() && id.iter().all(|b| (0x21..=0x7e).contains(b))
                });
                let before = session.clone();
                match session.initialized(revision, id) {
                    Ok(()) => {
                        assert!(valid, "{id:?} taken");
                        model = Model {
                            revision: Some(revision),
                            id: id.map(|id| String::from_utf8(id.to_vec()).expect("ASCII")),
                            ended: false,
                        };
                    }
                    Err(e) => {
                        assert!(!valid, "{id:?} refused");
                        assert!(matches!(e, Error::InvalidSessionId), "{e:?}");
                        assert_eq!(session, before, "a refused id changes nothing");
                    }
                }
            }
            2 | 3 => {
                let status = match input.byte() % 4 {
                    0 => u16::from_le_bytes([input.byte(), input.byte()]),
                    1 => 400 + u16::from(input.byte() % 8),
                    _ => 404,
                };
                let other = String::from_utf8_lossy(session_id(&mut input).unwrap_or(b"z"));
                let sent = match input.byte() % 3 {
                    0 => None,
                    1 => Some(&*other),
                    _ => model.id.as_deref(),
                };
                let before = session.clone();
                let loss = session.on_status(status, sent);
                match (status, sent) {
                    (404, Some(sent)) if model.id.as_deref() == Some(sent) => {
                        assert_eq!(loss, Loss::Lost);
                        model = Model {
                            ended: true,
                            ..Model::default()
                        };
                    }
                    (404, Some(_)) => {
                        assert_eq!(loss, Loss::Stale);
                        assert_eq!(session, before);
                    }
                    _ => {
                        assert_eq!(loss, Loss::Kept);
                        assert_eq!(session, before);
                    }
                }
            }
            4 => {
                let id = model.id.take();
                assert_eq!(session.close(), id);
                model.revision = None;
                // A session with an id is ended; none is ever taken back up by a close.
                model.ended |= id.is_some();
            }
            5 | 6 => {
                let mut decoder = Decoder::new(4096);
                let mut chunk = input.bytes(255);
                while !chunk.is_empty() {
                    let size = usize::from(input.byte() % 64 + 1).min(chunk.len());
                    let (head, later) = chunk.split_at(size);
                    decoder.push(head);
                    chunk = later;
                    while let Some(Ok(event)) = decoder.next_event() {
                        observe(&mut resumption, &mut stream, event);
                    }
                }
            }
            7 => {
                let event = Event {
                    id: input
                        .bool()
                        .then(|| String::from_utf8_lossy(input.bytes(8)).into_owned()),
                    event: input.bool().then(|| "message".to_owned()),
                    data: String::from_utf8_lossy(input.bytes(8)).into_owned(),
                    retry: match input.byte() % 4 {
                        0 => Some(u64::from_le_bytes([input.byte(); 8])),
                        1 => Some(u64::from(input.byte()) * 10),
                        _ => None,
                    },
                };
                observe(&mut resumption, &mut stream, &event);
            }
            _ => {
                if input.bool() {
                    // A new stream, seen from its start.
                    resumption = Resumption::new();
                    stream = Stream::default();
                }
                now += Duration::from_millis(u64::from(input.byte()) * 100);
            }
        }
        check(&session, &model, &resumption, &stream, now);
    }
}
