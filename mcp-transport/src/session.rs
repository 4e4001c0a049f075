//! The legacy HTTP session (2025-11-25 and older) and the resumption of a legacy stream.
//!
//! [`Session`] holds what the `initialize` answer gave: the `Mcp-Session-Id` (visible ASCII
//! only) and the negotiated revision. It says which headers each POST carries (none of the
//! two on `initialize`, both after), and reads a 404 to a request that carried the session as
//! the session's loss: the client must start over with a fresh `initialize`.
//!
//! [`Resumption`] follows one event stream: the last event id it saw and the last `retry`.
//! When a stream closes before the response it was carrying, the client resumes it with a
//! GET carrying `Last-Event-ID`, after `retry` milliseconds.
//!
//! Both are pure: the driver tells them what happened, with the time, and asks what to do.
//!
//! ```
//! use mcp_transport::session::{Session, Loss};
//! use mcp_wire::Revision;
//!
//! let mut session = Session::new();
//! assert!(session.headers("initialize").is_empty());
//! session.initialized(Revision::V2025_11_25, Some(b"e53cba3a")).unwrap();
//! assert_eq!(session.headers("tools/list"), [
//!     ("MCP-Protocol-Version", "2025-11-25"),
//!     ("Mcp-Session-Id", "e53cba3a"),
//! ]);
//! assert_eq!(session.on_status(404, Some("e53cba3a")), Loss::Lost);
//! assert!(session.id().is_none());
//! ```

use std::time::{Duration, Instant};

use mcp_wire::{Revision, method};

use crate::Error;
use crate::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::sse::Event;

/// A legacy session: what the handshake agreed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    revision: Option<Revision>,
    id: Option<String>,
    /// The client ended the session with [`Session::close`]: nothing but `initialize` can be
    /// sent on it.
    ended: bool,
}

/// What a status means for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// Nothing: the session stands (or there is none to lose).
    Kept,
    /// A 404 to a request that carried the current session: it is gone, and the client must
    /// send `initialize` again.
    Lost,
    /// A 404 to a request that carried a session already replaced: the session stands, but
    /// the request was not served all the same (the driver answers both `SessionLost`).
    Stale,
}

impl Session {
    /// A session before its handshake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the `initialize` answer: the revision the server chose and its
    /// `Mcp-Session-Id`, if it sent one. An id that is empty or holds a byte outside visible
    /// ASCII (0x21 to 0x7E) is refused.
    pub fn initialized(&mut self, revision: Revision, id: Option<&[u8]>) -> Result<(), Error> {
        let id = match id {
            Some(bytes) if bytes.is_empty() || !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) => {
                return Err(Error::InvalidSessionId);
            }
            Some(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            None => None,
        };
        self.revision = Some(revision);
        self.id = id;
        self.ended = false;
        Ok(())
    }

    /// The negotiated revision, once the handshake is done.
    pub fn revision(&self) -> Option<Revision> {
        self.revision
    }

    /// The session id, if the server gave one.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The session headers of a POST of `method`: none on `initialize` (which starts afresh),
    /// else `MCP-Protocol-Version` once the handshake is done and `Mcp-Session-Id` when the
    /// server gave one. The same headers go on a GET and a DELETE.
    pub fn headers(&self, method: &str) -> Vec<(&'static str, &str)> {
        let mut out = Vec::with_capacity(2);
        if method == method::INITIALIZE {
            return out;
        }
        if let Some(revision) = self.revision {
            out.push((MCP_PROTOCOL_VERSION, revision.as_str()));
        }
        if let Some(id) = &self.id {
            out.push((MCP_SESSION_ID, id.as_str()));
        }
        out
    }

    /// Reads the status of an answer to a request that carried `sent` as its session id.
    /// A 404 to the current session loses it (after that, only `initialize` may be sent);
    /// a 404 to a session already lost is [`Loss::Stale`]; everything else keeps it.
    pub fn on_status(&mut self, status: u16, sent: Option<&str>) -> Loss {
        match (status, sent) {
            (404, Some(sent)) if self.id.as_deref() == Some(sent) => {
                // Nothing but a new `initialize` can be sent now.
                *self = Self {
                    ended: true,
                    ..Self::default()
                };
                Loss::Lost
            }
            (404, Some(_)) => Loss::Stale,
            _ => Loss::Kept,
        }
    }

    /// Ends the session: the id to send a DELETE with, if there was one. After that, only
    /// `initialize` may be sent (see [`Session::allows`]).
    pub fn close(&mut self) -> Option<String> {
        let id = self.id.take();
        self.revision = None;
        // Closing again, or after the server lost the session, leaves it ended.
        self.ended |= id.is_some();
        id
    }

    /// Whether a request of `method` can be sent: anything but `initialize` needs the
    /// session, once the client ended it or the server lost it.
    pub fn allows(&self, method: &str) -> bool {
        !self.ended || method == method::INITIALIZE
    }
}

/// The wait before resuming when the server named none.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The shortest wait before resuming, whatever the server says, so that a server saying
/// `retry: 0` cannot make a client reconnect in a tight loop.
pub const MIN_RETRY: Duration = Duration::from_millis(100);

/// The longest wait before resuming, whatever the server says, so that a server saying
/// `retry: 99999999999` cannot leave a call waiting for ever.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// One legacy event stream's resume state: the last event id and the last `retry`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use mcp_transport::session::{Resume, Resumption};
/// use mcp_transport::sse::Event;
///
/// let mut stream = Resumption::new();
/// stream.observe(&Event { id: Some("p1".into()), retry: Some(500), ..Event::default() });
/// let now = Instant::now();
/// assert_eq!(
///     stream.on_close(now),
///     Resume::At { at: now + Duration::from_millis(500), last_event_id: "p1".into() },
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resumption {
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

/// What to do when a stream closed before its response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resume {
    /// GET the endpoint with `Last-Event-ID: last_event_id` at `at`.
    At {
        /// When to reconnect.
        at: Instant,
        /// The id to resume after.
        last_event_id: String,
    },
    /// The stream gave no event id, so it cannot be resumed: what it carried is lost.
    Impossible,
}

impl Resumption {
    /// A stream that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes an event's id and `retry`.
    pub fn observe(&mut self, event: &Event) {
        if let Some(id) = &event.id {
            self.last_event_id = Some(id.clone());
        }
        if let Some(ms) = event.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
    }

    /// The last event id seen.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The wait before reconnecting: the last `retry` (within [`MIN_RETRY`] and
    /// [`MAX_RETRY`]), else [`DEFAULT_RETRY`].
    pub fn retry(&self) -> Duration {
        self.retry
            .map_or(DEFAULT_RETRY, |r| r.clamp(MIN_RETRY, MAX_RETRY))
    }

    /// The stream closed at `now` before its response: when and from where to resume.
    pub fn on_close(&self, now: Instant) -> Resume {
        match &self.last_event_id {
            Some(id) => Resume::At {
                at: now + self.retry(),
                last_event_id: id.clone(),
            },
            None => Resume::Impossible,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(retry: u64) -> Duration {
        let mut stream = Resumption::new();
        stream.observe(&Event {
            retry: Some(retry),
            ..Event::default()
        });
        stream.retry()
    }

    #[test]
    fn the_servers_retry_is_kept_within_100_ms_and_60_s() {
        assert_eq!(after(0), MIN_RETRY);
        assert_eq!(after(100), Duration::from_millis(100));
        assert_eq!(after(60_000), Duration::from_secs(60));
        assert_eq!(after(60_001), MAX_RETRY);
        assert_eq!(after(u64::MAX), MAX_RETRY);
        assert_eq!(Resumption::new().retry(), DEFAULT_RETRY);
    }
}
